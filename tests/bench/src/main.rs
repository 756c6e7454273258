//! `make bench`: the release functions measured, printing tables.
//!
//! As Lambda runs them (the Runtime API emulator of this crate, the local Bedrock server, moto behind a proxy that
//! keeps the functions' connections open as DynamoDB does, where moto's own server closes each after one answer),
//! each twice in one run, their batches side by side so that the machine's load weighs on both alike ([`Variant`]):
//! as they were before the relay work ("before": a multi-threaded tokio runtime, Nagle's algorithm on the Runtime API
//! connection, through the bench-only switches `CHAT_RUNTIME_FLAVOR` and `CHAT_TCP_NODELAY`), or, with
//! `BENCH_BEFORE_DIR`, another commit's build (`make bench BENCH_BEFORE=REV` builds it), and as they are; each with
//! moto as the store and again with a no-op store ([`NoOpDynamo`]: every call answered `{}` at once), which leaves
//! the function's own cost of its store calls:
//!
//! - the relay, for each streamed route ([`Streamed`]: `/chat/stream`'s JSON lines, the server-sent events of
//!   `/v1/chat/completions`, `/v1/messages` and `/v1/responses`): each delta's delay from the local Bedrock
//!   server's sending of it to the emulator's receipt of the line or whole event that carries it (30 deltas 20 ms
//!   apart per stream, 30 streams), p50/p99, and the first byte of an unpaced stream (from the event handed to the
//!   function to the first body byte after the metadata prelude);
//! - CPU per request (user + system time of the function's process, from `/proc/<pid>/stat`) over N requests of
//!   each kind: `/chat` new chat, `/chat` continuing a chat of 20 stored messages, `/chat/stream` of 30 deltas,
//!   `/v1/chat/completions`, `/v1/messages` and `/v1/responses` buffered (chat, [`Whole`]) and streamed
//!   (chat-stream, 30 deltas; `/v1/chat/completions` with `include_usage`), the history calls that stored those
//!   chats, and the history list; and the peak RSS of each kind's process.
//!
//! Then, as they are only ([`measures`]): bootstrap sizes, plain and zipped (arm64 when `make bench` could build
//! it); init (exec → first `GET /runtime/invocation/next`, `BENCH_STARTS` starts, 21; a `BENCH_BEFORE_DIR` build's
//! too, its starts alternating with these); the latency the chat
//! function adds, as a plain server, to a direct Converse call of the local Bedrock server, at c=1 and c=16
//! (`BENCH_LATENCY_PAIRS`, 2000); and DynamoDB calls and bytes read per turn for a new chat and chats of 20 and 200
//! messages.
//!
//! `BENCH_REQUESTS` sets N (default 1000), `BENCH_BATCH` the batch (25), `BENCH_STREAMS` the paced streams (30;
//! 50 unpaced first bytes per 30 streams).

mod measures;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::{Emulator, EmulatorOptions, Function, Invocation, Line, function_url_event, quantile};
use local_bedrock::{LocalBedrock, Operation};
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::FaultProxy;
use serde_json::{Value, json};

/// The targets of issue 17 for the streamed relay.
const LINE_P99_TARGET_MS: f64 = 2.0;
const FIRST_BYTE_TARGET_MS: f64 = 3.0;
/// The targets of issue 31: CPU per request kind (ms), bootstrap bytes, init p50, peak RSS, DynamoDB calls.
const NEW_CHAT_CPU_TARGET_MS: f64 = 0.35;
const CONTINUED_CPU_TARGET_MS: f64 = 0.8;
const STREAM_CPU_TARGET_MS: f64 = 0.6;
const LIST_CPU_TARGET_MS: f64 = 0.5;
const BOOTSTRAP_TARGET_BYTES: u64 = 8_000_000;
const INIT_P50_TARGET_MS: f64 = 5.0;
const RSS_TARGET_MIB: f64 = 16.0;
/// A continued turn's read and write (issue 31), and its admission's write (issue 38), made while the chat is read.
const CONTINUED_CALLS_TARGET: usize = 3;
const DELTAS: usize = 30;
/// The model every function is given (`MODEL_ID`), which `/v1/models` lists and an OpenAI request names.
pub(crate) const MODEL_ID: &str = "local.echo-v1:0";
const PACE_MS: u64 = 20;
const STORED: usize = 20;

/// A build measured: its name in the tables, the bench-only switches it runs with, and where its binaries are
/// (`None`: beside the bench's own, [`World::binaries`]).
struct Variant {
    name: String,
    env: &'static [(&'static str, &'static str)],
    binaries: Option<PathBuf>,
    /// The routes it does not serve (an older build's), measured for the other variant only.
    missing: Vec<&'static str>,
}

impl Variant {
    /// The two builds compared in one run, their batches side by side: by default the functions as they are, before
    /// the relay work (a multi-threaded tokio runtime and Nagle's algorithm, through the bench-only switches
    /// `CHAT_RUNTIME_FLAVOR` and `CHAT_TCP_NODELAY`) and after; with `BENCH_BEFORE_DIR`, the functions built in that
    /// folder (another commit's release build, named by `BENCH_BEFORE_NAME`) before, these after.
    fn both() -> [Variant; 2] {
        let before = match std::env::var_os("BENCH_BEFORE_DIR") {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                let label = std::env::var("BENCH_BEFORE_NAME")
                    .unwrap_or_else(|_| dir.display().to_string());
                Variant {
                    name: format!("before: {label}"),
                    env: &[],
                    binaries: Some(checked_binaries(dir)),
                    missing: Vec::new(),
                }
            }
            None => Variant {
                name: "before: multi-thread, Nagle".into(),
                env: &[
                    ("CHAT_RUNTIME_FLAVOR", "multi_thread"),
                    ("CHAT_TCP_NODELAY", "off"),
                ],
                binaries: None,
                missing: Vec::new(),
            },
        };
        let after = Variant {
            name: if before.binaries.is_some() {
                "after: this build".into()
            } else {
                "after: current-thread, TCP_NODELAY".into()
            },
            env: &[],
            binaries: None,
            missing: Vec::new(),
        };
        [before, after]
    }

    /// Whether it serves `path`.
    fn serves(&self, path: &str) -> bool {
        !self.missing.contains(&path)
    }
}

struct World {
    binaries: PathBuf,
    bedrock: LocalBedrock,
    bedrock_url: String,
}

/// A function of one variant, under its own emulator.
struct Running {
    emulator: Emulator,
    function: Function,
}

impl World {
    /// What every function is started with besides the variant's switches: the local servers, `table`, one user.
    fn env<'a>(&'a self, dynamo_url: &'a str, table: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("MODEL_ID", MODEL_ID),
            (
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                self.bedrock_url.as_str(),
            ),
            ("AWS_ENDPOINT_URL_DYNAMODB", dynamo_url),
            ("TABLE_NAME", table),
            ("AUTH_MODE", "none"),
            // Run as Lambda runs them, `none` needs the operator's word.
            ("ALLOW_ANONYMOUS", "true"),
            ("LOCAL_USER", "bench"),
            ("KNOWLEDGE_BASE_ID", ""),
            // As Lambda's default: one JSON line per request, written as on AWS.
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("AWS_LAMBDA_LOG_LEVEL", "INFO"),
        ]
    }

    /// `binary` of `variant` under a new emulator, storing in `table` of `dynamo`.
    async fn start(&self, binary: &str, variant: &Variant, dynamo: &Store, table: &str) -> Running {
        let dynamo_url = dynamo.url();
        let emulator = Emulator::start(EmulatorOptions::default())
            .await
            .expect("the emulator starts");
        let mut env = self.env(&dynamo_url, table);
        env.extend_from_slice(variant.env);
        let binaries = variant.binaries.as_ref().unwrap_or(&self.binaries);
        let function = Function::spawn(&binaries.join(binary), &emulator, &env, true)
            .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        Running { emulator, function }
    }
}

/// A store as the functions see it: moto through a proxy that keeps their connections open, as DynamoDB does
/// (moto's server closes each after one answer, which would make every call a new connection's, and its cost the
/// function's CPU); or no store at all, a server that answers every DynamoDB call at once with `{}` (an empty
/// success: no item found, nothing kept), so that what remains is the function's own cost of its calls.
enum Store {
    Moto {
        moto: LocalDynamo,
        front: FaultProxy,
    },
    NoOp(NoOpDynamo),
}

impl Store {
    async fn start() -> Self {
        let moto = LocalDynamo::start(None).unwrap_or_else(|e| panic!("{e}"));
        let front = FaultProxy::start_keeping_alive(&moto.endpoint())
            .await
            .expect("the proxy starts");
        Store::Moto { moto, front }
    }

    async fn no_op() -> Self {
        Store::NoOp(NoOpDynamo::start().await)
    }

    /// The endpoint the functions are given.
    fn url(&self) -> String {
        match self {
            Store::Moto { front, .. } => front.endpoint(),
            Store::NoOp(no_op) => no_op.endpoint(),
        }
    }

    /// A new table's name.
    async fn fresh_table(&self) -> String {
        match self {
            Store::Moto { moto, .. } => moto.fresh_table().await.1,
            Store::NoOp(_) => "no-op".into(),
        }
    }

    /// Whether it keeps anything (a chat stored can be continued).
    fn keeps(&self) -> bool {
        matches!(self, Store::Moto { .. })
    }

    fn moto(&self) -> &LocalDynamo {
        match self {
            Store::Moto { moto, .. } => moto,
            Store::NoOp(_) => panic!("the no-op store has no moto"),
        }
    }
}

/// A DynamoDB endpoint that keeps nothing: every call answered `200 {}` at once, on connections kept open.
struct NoOpDynamo {
    address: std::net::SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl NoOpDynamo {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let address = listener.local_addr().expect("its address");
        let app = axum::Router::new().fallback(|| async {
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    "application/x-amz-json-1.0",
                )],
                "{}",
            )
        });
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        NoOpDynamo { address, server }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for NoOpDynamo {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Running {
    /// The request answered, with `headers` added to the event's (a dialect's own, such as `anthropic-version`).
    async fn call_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Invocation {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let mut event = function_url_event(method, path, &body);
        for (name, value) in headers {
            event["headers"][*name] = (*value).into();
        }
        match tokio::time::timeout(Duration::from_secs(60), self.emulator.invoke(&event)).await {
            Ok(invocation) => invocation,
            Err(_) => panic!(
                "{method} {path}: no answer within a minute (init errors: {:?})",
                self.emulator.init_errors()
            ),
        }
    }

    /// The answer's JSON body, checked to be a success.
    async fn json(&self, method: &str, path: &str, body: &Value) -> Value {
        self.json_with(method, path, &[], body).await
    }

    /// [`json`](Self::json) with `headers` added to the event's.
    async fn json_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Value {
        let invocation = self.call_with(method, path, headers, body).await;
        let response = invocation
            .buffered
            .unwrap_or_else(|| panic!("{method} {path}: no buffered response"));
        let status = response["statusCode"].as_u64().unwrap_or_default();
        let text = response["body"].as_str().unwrap_or_default();
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {text}"
        );
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    /// The function's CPU time so far, to measure from.
    fn cpu_mark(&self) -> CpuMark<'_> {
        CpuMark {
            function: &self.function,
            at: self
                .function
                .cpu_time()
                .expect("the function's /proc/<pid>/stat"),
        }
    }
}

struct CpuMark<'a> {
    function: &'a Function,
    at: (Duration, Duration),
}

impl CpuMark<'_> {
    /// CPU used since the mark: (user + system, system).
    fn since(&self) -> (Duration, Duration) {
        let (user, system) = self
            .function
            .cpu_time()
            .expect("the function's /proc/<pid>/stat");
        (user + system - self.at.0 - self.at.1, system - self.at.1)
    }
}

/// CPU used over some calls of one kind, summed over batches, and the most memory their processes held.
#[derive(Default, Clone, Copy)]
struct CpuSum {
    total: Duration,
    system: Duration,
    calls: usize,
    /// The highest peak RSS (`VmHWM`, KiB) of a process that served this kind, read when its calls were done.
    peak_rss_kib: u64,
}

impl CpuSum {
    fn add(&mut self, mark: CpuMark<'_>, calls: usize) {
        let (total, system) = mark.since();
        self.total += total;
        self.system += system;
        self.calls += calls;
        let kib = mark.function.peak_rss_kib().unwrap_or(0);
        self.peak_rss_kib = self.peak_rss_kib.max(kib);
    }

    /// Per call, in ms: (user + system, system).
    fn per_call(&self) -> (f64, f64) {
        let per_call = |d: Duration| d.as_secs_f64() * 1000.0 / self.calls.max(1) as f64;
        (per_call(self.total), per_call(self.system))
    }
}

/// A streamed route of the chat-stream function, measured alike: the AI Chat Protocol's `/chat/stream` (a JSON line
/// per delta), OpenAI's `/v1/chat/completions` with `stream: true` and `stream_options.include_usage` (a
/// server-sent event, `data: {chunk}\n\n`, per delta), Anthropic's `/v1/messages` with `stream: true` (a named
/// event, `event: content_block_delta\ndata: {…}\n\n`, per delta) or OpenAI's `/v1/responses` with `stream: true`
/// (a typed event, `event: response.output_text.delta\ndata: {…}\n\n`, per delta).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streamed {
    Lines,
    Completions,
    Messages,
    Responses,
}

/// The headers an Anthropic client sends on every request (its SDKs and Claude Code).
const ANTHROPIC_HEADERS: &[(&str, &str)] = &[("anthropic-version", "2023-06-01")];

/// The most tokens a `/v1/messages` request asks for (Anthropic's API requires `max_tokens`).
const MESSAGES_MAX_TOKENS: u32 = 1024;

impl Streamed {
    const ALL: [Streamed; 4] = [
        Streamed::Lines,
        Streamed::Completions,
        Streamed::Messages,
        Streamed::Responses,
    ];

    /// The route, and what carries a delta, as the tables name them.
    fn name(self) -> &'static str {
        match self {
            Streamed::Lines => "`/chat/stream` (lines)",
            Streamed::Completions => "`/v1/chat/completions` (SSE chunks)",
            Streamed::Messages => "`/v1/messages` (SSE events)",
            Streamed::Responses => "`/v1/responses` (SSE events)",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Streamed::Lines => "/chat/stream",
            Streamed::Completions => Whole::Completions.path(),
            Streamed::Messages => Whole::Messages.path(),
            Streamed::Responses => Whole::Responses.path(),
        }
    }

    /// The headers the route's clients add.
    fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Streamed::Messages => ANTHROPIC_HEADERS,
            _ => &[],
        }
    }

    /// A request asking `text` of the model (the local Bedrock server reads directives such as `[[deltas:30]]`):
    /// the dialect's whole request ([`Whole::body`]) with `stream: true`.
    fn body(self, text: &str) -> Value {
        let mut body = match self {
            Streamed::Lines => return json!({"messages": [{"role": "user", "content": text}]}),
            Streamed::Completions => Whole::Completions.body(text),
            Streamed::Messages => Whole::Messages.body(text),
            Streamed::Responses => Whole::Responses.body(text),
        };
        body["stream"] = true.into();
        if self == Streamed::Completions {
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    /// The request, answered: the invocation.
    async fn call(self, running: &Running, text: &str) -> Invocation {
        running
            .call_with("POST", self.path(), self.headers(), &self.body(text))
            .await
    }

    /// The answer's pieces of text, each the line or event that carried it with its arrival time, once the answer
    /// is checked whole: a streamed 200 without error; for `/v1/chat/completions`, the role's chunk first, and the
    /// usage chunk then `[DONE]` last; for `/v1/messages` and `/v1/responses`, every event named by its data's
    /// `type`, and the dialect's first and last events (`message_start` … `message_delta` with the stop reason and
    /// usage, `message_stop`; `response.created` … `response.output_text.done` with the deltas' text,
    /// `response.completed` with usage, the sequence numbers counting from 0).
    fn deltas(self, invocation: &Invocation) -> Vec<Line> {
        assert!(
            invocation.streamed && invocation.status() == Some(200) && invocation.error.is_none(),
            "{}: a streamed 200 without error: {:?} {}",
            self.path(),
            invocation.error,
            invocation.text()
        );
        let json = |l: &Line| serde_json::from_str::<Value>(&l.text).unwrap_or(Value::Null);
        let checked = |whole: bool, what: &str| {
            assert!(whole, "{}: {what}: {}", self.path(), invocation.text());
        };
        match self {
            Streamed::Lines => invocation
                .lines
                .iter()
                .filter(|l| json(l)["delta"]["content"].is_string())
                .cloned()
                .collect(),
            Streamed::Completions => {
                let events = invocation.sse_events();
                let whole = match events.as_slice() {
                    [first, .., usage, done] => {
                        json(first)["choices"][0]["delta"]["role"] == "assistant"
                            && json(usage)["usage"]["completion_tokens"].is_u64()
                            && json(usage)["choices"] == json!([])
                            && done.text == "[DONE]"
                    }
                    _ => false,
                };
                checked(whole, "the role's chunk, the usage chunk and [DONE]");
                events
                    .into_iter()
                    .filter(|e| {
                        let delta = &json(e)["choices"][0]["delta"];
                        delta["content"].is_string() && delta["role"].is_null()
                    })
                    .collect()
            }
            Streamed::Messages => {
                let events = named_events(invocation, checked);
                let whole = match events.as_slice() {
                    [(start, _), .., (delta, _), (stop, _)] => {
                        start["type"] == "message_start"
                            && start["message"]["role"] == "assistant"
                            && delta["type"] == "message_delta"
                            && delta["delta"]["stop_reason"] == "end_turn"
                            && delta["usage"]["output_tokens"].is_u64()
                            && stop["type"] == "message_stop"
                    }
                    _ => false,
                };
                checked(
                    whole,
                    "message_start first, then message_delta (end_turn, usage) and message_stop",
                );
                events
                    .into_iter()
                    .filter(|(data, _)| {
                        data["type"] == "content_block_delta"
                            && data["delta"]["type"] == "text_delta"
                            && data["delta"]["text"].is_string()
                    })
                    .map(|(_, event)| event)
                    .collect()
            }
            Streamed::Responses => {
                let events = named_events(invocation, checked);
                let deltas: Vec<(Value, Line)> = events
                    .iter()
                    .filter(|(data, _)| {
                        data["type"] == "response.output_text.delta" && data["delta"].is_string()
                    })
                    .cloned()
                    .collect();
                let text: String = deltas
                    .iter()
                    .filter_map(|(data, _)| data["delta"].as_str())
                    .collect();
                let numbered = events
                    .iter()
                    .enumerate()
                    .all(|(i, (data, _))| data["sequence_number"] == i);
                let done = events
                    .iter()
                    .find(|(data, _)| data["type"] == "response.output_text.done");
                let whole = match events.as_slice() {
                    [(created, _), .., (completed, _)] => {
                        created["type"] == "response.created"
                            && completed["type"] == "response.completed"
                            && completed["response"]["status"] == "completed"
                            && completed["response"]["usage"]["output_tokens"].is_u64()
                    }
                    _ => false,
                };
                checked(
                    whole
                        && numbered
                        && done.is_some_and(|(data, _)| data["text"] == text.as_str()),
                    "response.created first, response.completed last, sequence numbers from 0, and \
                     response.output_text.done with the deltas' text",
                );
                deltas.into_iter().map(|(_, event)| event).collect()
            }
        }
    }
}

/// The server-sent events of a streamed answer, each as its data's JSON and its [`Line`], checked to carry one
/// `event:` field each, naming the data's `type` (as Anthropic's and OpenAI's Responses events do).
fn named_events(invocation: &Invocation, checked: impl Fn(bool, &str)) -> Vec<(Value, Line)> {
    let names: Vec<&str> = invocation
        .lines
        .iter()
        .filter_map(|l| l.text.strip_prefix("event:"))
        .map(|name| name.trim())
        .collect();
    let events: Vec<(Value, Line)> = invocation
        .sse_events()
        .into_iter()
        .map(|event| {
            let data = serde_json::from_str::<Value>(&event.text).unwrap_or(Value::Null);
            (data, event)
        })
        .collect();
    checked(
        names.len() == events.len()
            && names
                .iter()
                .zip(&events)
                .all(|(name, (data, _))| data["type"] == *name),
        "each event named by its data's type",
    );
    events
}

/// A route of a dialect answered whole by the chat function: OpenAI's `/v1/chat/completions`, Anthropic's
/// `/v1/messages` or OpenAI's `/v1/responses` (`store: false`: stateless, as the other two, nothing kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whole {
    Completions,
    Messages,
    Responses,
}

impl Whole {
    const ALL: [Whole; 3] = [Whole::Completions, Whole::Messages, Whole::Responses];

    fn path(self) -> &'static str {
        match self {
            Whole::Completions => "/v1/chat/completions",
            Whole::Messages => "/v1/messages",
            Whole::Responses => "/v1/responses",
        }
    }

    fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Whole::Messages => ANTHROPIC_HEADERS,
            _ => &[],
        }
    }

    /// A request asking `text` of the model `MODEL_ID`.
    fn body(self, text: &str) -> Value {
        let messages = json!([{"role": "user", "content": text}]);
        match self {
            Whole::Completions => json!({"model": MODEL_ID, "messages": messages}),
            Whole::Messages => json!({
                "model": MODEL_ID,
                "max_tokens": MESSAGES_MAX_TOKENS,
                "messages": messages,
            }),
            Whole::Responses => json!({"model": MODEL_ID, "input": text, "store": false}),
        }
    }

    /// The dialect's answer, asked and checked: a `chat.completion` with the message's text, a `message` with a
    /// text block that ended its turn, a `completed` `response` whose message has its output text.
    async fn answered(self, running: &Running, text: &str) {
        let answer = running
            .json_with("POST", self.path(), self.headers(), &self.body(text))
            .await;
        let whole = match self {
            Whole::Completions => {
                answer["object"] == "chat.completion"
                    && answer["choices"][0]["message"]["content"].is_string()
            }
            Whole::Messages => {
                answer["type"] == "message"
                    && answer["role"] == "assistant"
                    && answer["content"][0]["type"] == "text"
                    && answer["content"][0]["text"].is_string()
                    && answer["stop_reason"] == "end_turn"
            }
            Whole::Responses => {
                let message = &answer["output"][0];
                answer["object"] == "response"
                    && answer["status"] == "completed"
                    && message["type"] == "message"
                    && message["content"][0]["type"] == "output_text"
                    && message["content"][0]["text"].is_string()
            }
        };
        assert!(
            whole,
            "{}: the dialect's whole answer: {answer}",
            self.path()
        );
    }
}

struct Relay {
    /// Each delta's delay, send → receipt of its line or event.
    delta_ms: Vec<f64>,
    first_byte_ms: Vec<f64>,
}

async fn relay(
    world: &World,
    variant: &Variant,
    dynamo: &Store,
    streams: usize,
    route: Streamed,
) -> Relay {
    let table = dynamo.fresh_table().await;
    let running = world.start("chat-stream", variant, dynamo, &table).await;
    let stream = |text: String| {
        let running = &running;
        async move {
            let invocation = route.call(running, &text).await;
            let deltas = route.deltas(&invocation);
            (invocation, deltas)
        }
    };
    for _ in 0..5 {
        stream("warm up".into()).await;
    }
    let mut delta_ms = Vec::new();
    for _ in 0..streams {
        let (_, deltas) = stream(format!("[[deltas:{DELTAS}]] [[delay-ms:{PACE_MS}]]")).await;
        let request = world
            .bedrock
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.operation == Operation::ConverseStream)
            .expect("the model was called");
        assert_eq!(
            deltas.len(),
            request.deltas_sent_at.len(),
            "one line or event per delta"
        );
        for (delta, sent) in deltas.iter().zip(&request.deltas_sent_at) {
            let delay = delta.at.duration_since(*sent).unwrap_or_default();
            delta_ms.push(delay.as_secs_f64() * 1000.0);
        }
    }
    let mut first_byte_ms = Vec::new();
    for _ in 0..streams * 5 / 3 {
        let (invocation, _) = stream(format!("[[deltas:{DELTAS}]] first byte")).await;
        let first = invocation
            .first_body_byte_at
            .expect("a streamed body")
            .duration_since(invocation.handed_out_at);
        first_byte_ms.push(first.as_secs_f64() * 1000.0);
    }
    Relay {
        delta_ms,
        first_byte_ms,
    }
}

/// CPU per request of each kind, summed over batches.
#[derive(Default)]
struct Cpu {
    new_chat: CpuSum,
    continued: CpuSum,
    stream: CpuSum,
    /// `/v1/chat/completions` answered whole by the chat function.
    completion: CpuSum,
    /// `/v1/chat/completions` with `stream: true` on the chat-stream function.
    completion_stream: CpuSum,
    /// `/v1/messages` answered whole by the chat function.
    message: CpuSum,
    /// `/v1/messages` with `stream: true` on the chat-stream function.
    message_stream: CpuSum,
    /// `/v1/responses` answered whole by the chat function.
    response: CpuSum,
    /// `/v1/responses` with `stream: true` on the chat-stream function.
    response_stream: CpuSum,
    history: CpuSum,
    list: CpuSum,
}

impl Cpu {
    /// The sum of a dialect's route answered whole.
    fn whole(&mut self, dialect: Whole) -> &mut CpuSum {
        match dialect {
            Whole::Completions => &mut self.completion,
            Whole::Messages => &mut self.message,
            Whole::Responses => &mut self.response,
        }
    }

    /// The sum of a streamed route.
    fn streamed(&mut self, route: Streamed) -> &mut CpuSum {
        match route {
            Streamed::Lines => &mut self.stream,
            Streamed::Completions => &mut self.completion_stream,
            Streamed::Messages => &mut self.message_stream,
            Streamed::Responses => &mut self.response_stream,
        }
    }

    /// The most resident memory a process of `function` (one of [`measures::FUNCTIONS`]) held, in MiB: serving the
    /// AI Chat Protocol's routes (or history's), and serving each dialect's route (`/v1/chat/completions`,
    /// `/v1/messages`, `/v1/responses`; `None`: history serves none).
    fn peak_rss_mib(&self, function: &str) -> (f64, Option<[f64; 3]>) {
        let (protocol, dialects) = match function {
            "chat" => (
                self.new_chat.peak_rss_kib.max(self.continued.peak_rss_kib),
                Some([&self.completion, &self.message, &self.response]),
            ),
            "chat-stream" => (
                self.stream.peak_rss_kib,
                Some([
                    &self.completion_stream,
                    &self.message_stream,
                    &self.response_stream,
                ]),
            ),
            _ => (self.history.peak_rss_kib.max(self.list.peak_rss_kib), None),
        };
        let mib = |kib: u64| kib as f64 / 1024.0;
        (
            mib(protocol),
            dialects.map(|sums| sums.map(|sum| mib(sum.peak_rss_kib))),
        )
    }
}

/// Calls before measuring, in each new process: its first calls set up connections and caches.
const WARM_UP: usize = 3;
/// Requests of each kind per batch (one table and one process each), unless `BENCH_BATCH` says otherwise.
const BATCH: usize = 25;

/// The dialects' routes `variant`'s chat function answers 404 (an older build's): asked once each.
async fn missing_routes(world: &World, variant: &Variant, dynamo: &Store) -> Vec<&'static str> {
    let table = dynamo.fresh_table().await;
    let chat = world.start("chat", variant, dynamo, &table).await;
    let mut missing = Vec::new();
    for dialect in Whole::ALL {
        let invocation = chat
            .call_with(
                "POST",
                dialect.path(),
                dialect.headers(),
                &dialect.body("hi"),
            )
            .await;
        let status = invocation
            .buffered
            .as_ref()
            .and_then(|r| r["statusCode"].as_u64());
        if status == Some(404) {
            missing.push(dialect.path());
        }
    }
    missing
}

/// One batch of `n` requests of each kind, each kind in its own new process and table: moto copies the whole
/// table for every transaction (for its rollback), so a large table would make the run crawl. With the no-op store,
/// the kinds that need a chat kept (the history calls, `/chat` continued) are left out, and so are the routes
/// `variant` does not serve.
async fn cpu_batch(world: &World, variant: &Variant, dynamo: &Store, n: usize, cpu: &mut Cpu) {
    let new_table = dynamo.fresh_table().await;
    if dynamo.keeps() {
        stored_chats_batch(world, variant, dynamo, n, cpu).await;
    }
    new_chats_batch(world, variant, dynamo, &new_table, n, cpu).await;
}

/// The kinds that need a store that keeps: the history calls that store 20 messages in each of `n` chats, the
/// history list, and `/chat` continuing each of those chats.
async fn stored_chats_batch(
    world: &World,
    variant: &Variant,
    dynamo: &Store,
    n: usize,
    cpu: &mut Cpu,
) {
    let chats_table = dynamo.fresh_table().await;

    // The history function stores the chats that `/chat` continues: each created, then given 20 messages.
    let history = world.start("history", variant, dynamo, &chats_table).await;
    let messages: Vec<Value> = (0..STORED)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            let content = format!("stored message {i}, a sentence of ordinary length for a chat");
            json!({"id": format!("m{i}"), "role": role, "content": content, "timestamp": "10:15 AM"})
        })
        .collect();
    let replace = json!({ "messages": messages });
    for _ in 0..WARM_UP {
        history
            .json("GET", "/chat-history?mode=standard&limit=5", &Value::Null)
            .await;
    }
    let mut chats = Vec::with_capacity(n);
    let mark = history.cpu_mark();
    for _ in 0..n {
        let created = history
            .json("POST", "/chat-history", &json!({"mode": "standard"}))
            .await;
        let id = created["id"].as_str().expect("a chat id").to_string();
        history
            .json("PUT", &format!("/chat-history/{id}"), &replace)
            .await;
        chats.push(id);
    }
    cpu.history.add(mark, 2 * n);
    // The history list of those chats (up to 50 a page, as the Chat UI asks).
    let mark = history.cpu_mark();
    for _ in 0..n {
        let list = history
            .json("GET", "/chat-history?mode=standard&limit=50", &Value::Null)
            .await;
        assert_eq!(list.as_array().map(Vec::len), Some(n.min(50)));
    }
    cpu.list.add(mark, n);
    drop(history);

    let hi = json!({"messages": [{"role": "user", "content": "hi"}]});
    let chat = world.start("chat", variant, dynamo, &chats_table).await;
    for _ in 0..WARM_UP {
        chat.json("POST", "/chat", &hi).await;
    }
    let mark = chat.cpu_mark();
    for id in &chats {
        let body =
            json!({"messages": [{"role": "user", "content": "and then?"}], "sessionState": id});
        let answer = chat.json("POST", "/chat", &body).await;
        assert_eq!(answer["sessionState"], *id, "the chat was continued");
    }
    cpu.continued.add(mark, n);
}

/// The kinds that start anew: `/chat` new chat, each dialect answered whole, each streamed route.
async fn new_chats_batch(
    world: &World,
    variant: &Variant,
    dynamo: &Store,
    new_table: &str,
    n: usize,
    cpu: &mut Cpu,
) {
    let hi = json!({"messages": [{"role": "user", "content": "hi"}]});
    let chat = world.start("chat", variant, dynamo, new_table).await;
    for _ in 0..WARM_UP {
        chat.json("POST", "/chat", &hi).await;
    }
    let mark = chat.cpu_mark();
    for _ in 0..n {
        chat.json("POST", "/chat", &hi).await;
    }
    cpu.new_chat.add(mark, n);
    drop(chat);

    // The dialects answered whole, by the chat function, each in its own process: stateless, nothing stored. The
    // model is one `/v1/models` lists; `AUTH_MODE=none` makes a request without `Authorization` the local user's.
    for dialect in Whole::ALL.into_iter().filter(|d| variant.serves(d.path())) {
        let chat = world.start("chat", variant, dynamo, new_table).await;
        let models = chat.json("GET", "/v1/models", &Value::Null).await;
        assert!(
            models["data"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["id"] == MODEL_ID)),
            "/v1/models lists {MODEL_ID}: {models}"
        );
        for _ in 0..WARM_UP {
            dialect.answered(&chat, "hi").await;
        }
        let mark = chat.cpu_mark();
        for _ in 0..n {
            dialect.answered(&chat, "hi").await;
        }
        cpu.whole(dialect).add(mark, n);
        drop(chat);
    }

    // Each streamed route in its own process, as the other kinds.
    for route in Streamed::ALL
        .into_iter()
        .filter(|r| variant.serves(r.path()))
    {
        let chat_stream = world.start("chat-stream", variant, dynamo, new_table).await;
        let text = format!("[[deltas:{DELTAS}]]");
        for _ in 0..WARM_UP {
            route.deltas(&route.call(&chat_stream, &text).await);
        }
        let mark = chat_stream.cpu_mark();
        for _ in 0..n {
            let invocation = route.call(&chat_stream, &text).await;
            assert_eq!(route.deltas(&invocation).len(), DELTAS);
        }
        cpu.streamed(route).add(mark, n);
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2} ms"))
        .unwrap_or_else(|| "-".into())
}

/// CPU per call, and its system part in brackets; `-` where nothing was measured (a route the build lacks).
fn cpu_cell(sum: &CpuSum) -> String {
    if sum.calls == 0 {
        return "-".into();
    }
    let (total, system) = sum.per_call();
    format!("{total:.2} ms ({system:.2})")
}

/// The CPU table's rows: each kind, its figures before and after, and its target (None: no target).
fn cpu_rows(before: &Cpu, after: &Cpu) -> [(&'static str, CpuSum, CpuSum, Option<f64>); 11] {
    [
        (
            "`/chat`, new chat",
            before.new_chat,
            after.new_chat,
            Some(NEW_CHAT_CPU_TARGET_MS),
        ),
        (
            "`/chat`, continued, 20 stored",
            before.continued,
            after.continued,
            Some(CONTINUED_CPU_TARGET_MS),
        ),
        (
            "`/chat/stream`, 30 deltas",
            before.stream,
            after.stream,
            Some(STREAM_CPU_TARGET_MS),
        ),
        (
            "`/v1/chat/completions`, buffered (chat)",
            before.completion,
            after.completion,
            None,
        ),
        (
            "`/v1/chat/completions`, `stream: true`, 30 deltas, usage (chat-stream)",
            before.completion_stream,
            after.completion_stream,
            None,
        ),
        (
            "`/v1/messages`, buffered (chat)",
            before.message,
            after.message,
            None,
        ),
        (
            "`/v1/messages`, `stream: true`, 30 deltas (chat-stream)",
            before.message_stream,
            after.message_stream,
            None,
        ),
        (
            "`/v1/responses`, buffered, `store: false` (chat)",
            before.response,
            after.response,
            None,
        ),
        (
            "`/v1/responses`, `stream: true`, `store: false`, 30 deltas (chat-stream)",
            before.response_stream,
            after.response_stream,
            None,
        ),
        (
            "history: `POST /chat-history`, `PUT` 20 messages",
            before.history,
            after.history,
            None,
        ),
        (
            "history: `GET /chat-history` (list of up to 50)",
            before.list,
            after.list,
            Some(LIST_CPU_TARGET_MS),
        ),
    ]
}

/// Where the functions' binaries are: `BENCH_FUNCTIONS_DIR` (`make flamegraph` points it at the `profiling`
/// build), else beside the bench's own binary (the release build).
fn binaries_dir() -> PathBuf {
    let dir = match std::env::var_os("BENCH_FUNCTIONS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("the bench's own path");
            exe.parent().unwrap_or(Path::new(".")).to_path_buf()
        }
    };
    checked_binaries(dir)
}

/// `dir`, once it is seen to hold the three functions.
fn checked_binaries(dir: PathBuf) -> PathBuf {
    for binary in ["chat", "chat-stream", "history"] {
        assert!(
            dir.join(binary).exists(),
            "{} is missing: build the functions first (`make bench` does)",
            dir.join(binary).display()
        );
    }
    dir
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let n = env_number("BENCH_REQUESTS", 1000);
    let streams = env_number("BENCH_STREAMS", 30);
    let binaries = binaries_dir();
    let bedrock = LocalBedrock::start()
        .await
        .expect("the local Bedrock server starts");
    let world = World {
        binaries,
        bedrock_url: bedrock.endpoint(),
        bedrock,
    };
    let mut variants = Variant::both();
    // A moto server for each variant: moto takes one request at a time, and the variants' batches run at once. And
    // a no-op store for each.
    let mut dynamos: Vec<Store> = Vec::new();
    let mut no_ops: Vec<Store> = Vec::new();
    for _ in &variants {
        dynamos.push(Store::start().await);
        no_ops.push(Store::no_op().await);
    }
    // An older build may not serve every route: those it answers 404 are measured for the other build only.
    for (variant, dynamo) in variants.iter_mut().zip(&dynamos) {
        variant.missing = missing_routes(&world, variant, dynamo).await;
        if !variant.missing.is_empty() {
            eprintln!(
                "bench: {} does not serve {:?}",
                variant.name, variant.missing
            );
        }
    }
    let variants = variants;

    // The relay's routes, stores and variants one after the other, so that none's timing disturbs another's.
    let mut relays = Vec::new();
    for (store_name, stores) in [("moto", &dynamos), ("no-op", &no_ops)] {
        for route in Streamed::ALL {
            for (variant, dynamo) in variants.iter().zip(stores) {
                if !variant.serves(route.path()) {
                    continue;
                }
                let relay_started = Instant::now();
                relays.push((
                    route,
                    variant,
                    store_name,
                    relay(&world, variant, dynamo, streams, route).await,
                ));
                eprintln!(
                    "bench: relay, {}, {}, {store_name}: {:.1} s",
                    route.name(),
                    variant.name,
                    relay_started.elapsed().as_secs_f64()
                );
            }
        }
    }
    // CPU time is counted per process, so the variants' batches run side by side, each with its own store: whatever
    // else the machine does weighs on both alike, and the run takes half as long. Then the same with no store.
    let batch_size = env_number("BENCH_BATCH", BATCH);
    let mut cpu_runs = Vec::new();
    for stores in [&dynamos, &no_ops] {
        let (mut before, mut after) = (Cpu::default(), Cpu::default());
        let mut done = 0;
        while done < n {
            let batch = batch_size.min(n - done);
            tokio::join!(
                cpu_batch(&world, &variants[0], &stores[0], batch, &mut before),
                cpu_batch(&world, &variants[1], &stores[1], batch, &mut after),
            );
            done += batch;
            eprintln!(
                "bench: CPU ({}), {done} of {n} requests of each kind: {:.1} s",
                if stores[0].keeps() {
                    "moto"
                } else {
                    "no-op store"
                },
                started.elapsed().as_secs_f64()
            );
        }
        cpu_runs.push([before, after]);
    }
    let no_op_cpus = cpu_runs.pop().expect("the no-op store's run");
    let cpus = cpu_runs.pop().expect("moto's run");

    // The figures of the functions as deployed ("after"): sizes, init, added latency, DynamoDB per turn.
    let sizes = measures::sizes(&world.binaries, &measures::workspace_root());
    let table = dynamos[1].fresh_table().await;
    let dynamo_url = dynamos[1].url();
    let env = world.env(&dynamo_url, &table);
    let starts = env_number("BENCH_STARTS", 21);
    // With another commit's build (`BENCH_BEFORE_DIR`), its init too, its starts alternating with this build's so
    // that the machine's load weighs on both alike.
    let mut inits = Vec::new();
    let mut before_inits = Vec::new();
    for function in measures::FUNCTIONS {
        let mut these = Vec::with_capacity(starts);
        let mut theirs = Vec::with_capacity(starts);
        for _ in 0..starts {
            if let Some(dir) = &variants[0].binaries {
                theirs.extend(measures::init_ms(&dir.join(function), &env, 1).await);
            }
            these.extend(measures::init_ms(&world.binaries.join(function), &env, 1).await);
        }
        inits.push((function, these));
        before_inits.push(theirs);
    }
    eprintln!("bench: init: {:.1} s", started.elapsed().as_secs_f64());
    let pairs = env_number("BENCH_LATENCY_PAIRS", 2000);
    // The turn's one write goes to the no-op store: what moto makes of a transaction (a copy of the table, each
    // transaction after the last) is moto's latency, not the function's.
    let no_op_url = no_ops[1].url();
    let no_op_env = world.env(&no_op_url, "no-op");
    let mut latencies = Vec::new();
    for concurrency in [1, 16] {
        latencies.push(
            measures::added_latency(
                &world.binaries.join("chat"),
                &world.bedrock_url,
                &no_op_env,
                pairs,
                concurrency,
            )
            .await,
        );
    }
    eprintln!("bench: latency: {:.1} s", started.elapsed().as_secs_f64());
    let costs = measures::dynamodb_per_turn(&world.binaries, &env, dynamos[1].moto()).await;

    println!();
    let build = if cfg!(debug_assertions) {
        "a debug build: not the figures of a deployment"
    } else {
        "release"
    };
    println!(
        "Streamed deltas under the Runtime API emulator (chat-stream, {build}): {streams} streams of {DELTAS} deltas \
         {PACE_MS} ms apart per route, each delta's delay from the local Bedrock server's send to the emulator's \
         receipt of its line (`/chat/stream`) or of its whole server-sent event (`stream: true` on \
         `/v1/chat/completions` with `include_usage`, `/v1/messages` and `/v1/responses`); first byte of {} unpaced \
         streams, from the event handed over to the first body byte",
        streams * 5 / 3
    );
    println!();
    println!(
        "| route | build | store | delta p50 | delta p99 | delta max | first byte p50 | first byte p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (route, variant, store, relay) in &relays {
        println!(
            "| {} | {} | {store} | {} | {} | {} | {} | {} |",
            route.name(),
            variant.name,
            ms(quantile(&relay.delta_ms, 0.5)),
            ms(quantile(&relay.delta_ms, 0.99)),
            ms(quantile(&relay.delta_ms, 1.0)),
            ms(quantile(&relay.first_byte_ms, 0.5)),
            ms(quantile(&relay.first_byte_ms, 0.99)),
        );
    }
    let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
    println!();
    // Issue 17's targets were set for `/chat/stream`'s lines; a dialect's SSE event takes the same way out.
    for (route, _, _, after) in relays
        .iter()
        .filter(|(_, v, store, _)| v.name == variants[1].name && *store == "moto")
    {
        let delta_p99 = quantile(&after.delta_ms, 0.99).unwrap_or(f64::MAX);
        let first_byte = quantile(&after.first_byte_ms, 0.5).unwrap_or(f64::MAX);
        println!(
            "Targets (after), {}: delta p99 ≤ {LINE_P99_TARGET_MS} ms: {}; first byte p50 ≤ {FIRST_BYTE_TARGET_MS} ms: {}",
            route.name(),
            verdict(delta_p99 <= LINE_P99_TARGET_MS),
            verdict(first_byte <= FIRST_BYTE_TARGET_MS)
        );
    }

    println!();
    println!(
        "CPU per request (user + system time of the function's process from /proc/<pid>/stat, system in \
         brackets), {n} requests each"
    );
    println!();
    let verdict_of = |ok: bool| if ok { "met" } else { "NOT MET" };
    let [before, after] = &cpus;
    println!(
        "| request | {} | {} | target (after) |",
        variants[0].name, variants[1].name
    );
    println!("|---|---|---|---|");
    for (name, before, after, target) in cpu_rows(before, after) {
        let judged = match target {
            Some(target) => format!(
                "≤ {target} ms: {}",
                verdict_of(after.per_call().0 <= target)
            ),
            None => "-".to_string(),
        };
        println!(
            "| {name} | {} | {} | {judged} |",
            cpu_cell(&before),
            cpu_cell(&after)
        );
    }
    println!();
    println!(
        "The same with a no-op store (every DynamoDB call answered `{{}}` at once: the function's own cost of its \
         calls, without moto's), {n} requests each, the kinds that need no chat kept"
    );
    println!();
    println!("| request | {} | {} |", variants[0].name, variants[1].name);
    println!("|---|---|---|");
    let [before, after] = &no_op_cpus;
    for (name, before, after, _) in cpu_rows(before, after) {
        if before.calls + after.calls > 0 {
            println!("| {name} | {} | {} |", cpu_cell(&before), cpu_cell(&after));
        }
    }
    let after_cpu = &cpus[1];

    println!();
    println!("Bootstrap sizes (release, stripped; zipped with deflate as a Lambda package is)");
    println!();
    println!("| function | arch | bootstrap | zipped | target ≤ 8 MB |");
    println!("|---|---|---|---|---|");
    for size in &sizes {
        match size.bytes {
            Some((raw, zipped)) => println!(
                "| {} | {} | {:.2} MB | {:.2} MB | {} |",
                size.function,
                size.arch,
                raw as f64 / 1e6,
                zipped as f64 / 1e6,
                verdict_of(raw <= BOOTSTRAP_TARGET_BYTES)
            ),
            None => println!(
                "| {} | {} | - | - | {} |",
                size.function, size.arch, size.note
            ),
        }
    }

    println!();
    println!(
        "Init (exec of the binary → its first GET /runtime/invocation/next under the emulator, {starts} starts: one \
         figure per function, whatever route it then serves; with BENCH_BEFORE_DIR, that build's too, its starts \
         alternating with this build's) and peak RSS (VmHWM of the processes of the CPU runs \
         above, after): those serving the AI Chat Protocol's routes (history: its own), and those serving each \
         dialect's route"
    );
    println!();
    println!(
        "| function | init p50 | init max | init p50, before | init p50 ≤ {INIT_P50_TARGET_MS} ms | peak RSS, protocol routes | peak RSS, \
         `/v1/chat/completions` / `/v1/messages` / `/v1/responses` | RSS ≤ {RSS_TARGET_MIB} MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((function, times), before) in inits.iter().zip(&before_inits) {
        let p50 = measures::median(times).unwrap_or(f64::MAX);
        let (protocol, dialects) = after_cpu.peak_rss_mib(function);
        let most = dialects.map_or(0.0, |mib| mib.into_iter().fold(protocol, f64::max));
        println!(
            "| {function} | {} | {} | {} | {} | {protocol:.1} MiB | {} | {} |",
            ms(Some(p50)),
            ms(quantile(times, 1.0)),
            ms(measures::median(before)),
            verdict_of(p50 <= INIT_P50_TARGET_MS),
            dialects.map_or("-".to_string(), |mib| {
                let mib = mib.map(|mib| format!("{mib:.1}"));
                format!("{} MiB", mib.join(" / "))
            }),
            verdict_of(protocol.max(most) <= RSS_TARGET_MIB),
        );
    }

    println!();
    println!(
        "Added latency: the same question asked of the local Bedrock server directly (Converse) and through the chat \
         function as a plain server (POST /chat-ui/chat, its turn's record written to the no-op store), alternating, \
         {pairs} of each"
    );
    println!();
    println!(
        "| concurrency | direct p50 | ours p50 | added p50 | direct p99 | ours p99 | added p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for latency in &latencies {
        let q = |v: &[f64], p| quantile(v, p).unwrap_or(f64::NAN);
        let (d50, o50) = (q(&latency.direct_ms, 0.5), q(&latency.ours_ms, 0.5));
        let (d99, o99) = (q(&latency.direct_ms, 0.99), q(&latency.ours_ms, 0.99));
        println!(
            "| {} | {d50:.3} ms | {o50:.3} ms | {:.3} ms | {d99:.3} ms | {o99:.3} ms | {:.3} ms |",
            latency.concurrency,
            o50 - d50,
            o99 - d99
        );
    }
    if let Some(one) = latencies.first() {
        let added = quantile(&one.ours_ms, 0.5).unwrap_or(f64::MAX)
            - quantile(&one.direct_ms, 0.5).unwrap_or(0.0);
        println!();
        println!(
            "Target: added p50 ≤ 0.3 ms at c=1: {}",
            verdict_of(added <= 0.3)
        );
    }

    println!();
    println!(
        "DynamoDB per turn (POST /chat through the chat function, counted by a proxy in front of moto; bytes are \
         the answers' as they came over the wire); a continued turn's target is its admission, one read and one write \
         ({CONTINUED_CALLS_TARGET} calls)."
    );
    println!();
    println!("| turn | calls | bytes read | target |");
    println!("|---|---|---|---|");
    for cost in &costs {
        let judged = if cost.continued {
            format!(
                "≤ {CONTINUED_CALLS_TARGET} calls: {}",
                verdict_of(cost.calls.len() <= CONTINUED_CALLS_TARGET)
            )
        } else {
            "-".to_string()
        };
        println!(
            "| {} | {} ({}) | {} | {judged} |",
            cost.chat,
            cost.calls.len(),
            cost.calls.join(", "),
            cost.bytes_read
        );
    }
    println!();
    eprintln!("bench: {:.0} s", started.elapsed().as_secs_f64());
}
