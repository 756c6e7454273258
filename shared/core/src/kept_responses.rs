//! The port to the responses a Responses API client asks to keep (`store: true`, OpenAI's default): each response
//! under its owner with the conversation it continues, until it expires, so that `previous_response_id` can continue
//! it and its owner can read it back or delete it. What is kept is the dialect's own JSON (the core reads none of
//! it): the `response` object, the request's `input` items, and the whole conversation as items.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::StoreError;

/// One kept response.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptResponse {
    /// The `response` object as it was answered.
    pub response: Value,
    /// The request's own `input` items.
    pub input_items: Vec<Value>,
    /// The conversation a continuation starts from: the earlier responses' items, this request's input and this
    /// response's output.
    pub history: Vec<Value>,
    /// Unix seconds after which it is gone.
    pub expires_at: i64,
}

impl KeptResponse {
    /// Whether it is past its time at `now` (unix seconds): the store deletes expired items late.
    pub fn expired(&self, now: i64) -> bool {
        crate::is_expired(self.expires_at, now)
    }
}

pub type KeptFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where kept responses are, by owner and id. Another owner's response is as absent as one never kept.
pub trait ResponseStore: Send + Sync {
    /// Keeps `kept` as `owner`'s response `id` (replacing one of that id).
    fn keep_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        kept: &'a KeptResponse,
    ) -> KeptFuture<'a, ()>;

    /// `owner`'s response `id`; `None` when there is none (never kept, another owner's, or expired).
    fn kept_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> KeptFuture<'a, Option<KeptResponse>>;

    /// Deletes `owner`'s response `id`; whether there was one (not expired).
    fn delete_response<'a>(&'a self, owner: &'a str, id: &'a str) -> KeptFuture<'a, bool>;
}
