//! OpenAI's Responses API on the buffered function: a response answered whole, and `stream: true` refused with a
//! 400 that says where to send it (the streaming function).

mod support;

use chat_testing::harness::ECHO_MODEL;
use serde_json::json;
use support::harness;

#[tokio::test]
async fn the_buffered_function_answers_responses_whole_and_sends_streams_to_chat_stream() {
    let h = harness().await;
    let ask = json!({"model": ECHO_MODEL, "input": "Hello", "store": false});
    let reply = h.post("/v1/responses", &ask).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["content"][0]["text"], "Echo: Hello");

    h.assert_streams_sent_elsewhere("/v1/responses", &ask).await;
}
