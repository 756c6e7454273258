//! Setups several functions' tests make alike, beside [`crate::harness`]: callers with JWTs of a test's own issuer
//! (`AUTH_MODE=jwt`), requests bearing their tokens, and a document index on the local knowledge base that reads
//! its uploads from moto's S3.

use std::time::Duration;

use chat_aws::KnowledgeBaseDocuments;
use chat_core::StoreTimeouts;
use lambda_http::Request;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::{DATA_SOURCE_ID, LocalKnowledgeBase};
use serde_json::Value;

use crate::harness::{JwtSigner, Reply, json_request};

impl JwtSigner {
    /// A JWKS file publishing this key ([`JwtSigner::jwks_file`]), its path as text for `JWKS_FILE`.
    pub fn jwks_path(&self) -> String {
        self.jwks_file().to_string_lossy().to_string()
    }
}

impl Reply {
    /// The seconds of the reply's `Retry-After`, which it must carry.
    pub fn retry_after(&self) -> u64 {
        let value = self.headers["retry-after"].to_str().unwrap();
        value.parse().unwrap()
    }

    /// The message of a JSON `{"error": "…"}` reply, which it must be.
    pub fn error_message(&self) -> String {
        let json = self.json();
        json["error"]
            .as_str()
            .expect("an error message")
            .to_string()
    }
}

/// The environment of `AUTH_MODE=jwt` accepting the tokens of `issuer` for `audience` whose keys the JWKS file
/// `jwks` publishes; a test adds its own settings after these.
pub fn jwt_env<'a>(issuer: &'a str, audience: &'a str, jwks: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("AUTH_MODE", "jwt"),
        ("JWT_ISSUER", issuer),
        ("JWT_AUDIENCE", audience),
        ("JWKS_FILE", jwks),
    ]
}

/// A request with a JSON body or none ([`json_request`]), bearing `token` (`Authorization: Bearer …`) when given.
pub fn bearer_request(
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Request {
    let mut request = json_request(method, path, body);
    if let Some(t) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    request
}

/// A local knowledge base over the sample collection whose data source reads uploads from moto's S3, and the
/// documents' index adapter on it over a new bucket of moto's.
pub struct DocumentIndex {
    pub kb: LocalKnowledgeBase,
    pub index: KnowledgeBaseDocuments,
    /// The bucket the uploads are put in.
    pub bucket: String,
}

/// The knowledge base `kb_id` ([`DocumentIndex`]), each ingestion starting after `ingest_delay_ms`, and the index
/// adapter on it through the real SDK clients, over a new bucket `{bucket_prefix}-…`, waiting at most 10 s.
pub async fn document_index(
    kb_id: &str,
    bucket_prefix: &str,
    ingest_delay_ms: u64,
) -> DocumentIndex {
    let moto = LocalDynamo::shared().sdk_config().await;
    let kb = LocalKnowledgeBase::start_over_s3(kb_id, &moto, ingest_delay_ms)
        .await
        .expect("the local knowledge base starts");
    let bucket = format!("{bucket_prefix}-{}", uuid::Uuid::new_v4().simple());
    let index = KnowledgeBaseDocuments::from_config(
        &moto,
        &kb.sdk_config().await,
        &bucket,
        kb_id,
        DATA_SOURCE_ID,
        Duration::from_secs(10),
        StoreTimeouts::default(),
    );
    index.ensure_bucket().await.expect("the bucket is created");
    DocumentIndex { kb, index, bucket }
}
