//! The log line each turn writes: its tokens, cache use and cost, never its words. A test binary of its own: tracing
//! caches per call site whether anyone listens, and a site first reached by another test's thread while this test
//! installs its subscriber can be cached as unheard (the line is then never written); here no other test runs.

use chat_core::{Caller, ChatService};
use chat_testing::{InMemoryStore, LogLines, Script, ScriptedModel, ask};
use serde_json::Value;

/// Log lines written while it is alive, as JSON objects: the subscriber is this thread's (a current-thread test).
struct CapturedLogs {
    lines: LogLines,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLogs {
    fn start() -> Self {
        let lines = LogLines::default();
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || sink.clone())
            .finish();
        Self {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn lines(&self) -> Vec<Value> {
        self.lines
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn each_turn_logs_its_tokens_cache_use_and_cost_and_never_its_words() {
    let logs = CapturedLogs::start();
    let model_id = "anthropic.claude-sonnet-4-5-20250929-v1:0";
    let settings = chat_testing::settings_for(model_id);
    let model = ScriptedModel::with([
        Script::text("first answer").cached_usage(100, 10, 0, 1000),
        Script::text("second answer").cached_usage(20, 10, 1000, 30),
    ]);
    let service = ChatService::new(model, InMemoryStore::new(), settings);
    let first = service
        .answer(&Caller::owner("alice"), &ask("one secret question", None))
        .await
        .unwrap();
    let chat = first.session_state.clone().unwrap();
    service
        .answer(
            &Caller::owner("alice"),
            &ask("two secret question", chat.as_str()),
        )
        .await
        .unwrap();
    let lines = logs.lines();
    let turns: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "turn cost")
        .collect();
    assert_eq!(turns.len(), 2, "{lines:?}");
    let second = turns[1];
    assert_eq!(second["chat_id"], chat);
    assert_eq!(second["input_tokens"], 20);
    assert_eq!(second["output_tokens"], 10);
    assert_eq!(second["cache_read_input_tokens"], 1000);
    assert_eq!(second["cache_write_input_tokens"], 30);
    // Sonnet 4.5's list prices: 20×3 + 10×15 + 1000×0.3 + 30×3.75 = 622.5 per million.
    let cost = second["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.0006225).abs() < 1e-9, "{second}");
    // Sizes and counts only: no line holds a word of the conversation.
    let text = serde_json::to_string(&lines).unwrap();
    for words in ["secret question", "first answer", "second answer"] {
        assert!(!text.contains(words), "{words}: {text}");
    }
}
