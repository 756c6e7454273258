//! [`FakeRetriever`]: the retrieval port answering scripted passages or faults, and recording every search.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use chat_core::{Passage, Retriever, SearchError, SearchFuture, SearchRequest};

#[derive(Default)]
struct Inner {
    answers: VecDeque<Result<Vec<Passage>, SearchError>>,
    requests: Vec<SearchRequest>,
}

/// A retriever that answers each search with the next queued answer (no passages once the queue is empty, as a
/// knowledge base with nothing relevant), at most `request.top` of them. Clones share the queue and the record.
#[derive(Clone, Default)]
pub struct FakeRetriever {
    inner: Arc<Mutex<Inner>>,
}

impl FakeRetriever {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next search finds `passages`.
    pub fn push(&self, passages: Vec<Passage>) -> &Self {
        self.lock().answers.push_back(Ok(passages));
        self
    }

    /// The next search fails with `error`.
    pub fn fail_next(&self, error: SearchError) -> &Self {
        self.lock().answers.push_back(Err(error));
        self
    }

    /// Every search received, in order.
    pub fn requests(&self) -> Vec<SearchRequest> {
        self.lock().requests.clone()
    }

    /// A passage of `text` from `source`, with a score and no metadata.
    pub fn passage(text: &str, source: &str, score: f64) -> Passage {
        Passage {
            text: text.into(),
            source: source.into(),
            score: Some(score),
            metadata: Default::default(),
        }
    }
}

impl Retriever for FakeRetriever {
    fn retrieve<'a>(&'a self, request: &'a SearchRequest) -> SearchFuture<'a> {
        let answer = {
            let mut inner = self.lock();
            inner.requests.push(request.clone());
            inner.answers.pop_front().unwrap_or_else(|| Ok(Vec::new()))
        };
        Box::pin(async move {
            answer.map(|mut passages| {
                passages.truncate(request.top);
                passages
            })
        })
    }
}
