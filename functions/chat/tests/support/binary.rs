//! The built `chat` binary run as its own process (as a plain server, or under a Lambda Runtime API emulator), with
//! the backends it talks to: the local Bedrock server, the local knowledge base and moto, through the real SDK
//! clients. A process of its own, because a process installs its logger (and its trace exporter) once. Shared by
//! the tests that read what the process writes (secrets_in_logs.rs, traces.rs).

#![allow(dead_code)]

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chat_testing::harness::{self, ECHO_MODEL, JwtSigner};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A word that exists only in the conversation.
pub const SECRET_WORD: &str = "zanzibarquokka";
/// The cookie the client sends.
pub const COOKIE_VALUE: &str = "cookiesecret7f3a9c";
/// The session token of the function's AWS credentials (signed into every SDK request's headers).
pub const SESSION_TOKEN: &str = "sessiontokensecret41d8e2";
pub const ISSUER: &str = "https://issuer.example";
pub const AUDIENCE: &str = "chat-api";
/// The X-Ray trace header the emulated Runtime API hands out with its event, and that header's `Root`.
pub const LAMBDA_TRACE_HEADER: &str =
    "Root=1-6740a000-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=0";
pub const LAMBDA_TRACE_ROOT: &str = "1-6740a000-0123456789abcdef01234567";
/// The request id the emulated Runtime API gives its event.
pub const LAMBDA_REQUEST_ID: &str = "req-logs-1";

/// The backends the function talks to, and what configures it to.
pub struct Backends {
    pub bedrock: LocalBedrock,
    _kb: LocalKnowledgeBase,
    pub env: Vec<(String, String)>,
    pub signer: JwtSigner,
}

impl Backends {
    /// A token of the user `alice`, as the function's issuer signs them.
    pub fn token(&self) -> String {
        self.signer.token_with(
            ISSUER,
            AUDIENCE,
            |_| {},
            json!({"sub": "alice-sub", "oid": "alice"}),
        )
    }
}

/// The backends, started, and the function's environment with `RUST_LOG=trace`.
pub async fn backends() -> Backends {
    let bedrock = LocalBedrock::start()
        .await
        .expect("the local Bedrock server starts");
    let collection =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base");
    let kb = LocalKnowledgeBase::start(harness::KNOWLEDGE_BASE_ID, collection)
        .await
        .expect("the local knowledge base starts");
    let moto = LocalDynamo::shared();
    let (_, table) = moto.fresh_table().await;
    let signer = JwtSigner::new("k1");
    let jwks = signer.jwks_file();
    let env = [
        ("MODEL_ID", ECHO_MODEL.to_string()),
        ("TABLE_NAME", table),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint()),
        ("AWS_ENDPOINT_URL_DYNAMODB", moto.endpoint()),
        ("KNOWLEDGE_BASE_ID", harness::KNOWLEDGE_BASE_ID.to_string()),
        ("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", kb.endpoint()),
        ("AWS_ACCESS_KEY_ID", "local".into()),
        ("AWS_SECRET_ACCESS_KEY", "local".into()),
        ("AWS_SESSION_TOKEN", SESSION_TOKEN.into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AUTH_MODE", "jwt".into()),
        ("JWT_ISSUER", ISSUER.into()),
        ("JWT_AUDIENCE", AUDIENCE.into()),
        ("JWT_OID_CLAIM", "oid".into()),
        ("JWKS_FILE", jwks.to_string_lossy().into_owned()),
        ("RUST_LOG", "trace".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Backends {
        bedrock,
        _kb: kb,
        env,
        signer,
    }
}

/// The function's process, its every line (stdout and stderr) gathered as it writes them.
pub struct Function {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Function {
    /// Starts the built `chat` binary with only `env` (and `PATH`) in its environment.
    pub fn spawn(env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_chat"));
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the chat binary starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let readers = vec![
            Self::gather(BufReader::new(stdout), lines.clone()),
            Self::gather(BufReader::new(stderr), lines.clone()),
        ];
        Self {
            child,
            lines,
            readers,
        }
    }

    fn gather<R: tokio::io::AsyncBufRead + Unpin + Send + 'static>(
        reader: R,
        lines: Arc<Mutex<Vec<String>>>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut reader = reader.lines();
            while let Ok(Some(line)) = reader.next_line().await {
                lines.lock().unwrap().push(line);
            }
        })
    }

    /// The names of the process's threads (as the kernel keeps them: at most 15 bytes).
    pub fn threads(&self) -> Vec<String> {
        let pid = self.child.id().expect("the function is running");
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
                    .map(|name| name.trim().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The lines written so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Sends the process SIGTERM: a plain server finishes what is in flight, then ends.
    fn terminate(&self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }

    /// Every line the process wrote, once it has ended.
    async fn all_lines(self) -> Vec<String> {
        for reader in self.readers {
            let _ = reader.await;
        }
        std::mem::take(&mut *self.lines.lock().unwrap())
    }

    /// Ends the process (SIGTERM, then a kill if it has not ended within 10 s) and returns every line it wrote.
    pub async fn stop(mut self) -> Vec<String> {
        self.terminate();
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        self.all_lines().await
    }

    /// Ends the process with SIGTERM (a plain server's stop); its status and every line it wrote.
    pub async fn terminated(self) -> (ExitStatus, Vec<String>) {
        self.terminate();
        self.exited().await
    }

    /// Waits (a minute at most) for the process to end by itself; its status and every line it wrote.
    pub async fn exited(mut self) -> (ExitStatus, Vec<String>) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the function ends by itself")
            .unwrap();
        (status, self.all_lines().await)
    }
}

/// A free loopback port (taken back from the system just before the function binds it).
pub use chat_testing::harness::free_port;

/// The function as a plain server on a free loopback port with `env`, once it answers; and its base URL.
pub async fn plain_server(env: &[(String, String)]) -> (Function, String) {
    let port = free_port();
    let mut env = env.to_vec();
    env.extend([
        ("BIND_ADDRESS".to_string(), "127.0.0.1".to_string()),
        ("PORT".to_string(), port.to_string()),
    ]);
    let function = Function::spawn(&env);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    // Ready once it answers (a 401 without a token).
    for _ in 0..600 {
        if client.get(format!("{base}/chat")).send().await.is_ok() {
            return (function, base);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the function never listened on {base}");
}

/// The asked chat turns: a question holding the secret word, then one more turn of the same chat (its history read
/// back from the table).
pub fn first_turn() -> Value {
    json!({"messages": [{"role": "user", "content": format!("What about parental leave, {SECRET_WORD}?")}]})
}

pub fn second_turn(session_state: &Value) -> Value {
    json!({
        "messages": [{"role": "user", "content": format!("And {SECRET_WORD} again?")}],
        "sessionState": session_state,
    })
}

// ---- Under Lambda's runtime ------------------------------------------------------------------------------------------

/// A Lambda Runtime API emulator handing out one event, and the function running under it.
pub struct UnderLambda {
    pub function: Function,
    answered: mpsc::UnboundedReceiver<Result<Value, String>>,
    server: tokio::task::JoinHandle<()>,
}

impl UnderLambda {
    /// Starts the emulator with `event` (invocation [`LAMBDA_REQUEST_ID`], trace [`LAMBDA_TRACE_HEADER`]) and the
    /// function under it with `env`, JSON lines at `level`.
    pub async fn start(event: Value, env: &[(String, String)], level: &str) -> Self {
        let (answers, answered) = mpsc::unbounded_channel();
        let runtime = Arc::new(Runtime {
            event: Mutex::new(Some(event)),
            answers,
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(error))
            .with_state(runtime);
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let api = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let mut env = env.to_vec();
        env.extend(
            [
                ("AWS_LAMBDA_RUNTIME_API", api.to_string()),
                ("AWS_LAMBDA_FUNCTION_NAME", "chat".into()),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024".into()),
                ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
                ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
                ("AWS_LAMBDA_LOG_LEVEL", level.into()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        Self {
            function: Function::spawn(&env),
            answered,
            server,
        }
    }

    /// The function's answer to the event (panics if it failed or took over two minutes), once the function has
    /// finished the invocation: the runtime's invocation span closes after the answer is posted, so a test that
    /// ended the function at the answer's arrival could cut off that span's close line (it waits for that line,
    /// ten seconds at most; what the lines hold is the test's to assert).
    pub async fn answer(&mut self) -> Value {
        let answer = tokio::time::timeout(Duration::from_secs(120), self.answered.recv())
            .await
            .expect("the function answers the event")
            .expect("an answer")
            .unwrap_or_else(|e| panic!("the function failed: {e}"));
        let invocation_closed = |line: &String| {
            serde_json::from_str::<Value>(line)
                .is_ok_and(|l| l["message"] == "close" && l["span"] == "Lambda runtime invoke")
        };
        for _ in 0..500 {
            if self.function.lines().iter().any(invocation_closed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answer
    }

    /// Ends the function and the emulator; every line the function wrote.
    pub async fn stop(self) -> Vec<String> {
        let lines = self.function.stop().await;
        self.server.abort();
        lines
    }
}

/// The emulator's state: the one event to hand out, and what came back.
struct Runtime {
    event: Mutex<Option<Value>>,
    answers: mpsc::UnboundedSender<Result<Value, String>>,
}

/// `GET …/invocation/next`: the event once, then a poll that never answers (as Lambda's, until the next event).
async fn next(State(runtime): State<Arc<Runtime>>) -> Response {
    let Some(event) = runtime.event.lock().unwrap().take() else {
        std::future::pending::<()>().await;
        unreachable!()
    };
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 300_000;
    let mut headers = HeaderMap::new();
    for (name, value) in [
        (
            "lambda-runtime-aws-request-id",
            LAMBDA_REQUEST_ID.to_string(),
        ),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:123456789012:function:chat".into(),
        ),
        ("lambda-runtime-trace-id", LAMBDA_TRACE_HEADER.into()),
        ("content-type", "application/json".into()),
    ] {
        headers.insert(name, value.parse().unwrap());
    }
    (headers, event.to_string()).into_response()
}

async fn response(
    State(runtime): State<Arc<Runtime>>,
    Path(_id): Path<String>,
    body: String,
) -> StatusCode {
    let _ = runtime
        .answers
        .send(serde_json::from_str(&body).map_err(|e| format!("{e}: {body}")));
    StatusCode::ACCEPTED
}

async fn error(State(runtime): State<Arc<Runtime>>, body: String) -> StatusCode {
    let _ = runtime.answers.send(Err(body));
    StatusCode::ACCEPTED
}

/// A function URL's event (payload 2.0) for `POST /chat` with `body`, a bearer token and a cookie.
pub fn url_event(body: &Value, token: &str) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/chat",
        "rawQueryString": "",
        "cookies": [format!("session={COOKIE_VALUE}")],
        "headers": {
            "content-type": "application/json",
            "authorization": format!("Bearer {token}"),
            "host": "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
            "x-forwarded-proto": "https",
        },
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefghijklmnopqrstuvwxyz012345",
            "domainName": "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefghijklmnopqrstuvwxyz012345",
            "http": {
                "method": "POST",
                "path": "/chat",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.10",
                "userAgent": "test",
            },
            "requestId": "5f2c8e0a-7b1d-4c7e-9a55-3a1f0c2d9e01",
            "routeKey": "$default",
            "stage": "$default",
            "time": "22/Nov/2026:06:00:00 +0000",
            "timeEpoch": 1795154400000u64,
        },
        "body": body.to_string(),
        "isBase64Encoded": false,
    })
}
