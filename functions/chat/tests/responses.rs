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

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let reply = h.post("/v1/responses", &streamed).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(error["param"], "stream");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/responses on the streaming chat function's URL"),
        "{error}"
    );
    // Only the first request reached the model.
    assert_eq!(h.bedrock.requests().len(), 1);
}
