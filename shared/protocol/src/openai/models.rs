//! `GET /v1/models`: the models the operator allows (`MODEL_ID`, `ALLOWED_MODELS`), each as OpenAI's model object
//! with the prices the backend counts its cost by.

use serde::Serialize;

use chat_core::{Prices, base_model_id};

/// OpenAI's model object, and a `pricing` of this backend's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    pub id: String,
    pub object: &'static str,
    /// Bedrock says no creation time: 0.
    pub created: i64,
    /// The model's provider, from its id (`anthropic`, `amazon`, …; `aws` for an application inference profile).
    pub owned_by: String,
    /// What the backend counts a turn's cost by; `null` when it knows no prices for the model.
    pub pricing: Option<Pricing>,
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
            pricing: prices.map(Pricing::from),
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
