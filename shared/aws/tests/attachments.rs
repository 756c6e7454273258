//! The files of messages on S3 (moto's server, which serves S3 beside DynamoDB), through the real SDK client: what
//! is put is read back and presigned whole, one owner's key never reaches another's file, and a chat's files go
//! with it.

use std::time::Duration;

use bytes::Bytes;
use chat_aws::S3Attachments;
use chat_core::{
    Attachment, AttachmentError, AttachmentStore, DocumentFormat, FileKind, ImageFormat,
    StoreTimeouts,
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
    let url = files.url("alice", &key).await.unwrap();
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(url.contains("X-Amz-Expires=60"), "{url}");
    assert_eq!(fetch(&url).await, (200, Bytes::from(bytes)));
}

#[tokio::test]
async fn another_owners_key_reaches_nothing() {
    let files = fresh().await;
    let key = files.put("alice", CHAT, &png(b"alice's")).await.unwrap();
    assert_eq!(files.get("bob", &key).await, Err(AttachmentError::NotFound));
    assert_eq!(files.url("bob", &key).await, Err(AttachmentError::NotFound));
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
