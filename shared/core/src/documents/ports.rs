//! The two ports the documents are kept through: [`DocumentStore`] (the records, per owner) and [`DocumentIndex`]
//! (the bytes beside their access list, and the knowledge base's ingestion). What each adapter must do is checked by
//! one suite, chat-testing's `document_contract`, run against the in-memory ports and the AWS ones.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use super::types::{DocumentPage, DocumentRecord, IndexError, IndexState};
use crate::StoreError;

/// What a port's call gives.
pub type DocumentFuture<'a, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// The documents' records, per owner (DynamoDB).
pub trait DocumentStore: Send + Sync {
    /// Stores a record: a new one, or (the bulk load's update) one that replaces the owner's record with its id.
    fn put<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError>;
    /// `owner`'s document `id`; `None` when they hold none by that id.
    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError>;
    /// `owner`'s documents (`None`: everyone's), newest first, `limit` at most, from `cursor`. A page's `next` is
    /// `None` once nothing is left; a cursor another listing gave is [`StoreError::InvalidCursor`].
    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> DocumentFuture<'a, DocumentPage, StoreError>;
    /// Records a new status, reason and `updated` time of the document, and nothing else of it; only while its
    /// record exists (a status that arrives after a delete does not bring it back).
    fn set_status<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError>;
    /// Removes `owner`'s record `id` (nothing when there is none).
    fn delete<'a>(&'a self, owner: &'a str, id: &'a str) -> DocumentFuture<'a, (), StoreError>;
}

/// The bytes and their access list where the knowledge base reads them, and the knowledge base's ingestion.
pub trait DocumentIndex: Send + Sync {
    /// Stores the bytes and, beside them, the access list as their metadata.
    fn put<'a>(
        &'a self,
        record: &'a DocumentRecord,
        bytes: Bytes,
    ) -> DocumentFuture<'a, (), IndexError>;
    /// Asks the knowledge base to ingest the document put; answers where it stands.
    fn ingest<'a>(
        &'a self,
        record: &'a DocumentRecord,
    ) -> DocumentFuture<'a, IndexState, IndexError>;
    /// Where each document stands, in the order asked; one it does not hold is `failed`, with a reason.
    fn states<'a>(
        &'a self,
        records: &'a [DocumentRecord],
    ) -> DocumentFuture<'a, Vec<IndexState>, IndexError>;
    /// Removes the document from the knowledge base and its bytes and metadata from the bucket (what exists).
    fn remove<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), IndexError>;
}
