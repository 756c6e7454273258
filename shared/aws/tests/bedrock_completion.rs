//! What a stateless completion asks of Bedrock, through the adapter and the real SDK client against the local
//! Bedrock server: a tool choice (`toolChoice` any / tool), stop sequences, structured output (`outputConfig`), and
//! Claude's signed reasoning given back with the tool uses it led to, within a turn (the server's tools) and across
//! a client's round trip (kept in the DynamoDB table, on moto), and the server's refusal when it is missing.

use std::sync::Arc;

use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{
    Caller, ChatModel, ChatService, ChatSettings, Completion, ContentPart, FinishReason,
    InferenceSettings, Message, ModelError, ModelEvent, ModelMessage, ModelOptions, ModelRequest,
    ModelStream, Reasoning, ReasoningBlock, ReasoningEffort, ReasoningStyle, ResponseFormat, Role,
    SessionStore, StopReason, Tool, ToolBounds, ToolCall, ToolChoice, ToolExchange, ToolFuture,
    ToolOutput, ToolResult, ToolSpec, ToolStatus, TurnInput,
};
use chat_testing::{FixedTools, InMemoryStore};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use serde_json::{Value, json};
use support::start_bedrock;

mod support;

/// A Claude that thinks with a budget: the local server plays Bedrock's rules for it.
const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn weather() -> ToolSpec {
    ToolSpec {
        strict: false,
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        }),
    }
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        model_id: CLAUDE.into(),
        system: "Be brief.".into(),
        messages: vec![ModelMessage::text(Role::User, vec![text.into()])],
        inference: InferenceSettings {
            max_tokens: 2000,
            ..InferenceSettings::default()
        },
        ..ModelRequest::default()
    }
}

fn thinking() -> Option<Reasoning> {
    Some(Reasoning::new(
        ReasoningEffort::Low,
        ReasoningStyle::AnthropicBudget,
    ))
}

#[tokio::test]
async fn a_tool_choice_makes_the_model_call_the_tool_with_an_input_of_its_schema() {
    let (server, model) = start_bedrock().await;
    let mut asked = request("What is the weather like?");
    asked.tools = vec![
        ToolSpec {
            strict: false,
            name: "other".into(),
            description: "Another.".into(),
            input_schema: json!({"type": "object"}),
        },
        weather(),
    ];
    asked.tool_choice = ToolChoice::Tool("get_weather".into());
    let reply = model.converse(&asked).await.unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].name, "get_weather");
    assert_eq!(
        reply.tool_calls[0].input,
        json!({"city": "example", "unit": "celsius"})
    );
    assert_eq!(
        server.requests()[0].body["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "get_weather"}})
    );
    // `required`: any tool, streamed; the first offered is called.
    asked.tool_choice = ToolChoice::Any;
    let mut stream = model.converse_stream(&asked).await.unwrap();
    let mut calls = Vec::new();
    while let Some(event) = stream.next_event().await.unwrap() {
        if let ModelEvent::ToolUse(call) = event {
            calls.push(call.name);
        }
    }
    assert_eq!(calls, ["other"]);
    assert_eq!(
        server.requests()[1].body["toolConfig"]["toolChoice"],
        json!({"any": {}})
    );
    // `auto` sends no choice at all.
    asked.tool_choice = ToolChoice::Auto;
    let reply = model.converse(&asked).await.unwrap();
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert!(
        server.requests()[2].body["toolConfig"]
            .get("toolChoice")
            .is_none()
    );
    // Bedrock refuses a forced call while Claude thinks.
    asked.tool_choice = ToolChoice::Any;
    asked.reasoning = thinking();
    let err = model.converse(&asked).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected(m) if m.contains("tool_choice forces tool use")),
        "{err:?}"
    );
}

#[tokio::test]
async fn top_k_goes_in_the_model_specific_fields_and_nothing_goes_there_without_it() {
    let (server, model) = start_bedrock().await;
    let mut asked = request("hi");
    model.converse(&asked).await.unwrap();
    assert!(
        server.requests()[0]
            .body
            .get("additionalModelRequestFields")
            .is_none()
    );
    asked.inference.top_k = Some(40);
    model.converse(&asked).await.unwrap();
    assert_eq!(
        server.requests()[1].body["additionalModelRequestFields"],
        json!({"top_k": 40})
    );
    assert!(
        server.requests()[1].body["inferenceConfig"]
            .get("topK")
            .is_none()
    );
    // Beside the fields that ask the model to reason.
    asked.reasoning = thinking();
    model.converse(&asked).await.unwrap();
    assert_eq!(
        server.requests()[2].body["additionalModelRequestFields"],
        json!({"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 40})
    );
}

#[tokio::test]
async fn a_stop_sequence_ends_the_answer_before_it() {
    let (server, model) = start_bedrock().await;
    let mut asked = request("[[say:one two STOP three]]");
    asked.stop_sequences = vec!["STOP".into(), "never".into()];
    let reply = model.converse(&asked).await.unwrap();
    assert_eq!(reply.text, "one two ");
    assert_eq!(reply.stop_reason, StopReason::StopSequence);
    assert_eq!(
        server.requests()[0].body["inferenceConfig"]["stopSequences"],
        json!(["STOP", "never"])
    );
    let mut stream = model.converse_stream(&asked).await.unwrap();
    let (mut text, mut stop) = (String::new(), None);
    while let Some(event) = stream.next_event().await.unwrap() {
        match event {
            ModelEvent::Text(t) => text.push_str(&t),
            ModelEvent::Stop(s) => stop = Some(s),
            _ => {}
        }
    }
    assert_eq!(
        (text.as_str(), stop),
        ("one two ", Some(StopReason::StopSequence))
    );
    // No stop sequence: no field, and the whole answer.
    let reply = model
        .converse(&request("[[say:one two STOP three]]"))
        .await
        .unwrap();
    assert_eq!(reply.text, "one two STOP three");
    assert!(
        server.requests()[2].body["inferenceConfig"]
            .get("stopSequences")
            .is_none()
    );
}

#[tokio::test]
async fn structured_output_asks_for_the_schema_and_the_answer_parses_against_it() {
    let (server, model) = start_bedrock().await;
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 18},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": false,
    });
    let mut asked = request("Who is it?");
    asked.response_format = ResponseFormat::JsonSchema {
        name: "person".into(),
        description: Some("A person.".into()),
        schema: schema.clone(),
        strict: true,
    };
    let reply = model.converse(&asked).await.unwrap();
    let value: Value = serde_json::from_str(&reply.text).expect("the answer is JSON");
    assert_eq!(
        value,
        json!({"name": "example", "age": 18, "tags": ["example"]})
    );
    let format = &server.requests()[0].body["outputConfig"]["textFormat"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["structure"]["jsonSchema"]["name"], "person");
    assert_eq!(
        format["structure"]["jsonSchema"]["description"],
        "A person."
    );
    let sent: Value = serde_json::from_str(
        format["structure"]["jsonSchema"]["schema"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sent, schema);
    // A JSON object of any shape: the schema {"type": "object"}.
    asked.response_format = ResponseFormat::JsonObject;
    let reply = model.converse(&asked).await.unwrap();
    assert_eq!(reply.text, "{}");
    let format = &server.requests()[1].body["outputConfig"]["textFormat"];
    assert_eq!(
        format["structure"]["jsonSchema"]["schema"],
        json!(r#"{"type":"object"}"#)
    );
}

#[tokio::test]
async fn the_server_refuses_tool_use_without_its_signed_reasoning_while_claude_thinks() {
    let (_server, model) = start_bedrock().await;
    let call = ToolCall {
        id: "tooluse_1".into(),
        name: "get_weather".into(),
        input: json!({"city": "Paris"}),
    };
    let conversation = |reasoning: Vec<ReasoningBlock>| {
        let mut asked = request("Weather in Paris?");
        asked.tools = vec![weather()];
        asked.reasoning = thinking();
        asked.messages.push(ModelMessage {
            tool_uses: vec![call.clone()],
            reasoning,
            ..ModelMessage::text(Role::Assistant, Vec::new())
        });
        asked.messages.push(ModelMessage {
            tool_results: vec![ToolResult {
                id: call.id.clone(),
                text: "sunny".into(),
                status: ToolStatus::Success,
            }],
            ..ModelMessage::text(Role::User, Vec::new())
        });
        asked
    };
    let err = model.converse(&conversation(Vec::new())).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected(m) if m.contains("Expected `thinking` or `redacted_thinking`, but found `tool_use`")),
        "{err:?}"
    );
    let forged = vec![ReasoningBlock::signed(
        "I will look it up.",
        "local-signature-0000000000000000",
    )];
    let err = model.converse(&conversation(forged)).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected(m) if m.contains("Invalid `signature`")),
        "{err:?}"
    );
}

/// A server tool: `add` {a, b} → their sum.
struct Add(ToolSpec);

impl Tool for Add {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn call<'a>(&'a self, _caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let sum = input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0);
            Ok(ToolOutput {
                text: sum.to_string(),
                passages: Vec::new(),
            })
        })
    }
}

/// The tools the model may call: `add`.
fn tools() -> FixedTools {
    FixedTools::new(vec![Arc::new(Add(ToolSpec {
        strict: false,
        name: "add".into(),
        description: "Adds a and b.".into(),
        input_schema: json!({"type": "object"}),
    }))])
}

fn settings() -> ChatSettings {
    let mut s = chat_testing::settings_for(CLAUDE);
    s.model = ModelOptions::for_model(CLAUDE, 8192);
    s.model.token_counter = None;
    s.model.prompt_caching = false;
    s
}

fn thinking_turn(text: &str) -> TurnInput {
    let mut input = chat_testing::ask(text, None);
    input.store_new_chat = false;
    input.overrides.reasoning_effort = Some(ReasoningEffort::Low);
    input
}

/// The local Bedrock server, and a service on it with the server's tools on and [`tools`].
async fn with_server_tools() -> (LocalBedrock, ChatService<BedrockModel, InMemoryStore>) {
    let (server, model) = start_bedrock().await;
    let mut s = settings();
    s.openai_server_tools = true;
    let service = ChatService::new(model, InMemoryStore::new(), s)
        .with_tools(vec![Arc::new(tools())], ToolBounds::default());
    (server, service)
}

/// The first content block of the assistant message of request `i`'s messages at `at`.
fn first_block(server: &LocalBedrock, i: usize, at: usize) -> Value {
    server.requests()[i].body["messages"][at]["content"][0].clone()
}

#[tokio::test]
async fn within_a_turn_the_signed_reasoning_goes_back_with_the_server_tools_calls() {
    let (server, service) = with_server_tools().await;
    let answer = service
        .answer(
            &Caller::owner("alice"),
            &thinking_turn(r#"What is 2 + 3? [[tool:add {"a": 2, "b": 3}]]"#),
        )
        .await
        .expect("Bedrock takes the reasoning back");
    assert!(
        answer.content.ends_with("add returned 5"),
        "{}",
        answer.content
    );
    assert_eq!(server.requests().len(), 2);
    let block = first_block(&server, 1, 1);
    let text = block["reasoningContent"]["reasoningText"]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("Reasoning (budget 1024)"), "{text}");
    assert!(
        block["reasoningContent"]["reasoningText"]["signature"]
            .as_str()
            .unwrap()
            .starts_with("local-signature-"),
        "{block}"
    );
    assert!(server.requests()[1].body["messages"][1]["content"][2]["toolUse"].is_object());
}

#[tokio::test]
async fn across_the_clients_round_trip_the_reasoning_kept_in_dynamodb_goes_back() {
    let (server, model) = start_bedrock().await;
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client, table, None);
    let service = ChatService::new(model, store.clone(), settings());
    let completion = Completion {
        tools: vec![weather()],
        ..Completion::default()
    };
    let alice = Caller::owner("alice");
    let asked = thinking_turn(
        r#"Weather in Paris? [[tool:get_weather {"city": "Paris", "unit": "celsius"}]]"#,
    );
    let answer = service.complete(&alice, &asked, &completion).await.unwrap();
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    let call = answer.tool_calls[0].clone();
    let kept = store
        .kept_reasoning("alice", &call.id)
        .await
        .unwrap()
        .expect("kept in the table");
    assert_eq!(Some(kept[0].text.clone()), answer.reasoning);
    assert_eq!(store.kept_reasoning("bob", &call.id).await.unwrap(), None);
    // The client ran the tool and sends the whole conversation back, without the reasoning.
    let mut next = asked.clone();
    next.messages.push(Message {
        role: Role::Assistant,
        content: vec![ContentPart::Tool(ToolExchange {
            round: 0,
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            output: "sunny, 21 C".into(),
            status: ToolStatus::Success,
        })],
    });
    let answer = service.complete(&alice, &next, &completion).await.unwrap();
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert!(
        answer
            .content
            .starts_with("get_weather returned sunny, 21 C"),
        "{}",
        answer.content
    );
    let block = first_block(&server, 1, 1);
    assert_eq!(
        block["reasoningContent"]["reasoningText"]["text"].as_str(),
        Some(kept[0].text.as_str())
    );
    assert!(server.requests()[1].body["additionalModelRequestFields"]["thinking"].is_object());
    // Another owner's continuation finds none of it: answered without reasoning, not refused.
    let answer = service
        .complete(&Caller::owner("bob"), &next, &completion)
        .await
        .unwrap();
    assert!(
        answer.content.starts_with("get_weather returned"),
        "{}",
        answer.content
    );
    assert!(answer.reasoning.is_none());
    let body = &server.requests()[2].body;
    assert!(body.get("additionalModelRequestFields").is_none(), "{body}");
    assert!(first_block(&server, 2, 1)["toolUse"].is_object());
}

#[tokio::test]
async fn a_redacted_reasoning_block_goes_back_as_it_came_beside_the_signed_one() {
    let (server, service) = with_server_tools().await;
    let (alice, redacted) = (
        Caller::owner("alice"),
        thinking_turn(r#"What is 2 + 3? [[tool:add {"a": 2, "b": 3}]] [[redacted-reasoning]]"#),
    );
    let answer = service
        .answer(&alice, &redacted)
        .await
        .expect("Bedrock takes the reasoning back");
    assert!(answer.reasoning_redacted);
    assert!(
        answer.content.ends_with("add returned 5"),
        "{}",
        answer.content
    );
    let asked = &server.requests()[1].body["messages"][1]["content"];
    assert!(
        asked[0]["reasoningContent"]["reasoningText"]["signature"].is_string(),
        "{asked}"
    );
    // The bytes the server sent ("redacted by local-bedrock"), in base64.
    assert_eq!(
        asked[1]["reasoningContent"]["redactedContent"],
        json!("cmVkYWN0ZWQgYnkgbG9jYWwtYmVkcm9jaw==")
    );
    assert!(asked[3]["toolUse"].is_object(), "{asked}");
    // Streamed: the signature and the redacted bytes come as deltas, and go back alike.
    let mut turn = service
        .stream(&alice, &redacted)
        .await
        .expect("Bedrock takes the reasoning back");
    let mut text = String::new();
    while let Some(event) = turn.next().await.unwrap() {
        if let chat_core::TurnEvent::Text(t) = event {
            text.push_str(&t);
        }
    }
    assert!(text.ends_with("add returned 5"), "{text}");
    assert_eq!(&server.requests()[3].body["messages"][1]["content"], asked);
}
