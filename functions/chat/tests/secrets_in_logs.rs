//! No log line holds a secret, at any level: the built `chat` binary runs real turns at `RUST_LOG=trace` (as a plain
//! server, and under a Lambda Runtime API emulator with `AWS_LAMBDA_LOG_LEVEL=TRACE` and JSON lines, as Lambda runs
//! it), talking to the local Bedrock server, the local knowledge base and moto through the real SDK clients; every
//! line it writes, spans' fields included (each span's close line holds them), is scanned for the bearer token, the
//! cookie, the AWS session token and a word of the conversation. A process of its own, because a process installs
//! its logger once.

#[path = "support/binary.rs"]
mod binary;

use binary::{
    COOKIE_VALUE, SECRET_WORD, SESSION_TOKEN, UnderLambda, backends, first_turn, plain_server,
    second_turn, url_event,
};
use serde_json::{Value, json};

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
    // A span's fields are written with its close (JSON: `"message":"close"`; text: `close time.busy=…`), so the
    // scan reads them too: the request's, the model call's and the store's.
    for span in ["request", "model.converse", "store."] {
        assert!(
            lines.iter().any(|l| l.contains(span)
                && (l.contains("\"message\":\"close\"") || l.contains(": close time.busy="))),
            "no {span} span closed; its fields went unscanned:\n{all}"
        );
    }
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
    let (function, base) = plain_server(&backends.env).await;
    let client = reqwest::Client::new();
    let token = backends.token();
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

#[tokio::test]
async fn under_lambda_at_trace_level_no_secret_is_logged() {
    let backends = backends().await;
    let token = backends.token();
    let mut lambda =
        UnderLambda::start(url_event(&first_turn(), &token), &backends.env, "TRACE").await;
    let answer = lambda.answer().await;
    assert_eq!(answer["statusCode"], 200, "{answer}");
    let body = answer["body"].as_str().unwrap_or_default();
    assert!(body.contains(SECRET_WORD), "{answer}");
    let lines = lambda.stop().await;

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
