//! The retrieval port: what the core asks of a document search (a knowledge base), in its own terms, so that
//! answers can be grounded in a team's documents whatever store holds them.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

/// How the knowledge base searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Vectors and text together (Bedrock Knowledge Bases' `HYBRID`).
    Hybrid,
    /// Vectors only (`SEMANTIC`).
    Semantic,
}

/// A condition on a passage's metadata, as Bedrock Knowledge Bases' `RetrievalFilter` expresses it.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataFilter {
    Equals {
        key: String,
        value: Value,
    },
    NotEquals {
        key: String,
        value: Value,
    },
    /// The attribute is one of `values`.
    In {
        key: String,
        values: Vec<Value>,
    },
    /// The attribute is a list holding `value`.
    ListContains {
        key: String,
        value: Value,
    },
    /// Every filter holds (an empty list holds always).
    AndAll(Vec<MetadataFilter>),
    /// At least one filter holds (an empty list never holds).
    OrAll(Vec<MetadataFilter>),
}

/// One search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    /// The most passages to return.
    pub top: usize,
    pub mode: SearchMode,
    pub filter: Option<MetadataFilter>,
}

/// The metadata key under which Bedrock Knowledge Bases give a passage's page number.
pub const PAGE_NUMBER_KEY: &str = "x-amz-bedrock-kb-document-page-number";

/// A passage found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    pub text: String,
    /// Where the passage comes from: its document's URI (`s3://bucket/Benefit_Options.pdf`) or URL.
    pub source: String,
    /// How well it matched, higher is better; `None` when the knowledge base gave no score.
    pub score: Option<f64>,
    pub metadata: Map<String, Value>,
}

impl Passage {
    /// The name the answer cites the passage by: its document's file name and, when known, its page
    /// (`Benefit_Options.pdf#page=2`).
    pub fn citation(&self) -> String {
        let trimmed = self.source.trim_end_matches('/');
        let without_query = trimmed.split(['?', '#']).next().unwrap_or(trimmed);
        let name = without_query.rsplit('/').next().unwrap_or(without_query);
        let name = if name.is_empty() {
            self.source.as_str()
        } else {
            name
        };
        match self.page() {
            Some(page) => format!("{name}#page={page}"),
            None => name.to_string(),
        }
    }

    /// The page the passage is on, from [`PAGE_NUMBER_KEY`] (a number, or a string holding one).
    pub fn page(&self) -> Option<u64> {
        match self.metadata.get(PAGE_NUMBER_KEY)? {
            Value::Number(n) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
            Value::String(s) => s.trim().parse::<f64>().ok().map(|f| f as u64),
            _ => None,
        }
    }
}

/// A fault of the knowledge base, already classified (as the model's are).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("the knowledge base throttled the search past the client's retries")]
    Throttled,
    #[error("the backend may not search the knowledge base: {0}")]
    AccessDenied(String),
    #[error("the knowledge base does not exist: {0}")]
    NotFound(String),
    #[error("the knowledge base rejected the search: {0}")]
    Rejected(String),
    #[error("the knowledge base did not answer in time: {0}")]
    Timeout(String),
    #[error("the knowledge base is unavailable: {0}")]
    Unavailable(String),
    #[error("the search failed: {0}")]
    Failed(String),
}

/// What a search returns, boxed so that a retriever can be held as `dyn Retriever` (retrieval is optional).
pub type SearchFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Passage>, SearchError>> + Send + 'a>>;

/// A document search. Implementations bound every call with a timeout and classify their faults.
pub trait Retriever: Send + Sync {
    /// The passages that best match the request, best first, at most `request.top`.
    fn retrieve<'a>(&'a self, request: &'a SearchRequest) -> SearchFuture<'a>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn passage(source: &str, metadata: Value) -> Passage {
        Passage {
            text: "t".into(),
            source: source.into(),
            score: None,
            metadata: metadata.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn a_citation_is_the_file_name_and_its_page() {
        let p = passage(
            "s3://bucket/docs/Benefit_Options.pdf",
            json!({PAGE_NUMBER_KEY: 2.0}),
        );
        assert_eq!(p.citation(), "Benefit_Options.pdf#page=2");
        let p = passage("s3://bucket/docs/Handbook.md", json!({}));
        assert_eq!(p.citation(), "Handbook.md");
        let p = passage(
            "https://example.com/wiki/Leave?x=1",
            json!({PAGE_NUMBER_KEY: "3"}),
        );
        assert_eq!(p.citation(), "Leave#page=3");
    }
}
