//! What the documents' unit tests share: settings, a caller, and ports that hold nothing ([`Nothing`]), so that
//! the service's rules are tested without a store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use super::DocumentSettings;
use super::Documents;
use super::ports::{DocumentFuture, DocumentIndex, DocumentStore};
use super::types::{DocumentPage, DocumentRecord, DocumentStatus, IndexError, IndexState};
use crate::{Caller, StoreError};

pub fn docs(admin: Option<&str>) -> DocumentSettings {
    DocumentSettings {
        admin_group: admin.map(str::to_string),
        max_bytes: 100,
        max_per_upload: 2,
        ..DocumentSettings::default()
    }
}

/// Ports that hold nothing: every read finds nothing, every write succeeds, every status is indexed. The records
/// put are counted ([`Nothing::records_put`]).
#[derive(Default)]
pub struct Nothing {
    records_put: AtomicUsize,
}

impl Nothing {
    /// How many records were put in the store.
    pub fn records_put(&self) -> usize {
        self.records_put.load(Ordering::SeqCst)
    }
}

impl DocumentStore for Nothing {
    fn put<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        self.records_put.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
    fn get<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError> {
        Box::pin(async { Ok(None) })
    }
    fn list<'a>(
        &'a self,
        _: Option<&'a str>,
        _: usize,
        _: Option<&'a str>,
    ) -> DocumentFuture<'a, DocumentPage, StoreError> {
        Box::pin(async { Ok(DocumentPage::default()) })
    }
    fn set_status<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        Box::pin(async { Ok(()) })
    }
    fn delete<'a>(&'a self, _: &'a str, _: &'a str) -> DocumentFuture<'a, (), StoreError> {
        Box::pin(async { Ok(()) })
    }
}

impl DocumentIndex for Nothing {
    fn put<'a>(&'a self, _: &'a DocumentRecord, _: Bytes) -> DocumentFuture<'a, (), IndexError> {
        Box::pin(async { Ok(()) })
    }
    fn ingest<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, IndexState, IndexError> {
        Box::pin(async {
            Ok(IndexState {
                status: DocumentStatus::Pending,
                reason: None,
            })
        })
    }
    fn states<'a>(
        &'a self,
        r: &'a [DocumentRecord],
    ) -> DocumentFuture<'a, Vec<IndexState>, IndexError> {
        Box::pin(async move {
            Ok(r.iter()
                .map(|_| IndexState {
                    status: DocumentStatus::Indexed,
                    reason: None,
                })
                .collect())
        })
    }
    fn remove<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, (), IndexError> {
        Box::pin(async { Ok(()) })
    }
}

pub fn service(admin: Option<&str>) -> Documents {
    Documents::new(
        Arc::new(Nothing::default()),
        Arc::new(Nothing::default()),
        docs(admin),
    )
}

pub fn caller(owner: &str, oid: Option<&str>, groups: &[&str]) -> Caller {
    Caller {
        owner: owner.into(),
        oid: oid.map(str::to_string),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}
