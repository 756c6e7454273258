//! What the streaming function's dialect tests share: the function on backends of its own, requests to a route
//! whole and streamed, OpenAI's error shape, and the check that a stream's frames leave as the model produces them.

// Each test file that includes it uses only some of it.
#![allow(dead_code)]

use std::time::SystemTime;

use chat_aws::{BedrockModel, DynamoStore};
use chat_stream::App;
use chat_testing::harness::{self, Backend, Reply, Streamed, Wired};
use serde_json::{Value, json};

pub type Harness = Wired<App<BedrockModel, DynamoStore>>;

/// The function configured with `env`, its usage counted in the table its chats are stored in.
pub async fn counted(env: &[(&str, &str)]) -> Harness {
    let backend = Backend::start(env).await;
    let ledger = backend.ledger();
    backend
        .wired(|m, s, a, c| App::new(m, s, a, c).with_usage(Some(ledger)))
        .await
}

/// `body` with `field` set to `value`.
pub fn with(mut body: Value, field: &str, value: Value) -> Value {
    body[field] = value;
    body
}

/// `POST path` with the JSON `body`, the reply read whole.
pub async fn post_to(h: &Harness, path: &str, body: &Value) -> Reply {
    let request = harness::json_request("POST", path, Some(body));
    Reply::collected(h.app.handle(request).await).await
}

/// `POST path` with the JSON `body`, the reply read frame by frame.
pub async fn stream_to(h: &Harness, path: &str, body: &Value) -> Streamed {
    let request = harness::json_request("POST", path, Some(body));
    Streamed::read(h.app.handle(request).await).await
}

/// `method path` without a body, the reply read whole.
pub async fn call(h: &Harness, method: &str, path: &str) -> Reply {
    let request = harness::json_request(method, path, None);
    Reply::collected(h.app.handle(request).await).await
}

/// The OpenAI error of a reply: status, `code`, `param`.
pub fn openai_error_of(reply: &Reply) -> (u16, Value, Value) {
    let body = reply.json();
    let error = &body["error"];
    assert!(error["message"].is_string(), "{body}");
    assert!(error["type"].is_string(), "{body}");
    (
        reply.status.as_u16(),
        error["code"].clone(),
        error["param"].clone(),
    )
}

/// Asserts that each of `cases` (a body, the field it gets wrong), sent to `path`, is OpenAI's 400 naming the field.
pub async fn assert_each_refused(h: &Harness, path: &str, cases: Vec<(Value, &str)>) {
    for (body, param) in cases {
        let reply = post_to(h, path, &body).await;
        let body = reply.json();
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(
            openai_error_of(&reply),
            (400, Value::Null, json!(param)),
            "{body}"
        );
    }
}

/// `body` (naming a model not allowed) sent to `path`, which must be OpenAI's 404 `model_not_found`.
pub async fn refused_model(h: &Harness, path: &str, body: &Value) -> Reply {
    let unknown = post_to(h, path, body).await;
    assert_eq!(
        openai_error_of(&unknown),
        (404, json!("model_not_found"), json!("model"))
    );
    unknown
}

/// Asserts that the echo model's answer `text` says it received chat_testing's PNG whole, as the first image.
pub fn assert_png_received(text: &str) {
    let png = chat_testing::bytes::PNG.len();
    assert!(
        text.contains(&format!("image-1: image png {png} bytes")),
        "{text}"
    );
}

/// Asserts that the `frames` that carried the model's ten deltas (`[[deltas:10]]`, asked at `started`) reached the
/// client in causal order: each before the model had produced the delta two after it, as a buffered answer would
/// not (it would arrive only after the last). `what` names a frame in the messages.
pub fn assert_frames_arrived_as_sent(
    h: &Harness,
    started: SystemTime,
    frames: &[(SystemTime, String)],
    what: &str,
) {
    let sent = h.bedrock.requests().last().unwrap().deltas_sent_at.clone();
    assert_eq!(sent.len(), 10);
    let arrived: Vec<SystemTime> = frames.iter().map(|(t, _)| *t).collect();
    let ms = |t: SystemTime| t.duration_since(started).unwrap().as_millis();
    for (i, (a, s)) in arrived.iter().zip(&sent).enumerate() {
        println!(
            "delta {:>2}: sent by the model at {:>5} ms, its {what} arrived at {:>5} ms",
            i + 1,
            ms(*s),
            ms(*a)
        );
    }
    for i in 0..8 {
        assert!(
            arrived[i] < sent[i + 2],
            "{what} {} arrived after delta {} was sent",
            i + 1,
            i + 3
        );
    }
    assert!(
        arrived[0] < sent[9],
        "the first {what} arrives long before the last delta is produced"
    );
}

/// The function whose owners' files are kept in S3 (moto), as deployed.
pub async fn with_attachments() -> Harness {
    let attachments: std::sync::Arc<dyn chat_core::AttachmentStore> =
        std::sync::Arc::new(harness::fresh_attachments().await);
    Backend::start(&[])
        .await
        .wired(|m, s, a, c| App::new(m, s, a, c).with_attachments(Some(attachments)))
        .await
}
