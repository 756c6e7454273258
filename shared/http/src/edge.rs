//! The one path every request of every function takes out: CORS, errors as responses, one log line.

use std::future::Future;
use std::time::Instant;

use lambda_http::{Body, Request, Response};

use crate::{ApiError, Cors, error_response, normalized_path};

/// Answers `request`: a CORS preflight without routing; otherwise the outcome of `route` (an error becomes its
/// JSON response through [`error_response`]), with CORS headers for allowed browser origins. `methods` are the
/// function's own, for preflights; `from_buffered` turns a buffered response into the function's body type.
/// Logs one line per request with its status and how long it took to answer (for a stream, until its headers).
pub async fn respond<B>(
    request: &Request,
    cors: &Cors,
    methods: &str,
    from_buffered: impl Fn(Response<Body>) -> Response<B>,
    route: impl Future<Output = Result<Response<B>, ApiError>>,
) -> Response<B> {
    if let Some(preflight) = cors.preflight(request, methods) {
        return from_buffered(preflight);
    }
    let started = Instant::now();
    let mut response = match route.await {
        Ok(response) => response,
        Err(err) => from_buffered(error_response(&err)),
    };
    cors.decorate(request, response.headers_mut());
    tracing::info!(
        method = %request.method(),
        path = normalized_path(request),
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_millis() as u64,
        "request answered"
    );
    response
}
