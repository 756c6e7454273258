//! Serving a function's edge ([`crate::FunctionService`]): under Lambda's runtime when the environment has
//! `AWS_LAMBDA_RUNTIME_API` (as every Lambda execution environment does), else as a plain HTTP server on `PORT`, so
//! that the same binary runs in a container or on any host.
//!
//! The plain server sets TCP_NODELAY on every connection (a streamed line never waits for a delayed ACK), listens on
//! `BIND_ADDRESS` (default `0.0.0.0`, as a container needs) and `PORT` (default 8080), and on SIGTERM or Ctrl-C
//! stops accepting and lets the requests in flight, streams included, finish.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::response::Response;
use axum::serve::ListenerExt;
use http_body::{Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use lambda_http::service_fn;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

use chat_edge::ConfigError;

/// How a function's answers go back under Lambda's runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Responses {
    /// Whole (`lambda_http::run`): the function URL's `BUFFERED` invoke mode.
    Buffered,
    /// As they are written (`run_with_streaming_response`): `RESPONSE_STREAM`.
    Streamed,
}

/// Serves `service` until the runtime loop ends (Lambda) or a shutdown signal (plain server).
pub async fn serve<S>(service: S, responses: Responses) -> Result<(), lambda_http::Error>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S: Service<lambda_http::Request, Response = Response, Error = Infallible>,
    <S as Service<Request>>::Future: Send + 'static,
    <S as Service<lambda_http::Request>>::Future: Send + 'static,
{
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        return on_lambda(service, responses).await;
    }
    let address = server_address(|name| std::env::var(name).ok())?;
    let listener = TcpListener::bind(address).await?;
    tracing::info!(%address, "no AWS_LAMBDA_RUNTIME_API: serving plain HTTP");
    serve_plain(listener, service, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Serves `service` as a plain HTTP/1.1 server on `listener`, TCP_NODELAY on every connection, until `shutdown`
/// completes; then waits for the requests in flight, and sends their spans to the collector when one is configured
/// ([`crate::traces`]).
pub async fn serve_plain<S>(
    listener: TcpListener,
    service: S,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    <S as Service<Request>>::Future: Send + 'static,
{
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
    });
    axum::serve(listener, axum::ServiceExt::into_make_service(service))
        .with_graceful_shutdown(shutdown)
        .await?;
    // The spans of the last requests, when a collector is configured (crate::traces).
    crate::traces::flush().await;
    Ok(())
}

/// SIGTERM (a container's stop) or Ctrl-C.
pub async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down: no new connections; finishing the requests in flight");
}

/// `BIND_ADDRESS` (default `0.0.0.0`) and `PORT` (default 8080).
pub fn server_address(lookup: impl Fn(&str) -> Option<String>) -> Result<SocketAddr, ConfigError> {
    let ip: IpAddr = match lookup("BIND_ADDRESS").filter(|v| !v.trim().is_empty()) {
        None => IpAddr::from([0, 0, 0, 0]),
        Some(v) => v.trim().parse().map_err(|_| ConfigError {
            name: "BIND_ADDRESS",
            reason: format!("expected an IP address, got {v:?}"),
        })?,
    };
    let port: u16 = match lookup("PORT").filter(|v| !v.trim().is_empty()) {
        None => 8080,
        Some(v) => v.trim().parse().map_err(|_| ConfigError {
            name: "PORT",
            reason: format!("expected a port number, got {v:?}"),
        })?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// Under Lambda's runtime: each request first makes sure the Runtime API connection has TCP_NODELAY (see
/// [`crate::runtime`]); AWS_LAMBDA_MAX_CONCURRENCY requests are polled at once (one when unset); a failed exchange
/// with the Runtime API starts the loop again ([`crate::keep_running`]); spans are flushed to a configured collector
/// after each invocation ([`crate::traces`]).
async fn on_lambda<S>(service: S, responses: Responses) -> Result<(), lambda_http::Error>
where
    S: Service<lambda_http::Request, Response = Response, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    match responses {
        Responses::Buffered => {
            let handler = crate::with_runtime_api_nodelay(move |request: lambda_http::Request| {
                let service = service.clone();
                async move {
                    let response = service.oneshot(request).await?;
                    // Whole, as Lambda sends it anyway: the runtime's conversion wants a body it can share.
                    let (parts, body) = response.into_parts();
                    let bytes = match body.collect().await {
                        Ok(collected) => collected.to_bytes(),
                        Err(e) => {
                            tracing::error!(error = %e, "a buffered answer could not be read whole");
                            bytes::Bytes::new()
                        }
                    };
                    Ok::<_, Infallible>(Response::from_parts(parts, Full::new(bytes)))
                }
            });
            crate::keep_running(|| {
                crate::traces::run_concurrent(lambda_http::runtime_concurrent(service_fn(
                    handler.clone(),
                )))
            })
            .await
        }
        Responses::Streamed => {
            // Boxed: the handler's future is deep enough to overflow the compiler's layout query depth when
            // inlined into the runtime's own futures.
            let handler = crate::with_runtime_api_nodelay(move |request: lambda_http::Request| {
                let service = service.clone();
                Box::pin(async move {
                    let mut response = service.oneshot(request).await?;
                    // A stream's length is not known up front; a whole error's is, but the runtime frames it.
                    response.headers_mut().remove(header::CONTENT_LENGTH);
                    Ok::<_, Infallible>(response.map(FirstRead::new))
                })
                    as Pin<Box<dyn Future<Output = Result<Response<FirstRead>, Infallible>> + Send>>
            });
            crate::keep_running(|| {
                crate::traces::run_concurrent(lambda_http::streaming_runtime_concurrent(
                    service_fn(handler.clone()),
                ))
            })
            .await
        }
    }
}

/// A response body that, when the runtime first reads it, makes sure the response's own connection has
/// TCP_NODELAY: with several requests at once, it may be one opened after the request's check
/// ([`crate::on_streamed_body_start`]).
pub struct FirstRead {
    body: Body,
    read: bool,
}

impl FirstRead {
    fn new(body: Body) -> Self {
        Self { body, read: false }
    }
}

impl http_body::Body for FirstRead {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if !self.read {
            self.read = true;
            crate::on_streamed_body_start();
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(pairs: &[(&str, &str)]) -> Result<SocketAddr, ConfigError> {
        server_address(chat_edge::settings_in(pairs))
    }

    #[test]
    fn the_plain_server_listens_where_the_environment_says() {
        assert_eq!(address(&[]).unwrap(), "0.0.0.0:8080".parse().unwrap());
        assert_eq!(
            address(&[("PORT", "9001"), ("BIND_ADDRESS", "127.0.0.1")]).unwrap(),
            "127.0.0.1:9001".parse().unwrap()
        );
        assert_eq!(address(&[("PORT", "http")]).unwrap_err().name, "PORT");
        assert_eq!(
            address(&[("BIND_ADDRESS", "localhost")]).unwrap_err().name,
            "BIND_ADDRESS"
        );
    }
}
