//! The HTTP edge every function shares, declared once. A function's routes are an axum `Router`; around them go a
//! JSON 404 for every other path, a JSON 405 with `Allow` for every other method, trailing slashes trimmed
//! (`/chat/` is `/chat`), CORS from tower-http when `CORS_ALLOWED_ORIGINS` names origins, and one log line per
//! request. The same service is what Lambda's runtime and the plain HTTP server ([`crate::serve`]) run.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{self, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower::{Service, ServiceExt};
use tower_http::cors::Cors as CorsService;
use tower_http::normalize_path::NormalizePath;
use tracing::Instrument;

use chat_edge::{ApiError, Cors};

/// A function's whole edge: its routes and everything around them.
pub type FunctionService = NormalizePath<WithCors>;

/// `routes` (a function's, or several functions' merged) as a complete service: see the module's notes.
/// `methods` are what a CORS preflight is told the routes answer.
pub fn function_service(routes: Router, cors: &Cors, methods: &[Method]) -> FunctionService {
    let router = routes
        .fallback(not_found)
        .layer(middleware::from_fn(log_request));
    let with_cors = cors
        .layer(methods)
        .map(|layer| tower::Layer::layer(&layer, router.clone()));
    NormalizePath::trim_trailing_slash(WithCors {
        plain: router,
        with_cors,
    })
}

/// Answers one request through a function's whole edge: what tests call (the runtime serves the service itself).
pub async fn answer_one<B>(service: FunctionService, request: http::Request<B>) -> Response
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let result: Result<Response, Infallible> = service.oneshot(request).await;
    match result {
        Ok(response) => response,
    }
}

async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::NotFound(uri.path().to_string())
}

/// One line per request: method, path, status and how long it took to answer (for a stream, until its headers);
/// and around all the request's work and lines its span, with the request's ids ([`crate::traces`]).
async fn log_request(request: Request, next: Next) -> Response {
    let span = crate::traces::request_span(&request);
    let answering = async {
        let started = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let response = next.run(request).await;
        tracing::info!(
            method = %method,
            path = %path,
            status = response.status().as_u16(),
            duration_ms = started.elapsed().as_millis() as u64,
            "request answered"
        );
        response
    };
    let response = answering.instrument(span.clone()).await;
    span.record("status", response.status().as_u16());
    response
}

/// The routes with CORS, except for an `OPTIONS` that is no preflight (no `Access-Control-Request-Method`): that
/// one reaches the routes and is their 405, as it is without CORS. (tower-http takes every `OPTIONS` for a
/// preflight.)
#[derive(Clone)]
pub struct WithCors {
    plain: Router,
    with_cors: Option<CorsService<Router>>,
}

impl<B> Service<http::Request<B>> for WithCors
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // A router is always ready; each call below runs on a clone of it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let request = request.map(Body::new);
        let preflight = request.method() == Method::OPTIONS
            && request
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
        match &self.with_cors {
            Some(with_cors) if preflight || request.method() != Method::OPTIONS => {
                let service = with_cors.clone();
                Box::pin(async move {
                    let response = service.oneshot(request).await?;
                    Ok(response.map(Body::new))
                })
            }
            _ => Box::pin(self.plain.clone().oneshot(request)),
        }
    }
}
