//! The upload quotas through the history function's whole edge, on real parts: JWT callers, the usage counters and
//! the records in a moto table, bytes in a moto bucket, ingestion into the local knowledge base. Under a limit of 2
//! documents a day, an upload of 2 passes and the third document is a 429 with `Retry-After`, nothing of it stored
//! (no record, no object); a byte limit refuses what the count would allow; two uploads at once cannot both pass a
//! limit one of them fills; another user is unaffected; `GET /usage` reports the counts; with the limits off,
//! uploads are not limited.

use std::sync::Arc;

use chat_aws::DynamoStore;
use chat_core::{DocumentSettings, Documents};
use chat_testing::harness::{self, Backend, JwtSigner, Reply};
use chat_testing::setup::{self, DocumentIndex};
use lambda_http::Request;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};

mod support;

const ISSUER: &str = "https://issuer.upload-quota.test";
const AUDIENCE: &str = "chat-backend";
const KB_ID: &str = "QUOTAKB001";
const BOUNDARY: &str = "---upload-quota-boundary";

struct World {
    history: history::App<DynamoStore>,
    signer: JwtSigner,
    /// Where the uploads' bytes are put.
    s3: aws_sdk_s3::Client,
    bucket: String,
    /// The knowledge base and the backends, kept running.
    _running: (LocalKnowledgeBase, Backend),
}

/// The history function with documents on, its uploads counted in the chats table's usage counters as the
/// composition root wires them, configured with `quotas` (the `QUOTA_UPLOADED_…` variables).
async fn world(quotas: &[(&str, &str)]) -> World {
    let signer = JwtSigner::new("upload-quota");
    let jwks = signer.jwks_path();
    let mut env = setup::jwt_env(ISSUER, AUDIENCE, &jwks);
    env.push(("KNOWLEDGE_BASE_ID", KB_ID));
    env.extend_from_slice(quotas);
    let backend = Backend::start(&env).await;
    let DocumentIndex { kb, index, bucket } = setup::document_index(KB_ID, "quota", 50).await;
    let moto = LocalDynamo::shared().sdk_config().await;
    let config = &backend.config;
    let documents = Documents::new(
        Arc::new(backend.store.documents()),
        Arc::new(index),
        DocumentSettings::default(),
    )
    .with_upload_quota(Arc::new(backend.store.usage_ledger()), config.usage_limits);
    let history = history::App::new(backend.store.clone(), harness::auth_from(&env), config)
        .with_usage(Some(backend.ledger()))
        .with_documents(Some(documents));
    World {
        _running: (kb, backend),
        signer,
        history,
        s3: aws_sdk_s3::Client::new(&moto),
        bucket,
    }
}

impl World {
    fn token(&self, who: &str) -> String {
        self.signer
            .token_with(ISSUER, AUDIENCE, |_| {}, json!({"sub": who, "oid": who}))
    }

    fn bearer(&self, who: &str) -> String {
        format!("Bearer {}", self.token(who))
    }

    fn request(&self, who: &str, method: &str, path: &str) -> Request {
        setup::bearer_request(method, path, Some(&self.token(who)), None)
    }

    async fn call(&self, request: Request) -> Reply {
        Reply::buffered(self.history.handle(request).await)
    }

    /// `who` uploads Markdown files of `sizes` bytes each.
    async fn upload(&self, who: &str, sizes: &[usize]) -> Reply {
        let notes: Vec<Vec<u8>> = sizes.iter().map(|size| vec![b'a'; *size]).collect();
        let parts = notes.iter().enumerate().map(|(i, note)| {
            let headers = support::file_headers(&format!("note{i}.md"), "text/markdown");
            (headers, note.as_slice())
        });
        let body = support::multipart_body(BOUNDARY, parts);
        let authorization = Some(self.bearer(who));
        self.call(support::multipart_request(
            "/documents",
            BOUNDARY,
            authorization,
            body,
        ))
        .await
    }

    /// How many documents `who`'s list holds.
    async fn records(&self, who: &str) -> usize {
        let list = self.call(self.request(who, "GET", "/documents")).await;
        assert_eq!(list.status, 200, "{}", list.body);
        list.json().as_array().unwrap().len()
    }

    /// The keys of every object in the documents bucket (documents and their metadata files).
    async fn objects(&self) -> Vec<String> {
        let out = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .send()
            .await
            .unwrap();
        out.contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect()
    }

    /// `who`'s `GET /usage`, its `uploads_today`.
    async fn uploads_today(&self, who: &str) -> Value {
        let r = self.call(self.request(who, "GET", "/usage")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["uploads_today"].clone()
    }
}

/// A refusal as a person reads it: 429, `Retry-After` until midnight UTC, a message naming the limit.
fn assert_refused(r: &Reply, says: &str) {
    assert_eq!(r.status, 429, "{}", r.body);
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    let now = time::OffsetDateTime::now_utc();
    let midnight = now.date().next_day().unwrap().midnight().assume_utc();
    let left = (midnight - now).whole_seconds() as u64;
    assert!(
        retry >= 1 && retry.abs_diff(left) <= 5,
        "Retry-After {retry}, {left} s to midnight UTC"
    );
    let message = r.json()["error"].as_str().unwrap().to_string();
    assert!(message.contains(says), "{message}");
}

#[tokio::test]
async fn under_two_documents_a_day_the_third_is_refused_with_nothing_stored_and_others_unaffected()
{
    let w = world(&[("QUOTA_UPLOADED_DOCUMENTS_PER_DAY", "2")]).await;
    let first = w.upload("alice", &[100, 200]).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let stored = w.objects().await;
    assert_eq!(
        stored.len(),
        4,
        "two documents and their metadata: {stored:?}"
    );
    let today = w.uploads_today("alice").await;
    let periods = chat_core::Periods::at(time::OffsetDateTime::now_utc());
    assert_eq!(
        today,
        json!({
            "period": periods.day,
            "documents": 2,
            "bytes": 300,
            "document_limit": 2,
            "byte_limit": null,
            "resets_at": chat_core::rfc3339_millis(periods.day_ends),
        })
    );

    let third = w.upload("alice", &[10]).await;
    assert_refused(&third, "You have uploaded your 2 documents for today");
    assert_eq!(
        w.records("alice").await,
        2,
        "no record of the refused upload"
    );
    assert_eq!(w.objects().await, stored, "no object of the refused upload");
    assert_eq!(w.uploads_today("alice").await["documents"], 2);

    // Bob has his own day.
    let bobs = w.upload("bob", &[10, 10]).await;
    assert_eq!(bobs.status, 201, "{}", bobs.body);
    assert_eq!(w.uploads_today("bob").await["documents"], 2);
    // More at once than a whole day's quota: refused, saying so.
    let carol = w.upload("carol", &[1, 1, 1]).await;
    assert_refused(&carol, "send fewer at a time");
    assert_eq!(w.uploads_today("carol").await["documents"], 0);
}

#[tokio::test]
async fn a_byte_limit_refuses_an_upload_the_count_would_allow() {
    let quotas = [
        ("QUOTA_UPLOADED_BYTES_PER_DAY", "1000"),
        ("QUOTA_UPLOADED_DOCUMENTS_PER_DAY", "10"),
    ];
    let w = world(&quotas).await;
    assert_eq!(w.upload("alice", &[600]).await.status, 201);
    let over = w.upload("alice", &[300, 200]).await;
    assert_refused(&over, "only 400 bytes of your 1000 bytes a day is left");
    assert_eq!(w.records("alice").await, 1);
    assert_eq!(w.objects().await.len(), 2);
    // What is left still fits.
    assert_eq!(w.upload("alice", &[400]).await.status, 201);
    let today = w.uploads_today("alice").await;
    assert_eq!(
        (today["documents"].clone(), today["bytes"].clone()),
        (json!(2), json!(1000))
    );
    assert_eq!(today["byte_limit"], 1000);
}

#[tokio::test]
async fn two_uploads_at_once_cannot_both_pass_a_limit_one_of_them_fills() {
    let w = world(&[("QUOTA_UPLOADED_DOCUMENTS_PER_DAY", "2")]).await;
    for round in 0..3 {
        let who = format!("user{round}");
        let (a, b) = tokio::join!(w.upload(&who, &[10, 10]), w.upload(&who, &[10, 10]));
        let mut statuses = [a.status.as_u16(), b.status.as_u16()];
        statuses.sort();
        assert_eq!(statuses, [201, 429], "{} / {}", a.body, b.body);
        assert_eq!(w.records(&who).await, 2);
        assert_eq!(w.uploads_today(&who).await["documents"], 2);
    }
}

#[tokio::test]
async fn with_the_limits_off_uploads_are_neither_limited_nor_counted() {
    let w = world(&[]).await;
    for _ in 0..3 {
        let r = w.upload("alice", &[10, 10, 10]).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    assert_eq!(w.records("alice").await, 9);
    let today = w.uploads_today("alice").await;
    assert_eq!(
        today["documents"], 0,
        "nothing written for an upload: {today}"
    );
    assert_eq!(today["document_limit"], Value::Null);
    assert_eq!(today["byte_limit"], Value::Null);
}
