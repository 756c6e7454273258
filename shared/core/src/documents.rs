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

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::{Caller, Family, Limits, OverLimit, StoreError, Upload, UploadQuota};

/// `MAX_DOCUMENT_BYTES` when unset: 4 MiB, what a function URL's 6 MB request carries with room for the multipart
/// framing (and the base64 a Lambda event adds to a binary body).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;
/// `MAX_DOCUMENTS_PER_UPLOAD` when unset.
pub const DEFAULT_MAX_DOCUMENTS_PER_UPLOAD: usize = 10;
/// The longest file name kept, in bytes (the key holds it, and S3's keys are at most 1024 bytes).
pub const MAX_DOCUMENT_NAME_BYTES: usize = 200;
/// The most groups an administrator may give one document.
pub const MAX_DOCUMENT_GROUPS: usize = 20;

/// The kinds of documents a Bedrock knowledge base parses, as this backend takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentType {
    Pdf,
    Markdown,
    Text,
    Html,
    Word,
    Csv,
}

impl DocumentType {
    pub const ALL: [DocumentType; 6] = [
        DocumentType::Pdf,
        DocumentType::Markdown,
        DocumentType::Text,
        DocumentType::Html,
        DocumentType::Word,
        DocumentType::Csv,
    ];

    /// The type a file name's extension says (case-insensitive), if it is one taken.
    pub fn from_name(name: &str) -> Option<Self> {
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext.to_ascii_lowercase().as_str() {
            "pdf" => Self::Pdf,
            "md" | "markdown" => Self::Markdown,
            "txt" => Self::Text,
            "html" | "htm" => Self::Html,
            "doc" | "docx" => Self::Word,
            "csv" => Self::Csv,
            _ => return None,
        })
    }

    /// What the API and the records call it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Markdown => "markdown",
            Self::Text => "text",
            Self::Html => "html",
            Self::Word => "word",
            Self::Csv => "csv",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The `Content-Type` its bytes are stored with.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Pdf => "application/pdf",
            Self::Markdown => "text/markdown",
            Self::Text => "text/plain",
            Self::Html => "text/html",
            Self::Word => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Self::Csv => "text/csv",
        }
    }

    /// Whether `bytes` can be this type: a PDF starts `%PDF-`, a Word file is a ZIP (`.docx`) or an OLE file
    /// (`.doc`), and the text types are UTF-8. What the knowledge base cannot parse beyond that is its to say
    /// (the document ends `failed` with its reason).
    fn accepts(self, bytes: &[u8]) -> bool {
        match self {
            Self::Pdf => bytes.starts_with(b"%PDF-"),
            Self::Word => {
                bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0])
            }
            Self::Markdown | Self::Text | Self::Html | Self::Csv => {
                std::str::from_utf8(bytes).is_ok()
            }
        }
    }
}

/// Where a document stands in the knowledge base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentStatus {
    /// Stored and handed to the knowledge base, which has not started on it.
    Pending,
    /// The knowledge base is parsing and embedding it.
    Indexing,
    /// Searchable, for those its access list names.
    Indexed,
    /// The knowledge base could not index it; the record's `reason` says why.
    Failed,
}

impl DocumentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Indexing => "indexing",
            Self::Indexed => "indexed",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Indexing, Self::Indexed, Self::Failed]
            .into_iter()
            .find(|t| t.as_str() == s)
    }

    /// Whether it can still change without anyone asking (the knowledge base is still at work).
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Indexed | Self::Failed)
    }
}

/// Who may find a document in search: the metadata attributes `oids` and `groups` of docs/document-access.md.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessList {
    pub oids: Vec<String>,
    pub groups: Vec<String>,
}

/// What an administrator asks for the documents they upload; anyone else's are theirs alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessChoice {
    /// The groups whose members may read them.
    pub groups: Vec<String>,
    /// Everyone (the everyone group).
    pub everyone: bool,
}

impl AccessChoice {
    pub fn is_private(&self) -> bool {
        self.groups.is_empty() && !self.everyone
    }
}

/// One document, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRecord {
    /// 32 hex digits, random.
    pub id: String,
    /// The owner id of whoever uploaded it: it is kept, listed and deleted under it.
    pub owner: String,
    /// The file name as uploaded (made safe for a key): what answers cite.
    pub name: String,
    pub kind: DocumentType,
    pub bytes: u64,
    pub access: AccessList,
    pub status: DocumentStatus,
    /// Why it failed, for a person.
    pub reason: Option<String>,
    /// Unix seconds.
    pub created: i64,
    pub updated: i64,
    /// The SHA-256 of its bytes, in lowercase hex ([`document_digest`]); `None` on a record made before digests
    /// were kept.
    pub digest: Option<String>,
    /// Where the operator's bulk load found it: its path relative to the folder loaded, `/`-separated
    /// ([`Documents::load`]); `None` for an upload.
    pub source: Option<String>,
}

/// A file to upload.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub name: String,
    pub bytes: Bytes,
}

/// A page of records and the cursor of the next.
#[derive(Debug, Clone, Default)]
pub struct DocumentPage {
    pub items: Vec<DocumentRecord>,
    pub next: Option<String>,
}

/// What the knowledge base says of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexState {
    pub status: DocumentStatus,
    pub reason: Option<String>,
}

/// Why the knowledge base or the bucket did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// No answer in time, throttled past the retries, or unavailable: a later try may work.
    #[error("the knowledge base is unavailable: {0}")]
    Unavailable(String),
    /// Refused or failed (access denied, validation, an unknown knowledge base or bucket).
    #[error("the knowledge base failed: {0}")]
    Failed(String),
}

/// Why a documents operation did not happen; each says what to tell the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// No such document for this caller (whether it does not exist or is someone else's).
    #[error("no such document")]
    NotFound,
    /// The caller may not do this (a non-administrator asking for groups, everyone, or everyone's list).
    #[error("{0}")]
    Forbidden(String),
    /// A file or field the caller sent is not acceptable; `field` names it.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// A file larger than `MAX_DOCUMENT_BYTES`.
    #[error("{name} is larger than {limit} bytes")]
    TooLarge { name: String, limit: usize },
    /// The upload would pass one of the uploader's upload quotas (`QUOTA_UPLOADED_…`): nothing was stored.
    #[error(transparent)]
    OverQuota(OverLimit),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> DocumentError {
    DocumentError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// What a port's call gives.
pub type DocumentFuture<'a, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// The documents' records, per owner (DynamoDB).
pub trait DocumentStore: Send + Sync {
    /// Stores a new record (its id is new).
    fn put<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError>;
    /// `owner`'s document `id`; `None` when they hold none by that id.
    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError>;
    /// `owner`'s documents (`None`: everyone's), newest first, `limit` at most, from `cursor`.
    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> DocumentFuture<'a, DocumentPage, StoreError>;
    /// Records a new status (and reason) of the document.
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
    /// Where each document stands, in the order asked.
    fn states<'a>(
        &'a self,
        records: &'a [DocumentRecord],
    ) -> DocumentFuture<'a, Vec<IndexState>, IndexError>;
    /// Removes the document from the knowledge base and its bytes and metadata from the bucket (what exists).
    fn remove<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), IndexError>;
}

/// The most bytes one bulk-loaded file may hold: 50 MB, what a Bedrock knowledge base ingests of one file (its own
/// quota). The upload route's bound (`MAX_UPLOADED_DOCUMENT_BYTES`) is a function URL's request's; the operator's
/// command sends its files straight to S3, so the knowledge base's is the one that holds.
pub const MAX_LOADED_DOCUMENT_BYTES: usize = 50 * 1000 * 1000;
/// The longest source path kept, in bytes.
pub const MAX_SOURCE_BYTES: usize = 1024;

/// Who may find a bulk-loaded document, as the operator says (a manifest's rule, or the folder's layout).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadAccess {
    pub groups: Vec<String>,
    pub oids: Vec<String>,
    /// Everyone (the everyone group).
    pub everyone: bool,
}

/// What a bulk load did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoadOutcome {
    /// A new document: stored and ingested.
    Added,
    /// Its bytes or its access list changed: stored again under the same document and ingested again.
    Updated,
    /// The same bytes and access list as its record's: nothing was called.
    Unchanged,
    /// Gone from the folder: removed from the knowledge base, the bucket and the table.
    Deleted,
}

impl LoadOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Deleted => "deleted",
        }
    }
}

/// Whether `source` is a usable source path: relative, `/`-separated, no empty, `.` or `..` segment, no control
/// characters or `\`, at most [`MAX_SOURCE_BYTES`].
pub fn is_source_path(source: &str) -> bool {
    !source.is_empty()
        && source.len() <= MAX_SOURCE_BYTES
        && !source.chars().any(|c| c.is_control() || c == '\\')
        && source
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Whether two access lists name the same oids and groups, in any order.
fn same_access(a: &AccessList, b: &AccessList) -> bool {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    sorted(&a.oids) == sorted(&b.oids) && sorted(&a.groups) == sorted(&b.groups)
}

/// The documents' rules, shared by the routes and the operator's command.
#[derive(Clone)]
pub struct Documents {
    store: Arc<dyn DocumentStore>,
    index: Arc<dyn DocumentIndex>,
    settings: DocumentSettings,
    /// Where uploads are counted against the upload quotas, and the configured quotas; `None` where none is
    /// configured (then nothing is counted).
    quota: Option<(Arc<dyn UploadQuota>, Limits)>,
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

/// A file name made safe for a key and a citation: its last path segment, without control characters, `/`, `\`
/// or `#` (which a citation's `#page=N` would confuse), at most [`MAX_DOCUMENT_NAME_BYTES`].
pub fn document_file_name(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let clean: String = last
        .chars()
        .filter(|c| !c.is_control() && !matches!(c, '#' | '?' | '%'))
        .collect();
    let clean = clean.trim().trim_start_matches('.').to_string();
    if clean.is_empty() || clean.len() > MAX_DOCUMENT_NAME_BYTES {
        return None;
    }
    Some(clean)
}

/// One file's name, type and bytes checked, as an upload's and a bulk load's are: a usable name, a type the
/// knowledge base takes, not empty, at most `max_bytes`, and bytes that can be the type the name says.
fn check_file(
    file_name: &str,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<(String, DocumentType), DocumentError> {
    let name = document_file_name(file_name)
        .ok_or_else(|| invalid("files", format!("{file_name:?} is not a usable file name")))?;
    let kind = DocumentType::from_name(&name).ok_or_else(|| {
        invalid(
            "files",
            format!(
                "{name}: the knowledge base takes PDF, Markdown, text, HTML, Word and CSV files \
                 (.pdf, .md, .txt, .html, .docx, .doc, .csv)"
            ),
        )
    })?;
    if bytes.len() > max_bytes {
        return Err(DocumentError::TooLarge {
            name,
            limit: max_bytes,
        });
    }
    if bytes.is_empty() {
        return Err(invalid("files", format!("{name} is empty")));
    }
    if !kind.accepts(bytes) {
        return Err(invalid(
            "files",
            format!("{name}: its bytes are not a {} file", kind.as_str()),
        ));
    }
    Ok((name, kind))
}

/// Names (groups or oids) trimmed, checked and without repeats: at most [`MAX_DOCUMENT_GROUPS`], each 1 to 256
/// characters without control characters.
fn names(field: &str, given: &[String]) -> Result<Vec<String>, DocumentError> {
    if given.len() > MAX_DOCUMENT_GROUPS {
        return Err(invalid(
            field,
            format!("at most {MAX_DOCUMENT_GROUPS} {field}"),
        ));
    }
    let mut out = Vec::new();
    for g in given {
        let g = g.trim();
        if g.is_empty() || g.len() > 256 || g.chars().any(char::is_control) {
            let one = match field {
                "oids" => "an oid",
                _ => "a group",
            };
            return Err(invalid(
                field,
                format!("{one} is a name of 1 to 256 characters"),
            ));
        }
        if !out.iter().any(|have: &String| have == g) {
            out.push(g.to_string());
        }
    }
    Ok(out)
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The digest a document's record keeps of its bytes: SHA-256, in lowercase hex. A bulk load compares it to tell
/// a file that changed from one that did not.
pub fn document_digest(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
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

    pub fn settings(&self) -> &DocumentSettings {
        &self.settings
    }

    /// Whether `caller` is an administrator of documents.
    pub fn is_admin(&self, caller: &Caller) -> bool {
        self.settings
            .admin_group
            .as_ref()
            .is_some_and(|g| caller.groups.iter().any(|c| c == g))
    }

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

    /// The access list of what `caller` uploads, as they chose it.
    pub fn access_for(
        &self,
        caller: &Caller,
        choice: &AccessChoice,
    ) -> Result<AccessList, DocumentError> {
        if choice.is_private() {
            let oid = caller.oid.clone().unwrap_or_else(|| caller.owner.clone());
            return Ok(AccessList {
                oids: vec![oid],
                groups: Vec::new(),
            });
        }
        if !self.is_admin(caller) {
            return Err(DocumentError::Forbidden(
                "Only a document administrator may share a document with groups or everyone: what you upload \
                 is yours alone."
                    .into(),
            ));
        }
        let mut groups = names("groups", &choice.groups)?;
        if choice.everyone && !groups.contains(&self.settings.everyone_group) {
            groups.push(self.settings.everyone_group.clone());
        }
        Ok(AccessList {
            oids: Vec::new(),
            groups,
        })
    }

    /// Checks every file before anything is stored: their count, each one's name, type and size.
    pub fn check(
        &self,
        files: &[NewDocument],
    ) -> Result<Vec<(String, DocumentType)>, DocumentError> {
        if files.is_empty() {
            return Err(invalid("files", "send at least one file"));
        }
        if files.len() > self.settings.max_per_upload {
            return Err(invalid(
                "files",
                format!(
                    "at most {} files in one upload",
                    self.settings.max_per_upload
                ),
            ));
        }
        files
            .iter()
            .map(|file| check_file(&file.name, &file.bytes, self.settings.max_bytes))
            .collect()
    }

    /// Uploads `files` for `caller` with the access they chose, each ingested at once. Every file is checked, and
    /// the whole upload counted against the upload quotas, before any is stored; a file whose bytes or ingestion fail has what was put of it removed, and the error
    /// is answered (the files before it stay uploaded).
    pub async fn upload(
        &self,
        caller: &Caller,
        files: Vec<NewDocument>,
        choice: &AccessChoice,
    ) -> Result<Vec<DocumentRecord>, DocumentError> {
        let access = self.access_for(caller, choice)?;
        let checked = self.check(&files)?;
        self.count(caller, &files).await?;
        let mut done = Vec::with_capacity(files.len());
        for (file, (name, kind)) in files.into_iter().zip(checked) {
            let now = now();
            let record = DocumentRecord {
                id: new_document_id(),
                owner: caller.owner.clone(),
                name,
                kind,
                bytes: file.bytes.len() as u64,
                access: access.clone(),
                status: DocumentStatus::Pending,
                reason: None,
                created: now,
                updated: now,
                digest: Some(document_digest(&file.bytes)),
                source: None,
            };
            let record = self.put_new(record, file.bytes).await?;
            tracing::info!(document = %record.id, owner = %record.owner, status = record.status.as_str(), "document uploaded");
            done.push(record);
        }
        Ok(done)
    }

    /// Counts the whole upload in `caller`'s periods against the upload quotas, where any is configured; refused, it
    /// is [`DocumentError::OverQuota`] and nothing may be stored.
    async fn count(&self, caller: &Caller, files: &[NewDocument]) -> Result<(), DocumentError> {
        let Some((quota, limits)) = &self.quota else {
            return Ok(());
        };
        let bytes = files.iter().map(|f| f.bytes.len() as u64).sum();
        let upload = Upload::new(
            &caller.owner,
            files.len() as u64,
            bytes,
            time::OffsetDateTime::now_utc(),
        );
        match tokio::time::timeout(self.settings.timeout, quota.count_upload(&upload, limits)).await
        {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(over))) => {
                tracing::info!(owner = %upload.owner, limit = ?over.kind, documents = upload.documents, bytes = upload.bytes, "upload refused by a quota");
                Err(DocumentError::OverQuota(over))
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                Err(StoreError::Unavailable("the usage counters: no answer in time".into()).into())
            }
        }
    }

    /// Stores a new document: its record (pending), its bytes and metadata, its ingestion, then the status the
    /// knowledge base answered. What fails on the way has what was put removed.
    async fn put_new(
        &self,
        mut record: DocumentRecord,
        bytes: Bytes,
    ) -> Result<DocumentRecord, DocumentError> {
        self.bounded("the record", self.store.put(&record)).await?;
        let state = self.put_and_ingest(&record, bytes).await?;
        record.status = state.status;
        record.reason = state.reason;
        self.bounded("the record", self.store.set_status(&record))
            .await?;
        Ok(record)
    }

    /// Puts the bytes and metadata of `record` and asks the knowledge base to ingest them; when either fails,
    /// what was put of the document (its record too) is removed, so nothing is left half-visible.
    async fn put_and_ingest(
        &self,
        record: &DocumentRecord,
        bytes: Bytes,
    ) -> Result<IndexState, DocumentError> {
        let state = match self
            .bounded("the bytes", self.index.put(record, bytes))
            .await
        {
            Ok(()) => {
                self.bounded("the ingestion", self.index.ingest(record))
                    .await
            }
            Err(e) => Err(e),
        };
        if state.is_err() {
            self.undo(record).await;
        }
        state
    }

    /// Removes what an upload put, as far as it can: a failure here is logged (the record says what was meant).
    async fn undo(&self, record: &DocumentRecord) {
        if let Err(e) = self.bounded("the removal", self.index.remove(record)).await {
            tracing::warn!(document = %record.id, error = %e, "a failed upload's bytes were not removed");
        }
        if let Err(e) = self
            .bounded("the record", self.store.delete(&record.owner, &record.id))
            .await
        {
            tracing::warn!(document = %record.id, error = %e, "a failed upload's record was not removed");
        }
    }

    /// `caller`'s document `id`, its status brought up to date.
    pub async fn get(&self, caller: &Caller, id: &str) -> Result<DocumentRecord, DocumentError> {
        if !is_document_id(id) {
            return Err(DocumentError::NotFound);
        }
        let record = self
            .bounded("the record", self.store.get(&caller.owner, id))
            .await?
            .ok_or(DocumentError::NotFound)?;
        let mut records = vec![record];
        self.refresh(&mut records).await?;
        Ok(records.pop().expect("one record"))
    }

    /// A page of `caller`'s documents, or (`all`, administrators only) everyone's, their statuses brought up to
    /// date.
    pub async fn list(
        &self,
        caller: &Caller,
        all: bool,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<DocumentPage, DocumentError> {
        if all && !self.is_admin(caller) {
            return Err(DocumentError::Forbidden(
                "Only a document administrator may list everyone's documents.".into(),
            ));
        }
        let owner = (!all).then_some(caller.owner.as_str());
        let mut page = self
            .bounded("the records", self.store.list(owner, limit, cursor))
            .await?;
        self.refresh(&mut page.items).await?;
        Ok(page)
    }

    /// Asks the knowledge base where the unsettled ones stand, and records what changed.
    async fn refresh(&self, records: &mut [DocumentRecord]) -> Result<(), DocumentError> {
        let unsettled: Vec<usize> = (0..records.len())
            .filter(|&i| !records[i].status.is_settled())
            .collect();
        if unsettled.is_empty() {
            return Ok(());
        }
        let asked: Vec<DocumentRecord> = unsettled.iter().map(|&i| records[i].clone()).collect();
        let states = self
            .bounded("the statuses", self.index.states(&asked))
            .await?;
        for (&i, state) in unsettled.iter().zip(states) {
            let record = &mut records[i];
            if record.status != state.status || record.reason != state.reason {
                record.status = state.status;
                record.reason = state.reason;
                record.updated = now();
                self.bounded("the record", self.store.set_status(record))
                    .await?;
            }
        }
        Ok(())
    }

    /// Deletes `caller`'s document `id`: from the knowledge base, the bucket, then its record.
    pub async fn delete(&self, caller: &Caller, id: &str) -> Result<(), DocumentError> {
        if !is_document_id(id) {
            return Err(DocumentError::NotFound);
        }
        let record = self
            .bounded("the record", self.store.get(&caller.owner, id))
            .await?
            .ok_or(DocumentError::NotFound)?;
        self.remove(&record).await
    }

    /// Removes a document: from the knowledge base and the bucket, then its record.
    async fn remove(&self, record: &DocumentRecord) -> Result<(), DocumentError> {
        self.bounded("the removal", self.index.remove(record))
            .await?;
        self.bounded("the record", self.store.delete(&record.owner, &record.id))
            .await?;
        tracing::info!(document = %record.id, owner = %record.owner, "document deleted");
        Ok(())
    }

    /// The access list of what the operator loads: the groups, oids and everyone they name, checked as an
    /// administrator's are. It must name someone: a file nobody may find is refused, never made public.
    pub fn load_access(&self, access: &LoadAccess) -> Result<AccessList, DocumentError> {
        let mut groups = names("groups", &access.groups)?;
        if access.everyone && !groups.contains(&self.settings.everyone_group) {
            groups.push(self.settings.everyone_group.clone());
        }
        let oids = names("oids", &access.oids)?;
        if groups.is_empty() && oids.is_empty() {
            return Err(invalid(
                "access",
                "name the groups, the oids or everyone who may find it",
            ));
        }
        Ok(AccessList { oids, groups })
    }

    /// `owner`'s bulk-loaded documents by their source path: every page of their records, read once (those
    /// without a source, uploads, are left out), the statuses of those still unsettled brought up to date (so that
    /// one the knowledge base has failed since is loaded again).
    pub async fn loaded(
        &self,
        owner: &str,
    ) -> Result<HashMap<String, DocumentRecord>, DocumentError> {
        let mut by_source = HashMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .bounded(
                    "the records",
                    self.store.list(Some(owner), 1000, cursor.as_deref()),
                )
                .await?;
            let mut records: Vec<DocumentRecord> = page
                .items
                .into_iter()
                .filter(|record| record.source.is_some())
                .collect();
            self.refresh(&mut records).await?;
            for record in records {
                if let Some(source) = record.source.clone() {
                    by_source.insert(source, record);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(by_source),
            }
        }
    }

    /// Loads one file for `owner` (the operator's owner id) from `source` (its path in the folder loaded) with
    /// `access`, given its record from the last load (`existing`, from [`Documents::loaded`]):
    ///
    /// - the same bytes (digest) and access list, and not `failed`: [`LoadOutcome::Unchanged`], and nothing is
    ///   called (a document the knowledge base failed is stored and ingested again, as an edited one is);
    /// - other bytes or another access list: its bytes and metadata are put again under the same document and
    ///   ingested again (status back to `pending`): [`LoadOutcome::Updated`];
    /// - no record: a new document, as an upload makes one: [`LoadOutcome::Added`].
    ///
    /// The file is checked as an upload's are, but bounded by [`MAX_LOADED_DOCUMENT_BYTES`]. An update whose
    /// bytes or ingestion fail has the document removed (its old version too, whose access list may be one the
    /// operator no longer wants), so nothing is left half-visible; the next load adds it again.
    pub async fn load(
        &self,
        owner: &str,
        source: &str,
        bytes: Bytes,
        access: &AccessList,
        existing: Option<&DocumentRecord>,
    ) -> Result<(LoadOutcome, DocumentRecord), DocumentError> {
        if !is_source_path(source) {
            return Err(invalid(
                "source",
                format!("{source:?} is not a relative path of 1 to {MAX_SOURCE_BYTES} bytes"),
            ));
        }
        if access.oids.is_empty() && access.groups.is_empty() {
            return Err(invalid("access", "a loaded document needs an access list"));
        }
        let (name, kind) = check_file(source, &bytes, MAX_LOADED_DOCUMENT_BYTES)?;
        let digest = document_digest(&bytes);
        let now = now();
        let old = match existing {
            Some(old)
                if old.digest.as_deref() == Some(digest.as_str())
                    && same_access(&old.access, access)
                    && old.status != DocumentStatus::Failed =>
            {
                return Ok((LoadOutcome::Unchanged, old.clone()));
            }
            // The same key: stored again in place.
            Some(old) if old.name == name => old,
            // Another name (the rules that make names changed): the old one goes, a new one comes.
            Some(old) => {
                self.remove(old).await?;
                let record = self
                    .put_new(
                        self.loaded_record(owner, source, name, kind, &bytes, access, digest, now),
                        bytes,
                    )
                    .await?;
                return Ok((LoadOutcome::Updated, record));
            }
            None => {
                let record = self
                    .put_new(
                        self.loaded_record(owner, source, name, kind, &bytes, access, digest, now),
                        bytes,
                    )
                    .await?;
                tracing::info!(document = %record.id, owner, source, "document loaded");
                return Ok((LoadOutcome::Added, record));
            }
        };
        let mut record = DocumentRecord {
            kind,
            bytes: bytes.len() as u64,
            access: access.clone(),
            status: DocumentStatus::Pending,
            reason: None,
            // Later than the last: each ingestion of a document is its own request (its client token).
            updated: now.max(old.updated + 1),
            digest: Some(digest),
            ..old.clone()
        };
        let state = self.put_and_ingest(&record, bytes).await?;
        record.status = state.status;
        record.reason = state.reason;
        self.bounded("the record", self.store.put(&record)).await?;
        tracing::info!(document = %record.id, owner, source, "document loaded again");
        Ok((LoadOutcome::Updated, record))
    }

    #[allow(clippy::too_many_arguments)]
    fn loaded_record(
        &self,
        owner: &str,
        source: &str,
        name: String,
        kind: DocumentType,
        bytes: &[u8],
        access: &AccessList,
        digest: String,
        now: i64,
    ) -> DocumentRecord {
        DocumentRecord {
            id: new_document_id(),
            owner: owner.to_string(),
            name,
            kind,
            bytes: bytes.len() as u64,
            access: access.clone(),
            status: DocumentStatus::Pending,
            reason: None,
            created: now,
            updated: now,
            digest: Some(digest),
            source: Some(source.to_string()),
        }
    }

    /// Removes a bulk-loaded document whose file is gone from the folder (the operator asked for it).
    pub async fn unload(&self, record: &DocumentRecord) -> Result<(), DocumentError> {
        self.remove(record).await
    }

    /// Brings the statuses of `records` up to date: the knowledge base is asked about the unsettled ones, and what
    /// changed is recorded (as a read through the routes does).
    pub async fn refresh_statuses(
        &self,
        records: &mut [DocumentRecord],
    ) -> Result<(), DocumentError> {
        self.refresh(records).await
    }
}

/// The most documents one watch follows (`ids` named, or the newest of the caller's unsettled ones).
pub const MAX_WATCHED_DOCUMENTS: usize = 100;

/// What a watch says of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentChange {
    /// Where it stands now: first seen, or its status or reason changed.
    Now(DocumentRecord),
    /// It is no longer there (deleted since): its id.
    Gone(String),
}

/// A caller's documents followed while the knowledge base works on them: each [`DocumentWatch::poll`] asks where the
/// unsettled ones stand (through the same reads and refresh as [`Documents::get`], under the same rules and
/// timeouts) and says what changed; a settled document (`indexed`, `failed`) or a gone one is no longer followed.
/// How often to poll, and for how long, is the caller's.
pub struct DocumentWatch {
    documents: Documents,
    caller: Caller,
    /// The unsettled documents followed, as last seen.
    unsettled: Vec<DocumentRecord>,
}

impl Documents {
    /// Starts watching `caller`'s documents `ids` (each must be theirs: another's, or one that does not exist, is
    /// [`DocumentError::NotFound`], exactly as a read), or, with none named, their unsettled ones among their newest
    /// [`MAX_WATCHED_DOCUMENTS`]. Answers where each stands now, and the watch that follows the unsettled ones.
    pub async fn watch(
        &self,
        caller: &Caller,
        ids: Option<&[String]>,
    ) -> Result<(Vec<DocumentRecord>, DocumentWatch), DocumentError> {
        let now = match ids {
            Some(ids) => {
                let mut unique: Vec<&str> = Vec::new();
                for id in ids {
                    if !unique.contains(&id.as_str()) {
                        unique.push(id);
                    }
                }
                if unique.is_empty() || unique.len() > MAX_WATCHED_DOCUMENTS {
                    return Err(invalid(
                        "ids",
                        format!("name 1 to {MAX_WATCHED_DOCUMENTS} documents"),
                    ));
                }
                let mut records = Vec::with_capacity(unique.len());
                for id in unique {
                    if !is_document_id(id) {
                        return Err(DocumentError::NotFound);
                    }
                    let record = self
                        .bounded("the record", self.store.get(&caller.owner, id))
                        .await?
                        .ok_or(DocumentError::NotFound)?;
                    records.push(record);
                }
                self.refresh(&mut records).await?;
                records
            }
            None => {
                let page = self
                    .list(caller, false, MAX_WATCHED_DOCUMENTS, None)
                    .await?;
                page.items
                    .into_iter()
                    .filter(|d| !d.status.is_settled())
                    .collect()
            }
        };
        let unsettled = now
            .iter()
            .filter(|d| !d.status.is_settled())
            .cloned()
            .collect();
        Ok((
            now,
            DocumentWatch {
                documents: self.clone(),
                caller: caller.clone(),
                unsettled,
            },
        ))
    }
}

impl DocumentWatch {
    /// Whether every document followed has settled (or gone): nothing more can change without someone asking.
    pub fn is_settled(&self) -> bool {
        self.unsettled.is_empty()
    }

    /// How many documents are still followed.
    pub fn following(&self) -> usize {
        self.unsettled.len()
    }

    /// Asks once where the unsettled documents stand: their records read again (a deleted one is
    /// [`DocumentChange::Gone`]), then the knowledge base asked for all of them at once, what changed recorded.
    /// Answers the documents whose status or reason changed since the last look.
    pub async fn poll(&mut self) -> Result<Vec<DocumentChange>, DocumentError> {
        let documents = &self.documents;
        let mut changes = Vec::new();
        let mut current = Vec::with_capacity(self.unsettled.len());
        for seen in &self.unsettled {
            match documents
                .bounded(
                    "the record",
                    documents.store.get(&self.caller.owner, &seen.id),
                )
                .await?
            {
                Some(record) => current.push(record),
                None => changes.push(DocumentChange::Gone(seen.id.clone())),
            }
        }
        documents.refresh(&mut current).await?;
        let mut still = Vec::with_capacity(current.len());
        for record in current {
            let changed = self
                .unsettled
                .iter()
                .find(|seen| seen.id == record.id)
                .is_none_or(|seen| seen.status != record.status || seen.reason != record.reason);
            if changed {
                changes.push(DocumentChange::Now(record.clone()));
            }
            if !record.status.is_settled() {
                still.push(record);
            }
        }
        self.unsettled = still;
        Ok(changes)
    }
}

/// A new document id: 32 lowercase hex digits, the first 12 the time in milliseconds and the rest random, so that
/// ids sort by when they were made (a store lists the newest first by its keys alone).
pub fn new_document_id() -> String {
    let millis = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{:012x}{}", millis as u64 & 0xffff_ffff_ffff, &random[..20])
}

/// Whether `id` is shaped like a document id (32 lowercase hex digits).
pub fn is_document_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(admin: Option<&str>) -> DocumentSettings {
        DocumentSettings {
            admin_group: admin.map(str::to_string),
            max_bytes: 100,
            max_per_upload: 2,
            ..DocumentSettings::default()
        }
    }

    struct Nothing;
    impl DocumentStore for Nothing {
        fn put<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
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
        fn put<'a>(
            &'a self,
            _: &'a DocumentRecord,
            _: Bytes,
        ) -> DocumentFuture<'a, (), IndexError> {
            Box::pin(async { Ok(()) })
        }
        fn ingest<'a>(
            &'a self,
            _: &'a DocumentRecord,
        ) -> DocumentFuture<'a, IndexState, IndexError> {
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

    fn service(admin: Option<&str>) -> Documents {
        Documents::new(Arc::new(Nothing), Arc::new(Nothing), docs(admin))
    }

    /// Upload quotas that admit `room` documents in all, counting the uploads asked about.
    struct Quota {
        room: u64,
        asked: std::sync::Mutex<Vec<(u64, u64)>>,
    }
    impl UploadQuota for Quota {
        fn count_upload<'a>(
            &'a self,
            upload: &'a Upload,
            limits: &'a Limits,
        ) -> crate::UsageFuture<'a, Result<(), OverLimit>> {
            let mut asked = self.asked.lock().unwrap();
            let before: u64 = asked.iter().map(|(d, _)| d).sum();
            asked.push((upload.documents, upload.bytes));
            let mut today = crate::UsageSnapshot::default();
            today.day.uploads.documents = before;
            let limits = limits.with(
                crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY,
                self.room as f64,
            );
            let counted = crate::check_upload(&limits, &today, upload);
            if counted.is_err() {
                asked.pop();
            }
            Box::pin(async move { Ok(counted) })
        }
    }

    /// A store that counts the records put.
    #[derive(Default)]
    struct Records(std::sync::atomic::AtomicUsize);
    impl DocumentStore for Records {
        fn put<'a>(&'a self, _: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
        fn get<'a>(
            &'a self,
            owner: &'a str,
            id: &'a str,
        ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError> {
            Nothing.get(owner, id)
        }
        fn list<'a>(
            &'a self,
            owner: Option<&'a str>,
            limit: usize,
            cursor: Option<&'a str>,
        ) -> DocumentFuture<'a, DocumentPage, StoreError> {
            Nothing.list(owner, limit, cursor)
        }
        fn set_status<'a>(&'a self, r: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
            Nothing.set_status(r)
        }
        fn delete<'a>(&'a self, owner: &'a str, id: &'a str) -> DocumentFuture<'a, (), StoreError> {
            DocumentStore::delete(&Nothing, owner, id)
        }
    }

    #[tokio::test]
    async fn an_upload_is_counted_whole_before_any_file_is_stored_and_refused_stores_nothing() {
        let file = |name: &str| NewDocument {
            name: name.into(),
            bytes: Bytes::from_static(b"some text"),
        };
        let alice = caller("jwt:alice", Some("alice"), &[]);
        let records = Arc::new(Records::default());
        let quota = Arc::new(Quota {
            room: 3,
            asked: Default::default(),
        });
        let limits = Limits::default().with(crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 3.0);
        let s = Documents::new(records.clone(), Arc::new(Nothing), docs(None))
            .with_upload_quota(quota.clone(), limits);
        let stored = || records.0.load(std::sync::atomic::Ordering::SeqCst);
        let choice = AccessChoice::default();
        s.upload(&alice, vec![file("a.md"), file("b.md")], &choice)
            .await
            .unwrap();
        assert_eq!(
            *quota.asked.lock().unwrap(),
            [(2, 18)],
            "counted whole, once"
        );
        assert_eq!(stored(), 2);
        let refused = s
            .upload(&alice, vec![file("c.md"), file("d.md")], &choice)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, DocumentError::OverQuota(o) if o.kind == crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
            "{refused:?}"
        );
        assert_eq!(stored(), 2, "nothing of a refused upload stored");
        // A file that is not acceptable is refused before anything is counted.
        assert!(matches!(
            s.upload(&alice, vec![file("x.exe")], &choice).await,
            Err(DocumentError::Invalid { .. })
        ));
        assert_eq!(quota.asked.lock().unwrap().len(), 1);
        // With no limit configured, the port is never asked.
        let off = Documents::new(records.clone(), Arc::new(Nothing), docs(None))
            .with_upload_quota(quota.clone(), Limits::default());
        off.upload(&alice, vec![file("e.md")], &choice)
            .await
            .unwrap();
        assert_eq!(quota.asked.lock().unwrap().len(), 1);
        assert_eq!(stored(), 3);
    }

    fn caller(owner: &str, oid: Option<&str>, groups: &[&str]) -> Caller {
        Caller {
            owner: owner.into(),
            oid: oid.map(str::to_string),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn what_a_user_uploads_is_theirs_alone_and_only_an_administrator_shares() {
        let s = service(Some("doc-admins"));
        let alice = caller("jwt:alice", Some("alice"), &["engineering"]);
        assert_eq!(
            s.access_for(&alice, &AccessChoice::default()).unwrap(),
            AccessList {
                oids: vec!["alice".into()],
                groups: vec![]
            }
        );
        // Without an oid, the owner id names them.
        let local = caller("local-user", None, &[]);
        assert_eq!(
            s.access_for(&local, &AccessChoice::default()).unwrap().oids,
            ["local-user"]
        );
        let share = AccessChoice {
            groups: vec!["leadership".into(), "leadership".into()],
            everyone: false,
        };
        assert!(matches!(
            s.access_for(&alice, &share),
            Err(DocumentError::Forbidden(_))
        ));
        let admin = caller("jwt:dana", Some("dana"), &["doc-admins"]);
        assert_eq!(
            s.access_for(&admin, &share).unwrap(),
            AccessList {
                oids: vec![],
                groups: vec!["leadership".into()]
            }
        );
        let everyone = AccessChoice {
            groups: vec![],
            everyone: true,
        };
        assert_eq!(
            s.access_for(&admin, &everyone).unwrap().groups,
            ["everyone"]
        );
        // No administrator group configured: nobody shares.
        assert!(service(None).access_for(&admin, &everyone).is_err());
    }

    #[test]
    fn files_are_checked_for_count_type_size_and_bytes() {
        let s = service(None);
        let file = |name: &str, bytes: &'static [u8]| NewDocument {
            name: name.into(),
            bytes: Bytes::from_static(bytes),
        };
        assert_eq!(
            s.check(&[file("../notes/Plan.MD", b"# plan")]).unwrap(),
            [("Plan.MD".to_string(), DocumentType::Markdown)]
        );
        assert!(s.check(&[]).is_err());
        assert!(
            s.check(&[file("a.md", b"a"), file("b.md", b"b"), file("c.md", b"c")])
                .is_err()
        );
        assert!(matches!(
            s.check(&[file("tool.exe", b"MZ")]),
            Err(DocumentError::Invalid { .. })
        ));
        assert!(matches!(
            s.check(&[file("big.txt", &[b'a'; 101])]),
            Err(DocumentError::TooLarge { limit: 100, .. })
        ));
        assert!(s.check(&[file("fake.pdf", b"hello")]).is_err());
        assert!(s.check(&[file("real.pdf", b"%PDF-1.4 ...")]).is_ok());
        assert!(s.check(&[file("bin.txt", &[0xff, 0xfe, 0x00])]).is_err());
        assert!(s.check(&[file("empty.md", b"")]).is_err());
    }

    #[test]
    fn what_the_operator_loads_names_who_may_find_it_and_comes_from_a_relative_path() {
        let s = service(None);
        let access = |groups: &[&str], oids: &[&str], everyone| LoadAccess {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            oids: oids.iter().map(|o| o.to_string()).collect(),
            everyone,
        };
        assert_eq!(
            s.load_access(&access(&[" leadership ", "leadership"], &["lee"], true))
                .unwrap(),
            AccessList {
                oids: vec!["lee".into()],
                groups: vec!["leadership".into(), "everyone".into()]
            }
        );
        // Nobody named: refused, never public.
        assert!(matches!(
            s.load_access(&access(&[], &[], false)),
            Err(DocumentError::Invalid { .. })
        ));
        assert!(s.load_access(&access(&[""], &[], false)).is_err());
        assert!(s.load_access(&access(&[], &["a\nb"], false)).is_err());
        assert!(is_source_path("groups/leadership/Offsite.md"));
        for bad in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b", "a/"] {
            assert!(!is_source_path(bad), "{bad:?}");
        }
        assert_eq!(
            document_digest(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_are_made_safe_for_keys_and_citations() {
        assert_eq!(
            document_file_name("C:\\x\\a#b.md").as_deref(),
            Some("ab.md")
        );
        assert_eq!(document_file_name("..").as_deref(), None);
        assert_eq!(document_file_name(&"a".repeat(300)), None);
        assert!(is_document_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_document_id("../etc"));
        let (a, b) = (new_document_id(), new_document_id());
        assert!(is_document_id(&a) && a != b);
    }

    #[tokio::test]
    async fn everyone_s_list_is_for_administrators_only_and_another_s_document_is_not_found() {
        let s = service(Some("doc-admins"));
        let alice = caller("jwt:alice", Some("alice"), &[]);
        assert!(matches!(
            s.list(&alice, true, 10, None).await,
            Err(DocumentError::Forbidden(_))
        ));
        assert!(s.list(&alice, false, 10, None).await.is_ok());
        let admin = caller("jwt:dana", Some("dana"), &["doc-admins"]);
        assert!(s.list(&admin, true, 10, None).await.is_ok());
        assert_eq!(
            s.get(&alice, "0123456789abcdef0123456789abcdef").await,
            Err(DocumentError::NotFound)
        );
        assert_eq!(s.delete(&alice, "nope").await, Err(DocumentError::NotFound));
    }

    #[tokio::test]
    async fn a_watch_names_only_the_caller_s_documents_and_ends_settled_when_none_is_pending() {
        let s = service(None);
        let alice = caller("jwt:alice", Some("alice"), &[]);
        let ids = |v: &[&str]| v.iter().map(|i| i.to_string()).collect::<Vec<_>>();
        // An id she does not hold (whoever's it is) is not found, as a read; a malformed one too.
        assert!(matches!(
            s.watch(&alice, Some(&ids(&["0123456789abcdef0123456789abcdef"])))
                .await,
            Err(DocumentError::NotFound)
        ));
        assert!(matches!(
            s.watch(&alice, Some(&ids(&["../x"]))).await,
            Err(DocumentError::NotFound)
        ));
        assert!(matches!(
            s.watch(&alice, Some(&[])).await,
            Err(DocumentError::Invalid { .. })
        ));
        // Nothing unsettled: nothing to say, and settled at once.
        let (now, watch) = s.watch(&alice, None).await.unwrap();
        assert!(now.is_empty());
        assert!(watch.is_settled());
    }
}
