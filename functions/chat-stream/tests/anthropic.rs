//! Anthropic's Messages API on the streaming function, through the real Bedrock SDK client, the local Bedrock server
//! (which checks a thinking block's signature as Bedrock does) and moto: a message whole and streamed (the exact
//! event sequence), a tool loop with thinking whose signed block goes back unchanged, what Claude Code sends
//! accepted and named, `count_tokens` uncharged, `/v1/models` in Anthropic's shape, and each refusal in Anthropic's
//! error shape, before the stream and after it began.

use chat_core::ChatMode;
use chat_testing::harness::{self, ECHO_MODEL, Reply, Streamed};
use serde_json::{Value, json};

mod support;
use support::Harness;

/// An allowed Claude (a budget thinker) that Anthropic's name `claude-sonnet-4-5…` maps to.
const SONNET: &str = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";

async fn harness_with(env: &[(&str, &str)]) -> Harness {
    let defaults = [("ALLOWED_MODELS", SONNET), ("MAX_OUTPUT_TOKENS", "8192")];
    support::counted(&[&defaults, env].concat()).await
}

async fn harness() -> Harness {
    harness_with(&[]).await
}

fn request(path: &str, body: &Value) -> axum::http::Request<lambda_http::Body> {
    let mut request = harness::json_request("POST", path, Some(body));
    request
        .headers_mut()
        .insert("anthropic-version", "2023-06-01".parse().unwrap());
    request
}

async fn post(h: &Harness, body: &Value) -> Reply {
    Reply::collected(h.app.handle(request("/v1/messages?beta=true", body)).await).await
}

/// A question of at most 100 tokens of the echo model, its answer streamed.
fn streamed_question(text: &str) -> Value {
    json!({"model": ECHO_MODEL, "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": text}]})
}

/// A streamed answer and its response's headers.
async fn stream(h: &Harness, body: &Value) -> (axum::http::HeaderMap, Streamed) {
    let response = h.app.handle(request("/v1/messages?beta=true", body)).await;
    let headers = response.headers().clone();
    (headers, Streamed::read(response).await)
}

/// The events of a stream: each `event: NAME\ndata: {json}\n\n`, as (name, data), the name checked against the
/// data's `type`.
fn events_of(s: &Streamed) -> Vec<(String, Value)> {
    s.frames
        .iter()
        .map(|(_, frame)| frame.as_str())
        .collect::<String>()
        .split_inclusive("\n\n")
        .map(|event| {
            let (name, data) = event
                .strip_prefix("event: ")
                .and_then(|e| e.strip_suffix("\n\n"))
                .and_then(|e| e.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not a named event: {event:?}"));
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name, "{event}");
            (name.to_string(), data)
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

/// The Anthropic error of a reply: status and `error.type`.
fn error_of(reply: &Reply) -> (u16, String) {
    let body = reply.json();
    assert_eq!(body["type"], "error", "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    (
        reply.status.as_u16(),
        body["error"]["type"].as_str().unwrap().to_string(),
    )
}

fn weather() -> Value {
    json!([{"name": "get_weather", "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

#[tokio::test]
async fn a_message_answered_whole_is_one_message_and_stores_nothing() {
    let h = harness().await;
    let reply = post(
        &h,
        &json!({"model": ECHO_MODEL, "max_tokens": 1024,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Hello there"}],
            "metadata": {"user_id": "user-7"}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.content_type(), "application/json");
    let body = reply.json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert!(body["id"].as_str().unwrap().starts_with("msg_"), "{body}");
    assert_eq!(body["model"], ECHO_MODEL);
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Echo: Hello there"}])
    );
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
    let usage = &body["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["cache_read_input_tokens"].is_u64(), "{usage}");
    assert!(usage["cache_creation_input_tokens"].is_u64(), "{usage}");
    // The client's system block is the system prompt the model got.
    let sent = harness::last_model_request(&h.bedrock);
    assert_eq!(sent["system"][0]["text"], "Be brief.", "{sent}");
    assert_eq!(reply.headers["x-chat-model"], ECHO_MODEL);
    assert_eq!(reply.headers["x-chat-accepted-unused"], "cache_control");
    // Stateless: the client keeps the conversation, nothing is stored.
    assert_eq!(harness::chat_count(&h.store, ChatMode::Standard).await, 0);
}

#[tokio::test]
async fn a_streamed_message_is_anthropics_events_in_order() {
    let h = harness().await;
    let (headers, s) = stream(
        &h,
        &json!({"model": ECHO_MODEL, "max_tokens": 100, "stream": true,
            "messages": [{"role": "user", "content": "[[deltas:3]]"}]}),
    )
    .await;
    assert_eq!(s.status, 200);
    assert_eq!(s.content_type, "text/event-stream");
    assert_eq!(headers["x-chat-model"], ECHO_MODEL);
    let events = events_of(&s);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start = &events[0].1["message"];
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert_eq!(
        events[2].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    let text: String = events
        .iter()
        .filter_map(|(_, e)| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "w1 w2 w3");
    let delta = &events[7].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert!(
        delta["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{delta}"
    );
    assert!(
        delta["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{delta}"
    );
}

/// The assistant message a client builds from a stream's blocks, as Anthropic's SDKs accumulate them.
fn accumulated(events: &[(String, Value)]) -> Vec<Value> {
    let mut blocks: Vec<Value> = Vec::new();
    let mut json_input = String::new();
    for (name, e) in events {
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(e["index"].as_u64().unwrap() as usize, blocks.len(), "{e}");
                blocks.push(e["content_block"].clone());
                json_input.clear();
            }
            "content_block_delta" => {
                let block = blocks.last_mut().unwrap();
                let delta = &e["delta"];
                match delta["type"].as_str().unwrap() {
                    "thinking_delta" => {
                        let text = block["thinking"].as_str().unwrap().to_string()
                            + delta["thinking"].as_str().unwrap();
                        block["thinking"] = json!(text);
                    }
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "text_delta" => {
                        let text = block["text"].as_str().unwrap().to_string()
                            + delta["text"].as_str().unwrap();
                        block["text"] = json!(text);
                    }
                    "input_json_delta" => {
                        json_input.push_str(delta["partial_json"].as_str().unwrap());
                        block["input"] = serde_json::from_str(&json_input).unwrap();
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            _ => {}
        }
    }
    blocks
}

#[tokio::test]
async fn a_tool_loop_with_thinking_gives_the_signed_thinking_back_unchanged() {
    let h = harness().await;
    let question = r#"Weather? [[tool:get_weather {"city":"Paris"}]]"#;
    let ask = json!({"model": "claude-sonnet-4-5-20250929", "max_tokens": 200_000, "stream": true,
        "thinking": {"type": "enabled", "budget_tokens": 2048}, "tools": weather(),
        "messages": [{"role": "user", "content": question}]});
    let (headers, s) = stream(&h, &ask).await;
    assert_eq!(s.status, 200);
    // Anthropic's name went to the allowed Bedrock model, and the clamp is said.
    assert_eq!(headers["x-chat-model"], SONNET);
    assert_eq!(headers["x-chat-max-tokens-clamped"], "200000 to 8192");
    assert_eq!(h.bedrock.requests().last().unwrap().model_id, SONNET);
    let events = events_of(&s);
    let blocks = accumulated(&events);
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    assert_eq!(blocks[0]["type"], "thinking");
    assert!(
        blocks[0]["thinking"]
            .as_str()
            .unwrap()
            .starts_with("Reasoning (budget 2048): the question is: Weather?"),
        "{blocks:?}"
    );
    assert!(
        blocks[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("local-signature-"),
        "{blocks:?}"
    );
    assert_eq!(
        blocks[1],
        json!({"type": "text", "text": "Let me call get_weather."})
    );
    assert_eq!(blocks[2]["type"], "tool_use");
    assert_eq!(blocks[2]["name"], "get_weather");
    assert_eq!(blocks[2]["input"], json!({"city": "Paris"}));
    let (_, delta) = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(names(&events).last(), Some(&"message_stop"));
    let call_id = blocks[2]["id"].as_str().unwrap().to_string();

    // The client ran the tool and sends back the whole assistant message: the model takes the signed thinking.
    let continued = |thinking: Vec<Value>| {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048}, "tools": weather(),
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": thinking},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": "18 C and sunny"}]}
            ]}
        ]})
    };
    let reply = post(&h, &continued(blocks.clone())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["stop_reason"], "end_turn");
    let content = body["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking", "{body}");
    assert!(
        content[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("local-signature-")
    );
    let text = content.last().unwrap()["text"].as_str().unwrap();
    assert!(
        text.contains("get_weather returned 18 C and sunny"),
        "{text}"
    );
    // Bedrock got the thinking block byte for byte before the tool use.
    let sent = harness::last_model_request(&h.bedrock);
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0]["reasoningContent"]["reasoningText"],
        json!({"text": blocks[0]["thinking"], "signature": blocks[0]["signature"]}),
        "{sent}"
    );

    // A thinking block changed on the way back reaches the model as the client sent it, and is refused there, as
    // Bedrock refuses it: the request's fault (a 400, which clients do not retry as they would a 500).
    let mut changed = blocks.clone();
    changed[0]["thinking"] = json!("Reasoning, restructured");
    let refused = post(&h, &continued(changed)).await;
    assert_eq!(
        error_of(&refused),
        (400, "invalid_request_error".into()),
        "{}",
        refused.body
    );
    let sent = harness::last_model_request(&h.bedrock);
    assert_eq!(
        sent["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["text"],
        "Reasoning, restructured"
    );
}

#[tokio::test]
async fn what_claude_code_sends_on_every_request_is_answered_and_named() {
    let h = harness().await;
    let mut tools = weather();
    tools
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "Read", "description": "Read a file",
        "input_schema": {"type": "object", "properties": {}}, "defer_loading": true,
        "cache_control": {"type": "ephemeral"}}));
    let mut sent = request(
        "/v1/messages?beta=true",
        &json!({"model": "claude-sonnet-4-5-20250929", "max_tokens": 128_000, "stream": true,
            "thinking": {"type": "adaptive", "display": "omitted"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "output_config": {"effort": "medium"},
            "metadata": {"user_id": "{\"device_id\":\"d\",\"session_id\":\"s\"}"},
            "system": [
                {"type": "text", "text": "You are Claude Code."},
                {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Env.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
            ],
            "tools": tools,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]}),
    );
    let headers = sent.headers_mut();
    headers.insert(
        "anthropic-beta",
        "claude-code-20250219,interleaved-thinking-2025-05-14"
            .parse()
            .unwrap(),
    );
    headers.insert(
        "authorization",
        "Bearer ignored-in-local-mode".parse().unwrap(),
    );
    headers.insert("x-claude-code-session-id", "abc".parse().unwrap());
    let response = h.app.handle(sent).await;
    let headers = response.headers().clone();
    let s = Streamed::read(response).await;
    assert_eq!(s.status, 200, "{}", s.text());
    let accepted = headers["x-chat-accepted-unused"].to_str().unwrap();
    for named in [
        "context_management",
        "thinking.display=omitted",
        "tools[].defer_loading",
        "anthropic-beta=claude-code-20250219",
        "anthropic-beta=interleaved-thinking-2025-05-14",
    ] {
        assert!(accepted.contains(named), "{named} in {accepted}");
    }
    assert_eq!(headers["x-chat-max-tokens-clamped"], "128000 to 8192");
    // Adaptive thinking on a budget thinker: the effort's budget, and the answer thought first.
    let model_request = harness::last_model_request(&h.bedrock);
    assert_eq!(
        model_request["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096}),
        "{model_request}"
    );
    let blocks = accumulated(&events_of(&s));
    assert_eq!(blocks[0]["type"], "thinking");
    assert_eq!(blocks.last().unwrap()["text"], "Echo: Hi");
}

#[tokio::test]
async fn each_refusal_is_anthropics_error_shape_with_its_status() {
    let h = harness().await;
    let ask = |extra: Value| {
        let mut body = json!({"model": ECHO_MODEL, "max_tokens": 100,
            "messages": [{"role": "user", "content": "Hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    // An unknown field is a 400 naming it.
    let reply = post(&h, &ask(json!({"frobnicate": true}))).await;
    assert_eq!(error_of(&reply), (400, "invalid_request_error".into()));
    assert!(reply.body.contains("frobnicate"), "{}", reply.body);
    // A missing max_tokens names it.
    let reply = post(
        &h,
        &json!({"model": ECHO_MODEL, "messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await;
    assert_eq!(error_of(&reply), (400, "invalid_request_error".into()));
    assert!(reply.body.contains("max_tokens"), "{}", reply.body);
    // A server tool asked for by name is refused, naming it.
    let reply = post(
        &h,
        &ask(
            json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "tool", "name": "web_search"}}),
        ),
    )
    .await;
    assert_eq!(error_of(&reply), (400, "invalid_request_error".into()));
    assert!(reply.body.contains("web_search_20250305"), "{}", reply.body);
    // A model no allowed model answers.
    let reply = post(&h, &ask(json!({"model": "claude-opus-9"}))).await;
    assert_eq!(error_of(&reply), (404, "not_found_error".into()));
    // Bedrock throttling past the retries is Anthropic's 529.
    let reply = post(
        &h,
        &json!({"model": ECHO_MODEL, "max_tokens": 100,
            "messages": [{"role": "user", "content": "Hi [[fault:throttle]]"}]}),
    )
    .await;
    assert_eq!(error_of(&reply), (529, "overloaded_error".into()));
    // An unknown path under the API, and a method the route does not take.
    let reply = support::call(&h, "GET", "/v1/messages").await;
    assert_eq!(error_of(&reply).0, 405);
    let reply = post_to(&h, "/v1/messages/batches", &json!({})).await;
    assert_eq!(error_of(&reply), (404, "not_found_error".into()));
}

async fn post_to(h: &Harness, path: &str, body: &Value) -> Reply {
    Reply::collected(h.app.handle(request(path, body)).await).await
}

#[tokio::test]
async fn an_answer_that_reached_a_stop_sequence_says_so_and_which() {
    let h = harness().await;
    let asked = |sequences: Value, stream: bool| {
        json!({"model": ECHO_MODEL, "max_tokens": 100, "stream": stream, "stop_sequences": sequences,
            "messages": [{"role": "user", "content": "[[say:one two STOP three]]"}]})
    };
    let whole = post(&h, &asked(json!(["STOP"]), false)).await.json();
    assert_eq!(whole["stop_reason"], "stop_sequence", "{whole}");
    assert_eq!(whole["stop_sequence"], "STOP");
    assert_eq!(whole["content"][0]["text"], "one two ");
    // Of several, Bedrock does not say which.
    let (_, s) = stream(&h, &asked(json!(["STOP", "never"]), true)).await;
    let events = events_of(&s);
    let (_, delta) = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "stop_sequence", "{delta}");
    assert_eq!(delta["delta"]["stop_sequence"], Value::Null);
    // Without one, the end of the turn.
    let plain = post(&h, &asked(json!([]), false)).await.json();
    assert_eq!(plain["stop_reason"], "end_turn", "{plain}");
}

#[tokio::test]
async fn a_fault_after_the_stream_began_is_an_error_event_and_the_end() {
    let h = harness().await;
    let (_, s) = stream(
        &h,
        &streamed_question("[[deltas:5]] [[stream-error-after:2]]"),
    )
    .await;
    assert_eq!(s.status, 200);
    let events = events_of(&s);
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "error", "{events:?}");
    assert_eq!(last["error"]["type"], "api_error", "{last}");
    assert!(!names(&events).contains(&"message_stop"));
}

#[tokio::test]
async fn a_user_over_their_quota_gets_anthropics_429_with_retry_after() {
    let h = harness_with(&[("QUOTA_REQUESTS_PER_DAY", "1")]).await;
    let ask = json!({"model": ECHO_MODEL, "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hi"}]});
    // Counting tokens is not a request the quota counts.
    let counted = post_to(
        &h,
        "/v1/messages/count_tokens",
        &json!({"model": ECHO_MODEL,
        "messages": [{"role": "user", "content": "one two three"}]}),
    )
    .await;
    assert_eq!(counted.status, 200, "{}", counted.body);
    assert!(counted.json()["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(counted.headers["x-chat-token-count"], "estimate");
    assert_eq!(post(&h, &ask).await.status, 200);
    let refused = post(&h, &ask).await;
    assert_eq!(error_of(&refused), (429, "rate_limit_error".into()));
    assert!(refused.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn models_are_listed_in_anthropics_shape_to_anthropics_clients() {
    let h = harness_with(&[(
        "ANTHROPIC_MODEL_NAMES",
        &format!("claude-sonnet-4-5={SONNET}"),
    )])
    .await;
    let get = |path: &str, anthropic: bool| {
        let mut request = harness::json_request("GET", path, None);
        if anthropic {
            request
                .headers_mut()
                .insert("anthropic-version", "2023-06-01".parse().unwrap());
        }
        request
    };
    let page = Reply::collected(h.app.handle(get("/v1/models", true)).await).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = page.json();
    assert_eq!(body["has_more"], false);
    assert_eq!(body["data"][0]["type"], "model");
    assert_eq!(body["data"][0]["id"], "claude-sonnet-4-5");
    assert_eq!(body["first_id"], "claude-sonnet-4-5");
    let one = Reply::collected(
        h.app
            .handle(get("/v1/models/claude-sonnet-4-5-20250929", true))
            .await,
    )
    .await;
    assert_eq!(
        one.json()["id"],
        "claude-sonnet-4-5-20250929",
        "{}",
        one.body
    );
    let missing = Reply::collected(h.app.handle(get("/v1/models/claude-opus-9", true)).await).await;
    assert_eq!(error_of(&missing), (404, "not_found_error".into()));
    // Without anthropic-version: OpenAI's list, as before.
    let openai = Reply::collected(h.app.handle(get("/v1/models", false)).await).await;
    assert_eq!(openai.json()["object"], "list");
}

#[tokio::test]
async fn a_stream_silent_while_the_model_thinks_sends_a_ping() {
    let h = harness().await;
    // The model is silent between its two words for longer than the stream waits before a ping (PING_EVERY, 5 s).
    let (_, s) = stream(&h, &streamed_question("[[deltas:2]] [[delay-ms:5500]]")).await;
    assert_eq!(s.status, 200);
    let events = events_of(&s);
    assert_eq!(
        names(&events)[..6],
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "ping",
            "content_block_delta"
        ],
        "{events:?}"
    );
    assert_eq!(names(&events).last(), Some(&"message_stop"));
}

#[tokio::test]
async fn an_image_and_a_pdf_in_base64_reach_the_model_whole() {
    // As deployed: the owners' files kept in S3 (moto).
    let h = support::with_attachments().await;
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    const PDF: &[u8] =
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n";
    let reply = post(
        &h,
        &json!({"model": ECHO_MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What are these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": b64(chat_testing::bytes::PNG)}},
            {"type": "document", "title": "memo", "source": {"type": "base64",
                "media_type": "application/pdf", "data": b64(PDF)}}
        ]}]}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let text = reply.json()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    support::assert_png_received(&text);
    assert!(text.contains(&format!("pdf {} bytes", PDF.len())), "{text}");
}
