//! Every model call counts, whatever becomes of the turn, through the real SDK clients, the local Bedrock server
//! and moto: a multi-agent batch whose third agent fails counts the first two agents' messages (and the third's
//! call when the model may have run it), and settles the round's reservation.

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::UsageSnapshot;
use chat_testing::harness::{self, Backend, Reply, Wired};
use serde_json::json;

type Harness = Wired<App<BedrockModel, DynamoStore>>;

/// The function counting in the table it stores chats in, with three agents, the third instructed `third`.
async fn harness(third: &str) -> Harness {
    let agents = json!([
        {"name": "Analyst", "instructions": "Analyse."},
        {"name": "Engineer", "instructions": "Build."},
        {"name": "Owner", "instructions": third},
    ])
    .to_string();
    let backend = Backend::start(&[
        ("AGENTS", agents.as_str()),
        ("MAX_AGENT_TURNS", "3"),
        ("MAX_PROMPT_TOKENS", "2000"),
        ("MAX_TOKENS", "200"),
    ])
    .await;
    let ledger = backend.ledger();
    let counting = |m, s, a, c| App::new(m, s, a, c).with_usage(Some(ledger));
    backend.wired(counting).await
}

/// A multi-agent round asked to plan a login page, answered whole.
async fn round(h: &Harness) -> Reply {
    let body = json!({"messages": [{"role": "user", "content": "Plan a login page"}]});
    let request = harness::json_request("POST", "/multi-agent-chat/batch", Some(&body));
    Reply::buffered(h.app.handle(request).await)
}

/// A round whose third agent, instructed `third`, fails (`what` it did): the counters after it.
async fn failed_round(third: &str, what: &str, first_two: u64) -> UsageSnapshot {
    let h = harness(third).await;
    let reply = round(&h).await;
    assert!(reply.status.as_u16() >= 400, "{}", reply.body);
    let usage = harness::usage_now(&h.store).await;
    println!(
        "third agent {what}: {} tokens counted, the first two messages spent {first_two}",
        usage.day.spent.tokens.total_tokens
    );
    usage
}

/// Each agent message's total tokens, as a round answered whole reports them.
fn message_tokens(reply: &Reply) -> Vec<u64> {
    reply
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["AuthorName"].is_string())
        .map(|m| m["Metadata"]["Usage"]["TotalTokenCount"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_multi_agent_batch_whose_third_agent_fails_counts_the_first_two() {
    // The same round with a third agent that answers: what the first two messages spend (their prompts are the same).
    let whole = harness("Review.").await;
    let reply = round(&whole).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let tokens = message_tokens(&reply);
    assert_eq!(tokens.len(), 3, "{}", reply.body);
    let first_two = tokens[0] + tokens[1];

    // The third agent's call is refused before the model runs it: the round fails, the first two are counted.
    let usage = failed_round("[[fault:validation]] Review.", "refused", first_two).await;
    assert_eq!(usage.day.spent.tokens.total_tokens, first_two);
    assert_eq!(usage.day.turns, 1);
    assert_eq!(usage.day.reserved.tokens, 0, "settled");

    // The third agent's call times out at the model, which may have run it whole: its prompt and its output cap
    // are counted beside the first two.
    let usage = failed_round("[[fault:model-timeout]] Review.", "timed out", first_two).await;
    assert!(
        usage.day.spent.tokens.total_tokens >= first_two + 200,
        "{usage:?}"
    );
    assert!(usage.day.spent.tokens.output_tokens >= 200, "{usage:?}");
    assert_eq!((usage.day.turns, usage.day.reserved.tokens), (1, 0));
}
