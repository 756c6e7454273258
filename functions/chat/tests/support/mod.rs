//! A chat function wired to the real Bedrock SDK client, which talks HTTP to the local Bedrock server; the backends,
//! configuration, chat helpers and replies come from chat-testing's shared harness.

#![allow(dead_code)]

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_testing::harness::{self, Backend, Wired};
use serde_json::Value;

#[allow(unused_imports)] // Each test file uses its own part of it.
pub use chat_testing::harness::{OWNER, Reply, USER};

pub struct Harness {
    pub bedrock: local_bedrock::LocalBedrock,
    pub store: DynamoStore,
    pub app: App<BedrockModel, DynamoStore>,
}

pub async fn harness() -> Harness {
    harness_with(&[]).await
}

/// A harness whose function configuration also holds `env` (as the environment would).
pub async fn harness_with(env: &[(&str, &str)]) -> Harness {
    let Wired {
        bedrock,
        store,
        app,
    } = Backend::start(env).await.wired(App::new).await;
    Harness {
        bedrock,
        store,
        app,
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
        let request = harness::request(method, path, content_type, body);
        Reply::buffered(self.app.handle(request).await)
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, Some("application/json"), &body.to_string())
            .await
    }

    /// Asserts that `ask` with `stream: true`, sent to the OpenAI route `path` after `ask` itself was answered, is
    /// refused with a 400 that says where to send it (the streaming function), and that it never reached the model.
    pub async fn assert_streams_sent_elsewhere(&self, path: &str, ask: &Value) {
        let mut streamed = ask.clone();
        streamed["stream"] = Value::Bool(true);
        let reply = self.post(path, &streamed).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        let error = &reply.json()["error"];
        assert_eq!(error["type"], "invalid_request_error");
        assert_eq!(error["param"], "stream");
        let whereto = format!("POST {path} on the streaming chat function's URL");
        assert!(
            error["message"].as_str().unwrap().contains(&whereto),
            "{error}"
        );
        // Only the first request reached the model.
        assert_eq!(self.bedrock.requests().len(), 1);
    }

    /// An empty chat of [`USER`], as the Chat UI creates one (`POST /chat-history`) before its first message.
    pub async fn new_chat(&self, mode: chat_core::ChatMode) -> String {
        harness::new_chat(&self.store, mode).await
    }

    /// How many chats of `mode` [`USER`] has.
    pub async fn chat_count(&self, mode: chat_core::ChatMode) -> usize {
        harness::chat_count(&self.store, mode).await
    }

    /// The stored messages of a chat of [`USER`], as (role, content).
    pub async fn history(&self, chat_id: &str) -> Vec<(String, String)> {
        harness::history(&self.store, chat_id).await
    }

    /// The body of the last Converse call the model received.
    pub fn last_model_request(&self) -> Value {
        harness::last_model_request(&self.bedrock)
    }
}
