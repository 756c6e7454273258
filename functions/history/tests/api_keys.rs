//! API keys end to end on moto's DynamoDB, in JWT mode with signing keys this test makes: a signed-in person makes,
//! lists and revokes keys through the history function; a key acts as its owner on the chat functions and the
//! history API (the same owner id as their JWT, their groups as they signed in last); unknown, revoked (once the
//! cache's life has passed) and expired keys get 401; a key cannot manage keys.

use std::sync::Arc;
use std::time::Duration;

use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{ApiKeyStore, NewApiKey};
use chat_edge::{ApiKeySettings, ApiKeys, Auth};
use chat_testing::harness::{self, Backend, JwtSigner, Reply};
use chat_testing::setup;
use local_bedrock::LocalBedrock;
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "chat-backend";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

struct World {
    _bedrock: LocalBedrock,
    store: DynamoStore,
    chat: chat::App<BedrockModel, DynamoStore>,
    stream: chat_stream::App<BedrockModel, DynamoStore>,
    history: history::App<DynamoStore>,
    /// Another instance of the history function: its own cache of key checks, whose life is `CACHE`.
    other_history: history::App<DynamoStore>,
    alice: String,
    /// Alice's token once she left the `eng` group.
    alice_later: String,
    bob: String,
    /// What a third instance says a request is: its own cache of key checks, whose life is `CACHE`.
    auth: Auth,
}

/// The life of the other history instance's cache.
const CACHE: Duration = Duration::from_secs(2);

async fn world() -> World {
    let signer = JwtSigner::new("key-1");
    let jwks = signer.jwks_path();
    // The echo model of the local Bedrock server, a fresh table.
    let env = setup::jwt_env(ISSUER, AUDIENCE, &jwks);
    let Backend {
        bedrock,
        store,
        config,
    } = Backend::start(&env).await;
    let sdk = bedrock.sdk_config().await;
    let model = || BedrockModel::new(&sdk, config.model_timeout);
    // Each function instance has its own cache, as each Lambda instance does.
    let keyed = |cache_life: Duration| -> Auth {
        harness::auth_from(&env).with_api_keys(ApiKeys::new(
            Arc::new(store.api_keys()),
            ApiKeySettings {
                cache_life,
                ..ApiKeySettings::default()
            },
            Duration::from_secs(5),
        ))
    };
    let minute = Duration::from_secs(60);
    let ledger = || -> Arc<dyn chat_core::UsageLedger> { Arc::new(store.usage_ledger()) };
    let token = |sub: &str, groups: Value| {
        signer.token_with(
            ISSUER,
            AUDIENCE,
            |_| {},
            json!({"sub": sub, "groups": groups, "exp": now() + 3600}),
        )
    };
    World {
        chat: chat::App::new(model(), store.clone(), keyed(minute), config.clone())
            .with_usage(Some(ledger())),
        stream: chat_stream::App::new(model(), store.clone(), keyed(minute), config.clone())
            .with_usage(Some(ledger())),
        history: history::App::new(store.clone(), keyed(minute), &config)
            .with_usage(Some(ledger())),
        other_history: history::App::new(store.clone(), keyed(CACHE), &config),
        auth: keyed(CACHE),
        alice: token("alice", json!(["staff", "eng"])),
        alice_later: token("alice", json!(["staff"])),
        bob: token("bob", json!([])),
        store,
        _bedrock: bedrock,
    }
}

impl World {
    async fn send(
        &self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let req = setup::bearer_request(method, path, bearer, body.as_ref());
        if path == "/chat/stream" {
            Reply::collected(self.stream.handle(req).await).await
        } else if ["/chat-history", "/api-keys", "/usage"]
            .iter()
            .any(|p| path.starts_with(p))
        {
            Reply::buffered(self.history.handle(req).await)
        } else {
            Reply::buffered(self.chat.handle(req).await)
        }
    }

    /// A new key of the holder of `jwt`, named `name`: the created answer.
    async fn key(&self, jwt: &str, name: &str) -> Value {
        let reply = self
            .send("POST", "/api-keys", Some(jwt), Some(json!({"name": name})))
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.json()
    }

    async fn listed(&self, jwt: &str) -> Vec<Value> {
        let reply = self.send("GET", "/api-keys", Some(jwt), None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json().as_array().unwrap().clone()
    }

    /// `GET /chat-history` on the other instance, as the holder of `bearer`: the status.
    async fn other_instance_status(&self, bearer: &str) -> u16 {
        let req = setup::bearer_request("GET", "/chat-history?mode=standard", Some(bearer), None);
        Reply::buffered(self.other_history.handle(req).await)
            .status
            .as_u16()
    }

    /// Who the third instance says the holder of `bearer` is.
    async fn identified(&self, bearer: &str) -> Result<chat_core::Caller, u16> {
        let req = setup::bearer_request("GET", "/usage", Some(bearer), None);
        self.auth
            .identify(&req)
            .await
            .map_err(|e| e.status().as_u16())
    }
}

fn chat_body(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn a_key_acts_as_its_owner_on_every_function() {
    let w = world().await;
    let created = w.key(&w.alice, "laptop").await;
    let key = created["key"].as_str().unwrap();
    assert!(key.starts_with("cbk_"), "{created}");
    assert_eq!(created["name"], "laptop");
    // No life asked for: the default's 90 days.
    let life = time::OffsetDateTime::parse(
        created["expires"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
        - time::OffsetDateTime::parse(
            created["created"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
    assert_eq!(life, time::Duration::days(90), "{created}");

    // A chat started with the key is alice's: her JWT lists it.
    let reply = w
        .send("POST", "/chat", Some(key), Some(chat_body("by key")))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chat_id = reply.json()["sessionState"].as_str().unwrap().to_string();
    let streamed = w
        .send(
            "POST",
            "/chat/stream",
            Some(key),
            Some(chat_body("streamed")),
        )
        .await;
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    let by_jwt = w
        .send("GET", "/chat-history?mode=standard", Some(&w.alice), None)
        .await;
    let listed = by_jwt.json();
    let ids = harness::texts_of(&listed, "id");
    assert!(ids.contains(&chat_id.as_str()), "{ids:?}");
    assert_eq!(ids.len(), 2, "both turns' chats are alice's");
    // Its turns are counted as alice's: her JWT reads them in her usage, and so does the key.
    let usage = w.send("GET", "/usage", Some(&w.alice), None).await;
    assert_eq!(usage.status, 200, "{}", usage.body);
    assert_eq!(usage.json()["today"]["turns"], 2, "{}", usage.body);
    assert_eq!(
        w.send("GET", "/usage", Some(key), None).await.json()["today"],
        usage.json()["today"]
    );
    let bobs = w.send("GET", "/usage", Some(&w.bob), None).await.json();
    assert_eq!(bobs["today"]["turns"], 0);
    // And the key reads alice's history; bob's JWT does not see it.
    let by_key = w
        .send(
            "GET",
            &format!("/chat-history/{chat_id}/messages"),
            Some(key),
            None,
        )
        .await;
    assert_eq!(by_key.status, 200, "{}", by_key.body);
    let by_bob = w
        .send(
            "GET",
            &format!("/chat-history/{chat_id}/messages"),
            Some(&w.bob),
            None,
        )
        .await;
    assert_eq!(by_bob.status, 404);

    // The key keeps alice's caller as it was: her owner id, oid and groups.
    let found = w
        .store
        .api_keys()
        .find(&chat_core::api_key_hash(key))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.caller.owner, format!("jwt:{ISSUER}:alice"));
    assert_eq!(found.caller.oid.as_deref(), Some("alice"));
    assert_eq!(found.caller.groups, ["staff", "eng"]);

    // Its use is recorded (in a task of its own, so looked for a while).
    let mut last_used = Value::Null;
    for _ in 0..50 {
        last_used = w.listed(&w.alice).await[0]["last_used"].clone();
        if !last_used.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(last_used.is_string(), "last use recorded: {last_used}");
}

#[tokio::test]
async fn unknown_expired_and_revoked_keys_get_401() {
    let w = world().await;
    let unknown = NewApiKey::generate(chat_core::Caller::owner("jwt:x:alice"), "n", now(), None);
    let mut expired = NewApiKey::generate(
        chat_core::Caller::owner(format!("jwt:{ISSUER}:alice")),
        "old",
        now() - 3 * 86_400,
        Some(1),
    );
    expired.record.expires = Some(now() - 1);
    w.store
        .api_keys()
        .create(&expired.record, 20, now())
        .await
        .unwrap()
        .unwrap();
    for key in [unknown.key.as_str(), expired.key.as_str(), "cbk_short"] {
        for (method, path, body) in [
            ("POST", "/chat", Some(chat_body("hi"))),
            ("POST", "/chat/stream", Some(chat_body("hi"))),
            ("GET", "/chat-history?mode=standard", None),
            ("GET", "/usage", None),
        ] {
            let reply = w.send(method, path, Some(key), body).await;
            assert_eq!(reply.status, 401, "{method} {path}: {}", reply.body);
            assert_eq!(
                reply.json(),
                json!({"error": "Missing or invalid credentials."})
            );
        }
    }
    // The expired key is listed as expired.
    let listed = w.listed(&w.alice).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["expired"], true);

    // Revoked: at once on the instance that revoked it; on another one, once its cache's life has passed.
    let created = w.key(&w.alice, "to revoke").await;
    let key = created["key"].as_str().unwrap();
    assert_eq!(w.other_instance_status(key).await, 200);
    let id = created["id"].as_str().unwrap();
    let revoked = w
        .send("DELETE", &format!("/api-keys/{id}"), Some(&w.alice), None)
        .await;
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    let here = w
        .send("GET", "/chat-history?mode=standard", Some(key), None)
        .await;
    assert_eq!(here.status, 401);
    tokio::time::sleep(CACHE + Duration::from_millis(300)).await;
    assert_eq!(w.other_instance_status(key).await, 401);
}

#[tokio::test]
async fn keys_are_made_listed_and_revoked_by_their_owner_only() {
    let w = world().await;
    let ci = json!({"name": "  ci  ", "expires_in_days": 30});
    let reply = w.send("POST", "/api-keys", Some(&w.alice), Some(ci)).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let created = reply.json();
    let mut fields: Vec<_> = created.as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(fields, ["created", "expires", "id", "key", "name"]);
    assert_eq!(created["name"], "ci");
    let key = created["key"].as_str().unwrap();
    let id = created["id"].as_str().unwrap();
    let created_at = time::OffsetDateTime::parse(
        created["created"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let expires_at = time::OffsetDateTime::parse(
        created["expires"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(expires_at - created_at, time::Duration::days(30));

    // Listed to alice without the key or its hash; not to bob.
    let listed = w.listed(&w.alice).await;
    assert_eq!(listed.len(), 1);
    let mut fields: Vec<_> = listed[0].as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "created",
            "expired",
            "expires",
            "hint",
            "id",
            "last_used",
            "name"
        ]
    );
    assert_eq!(listed[0]["id"], id);
    let hint = listed[0]["hint"].as_str().unwrap();
    assert!(
        hint.starts_with("cbk_") && key.ends_with(&hint[hint.len() - 4..]),
        "{hint}"
    );
    assert!(!listed[0].to_string().contains(&key[4..]));
    assert!(w.listed(&w.bob).await.is_empty());

    // Bob cannot revoke it: 404, as for an id that does not exist; it still works.
    for (who, path) in [
        (&w.bob, format!("/api-keys/{id}")),
        (&w.alice, format!("/api-keys/{}", "0".repeat(32))),
        (&w.alice, "/api-keys/not-an-id".to_string()),
    ] {
        let reply = w.send("DELETE", &path, Some(who), None).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
    }
    assert_eq!(
        w.send("GET", "/chat-history?mode=standard", Some(key), None)
            .await
            .status,
        200
    );

    // A key cannot manage keys.
    for (method, path, body) in [
        (
            "POST",
            "/api-keys".to_string(),
            Some(json!({"name": "successor"})),
        ),
        ("GET", "/api-keys".to_string(), None),
        ("DELETE", format!("/api-keys/{id}"), None),
    ] {
        let reply = w.send(method, &path, Some(key), body).await;
        assert_eq!(reply.status, 403, "{method} {path}: {}", reply.body);
    }
    assert_eq!(w.listed(&w.alice).await.len(), 1);

    // Bad requests name their field.
    for (body, field) in [
        (json!({"name": "   "}), "name"),
        (json!({"name": "x".repeat(101)}), "name"),
        (
            json!({"name": "x", "expires_in_days": 0}),
            "expires_in_days",
        ),
        (
            json!({"name": "x", "expires_in_days": 3651}),
            "expires_in_days",
        ),
        (json!({"name": "x", "scopes": ["all"]}), "scopes"),
        (json!({}), "name"),
    ] {
        let reply = w
            .send("POST", "/api-keys", Some(&w.alice), Some(body.clone()))
            .await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert!(reply.body.contains(field), "{body}: {}", reply.body);
    }

    // Alice revokes it.
    let reply = w
        .send("DELETE", &format!("/api-keys/{id}"), Some(&w.alice), None)
        .await;
    assert_eq!(reply.status, 204);
    assert!(w.listed(&w.alice).await.is_empty());
}

#[tokio::test]
async fn an_owner_holds_at_most_twenty_keys() {
    let w = world().await;
    for i in 0..chat_core::MAX_KEYS_PER_OWNER {
        w.key(&w.alice, &format!("k{i}")).await;
    }
    let over = w
        .send(
            "POST",
            "/api-keys",
            Some(&w.alice),
            Some(json!({"name": "one more"})),
        )
        .await;
    assert_eq!(over.status, 403, "{}", over.body);
    assert!(over.body.contains("revoke one first"), "{}", over.body);
    // Bob is not bound by alice's keys.
    w.key(&w.bob, "bob's").await;
}

#[tokio::test]
async fn a_key_acts_with_the_groups_of_its_owners_last_sign_in() {
    let w = world().await;
    let created = w.key(&w.alice, "laptop").await;
    let key = created["key"].as_str().unwrap();
    assert_eq!(
        w.identified(key).await.unwrap().groups,
        ["staff", "eng"],
        "as she signed in to make it"
    );
    // Alice leaves `eng` and signs in (any route): her record follows, written in a task of its own.
    let reply = w
        .send(
            "GET",
            "/chat-history?mode=standard",
            Some(&w.alice_later),
            None,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let owner = format!("jwt:{ISSUER}:alice");
    let keys = w.store.api_keys();
    let mut recorded = None;
    for _ in 0..50 {
        recorded = keys.recorded_owner(&owner).await.unwrap();
        if recorded.as_ref().is_some_and(|c| c.groups == ["staff"]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(recorded.unwrap().groups, ["staff"]);
    // Her key acts so on every instance once its cache's life has passed; the key's own item is unchanged.
    tokio::time::sleep(CACHE + Duration::from_millis(300)).await;
    let acting = w.identified(key).await.unwrap();
    assert_eq!(acting.owner, owner);
    assert_eq!(acting.groups, ["staff"]);
    let item = keys
        .find(&chat_core::api_key_hash(key))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.caller.groups, ["staff", "eng"]);
    // Every key of hers revoked and her record dropped (the operator's `api-keys revoke --owner-id … --all`):
    // refused once the cache's life has passed.
    let revoked = chat_core::revoke_owner(&keys, &owner).await.unwrap();
    assert_eq!(revoked.len(), 1);
    assert_eq!(keys.recorded_owner(&owner).await.unwrap(), None);
    tokio::time::sleep(CACHE + Duration::from_millis(300)).await;
    assert_eq!(w.identified(key).await.unwrap_err(), 401);
}
