//! OpenAI's Chat Completions dialect: each field of a request honoured, taken only at its default, or refused
//! naming it; the conversation as the core's; and the answers' shapes as OpenAI's SDKs read them.

use base64::Engine;
use chat_core::{
    Answer, ChatError, ContentPart, FileKind, FinishReason, ImageFormat, Overrides,
    ReasoningEffort, RequestLimits, ResponseFormat, Role, Thinking, TokenUsage, ToolCall,
    ToolChoice, ToolStatus,
};
use chat_protocol::openai::{
    ChatCompletion, ChatCompletionChunk, ChunkHeader, CompletionRequest, Model, Usage,
    parse_completion_request, sse_data,
};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde";
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn parse(body: &Value) -> Result<CompletionRequest, ChatError> {
    parse_completion_request(body.to_string().as_bytes(), &RequestLimits::default())
}

fn ask(text: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": text}]})
}

fn with(mut body: Value, field: &str, value: Value) -> Value {
    body[field] = value;
    body
}

/// The field a refusal names, and that it is a 400.
fn refused(body: &Value) -> String {
    match parse(body) {
        Err(ChatError::Invalid(e)) => e.path,
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn a_plain_request_is_a_stateless_turn_of_the_named_model() {
    let r = parse(&json!({
        "model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
            {"role": "user", "content": "Hello"}
        ],
        "user": "user-42",
        "metadata": {"team": "blue"}
    }))
    .unwrap();
    assert_eq!(r.turn.messages.len(), 1);
    assert_eq!(r.turn.messages[0].role, Role::User);
    assert_eq!(r.turn.messages[0].text(), "Hello");
    assert!(!r.turn.store_new_chat);
    assert_eq!(r.turn.session_state, None);
    assert_eq!(
        r.completion.system_prompt().as_deref(),
        Some("Be terse.\n\nUse French.")
    );
    assert_eq!(
        r.completion.model_id.as_deref(),
        Some("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    );
    assert_eq!(r.completion.user.as_deref(), Some("user-42"));
    assert_eq!(r.metadata["team"], "blue");
    assert!(!r.stream);
    assert!(!r.include_usage);
}

/// `prompt_cache_key` is the client's hint for OpenAI's cache routing (Codex, the Agents SDK and LangSmith's wrapper
/// send it): taken for the trace like `user`, bounded like it, and a value of another type is refused.
#[test]
fn a_prompt_cache_key_is_taken_for_the_trace() {
    let r = parse(&with(ask("x"), "prompt_cache_key", json!("repo-42"))).unwrap();
    assert_eq!(r.prompt_cache_key.as_deref(), Some("repo-42"));
    assert_eq!(parse(&ask("x")).unwrap().prompt_cache_key, None);
    assert_eq!(
        refused(&with(ask("x"), "prompt_cache_key", json!(42))),
        "prompt_cache_key"
    );
    assert_eq!(
        refused(&with(ask("x"), "prompt_cache_key", json!("k".repeat(257)))),
        "prompt_cache_key"
    );
}

#[test]
fn fields_taken_only_at_their_default_are_refused_at_any_other_value() {
    let defaults = [
        ("n", json!(1)),
        ("seed", Value::Null),
        ("logprobs", json!(false)),
        ("top_logprobs", Value::Null),
        ("logit_bias", json!({})),
        ("presence_penalty", json!(0)),
        ("frequency_penalty", json!(0.0)),
        ("audio", Value::Null),
        ("modalities", json!(["text"])),
        ("prediction", Value::Null),
        ("service_tier", json!("auto")),
        ("service_tier", json!("default")),
        ("store", json!(false)),
        ("verbosity", json!("medium")),
        ("web_search_options", Value::Null),
        ("functions", Value::Null),
    ];
    for (field, value) in defaults {
        assert!(
            parse(&with(ask("x"), field, value.clone())).is_ok(),
            "{field}: {value}"
        );
    }
    let others = [
        ("n", json!(2)),
        ("seed", json!(7)),
        ("logprobs", json!(true)),
        ("top_logprobs", json!(3)),
        ("logit_bias", json!({"50256": -100})),
        ("presence_penalty", json!(0.5)),
        ("frequency_penalty", json!(-1)),
        ("audio", json!({"voice": "alloy", "format": "mp3"})),
        ("modalities", json!(["text", "audio"])),
        ("prediction", json!({"type": "content", "content": "x"})),
        ("service_tier", json!("flex")),
        ("store", json!(true)),
        ("verbosity", json!("low")),
        ("web_search_options", json!({})),
        ("moderation", json!({"model": "omni-moderation-latest"})),
        ("function_call", json!("auto")),
        ("functions", json!([{"name": "f"}])),
    ];
    for (field, value) in others {
        assert_eq!(refused(&with(ask("x"), field, value)), field);
    }
}

#[test]
fn unknown_fields_are_refused_by_name_wherever_they_stand() {
    assert_eq!(
        refused(&with(ask("x"), "temprature", json!(1))),
        "temprature"
    );
    let nested =
        json!({"model": "m", "messages": [{"role": "user", "content": "x", "context": {}}]});
    assert_eq!(refused(&nested), "messages[0].context");
    let options = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true, "x": 1},
        "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(refused(&options), "stream_options.x");
}

#[test]
fn stream_options_need_stream_and_ask_for_usage() {
    let body = with(ask("x"), "stream_options", json!({"include_usage": true}));
    assert_eq!(refused(&body), "stream_options");
    let r = parse(&with(body, "stream", json!(true))).unwrap();
    assert!(r.stream && r.include_usage);
}

#[test]
fn sampling_length_and_thinking_are_the_completions_within_bounds() {
    let r = parse(
        &json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.2, "top_p": 0.9, "max_completion_tokens": 100, "reasoning_effort": "high",
        "stop": ["END"]}),
    )
    .unwrap();
    assert_eq!(r.completion.sampling.temperature, Some(0.2));
    assert_eq!(r.completion.sampling.top_p, Some(0.9));
    assert_eq!(r.completion.max_output_tokens, Some(100));
    assert_eq!(
        r.completion.thinking,
        Some(Thinking::Effort(ReasoningEffort::High))
    );
    assert_eq!(r.completion.stop_sequences, ["END"]);
    // They are the completion's terms, not the protocol's `context.overrides`.
    assert_eq!(r.turn.overrides, Overrides::default());
    assert_eq!(
        parse(&with(ask("x"), "stop", json!("\n")))
            .unwrap()
            .completion
            .stop_sequences,
        ["\n"]
    );
    assert_eq!(
        refused(&with(ask("x"), "temperature", json!(1.5))),
        "temperature"
    );
    // Any length is read: the model's limit holds it once the model is known (`Completion::fit`).
    assert_eq!(
        parse(&with(ask("x"), "max_tokens", json!(50_000)))
            .unwrap()
            .completion
            .max_output_tokens,
        Some(50_000)
    );
    assert_eq!(
        refused(&with(ask("x"), "max_tokens", json!(0))),
        "max_tokens"
    );
    assert_eq!(
        refused(&with(ask("x"), "reasoning_effort", json!("max"))),
        "reasoning_effort"
    );
    assert_eq!(
        refused(&with(ask("x"), "stop", json!(["a", "b", "c", "d", "e"]))),
        "stop"
    );
    assert_eq!(
        refused(&with(ask("x"), "temperature", json!("hot"))),
        "temperature"
    );
}

#[test]
fn images_come_as_data_urls_only_and_files_as_file_data() {
    let r = parse(&json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(PNG)), "detail": "auto"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(PDF))}}
    ]}]}))
    .unwrap();
    let message = &r.turn.messages[0];
    assert_eq!(message.text(), "What is this?");
    let files: Vec<_> = message.files().collect();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].kind, FileKind::Image(ImageFormat::Png));
    assert_eq!(files[0].size, PNG.len() as u64);
    assert_eq!(files[1].name, "report.pdf");
    assert!(!files[1].kind.is_image());
    assert_eq!(files[1].size, PDF.len() as u64);
    // A file's data as bare base64, its kind from its name.
    let bare = parse(
        &json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "a.pdf", "file_data": b64(PDF)}}]}]}),
    )
    .unwrap();
    assert_eq!(bare.turn.messages[0].files().count(), 1);

    let http = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]});
    assert_eq!(refused(&http), "messages[0].content[1].image_url");
    let file_id = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"file_id": "file-abc"}}]}]});
    assert_eq!(refused(&file_id), "messages[0].content[0].file.file_id");
    let audio = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]});
    assert_eq!(refused(&audio), "messages[0].content[0].type");
}

#[test]
fn tool_calls_and_their_results_are_the_assistant_messages_exchanges() {
    let r = parse(&json!({"model": "m",
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": false,
        "messages": [
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_2", "content": "-3 C"},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18 C"}]}
        ]}))
    .unwrap();
    assert_eq!(r.completion.tools.len(), 1);
    assert_eq!(r.completion.tools[0].name, "get_weather");
    assert_eq!(
        r.completion.tool_choice,
        ToolChoice::Tool("get_weather".into())
    );
    assert!(!r.completion.parallel_tool_calls);
    assert_eq!(r.turn.messages.len(), 2);
    let answer = &r.turn.messages[1];
    assert_eq!(answer.role, Role::Assistant);
    let exchanges: Vec<_> = answer.tools().collect();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(
        (
            exchanges[0].id.as_str(),
            exchanges[0].output.as_str(),
            exchanges[0].input["city"].as_str()
        ),
        ("call_1", "18 C", Some("Paris"))
    );
    assert_eq!(exchanges[1].output, "-3 C");
    assert_eq!(exchanges[0].status, ToolStatus::Success);
    assert_eq!(exchanges[0].round, 0);
    assert!(
        answer
            .content
            .iter()
            .all(|p| matches!(p, ContentPart::Tool(_)))
    );

    // A call without its result, a result of no call, arguments that are no JSON object.
    let call =
        json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let unanswered = json!({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "user", "content": "y"}]});
    assert_eq!(refused(&unanswered), "messages[1].tool_calls[0]");
    let stray = json!({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "call_9", "content": "r"}]});
    assert_eq!(refused(&stray), "messages[1].tool_call_id");
    let bad_arguments = json!({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"}]});
    assert_eq!(
        refused(&bad_arguments),
        "messages[1].tool_calls[0].function.arguments"
    );
    let unknown_choice = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": {"type": "function", "function": {"name": "g"}}});
    assert_eq!(refused(&unknown_choice), "tool_choice.function.name");
}

#[test]
fn response_formats_are_read() {
    let r = parse(&with(
        ask("x"),
        "response_format",
        json!({"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
            "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}),
    ))
    .unwrap();
    let ResponseFormat::JsonSchema {
        name,
        schema,
        strict,
        ..
    } = r.completion.response_format
    else {
        panic!("a JSON schema")
    };
    assert_eq!((name.as_str(), strict), ("answer", true));
    assert_eq!(schema["properties"]["n"]["type"], "integer");
    assert_eq!(
        parse(&with(
            ask("x"),
            "response_format",
            json!({"type": "json_object"})
        ))
        .unwrap()
        .completion
        .response_format,
        ResponseFormat::JsonObject
    );
    assert_eq!(
        refused(&with(ask("x"), "response_format", json!({"type": "yaml"}))),
        "response_format.type"
    );
}

#[test]
fn metadata_is_sixteen_string_pairs_at_most() {
    let many: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    assert_eq!(
        refused(&with(ask("x"), "metadata", Value::Object(many))),
        "metadata"
    );
    assert_eq!(
        refused(&with(ask("x"), "metadata", json!({"k": 1}))),
        "metadata[\"k\"]"
    );
}

#[test]
fn a_request_without_model_or_messages_names_them() {
    assert_eq!(
        refused(&json!({"messages": [{"role": "user", "content": "x"}]})),
        "model"
    );
    assert_eq!(refused(&json!({"model": "m"})), "messages");
    assert_eq!(
        refused(&json!({"model": "m", "messages": [{"role": "system", "content": "x"}]})),
        "messages"
    );
    assert_eq!(
        refused(&json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]})),
        "messages[0].role"
    );
}

fn answer(content: &str, tool_calls: Vec<ToolCall>, reasoning: Option<&str>) -> Answer {
    Answer {
        id: "chatcmpl-abc".into(),
        created: 1_700_000_000,
        created_at: String::new(),
        model: "m".into(),
        content: content.into(),
        finish_reason: if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        usage: TokenUsage {
            input_tokens: 10,
            output_tokens: 20,
            total_tokens: 45,
            cache_read_input_tokens: 15,
            cache_write_input_tokens: 0,
        },
        prompt_thoughts: Vec::new(),
        result_thoughts: Vec::new(),
        followup_questions: None,
        session_state: None,
        data_points: None,
        citations: Vec::new(),
        cost_usd: None,
        spent: Default::default(),
        reasoning: reasoning.map(str::to_string),
        reasoning_redacted: false,
        tools: Vec::new(),
        tool_calls,
        reasoning_blocks: Vec::new(),
        stop_sequence: false,
    }
}

#[test]
fn a_completion_is_shaped_as_openai_sends_it() {
    let text = serde_json::to_value(ChatCompletion::from_answer(
        &answer("Hi", Vec::new(), Some("thinking hard")),
        "us.m",
    ))
    .unwrap();
    assert_eq!(text["object"], "chat.completion");
    assert_eq!(text["id"], "chatcmpl-abc");
    assert_eq!(text["model"], "us.m");
    assert_eq!(text["created"], 1_700_000_000);
    let choice = &text["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hi");
    assert_eq!(choice["message"]["reasoning_content"], "thinking hard");
    assert!(choice["message"].get("tool_calls").is_none());
    // Prompt tokens are all of the prompt, cached ones included; reasoning estimated at a token per 3 bytes.
    assert_eq!(
        text["usage"],
        json!({"prompt_tokens": 25, "completion_tokens": 20, "total_tokens": 45,
            "prompt_tokens_details": {"cached_tokens": 15},
            "completion_tokens_details": {"reasoning_tokens": 5}})
    );

    let calls = serde_json::to_value(ChatCompletion::from_answer(
        &answer(
            "",
            vec![ToolCall {
                id: "tooluse_1".into(),
                name: "get_weather".into(),
                input: json!({"city": "Paris"}),
            }],
            None,
        ),
        "m",
    ))
    .unwrap();
    let message = &calls["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert!(message.get("reasoning_content").is_none());
    assert_eq!(calls["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "tooluse_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}])
    );
}

#[test]
fn chunks_are_server_sent_events_as_openai_streams_them() {
    let header = ChunkHeader {
        id: "chatcmpl-abc".into(),
        created: 1,
        model: "m".into(),
        include_usage: true,
    };
    let event = |chunk: &ChatCompletionChunk| {
        let bytes = sse_data(chunk);
        let text = String::from_utf8(bytes).unwrap();
        let json = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .expect("one data event");
        serde_json::from_str::<Value>(json).unwrap()
    };
    let start = event(&ChatCompletionChunk::start(&header));
    assert_eq!(start["object"], "chat.completion.chunk");
    assert_eq!(
        start["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert_eq!(start["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(start["usage"], Value::Null);
    let call = event(&ChatCompletionChunk::tool_call(
        &header,
        1,
        &ToolCall {
            id: "t".into(),
            name: "f".into(),
            input: json!({}),
        },
    ));
    assert_eq!(
        call["choices"][0]["delta"]["tool_calls"],
        json!([{"index": 1, "id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    );
    let end = event(&ChatCompletionChunk::finish(&header, FinishReason::Length));
    assert_eq!(end["choices"][0]["delta"], json!({}));
    assert_eq!(end["choices"][0]["finish_reason"], "length");
    let usage = event(&ChatCompletionChunk::usage(
        &header,
        Usage::of(&TokenUsage::default(), ""),
    ));
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 0);
    // Without include_usage no chunk has a usage field.
    let plain = ChunkHeader {
        include_usage: false,
        ..header
    };
    assert!(
        event(&ChatCompletionChunk::content(&plain, "x".into()))
            .get("usage")
            .is_none()
    );
}

#[test]
fn a_model_names_its_provider_and_prices() {
    let prices = chat_core::ModelProfile::of("anthropic.claude-3-5-haiku-20241022-v1:0").prices;
    let model = serde_json::to_value(Model::new(
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",
        prices.as_ref(),
    ))
    .unwrap();
    assert_eq!(model["object"], "model");
    assert_eq!(model["owned_by"], "anthropic");
    assert!(model["pricing"]["input"].as_f64().unwrap() > 0.0);
    let arn = serde_json::to_value(Model::new(
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc",
        None,
    ))
    .unwrap();
    assert_eq!(arn["owned_by"], "aws");
    assert_eq!(arn["pricing"], Value::Null);
}

/// What clients send as their own bookkeeping is taken: LangChain.js's `name` on a `tool` message (the function the
/// call it answers called; another is refused), Open WebUI's `index` on a call sent back, Roo Code's and the SDK
/// helpers' `strict: true` (kept for the core to honour), Cline's `cache_control`, and every `reasoning_effort`
/// OpenAI defines.
#[test]
fn a_clients_bookkeeping_is_taken() {
    let conversation = |tool_name: &str| {
        json!({"model": "m",
        "tools": [{"type": "function", "function": {"name": "get_weather", "strict": true,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}}}],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief.",
                "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?",
                "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
            {"role": "assistant", "content": "", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": tool_name, "content": "18 C",
                "cache_control": {"type": "ephemeral"}}
        ]})
    };
    let r = parse(&conversation("get_weather")).unwrap();
    assert!(r.completion.tools[0].strict);
    let exchange = r.turn.messages[1].tools().next().unwrap().clone();
    assert_eq!(
        (exchange.name.as_str(), exchange.output.as_str()),
        ("get_weather", "18 C")
    );
    assert_eq!(refused(&conversation("get_time")), "messages[3].name");
    let plain = parse(
        &json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}]}),
    )
    .unwrap();
    assert!(!plain.completion.tools[0].strict);
    let other_cache = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]}]});
    assert_eq!(
        refused(&other_cache),
        "messages[0].content[0].cache_control.type"
    );

    for (effort, thinking) in [
        ("none", Some(Thinking::Off)),
        ("minimal", Some(Thinking::Effort(ReasoningEffort::Low))),
        ("low", Some(Thinking::Effort(ReasoningEffort::Low))),
        ("medium", Some(Thinking::Effort(ReasoningEffort::Medium))),
        ("high", Some(Thinking::Effort(ReasoningEffort::High))),
        ("xhigh", Some(Thinking::Effort(ReasoningEffort::High))),
    ] {
        let r = parse(&with(ask("x"), "reasoning_effort", json!(effort))).unwrap();
        assert_eq!(r.completion.thinking, thinking, "{effort}");
    }
}

/// Open WebUI copies each advanced parameter a user sets to the top level: `top_k` is honoured (for the models that
/// take it), Ollama's are taken and named back, and any other unknown field is still refused naming it.
#[test]
fn vendor_parameters_are_taken_and_named_and_others_refused() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "top_k": 40, "num_ctx": 8192, "keep_alive": "5m", "think": true, "repeat_penalty": 1.1,
        "mirostat": 0, "num_predict": 128});
    let r = parse(&body).unwrap();
    assert_eq!(r.completion.sampling.top_k, Some(40));
    assert_eq!(
        r.ignored,
        [
            "num_ctx",
            "num_predict",
            "repeat_penalty",
            "mirostat",
            "keep_alive",
            "think"
        ]
    );
    assert_eq!(refused(&with(body.clone(), "num_cpx", json!(1))), "num_cpx");
    assert_eq!(refused(&with(ask("x"), "top_k", json!(0))), "top_k");
    // The operator's own.
    let own = chat_protocol::openai::parse_completion_request_with(
        with(ask("x"), "num_cpx", json!(1)).to_string().as_bytes(),
        &RequestLimits::default(),
        &["num_cpx".to_string()],
    )
    .unwrap();
    assert_eq!(own.ignored, ["num_cpx"]);
}
