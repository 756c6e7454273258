//! `GET /v1/models`: the models the operator allows (`MODEL_ID`, `ALLOWED_MODELS`, then `EMBEDDING_MODELS`), each
//! as OpenAI's model object with what it does (`type`), the prices the backend counts its cost by and, for a chat
//! model, how long its answers and its context may be; for an embedding model, how many texts one request takes.

use serde::Serialize;

use chat_core::{EmbeddingProfile, Prices, VectorEncoding, base_model_id, most_texts};

/// OpenAI's model object, and a `pricing` of this backend's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    pub id: String,
    pub object: &'static str,
    /// Bedrock says no creation time: 0.
    pub created: i64,
    /// The model's provider, from its id (`anthropic`, `amazon`, …; `aws` for an application inference profile).
    pub owned_by: String,
    /// What it does: `chat` (`/v1/chat/completions`) or `embeddings` (`/v1/embeddings`), for the clients that fill a
    /// chat model picker from this list.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// What the backend counts a turn's cost by; `null` when it knows no prices for the model.
    pub pricing: Option<Pricing>,
    /// A chat model's longest answer, in tokens: the most `max_tokens` it is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// A chat model's context window (its prompt and answer together), in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// An embedding model's most texts (`input`) one request takes: as many vectors as fit one answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inputs: Option<MaxInputs>,
}

/// How many texts one embeddings request takes, at the model's default `dimensions`, by `encoding_format` (fewer
/// dimensions take more, up to 2,048).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MaxInputs {
    pub dimensions: u32,
    pub float: usize,
    pub base64: usize,
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pricing {
    pub currency: &'static str,
    pub unit: &'static str,
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl From<&Prices> for Pricing {
    fn from(p: &Prices) -> Self {
        Self {
            currency: "USD",
            unit: "1M tokens",
            input: p.input,
            output: p.output,
            cache_read: p.cache_read,
            cache_write: p.cache_write,
        }
    }
}

impl Model {
    /// A chat model.
    pub fn new(id: &str, prices: Option<&Prices>) -> Self {
        let base = base_model_id(id);
        let owned_by = match base.split_once('.') {
            Some((provider, _)) if !base.starts_with("arn:") => provider.to_string(),
            _ => "aws".to_string(),
        };
        Self {
            id: id.to_string(),
            object: "model",
            created: 0,
            owned_by,
            kind: "chat",
            pricing: prices.map(Pricing::from),
            max_output_tokens: None,
            context_window: None,
            max_inputs: None,
        }
    }

    /// The same chat model, with its longest answer and its context window.
    pub fn with_limits(mut self, max_output_tokens: u32, context_window: u64) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self.context_window = Some(context_window);
        self
    }

    /// An embedding model, of `profile` when this backend embeds with it.
    pub fn embeddings(id: &str, profile: Option<&EmbeddingProfile>) -> Self {
        Self {
            kind: "embeddings",
            max_inputs: profile.map(|p| {
                let dimensions = p.dimensions[0];
                MaxInputs {
                    dimensions,
                    float: most_texts(dimensions, VectorEncoding::Float),
                    base64: most_texts(dimensions, VectorEncoding::Base64),
                }
            }),
            ..Self::new(id, profile.map(|p| &p.prices))
        }
    }
}

/// `{"object": "list", "data": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelList {
    pub object: &'static str,
    pub data: Vec<Model>,
}

impl ModelList {
    pub fn new(data: Vec<Model>) -> Self {
        Self {
            object: "list",
            data,
        }
    }
}
