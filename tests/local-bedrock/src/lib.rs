//! A local Bedrock-compatible server: `POST /model/{id}/converse` and `/converse-stream` in the real wire format
//! (JSON; AWS event-stream frames), so that tests and the local run exercise the real SDK client.
//!
//! Its answers are derived from the prompt so tests can assert them: the answer to a last user message `T` is
//! `Echo: T`, sent as one delta per word. When the system prompt asks for `<<question>>` lines, three follow
//! up questions end the answer. Directives in the last user message ask for faults and pacing:
//!
//! | directive | effect |
//! |---|---|
//! | `[[fault:throttle]]` | `ThrottlingException` (429) on every attempt |
//! | `[[fault:throttle-first:N]]` | `ThrottlingException` on the first N attempts of this same request, then an answer |
//! | `[[fault:too-long]]` | `ValidationException` "Input is too long for requested model." |
//! | `[[fault:validation]]` | another `ValidationException` |
//! | `[[fault:access-denied]]` | `AccessDeniedException` (403) |
//! | `[[fault:not-found]]` | `ResourceNotFoundException` (404) |
//! | `[[fault:model-error]]` | `ModelErrorException` (424) |
//! | `[[fault:model-timeout]]` | `ModelTimeoutException` (408) |
//! | `[[fault:unavailable]]` | `ServiceUnavailableException` (503) |
//! | `[[fault:internal]]` | `InternalServerException` (500) |
//! | `[[fault:guardrail]]` | an answer with `stopReason` `guardrail_intervened` |
//! | `[[fault:content-filter]]` | an answer with `stopReason` `content_filtered` |
//! | `[[stream-error-after:N]]` | (stream) N deltas, then a `modelStreamErrorException` frame |
//! | `[[stream-break-after:N]]` | (stream) N deltas, then the connection breaks (the body is aborted) |
//! | `[[deltas:N]]` | the answer is N words `w1 … wN` |
//! | `[[delay-ms:N]]` | wait N ms before each delta (stream) or before answering (converse); found in any message |
//! | `[[first-delay-ms:N]]` | silence before the first word of each attempt: N ms before a stream's first delta (its start is sent at once), before a buffered answer, and before a fault's answer (so each throttled attempt takes N ms) |
//! | `[[stall-after:N]]` | (stream) N deltas, then silence for ten minutes with the connection open (or until the client leaves); (converse) no answer for ten minutes |
//! | `[[say:TEXT]]` | the answer is TEXT |
//!
//! Without a `delay-ms` directive the server paces its words as a model does: it waits its pace (0 unless
//! started with [`LocalBedrock::start_paced`]; the local run's default is 30 ms) before each delta, and a buffered
//! answer takes as long as its words would.
//!
//! Directives are also read from the system prompt, so that a test can script one agent of a group through its
//! instructions.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request the server received, for tests to inspect.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub operation: Operation,
    pub model_id: String,
    pub body: Value,
    /// When each delta of a stream was handed to the connection (empty for `converse`).
    pub deltas_sent_at: Vec<SystemTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Converse,
    ConverseStream,
}

#[derive(Default)]
struct Shared {
    requests: Vec<RecordedRequest>,
    attempts: HashMap<String, u32>,
}

#[derive(Clone, Default)]
struct AppState {
    shared: Arc<Mutex<Shared>>,
    /// Print each streamed delta with its send time (the binary turns this on).
    log_deltas: bool,
    /// The wait before each word when no directive sets one.
    pace: Duration,
}

/// A running server; it stops when dropped.
pub struct LocalBedrock {
    addr: SocketAddr,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl LocalBedrock {
    /// Starts on `127.0.0.1` and a free port.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0".parse().unwrap(), false).await
    }

    /// Starts on `addr`; with `log_deltas`, prints each streamed delta and when it was sent.
    pub async fn start_on(addr: SocketAddr, log_deltas: bool) -> std::io::Result<Self> {
        Self::start_paced(addr, log_deltas, Duration::ZERO).await
    }

    /// Starts on `addr`, waiting `pace` before each word unless a directive says otherwise.
    pub async fn start_paced(
        addr: SocketAddr,
        log_deltas: bool,
        pace: Duration,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = AppState {
            log_deltas,
            pace,
            ..AppState::default()
        };
        let app = router(state.clone());
        // Every event frame leaves as it is written: with Nagle's algorithm on, a frame written while the previous
        // one is unacknowledged waits for the client's delayed ACK (about 40 ms on Linux).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// The endpoint URL to give the SDK (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// An SDK configuration whose clients talk to this server: test credentials, and the SDK's standard retries
    /// with short back-offs so throttling tests stay quick.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credentials())
            .endpoint_url(self.endpoint())
            .retry_config(
                aws_config::retry::RetryConfig::standard()
                    .with_initial_backoff(Duration::from_millis(5)),
            )
            .load()
            .await
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.shared.lock().unwrap().requests.clone()
    }

    /// Runs until the task ends (never, unless the listener fails).
    pub async fn wait(self) {
        let _ = (&mut { self }.task).await;
    }
}

fn aws_credentials() -> aws_credential_types::Credentials {
    aws_credential_types::Credentials::new("test", "test", None, None, "local-bedrock")
}

impl Drop for LocalBedrock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/model/{model_id}/converse", post(converse))
        .route("/model/{model_id}/converse-stream", post(converse_stream))
        .route("/__local/requests", axum::routing::get(inspect))
        .with_state(state)
}

/// `GET /__local/requests`: what the server received and when it sent each delta (Unix milliseconds), for tests
/// that run it in another process.
async fn inspect(State(state): State<AppState>) -> Response {
    let ms = |t: &SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    };
    let requests: Vec<Value> = state
        .shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .map(|r| {
            json!({
                "operation": match r.operation { Operation::Converse => "converse", Operation::ConverseStream => "converse-stream" },
                "modelId": r.model_id,
                "body": r.body,
                "deltasSentAtMs": r.deltas_sent_at.iter().map(ms).collect::<Vec<_>>(),
            })
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        Value::Array(requests).to_string(),
    )
        .into_response()
}

/// What the prompt asks of the model.
#[derive(Debug, Default)]
struct Plan {
    fault: Option<String>,
    stream_error_after: Option<usize>,
    stream_break_after: Option<usize>,
    /// The wait before each delta of a stream.
    delay: Duration,
    /// The wait before a buffered answer.
    converse_delay: Duration,
    /// The silence before an attempt's first word or fault.
    first_delay: Duration,
    /// Deltas sent before the model goes silent (a buffered call never answers).
    stall_after: Option<usize>,
    pieces: Vec<String>,
    stop_reason: &'static str,
    input_tokens: u64,
}

fn directive<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("[[{name}:"))? + name.len() + 3;
    let end = start + text[start..].find("]]")?;
    Some(&text[start..end])
}

fn strip_directives(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn texts(blocks: Option<&Value>) -> Vec<String> {
    blocks
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Splits text into deltas the way a model streams words: each piece keeps its following space.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' || ch == '\n' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn plan(body: &Value, pace: Duration) -> Plan {
    let system = texts(body.get("system")).join("\n");
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| texts(m.get("content")).join("\n"))
        .unwrap_or_default();
    let all_text: Vec<String> = std::iter::once(system.clone())
        .chain(messages.iter().flat_map(|m| texts(m.get("content"))))
        .collect();
    let input_tokens = all_text
        .iter()
        .map(|t| t.split_whitespace().count() as u64)
        .sum();

    // Directives of the last user message first, then of the system prompt.
    let directives = format!("{last_user}\n{system}");
    let mut answer = match (
        directive(&directives, "say"),
        directive(&directives, "deltas").and_then(|n| n.parse::<usize>().ok()),
    ) {
        (Some(text), _) => text.to_string(),
        (None, Some(n)) => (1..=n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" "),
        (None, None) => format!("Echo: {}", strip_directives(&last_user)),
    };
    if system.contains("<<") {
        answer.push_str(
            "\n\n<<What else should I know?>>\n<<Can you give an example?>>\n<<Where can I read more?>>",
        );
    }
    let mut pieces = pieces(&answer);
    let mut stop_reason = "end_turn";
    let max_tokens = body
        .pointer("/inferenceConfig/maxTokens")
        .and_then(Value::as_u64);
    if let Some(max) = max_tokens.filter(|max| pieces.len() as u64 > *max) {
        pieces.truncate(max as usize);
        stop_reason = "max_tokens";
    }
    let fault = directive(&directives, "fault").map(str::to_string);
    match fault.as_deref() {
        Some("guardrail") => {
            pieces = vec!["Sorry, I cannot answer that.".into()];
            stop_reason = "guardrail_intervened";
        }
        Some("content-filter") => {
            pieces = vec!["Sorry.".into()];
            stop_reason = "content_filtered";
        }
        _ => {}
    }
    // Pacing holds for the whole conversation: later turns (another agent's) keep it.
    let directed = directive(
        &format!("{directives}\n{}", all_text.join("\n")),
        "delay-ms",
    )
    .and_then(|n| n.parse().ok())
    .map(Duration::from_millis);
    let (delay, converse_delay) = match directed {
        Some(delay) => (delay, delay),
        None => (pace, pace * pieces.len() as u32),
    };
    Plan {
        fault,
        stream_error_after: directive(&directives, "stream-error-after")
            .and_then(|n| n.parse().ok()),
        stream_break_after: directive(&directives, "stream-break-after")
            .and_then(|n| n.parse().ok()),
        delay,
        converse_delay,
        first_delay: directive(&directives, "first-delay-ms")
            .and_then(|n| n.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_default(),
        stall_after: directive(&directives, "stall-after").and_then(|n| n.parse().ok()),
        pieces,
        stop_reason,
        input_tokens,
    }
}

/// The HTTP error Bedrock answers for a fault, if the fault is one.
fn fault_response(state: &AppState, plan: &Plan, body: &Value) -> Option<Response> {
    let (status, kind, message) = match plan.fault.as_deref()? {
        "throttle" => (
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        f if f.starts_with("throttle-first:") => {
            let limit: u32 = f["throttle-first:".len()..].parse().unwrap_or(1);
            let mut shared = state.shared.lock().unwrap();
            let seen = shared.attempts.entry(body.to_string()).or_insert(0);
            *seen += 1;
            if *seen > limit {
                return None;
            }
            (
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
            )
        }
        "too-long" => (
            400,
            "ValidationException",
            "Input is too long for requested model.",
        ),
        "validation" => (
            400,
            "ValidationException",
            "The provided request is not valid",
        ),
        "access-denied" => (
            403,
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        "not-found" => (
            404,
            "ResourceNotFoundException",
            "The provided model identifier is invalid.",
        ),
        "model-error" => (
            424,
            "ModelErrorException",
            "The model encountered an error processing the request.",
        ),
        "model-timeout" => (
            408,
            "ModelTimeoutException",
            "Model has timed out in processing the request.",
        ),
        "unavailable" => (
            503,
            "ServiceUnavailableException",
            "Service is unavailable. Try again later.",
        ),
        "internal" => (
            500,
            "InternalServerException",
            "The server encountered an internal error.",
        ),
        _ => return None,
    };
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-amzn-errortype"),
                format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            ),
        ],
        json!({ "message": message }).to_string(),
    )
        .into_response();
    response.headers_mut().insert(
        "x-amzn-requestid",
        header::HeaderValue::from_static("00000000-0000-0000-0000-000000000000"),
    );
    Some(response)
}

fn usage(plan: &Plan) -> Value {
    let output = plan.pieces.len() as u64;
    json!({
        "inputTokens": plan.input_tokens,
        "outputTokens": output,
        "totalTokens": plan.input_tokens + output,
    })
}

fn record(state: &AppState, operation: Operation, model_id: String, body: Value) -> usize {
    let mut shared = state.shared.lock().unwrap();
    shared.requests.push(RecordedRequest {
        operation,
        model_id,
        body,
        deltas_sent_at: Vec::new(),
    });
    shared.requests.len() - 1
}

fn parse_body(bytes: &Bytes) -> Result<Value, Box<Response>> {
    serde_json::from_slice(bytes).map_err(|_| {
        Box::new(
            (
                StatusCode::BAD_REQUEST,
                [(
                    header::HeaderName::from_static("x-amzn-errortype"),
                    "SerializationException",
                )],
                json!({"message": "body is not JSON"}).to_string(),
            )
                .into_response(),
        )
    })
}

async fn converse(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    _headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body = match parse_body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let plan = plan(&body, state.pace);
    record(&state, Operation::Converse, model_id, body.clone());
    tokio::time::sleep(plan.first_delay).await;
    if let Some(r) = fault_response(&state, &plan, &body) {
        return r;
    }
    if plan.stall_after.is_some() {
        tokio::time::sleep(STALL).await;
    }
    tokio::time::sleep(plan.converse_delay).await;
    let out = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": plan.pieces.concat()}]}},
        "stopReason": plan.stop_reason,
        "usage": usage(&plan),
        "metrics": {"latencyMs": 1},
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        out.to_string(),
    )
        .into_response()
}

fn frame(headers: Vec<(&'static str, &str)>, payload: Value) -> Bytes {
    let headers = headers
        .into_iter()
        .map(|(name, value)| Header::new(name, HeaderValue::String(value.to_string().into())))
        .collect();
    let message = Message::new_from_parts(headers, payload.to_string().into_bytes());
    let mut buffer = Vec::new();
    write_message_to(&message, &mut buffer).expect("an event frame always encodes");
    Bytes::from(buffer)
}

fn event(kind: &str, payload: Value) -> Bytes {
    frame(
        vec![
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

fn exception(kind: &str, message: &str) -> Bytes {
    frame(
        vec![
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }),
    )
}

/// How long a stalled model stays silent: longer than any timeout a test or a client would wait.
const STALL: Duration = Duration::from_secs(600);

/// Waits `pause` without sending, the connection open; false when the client left meanwhile (stop producing).
async fn silence(tx: &mpsc::Sender<Result<Bytes, std::io::Error>>, pause: Duration) -> bool {
    if pause.is_zero() {
        return !tx.is_closed();
    }
    tokio::select! {
        _ = tokio::time::sleep(pause) => true,
        _ = tx.closed() => false,
    }
}

async fn converse_stream(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    bytes: Bytes,
) -> Response {
    let body = match parse_body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let plan = plan(&body, state.pace);
    let index = record(&state, Operation::ConverseStream, model_id, body.clone());
    if let Some(r) = fault_response(&state, &plan, &body) {
        tokio::time::sleep(plan.first_delay).await;
        return r;
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(b)).await.is_ok() }
        };
        if !send(event("messageStart", json!({"role": "assistant"}))).await {
            return;
        }
        if !silence(&tx, plan.first_delay).await {
            return;
        }
        for (i, piece) in plan.pieces.iter().enumerate() {
            if plan.stream_break_after == Some(i) {
                // An error item makes the server abort the connection mid-body.
                let _ = tx
                    .send(Err(std::io::Error::other("connection broken on purpose")))
                    .await;
                return;
            }
            if plan.stall_after == Some(i) {
                silence(&tx, STALL).await;
                return;
            }
            if plan.stream_error_after == Some(i) {
                send(exception(
                    "modelStreamErrorException",
                    "The model stream failed.",
                ))
                .await;
                return;
            }
            // No sleep at all when unpaced: tokio's timer rounds a zero sleep up to its next millisecond tick.
            if !plan.delay.is_zero() {
                tokio::time::sleep(plan.delay).await;
            }
            let delta = json!({"contentBlockIndex": 0, "delta": {"text": piece}});
            if !send(event("contentBlockDelta", delta)).await {
                return; // the client went away: stop producing
            }
            let now = SystemTime::now();
            if let Some(r) = state.shared.lock().unwrap().requests.get_mut(index) {
                r.deltas_sent_at.push(now);
            }
            if state.log_deltas {
                let ms = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                eprintln!("local-bedrock: sent delta {} at {ms} ms {piece:?}", i + 1);
            }
        }
        if plan.stall_after.is_some_and(|n| n >= plan.pieces.len()) {
            silence(&tx, STALL).await;
            return;
        }
        if plan
            .stream_error_after
            .is_some_and(|n| n >= plan.pieces.len())
        {
            send(exception(
                "modelStreamErrorException",
                "The model stream failed.",
            ))
            .await;
            return;
        }
        let _ = send(event("contentBlockStop", json!({"contentBlockIndex": 0}))).await
            && send(event(
                "messageStop",
                json!({"stopReason": plan.stop_reason}),
            ))
            .await
            && send(event(
                "metadata",
                json!({"usage": usage(&plan), "metrics": {"latencyMs": 1}}),
            ))
            .await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")
        .body(Body::from_stream(stream))
        .unwrap()
}
