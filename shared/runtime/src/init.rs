//! A configuration error at cold start (a bad number, a missing variable) told in words people can act on: the
//! operator reads which variable and why, once, in the log and (on Lambda) in Lambda's own record of the failed
//! start; a caller of the plain server reads that the service is misconfigured, and nothing of its configuration.
//! Before this, a [`ConfigError`] ended the process: Lambda saw a runtime that exited (`Runtime.ExitError`), and a
//! function URL's caller got Lambda's bare 502.
//!
//! [`start`] builds a function's service and serves it ([`crate::serve`]); when building fails it logs the error
//! once at ERROR (`variable`, `reason`) and then:
//!
//! - **Under Lambda** (`AWS_LAMBDA_RUNTIME_API` set) it posts the error to the Runtime API's initialization error
//!   path (`POST …/2018-06-01/runtime/init/error`, `Lambda-Runtime-Function-Error-Type: Runtime.ConfigError`, body
//!   `{"errorMessage": "environment variable NAME: why", "errorType": "Runtime.ConfigError", "stackTrace": []}`),
//!   waiting at most [`REPORT_TIMEOUT`] for the answer, and exits (status 1) without serving. Lambda's guide to
//!   custom runtimes says as much ("if an error occurs, call the initialization error API and exit immediately"),
//!   and serving on would not work: Lambda's Runtime API (as its published runtime interface emulator implements
//!   it) hands the posted error to the invocation that was waiting for the start as that invocation's answer, and
//!   from then on refuses `GET …/invocation/next` (403: no transition out of the init-error state), so this
//!   environment can take no request; the next request starts a new environment, whose start fails the same way
//!   and logs it once more (once per environment). The function URL's caller therefore gets Lambda's 502 for a
//!   function error, not this module's 500: that is the price of telling Lambda. The alternative, hiding the error
//!   from Lambda and answering every request with a 500 from a runtime Lambda believes healthy, would give callers a
//!   better sentence but leave Lambda's `Errors` metric, its report of the start and any alarm or gradual
//!   deployment watching them blind to a broken configuration; a misconfiguration is the operator's to see first.
//!   The message Lambda keeps names the variable and why: it reaches the function's log and those allowed to
//!   invoke the function directly (`aws lambda invoke`), never a function URL's caller, to whom Lambda answers its
//!   own "Internal Server Error".
//! - **As a plain server** (no Runtime API) it listens where [`crate::server_address`] says and answers every
//!   request, whatever its method and path, with a 500 `{"error": "the service is misconfigured …"}`
//!   (`content-type: application/json`), which names no variable: that detail is the operator's, in the log. It
//!   stops on SIGTERM or Ctrl-C like the working server. A bad `PORT` or `BIND_ADDRESS` leaves nothing to listen
//!   on: it is logged the same way and the process exits (status 1).
//!
//! No secret reaches the log, the init error or the response: a [`ConfigError`]'s reason quotes at most the value
//! of a setting (a number, a mode, a model id, a URL, a file's path), and no variable read into the configuration
//! holds a credential (the AWS SDKs take theirs from their own chain, never through a `ConfigError`).
//!
//! The tokio runtime's own switches (`CHAT_RUNTIME_FLAVOR`, `CHAT_TCP_NODELAY`) are read before any of this runs
//! ([`crate::run_function`]); a bad one is kept ([`crate::deferred`]) and reported by [`start`] like any other.

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use chat_protocol::ErrorBody;
use tokio::net::TcpListener;

use chat_edge::{ConfigError, json_response};

use crate::{FunctionService, Responses};

/// What a caller of a misconfigured plain server reads.
pub const MISCONFIGURED: &str =
    "the service is misconfigured and cannot answer until its operator fixes its settings";

/// The error type Lambda records for a configuration error (the Runtime API's header and the body's `errorType`).
pub const ERROR_TYPE: &str = "Runtime.ConfigError";

/// How long the Runtime API may take to take the init error: it answers at once on Lambda, and the start has at
/// most 10 s in all.
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// Builds a function's service with `build` and serves it ([`crate::serve`]); a configuration error, from `build`
/// or kept earlier, is reported as the module's notes say instead. Returns once the server stops; under Lambda a
/// configuration error ends the process.
pub async fn start<B>(build: B, responses: Responses) -> Result<(), lambda_http::Error>
where
    B: Future<Output = Result<FunctionService, ConfigError>>,
{
    let deferred = crate::deferred::take();
    let built = match deferred {
        // Nothing is built on a configuration already known to be wrong.
        Some(error) => Err(error),
        None => build.await,
    };
    let error = match built {
        Ok(service) => {
            let served = crate::serve(service, responses).await;
            // Only the plain server's address can be wrong here, and there is then nowhere to listen.
            if let Err(e) = &served
                && let Some(error) = e.downcast_ref::<ConfigError>()
            {
                log(error);
                exit_failed()
            }
            return served;
        }
        Err(error) => error,
    };
    log(&error);
    if let Some(api) = std::env::var_os("AWS_LAMBDA_RUNTIME_API") {
        match report_init_error(&api.to_string_lossy(), &error, REPORT_TIMEOUT).await {
            Ok(status) if status.is_success() => {}
            Ok(status) => tracing::warn!(
                status = status.as_u16(),
                "the Runtime API refused the init error"
            ),
            Err(e) => tracing::warn!(error = %e, "the init error could not be posted"),
        }
        exit_failed()
    }
    let address = match crate::server_address(|name| std::env::var(name).ok()) {
        Ok(address) => address,
        Err(e) => {
            log(&e);
            exit_failed()
        }
    };
    let listener = TcpListener::bind(address).await?;
    tracing::warn!(%address, "no AWS_LAMBDA_RUNTIME_API: serving plain HTTP, a 500 to every request");
    crate::serve_plain(listener, misconfigured_service(), crate::shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// The one line that tells the operator what is wrong.
fn log(error: &ConfigError) {
    tracing::error!(
        variable = error.name,
        reason = %error.reason,
        "invalid configuration"
    );
}

/// Ends the process at once, as the Runtime API asks after an init error, without a second line saying why (the
/// caller's `main` would print the error again).
fn exit_failed() -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(1)
}

/// Why the init error did not reach the Runtime API.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("the Runtime API did not take it: {0}")]
    Send(reqwest::Error),
}

/// Posts `error` to the Runtime API at `api` (`AWS_LAMBDA_RUNTIME_API`: `host:port`, or a URL with a base path)
/// as an init error; the Runtime API's answer, within `timeout`.
pub async fn report_init_error(
    api: &str,
    error: &ConfigError,
    timeout: Duration,
) -> Result<StatusCode, ReportError> {
    let base = api.trim().trim_end_matches('/');
    let url = if base.contains("://") {
        format!("{base}/2018-06-01/runtime/init/error")
    } else {
        format!("http://{base}/2018-06-01/runtime/init/error")
    };
    let body = serde_json::json!({
        "errorMessage": error.to_string(),
        "errorType": ERROR_TYPE,
        "stackTrace": [],
    });
    // The Runtime API is on the environment's own loopback: no proxy stands between.
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(ReportError::Client)?;
    let answer = client
        .post(url)
        .header("lambda-runtime-function-error-type", ERROR_TYPE)
        .header("content-type", "application/vnd.aws.lambda.error+json")
        .body(body.to_string())
        .send()
        .await
        .map_err(ReportError::Send)?;
    Ok(answer.status())
}

/// The plain server's service while the configuration is wrong: [`misconfigured_response`] to everything.
pub fn misconfigured_service() -> Router {
    Router::new().fallback(|| async { misconfigured_response() })
}

/// A 500 `{"error": MISCONFIGURED}`, with no word of which setting is wrong.
pub fn misconfigured_response() -> Response {
    json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &ErrorBody::new(MISCONFIGURED),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::State;
    use axum::http::{HeaderMap, Request};
    use axum::routing::post;
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};
    use tower::ServiceExt;

    fn bad_number() -> ConfigError {
        ConfigError {
            name: "MAX_BODY_BYTES",
            reason: "expected a positive whole number, got \"abc\"".into(),
        }
    }

    type Seen = Arc<Mutex<Vec<(HeaderMap, String)>>>;

    /// A Runtime API that takes init errors (202, as Lambda's), remembering each; `answer_after` delays its answer.
    async fn runtime_api(answer_after: Duration) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = Router::new()
            .route(
                "/2018-06-01/runtime/init/error",
                post(
                    move |State(seen): State<Seen>, headers: HeaderMap, body: String| async move {
                        seen.lock().unwrap().push((headers, body));
                        tokio::time::sleep(answer_after).await;
                        StatusCode::ACCEPTED
                    },
                ),
            )
            .with_state(seen.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (address.to_string(), seen)
    }

    #[tokio::test]
    async fn the_init_error_names_the_variable_and_why() {
        let (api, seen) = runtime_api(Duration::ZERO).await;
        // As Lambda sets it (host:port), and as a URL with a trailing slash.
        for api in [api.clone(), format!("http://{api}/")] {
            let status = report_init_error(&api, &bad_number(), REPORT_TIMEOUT)
                .await
                .unwrap();
            assert_eq!(status, StatusCode::ACCEPTED);
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        for (headers, body) in seen.iter() {
            assert_eq!(
                headers["lambda-runtime-function-error-type"],
                "Runtime.ConfigError"
            );
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(
                body,
                serde_json::json!({
                    "errorMessage": "environment variable MAX_BODY_BYTES: expected a positive whole number, got \"abc\"",
                    "errorType": "Runtime.ConfigError",
                    "stackTrace": [],
                })
            );
        }
    }

    #[tokio::test]
    async fn a_runtime_api_that_does_not_answer_is_waited_for_only_so_long() {
        let (api, seen) = runtime_api(Duration::from_secs(60)).await;
        let started = std::time::Instant::now();
        let outcome = report_init_error(&api, &bad_number(), Duration::from_millis(300)).await;
        assert!(matches!(outcome, Err(ReportError::Send(_))), "{outcome:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // It did arrive; only the answer was not awaited.
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn no_runtime_api_is_an_error_not_a_hang() {
        // A port nothing listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let api = closed.local_addr().unwrap().to_string();
        drop(closed);
        let outcome = report_init_error(&api, &bad_number(), REPORT_TIMEOUT).await;
        assert!(matches!(outcome, Err(ReportError::Send(_))), "{outcome:?}");
    }

    #[tokio::test]
    async fn every_request_is_a_500_that_names_no_setting() {
        for (method, path) in [("GET", "/chat"), ("POST", "/chat/stream"), ("DELETE", "/")] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::from("{}"))
                .unwrap();
            let response = misconfigured_service().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(response.headers()["content-type"], "application/json");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body, serde_json::json!({"error": MISCONFIGURED}));
        }
    }

    #[test]
    fn the_first_deferred_error_is_kept() {
        crate::deferred::defer(bad_number());
        crate::deferred::defer(ConfigError {
            name: "CHAT_TCP_NODELAY",
            reason: "expected on or off".into(),
        });
        let kept = crate::deferred::take();
        assert_eq!(kept.map(|e| e.name), Some("MAX_BODY_BYTES"));
    }
}
