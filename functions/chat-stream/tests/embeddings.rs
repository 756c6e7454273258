//! `POST /v1/embeddings` through the function, with the real SDK clients against the local Bedrock server and moto:
//! the vectors as floats and as base64, in the model's batches, each request counted in the caller's usage (its
//! tokens, priced at the model's price, and as a request in the rate window), and every refusal in OpenAI's error
//! shape with its status.

use std::sync::Arc;

use base64::Engine;
use chat_aws::{BedrockEmbedder, BedrockModel, DynamoStore};
use chat_core::estimate_tokens;
use chat_stream::App;
use chat_testing::harness::{self, Backend, Reply, Wired};
use local_bedrock::embeddings::{tokens_of, vector_of};
use serde_json::{Value, json};

/// Titan Text Embeddings V2, the embedding model allowed by default.
const TITAN: &str = "amazon.titan-embed-text-v2:0";

mod support;

type Harness = Wired<App<BedrockModel, DynamoStore>>;

/// The function as its cold start builds it (usage counted in its table, the embedder on the local Bedrock
/// server), configured with `env`.
async fn harness(env: &[(&str, &str)]) -> Harness {
    let backend = Backend::start(env).await;
    let ledger = backend.ledger();
    let sdk = backend.bedrock.sdk_config().await;
    backend
        .wired(|m, s, a, c| {
            let embedder = BedrockEmbedder::new(&sdk, c.model_timeout);
            App::new(m, s, a, c)
                .with_usage(Some(ledger))
                .with_embedder(Some(Arc::new(embedder)))
        })
        .await
}

async fn embed(h: &Harness, body: Value) -> Reply {
    let request = harness::json_request("POST", "/v1/embeddings", Some(&body));
    Reply::collected(h.app.handle(request).await).await
}

/// A request to embed one word with Titan.
fn one_word() -> Value {
    json!({"input": "a", "model": TITAN})
}

/// What the local Bedrock server was asked to embed.
async fn invocations(h: &Harness) -> Vec<Value> {
    reqwest::get(format!("{}/__local/invocations", h.bedrock.endpoint()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn floats_of_base64(text: &str) -> Vec<f32> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn floats_of_json(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Asserts that `refused` is the rate limit's 429 in OpenAI's shape, to be sent again within the minute.
fn assert_rate_limited(refused: &Reply) {
    assert_eq!(refused.status, 429, "{:.300}", refused.body);
    assert_eq!(error_of(refused)["code"], "rate_limit_exceeded");
    let retry_after = refused.retry_after();
    assert!((1..=70).contains(&retry_after), "{retry_after}");
}

/// The error object of an OpenAI-shaped refusal, after checking its shape.
fn error_of(reply: &Reply) -> Value {
    let body = reply.json();
    let error = body["error"].clone();
    for field in ["message", "type", "param", "code"] {
        assert!(error.get(field).is_some(), "{field} in {body}");
    }
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    error
}

#[tokio::test]
async fn titan_vectors_as_floats_and_base64_counted_in_the_callers_usage() {
    let h = harness(&[]).await;
    let texts = ["the quick brown fox", "jumps over", "the lazy dog"];
    let reply = embed(
        &h,
        json!({"input": texts, "model": TITAN, "dimensions": 256}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], TITAN);
    let tokens: u64 = texts.iter().map(|t| tokens_of(t)).sum();
    assert_eq!(tokens, 9);
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": tokens, "total_tokens": tokens})
    );
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, (item, text)) in data.iter().zip(texts).enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], i);
        assert_eq!(floats_of_json(&item["embedding"]), vector_of(text, 256));
    }

    // The same texts as base64: the very same f32 values, bit for bit.
    let reply = embed(
        &h,
        json!({"input": texts, "model": TITAN, "dimensions": 256,
               "encoding_format": "base64", "user": "someone"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    for (item, text) in reply.json()["data"].as_array().unwrap().iter().zip(texts) {
        assert_eq!(
            floats_of_base64(item["embedding"].as_str().unwrap()),
            vector_of(text, 256)
        );
    }

    // Both requests counted against the caller: tokens, cost at Titan's $0.02 per million, two settled requests,
    // nothing left held.
    let usage = harness::usage_now(&h.store).await;
    println!("ledger after two embedding requests: {:?}", usage.day);
    assert_eq!(usage.day.spent.tokens.input_tokens, 2 * tokens);
    assert_eq!(usage.day.spent.tokens.total_tokens, 2 * tokens);
    assert_eq!(usage.day.spent.tokens.output_tokens, 0);
    let cost = usage.day.spent.cost_usd.unwrap();
    assert!(
        (cost - 2.0 * tokens as f64 * 0.02 / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert_eq!(usage.day.turns, 2);
    assert_eq!(usage.day.reserved.tokens, 0);
    assert_eq!(usage.month.spent.tokens.input_tokens, 2 * tokens);

    // Titan takes one text per call.
    assert_eq!(invocations(&h).await.len(), 6);
}

#[tokio::test]
async fn one_hundred_texts_to_cohere_are_two_calls_in_order() {
    let h = harness(&[(
        "EMBEDDING_MODELS",
        "cohere.embed-english-v3,amazon.titan-embed-text-v2:0",
    )])
    .await;
    let texts: Vec<String> = (0..100).map(|i| format!("passage {i}")).collect();
    let reply = embed(
        &h,
        json!({"input": texts, "model": "cohere.embed-english-v3"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 100);
    assert_eq!(
        floats_of_json(&data[99]["embedding"]),
        vector_of("passage 99", 1024)
    );
    assert_eq!(data[99]["index"], 99);
    // Cohere counts no tokens: estimated, and that estimate is what the caller is charged.
    let estimated: u64 = texts.iter().map(|t| estimate_tokens(t)).sum();
    assert_eq!(body["usage"]["prompt_tokens"], estimated);
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.spent.tokens.input_tokens, estimated);
    // No limit configured: recorded once it ends, as its two model calls.
    assert_eq!((usage.day.requests, usage.day.turns), (2, 1));
    let mut sizes: Vec<usize> = invocations(&h)
        .await
        .iter()
        .map(|i| i["body"]["texts"].as_array().unwrap().len())
        .collect();
    sizes.sort();
    assert_eq!(sizes, [4, 96]);
}

#[tokio::test]
async fn refusals_in_openais_shape() {
    let h = harness(&[]).await;

    let reply = embed(
        &h,
        json!({"input": "a", "model": "cohere.embed-english-v3"}),
    )
    .await;
    assert_eq!(reply.status, 404);
    let error = error_of(&reply);
    assert_eq!(
        (&error["type"], &error["param"], &error["code"]),
        (
            &json!("invalid_request_error"),
            &json!("model"),
            &json!("model_not_found")
        )
    );

    let cases = [
        // An id cl100k_base does not have.
        (json!({"input": [1, 2, 4_000_000], "model": TITAN}), "input"),
        (
            json!({"input": [[1, 2], [3, -1]], "model": TITAN}),
            "input[1][1]",
        ),
        (
            json!({"input": "a", "model": TITAN, "temperature": 1}),
            "temperature",
        ),
        (
            json!({"input": "a", "model": TITAN, "dimensions": 300}),
            "dimensions",
        ),
        (
            json!({"input": "a", "model": TITAN, "encoding_format": "int8"}),
            "encoding_format",
        ),
        (json!({"input": ["a", ""], "model": TITAN}), "input[1]"),
        (json!({"input": [], "model": TITAN}), "input"),
    ];
    for (body, param) in cases {
        let reply = embed(&h, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        let error = error_of(&reply);
        assert_eq!(error["type"], "invalid_request_error", "{body}");
        assert_eq!(error["param"], param, "{body}");
    }
    let tokens = embed(&h, json!({"input": [1, 2, 4_000_000], "model": TITAN})).await;
    assert!(
        error_of(&tokens)["message"]
            .as_str()
            .unwrap()
            .contains("cl100k_base"),
        "{}",
        tokens.body
    );

    // Nothing refused reached the model, and nothing was counted.
    assert!(invocations(&h).await.is_empty());
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.spent.tokens.total_tokens, 0);
    assert_eq!(usage.day.turns, 0);
}

#[tokio::test]
async fn embeddings_turned_off_serve_no_model() {
    let h = harness(&[("EMBEDDING_MODELS", "")]).await;
    let reply = embed(&h, one_word()).await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_eq!(error_of(&reply)["code"], "model_not_found");
}

#[tokio::test]
async fn the_rate_limit_holds_embeddings_as_it_holds_turns() {
    let h = harness(&[("RATE_LIMIT_PER_MINUTE", "1")]).await;
    let body = json!({"input": "hello there", "model": TITAN});
    assert_eq!(embed(&h, body.clone()).await.status, 200);
    assert_rate_limited(&embed(&h, body).await);
    // And a chat turn after it is refused too: one window for both.
    let chat = harness::json_request(
        "POST",
        "/chat/stream",
        Some(&json!({"messages": [{"role": "user", "content": "hi"}]})),
    );
    assert_eq!(h.app.handle(chat).await.status(), 429);
}

#[tokio::test]
async fn each_model_call_counts_against_the_rate_limit() {
    let h = harness(&[("RATE_LIMIT_PER_MINUTE", "100")]).await;
    let titan = |n: usize| {
        let texts: Vec<String> = (0..n).map(|i| format!("text {i}")).collect();
        json!({"input": texts, "model": TITAN, "dimensions": 256})
    };
    // 101 texts are 101 calls to Titan: more than the limit at once, refused before any model call, as a request
    // too large (no wait lets it in: a 429 would have the SDKs send it again).
    let refused = embed(&h, titan(101)).await;
    assert_eq!(refused.status, 413, "{:.300}", refused.body);
    assert!(refused.headers.get("retry-after").is_none());
    let error = error_of(&refused);
    assert_eq!(error["code"], "request_too_large");
    assert_eq!(error["param"], "input");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("101 model calls") && message.contains("100 requests a minute"),
        "{message}"
    );
    assert!(invocations(&h).await.is_empty(), "no model call was made");
    assert_eq!(harness::usage_now(&h.store).await.window.requests(), 0);

    // 96 texts: admitted, and counted as the 96 requests they are.
    let reply = embed(&h, titan(96)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(invocations(&h).await.len(), 96);
    let usage = harness::usage_now(&h.store).await;
    println!(
        "RATE_LIMIT_PER_MINUTE=100, 96 Titan texts: {} requests in the minute, {} today, {} turn",
        usage.window.requests(),
        usage.day.requests,
        usage.day.turns
    );
    assert_eq!(usage.window.requests(), 96);
    assert_eq!((usage.day.requests, usage.month.requests), (96, 96));
    assert_eq!(usage.day.turns, 1);

    // 5 more would be 101 in the minute: a 429 before any model call.
    assert_rate_limited(&embed(&h, titan(5)).await);
    assert_eq!(invocations(&h).await.len(), 96, "no model call was made");
    assert_eq!(harness::usage_now(&h.store).await.window.requests(), 96);
}

#[tokio::test]
async fn a_quota_reached_by_embeddings_refuses_them() {
    // Each request holds 4 estimated tokens ("abcdefghij": 10 bytes) and spends 1 (one word): a quota of 5 tokens
    // admits five, then is spent.
    let h = harness(&[("QUOTA_TOKENS_PER_DAY", "5")]).await;
    let body = json!({"input": "abcdefghij", "model": TITAN});
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(embed(&h, body.clone()).await.status.as_u16());
    }
    println!("QUOTA_TOKENS_PER_DAY=5, seven one-token requests: {statuses:?}");
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.spent.tokens.total_tokens, 5);
}

#[tokio::test]
async fn an_unknown_caller_is_refused_with_401() {
    let backend = Backend::start(&[]).await;
    let sdk = backend.bedrock.sdk_config().await;
    let h = backend
        .wired(|m, s, _, c| {
            let embedder = BedrockEmbedder::new(&sdk, c.model_timeout);
            App::new(m, s, chat_edge::Auth::Iam, c).with_embedder(Some(Arc::new(embedder)))
        })
        .await;
    let reply = embed(&h, one_word()).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(error_of(&reply)["code"], "invalid_api_key");
}

/// Each function as its cold start builds it (the composition root, from this process's environment: IAM callers,
/// Titan by default): the buffered function, the streaming one and the local run's every function on one address
/// each answer `POST /v1/embeddings` (an unsigned caller's 401 in OpenAI's shape, not a 404 for an unknown path).
#[tokio::test]
async fn every_function_and_the_local_run_serve_the_route() {
    async fn ask<F: chat_app::Function>() -> Reply {
        let app = chat_app::App::build::<F>().await.unwrap();
        let body = one_word();
        let request = harness::json_request("POST", "/v1/embeddings", Some(&body));
        Reply::collected(chat_runtime::answer_one(app.service(), request).await).await
    }
    let replies = [
        ("chat", ask::<chat_app::Buffered>().await),
        ("chat-stream", ask::<chat_app::Streamed>().await),
        ("local run", ask::<chat_app::Everything>().await),
    ];
    for (function, reply) in replies {
        assert_eq!(reply.status, 401, "{function}: {}", reply.body);
        assert_eq!(error_of(&reply)["code"], "invalid_api_key", "{function}");
    }
}

#[tokio::test]
async fn a_model_that_throttles_is_a_429_charged_only_where_a_call_may_have_run() {
    let h = harness(&[]).await;
    // One call, refused by the model: nothing spent.
    let reply = embed(&h, json!({"input": "[[fault:throttle]]", "model": TITAN})).await;
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(error_of(&reply)["code"], "rate_limit_exceeded");
    // Not the caller's limit, but Bedrock's: a few seconds to wait, which the SDKs honour.
    assert_eq!(reply.headers.get("retry-after").unwrap(), "5");
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.turns, 1);
    assert_eq!(usage.day.spent.tokens.total_tokens, 0);
    // Two calls (Titan takes one text a call), one refused: the other may have been answered, and billed, first;
    // the request is charged its estimate.
    let texts = ["fine", "[[fault:throttle]]"];
    let reply = embed(&h, json!({"input": texts, "model": TITAN})).await;
    assert_eq!(reply.status, 429, "{}", reply.body);
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.turns, 2);
    assert_eq!(
        usage.day.spent.tokens.total_tokens,
        texts.iter().map(|t| estimate_tokens(t)).sum::<u64>()
    );
    assert_eq!(usage.day.reserved.tokens, 0);
}

/// LangChain's `OpenAIEmbeddings` and LibreChat's RAG API send `input` as lists of cl100k_base token ids by default:
/// each list is the text it spells, embedded as that text (the same vector), and the model is sent the text.
#[tokio::test]
async fn token_arrays_are_the_text_they_spell_in_cl100k_base() {
    let h = harness(&[]).await;
    // cl100k_base: "hello" 15339, " world" 1917; "Hello" 9906.
    let as_text = embed(
        &h,
        json!({"input": ["hello world", "Hello world"], "model": TITAN}),
    )
    .await;
    assert_eq!(as_text.status, 200, "{}", as_text.body);
    let as_tokens = embed(
        &h,
        json!({"input": [[15339, 1917], [9906, 1917]], "model": TITAN}),
    )
    .await;
    assert_eq!(as_tokens.status, 200, "{}", as_tokens.body);
    assert_eq!(as_tokens.json()["data"], as_text.json()["data"]);
    let one = embed(&h, json!({"input": [15339, 1917], "model": TITAN})).await;
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["data"][0], as_text.json()["data"][0]);
    let sent: Vec<String> = invocations(&h)
        .await
        .iter()
        .map(|i| {
            i["body"]["inputText"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(
        sent.iter().filter(|t| *t == "hello world").count() >= 3,
        "{sent:?}"
    );
}

#[tokio::test]
async fn more_texts_than_one_answer_holds_are_a_413_before_any_model_call() {
    let h = harness(&[]).await;
    let texts = |n: usize| -> Vec<String> { (0..n).map(|i| format!("text {i}")).collect() };
    // 2,048 texts (OpenAI's bound) of 1,024 floats each would be about 30 MB: no Lambda response carries it.
    for (n, format) in [(2048, "float"), (2048, "base64"), (344, "float")] {
        let reply = embed(
            &h,
            json!({"input": texts(n), "model": TITAN, "encoding_format": format}),
        )
        .await;
        assert_eq!(reply.status, 413, "{n} as {format}: {}", reply.body);
        let error = error_of(&reply);
        assert_eq!(error["code"], "request_too_large", "{error}");
        assert_eq!(error["param"], "input", "{error}");
        let most = if format == "float" { 343 } else { 1084 };
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains(&format!("at most {most} vectors of 1024 dimensions")),
            "{error}"
        );
    }
    assert!(invocations(&h).await.is_empty(), "no model call was made");
    let usage = harness::usage_now(&h.store).await;
    assert_eq!(usage.day.turns, 0, "nothing was admitted");
    // As base64, the 344 fit: each embedded, the answer within the bound.
    let reply = embed(
        &h,
        json!({"input": texts(344), "model": TITAN, "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["data"].as_array().unwrap().len(), 344);
    assert!(
        reply.body.len() <= chat_core::MAX_ANSWER_BYTES,
        "{}",
        reply.body.len()
    );
    assert_eq!(
        invocations(&h).await.len(),
        344,
        "Titan takes one text a call"
    );
    // `/v1/models` says the bound.
    let models = support::call(&h, "GET", "/v1/models").await;
    let listed = models.json();
    let entry = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == TITAN)
        .unwrap()
        .clone();
    assert_eq!(
        entry["max_inputs"],
        json!({"dimensions": 1024, "float": 343, "base64": 1084}),
        "{entry}"
    );
}
