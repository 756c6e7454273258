//! The protocol crate: wire types of every dialect this backend speaks, their validation, and their mapping to and
//! from the core's conversation model (`chat_core`). Pure: no I/O, no AWS types.

pub mod chat_ui;
mod error;
mod field;
mod files;
mod model;
mod multipart;
mod request;
pub mod v2024_01_28;
pub mod v2024_05_29;
mod wire;

pub use field::Field;
pub use files::text_outside_files;
pub use model::{
    ChatInput, Dialect, Endpoint, SessionSpelling, Thought, openai_finish_reason,
    semantic_kernel_finish_reason,
};
pub use multipart::{is_multipart, parse_multipart_chat_request};
pub use request::{parse_body, parse_chat_request, parse_replace_request};
pub use wire::{
    Delta, ErrorBody, RequestContext, ResponseContext, WireDataPoints, WireMessage, WireOverrides,
    json_line,
};

use serde_json::Value;

// The core's conversation model, which every dialect here maps to and from.
use chat_core::{Answer, FinishReason, Message, Role, TokenUsage};

/// The two session-state fields of an answer: the request's spelling carries the state (or `null`), the other is
/// left out.
pub(crate) fn session_fields(
    state: Option<Value>,
    spelling: SessionSpelling,
) -> (Field<Value>, Field<Value>) {
    match spelling {
        SessionSpelling::Camel => (state.into(), Field::Missing),
        SessionSpelling::Snake => (Field::Missing, state.into()),
    }
}
