//! The protocol crate: wire types of every dialect this backend speaks, their validation, and their mapping to and
//! from the core's conversation model (`chat_core`). Pure: no I/O, no AWS types.

pub mod answers;
pub mod anthropic;
pub mod chat_ui;
pub mod documents;
pub mod encode;
mod error;
mod field;
mod files;
mod model;
mod multipart;
mod object;
pub mod openai;
mod read;
mod request;
pub mod responses;
pub mod v2024_01_28;
pub mod v2024_05_29;
mod wire;

pub use answers::{AgentEvents, ProtocolAnswer};
pub use encode::{Encoder, ErrorShape, Fault, FaultKind, PlainErrors, Whole, WholeEncoder};
pub use field::Field;
pub use files::text_outside_files;
pub use model::{
    ChatInput, Dialect, Endpoint, SessionSpelling, Thought, openai_finish_reason,
    semantic_kernel_finish_reason,
};
pub use multipart::{is_multipart, parse_multipart_chat_request};
pub use request::{parse_body, parse_chat_request, parse_replace_request};
pub use wire::{
    ContextAndState, Delta, ErrorBody, RequestContext, ResponseContext, SessionState,
    WireDataPoints, WireMessage, WireOverrides, json_line,
};

// The core's conversation model, which every dialect here maps to and from.
use chat_core::{Answer, FinishReason, Message, Role, TokenUsage};
