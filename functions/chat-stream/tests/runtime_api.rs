//! The chat-stream binary run as Lambda runs it, under a Runtime API emulator (tests/bench), with the local
//! Bedrock server and moto: its Runtime API connection has TCP_NODELAY, read on the function's own socket while a
//! streamed response arrives on it, also on the new connection after each reconnect; and with
//! `AWS_LAMBDA_MAX_CONCURRENCY` above 1 it takes that many requests at once.

use std::path::Path;
use std::time::Duration;

use bench::{Emulator, EmulatorOptions, Function, Invocation, function_url_event};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use serde_json::{Value, json};

struct Setup {
    // Held for the servers' lifetime.
    _bedrock: LocalBedrock,
    emulator: Emulator,
    function: Function,
}

async fn start(options: EmulatorOptions, env: &[(&str, &str)]) -> Setup {
    let bedrock = LocalBedrock::start().await.unwrap();
    let dynamo = LocalDynamo::shared();
    let (_, table) = dynamo.fresh_table().await;
    let emulator = Emulator::start(options).await.unwrap();
    let (bedrock_url, dynamo_url) = (bedrock.endpoint(), dynamo.endpoint());
    let mut vars = vec![
        ("MODEL_ID", "local.echo-v1:0"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock_url.as_str()),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamo_url.as_str()),
        ("TABLE_NAME", table.as_str()),
        ("AUTH_MODE", "none"),
        // Run as Lambda runs it, `none` needs the operator's word.
        ("ALLOW_ANONYMOUS", "true"),
    ];
    vars.extend_from_slice(env);
    let function = Function::spawn(
        Path::new(env!("CARGO_BIN_EXE_chat-stream")),
        &emulator,
        &vars,
        false,
    )
    .unwrap();
    emulator.watch(function.pid());
    Setup {
        _bedrock: bedrock,
        emulator,
        function,
    }
}

impl Setup {
    /// A new chat's streamed turn saying `text`, through the emulator as a function URL would send it.
    async fn stream(&self, text: &str) -> Invocation {
        let body = json!({"messages": [{"role": "user", "content": text}]}).to_string();
        let event = function_url_event("POST", "/chat/stream", &body);
        tokio::time::timeout(Duration::from_secs(60), self.emulator.invoke(&event))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no answer within a minute; init errors: {:?}",
                    self.emulator.init_errors()
                )
            })
    }
}

/// The text of a 2024-05-29 stream's deltas.
fn answer(invocation: &Invocation) -> String {
    invocation
        .lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l.text).ok())
        .filter_map(|l| l["delta"]["content"].as_str().map(str::to_string))
        .collect()
}

fn assert_streamed_answer(invocation: &Invocation, text: &str) {
    assert!(invocation.streamed, "a streamed response");
    assert_eq!(invocation.error, None);
    assert_eq!(invocation.status(), Some(200), "{}", invocation.text());
    assert_eq!(answer(invocation), format!("Echo: {text}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_api_connection_has_tcp_nodelay_also_after_reconnects() {
    // Every response's connection is closed once answered: each request comes over a new connection.
    let setup = start(
        EmulatorOptions {
            close_after_response: true,
        },
        &[],
    )
    .await;
    let mut connections = Vec::new();
    for turn in 1..=3 {
        let text = format!("turn {turn} of three");
        let invocation = setup.stream(&text).await;
        assert_streamed_answer(&invocation, &text);
        assert_eq!(
            (
                invocation.function_nodelay,
                invocation.function_nodelay_at_end
            ),
            (Some(true), Some(true)),
            "TCP_NODELAY on the function's socket of the connection its response {turn} arrived on, from the start"
        );
        // The response goes out on the connection that delivered the request, which is what lets the option be
        // set on it before the response is written.
        assert_eq!(invocation.response_connection, invocation.event_connection);
        connections.push(invocation.response_connection);
    }
    connections.dedup();
    assert_eq!(connections.len(), 3, "each turn came over a new connection");
}

/// The check above can fail: the same binary with the option switched off (the bench's "before") reads Nagle's
/// algorithm on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_sees_nagle_on_when_the_option_is_switched_off() {
    let setup = start(EmulatorOptions::default(), &[("CHAT_TCP_NODELAY", "off")]).await;
    let invocation = setup.stream("left as it was").await;
    assert_streamed_answer(&invocation, "left as it was");
    assert_eq!(
        (
            invocation.function_nodelay,
            invocation.function_nodelay_at_end
        ),
        (Some(false), Some(false))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_aws_lambda_max_concurrency_several_requests_run_at_once() {
    let mut setup = start(
        EmulatorOptions::default(),
        &[("AWS_LAMBDA_MAX_CONCURRENCY", "3")],
    )
    .await;
    // Each answer takes about a second (three words, 300 ms before each): taken at once, all three are out before
    // the first is answered; taken one at a time, only one would ever be out.
    let texts: Vec<String> = (1..=3)
        .map(|n| format!("[[delay-ms:300]] parallel {n}"))
        .collect();
    let (first, second, third) = tokio::join!(
        setup.stream(&texts[0]),
        setup.stream(&texts[1]),
        setup.stream(&texts[2])
    );
    let invocations = [first, second, third];
    assert_eq!(setup.emulator.most_in_flight(), 3);
    for (invocation, n) in invocations.iter().zip(1..) {
        assert_streamed_answer(invocation, &format!("parallel {n}"));
        // A response may go out on a connection opened for it after the request's check; the option is set on it
        // when the runtime first reads the body, so it holds by the time the body has arrived.
        assert_eq!(invocation.function_nodelay_at_end, Some(true));
    }
    assert!(setup.function.exited().is_none(), "the function runs on");
}
