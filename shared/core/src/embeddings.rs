//! Embeddings: texts turned into vectors by one of the operator's embedding models (`EMBEDDING_MODELS`), bounded,
//! and admitted, reserved and settled in the usage ledger exactly as a chat turn is, so that what a caller embeds
//! counts against their quotas and rate limit, priced. Each model call counts as one request against the rate limit
//! and the request quotas (Titan takes one text per call, Cohere up to 96): a request of 96 texts to Titan counts
//! 96, refused as a whole before any model call when they would pass a limit.
//!
//! The port is [`Embedder`]; the Bedrock adapter (`chat_aws::BedrockEmbedder`) speaks each family's `InvokeModel`
//! body. What a family takes (its dimensions, how many texts one call carries, how long a text may be, its price)
//! is decided here once, in [`EmbeddingProfile`], for the core's checks and the adapter alike.
//!
//! Bounds of one request (each a 400 naming the field, before anything is admitted):
//! - at most [`MAX_INPUTS`] texts (OpenAI's own bound), none empty;
//! - each text at most its model's [`EmbeddingProfile::max_chars`] characters (Titan V2: 50,000, its documented
//!   limit beside 8,192 tokens; Cohere Embed v3: 2,048, its documented limit; Cohere Embed v4: 50,000);
//! - at most [`MAX_REQUEST_TOKENS`] estimated tokens in all (OpenAI's bound of a request);
//! - `dimensions` one the model takes;
//! - at most as many texts as their vectors fit one answer ([`most_texts`]: a Lambda response carries 6 MB, and an
//!   answer over it would be paid for and lost), a 413 before any model call otherwise.

use std::future::Future;
use std::pin::Pin;

use crate::account::model_did_not_run;
use crate::{
    Caller, ChatError, ChatService, InvalidRequest, ModelError, Prices, Reserve, TokenUsage,
    UsageTotals, estimate_tokens,
};

/// The most texts one request embeds (OpenAI's bound of `input`).
pub const MAX_INPUTS: usize = 2048;
/// The most tokens, estimated, one request's texts hold in all (OpenAI's bound of a request).
pub const MAX_REQUEST_TOKENS: u64 = 300_000;
/// The most calls to the model one request has in flight at once (Titan takes one text per call).
pub const MAX_CONCURRENT_CALLS: usize = 8;
/// The most bytes the vectors of one answer may take: Lambda's 6 MB (6,291,456 bytes) of a response, less room for
/// its headers and the rest of the answer.
pub const MAX_ANSWER_BYTES: usize = 6_000_000;

/// How the answer writes each vector: the bound on how many fit one response depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VectorEncoding {
    /// Each value a JSON number.
    #[default]
    Float,
    /// Base64 of each vector's `f32` values, little-endian, one after the other.
    Base64,
}

impl VectorEncoding {
    /// The most bytes one vector of `dimensions` values takes in an answer, with the object around it
    /// (`{"object":"embedding","index":2047,"embedding":…},`, under 64 bytes). A value as a JSON number is at most
    /// 17 bytes with its comma (the shortest form of an `f32` that reads back the same, as serde_json writes it, is
    /// at most 16: `-0.0000010000001`, found by trying them); as base64 4 bytes take 5⅓ characters.
    pub fn most_bytes(self, dimensions: u32) -> usize {
        let values = dimensions as usize;
        64 + match self {
            VectorEncoding::Float => values * 17,
            VectorEncoding::Base64 => (values * 4).div_ceil(3) * 4 + 2,
        }
    }

    /// How the field that asks for it names it (OpenAI's `encoding_format`).
    pub fn name(self) -> &'static str {
        match self {
            VectorEncoding::Float => "float",
            VectorEncoding::Base64 => "base64",
        }
    }
}

/// The most texts one request may embed into vectors of `dimensions` written as `encoding`: OpenAI's bound
/// ([`MAX_INPUTS`]), and no more than fit one answer ([`MAX_ANSWER_BYTES`]).
pub fn most_texts(dimensions: u32, encoding: VectorEncoding) -> usize {
    (MAX_ANSWER_BYTES / encoding.most_bytes(dimensions)).min(MAX_INPUTS)
}

/// Refuses more texts than their vectors fit one answer: a 413, naming what would let them fit.
fn check_answer_fits(
    texts: usize,
    dimensions: u32,
    encoding: VectorEncoding,
) -> Result<(), ChatError> {
    let most = most_texts(dimensions, encoding);
    if texts <= most {
        return Ok(());
    }
    let base64 = most_texts(dimensions, VectorEncoding::Base64);
    let hint = if encoding == VectorEncoding::Float && base64 >= texts {
        " or ask for them as base64 (`encoding_format`)".to_string()
    } else {
        String::new()
    };
    Err(ChatError::TooLarge(InvalidRequest::new(
        "input",
        format!(
            "holds {texts} texts, and at most {most} vectors of {dimensions} dimensions written as {} fit one answer \
             (a response carries at most 6 MB): send fewer texts per request{hint}",
            encoding.name()
        ),
    )))
}

/// How a family of embedding models is asked, in its `InvokeModel` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingFamily {
    /// Amazon Titan Text Embeddings V2: `{"inputText", "dimensions", "normalize"}`, one text per call; the
    /// response counts its tokens (`inputTextTokenCount`).
    TitanV2,
    /// Cohere Embed v3 (English, multilingual): `{"texts", "input_type", "embedding_types"}`, up to 96 texts per
    /// call, 1,024 dimensions; the response counts no tokens.
    CohereV3,
    /// Cohere Embed v4: v3's body with `output_dimension`; the response counts no tokens.
    CohereV4,
}

/// What an embedding model takes and costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddingProfile {
    /// The start of the base model ids this profile is for.
    pub family_id: &'static str,
    pub family: EmbeddingFamily,
    /// The dimensions it can return; the first is its default.
    pub dimensions: &'static [u32],
    /// How many texts one call carries.
    pub texts_per_call: usize,
    /// The longest text it takes, in characters.
    pub max_chars: usize,
    /// On-demand prices in us-east-1 when this was written (input only: an embedding writes no tokens).
    pub prices: Prices,
}

const fn input_price(input: f64) -> Prices {
    Prices {
        input,
        output: 0.0,
        cache_read: input,
        cache_write: input,
    }
}

/// Cohere's v3 models (English, multilingual): the same bounds and price, their ids apart.
const fn cohere_v3(family_id: &'static str) -> EmbeddingProfile {
    EmbeddingProfile {
        family_id,
        family: EmbeddingFamily::CohereV3,
        dimensions: &[1024],
        texts_per_call: 96,
        max_chars: 2_048,
        prices: input_price(0.10),
    }
}

/// The known embedding models, a longer id start before a shorter one it begins with.
const EMBEDDING_PROFILES: &[EmbeddingProfile] = &[
    EmbeddingProfile {
        family_id: "amazon.titan-embed-text-v2",
        family: EmbeddingFamily::TitanV2,
        dimensions: &[1024, 512, 256],
        texts_per_call: 1,
        max_chars: 50_000,
        prices: input_price(0.02),
    },
    cohere_v3("cohere.embed-english-v3"),
    cohere_v3("cohere.embed-multilingual-v3"),
    EmbeddingProfile {
        family_id: "cohere.embed-v4",
        family: EmbeddingFamily::CohereV4,
        dimensions: &[1536, 1024, 512, 256],
        texts_per_call: 96,
        max_chars: 50_000,
        prices: input_price(0.12),
    },
];

impl EmbeddingProfile {
    /// The profile of `model_id` (a foundation model id, or an inference profile's id or ARN naming one); `None`
    /// for a model this backend cannot embed with.
    pub fn of(model_id: &str) -> Option<&'static EmbeddingProfile> {
        let base = crate::base_model_id(model_id);
        EMBEDDING_PROFILES
            .iter()
            .find(|p| base.starts_with(p.family_id))
    }

    /// The dimensions a call asks for: `requested`, when the model takes it, else the model's default.
    pub fn dimensions_for(&self, requested: Option<u32>) -> Result<u32, InvalidRequest> {
        match requested {
            None => Ok(self.dimensions[0]),
            Some(d) if self.dimensions.contains(&d) => Ok(d),
            Some(d) => {
                let takes: Vec<String> = self.dimensions.iter().map(u32::to_string).collect();
                Err(InvalidRequest::new(
                    "dimensions",
                    format!(
                        "{d} is not a size this model returns; it takes {}",
                        takes.join(", ")
                    ),
                ))
            }
        }
    }
}

/// One request to embed: the texts in order, the model, and the dimensions asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    pub model: String,
    pub texts: Vec<String>,
    pub dimensions: Option<u32>,
    /// How the answer will write the vectors.
    pub encoding: VectorEncoding,
}

/// What an embedding model returned: a vector per text, in the texts' order, and the input tokens it read.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub input_tokens: u64,
}

/// What a request to embed got: the vectors, and what it spent (priced).
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    pub model: String,
    pub vectors: Vec<Vec<f32>>,
    pub usage: UsageTotals,
}

pub type EmbedFuture<'a> = Pin<Box<dyn Future<Output = Result<Embedded, ModelError>> + Send + 'a>>;

/// The port to the embedding models.
pub trait Embedder: Send + Sync {
    /// Embeds `texts` (each within its model's bounds) with `model` (of `profile`) in `dimensions` dimensions,
    /// in as many calls as the model takes them; a vector per text, in order, and the input tokens read (counted
    /// by the model where it counts them, else estimated). Every call is bounded by the configured timeout.
    fn embed<'a>(
        &'a self,
        model: &'a str,
        profile: &'static EmbeddingProfile,
        texts: &'a [String],
        dimensions: u32,
    ) -> EmbedFuture<'a>;
}

/// The embedding models the operator allows (`EMBEDDING_MODELS`); none: embeddings are off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbeddingModels {
    models: Vec<String>,
}

impl EmbeddingModels {
    /// The models of `ids`; an id this backend cannot embed with is refused (a configuration error, said once).
    pub fn new(ids: Vec<String>) -> Result<Self, String> {
        if let Some(unknown) = ids.iter().find(|id| EmbeddingProfile::of(id).is_none()) {
            return Err(format!(
                "{unknown:?} is not an embedding model this backend speaks (Titan Text Embeddings V2, Cohere Embed \
                 v3 or v4)"
            ));
        }
        Ok(Self { models: ids })
    }

    /// The allowed models, in the operator's order.
    pub fn ids(&self) -> &[String] {
        &self.models
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The profile of `model` when the operator allows it.
    pub fn allowed(&self, model: &str) -> Option<&'static EmbeddingProfile> {
        self.models
            .iter()
            .any(|m| m == model)
            .then(|| EmbeddingProfile::of(model))
            .flatten()
    }
}

/// Refuses texts outside the bounds of one request (see the module's notes); their estimated tokens otherwise.
pub fn check_texts(texts: &[String], profile: &EmbeddingProfile) -> Result<u64, InvalidRequest> {
    if texts.is_empty() {
        return Err(InvalidRequest::new(
            "input",
            "holds no text: send a string or a list of strings",
        ));
    }
    if texts.len() > MAX_INPUTS {
        return Err(InvalidRequest::new(
            "input",
            format!(
                "holds {} texts, more than the limit of {MAX_INPUTS}",
                texts.len()
            ),
        ));
    }
    let mut tokens = 0u64;
    for (i, text) in texts.iter().enumerate() {
        if text.is_empty() {
            return Err(InvalidRequest::new(
                format!("input[{i}]"),
                "is empty: every text must hold something to embed",
            ));
        }
        InvalidRequest::check_length(&format!("input[{i}]"), text, profile.max_chars)?;
        tokens += estimate_tokens(text);
    }
    if tokens > MAX_REQUEST_TOKENS {
        return Err(InvalidRequest::new(
            "input",
            format!(
                "holds about {tokens} tokens, more than the limit of {MAX_REQUEST_TOKENS} for one request: send \
                 fewer texts per request"
            ),
        ));
    }
    Ok(tokens)
}

impl<M, St> ChatService<M, St> {
    /// Embeds `request` with `embedder`, when `models` allow its model: the texts checked against their bounds,
    /// then the request admitted as a turn is (one atomic write of the caller's counters: refused over a quota or
    /// the rate limit, else counted and holding its texts' estimated tokens, priced), counting one request per model
    /// call it makes against the rate limit and the request quotas, the model asked, and what it
    /// read settled (its own count; the estimate when it failed after a call may have run: a call that failed
    /// other than by the model's refusal, or any failure of a request of several calls).
    pub async fn embed(
        &self,
        embedder: &dyn Embedder,
        models: &EmbeddingModels,
        caller: &Caller,
        request: &EmbeddingRequest,
    ) -> Result<Embeddings, ChatError> {
        let profile = models
            .allowed(&request.model)
            .ok_or_else(|| ChatError::ModelNotFound(request.model.clone()))?;
        let dimensions = profile.dimensions_for(request.dimensions)?;
        let estimate = check_texts(&request.texts, profile)?;
        check_answer_fits(request.texts.len(), dimensions, request.encoding)?;
        let prices = Some(profile.prices);
        // Each model call counts as a request against the rate limit and the request quotas, however many one
        // request carries (Titan: one per text).
        let calls = request.texts.len().div_ceil(profile.texts_per_call.max(1));
        let mut account = self
            .open_account(
                &caller.owner,
                Reserve::of_call(estimate, 0, prices.as_ref()),
                calls as u64,
                prices,
            )
            .await
            .map_err(|e| match e {
                // More calls than a limit allows at all: no wait lets it in, so it is no 429 for a client to retry.
                ChatError::OverLimit(over) if over.alone => {
                    ChatError::TooLarge(InvalidRequest::new("input", over.message))
                }
                e => e,
            })?;
        let started = std::time::Instant::now();
        let outcome = embedder
            .embed(&request.model, profile, &request.texts, dimensions)
            .await;
        let outcome = outcome.and_then(|embedded| {
            if embedded.vectors.len() == request.texts.len() {
                Ok(embedded)
            } else {
                Err(ModelError::Failed(format!(
                    "{} vectors for {} texts",
                    embedded.vectors.len(),
                    request.texts.len()
                )))
            }
        });
        // A request of several calls that failed may have had some of them answered (and billed) before one failed.
        let read = match &outcome {
            Ok(embedded) => Some(embedded.input_tokens),
            // A model that may have run may have read every text: counted as the estimate, more rather than less.
            Err(e) if calls > 1 || !model_did_not_run(e) => Some(estimate),
            Err(_) => None,
        };
        if let Some(tokens) = read {
            account.add_call(TokenUsage {
                input_tokens: tokens,
                total_tokens: tokens,
                ..TokenUsage::default()
            });
        }
        account.close().await;
        match outcome {
            Ok(embedded) => {
                tracing::info!(
                    model_id = %request.model,
                    texts = request.texts.len(),
                    dimensions,
                    input_tokens = embedded.input_tokens,
                    latency_ms = started.elapsed().as_millis() as u64,
                    "texts embedded"
                );
                Ok(Embeddings {
                    model: request.model.clone(),
                    vectors: embedded.vectors,
                    usage: account.spent(),
                })
            }
            Err(e) => {
                tracing::warn!(model_id = %request.model, error = %e, "embedding failed");
                Err(ChatError::Model(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_found_by_base_model_id() {
        let titan = EmbeddingProfile::of("amazon.titan-embed-text-v2:0").unwrap();
        assert_eq!(titan.family, EmbeddingFamily::TitanV2);
        assert_eq!(
            EmbeddingProfile::of("us.cohere.embed-v4:0").unwrap().family,
            EmbeddingFamily::CohereV4
        );
        assert_eq!(
            EmbeddingProfile::of("cohere.embed-multilingual-v3")
                .unwrap()
                .family,
            EmbeddingFamily::CohereV3
        );
        assert!(EmbeddingProfile::of("amazon.titan-embed-text-v1").is_none());
        assert!(EmbeddingProfile::of("anthropic.claude-sonnet-4-5").is_none());
    }

    #[test]
    fn dimensions_are_the_models_own() {
        let titan = EmbeddingProfile::of("amazon.titan-embed-text-v2:0").unwrap();
        assert_eq!(titan.dimensions_for(None), Ok(1024));
        assert_eq!(titan.dimensions_for(Some(256)), Ok(256));
        let refused = titan.dimensions_for(Some(300)).unwrap_err();
        assert_eq!(refused.path, "dimensions");
        assert!(refused.reason.contains("1024, 512, 256"), "{refused}");
        let cohere = EmbeddingProfile::of("cohere.embed-english-v3").unwrap();
        assert!(cohere.dimensions_for(Some(512)).is_err());
    }

    #[test]
    fn texts_are_bounded() {
        let cohere = EmbeddingProfile::of("cohere.embed-english-v3").unwrap();
        let titan = EmbeddingProfile::of("amazon.titan-embed-text-v2:0").unwrap();
        assert_eq!(check_texts(&["abcdef".into()], titan), Ok(2));
        assert_eq!(check_texts(&[], titan).unwrap_err().path, "input");
        assert_eq!(
            check_texts(&["a".into(), String::new()], titan)
                .unwrap_err()
                .path,
            "input[1]"
        );
        assert_eq!(
            check_texts(&vec!["a".to_string(); MAX_INPUTS + 1], titan)
                .unwrap_err()
                .path,
            "input"
        );
        let long = "é".repeat(2049);
        assert_eq!(
            check_texts(&["ok".into(), long.clone()], cohere)
                .unwrap_err()
                .path,
            "input[1]"
        );
        assert!(check_texts(&[long], titan).is_ok());
        let many = vec!["x".repeat(30_000); 40];
        assert!(
            check_texts(&many, titan)
                .unwrap_err()
                .reason
                .contains("300000")
        );
    }

    #[test]
    fn as_many_texts_as_their_vectors_fit_one_answer() {
        // Titan's 1,024 dimensions: 343 as floats, 1,084 as base64 (LangChain's batches of 1,000 fit).
        assert_eq!(most_texts(1024, VectorEncoding::Float), 343);
        assert_eq!(most_texts(1024, VectorEncoding::Base64), 1084);
        assert_eq!(most_texts(256, VectorEncoding::Base64), MAX_INPUTS);
        assert_eq!(most_texts(1536, VectorEncoding::Float), 229);
        // The bound holds against the longest values: an answer of that many is within the budget.
        for (dimensions, encoding) in [
            (1024, VectorEncoding::Float),
            (1536, VectorEncoding::Base64),
            (256, VectorEncoding::Float),
        ] {
            let one = encoding.most_bytes(dimensions);
            assert!(most_texts(dimensions, encoding) * one <= MAX_ANSWER_BYTES);
            for longest in [-1.000_000_1e-6_f32, -1.175_494_4e-38, f32::MIN] {
                let value = format!("{},", serde_json::to_string(&longest).unwrap());
                assert!(value.len() <= 17, "{value}");
            }
        }
        assert!(check_answer_fits(343, 1024, VectorEncoding::Float).is_ok());
        let Err(ChatError::TooLarge(refused)) = check_answer_fits(344, 1024, VectorEncoding::Float)
        else {
            panic!("344 vectors of 1024 floats fit no answer")
        };
        assert_eq!(refused.path, "input");
        assert!(
            refused.reason.contains("at most 343") && refused.reason.contains("base64"),
            "{refused}"
        );
        let Err(ChatError::TooLarge(refused)) =
            check_answer_fits(2048, 1024, VectorEncoding::Float)
        else {
            panic!("2048 vectors of 1024 floats fit no answer")
        };
        assert!(!refused.reason.contains("base64"), "{refused}");
    }

    #[test]
    fn only_allowed_models_are_served() {
        let models = EmbeddingModels::new(vec!["cohere.embed-v4:0".into()]).unwrap();
        assert!(models.allowed("cohere.embed-v4:0").is_some());
        assert!(models.allowed("amazon.titan-embed-text-v2:0").is_none());
        assert!(EmbeddingModels::new(vec!["amazon.nova-pro-v1:0".into()]).is_err());
        assert!(EmbeddingModels::default().is_empty());
    }

    #[test]
    fn an_embedding_is_priced_by_its_input() {
        let titan = EmbeddingProfile::of("amazon.titan-embed-text-v2:0").unwrap();
        let usage = TokenUsage {
            input_tokens: 1_000_000,
            total_tokens: 1_000_000,
            ..TokenUsage::default()
        };
        assert_eq!(titan.prices.cost(&usage), 0.02);
    }
}
