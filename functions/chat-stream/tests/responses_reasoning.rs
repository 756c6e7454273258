//! The reasoning a Responses client keeps itself (`store: false` with `include: ["reasoning.encrypted_content"]`,
//! what Codex sends): the model's signed reasoning goes out sealed in the reasoning item's `encrypted_content`
//! (whole and streamed), nothing of it is kept here, and given back with the call it led to it reaches the model
//! unchanged (the local Bedrock server checks the signature, and refuses Claude's tool use without its reasoning);
//! a changed one is a 400 naming it. Without the include, the backend keeps the reasoning, as before.

use chat_aws::{BedrockModel, DynamoStore};
use chat_core::SessionStore;
use chat_stream::App;
use chat_testing::harness::{self, Backend, OWNER, Reply, Streamed, Wired};
use serde_json::{Value, json};

type Harness = Wired<App<BedrockModel, DynamoStore>>;

/// A Claude model id as an inference profile: it reasons within a budget, and wants its reasoning back.
const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const KEY: &str = "a test's reasoning key, of at least 32 characters";

async fn harness() -> Harness {
    Backend::start(&[("RESPONSES_REASONING_KEY", KEY), ("ALLOWED_MODELS", CLAUDE)])
        .await
        .wired(App::new)
        .await
}

fn weather_tool() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

fn asking(city: &str, include: bool) -> Value {
    let mut body = json!({"model": CLAUDE, "store": false, "tools": weather_tool(),
        "reasoning": {"effort": "low", "summary": "auto"},
        "input": format!(r#"Weather? [[tool:get_weather {{"city":"{city}"}}]]"#)});
    if include {
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    body
}

async fn post(h: &Harness, body: &Value) -> Reply {
    let request = harness::json_request("POST", "/v1/responses", Some(body));
    Reply::collected(h.app.handle(request).await).await
}

async fn stream(h: &Harness, body: &Value) -> Streamed {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let request = harness::json_request("POST", "/v1/responses", Some(&body));
    Streamed::read(h.app.handle(request).await).await
}

/// The input that continues `asked` (its question and output) with the call's result.
fn continuing(asked: &Value, output: &[Value]) -> Value {
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    let mut input = vec![json!({"role": "user", "content": asked["input"]})];
    input.extend(output.iter().cloned());
    input.push(
        json!({"type": "function_call_output", "call_id": call["call_id"], "output": "18 C"}),
    );
    let mut body = asked.clone();
    body["input"] = Value::Array(input);
    body
}

fn call_id(output: &[Value]) -> String {
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    call["call_id"].as_str().unwrap().to_string()
}

/// The reasoning block the continuation gave the model with the call it led to.
fn reasoning_sent(h: &Harness) -> Value {
    let sent = h.bedrock.requests().last().unwrap().body.clone();
    let assistant = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("an assistant message: {sent}"))
        .clone();
    assistant["content"][0]["reasoningContent"]["reasoningText"].clone()
}

#[tokio::test]
async fn reasoning_the_client_keeps_goes_out_sealed_and_back_to_the_model_unchanged() {
    let h = harness().await;
    let asked = asking("Paris", true);
    let first = post(&h, &asked).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let output = first.json()["output"].as_array().unwrap().clone();
    let reasoning = &output[0];
    assert_eq!(reasoning["type"], "reasoning", "{output:?}");
    let summary = reasoning["summary"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!summary.is_empty());
    let sealed = reasoning["encrypted_content"].as_str().unwrap().to_string();
    assert!(!sealed.contains(&summary), "sealed, not shown: {sealed}");
    let paris = call_id(&output);

    // Given back with the call's result: the model gets its signed reasoning, text and signature unchanged.
    let second = post(&h, &continuing(&asked, &output)).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let text = second.json()["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "message")
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .unwrap();
    assert!(text.contains("get_weather returned 18 C"), "{text}");
    let block = reasoning_sent(&h);
    assert_eq!(block["text"], summary.as_str());
    assert!(
        block["signature"]
            .as_str()
            .unwrap()
            .starts_with("local-signature-"),
        "{block}"
    );

    // Changed, or not sealed here: a 400 naming the field, before any model call.
    let calls = h.bedrock.requests().len();
    let mut changed = output.clone();
    let mut bytes = sealed.clone().into_bytes();
    bytes[10] = if bytes[10] == b'A' { b'B' } else { b'A' };
    changed[0]["encrypted_content"] = json!(String::from_utf8(bytes).unwrap());
    let refused = post(&h, &continuing(&asked, &changed)).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.json()["error"]["param"],
        "input[1].encrypted_content"
    );
    assert_eq!(h.bedrock.requests().len(), calls);

    // Streamed: the reasoning item is done with the sealed reasoning, and the completed response holds it too.
    let s = stream(&h, &asked).await;
    let events: Vec<Value> = s
        .text()
        .split_terminator("\n\n")
        .map(|e| serde_json::from_str(e.split_once("\ndata: ").unwrap().1).unwrap())
        .collect();
    let done = events
        .iter()
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning")
        .unwrap_or_else(|| panic!("a reasoning item done: {}", s.text()));
    let streamed_sealed = done["item"]["encrypted_content"].as_str().unwrap();
    let completed = &events.last().unwrap()["response"];
    assert_eq!(completed["output"][0]["encrypted_content"], streamed_sealed);
    let streamed_output = completed["output"].as_array().unwrap().clone();
    let again = stream(&h, &continuing(&asked, &streamed_output)).await;
    assert!(
        again.text().contains("get_weather returned 18 C"),
        "{}",
        again.text()
    );
    assert_eq!(reasoning_sent(&h)["text"], summary.as_str());

    // Without the include, the backend keeps the reasoning under the call (as before); with it, nothing is kept.
    let kept = post(&h, &asking("Oslo", false)).await;
    assert_eq!(kept.status, 200, "{}", kept.body);
    let kept_output = kept.json()["output"].as_array().unwrap().clone();
    assert!(kept_output[0].get("encrypted_content").is_none());
    let oslo = call_id(&kept_output);
    assert_ne!(oslo, paris);
    let mut kept_here = None;
    for _ in 0..50 {
        kept_here = h.store.kept_reasoning(OWNER, &oslo).await.unwrap();
        if kept_here.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(kept_here.is_some(), "kept without the include");
    assert_eq!(h.store.kept_reasoning(OWNER, &paris).await.unwrap(), None);
}
