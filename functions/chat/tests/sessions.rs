//! Sessions on the buffered function: a chat is created, continued with the full history or only the latest
//! message (both spellings), never stored twice, and an unknown chat is a 404 that writes nothing.

mod support;

use chat_core::ChatMode;
use serde_json::{Value, json};
use support::{Harness, Reply, harness};

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_string(), content.to_string())
}

/// The user's message `text` as `/chat` takes it, in the chat `id` when there is one.
fn asked(text: &str, id: Option<&Value>) -> Value {
    let mut body = json!({"messages": [{"role": "user", "content": text}]});
    if let Some(id) = id {
        body["sessionState"] = id.clone();
    }
    body
}

/// A new chat's first turn, `text`: the chat's id, as the session state of the answer.
async fn started(h: &Harness, text: &str) -> Value {
    let first = h.post("/chat", &asked(text, None)).await.json();
    first["sessionState"].clone()
}

/// `text` sent to the chat `id`.
async fn continued(h: &Harness, text: &str, id: &Value) -> Reply {
    h.post("/chat", &asked(text, Some(id))).await
}

#[tokio::test]
async fn continuing_with_the_whole_history_stores_only_what_is_new() {
    let h = harness().await;
    let id = started(&h, "one").await;
    let full = json!({"messages": [
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "Echo: one"},
        {"role": "user", "content": "two"}
    ], "session_state": id});
    let second = h.post("/chat", &full).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["session_state"], id);
    assert_eq!(
        h.history(id.as_str().unwrap()).await,
        [
            pair("user", "one"),
            pair("assistant", "Echo: one"),
            pair("user", "two"),
            pair("assistant", "Echo: two")
        ]
    );
    // The model saw the conversation once, not twice.
    assert_eq!(
        h.last_model_request()["messages"].as_array().unwrap().len(),
        3
    );
}

#[tokio::test]
async fn continuing_with_the_latest_message_puts_it_after_the_history() {
    let h = harness().await;
    let id = started(&h, "one").await;
    let second = continued(&h, "two", &id).await.json();
    assert_eq!(second["message"]["content"], "Echo: two");
    assert_eq!(
        h.last_model_request()["messages"],
        json!([
            {"role": "user", "content": [{"text": "one"}]},
            {"role": "assistant", "content": [{"text": "Echo: one"}]},
            {"role": "user", "content": [{"text": "two"}]}
        ])
    );
    assert_eq!(h.history(id.as_str().unwrap()).await.len(), 4);
    // The older dialect and the Chat UI continue the same chat.
    let old = h
        .post("/chat", &json!({"messages": [{"role": "user", "content": "three"}], "stream": false, "session_state": id}))
        .await
        .json();
    assert_eq!(old["choices"][0]["session_state"], id);
    let ui = h
        .post("/chat-ui/chat", &asked("four", Some(&id)))
        .await
        .json();
    assert_eq!(ui[0]["Metadata"]["SessionState"], id);
    assert_eq!(h.history(id.as_str().unwrap()).await.len(), 8);
}

#[tokio::test]
async fn an_unknown_chat_is_404_and_nothing_is_written() {
    let h = harness().await;
    let r = continued(&h, "x", &json!("0123456789abcdef0123456789abcdef")).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json(), json!({"error": "There is no chat with that id."}));
    assert!(h.bedrock.requests().is_empty(), "the model is not asked");
    assert_eq!(
        h.chat_count(ChatMode::Standard).await,
        0,
        "no chat was created"
    );
}

#[tokio::test]
async fn a_failed_turn_leaves_the_history_as_it_was() {
    let h = harness().await;
    let id = started(&h, "one").await;
    let before = h.history(id.as_str().unwrap()).await;
    for fault in [
        "[[fault:model-error]]",
        "[[fault:guardrail]]",
        "[[fault:throttle]]",
    ] {
        let r = continued(&h, fault, &id).await;
        assert_ne!(r.status, 200);
        assert_eq!(
            h.history(id.as_str().unwrap()).await,
            before,
            "after {fault}"
        );
    }
    // A failed first turn creates no chat either.
    let r = h.post("/chat", &asked("[[fault:model-error]]", None)).await;
    assert_eq!(r.status, 502);
    assert_eq!(h.chat_count(ChatMode::Standard).await, 1);
}

#[tokio::test]
async fn twenty_turns_sent_at_once_to_one_chat_all_land_whole() {
    let h = harness().await;
    let id = started(&h, "start").await;
    let turns = (0..20).map(|i| {
        let (h, id) = (&h, &id);
        async move { continued(h, &format!("turn {i}"), id).await }
    });
    for reply in futures_util::future::join_all(turns).await {
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let history = h.history(id.as_str().unwrap()).await;
    assert_eq!(
        history.len(),
        42,
        "the first turn and 20 more, two messages each"
    );
    let mut seen = std::collections::HashSet::new();
    for turn in history[2..].chunks(2) {
        assert_eq!(turn[0].0, "user");
        assert_eq!(
            turn[1],
            pair("assistant", &format!("Echo: {}", turn[0].1)),
            "each answer follows its question"
        );
        assert!(seen.insert(turn[0].1.clone()), "{} stored twice", turn[0].1);
    }
    assert_eq!(seen.len(), 20);
}
