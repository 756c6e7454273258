//! The figures beyond the relay and CPU per request: what a deployment ships (bootstrap sizes), how fast a cold
//! start is ready (init), what the function adds to a model call through the plain server mode, and what a turn
//! costs in DynamoDB calls and bytes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::{Emulator, EmulatorOptions, Function, quantile};
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::FaultProxy;
use serde_json::{Value, json};

pub const FUNCTIONS: [&str; 3] = ["chat", "chat-stream", "history"];

/// A bootstrap's size, and zipped as Lambda takes it (deflate), in bytes.
pub struct Size {
    pub function: &'static str,
    pub arch: &'static str,
    pub bytes: Option<(u64, u64)>,
    pub note: String,
}

fn zipped_size(binary: &Path) -> Option<u64> {
    let out = std::env::temp_dir().join(format!("bench-{}.zip", std::process::id()));
    let ok = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED, compresslevel=9) as z: z.write(sys.argv[1], 'bootstrap')",
        ])
        .arg(binary)
        .arg(&out)
        .status()
        .ok()?
        .success();
    let size = ok
        .then(|| std::fs::metadata(&out).ok().map(|m| m.len()))
        .flatten();
    let _ = std::fs::remove_file(&out);
    size
}

/// Each function's release binary for x86_64 (this machine's build) and, when `make bench` could build it,
/// arm64 (`cargo lambda build --release --arm64`, into `target/bench-lambda/arm64/<function>/bootstrap`).
pub fn sizes(binaries: &Path, workspace: &Path) -> Vec<Size> {
    let mut rows = Vec::new();
    for function in FUNCTIONS {
        for (arch, path) in [
            ("x86_64", binaries.join(function)),
            (
                "arm64",
                workspace.join(format!("target/bench-lambda/arm64/{function}/bootstrap")),
            ),
        ] {
            let bytes = std::fs::metadata(&path)
                .ok()
                .and_then(|m| zipped_size(&path).map(|z| (m.len(), z)));
            let note = if bytes.is_some() {
                String::new()
            } else {
                format!("not built ({} is missing)", path.display())
            };
            rows.push(Size {
                function,
                arch,
                bytes,
                note,
            });
        }
    }
    rows
}

/// Init durations in ms: from the exec of the function binary to its first `GET …/invocation/next`, `starts` times.
pub async fn init_ms(binary: &Path, env: &[(&str, &str)], starts: usize) -> Vec<f64> {
    let mut times = Vec::with_capacity(starts);
    for _ in 0..starts {
        let emulator = Emulator::start(EmulatorOptions::default())
            .await
            .expect("the emulator starts");
        let function = Function::spawn(binary, &emulator, env, true).expect("the function starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        let ready = loop {
            if let Some(at) = emulator.first_next_at() {
                break at;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not ask for an event within 10 s: {:?}",
                binary.display(),
                emulator.init_errors()
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        times.push(ready.duration_since(function.spawned_at).as_secs_f64() * 1000.0);
    }
    times
}

/// Latencies in ms of the same question asked directly of the local Bedrock server (Converse) and through the chat
/// function as a plain server (`POST /chat-ui/chat` without a chat: no chat is stored, and `env` points the turn's
/// record at the no-op store, so the difference is the function itself), alternating, `pairs` of each,
/// `concurrency` at once.
pub struct Latency {
    pub concurrency: usize,
    pub direct_ms: Vec<f64>,
    pub ours_ms: Vec<f64>,
}

pub async fn added_latency(
    chat_binary: &Path,
    bedrock_url: &str,
    env: &[(&str, &str)],
    pairs: usize,
    concurrency: usize,
) -> Latency {
    let port = free_port();
    let _server = Function::spawn_server(chat_binary, port, env)
        .expect("the chat function starts as a server");
    let ours_url = format!("http://127.0.0.1:{port}/chat-ui/chat");
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(64)
        .build()
        .expect("an HTTP client");
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(&ours_url).send().await.is_err() {
        assert!(Instant::now() < deadline, "the chat server did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let direct_url = format!("{bedrock_url}/model/{}/converse", crate::MODEL_ID);
    let direct_body =
        json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}).to_string();
    let ours_body = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    let time = |url: String, body: String| {
        let client = client.clone();
        async move {
            let started = Instant::now();
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("an answer");
            assert_eq!(response.status(), 200);
            response.bytes().await.expect("the whole answer");
            started.elapsed().as_secs_f64() * 1000.0
        }
    };
    // Warm up both paths: connections, and the function's first calls.
    for _ in 0..20 {
        time(direct_url.clone(), direct_body.clone()).await;
        time(ours_url.clone(), ours_body.clone()).await;
    }
    let per_task = pairs.div_ceil(concurrency);
    let tasks = (0..concurrency).map(|_| {
        let (direct_url, ours_url) = (direct_url.clone(), ours_url.clone());
        let (direct_body, ours_body) = (direct_body.clone(), ours_body.clone());
        let time = &time;
        async move {
            let (mut direct, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..per_task {
                direct.push(time(direct_url.clone(), direct_body.clone()).await);
                ours.push(time(ours_url.clone(), ours_body.clone()).await);
            }
            (direct, ours)
        }
    });
    let mut latency = Latency {
        concurrency,
        direct_ms: Vec::new(),
        ours_ms: Vec::new(),
    };
    for (direct, ours) in futures_util::future::join_all(tasks).await {
        latency.direct_ms.extend(direct);
        latency.ours_ms.extend(ours);
    }
    latency
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// What one turn cost in DynamoDB: its calls in order and the bytes of their answers.
pub struct TurnCost {
    pub chat: String,
    /// A turn of a chat that was stored before it (the target of one read and one write).
    pub continued: bool,
    pub calls: Vec<String>,
    pub bytes_read: usize,
}

/// A new chat's turn and a continued turn of chats of 20 and 200 stored messages, through the chat and history
/// functions as plain servers, their DynamoDB calls counted by a proxy in front of moto.
pub async fn dynamodb_per_turn(
    binaries: &Path,
    env: &[(&str, &str)],
    dynamo: &LocalDynamo,
) -> Vec<TurnCost> {
    let (_, table) = dynamo.fresh_table().await;
    // Keeping the function's connections open, as DynamoDB does (see `Store` in main.rs).
    let proxy = FaultProxy::start_keeping_alive(&dynamo.endpoint())
        .await
        .expect("the proxy starts");
    let proxy_url = proxy.endpoint();
    let mut env: Vec<(&str, &str)> = env
        .iter()
        .copied()
        .filter(|(k, _)| *k != "AWS_ENDPOINT_URL_DYNAMODB" && *k != "TABLE_NAME")
        .collect();
    env.push(("AWS_ENDPOINT_URL_DYNAMODB", &proxy_url));
    env.push(("TABLE_NAME", &table));
    let (chat_port, history_port) = (free_port(), free_port());
    let _chat =
        Function::spawn_server(&binaries.join("chat"), chat_port, &env).expect("chat starts");
    let _history = Function::spawn_server(&binaries.join("history"), history_port, &env)
        .expect("history starts");
    let client = reqwest::Client::new();
    let chat = |body: Value| {
        let client = client.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match client
                    .post(format!("http://127.0.0.1:{chat_port}/chat"))
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(r) => {
                        assert_eq!(r.status(), 200);
                        break r.json::<Value>().await.expect("JSON");
                    }
                    Err(e) => {
                        assert!(Instant::now() < deadline, "the chat server: {e}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
    };
    let cost = |name: String, continued: bool, from: usize| {
        let answered = proxy.answered();
        TurnCost {
            chat: name,
            continued,
            calls: answered[from..].iter().map(|(op, _)| op.clone()).collect(),
            bytes_read: answered[from..].iter().map(|(_, n)| n).sum(),
        }
    };
    let mut costs = Vec::new();
    // A warm-up turn, then a new chat's.
    chat(json!({"messages": [{"role": "user", "content": "warm up"}]})).await;
    let from = proxy.answered().len();
    chat(json!({"messages": [{"role": "user", "content": "hi"}]})).await;
    costs.push(cost("new chat".into(), false, from));
    for stored in [20usize, 200] {
        let deadline = Instant::now() + Duration::from_secs(20);
        let created: Value = loop {
            match client
                .post(format!("http://127.0.0.1:{history_port}/chat-history"))
                .json(&json!({"mode": "standard"}))
                .send()
                .await
            {
                Ok(r) => break r.json().await.expect("JSON"),
                Err(e) => {
                    assert!(Instant::now() < deadline, "the history server: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let id = created["id"].as_str().expect("a chat id").to_string();
        let messages: Vec<Value> = (0..stored)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"id": format!("m{i}"), "role": role, "timestamp": "10:15 AM",
                       "content": format!("stored message {i}, a sentence of ordinary length for a chat")})
            })
            .collect();
        let status = client
            .put(format!("http://127.0.0.1:{history_port}/chat-history/{id}"))
            .json(&json!({ "messages": messages }))
            .send()
            .await
            .expect("an answer")
            .status();
        assert_eq!(status, 200);
        let from = proxy.answered().len();
        let answer = chat(
            json!({"messages": [{"role": "user", "content": "and then?"}], "sessionState": id}),
        )
        .await;
        assert_eq!(answer["sessionState"], json!(id));
        costs.push(cost(
            format!("continued, {stored} stored messages"),
            true,
            from,
        ));
    }
    costs
}

pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/bench sits two levels below the workspace root")
        .to_path_buf()
}
