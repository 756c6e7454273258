//! OpenAI's Chat Completions API on the buffered function: a completion answered whole, `/v1/models`, and
//! `stream: true` refused with a 400 that says where to send it (the streaming function).

mod support;

use chat_testing::harness::ECHO_MODEL;
use serde_json::{Value, json};
use support::harness;

#[tokio::test]
async fn the_buffered_function_answers_completions_whole_and_sends_streams_to_chat_stream() {
    let h = harness().await;
    let ask = json!({"model": ECHO_MODEL, "messages": [{"role": "user", "content": "Hello"}]});
    let reply = h.post("/v1/chat/completions", &ask).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "Echo: Hello");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    h.assert_streams_sent_elsewhere("/v1/chat/completions", &ask)
        .await;

    let models = h.send("GET", "/v1/models", None, "").await;
    assert_eq!(models.status, 200, "{}", models.body);
    assert_eq!(models.json()["data"][0]["id"], ECHO_MODEL);
    let missing = h.send("GET", "/v1/models/nope", None, "").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "model_not_found");
    assert_eq!(missing.json()["error"]["param"], Value::from("model"));
}
