//! The chat-stream binary as a plain HTTP server (no `AWS_LAMBDA_RUNTIME_API` in its environment): it answers on
//! `PORT`, streams line by line, and on SIGTERM stops taking connections but finishes the stream in flight before
//! it exits.

use std::process::Command;
use std::time::{Duration, Instant};

use chat_testing::harness;
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use serde_json::{Value, json};

#[tokio::test]
async fn a_plain_server_streams_and_finishes_its_stream_in_flight_on_sigterm() {
    let bedrock = LocalBedrock::start().await.unwrap();
    let (_, table) = LocalDynamo::shared().fresh_table().await;
    let port = harness::free_port();
    let mut server = harness::plain_server(
        env!("CARGO_BIN_EXE_chat-stream"),
        port,
        (&bedrock.endpoint(), &table),
        &[],
    )
    .spawn()
    .expect("the binary starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    harness::wait_for_port(port).await;

    // The same edge as on Lambda: a JSON 405 with Allow, a JSON 404.
    let wrong = client
        .get(format!("{base}/chat/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 405);
    assert_eq!(wrong.headers()["allow"], "POST");
    assert_eq!(
        client
            .get(format!("{base}/nowhere"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // A stream of 20 deltas 50 ms apart; SIGTERM once its first line is in.
    let mut response = client
        .post(format!("{base}/chat/stream"))
        .json(&json!({"messages": [{"role": "user", "content": "[[deltas:20]] [[delay-ms:50]]"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/jsonl");
    let mut body = response
        .chunk()
        .await
        .unwrap()
        .expect("a first line")
        .to_vec();
    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    while let Some(chunk) = response
        .chunk()
        .await
        .expect("the stream goes on to its end")
    {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deltas = lines
        .iter()
        .filter(|l| l["delta"]["content"].is_string())
        .count();
    assert_eq!(deltas, 20, "{text}");
    assert!(text.ends_with('\n'));
    assert!(lines.last().unwrap().get("error").is_none(), "{text}");

    // Then it exits, cleanly, and takes no more connections.
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = server.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
    assert!(
        client
            .get(format!("{base}/chat/stream"))
            .send()
            .await
            .is_err()
    );
}
