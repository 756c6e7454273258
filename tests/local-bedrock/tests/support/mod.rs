//! What the local Bedrock server's tests share: a server and a real SDK client of it, messages, JSON as the SDK's
//! documents and back, and an SDK error as `code: message`.

// Each test file that includes it uses only some of it.
#![allow(dead_code)]

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::ProvideErrorMetadata;
use aws_sdk_bedrockruntime::types::{ContentBlock, ConversationRole, Message};
use aws_smithy_types::{Document, Number};
use local_bedrock::LocalBedrock;
use serde_json::{Value, json};

/// The model the tests ask: a Claude id, so that the server answers with Claude's features.
pub const MODEL: &str = "anthropic.claude-test";

/// A server of its own, and the real SDK client of it.
pub async fn start() -> (LocalBedrock, Client) {
    let server = LocalBedrock::start().await.expect("the server starts");
    let client = Client::new(&server.sdk_config().await);
    (server, client)
}

pub fn message(role: ConversationRole, content: Vec<ContentBlock>) -> Message {
    Message::builder()
        .role(role)
        .set_content(Some(content))
        .build()
        .unwrap()
}

pub fn user(content: Vec<ContentBlock>) -> Message {
    message(ConversationRole::User, content)
}

pub fn text(t: &str) -> ContentBlock {
    ContentBlock::Text(t.to_string())
}

/// `value` as a Smithy document, as the SDK sends it.
pub fn document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Number::PosInt(u),
            (None, Some(i)) => Number::NegInt(i),
            _ => Number::Float(n.as_f64().unwrap()),
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(a) => Document::Array(a.iter().map(document).collect()),
        Value::Object(o) => {
            Document::Object(o.iter().map(|(k, v)| (k.clone(), document(v))).collect())
        }
    }
}

/// A Smithy document as JSON, its objects' keys sorted: the SDK reads an object into a hash map, whose order
/// differs from run to run.
pub fn json_of(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => json!(u),
        Document::Number(Number::NegInt(i)) => json!(i),
        Document::Number(Number::Float(f)) => json!(f),
        Document::String(s) => json!(s),
        Document::Array(a) => Value::Array(a.iter().map(json_of).collect()),
        Document::Object(o) => local_bedrock::sorted(&Value::Object(
            o.iter().map(|(k, v)| (k.clone(), json_of(v))).collect(),
        )),
    }
}

/// An SDK error as `code: message`.
pub fn error_text(error: impl ProvideErrorMetadata) -> String {
    format!(
        "{}: {}",
        error.code().unwrap_or("?"),
        error.message().unwrap_or("")
    )
}
