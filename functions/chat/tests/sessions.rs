//! Sessions on the buffered function: a chat is created, continued with the full history or only the latest
//! message (both spellings), never stored twice, and an unknown chat is a 404 that writes nothing.

mod support;

use serde_json::json;
use support::harness;

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_string(), content.to_string())
}

#[tokio::test]
async fn continuing_with_the_whole_history_stores_only_what_is_new() {
    let h = harness().await;
    let first = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "one"}]}),
        )
        .await
        .json();
    let id = first["sessionState"].clone();
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
    let first = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "one"}]}),
        )
        .await
        .json();
    let id = first["sessionState"].clone();
    let second = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "two"}], "sessionState": id}),
        )
        .await
        .json();
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
        .post(
            "/chat-ui/chat",
            &json!({"messages": [{"role": "user", "content": "four"}], "sessionState": id}),
        )
        .await
        .json();
    assert_eq!(ui[0]["Metadata"]["SessionState"], id);
    assert_eq!(h.history(id.as_str().unwrap()).await.len(), 8);
}

#[tokio::test]
async fn an_unknown_chat_is_404_and_nothing_is_written() {
    let h = harness().await;
    let r = h
        .post("/chat", &json!({"messages": [{"role": "user", "content": "x"}], "sessionState": "0123456789abcdef0123456789abcdef"}))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json(), json!({"error": "There is no chat with that id."}));
    assert!(h.bedrock.requests().is_empty(), "the model is not asked");
    let page = chat_core::SessionStore::list(
        &h.store,
        support::OWNER,
        chat_core::ChatMode::Standard,
        10,
        None,
    )
    .await
    .unwrap();
    assert!(page.items.is_empty(), "no chat was created");
}

#[tokio::test]
async fn a_failed_turn_leaves_the_history_as_it_was() {
    let h = harness().await;
    let first = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "one"}]}),
        )
        .await
        .json();
    let id = first["sessionState"].clone();
    let before = h.history(id.as_str().unwrap()).await;
    for fault in [
        "[[fault:model-error]]",
        "[[fault:guardrail]]",
        "[[fault:throttle]]",
    ] {
        let r = h
            .post(
                "/chat",
                &json!({"messages": [{"role": "user", "content": fault}], "sessionState": id}),
            )
            .await;
        assert_ne!(r.status, 200);
        assert_eq!(
            h.history(id.as_str().unwrap()).await,
            before,
            "after {fault}"
        );
    }
    // A failed first turn creates no chat either.
    let r = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "[[fault:model-error]]"}]}),
        )
        .await;
    assert_eq!(r.status, 502);
    let page = chat_core::SessionStore::list(
        &h.store,
        support::OWNER,
        chat_core::ChatMode::Standard,
        10,
        None,
    )
    .await
    .unwrap();
    assert_eq!(page.items.len(), 1);
}

#[tokio::test]
async fn twenty_turns_sent_at_once_to_one_chat_all_land_whole() {
    let h = harness().await;
    let first = h
        .post(
            "/chat",
            &json!({"messages": [{"role": "user", "content": "start"}]}),
        )
        .await
        .json();
    let id = first["sessionState"].clone();
    let turns = (0..20).map(|i| {
        let body = json!({"messages": [{"role": "user", "content": format!("turn {i}")}], "sessionState": id});
        let h = &h;
        async move { h.post("/chat", &body).await }
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
