//! The composition root of the backend: where the application is put together. [`App::build`] reads the
//! configuration, builds the AWS clients, adapters and the chat service once per cold start, and hands a function
//! (or the local run) the routes it serves; the function crates choose only which [`Function`] they are
//! ([`Buffered`], [`Streamed`], [`History`]) and how Lambda invokes them.
//!
//! - [`config`]: every setting, read from the environment once.
//! - [`backends`]: settings turned into adapters (Bedrock, DynamoDB, S3, the knowledge base, MCP servers).
//! - [`chat`]: the two chat functions' application and routes (buffered, streamed).
//! - [`history`]: the history function's application and routes, and the page.
//! - [`http_client`]: the process's one reqwest client (the JWKS, the OTLP exporter, the MCP servers).
//! - [`root`]: [`App::build`], the one function that wires them, and each [`Function`]'s routes.

// A handler's future over the AWS adapters nests deeper than rustc's default query depth (128) when its layout is
// computed: axum's handler, the turn's driver, the SDK's calls.
#![recursion_limit = "256"]

pub mod backends;
mod before_serving;
pub mod chat;
pub mod config;
pub mod history;
mod http_client;
pub mod root;

pub use backends::{Backends, mcp_servers};
pub use chat::{Buffered, ChatApp, ChatFunction, ChatState, Streamed};
pub use config::Config;
pub use history::{HistoryApp, NEXT_CURSOR_HEADER, Page, PageSettings};
pub use http_client::http_client;
pub use root::{App, Everything, Function, History, Parts, run};
