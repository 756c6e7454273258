//! How a function runs: its edge around the routes (a JSON 404 and 405, trailing slashes, CORS, a log line and span
//! per request), served under Lambda's runtime (buffered or streamed) or as a plain HTTP server, a configuration
//! error reported once, and the process's logging, traces and metrics.

mod deferred;
mod init;
mod logging;
mod metrics;
mod runtime;
mod serve;
mod service;
mod trace_only;
mod traces;

pub use init::{MISCONFIGURED, start};
pub use logging::init_logging;
pub use metrics::{FailureClass, TurnMeter, TurnOutcome, init_metrics};
pub use runtime::{
    Flavor, RuntimeSettings, keep_running, on_streamed_body_start, run_function,
    with_runtime_api_nodelay,
};
pub use serve::{FirstRead, Responses, serve, serve_plain, server_address, shutdown_signal};
pub use service::{FunctionService, WithCors, answer_one, function_service};
pub use trace_only::TRACE_ONLY;
