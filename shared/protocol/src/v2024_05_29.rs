//! AI Chat Protocol 2024-05-29: `{messages, context, sessionState}` in, `message` (JSON) or `delta` lines (JSONL) out.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Answer, ContextAndState, Delta, Field, RequestContext, ResponseContext, Role, SessionSpelling,
    SessionState, WireMessage,
};

/// A chat request. Session state may be spelled `sessionState` or `session_state` (never both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<WireMessage>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<RequestContext>,
    #[serde(flatten)]
    pub session_state: SessionState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The answer of `/chat`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub message: WireMessage,
    #[serde(flatten)]
    pub context_and_state: ContextAndState,
}

impl ChatResponse {
    pub fn from_answer(answer: &Answer, spelling: SessionSpelling) -> Self {
        Self {
            message: WireMessage::assistant(answer.content.clone()),
            context_and_state: ContextAndState::of_answer(answer, spelling),
        }
    }
}

/// One line of `/chat/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    pub delta: Delta,
    #[serde(flatten)]
    pub context_and_state: ContextAndState,
}

impl StreamChunk {
    /// The first line: the assistant's role, the context known before the answer, and the session state.
    pub fn start(
        context: ResponseContext,
        session_state: Option<Value>,
        spelling: SessionSpelling,
    ) -> Self {
        Self {
            delta: Delta::role(Role::Assistant),
            context_and_state: ContextAndState::answer(Some(context), session_state, spelling),
        }
    }

    /// A piece of the answer's text.
    pub fn content(text: impl Into<String>) -> Self {
        Self {
            delta: Delta::content(text),
            context_and_state: ContextAndState::line(None),
        }
    }

    /// A piece of the model's reasoning, before the answer's text: in `context`, never in `delta.content`.
    pub fn reasoning(piece: &str, redacted: bool) -> Self {
        Self::end(ResponseContext::reasoning(piece, redacted))
    }

    /// A line carrying context as it happens (a tool call, its result, what a search found): no text.
    pub fn context(context: ResponseContext) -> Self {
        Self::end(context)
    }

    /// A last line carrying context learned at the end (follow-up questions, token usage).
    pub fn end(context: ResponseContext) -> Self {
        Self {
            delta: Delta::default(),
            context_and_state: ContextAndState::line(Some(context)),
        }
    }
}
