//! The history's bounds, through its whole edge and moto's DynamoDB: a save holds at most `MAX_MESSAGES` messages
//! and each field within its bound (a 400 naming the field, the chat left as it was), and a save of a long chat
//! (4 MB, far over `MAX_BODY_BYTES`) is taken whole up to `MAX_HISTORY_BODY_BYTES` and reads back whole; a save
//! keeps the tool use of the messages it saves again.

mod support;

use chat_core::RequestLimits;
use chat_testing::harness::{self, Reply};
use serde_json::{Value, json};
use support::{World, json_of, refused};

const MAX_MESSAGES: usize = 60;

async fn world(env: &[(&str, &str)]) -> World {
    let max_messages = MAX_MESSAGES.to_string();
    support::world(&[&[("MAX_MESSAGES", max_messages.as_str())], env].concat()).await
}

/// A new standard chat: its id.
async fn new_chat(w: &World) -> String {
    let reply = w
        .send("POST", "/chat-history", br#"{"mode":"standard"}"#)
        .await;
    json_of(&reply, 201)["id"].as_str().unwrap().to_string()
}

/// `PUT /chat-history/{id}` of `messages`.
async fn save(w: &World, id: &str, messages: &[Value]) -> Reply {
    let body = json!({ "messages": messages }).to_string();
    w.send("PUT", &format!("/chat-history/{id}"), body.as_bytes())
        .await
}

/// A chat's messages, page after page.
async fn stored_messages(w: &World, id: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut path = format!("/chat-history/{id}/messages");
    loop {
        let reply = w.send("GET", &path, b"").await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        messages.extend(reply.json().as_array().unwrap().iter().cloned());
        match reply.headers.get(history::NEXT_CURSOR_HEADER) {
            Some(next) => {
                path = format!(
                    "/chat-history/{id}/messages?cursor={}",
                    next.to_str().unwrap()
                )
            }
            None => return messages,
        }
    }
}

/// A new chat saved with two messages, "hi" and its echo: its id, and the two.
async fn chat_of_two(w: &World) -> (String, [Value; 2]) {
    let id = new_chat(w).await;
    let two = [message(0, "hi".into()), message(1, "Echo: hi".into())];
    assert_eq!(save(w, &id, &two).await.status, 200);
    (id, two)
}

fn message(i: usize, content: String) -> Value {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    json!({"id": format!("m{i}"), "role": role, "content": content, "timestamp": "10:15 AM"})
}

#[tokio::test]
async fn a_save_of_a_4_mb_chat_is_taken_and_reads_back_whole() {
    let w = world(&[]).await;
    let id = new_chat(&w).await;
    // 52 messages of 78 000 characters (some of two bytes): over 4 MB, four times MAX_BODY_BYTES.
    let messages: Vec<Value> = (0..52usize)
        .map(|i| {
            let mut content = format!("message {i}: ");
            while content.chars().count() < 78_000 {
                content.push_str(if i.is_multiple_of(3) { "é" } else { "word " });
            }
            message(i, content.chars().take(78_000).collect())
        })
        .collect();
    let body = json!({ "messages": messages }).to_string();
    assert!(body.len() > 4_000_000, "{}", body.len());
    assert!(body.len() > harness::config(&[]).max_body_bytes);
    let reply = w
        .send("PUT", &format!("/chat-history/{id}"), body.as_bytes())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["messageCount"], 52);

    let read = stored_messages(&w, &id).await;
    assert_eq!(read.len(), 52);
    for (read, sent) in read.iter().zip(&messages) {
        assert_eq!(read["id"], sent["id"]);
        assert_eq!(read["role"], sent["role"]);
        assert_eq!(read["content"], sent["content"]);
    }
}

#[tokio::test]
async fn a_body_over_max_history_body_bytes_is_a_413() {
    let w = world(&[("MAX_HISTORY_BODY_BYTES", "2000000")]).await;
    let id = new_chat(&w).await;
    let content = |chars: usize| "x".repeat(chars);
    let messages: Vec<Value> = (0..30).map(|i| message(i, content(70_000))).collect();
    let reply = save(&w, &id, &messages).await;
    refused(
        &reply,
        413,
        "The request body is larger than the limit of 2000000 bytes.",
    );
    assert!(stored_messages(&w, &id).await.is_empty());
    // The chat functions' own limit does not apply here: a body over it is taken.
    let messages: Vec<Value> = (0..20).map(|i| message(i, content(70_000))).collect();
    assert_eq!(save(&w, &id, &messages).await.status, 200);
    assert_eq!(stored_messages(&w, &id).await.len(), 20);
}

#[tokio::test]
async fn a_save_holds_at_most_max_messages() {
    let w = world(&[]).await;
    let (id, _) = chat_of_two(&w).await;

    let many: Vec<Value> = (0..=MAX_MESSAGES)
        .map(|i| message(i, format!("m{i}")))
        .collect();
    let over = MAX_MESSAGES + 1;
    let too_many =
        format!("messages: holds {over} messages, more than the limit of {MAX_MESSAGES}");
    refused(&save(&w, &id, &many).await, 400, &too_many);
    // The chat is as it was.
    let read = stored_messages(&w, &id).await;
    assert_eq!(read.len(), 2);
    assert_eq!(read[1]["content"], "Echo: hi");
    // At the limit, and with the Chat UI's notes beside (not stored, not counted), a save is taken.
    let mut at_limit = many[..MAX_MESSAGES].to_vec();
    at_limit.insert(1, json!({"role": "system", "content": "API Error"}));
    let reply = save(&w, &id, &at_limit).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(stored_messages(&w, &id).await.len(), MAX_MESSAGES);
}

#[tokio::test]
async fn every_field_of_a_save_is_bounded() {
    let w = world(&[("MAX_MESSAGE_CHARS", "1000")]).await;
    let (id, kept) = chat_of_two(&w).await;
    for (field, limit) in [
        ("content", 1000),
        ("id", RequestLimits::MAX_MESSAGE_ID_CHARS),
        ("timestamp", RequestLimits::MAX_TIMESTAMP_CHARS),
        ("agentIdentifier", RequestLimits::MAX_AGENT_CHARS),
        ("agentName", RequestLimits::MAX_AGENT_CHARS),
    ] {
        let mut messages = kept.to_vec();
        messages[1][field] = json!("x".repeat(limit + 1));
        let over = limit + 1;
        let too_long = format!(
            "messages[1].{field}: is {over} characters long, more than the limit of {limit}"
        );
        refused(&save(&w, &id, &messages).await, 400, &too_long);
    }
    let read = stored_messages(&w, &id).await;
    assert_eq!(read.len(), 2);
    assert_eq!(read[1]["id"], "m1");
}

/// A Chat UI save carries no tool use: each message it saves again under its id keeps the tool exchanges it had,
/// or the chat's next turn would no longer give the model what its tools answered.
#[tokio::test]
async fn a_save_keeps_the_tool_use_of_the_messages_it_saves_again() {
    use chat_core::SessionStore;
    let store = harness::fresh_store().await;
    let w = World {
        history: history::App::new(store.clone(), harness::auth(), &harness::config(&[])),
    };
    let id = new_chat(&w).await;
    let exchange = chat_core::ToolExchange {
        round: 0,
        id: "tooluse_1".into(),
        name: "add".into(),
        input: json!({"a": 2, "b": 3}),
        output: "5".into(),
        status: chat_core::ToolStatus::Success,
    };
    let message = |id: &str, role: chat_core::Role, content: &str| {
        chat_core::StoredMessage::new(id, role, content, "10:00 AM")
    };
    let mut answer = message("a1", chat_core::Role::Assistant, "add returned 5");
    answer.tools = vec![exchange.clone()];
    store
        .append(
            harness::OWNER,
            &id,
            &[message("q1", chat_core::Role::User, "2 + 3?"), answer],
        )
        .await
        .unwrap();
    let chat_ui_save = [
        json!({"id": "q1", "role": "user", "content": "2 + 3?", "timestamp": "10:00 AM"}),
        json!({"id": "a1", "role": "assistant", "content": "add returned 5", "timestamp": "10:00 AM"}),
        json!({"id": "q2", "role": "user", "content": "thanks", "timestamp": "10:01 AM"}),
    ];
    let saved = save(&w, &id, &chat_ui_save).await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    let (_, messages) = store.load(harness::OWNER, &id).await.unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1].tools, [exchange]);
    assert!(messages[0].tools.is_empty() && messages[2].tools.is_empty());
}
