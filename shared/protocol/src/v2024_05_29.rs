//! AI Chat Protocol 2024-05-29: `{messages, context, sessionState}` in, `message` (JSON) or `delta` lines (JSONL) out.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Answer, Delta, Field, RequestContext, ResponseContext, Role, SessionSpelling, WireMessage,
    session_fields,
};

/// A chat request. Session state may be spelled `sessionState` or `session_state` (never both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<WireMessage>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<RequestContext>,
    #[serde(
        rename = "sessionState",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_camel: Field<Value>,
    #[serde(
        rename = "session_state",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_snake: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The answer of `/chat`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub message: WireMessage,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<ResponseContext>,
    #[serde(
        rename = "sessionState",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_camel: Field<Value>,
    #[serde(
        rename = "session_state",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_snake: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatResponse {
    pub fn from_answer(answer: &Answer, spelling: SessionSpelling) -> Self {
        let (session_state_camel, session_state_snake) =
            session_fields(answer.session_state.clone(), spelling);
        Self {
            message: WireMessage {
                role: Role::Assistant,
                content: answer.content.clone(),
                extra: Map::new(),
            },
            context: Field::Value(
                ResponseContext::new(&answer.thoughts(), answer.followup_questions.clone())
                    .with_data_points(answer.data_points.as_ref()),
            ),
            session_state_camel,
            session_state_snake,
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
    #[serde(
        rename = "sessionState",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_camel: Field<Value>,
    #[serde(
        rename = "session_state",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_snake: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl StreamChunk {
    /// The first line: the assistant's role, the context known before the answer, and the session state.
    pub fn start(
        context: ResponseContext,
        session_state: Option<Value>,
        spelling: SessionSpelling,
    ) -> Self {
        let (session_state_camel, session_state_snake) = session_fields(session_state, spelling);
        Self {
            delta: Delta::role(Role::Assistant),
            context: Field::Value(context),
            session_state_camel,
            session_state_snake,
            extra: Map::new(),
        }
    }

    /// A piece of the answer's text.
    pub fn content(text: impl Into<String>) -> Self {
        Self {
            delta: Delta::content(text),
            context: Field::Missing,
            session_state_camel: Field::Missing,
            session_state_snake: Field::Missing,
            extra: Map::new(),
        }
    }

    /// A piece of the model's reasoning, before the answer's text: in `context`, never in `delta.content`.
    pub fn reasoning(piece: &str, redacted: bool) -> Self {
        Self {
            delta: Delta::default(),
            context: Field::Value(ResponseContext::reasoning(piece, redacted)),
            session_state_camel: Field::Missing,
            session_state_snake: Field::Missing,
            extra: Map::new(),
        }
    }

    /// A line carrying context as it happens (a tool call, its result, what a search found): no text.
    pub fn context(context: ResponseContext) -> Self {
        Self::end(context)
    }

    /// A last line carrying context learned at the end (follow-up questions, token usage).
    pub fn end(context: ResponseContext) -> Self {
        Self {
            delta: Delta::default(),
            context: Field::Value(context),
            session_state_camel: Field::Missing,
            session_state_snake: Field::Missing,
            extra: Map::new(),
        }
    }
}
