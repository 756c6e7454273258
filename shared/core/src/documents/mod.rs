//! Documents people bring into the knowledge base, under the same access rules as search: what a document is, who
//! may see it, its ingestion status, the two ports that keep it ([`DocumentStore`]: the records, per owner;
//! [`DocumentIndex`]: the bytes beside their access list, and the knowledge base's ingestion), and the service the
//! routes and the operator's command share ([`Documents`]), which decides what each caller may do.
//!
//! - A document a user uploads is theirs alone: its access list is `oids` = their oid (their owner id when the way
//!   they were proven gives no oid), in the metadata convention of docs/document-access.md. An administrator (a
//!   member of `DOCUMENT_ADMIN_GROUP`) may give it `groups`, or the everyone group.
//! - Records are kept under their owner: another owner's document is not found (404), exactly like one that does
//!   not exist, for a read, a listing and a delete alike. Only an administrator lists everyone's (`all`).
//! - An upload that fails half-way (the bytes stored, the ingestion refused) removes what it put: nothing is left
//!   half-visible.
//! - Where upload quotas are configured ([`Documents::with_upload_quota`]), an upload is counted whole in its
//!   uploader's day before any file of it is stored, in one conditional write; refused, nothing is stored
//!   ([`DocumentError::OverQuota`]). A counted upload that then fails stays counted (see [`crate::UploadQuota`]).
//!
//! One file per use case: `types` (what a document is, its errors and ids), `ports` (the two ports), `access`
//! (who may share and list everyone's), `upload` (the checks, the quota, the store-then-ingest with its undo),
//! `read` (get, list, delete and the status refresh they share), `load` (the operator's bulk load) and `watch`
//! (the statuses followed while the knowledge base works).

mod access;
mod load;
mod ports;
mod read;
mod types;
mod upload;
mod watch;

#[cfg(test)]
mod fakes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{Family, LimitKind, Limits, UploadQuota, WatchSlots};

pub use access::MAX_DOCUMENT_GROUPS;
pub use load::{
    LoadAccess, LoadOutcome, MAX_LOADED_DOCUMENT_BYTES, MAX_SOURCE_BYTES, is_source_path,
};
pub use ports::{DocumentFuture, DocumentIndex, DocumentStore};
pub use types::{
    AccessChoice, AccessList, DocumentError, DocumentPage, DocumentRecord, DocumentStatus,
    DocumentType, IndexError, IndexState, NewDocument, document_digest, is_document_id,
    new_document_id,
};
pub use upload::{MAX_DOCUMENT_NAME_BYTES, document_file_name};
pub use watch::{DocumentChange, DocumentWatch, MAX_WATCHED_DOCUMENTS};

/// `MAX_DOCUMENT_BYTES` when unset: 4 MiB, what a function URL's 6 MB request carries with room for the multipart
/// framing (and the base64 a Lambda event adds to a binary body).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;
/// `MAX_DOCUMENTS_PER_UPLOAD` when unset.
pub const DEFAULT_MAX_DOCUMENTS_PER_UPLOAD: usize = 10;

/// The documents' rules, shared by the routes and the operator's command.
#[derive(Clone)]
pub struct Documents {
    store: Arc<dyn DocumentStore>,
    index: Arc<dyn DocumentIndex>,
    settings: DocumentSettings,
    /// Where uploads are counted against the upload quotas, and the configured quotas; `None` where none is
    /// configured (then nothing is counted).
    quota: Option<(Arc<dyn UploadQuota>, Limits)>,
    /// Where open watches take their places, how many one user may hold at once, and how long a place is held at
    /// most; `None` where no limit is configured (then nothing is counted).
    watches: Option<WatchLimit>,
}

/// The limit of open watches ([`Documents::with_watch_slots`]).
#[derive(Clone)]
pub(crate) struct WatchLimit {
    pub(crate) slots: Arc<dyn WatchSlots>,
    pub(crate) at_once: u32,
    pub(crate) held_for: Duration,
}

/// The documents' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentSettings {
    /// `DOCUMENT_ADMIN_GROUP`: its members may give what they upload to groups or everyone, and list everyone's.
    pub admin_group: Option<String>,
    /// `DOCUMENT_EVERYONE_GROUP`.
    pub everyone_group: String,
    pub max_bytes: usize,
    pub max_per_upload: usize,
    /// Bounds each call of the ports (the adapters bound their own calls too).
    pub timeout: Duration,
}

impl Default for DocumentSettings {
    fn default() -> Self {
        Self {
            admin_group: None,
            everyone_group: "everyone".into(),
            max_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_per_upload: DEFAULT_MAX_DOCUMENTS_PER_UPLOAD,
            timeout: Duration::from_secs(30),
        }
    }
}

impl Documents {
    pub fn new(
        store: Arc<dyn DocumentStore>,
        index: Arc<dyn DocumentIndex>,
        settings: DocumentSettings,
    ) -> Self {
        Self {
            store,
            index,
            settings,
            quota: None,
            watches: None,
        }
    }

    /// Counts every upload in `quota` against the upload limits of `limits` (the configured ones; each user's own
    /// item applies) before any file of it is stored. With no upload limit configured nothing is counted, at no
    /// cost.
    pub fn with_upload_quota(self, quota: Arc<dyn UploadQuota>, limits: Limits) -> Self {
        Self {
            quota: limits.counts(Family::Uploads).then_some((quota, limits)),
            ..self
        }
    }

    /// Holds each user to `limits`' open watches (`QUOTA_OPEN_WATCHES`) at once, their places taken in `slots`, each
    /// for at most `held_for` (the longest a watch lasts, with room for its last words): a watch whose process dies
    /// gives its place back then. With no such limit configured nothing is counted, at no cost.
    pub fn with_watch_slots(
        self,
        slots: Arc<dyn WatchSlots>,
        limits: &Limits,
        held_for: Duration,
    ) -> Self {
        let watches = limits
            .get(LimitKind::OPEN_WATCHES)
            .map(|at_once| WatchLimit {
                slots,
                at_once: at_once.min(u32::MAX as f64) as u32,
                held_for,
            });
        Self { watches, ..self }
    }

    pub fn settings(&self) -> &DocumentSettings {
        &self.settings
    }

    /// Runs one call of a port within the settings' timeout: no answer in time is [`IndexError::Unavailable`].
    async fn bounded<T, E: Into<DocumentError>>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, DocumentError> {
        match tokio::time::timeout(self.settings.timeout, call).await {
            Ok(result) => result.map_err(Into::into),
            Err(_) => Err(IndexError::Unavailable(format!("{what}: no answer in time")).into()),
        }
    }
}
