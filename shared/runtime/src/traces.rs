//! Traces of a request: ids on every log line, and the request's spans sent to an OpenTelemetry collector when
//! one is configured.
//!
//! **Ids.** Every line written while a request is handled carries `requestId` and `xrayTraceId` (the formatter in
//! [`crate::logging`] lifts them from the spans around the line). Under Lambda the runtime's invocation span
//! carries Lambda's request id and, when Lambda sends one, its trace header (`Root=1-…;Parent=…;Sampled=…`, of
//! which the lines keep the `Root`). The edge ([`crate::function_service`]) opens a `request` span around every
//! request as well: under Lambda with the same ids (and a new trace id when Lambda sent none); as a plain server,
//! and in the local run, where no runtime span exists, with a new request id and the `Root` of the request's
//! `X-Amzn-Trace-Id` when it is a well-formed X-Ray trace id (anything else a client sends is ignored, so no
//! client text reaches the logs), else a new X-Ray format id (`1-{8 hex seconds}-{24 hex}`).
//!
//! **Spans.** The adapters open an INFO span per model call (`model.converse`, `model.converse_stream`,
//! `model.count_tokens`), knowledge-base search (`kb.retrieve`), DynamoDB call (`store.get_item`, `store.query`,
//! …) and S3 call (`attachments.put_object`, …); [`chat_core::tool_call_span`] is the one a tool call will open.
//! Each span's close is one log line with its `duration_ms`. Their fields are ids of configuration, counts and
//! outcomes: never text, never a caller's identity. The one exception is for the exported trace alone: the OpenAI
//! routes' spans (`chat.completion`, `embeddings`) hold the client's `user`, `safety_identifier` and `metadata` in
//! fields named `trace_only.…`, which this exporter sends as they are and no log line holds
//! ([`crate::trace_only`]).
//!
//! **Export.** With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the same spans go
//! to that collector with opentelemetry-otlp's HTTP exporter (protobuf, `…/v1/traces`), one trace per request
//! (under Lambda rooted at the runtime's invocation span, as a plain server at the `request` span). The other
//! standard variables apply (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_BSP_*`, …); the service
//! name defaults to the Lambda function's name. Nothing of this is built when neither variable is set.
//!
//! The SDK's batch processor exports from a thread of its own every `OTEL_BSP_SCHEDULE_DELAY` (5 s). Under Lambda
//! the environment is frozen as soon as the runtime asks for the next event, so a batch waiting for that timer
//! could wait for minutes, or be lost with the environment: the runtime layer [`run_concurrent`] adds flushes
//! after each invocation, once its response is sent (as the runtime's own `OpenTelemetryLayer` does, which cannot
//! be used here: its service is not `Clone`, which `run_concurrent` needs, and it flushes synchronously on the
//! runtime's only thread, which an exporter that needs that runtime for its HTTP call would deadlock). The plain
//! server flushes when it stops ([`crate::serve_plain`]).
//!
//! Requests to the collector go through the process's one reqwest client, handed to [`crate::init_logging`] by the
//! composition root (`chat_app::http_client`: rustls, the system's roots, shared with the JWKS and the MCP
//! servers), each bounded by the export timeout, on the function's
//! tokio runtime: the processor's thread hands each request to the runtime ([`OnRuntime`]). The SDK's crates are
//! built without their internal logs, and they, reqwest and hyper are held at INFO like every other crate
//! ([`crate::logging`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use bytes::Bytes;
use lambda_http::lambda_runtime::{self, LambdaInvocation, layers::TracingLayer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tower::{Layer, Service};
use tracing::Span;

/// The header a client (or Lambda, through lambda_http) names the X-Ray trace with.
pub const TRACE_HEADER: &str = "x-amzn-trace-id";

/// The largest answer read from the collector: it says how many spans it rejected, no more.
const MAX_COLLECTOR_ANSWER: usize = 64 * 1024;

/// The exporting provider, once built (only when a collector is configured).
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Why spans cannot be exported (the functions serve on without).
#[derive(Debug, thiserror::Error)]
pub enum TraceSetupError {
    #[error("OTLP export needs a tokio runtime to send on")]
    NoRuntime,
    #[error("the OTLP exporter cannot be built: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Whether a collector is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
pub fn export_configured(lookup: impl Fn(&str) -> Option<String>) -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| lookup(name).is_some_and(|v| !v.trim().is_empty()))
}

/// The tracer whose spans go to the configured collector through the client `http_client` gives, or `None` when
/// none is configured (then no client is asked for). Builds the exporter once per process; must run on the tokio
/// runtime the requests to the collector are to be sent on.
pub(crate) fn exporting_tracer(
    http_client: impl FnOnce() -> reqwest::Client,
) -> Result<Option<SdkTracer>, TraceSetupError> {
    if !export_configured(|name| std::env::var(name).ok()) {
        return Ok(None);
    }
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| TraceSetupError::NoRuntime)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(OnRuntime {
            client: http_client(),
            timeout: export_timeout(|name| std::env::var(name).ok()),
            runtime,
        })
        .build()?;
    let mut resource = Resource::builder();
    // OTEL_SERVICE_NAME (read by the builder) wins; else the function's name, so each function is its own service.
    if std::env::var_os("OTEL_SERVICE_NAME").is_none()
        && let Ok(function) = std::env::var("AWS_LAMBDA_FUNCTION_NAME")
    {
        resource = resource.with_service_name(function);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("chat-backend");
    let _ = PROVIDER.set(provider);
    Ok(Some(tracer))
}

/// How long one request to the collector may take: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else the specification's 10 s.
fn export_timeout(lookup: impl Fn(&str) -> Option<String>) -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|name| lookup(name)?.trim().parse::<u64>().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// Sends the spans ended so far to the collector and waits for it (at most the SDK's 5 s); a no-op when none is
/// configured. The SDK's flush blocks its caller until its thread has exported, and that export runs on this
/// runtime: so the flush waits on a blocking thread while this one stays free to send.
pub(crate) async fn flush() {
    let Some(provider) = PROVIDER.get().cloned() else {
        return;
    };
    match tokio::task::spawn_blocking(move || provider.force_flush()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "spans could not be sent to the collector"),
        Err(e) => tracing::warn!(error = %e, "the span flush did not finish"),
    }
}

/// Runs Lambda's runtime loop as `lambda_http::run_concurrent` does (the runtime's tracing span around each
/// invocation), and, when spans are exported, flushes them after each invocation (see the module's notes).
pub(crate) async fn run_concurrent<S>(
    runtime: lambda_runtime::Runtime<S>,
) -> Result<(), lambda_http::Error>
where
    S: Service<LambdaInvocation, Response = (), Error = lambda_runtime::Error>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let runtime = runtime.layer(TracingLayer::new());
    if PROVIDER.get().is_some() {
        runtime.layer(FlushAfterEach).run_concurrent().await
    } else {
        runtime.run_concurrent().await
    }
}

/// The runtime layer that flushes exported spans once an invocation is over (its response sent).
#[derive(Clone, Copy)]
pub(crate) struct FlushAfterEach;

impl<S> Layer<S> for FlushAfterEach {
    type Service = FlushingService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FlushingService { inner }
    }
}

#[derive(Clone)]
pub(crate) struct FlushingService<S> {
    inner: S,
}

impl<S> Service<LambdaInvocation> for FlushingService<S>
where
    S: Service<LambdaInvocation, Response = (), Error = lambda_runtime::Error>,
    S::Future: Send + 'static,
{
    type Response = ();
    type Error = lambda_runtime::Error;
    type Future = Pin<Box<dyn Future<Output = Result<(), lambda_runtime::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        let invocation = self.inner.call(invocation);
        Box::pin(async move {
            // The invocation's future (and with it the runtime's span) is dropped when it completes, so the span has
            // ended before the flush.
            let result = invocation.await;
            flush().await;
            result
        })
    }
}

/// A request's span: `requestId` and `xrayTraceId` for every line inside it (see the module's notes), and the
/// method and path (as the request's log line has them); `status` is recorded when the answer is ready.
pub fn request_span(request: &Request) -> Span {
    let lambda = request.extensions().get::<lambda_http::Context>();
    let request_id = match lambda {
        Some(context) => context.request_id.clone(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    let trace_id = lambda
        .and_then(|context| context.xray_trace_id.as_deref())
        .into_iter()
        .chain(
            request
                .headers()
                .get_all(TRACE_HEADER)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        )
        .find_map(xray_root)
        .map_or_else(new_xray_trace_id, str::to_string);
    tracing::info_span!(
        "request",
        requestId = %request_id,
        xrayTraceId = %trace_id,
        method = %request.method(),
        path = %request.uri().path(),
        status = tracing::field::Empty,
    )
}

/// The `Root` of an X-Ray trace header (`Root=1-…;Parent=…;Sampled=…`), or the header itself when it is a bare trace
/// id; `None` unless that is a well-formed X-Ray trace id.
pub fn xray_root(header: &str) -> Option<&str> {
    let root = header
        .split(';')
        .map(str::trim)
        .find_map(|part| part.strip_prefix("Root="))
        .unwrap_or(header.trim());
    is_xray_trace_id(root).then_some(root)
}

/// `1-{8 hex digits}-{24 hex digits}`, as X-Ray writes them.
fn is_xray_trace_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 3 && parts[0] == "1" && hex(parts[1], 8) && hex(parts[2], 24)
}

/// A new X-Ray format trace id: the time in seconds, then 96 random bits.
pub fn new_xray_trace_id() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let random = fastrand::u128(..) & ((1u128 << 96) - 1);
    format!("1-{:08x}-{random:024x}", seconds as u32)
}

/// opentelemetry-otlp's HTTP client: the process's reqwest client (as [`crate::init_logging`] is handed it), each
/// request bounded by
/// `timeout` and sent on the function's tokio runtime. The SDK's batch processor exports from a thread of its own,
/// outside any runtime, where reqwest cannot run.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: axum::http::Request<Bytes>,
    ) -> Result<axum::http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let mut request = reqwest::Request::try_from(request)?;
        *request.timeout_mut() = Some(self.timeout);
        let sent = self.runtime.spawn(async move {
            let mut response = client.execute(request).await?;
            let mut answer = axum::http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = std::mem::take(response.headers_mut());
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_COLLECTOR_ANSWER {
                    return Err::<_, HttpError>("the collector's answer is too long".into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(Bytes::from(body))?)
        });
        sent.await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_of_a_trace_header_is_taken_only_when_well_formed() {
        let root = "1-6740a000-0123456789abcdef01234567";
        for header in [
            format!("Root={root};Parent=53995c3f42cd8ad8;Sampled=1"),
            format!("Self=1-67891234-12456789abcdef012345678;Root={root}"),
            root.to_string(),
        ] {
            assert_eq!(xray_root(&header), Some(root), "{header}");
        }
        for bad in [
            "",
            "Root=",
            "Root=1-6740a000-0123456789abcdef0123456",
            "Root=2-6740a000-0123456789abcdef01234567",
            "Root=1-6740a00g-0123456789abcdef01234567",
            "Root=a secret word",
            "1-6740a000-0123456789abcdef01234567-extra",
        ] {
            assert_eq!(xray_root(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_new_trace_id_is_in_xray_format_and_new_each_time() {
        let a = new_xray_trace_id();
        let b = new_xray_trace_id();
        assert!(is_xray_trace_id(&a), "{a}");
        assert_ne!(a, b);
        let seconds = u64::from_str_radix(&a[2..10], 16).unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(now.abs_diff(seconds) < 5, "{a}");
    }

    #[test]
    fn export_is_configured_by_either_endpoint_variable() {
        let env = chat_edge::settings_in;
        assert!(!export_configured(env(&[])));
        assert!(!export_configured(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            " "
        )])));
        assert!(export_configured(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(export_configured(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
        assert_eq!(export_timeout(env(&[])), Duration::from_secs(10));
        assert_eq!(
            export_timeout(env(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")])),
            Duration::from_millis(2500)
        );
    }

    #[test]
    fn a_plain_request_gets_new_ids_and_a_clients_trace_root() {
        let request = |header: Option<&str>| {
            let mut builder = axum::http::Request::builder().uri("/chat");
            if let Some(header) = header {
                builder = builder.header(TRACE_HEADER, header);
            }
            builder.body(axum::body::Body::empty()).unwrap()
        };
        let (lines, subscriber) = capture();
        tracing::subscriber::with_default(subscriber, || {
            for header in [
                Some("Root=1-6740a000-0123456789abcdef01234567;Sampled=1"),
                Some("Root=zanzibarquokka"),
                None,
            ] {
                let span = request_span(&request(header));
                let _inside = span.enter();
                tracing::info!("inside");
            }
        });
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("xrayTraceId=1-6740a000-0123456789abcdef01234567"));
        assert!(!lines[1].contains("zanzibarquokka"), "{}", lines[1]);
        for line in lines.iter() {
            let id = line.split("xrayTraceId=").nth(1).unwrap();
            assert!(is_xray_trace_id(&id[..35]), "{line}");
            assert!(line.contains("requestId="), "{line}");
        }
    }

    /// Lines in the default text format, each with its spans' fields.
    fn capture() -> (
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        impl tracing::Subscriber,
    ) {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .without_time()
            .with_ansi(false)
            .with_writer(move || Line(sink.clone(), Vec::new()))
            .finish();
        (lines, subscriber)
    }

    struct Line(std::sync::Arc<std::sync::Mutex<Vec<String>>>, Vec<u8>);

    impl std::io::Write for Line {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Drop for Line {
        fn drop(&mut self) {
            self.0
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&self.1).into_owned());
        }
    }
}
