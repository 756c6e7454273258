//! The streaming function through the real SDK client and the local Bedrock server: every dialect's framing,
//! lines written as the model produces them, and faults before and after the first byte.

use std::time::{Duration, Instant, SystemTime};

use chat_core::SessionStore;
use chat_stream::App;
use chat_testing::harness::{self, Backend, OWNER, Streamed};
use http_body_util::BodyExt;
use lambda_http::{Body, Request};
use serde_json::{Value, json};

mod support;
use support::{Harness, with};

/// What the store holds of the chat `chat_id`, as `role: content`; nothing when there is no such chat.
async fn history(h: &Harness, chat_id: &str) -> Vec<String> {
    harness::stored(&h.store, OWNER, chat_id)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(role, content)| format!("{role}: {content}"))
        .collect()
}

async fn harness() -> Harness {
    harness_with(&[]).await
}

/// A harness whose function configuration also holds `env` (as the environment would).
async fn harness_with(env: &[(&str, &str)]) -> Harness {
    Backend::start(env).await.wired(App::new).await
}

fn request(path: &str, body: &Value) -> Request {
    let mut request = harness::json_request("POST", path, Some(body));
    // The official client sends this even to the streaming route.
    request
        .headers_mut()
        .insert("accept", "application/json".parse().unwrap());
    request
}

async fn read_all(response: axum::response::Response) -> Streamed {
    Streamed::read(response).await
}

async fn stream(h: &Harness, body: Value) -> Streamed {
    read_all(h.app.handle(request("/chat/stream", &body)).await).await
}

fn ask(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// A streamed answer's status and content type.
fn framing(s: &Streamed) -> (u16, &str) {
    (s.status.as_u16(), s.content_type.as_str())
}

/// The last line of a streamed answer.
fn last_line(s: &Streamed) -> Value {
    s.lines().last().expect("a line").clone()
}

const UNAVAILABLE: &str = "The model could not answer right now. Please try again.";
const FILTERED: &str = "Your message contains content that was flagged by the content filter.";

#[tokio::test]
async fn v2024_05_29_is_delta_lines() {
    let h = harness().await;
    let s = stream(&h, ask("one two three")).await;
    assert_eq!(framing(&s), (200, "application/jsonl"));
    let lines = s.lines();
    assert_eq!(lines[0]["delta"], json!({"role": "assistant"}));
    assert!(lines[0]["sessionState"].is_string(), "the new chat's id");
    assert_eq!(
        lines[0]["context"]["thoughts"][0]["title"],
        "Prompt to generate answer"
    );
    assert!(s.text().starts_with(r#"{"delta":{"role":"assistant"},"context":{"thoughts":[{"title":"Prompt to generate answer""#));
    // One line per model delta, each its own write.
    let contents: Vec<&str> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Echo: ", "one ", "two ", "three"]);
    assert_eq!(s.frames.len(), lines.len(), "one frame per line");
    let last = lines.last().unwrap();
    assert_eq!(last["delta"], json!({}));
    assert_eq!(last["context"]["thoughts"][0]["title"], "Token usage");
    assert_eq!(last["context"]["thoughts"][0]["props"]["output_tokens"], 4);
}

#[tokio::test]
async fn session_state_keeps_the_requests_spelling() {
    let h = harness().await;
    let s = stream(&h, with(ask("x"), "session_state", Value::Null)).await;
    let first = &s.lines()[0];
    let id = first["session_state"].as_str().expect("the new chat's id");
    // The turn was stored before the last line was sent.
    assert_eq!(history(&h, id).await, ["user: x", "assistant: Echo: x"]);
    assert!(first.get("sessionState").is_none());
}

#[tokio::test]
async fn lines_arrive_as_the_model_sends_them() {
    let h = harness().await;
    let started = SystemTime::now();
    let s = stream(&h, ask("[[deltas:10]] [[delay-ms:200]]")).await;
    // Causal order, not speed: each line reaches the client before the model has produced the delta two after it.
    // A buffered answer would arrive only after the last delta.
    support::assert_frames_arrived_as_sent(&h, started, &s.frames[1..11], "line");
}

#[tokio::test]
async fn followup_questions_are_held_back_and_sent_last() {
    let h = harness().await;
    let s = stream(&h, json!({"messages": [{"role": "user", "content": "tell me"}], "context": {"overrides": {"suggest_followup_questions": true}}})).await;
    assert_eq!(
        s.content(),
        "Echo: tell me",
        "no question text is streamed as content"
    );
    let last = s.lines().last().unwrap().clone();
    assert_eq!(
        last["context"]["followup_questions"],
        json!([
            "What else should I know?",
            "Can you give an example?",
            "Where can I read more?"
        ])
    );
    assert_eq!(last["context"]["thoughts"][0]["title"], "Token usage");
}

#[tokio::test]
async fn v2024_01_28_streams_chunks() {
    let h = harness().await;
    let s = stream(&h, with(ask("a b"), "stream", json!(true))).await;
    assert_eq!(framing(&s), (200, "application/json-lines"));
    let lines = s.lines();
    assert!(
        lines
            .iter()
            .all(|l| l["object"] == "chat.completion.chunk" && l["id"] == lines[0]["id"])
    );
    assert_eq!(
        lines[0]["choices"][0]["delta"],
        json!({"role": "assistant"})
    );
    assert!(lines[0]["choices"][0]["session_state"].is_string());
    let text: String = lines
        .iter()
        .filter_map(|l| l["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Echo: a b");
    let last = lines.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["usage"]["completion_tokens"], 3);
    // stream:false on the streaming route is answered whole, as asked.
    let whole = stream(
        &h,
        json!({"messages": [{"role": "user", "content": "a b"}], "stream": false}),
    )
    .await;
    assert_eq!(whole.content_type, "application/json");
    let completion: Value = serde_json::from_str(&whole.text()).unwrap();
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["choices"][0]["message"]["content"], "Echo: a b");
}

#[tokio::test]
async fn an_error_after_the_first_line_is_a_last_error_line() {
    let h = harness().await;
    let s = stream(&h, ask("[[stream-error-after:3]] a b c d e")).await;
    assert_eq!(s.status, 200);
    let lines = s.lines();
    assert_eq!(s.content(), "Echo: a b ");
    assert_eq!(last_line(&s), json!({"error": UNAVAILABLE}));
    assert_eq!(lines.len(), 5, "start, three deltas, the error: {lines:?}");
}

#[tokio::test]
async fn a_broken_connection_to_the_model_is_a_last_error_line() {
    let h = harness().await;
    let s = stream(&h, ask("[[stream-break-after:2]] a b c d")).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.content(), "Echo: a ");
    assert_eq!(last_line(&s), json!({"error": UNAVAILABLE}));
}

#[tokio::test]
async fn an_error_before_the_first_byte_is_a_json_error_with_its_status() {
    let h = harness().await;
    let throttled = stream(&h, ask("[[fault:throttle]]")).await;
    assert_eq!(framing(&throttled), (429, "application/json"));
    assert_eq!(
        throttled.text(),
        r#"{"error":"The model is receiving too many requests. Please try again in a moment."}"#
    );
    // An exception frame before any text is still caught before the status is sent.
    let failed = stream(&h, ask("[[stream-error-after:0]] hi")).await;
    assert_eq!(failed.status, 502);
    let invalid = stream(&h, json!({"messages": []})).await;
    assert_eq!(invalid.status, 400);
    assert_eq!(
        invalid.text(),
        r#"{"error":"messages: must hold at least one message"}"#
    );
    let wrong = read_all(h.app.handle(request("/chat", &ask("x"))).await).await;
    assert_eq!(wrong.status, 404);
}

#[tokio::test]
async fn a_guardrail_mid_stream_ends_with_the_content_filter_line() {
    let h = harness().await;
    let s = stream(&h, ask("[[fault:guardrail]]")).await;
    assert_eq!(last_line(&s), json!({"error": FILTERED}));
}

#[tokio::test]
async fn when_the_client_goes_away_the_model_is_no_longer_read() {
    let h = harness().await;
    let response = h
        .app
        .handle(request(
            "/chat/stream",
            &ask("[[deltas:40]] [[delay-ms:50]]"),
        ))
        .await;
    let (_, mut body) = response.into_parts();
    body.frame().await.unwrap().unwrap(); // the first line
    body.frame().await.unwrap().unwrap(); // the first delta
    drop(body);
    let gone = Instant::now();
    // Long enough for all 40 deltas (2 s) had the model kept being read.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let sent = h.bedrock.requests().last().unwrap().deltas_sent_at.len();
    assert!(
        sent < 40,
        "the model kept streaming to nobody: {sent} deltas sent"
    );
    assert!(gone.elapsed() >= Duration::from_millis(2500));
}

fn chat_id(s: &Streamed) -> String {
    let first = &s.lines()[0];
    first
        .get("sessionState")
        .or_else(|| first.get("session_state"))
        .and_then(Value::as_str)
        .expect("the chat id")
        .to_string()
}

#[tokio::test]
async fn streamed_turns_continue_a_chat_with_the_whole_history_or_the_latest_message() {
    let h = harness().await;
    let first = stream(&h, ask("one")).await;
    let id = chat_id(&first);
    // The whole history, spelled session_state.
    let full = stream(
        &h,
        json!({"messages": [
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "Echo: one"},
        {"role": "user", "content": "two"}
    ], "session_state": id}),
    )
    .await;
    assert_eq!(full.lines()[0]["session_state"], json!(id));
    // Only the latest message, spelled sessionState.
    let latest = stream(
        &h,
        json!({"messages": [{"role": "user", "content": "three"}], "sessionState": id}),
    )
    .await;
    assert_eq!(latest.lines()[0]["sessionState"], json!(id));
    assert_eq!(
        history(&h, &id).await,
        [
            "user: one",
            "assistant: Echo: one",
            "user: two",
            "assistant: Echo: two",
            "user: three",
            "assistant: Echo: three"
        ]
    );
    // The model saw the whole conversation.
    assert_eq!(
        h.bedrock.requests().last().unwrap().body["messages"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
}

#[tokio::test]
async fn a_model_failure_mid_stream_leaves_the_history_as_it_was() {
    let h = harness().await;
    let id = chat_id(&stream(&h, ask("one")).await);
    let before = history(&h, &id).await;
    for fault in [
        "[[stream-error-after:2]] a b c",
        "[[stream-break-after:1]] a b",
        "[[fault:guardrail]]",
    ] {
        let s = stream(
            &h,
            json!({"messages": [{"role": "user", "content": fault}], "sessionState": id}),
        )
        .await;
        assert!(
            s.lines().last().unwrap().get("error").is_some(),
            "{fault} ends in an error line"
        );
        assert_eq!(history(&h, &id).await, before, "after {fault}");
    }
    let unknown = stream(
        &h,
        json!({"messages": [{"role": "user", "content": "x"}], "sessionState": "nope"}),
    )
    .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(
        unknown.text(),
        r#"{"error":"There is no chat with that id."}"#
    );
}

#[tokio::test]
async fn a_turn_whose_client_went_away_is_not_stored() {
    let h = harness().await;
    let id = chat_id(&stream(&h, ask("one")).await);
    let response = h
        .app
        .handle(request("/chat/stream", &json!({"messages": [{"role": "user", "content": "[[deltas:20]] [[delay-ms:50]]"}], "sessionState": id})))
        .await;
    let (_, mut body) = response.into_parts();
    body.frame().await.unwrap().unwrap();
    drop(body);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        history(&h, &id).await,
        ["user: one", "assistant: Echo: one"]
    );
}

const TOO_SLOW: &str = "The model took too long to answer. Please try again.";

/// Asserts that a wait bounded by `MODEL_TIMEOUT_SECONDS=1` ended when the timeout did: not before, and not later
/// than a second after.
fn ended_at_the_timeout(elapsed: Duration) {
    assert!(
        elapsed > Duration::from_millis(900) && elapsed < Duration::from_secs(2),
        "ended after {elapsed:?}, not within MODEL_TIMEOUT_SECONDS (1 s) + 1 s"
    );
}

fn between(from: SystemTime, to: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or_default()
}

/// The owner's standard chats.
async fn chats(h: &Harness) -> usize {
    harness::chat_count(&h.store, chat_core::ChatMode::Standard).await
}

#[tokio::test]
async fn a_model_silent_before_its_first_text_is_a_504_within_the_timeout() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    for (i, silent) in [
        // The stream opens at once, then no text comes.
        "[[first-delay-ms:30000]] slow",
        "[[stall-after:0]] never",
        // Throttled attempts of 400 ms each, then an answer whose first text would come after 1.2 s.
        "[[fault:throttle-first:2]] [[first-delay-ms:400]] late",
    ]
    .into_iter()
    .enumerate()
    {
        let started = SystemTime::now();
        let s = stream(&h, ask(silent)).await;
        ended_at_the_timeout(between(started, s.frames.last().unwrap().0));
        assert_eq!(s.status, 504, "{silent}");
        assert_eq!(s.content_type, "application/json");
        assert_eq!(s.text(), json!({"error": TOO_SLOW}).to_string(), "{silent}");
        assert_eq!(s.frames.len(), 1, "one whole JSON error");
        if i < 2 {
            assert_eq!(h.bedrock.requests().len(), i + 1, "{silent}: one attempt");
        }
    }
    assert_eq!(chats(&h).await, 0, "nothing stored");
}

#[tokio::test]
async fn a_model_that_stalls_mid_answer_ends_with_a_timeout_line_and_stores_nothing() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    let id = chat_id(&stream(&h, ask("one")).await);
    let before = history(&h, &id).await;
    let s = stream(
        &h,
        json!({"messages": [{"role": "user", "content": "[[stall-after:3]] a b c d e"}], "sessionState": id}),
    )
    .await;
    assert_eq!(s.status, 200);
    let lines = s.lines();
    assert_eq!(lines.len(), 5, "start, three deltas, the error: {lines:?}");
    assert_eq!(s.content(), "Echo: a b ");
    assert_eq!(lines[4], json!({"error": TOO_SLOW}));
    // The error came when the gap after the third delta reached the timeout.
    ended_at_the_timeout(between(s.frames[3].0, s.frames[4].0));
    assert_eq!(h.bedrock.requests().last().unwrap().deltas_sent_at.len(), 3);
    assert_eq!(history(&h, &id).await, before, "nothing stored");
    // A model silent after its last word, before it says it has finished, is cut the same way.
    let s = stream(
        &h,
        json!({"messages": [{"role": "user", "content": "[[stall-after:3]] a b"}], "sessionState": id}),
    )
    .await;
    assert_eq!(s.content(), "Echo: a b");
    assert_eq!(s.lines().last().unwrap(), &json!({"error": TOO_SLOW}));
    ended_at_the_timeout(between(s.frames[3].0, s.frames[4].0));
    assert_eq!(history(&h, &id).await, before, "nothing stored");
}

#[tokio::test]
async fn an_answer_longer_than_the_timeout_is_not_cut_while_its_gaps_are_shorter() {
    let h = harness_with(&[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    let started = Instant::now();
    // Six words 600 ms apart: 3.6 s in all, no gap near the second.
    let s = stream(&h, ask("[[deltas:6]] [[delay-ms:600]]")).await;
    assert!(started.elapsed() > Duration::from_millis(3500));
    assert_eq!(s.status, 200);
    assert_eq!(s.content(), "w1 w2 w3 w4 w5 w6");
    assert!(s.lines().last().unwrap().get("error").is_none());
    assert_eq!(
        history(&h, &chat_id(&s)).await,
        [
            "user: [[deltas:6]] [[delay-ms:600]]",
            "assistant: w1 w2 w3 w4 w5 w6"
        ]
    );
}

#[tokio::test]
async fn a_silent_agent_ends_a_streamed_round_with_an_error_event_within_the_timeout() {
    let agents = json!([
        {"name": "Analyst", "instructions": "Analyse."},
        {"name": "Reviewer", "instructions": "[[first-delay-ms:30000]]"}
    ])
    .to_string();
    let h = harness_with(&[("AGENTS", &agents), ("MODEL_TIMEOUT_SECONDS", "1")]).await;
    // A multi-agent chat, as the Chat UI creates one before its first round: a round is stored only in one.
    let id = harness::new_chat(&h.store, chat_core::ChatMode::MultiAgent).await;
    let response = h
        .app
        .handle(
            lambda_http::http::Request::builder()
                .method("POST")
                .uri("/multi-agent-chat/stream")
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(Body::from(
                    json!({"messages": [{"role": "user", "content": "go"}], "sessionState": id})
                        .to_string(),
                ))
                .unwrap(),
        )
        .await;
    let s = read_all(response).await;
    assert_eq!(s.status, 200);
    let events: Vec<Value> = s
        .frames
        .iter()
        .map(|(_, f)| serde_json::from_str(f.strip_prefix("data: ").unwrap().trim_end()).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["AuthorName"], "Analyst");
    assert_eq!(events[1], json!({"error": TOO_SLOW}));
    ended_at_the_timeout(between(s.frames[0].0, s.frames[1].0));
    assert_eq!(events[0]["Metadata"]["SessionState"], id.as_str());
    assert!(
        h.store.load(OWNER, &id).await.unwrap().1.is_empty(),
        "no half round was stored"
    );
}
