//! `/documents` through the history function's whole edge, on real parts: JWT callers, records in a moto table,
//! bytes in a moto bucket, ingestion through the real bedrock-agent SDK client into the local knowledge base,
//! which reads them back from moto and indexes them; and the chat function's grounded answers searching that same
//! knowledge base. Alice's upload goes `pending` → `indexed` and grounds her answers, never Bob's; Bob's read and
//! delete of it are 404s; an administrator shares with `leadership`, whose members alone find it; a file the
//! knowledge base cannot parse ends `failed` with a reason; a delete takes the document out of answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chat_aws::{BedrockKnowledgeBase, BedrockModel, DynamoStore};
use chat_core::{DocumentSettings, Documents};
use chat_testing::bytes::simple_pdf;
use chat_testing::harness::{self, Backend, JwtSigner, Reply};
use chat_testing::setup::{self, DocumentIndex};
use lambda_http::Request;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};

mod support;

const ISSUER: &str = "https://issuer.documents.test";
const AUDIENCE: &str = "chat-backend";
const KB_ID: &str = "DOCSKB0001";
const BOUNDARY: &str = "---documents-test-boundary";

struct World {
    _kb: LocalKnowledgeBase,
    /// The local Bedrock server the chat's model is, kept running.
    _backend: Backend,
    signer: JwtSigner,
    history: history::App<DynamoStore>,
    chat: chat::App<BedrockModel, DynamoStore>,
}

#[derive(Clone, Copy, Debug)]
enum Who {
    Alice,
    Bob,
    /// A document administrator.
    Admin,
    /// A member of `leadership`.
    Lee,
}

impl Who {
    fn claims(self) -> Value {
        match self {
            Who::Alice => json!({"sub": "alice", "oid": "alice"}),
            Who::Bob => json!({"sub": "bob", "oid": "bob"}),
            Who::Admin => json!({"sub": "dana", "oid": "dana", "groups": ["doc-admins"]}),
            Who::Lee => json!({"sub": "lee", "oid": "lee", "groups": ["leadership"]}),
        }
    }
}

async fn world() -> World {
    let signer = JwtSigner::new("documents");
    let jwks = signer.jwks_path();
    let mut env = setup::jwt_env(ISSUER, AUDIENCE, &jwks);
    env.extend([
        ("KNOWLEDGE_BASE_ID", KB_ID),
        ("QUERY_REWRITE", "false"),
        ("DOCUMENT_ADMIN_GROUP", "doc-admins"),
    ]);
    let backend = Backend::start(&env).await;
    let DocumentIndex { kb, index, .. } = setup::document_index(KB_ID, "docs", 50).await;
    let agent = kb.sdk_config().await;
    let config = &backend.config;
    let d = &config.documents;
    let documents = Documents::new(
        Arc::new(backend.store.documents()),
        Arc::new(index),
        DocumentSettings {
            admin_group: d.admin_group.clone(),
            max_bytes: d.max_bytes,
            max_per_upload: d.max_per_upload,
            ..DocumentSettings::default()
        },
    );
    let auth = harness::auth_from(&env);
    let history = history::App::new(backend.store.clone(), auth.clone(), config)
        .with_documents(Some(documents));
    let retriever = BedrockKnowledgeBase::new(&agent, KB_ID.into(), config.knowledge_base_timeout);
    let chat = chat::App::new(
        backend.model().await,
        backend.store.clone(),
        auth,
        config.clone(),
    )
    .with_retriever(Some(Arc::new(retriever)));
    World {
        _kb: kb,
        _backend: backend,
        signer,
        history,
        chat,
    }
}

impl World {
    fn token(&self, who: Who) -> String {
        self.signer
            .token_with(ISSUER, AUDIENCE, |_| {}, who.claims())
    }

    fn bearer(&self, who: Who) -> String {
        format!("Bearer {}", self.token(who))
    }

    fn request(&self, who: Who, method: &str, path: &str) -> Request {
        setup::bearer_request(method, path, Some(&self.token(who)), None)
    }

    async fn call(&self, request: Request) -> Reply {
        Reply::buffered(self.history.handle(request).await)
    }

    async fn upload(&self, who: Who, files: &[(&str, &[u8])], fields: &[(&str, &str)]) -> Reply {
        let fields = fields.iter().map(|(name, value)| {
            let headers = format!("content-disposition: form-data; name=\"{name}\"");
            (headers, value.as_bytes())
        });
        let files = files.iter().map(|(file, bytes)| {
            (
                support::file_headers(file, "application/octet-stream"),
                *bytes,
            )
        });
        let body = support::multipart_body(BOUNDARY, fields.chain(files));
        let request =
            support::multipart_request("/documents", BOUNDARY, Some(self.bearer(who)), body);
        self.call(request).await
    }

    /// The document once its status is settled, as its owner reads it.
    async fn settled(&self, who: Who, id: &str) -> Value {
        let started = Instant::now();
        loop {
            let reply = self
                .call(self.request(who, "GET", &format!("/documents/{id}")))
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let doc = reply.json();
            if doc["status"] == "indexed" || doc["status"] == "failed" {
                return doc;
            }
            assert!(
                ["pending", "indexing"].contains(&doc["status"].as_str().unwrap()),
                "{doc}"
            );
            assert!(started.elapsed() < Duration::from_secs(20), "{doc}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The answer to `question` on `/chat`, as `who`: its text and citations.
    async fn ask(&self, who: Who, question: &str) -> (String, Vec<String>) {
        let mut r = harness::json_request(
            "POST",
            "/chat",
            Some(&json!({"messages": [{"role": "user", "content": question}]})),
        );
        r.headers_mut()
            .insert("authorization", self.bearer(who).parse().unwrap());
        let reply = Reply::buffered(self.chat.handle(r).await);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = reply.json();
        let citations = body["context"]["data_points"]["citations"]
            .as_array()
            .map(|a| a.iter().map(|c| c.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        (reply.body, citations)
    }
}

const KAYAKS: &[u8] =
    b"# Kayak fleet\n\nThe zephyrine kayak fleet has twelve boats kept at the north dock.";

#[tokio::test]
async fn alices_upload_goes_pending_to_indexed_grounds_her_answers_and_bob_reaches_nothing_of_it() {
    let w = world().await;
    let pdf = simple_pdf(&[
        "Paddle care",
        "Zephyrine paddles are dried after every trip.",
    ]);
    let up = w
        .upload(
            Who::Alice,
            &[("Kayak_Fleet.md", KAYAKS), ("Paddles.pdf", &pdf)],
            &[],
        )
        .await;
    assert_eq!(up.status, 201, "{}", up.body);
    let docs = up.json();
    let docs = docs.as_array().unwrap();
    assert_eq!(docs.len(), 2);
    for d in docs {
        assert_eq!(d["status"], "pending", "{d}");
        assert_eq!(d["access"], json!({"oids": ["alice"], "groups": []}));
        // An upload has no source (that is the bulk load's).
        assert!(d.get("source").is_none(), "{d}");
    }
    // Each keeps the digest of its bytes.
    assert_eq!(docs[0]["digest"], chat_core::document_digest(KAYAKS));
    assert_eq!(docs[1]["digest"], chat_core::document_digest(&pdf));
    let (md, pdf_id) = (
        docs[0]["id"].as_str().unwrap(),
        docs[1]["id"].as_str().unwrap(),
    );
    assert_eq!(w.settled(Who::Alice, md).await["status"], "indexed");
    assert_eq!(w.settled(Who::Alice, pdf_id).await["status"], "indexed");

    // Her list: both, newest first.
    let list = w.call(w.request(Who::Alice, "GET", "/documents")).await;
    assert_eq!(list.status, 200);
    let listed = list.json();
    let names = harness::texts_of(&listed, "name");
    assert_eq!(names, ["Paddles.pdf", "Kayak_Fleet.md"]);

    // Her answer cites them; Bob's holds neither name nor word of them.
    let (answer, citations) = w.ask(Who::Alice, "zephyrine kayak paddles").await;
    assert!(citations.iter().any(|c| c == "Kayak_Fleet.md"), "{answer}");
    assert!(
        citations.iter().any(|c| c.starts_with("Paddles.pdf#page=")),
        "{answer}"
    );
    let (answer, bobs) = w.ask(Who::Bob, "zephyrine kayak paddles").await;
    assert!(bobs.is_empty(), "{answer}");
    // Neither the names nor the words only the documents hold (his question's own words are echoed in thoughts).
    for word in [
        "Kayak_Fleet",
        "Paddles.pdf",
        "twelve boats",
        "dried after every trip",
    ] {
        assert!(!answer.contains(word), "bob was given {word}: {answer}");
    }

    // Bob can neither read, delete nor list it; nor list everyone's.
    for method in ["GET", "DELETE"] {
        let r = w
            .call(w.request(Who::Bob, method, &format!("/documents/{md}")))
            .await;
        assert_eq!(r.status, 404, "{method}: {}", r.body);
    }
    let r = w.call(w.request(Who::Bob, "GET", "/documents")).await;
    assert_eq!(r.json(), json!([]));
    let r = w
        .call(w.request(Who::Bob, "GET", "/documents?all=true"))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // Still hers, still indexed.
    assert_eq!(w.settled(Who::Alice, md).await["status"], "indexed");

    // Her delete takes it out of her answers.
    let r = w
        .call(w.request(Who::Alice, "DELETE", &format!("/documents/{md}")))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = w
        .call(w.request(Who::Alice, "GET", &format!("/documents/{md}")))
        .await;
    assert_eq!(r.status, 404);
    let (answer, citations) = w.ask(Who::Alice, "zephyrine kayak paddles").await;
    assert!(!citations.iter().any(|c| c == "Kayak_Fleet.md"), "{answer}");
    assert!(
        citations.iter().any(|c| c.starts_with("Paddles.pdf")),
        "{answer}"
    );
}

#[tokio::test]
async fn an_administrator_uploads_for_leadership_whose_members_alone_find_it() {
    let w = world().await;
    let up = w
        .upload(
            Who::Admin,
            &[(
                "Offsite_Plan.md",
                b"The quokkaline offsite is planned for May.".as_slice(),
            )],
            &[("groups", "leadership")],
        )
        .await;
    assert_eq!(up.status, 201, "{}", up.body);
    let doc = &up.json()[0];
    assert_eq!(doc["access"], json!({"oids": [], "groups": ["leadership"]}));
    let id = doc["id"].as_str().unwrap();
    assert_eq!(w.settled(Who::Admin, id).await["status"], "indexed");
    let (_, lee) = w.ask(Who::Lee, "quokkaline offsite").await;
    assert!(lee.iter().any(|c| c == "Offsite_Plan.md"), "{lee:?}");
    let (answer, _) = w.ask(Who::Alice, "quokkaline offsite").await;
    assert!(
        !answer.contains("Offsite_Plan") && !answer.contains("quokkaline offsite is"),
        "{answer}"
    );
    // Everyone's list, with owners, for the administrator.
    let all = w
        .call(w.request(Who::Admin, "GET", "/documents?all=true"))
        .await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert!(
        all.json()
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["id"] == id && d["owner"].is_string())
    );
    // Anyone else asking to share is refused, and nothing is stored.
    let refused = w
        .upload(
            Who::Alice,
            &[("Mine.md", b"mine".as_slice())],
            &[("everyone", "true")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let list = w.call(w.request(Who::Alice, "GET", "/documents")).await;
    assert_eq!(list.json(), json!([]));
}

#[tokio::test]
async fn a_file_the_knowledge_base_cannot_parse_ends_failed_with_a_reason_and_bad_uploads_are_refused()
 {
    let w = world().await;
    let up = w
        .upload(
            Who::Alice,
            &[("Scan.pdf", b"%PDF-1.7\n\x00\x01 not a real PDF".as_slice())],
            &[],
        )
        .await;
    assert_eq!(up.status, 201, "{}", up.body);
    let id = up.json()[0]["id"].as_str().unwrap().to_string();
    let doc = w.settled(Who::Alice, &id).await;
    assert_eq!(doc["status"], "failed", "{doc}");
    let reason = doc["reason"].as_str().unwrap();
    assert!(reason.contains("could not be parsed"), "{reason}");

    // A type the knowledge base does not take, and a body that is not multipart: refused before anything is stored.
    let r = w
        .upload(Who::Alice, &[("run.exe", b"MZ".as_slice())], &[])
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("PDF, Markdown"), "{}", r.body);
    let mut json = harness::json_request("POST", "/documents", Some(&json!({})));
    json.headers_mut()
        .insert("authorization", w.bearer(Who::Alice).parse().unwrap());
    assert_eq!(w.call(json).await.status, 415);
    let list = w.call(w.request(Who::Alice, "GET", "/documents")).await;
    assert_eq!(list.json().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn without_documents_configured_the_routes_are_not_found() {
    let backend = Backend::start(&[]).await;
    let app = history::App::new(backend.store.clone(), harness::auth(), &backend.config);
    for (method, path) in [
        ("GET", "/documents"),
        ("GET", "/documents/0123456789abcdef0123456789abcdef"),
        ("GET", "/documents/settings"),
    ] {
        let r = Reply::buffered(app.handle(harness::json_request(method, path, None)).await);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    // The page is not told of documents, so it asks nothing of them.
    let page = Reply::buffered(app.handle(harness::json_request("GET", "/", None)).await);
    assert_eq!(page.status, 200);
    assert!(!page.body.contains(r#""documents":true"#), "{}", page.body);
}

#[tokio::test]
async fn the_settings_say_who_may_share_and_the_page_is_told_documents_are_on() {
    let w = world().await;
    let admin = w
        .call(w.request(Who::Admin, "GET", "/documents/settings"))
        .await;
    assert_eq!(admin.status, 200, "{}", admin.body);
    assert_eq!(
        admin.json(),
        json!({"administrator": true, "everyone_group": "everyone", "max_bytes": 4194304, "max_per_upload": 10})
    );
    let alice = w
        .call(w.request(Who::Alice, "GET", "/documents/settings"))
        .await;
    assert_eq!(alice.status, 200, "{}", alice.body);
    assert_eq!(alice.json()["administrator"], false);
    // Without credentials: a 401, as every documents route.
    let anonymous = w
        .call(harness::json_request("GET", "/documents/settings", None))
        .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let page = w.call(harness::json_request("GET", "/", None)).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(r#""documents":true"#),
        "the page's configuration says documents are on"
    );
}
