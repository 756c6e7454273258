//! What each model route costs in DynamoDB calls, counted by a proxy in front of moto that logs every request the
//! real SDK client makes, per configuration (no limit, the defaults; a rate limit; a quota), on both functions: the
//! buffered one (each answer written whole) and the streaming one, whose first byte is read before the rest so that
//! the calls made before it are known. With no limit in force nothing is written before the model is called: a turn
//! is one write, after its answer (with its chat's, in the same transaction, on the protocol routes). Under a limit
//! its admission is the one write before. A turn whose client leaves is recorded all the same. The table in
//! docs/architecture.md ("DynamoDB calls per request") is this test's.

use std::sync::Arc;

use chat_app::{Buffered, ChatApp, Streamed};
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{ResponseStore, StoreTimeouts, UsageLedger};
use chat_testing::harness::{self, Backend, ECHO_MODEL};
use http_body_util::BodyExt;
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::FaultProxy;
use serde_json::{Value, json};

/// The two chat functions, both reaching the table through one counting proxy.
struct Functions {
    buffered: ChatApp<BedrockModel, DynamoStore, Buffered>,
    streaming: ChatApp<BedrockModel, DynamoStore, Streamed>,
    proxy: FaultProxy,
    /// The same table, reached directly: what a test reads there is not counted.
    direct: DynamoStore,
    _bedrock: LocalBedrock,
}

/// Both functions configured with `env`, counting usage in the table they store chats in (as their cold start
/// builds them), every DynamoDB call going through a proxy that logs it.
async fn functions(env: &[(&str, &str)]) -> Functions {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    let store = DynamoStore::from_config(&sdk, &table, None, StoreTimeouts::default());
    let backend = Backend {
        bedrock: LocalBedrock::start().await.unwrap(),
        store,
        config: harness::config(env),
    };
    let ledger = backend.ledger();
    let buffered = backend
        .app(|m, s, a, c| {
            let kept: Arc<dyn ResponseStore> = Arc::new(s.clone());
            ChatApp::<_, _, Buffered>::new(m, s, a, c)
                .with_usage(Some(ledger.clone()))
                .with_responses(Some(kept))
        })
        .await;
    let sdk = backend.bedrock.sdk_config().await;
    let streaming = backend
        .app(|m, s, a, c| {
            let kept: Arc<dyn ResponseStore> = Arc::new(s.clone());
            let embedder = chat_aws::BedrockEmbedder::new(&sdk, c.model_timeout);
            ChatApp::<_, _, Streamed>::new(m, s, a, c)
                .with_usage(Some(ledger.clone()))
                .with_responses(Some(kept))
                .with_embedder(Some(Arc::new(embedder)))
        })
        .await;
    Functions {
        buffered,
        streaming,
        proxy,
        direct: DynamoStore::new(client, table, None),
        _bedrock: backend.bedrock,
    }
}

/// The DynamoDB calls of one request: those made before its first byte reached the client, then those after.
#[derive(Debug, PartialEq, Eq)]
struct Calls {
    before: Vec<String>,
    after: Vec<String>,
}

impl Calls {
    /// Calls before the first byte, and in all.
    fn counts(&self) -> (usize, usize) {
        (self.before.len(), self.before.len() + self.after.len())
    }

    fn all(&self) -> String {
        let mut before = self.before.clone();
        // Calls made at once (an admission and the chat's read) come in either order.
        before.sort();
        [before, self.after.clone()].concat().join(" ")
    }
}

/// `body` posted to `path` of the streaming function (`streamed`) or the buffered one: the calls it made (before
/// the first byte and after), and its body.
async fn post(f: &Functions, path: &str, body: &Value, streamed: bool) -> (Calls, String) {
    let start = f.proxy.operations().len();
    let request = harness::json_request("POST", path, Some(body));
    let response = if streamed {
        f.streaming.handle(request).await
    } else {
        f.buffered.handle(request).await
    };
    assert_eq!(response.status(), 200, "{path}");
    let mut body = response.into_body();
    let mut text = Vec::new();
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let data = frame.unwrap().into_data().unwrap_or_default();
        if first.is_none() && !data.is_empty() {
            first = Some(f.proxy.operations().len());
        }
        text.extend_from_slice(&data);
    }
    let ops = f.proxy.operations();
    let first = first.expect("a body");
    let calls = Calls {
        before: ops[start..first].to_vec(),
        after: ops[first..].to_vec(),
    };
    (calls, String::from_utf8(text).unwrap())
}

fn protocol(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// The request of each dialect route: `stream` as asked, nothing kept.
fn dialects(stream: bool) -> [(&'static str, Value); 3] {
    [
        (
            "/v1/chat/completions",
            json!({"model": ECHO_MODEL, "stream": stream,
                   "messages": [{"role": "user", "content": "hello"}]}),
        ),
        (
            "/v1/messages",
            json!({"model": ECHO_MODEL, "max_tokens": 100, "stream": stream,
                   "messages": [{"role": "user", "content": "hello"}]}),
        ),
        (
            "/v1/responses",
            json!({"model": ECHO_MODEL, "input": "hello", "store": false, "stream": stream}),
        ),
    ]
}

/// Every route of both functions in `f`, buffered and streamed, a protocol chat new and continued: each row the
/// route, how it was delivered, and its calls.
async fn every_route(f: &Functions) -> Vec<(String, Calls)> {
    let mut rows = Vec::new();
    for (path, streamed) in [("/chat", false), ("/chat/stream", true)] {
        let (calls, body) = post(f, path, &protocol("hello"), streamed).await;
        let chat_id = if streamed {
            let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
            first["sessionState"].as_str().unwrap().to_string()
        } else {
            let whole: Value = serde_json::from_str(&body).unwrap();
            whole["sessionState"].as_str().unwrap().to_string()
        };
        rows.push((format!("{path} (a new chat)"), calls));
        let again =
            json!({"messages": [{"role": "user", "content": "again"}], "sessionState": chat_id});
        let (calls, _) = post(f, path, &again, streamed).await;
        rows.push((format!("{path} (a chat continued)"), calls));
    }
    for streamed in [false, true] {
        for (path, body) in dialects(streamed) {
            let how = if streamed { "streamed" } else { "buffered" };
            let (calls, _) = post(f, path, &body, streamed).await;
            rows.push((format!("{path} ({how})"), calls));
        }
    }
    let round = protocol("[[deltas:3]] plan it");
    let (calls, _) = post(f, "/multi-agent-chat/batch", &round, false).await;
    rows.push(("/multi-agent-chat/batch (a new chat)".into(), calls));
    let (calls, _) = post(f, "/multi-agent-chat/stream", &round, true).await;
    rows.push(("/multi-agent-chat/stream (a new chat)".into(), calls));
    let embedding = json!({"input": "hello", "model": "amazon.titan-embed-text-v2:0"});
    // Answered whole by the streaming function.
    let (calls, _) = post(f, "/v1/embeddings", &embedding, true).await;
    rows.push(("/v1/embeddings (whole)".into(), calls));
    rows
}

/// Prints `rows` as the table's lines for `configuration`.
/// Every route's calls on both functions configured with `env` (`configuration`, as the table names it), printed.
async fn routes_under(configuration: &str, env: &[(&str, &str)]) -> Vec<(String, Calls)> {
    let f = functions(env).await;
    let rows = every_route(&f).await;
    print(configuration, &rows);
    rows
}

/// The calls a turn on `route` makes in all: the continued chat's read (`Query`) where there is one, then `writes`
/// writes.
fn expected(route: &str, writes: usize) -> String {
    let read = route.contains("continued").then_some("Query");
    read.into_iter()
        .chain(std::iter::repeat_n("TransactWriteItems", writes))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print(configuration: &str, rows: &[(String, Calls)]) {
    for (route, calls) in rows {
        let (before, all) = calls.counts();
        println!(
            "| {route} | {configuration} | {all} ({}) | {before} |",
            calls.all()
        );
    }
}

/// With no limit in force (the defaults), no route writes before its model call: a buffered answer's calls are all
/// after it, and a streamed one's first byte goes out before any write (a continued chat reads it first, one
/// `Query`). Each turn is then one write: the chat's transaction, which records its usage too, or the usage's own
/// record where nothing is stored.
#[tokio::test]
async fn with_no_limit_nothing_is_written_before_the_model_and_a_turn_is_one_write() {
    for (route, calls) in &routes_under("no limit", &[]).await {
        let continued = route.contains("continued");
        assert_eq!(calls.all(), expected(route, 1), "{route}");
        if route.contains("stream") {
            assert_eq!(
                calls.before,
                if continued { vec!["Query"] } else { vec![] },
                "{route}: nothing written before the first byte"
            );
        }
    }
}

/// Whether `route`'s turn here stores a chat (the protocol's chat routes; the multi-agent rounds here are not kept,
/// as their calls with no limit show: one write): its last settlement then goes in the chat's own transaction.
fn stores_a_chat(route: &str) -> bool {
    route.starts_with("/chat")
}

/// The calls a turn on `route` makes under a limit, by name (those made at once in either order, as
/// [`Calls::all`] sorts them): the first turn of a user on an instance reads their limits and ledger
/// (`BatchGetItem`); the admission is one `UpdateItem` of the user's ledger (made while a continued chat is read,
/// its `Query`); the settlement goes in the chat's `TransactWriteItems` where a chat is stored, else it is one
/// `UpdateItem` of its own.
fn expected_under_a_limit(route: &str, first: bool) -> Calls {
    let mut before = vec!["UpdateItem".to_string()];
    if first {
        before.push("BatchGetItem".into());
    }
    if route.contains("continued") {
        before.push("Query".into());
    }
    let settlement = if stores_a_chat(route) {
        "TransactWriteItems"
    } else {
        "UpdateItem"
    };
    Calls {
        before,
        after: vec![settlement.to_string()],
    }
}

/// Under a limit (a rate limit, or a quota), a turn is admitted before its model call in one write, one
/// `UpdateItem` of the user's ledger (made while a continued chat is read), and settled after in one: with its
/// chat's transaction where the chat is stored, else one `UpdateItem`. The first turn of a user on an instance
/// reads their limits and ledger first, one `BatchGetItem` (again each minute, and after a refusal).
#[tokio::test]
async fn under_a_limit_a_turn_is_admitted_in_one_write_and_settled_in_one() {
    for (configuration, env) in [
        ("a rate limit", ("RATE_LIMIT_PER_MINUTE", "1000")),
        ("a quota", ("QUOTA_TOKENS_PER_DAY", "100000000")),
    ] {
        for (i, (route, calls)) in routes_under(configuration, &[env]).await.iter().enumerate() {
            let expected = expected_under_a_limit(route, i == 0);
            let streamed = route.contains("stream") && !route.contains("embeddings");
            let mut all = [expected.before.clone(), expected.after.clone()].concat();
            let mut made = [calls.before.clone(), calls.after.clone()].concat();
            all.sort();
            made.sort();
            assert_eq!(made, all, "{configuration}: {route}: the calls by name");
            if streamed {
                let mut before = calls.before.clone();
                before.sort();
                let mut wanted = expected.before.clone();
                wanted.sort();
                assert_eq!(
                    before, wanted,
                    "{configuration}: {route}: the admission (and a continued chat's read) before the first byte"
                );
                assert_eq!(
                    calls.after, expected.after,
                    "{configuration}: {route}: the settlement after"
                );
            }
        }
    }
}

/// With no limit in force, a streamed turn whose client leaves mid-answer (the process living on) is still recorded,
/// once: its request, what it spent so far and the turn, in one write after the client left, and nothing before
/// the first byte.
#[tokio::test]
async fn with_no_limit_a_stream_whose_client_leaves_is_recorded_once() {
    let f = functions(&[]).await;
    let start = f.proxy.operations().len();
    let ask = protocol("[[deltas:100]] [[delay-ms:50]] a long answer");
    let request = harness::json_request("POST", "/chat/stream", Some(&ask));
    let response = f.streaming.handle(request).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut read = String::new();
    while !read.contains("w2") {
        let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
        read.push_str(std::str::from_utf8(&data).unwrap());
    }
    assert_eq!(
        f.proxy.operations().len(),
        start,
        "nothing written while the answer streams"
    );
    drop(body);
    // The writer finds its client gone at its next line, stops the model and records the turn.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.proxy.operations().len() == start {
        assert!(
            std::time::Instant::now() < deadline,
            "the turn was never recorded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(f.proxy.operations()[start..], ["TransactWriteItems"]);
    let periods = chat_core::Periods::at(time::OffsetDateTime::now_utc());
    let ledger = f.direct.usage_ledger();
    let usage = ledger.read(harness::OWNER, &periods).await.unwrap();
    println!(
        "a stream left after its first words, no limit: {} requests, {} turns, {} tokens",
        usage.day.requests, usage.day.turns, usage.day.spent.tokens.total_tokens
    );
    assert_eq!((usage.day.requests, usage.day.turns), (1, 1));
    assert!(usage.day.spent.tokens.input_tokens > 0, "{usage:?}");
    assert!(usage.day.spent.tokens.output_tokens >= 2, "{usage:?}");
}
