//! `PATCH /chat-history/{id}`, through the history's whole edge and moto's DynamoDB: a rename answers the chat as
//! `POST /chat-history` does with the new title (trimmed), and changes nothing else (messages, mode, usage, when it
//! was last updated, so its place in the list); a blank or too long title, a body that is not one, and a chat that
//! is not there are refused, each leaving the chat as it was; and a browser may send it (CORS preflight).

use chat_aws::DynamoStore;
use chat_testing::harness::{self, Reply};
use serde_json::{Value, json};

struct World {
    history: history::App<DynamoStore>,
}

async fn world(env: &[(&str, &str)]) -> World {
    let config = harness::config(env);
    World {
        history: history::App::new(harness::fresh_store().await, harness::auth(), &config),
    }
}

impl World {
    async fn send_raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut request = lambda_http::http::Request::builder()
            .method(method)
            .uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(lambda_http::Body::from(body.to_vec()))
            .unwrap();
        Reply::buffered(self.history.handle(request).await)
    }

    async fn send(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.send_raw(method, path, &[("content-type", "application/json")], body)
            .await
    }

    async fn rename(&self, id: &str, body: Value) -> Reply {
        self.send(
            "PATCH",
            &format!("/chat-history/{id}"),
            body.to_string().as_bytes(),
        )
        .await
    }

    async fn create(&self, mode: &str, title: &str) -> Value {
        let body = json!({"mode": mode, "title": title}).to_string();
        let reply = self.send("POST", "/chat-history", body.as_bytes()).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.json()
    }

    async fn list(&self, mode: &str) -> Vec<Value> {
        let reply = self
            .send("GET", &format!("/chat-history?mode={mode}"), b"")
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json().as_array().unwrap().clone()
    }

    async fn messages(&self, id: &str) -> Value {
        let reply = self
            .send("GET", &format!("/chat-history/{id}/messages"), b"")
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()
    }
}

fn refused(reply: &Reply, status: u16, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.json(), json!({ "error": error }));
}

#[tokio::test]
async fn a_rename_answers_the_chat_with_its_new_title_and_changes_nothing_else() {
    let w = world(&[]).await;
    let older = w.create("standard", "First").await;
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
    let newer = w.create("standard", "Second").await;
    let list_before = w.list("standard").await;
    assert_eq!(list_before[0]["id"], newer["id"]);
    assert_eq!(list_before[1]["id"], json!(older_id));

    let reply = w
        .rename(
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
    let list_after = w.list("standard").await;
    assert_eq!(list_after, [list_before[0].clone(), expected]);
    assert_eq!(w.messages(&older_id).await, saved["messages"]);
    assert!(w.list("multiAgent").await.is_empty());

    // A title of exactly MAX_TITLE_CHARS (200 by default) characters, some of them of four bytes, is taken.
    let longest = "🦀".repeat(100) + &"t".repeat(100);
    let reply = w.rename(&older_id, json!({ "title": longest })).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["title"], json!(longest));

    // A multi-agent chat is renamed in its own list.
    let agents = w.create("multiAgent", "Agents").await;
    let id = agents["id"].as_str().unwrap();
    let reply = w.rename(id, json!({"title": "Team"})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["lastUpdated"], agents["lastUpdated"]);
    assert!(reply.json().get("mode").is_none());
    assert_eq!(w.list("multiAgent").await[0]["title"], "Team");
}

#[tokio::test]
async fn a_rename_that_is_not_one_is_refused_and_changes_nothing() {
    let w = world(&[
        ("MAX_TITLE_CHARS", "20"),
        ("MAX_HISTORY_BODY_BYTES", "2000"),
    ])
    .await;
    let chat = w.create("standard", "Kept").await;
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
        let reply = w.rename(&id, body.clone()).await;
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
            &w.rename(missing, json!({"title": "x"})).await,
            404,
            not_found,
        );
    }
    let gone = w.create("standard", "Gone").await;
    let gone_id = gone["id"].as_str().unwrap();
    let reply = w
        .send("DELETE", &format!("/chat-history/{gone_id}"), b"")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    refused(
        &w.rename(gone_id, json!({"title": "x"})).await,
        404,
        not_found,
    );

    // Through all of it, the chat kept its title, and the deleted one did not come back.
    let listed = w.list("standard").await;
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
    let chat = w.create("standard", "Before").await;
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
