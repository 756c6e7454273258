//! What a request is besides its turn: the family of routes it came to, which dialect it spoke and how it spelled
//! its session state, so that the answer can be shaped alike; and the dialects' spellings of the core's terms.

use chat_core::{FinishReason, TurnInput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Field;

/// Which family of routes a request came to; the body alone cannot tell a Chat UI request from a protocol one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/chat`, `/chat/stream`: AI Chat Protocol, either version.
    Protocol,
    /// `/chat-ui/chat`.
    ChatUi,
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

impl SessionSpelling {
    /// The field's name in this spelling.
    pub fn field(self) -> &'static str {
        match self {
            SessionSpelling::Camel => "sessionState",
            SessionSpelling::Snake => "session_state",
        }
    }
}

/// A validated chat request: the turn it asks for, in the core's terms, and how to shape its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatInput {
    pub dialect: Dialect,
    pub spelling: SessionSpelling,
    pub turn: TurnInput,
}

/// The OpenAI-style spelling of a finish reason, as the 2024-01-28 dialect uses it.
pub fn openai_finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::ToolCalls => "tool_calls",
    }
}

/// The Semantic-Kernel-style spelling of a finish reason, as the Chat UI uses it.
pub fn semantic_kernel_finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "Stop",
        FinishReason::Length => "Length",
        FinishReason::ContentFilter => "ContentFilter",
        FinishReason::ToolCalls => "ToolCalls",
    }
}

/// One step of what the backend did, as `context.thoughts` carries it: a title, a string or list describing it,
/// optional properties, and whatever else a sender put there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thought {
    pub title: String,
    pub description: Value,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub props: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl From<&chat_core::Thought> for Thought {
    fn from(t: &chat_core::Thought) -> Self {
        Self {
            title: t.title.clone(),
            description: t.description.clone(),
            props: t.props.clone().map_or(Field::Missing, Field::Value),
            extra: Map::new(),
        }
    }
}
