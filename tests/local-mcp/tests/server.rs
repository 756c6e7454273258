//! The local MCP server as rmcp's own client sees it.

use std::collections::HashMap;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceExt, model::ContentBlock};
use serde_json::{Value, json};

async fn client(
    url: String,
    headers: HashMap<http::HeaderName, http::HeaderValue>,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
    );
    ClientConfig::default()
        .serve(transport)
        .await
        .map_err(|e| e.to_string())
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    name: &'static str,
    input: Value,
) -> CallToolResult {
    let Value::Object(arguments) = input else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
        .await
        .unwrap()
}

fn text(result: &CallToolResult) -> &str {
    match &result.content[..] {
        [ContentBlock::Text(text)] => &text.text,
        other => panic!("one text block expected, got {other:?}"),
    }
}

#[tokio::test]
async fn offers_add_echo_and_sleep_read_only_and_note() {
    let (addr, _server) = local_mcp::start(([127, 0, 0, 1], 0).into()).await.unwrap();
    let client = client(local_mcp::url(addr), HashMap::new()).await.unwrap();
    let mut tools: Vec<(String, Option<bool>)> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| {
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint);
            (t.name.to_string(), read_only)
        })
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            ("add".to_string(), Some(true)),
            ("echo".to_string(), Some(true)),
            ("note".to_string(), Some(false)),
            ("sleep".to_string(), Some(true)),
        ]
    );

    let sum = call(&client, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!((text(&sum), sum.is_error), ("5", Some(false)));
    let sum = call(&client, "add", json!({"a": -1.25, "b": 0.5})).await;
    assert_eq!(text(&sum), "-0.75");
    let overflow = call(&client, "add", json!({"a": 1e308, "b": 1e308})).await;
    assert_eq!(overflow.is_error, Some(true));
    assert!(text(&overflow).contains("not a finite number"));

    let echo = call(&client, "echo", json!({"message": "hi there"})).await;
    assert_eq!(text(&echo), "hi there");

    let started = std::time::Instant::now();
    let slept = call(&client, "sleep", json!({"ms": 120})).await;
    assert_eq!(text(&slept), "slept 120 ms");
    assert!(started.elapsed() >= std::time::Duration::from_millis(120));
}

#[tokio::test]
async fn with_a_token_it_answers_only_requests_that_carry_it() {
    let (addr, _server) = local_mcp::start_with(
        ([127, 0, 0, 1], 0).into(),
        local_mcp::Options {
            bearer_token: Some("t0ken".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(client(local_mcp::url(addr), HashMap::new()).await.is_err());
    let wrong = HashMap::from([(http::header::AUTHORIZATION, "Bearer other".parse().unwrap())]);
    assert!(client(local_mcp::url(addr), wrong).await.is_err());
    let right = HashMap::from([(http::header::AUTHORIZATION, "Bearer t0ken".parse().unwrap())]);
    let client = client(local_mcp::url(addr), right).await.unwrap();
    let echo = call(&client, "echo", json!({"message": "in"})).await;
    assert_eq!(text(&echo), "in");
    // The token stays out of the options' debug form.
    let options = local_mcp::Options {
        bearer_token: Some("t0ken".into()),
        ..Default::default()
    };
    assert!(!format!("{options:?}").contains("t0ken"));
}

#[tokio::test]
async fn notes_are_kept_per_session() {
    let (addr, _server) = local_mcp::start(([127, 0, 0, 1], 0).into()).await.unwrap();
    let first = client(local_mcp::url(addr), HashMap::new()).await.unwrap();
    let second = client(local_mcp::url(addr), HashMap::new()).await.unwrap();
    assert_eq!(text(&call(&first, "note", json!({"text": "a"})).await), "a");
    assert_eq!(
        text(&call(&second, "note", json!({"text": "b"})).await),
        "b"
    );
    assert_eq!(
        text(&call(&first, "note", json!({"text": "c"})).await),
        "a\nc"
    );
}

#[tokio::test]
async fn the_flood_server_answers_as_many_bytes_as_asked() {
    let (addr, _server) = local_mcp::flood::start(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let client = client(local_mcp::url(addr), HashMap::new()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(
        tools[0].annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    for sse in [false, true] {
        let answer = call(&client, "flood", json!({"bytes": 200_000, "sse": sse})).await;
        assert_eq!(text(&answer), local_mcp::flood::text_of(200_000));
    }
}
