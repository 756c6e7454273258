//! No log line holds a secret, at any level: the built `chat` binary runs real turns at `RUST_LOG=trace` (as a plain
//! server, and under a Lambda Runtime API emulator with `AWS_LAMBDA_LOG_LEVEL=TRACE` and JSON lines, as Lambda runs
//! it), talking to the local Bedrock server, the local knowledge base and moto through the real SDK clients; every
//! line it writes is scanned for the bearer token, the cookie, the AWS session token and a word of the
//! conversation. A process of its own, because a process installs its logger once.

use std::net::SocketAddr;
use std::process::Stdio;
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
const SECRET_WORD: &str = "zanzibarquokka";
/// The cookie the client sends.
const COOKIE_VALUE: &str = "cookiesecret7f3a9c";
/// The session token of the function's AWS credentials (signed into every SDK request's headers).
const SESSION_TOKEN: &str = "sessiontokensecret41d8e2";
const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "chat-api";

/// The backends the function talks to, and what configures it to.
struct Backends {
    bedrock: LocalBedrock,
    _kb: LocalKnowledgeBase,
    env: Vec<(String, String)>,
    signer: JwtSigner,
}

async fn backends() -> Backends {
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
struct Function {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Function {
    /// Starts the built `chat` binary with only `env` (and `PATH`) in its environment.
    fn spawn(env: &[(String, String)]) -> Self {
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

    /// Ends the process (SIGTERM: a plain server finishes what is in flight) and returns every line it wrote.
    async fn stop(mut self) -> Vec<String> {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        for reader in self.readers {
            let _ = reader.await;
        }
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

/// A free loopback port (taken back from the system just before the function binds it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The asked chat turns: a question holding the secret word, then one more turn of the same chat (its history read
/// back from the table).
fn first_turn() -> Value {
    json!({"messages": [{"role": "user", "content": format!("What about parental leave, {SECRET_WORD}?")}]})
}

fn second_turn(session_state: &Value) -> Value {
    json!({
        "messages": [{"role": "user", "content": format!("And {SECRET_WORD} again?")}],
        "sessionState": session_state,
    })
}

/// Checks the lines of a run: none holds a secret, and the run did log at trace level (so that the scan could
/// find something).
fn assert_clean(lines: &[String], secrets: &[&str], trace_marker: &str) {
    let all = lines.join("\n");
    assert!(
        lines.iter().any(|l| l.contains(trace_marker)),
        "no trace-level line was written; the scan proves nothing:\n{all}"
    );
    assert!(
        lines.iter().any(|l| l.contains("request answered")),
        "the request was not logged:\n{all}"
    );
    let leaks: Vec<(&str, usize, &String)> = secrets
        .iter()
        .flat_map(|secret| {
            let found: Vec<&String> = lines.iter().filter(|l| l.contains(secret)).collect();
            found.first().map(|first| (*secret, found.len(), *first))
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "secrets in the logs (secret, lines holding it, the first of them): {leaks:#?}"
    );
}

/// The parts of a JWT, each of which is secret enough alone (the signature most of all).
fn token_parts(token: &str) -> Vec<&str> {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    // The header is the same for every token of this key, so only the claims and the signature are scanned.
    vec![token, parts[1], parts[2]]
}

#[tokio::test]
async fn a_plain_server_at_trace_level_logs_no_secret() {
    let backends = backends().await;
    let port = free_port();
    let mut env = backends.env.clone();
    env.extend([
        ("BIND_ADDRESS".to_string(), "127.0.0.1".to_string()),
        ("PORT".to_string(), port.to_string()),
    ]);
    let function = Function::spawn(&env);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    // Ready once it answers (a 401 without a token).
    let mut ready = false;
    for _ in 0..600 {
        if client.get(format!("{base}/chat")).send().await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the function never listened on {base}");

    let token = backends.signer.token_with(
        ISSUER,
        AUDIENCE,
        |_| {},
        json!({"sub": "alice-sub", "oid": "alice"}),
    );
    let send = |body: Value| {
        client
            .post(format!("{base}/chat"))
            .bearer_auth(&token)
            .header("cookie", format!("session={COOKIE_VALUE}"))
            .json(&body)
            .send()
    };
    let first = send(first_turn()).await.unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    // The echo model repeats the question: the secret word went through the whole turn.
    assert!(first.to_string().contains(SECRET_WORD), "{first}");
    let second = send(second_turn(&first["sessionState"])).await.unwrap();
    assert_eq!(second.status(), 200);
    let model_saw = backends.bedrock.requests().last().unwrap().body.to_string();
    assert!(model_saw.contains(SECRET_WORD), "{model_saw}");
    // Requests refused for their shape: the refusal is logged, never what the client wrote.
    for refused in [
        json!({"messages": SECRET_WORD}),
        json!({"messages": [{"role": SECRET_WORD, "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": [SECRET_WORD]}]}),
        json!({"messages": [{"role": "user", "content": "x", "files": SECRET_WORD}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "context": {"overrides": {"top": SECRET_WORD}}}),
        json!({"messages": [{"role": "user", "content": "x"}], "sessionState": SECRET_WORD}),
    ] {
        let status = send(refused.clone()).await.unwrap().status();
        assert!(status.is_client_error(), "{refused}: {status}");
    }
    let raw = client
        .post(format!("{base}/chat"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(format!(
            "{{\"messages\": [{{\"role\": \"user\", \"content\": \"{SECRET_WORD}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);

    let lines = function.stop().await;
    let mut secrets = token_parts(&token);
    secrets.extend([SECRET_WORD, COOKIE_VALUE, SESSION_TOKEN]);
    assert_clean(&lines, &secrets, "TRACE");
}

// ---- Under Lambda's runtime ------------------------------------------------------------------------------------------

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
        ("lambda-runtime-aws-request-id", "req-logs-1".to_string()),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:123456789012:function:chat".into(),
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-6740a000-0123456789abcdef01234567;Sampled=0".into(),
        ),
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
fn url_event(body: &Value, token: &str) -> Value {
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

#[tokio::test]
async fn under_lambda_at_trace_level_no_secret_is_logged() {
    let backends = backends().await;
    let token = backends.signer.token_with(
        ISSUER,
        AUDIENCE,
        |_| {},
        json!({"sub": "alice-sub", "oid": "alice"}),
    );
    let (answers, mut answered) = mpsc::unbounded_channel();
    let runtime = Arc::new(Runtime {
        event: Mutex::new(Some(url_event(&first_turn(), &token))),
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

    let mut env = backends.env.clone();
    env.extend(
        [
            ("AWS_LAMBDA_RUNTIME_API", api.to_string()),
            ("AWS_LAMBDA_FUNCTION_NAME", "chat".into()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
            ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
            ("AWS_LAMBDA_LOG_LEVEL", "TRACE".into()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    let function = Function::spawn(&env);
    let answer = tokio::time::timeout(Duration::from_secs(120), answered.recv())
        .await
        .expect("the function answers the event")
        .expect("an answer")
        .unwrap_or_else(|e| panic!("the function failed: {e}"));
    assert_eq!(answer["statusCode"], 200, "{answer}");
    let body = answer["body"].as_str().unwrap_or_default();
    assert!(body.contains(SECRET_WORD), "{answer}");
    let lines = function.stop().await;
    server.abort();

    // Every line is a JSON object (Lambda's JSON format), and the request's lines carry its id; the turn's metrics
    // record (CloudWatch EMF, its `_aws` block) is a line of its own, which Lambda takes at INFO.
    for line in &lines {
        let parsed: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"));
        assert!(
            parsed["level"].is_string() || parsed["_aws"]["CloudWatchMetrics"].is_array(),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("\"_aws\"")),
        "the turn's metrics record: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("request answered") && l.contains("\"requestId\":\"req-logs-1\"")),
        "{lines:#?}"
    );
    let mut secrets = token_parts(&token);
    secrets.extend([SECRET_WORD, COOKIE_VALUE, SESSION_TOKEN]);
    assert_clean(&lines, &secrets, "\"level\":\"TRACE\"");
}
