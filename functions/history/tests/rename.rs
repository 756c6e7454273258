//! `PATCH /chat-history/{id}`, through the history's whole edge and moto's DynamoDB: a rename answers the chat as
//! `POST /chat-history` does with the new title (trimmed), and changes nothing else (messages, mode, usage, when it
//! was last updated, so its place in the list); a blank or too long title, a body that is not one, and a chat that
//! is not there are refused, each leaving the chat as it was; and a browser may send it (CORS preflight).

mod support;

use chat_testing::harness::Reply;
use serde_json::{Value, json};
use support::{World, json_of, refused, world};

/// `PATCH /chat-history/{id}` with `body`.
async fn rename(w: &World, id: &str, body: Value) -> Reply {
    let path = format!("/chat-history/{id}");
    w.send("PATCH", &path, body.to_string().as_bytes()).await
}

/// A chat of `mode` titled `title`, as `POST /chat-history` answers it.
async fn create(w: &World, mode: &str, title: &str) -> Value {
    let body = json!({"mode": mode, "title": title}).to_string();
    json_of(&w.send("POST", "/chat-history", body.as_bytes()).await, 201)
}

/// The chats of `mode`.
async fn list(w: &World, mode: &str) -> Vec<Value> {
    let path = format!("/chat-history?mode={mode}");
    let listed = json_of(&w.send("GET", &path, b"").await, 200);
    listed.as_array().unwrap().clone()
}

/// A chat's messages.
async fn messages(w: &World, id: &str) -> Value {
    let path = format!("/chat-history/{id}/messages");
    json_of(&w.send("GET", &path, b"").await, 200)
}

#[tokio::test]
async fn a_rename_answers_the_chat_with_its_new_title_and_changes_nothing_else() {
    let w = world(&[]).await;
    let older = create(&w, "standard", "First").await;
    let older_id = older["id"].as_str().unwrap().to_string();
    let saved = json!({"messages": [
        {"id": "m1", "content": "Why is the sky blue", "role": "user", "timestamp": "09:45 AM"},
        {"id": "m2", "content": "Rayleigh scattering.", "role": "assistant", "timestamp": "09:46 AM"}
    ]});
    let reply = w
        .send(
            "PUT",
            &format!("/chat-history/{older_id}"),
            saved.to_string().as_bytes(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // A later chat, so that the list's order shows whether the rename moved the first one up.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let newer = create(&w, "standard", "Second").await;
    let list_before = list(&w, "standard").await;
    assert_eq!(list_before[0]["id"], newer["id"]);
    assert_eq!(list_before[1]["id"], json!(older_id));

    let reply = rename(
        &w,
        &older_id,
        json!({"title": "  Sky questions 🌤  ", "mode": "ignored"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.headers["content-type"], "application/json",
        "{:?}",
        reply.headers
    );
    let renamed = reply.json();
    // The chat as the list shows it, with the new title (trimmed): the shape `POST /chat-history` answers, no mode.
    let mut expected = list_before[1].clone();
    expected["title"] = json!("Sky questions 🌤");
    assert_eq!(renamed, expected);
    assert_eq!(
        renamed.as_object().unwrap().keys().collect::<Vec<_>>(),
        older.as_object().unwrap().keys().collect::<Vec<_>>()
    );
    assert_eq!(renamed["messageCount"], 2);
    assert_eq!(renamed["lastMessage"], "Rayleigh scattering.");

    // Not moved: the newer chat is still first, and the renamed one kept its lastUpdated.
    let list_after = list(&w, "standard").await;
    assert_eq!(list_after, [list_before[0].clone(), expected]);
    assert_eq!(messages(&w, &older_id).await, saved["messages"]);
    assert!(list(&w, "multiAgent").await.is_empty());

    // A title of exactly MAX_TITLE_CHARS (200 by default) characters, some of them of four bytes, is taken.
    let longest = "🦀".repeat(100) + &"t".repeat(100);
    let reply = rename(&w, &older_id, json!({ "title": longest })).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["title"], json!(longest));

    // A multi-agent chat is renamed in its own list.
    let agents = create(&w, "multiAgent", "Agents").await;
    let id = agents["id"].as_str().unwrap();
    let reply = rename(&w, id, json!({"title": "Team"})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["lastUpdated"], agents["lastUpdated"]);
    assert!(reply.json().get("mode").is_none());
    assert_eq!(list(&w, "multiAgent").await[0]["title"], "Team");
}

#[tokio::test]
async fn a_rename_that_is_not_one_is_refused_and_changes_nothing() {
    const LIMITS: [(&str, &str); 2] = [
        ("MAX_TITLE_CHARS", "20"),
        ("MAX_HISTORY_BODY_BYTES", "2000"),
    ];
    let w = world(&LIMITS).await;
    let chat = create(&w, "standard", "Kept").await;
    let id = chat["id"].as_str().unwrap().to_string();
    let path = format!("/chat-history/{id}");
    let cases: Vec<(Value, &str)> = vec![
        (json!({"title": ""}), "title: must not be blank"),
        (
            json!({"title": " \t\n\u{3000} "}),
            "title: must not be blank",
        ),
        (
            json!({"title": "é".repeat(21)}),
            "title: is 21 characters long, more than the limit of 20",
        ),
        (json!({}), "title: is required"),
        (
            json!({"title": null}),
            "title: invalid type: null, expected a string",
        ),
        (
            json!({"title": 7}),
            "title: invalid type: integer `7`, expected a string",
        ),
        (json!(["title"]), "body must be a JSON object"),
    ];
    for (body, error) in cases {
        let reply = rename(&w, &id, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert_eq!(reply.json(), json!({ "error": error }), "{body}");
    }
    refused(
        &w.send("PATCH", &path, b"{\"title\": ").await,
        400,
        "body is not valid JSON: EOF while parsing a value at line 1 column 10",
    );
    let reply = w
        .send_raw(
            "PATCH",
            &path,
            &[("content-type", "text/plain")],
            br#"{"title":"x"}"#,
        )
        .await;
    assert_eq!(reply.status, 415, "{}", reply.body);
    let big = json!({"title": "x", "padding": "p".repeat(3000)}).to_string();
    refused(
        &w.send("PATCH", &path, big.as_bytes()).await,
        413,
        "The request body is larger than the limit of 2000 bytes.",
    );
    // A chat that is not there: never made, not a chat id, or deleted.
    let not_found = "There is no chat with that id.";
    for missing in ["0123456789abcdef0123456789abcdef", "abc", "%FF"] {
        refused(
            &rename(&w, missing, json!({"title": "x"})).await,
            404,
            not_found,
        );
    }
    let gone = create(&w, "standard", "Gone").await;
    let gone_id = gone["id"].as_str().unwrap();
    let reply = w
        .send("DELETE", &format!("/chat-history/{gone_id}"), b"")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    refused(
        &rename(&w, gone_id, json!({"title": "x"})).await,
        404,
        not_found,
    );

    // Through all of it, the chat kept its title, and the deleted one did not come back.
    let listed = list(&w, "standard").await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], chat);
}

#[tokio::test]
async fn a_browser_may_send_a_rename() {
    let w = world(&[("CORS_ALLOWED_ORIGINS", "http://localhost:*")]).await;
    let reply = w
        .send_raw(
            "OPTIONS",
            "/chat-history/0123456789abcdef0123456789abcdef",
            &[
                ("origin", "http://localhost:5173"),
                ("access-control-request-method", "PATCH"),
                ("access-control-request-headers", "content-type"),
            ],
            b"",
        )
        .await;
    assert!(reply.status.is_success(), "{}", reply.status);
    let methods = reply.headers["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(methods.split(',').any(|m| m.trim() == "PATCH"), "{methods}");
    let chat = create(&w, "standard", "Before").await;
    let reply = w
        .send_raw(
            "PATCH",
            &format!("/chat-history/{}", chat["id"].as_str().unwrap()),
            &[
                ("origin", "http://localhost:5173"),
                ("content-type", "application/json"),
            ],
            br#"{"title":"After"}"#,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.headers["access-control-allow-origin"],
        "http://localhost:5173"
    );
    assert_eq!(reply.json()["title"], "After");
}
