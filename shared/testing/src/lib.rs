//! Test support for the chat backend: fakes of the core's ports, so that the core's behaviour is tested in
//! milliseconds without a network ([`InMemoryStore`], [`ScriptedModel`], [`FakeRetriever`]); the store's contract
//! ([`contract`]), one suite that every [`chat_core::SessionStore`] passes (and the like for the usage ledger, the
//! API keys and the documents' ports: [`usage_contract`], [`api_key_contract`], [`document_contract`]); and, with
//! the `harness` feature, what the functions' tests share ([`harness`]: local Bedrock, a fresh moto table,
//! configuration, requests and replies). [`LogLines`] keeps what a test's log subscriber writes.
//!
//! It is a dev-dependency only: nothing here is production code.

pub mod api_keys;
mod attachments;
pub mod bytes;
pub mod contract;
pub mod documents;
pub mod filters;
mod logs;
mod memory;
mod model;
mod responses;
mod retriever;
mod tool_source;
pub mod turns;
mod usage;

#[cfg(feature = "harness")]
pub mod access;
#[cfg(feature = "harness")]
pub mod harness;
#[cfg(feature = "harness")]
pub mod setup;

pub use api_keys::{InMemoryApiKeys, api_key_contract};
pub use attachments::InMemoryAttachments;
pub use documents::{InMemoryDocumentIndex, InMemoryDocumentStore, document_contract};
pub use logs::LogLines;
pub use memory::{InMemoryStore, StoreOp};
pub use model::{Script, ScriptedModel, ScriptedStream, short_words};
pub use responses::{InMemoryResponses, response_store_contract};
pub use retriever::FakeRetriever;
pub use tool_source::FixedTools;
pub use turns::{FakeService, agents, ask, fakes, input, pdf, png, settings, settings_for};
pub use usage::{InMemoryUsage, usage_contract, watch_contract};
