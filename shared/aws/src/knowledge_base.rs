//! The retrieval port on Amazon Bedrock Knowledge Bases' `Retrieve` API.
//!
//! Faults are classified as follows:
//!
//! | the service or the SDK says | [`SearchError`] |
//! |---|---|
//! | `ThrottlingException`, `ServiceQuotaExceededException` (after the SDK's retries) | `Throttled` |
//! | `AccessDeniedException` | `AccessDenied` |
//! | `ResourceNotFoundException` (an unknown knowledge base) | `NotFound` |
//! | `ValidationException` | `Rejected` |
//! | the SDK's operation or attempt timeout, or the adapter's own | `Timeout` |
//! | `ServiceUnavailableException`, `BadGatewayException`, `DependencyFailedException`, `InternalServerException`, any other 5xx, and a connection that cannot be made | `Unavailable`: the service (or its vector store) cannot answer now, a later search may succeed |
//! | anything else (`ConflictException`, an answer the SDK cannot read, …) | `Failed` |

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_bedrockagentruntime::Client;
use aws_sdk_bedrockagentruntime::config::http::HttpResponse;
use aws_sdk_bedrockagentruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockagentruntime::operation::retrieve::{RetrieveError, RetrieveOutput};
use aws_sdk_bedrockagentruntime::types::{
    FilterAttribute, KnowledgeBaseQuery, KnowledgeBaseRetrievalConfiguration,
    KnowledgeBaseRetrievalResult, KnowledgeBaseVectorSearchConfiguration, RetrievalFilter,
    SearchType,
};
use aws_smithy_types::{Document, Number};
use chat_core::{
    MetadataFilter, Passage, Retriever, SearchError, SearchFuture, SearchMode, SearchRequest,
};
use serde_json::{Map, Value};
use tracing::Instrument;

/// The most members Bedrock accepts in one `andAll` / `orAll` (and the fewest is two).
pub const MAX_GROUP_MEMBERS: usize = 5;
/// The most results Bedrock returns for one search (`numberOfResults` is 1 to 100).
pub const MAX_RESULTS: usize = 100;

/// A Bedrock knowledge base as the retriever; holds one SDK client, built once per cold start.
#[derive(Clone)]
pub struct BedrockKnowledgeBase {
    client: Client,
    knowledge_base_id: String,
    timeout: Duration,
}

impl BedrockKnowledgeBase {
    /// A client from the shared AWS configuration (`AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME` points it at a local
    /// server). `timeout` bounds a whole search: every attempt, and the back-offs between them.
    pub fn new(
        config: &aws_config::SdkConfig,
        knowledge_base_id: String,
        timeout: Duration,
    ) -> Self {
        let conf = aws_sdk_bedrockagentruntime::config::Builder::from(config)
            .timeout_config(crate::whole_call_timeout(timeout))
            .build();
        Self {
            client: Client::from_conf(conf),
            knowledge_base_id,
            timeout,
        }
    }

    /// The retriever of a function's turns, built once per cold start: the knowledge base `knowledge_base_id`
    /// names (`KNOWLEDGE_BASE_ID`), or `None` when none is configured and answers come from the model alone.
    pub fn configured(
        config: &aws_config::SdkConfig,
        knowledge_base_id: Option<String>,
        timeout: Duration,
    ) -> Option<std::sync::Arc<dyn chat_core::Retriever>> {
        knowledge_base_id.map(|id| {
            std::sync::Arc::new(Self::new(config, id, timeout))
                as std::sync::Arc<dyn chat_core::Retriever>
        })
    }

    pub fn knowledge_base_id(&self) -> &str {
        &self.knowledge_base_id
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<Passage>, SearchError> {
        let filter = match request.filter.as_ref().map(retrieval_filter).transpose()? {
            Some(Condition::Never) => return Ok(Vec::new()), // nothing can match: no need to ask
            Some(Condition::Filter(f)) => Some(f),
            Some(Condition::Always) | None => None,
        };
        if request.top == 0 {
            return Ok(Vec::new());
        }
        let search = KnowledgeBaseVectorSearchConfiguration::builder()
            .number_of_results(request.top.min(MAX_RESULTS) as i32)
            .override_search_type(match request.mode {
                SearchMode::Hybrid => SearchType::Hybrid,
                SearchMode::Semantic => SearchType::Semantic,
            })
            .set_filter(filter)
            .build();
        let started = Instant::now();
        // The knowledge base (configuration), how many passages were asked and found: never the query.
        let span = tracing::info_span!(
            "kb.retrieve",
            knowledge_base_id = %self.knowledge_base_id,
            top = request.top,
            outcome = tracing::field::Empty,
            passages = tracing::field::Empty
        );
        let call = self
            .client
            .retrieve()
            .knowledge_base_id(&self.knowledge_base_id)
            .retrieval_query(KnowledgeBaseQuery::builder().text(&request.query).build())
            .retrieval_configuration(
                KnowledgeBaseRetrievalConfiguration::builder()
                    .vector_search_configuration(search)
                    .build(),
            )
            .send();
        let output = match tokio::time::timeout(self.timeout, call)
            .instrument(span.clone())
            .await
        {
            Ok(output) => output.map_err(classify),
            Err(_) => Err(SearchError::Timeout(format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
        .map_err(|err| {
            span.record("outcome", "error");
            tracing::warn!(
                operation = "Retrieve",
                knowledge_base_id = %self.knowledge_base_id,
                latency_ms = started.elapsed().as_millis() as u64,
                error = %err,
                "knowledge base call failed"
            );
            err
        })?;
        let passages = passages(&output, request.top);
        span.record("outcome", "ok");
        span.record("passages", passages.len());
        tracing::info!(
            operation = "Retrieve",
            knowledge_base_id = %self.knowledge_base_id,
            latency_ms = started.elapsed().as_millis() as u64,
            passages = passages.len(),
            "knowledge base answered"
        );
        Ok(passages)
    }
}

impl Retriever for BedrockKnowledgeBase {
    fn retrieve<'a>(&'a self, request: &'a SearchRequest) -> SearchFuture<'a> {
        Box::pin(self.search(request))
    }
}

/// A [`MetadataFilter`] in the terms Bedrock accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Holds for every passage (an empty `AndAll`): send no filter.
    Always,
    /// Holds for no passage (an empty `OrAll`, an empty `In`): do not search at all.
    Never,
    Filter(RetrievalFilter),
}

/// Translates a filter into Bedrock's: a group of one member becomes that member and a group of more than
/// [`MAX_GROUP_MEMBERS`] is nested (Bedrock wants 2 to 5 members), groups that always or never hold are folded away.
pub fn retrieval_filter(filter: &MetadataFilter) -> Result<Condition, SearchError> {
    let attribute = |key: &str, value: Document| {
        FilterAttribute::builder()
            .key(key)
            .value(value)
            .build()
            .map_err(|e| SearchError::Rejected(e.to_string()))
    };
    let leaf = |f: RetrievalFilter| Ok(Condition::Filter(f));
    match filter {
        MetadataFilter::Equals { key, value } => {
            leaf(RetrievalFilter::Equals(attribute(key, document(value))?))
        }
        MetadataFilter::NotEquals { key, value } => {
            leaf(RetrievalFilter::NotEquals(attribute(key, document(value))?))
        }
        MetadataFilter::ListContains { key, value } => leaf(RetrievalFilter::ListContains(
            attribute(key, document(value))?,
        )),
        // Nothing is in an empty list.
        MetadataFilter::In { values, .. } if values.is_empty() => Ok(Condition::Never),
        MetadataFilter::In { key, values } => leaf(RetrievalFilter::In(attribute(
            key,
            Document::Array(values.iter().map(document).collect()),
        )?)),
        MetadataFilter::AndAll(members) => joined(members, RetrievalFilter::AndAll, false),
        MetadataFilter::OrAll(members) => joined(members, RetrievalFilter::OrAll, true),
    }
}

/// Members joined by `join` (`andAll` / `orAll`, both associative) so that each group has 2 to
/// [`MAX_GROUP_MEMBERS`] members: one member stands alone, more than five are nested in groups of at most five.
/// `None` for no members.
/// A group of `members` joined by `join`: with `any` (an `OrAll`) a member that always holds makes the group
/// always hold, and one that never holds is dropped (an empty group never holds); without (an `AndAll`) the other
/// way round.
fn joined(
    members: &[MetadataFilter],
    join: fn(Vec<RetrievalFilter>) -> RetrievalFilter,
    any: bool,
) -> Result<Condition, SearchError> {
    let mut kept = Vec::new();
    for member in members {
        match retrieval_filter(member)? {
            Condition::Filter(f) => kept.push(f),
            // The member that decides the group: one that always holds for an `OrAll`, never for an `AndAll`.
            Condition::Always if any => return Ok(Condition::Always),
            Condition::Never if !any => return Ok(Condition::Never),
            Condition::Always | Condition::Never => {}
        }
    }
    let empty = if any {
        Condition::Never
    } else {
        Condition::Always
    };
    Ok(group(kept, join).map_or(empty, Condition::Filter))
}

fn group(
    mut members: Vec<RetrievalFilter>,
    join: fn(Vec<RetrievalFilter>) -> RetrievalFilter,
) -> Option<RetrievalFilter> {
    while members.len() > MAX_GROUP_MEMBERS {
        members = members
            .chunks(MAX_GROUP_MEMBERS)
            .map(|chunk| match chunk {
                [one] => one.clone(),
                many => join(many.to_vec()),
            })
            .collect();
    }
    match members.len() {
        0 => None,
        1 => members.pop(),
        _ => Some(join(members)),
    }
}

/// A JSON value as an SDK document.
fn document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or_default())
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), document(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// An SDK document as JSON (objects with their keys sorted, so the same answer gives the same value); a number
/// JSON cannot hold (NaN, infinity) is null.
pub(crate) fn json(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(json).collect()),
        Document::Object(map) => Value::Object(sorted(map)),
    }
}

fn sorted(map: &HashMap<String, Document>) -> Map<String, Value> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
        .into_iter()
        .map(|(k, v)| (k.clone(), json(v)))
        .collect()
}

/// Where a result comes from: the URI or URL of whichever location it has, else the source URI in its metadata.
fn source(result: &KnowledgeBaseRetrievalResult) -> String {
    let location = result.location().and_then(|l| {
        l.s3_location()
            .and_then(|x| x.uri())
            .or_else(|| l.web_location().and_then(|x| x.url()))
            .or_else(|| l.confluence_location().and_then(|x| x.url()))
            .or_else(|| l.share_point_location().and_then(|x| x.url()))
            .or_else(|| l.salesforce_location().and_then(|x| x.url()))
            .or_else(|| l.one_drive_location().and_then(|x| x.url()))
            .or_else(|| l.google_drive_location().and_then(|x| x.url()))
            .or_else(|| l.kendra_document_location().and_then(|x| x.uri()))
            .or_else(|| l.custom_document_location().and_then(|x| x.id()))
    });
    let from_metadata = || {
        result
            .metadata()
            .and_then(|m| m.get("x-amz-bedrock-kb-source-uri"))
            .and_then(|d| d.as_string())
    };
    location
        .or_else(from_metadata)
        .unwrap_or_default()
        .to_string()
}

fn passages(output: &RetrieveOutput, top: usize) -> Vec<Passage> {
    output
        .retrieval_results()
        .iter()
        .filter_map(|result| {
            let text = result.content()?.text();
            (!text.is_empty()).then(|| Passage {
                text: text.to_string(),
                source: source(result),
                score: result.score(),
                metadata: result.metadata().map(sorted).unwrap_or_default(),
            })
        })
        .take(top)
        .collect()
}

/// Classifies a fault by its error code and, for codes it does not know, its HTTP status (see the module's table).
fn classify(err: SdkError<RetrieveError, HttpResponse>) -> SearchError {
    match &err {
        SdkError::ServiceError(ctx) => {
            let e = ctx.err();
            let message = e.message().unwrap_or_default().to_string();
            let code = e.code().unwrap_or_default();
            match code {
                "ThrottlingException" | "ServiceQuotaExceededException" => SearchError::Throttled,
                "AccessDeniedException" => SearchError::AccessDenied(message),
                "ResourceNotFoundException" => SearchError::NotFound(message),
                "ValidationException" => SearchError::Rejected(message),
                "ServiceUnavailableException"
                | "BadGatewayException"
                | "DependencyFailedException"
                | "InternalServerException" => {
                    SearchError::Unavailable(format!("{code}: {message}"))
                }
                _ if ctx.raw().status().is_server_error() => {
                    SearchError::Unavailable(format!("{code}: {message}"))
                }
                _ => SearchError::Failed(format!("{code}: {message}")),
            }
        }
        SdkError::TimeoutError(_) => {
            SearchError::Timeout("no answer within the configured timeout".into())
        }
        SdkError::DispatchFailure(f) => {
            SearchError::Unavailable(format!("cannot reach the knowledge base: {f:?}"))
        }
        _ => SearchError::Failed(format!("{err:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eq(key: &str, value: Value) -> MetadataFilter {
        MetadataFilter::Equals {
            key: key.into(),
            value,
        }
    }

    /// A filter's shape: the operator tree with the keys at its leaves.
    fn shape(f: &RetrievalFilter) -> String {
        match f {
            RetrievalFilter::AndAll(m) => {
                format!("and({})", m.iter().map(shape).collect::<Vec<_>>().join(","))
            }
            RetrievalFilter::OrAll(m) => {
                format!("or({})", m.iter().map(shape).collect::<Vec<_>>().join(","))
            }
            RetrievalFilter::Equals(a) => a.key().to_string(),
            RetrievalFilter::NotEquals(a) => format!("!{}", a.key()),
            RetrievalFilter::In(a) => format!("in:{}", a.key()),
            RetrievalFilter::ListContains(a) => format!("has:{}", a.key()),
            other => format!("{other:?}"),
        }
    }

    fn translated(f: &MetadataFilter) -> String {
        match retrieval_filter(f).unwrap() {
            Condition::Always => "always".into(),
            Condition::Never => "never".into(),
            Condition::Filter(f) => shape(&f),
        }
    }

    #[test]
    fn groups_are_folded_to_what_bedrock_accepts() {
        use MetadataFilter::{AndAll, OrAll};
        assert_eq!(translated(&AndAll(vec![])), "always");
        assert_eq!(translated(&OrAll(vec![])), "never");
        assert_eq!(translated(&OrAll(vec![eq("a", json!(1))])), "a");
        assert_eq!(
            translated(&AndAll(vec![eq("a", json!(1)), AndAll(vec![])])),
            "a"
        );
        assert_eq!(
            translated(&AndAll(vec![eq("a", json!(1)), OrAll(vec![])])),
            "never"
        );
        assert_eq!(
            translated(&OrAll(vec![eq("a", json!(1)), AndAll(vec![])])),
            "always"
        );
        assert_eq!(
            translated(&MetadataFilter::In {
                key: "k".into(),
                values: vec![]
            }),
            "never"
        );
        let keys = |n: usize| {
            (1..=n)
                .map(|i| eq(&format!("k{i}"), json!(i)))
                .collect::<Vec<_>>()
        };
        assert_eq!(translated(&OrAll(keys(5))), "or(k1,k2,k3,k4,k5)");
        assert_eq!(translated(&OrAll(keys(6))), "or(or(k1,k2,k3,k4,k5),k6)");
        assert_eq!(
            translated(&AndAll(keys(7))),
            "and(and(k1,k2,k3,k4,k5),and(k6,k7))"
        );
        let many = translated(&OrAll(keys(30)));
        assert!(many.starts_with("or(or(or("), "{many}");
        // Every group of a large filter has 2 to 5 members.
        fn check(f: &RetrievalFilter) {
            if let RetrievalFilter::AndAll(m) | RetrievalFilter::OrAll(m) = f {
                assert!((2..=MAX_GROUP_MEMBERS).contains(&m.len()), "{m:?}");
                m.iter().for_each(check);
            }
        }
        for n in 2..40 {
            if let Condition::Filter(f) = retrieval_filter(&OrAll(keys(n))).unwrap() {
                check(&f);
            }
        }
    }

    #[test]
    fn values_cross_between_json_and_documents() {
        let value = json!({"a": [1, -2, 2.5, "x", true, null], "b": {"c": 3}});
        assert_eq!(json(&document(&value)), value);
    }
}
