//! Identity across all three functions, in JWT mode with signing keys this test makes: callers without valid
//! tokens get 401, and user B gets 404 on every route and method touching user A's chat, which stays unchanged.

use chat_aws::{BedrockModel, DynamoStore};
use chat_testing::harness::{self, Backend, JwtSigner, Reply};
use chat_testing::setup;
use jsonwebtoken::Header;
use local_bedrock::LocalBedrock;
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "chat-backend";

type Signer = JwtSigner;

fn signer(kid: &str) -> Signer {
    JwtSigner::new(kid)
}

fn token(signer: &Signer, sub: &str, aud: &str, exp_in: i64) -> String {
    token_with(
        signer,
        |_| {},
        json!({"sub": sub, "aud": aud, "exp": now() + exp_in}),
    )
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A token signed by `signer` with `claims` over the usual ones, its header changed by `edit`.
fn token_with(signer: &Signer, edit: impl FnOnce(&mut Header), claims: Value) -> String {
    signer.token_with(ISSUER, AUDIENCE, edit, claims)
}

struct World {
    _bedrock: LocalBedrock,
    chat: chat::App<BedrockModel, DynamoStore>,
    stream: chat_stream::App<BedrockModel, DynamoStore>,
    history: history::App<DynamoStore>,
    alice: String,
    bob: String,
    signer: Signer,
}

async fn world() -> World {
    let signer = signer("key-1");
    let jwks = signer.jwks_path();
    // The echo model of the local Bedrock server, a fresh table; every function with the same JWT settings.
    let env = setup::jwt_env(ISSUER, AUDIENCE, &jwks);
    let auth = || harness::auth_from(&env);
    let b = Backend::start(&env).await;
    let (store, config) = (&b.store, &b.config);
    World {
        chat: chat::App::new(b.model().await, store.clone(), auth(), config.clone()),
        stream: chat_stream::App::new(b.model().await, store.clone(), auth(), config.clone()),
        history: history::App::new(store.clone(), auth(), config),
        alice: token(&signer, "alice", AUDIENCE, 3600),
        bob: token(&signer, "bob", AUDIENCE, 3600),
        _bedrock: b.bedrock,
        signer,
    }
}

impl World {
    /// Sends to whichever function serves the path; the status and the body as text.
    async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, String) {
        let req = setup::bearer_request(method, path, token, body.as_ref());
        let reply = if path.starts_with("/chat-history") {
            Reply::buffered(self.history.handle(req).await)
        } else if path == "/chat/stream" {
            Reply::collected(self.stream.handle(req).await).await
        } else {
            Reply::buffered(self.chat.handle(req).await)
        };
        (reply.status.as_u16(), reply.body)
    }

    /// `GET path` as the holder of `token`.
    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        self.send("GET", path, token, None).await
    }

    /// A new chat whose first turn, sent as the holder of `token`, is `text`: its id.
    async fn chat_started(&self, token: Option<&str>, text: &str) -> String {
        let first = json!({"messages": [{"role": "user", "content": text}]});
        let (status, text) = self.send("POST", "/chat", token, Some(first)).await;
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        answer["sessionState"].as_str().unwrap().to_string()
    }

    /// A chat made through the history API (`POST /chat-history` with `body`), as alice: its id.
    async fn created(&self, body: Value) -> String {
        let alice = Some(self.alice.as_str());
        let (_, created) = self.json("POST", "/chat-history", alice, body).await;
        created["id"].as_str().unwrap().to_string()
    }

    /// [`World::send`] of `body`, whose answer is JSON.
    async fn json(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let (status, text) = self.send(method, path, token, Some(body)).await;
        (status, serde_json::from_str(&text).unwrap())
    }
}

#[tokio::test]
async fn callers_without_a_valid_token_get_401_everywhere() {
    let w = world().await;
    let other = signer("key-1"); // same key id, a different key: a forged token
    let forged = token(&other, "alice", AUDIENCE, 3600);
    let expired = token(&w.signer, "alice", AUDIENCE, -600);
    let wrong_audience = token(&w.signer, "alice", "someone-else", 3600);
    // Good only from tomorrow; or marking an extension critical that nothing here understands (RFC 7515 §4.1.11).
    let not_yet = token_with(
        &w.signer,
        |_| {},
        json!({"sub": "alice", "nbf": now() + 86_400}),
    );
    let critical = token_with(
        &w.signer,
        |h| {
            h.crit = Some(vec!["https://issuer.test/binding".into()]);
            h.extras.insert("https://issuer.test/binding", "tls");
        },
        json!({"sub": "alice"}),
    );
    // No one, or one the keys would otherwise share with every other such token.
    let no_one = token(&w.signer, "", AUDIENCE, 3600);
    let chat = json!({"messages": [{"role": "user", "content": "hi"}]});
    for credentials in [
        None,
        Some("not-a-jwt"),
        Some(forged.as_str()),
        Some(expired.as_str()),
        Some(wrong_audience.as_str()),
        Some(not_yet.as_str()),
        Some(critical.as_str()),
        Some(no_one.as_str()),
    ] {
        for (method, path, body) in [
            ("POST", "/chat", Some(chat.clone())),
            ("POST", "/chat/stream", Some(chat.clone())),
            ("GET", "/chat-history?mode=standard", None),
            ("POST", "/chat-history", Some(json!({"mode": "standard"}))),
        ] {
            let (status, text) = w.send(method, path, credentials, body).await;
            assert_eq!(status, 401, "{method} {path} with {credentials:?}: {text}");
            assert_eq!(text, r#"{"error":"Missing or invalid credentials."}"#);
        }
    }
}

#[tokio::test]
async fn another_users_chat_is_404_on_every_route_and_unchanged() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let bob = Some(w.bob.as_str());
    let id = w.chat_started(alice, "secret").await;
    let messages_path = format!("/chat-history/{id}/messages");
    let (_, before) = w.get(&messages_path, alice).await;
    let (_, list_before) = w.get("/chat-history?mode=standard", alice).await;

    let not_found = r#"{"error":"There is no chat with that id."}"#;
    let turn = |state: &str| json!({"messages": [{"role": "user", "content": "mine now"}], "sessionState": state});
    let attempts = [
        ("GET", messages_path.clone(), None),
        (
            "PUT",
            format!("/chat-history/{id}"),
            Some(json!({"messages": []})),
        ),
        (
            "PATCH",
            format!("/chat-history/{id}"),
            Some(json!({"title": "mine now"})),
        ),
        ("DELETE", format!("/chat-history/{id}?mode=standard"), None),
        ("POST", "/chat".to_string(), Some(turn(&id))),
        ("POST", "/chat-ui/chat".to_string(), Some(turn(&id))),
        ("POST", "/chat/stream".to_string(), Some(turn(&id))),
        (
            "POST",
            "/chat".to_string(),
            Some(
                json!({"messages": [{"role": "user", "content": "x"}], "stream": false, "session_state": id}),
            ),
        ),
    ];
    for (method, path, body) in attempts {
        let (status, text) = w.send(method, &path, bob, body).await;
        assert_eq!(
            (status, text.as_str()),
            (404, not_found),
            "bob: {method} {path}"
        );
    }
    // Bob's list does not show it; Alice's chat and list are as they were.
    let (_, bobs) = w.get("/chat-history?mode=standard", bob).await;
    assert_eq!(bobs, "[]");
    assert_eq!(w.get(&messages_path, alice).await.1, before);
    let (_, list_after) = w.get("/chat-history?mode=standard", alice).await;
    assert_eq!(list_after, list_before);
    // A chat that does not exist answers exactly the same.
    let unknown = "/chat-history/0123456789abcdef0123456789abcdef/messages";
    assert_eq!(w.get(unknown, alice).await, (404, not_found.to_string()));
}

#[tokio::test]
async fn the_history_api_creates_lists_replaces_reads_and_deletes() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let body = json!({"mode": "multiAgent", "title": "Planning"});
    let (status, created) = w.json("POST", "/chat-history", alice, body).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["title"], "Planning");
    assert_eq!(created["messageCount"], 0);
    assert_eq!(created["lastMessage"], "");
    assert!(
        created.get("mode").is_none(),
        "the create answer has the spec's shape"
    );
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);

    let replace = json!({"messages": [
        {"id": "msg-1", "content": "Why is the sky blue", "role": "user", "timestamp": "09:45 AM"},
        {"id": "msg-2", "content": "Rayleigh scattering.", "role": "assistant", "timestamp": "09:46 AM", "agentIdentifier": "BusinessAnalyst", "agentName": "Business Analyst"}
    ]});
    let chat_path = format!("/chat-history/{id}");
    let (status, updated) = w.json("PUT", &chat_path, alice, replace.clone()).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["mode"], "multiAgent");
    assert_eq!(updated["messageCount"], 2);
    assert_eq!(updated["lastMessage"], "Rayleigh scattering.");

    let messages_path = format!("/chat-history/{id}/messages");
    let (_, messages) = w.get(&messages_path, alice).await;
    assert_eq!(
        serde_json::from_str::<Value>(&messages).unwrap(),
        replace["messages"]
    );

    let (_, standard) = w.get("/chat-history?mode=standard", alice).await;
    assert_eq!(standard, "[]");
    let (_, multi) = w.get("/chat-history?mode=multiAgent", alice).await;
    assert_eq!(
        serde_json::from_str::<Value>(&multi).unwrap()[0]["id"],
        json!(id)
    );

    let (status, body) = w
        .send(
            "DELETE",
            &format!("/chat-history/{id}?mode=multiAgent"),
            alice,
            None,
        )
        .await;
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(w.get(&messages_path, alice).await.0, 404);
}

#[tokio::test]
async fn history_requests_are_checked() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let long = "t".repeat(201);
    let cases = [
        (
            "GET",
            "/chat-history?mode=other",
            None,
            400,
            r#"{"error":"mode: expected \"standard\" or \"multiAgent\""}"#.to_string(),
        ),
        (
            "GET",
            "/chat-history?limit=0",
            None,
            400,
            r#"{"error":"limit: expected a whole number from 1 to 100"}"#.to_string(),
        ),
        (
            "GET",
            "/chat-history?cursor=bogus",
            None,
            400,
            r#"{"error":"cursor: not a cursor this list gave"}"#.to_string(),
        ),
        (
            "POST",
            "/chat-history",
            Some(json!({"mode": "standard", "title": long})),
            400,
            r#"{"error":"title: is 201 characters long, more than the limit of 200"}"#.to_string(),
        ),
        (
            "POST",
            "/chat-history",
            Some(json!({"title": "x"})),
            400,
            r#"{"error":"mode: is required"}"#.to_string(),
        ),
        (
            "POST",
            "/chat-history/abc",
            None,
            405,
            r#"{"error":"This route does not answer that method; use PUT, PATCH, DELETE."}"#
                .to_string(),
        ),
        (
            "GET",
            "/chat-history/a/b/c",
            None,
            404,
            r#"{"error":"There is nothing at /chat-history/a/b/c."}"#.to_string(),
        ),
    ];
    for (method, path, body, status, text) in cases {
        assert_eq!(
            w.send(method, path, alice, body).await,
            (status, text),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn the_list_pages_with_a_cursor_in_a_header() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    for i in 0..5 {
        w.send(
            "POST",
            "/chat-history",
            alice,
            Some(json!({"mode": "standard", "title": format!("chat {i}")})),
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let mut titles = Vec::new();
    let mut path = "/chat-history?mode=standard&limit=2".to_string();
    loop {
        let response = w
            .history
            .handle(setup::bearer_request("GET", &path, alice, None))
            .await;
        let next = response
            .headers()
            .get(history::NEXT_CURSOR_HEADER)
            .map(|v| v.to_str().unwrap().to_string());
        let page: Value = serde_json::from_str(&harness::body_text(response.into_body())).unwrap();
        assert!(page.as_array().unwrap().len() <= 2);
        titles.extend(
            page.as_array()
                .unwrap()
                .iter()
                .map(|c| c["title"].as_str().unwrap().to_string()),
        );
        match next {
            Some(cursor) => path = format!("/chat-history?mode=standard&limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(titles, ["chat 4", "chat 3", "chat 2", "chat 1", "chat 0"]);
}

#[tokio::test]
async fn a_chat_of_three_megabytes_reads_back_whole_through_the_api() {
    use chat_core::{SessionStore, StoredMessage};
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let id = w.created(json!({"mode": "standard"})).await;
    // 3 MB in 40 messages of 75 000 characters, written through the store (a request body is capped far lower).
    let store = w.history.store();
    for turn in 0..20u32 {
        let message = |role, text: String| {
            StoredMessage::new(
                format!("m{turn}-{role:?}"),
                role,
                text,
                "2026-01-01T00:00:00.000Z",
            )
        };
        let pair = [
            message(chat_core::Role::User, format!("{turn:02}").repeat(37_500)),
            message(
                chat_core::Role::Assistant,
                format!("{:02}", turn + 50).repeat(37_500),
            ),
        ];
        store
            .append(&format!("jwt:{ISSUER}:alice"), &id, &pair)
            .await
            .unwrap();
    }
    let (status, text) = w.get(&format!("/chat-history/{id}/messages"), alice).await;
    assert_eq!(status, 200);
    let messages: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(messages.len(), 40);
    let total: usize = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap().len())
        .sum();
    assert_eq!(total, 3_000_000);
    assert_eq!(messages[39]["content"], json!("69".repeat(37_500)));
}

/// Serves `body` as JSON to every request on a loopback port; returns the URL.
async fn serve_json(body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    url
}

#[tokio::test]
async fn signing_keys_can_come_from_a_jwks_url() {
    let signer = signer("url-key");
    let url = serve_json(json!({"keys": [signer.jwk]}).to_string()).await;
    let env = [
        ("AUTH_MODE", "jwt"),
        ("JWT_ISSUER", ISSUER),
        ("JWT_AUDIENCE", AUDIENCE),
        ("JWKS_URL", url.as_str()),
    ];
    let auth = harness::auth_from(&env);
    let good = token(&signer, "carol", AUDIENCE, 3600);
    assert_eq!(
        auth.caller(&setup::bearer_request(
            "GET",
            "/chat-history",
            Some(&good),
            None
        ))
        .await
        .unwrap(),
        format!("jwt:{ISSUER}:carol")
    );
    let stranger = signer_token_with_other_kid();
    assert!(
        auth.caller(&setup::bearer_request(
            "GET",
            "/chat-history",
            Some(&stranger),
            None
        ))
        .await
        .is_err()
    );
}

fn signer_token_with_other_kid() -> String {
    token(&signer("unknown-key"), "mallory", AUDIENCE, 3600)
}

#[tokio::test]
async fn a_very_long_subject_chats_and_sees_only_its_own_history() {
    let w = world().await;
    // DynamoDB holds a partition key to 2 KB; the owner of these chats is named by a digest instead.
    let long = "s".repeat(3000);
    let mut similar = long.clone();
    similar.replace_range(2999.., "t");
    let first = token(&w.signer, &long, AUDIENCE, 3600);
    let second = token(&w.signer, &similar, AUDIENCE, 3600);
    let id = w.chat_started(Some(&first), "long names").await;
    let (status, text) = w
        .send(
            "POST",
            "/chat/stream",
            Some(&first),
            Some(json!({"messages": [{"role": "user", "content": "again"}], "sessionState": id})),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("\"error\""), "{text}");

    // A fresh token for the same subject finds the chat, with both turns.
    let again = token(&w.signer, &long, AUDIENCE, 3600);
    let (status, list) = w.get("/chat-history?mode=standard", Some(&again)).await;
    assert_eq!(status, 200, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], json!(id));
    assert_eq!(list[0]["messageCount"], 4);

    // A subject differing in its last character is someone else.
    let messages = format!("/chat-history/{id}/messages");
    let list = w.get("/chat-history?mode=standard", Some(&second)).await;
    assert_eq!(list, (200, "[]".to_string()));
    assert_eq!(w.get(&messages, Some(&second)).await.0, 404);
    assert_eq!(w.get(&messages, Some(&first)).await.0, 200);
}

#[tokio::test]
async fn a_save_with_a_field_over_its_bound_is_400_and_changes_nothing() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let id = w.created(json!({"mode": "multiAgent"})).await;
    let path = format!("/chat-history/{id}");
    let message = |field: &str, text: String| {
        let mut m = json!({"id": "m-1", "content": "hi", "role": "user", "timestamp": "10:15 AM"});
        m[field] = json!(text);
        json!({ "messages": [m] })
    };
    let cases = [
        ("id", 450_000, 200),
        ("agentName", 200_000, 200),
        ("agentIdentifier", 201, 200),
        ("timestamp", 65, 64),
    ];
    for (field, length, limit) in cases {
        let (status, text) = w
            .send(
                "PUT",
                &path,
                alice,
                Some(message(field, "x".repeat(length))),
            )
            .await;
        assert_eq!(
            (status, text),
            (
                400,
                format!(
                    r#"{{"error":"messages[0].{field}: is {length} characters long, more than the limit of {limit}"}}"#
                )
            )
        );
    }
    let stored = w.get(&format!("{path}/messages"), alice).await;
    assert_eq!(stored, (200, "[]".to_string()));
    // At their bounds, the fields are stored and read back as sent.
    let mut at = message("id", "i".repeat(200));
    at["messages"][0]["agentName"] = json!("n".repeat(200));
    at["messages"][0]["agentIdentifier"] = json!("a".repeat(200));
    at["messages"][0]["timestamp"] = json!("t".repeat(64));
    assert_eq!(w.send("PUT", &path, alice, Some(at.clone())).await.0, 200);
    let (_, stored) = w.get(&format!("{path}/messages"), alice).await;
    assert_eq!(
        serde_json::from_str::<Value>(&stored).unwrap(),
        at["messages"]
    );
}

#[tokio::test]
async fn an_oversized_session_state_is_refused_without_reaching_the_store() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let with_state = |state: String| json!({"messages": [{"role": "user", "content": "hi"}], "sessionState": state});
    for path in ["/chat", "/chat/stream", "/chat-ui/chat"] {
        let (status, text) = w
            .send("POST", path, alice, Some(with_state("s".repeat(900_000))))
            .await;
        assert_eq!(
            (status, text.as_str()),
            (
                400,
                r#"{"error":"sessionState: is 900000 characters long, more than the limit of 256"}"#
            ),
            "{path}"
        );
        // Larger than any body is taken.
        let (status, _) = w
            .send(
                "POST",
                path,
                alice,
                Some(with_state("s".repeat(10_000_000))),
            )
            .await;
        assert_eq!(status, 413, "{path}");
    }
    let list = w.get("/chat-history?mode=standard", alice).await;
    assert_eq!(list, (200, "[]".to_string()));
}

/// A chat id in the path that does not decode (`%FF` is no UTF-8) names no chat: the same JSON 404 as any unknown
/// id, after the caller is known (401 first).
#[tokio::test]
async fn an_id_that_does_not_decode_is_a_json_404() {
    let w = world().await;
    let alice = Some(w.alice.as_str());
    let not_found = r#"{"error":"There is no chat with that id."}"#.to_string();
    for (method, path, body) in [
        ("GET", "/chat-history/%FF/messages", None),
        ("DELETE", "/chat-history/%FF%FE", None),
        ("PUT", "/chat-history/%C3", Some(json!({"messages": []}))),
    ] {
        assert_eq!(
            w.send(method, path, alice, body.clone()).await,
            (404, not_found.clone()),
            "{method} {path}"
        );
        assert_eq!(
            w.send(method, path, None, body).await.0,
            401,
            "{method} {path}"
        );
    }
}
