//! AI Chat Protocol 2024-05-29: `{messages, context, sessionState}` in, `message` (JSON) or `delta` lines (JSONL) out.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Answer, Delta, Field, RequestContext, ResponseContext, Role, SessionSpelling, SessionState,
    WireMessage,
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
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<ResponseContext>,
    #[serde(flatten)]
    pub session_state: SessionState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatResponse {
    pub fn from_answer(answer: &Answer, spelling: SessionSpelling) -> Self {
        Self {
            message: WireMessage::assistant(answer.content.clone()),
            context: Field::Value(ResponseContext::of_answer(answer)),
            session_state: SessionState::answer(answer.session_state.clone(), spelling),
            extra: Map::new(),
        }
    }
}

/// One line of `/chat/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    pub delta: Delta,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<ResponseContext>,
    #[serde(flatten)]
    pub session_state: SessionState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl StreamChunk {
    /// A line of `delta` and `context`, without session state.
    fn line(delta: Delta, context: Field<ResponseContext>) -> Self {
        Self {
            delta,
            context,
            session_state: SessionState::default(),
            extra: Map::new(),
        }
    }

    /// The first line: the assistant's role, the context known before the answer, and the session state.
    pub fn start(
        context: ResponseContext,
        session_state: Option<Value>,
        spelling: SessionSpelling,
    ) -> Self {
        Self {
            session_state: SessionState::answer(session_state, spelling),
            ..Self::line(Delta::role(Role::Assistant), Field::Value(context))
        }
    }

    /// A piece of the answer's text.
    pub fn content(text: impl Into<String>) -> Self {
        Self::line(Delta::content(text), Field::Missing)
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
        Self::line(Delta::default(), Field::Value(context))
    }
}
