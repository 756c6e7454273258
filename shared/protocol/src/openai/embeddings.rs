//! OpenAI's `POST /v1/embeddings`: the request read strictly (every field OpenAI defines is honoured or refused,
//! any other field is a 400 naming it) into the core's [`EmbeddingRequest`], and the answer in OpenAI's shape, as
//! floats or as base64 of their little-endian `f32` bytes (what OpenAI's SDKs ask for by default and decode).
//!
//! | field | read as |
//! |---|---|
//! | `input` | a string, a list of token ids, or a list of those (strings and token lists alike); token ids are OpenAI's `cl100k_base` (what LangChain's `OpenAIEmbeddings` and LibreChat's RAG API send by default), decoded to the text they spell with the tokenizer's table bundled in the binary (`cl100k`: decoding only), then embedded as text |
//! | `model` | the embedding model (one of `EMBEDDING_MODELS`) |
//! | `encoding_format` | `float` (default) or `base64`; how many texts one request may hold depends on it (as many vectors as fit one answer: `chat_core::most_texts`) |
//! | `dimensions` | the vectors' size, one the model returns |
//! | `user` | a string, recorded in the request's trace |

use base64::Engine;
/// How the vectors are written in the answer (`float`, the default, or `base64`): the core's, since how many fit
/// one answer depends on it.
pub use chat_core::VectorEncoding as EncodingFormat;
use chat_core::{EmbeddingRequest, Embeddings, InvalidRequest};
use serde::Serialize;
use serde_json::{Map, Value};

use super::cl100k::UnknownToken;

/// The fields of an embeddings request.
const FIELDS: &[&str] = &["input", "model", "encoding_format", "dimensions", "user"];

/// An embeddings request as read: what the core embeds (how to write the vectors with it), and the caller's `user`
/// label.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsInput {
    pub request: EmbeddingRequest,
    pub user: Option<String>,
}

/// Reads an embeddings request from its JSON body, or says which field is at fault and why.
pub fn parse_embeddings_request(body: &[u8]) -> Result<EmbeddingsInput, InvalidRequest> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| InvalidRequest::body(format!("body is not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(InvalidRequest::body("body must be a JSON object"));
    };
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(InvalidRequest::new(
            unknown.as_str(),
            format!(
                "is not a field of an embeddings request; the fields are {}",
                FIELDS.join(", ")
            ),
        ));
    }
    Ok(EmbeddingsInput {
        request: EmbeddingRequest {
            model: model(&fields)?,
            texts: texts(fields.get("input"))?,
            dimensions: dimensions(fields.get("dimensions"))?,
            encoding: encoding_format(fields.get("encoding_format"))?,
        },
        user: user(fields.get("user"))?,
    })
}

fn model(fields: &Map<String, Value>) -> Result<String, InvalidRequest> {
    match fields.get("model") {
        None | Some(Value::Null) => Err(InvalidRequest::new("model", "is required")),
        Some(Value::String(m)) if !m.is_empty() => Ok(m.clone()),
        Some(_) => Err(InvalidRequest::new(
            "model",
            "must be the id of an embedding model",
        )),
    }
}

/// The text a list of `cl100k_base` token ids (at `path`) spells: the models here have tokenizers of their own,
/// so they embed the text, not the ids. An id the tokenizer does not have is refused; bytes that are no whole UTF-8
/// character (a list cut inside one) become U+FFFD.
fn decoded(path: &str, tokens: &[Value]) -> Result<String, InvalidRequest> {
    let ranks = tokens
        .iter()
        .enumerate()
        .map(|(j, token)| {
            token
                .as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| {
                    InvalidRequest::new(format!("{path}[{j}]"), "must be a token id (an integer)")
                })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let bytes = super::cl100k::decode_bytes(&ranks).map_err(|UnknownToken(token)| {
        InvalidRequest::new(
            path,
            format!("holds {token}, which is no token id of cl100k_base"),
        )
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn texts(input: Option<&Value>) -> Result<Vec<String>, InvalidRequest> {
    match input {
        None | Some(Value::Null) => Err(InvalidRequest::new("input", "is required")),
        Some(Value::String(text)) => Ok(vec![text.clone()]),
        // One list of token ids.
        Some(Value::Array(items)) if items.first().is_some_and(Value::is_number) => {
            Ok(vec![decoded("input", items)?])
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Array(tokens) => decoded(&format!("input[{i}]"), tokens),
                _ => Err(InvalidRequest::new(
                    format!("input[{i}]"),
                    "must be a string or a list of token ids",
                )),
            })
            .collect(),
        Some(_) => Err(InvalidRequest::new(
            "input",
            "must be a string, a list of strings, a list of token ids or a list of those",
        )),
    }
}

fn dimensions(value: Option<&Value>) -> Result<Option<u32>, InvalidRequest> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|d| *d > 0)
            .and_then(|d| u32::try_from(d).ok())
            .map(Some)
            .ok_or_else(|| InvalidRequest::new("dimensions", "must be a positive integer")),
    }
}

fn encoding_format(value: Option<&Value>) -> Result<EncodingFormat, InvalidRequest> {
    match value.and_then(|v| if v.is_null() { None } else { Some(v) }) {
        None => Ok(EncodingFormat::Float),
        Some(v) => match v.as_str() {
            Some("float") => Ok(EncodingFormat::Float),
            Some("base64") => Ok(EncodingFormat::Base64),
            _ => Err(InvalidRequest::new(
                "encoding_format",
                "must be \"float\" or \"base64\"",
            )),
        },
    }
}

fn user(value: Option<&Value>) -> Result<Option<String>, InvalidRequest> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(u)) => Ok(Some(u.clone())),
        Some(_) => Err(InvalidRequest::new("user", "must be a string")),
    }
}

/// The answer: `{"object": "list", "data": [...], "model", "usage"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingsResponse {
    pub object: &'static str,
    pub data: Vec<EmbeddingData>,
    pub model: String,
    pub usage: EmbeddingsUsage,
}

/// One text's vector, at the text's index in `input`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingData {
    pub object: &'static str,
    pub index: usize,
    pub embedding: EmbeddingVector,
}

/// A vector as floats, or as base64 of their little-endian `f32` bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Float(Vec<f32>),
    Base64(String),
}

/// The tokens read: an embedding writes none, so both are the input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EmbeddingsUsage {
    pub prompt_tokens: u64,
    pub total_tokens: u64,
}

/// Base64 of `vector`'s `f32` values, little-endian, as OpenAI writes `encoding_format: "base64"`.
pub fn base64_of(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl EmbeddingsResponse {
    /// The answer to a request whose vectors are `embeddings`, written as `format` says.
    pub fn new(embeddings: Embeddings, format: EncodingFormat) -> Self {
        let tokens = embeddings.usage.tokens.input_tokens;
        Self {
            object: "list",
            data: embeddings
                .vectors
                .into_iter()
                .enumerate()
                .map(|(index, vector)| EmbeddingData {
                    object: "embedding",
                    index,
                    embedding: match format {
                        EncodingFormat::Float => EmbeddingVector::Float(vector),
                        EncodingFormat::Base64 => EmbeddingVector::Base64(base64_of(&vector)),
                    },
                })
                .collect(),
            model: embeddings.model,
            usage: EmbeddingsUsage {
                prompt_tokens: tokens,
                total_tokens: tokens,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chat_core::{TokenUsage, UsageTotals};
    use serde_json::json;

    fn parse(body: Value) -> Result<EmbeddingsInput, InvalidRequest> {
        parse_embeddings_request(body.to_string().as_bytes())
    }

    #[test]
    fn a_string_or_a_list_of_strings_is_read() {
        let one = parse(json!({"input": "hello", "model": "m"})).unwrap();
        assert_eq!(one.request.texts, ["hello"]);
        assert_eq!(one.request.model, "m");
        assert_eq!(one.request.dimensions, None);
        assert_eq!(one.request.encoding, EncodingFormat::Float);
        let many = parse(json!({
            "input": ["a", "b"], "model": "m", "encoding_format": "base64", "dimensions": 256, "user": "u-1"
        }))
        .unwrap();
        assert_eq!(many.request.texts, ["a", "b"]);
        assert_eq!(many.request.dimensions, Some(256));
        assert_eq!(many.request.encoding, EncodingFormat::Base64);
        assert_eq!(many.user.as_deref(), Some("u-1"));
    }

    #[test]
    fn token_arrays_are_the_text_they_spell_in_cl100k_base() {
        // "hello" 15339, " world" 1917, "Hello" 9906.
        let texts = |input: Value| {
            parse(json!({"input": input, "model": "m"}))
                .unwrap()
                .request
                .texts
        };
        assert_eq!(texts(json!([15339, 1917])), ["hello world"]);
        assert_eq!(
            texts(json!([[9906, 1917], "as text", [15339]])),
            ["Hello world", "as text", "hello"]
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let path = |body: Value| parse(body).unwrap_err().path;
        assert_eq!(path(json!({"input": "a", "model": "m", "foo": 1})), "foo");
        assert_eq!(
            path(json!({"input": [1, 2, 4_000_000], "model": "m"})),
            "input"
        );
        assert_eq!(
            path(json!({"input": [[1, 2], [3.5]], "model": "m"})),
            "input[1][0]"
        );
        assert_eq!(path(json!({"input": ["a", 2], "model": "m"})), "input[1]");
        assert_eq!(path(json!({"input": 5, "model": "m"})), "input");
        assert_eq!(path(json!({"model": "m"})), "input");
        assert_eq!(path(json!({"input": "a"})), "model");
        assert_eq!(
            path(json!({"input": "a", "model": "m", "encoding_format": "int8"})),
            "encoding_format"
        );
        assert_eq!(
            path(json!({"input": "a", "model": "m", "dimensions": 0})),
            "dimensions"
        );
        assert_eq!(path(json!({"input": "a", "model": "m", "user": 3})), "user");
        let tokens = parse(json!({"input": [1, 4_000_000], "model": "m"})).unwrap_err();
        assert!(tokens.reason.contains("cl100k_base"), "{tokens}");
        assert_eq!(
            parse_embeddings_request(b"[1]").unwrap_err().path,
            "",
            "not an object"
        );
    }

    fn embeddings() -> Embeddings {
        Embeddings {
            model: "amazon.titan-embed-text-v2:0".into(),
            vectors: vec![vec![0.25, -1.5, 0.1], vec![3.0e-7, 1.0, -0.0]],
            usage: UsageTotals {
                tokens: TokenUsage {
                    input_tokens: 7,
                    total_tokens: 7,
                    ..TokenUsage::default()
                },
                cost_usd: Some(0.0),
            },
        }
    }

    #[test]
    fn floats_are_written_as_openai_writes_them() {
        let answer =
            serde_json::to_value(EmbeddingsResponse::new(embeddings(), EncodingFormat::Float))
                .unwrap();
        assert_eq!(
            answer,
            json!({
                "object": "list",
                "data": [
                    {"object": "embedding", "index": 0, "embedding": [0.25, -1.5, 0.1f32]},
                    {"object": "embedding", "index": 1, "embedding": [3.0e-7f32, 1.0, -0.0]},
                ],
                "model": "amazon.titan-embed-text-v2:0",
                "usage": {"prompt_tokens": 7, "total_tokens": 7},
            })
        );
    }

    #[test]
    fn base64_decodes_to_the_same_floats() {
        let answer = serde_json::to_value(EmbeddingsResponse::new(
            embeddings(),
            EncodingFormat::Base64,
        ))
        .unwrap();
        for (i, expected) in embeddings().vectors.iter().enumerate() {
            let text = answer["data"][i]["embedding"].as_str().unwrap();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap();
            let floats: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(&floats, expected);
            assert_eq!(
                floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                expected.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                "bit for bit"
            );
        }
        // 0.25, -1.5, 0.1 as little-endian f32: what numpy's frombuffer(dtype=float32) reads.
        assert_eq!(
            answer["data"][0]["embedding"],
            base64::engine::general_purpose::STANDARD.encode([
                0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0xc0, 0xbf, 0xcd, 0xcc, 0xcc, 0x3d
            ])
        );
    }
}
