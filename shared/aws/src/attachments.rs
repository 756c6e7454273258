//! The attachment port on S3: each file an object under its owner's and its chat's prefix
//! (`{owner, base64url}/{chat id}/{file id}`), so that one owner's key never names another's file and a chat's files
//! go with the chat. Its URLs let a browser show only images and PDFs; anything else is downloaded.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::create_bucket::CreateBucketError;
use aws_sdk_s3::operation::list_objects_v2::ListObjectsV2Error;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use aws_smithy_types::timeout::TimeoutConfig;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use chat_core::{
    Attachment, AttachmentError, AttachmentFuture, AttachmentStore, DocumentFormat, FileKind,
    StoreTimeouts, StoredFile, is_chat_id,
};
use tracing::Instrument;

/// How long one attempt to move a file may take: a few MB over a slow link take longer than a DynamoDB call.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call may take with its retries.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(25);
/// How many keys one `DeleteObjects` call takes.
const DELETE_BATCH: usize = 1000;

/// The owners' files in one S3 bucket.
#[derive(Clone)]
pub struct S3Attachments {
    client: Client,
    bucket: String,
    url_lifetime: Duration,
}

/// S3's bound on a key, in bytes.
const MAX_KEY_BYTES: usize = 1024;
/// What follows the owner's prefix in a key: `{chat id}/{file id}`, 32 hex digits each.
const KEY_TAIL_BYTES: usize = 32 + 1 + 32;
/// The longest owner part that leaves room for the rest of the key.
const MAX_OWNER_PART_BYTES: usize = MAX_KEY_BYTES - KEY_TAIL_BYTES - 1;
/// What begins the digest form of an owner part; `.` is not in base64url's alphabet, so it never begins a plain one.
const DIGEST_MARK: &str = "sha256.";

/// The prefix of every key of `owner`'s: their id in base64url, which no `/` or `.` can escape. An id too long for
/// that to fit in a key (over 718 bytes) is named by the hex SHA-256 of its bytes instead, as the table names a
/// long caller: keys of every owner that fits stay as they always were, and a longer one never had a file (S3
/// refused its keys), so no stored file is left behind.
pub(crate) fn owner_prefix(owner: &str) -> String {
    let plain = URL_SAFE_NO_PAD.encode(owner.as_bytes());
    if plain.len() <= MAX_OWNER_PART_BYTES {
        return format!("{plain}/");
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, owner.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{DIGEST_MARK}{hex}/")
}

/// The media type a URL serves `file` as, and whether a browser may show it in place: only images and PDFs are
/// shown; a kind that could run as a page (HTML; SVG, were it ever taken) or one not known is downloaded. The
/// type is always given, so S3 never answers with whatever the object happens to say.
fn served_as(file: &StoredFile) -> (&'static str, bool) {
    match FileKind::from_content_type(&file.content_type) {
        Some(kind @ FileKind::Image(_)) => (kind.content_type(), true),
        Some(kind @ FileKind::Document(DocumentFormat::Pdf)) => (kind.content_type(), true),
        Some(kind) => (kind.content_type(), false),
        None => ("application/octet-stream", false),
    }
}

/// `attachment` with the file's name, as RFC 6266 says: a plain `filename` any browser reads (ASCII, no quote,
/// backslash, percent sign or control character) and `filename*` with the whole name in UTF-8, percent-encoded.
fn attachment_disposition(name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| {
            // `%` too: some browsers decode it in a plain `filename`.
            if c == ' ' || (c.is_ascii_graphic() && !matches!(c, '"' | '\\' | '%')) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::with_capacity(name.len());
    for b in name.bytes() {
        // RFC 5987's attr-char: what may stand for itself in `filename*`.
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

/// Whether `key` is one of `owner`'s: under their prefix, then a chat id, then a file id, and nothing else.
fn owns(owner: &str, key: &str) -> bool {
    let Some(rest) = key.strip_prefix(&owner_prefix(owner)) else {
        return false;
    };
    matches!(rest.split_once('/'), Some((chat, file)) if is_chat_id(chat) && is_chat_id(file))
}

/// What a failed call means: out of reach (no answer in time, no connection, a server error or throttling past
/// the retries) is worth trying again later; a missing object is [`AttachmentError::NotFound`]; anything else is
/// a fault of ours.
fn failed<E>(e: SdkError<E, HttpResponse>) -> AttachmentError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let (unavailable, missing) = match &e {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => (true, false),
        SdkError::DispatchFailure(f) => (!f.is_user(), false),
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status();
            let code = ctx.err().code();
            (
                status.is_server_error() || matches!(code, Some("SlowDown" | "Throttling")),
                status.as_u16() == 404 || matches!(code, Some("NoSuchKey" | "NotFound")),
            )
        }
        _ => (false, false),
    };
    let detail = format!("{:?}", aws_sdk_s3::error::DisplayErrorContext(&e));
    if missing {
        AttachmentError::NotFound
    } else if unavailable {
        AttachmentError::Unavailable(detail)
    } else {
        AttachmentError::Failed(detail)
    }
}

/// An S3 client from the shared AWS configuration, every call bounded by `timeouts`. An endpoint of its own
/// (`AWS_ENDPOINT_URL_S3`, a local server) is addressed by path, as such servers expect.
pub(crate) fn s3_client(config: &aws_config::SdkConfig, timeouts: TimeoutConfig) -> Client {
    let local = config.endpoint_url().is_some()
        || ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    let client_config = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(local)
        .timeout_config(timeouts)
        .build();
    Client::from_conf(client_config)
}

/// Creates `bucket` unless it is there already (it answers, or its creation says it is ours), the look traced in
/// the first of `spans`, the creation in the second.
pub(crate) async fn ensure_bucket(
    client: &Client,
    bucket: &str,
    [head, create]: [tracing::Span; 2],
) -> Result<(), SdkError<CreateBucketError, HttpResponse>> {
    if client
        .head_bucket()
        .bucket(bucket)
        .send()
        .instrument(head)
        .await
        .is_ok()
    {
        return Ok(());
    }
    match client
        .create_bucket()
        .bucket(bucket)
        .send()
        .instrument(create)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("BucketAlreadyOwnedByYou") => Ok(()),
        Err(e) => Err(e),
    }
}

/// One page of the keys `bucket` holds under `prefix`, from `token` (the first page when `None`), traced as `span`;
/// and the token of the next page, when there is one.
pub(crate) async fn keys_under(
    client: &Client,
    bucket: &str,
    prefix: &str,
    token: Option<String>,
    span: tracing::Span,
) -> Result<(Vec<String>, Option<String>), SdkError<ListObjectsV2Error, HttpResponse>> {
    let page = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .set_continuation_token(token)
        .send()
        .instrument(span)
        .await?;
    let keys = page
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect();
    let next = match page.next_continuation_token() {
        Some(next) if page.is_truncated() == Some(true) => Some(next.to_string()),
        _ => None,
    };
    Ok((keys, next))
}

/// The quiet deletion (only failures answered) of `keys`.
pub(crate) fn deletion<K: Into<String>>(keys: impl IntoIterator<Item = K>) -> Delete {
    let objects = keys
        .into_iter()
        .map(|key| {
            ObjectIdentifier::builder()
                .key(key)
                .build()
                .expect("an object identifier has its key")
        })
        .collect();
    Delete::builder()
        .set_objects(Some(objects))
        .quiet(true)
        .build()
        .expect("a delete has its objects")
}

impl S3Attachments {
    pub fn new(client: Client, bucket: impl Into<String>, url_lifetime: Duration) -> Self {
        Self {
            client,
            bucket: bucket.into(),
            url_lifetime,
        }
    }

    /// Files in `bucket`, with a client from the shared AWS configuration whose every call is bounded (connecting
    /// as the store does). An endpoint of its own (`AWS_ENDPOINT_URL_S3`, a local server) is addressed by path, as
    /// such servers expect.
    pub fn from_config(
        config: &aws_config::SdkConfig,
        bucket: &str,
        url_lifetime: Duration,
        timeouts: StoreTimeouts,
    ) -> Self {
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(timeouts.connect)
            .operation_attempt_timeout(ATTEMPT_TIMEOUT.max(timeouts.attempt))
            .operation_timeout(OPERATION_TIMEOUT.max(timeouts.operation))
            .build();
        Self::new(s3_client(config, timeouts), bucket, url_lifetime)
    }

    /// Creates the bucket when it does not exist yet (for local servers and tests; a deployment's template
    /// creates its own).
    pub async fn ensure_bucket(&self) -> Result<(), AttachmentError> {
        let spans = [
            tracing::info_span!("attachments.head_bucket"),
            tracing::info_span!("attachments.create_bucket"),
        ];
        ensure_bucket(&self.client, &self.bucket, spans)
            .await
            .map_err(failed)
    }

    /// How many objects the bucket holds under `owner`'s prefix (for tests and tools).
    pub async fn count_owned(&self, owner: &str) -> Result<usize, AttachmentError> {
        let span = tracing::info_span!("attachments.list_objects_v2");
        let (keys, _) = keys_under(&self.client, &self.bucket, &owner_prefix(owner), None, span)
            .await
            .map_err(failed)?;
        Ok(keys.len())
    }

    async fn put_file(
        &self,
        owner: &str,
        chat_id: &str,
        file: &Attachment,
    ) -> Result<String, AttachmentError> {
        if !is_chat_id(chat_id) {
            return Err(AttachmentError::Failed(format!(
                "{chat_id:?} is no chat id"
            )));
        }
        let bytes = file
            .bytes
            .clone()
            .ok_or_else(|| AttachmentError::Failed(format!("{} has no bytes", file.name)))?;
        // The key is chosen before the call: a retry writes the same object again, never a second one.
        let key = format!(
            "{}{chat_id}/{}",
            owner_prefix(owner),
            uuid::Uuid::new_v4().simple()
        );
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .content_type(file.kind.content_type())
            .content_length(bytes.len() as i64)
            .body(ByteStream::from(bytes))
            .send()
            .instrument(tracing::info_span!("attachments.put_object"))
            .await
            .map_err(failed)?;
        Ok(key)
    }

    async fn get_file(&self, owner: &str, key: &str) -> Result<Bytes, AttachmentError> {
        if !owns(owner, key) {
            return Err(AttachmentError::NotFound);
        }
        // The span covers the body's download too: for a file of a few MB that is most of the call.
        let span = tracing::info_span!("attachments.get_object", bytes = tracing::field::Empty);
        let object = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .instrument(span.clone())
            .await
            .map_err(failed)?;
        let body = object
            .body
            .collect()
            .instrument(span.clone())
            .await
            .map_err(|e| AttachmentError::Unavailable(format!("reading {key}: {e}")))?
            .into_bytes();
        span.record("bytes", body.len());
        Ok(body)
    }

    async fn delete_keys(&self, keys: &[String]) -> Result<(), AttachmentError> {
        for batch in keys.chunks(DELETE_BATCH) {
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(deletion(batch))
                .send()
                .instrument(tracing::info_span!("attachments.delete_objects"))
                .await
                .map_err(failed)?;
            if let Some(error) = out.errors().first() {
                return Err(AttachmentError::Failed(format!(
                    "deleting {}: {}",
                    error.key().unwrap_or(""),
                    error.message().unwrap_or("")
                )));
            }
        }
        Ok(())
    }

    async fn delete_owned(&self, owner: &str, keys: &[String]) -> Result<(), AttachmentError> {
        let owned: Vec<String> = keys.iter().filter(|k| owns(owner, k)).cloned().collect();
        self.delete_keys(&owned).await
    }

    async fn delete_prefix(&self, owner: &str, chat_id: &str) -> Result<(), AttachmentError> {
        if !is_chat_id(chat_id) {
            return Ok(());
        }
        let prefix = format!("{}{chat_id}/", owner_prefix(owner));
        let mut token = None;
        loop {
            let span = tracing::info_span!("attachments.list_objects_v2");
            let (keys, next) = keys_under(&self.client, &self.bucket, &prefix, token.take(), span)
                .await
                .map_err(failed)?;
            self.delete_keys(&keys).await?;
            match next {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }

    async fn presigned(&self, owner: &str, file: &StoredFile) -> Result<String, AttachmentError> {
        if !owns(owner, &file.key) {
            return Err(AttachmentError::NotFound);
        }
        let config = PresigningConfig::expires_in(self.url_lifetime)
            .map_err(|e| AttachmentError::Failed(format!("presigning: {e}")))?;
        let (content_type, shown) = served_as(file);
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&file.key)
            .response_content_type(content_type)
            .set_response_content_disposition((!shown).then(|| attachment_disposition(&file.name)))
            .presigned(config)
            .await
            .map_err(failed)?;
        Ok(request.uri().to_string())
    }
}

impl AttachmentStore for S3Attachments {
    fn put<'a>(
        &'a self,
        owner: &'a str,
        chat_id: &'a str,
        file: &'a Attachment,
    ) -> AttachmentFuture<'a, String> {
        Box::pin(self.put_file(owner, chat_id, file))
    }

    fn get<'a>(&'a self, owner: &'a str, key: &'a str) -> AttachmentFuture<'a, Bytes> {
        Box::pin(self.get_file(owner, key))
    }

    fn delete<'a>(&'a self, owner: &'a str, keys: &'a [String]) -> AttachmentFuture<'a, ()> {
        Box::pin(self.delete_owned(owner, keys))
    }

    fn delete_chat<'a>(&'a self, owner: &'a str, chat_id: &'a str) -> AttachmentFuture<'a, ()> {
        Box::pin(self.delete_prefix(owner, chat_id))
    }

    fn url<'a>(&'a self, owner: &'a str, file: &'a StoredFile) -> AttachmentFuture<'a, String> {
        Box::pin(self.presigned(owner, file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_belong_to_one_owner() {
        let chat = "0123456789abcdef0123456789abcdef";
        let key = format!("{}{chat}/{chat}", owner_prefix("alice"));
        assert!(owns("alice", &key));
        assert!(!owns("bob", &key));
        // An owner whose id is another's prefix, and keys that try to climb out.
        assert!(!owns("alic", &key));
        assert!(!owns(
            "alice",
            &format!("{}../x/{chat}", owner_prefix("alice"))
        ));
        assert!(!owns("alice", &format!("{}{chat}", owner_prefix("alice"))));
        assert_ne!(owner_prefix("a/b"), owner_prefix("a"));
        assert!(!owner_prefix("a/../b").trim_end_matches('/').contains('/'));
    }

    #[test]
    fn no_owner_makes_a_key_too_long_and_short_ones_keep_their_keys() {
        let chat = "0123456789abcdef0123456789abcdef";
        let key = |owner: &str| format!("{}{chat}/{chat}", owner_prefix(owner));
        // The keys files were always stored under.
        assert_eq!(owner_prefix("jwt:alice"), "and0OmFsaWNl/");
        // The longest owner kept plain fills the key exactly; one byte more takes the digest form.
        let longest = "a".repeat(MAX_OWNER_PART_BYTES / 4 * 3 + 1);
        assert_eq!(URL_SAFE_NO_PAD.encode(&longest).len(), MAX_OWNER_PART_BYTES);
        assert_eq!(key(&longest).len(), MAX_KEY_BYTES);
        let over = format!("{longest}a");
        assert!(owner_prefix(&over).starts_with(DIGEST_MARK));
        for owner in [over.clone(), "x".repeat(2000), "é".repeat(5000)] {
            assert!(key(&owner).len() <= MAX_KEY_BYTES);
            assert!(owns(&owner, &key(&owner)));
        }
        // Distinct long owners keep distinct files.
        let other = format!("{longest}b");
        assert_ne!(owner_prefix(&over), owner_prefix(&other));
        assert!(!owns(&other, &key(&over)));
    }

    fn stored(name: &str, content_type: &str) -> StoredFile {
        StoredFile {
            name: name.into(),
            content_type: content_type.into(),
            size: 1,
            key: String::new(),
        }
    }

    #[test]
    fn only_images_and_pdfs_are_shown_in_place() {
        for (name, content_type, served) in [
            ("a.png", "image/png", ("image/png", true)),
            ("a.pdf", "application/pdf", ("application/pdf", true)),
            ("a.html", "text/html", ("text/html", false)),
            ("a.md", "text/markdown", ("text/markdown", false)),
            (
                "a.svg",
                "image/svg+xml",
                ("application/octet-stream", false),
            ),
        ] {
            assert_eq!(served_as(&stored(name, content_type)), served, "{name}");
        }
    }

    #[test]
    fn a_name_cannot_break_out_of_its_disposition() {
        assert_eq!(
            attachment_disposition("notes.txt"),
            "attachment; filename=\"notes.txt\"; filename*=UTF-8''notes.txt"
        );
        assert_eq!(
            attachment_disposition("a\"; filename=evil.html\r\nX: y\\%é.txt"),
            "attachment; filename=\"a_; filename=evil.html__X: y___.txt\"; \
             filename*=UTF-8''a%22%3B%20filename%3Devil.html%0D%0AX%3A%20y%5C%25%C3%A9.txt"
        );
    }
}
