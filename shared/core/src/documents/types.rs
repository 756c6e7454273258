//! What a document is, as the records, the ports and the routes share it: its type, status, access list and
//! record, the errors of the documents' operations, and how ids and digests are made.

use bytes::Bytes;

use crate::{OverLimit, StoreError};

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
    pub(super) fn accepts(self, bytes: &[u8]) -> bool {
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
    #[error("{name:?} is larger than {limit} bytes")]
    TooLarge { name: String, limit: usize },
    /// The upload would pass one of the uploader's upload quotas (`QUOTA_UPLOADED_…`): nothing was stored.
    #[error(transparent)]
    OverQuota(OverLimit),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

pub(super) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> DocumentError {
    DocumentError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

pub(super) fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The digest a document's record keeps of its bytes: SHA-256, in lowercase hex. A bulk load compares it to tell
/// a file that changed from one that did not.
pub fn document_digest(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
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
