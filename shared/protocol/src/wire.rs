//! Wire types the dialects share: a message, a streamed delta, the session state, the request and response
//! context, an error body.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Answer, Field, Message, Role, SessionSpelling, Thought};

/// A message as it travels: `role` and `content`, plus whatever else the sender put there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireMessage {
    pub role: Role,
    pub content: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl From<&Message> for WireMessage {
    fn from(m: &Message) -> Self {
        Self {
            role: m.role,
            content: m.text(),
            extra: Map::new(),
        }
    }
}

impl WireMessage {
    /// The assistant's message saying `content`.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            extra: Map::new(),
        }
    }
}

/// The session state as every dialect carries it, in a request or an answer: spelled `sessionState` or
/// `session_state` (a request sends one of them at most), each absent, `null` or a value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SessionState {
    #[serde(
        rename = "sessionState",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub camel: Field<Value>,
    #[serde(
        rename = "session_state",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub snake: Field<Value>,
}

impl SessionState {
    /// An answer's: in the request's spelling, the state (or `null`); the other spelling left out.
    pub fn answer(state: Option<Value>, spelling: SessionSpelling) -> Self {
        match spelling {
            SessionSpelling::Camel => Self {
                camel: state.into(),
                snake: Field::Missing,
            },
            SessionSpelling::Snake => Self {
                camel: Field::Missing,
                snake: state.into(),
            },
        }
    }
}

/// The members an answer of the AI Chat Protocol carries after its own (a whole answer or its choice, a streamed line
/// or its chunk's choice): `context`, the session state in the request's spelling, and any other member.
/// Answers only: a request's members stay its own, so that a fault in one is refused at its path.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ContextAndState {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<ResponseContext>,
    #[serde(flatten)]
    pub session_state: SessionState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ContextAndState {
    /// An answer's: `context` (when given) and the session state in the request's spelling.
    pub fn answer(
        context: Option<ResponseContext>,
        state: Option<Value>,
        spelling: SessionSpelling,
    ) -> Self {
        Self {
            context: context.map_or(Field::Missing, Field::Value),
            session_state: SessionState::answer(state, spelling),
            extra: Map::new(),
        }
    }

    /// A whole answer's: its context and its session state.
    pub fn of_answer(answer: &Answer, spelling: SessionSpelling) -> Self {
        Self::answer(
            Some(ResponseContext::of_answer(answer)),
            answer.session_state.clone(),
            spelling,
        )
    }

    /// A streamed line's after the first: `context` (when given), no session state.
    pub fn line(context: Option<ResponseContext>) -> Self {
        Self {
            context: context.map_or(Field::Missing, Field::Value),
            ..Self::default()
        }
    }
}

/// A piece of a streamed message; each part may be absent or `null`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Delta {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub role: Field<Role>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub content: Field<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Delta {
    pub fn role(role: Role) -> Self {
        Self {
            role: Field::Value(role),
            ..Self::default()
        }
    }

    pub fn content(text: impl Into<String>) -> Self {
        Self {
            content: Field::Value(text.into()),
            ..Self::default()
        }
    }
}

/// `context` of a request: `overrides`, and anything else an application defines.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestContext {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub overrides: Field<WireOverrides>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context.overrides` as sent: the settings this backend honours are typed, the rest is kept and ignored.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WireOverrides {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub temperature: Field<f64>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub top_p: Field<f64>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub max_tokens: Field<u64>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub suggest_followup_questions: Field<bool>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub prompt_template: Field<String>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub top: Field<u64>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub retrieval_mode: Field<String>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub minimum_search_score: Field<f64>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub exclude_category: Field<String>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub use_oid_security_filter: Field<bool>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub use_groups_security_filter: Field<bool>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub reasoning_effort: Field<String>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub latency: Field<String>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub service_tier: Field<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context.data_points`: what the answer was grounded in, as the reference backends return it. Ours always
/// holds `text` and `citations`; the protocol's examples show other members (`images`) and omit some, which are
/// kept as they came.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WireDataPoints {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub text: Field<Vec<String>>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub citations: Field<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl From<&chat_core::DataPoints> for WireDataPoints {
    fn from(d: &chat_core::DataPoints) -> Self {
        Self {
            text: Field::Value(d.text.clone()),
            citations: Field::Value(d.citations.clone()),
            extra: Map::new(),
        }
    }
}

/// `context` of a response: `thoughts`, `followup_questions`, and anything else (such as `data_points`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResponseContext {
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub data_points: Field<WireDataPoints>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub thoughts: Field<Vec<Thought>>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub followup_questions: Field<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ResponseContext {
    pub fn new(thoughts: &[chat_core::Thought], followup_questions: Option<Vec<String>>) -> Self {
        Self {
            data_points: Field::Missing,
            thoughts: Field::Value(thoughts.iter().map(Thought::from).collect()),
            followup_questions: followup_questions.map_or(Field::Missing, Field::Value),
            extra: Map::new(),
        }
    }
}

impl ResponseContext {
    /// A whole answer's context: its thoughts, follow-up questions and what it was grounded in.
    pub fn of_answer(answer: &Answer) -> Self {
        Self::new(&answer.thoughts(), answer.followup_questions.clone())
            .with_data_points(answer.data_points.as_ref())
    }

    /// A streamed line's context carrying the next piece of the model's reasoning: a `Reasoning` thought whose
    /// `props.delta` says its description continues the reasoning of the lines before (concatenated, they are the
    /// whole reasoning, which the last line's thoughts hold again). `redacted` says a part came encrypted.
    pub fn reasoning(piece: &str, redacted: bool) -> Self {
        let thought = chat_core::Thought {
            title: "Reasoning".into(),
            description: Value::String(piece.to_string()),
            props: Some(serde_json::json!({ "delta": true, "redacted": redacted })),
        };
        Self::new(&[thought], None)
    }

    /// With what the answer was grounded in, when the turn searched.
    pub fn with_data_points(mut self, data_points: Option<&chat_core::DataPoints>) -> Self {
        self.data_points = data_points.map_or(Field::Missing, |d| Field::Value(d.into()));
        self
    }
}

/// Every error the backend answers, in every dialect: `{"error": "<message for a person>"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorBody {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            extra: Map::new(),
        }
    }
}

/// Serializes one JSON Lines record: the object and its `\n`.
pub fn json_line<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain data types cannot fail: no maps with non-string keys, no failing Serialize impls.
    let mut line = serde_json::to_vec(value).expect("wire types always serialize");
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::json_line;
    use crate::v2024_01_28::{ChatCompletionChunk, ChunkHeader};
    use crate::v2024_05_29::StreamChunk;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    /// The members every answer carries after its own are written in the same order, to the byte, in both
    /// versions: `context`, then the session state in the request's spelling.
    #[test]
    fn an_answers_context_and_session_state_come_after_its_own_members_in_order() {
        let context = ResponseContext::new(&[], Some(vec!["Why?".into()]));
        assert_eq!(
            text(json_line(&StreamChunk::start(
                context.clone(),
                Some(json!("s")),
                SessionSpelling::Snake
            ))),
            "{\"delta\":{\"role\":\"assistant\"},\"context\":{\"thoughts\":[],\"followup_questions\":[\"Why?\"]},\"session_state\":\"s\"}\n"
        );
        assert_eq!(
            text(json_line(&StreamChunk::content("Hi"))),
            "{\"delta\":{\"content\":\"Hi\"}}\n"
        );
        let header = ChunkHeader {
            id: "c".into(),
            created: 1,
            model: "m".into(),
        };
        assert_eq!(
            text(json_line(&ChatCompletionChunk::start(
                &header,
                context.clone(),
                None,
                SessionSpelling::Camel
            ))),
            "{\"id\":\"c\",\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0,\"context\":{\"thoughts\":[],\"followup_questions\":[\"Why?\"]},\"sessionState\":null}],\"created\":1,\"model\":\"m\",\"object\":\"chat.completion.chunk\"}\n"
        );
        assert_eq!(
            text(json_line(&ChatCompletionChunk::finish(
                &header,
                chat_core::FinishReason::Stop,
                chat_core::TokenUsage {
                    input_tokens: 1,
                    output_tokens: 1,
                    total_tokens: 2,
                    ..Default::default()
                },
                context
            ))),
            "{\"id\":\"c\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\",\"index\":0,\"context\":{\"thoughts\":[],\"followup_questions\":[\"Why?\"]}}],\"created\":1,\"model\":\"m\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":1,\"total_tokens\":2}}\n"
        );
    }
}
