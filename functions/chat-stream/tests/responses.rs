//! OpenAI's Responses API on the streaming function, through the real SDK client, the local Bedrock server and
//! moto: a response whole and streamed (the exact typed events in order, their sequence numbers increasing), a
//! function tool's call out and its output back, namespace and custom tools, OpenAI's hosted tools left out and
//! named in a header, reasoning as a summary, each refusal in OpenAI's error shape, and the body Codex sends.

use std::sync::Arc;

use chat_core::{ChatMode, ResponseStore};
use chat_stream::App;
use chat_testing::harness::{self, Backend, ECHO_MODEL, Reply, Streamed};
use serde_json::{Value, json};

mod support;
use support::{Harness, openai_error_of as error_of, with};

/// A Claude model id as an inference profile: the backend takes its features (budget reasoning) from it.
const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

async fn harness_with(env: &[(&str, &str)]) -> Harness {
    let backend = Backend::start(env).await;
    let ledger = backend.ledger();
    backend
        .wired(|m, s, a, c| {
            let kept: Arc<dyn ResponseStore> = Arc::new(s.clone());
            App::new(m, s, a, c)
                .with_usage(Some(ledger))
                .with_responses(Some(kept))
        })
        .await
}

async fn harness() -> Harness {
    harness_with(&[]).await
}

fn ask(text: &str) -> Value {
    json!({"model": ECHO_MODEL, "input": text, "store": false})
}

async fn post(h: &Harness, body: &Value) -> Reply {
    support::post_to(h, "/v1/responses", body).await
}

async fn stream(h: &Harness, body: &Value) -> Streamed {
    let body = with(body.clone(), "stream", json!(true));
    support::stream_to(h, "/v1/responses", &body).await
}

/// The typed events of a stream: each `event: <type>\ndata: {json}\n\n`, its data's `type` the event's name.
fn events_of(s: &Streamed) -> Vec<Value> {
    let text = s.text();
    assert!(text.ends_with("\n\n"), "{text}");
    text.split_terminator("\n\n")
        .map(|event| {
            let (name, data) = event
                .strip_prefix("event: ")
                .and_then(|e| e.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not a typed event: {event:?}"));
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name, "{event}");
            data
        })
        .collect()
}

/// A body offering the weather tool, with `input`, kept (`store` left at its default).
fn kept_with_weather(input: &str) -> Value {
    json!({"model": ECHO_MODEL, "tools": weather_tool(), "input": input})
}

/// A body offering `tools`, with `input`, stored nowhere.
fn with_tools(tools: &Value, input: Value) -> Value {
    json!({"model": ECHO_MODEL, "store": false, "tools": tools, "input": input})
}

/// The input that goes on from `question` after the `output` items, with the client's `results` of its calls.
fn continued(question: &str, output: &[Value], results: impl IntoIterator<Item = Value>) -> Value {
    let mut input = vec![json!({"role": "user", "content": question})];
    input.extend(output.iter().cloned());
    input.extend(results);
    Value::Array(input)
}

/// The names of the tools the last request to the model offered it.
fn offered_tools(h: &Harness) -> Vec<String> {
    let sent = h.bedrock.requests().last().unwrap().body.clone();
    let tools = sent["toolConfig"]["tools"].as_array().unwrap();
    let names = tools
        .iter()
        .map(|t| t["toolSpec"]["name"].as_str().unwrap());
    names.map(str::to_string).collect()
}

/// Where the first event of `kind` stands among `kinds`, which holds one.
fn first_of(kinds: &[&str], kind: &str) -> usize {
    kinds.iter().position(|k| *k == kind).unwrap()
}

/// Where the last event of `kind` stands among `kinds`, which holds one.
fn last_of(kinds: &[&str], kind: &str) -> usize {
    kinds.iter().rposition(|k| *k == kind).unwrap()
}

/// The text of a response object's first output item, its message.
fn output_text(response: &Value) -> String {
    response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_response_answered_whole_is_one_response_object_and_stores_nothing() {
    let h = harness().await;
    let reply = post(
        &h,
        &json!({"model": ECHO_MODEL, "instructions": "Be brief.", "input": "Hello there",
            "store": false, "user": "user-7", "metadata": {"ticket": "T-1"}, "max_output_tokens": 500,
            "temperature": 0.5, "safety_identifier": "s-1", "prompt_cache_key": "k-1",
            "truncation": "auto", "service_tier": "auto"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.content_type(), "application/json");
    assert!(reply.headers.get("x-ignored-tools").is_none());
    let body = reply.json();
    assert_eq!(body["object"], "response");
    assert!(body["id"].as_str().unwrap().starts_with("resp_"), "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], ECHO_MODEL);
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["metadata"], json!({"ticket": "T-1"}));
    assert_eq!(body["max_output_tokens"], 500);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["store"], false);
    assert_eq!(body["truncation"], "auto");
    assert_eq!(body["incomplete_details"], Value::Null);
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{body}");
    let message = &output[0];
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["status"], "completed");
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(message["content"][0]["type"], "output_text");
    assert_eq!(message["content"][0]["text"], "Echo: Hello there");
    assert_eq!(message["content"][0]["annotations"], json!([]));
    let usage = &body["usage"];
    let (input, output) = (
        usage["input_tokens"].as_u64().unwrap(),
        usage["output_tokens"].as_u64().unwrap(),
    );
    assert!(input > 0 && output > 0, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64(), Some(input + output));
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    // The instructions are the system prompt, and the model is held to the answer's length and sampling.
    let sent = h.bedrock.requests().last().unwrap().body.clone();
    assert_eq!(sent["system"][0]["text"], "Be brief.", "{sent}");
    assert_eq!(sent["inferenceConfig"]["maxTokens"], 500, "{sent}");
    assert_eq!(sent["inferenceConfig"]["temperature"], 0.5, "{sent}");
    assert_eq!(harness::chat_count(&h.store, ChatMode::Standard).await, 0);
}

#[tokio::test]
async fn a_streamed_response_is_openais_typed_events_in_order_with_increasing_sequence_numbers() {
    let h = harness().await;
    let s = stream(&h, &ask("[[deltas:5]] [[delay-ms:100]]")).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.content_type, "text/event-stream");
    let events = events_of(&s);
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let numbers: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0]["response"]["status"], "in_progress");
    assert_eq!(events[0]["response"]["output"], json!([]));
    let id = events[0]["response"]["id"].as_str().unwrap();
    assert!(id.starts_with("resp_"));
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "w1 w2 w3 w4 w5");
    let item_id = events[2]["item"]["id"].clone();
    assert!(
        events[3..12]
            .iter()
            .all(|e| e["item_id"] == item_id || e["item"]["id"] == item_id),
        "every event of the message names its item"
    );
    assert_eq!(events[9]["text"], "w1 w2 w3 w4 w5");
    let completed = &events[12]["response"];
    assert_eq!(completed["id"], id);
    assert_eq!(completed["status"], "completed");
    assert_eq!(
        completed["output"][0]["content"][0]["text"],
        "w1 w2 w3 w4 w5"
    );
    assert!(completed["usage"]["output_tokens"].as_u64().unwrap() > 0);
    // Each delta was written as the model produced it: the frames of the deltas came apart in time.
    let delta_frames: Vec<_> = s
        .frames
        .iter()
        .filter(|(_, f)| f.contains("response.output_text.delta"))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(delta_frames.len(), 5, "one frame per delta");
    let spread = delta_frames[4].duration_since(delta_frames[0]).unwrap();
    assert!(spread.as_millis() >= 300, "{spread:?}");
}

fn weather_tool() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "The weather in a city", "strict": true,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
            "additionalProperties": false}}])
}

#[tokio::test]
async fn a_function_call_goes_out_to_the_client_and_its_output_comes_back() {
    let h = harness().await;
    let question = r#"Weather? [[tool:get_weather {"city":"Paris"}]]"#;
    let first = post(&h, &with_tools(&weather_tool(), json!(question))).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let body = first.json();
    assert_eq!(body["status"], "completed");
    let output = body["output"].as_array().unwrap();
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("a function call: {body}"));
    assert_eq!(call["name"], "get_weather");
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert!(call.get("namespace").is_none());
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    let sent = h.bedrock.requests().last().unwrap().body.clone();
    assert_eq!(
        sent["toolConfig"]["tools"][0]["toolSpec"]["name"],
        "get_weather"
    );

    // The client ran it and sends the items back with the output: the model continues from it.
    let result = json!({"type": "function_call_output", "call_id": call["call_id"], "output": "18 C and sunny"});
    let input = continued(question, output, [result]);
    let second = post(&h, &with_tools(&weather_tool(), input)).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let body = second.json();
    let text = output_text(&body);
    assert!(
        text.contains("get_weather returned 18 C and sunny"),
        "{text}"
    );

    // An output of parts (Codex's view_image gives an image back): its text, and the image said to be there.
    let result = json!({"type": "function_call_output", "call_id": call["call_id"], "output": [
        {"type": "input_text", "text": "18 C"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]});
    let input = continued(question, output, [result]);
    let parts = post(&h, &with_tools(&weather_tool(), input)).await;
    assert_eq!(parts.status, 200, "{}", parts.body);
    let sent = h.bedrock.requests().last().unwrap().body.to_string();
    assert!(sent.contains("18 C"), "{sent}");
    assert!(sent.contains("the tool returned an image here"), "{sent}");

    // An output that answers no call is a 400 naming it.
    let stray = post(
        &h,
        &json!({"model": ECHO_MODEL, "store": false, "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "call_x", "output": "?"}]}),
    )
    .await;
    assert_eq!(
        error_of(&stray),
        (400, Value::Null, json!("input[1].call_id"))
    );

    // Streamed: the call as its own item, its arguments as a delta and done.
    let s = stream(&h, &with_tools(&weather_tool(), json!(question))).await;
    let events = events_of(&s);
    let kinds = types(&events);
    let added = last_of(&kinds, "response.output_item.added");
    assert_eq!(
        &kinds[added..],
        [
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(events[added]["item"]["type"], "function_call");
    assert_eq!(events[added]["item"]["arguments"], "");
    let done = &events[added + 3]["item"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["name"], "get_weather");
    assert_eq!(events[added + 2]["arguments"], done["arguments"]);
    // The text before the call is its own message item, closed before the call's.
    assert_eq!(events[added - 1]["type"], "response.output_item.done");
    assert_eq!(events[added - 1]["item"]["type"], "message");
}

#[tokio::test]
async fn hosted_tools_are_left_out_and_named_and_namespace_and_custom_tools_are_answered_under_their_names()
 {
    let h = harness().await;
    let tools = json!([
        {"type": "web_search", "external_web_access": false},
        {"type": "namespace", "name": "multi_agent_v1", "description": "Agents", "tools": [
            {"type": "function", "name": "spawn_agent", "strict": false, "parameters":
                {"type": "object", "properties": {"task": {"type": "string"}}}}]},
        {"type": "custom", "name": "apply_patch", "description": "Applies a patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "image_generation"}
    ]);
    let question = r#"Go [[tool:multi_agent_v1__spawn_agent {"task":"x"}]] [[tool:apply_patch {"input":"*** Begin Patch"}]]"#;
    let reply = post(&h, &with_tools(&tools, json!(question))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.headers["x-ignored-tools"],
        "web_search, image_generation"
    );
    let offered = offered_tools(&h);
    assert_eq!(offered, ["multi_agent_v1__spawn_agent", "apply_patch"]);
    let body = reply.json();
    let output = body["output"].as_array().unwrap();
    let spawn = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    assert_eq!(spawn["name"], "spawn_agent");
    assert_eq!(spawn["namespace"], "multi_agent_v1");
    let patch = output
        .iter()
        .find(|i| i["type"] == "custom_tool_call")
        .unwrap_or_else(|| panic!("a custom tool call: {body}"));
    assert_eq!(patch["name"], "apply_patch");
    assert_eq!(patch["input"], "*** Begin Patch");

    // Both come back as the client gives them, answered.
    let results = [
        json!({"type": "function_call_output", "call_id": spawn["call_id"], "output": "spawned"}),
        json!({"type": "custom_tool_call_output", "call_id": patch["call_id"], "output": "patched"}),
    ];
    let second = post(
        &h,
        &with_tools(&tools, continued(question, output, results)),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let text = output_text(&second.json());
    assert!(
        text.contains("multi_agent_v1__spawn_agent returned spawned"),
        "{text}"
    );
    assert!(text.contains("apply_patch returned patched"), "{text}");

    // A tool choice that forces a hosted tool is a 400 naming it.
    let forced = post(
        &h,
        &json!({"model": ECHO_MODEL, "store": false, "tools": tools, "input": "x",
            "tool_choice": {"type": "web_search"}}),
    )
    .await;
    assert_eq!(error_of(&forced), (400, Value::Null, json!("tool_choice")));
    assert!(forced.body.contains("web_search"), "{}", forced.body);
}

#[tokio::test]
async fn each_refusal_is_openais_error_naming_the_field() {
    let h = harness().await;
    let cases = [
        (with(ask("x"), "temprature", json!(0.5)), "temprature"),
        (with(ask("x"), "background", json!(true)), "background"),
        (
            with(ask("x"), "service_tier", json!("flex")),
            "service_tier",
        ),
        (
            with(ask("x"), "include", json!(["file_search_call.results"])),
            "include[0]",
        ),
        (
            with(ask("x"), "reasoning", json!({"effort": "extreme"})),
            "reasoning.effort",
        ),
        (
            with(ask("x"), "text", json!({"format": {"type": "xml"}})),
            "text.format.type",
        ),
        (
            with(
                ask("x"),
                "input",
                json!([{"role": "user", "content": [
                {"type": "input_image", "image_url": "https://example.com/cat.png"}]}]),
            ),
            "input[0].content[0].image_url",
        ),
        (
            with(
                ask("x"),
                "input",
                json!([{"type": "message", "role": "user", "content": "hi", "colour": "red"}]),
            ),
            "input[0].colour",
        ),
        (
            with(
                ask("x"),
                "tools",
                json!([{"type": "function", "name": "f", "parameters": {}, "extra": 1}]),
            ),
            "tools[0].extra",
        ),
    ];
    support::assert_each_refused(&h, "/v1/responses", cases.to_vec()).await;
    let gpt = with(ask("x"), "model", json!("gpt-5"));
    support::refused_model(&h, "/v1/responses", &gpt).await;
    assert!(
        h.bedrock.requests().is_empty(),
        "nothing refused reached the model"
    );
    // Another method is OpenAI's 405.
    let wrong = support::call(&h, "PUT", "/v1/responses").await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.json()["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn a_refusal_of_the_completions_checks_names_the_responses_own_field() {
    // A 400 naming `param`.
    let refused_at = |refused: &Reply, param: &str| {
        assert_eq!(
            error_of(refused),
            (400, Value::Null, json!(param)),
            "{}",
            refused.body
        );
    };
    // Past the operator's cap on reasoning: `reasoning.effort`, not Chat Completions' `reasoning_effort`.
    let capped = harness_with(&[("MODEL_ID", CLAUDE), ("MAX_REASONING_EFFORT", "low")]).await;
    let high = with(
        json!({"model": CLAUDE, "input": "x", "store": false}),
        "reasoning",
        json!({"effort": "high"}),
    );
    let refused = post(&capped, &high).await;
    refused_at(&refused, "reasoning.effort");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("reasoning.effort:") && message.contains("at most"),
        "{message}"
    );
    // A model that cannot reason, asked to: the same field.
    let h = harness().await;
    let asked = with(ask("x"), "reasoning", json!({"effort": "low"}));
    let refused = post(&h, &asked).await;
    refused_at(&refused, "reasoning.effort");
    // A JSON format for a model that cannot be held to one: `text.format`, not `response_format`.
    let schema = json!({"format": {"type": "json_schema", "name": "answer", "strict": true,
        "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
            "additionalProperties": false}}});
    let refused = post(&h, &with(ask("x"), "text", schema)).await;
    refused_at(&refused, "text.format");
    assert!(
        capped.bedrock.requests().is_empty() && h.bedrock.requests().is_empty(),
        "nothing refused reached the model"
    );
}

#[tokio::test]
async fn a_fault_after_the_first_event_is_response_failed_and_a_cut_answer_is_incomplete() {
    let h = harness().await;
    let s = stream(&h, &ask("[[deltas:6]] [[stream-error-after:3]]")).await;
    assert_eq!(s.status, 200);
    let events = events_of(&s);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed", "{last}");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"]["code"], "server_error");
    assert!(last["response"]["error"]["message"].is_string());
    assert!(!types(&events).contains(&"response.completed"));

    // Cut at max_output_tokens: incomplete, and why.
    let whole = post(
        &h,
        &with(ask("[[deltas:20]]"), "max_output_tokens", json!(3)),
    )
    .await;
    assert_eq!(whole.status, 200, "{}", whole.body);
    let body = whole.json();
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["incomplete_details"]["reason"], "max_output_tokens");
    let s = stream(
        &h,
        &with(ask("[[deltas:20]]"), "max_output_tokens", json!(3)),
    )
    .await;
    let events = events_of(&s);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.incomplete", "{last}");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
}

#[tokio::test]
async fn reasoning_asked_for_with_a_summary_is_a_reasoning_item_before_the_message() {
    let h = harness_with(&[("MODEL_ID", CLAUDE)]).await;
    let body = json!({"model": CLAUDE, "store": false, "input": "Why is the sky blue?",
        "reasoning": {"effort": "low", "summary": "auto"}});
    let s = stream(&h, &body).await;
    assert_eq!(s.status, 200, "{}", s.text());
    let events = events_of(&s);
    let kinds = types(&events);
    let first_text = first_of(&kinds, "response.output_text.delta");
    let summary: String = events
        .iter()
        .filter(|e| e["type"] == "response.reasoning_summary_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(summary.starts_with("Reasoning ("), "{summary}");
    assert!(summary.contains("Why is the sky blue?"), "{summary}");
    assert!(
        kinds
            .iter()
            .rposition(|k| *k == "response.reasoning_summary_text.delta")
            .unwrap()
            < first_text
    );
    assert_eq!(kinds[2], "response.output_item.added");
    assert_eq!(events[2]["item"]["type"], "reasoning");
    let completed = &events.last().unwrap()["response"];
    assert_eq!(completed["output"][0]["type"], "reasoning");
    assert_eq!(completed["output"][0]["summary"][0]["text"], summary);
    assert_eq!(completed["output"][1]["type"], "message");
    assert!(
        completed["usage"]["output_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        completed["reasoning"],
        json!({"effort": "low", "summary": "auto"})
    );
    // Whole, the same items.
    let whole = post(&h, &body).await;
    let body = whole.json();
    assert_eq!(body["output"][0]["type"], "reasoning", "{body}");
    assert_eq!(body["output"][0]["summary"][0]["text"], summary);
    // Without a summary asked for, the reasoning is not shown.
    let quiet = post(
        &h,
        &json!({"model": CLAUDE, "store": false, "input": "Why?", "reasoning": {"effort": "low"}}),
    )
    .await;
    let body = quiet.json();
    assert_eq!(body["output"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["output"][0]["type"], "message");
}

async fn get(h: &Harness, path: &str) -> Reply {
    Reply::collected(h.app.handle(harness::json_request("GET", path, None)).await).await
}

async fn delete(h: &Harness, path: &str) -> Reply {
    Reply::collected(
        h.app
            .handle(harness::json_request("DELETE", path, None))
            .await,
    )
    .await
}

#[tokio::test]
async fn a_kept_response_is_read_back_continued_and_deleted_by_its_owner_only() {
    let backend = Backend::start(&[]).await;
    // Another owner, on the same table.
    let bob = App::new(
        backend.model().await,
        backend.store.clone(),
        harness::auth_from(&[("AUTH_MODE", "none"), ("LOCAL_USER", "bob")]),
        backend.config.clone(),
    )
    .with_responses(Some(Arc::new(backend.store.clone())));
    let h = backend
        .wired(|m, s, a, c| {
            let kept: Arc<dyn ResponseStore> = Arc::new(s.clone());
            App::new(m, s, a, c).with_responses(Some(kept))
        })
        .await;
    // store left out: OpenAI's default, kept.
    let first = post(
        &h,
        &json!({"model": ECHO_MODEL, "input": "My name is Ada."}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let body = first.json();
    assert_eq!(body["store"], true);
    let id = body["id"].as_str().unwrap().to_string();

    let read = get(&h, &format!("/v1/responses/{id}")).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.json(), body, "the response as it was answered");
    let items = get(&h, &format!("/v1/responses/{id}/input_items")).await;
    assert_eq!(items.status, 200, "{}", items.body);
    let items = items.json();
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"].as_array().unwrap().len(), 1, "{items}");
    assert_eq!(items["data"][0]["content"][0]["text"], "My name is Ada.");
    assert_eq!(items["has_more"], false);

    // Continued: the model reads the kept conversation, then the new input.
    let second = post(
        &h,
        &json!({"model": ECHO_MODEL, "input": "What is my name?", "previous_response_id": id}),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["previous_response_id"], id.as_str());
    let sent = h.bedrock.requests().last().unwrap().body.clone();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{sent}");
    assert_eq!(messages[0]["content"][0]["text"], "My name is Ada.");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["text"], "Echo: My name is Ada.");

    // Another owner: as if it had never been kept.
    let as_bob = |method: &str, path: String, body: Option<Value>| {
        bob.handle(harness::json_request(method, &path, body.as_ref()))
    };
    let theirs = Reply::collected(as_bob("GET", format!("/v1/responses/{id}"), None).await).await;
    assert_eq!(error_of(&theirs), (404, Value::Null, Value::Null));
    let continued = Reply::collected(
        as_bob(
            "POST",
            "/v1/responses".into(),
            Some(json!({"model": ECHO_MODEL, "input": "x", "previous_response_id": id})),
        )
        .await,
    )
    .await;
    assert_eq!(
        error_of(&continued),
        (404, Value::Null, json!("previous_response_id"))
    );
    let deleted =
        Reply::collected(as_bob("DELETE", format!("/v1/responses/{id}"), None).await).await;
    assert_eq!(deleted.status, 404);

    // An id that cannot be a response's is as absent (not a fault of the store's key).
    let empty = post(
        &h,
        &json!({"model": ECHO_MODEL, "input": "x", "previous_response_id": ""}),
    )
    .await;
    assert_eq!(
        error_of(&empty),
        (404, Value::Null, json!("previous_response_id"))
    );
    assert_eq!(get(&h, "/v1/responses/%20").await.status, 404);

    // Deleted by its owner: gone.
    let deleted = delete(&h, &format!("/v1/responses/{id}")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(deleted.json()["deleted"], true);
    assert_eq!(get(&h, &format!("/v1/responses/{id}")).await.status, 404);
    assert_eq!(delete(&h, &format!("/v1/responses/{id}")).await.status, 404);

    // store: false keeps nothing.
    let unkept = post(&h, &ask("Forget me")).await.json();
    assert_eq!(unkept["store"], false);
    let read = get(
        &h,
        &format!("/v1/responses/{}", unkept["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(read.status, 404);
}

#[tokio::test]
async fn a_streamed_kept_call_is_continued_with_its_output_alone() {
    let h = harness().await;
    let question = r#"Weather? [[tool:get_weather {"city":"Paris"}]]"#;
    let s = stream(&h, &kept_with_weather(question)).await;
    let events = events_of(&s);
    let completed = &events.last().unwrap()["response"];
    assert_eq!(completed["store"], true);
    let id = completed["id"].as_str().unwrap();
    let call = completed["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap()
        .clone();
    // What was kept is what the stream's last event held.
    assert_eq!(
        get(&h, &format!("/v1/responses/{id}")).await.json(),
        *completed
    );

    let next = stream(
        &h,
        &json!({"model": ECHO_MODEL, "tools": weather_tool(), "previous_response_id": id,
            "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "18 C and sunny"}]}),
    )
    .await;
    let events = events_of(&next);
    let done = events.last().unwrap();
    assert_eq!(done["type"], "response.completed", "{done}");
    let text = output_text(&done["response"]);
    assert!(
        text.contains("get_weather returned 18 C and sunny"),
        "{text}"
    );
    // An output that answers nothing kept is named by its place in this request.
    let stray = post(
        &h,
        &json!({"model": ECHO_MODEL, "previous_response_id": id, "input": [
            {"type": "function_call_output", "call_id": call["call_id"], "output": "x"},
            {"type": "function_call_output", "call_id": "call_nothing", "output": "y"}]}),
    )
    .await;
    assert_eq!(
        error_of(&stray),
        (400, Value::Null, json!("input[1].call_id"))
    );
}

#[tokio::test]
async fn a_response_too_large_to_keep_is_answered_all_the_same() {
    let h = harness().await;
    // Over DynamoDB's 400 KB item: six messages of 70 000 characters.
    let long = "word ".repeat(14_000);
    let input: Vec<Value> = (0..6)
        .flat_map(|i| {
            [
                json!({"role": "user", "content": format!("{i} {long}")}),
                json!({"role": "assistant", "content": "ok"}),
            ]
        })
        .chain([json!({"role": "user", "content": "And now?"})])
        .collect();
    let reply = post(&h, &json!({"model": ECHO_MODEL, "input": input})).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        &reply.body[..reply.body.len().min(500)]
    );
    let body = reply.json();
    assert_eq!(body["status"], "completed");
    let id = body["id"].as_str().unwrap();
    assert_eq!(get(&h, &format!("/v1/responses/{id}")).await.status, 404);
}

/// The request Codex CLI 0.169.0 (`codex exec`, a custom provider with `wire_api = "responses"`) sent as a capture
/// server recorded it, its long texts shortened, and its headers.
const CODEX_REQUEST: &str = include_str!("fixtures/codex-0.169.0-responses-request.json");
const CODEX_HEADERS: &str = include_str!("fixtures/codex-0.169.0-responses-headers.json");

#[tokio::test]
async fn the_request_codex_sent_as_recorded_is_answered() {
    let h = harness().await;
    let mut body: Value = serde_json::from_str(CODEX_REQUEST).unwrap();
    body["model"] = json!(ECHO_MODEL);
    let mut request = harness::json_request("POST", "/v1/responses", Some(&body));
    let headers: serde_json::Map<String, Value> = serde_json::from_str(CODEX_HEADERS).unwrap();
    for (name, value) in headers {
        let value = value.as_str().unwrap().parse().unwrap();
        request.headers_mut().insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value,
        );
    }
    request
        .headers_mut()
        .insert("authorization", "Bearer codex".parse().unwrap());
    let s = Streamed::read(h.app.handle(request).await).await;
    assert_eq!(s.status, 200, "{}", s.text());
    let events = events_of(&s);
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed", "{completed}");
    let text = output_text(&completed["response"]);
    assert!(text.ends_with("Say hello"), "{text}");
    // Every function tool reached the model, the namespace's by qualified name, and not the hosted web_search.
    let offered = offered_tools(&h);
    assert!(offered.contains(&"exec_command".to_string()), "{offered:?}");
    assert!(
        offered.contains(&"multi_agent_v1__spawn_agent".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t.contains("web_search")),
        "{offered:?}"
    );
}

#[tokio::test]
async fn a_kept_responses_items_are_taken_back_by_reference() {
    let h = harness().await;
    let question = r#"Weather? [[tool:get_weather {"city":"Paris"}]]"#;
    let first = post(&h, &kept_with_weather(question)).await.json();
    let output = first["output"].as_array().unwrap();
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    // As the AI SDK continues a kept response: its items by reference, then the call's output.
    let mut input = vec![json!({"role": "user", "content": question})];
    input.extend(
        output
            .iter()
            .map(|item| json!({"type": "item_reference", "id": item["id"]})),
    );
    input.push(
        json!({"type": "function_call_output", "call_id": call["call_id"], "output": "18 C"}),
    );
    let second = post(
        &h,
        &json!({"model": ECHO_MODEL, "tools": weather_tool(), "input": input}),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let text = output_text(&second.json());
    assert!(text.contains("get_weather returned 18 C"), "{text}");
    // A reference to nothing kept is a 400 naming it.
    let stray = post(
        &h,
        &json!({"model": ECHO_MODEL, "input": [{"role": "user", "content": "hi"},
            {"type": "item_reference", "id": "msg_0123456789abcdef0123456789abcdef000"}]}),
    )
    .await;
    assert_eq!(error_of(&stray), (400, Value::Null, json!("input[1].id")));
}
