//! The embedding models' `InvokeModel` (`POST /model/{id}/invoke`) in Bedrock's wire formats, so that the embeddings
//! adapter and the `/v1/embeddings` route run offline through the real SDK client.
//!
//! Vectors are derived from the text alone ([`vector_of`]): the same text gets the same vector of the same size in
//! every call, and a test can compute what it must receive. Every vector has unit length. *Input tokens* are the
//! text's whitespace words (at least 1), as the Converse side counts them.
//!
//! | model (its base id; an inference profile's prefix is ignored) | request | response |
//! |---|---|---|
//! | `amazon.titan-embed-text-v2:0` | `{"inputText": T, "dimensions": 256\|512\|1024 (default 1024), "normalize": bool}` | `{"embedding": V, "inputTextTokenCount": N, "embeddingsByType": {"float": V}}` |
//! | `cohere.embed-english-v3`, `cohere.embed-multilingual-v3` | `{"texts": [T…] (1 to 96, each ≤ 2,048 characters), "input_type": "search_document"\|"search_query"\|"classification"\|"clustering", "embedding_types": ["float"] (optional)}` | `{"id", "texts", "embeddings": {"float": [V…]}, "response_type": "embeddings_by_type"}`; without `embedding_types`, `"embeddings": [V…]` and `"response_type": "embeddings_floats"`. 1,024 dimensions |
//! | `cohere.embed-v4:0` | v3's, and `"output_dimension": 256\|512\|1024\|1536` (default 1536) | v3's |
//!
//! Refusals, as Bedrock answers them (`x-amzn-errortype`, `{"message"}`): a body that is not what the model takes
//! (a missing or empty text, too many texts, a text too long, dimensions it does not return, an unknown field) is a
//! `ValidationException` (400); another model id is a `ResourceNotFoundException` (404); a text holding
//! `[[fault:throttle]]` is a `ThrottlingException` (429).
//!
//! `GET /__local/invocations` lists what the server was asked, oldest first: `[{"modelId", "body"}]`.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use crate::error_response;

/// What the embedding routes received.
#[derive(Clone, Default)]
struct Invocations(Arc<Mutex<Vec<Value>>>);

/// The embedding routes, with their own record of what they were asked.
pub(crate) fn router() -> Router {
    Router::new()
        .route("/model/{model_id}/invoke", post(invoke))
        .route("/__local/invocations", get(invocations))
        .with_state(Invocations::default())
}

async fn invocations(State(seen): State<Invocations>) -> Response {
    let list = Value::Array(seen.0.lock().unwrap().clone());
    (
        [(header::CONTENT_TYPE, "application/json")],
        list.to_string(),
    )
        .into_response()
}

/// The unit vector of `dimensions` floats the server answers for `text`: a 64-bit FNV-1a hash of the text seeds
/// a splitmix64 sequence, each number mapped to [-1, 1), the whole scaled to length 1.
pub fn vector_of(text: &str, dimensions: usize) -> Vec<f32> {
    let mut seed = fnv1a(text);
    let mut next = move || {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let raw: Vec<f64> = (0..dimensions)
        .map(|_| (next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let norm = raw
        .iter()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// The 64-bit FNV-1a hash of `text`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The input tokens the server counts for `text`: its whitespace words, at least 1.
pub fn tokens_of(text: &str) -> u64 {
    (text.split_whitespace().count() as u64).max(1)
}

fn invalid(message: &str) -> Response {
    error_response(400, "ValidationException", message)
}

/// The model's family, by its base id (an inference profile's geography prefix or an ARN's path left out).
fn family(model_id: &str) -> Option<&'static str> {
    let id = model_id.rsplit_once('/').map_or(model_id, |(_, id)| id);
    let id = match id.split_once('.') {
        Some((prefix, rest))
            if rest.contains('.') && prefix.len() <= 6 && !prefix.contains('-') =>
        {
            rest
        }
        _ => id,
    };
    if id.starts_with("amazon.titan-embed-text-v2") {
        Some("titan")
    } else if id.starts_with("cohere.embed-english-v3")
        || id.starts_with("cohere.embed-multilingual-v3")
    {
        Some("cohere-v3")
    } else if id.starts_with("cohere.embed-v4") {
        Some("cohere-v4")
    } else {
        None
    }
}

async fn invoke(
    State(seen): State<Invocations>,
    Path(model_id): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&body) else {
        return invalid(
            "Malformed input request: the body is not a JSON object, please reformat your input and try again.",
        );
    };
    seen.0
        .lock()
        .unwrap()
        .push(json!({"modelId": model_id, "body": body}));
    match family(&model_id) {
        Some("titan") => titan(&body),
        Some(family) => cohere(&body, family == "cohere-v4"),
        None => error_response(
            404,
            "ResourceNotFoundException",
            "The requested model does not exist or does not take InvokeModel here.",
        ),
    }
}

fn unknown_field(body: &Map<String, Value>, known: &[&str]) -> Option<Response> {
    body.keys().find(|k| !known.contains(&k.as_str())).map(|k| {
        invalid(&format!(
            "Malformed input request: extraneous key [{k}] is not permitted, please reformat your input and try again."
        ))
    })
}

fn throttled(text: &str) -> Option<Response> {
    text.contains("[[fault:throttle]]").then(|| {
        error_response(
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        )
    })
}

fn titan(body: &Map<String, Value>) -> Response {
    if let Some(refused) = unknown_field(
        body,
        &["inputText", "dimensions", "normalize", "embeddingTypes"],
    ) {
        return refused;
    }
    let Some(text) = body.get("inputText").and_then(Value::as_str) else {
        return invalid(
            "Malformed input request: #: required key [inputText] not found, please reformat your input and try again.",
        );
    };
    if text.is_empty() {
        return invalid(
            "Malformed input request: #/inputText: expected minLength: 1, actual: 0, please reformat your input and try again.",
        );
    }
    if text.chars().count() > 50_000 {
        return invalid(
            "Malformed input request: #/inputText: expected maxLength: 50000, please reformat your input and try again.",
        );
    }
    let dimensions = match body.get("dimensions") {
        None => 1024,
        Some(d) => match d.as_u64() {
            Some(d @ (256 | 512 | 1024)) => d as usize,
            _ => {
                return invalid(
                    "Malformed input request: #/dimensions: 256, 512 or 1024 is expected, please reformat your input and try again.",
                );
            }
        },
    };
    if body.get("normalize").is_some_and(|n| !n.is_boolean()) {
        return invalid(
            "Malformed input request: #/normalize: expected type: Boolean, please reformat your input and try again.",
        );
    }
    if let Some(refused) = throttled(text) {
        return refused;
    }
    let vector = vector_of(text, dimensions);
    json_ok(json!({
        "embedding": vector,
        "inputTextTokenCount": tokens_of(text),
        "embeddingsByType": {"float": vector},
    }))
}

fn cohere(body: &Map<String, Value>, v4: bool) -> Response {
    let mut known = vec![
        "texts",
        "input_type",
        "truncate",
        "embedding_types",
        "images",
    ];
    if v4 {
        known.extend(["output_dimension", "max_tokens", "inputs"]);
    }
    if let Some(refused) = unknown_field(body, &known) {
        return refused;
    }
    let Some(texts) = body.get("texts").and_then(Value::as_array) else {
        return invalid(
            "Malformed input request: #: required key [texts] not found, please reformat your input and try again.",
        );
    };
    let texts: Option<Vec<&str>> = texts.iter().map(Value::as_str).collect();
    let Some(texts) = texts else {
        return invalid(
            "Malformed input request: #/texts: every text must be a string, please reformat your input and try again.",
        );
    };
    if texts.is_empty() || texts.len() > 96 {
        return invalid(&format!(
            "Malformed input request: #/texts: expected between 1 and 96 texts, actual: {}, please reformat your input and try again.",
            texts.len()
        ));
    }
    if !v4 && texts.iter().any(|t| t.chars().count() > 2048) {
        return invalid(
            "Malformed input request: #/texts: expected maxLength: 2048, please reformat your input and try again.",
        );
    }
    match body.get("input_type").and_then(Value::as_str) {
        Some("search_document" | "search_query" | "classification" | "clustering") => {}
        _ => {
            return invalid(
                "Malformed input request: #/input_type: search_document, search_query, classification or clustering is expected, please reformat your input and try again.",
            );
        }
    }
    let by_type = match body.get("embedding_types") {
        None => false,
        Some(types) if types == &json!(["float"]) => true,
        Some(_) => {
            return invalid(
                "Malformed input request: #/embedding_types: this server returns [\"float\"] only, please reformat your input and try again.",
            );
        }
    };
    let dimensions = match (v4, body.get("output_dimension")) {
        (false, _) => 1024,
        (true, None) => 1536,
        (true, Some(d)) => match d.as_u64() {
            Some(d @ (256 | 512 | 1024 | 1536)) => d as usize,
            _ => {
                return invalid(
                    "Malformed input request: #/output_dimension: 256, 512, 1024 or 1536 is expected, please reformat your input and try again.",
                );
            }
        },
    };
    if let Some(refused) = texts.iter().find_map(|t| throttled(t)) {
        return refused;
    }
    let vectors: Vec<Vec<f32>> = texts.iter().map(|t| vector_of(t, dimensions)).collect();
    let (embeddings, response_type) = if by_type {
        (json!({"float": vectors}), "embeddings_by_type")
    } else {
        (json!(vectors), "embeddings_floats")
    };
    json_ok(json!({
        "id": format!("{:016x}", fnv1a(&texts.join("\n"))),
        "texts": texts,
        "embeddings": embeddings,
        "response_type": response_type,
    }))
}

fn json_ok(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_unit_length_and_deterministic() {
        let a = vector_of("hello world", 256);
        assert_eq!(a.len(), 256);
        assert_eq!(a, vector_of("hello world", 256));
        assert_ne!(a, vector_of("hello world!", 256));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }

    #[test]
    fn families_are_known_by_base_id() {
        assert_eq!(family("amazon.titan-embed-text-v2:0"), Some("titan"));
        assert_eq!(family("us.cohere.embed-v4:0"), Some("cohere-v4"));
        assert_eq!(family("cohere.embed-multilingual-v3"), Some("cohere-v3"));
        assert_eq!(family("amazon.titan-embed-text-v1"), None);
    }
}
