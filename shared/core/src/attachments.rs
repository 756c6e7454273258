//! Files in messages: which kinds a turn takes (decided from their bytes, not from what the sender declared),
//! within which limits, how the model is told about them, and the port that keeps them per owner.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::InvalidRequest;

/// An image format the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
}

/// A document format the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentFormat {
    Pdf,
    Csv,
    Doc,
    Docx,
    Xls,
    Xlsx,
    Html,
    Txt,
    Md,
}

/// What a file is: an image or a document, and its format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Image(ImageFormat),
    Document(DocumentFormat),
}

/// Every kind, with its media type and the file name extensions that name it (the first is its own).
const KINDS: &[(FileKind, &str, &[&str])] = &[
    (FileKind::Image(ImageFormat::Png), "image/png", &["png"]),
    (
        FileKind::Image(ImageFormat::Jpeg),
        "image/jpeg",
        &["jpeg", "jpg"],
    ),
    (FileKind::Image(ImageFormat::Gif), "image/gif", &["gif"]),
    (FileKind::Image(ImageFormat::Webp), "image/webp", &["webp"]),
    (
        FileKind::Document(DocumentFormat::Pdf),
        "application/pdf",
        &["pdf"],
    ),
    (
        FileKind::Document(DocumentFormat::Csv),
        "text/csv",
        &["csv"],
    ),
    (
        FileKind::Document(DocumentFormat::Doc),
        "application/msword",
        &["doc"],
    ),
    (
        FileKind::Document(DocumentFormat::Docx),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        &["docx"],
    ),
    (
        FileKind::Document(DocumentFormat::Xls),
        "application/vnd.ms-excel",
        &["xls"],
    ),
    (
        FileKind::Document(DocumentFormat::Xlsx),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        &["xlsx"],
    ),
    (
        FileKind::Document(DocumentFormat::Html),
        "text/html",
        &["html", "htm"],
    ),
    (
        FileKind::Document(DocumentFormat::Txt),
        "text/plain",
        &["txt", "text"],
    ),
    (
        FileKind::Document(DocumentFormat::Md),
        "text/markdown",
        &["md", "markdown"],
    ),
];

impl FileKind {
    /// The kind's media type, as stored and listed.
    pub fn content_type(self) -> &'static str {
        KINDS
            .iter()
            .find(|(kind, ..)| *kind == self)
            .map(|(_, media, _)| *media)
            .expect("every kind is in the table")
    }

    /// The kind's format as Converse names it (`png`, `pdf`, …).
    pub fn format(self) -> &'static str {
        KINDS
            .iter()
            .find(|(kind, ..)| *kind == self)
            .map(|(_, _, extensions)| extensions[0])
            .expect("every kind is in the table")
    }

    pub fn is_image(self) -> bool {
        matches!(self, FileKind::Image(_))
    }

    /// The kind a media type names (`image/jpg` and `text/x-markdown` included), parameters ignored.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let essence = match essence.as_str() {
            "image/jpg" => "image/jpeg",
            "text/x-markdown" => "text/markdown",
            "application/csv" => "text/csv",
            other => other,
        };
        KINDS
            .iter()
            .find(|(_, media, _)| *media == essence)
            .map(|(kind, ..)| *kind)
    }

    /// The kind a file name's extension names.
    pub fn from_name(name: &str) -> Option<Self> {
        let (_, extension) = name.rsplit_once('.')?;
        let extension = extension.to_ascii_lowercase();
        KINDS
            .iter()
            .find(|(_, _, extensions)| extensions.contains(&extension.as_str()))
            .map(|(kind, ..)| *kind)
    }
}

/// What the bytes of a file say it is, from its magic numbers: a family, since some formats share a container
/// (an OLE compound file is a `.doc` or an `.xls`; a ZIP a `.docx` or an `.xlsx`) and text formats have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sniffed {
    Exactly(FileKind),
    /// An OLE2 compound file: `.doc` or `.xls`.
    Ole,
    /// A ZIP archive holding a Word document (`word/`).
    WordZip,
    /// A ZIP archive holding a spreadsheet (`xl/`).
    ExcelZip,
    /// Another ZIP archive: no kind this backend takes.
    OtherZip,
    /// UTF-8 text without NUL bytes: `.csv`, `.html`, `.txt` or `.md`.
    Text,
    Unknown,
}

fn sniff(bytes: &[u8]) -> Sniffed {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    const OLE: &[u8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1";
    if bytes.starts_with(PNG) {
        Sniffed::Exactly(FileKind::Image(ImageFormat::Png))
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Sniffed::Exactly(FileKind::Image(ImageFormat::Jpeg))
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Sniffed::Exactly(FileKind::Image(ImageFormat::Gif))
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Sniffed::Exactly(FileKind::Image(ImageFormat::Webp))
    } else if bytes.starts_with(b"%PDF-") {
        Sniffed::Exactly(FileKind::Document(DocumentFormat::Pdf))
    } else if bytes.starts_with(OLE) {
        Sniffed::Ole
    } else if bytes.starts_with(b"PK\x03\x04") {
        // An Office Open XML file names its parts in the archive's local headers: `word/…` or `xl/…`.
        if contains(bytes, b"word/") {
            Sniffed::WordZip
        } else if contains(bytes, b"xl/") {
            Sniffed::ExcelZip
        } else {
            Sniffed::OtherZip
        }
    } else if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        Sniffed::Text
    } else {
        Sniffed::Unknown
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

impl Sniffed {
    /// What a person calls this content, for the 400 that refuses a mismatch.
    fn describe(self) -> &'static str {
        match self {
            Sniffed::Exactly(kind) => match kind.format() {
                "png" => "a PNG image",
                "jpeg" => "a JPEG image",
                "gif" => "a GIF image",
                "webp" => "a WebP image",
                _ => "a PDF document",
            },
            Sniffed::Ole => "a Word 97–2003 or Excel 97–2003 file",
            Sniffed::WordZip => "a Word (.docx) document",
            Sniffed::ExcelZip => "an Excel (.xlsx) workbook",
            Sniffed::OtherZip => "a ZIP archive",
            Sniffed::Text => "text",
            Sniffed::Unknown => "of no kind this backend takes",
        }
    }

    /// Whether content of this family can be `kind`.
    fn admits(self, kind: FileKind) -> bool {
        use DocumentFormat::*;
        match self {
            Sniffed::Exactly(exact) => exact == kind,
            Sniffed::Ole => matches!(kind, FileKind::Document(Doc | Xls)),
            Sniffed::WordZip => kind == FileKind::Document(Docx),
            Sniffed::ExcelZip => kind == FileKind::Document(Xlsx),
            Sniffed::Text => matches!(kind, FileKind::Document(Csv | Html | Txt | Md)),
            Sniffed::OtherZip | Sniffed::Unknown => false,
        }
    }

    /// The kind when the bytes alone tell it.
    fn alone(self) -> Option<FileKind> {
        match self {
            Sniffed::Exactly(kind) => Some(kind),
            Sniffed::WordZip => Some(FileKind::Document(DocumentFormat::Docx)),
            Sniffed::ExcelZip => Some(FileKind::Document(DocumentFormat::Xlsx)),
            Sniffed::Text => Some(FileKind::Document(DocumentFormat::Txt)),
            Sniffed::Ole | Sniffed::OtherZip | Sniffed::Unknown => None,
        }
    }
}

/// The kind of a file, from its bytes: the declared media type (or, when it declares none or only
/// `application/octet-stream`, the name's extension) picks among what the bytes can be, and a declaration the bytes
/// contradict is refused. `Err` is the reason, for a 400 naming the part.
pub fn identify(name: &str, declared: Option<&str>, bytes: &[u8]) -> Result<FileKind, String> {
    let declared = declared.map(str::trim).filter(|d| {
        !d.is_empty()
            && !d
                .to_ascii_lowercase()
                .starts_with("application/octet-stream")
    });
    let sniffed = sniff(bytes);
    let claimed = match declared {
        Some(media) => Some(FileKind::from_content_type(media).ok_or_else(|| {
            format!(
                "{media:?} is not a kind this backend takes: images png, jpeg, gif or webp; documents pdf, csv, doc, \
                 docx, xls, xlsx, html, txt or md"
            )
        })?),
        None => FileKind::from_name(name),
    };
    match claimed {
        Some(kind) if sniffed.admits(kind) => Ok(kind),
        Some(kind) => Err(format!(
            "declared {} ({}), but its bytes are {}",
            kind.content_type(),
            declared.map_or("by its name", |_| "by its content type"),
            sniffed.describe()
        )),
        None => sniffed.alone().ok_or_else(|| {
            format!(
                "its bytes are {}, and neither its content type nor its name says which kind it is",
                sniffed.describe()
            )
        }),
    }
}

/// A file in a message: its name, kind and size, and its bytes (when at hand) or where the owner's files keep it
/// (once stored), or both.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// The content; `None` for a stored file not read back yet.
    pub bytes: Option<Bytes>,
    /// Its key in the owner's files, once stored.
    pub key: Option<String>,
}

impl Attachment {
    /// A file as a request sent it.
    pub fn new(name: impl Into<String>, kind: FileKind, bytes: Bytes) -> Self {
        Self {
            name: name.into(),
            kind,
            size: bytes.len() as u64,
            bytes: Some(bytes),
            key: None,
        }
    }

    /// What is stored of it with its message.
    pub fn stored(&self) -> StoredFile {
        StoredFile {
            name: self.name.clone(),
            content_type: self.kind.content_type().to_string(),
            size: self.size,
            key: self.key.clone().unwrap_or_default(),
        }
    }

    /// The line that tells the model which file follows: its name is nowhere else for an image.
    pub fn label(&self) -> String {
        format!(
            "[file: {}, {}, {} bytes]",
            self.name,
            self.kind.content_type(),
            self.size
        )
    }
}

/// Two mentions of a file are the same file when they agree on name, kind and size; whether one holds the bytes
/// and the other the key does not matter.
impl PartialEq for Attachment {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.kind == other.kind && self.size == other.size
    }
}

impl Eq for Attachment {}

/// A file as stored with its message: what the history lists, and its key in the owner's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    pub name: String,
    #[serde(rename = "contentType")]
    pub content_type: String,
    pub size: u64,
    pub key: String,
}

impl StoredFile {
    /// The file as the conversation knows it, its bytes to be read back; `None` for a kind no longer taken.
    pub fn attachment(&self) -> Option<Attachment> {
        Some(Attachment {
            name: self.name.clone(),
            kind: FileKind::from_content_type(&self.content_type)?,
            size: self.size,
            bytes: None,
            key: Some(self.key.clone()),
        })
    }
}

/// How many files a request may carry, and how large (Converse's own limits by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    pub max_images: usize,
    pub max_image_bytes: u64,
    pub max_documents: usize,
    pub max_document_bytes: u64,
}

impl Default for FileLimits {
    fn default() -> Self {
        Self {
            max_images: 20,
            max_image_bytes: 3_932_160,
            max_documents: 5,
            max_document_bytes: 4_718_592,
        }
    }
}

/// Why a file is refused: a 400 (the request is wrong) or a 413 (it is too large).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRefusal {
    Invalid(InvalidRequest),
    TooLarge(InvalidRequest),
}

impl FileLimits {
    /// Refuses the one file at `path` when it is larger than its kind may be.
    pub fn check_size(&self, path: &str, kind: FileKind, size: u64) -> Result<(), FileRefusal> {
        let (limit, what) = if kind.is_image() {
            (self.max_image_bytes, "an image")
        } else {
            (self.max_document_bytes, "a document")
        };
        if size > limit {
            return Err(FileRefusal::TooLarge(InvalidRequest::new(
                path,
                format!("is {size} bytes, more than the {limit} bytes {what} may be"),
            )));
        }
        Ok(())
    }
}

/// A document's name as Converse takes it: letters, digits, single spaces, hyphens, parentheses and square
/// brackets, without the extension (the format says it); a name with nothing left is `document`.
pub fn document_name(name: &str) -> String {
    let stem = match name.rsplit_once('.') {
        Some((stem, _)) if !stem.trim().is_empty() => stem,
        _ => name,
    };
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
                c
            } else {
                ' '
            }
        })
        .collect();
    let joined: String = cleaned
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(100)
        .collect();
    let trimmed = joined.trim();
    if trimmed.is_empty() {
        "document".into()
    } else {
        trimmed.to_string()
    }
}

/// Distinct document names for one model call (Converse refuses two documents of one name): a repeated name
/// gets ` (2)`, ` (3)`…
pub fn distinct_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        let base = document_name(name);
        let mut candidate = base.clone();
        let mut n = 2;
        while seen.contains(&candidate) {
            candidate = format!("{base} ({n})");
            n += 1;
        }
        seen.push(candidate);
    }
    seen
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// No such file for this owner (never stored, expired, or someone else's).
    #[error("no such file")]
    NotFound,
    /// The file store did not answer in time or cannot serve now: trying again later may work.
    #[error("the file store is unavailable: {0}")]
    Unavailable(String),
    #[error("the file store failed: {0}")]
    Failed(String),
}

pub type AttachmentFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, AttachmentError>> + Send + 'a>>;

/// Where files of messages are kept, per owner: a key names the owner and the chat, and a call with another
/// owner's key finds nothing. Implementations bound every call with a timeout.
pub trait AttachmentStore: Send + Sync {
    /// Stores `bytes` as a file of `owner`'s chat `chat_id`; its key.
    fn put<'a>(
        &'a self,
        owner: &'a str,
        chat_id: &'a str,
        file: &'a Attachment,
    ) -> AttachmentFuture<'a, String>;

    /// The bytes of `owner`'s file `key`.
    fn get<'a>(&'a self, owner: &'a str, key: &'a str) -> AttachmentFuture<'a, Bytes>;

    /// Removes `owner`'s files `keys` (those that exist).
    fn delete<'a>(&'a self, owner: &'a str, keys: &'a [String]) -> AttachmentFuture<'a, ()>;

    /// Removes every file of `owner`'s chat `chat_id`.
    fn delete_chat<'a>(&'a self, owner: &'a str, chat_id: &'a str) -> AttachmentFuture<'a, ()>;

    /// A URL that reads `owner`'s stored `file` for a few minutes, without credentials. What a browser does with
    /// it is the store's to pin: an image or a PDF may be shown, anything else is downloaded as `file.name`, so a
    /// file a user sent (HTML, say) never runs as a page of the store's origin.
    fn url<'a>(&'a self, owner: &'a str, file: &'a StoredFile) -> AttachmentFuture<'a, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Role};

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    const PDF: &[u8] = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n";

    #[test]
    fn the_bytes_decide_and_a_declaration_they_contradict_is_refused() {
        let png = FileKind::Image(ImageFormat::Png);
        let pdf = FileKind::Document(DocumentFormat::Pdf);
        assert_eq!(identify("a.png", Some("image/png"), PNG), Ok(png));
        assert_eq!(identify("x", None, PNG), Ok(png));
        assert_eq!(
            identify("x", Some("application/octet-stream"), PDF),
            Ok(pdf)
        );
        // A `.png` that is a PDF: by its content type, and by its name alone.
        let lie = identify("shot.png", Some("image/png"), PDF).unwrap_err();
        assert!(lie.contains("image/png") && lie.contains("PDF"), "{lie}");
        assert!(identify("shot.png", None, PDF).is_err());
        assert_eq!(
            identify("notes.md", Some("text/markdown; charset=utf-8"), b"# Hi"),
            Ok(FileKind::Document(DocumentFormat::Md))
        );
        assert!(identify("a.txt", Some("text/plain"), b"a\0b").is_err());
        assert!(identify("a.zip", Some("application/zip"), b"PK\x03\x04").is_err());
        let ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest";
        assert_eq!(
            identify("a.xls", None, ole),
            Ok(FileKind::Document(DocumentFormat::Xls))
        );
        assert!(identify("a", None, ole).is_err(), "OLE alone is ambiguous");
        let docx = b"PK\x03\x04....word/document.xml";
        assert_eq!(
            identify(
                "a.docx",
                Some(FileKind::Document(DocumentFormat::Docx).content_type()),
                docx
            ),
            Ok(FileKind::Document(DocumentFormat::Docx))
        );
        assert!(identify("a.xlsx", None, docx).is_err());
        assert_eq!(
            identify("w.webp", None, b"RIFF\0\0\0\0WEBPVP8 "),
            Ok(FileKind::Image(ImageFormat::Webp))
        );
    }

    #[test]
    fn document_names_keep_to_converses_rules_and_differ() {
        assert_eq!(document_name("report.pdf"), "report");
        assert_eq!(
            document_name("Q3 results_final v2.xlsx"),
            "Q3 results final v2"
        );
        assert_eq!(document_name("..."), "document");
        assert_eq!(document_name("a\t\tb(1)[x].txt"), "a b(1)[x]");
        assert_eq!(
            distinct_names(["a.pdf", "a.txt", "a.md"]),
            ["a", "a (2)", "a (3)"]
        );
    }

    #[test]
    fn limits_count_per_kind_and_files_belong_to_users() {
        let limits = FileLimits {
            max_images: 1,
            max_image_bytes: 10,
            max_documents: 1,
            max_document_bytes: 20,
        };
        let png = |n: usize| {
            Attachment::new(
                "a.png",
                FileKind::Image(ImageFormat::Png),
                Bytes::from(vec![0; n]),
            )
        };
        let with = |role, files: Vec<Attachment>| {
            let mut m = Message::new(role, "q");
            m.content
                .extend(files.into_iter().map(crate::ContentPart::File));
            m
        };
        assert_eq!(
            limits.check_messages(&[with(Role::User, vec![png(10)])]),
            Ok(())
        );
        assert!(matches!(
            limits.check_messages(&[with(Role::User, vec![png(11)])]),
            Err(FileRefusal::TooLarge(e)) if e.path == "messages[0].files[0]"
        ));
        assert!(matches!(
            limits.check_messages(&[with(Role::User, vec![png(1), png(1)])]),
            Err(FileRefusal::Invalid(e)) if e.reason.contains("2 images")
        ));
        assert!(matches!(
            limits.check_messages(&[with(Role::User, vec![]), with(Role::Assistant, vec![png(1)])]),
            Err(FileRefusal::Invalid(e)) if e.path == "messages[1].files[0]"
        ));
    }
}
