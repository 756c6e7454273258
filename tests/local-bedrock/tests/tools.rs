//! Tool use on the wire, driven through the real `aws-sdk-bedrockruntime` client: `[[tool:…]]` directives answered
//! with `toolUse` blocks (whole in Converse, start / input pieces / stop in ConverseStream), tool results quoted,
//! `[[tool-loop:…]]` asking again on every round, and Bedrock's refusals of malformed tool use.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::operation::converse::ConverseOutput as ConverseResponse;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ContentBlockDelta, ContentBlockStart, ConversationRole, ConverseOutput,
    ConverseStreamOutput, ConverseTokensRequest, CountTokensInput, Message, StopReason, Tool,
    ToolConfiguration, ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus,
    ToolSpecification, ToolUseBlock,
};
use serde_json::{Value, json};
use support::{MODEL, document, error_text, json_of, message, start};

mod support;

fn user_text(t: &str) -> Message {
    message(ConversationRole::User, vec![ContentBlock::Text(t.into())])
}

/// Tools of these names, each taking an object.
fn tools(names: &[&str]) -> ToolConfiguration {
    let mut config = ToolConfiguration::builder();
    for name in names {
        config = config.tools(Tool::ToolSpec(
            ToolSpecification::builder()
                .name(*name)
                .description(format!("The {name} tool."))
                .input_schema(ToolInputSchema::Json(document(&json!({"type": "object"}))))
                .build()
                .unwrap(),
        ));
    }
    config.build().unwrap()
}

fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(
        ToolUseBlock::builder()
            .tool_use_id(id)
            .name(name)
            .input(document(&input))
            .build()
            .unwrap(),
    )
}

fn tool_result(id: &str, text: &str, status: ToolResultStatus) -> ContentBlock {
    ContentBlock::ToolResult(
        ToolResultBlock::builder()
            .tool_use_id(id)
            .content(ToolResultContentBlock::Text(text.into()))
            .status(status)
            .build()
            .unwrap(),
    )
}

async fn converse(
    client: &Client,
    config: Option<ToolConfiguration>,
    messages: Vec<Message>,
) -> Result<ConverseResponse, String> {
    client
        .converse()
        .model_id(MODEL)
        .set_messages(Some(messages))
        .set_tool_config(config)
        .send()
        .await
        .map_err(|e| error_text(e.into_service_error()))
}

/// [`describe`] of a `converse` answer that ended its turn.
async fn answered(
    client: &Client,
    config: Option<ToolConfiguration>,
    messages: Vec<Message>,
) -> Vec<String> {
    let response = converse(client, config, messages).await.unwrap();
    assert_eq!(response.stop_reason(), &StopReason::EndTurn);
    describe(&response)
}

/// `text …` and `toolUse ID NAME INPUT` lines of a `converse` answer.
fn describe(response: &ConverseResponse) -> Vec<String> {
    let Some(ConverseOutput::Message(m)) = response.output() else {
        panic!("no message");
    };
    m.content()
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => format!("text {t}"),
            ContentBlock::ToolUse(u) => format!(
                "toolUse {} {} {}",
                u.tool_use_id(),
                u.name(),
                json_of(u.input())
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

/// The calls of a `converse` answer: `(id, name)`.
fn calls(response: &ConverseResponse) -> Vec<(String, String)> {
    let Some(ConverseOutput::Message(m)) = response.output() else {
        panic!("no message");
    };
    m.content()
        .iter()
        .filter_map(|b| b.as_tool_use().ok())
        .map(|u| (u.tool_use_id().to_string(), u.name().to_string()))
        .collect()
}

#[tokio::test]
async fn a_tool_directive_is_answered_with_tool_use_blocks_in_order() {
    let (_server, client) = start().await;
    let question = r#"Add them [[tool:add {"a": 2, "b": 3}]] and look [[tool:search {"query": "plans"}]] [[tool:absent {}]]"#;
    let response = converse(
        &client,
        Some(tools(&["search", "add"])),
        vec![user_text(question)],
    )
    .await
    .unwrap();
    assert_eq!(response.stop_reason(), &StopReason::ToolUse);
    let lines = describe(&response);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "text Let me call add, search.");
    let calls = calls(&response);
    assert!(lines[1].ends_with(r#" add {"a":2,"b":3}"#), "{lines:?}");
    assert!(
        lines[2].ends_with(r#" search {"query":"plans"}"#),
        "{lines:?}"
    );
    assert!(calls.iter().all(|(id, _)| id.starts_with("tooluse_")));
    assert_ne!(calls[0].0, calls[1].0, "each call has an id of its own");

    // Without the tools offered, the same question is echoed as any other.
    assert_eq!(
        answered(&client, None, vec![user_text(question)]).await,
        ["text Echo: Add them and look"]
    );
}

#[tokio::test]
async fn results_are_quoted_by_the_names_of_their_calls() {
    let (server, client) = start().await;
    let question = user_text(r#"Add [[tool:add {"a": 2, "b": 3}]] and fetch [[tool:fetch {}]]"#);
    let first = converse(
        &client,
        Some(tools(&["add", "fetch"])),
        vec![question.clone()],
    )
    .await
    .unwrap();
    let ids = calls(&first);
    let Some(ConverseOutput::Message(asked)) = first.output().cloned() else {
        panic!("no message");
    };
    let results = message(
        ConversationRole::User,
        vec![
            tool_result(&ids[0].0, "5", ToolResultStatus::Success),
            tool_result(
                &ids[1].0,
                "the page did not answer",
                ToolResultStatus::Error,
            ),
        ],
    );
    let second = converse(
        &client,
        Some(tools(&["add", "fetch"])),
        vec![question, asked, results],
    )
    .await
    .unwrap();
    assert_eq!(second.stop_reason(), &StopReason::EndTurn);
    assert_eq!(
        describe(&second),
        ["text add returned 5\n\nfetch failed: the page did not answer"]
    );
    // The results reached the server as the SDK sent them.
    let requests = server.requests();
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["toolResult"]["content"][0]["text"],
        "5"
    );
}

#[tokio::test]
async fn a_stream_sends_each_call_as_a_start_input_pieces_and_a_stop() {
    let (_server, client) = start().await;
    let input = json!({"query": "the travel policy of the company", "limit": 3});
    let mut output = client
        .converse_stream()
        .model_id(MODEL)
        .messages(user_text(&format!("Look it up [[tool:search {input}]]")))
        .tool_config(tools(&["search"]))
        .send()
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = output.stream.recv().await.unwrap() {
        events.push(event);
    }
    let mut lines = Vec::new();
    let mut pieces = Vec::new();
    for event in &events {
        match event {
            ConverseStreamOutput::ContentBlockStart(s) => match s.start().unwrap() {
                ContentBlockStart::ToolUse(u) => lines.push(format!(
                    "{} start {} {}",
                    s.content_block_index(),
                    u.name(),
                    u.tool_use_id().starts_with("tooluse_")
                )),
                other => lines.push(format!("{other:?}")),
            },
            ConverseStreamOutput::ContentBlockDelta(d) => match d.delta().unwrap() {
                ContentBlockDelta::Text(t) => {
                    lines.push(format!("{} text {t}", d.content_block_index()))
                }
                ContentBlockDelta::ToolUse(u) => {
                    if !lines.last().is_some_and(|l: &String| l.ends_with("input")) {
                        lines.push(format!("{} input", d.content_block_index()));
                    }
                    pieces.push(u.input().to_string());
                }
                other => lines.push(format!("{other:?}")),
            },
            ConverseStreamOutput::ContentBlockStop(s) => {
                lines.push(format!("{} stop", s.content_block_index()))
            }
            ConverseStreamOutput::MessageStop(s) => {
                lines.push(format!("messageStop {}", s.stop_reason().as_str()))
            }
            ConverseStreamOutput::MessageStart(_) => lines.push("messageStart".into()),
            ConverseStreamOutput::Metadata(m) => {
                // Four words of text and every input piece.
                let usage = m.usage().unwrap();
                assert_eq!(usage.output_tokens() as usize, 4 + pieces.len());
                lines.push("metadata".into());
            }
            other => lines.push(format!("{other:?}")),
        }
    }
    assert_eq!(
        lines,
        [
            "messageStart",
            "0 text Let ",
            "0 text me ",
            "0 text call ",
            "0 text search.",
            "0 stop",
            "1 start search true",
            "1 input",
            "1 stop",
            "messageStop tool_use",
            "metadata",
        ]
    );
    assert!(pieces.len() >= 2, "{pieces:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&pieces.concat()).unwrap(),
        input
    );
}

#[tokio::test]
async fn a_loop_directive_asks_again_on_every_round_while_the_tool_is_offered() {
    let (_server, client) = start().await;
    let mut messages = vec![user_text(r#"Keep going [[tool-loop:tick {"n": 1}]]"#)];
    let mut ids = Vec::new();
    for round in 0..3 {
        let response = converse(&client, Some(tools(&["tick"])), messages.clone())
            .await
            .unwrap();
        assert_eq!(
            response.stop_reason(),
            &StopReason::ToolUse,
            "round {round}"
        );
        let call = calls(&response);
        assert_eq!(call.len(), 1);
        assert_eq!(call[0].1, "tick");
        ids.push(call[0].0.clone());
        let Some(ConverseOutput::Message(asked)) = response.output().cloned() else {
            panic!("no message");
        };
        messages.push(asked);
        messages.push(message(
            ConversationRole::User,
            vec![tool_result(
                &call[0].0,
                &format!("tick {round}"),
                ToolResultStatus::Success,
            )],
        ));
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each round's call has a new id");

    // Offered another tool only, the model answers the last results. (The conversation's blocks still need a
    // toolConfig.)
    assert_eq!(
        answered(&client, Some(tools(&["other"])), messages).await,
        ["text tick returned tick 2"]
    );
}

#[tokio::test]
async fn tool_blocks_bedrock_refuses_are_refused() {
    let (_server, client) = start().await;
    let asked = message(
        ConversationRole::Assistant,
        vec![tool_use("tooluse_1", "add", json!({"a": 1}))],
    );
    let answered = message(
        ConversationRole::User,
        vec![tool_result("tooluse_1", "1", ToolResultStatus::Success)],
    );
    let conversation = vec![user_text("Add"), asked.clone(), answered];
    let err = converse(&client, None, conversation.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "ValidationException: The toolConfig field must be defined when using toolUse and toolResult content blocks."
    );
    let unanswered = vec![user_text("Add"), asked, user_text("And now?")];
    let err = converse(&client, Some(tools(&["add"])), unanswered)
        .await
        .unwrap_err();
    assert!(
        err.starts_with(
            "ValidationException: messages.2: `tool_use` ids were found without `tool_result` blocks"
        ),
        "{err}"
    );
    assert_eq!(
        describe(
            &converse(&client, Some(tools(&["add"])), conversation)
                .await
                .unwrap()
        ),
        ["text add returned 1"]
    );
}

#[tokio::test]
async fn count_tokens_counts_the_tools_and_tool_blocks() {
    let (_server, client) = start().await;
    let count = |config: Option<ToolConfiguration>, messages: Vec<Message>| {
        client
            .count_tokens()
            .model_id("anthropic.claude-sonnet-4-5-20250929-v1:0")
            .input(CountTokensInput::Converse(
                ConverseTokensRequest::builder()
                    .set_messages(Some(messages))
                    .set_tool_config(config)
                    .build(),
            ))
            .send()
    };
    let question = vec![user_text("Two words")];
    assert_eq!(
        count(None, question.clone()).await.unwrap().input_tokens(),
        2
    );
    // The name (1), `The add tool.` (3) and the schema JSON (1).
    assert_eq!(
        count(Some(tools(&["add"])), question)
            .await
            .unwrap()
            .input_tokens(),
        7
    );
    let conversation = vec![
        user_text("Two words"),
        message(
            ConversationRole::Assistant,
            vec![tool_use("tooluse_1", "add", json!({"a": 1}))],
        ),
        message(
            ConversationRole::User,
            vec![tool_result(
                "tooluse_1",
                "three result words",
                ToolResultStatus::Success,
            )],
        ),
    ];
    assert_eq!(
        count(Some(tools(&["add"])), conversation)
            .await
            .unwrap()
            .input_tokens(),
        7 + 1 + 3
    );
}
