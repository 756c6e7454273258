//! A function started with a wrong setting says so in words people can read (chat_runtime::start): the built `chat`
//! binary, under a Runtime API served here, posts Lambda's init error naming the variable and why, logs it once and
//! exits without asking for a request; as a plain server it logs it once and answers every request with a 500 that
//! names no setting. Processes of their own, as a function's start is its process's.

#[path = "support/binary.rs"]
mod binary;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::{Value, json};

use binary::{Function, free_port};

/// The lines that mention `text`.
fn mentioning<'a>(lines: &'a [String], text: &str) -> Vec<&'a String> {
    lines.iter().filter(|l| l.contains(text)).collect()
}

/// What the Runtime API was told: each init error (its headers and body), and how often an event was asked for.
#[derive(Default)]
struct Told {
    init_errors: Vec<(HeaderMap, String)>,
    nexts: usize,
}

/// A Runtime API on a loopback port: it takes init errors (202, as Lambda's) and never has an event to hand out.
async fn runtime_api() -> (SocketAddr, Arc<Mutex<Told>>) {
    let told = Arc::new(Mutex::new(Told::default()));
    let app = Router::new()
        .route(
            "/2018-06-01/runtime/init/error",
            post(
                |State(told): State<Arc<Mutex<Told>>>, headers: HeaderMap, body: String| async move {
                    told.lock().unwrap().init_errors.push((headers, body));
                    StatusCode::ACCEPTED
                },
            ),
        )
        .route(
            "/2018-06-01/runtime/invocation/next",
            get(|State(told): State<Arc<Mutex<Told>>>| async move {
                told.lock().unwrap().nexts += 1;
                std::future::pending::<()>().await;
            }),
        )
        .with_state(told.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (address, told)
}

/// Runs the function under a Runtime API with `env`; checks it exited with status 1 after one init error naming
/// `variable`, without asking for an event; returns that error's body and the function's lines.
async fn under_lambda(env: &[(&str, &str)], variable: &str) -> (Value, Vec<String>) {
    let (api, told) = runtime_api().await;
    let api = api.to_string();
    let mut vars = vec![
        ("AWS_LAMBDA_RUNTIME_API", api.as_str()),
        ("AWS_LAMBDA_FUNCTION_NAME", "chat"),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
    ];
    vars.extend_from_slice(env);
    let (status, lines) = Function::spawn(&vars).exited().await;
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(1), "{all}");
    let told = told.lock().unwrap();
    assert_eq!(
        told.nexts, 0,
        "a function that cannot start asks for no event"
    );
    assert_eq!(told.init_errors.len(), 1, "{all}");
    let (headers, body) = &told.init_errors[0];
    assert_eq!(
        headers["lambda-runtime-function-error-type"],
        "Runtime.ConfigError"
    );
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["errorType"], "Runtime.ConfigError", "{body}");
    assert_eq!(body["stackTrace"], json!([]), "{body}");
    let message = body["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("environment variable {variable}: ")),
        "{body}"
    );
    // Logged once, at ERROR, as one JSON line naming the variable; nothing else says it again.
    let logged = mentioning(&lines, variable);
    assert_eq!(logged.len(), 1, "{all}");
    let line: Value = serde_json::from_str(logged[0]).unwrap();
    assert_eq!(
        (line["level"].as_str(), line["variable"].as_str()),
        (Some("ERROR"), Some(variable)),
        "{all}"
    );
    (body, lines)
}

#[tokio::test]
async fn under_lambda_a_bad_number_is_posted_as_the_init_error_and_logged_once() {
    let (body, lines) = under_lambda(&[("MAX_BODY_BYTES", "abc")], "MAX_BODY_BYTES").await;
    assert_eq!(
        body["errorMessage"],
        "environment variable MAX_BODY_BYTES: expected a positive whole number, got \"abc\"",
    );
    let line: Value = serde_json::from_str(mentioning(&lines, "MAX_BODY_BYTES")[0]).unwrap();
    assert_eq!(
        line["reason"], "expected a positive whole number, got \"abc\"",
        "{line}"
    );
}

#[tokio::test]
async fn under_lambda_a_missing_variable_is_posted_as_the_init_error() {
    // `jwt` needs its issuer; the keys' URL is set, so the issuer is what is missing.
    let (body, _) = under_lambda(
        &[
            ("AUTH_MODE", "jwt"),
            ("JWKS_URL", "https://issuer.example/keys"),
        ],
        "JWT_ISSUER",
    )
    .await;
    assert_eq!(
        body["errorMessage"],
        "environment variable JWT_ISSUER: required when AUTH_MODE is jwt",
    );
}

#[tokio::test]
async fn under_lambda_a_bad_runtime_switch_is_posted_as_the_init_error() {
    // Read before logging is set up (chat_runtime::run_function), yet reported the same way.
    let (body, _) =
        under_lambda(&[("CHAT_RUNTIME_FLAVOR", "threads")], "CHAT_RUNTIME_FLAVOR").await;
    assert_eq!(
        body["errorMessage"],
        "environment variable CHAT_RUNTIME_FLAVOR: expected current_thread or multi_thread, got \"threads\"",
    );
}

#[tokio::test]
async fn a_plain_server_answers_every_request_with_a_500_that_names_no_setting() {
    let port = free_port().to_string();
    let function = Function::spawn(&[
        ("BIND_ADDRESS", "127.0.0.1"),
        ("PORT", port.as_str()),
        ("MAX_BODY_BYTES", "abc"),
    ]);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut listening = false;
    for _ in 0..600 {
        if client.get(format!("{base}/chat")).send().await.is_ok() {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listening, "the function never listened on {base}");

    for request in [
        client.get(format!("{base}/chat-history")),
        client
            .post(format!("{base}/chat"))
            .json(&json!({"messages": [{"role": "user", "content": "hi"}]})),
        client.request(reqwest::Method::OPTIONS, format!("{base}/chat/stream")),
        client.delete(format!("{base}/no/such/route")),
    ] {
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 500);
        assert_eq!(answer.headers()["content-type"], "application/json");
        let text = answer.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body, json!({"error": chat_runtime::MISCONFIGURED}));
        assert!(body["error"].as_str().unwrap().contains("misconfigured"));
        // Which setting, and its value, are the operator's to read in the log.
        assert!(
            !text.contains("MAX_BODY_BYTES") && !text.contains("abc"),
            "{text}"
        );
    }

    let (status, lines) = function.terminated().await;
    let all = lines.join("\n");
    assert!(status.success(), "a stop on SIGTERM: {status}\n{all}");
    let logged = mentioning(&lines, "MAX_BODY_BYTES");
    assert_eq!(
        logged.len(),
        1,
        "logged once, whatever the requests:\n{all}"
    );
    assert!(
        logged[0].contains("ERROR") && logged[0].contains("expected a positive whole number"),
        "{all}"
    );
}

#[tokio::test]
async fn a_plain_server_with_nowhere_to_listen_says_why_once_and_exits() {
    // The rest of the configuration is whole: the service is built (no AWS call is made) before the server binds.
    let (status, lines) = Function::spawn(&[
        ("PORT", "http"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ])
    .exited()
    .await;
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(1), "{all}");
    let logged = mentioning(&lines, "PORT");
    assert_eq!(logged.len(), 1, "{all}");
    assert!(
        logged[0].contains("ERROR") && logged[0].contains("expected a port number"),
        "{all}"
    );
}
