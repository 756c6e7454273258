//! The one internal model of a conversation and of an answer; every dialect maps to and from it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::Field;

/// Who wrote a message. The protocols know only these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A hand-written message, because it is what a client developer reads in the 400.
        match Value::deserialize(deserializer)? {
            Value::String(s) if s == "user" => Ok(Role::User),
            Value::String(s) if s == "assistant" => Ok(Role::Assistant),
            _ => Err(serde::de::Error::custom(
                r#"expected "user" or "assistant""#,
            )),
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// The settings a request may override (`context.overrides`); unknown ones are ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub suggest_followup_questions: bool,
    pub prompt_template: Option<String>,
}

/// Which protocol a request spoke, and so how its answer must be shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// AI Chat Protocol 2024-05-29: `message` / `delta`, JSONL streaming.
    V20240529,
    /// AI Chat Protocol 2024-01-28: OpenAI-style `choices`, selected by a boolean `stream`.
    V20240128 { stream: bool },
    /// The Chat UI's standard chat: an array of `ChatMessageContent`.
    ChatUi,
}

/// How the request spelled its session state; the answer uses the same spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionSpelling {
    #[default]
    Camel,
    Snake,
}

/// A validated chat request, whatever dialect it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatInput {
    pub dialect: Dialect,
    pub spelling: SessionSpelling,
    pub messages: Vec<Message>,
    pub overrides: Overrides,
    /// The session state the request carried; `None` when absent or `null`.
    pub session_state: Option<Value>,
}

/// Why the model stopped, in the backend's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
}

impl FinishReason {
    /// The OpenAI-style spelling the 2024-01-28 dialect uses.
    pub fn openai(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
        }
    }

    /// The Semantic-Kernel-style spelling the Chat UI uses.
    pub fn semantic_kernel(self) -> &'static str {
        match self {
            FinishReason::Stop => "Stop",
            FinishReason::Length => "Length",
            FinishReason::ContentFilter => "ContentFilter",
        }
    }
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// One step of what the backend did, for `context.thoughts`: a title, a string or list describing it, and
/// optional properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thought {
    pub title: String,
    pub description: Value,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub props: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A complete answer to a chat request, before it is shaped for a dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Unique id of this completion.
    pub id: String,
    /// Unix time in seconds when it was made.
    pub created: i64,
    /// The same instant as RFC 3339, for the Chat UI.
    pub created_at: String,
    pub model: String,
    pub content: String,
    pub finish_reason: FinishReason,
    pub usage: TokenUsage,
    /// What the backend did before the model answered (the prompt, the model and its settings).
    pub prompt_thoughts: Vec<Thought>,
    /// What it learned once the model had answered (token usage).
    pub result_thoughts: Vec<Thought>,
    pub followup_questions: Option<Vec<String>>,
    pub session_state: Option<Value>,
}

impl Answer {
    /// Every thought, in the order the steps happened.
    pub fn thoughts(&self) -> Vec<Thought> {
        self.prompt_thoughts
            .iter()
            .chain(&self.result_thoughts)
            .cloned()
            .collect()
    }
}
