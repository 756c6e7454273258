//! What the functions share at the HTTP edge: settings from the environment, the edge around a function's routes
//! (errors as responses in one place, CORS, limits), and serving it under Lambda's runtime or as a plain server.

mod backends;
mod config;
mod cors;
mod edge;
mod error;
mod extract;
mod http_client;
mod identity;
mod init;
mod logging;
mod metrics;
mod request;
mod runtime;
mod serve;
mod traces;

pub use axum::http::Method;
pub use backends::{Backends, ChatBackends};
pub use config::{Config, ConfigError};
pub use cors::{Cors, LOOPBACK_ORIGINS};
pub use edge::{FunctionService, WithCors, answer_one, function_service, only};
pub use error::{ApiError, error_body, error_line, error_response, json_response};
pub use extract::{
    Arrived, CallerAnd, ChatEdgeState, ChatRequest, ChatRoute, ChatUiRoute, Deadline, EdgeState,
    Identified, JsonBody, ProtocolRoute, ROOM_TO_FINISH,
};
pub use http_client::http_client;
pub use identity::{Auth, CallerParts, JwtVerifier, KeySource};
pub use init::{MISCONFIGURED, start};
pub use logging::init_logging;
pub use metrics::{FailureClass, TurnMeter, TurnOutcome, init_metrics};
pub use request::{
    DRAIN_FOR, DRAIN_LIMIT_BYTES, Query, accepts, read_chat_request, read_json_body,
};
pub use runtime::{
    Flavor, RuntimeSettings, keep_running, on_streamed_body_start, run_function,
    with_runtime_api_nodelay,
};
pub use serve::{FirstRead, Responses, serve, serve_plain, server_address, shutdown_signal};
