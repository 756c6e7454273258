//! `make bench`: the release functions measured, printing tables.
//!
//! As Lambda runs them (the Runtime API emulator of this crate, the local Bedrock server, moto behind a proxy that
//! keeps the functions' connections open as DynamoDB does, where moto's own server closes each after one answer),
//! each twice in one run: as they were before the relay work ("before": a multi-threaded tokio runtime, Nagle's
//! algorithm on the Runtime API connection, through the bench-only switches `CHAT_RUNTIME_FLAVOR` and
//! `CHAT_TCP_NODELAY`) and as they are:
//!
//! - the relay: streamed lines' delay from the local Bedrock server's sending of a delta to the emulator's receipt
//!   of its line (30 deltas 20 ms apart per stream, 30 streams), p50/p99, and the first byte of an unpaced stream
//!   (from the event handed to the function to the first body byte after the metadata prelude);
//! - CPU per request (user + system time of the function's process, from `/proc/<pid>/stat`) over N requests of
//!   each kind: `/chat` new chat, `/chat` continuing a chat of 20 stored messages, `/chat/stream` of 30 deltas,
//!   the history calls that stored those chats, and the history list; and each function's peak RSS over them.
//!
//! Then, as they are only ([`measures`]): bootstrap sizes, plain and zipped (arm64 when `make bench` could build
//! it); init (exec → first `GET /runtime/invocation/next`, `BENCH_STARTS` starts, 21); the latency the chat
//! function adds, as a plain server, to a direct Converse call of the local Bedrock server, at c=1 and c=16
//! (`BENCH_LATENCY_PAIRS`, 2000); and DynamoDB calls and bytes read per turn for a new chat and chats of 20 and 200
//! messages.
//!
//! `BENCH_REQUESTS` sets N (default 1000), `BENCH_BATCH` the batch (25), `BENCH_STREAMS` the paced streams (30;
//! 50 unpaced first bytes per 30 streams).

mod measures;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::{Emulator, EmulatorOptions, Function, Invocation, function_url_event, quantile};
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
const PACE_MS: u64 = 20;
const STORED: usize = 20;

struct Variant {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const VARIANTS: [Variant; 2] = [
    Variant {
        name: "before: multi-thread, Nagle",
        env: &[
            ("CHAT_RUNTIME_FLAVOR", "multi_thread"),
            ("CHAT_TCP_NODELAY", "off"),
        ],
    },
    Variant {
        name: "after: current-thread, TCP_NODELAY",
        env: &[],
    },
];

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
            ("MODEL_ID", "local.echo-v1:0"),
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
        let function = Function::spawn(&self.binaries.join(binary), &emulator, &env, true)
            .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        Running { emulator, function }
    }
}

/// A moto server as the functions see it: through a proxy that keeps their connections open, as DynamoDB does
/// (moto's server closes each after one answer, which would make every call a new connection's, and its cost the
/// function's CPU).
struct Store {
    moto: LocalDynamo,
    front: FaultProxy,
}

impl Store {
    async fn start() -> Self {
        let moto = LocalDynamo::start(None).unwrap_or_else(|e| panic!("{e}"));
        let front = FaultProxy::start_keeping_alive(&moto.endpoint())
            .await
            .expect("the proxy starts");
        Store { moto, front }
    }

    /// The endpoint the functions are given.
    fn url(&self) -> String {
        self.front.endpoint()
    }

    /// A new table's name.
    async fn fresh_table(&self) -> String {
        self.moto.fresh_table().await.1
    }
}

impl Running {
    async fn call(&self, method: &str, path: &str, body: &Value) -> Invocation {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let event = function_url_event(method, path, &body);
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
        let invocation = self.call(method, path, body).await;
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

/// CPU used over some calls of one kind, summed over batches.
#[derive(Default, Clone, Copy)]
struct CpuSum {
    total: Duration,
    system: Duration,
    calls: usize,
}

impl CpuSum {
    fn add(&mut self, mark: CpuMark<'_>, calls: usize) {
        let (total, system) = mark.since();
        self.total += total;
        self.system += system;
        self.calls += calls;
    }

    /// Per call, in ms: (user + system, system).
    fn per_call(&self) -> (f64, f64) {
        let per_call = |d: Duration| d.as_secs_f64() * 1000.0 / self.calls.max(1) as f64;
        (per_call(self.total), per_call(self.system))
    }
}

fn streamed_ok(invocation: &Invocation) {
    assert!(
        invocation.streamed && invocation.status() == Some(200) && invocation.error.is_none(),
        "a streamed 200 without error: {:?} {}",
        invocation.error,
        invocation.text()
    );
}

fn content_lines(invocation: &Invocation) -> Vec<&bench::Line> {
    invocation
        .lines
        .iter()
        .filter(|l| {
            serde_json::from_str::<Value>(&l.text).is_ok_and(|v| v["delta"]["content"].is_string())
        })
        .collect()
}

struct Relay {
    line_ms: Vec<f64>,
    first_byte_ms: Vec<f64>,
}

async fn relay(world: &World, variant: &Variant, dynamo: &Store, streams: usize) -> Relay {
    let table = dynamo.fresh_table().await;
    let running = world.start("chat-stream", variant, dynamo, &table).await;
    let stream = |text: String| {
        let running = &running;
        async move {
            let invocation = running
                .call(
                    "POST",
                    "/chat/stream",
                    &json!({"messages": [{"role": "user", "content": text}]}),
                )
                .await;
            streamed_ok(&invocation);
            invocation
        }
    };
    for _ in 0..5 {
        stream("warm up".into()).await;
    }
    let mut line_ms = Vec::new();
    for _ in 0..streams {
        let invocation = stream(format!("[[deltas:{DELTAS}]] [[delay-ms:{PACE_MS}]]")).await;
        let request = world
            .bedrock
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.operation == Operation::ConverseStream)
            .expect("the model was called");
        let lines = content_lines(&invocation);
        assert_eq!(
            lines.len(),
            request.deltas_sent_at.len(),
            "one line per delta"
        );
        for (line, sent) in lines.iter().zip(&request.deltas_sent_at) {
            let delay = line.at.duration_since(*sent).unwrap_or_default();
            line_ms.push(delay.as_secs_f64() * 1000.0);
        }
    }
    let mut first_byte_ms = Vec::new();
    for _ in 0..streams * 5 / 3 {
        let invocation = stream(format!("[[deltas:{DELTAS}]] first byte")).await;
        let first = invocation
            .first_body_byte_at
            .expect("a streamed body")
            .duration_since(invocation.handed_out_at);
        first_byte_ms.push(first.as_secs_f64() * 1000.0);
    }
    Relay {
        line_ms,
        first_byte_ms,
    }
}

/// CPU per request of each kind, summed over batches.
#[derive(Default)]
struct Cpu {
    new_chat: CpuSum,
    continued: CpuSum,
    stream: CpuSum,
    history: CpuSum,
    list: CpuSum,
    /// The most resident memory each function's process held (chat, chat-stream, history), in KiB.
    peak_rss_kib: [u64; 3],
}

impl Cpu {
    fn rss(&mut self, function: usize, running: &Running) {
        let kib = running.function.peak_rss_kib().unwrap_or(0);
        self.peak_rss_kib[function] = self.peak_rss_kib[function].max(kib);
    }
}

/// Calls before measuring, in each new process: its first calls set up connections and caches.
const WARM_UP: usize = 3;
/// Requests of each kind per batch (one table and one process each), unless `BENCH_BATCH` says otherwise.
const BATCH: usize = 25;

/// One batch of `n` requests of each kind, each kind in its own new process and table: moto copies the whole
/// table for every transaction (for its rollback), so a large table would make the run crawl.
async fn cpu_batch(world: &World, variant: &Variant, dynamo: &Store, n: usize, cpu: &mut Cpu) {
    let chats_table = dynamo.fresh_table().await;
    let new_table = dynamo.fresh_table().await;

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
    cpu.rss(2, &history);
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
    cpu.rss(0, &chat);
    drop(chat);

    let chat = world.start("chat", variant, dynamo, &new_table).await;
    for _ in 0..WARM_UP {
        chat.json("POST", "/chat", &hi).await;
    }
    let mark = chat.cpu_mark();
    for _ in 0..n {
        chat.json("POST", "/chat", &hi).await;
    }
    cpu.new_chat.add(mark, n);
    cpu.rss(0, &chat);
    drop(chat);

    let chat_stream = world
        .start("chat-stream", variant, dynamo, &new_table)
        .await;
    let body = json!({"messages": [{"role": "user", "content": format!("[[deltas:{DELTAS}]]")}]});
    for _ in 0..WARM_UP {
        streamed_ok(&chat_stream.call("POST", "/chat/stream", &body).await);
    }
    let mark = chat_stream.cpu_mark();
    for _ in 0..n {
        let invocation = chat_stream.call("POST", "/chat/stream", &body).await;
        streamed_ok(&invocation);
        assert_eq!(content_lines(&invocation).len(), DELTAS);
    }
    cpu.stream.add(mark, n);
    cpu.rss(1, &chat_stream);
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

fn cpu_cell((total, system): (f64, f64)) -> String {
    format!("{total:.2} ms ({system:.2})")
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
    // A moto server for each variant: moto takes one request at a time, and the variants' batches run at once.
    let mut dynamos: Vec<Store> = Vec::new();
    for _ in VARIANTS {
        dynamos.push(Store::start().await);
    }

    // The relay's variants one after the other, so that neither's timing disturbs the other's.
    let mut relays = Vec::new();
    for (variant, dynamo) in VARIANTS.iter().zip(&dynamos) {
        let relay_started = Instant::now();
        relays.push(relay(&world, variant, dynamo, streams).await);
        eprintln!(
            "bench: relay, {}: {:.1} s",
            variant.name,
            relay_started.elapsed().as_secs_f64()
        );
    }
    // CPU time is counted per process, so the variants' batches run side by side, each with its own moto: whatever
    // else the machine does weighs on both alike, and the run takes half as long.
    let (mut before, mut after) = (Cpu::default(), Cpu::default());
    let batch_size = env_number("BENCH_BATCH", BATCH);
    let mut done = 0;
    while done < n {
        let batch = batch_size.min(n - done);
        tokio::join!(
            cpu_batch(&world, &VARIANTS[0], &dynamos[0], batch, &mut before),
            cpu_batch(&world, &VARIANTS[1], &dynamos[1], batch, &mut after),
        );
        done += batch;
        eprintln!(
            "bench: CPU, {done} of {n} requests of each kind: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let cpus = [before, after];

    // The figures of the functions as deployed ("after"): sizes, init, added latency, DynamoDB per turn.
    let sizes = measures::sizes(&world.binaries, &measures::workspace_root());
    let table = dynamos[1].fresh_table().await;
    let dynamo_url = dynamos[1].url();
    let env = world.env(&dynamo_url, &table);
    let starts = env_number("BENCH_STARTS", 21);
    let mut inits = Vec::new();
    for function in measures::FUNCTIONS {
        inits.push((
            function,
            measures::init_ms(&world.binaries.join(function), &env, starts).await,
        ));
    }
    eprintln!("bench: init: {:.1} s", started.elapsed().as_secs_f64());
    let pairs = env_number("BENCH_LATENCY_PAIRS", 2000);
    let mut latencies = Vec::new();
    for concurrency in [1, 16] {
        latencies.push(
            measures::added_latency(
                &world.binaries.join("chat"),
                &world.bedrock_url,
                &env,
                pairs,
                concurrency,
            )
            .await,
        );
    }
    eprintln!("bench: latency: {:.1} s", started.elapsed().as_secs_f64());
    let costs = measures::dynamodb_per_turn(&world.binaries, &env, &dynamos[1].moto).await;

    println!();
    let build = if cfg!(debug_assertions) {
        "a debug build: not the figures of a deployment"
    } else {
        "release"
    };
    println!(
        "Streamed lines under the Runtime API emulator (chat-stream, {build}): {streams} streams of {DELTAS} deltas \
         {PACE_MS} ms apart, delay from the local Bedrock server's send to the emulator's receipt; first byte of {} \
         unpaced streams, from the event handed over to the first body byte",
        streams * 5 / 3
    );
    println!();
    println!("| build | line p50 | line p99 | line max | first byte p50 | first byte p99 |");
    println!("|---|---|---|---|---|---|");
    for (variant, relay) in VARIANTS.iter().zip(&relays) {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            variant.name,
            ms(quantile(&relay.line_ms, 0.5)),
            ms(quantile(&relay.line_ms, 0.99)),
            ms(quantile(&relay.line_ms, 1.0)),
            ms(quantile(&relay.first_byte_ms, 0.5)),
            ms(quantile(&relay.first_byte_ms, 0.99)),
        );
    }
    let after = &relays[1];
    let line_p99 = quantile(&after.line_ms, 0.99).unwrap_or(f64::MAX);
    let first_byte = quantile(&after.first_byte_ms, 0.5).unwrap_or(f64::MAX);
    let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
    println!();
    println!(
        "Targets (after): line p99 ≤ {LINE_P99_TARGET_MS} ms: {}; first byte p50 ≤ {FIRST_BYTE_TARGET_MS} ms: {}",
        verdict(line_p99 <= LINE_P99_TARGET_MS),
        verdict(first_byte <= FIRST_BYTE_TARGET_MS)
    );

    println!();
    println!(
        "CPU per request (user + system time of the function's process from /proc/<pid>/stat, system in \
         brackets), {n} requests each"
    );
    println!();
    let [before, after] = &cpus;
    let verdict_of = |ok: bool| if ok { "met" } else { "NOT MET" };
    // Each kind beside its target (None: no target), judged on the "after" column.
    let rows = [
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
    ];
    println!(
        "| request | {} | {} | target (after) |",
        VARIANTS[0].name, VARIANTS[1].name
    );
    println!("|---|---|---|---|");
    for (name, before, after, target) in rows {
        let judged = match target {
            Some(target) => format!(
                "≤ {target} ms: {}",
                verdict_of(after.per_call().0 <= target)
            ),
            None => "-".to_string(),
        };
        println!(
            "| {name} | {} | {} | {judged} |",
            cpu_cell(before.per_call()),
            cpu_cell(after.per_call())
        );
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
        "Init (exec of the binary → its first GET /runtime/invocation/next under the emulator, {starts} starts) \
         and peak RSS (VmHWM over the CPU runs above)"
    );
    println!();
    println!(
        "| function | init p50 | init max | init p50 ≤ {INIT_P50_TARGET_MS} ms | peak RSS | RSS ≤ {RSS_TARGET_MIB} MiB |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, (function, times)) in inits.iter().enumerate() {
        let p50 = measures::median(times).unwrap_or(f64::MAX);
        let rss_mib = after_cpu.peak_rss_kib[i] as f64 / 1024.0;
        println!(
            "| {function} | {} | {} | {} | {rss_mib:.1} MiB | {} |",
            ms(Some(p50)),
            ms(quantile(times, 1.0)),
            verdict_of(p50 <= INIT_P50_TARGET_MS),
            verdict_of(rss_mib <= RSS_TARGET_MIB),
        );
    }

    println!();
    println!(
        "Added latency: the same question asked of the local Bedrock server directly (Converse) and through the chat \
         function as a plain server (POST /chat-ui/chat, nothing stored), alternating, {pairs} of each"
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
