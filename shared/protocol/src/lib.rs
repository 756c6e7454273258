//! The protocol crate: wire types of every dialect this backend speaks, their validation, and the one internal
//! model of a conversation they all map to. Pure: no I/O, no AWS types.

pub mod chat_ui;
mod error;
mod field;
mod model;
mod request;
pub mod v2024_01_28;
pub mod v2024_05_29;
mod wire;

pub use error::InvalidRequest;
pub use field::Field;
pub use model::{
    Answer, ChatInput, Dialect, FinishReason, Message, Overrides, Role, SessionSpelling, Thought,
    TokenUsage,
};
pub use request::{Endpoint, RequestLimits, parse_body, parse_chat_request, parse_replace_request};
pub use wire::{
    Delta, ErrorBody, RequestContext, ResponseContext, WireMessage, WireOverrides, json_line,
};

use serde_json::Value;

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
