//! What the functions share at the HTTP edge: settings from the environment, reading a request body, and the one
//! place where errors become HTTP responses.

mod config;
mod cors;
mod edge;
mod error;
mod identity;
mod logging;
mod request;
mod runtime;

pub use config::{Config, ConfigError};
pub use cors::Cors;
pub use edge::respond;
pub use error::{ApiError, error_body, error_line, error_response, json_response};
pub use identity::{Auth, JwtVerifier, KeySource};
pub use logging::init_logging;
pub use request::{accepts, normalized_path, read_json_body};
pub use runtime::{
    Flavor, RuntimeSettings, keep_running, on_streamed_body_start, run_function,
    with_runtime_api_nodelay,
};
