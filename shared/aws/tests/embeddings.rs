//! The embeddings adapter against the local Bedrock server with the real SDK client: each family's `InvokeModel`
//! body (Titan one text per call with its dimensions, Cohere in batches of 96), the vectors in the texts' order,
//! the tokens counted (Titan) or estimated (Cohere), and Bedrock's refusals classified.

use std::time::Duration;

use chat_aws::BedrockEmbedder;
use chat_core::{Embedded, Embedder, EmbeddingProfile, ModelError, estimate_tokens};
use local_bedrock::LocalBedrock;
use local_bedrock::embeddings::{tokens_of, vector_of};
use serde_json::Value;

const TITAN: &str = "amazon.titan-embed-text-v2:0";
const COHERE: &str = "cohere.embed-english-v3";
const COHERE_V4: &str = "cohere.embed-v4:0";

/// `texts` embedded by `model` in `dimensions`, which must be one vector a text, in their order, each the one the
/// local server makes of its text.
async fn embedded_in_order(
    embedder: &BedrockEmbedder,
    model: &str,
    texts: &[String],
    dimensions: u32,
) -> Embedded {
    let profile = EmbeddingProfile::of(model).unwrap();
    let embedded = embedder
        .embed(model, profile, texts, dimensions)
        .await
        .unwrap();
    assert_eq!(embedded.vectors.len(), texts.len());
    for (text, vector) in texts.iter().zip(&embedded.vectors) {
        assert_eq!(vector, &vector_of(text, dimensions as usize), "{text}");
    }
    embedded
}

async fn start() -> (LocalBedrock, BedrockEmbedder) {
    let server = LocalBedrock::start().await.expect("the server starts");
    let embedder = BedrockEmbedder::new(&server.sdk_config().await, Duration::from_secs(10));
    (server, embedder)
}

/// What the server was asked: `[{"modelId", "body"}]`.
async fn invocations(server: &LocalBedrock) -> Vec<Value> {
    reqwest::get(format!("{}/__local/invocations", server.endpoint()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text number {i}")).collect()
}

#[tokio::test]
async fn titan_embeds_one_text_per_call_in_the_dimensions_asked() {
    let (server, embedder) = start().await;
    let texts = vec![
        "the quick brown fox".to_string(),
        "jumps".to_string(),
        "over the dog".to_string(),
    ];
    let embedded = embedded_in_order(&embedder, TITAN, &texts, 256).await;
    // Titan counts the tokens it read: the server's whitespace words (4 + 1 + 3).
    assert_eq!(
        embedded.input_tokens,
        texts.iter().map(|t| tokens_of(t)).sum::<u64>()
    );
    assert_eq!(embedded.input_tokens, 8);
    let seen = invocations(&server).await;
    assert_eq!(seen.len(), 3);
    let mut asked: Vec<&str> = seen
        .iter()
        .map(|i| i["body"]["inputText"].as_str().unwrap())
        .collect();
    asked.sort();
    assert_eq!(asked, ["jumps", "over the dog", "the quick brown fox"]);
    for i in &seen {
        assert_eq!(i["modelId"], TITAN);
        assert_eq!(i["body"]["dimensions"], 256);
        assert_eq!(i["body"]["normalize"], true);
    }
}

#[tokio::test]
async fn cohere_takes_96_texts_a_call_so_100_texts_are_two_calls() {
    let (server, embedder) = start().await;
    let texts = texts(100);
    // In the texts' order across both calls.
    let embedded = embedded_in_order(&embedder, COHERE, &texts, 1024).await;
    // Cohere's body counts no tokens: estimated from the texts.
    assert_eq!(
        embedded.input_tokens,
        texts.iter().map(|t| estimate_tokens(t)).sum::<u64>()
    );
    let seen = invocations(&server).await;
    let mut sizes: Vec<usize> = seen
        .iter()
        .map(|i| i["body"]["texts"].as_array().unwrap().len())
        .collect();
    sizes.sort();
    assert_eq!(sizes, [4, 96]);
    for i in &seen {
        assert_eq!(i["modelId"], COHERE);
        assert_eq!(i["body"]["input_type"], "search_document");
        assert_eq!(i["body"]["embedding_types"], serde_json::json!(["float"]));
        assert!(i["body"].get("output_dimension").is_none());
    }
}

#[tokio::test]
async fn cohere_v4_is_asked_for_its_output_dimension() {
    let (server, embedder) = start().await;
    let profile = EmbeddingProfile::of(COHERE_V4).unwrap();
    let texts = texts(3);
    let embedded = embedder
        .embed(COHERE_V4, profile, &texts, 512)
        .await
        .unwrap();
    assert_eq!(embedded.vectors[2], vector_of("text number 2", 512));
    let seen = invocations(&server).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["body"]["output_dimension"], 512);
}

#[tokio::test]
async fn bedrocks_refusals_are_classified() {
    let (_server, embedder) = start().await;
    let titan = EmbeddingProfile::of(TITAN).unwrap();
    // Dimensions the model does not return: Bedrock's ValidationException.
    let refused = embedder
        .embed(TITAN, titan, &["a".to_string()], 300)
        .await
        .unwrap_err();
    assert!(matches!(refused, ModelError::Rejected(_)), "{refused:?}");
    // A model Bedrock does not have.
    let missing = embedder
        .embed(
            "amazon.titan-embed-text-v9:0",
            titan,
            &["a".to_string()],
            256,
        )
        .await
        .unwrap_err();
    assert!(matches!(missing, ModelError::NotFound(_)), "{missing:?}");
    // Throttled past the SDK's retries.
    let throttled = embedder
        .embed(
            COHERE,
            EmbeddingProfile::of(COHERE).unwrap(),
            &["fine".to_string(), "[[fault:throttle]]".to_string()],
            1024,
        )
        .await
        .unwrap_err();
    assert_eq!(throttled, ModelError::Throttled);
}
