//! OpenAI's Chat Completions API as real clients call it (issue 48), on the streaming function through the real SDK
//! client, the local Bedrock server and moto: each client's own bookkeeping taken, sampling as each model takes
//! it, a model's refusal the client's 400, answers as long as the model allows, and request bodies as the clients
//! send them answered 200.

use chat_stream::App;
use chat_testing::harness::{self, Backend, ECHO_MODEL, Reply, Streamed};
use serde_json::{Value, json};

mod support;
use support::{Harness, with};

/// Claude Sonnet 4.5 as a cross-Region inference profile: strict tool use, reasoning within a budget, `top_k`,
/// and (as Bedrock has it) `temperature` or `top_p`, not both.
const SONNET_4_5: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
/// Amazon Nova Lite: no strict tool use, no `top_k`.
const NOVA_LITE: &str = "us.amazon.nova-lite-v1:0";

async fn harness_with(env: &[(&str, &str)]) -> Harness {
    let allowed = format!("{SONNET_4_5},{NOVA_LITE}");
    let env = [&[("ALLOWED_MODELS", allowed.as_str())], env].concat();
    Backend::start(&env).await.wired(App::new).await
}

async fn harness() -> Harness {
    harness_with(&[]).await
}

fn ask(model: &str, text: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

async fn post(h: &Harness, body: &Value) -> Reply {
    support::post_to(h, "/v1/chat/completions", body).await
}

async fn stream(h: &Harness, body: &Value) -> Streamed {
    support::stream_to(h, "/v1/chat/completions", body).await
}

/// The body of the last request that reached the model.
fn sent(h: &Harness) -> Value {
    h.bedrock
        .requests()
        .last()
        .expect("a request reached the model")
        .body
        .clone()
}

/// The text of a streamed answer: its chunks' content deltas, joined.
fn streamed_text(s: &Streamed) -> String {
    s.text()
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

/// The text of a whole answer.
fn content(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn weather_tool(strict: bool) -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
        "strict": strict,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
            "additionalProperties": false}}})
}

// ---- 1. A client's bookkeeping ----------------------------------------------------------------------------------

#[tokio::test]
async fn a_tool_message_naming_its_function_is_answered_and_another_name_refused() {
    let h = harness().await;
    let conversation = |name: &str| {
        json!({"model": ECHO_MODEL, "tools": [weather_tool(false)], "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": name, "content": "18 C and sunny"}
        ]})
    };
    let answer = content(&post(&h, &conversation("get_weather")).await);
    assert!(
        answer.contains("get_weather returned 18 C and sunny"),
        "{answer}"
    );
    let before = h.bedrock.requests().len();
    let refused = post(&h, &conversation("get_time")).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.json()["error"]["param"], "messages[2].name");
    assert_eq!(h.bedrock.requests().len(), before);
}

#[tokio::test]
async fn strict_tools_are_bedrocks_strict_tool_use_where_the_model_has_it() {
    let h = harness().await;
    let body = |model: &str| {
        json!({"model": model, "tools": [weather_tool(true)],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?",
                "cache_control": {"type": "ephemeral"}}]}]})
    };
    // Claude Sonnet 4.5 keeps its calls to the schema: the flag reaches Bedrock.
    content(&post(&h, &body(SONNET_4_5)).await);
    let spec = &sent(&h)["toolConfig"]["tools"][0]["toolSpec"];
    assert_eq!(spec["strict"], true, "{spec}");
    // Nova Lite has no strict tool use (Bedrock would refuse the flag): the schema is given without it.
    content(&post(&h, &body(NOVA_LITE)).await);
    let spec = &sent(&h)["toolConfig"]["tools"][0]["toolSpec"];
    assert!(spec.get("strict").is_none(), "{spec}");
    assert_eq!(spec["inputSchema"]["json"]["required"], json!(["city"]));
}

#[tokio::test]
async fn every_reasoning_effort_openai_defines_is_the_nearest_budget_and_none_is_no_reasoning() {
    let h = harness().await;
    for (effort, budget) in [
        ("minimal", Some(1024)),
        ("low", Some(1024)),
        ("medium", Some(4096)),
        ("high", Some(16_384)),
        ("xhigh", Some(16_384)),
        ("none", None),
    ] {
        let reply = post(
            &h,
            &with(ask(SONNET_4_5, "Think"), "reasoning_effort", json!(effort)),
        )
        .await;
        content(&reply);
        let fields = sent(&h)["additionalModelRequestFields"].clone();
        assert_eq!(
            fields["thinking"]["budget_tokens"].as_u64(),
            budget,
            "{effort}: {fields}"
        );
    }
}

// ---- 2. A model's refusal is the client's 400 -------------------------------------------------------------------

#[tokio::test]
async fn a_models_refusal_is_a_400_whole_and_streamed_never_a_500() {
    let h = harness().await;
    let reply = post(&h, &ask(ECHO_MODEL, "[[fault:validation]] hi")).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(
        error["message"],
        "The model refused the request: The provided request is not valid"
    );
    let s = stream(
        &h,
        &with(
            ask(ECHO_MODEL, "[[fault:validation]] hi"),
            "stream",
            json!(true),
        ),
    )
    .await;
    assert_eq!(s.status, 400, "{}", s.text());
    assert!(s.text().contains("invalid_request_error"), "{}", s.text());
}

/// The protocol's own route (`/chat/stream`) with Claude Sonnet 4.5 as `MODEL_ID`: `temperature` and `top_p`
/// together reach the model (only the OpenAI route fits them), which refuses them as Bedrock does: a 400 that says
/// why, not a 500.
#[tokio::test]
async fn a_models_refusal_on_the_protocols_route_is_a_400_too() {
    let h = harness_with(&[("MODEL_ID", SONNET_4_5)]).await;
    let body = json!({"messages": [{"role": "user", "content": "hi"}],
        "context": {"overrides": {"temperature": 0.5, "top_p": 0.9}}});
    let s = support::stream_to(&h, "/chat/stream", &body).await;
    assert_eq!(s.status, 400, "{}", s.text());
    assert!(
        s.text().contains("cannot both be specified"),
        "{}",
        s.text()
    );
    let asked = sent(&h);
    assert!(asked["inferenceConfig"]["topP"].is_number(), "{asked}");
}

// ---- 3. Sampling as each model takes it ---------------------------------------------------------------------------

fn ignored(reply: &Reply) -> Option<String> {
    reply
        .headers
        .get("x-ignored-parameters")
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn top_p_beside_temperature_is_left_out_for_a_model_that_takes_one_and_named() {
    let h = harness().await;
    let body = |model: &str| {
        json!({"model": model, "temperature": 0.5, "top_p": 0.75, "top_k": 40,
            "messages": [{"role": "user", "content": "hi"}]})
    };
    // Claude Sonnet 4.5: temperature wins; top_k is Claude's.
    let reply = post(&h, &body(SONNET_4_5)).await;
    assert_eq!(content(&reply), "Echo: hi");
    assert_eq!(ignored(&reply).as_deref(), Some("top_p"));
    let claude = sent(&h);
    assert_eq!(claude["inferenceConfig"]["temperature"], 0.5);
    assert!(claude["inferenceConfig"].get("topP").is_none(), "{claude}");
    assert_eq!(claude["additionalModelRequestFields"]["top_k"], 40);
    // Streamed: the same header on the event stream.
    let s = stream(&h, &with(body(SONNET_4_5), "stream", json!(true))).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.headers["x-ignored-parameters"], "top_p");
    // Nova Lite takes both, and no top_k.
    let reply = post(&h, &body(NOVA_LITE)).await;
    content(&reply);
    assert_eq!(ignored(&reply).as_deref(), Some("top_k"));
    let nova = sent(&h);
    assert_eq!(nova["inferenceConfig"]["topP"], 0.75);
    assert!(nova.get("additionalModelRequestFields").is_none(), "{nova}");
    // Nothing left out: no header.
    let plain = post(&h, &ask(SONNET_4_5, "hi")).await;
    content(&plain);
    assert_eq!(ignored(&plain), None);
}

#[tokio::test]
async fn vendor_parameters_are_taken_and_named_and_any_other_field_refused() {
    let h = harness_with(&[("OPENAI_IGNORED_PARAMETERS", "mmr_lambda, num_cpx")]).await;
    let body = json!({"model": ECHO_MODEL, "messages": [{"role": "user", "content": "hi"}],
        "num_ctx": 8192, "keep_alive": "5m", "think": false, "num_cpx": 2});
    let reply = post(&h, &body).await;
    assert_eq!(content(&reply), "Echo: hi");
    assert_eq!(
        ignored(&reply).as_deref(),
        Some("num_ctx, keep_alive, think, num_cpx")
    );
    let before = h.bedrock.requests().len();
    let refused = post(&h, &with(body, "num_cxt", json!(1))).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"]["param"], "num_cxt");
    assert_eq!(h.bedrock.requests().len(), before);
}

// ---- 4. Answers as long as the model allows ------------------------------------------------------------------

#[tokio::test]
async fn max_tokens_is_honoured_up_to_the_models_limit_and_held_to_it_beyond() {
    let h = harness().await;
    // Continue's Claude 4.x default: 50000.
    let reply = post(
        &h,
        &with(ask(SONNET_4_5, "hi"), "max_tokens", json!(50_000)),
    )
    .await;
    content(&reply);
    assert_eq!(ignored(&reply), None);
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 50_000);
    // Past Sonnet 4.5's 64000: held to it, and named.
    let reply = post(
        &h,
        &with(
            ask(SONNET_4_5, "hi"),
            "max_completion_tokens",
            json!(100_000),
        ),
    )
    .await;
    content(&reply);
    assert_eq!(ignored(&reply).as_deref(), Some("max_tokens=64000"));
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 64_000);
    // Nova Lite's limit is 10000.
    let reply = post(&h, &with(ask(NOVA_LITE, "hi"), "max_tokens", json!(50_000))).await;
    content(&reply);
    assert_eq!(ignored(&reply).as_deref(), Some("max_tokens=10000"));
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 10_000);
}

#[tokio::test]
async fn the_operators_ceiling_clamps_and_models_shows_each_limit() {
    let h = harness_with(&[("MAX_OUTPUT_TOKENS", "4096")]).await;
    let reply = post(
        &h,
        &with(ask(SONNET_4_5, "hi"), "max_tokens", json!(50_000)),
    )
    .await;
    content(&reply);
    assert_eq!(ignored(&reply).as_deref(), Some("max_tokens=4096"));
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 4096);

    let listed = support::call(&h, "GET", "/v1/models").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let body = listed.json();
    let models = body["data"].as_array().unwrap();
    let sonnet = models.iter().find(|m| m["id"] == SONNET_4_5).unwrap();
    assert_eq!(sonnet["max_output_tokens"], 4096);
    assert_eq!(sonnet["context_window"], 200_000);

    let unclamped = harness().await;
    let listed = Reply::collected(
        unclamped
            .app
            .handle(harness::json_request("GET", "/v1/models", None))
            .await,
    )
    .await;
    let body = listed.json();
    let models = body["data"].as_array().unwrap();
    let limit = |id: &str| {
        models.iter().find(|m| m["id"] == id).unwrap()["max_output_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(limit(SONNET_4_5), 64_000);
    assert_eq!(limit(NOVA_LITE), 10_000);
}

// ---- 6. /v1/models: chat models first, each marked -----------------------------------------------------------

#[tokio::test]
async fn models_lists_the_chat_models_first_each_marked_by_what_it_does() {
    let h = harness().await;
    let listed = support::call(&h, "GET", "/v1/models").await;
    let body = listed.json();
    let kinds: Vec<(&str, &str)> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap(), m["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            (ECHO_MODEL, "chat"),
            (SONNET_4_5, "chat"),
            (NOVA_LITE, "chat"),
            ("amazon.titan-embed-text-v2:0", "embeddings")
        ]
    );
    // An embedding model has no answer length.
    assert!(body["data"][3].get("max_output_tokens").is_none(), "{body}");
}

// ---- 7. Request bodies as the clients send them ----------------------------------------------------------------

/// Each body as the client's request builder makes it (the file it comes from named above it), sent whole and
/// streamed as the client sends it: answered 200 with what the client reads.
#[tokio::test]
async fn request_bodies_as_clients_send_them_are_answered() {
    let h = harness().await;
    let weather_call = json!({"id": "call_abc", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}});

    // LangChain.js, @langchain/openai (libs/langchain-openai/src/chat_models.ts, the tool message converted with
    // its `name`): a tool loop's second request, streamed with usage; LibreChat's agents run on it.
    let langchain = json!({"model": SONNET_4_5, "temperature": 1, "top_p": 1, "n": 1,
    "presence_penalty": 0, "frequency_penalty": 0, "stream": true,
    "stream_options": {"include_usage": true}, "tools": [weather_tool(false)],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [weather_call.clone()]},
        {"role": "tool", "content": "18 C and sunny", "tool_call_id": "call_abc", "name": "get_weather"}
    ]});
    let s = stream(&h, &langchain).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert!(
        streamed_text(&s).contains("get_weather returned 18 C and sunny"),
        "{}",
        s.text()
    );
    assert!(s.text().ends_with("data: [DONE]\n\n"));
    // LibreChat's defaults, temperature and top_p together, on Claude 4.5: top_p left out and named.
    assert_eq!(s.headers["x-ignored-parameters"], "top_p");

    // Roo Code's "OpenAI Compatible" provider (src/api/providers/openai.ts; native tools with `strict: true`,
    // prompt caching's `cache_control` on the system prompt and the last user messages).
    let roo = json!({"model": SONNET_4_5, "temperature": 0, "stream": true,
    "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
    "tools": [weather_tool(true)], "tool_choice": "auto",
    "messages": [
        {"role": "system", "content": [{"type": "text", "text": "You are Roo.",
            "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [{"type": "text", "text": "<task>Weather in Paris?</task>",
            "cache_control": {"type": "ephemeral"}}]}
    ]});
    let s = stream(&h, &roo).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(streamed_text(&s), "Echo: <task>Weather in Paris?</task>");
    assert_eq!(
        sent(&h)["toolConfig"]["tools"][0]["toolSpec"]["strict"],
        true
    );

    // Continue (core/llm/llms/OpenAI.ts with its model table's 50000 for Claude 4.x ids).
    let continue_dev = json!({"model": SONNET_4_5, "max_tokens": 50_000, "stream": true,
        "messages": [{"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": "Explain this function."}]});
    let s = stream(&h, &continue_dev).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(streamed_text(&s), "Echo: Explain this function.");
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 50_000);

    // Open WebUI (backend/open_webui/utils/payload.py copies each advanced parameter set to the top level;
    // native tool mode sends its calls back with their `index`).
    let open_webui = json!({"model": SONNET_4_5, "stream": true, "temperature": 0.5, "top_p": 0.75,
    "top_k": 40, "max_tokens": 2048, "num_ctx": 8192, "repeat_penalty": 1.1, "keep_alive": "5m",
    "think": false, "tools": [weather_tool(false)],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"index": 0, "id": "call_abc", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 C and sunny"}
    ]});
    let s = stream(&h, &open_webui).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(
        s.headers["x-ignored-parameters"],
        "num_ctx, repeat_penalty, keep_alive, think, top_p"
    );
    assert_eq!(sent(&h)["additionalModelRequestFields"]["top_k"], 40);

    // Zed's OpenAI-compatible provider (crates/open_ai/src/open_ai.rs; `max_completion_tokens` its configured
    // maximum).
    let zed = json!({"model": SONNET_4_5, "stream": true, "max_completion_tokens": 64_000,
        "temperature": 1.0, "parallel_tool_calls": false, "tools": [weather_tool(false)],
        "messages": [{"role": "system", "content": "You are Zed's agent."},
            {"role": "user", "content": [{"type": "text", "text": "Hello"}]}]});
    let s = stream(&h, &zed).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(streamed_text(&s), "Echo: Hello");
    assert_eq!(sent(&h)["inferenceConfig"]["maxTokens"], 64_000);

    // Cline's "OpenAI Compatible" provider (src/core/api/providers/openai.ts: its system prompt as a `system`
    // message, `temperature` 0 from openAiModelInfoSaneDefaults, `max_tokens` from the model's info, usage asked
    // for, its native tools), a tool call's result sent back as the tool message it converts
    // (src/core/api/transform/openai-format.ts).
    let cline = json!({"model": SONNET_4_5, "temperature": 0, "max_tokens": 8192, "stream": true,
        "stream_options": {"include_usage": true}, "tools": [weather_tool(false)],
        "messages": [{"role": "system", "content": "You are Cline."},
            {"role": "user", "content": [{"type": "text", "text": "<task>Weather?</task>"}]},
            {"role": "assistant", "content": null, "tool_calls": [weather_call]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "18 C"}]});
    let s = stream(&h, &cline).await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(streamed_text(&s), "get_weather returned 18 C");
    assert!(
        s.text().contains("\"prompt_tokens\""),
        "usage asked for: {}",
        s.text()
    );
    assert_eq!(sent(&h)["inferenceConfig"]["temperature"], 0.0);
}
