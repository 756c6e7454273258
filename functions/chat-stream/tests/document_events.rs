//! `GET /documents/events` through the streaming function's whole edge, on real parts: JWT callers, records in a moto
//! table, bytes in a moto bucket, ingestion through the real bedrock-agent SDK client into the local knowledge base
//! (which reads them back from moto and takes its time, as the service does). Alice's upload is pushed `pending`,
//! then `indexed`, and the stream ends settled; Bob's watch of it is a 404 and his own watch says nothing of it; a
//! document deleted while watched is a `deleted` event; documents off is a 404.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{
    AccessChoice, Caller, DocumentSettings, Documents, LimitKind, Limits, NewDocument,
};
use chat_edge::Auth;
use chat_stream::App;
use chat_testing::harness::{self, Backend, JwtSigner, Reply};
use chat_testing::setup::{self, DocumentIndex};
use http_body_util::BodyExt;
use lambda_http::Request;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.document-events.test";
const AUDIENCE: &str = "chat-backend";
const KB_ID: &str = "EVENTSKB01";
/// How long the local knowledge base waits before it starts on a document: long enough for the first event to
/// find it `pending`, well under the watch's bound.
const INGEST_DELAY_MS: u64 = 1500;

struct World {
    _kb: LocalKnowledgeBase,
    _backend: Backend,
    signer: JwtSigner,
    auth: Auth,
    documents: Documents,
    app: App<BedrockModel, DynamoStore>,
    /// The same function where documents are off.
    off: App<BedrockModel, DynamoStore>,
    /// The same function where each caller holds at most three watches at once, their places in the table.
    limited: App<BedrockModel, DynamoStore>,
}

#[derive(Clone, Copy)]
enum Who {
    Alice,
    Bob,
}

async fn world() -> World {
    let signer = JwtSigner::new("document-events");
    let jwks = signer.jwks_path();
    let mut env = setup::jwt_env(ISSUER, AUDIENCE, &jwks);
    env.extend([("KNOWLEDGE_BASE_ID", KB_ID), ("QUERY_REWRITE", "false")]);
    let backend = Backend::start(&env).await;
    let DocumentIndex { kb, index, .. } =
        setup::document_index(KB_ID, "events", INGEST_DELAY_MS).await;
    let documents = Documents::new(
        Arc::new(backend.store.documents()),
        Arc::new(index),
        DocumentSettings::default(),
    );
    let auth = harness::auth_from(&env);
    let new_app = || {
        let backend = &backend;
        let auth = auth.clone();
        async move {
            App::new(
                backend.model().await,
                backend.store.clone(),
                auth,
                backend.config.clone(),
            )
        }
    };
    let app = new_app().await.with_documents(Some(documents.clone()));
    let off = new_app().await;
    let limited = new_app()
        .await
        .with_documents(Some(documents.clone().with_watch_slots(
            Arc::new(backend.store.usage_ledger()),
            &Limits::default().with(LimitKind::OPEN_WATCHES, 3.0),
            Duration::from_secs(360),
        )));
    World {
        _kb: kb,
        _backend: backend,
        signer,
        auth,
        documents,
        app,
        off,
        limited,
    }
}

impl World {
    fn token(&self, who: Who) -> String {
        let claims = match who {
            Who::Alice => json!({"sub": "alice", "oid": "alice"}),
            Who::Bob => json!({"sub": "bob", "oid": "bob"}),
        };
        self.signer.token_with(ISSUER, AUDIENCE, |_| {}, claims)
    }

    fn request(&self, who: Who, path: &str) -> Request {
        let mut r = setup::bearer_request("GET", path, Some(&self.token(who)), None);
        r.headers_mut()
            .insert("accept", "text/event-stream".parse().unwrap());
        r
    }

    /// `who`'s `GET path` (an event stream asked for) answered by the function with documents.
    async fn watch(&self, who: Who, path: &str) -> axum::response::Response {
        self.app.handle(self.request(who, path)).await
    }

    /// The caller the edge makes of `who`'s token (so that a document uploaded in the core is theirs).
    async fn caller(&self, who: Who) -> Caller {
        let (parts, _) = self.request(who, "/").into_parts();
        self.auth.identify(&parts).await.unwrap()
    }

    /// Uploads one Markdown file as `who`, straight through the core and the real adapters.
    async fn upload(&self, who: Who, name: &str, text: &str) -> String {
        let caller = self.caller(who).await;
        let done = self
            .documents
            .upload(
                &caller,
                vec![NewDocument {
                    name: name.into(),
                    bytes: Bytes::copy_from_slice(text.as_bytes()),
                }],
                &AccessChoice::default(),
            )
            .await
            .unwrap();
        assert_eq!(done[0].status.as_str(), "pending", "{done:?}");
        done[0].id.clone()
    }
}

/// One event as it arrived: its name, its data, and when.
#[derive(Debug)]
struct Event {
    name: String,
    data: Value,
    at: Instant,
}

/// A response read to its end (or `within`), as its status, its content type, its events and its comment lines.
async fn events(
    response: axum::response::Response,
    within: Duration,
) -> (u16, String, Vec<Event>, usize) {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    assert!(response.headers().get("content-length").is_none());
    let mut body = response.into_body();
    let mut buffer = String::new();
    let mut out = Vec::new();
    let mut comments = 0;
    let started = Instant::now();
    loop {
        let left = within.saturating_sub(started.elapsed());
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .expect("the stream ends in time");
        let Some(frame) = frame else { break };
        buffer.push_str(std::str::from_utf8(&frame.unwrap().into_data().unwrap()).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut name, mut data) = (String::from("message"), None);
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(d).unwrap());
                } else if line.starts_with(':') {
                    comments += 1;
                }
            }
            if let Some(data) = data {
                out.push(Event {
                    name,
                    data,
                    at: Instant::now(),
                });
            }
        }
    }
    assert!(
        buffer.trim().is_empty(),
        "a partial event at the end: {buffer:?}"
    );
    (status, content_type, out, comments)
}

#[tokio::test]
async fn an_upload_is_pushed_pending_then_indexed_and_the_stream_ends_settled() {
    let w = world().await;
    let id = w
        .upload(
            Who::Alice,
            "Quorvex_Lighthouse.md",
            "# Quorvex lighthouse\n\nThe quorvex lighthouse keeps a brass telescope named Miranda.",
        )
        .await;
    let started = Instant::now();
    // Without ids: her unsettled documents, this one.
    let response = w.watch(Who::Alice, "/documents/events").await;
    let (status, content_type, got, _) = events(response, Duration::from_secs(30)).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/event-stream");
    let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
    let statuses: Vec<&str> = got
        .iter()
        .filter(|e| e.name == "document")
        .map(|e| e.data["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.first(), Some(&"pending"), "{got:?}");
    assert_eq!(statuses.last(), Some(&"indexed"), "{got:?}");
    // Each event says something new: no status twice in a row.
    assert!(statuses.windows(2).all(|w| w[0] != w[1]), "{statuses:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert_eq!(got.last().unwrap().data, json!({"settled": true}));
    // The first event is the document as GET /documents/{id} answers it.
    let first = &got[0].data;
    assert_eq!(first["id"], id.as_str());
    assert_eq!(first["name"], "Quorvex_Lighthouse.md");
    assert_eq!(first["type"], "markdown");
    assert_eq!(first["access"], json!({"oids": ["alice"], "groups": []}));
    // The `indexed` event came when the knowledge base was done (after its delay), not at once.
    let indexed = got.iter().find(|e| e.data["status"] == "indexed").unwrap();
    assert!(
        indexed.at.duration_since(started) >= Duration::from_millis(INGEST_DELAY_MS),
        "{got:?}"
    );

    // Settled now: a watch of it says where it stands and ends at once.
    let response = w
        .watch(Who::Alice, &format!("/documents/events?ids={id}"))
        .await;
    let (status, _, got, _) = events(response, Duration::from_secs(10)).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["document", "end"]);
    assert_eq!(got[0].data["status"], "indexed");
    // And nothing unsettled is left to watch.
    let response = w.watch(Who::Alice, "/documents/events").await;
    let (_, _, got, _) = events(response, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, json!({"settled": true}));
}

#[tokio::test]
async fn bob_reaches_nothing_of_alices_document_and_a_delete_while_watched_is_pushed() {
    let w = world().await;
    let id = w
        .upload(
            Who::Alice,
            "Private_Notes.md",
            "# Notes\n\nThe zentrik code is 4471.",
        )
        .await;
    // Bob naming her document: a 404 before any event, exactly as GET /documents/{id}.
    let reply = Reply::buffered(
        w.watch(Who::Bob, &format!("/documents/events?ids={id}"))
            .await,
    );
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert!(reply.json()["error"].is_string());
    // His own watch: nothing of hers, and it ends at once.
    let response = w.watch(Who::Bob, "/documents/events").await;
    let (status, _, got, _) = events(response, Duration::from_secs(10)).await;
    assert_eq!(status, 200);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].name, "end");
    assert!(!format!("{got:?}").contains(&id));
    // Malformed ids: a 400; documents off: a 404.
    let reply = Reply::buffered(w.watch(Who::Alice, "/documents/events?ids=,,").await);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let reply = Reply::buffered(
        w.off
            .handle(w.request(Who::Alice, "/documents/events"))
            .await,
    );
    assert_eq!(reply.status, 404, "{}", reply.body);

    // Alice watches it and deletes it while it is still pending: the stream says so and ends.
    let response = w
        .watch(Who::Alice, &format!("/documents/events?ids={id}"))
        .await;
    let alice = w.caller(Who::Alice).await;
    let reading = tokio::spawn(events(response, Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    w.documents.delete(&alice, &id).await.unwrap();
    let (status, _, got, _) = reading.await.unwrap();
    assert_eq!(status, 200);
    let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["document", "deleted", "end"], "{got:?}");
    assert_eq!(got[1].data, json!({"id": id}));
    assert_eq!(got[2].data, json!({"settled": true}));
}

/// A caller holds at most three watches open at once (`QUOTA_OPEN_WATCHES`), their places kept in the table: the
/// fourth is a 429 with `Retry-After` before any event, another caller's places are their own, and each watch gives
/// its place back as it ends, so the next one is let in.
#[tokio::test]
async fn a_fourth_watch_at_once_is_refused_until_one_ends() {
    let w = world().await;
    let id = w
        .upload(
            Who::Alice,
            "Open_Watches.md",
            "# Watches\n\nThe quillon bell rings at noon.",
        )
        .await;
    let path = format!("/documents/events?ids={id}");
    let mut open = Vec::new();
    for _ in 0..3 {
        let response = w.limited.handle(w.request(Who::Alice, &path)).await;
        assert_eq!(response.status(), 200);
        open.push(response);
    }
    let refused = Reply::buffered(w.limited.handle(w.request(Who::Alice, &path)).await);
    assert_eq!(refused.status, 429, "{}", refused.body);
    let retry_after = refused.retry_after();
    assert!((1..=360).contains(&retry_after), "{retry_after}");
    assert!(
        refused.error_message().contains("3 watches"),
        "{}",
        refused.body
    );
    // Bob's places are his own: his watch is let in.
    let bob = w
        .limited
        .handle(w.request(Who::Bob, "/documents/events"))
        .await;
    assert_eq!(bob.status(), 200);
    // One of hers read to its end (the document indexed): its place is given back, and a new watch is let in.
    let first = open.remove(0);
    let (status, _, got, _) = events(first, Duration::from_secs(30)).await;
    assert_eq!(status, 200);
    assert_eq!(
        got.last().unwrap().data,
        json!({"settled": true}),
        "{got:?}"
    );
    let again = w.limited.handle(w.request(Who::Alice, &path)).await;
    assert_eq!(again.status(), 200);
    // The unlimited function counts nothing: a fifth and sixth of hers there are let in.
    for _ in 0..2 {
        let more = w.watch(Who::Alice, &path).await;
        assert_eq!(more.status(), 200);
    }
}
