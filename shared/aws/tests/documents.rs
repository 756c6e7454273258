//! The documents' adapters on real parts: records in a moto table, bytes in a moto bucket, and ingestion through the
//! real bedrock-agent SDK client into the local knowledge base (which reads the bytes back from moto), under the core's
//! `Documents` service: an upload is pending, then indexed and found by its owner only; a file the knowledge base
//! cannot parse ends failed with a reason; a delete removes it from the index, the bucket and the table; an
//! ingestion that cannot happen leaves nothing behind. The adapters also pass the documents' contract, as the
//! in-memory ports do in chat-testing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chat_aws::{BedrockKnowledgeBase, DynamoStore, KnowledgeBaseDocuments};
use chat_core::{
    AccessChoice, Caller, DocumentError, DocumentRecord, DocumentSettings, DocumentStatus,
    Documents, MetadataFilter, NewDocument, Retriever, SearchMode, SearchRequest, StoreTimeouts,
};
use chat_testing::bytes::simple_pdf;
use chat_testing::document_contract::Subject;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;

const KB_ID: &str = "DOCSKB0001";
const DATA_SOURCE: &str = "LOCALDATA1";
const TIMEOUT: Duration = Duration::from_secs(10);

struct Parts {
    _kb: LocalKnowledgeBase,
    index: Arc<KnowledgeBaseDocuments>,
    documents: Documents,
    retriever: BedrockKnowledgeBase,
}

/// A local knowledge base reading its documents from moto's S3, and the index adapter on it, over a fresh bucket;
/// the bedrock-agent configuration that reaches the knowledge base.
async fn index_with(
    data_source: &str,
) -> (
    LocalKnowledgeBase,
    KnowledgeBaseDocuments,
    aws_config::SdkConfig,
) {
    let moto = LocalDynamo::shared().sdk_config().await;
    let kb = LocalKnowledgeBase::start_over_s3(KB_ID, &moto, 50)
        .await
        .unwrap();
    let agent = kb.sdk_config().await;
    let index = KnowledgeBaseDocuments::from_config(
        &moto,
        &agent,
        &format!("docs-{}", uuid::Uuid::new_v4().simple()),
        KB_ID,
        data_source,
        TIMEOUT,
        StoreTimeouts::default(),
    );
    index.ensure_bucket().await.unwrap();
    (kb, index, agent)
}

async fn parts_with(data_source: &str) -> Parts {
    let (kb, index, agent) = index_with(data_source).await;
    let index = Arc::new(index);
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client, table, None);
    let documents = Documents::new(
        Arc::new(store.documents()),
        index.clone(),
        DocumentSettings {
            admin_group: Some("doc-admins".into()),
            ..DocumentSettings::default()
        },
    );
    let retriever = BedrockKnowledgeBase::new(&agent, KB_ID.into(), TIMEOUT);
    Parts {
        _kb: kb,
        index,
        documents,
        retriever,
    }
}

/// The contract's subject: the records in a fresh moto table, the bytes in a fresh moto bucket ingested into a
/// local knowledge base of their own, and what the bucket holds under an owner counted by its keys.
async fn subject() -> Subject {
    let (kb, index, _) = index_with(DATA_SOURCE).await;
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let records = DynamoStore::new(client, table, None).documents();
    let bucket = index.clone();
    Subject::new(records, index)
        .with_held_count(move |owner| {
            let bucket = bucket.clone();
            async move { bucket.keys_of(&owner).await.unwrap().len() }
        })
        .keeping(kb)
}

chat_testing::document_contract!(subject());

fn person(owner: &str, groups: &[&str]) -> Caller {
    Caller {
        owner: format!("jwt:{owner}"),
        oid: Some(owner.into()),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn file(name: &str, bytes: impl Into<Bytes>) -> NewDocument {
    NewDocument {
        name: name.into(),
        bytes: bytes.into(),
    }
}

/// The caller's access filter, as search builds it: their oid, their groups, everyone.
fn filter_of(caller: &Caller) -> MetadataFilter {
    chat_testing::filters::access_filter(caller)
}

/// The file names `caller` finds for `query`.
/// The first ten of `caller`'s own documents, newest first.
async fn own_documents(parts: &Parts, caller: &Caller) -> Vec<DocumentRecord> {
    let page = parts.documents.list(caller, false, 10, None).await.unwrap();
    page.items
}

async fn found(parts: &Parts, caller: &Caller, query: &str) -> Vec<String> {
    let request = SearchRequest {
        query: query.into(),
        top: 10,
        mode: SearchMode::Hybrid,
        filter: Some(filter_of(caller)),
    };
    let passages = parts.retriever.retrieve(&request).await.unwrap();
    passages
        .iter()
        .map(|p| p.source.rsplit('/').next().unwrap().to_string())
        .collect()
}

/// The document once it is settled (indexed or failed), read through the service as `caller`.
async fn settled(parts: &Parts, caller: &Caller, id: &str) -> DocumentRecord {
    let started = Instant::now();
    loop {
        let record = parts.documents.get(caller, id).await.unwrap();
        if record.status.is_settled() {
            return record;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still {:?}",
            record.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_upload_is_pending_then_indexed_and_found_by_its_owner_alone() {
    let parts = parts_with(DATA_SOURCE).await;
    let alice = person("alice", &[]);
    let bob = person("bob", &[]);
    let uploaded = parts
        .documents
        .upload(
            &alice,
            vec![
                file(
                    "Kayak_Fleet.md",
                    "# Kayak fleet\n\nThe zephyrine kayak fleet has twelve boats.",
                ),
                file(
                    "Paddles.pdf",
                    simple_pdf(&["Intro", "Zephyrine paddles are stored dry."]),
                ),
            ],
            &AccessChoice::default(),
        )
        .await
        .unwrap();
    assert_eq!(uploaded.len(), 2);
    assert!(
        uploaded
            .iter()
            .all(|d| d.status == DocumentStatus::Pending && d.access.oids == ["alice"]),
        "{uploaded:?}"
    );
    // The bytes and the convention's metadata file beside them, under alice's prefix.
    let keys = parts.index.keys_of(&alice.owner).await.unwrap();
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert!(
        keys.iter()
            .any(|k| k.ends_with("/Kayak_Fleet.md.metadata.json"))
    );

    for d in &uploaded {
        let done = settled(&parts, &alice, &d.id).await;
        assert_eq!(done.status, DocumentStatus::Indexed, "{done:?}");
    }
    // The data source lists both, by their S3 URIs, indexed.
    let (listed, next) = parts.index.list_ingested(None).await.unwrap();
    assert_eq!(next, None);
    let mut uris: Vec<&str> = listed
        .iter()
        .inspect(|(_, state)| assert_eq!(state.status, DocumentStatus::Indexed))
        .map(|(uri, _)| uri.as_str())
        .collect();
    uris.sort();
    let mut expected: Vec<String> = uploaded.iter().map(|d| parts.index.uri(d)).collect();
    expected.sort();
    assert_eq!(uris, expected);
    let mut alice_finds = found(&parts, &alice, "zephyrine").await;
    alice_finds.sort();
    alice_finds.dedup();
    assert_eq!(alice_finds, ["Kayak_Fleet.md", "Paddles.pdf"]);
    assert!(found(&parts, &bob, "zephyrine").await.is_empty());

    // Bob can neither read, list nor delete it.
    let id = &uploaded[0].id;
    assert_eq!(
        parts.documents.get(&bob, id).await,
        Err(DocumentError::NotFound)
    );
    assert_eq!(
        parts.documents.delete(&bob, id).await,
        Err(DocumentError::NotFound)
    );
    assert!(own_documents(&parts, &bob).await.is_empty());
    // Alice lists hers, newest first, paged.
    let first = parts.documents.list(&alice, false, 1, None).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.items[0].name, "Paddles.pdf");
    let second = parts
        .documents
        .list(&alice, false, 1, first.next.as_deref())
        .await
        .unwrap();
    assert_eq!(second.items[0].name, "Kayak_Fleet.md");

    // A delete removes it from the index, the bucket and the table.
    parts.documents.delete(&alice, id).await.unwrap();
    assert_eq!(found(&parts, &alice, "zephyrine").await, ["Paddles.pdf"]);
    assert_eq!(parts.index.keys_of(&alice.owner).await.unwrap().len(), 2);
    assert_eq!(
        parts.documents.get(&alice, id).await,
        Err(DocumentError::NotFound)
    );
}

#[tokio::test]
async fn an_administrator_shares_with_a_group_and_lists_everyone_s() {
    let parts = parts_with(DATA_SOURCE).await;
    let admin = person("dana", &["doc-admins"]);
    let member = person("lee", &["leadership"]);
    let other = person("sam", &["engineering"]);
    let choice = AccessChoice {
        groups: vec!["leadership".into()],
        everyone: false,
    };
    let up = parts
        .documents
        .upload(
            &admin,
            vec![file("Offsite.md", "The quokkaline offsite is in May.")],
            &choice,
        )
        .await
        .unwrap();
    assert_eq!(up[0].access.groups, ["leadership"]);
    assert!(up[0].access.oids.is_empty());
    assert_eq!(
        settled(&parts, &admin, &up[0].id).await.status,
        DocumentStatus::Indexed
    );
    assert_eq!(found(&parts, &member, "quokkaline").await, ["Offsite.md"]);
    assert!(found(&parts, &other, "quokkaline").await.is_empty());
    // Not an administrator: may not share.
    assert!(matches!(
        parts
            .documents
            .upload(&other, vec![file("x.md", "x")], &choice)
            .await,
        Err(DocumentError::Forbidden(_))
    ));
    parts
        .documents
        .upload(
            &other,
            vec![file("Mine.txt", "mine")],
            &AccessChoice::default(),
        )
        .await
        .unwrap();
    let all = parts.documents.list(&admin, true, 10, None).await.unwrap();
    let mut names: Vec<&str> = all.items.iter().map(|d| d.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["Mine.txt", "Offsite.md"]);
}

#[tokio::test]
async fn what_the_knowledge_base_cannot_parse_ends_failed_with_a_reason() {
    let parts = parts_with(DATA_SOURCE).await;
    let alice = person("alice", &[]);
    let up = parts
        .documents
        .upload(
            &alice,
            vec![file(
                "Broken.pdf",
                &b"%PDF-1.7\nthis is not a real PDF body"[..],
            )],
            &AccessChoice::default(),
        )
        .await
        .unwrap();
    let done = settled(&parts, &alice, &up[0].id).await;
    assert_eq!(done.status, DocumentStatus::Failed);
    let reason = done.reason.unwrap();
    assert!(
        reason.starts_with("The knowledge base could not index this document: The PDF Broken.pdf could not be parsed"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_ingestion_refused_leaves_nothing_behind() {
    // A data source the knowledge base does not have: the ingestion is refused after the bytes were put.
    let parts = parts_with("NOSUCHDS01").await;
    let alice = person("alice", &[]);
    let refused = parts
        .documents
        .upload(
            &alice,
            vec![file("Note.md", "a note")],
            &AccessChoice::default(),
        )
        .await;
    assert!(
        matches!(refused, Err(DocumentError::Index(_))),
        "{refused:?}"
    );
    assert!(parts.index.keys_of(&alice.owner).await.unwrap().is_empty());
    assert!(own_documents(&parts, &alice).await.is_empty());
}
