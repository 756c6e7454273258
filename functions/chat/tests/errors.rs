//! Every error status of the contract, through the real SDK client and the local Bedrock server: each one a JSON
//! `{"error": …}` with the right status and no internals in the message.

mod support;

use std::time::{Duration, Instant};

use chat_core::ChatMode;
use lambda_http::http::StatusCode;
use local_bedrock::Operation;
use serde_json::json;
use support::{Harness, Reply, harness, harness_with};

const INTERNAL: &str = "The app encountered an error processing your request.\nIf you are an administrator of the app, view the full error in the logs.";

fn error_of(r: &Reply, status: u16) -> String {
    assert_eq!(
        r.status,
        StatusCode::from_u16(status).unwrap(),
        "{}",
        r.body
    );
    assert_eq!(r.content_type(), "application/json");
    let body = r.json();
    assert_eq!(
        body.as_object().unwrap().len(),
        1,
        "only an error field: {body}"
    );
    body["error"]
        .as_str()
        .expect("error is a string")
        .to_string()
}

async fn ask(h: &Harness, text: &str) -> Reply {
    h.post(
        "/chat",
        &json!({"messages": [{"role": "user", "content": text}]}),
    )
    .await
}

#[tokio::test]
async fn malformed_json_is_400() {
    let h = harness().await;
    let r = h
        .send(
            "POST",
            "/chat",
            Some("application/json"),
            "{\"messages\": [",
        )
        .await;
    assert!(error_of(&r, 400).starts_with("body is not valid JSON: "));
    assert!(h.bedrock.requests().is_empty(), "the model is not called");
}

#[tokio::test]
async fn a_body_that_is_not_json_by_type_is_415() {
    let h = harness().await;
    let r = h.send("POST", "/chat", Some("text/plain"), "hello").await;
    assert_eq!(
        error_of(&r, 415),
        "The request body must be JSON (Content-Type: application/json)."
    );
    // A JSON type with parameters is fine.
    let ok = h
        .send(
            "POST",
            "/chat",
            Some("application/json; charset=utf-8"),
            r#"{"messages":[{"role":"user","content":"x"}]}"#,
        )
        .await;
    assert_eq!(ok.status, 200);
}

#[tokio::test]
async fn an_invalid_field_is_400_naming_it() {
    let h = harness().await;
    let r = h
        .post("/chat", &json!({"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}))
        .await;
    assert_eq!(
        error_of(&r, 400),
        r#"messages[1].role: expected "user" or "assistant""#
    );
    let ui = h.post("/chat-ui/chat", &json!({"messages": "hi"})).await;
    assert_eq!(
        error_of(&ui, 400),
        "messages: invalid type: string \"hi\", expected a sequence"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let h = harness_with(&[("MAX_BODY_BYTES", "100")]).await;
    let big = "x".repeat(200);
    let r = ask(&h, &big).await;
    assert_eq!(
        error_of(&r, 413),
        "The request body is larger than the limit of 100 bytes."
    );
}

#[tokio::test]
async fn message_limits_are_400() {
    let h = harness_with(&[("MAX_MESSAGES", "1"), ("MAX_MESSAGE_CHARS", "5")]).await;
    let r = ask(&h, "too long").await;
    assert_eq!(
        error_of(&r, 400),
        "messages[0].content: is 8 characters long, more than the limit of 5"
    );
}

#[tokio::test]
async fn throttling_past_the_retries_is_429() {
    let h = harness().await;
    let r = ask(&h, "[[fault:throttle]] hi").await;
    assert_eq!(
        error_of(&r, 429),
        "The model is receiving too many requests. Please try again in a moment."
    );
    // How long to wait, for the clients' SDKs that wait on it.
    assert_eq!(r.headers.get("retry-after").unwrap(), "5");
    // The SDK's standard retry mode tried three times before giving up.
    assert_eq!(h.bedrock.requests().len(), 3);
}

#[tokio::test]
async fn throttling_that_passes_is_retried_into_an_answer() {
    let h = harness().await;
    let r = ask(&h, "[[fault:throttle-first:2]] hi").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["message"]["content"], "Echo: hi");
    assert_eq!(h.bedrock.requests().len(), 3);
}

#[tokio::test]
async fn a_guardrail_intervention_is_400_content_filter() {
    let h = harness_with(&[("GUARDRAIL_ID", "gr-123"), ("GUARDRAIL_VERSION", "2")]).await;
    let filtered = error_of(&ask(&h, "[[fault:guardrail]]").await, 400);
    let expected = "Your message contains content that was flagged by the content filter.";
    assert_eq!(filtered, expected);
    let sent = h.last_model_request();
    assert_eq!(sent["guardrailConfig"]["guardrailIdentifier"], "gr-123");
    assert_eq!(sent["guardrailConfig"]["guardrailVersion"], "2");
}

/// What the model answers with, as the caller gets it: input longer than the context, a content filter stop and a
/// request the model refuses (Bedrock's `ValidationException`, in the model's words) are 400; access denied and an
/// unknown model are 500 without internals; the model's own errors are 502 and 503.
#[tokio::test]
async fn model_faults_are_their_statuses_without_internals() {
    let h = harness().await;
    let too_long = "Your conversation is longer than the model can read. Start a new chat or send a shorter message.";
    let filtered = "Your message contains content that was flagged by the content filter.";
    let unavailable = "The model could not answer right now. Please try again.";
    for (fault, status, message) in [
        ("[[fault:too-long]]", 400, too_long),
        ("[[fault:content-filter]]", 400, filtered),
        ("[[fault:access-denied]]", 500, INTERNAL),
        ("[[fault:not-found]]", 500, INTERNAL),
        (
            "[[fault:validation]]",
            400,
            "The model refused the request: The provided request is not valid",
        ),
        ("[[fault:model-error]]", 502, unavailable),
        ("[[fault:internal]]", 502, unavailable),
        ("[[fault:unavailable]]", 503, unavailable),
    ] {
        let r = ask(&h, fault).await;
        assert_eq!(error_of(&r, status), message, "{fault}");
    }
}

#[tokio::test]
async fn timeouts_are_504() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    let msg = "The model took too long to answer. Please try again.";
    assert_eq!(
        error_of(&ask(&h, "[[fault:model-timeout]]").await, 504),
        msg
    );
    // The model does not answer within the client's timeout.
    assert_eq!(error_of(&ask(&h, "[[delay-ms:3000]] slow").await, 504), msg);
    assert!(
        h.bedrock
            .requests()
            .iter()
            .all(|r| r.operation == Operation::Converse)
    );
}

const TOO_SLOW: &str = "The model took too long to answer. Please try again.";

/// Asserts that a call bounded by `MODEL_TIMEOUT_SECONDS=1` ended when the timeout did, not before and not long
/// after (the SDK's retries and back-offs included).
fn ended_at_the_timeout(elapsed: Duration) {
    assert!(
        elapsed > Duration::from_millis(900) && elapsed < Duration::from_secs(2),
        "ended after {elapsed:?}, not within MODEL_TIMEOUT_SECONDS (1 s) + 1 s"
    );
}

#[tokio::test]
async fn a_silent_model_is_504_within_the_timeout_in_one_attempt() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    for (i, silent) in ["[[first-delay-ms:30000]] slow", "[[stall-after:0]] never"]
        .into_iter()
        .enumerate()
    {
        let started = Instant::now();
        let r = ask(&h, silent).await;
        ended_at_the_timeout(started.elapsed());
        assert_eq!(error_of(&r, 504), TOO_SLOW, "{silent}");
        // The SDK's attempts may not multiply the bound: the one attempt ran out with the call.
        assert_eq!(h.bedrock.requests().len(), i + 1, "{silent}: one attempt");
    }
    assert_eq!(h.chat_count(ChatMode::Standard).await, 0, "nothing stored");
}

#[tokio::test]
async fn the_sdks_retries_fit_in_the_timeout_or_end_with_it() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    // A throttled first attempt and its retry, 300 ms each, fit in the second.
    let started = Instant::now();
    let r = ask(&h, "[[fault:throttle-first:1]] [[first-delay-ms:300]] fits").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["message"]["content"], "Echo: fits");
    assert_eq!(h.bedrock.requests().len(), 2);
    assert!(started.elapsed() < Duration::from_secs(2));
    // Three attempts of 400 ms do not: the call ends when the second does, whatever attempt was running.
    let started = Instant::now();
    let r = ask(&h, "[[fault:throttle-first:2]] [[first-delay-ms:400]] late").await;
    ended_at_the_timeout(started.elapsed());
    assert_eq!(error_of(&r, 504), TOO_SLOW);
    assert_eq!(
        h.bedrock.requests().len(),
        5,
        "the third attempt was cut short"
    );
}

#[tokio::test]
async fn a_silent_agent_ends_the_round_with_504_within_the_timeout() {
    let agents = r#"[{"name": "Analyst", "instructions": "Analyse."}, {"name": "Reviewer", "instructions": "[[first-delay-ms:30000]]"}]"#;
    let h = harness_with(&[("AGENTS", agents), ("MODEL_TIMEOUT_SECONDS", "1")]).await;
    let chat_id = h.new_chat(ChatMode::MultiAgent).await;
    let started = Instant::now();
    let r = h
        .post(
            "/multi-agent-chat/batch",
            &json!({"messages": [{"role": "user", "content": "go"}], "sessionState": chat_id}),
        )
        .await;
    let elapsed = started.elapsed();
    assert_eq!(error_of(&r, 504), TOO_SLOW);
    // The Analyst answered at once; the Reviewer's call alone ran into the bound.
    ended_at_the_timeout(elapsed);
    let requests = h.bedrock.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[[first-delay-ms:30000]]")
    );
    assert!(
        h.history(&chat_id).await.is_empty(),
        "no half round was stored"
    );
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let h = harness().await;
    let r = h.post("/nope", &json!({})).await;
    assert_eq!(error_of(&r, 404), "There is nothing at /nope.");
    let r = h.send("GET", "/chat", None, "").await;
    assert_eq!(
        error_of(&r, 405),
        "This route does not answer that method; use POST."
    );
    assert_eq!(r.headers.get("allow").unwrap(), "POST");
    // A trailing slash is the same route.
    let r = h
        .post(
            "/chat/",
            &json!({"messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(r.status, 200);
}
