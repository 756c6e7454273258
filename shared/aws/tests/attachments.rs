//! The files of messages on S3 (moto's server, which serves S3 beside DynamoDB), through the real SDK client: what
//! is put is read back and presigned whole, one owner's key never reaches another's file, a chat's files go
//! with it, a file a browser could run is downloaded rather than shown, and no owner is too long for a key.

use std::time::Duration;

use bytes::Bytes;
use chat_aws::S3Attachments;
use chat_core::{
    Attachment, AttachmentError, AttachmentStore, DocumentFormat, FileKind, ImageFormat,
    StoreTimeouts, StoredFile,
};
use local_dynamodb::LocalDynamo;

const CHAT: &str = "0123456789abcdef0123456789abcdef";
const OTHER_CHAT: &str = "fedcba9876543210fedcba9876543210";

async fn fresh() -> S3Attachments {
    let files = S3Attachments::from_config(
        &LocalDynamo::shared().sdk_config().await,
        &format!("files-{}", uuid::Uuid::new_v4().simple()),
        Duration::from_secs(60),
        StoreTimeouts::default(),
    );
    files.ensure_bucket().await.expect("the bucket is created");
    files
}

fn png(bytes: &'static [u8]) -> Attachment {
    Attachment::new(
        "shot.png",
        FileKind::Image(ImageFormat::Png),
        Bytes::from_static(bytes),
    )
}

/// What the history lists of a stored file.
fn stored(file: &Attachment, key: &str) -> StoredFile {
    let mut file = file.clone();
    file.key = Some(key.to_string());
    file.stored()
}

/// The query parameter `name` of `url`, decoded.
fn param(url: &str, name: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// What a browser reads of `url`'s answer: its status, `Content-Type` and `Content-Disposition`.
async fn served(url: &str) -> (u16, String, Option<String>) {
    let response = reqwest::get(url).await.expect("the server answers");
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    (
        response.status().as_u16(),
        header(reqwest::header::CONTENT_TYPE).unwrap_or_default(),
        header(reqwest::header::CONTENT_DISPOSITION),
    )
}

/// What a plain GET of `url` returns: its status and body.
async fn fetch(url: &str) -> (u16, Bytes) {
    let response = reqwest::get(url).await.expect("the server answers");
    (response.status().as_u16(), response.bytes().await.unwrap())
}

#[tokio::test]
async fn a_file_is_kept_read_back_and_presigned_whole() {
    let files = fresh().await;
    // Every byte value, so that nothing is read as text on the way.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let pdf = Attachment::new(
        "report.pdf",
        FileKind::Document(DocumentFormat::Pdf),
        Bytes::from(bytes.clone()),
    );
    let key = files.put("alice", CHAT, &pdf).await.unwrap();
    assert!(key.contains(CHAT), "{key}");
    assert_eq!(files.get("alice", &key).await.unwrap(), bytes);
    let url = files.url("alice", &stored(&pdf, &key)).await.unwrap();
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(url.contains("X-Amz-Expires=60"), "{url}");
    assert_eq!(fetch(&url).await, (200, Bytes::from(bytes)));
}

#[tokio::test]
async fn another_owners_key_reaches_nothing() {
    let files = fresh().await;
    let key = files.put("alice", CHAT, &png(b"alice's")).await.unwrap();
    assert_eq!(files.get("bob", &key).await, Err(AttachmentError::NotFound));
    let listed = stored(&png(b"alice's"), &key);
    assert_eq!(
        files.url("bob", &listed).await,
        Err(AttachmentError::NotFound)
    );
    files
        .delete("bob", std::slice::from_ref(&key))
        .await
        .unwrap();
    files.delete_chat("bob", CHAT).await.unwrap();
    assert_eq!(files.get("alice", &key).await.unwrap(), &b"alice's"[..]);
    // An owner whose id begins another's, and keys that try to climb out of the owner's prefix.
    assert_eq!(
        files.get("alic", &key).await,
        Err(AttachmentError::NotFound)
    );
    let (prefix, _) = key.split_once('/').unwrap();
    for forged in [
        format!("{prefix}/../{key}"),
        format!("{prefix}/{CHAT}/../../{key}"),
        format!("{prefix}/{CHAT}"),
    ] {
        assert_eq!(
            files.get("alice", &forged).await,
            Err(AttachmentError::NotFound),
            "{forged}"
        );
    }
    // A key of alice's that was never stored is not found either.
    let missing = format!("{prefix}/{CHAT}/{OTHER_CHAT}");
    assert_eq!(
        files.get("alice", &missing).await,
        Err(AttachmentError::NotFound)
    );
}

#[tokio::test]
async fn deleting_a_chats_files_removes_them_all_and_only_them() {
    let files = fresh().await;
    let mut keys = Vec::new();
    for _ in 0..3 {
        keys.push(
            files
                .put("alice", CHAT, &png(b"one of three"))
                .await
                .unwrap(),
        );
    }
    let kept = files
        .put("alice", OTHER_CHAT, &png(b"another chat"))
        .await
        .unwrap();
    let bobs = files.put("bob", CHAT, &png(b"bob's")).await.unwrap();
    assert_eq!(files.count_owned("alice").await.unwrap(), 4);
    files.delete_chat("alice", CHAT).await.unwrap();
    for key in &keys {
        assert_eq!(
            files.get("alice", key).await,
            Err(AttachmentError::NotFound)
        );
    }
    assert_eq!(files.count_owned("alice").await.unwrap(), 1);
    assert!(files.get("alice", &kept).await.is_ok());
    assert!(files.get("bob", &bobs).await.is_ok());
    // Deleting single files, as a failed turn does.
    files
        .delete("alice", std::slice::from_ref(&kept))
        .await
        .unwrap();
    assert_eq!(files.count_owned("alice").await.unwrap(), 0);
}

#[tokio::test]
async fn a_file_a_browser_could_run_is_downloaded_and_an_image_is_shown() {
    let files = fresh().await;
    let page = Attachment::new(
        "inbox <script>\".html",
        FileKind::Document(DocumentFormat::Html),
        Bytes::from_static(b"<html><script>alert(document.cookie)</script></html>"),
    );
    let text = Attachment::new(
        "notes é.txt",
        FileKind::Document(DocumentFormat::Txt),
        Bytes::from_static(b"plain words"),
    );
    for file in [&page, &text] {
        let key = files.put("alice", CHAT, file).await.unwrap();
        let url = files.url("alice", &stored(file, &key)).await.unwrap();
        let disposition = param(&url, "response-content-disposition").expect(&url);
        assert!(disposition.starts_with("attachment; "), "{disposition}");
        assert_eq!(
            param(&url, "response-content-type").as_deref(),
            Some(file.kind.content_type())
        );
        let (status, content_type, served_disposition) = served(&url).await;
        assert_eq!(status, 200, "{url}");
        assert_eq!(content_type, file.kind.content_type());
        assert_eq!(served_disposition.as_deref(), Some(disposition.as_str()));
    }
    // An SVG (no kind a turn takes, but a stored file can claim any type) is downloaded as bytes, never shown.
    let key = files.put("alice", CHAT, &page).await.unwrap();
    let svg = StoredFile {
        name: "logo.svg".into(),
        content_type: "image/svg+xml".into(),
        size: 10,
        key,
    };
    let (status, content_type, disposition) =
        served(&files.url("alice", &svg).await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/octet-stream");
    assert!(
        disposition
            .as_deref()
            .unwrap_or("")
            .starts_with("attachment; filename=\"logo.svg\""),
        "{disposition:?}"
    );
    // An image and a PDF are shown in place, as their own type.
    let pdf = Attachment::new(
        "report.pdf",
        FileKind::Document(DocumentFormat::Pdf),
        Bytes::from_static(b"%PDF-1.4"),
    );
    for file in [&png(b"an image"), &pdf] {
        let key = files.put("alice", CHAT, file).await.unwrap();
        let url = files.url("alice", &stored(file, &key)).await.unwrap();
        assert_eq!(param(&url, "response-content-disposition"), None, "{url}");
        let (status, content_type, disposition) = served(&url).await;
        assert_eq!(status, 200);
        assert_eq!(content_type, file.kind.content_type());
        assert!(
            !disposition.unwrap_or_default().contains("attachment"),
            "{url}"
        );
    }
}

#[tokio::test]
async fn an_owner_of_two_thousand_bytes_keeps_files() {
    let files = fresh().await;
    let owner = format!("jwt:{}", "o".repeat(2000 - 4));
    let file = png(b"a long owner's");
    let key = files.put(&owner, CHAT, &file).await.unwrap();
    assert!(key.len() <= 1024, "{}", key.len());
    assert_eq!(
        files.get(&owner, &key).await.unwrap(),
        &b"a long owner's"[..]
    );
    let url = files.url(&owner, &stored(&file, &key)).await.unwrap();
    assert_eq!(
        fetch(&url).await,
        (200, Bytes::from_static(b"a long owner's"))
    );
    assert_eq!(files.count_owned(&owner).await.unwrap(), 1);
    // Another long owner, differing only at the end, reaches none of it.
    let other = format!("jwt:{}p", "o".repeat(2000 - 5));
    assert_eq!(
        files.get(&other, &key).await,
        Err(AttachmentError::NotFound)
    );
    assert_eq!(files.count_owned(&other).await.unwrap(), 0);
    files.delete_chat(&owner, CHAT).await.unwrap();
    assert_eq!(files.count_owned(&owner).await.unwrap(), 0);
}
