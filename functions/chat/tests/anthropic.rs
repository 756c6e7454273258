//! Anthropic's Messages API on the buffered function: a message answered whole, a count of its tokens, and
//! `stream: true` refused with Anthropic's 400 that says where to send it (the streaming function).

mod support;

use chat_testing::harness::ECHO_MODEL;
use serde_json::json;
use support::harness;

#[tokio::test]
async fn the_buffered_function_answers_messages_whole_and_sends_streams_to_chat_stream() {
    let h = harness().await;
    let ask = json!({"model": ECHO_MODEL, "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hello"}]});
    let reply = h.post("/v1/messages", &ask).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["content"][0]["text"], "Echo: Hello");
    assert_eq!(body["stop_reason"], "end_turn");

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let reply = h.post("/v1/messages", &streamed).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/messages on the streaming chat function's URL"),
        "{body}"
    );
    // Only the first request reached the model.
    assert_eq!(h.bedrock.requests().len(), 1);

    let counted = h
        .post(
            "/v1/messages/count_tokens",
            &json!({"model": ECHO_MODEL, "messages": [{"role": "user", "content": "one two"}]}),
        )
        .await;
    assert_eq!(counted.status, 200, "{}", counted.body);
    assert!(counted.json()["input_tokens"].as_u64().unwrap() > 0);
    // Counting reaches no model's Converse.
    assert_eq!(h.bedrock.requests().len(), 1);
}
