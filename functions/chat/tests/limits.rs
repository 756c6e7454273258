//! Every model call counts, whatever becomes of the turn, through the real SDK clients, the local Bedrock server
//! and moto: a multi-agent batch whose third agent fails counts the first two agents' messages (and the third's
//! call when the model may have run it), and settles the round's reservation.

use std::sync::Arc;

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{Periods, UsageLedger, UsageSnapshot};
use chat_testing::harness::{self, Backend, OWNER, Reply};
use serde_json::json;

struct Harness {
    /// Kept for the test's length: the server stops when dropped.
    _bedrock: local_bedrock::LocalBedrock,
    store: DynamoStore,
    app: App<BedrockModel, DynamoStore>,
}

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
    let ledger: Arc<dyn UsageLedger> = Arc::new(backend.store.usage_ledger());
    let app = App::new(
        backend.model().await,
        backend.store.clone(),
        harness::auth(),
        backend.config.clone(),
    )
    .with_usage(Some(ledger));
    Harness {
        _bedrock: backend.bedrock,
        store: backend.store,
        app,
    }
}

impl Harness {
    async fn round(&self) -> Reply {
        let body = json!({"messages": [{"role": "user", "content": "Plan a login page"}]});
        let request = harness::json_request("POST", "/multi-agent-chat/batch", Some(&body));
        Reply::buffered(self.app.handle(request).await)
    }

    async fn usage(&self) -> UsageSnapshot {
        self.store
            .usage_ledger()
            .read(OWNER, &Periods::at(time::OffsetDateTime::now_utc()))
            .await
            .unwrap()
    }
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
    let reply = whole.round().await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let tokens = message_tokens(&reply);
    assert_eq!(tokens.len(), 3, "{}", reply.body);
    let first_two = tokens[0] + tokens[1];

    // The third agent's call is refused before the model runs it: the round fails, the first two are counted.
    let refused = harness("[[fault:validation]] Review.").await;
    let reply = refused.round().await;
    assert!(reply.status.as_u16() >= 400, "{}", reply.body);
    let usage = refused.usage().await;
    println!(
        "third agent refused: {} tokens counted, the first two messages spent {first_two}",
        usage.day.spent.tokens.total_tokens
    );
    assert_eq!(usage.day.spent.tokens.total_tokens, first_two);
    assert_eq!(usage.day.turns, 1);
    assert_eq!(usage.day.reserved.tokens, 0, "settled");

    // The third agent's call times out at the model, which may have run it whole: its prompt and its output cap
    // are counted beside the first two.
    let timed_out = harness("[[fault:model-timeout]] Review.").await;
    let reply = timed_out.round().await;
    assert!(reply.status.as_u16() >= 400, "{}", reply.body);
    let usage = timed_out.usage().await;
    println!(
        "third agent timed out: {} tokens counted, the first two messages spent {first_two}",
        usage.day.spent.tokens.total_tokens
    );
    assert!(
        usage.day.spent.tokens.total_tokens >= first_two + 200,
        "{usage:?}"
    );
    assert!(usage.day.spent.tokens.output_tokens >= 200, "{usage:?}");
    assert_eq!((usage.day.turns, usage.day.reserved.tokens), (1, 0));
}
