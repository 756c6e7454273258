//! Tool use through the Bedrock adapter, against the local Bedrock server with the real SDK client: the tools go as
//! a `toolConfig`, the model's calls come back whole (Converse's `toolUse` blocks, ConverseStream's input pieces put
//! together), their results go back as `toolResult` blocks the model answers, and a request offering no tools gets
//! the conversation's tool exchanges as text (Bedrock refuses tool blocks without a `toolConfig`).

use chat_aws::BedrockModel;
use chat_core::{
    ChatModel, InferenceSettings, ModelEvent, ModelMessage, ModelRequest, ModelStream, Role,
    StopReason, ToolCall, ToolResult, ToolSpec, ToolStatus,
};
use local_bedrock::Operation;
use serde_json::{Value, json};
use support::start_bedrock;

mod support;

const MODEL: &str = "anthropic.claude-test";

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        strict: false,
        name: name.to_string(),
        description: format!("The {name} tool."),
        input_schema: json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        }),
    }
}

fn request(tools: &[&str], messages: Vec<ModelMessage>) -> ModelRequest {
    ModelRequest {
        model_id: MODEL.to_string(),
        system: "You are helpful.".to_string(),
        messages,
        tools: tools.iter().map(|name| spec(name)).collect(),
        inference: InferenceSettings {
            max_tokens: 1000,
            ..InferenceSettings::default()
        },
        ..ModelRequest::default()
    }
}

fn user(text: &str) -> ModelMessage {
    ModelMessage::text(Role::User, vec![text.to_string()])
}

/// The assistant message that made these calls after this text.
fn asked(text: &str, calls: &[ToolCall]) -> ModelMessage {
    ModelMessage {
        tool_uses: calls.to_vec(),
        ..ModelMessage::text(Role::Assistant, vec![text.to_string()])
    }
}

/// The user message that answers calls.
fn answered(results: Vec<ToolResult>) -> ModelMessage {
    ModelMessage {
        tool_results: results,
        ..ModelMessage::text(Role::User, Vec::new())
    }
}

fn result(call: &ToolCall, text: &str, status: ToolStatus) -> ToolResult {
    ToolResult {
        id: call.id.clone(),
        text: text.to_string(),
        status,
    }
}

const QUESTION: &str = r#"What is 2 + 3? [[tool:add {"a": 2, "b": 3}]]"#;

#[tokio::test]
async fn a_call_comes_back_parsed_and_its_result_is_answered() {
    let (server, model) = start_bedrock().await;
    let first = request(&["add", "fetch"], vec![user(QUESTION)]);
    let reply = model.converse(&first).await.expect("the model answers");
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.text, "Let me call add.");
    assert_eq!(reply.tool_calls.len(), 1, "{:?}", reply.tool_calls);
    let call = &reply.tool_calls[0];
    assert_eq!(call.name, "add");
    assert_eq!(call.input, json!({"a": 2, "b": 3}));
    assert!(call.id.starts_with("tooluse_"), "{}", call.id);

    // The tools went as a toolConfig, each schema whole.
    let body = &server.requests()[0].body;
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"],
        json!({
            "name": "add",
            "description": "The add tool.",
            "inputSchema": {"json": spec("add").input_schema},
        })
    );
    assert_eq!(body["toolConfig"]["tools"][1]["toolSpec"]["name"], "fetch");

    // The follow-up: the call after the assistant's text, its result first in the next user message.
    let second = request(
        &["add", "fetch"],
        vec![
            user(QUESTION),
            asked(&reply.text, &reply.tool_calls),
            answered(vec![result(call, "5", ToolStatus::Success)]),
        ],
    );
    let reply = model.converse(&second).await.expect("the model answers");
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(reply.text, "add returned 5");
    assert!(reply.tool_calls.is_empty());
    let messages = &server.requests()[1].body["messages"];
    assert_eq!(
        messages[1]["content"],
        json!([
            {"text": "Let me call add."},
            {"toolUse": {"toolUseId": call.id, "name": "add", "input": {"a": 2, "b": 3}}},
        ])
    );
    assert_eq!(
        messages[2]["content"],
        json!([{"toolResult": {
            "toolUseId": call.id,
            "content": [{"text": "5"}],
            "status": "success",
        }}])
    );
}

#[tokio::test]
async fn a_failed_call_is_said_to_the_model_as_an_error() {
    let (server, model) = start_bedrock().await;
    let question =
        r#"Fetch it [[tool:fetch {"a": 1, "b": 2}]] and add [[tool:add {"a": 1, "b": 1}]]"#;
    let reply = model
        .converse(&request(&["add", "fetch"], vec![user(question)]))
        .await
        .unwrap();
    let [fetch, add] = &reply.tool_calls[..] else {
        panic!("two calls: {:?}", reply.tool_calls);
    };
    assert_eq!((fetch.name.as_str(), add.name.as_str()), ("fetch", "add"));
    assert_ne!(fetch.id, add.id);
    let reply = model
        .converse(&request(
            &["add", "fetch"],
            vec![
                user(question),
                asked(&reply.text, &reply.tool_calls),
                answered(vec![
                    result(fetch, "the page did not answer in 5 s", ToolStatus::Error),
                    result(add, "2", ToolStatus::Success),
                ]),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(
        reply.text,
        "fetch failed: the page did not answer in 5 s\n\nadd returned 2"
    );
    assert_eq!(
        server.requests()[1].body["messages"][2]["content"][0]["toolResult"]["status"],
        "error"
    );
}

/// Every event of a stream, to its end.
async fn events(model: &BedrockModel, request: &ModelRequest) -> Vec<ModelEvent> {
    let mut stream = model
        .converse_stream(request)
        .await
        .expect("the stream opens");
    let mut events = Vec::new();
    while let Some(event) = stream.next_event().await.expect("the stream reads") {
        events.push(event);
    }
    events
}

#[tokio::test]
async fn a_streamed_call_comes_whole_from_its_input_pieces() {
    let (server, model) = start_bedrock().await;
    let input = json!({"a": 12345, "b": -6.5, "note": "a longer input, sent in several pieces"});
    let question = format!("Add these [[tool:add {input}]]");
    let events = events(&model, &request(&["add"], vec![user(&question)])).await;
    let texts: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, "Let me call add.");
    let after_text: Vec<&ModelEvent> = events
        .iter()
        .skip_while(|e| matches!(e, ModelEvent::Text(_)))
        .collect();
    let ModelEvent::ToolUse(call) = after_text[0] else {
        panic!("the call follows the text: {events:?}");
    };
    assert_eq!(call.name, "add");
    assert_eq!(call.input, input);
    assert!(call.id.starts_with("tooluse_"));
    assert_eq!(after_text[1], &ModelEvent::Stop(StopReason::ToolUse));
    assert!(matches!(after_text.last(), Some(ModelEvent::Usage(_))));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, ModelEvent::ToolUse(_)))
            .count(),
        1
    );
    // The server streams an input in pieces of at most 16 characters (tests/local-bedrock/tests/tools.rs), so this
    // one came in several, which the adapter put together.
    assert_eq!(server.requests()[0].operation, Operation::ConverseStream);
    assert!(input.to_string().chars().count() > 3 * 16);
}

#[tokio::test]
async fn a_loop_directive_asks_every_round_and_without_tools_the_exchanges_go_as_text() {
    let (server, model) = start_bedrock().await;
    let mut messages = vec![user(r#"Count [[tool-loop:add {"a": 1, "b": 1}]]"#)];
    let mut ids = Vec::new();
    for round in 0..4 {
        let events = events(&model, &request(&["add"], messages.clone())).await;
        let calls: Vec<ToolCall> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolUse(call) => Some(call.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 1, "round {round}: {events:?}");
        assert!(events.contains(&ModelEvent::Stop(StopReason::ToolUse)));
        ids.push(calls[0].id.clone());
        messages.push(asked("Let me call add.", &calls));
        messages.push(answered(vec![result(
            &calls[0],
            &format!("{}", round + 2),
            ToolStatus::Success,
        )]));
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "a new id every round");

    // Offered no tools (as a last round may be), the model must answer, and the conversation's calls and results
    // reach it as text (Bedrock refuses toolUse blocks without a toolConfig).
    let reply = model
        .converse(&request(&[], messages.clone()))
        .await
        .expect("a request without tools is not refused for its tool exchanges");
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert!(reply.tool_calls.is_empty());
    let body = server.requests().pop().unwrap().body;
    assert!(body.get("toolConfig").is_none());
    let sent = body.to_string();
    assert!(
        !sent.contains("toolUse") && !sent.contains("toolResult"),
        "{sent}"
    );
    assert_eq!(
        body["messages"][1]["content"][1]["text"],
        r#"[tool add called with {"a":1,"b":1}]"#
    );
    assert_eq!(
        body["messages"][8]["content"][0]["text"],
        "[tool add → success: 5]"
    );
    assert_eq!(reply.text, "Echo: [tool add → success: 5]");
}

#[tokio::test]
async fn count_tokens_counts_the_tools_too() {
    let (server, model) = start_bedrock().await;
    let counter = "anthropic.claude-sonnet-4-5-20250929-v1:0";
    let without = model
        .count_tokens(counter, &request(&[], vec![user("Two words")]))
        .await
        .unwrap()
        .expect("an Anthropic model counts");
    let with = model
        .count_tokens(counter, &request(&["add"], vec![user("Two words")]))
        .await
        .unwrap()
        .expect("an Anthropic model counts");
    assert!(with > without, "{with} > {without}");
    let requests = server.requests();
    assert!(
        requests[0]
            .body
            .pointer("/input/converse/toolConfig")
            .is_none()
    );
    assert_eq!(
        requests[1].body["input"]["converse"]["toolConfig"]["tools"][0]["toolSpec"]["name"],
        Value::from("add")
    );
}

#[tokio::test]
async fn a_cache_point_stays_after_the_system_prompt_with_tools() {
    let (server, model) = start_bedrock().await;
    let cached = ModelRequest {
        prompt_caching: true,
        ..request(
            &["add"],
            vec![user("Hello"), asked("Hi", &[]), user("Again")],
        )
    };
    model.converse(&cached).await.unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(
        body["system"][1],
        json!({"cachePoint": {"type": "default"}})
    );
    assert_eq!(body["toolConfig"]["tools"].as_array().unwrap().len(), 1);
}
