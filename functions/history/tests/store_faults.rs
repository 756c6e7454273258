//! The three functions over a DynamoDB they reach through a fault proxy: a store that does not answer or refuses
//! connections is a 503 to retry, a turn whose save is answered late or never is stored once and answered 200, an
//! answer of 500 000 characters is stored and read back whole, and a chat longer than a Lambda response reads back
//! whole in pages.

use std::time::{Duration, Instant};

use chat_app::Config;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::ChatMode;
use chat_core::Role;
use chat_core::{ChatRecord, SessionStore, StoredMessage};
use chat_edge::Auth;
use chat_testing::harness::{self, OWNER, Reply};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};
use serde_json::{Value, json};

/// The store's whole-call timeout in these tests (`STORE_TIMEOUT_MS`).
const STORE_TIMEOUT: Duration = Duration::from_millis(2500);
/// Lambda's limit on a buffered response.
const LAMBDA_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

struct World {
    _bedrock: LocalBedrock,
    proxy: FaultProxy,
    /// The table, reached without the proxy: what landed.
    direct: DynamoStore,
    chat: chat::App<BedrockModel, DynamoStore>,
    stream: chat_stream::App<BedrockModel, DynamoStore>,
    history: history::App<DynamoStore>,
}

async fn world() -> World {
    let env = [
        ("AUTH_MODE", "none"),
        ("MODEL_ID", "local.echo-v1:0"),
        ("MAX_MESSAGE_CHARS", "500000"),
        ("MAX_BODY_BYTES", "4000000"),
        // A long-output model's answer: the local model's words are its tokens.
        ("MAX_TOKENS", "90000"),
        ("MAX_OUTPUT_TOKENS", "90000"),
        ("STORE_CONNECT_TIMEOUT_MS", "500"),
        ("STORE_ATTEMPT_TIMEOUT_MS", "1000"),
        ("STORE_TIMEOUT_MS", "2500"),
    ];
    let config = Config::from_pairs(&env).unwrap();
    assert_eq!(config.store_timeouts.operation, STORE_TIMEOUT);
    let bedrock = LocalBedrock::start().await.unwrap();
    let model_sdk = bedrock.sdk_config().await;
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let store_sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    // As the functions' cold start builds it.
    let store = DynamoStore::from_config(
        &store_sdk,
        &table,
        config.history_ttl_days,
        config.store_timeouts,
    );
    let auth = || Auth::None {
        user: "local-user".into(),
    };
    World {
        chat: chat::App::new(
            BedrockModel::new(&model_sdk, config.model_timeout),
            store.clone(),
            auth(),
            config.clone(),
        ),
        stream: chat_stream::App::new(
            BedrockModel::new(&model_sdk, config.model_timeout),
            store.clone(),
            auth(),
            config.clone(),
        ),
        history: history::App::new(store, auth(), &config),
        direct: DynamoStore::new(client, table, None),
        proxy,
        _bedrock: bedrock,
    }
}

impl World {
    /// Sends to whichever function serves the path.
    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let req = harness::json_request(method, path, body);
        if path.starts_with("/chat-history") {
            Reply::buffered(self.history.handle(req).await)
        } else if path == "/chat/stream" {
            Reply::collected(self.stream.handle(req).await).await
        } else {
            Reply::buffered(self.chat.handle(req).await)
        }
    }

    /// A chat's messages as they landed, read without the proxy.
    async fn stored(&self, chat_id: &str) -> Vec<(String, String)> {
        harness::history(&self.direct, chat_id).await
    }
}

fn turn(content: &str, session: Option<&str>) -> Value {
    let mut body = json!({"messages": [{"role": "user", "content": content}]});
    if let Some(id) = session {
        body["sessionState"] = json!(id);
    }
    body
}

fn pair(user: &str) -> [(String, String); 2] {
    [
        ("user".into(), user.into()),
        ("assistant".into(), format!("Echo: {user}")),
    ]
}

/// A 503 that says to retry soon, as JSON, within `limit`.
fn assert_unavailable(what: &str, reply: &Reply, took: Duration, limit: Duration) {
    assert_eq!(reply.status, 503, "{what}: {}", reply.body);
    assert_eq!(reply.headers["retry-after"], "1", "{what}");
    assert_eq!(reply.headers["content-type"], "application/json", "{what}");
    assert_eq!(
        reply.json(),
        json!({"error": "The chat store is not answering right now. Please try again in a moment."}),
        "{what}"
    );
    assert!(took <= limit, "{what} took {took:?}, more than {limit:?}");
}

#[tokio::test]
async fn a_store_that_does_not_answer_is_a_503_to_retry_within_the_timeout() {
    let w = world().await;
    let first = w.send("POST", "/chat", Some(&turn("hello", None))).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let id = first.json()["sessionState"].as_str().unwrap().to_string();
    let within = STORE_TIMEOUT + Duration::from_secs(1);

    for fault in [Fault::Silent, Fault::Refuse] {
        w.proxy.set(fault.clone());
        for (method, path, body) in [
            ("GET", "/chat-history?mode=standard".to_string(), None),
            ("GET", format!("/chat-history/{id}/messages"), None),
            ("DELETE", format!("/chat-history/{id}"), None),
            // A continued chat is read before the model is asked: the 503 comes before any line.
            ("POST", "/chat".to_string(), Some(turn("again", Some(&id)))),
            (
                "POST",
                "/chat/stream".to_string(),
                Some(turn("again", Some(&id))),
            ),
        ] {
            let started = Instant::now();
            let reply = w.send(method, &path, body.as_ref()).await;
            assert_unavailable(
                &format!("{fault:?}: {method} {path}"),
                &reply,
                started.elapsed(),
                within,
            );
        }
    }

    // A new chat meets the store only when it is saved: a 503 for a buffered answer, and the stream, whose lines are
    // out, ends with the error line. A save that got no answer reads back once before it gives up: up to two
    // timeouts.
    w.proxy.set(Fault::Silent);
    for (path, body) in [
        ("/chat", turn("new", None)),
        ("/chat-history", json!({"mode": "standard"})),
    ] {
        let started = Instant::now();
        let reply = w.send("POST", path, Some(&body)).await;
        assert_unavailable(
            &format!("a new chat's save through {path}"),
            &reply,
            started.elapsed(),
            2 * STORE_TIMEOUT + Duration::from_secs(1),
        );
    }
    let started = Instant::now();
    let reply = w
        .send("POST", "/chat/stream", Some(&turn("streamed", None)))
        .await;
    let took = started.elapsed();
    assert_eq!(reply.status, 200);
    let last: Value = serde_json::from_str(reply.body.lines().last().unwrap()).unwrap();
    assert_eq!(
        last,
        json!({"error": "The chat store is not answering right now. Please try again in a moment."})
    );
    assert!(
        took <= 2 * STORE_TIMEOUT + Duration::from_secs(1),
        "{took:?}"
    );

    // Once it answers again, nothing of the failed turns was stored.
    w.proxy.set(Fault::None);
    assert_eq!(w.stored(&id).await, pair("hello"));
    let listed = w.send("GET", "/chat-history?mode=standard", None).await;
    assert_eq!(
        listed.json().as_array().unwrap().len(),
        1,
        "{}",
        listed.body
    );
}

#[tokio::test]
async fn a_turn_whose_save_is_never_answered_is_stored_once_and_answered() {
    let w = world().await;
    // A new chat, its save's answer lost on every attempt.
    w.proxy
        .set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, None));
    let first = w.send("POST", "/chat", Some(&turn("one", None))).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["message"]["content"], "Echo: one");
    let id = first.json()["sessionState"].as_str().unwrap().to_string();
    assert!(
        w.proxy.dropped() >= 2,
        "the SDK tried again and got nothing"
    );
    assert_eq!(w.stored(&id).await, pair("one"));

    // Continued, the answer lost once (the SDK's next attempt finds the turn there), then on every attempt.
    w.proxy
        .set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, Some(1)));
    let second = w.send("POST", "/chat", Some(&turn("two", Some(&id)))).await;
    assert_eq!(second.status, 200, "{}", second.body);
    w.proxy
        .set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, None));
    let third = w
        .send("POST", "/chat", Some(&turn("three", Some(&id))))
        .await;
    assert_eq!(third.status, 200, "{}", third.body);
    // The stream's save, likewise: its last line is the end, not an error.
    let fourth = w
        .send("POST", "/chat/stream", Some(&turn("four", Some(&id))))
        .await;
    assert_eq!(fourth.status, 200);
    let last: Value = serde_json::from_str(fourth.body.lines().last().unwrap()).unwrap();
    assert!(last.get("error").is_none(), "{}", fourth.body);

    w.proxy.set(Fault::None);
    let expected: Vec<_> = ["one", "two", "three", "four"]
        .into_iter()
        .flat_map(pair)
        .collect();
    assert_eq!(w.stored(&id).await, expected);
    let listed = w.send("GET", "/chat-history?mode=standard", None).await;
    assert_eq!(listed.json()[0]["messageCount"], 8);
}

#[tokio::test]
async fn an_answer_of_500000_characters_is_stored_and_read_back_whole() {
    let w = world().await;
    // The local model answers `w1 w2 … w80000`: about 549 000 characters.
    let reply = w
        .send("POST", "/chat", Some(&turn("[[deltas:80000]]", None)))
        .await;
    assert_eq!(reply.status, 200);
    let answer = reply.json()["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(answer.chars().count() > 500_000, "{}", answer.len());
    let id = reply.json()["sessionState"].as_str().unwrap().to_string();
    let messages = w
        .send("GET", &format!("/chat-history/{id}/messages"), None)
        .await;
    assert_eq!(messages.status, 200);
    let messages = messages.json();
    assert_eq!(messages.as_array().unwrap().len(), 2);
    assert_eq!(messages[1]["content"], json!(answer));
    let listed = w.send("GET", "/chat-history?mode=standard", None).await;
    assert_eq!(listed.json()[0]["messageCount"], 2);

    // Saved through the history API: 500 000 characters of four bytes each, 2 MB in one message.
    let long = "🦀".repeat(500_000);
    let saved = w
        .send(
            "PUT",
            &format!("/chat-history/{id}"),
            Some(&json!({"messages": [
                {"id": "q", "role": "user", "content": "Write a long answer", "timestamp": "10:15 AM"},
                {"id": "a", "role": "assistant", "content": long, "timestamp": "10:16 AM"}
            ]})),
        )
        .await;
    assert_eq!(
        saved.status,
        200,
        "{}",
        &saved.body[..saved.body.len().min(300)]
    );
    assert_eq!(saved.json()["messageCount"], 2);
    let messages = w
        .send("GET", &format!("/chat-history/{id}/messages"), None)
        .await
        .json();
    assert_eq!(messages[1]["content"], json!(long));
    assert_eq!(messages[0]["content"], "Write a long answer");
}

fn stored_message(i: usize, content: String) -> StoredMessage {
    let role = if i.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    StoredMessage::new(format!("m{i}"), role, content, "10:15 AM")
}

/// Follows `path`'s pages; every page, and the cursors given.
async fn pages(w: &World, path: &str) -> (Vec<Reply>, Vec<String>) {
    let mut replies = Vec::new();
    let mut cursors = Vec::new();
    let mut next = path.to_string();
    loop {
        let reply = w.send("GET", &next, None).await;
        assert_eq!(
            reply.status,
            200,
            "{next}: {}",
            &reply.body[..reply.body.len().min(300)]
        );
        let cursor = reply
            .headers
            .get(history::NEXT_CURSOR_HEADER)
            .map(|v| v.to_str().unwrap().to_string());
        replies.push(reply);
        match cursor {
            Some(cursor) => {
                let sep = if path.contains('?') { '&' } else { '?' };
                next = format!("{path}{sep}cursor={cursor}");
                cursors.push(cursor);
            }
            None => return (replies, cursors),
        }
    }
}

#[tokio::test]
async fn a_chat_longer_than_a_lambda_response_reads_back_whole_in_pages() {
    let w = world().await;
    // 80 messages of 90 000 characters (7.2 MB, past Lambda's 6 MB), with quotes and line breaks that JSON escapes.
    let messages: Vec<StoredMessage> = (0..80)
        .map(|i| stored_message(i, format!("{i:02} \"said\"\n").repeat(9_000)))
        .collect();
    assert_eq!(messages[0].content.chars().count(), 90_000);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let chat = ChatRecord {
        id: id.clone(),
        mode: ChatMode::Standard,
        title: "long".into(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        last_updated: "2026-01-01T00:00:00.000Z".into(),
        last_message: String::new(),
        message_count: 0,
        usage: Default::default(),
    };
    w.direct.create(OWNER, &chat, &messages).await.unwrap();

    let path = format!("/chat-history/{id}/messages");
    let (replies, cursors) = pages(&w, &path).await;
    assert!(replies.len() >= 2, "paged");
    let mut read = Vec::new();
    for reply in &replies {
        // Each page fits a Lambda response, even escaped once more inside the response that carries it.
        assert!(
            reply.body.len() < LAMBDA_RESPONSE_BYTES,
            "{}",
            reply.body.len()
        );
        let wire = serde_json::to_string(&reply.body).unwrap();
        assert!(wire.len() < LAMBDA_RESPONSE_BYTES, "{}", wire.len());
        read.extend(reply.json().as_array().unwrap().iter().cloned());
    }
    let expected: Vec<Value> = messages
        .iter()
        .map(|m| json!({"id": m.id, "content": m.content, "role": m.role.as_str(), "timestamp": "10:15 AM"}))
        .collect();
    assert_eq!(read.len(), 80);
    assert_eq!(read, expected);
    assert!(cursors.iter().all(|c| !c.is_empty()));

    // With a limit, pages of that many.
    let (replies, _) = pages(&w, &format!("{path}?limit=30")).await;
    let sizes: Vec<usize> = replies
        .iter()
        .map(|r| r.json().as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [30, 30, 20]);

    // A small chat answers as it always did: the whole array, no cursor.
    let small = w.send("POST", "/chat", Some(&turn("short", None))).await;
    let small_id = small.json()["sessionState"].as_str().unwrap().to_string();
    let reply = w
        .send("GET", &format!("/chat-history/{small_id}/messages"), None)
        .await;
    assert!(reply.headers.get(history::NEXT_CURSOR_HEADER).is_none());
    assert_eq!(reply.json().as_array().unwrap().len(), 2);

    // Bad limits and cursors are 400s; another chat's cursor is not this one's.
    for (query, error) in [
        ("limit=0", "limit: expected a whole number from 1 to 1000"),
        (
            "limit=lots",
            "limit: expected a whole number from 1 to 1000",
        ),
        ("cursor=bogus", "cursor: not a cursor this list gave"),
    ] {
        let reply = w.send("GET", &format!("{path}?{query}"), None).await;
        assert_eq!(
            (reply.status.as_u16(), reply.json()),
            (400, json!({"error": error})),
            "{query}"
        );
    }
    let reply = w
        .send(
            "GET",
            &format!("/chat-history/{small_id}/messages?cursor={}", cursors[0]),
            None,
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
}
