//! A chat function wired to the real Bedrock SDK client, which talks HTTP to the local Bedrock server.

#![allow(dead_code)]

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::SessionStore;
use chat_http::{Auth, Config};
use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::{Body, Request};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use serde_json::Value;

pub struct Harness {
    pub bedrock: LocalBedrock,
    pub store: DynamoStore,
    pub app: App<BedrockModel, DynamoStore>,
}

/// The one user of `AUTH_MODE=none` in these tests, and the owner id it becomes.
pub const USER: &str = "local-user";
pub const OWNER: &str = "local:local-user";

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }
}

pub async fn harness() -> Harness {
    harness_with(&[]).await
}

/// A harness whose function configuration also holds `env` (as the environment would).
pub async fn harness_with(env: &[(&str, &str)]) -> Harness {
    let bedrock = LocalBedrock::start().await.unwrap();
    let mut vars: Vec<(String, String)> = vec![("MODEL_ID".into(), "local.echo-v1:0".into())];
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let config = Config::from_lookup(|k| {
        vars.iter()
            .rev()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    let sdk = bedrock.sdk_config().await;
    let model = BedrockModel::new(&sdk, config.model_timeout);
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client, table, None);
    let auth = Auth::None { user: USER.into() };
    Harness {
        bedrock,
        store: store.clone(),
        app: App::new(model, store, auth, config),
    }
}

impl Harness {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> Reply {
        let mut builder = lambda_http::http::Request::builder()
            .method(method)
            .uri(path);
        if let Some(ct) = content_type {
            builder = builder.header("content-type", ct);
        }
        let request: Request = builder.body(Body::from(body.to_string())).unwrap();
        let response = self.app.handle(request).await;
        let (parts, body) = response.into_parts();
        let body = match body {
            Body::Empty => String::new(),
            Body::Text(t) => t,
            Body::Binary(b) => String::from_utf8(b).unwrap(),
            _ => panic!("unexpected body kind"),
        };
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, Some("application/json"), &body.to_string())
            .await
    }

    /// An empty chat of [`USER`], as the Chat UI creates one (`POST /chat-history`) before its first message.
    pub async fn new_chat(&self, mode: chat_core::ChatMode) -> String {
        let id = format!("{:032x}", fastrand::u128(..));
        let chat = chat_core::ChatRecord {
            id: id.clone(),
            mode,
            title: "New Chat".into(),
            created_at: "2026-11-23T10:00:00.000Z".into(),
            last_updated: "2026-11-23T10:00:00.000Z".into(),
            last_message: String::new(),
            message_count: 0,
        };
        self.store.create(OWNER, &chat, &[]).await.unwrap();
        id
    }

    /// How many chats of `mode` [`USER`] has.
    pub async fn chat_count(&self, mode: chat_core::ChatMode) -> usize {
        self.store
            .list(OWNER, mode, 100, None)
            .await
            .unwrap()
            .items
            .len()
    }

    /// The stored messages of a chat of [`USER`], as (role, content).
    pub async fn history(&self, chat_id: &str) -> Vec<(String, String)> {
        let (_, messages) = self
            .store
            .load(OWNER, chat_id)
            .await
            .expect("the chat exists");
        messages
            .into_iter()
            .map(|m| (m.role.as_str().to_string(), m.content))
            .collect()
    }

    /// The body of the last Converse call the model received.
    pub fn last_model_request(&self) -> Value {
        self.bedrock
            .requests()
            .last()
            .expect("the model was called")
            .body
            .clone()
    }
}
