//! The embedding port on Amazon Bedrock's `InvokeModel`: each family's own body (Titan Text Embeddings V2 one text
//! per call, Cohere Embed up to 96 texts per call), a batch's calls run concurrently within a bound, each call
//! bounded by the configured timeout, faults classified as the Converse adapter classifies them.
//!
//! Titan's response counts the tokens it read (`inputTextTokenCount`). Cohere's body on Bedrock counts none, so
//! a Cohere call's tokens are estimated from its texts ([`chat_core::estimate_tokens`]: three bytes a token, which
//! over-counts rather than under).

use std::time::{Duration, Instant};

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::primitives::Blob;
use chat_core::{
    EmbedFuture, Embedded, Embedder, EmbeddingFamily, EmbeddingProfile, MAX_CONCURRENT_CALLS,
    ModelError, estimate_tokens,
};
use futures_util::{StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::bedrock::classify;

/// Bedrock's embedding models; holds one SDK client, built once per cold start.
#[derive(Clone)]
pub struct BedrockEmbedder {
    client: Client,
    /// The longest one call may take, its retries included.
    timeout: Duration,
}

impl BedrockEmbedder {
    /// A client from the shared AWS configuration (its one HTTPS client); `timeout` bounds every call, every
    /// attempt and the back-offs between them.
    pub fn new(config: &aws_config::SdkConfig, timeout: Duration) -> Self {
        Self {
            client: crate::bedrock_runtime(config, timeout),
            timeout,
        }
    }

    /// One `InvokeModel` call of `body` to `model`: the response's body as JSON.
    async fn invoke(&self, model: &str, body: &Value) -> Result<Value, ModelError> {
        let started = Instant::now();
        let call = self
            .client
            .invoke_model()
            .model_id(model)
            .content_type("application/json")
            .accept("application/json")
            .body(Blob::new(body.to_string()))
            .send();
        let output = match tokio::time::timeout(self.timeout, call).await {
            Ok(output) => output.map_err(classify),
            Err(_) => Err(ModelError::Timeout(format!(
                "no embedding within {} ms",
                self.timeout.as_millis()
            ))),
        };
        let output = output.inspect_err(|e| {
            tracing::warn!(
                operation = "InvokeModel",
                model_id = %model,
                latency_ms = started.elapsed().as_millis() as u64,
                error = %e,
                "embedding call failed"
            );
        })?;
        serde_json::from_slice(output.body().as_ref())
            .map_err(|e| ModelError::Failed(format!("the model's response is not JSON: {e}")))
    }

    /// One call of a batch of texts, as `family` takes it.
    async fn batch(
        &self,
        model: &str,
        family: EmbeddingFamily,
        batch: &[String],
        dimensions: u32,
    ) -> Result<(Vec<Vec<f32>>, u64), ModelError> {
        match family {
            EmbeddingFamily::TitanV2 => self.titan(model, &batch[0], dimensions).await,
            family => self.cohere(model, family, batch, dimensions).await,
        }
    }

    /// Titan Text Embeddings V2: one text.
    async fn titan(
        &self,
        model: &str,
        text: &str,
        dimensions: u32,
    ) -> Result<(Vec<Vec<f32>>, u64), ModelError> {
        let body = json!({"inputText": text, "dimensions": dimensions, "normalize": true});
        let answer: TitanAnswer = parse(self.invoke(model, &body).await?)?;
        Ok((vec![answer.embedding], answer.input_text_token_count))
    }

    /// Cohere Embed: up to 96 texts.
    async fn cohere(
        &self,
        model: &str,
        family: EmbeddingFamily,
        texts: &[String],
        dimensions: u32,
    ) -> Result<(Vec<Vec<f32>>, u64), ModelError> {
        let mut body = json!({
            "texts": texts,
            "input_type": "search_document",
            "embedding_types": ["float"],
        });
        if family == EmbeddingFamily::CohereV4 {
            body["output_dimension"] = json!(dimensions);
        }
        let answer: CohereAnswer = parse(self.invoke(model, &body).await?)?;
        let vectors = match answer.embeddings {
            CohereEmbeddings::ByType { float } => float,
            CohereEmbeddings::Floats(vectors) => vectors,
        };
        let tokens = texts.iter().map(|t| estimate_tokens(t)).sum();
        Ok((vectors, tokens))
    }
}

/// Titan's response: `{"embedding": [...], "inputTextTokenCount": N, ...}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TitanAnswer {
    embedding: Vec<f32>,
    input_text_token_count: u64,
}

/// Cohere's response: `{"embeddings": {"float": [[...]]}, "response_type": "embeddings_by_type", ...}` when
/// `embedding_types` is asked for, `{"embeddings": [[...]], ...}` otherwise.
#[derive(Deserialize)]
struct CohereAnswer {
    embeddings: CohereEmbeddings,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CohereEmbeddings {
    ByType { float: Vec<Vec<f32>> },
    Floats(Vec<Vec<f32>>),
}

fn parse<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ModelError> {
    serde_json::from_value(value).map_err(|e| {
        ModelError::Failed(format!(
            "the model's response is not an embedding's shape: {e}"
        ))
    })
}

impl Embedder for BedrockEmbedder {
    fn embed<'a>(
        &'a self,
        model: &'a str,
        profile: &'static EmbeddingProfile,
        texts: &'a [String],
        dimensions: u32,
    ) -> EmbedFuture<'a> {
        let span = tracing::info_span!(
            "model.embed",
            model_id = %model,
            texts = texts.len(),
            dimensions
        );
        Box::pin(
            async move {
                // Each batch a call, at most MAX_CONCURRENT_CALLS in flight, answers kept in the texts' order; the
                // first fault ends the request (the calls still in flight are dropped).
                let calls: Vec<_> = texts
                    .chunks(profile.texts_per_call.max(1))
                    .map(|batch| self.batch(model, profile.family, batch, dimensions))
                    .collect();
                let batches: Vec<(Vec<Vec<f32>>, u64)> = futures_util::stream::iter(calls)
                    .buffered(MAX_CONCURRENT_CALLS)
                    .try_collect()
                    .await?;
                let mut vectors = Vec::with_capacity(texts.len());
                let mut input_tokens = 0;
                for (batch, tokens) in batches {
                    vectors.extend(batch);
                    input_tokens += tokens;
                }
                if let Some(v) = vectors.iter().find(|v| v.len() != dimensions as usize) {
                    return Err(ModelError::Failed(format!(
                        "a vector of {} dimensions where {dimensions} were asked for",
                        v.len()
                    )));
                }
                Ok(Embedded {
                    vectors,
                    input_tokens,
                })
            }
            .instrument(span),
        )
    }
}
