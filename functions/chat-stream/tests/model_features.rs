//! Today's Bedrock features through the streaming function, the real SDK clients, the local Bedrock server and
//! moto: a long chat within its prompt budget with flat DynamoDB reads, streamed reasoning, prompt caching and
//! cost, guardrail grounding and its trace, latency and tier.

use chat_core::{ChatMode, SessionStore};
use chat_stream::App;
use chat_testing::harness::{self, Backend, Streamed};
use chat_testing::short_words;
use serde_json::{Value, json};

type Function = App<chat_aws::BedrockModel, chat_aws::DynamoStore>;

/// A Claude model id as an inference profile: the local Bedrock server answers any id, and the backend takes the
/// profile's features (budget reasoning, prompt caching, list prices) from it.
const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

async fn function(env: &[(&str, &str)]) -> (Function, &'static Backend) {
    let env = [&[("MODEL_ID", CLAUDE)], env].concat();
    let backend: &'static Backend = Box::leak(Box::new(Backend::start(&env).await));
    let app = backend.app(App::new).await;
    (app, backend)
}

async fn stream(app: &Function, body: Value) -> Streamed {
    Streamed::read(
        app.handle(harness::json_request("POST", "/chat/stream", Some(&body)))
            .await,
    )
    .await
}

/// A question with `overrides`, which `app` refuses with a 400 naming the override `field`.
async fn refused(app: &Function, overrides: Value, field: &str) {
    let s = stream(app, asked("q", overrides)).await;
    assert_eq!(s.status, 400);
    let text = s.text();
    assert!(
        text.contains(&format!("context.overrides.{field}")),
        "{text}"
    );
}

/// A user's `text` with `overrides`.
fn asked(text: &str, overrides: Value) -> Value {
    json!({"messages": [{"role": "user", "content": text}], "context": {"overrides": overrides}})
}

/// A thought's description.
fn described(thought: &Value) -> &str {
    thought["description"].as_str().unwrap()
}

/// The token usage thought of a streamed answer's last line.
fn token_usage(lines: &[Value]) -> &Value {
    thought(&lines.last().unwrap()["context"], "Token usage").unwrap()
}

fn thought<'a>(context: &'a Value, title: &str) -> Option<&'a Value> {
    context["thoughts"]
        .as_array()?
        .iter()
        .find(|t| t["title"] == title)
}

#[tokio::test]
async fn a_300_turn_chat_stays_within_its_prompt_budget_and_reads_flat() {
    const BUDGET: u64 = 300;
    let (app, backend) = function(&[("MAX_PROMPT_TOKENS", "300")]).await;
    let mut chat: Option<String> = None;
    let mut figures = Vec::new();
    let mut reads = Vec::new();
    for turn in 1..=300u64 {
        let mut body = json!({"messages": [{"role": "user", "content": format!("Question number {turn}: what comes next in the series?")}]});
        if let Some(id) = &chat {
            body["sessionState"] = json!(id);
        }
        let s = stream(&app, body).await;
        assert_eq!(s.status, 200, "turn {turn}: {}", s.text());
        let lines = s.lines();
        assert!(
            lines.last().unwrap().get("error").is_none(),
            "turn {turn}: {:?}",
            lines.last()
        );
        chat = lines[0]["sessionState"].as_str().map(str::to_string);
        assert!(
            s.content()
                .starts_with(&format!("Echo: Question number {turn}:")),
            "turn {turn}: {}",
            s.content()
        );
        // What the model was sent, as the local server counts it (a token a word): under the budget.
        let end = &lines.last().unwrap()["context"];
        let usage = &thought(end, "Token usage").unwrap()["props"];
        let prompt = usage["input_tokens"].as_u64().unwrap()
            + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
            + usage["cache_write_input_tokens"].as_u64().unwrap_or(0);
        assert!(prompt <= BUDGET, "turn {turn}: {prompt} prompt tokens");
        if turn > 1 {
            let prompt_thought =
                thought(&lines[0]["context"], "Prompt to generate answer").unwrap();
            let history = &prompt_thought["props"];
            let sent = prompt_thought["description"].as_array().unwrap().len() as u64 - 1;
            let left_out = history["messages_left_out"].as_u64().unwrap();
            // Every earlier message is either sent or said to be left out.
            assert_eq!(sent + left_out, 2 * turn - 1, "turn {turn}: {history}");
            assert!(history["estimated_prompt_tokens"].as_u64().unwrap() <= BUDGET);
            if left_out > 0 {
                let said = thought(&lines[0]["context"], "Conversation history").unwrap();
                assert_eq!(said["props"]["messages_left_out"], left_out);
            }
            figures.push((
                turn,
                sent,
                left_out,
                history["store_items_read"].as_u64().unwrap(),
                prompt,
            ));
            reads.push(usage["cache_read_input_tokens"].as_u64().unwrap_or(0));
        }
    }
    for (turn, sent, left_out, items, prompt) in &figures {
        if [10, 100, 300].contains(turn) {
            println!(
                "turn {turn}: {sent} messages sent, {left_out} left out, {items} DynamoDB items read, {prompt} prompt tokens"
            );
        }
    }
    let at = |t: u64| figures.iter().find(|f| f.0 == t).unwrap();
    // The budget is full by turn 10: from there on, a turn reads about as many items as it sends.
    assert!(at(10).2 > 0, "{:?}", at(10));
    let items: Vec<u64> = [10, 100, 300].iter().map(|t| at(*t).3).collect();
    assert!(
        items.iter().max().unwrap() - items.iter().min().unwrap() <= 3,
        "items read per turn at turns 10, 100, 300: {items:?}"
    );
    assert!(at(300).3 <= 2 * at(300).1 + 20, "{:?}", at(300));
    // The cut moves in steps, so most turns read the conversation so far from the prompt cache, not only the system
    // prompt (9 tokens).
    let history_hits = reads[20..].iter().filter(|r| **r > 9).count();
    println!(
        "turns 22 to 300: {history_hits} of {} read earlier messages from the prompt cache",
        reads.len() - 20
    );
    assert!(history_hits * 2 > reads.len() - 20, "{reads:?}");
    // The whole history stays stored, and listed.
    let (record, messages) = backend
        .store
        .load(harness::OWNER, chat.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(record.message_count, 600);
    assert_eq!(messages.len(), 600);
    assert_eq!(
        messages[0].content,
        "Question number 1: what comes next in the series?"
    );
}

#[tokio::test]
async fn reasoning_lines_come_before_the_answer_and_are_not_stored() {
    let (app, backend) = function(&[]).await;
    for version in ["2024-05-29", "2024-01-28"] {
        let mut body = json!({
            "messages": [{"role": "user", "content": "Why is the sky blue? [[redacted-reasoning]]"}],
            "context": {"overrides": {"reasoning_effort": "high", "temperature": 0.2}},
        });
        if version == "2024-01-28" {
            body["stream"] = json!(true);
        }
        let s = stream(&app, body).await;
        assert_eq!(s.status, 200, "{}", s.text());
        let lines = s.lines();
        let choice = |l: &Value| {
            if version == "2024-01-28" {
                l["choices"][0].clone()
            } else {
                l.clone()
            }
        };
        let is_reasoning = |l: &Value| {
            thought(&choice(l)["context"], "Reasoning").is_some_and(|t| t["props"]["delta"] == true)
        };
        let first_text = lines
            .iter()
            .position(|l| choice(l)["delta"]["content"].is_string())
            .unwrap();
        let reasoning: Vec<&Value> = lines.iter().filter(|l| is_reasoning(l)).collect();
        assert!(reasoning.len() > 5, "{version}: {lines:?}");
        assert!(
            lines.iter().rposition(is_reasoning).unwrap() < first_text,
            "{version}: every reasoning line before the answer's first delta"
        );
        // No reasoning line carries answer text.
        assert!(
            reasoning
                .iter()
                .all(|l| !choice(l)["delta"]["content"].is_string())
        );
        let pieces: String = reasoning
            .iter()
            .map(|l| {
                thought(&choice(l)["context"], "Reasoning").unwrap()["description"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        // Claude 4.5 takes a thinking budget: high is 16,384 tokens.
        assert_eq!(
            pieces,
            format!(
                "Reasoning (budget 16384): the question is: Why is the sky blue?\n\n{}",
                chat_core::REDACTED
            )
        );
        assert_eq!(
            reasoning.last().map(
                |l| thought(&choice(l)["context"], "Reasoning").unwrap()["props"]["redacted"]
                    .clone()
            ),
            Some(json!(true))
        );
        let answer: String = lines
            .iter()
            .filter_map(|l| choice(l)["delta"]["content"].as_str().map(str::to_string))
            .collect();
        assert_eq!(answer, "Echo: Why is the sky blue?");
        // The end's thoughts hold the whole reasoning again.
        let end = choice(lines.last().unwrap());
        let whole = thought(&end["context"], "Reasoning").unwrap();
        assert!(described(whole).starts_with("Reasoning (budget 16384)"));
        // The model was asked to think, within max_tokens and without a temperature.
        let request = backend.last_model_request();
        assert_eq!(
            request["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": 16384}})
        );
        assert_eq!(request["inferenceConfig"]["maxTokens"], 1024 + 16384);
        assert!(request["inferenceConfig"].get("temperature").is_none());
        // Only the answer is stored.
        let id = choice(&lines[0])["sessionState"]
            .as_str()
            .or(choice(&lines[0])["session_state"].as_str())
            .unwrap()
            .to_string();
        let stored = harness::history(&backend.store, &id).await;
        assert_eq!(stored[1].1, "Echo: Why is the sky blue?");
    }
    // A model that cannot be asked to reason refuses the override.
    let (nova, _) = function(&[("MODEL_ID", "amazon.nova-lite-v1:0")]).await;
    refused(
        &nova,
        json!({"reasoning_effort": "low"}),
        "reasoning_effort",
    )
    .await;
}

#[tokio::test]
async fn the_second_turn_reads_the_prompt_cache_and_its_cost_is_in_thoughts_and_the_chats_totals() {
    let (app, backend) = function(&[]).await;
    let first = stream(
        &app,
        json!({"messages": [{"role": "user", "content": "Tell me about prompt caching, please."}]}),
    )
    .await;
    let first_lines = first.lines();
    let id = first_lines[0]["sessionState"].as_str().unwrap().to_string();
    let first_usage = token_usage(&first_lines)["props"].clone();
    let second = stream(
        &app,
        json!({"messages": [{"role": "user", "content": "And what does it cost?"}], "sessionState": id}),
    )
    .await;
    let lines = second.lines();
    let usage = token_usage(&lines);
    let props = &usage["props"];
    // The system prompt was written on the first turn and is read on the second; the first turn's exchange is
    // written now.
    let read = props["cache_read_input_tokens"].as_u64().unwrap();
    let written = props["cache_write_input_tokens"].as_u64().unwrap();
    assert_eq!(
        read,
        first_usage["cache_write_input_tokens"].as_u64().unwrap(),
        "{props}"
    );
    assert!(read > 0 && written > 0, "{props}");
    // Sonnet 4.5's list prices: $3, $15, $0.30 and $3.75 a million.
    let expected = (props["input_tokens"].as_u64().unwrap() as f64 * 3.0
        + props["output_tokens"].as_u64().unwrap() as f64 * 15.0
        + read as f64 * 0.3
        + written as f64 * 3.75)
        / 1e6;
    let cost = props["cost_usd"].as_f64().unwrap();
    assert!((cost - expected).abs() < 1e-9, "{cost} {expected}");
    assert!(described(usage).contains("read from the prompt cache"));
    // The request carried the cache points: after the system prompt, and before the newest question.
    let request = backend.last_model_request();
    assert_eq!(
        request["system"][1],
        json!({"cachePoint": {"type": "default"}})
    );
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(
        messages[messages.len() - 2]["content"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        &json!({"cachePoint": {"type": "default"}})
    );
    // The chat's totals: both turns, as the history list shows them.
    let listed = backend
        .store
        .list(
            harness::OWNER,
            chat_core::ListRequest::first(ChatMode::Standard, 10),
        )
        .await
        .unwrap();
    let item =
        serde_json::to_value(chat_protocol::chat_ui::summary(&listed.items[0], false)).unwrap();
    let first_cost = first_usage["cost_usd"].as_f64().unwrap();
    assert!(
        (item["usage"]["costUsd"].as_f64().unwrap() - (first_cost + cost)).abs() < 1e-9,
        "{item}"
    );
    assert_eq!(
        item["usage"]["cacheReadInputTokens"].as_u64().unwrap(),
        read + first_usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
    );
}

#[tokio::test]
async fn a_guardrail_checks_grounding_its_trace_is_a_thought_and_an_ungrounded_answer_is_filtered()
{
    let env = [
        ("KNOWLEDGE_BASE_ID", harness::KNOWLEDGE_BASE_ID),
        ("GUARDRAIL_ID", "gr-local"),
        ("GUARDRAIL_VERSION", "1"),
    ];
    let backend: &'static Backend = Box::leak(Box::new(
        Backend::start(&[&[("MODEL_ID", CLAUDE)], &env[..]].concat()).await,
    ));
    let (kb, retriever) = harness::knowledge_base(&backend.config).await;
    Box::leak(Box::new(kb));
    let app = backend.app(App::new).await.with_retriever(Some(retriever));
    let grounded = stream(
        &app,
        json!({"messages": [{"role": "user", "content": "Which plans may employees choose?"}]}),
    )
    .await;
    assert_eq!(grounded.status, 200, "{}", grounded.text());
    let lines = grounded.lines();
    let end = &lines.last().unwrap()["context"];
    let trace = thought(end, "Guardrail assessment").unwrap_or_else(|| panic!("{end}"));
    assert_eq!(trace["props"]["intervened"], false, "{trace}");
    let findings = trace["props"]["findings"].as_array().unwrap();
    let grounding = findings
        .iter()
        .find(|f| f["type"] == "GROUNDING")
        .unwrap_or_else(|| panic!("{trace}"));
    assert_eq!(grounding["action"], "NONE");
    assert_eq!(grounding["threshold"], 0.5);
    assert!(grounding["score"].as_f64().unwrap() >= 0.5, "{trace}");
    // The passages went as the guardrail's grounding source, the question as its query.
    let request = backend.last_model_request();
    let content = request["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let guarded: Vec<&Value> = content
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b.get("guardContent"))
        .collect();
    assert_eq!(guarded[0]["text"]["qualifiers"], json!(["query"]));
    assert_eq!(
        guarded[0]["text"]["text"],
        "Which plans may employees choose?"
    );
    assert_eq!(
        guarded[1]["text"]["qualifiers"],
        json!(["grounding_source"])
    );
    assert!(
        guarded[1]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("Sources:")
    );
    assert_eq!(request["guardrailConfig"]["trace"], "enabled");
    // An answer the sources do not hold: before the stream, the content-filter 400 (buffered, 2024-01-28)...
    let ungrounded =
        "Which plans may employees choose? [[say:Bananas are a yellow fruit from the tropics.]]";
    let buffered = Streamed::read(
        app.handle(harness::json_request(
            "POST",
            "/chat/stream",
            Some(&json!({"messages": [{"role": "user", "content": ungrounded}], "stream": false})),
        ))
        .await,
    )
    .await;
    assert_eq!(buffered.status, 400, "{}", buffered.text());
    assert!(
        buffered.text().contains("content filter"),
        "{}",
        buffered.text()
    );
    // ... and during a stream, its error line, with nothing stored.
    let before = harness::chat_count(&backend.store, ChatMode::Standard).await;
    let streamed = stream(
        &app,
        json!({"messages": [{"role": "user", "content": ungrounded}]}),
    )
    .await;
    let lines = streamed.lines();
    assert!(
        lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("content filter"),
        "{lines:?}"
    );
    assert_eq!(
        harness::chat_count(&backend.store, ChatMode::Standard).await,
        before
    );
}

#[tokio::test]
async fn latency_and_tier_are_sent_when_allowed_and_the_served_values_are_shown() {
    let (app, backend) = function(&[
        ("ALLOWED_LATENCIES", "standard,optimized"),
        ("SERVICE_TIER", "flex"),
    ])
    .await;
    let s = stream(&app, asked("fast please", json!({"latency": "optimized"}))).await;
    assert_eq!(s.status, 200, "{}", s.text());
    let request = backend.last_model_request();
    assert_eq!(
        request["performanceConfig"],
        json!({"latency": "optimized"})
    );
    assert_eq!(request["serviceTier"], json!({"type": "flex"}));
    let lines = s.lines();
    let usage = token_usage(&lines);
    assert_eq!(usage["props"]["latency"], "optimized");
    assert_eq!(usage["props"]["service_tier"], "flex");
    // A tier the configuration does not allow is refused before the model is asked.
    let calls = backend.bedrock.requests().len();
    refused(&app, json!({"service_tier": "priority"}), "service_tier").await;
    assert_eq!(backend.bedrock.requests().len(), calls);
    // An application inference profile's ARN as the model id, with its base model named.
    let (arn, arn_backend) = function(&[
        (
            "MODEL_ID",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
        ),
        ("BASE_MODEL_ID", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ])
    .await;
    let s = stream(&arn, asked("hello", json!({"reasoning_effort": "low"}))).await;
    assert_eq!(s.status, 200, "{}", s.text());
    let recorded = arn_backend.bedrock.requests();
    assert_eq!(
        recorded.last().unwrap().model_id,
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    );
}

/// What each turn of a 25-turn chat of [`short_words`] sent the model (its input tokens, cache reads and writes
/// included, as the usage thought says) and what the prompt thought says was counted.
async fn short_word_chat(app: &Function) -> Vec<(u64, Option<u64>)> {
    let mut chat: Option<String> = None;
    let mut turns = Vec::new();
    for turn in 0..25 {
        let mut body = json!({"messages": [{"role": "user", "content": short_words(turn)}]});
        if let Some(id) = &chat {
            body["sessionState"] = json!(id);
        }
        let s = stream(app, body).await;
        assert_eq!(s.status, 200, "turn {turn}: {}", s.text());
        let lines = s.lines();
        let end = lines.last().unwrap();
        assert!(end.get("error").is_none(), "turn {turn}: {end}");
        chat = lines[0]["sessionState"].as_str().map(str::to_string);
        let usage = &thought(&end["context"], "Token usage").unwrap()["props"];
        let prompt = usage["input_tokens"].as_u64().unwrap()
            + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
            + usage["cache_write_input_tokens"].as_u64().unwrap_or(0);
        let counted = thought(&lines[0]["context"], "Prompt to generate answer").unwrap()["props"]
            ["counted_prompt_tokens"]
            .as_u64();
        turns.push((prompt, counted));
    }
    turns
}

fn counts(backend: &Backend) -> Vec<String> {
    backend
        .bedrock
        .requests()
        .into_iter()
        .filter(|r| r.operation == local_bedrock::Operation::CountTokens)
        .map(|r| r.model_id)
        .collect()
}

#[tokio::test]
async fn a_prompt_the_estimate_under_counts_is_counted_by_bedrock_and_kept_within_the_budget() {
    const BUDGET: u64 = 300;
    // Without the count, the estimate lets the prompt grow past the budget: the case is real.
    let (app, backend) = function(&[("MAX_PROMPT_TOKENS", "300"), ("COUNT_TOKENS", "off")]).await;
    let uncounted = short_word_chat(&app).await;
    let over = uncounted.iter().filter(|(p, _)| *p > BUDGET).count();
    assert!(over >= 3, "{uncounted:?}");
    assert!(counts(backend).is_empty());

    // Counted (the default for Claude), every prompt stays within the budget, and the count is what the model took.
    let (app, backend) = function(&[("MAX_PROMPT_TOKENS", "300")]).await;
    let counted = short_word_chat(&app).await;
    for (turn, (prompt, count)) in counted.iter().enumerate() {
        assert!(*prompt <= BUDGET, "turn {turn}: {prompt} prompt tokens");
        if let Some(count) = count {
            assert_eq!(count, prompt, "turn {turn}");
        }
    }
    assert!(
        counted.iter().filter(|(_, c)| c.is_some()).count() > 15,
        "{counted:?}"
    );
    // Counted by the profile's foundation model: CountTokens takes no inference profile.
    let models = counts(backend);
    assert!(
        models
            .iter()
            .all(|m| m == "anthropic.claude-sonnet-4-5-20250929-v1:0"),
        "{models:?}"
    );
    println!(
        "25 turns of short words, budget {BUDGET}: estimated only, {over} prompts over it (largest {}); counted, \
         largest {} in {} counts",
        uncounted.iter().map(|t| t.0).max().unwrap(),
        counted.iter().map(|t| t.0).max().unwrap(),
        models.len()
    );

    // A model Bedrock cannot count for is asked once; then the estimate decides, and every turn still answers.
    let (app, backend) = function(&[
        ("MODEL_ID", "us.amazon.nova-pro-v1:0"),
        ("MAX_PROMPT_TOKENS", "300"),
        ("COUNT_TOKENS", "on"),
    ])
    .await;
    let nova = short_word_chat(&app).await;
    assert!(nova.iter().all(|(_, c)| c.is_none()), "{nova:?}");
    assert_eq!(counts(backend), ["amazon.nova-pro-v1:0"]);
}
