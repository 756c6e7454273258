//! A local Bedrock Knowledge Base: `POST /knowledgebases/{knowledgeBaseId}/retrieve` in the real REST-JSON wire
//! format of the `Retrieve` API, so that tests and the local run exercise the real SDK client
//! (`aws-sdk-bedrockagentruntime`).
//!
//! It serves one knowledge base id (any other id is a `ResourceNotFoundException`), over a folder of documents
//! indexed at start in RAM with tantivy (BM25). The folder's conventions (see `samples/knowledge-base/README.md`):
//!
//! - every `X.md` / `X.txt` (not `README.md`) is a document, with the source URI `s3://local-knowledge-base/X.md`;
//! - `X.md.metadata.json` holds its attributes, in Bedrock's S3 convention: `{"metadataAttributes": {…}}`;
//! - a line holding only `<!-- page N -->` starts page N; a passage never spans two pages, and the passages of a
//!   paged document carry `x-amz-bedrock-kb-document-page-number` (a number, as Bedrock gives for PDFs);
//! - a passage is a run of paragraphs of up to about 600 characters.
//!
//! Every passage's metadata is its document's attributes plus `x-amz-bedrock-kb-source-uri`,
//! `x-amz-bedrock-kb-chunk-id` and `x-amz-bedrock-kb-data-source-id`.
//!
//! The request's `numberOfResults` (default 5; outside 1..=100 a `ValidationException`) and `filter` (every
//! operator of `RetrievalFilter`; `andAll` / `orAll` need 2 to 5 members, as the service requires) are honoured;
//! the filter applies before the top is taken. `overrideSearchType` (`HYBRID` / `SEMANTIC`) is checked and
//! recorded, but both search the text index. Scores are BM25 mapped into (0, 1] by `bm25 / (bm25 + 1)`:
//! deterministic and in the same order. All results come in one page (no `nextToken`).
//!
//! Directives in the query text ask for faults and pacing; they are removed before the search:
//!
//! | directive | effect |
//! |---|---|
//! | `[[kb-fault:throttle]]` | `ThrottlingException` (429) on every attempt |
//! | `[[kb-fault:access-denied]]` | `AccessDeniedException` (403) |
//! | `[[kb-fault:not-found]]` | `ResourceNotFoundException` (404) |
//! | `[[kb-fault:validation]]` | `ValidationException` (400) |
//! | `[[kb-fault:quota]]` | `ServiceQuotaExceededException` (400) |
//! | `[[kb-fault:dependency-failed]]` | `DependencyFailedException` (424) |
//! | `[[kb-fault:internal]]` | `InternalServerException` (500) |
//! | `[[kb-fault:bad-gateway]]` | `BadGatewayException` (502) |
//! | `[[kb-fault:unavailable]]` | `ServiceUnavailableException` (503) |
//! | `[[kb-delay-ms:N]]` | wait N ms before answering (or failing) |
//!
//! `GET /__local/requests` lists the requests received, for tests that run the server in another process.

mod collection;
mod documents;
mod filter;
mod index;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub use collection::{
    BUCKET, CHUNK_ID_KEY, Chunk, DATA_SOURCE_ID, DATA_SOURCE_ID_KEY, PAGE_NUMBER_KEY,
    SOURCE_URI_KEY,
};
pub use documents::{parse as parse_document, strip_html};
pub use filter::{Filter, Op};
pub use index::{Hit, TextIndex, normalise, terms};

/// The bounds Bedrock puts on `numberOfResults`.
pub const NUMBER_OF_RESULTS: std::ops::RangeInclusive<i64> = 1..=100;
/// `numberOfResults` when the request has none.
pub const DEFAULT_NUMBER_OF_RESULTS: usize = 5;

/// One `Retrieve` request the server received, for tests to inspect.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The id in the path (also when it is not the one served).
    pub knowledge_base_id: String,
    /// The request body as sent.
    pub body: Value,
}

impl RecordedRequest {
    /// `retrievalQuery.text`, directives included.
    pub fn query(&self) -> Option<&str> {
        self.body
            .pointer("/retrievalQuery/text")
            .and_then(Value::as_str)
    }

    /// `overrideSearchType` (`HYBRID` / `SEMANTIC`), when the request set one.
    pub fn search_type(&self) -> Option<&str> {
        self.vector_search("overrideSearchType")
            .and_then(Value::as_str)
    }

    /// `numberOfResults`, when the request set one.
    pub fn number_of_results(&self) -> Option<i64> {
        self.vector_search("numberOfResults")
            .and_then(Value::as_i64)
    }

    /// The `filter` as sent.
    pub fn filter(&self) -> Option<&Value> {
        self.vector_search("filter")
    }

    fn vector_search(&self, field: &str) -> Option<&Value> {
        self.body
            .pointer("/retrievalConfiguration/vectorSearchConfiguration")?
            .get(field)
    }
}

struct Served {
    knowledge_base_id: String,
    /// The collection's passages and the indexed uploads', rebuilt when an upload is indexed or deleted.
    index: RwLock<TextIndex>,
    /// The collection's own passages.
    collection: Vec<Chunk>,
    /// The documents ingested through the document APIs.
    ingestions: Mutex<documents::Ingestions>,
    /// Where ingested documents are read from.
    s3: Option<aws_sdk_s3::Client>,
    /// How long an ingestion waits before it starts (the service's take seconds).
    ingest_delay_ms: u64,
    requests: Mutex<Vec<RecordedRequest>>,
    /// How many documents `IngestKnowledgeBaseDocuments` was given, for tests that count ingestions.
    ingest_count: std::sync::atomic::AtomicUsize,
}

impl Served {
    /// Rebuilds the index over the collection and every indexed upload (a few hundred passages: milliseconds).
    fn reindex(&self, ingestions: &documents::Ingestions) {
        let mut chunks = self.collection.clone();
        for ingested in ingestions.values() {
            chunks.extend(ingested.chunks.iter().cloned());
        }
        match TextIndex::build(chunks) {
            Ok(index) => *self.index.write().unwrap() = index,
            Err(e) => eprintln!("local-knowledge-base: the index could not be rebuilt: {e}"),
        }
    }
}

/// What the document APIs need beyond the collection: where uploads are read from.
#[derive(Clone, Default)]
pub struct DocumentSource {
    /// The SDK configuration of the S3 server that holds uploaded documents (moto's); `None`: an ingestion fails
    /// saying it cannot read S3.
    pub s3: Option<aws_config::SdkConfig>,
    /// How long an ingestion waits before it starts, in milliseconds.
    pub ingest_delay_ms: u64,
}

/// A running server; it stops when dropped.
pub struct LocalKnowledgeBase {
    addr: SocketAddr,
    served: Arc<Served>,
    task: tokio::task::JoinHandle<()>,
}

/// The sample collection the tests serve (`samples/knowledge-base`).
pub fn sample_collection() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base")
}

impl LocalKnowledgeBase {
    /// Serves `knowledge_base_id` over the [`sample_collection`] on `127.0.0.1` and a free port, its data source's
    /// documents read from the S3 server `s3` configures (moto's), each ingestion starting after `ingest_delay_ms`.
    pub async fn start_over_s3(
        knowledge_base_id: impl Into<String>,
        s3: &aws_config::SdkConfig,
        ingest_delay_ms: u64,
    ) -> std::io::Result<Self> {
        let source = DocumentSource {
            s3: Some(s3.clone()),
            ingest_delay_ms,
        };
        let addr = "127.0.0.1:0".parse().unwrap();
        Self::start_with(addr, knowledge_base_id, sample_collection(), source).await
    }

    /// Serves `knowledge_base_id` over the documents of `collection_dir`, on `127.0.0.1` and a free port.
    pub async fn start(
        knowledge_base_id: impl Into<String>,
        collection_dir: impl AsRef<Path>,
    ) -> std::io::Result<Self> {
        Self::start_on(
            "127.0.0.1:0".parse().unwrap(),
            knowledge_base_id,
            collection_dir,
        )
        .await
    }

    /// Serves `knowledge_base_id` over the documents of `collection_dir`, on `addr`.
    pub async fn start_on(
        addr: SocketAddr,
        knowledge_base_id: impl Into<String>,
        collection_dir: impl AsRef<Path>,
    ) -> std::io::Result<Self> {
        Self::start_with(
            addr,
            knowledge_base_id,
            collection_dir,
            DocumentSource::default(),
        )
        .await
    }

    /// Serves `knowledge_base_id` over the documents of `collection_dir` on `addr`, and its data source
    /// [`DATA_SOURCE_ID`]'s document APIs over the S3 server `documents` names.
    pub async fn start_with(
        addr: SocketAddr,
        knowledge_base_id: impl Into<String>,
        collection_dir: impl AsRef<Path>,
        documents: DocumentSource,
    ) -> std::io::Result<Self> {
        let collection = collection::load(collection_dir.as_ref())?;
        let index = TextIndex::build(collection.clone())?;
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let s3 = documents.s3.as_ref().map(|config| {
            aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(config)
                    .force_path_style(true)
                    .build(),
            )
        });
        let served = Arc::new(Served {
            knowledge_base_id: knowledge_base_id.into(),
            index: RwLock::new(index),
            collection,
            ingestions: Mutex::new(Default::default()),
            s3,
            ingest_delay_ms: documents.ingest_delay_ms,
            requests: Mutex::new(Vec::new()),
            ingest_count: Default::default(),
        });
        let documents_path =
            "/knowledgebases/{knowledge_base_id}/datasources/{data_source_id}/documents";
        let app = Router::new()
            .route(
                "/knowledgebases/{knowledge_base_id}/retrieve",
                post(retrieve),
            )
            .route(
                documents_path,
                put(documents::ingest).post(documents::list_documents),
            )
            .route(
                &format!("{documents_path}/getDocuments"),
                post(documents::get_documents),
            )
            .route(
                &format!("{documents_path}/deleteDocuments"),
                post(documents::delete_documents),
            )
            .route("/__local/requests", get(inspect))
            .with_state(served.clone());
        // Small answers leave as they are written, not after the client's delayed ACK.
        let task = local_serve::serve(listener, app);
        Ok(Self { addr, served, task })
    }

    /// The endpoint URL to give the SDK (`AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The knowledge base id served.
    pub fn knowledge_base_id(&self) -> &str {
        &self.served.knowledge_base_id
    }

    /// How many passages the collection was cut into.
    pub fn passages(&self) -> usize {
        self.served.index.read().unwrap().chunks().len()
    }

    /// The status the data source holds for the document at `uri` (`s3://bucket/key`), if it was given one.
    pub fn document_status(&self, uri: &str) -> Option<(String, Option<String>)> {
        self.served
            .ingestions
            .lock()
            .unwrap()
            .get(uri)
            .map(|d| (d.status.to_string(), d.reason.clone()))
    }

    /// How many documents `IngestKnowledgeBaseDocuments` was given so far (each document of each request).
    pub fn ingested_documents(&self) -> usize {
        self.served
            .ingest_count
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// An SDK configuration whose clients talk to this server: test credentials, region `us-east-1`, and the SDK's
    /// standard retries with short back-offs so throttling tests stay quick.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        local_serve::sdk_config(self.endpoint(), "local-knowledge-base").await
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.served.requests.lock().unwrap().clone()
    }

    /// Runs until the task ends (never, unless the listener fails).
    pub async fn wait(self) {
        let _ = (&mut { self }.task).await;
    }
}

impl Drop for LocalKnowledgeBase {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `GET /__local/requests`: the bodies received, with the knowledge base id of each.
async fn inspect(State(served): State<Arc<Served>>) -> Response {
    let requests: Vec<Value> = served
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| json!({"knowledgeBaseId": r.knowledge_base_id, "body": r.body}))
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        Value::Array(requests).to_string(),
    )
        .into_response()
}

/// An error as the service sends it: the status, `x-amzn-errortype`, and `{"message"}`.
pub(crate) fn error(status: u16, kind: &str, message: impl Into<String>) -> Response {
    let mut response = (
        StatusCode::from_u16(status).expect("a valid status"),
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-amzn-errortype"),
                format!(
                    "{kind}:http://internal.amazon.com/coral/com.amazon.bedrock.agent.runtime/"
                ),
            ),
        ],
        json!({ "message": message.into() }).to_string(),
    )
        .into_response();
    response.headers_mut().insert(
        "x-amzn-requestid",
        header::HeaderValue::from_static("00000000-0000-0000-0000-000000000000"),
    );
    response
}

pub(crate) fn validation(message: impl Into<String>) -> Response {
    error(400, "ValidationException", message)
}

fn directive<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("[[{name}:"))? + name.len() + 3;
    let end = start + text[start..].find("]]")?;
    Some(&text[start..end])
}

/// The text without its `[[…]]` directives.
fn strip_directives(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The error a `[[kb-fault:…]]` directive asks for.
fn fault(name: &str) -> Option<Response> {
    Some(match name {
        "throttle" => error(429, "ThrottlingException", "Rate exceeded"),
        "access-denied" => error(
            403,
            "AccessDeniedException",
            "User is not authorized to perform: bedrock:Retrieve on resource",
        ),
        "not-found" => error(404, "ResourceNotFoundException", "Knowledge base not found"),
        "validation" => validation("The provided request is not valid"),
        "quota" => error(
            400,
            "ServiceQuotaExceededException",
            "The request exceeds a service quota",
        ),
        "dependency-failed" => error(
            424,
            "DependencyFailedException",
            "The vector store did not answer",
        ),
        "internal" => error(500, "InternalServerException", "Internal server error"),
        "bad-gateway" => error(502, "BadGatewayException", "Bad gateway"),
        "unavailable" => error(
            503,
            "ServiceUnavailableException",
            "Service is unavailable. Try again later.",
        ),
        _ => return None,
    })
}

/// What a request asks for, validated as the service validates it.
struct Search {
    query: String,
    top: usize,
    filter: Option<filter::Filter>,
}

/// The error is the `ValidationException` message.
fn search_of(body: &Value) -> Result<Search, String> {
    let text = body
        .pointer("/retrievalQuery/text")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            String::from("1 validation error detected: Value null at 'retrievalQuery.text' failed to satisfy constraint: Member must not be null")
        })?;
    let config = body.pointer("/retrievalConfiguration/vectorSearchConfiguration");
    let field = |name: &str| config.and_then(|c| c.get(name)).filter(|v| !v.is_null());
    let top = match field("numberOfResults") {
        None => DEFAULT_NUMBER_OF_RESULTS,
        Some(n) => match n.as_i64().filter(|n| NUMBER_OF_RESULTS.contains(n)) {
            Some(n) => n as usize,
            None => {
                return Err(format!(
                    "1 validation error detected: Value '{n}' at 'retrievalConfiguration.vectorSearchConfiguration.numberOfResults' failed to satisfy constraint: Member must have value between {} and {}",
                    NUMBER_OF_RESULTS.start(),
                    NUMBER_OF_RESULTS.end()
                ));
            }
        },
    };
    if let Some(kind) = field("overrideSearchType")
        && !matches!(kind.as_str(), Some("HYBRID" | "SEMANTIC"))
    {
        return Err(format!(
            "1 validation error detected: Value {kind} at 'retrievalConfiguration.vectorSearchConfiguration.overrideSearchType' failed to satisfy constraint: Member must satisfy enum value set: [HYBRID, SEMANTIC]"
        ));
    }
    let filter = field("filter")
        .map(|f| filter::parse(f, "retrievalConfiguration.vectorSearchConfiguration.filter"))
        .transpose()?;
    Ok(Search {
        query: strip_directives(text),
        top,
        filter,
    })
}

async fn retrieve(
    State(served): State<Arc<Served>>,
    UrlPath(knowledge_base_id): UrlPath<String>,
    bytes: Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(body) => body,
        Err(_) => return error(400, "SerializationException", "body is not JSON"),
    };
    served.requests.lock().unwrap().push(RecordedRequest {
        knowledge_base_id: knowledge_base_id.clone(),
        body: body.clone(),
    });
    let text = body
        .pointer("/retrievalQuery/text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(ms) = directive(text, "kb-delay-ms").and_then(|n| n.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if knowledge_base_id != served.knowledge_base_id {
        return error(
            404,
            "ResourceNotFoundException",
            format!("Knowledge base {knowledge_base_id} does not exist"),
        );
    }
    if let Some(response) = directive(text, "kb-fault").and_then(fault) {
        return response;
    }
    let search = match search_of(&body) {
        Ok(search) => search,
        Err(message) => return validation(message),
    };
    // A page of a previous answer: every answer is one page, so there is nothing after it.
    if body.get("nextToken").is_some_and(|t| !t.is_null()) {
        return ok(json!({"retrievalResults": []}));
    }
    let index = served.index.read().unwrap();
    let hits = match index.search(&search.query, search.top, search.filter.as_ref()) {
        Ok(hits) => hits,
        Err(e) => return error(500, "InternalServerException", e.to_string()),
    };
    let results: Vec<Value> = hits
        .iter()
        .map(|hit| {
            let chunk = &index.chunks()[hit.chunk];
            json!({
                "content": {"text": chunk.text, "type": "TEXT"},
                "location": {"type": "S3", "s3Location": {"uri": chunk.source_uri}},
                "metadata": chunk.metadata,
                "score": hit.score,
            })
        })
        .collect();
    ok(json!({ "retrievalResults": results }))
}

pub(crate) fn ok(body: Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (
                header::HeaderName::from_static("x-amzn-requestid"),
                "00000000-0000-0000-0000-000000000000",
            ),
        ],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_read_and_removed() {
        let text = "dental [[kb-fault:throttle]] plans [[kb-delay-ms:20]]";
        assert_eq!(directive(text, "kb-fault"), Some("throttle"));
        assert_eq!(directive(text, "kb-delay-ms"), Some("20"));
        assert_eq!(strip_directives(text), "dental plans");
    }

    #[test]
    fn requests_are_validated_as_the_service_does() {
        let ok = |body: Value| search_of(&body).is_ok();
        let query = json!({"text": "tents"});
        assert!(ok(json!({"retrievalQuery": query})));
        assert_eq!(
            search_of(&json!({"retrievalQuery": query}))
                .ok()
                .unwrap()
                .top,
            DEFAULT_NUMBER_OF_RESULTS
        );
        assert!(!ok(json!({})));
        for n in [0, 101, -1] {
            assert!(!ok(
                json!({"retrievalQuery": query, "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": n}}})
            ));
        }
        for n in [1, 100] {
            assert!(ok(
                json!({"retrievalQuery": query, "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": n}}})
            ));
        }
        assert!(!ok(
            json!({"retrievalQuery": query, "retrievalConfiguration": {"vectorSearchConfiguration": {"overrideSearchType": "KEYWORD"}}})
        ));
        assert!(!ok(
            json!({"retrievalQuery": query, "retrievalConfiguration": {"vectorSearchConfiguration": {"filter": {"orAll": [{"equals": {"key": "a", "value": 1}}]}}}})
        ));
    }
}
