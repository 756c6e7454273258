//! The bulk load on real parts: records in a moto table, bytes in a moto bucket, ingestion and search on the local
//! knowledge base through the real SDK clients, under the core's `Documents` service. A folder with `public/`,
//! `groups/leadership/`, a manifest and a file no rule covers: the first run adds what has a rule (searchable by
//! exactly whom it names) and refuses the rest; the second run changes nothing and ingests nothing; an edited file,
//! and a file whose access the manifest changes, are the only ones stored and ingested again; a removed file is
//! deleted only with `delete_missing`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chat_aws::{BedrockKnowledgeBase, DynamoStore, KnowledgeBaseDocuments};
use chat_core::{
    Caller, DocumentSettings, DocumentStatus, Documents, LoadOutcome, Retriever, SearchMode,
    SearchRequest,
};
use chat_testing::setup::{self, DocumentIndex};
use load_documents::{Options, Report};
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;

const KB_ID: &str = "BULKKB0001";
const TIMEOUT: Duration = Duration::from_secs(10);
const OPERATOR: &str = "operator";

struct Parts {
    kb: LocalKnowledgeBase,
    index: Arc<KnowledgeBaseDocuments>,
    documents: Documents,
    retriever: BedrockKnowledgeBase,
    folder: PathBuf,
}

impl Drop for Parts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

async fn parts() -> Parts {
    let DocumentIndex { kb, index, .. } = setup::document_index(KB_ID, "bulk", 20).await;
    let index = Arc::new(index);
    let agent = kb.sdk_config().await;
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client, table, None);
    let documents = Documents::new(
        Arc::new(store.documents()),
        index.clone(),
        DocumentSettings::default(),
    );
    let retriever = BedrockKnowledgeBase::new(&agent, KB_ID.into(), TIMEOUT);
    let folder =
        std::env::temp_dir().join(format!("load-documents-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&folder).unwrap();
    Parts {
        kb,
        index,
        documents,
        retriever,
        folder,
    }
}

fn write(folder: &Path, path: &str, text: &str) {
    let path = folder.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn person(oid: &str, groups: &[&str]) -> Caller {
    Caller {
        owner: format!("jwt:{oid}"),
        oid: Some(oid.into()),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

/// The file names `caller` finds for `query`, filtered as search filters them: their oid, groups, everyone.
async fn found(parts: &Parts, caller: &Caller, query: &str) -> Vec<String> {
    let request = SearchRequest {
        query: query.into(),
        top: 10,
        mode: SearchMode::Hybrid,
        filter: Some(chat_testing::filters::access_filter(caller)),
    };
    let mut names: Vec<String> = parts
        .retriever
        .retrieve(&request)
        .await
        .unwrap()
        .iter()
        .map(|p| p.source.rsplit('/').next().unwrap().to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

async fn load(parts: &Parts, delete_missing: bool) -> (Report, Vec<String>) {
    let options = Options {
        folder: parts.folder.clone(),
        manifest: Some(parts.folder.join("manifest.json")),
        owner: OPERATOR.into(),
        delete_missing,
        wait: Some(Duration::from_secs(20)),
        concurrency: 4,
    };
    let mut printed = Vec::new();
    let report = load_documents::run(&parts.documents, &options, |l| printed.push(l.to_string()))
        .await
        .unwrap();
    (report, printed)
}

/// Each source's outcome (`failed` for a failure).
fn outcomes(report: &Report) -> HashMap<String, &'static str> {
    report
        .lines
        .iter()
        .map(|l| {
            let outcome = l.outcome.as_ref().map(|o| o.as_str()).unwrap_or("failed");
            (l.source.clone(), outcome)
        })
        .collect()
}

fn expect(pairs: &[(&str, &'static str)]) -> HashMap<String, &'static str> {
    pairs.iter().map(|(s, o)| (s.to_string(), *o)).collect()
}

#[tokio::test]
async fn a_second_run_changes_nothing_and_only_what_changed_is_ingested_again() {
    let parts = parts().await;
    let f = &parts.folder;
    write(
        f,
        "public/Handbook.md",
        "# Handbook\n\nThe glimmerwort handbook is for everyone.",
    );
    write(
        f,
        "groups/leadership/Offsite.md",
        "The quokkaline offsite is in May.",
    );
    write(
        f,
        "board/Minutes.txt",
        "The board approved the larkspire budget.",
    );
    write(f, "public/Salaries.csv", "name,pay\nzarquon,100\n");
    write(f, "Stray.md", "A stray note about the tumbleweft project.");
    write(f, ".hidden.md", "never loaded");
    // The manifest wins over the layout (public/Salaries.csv is not for everyone) and covers board/.
    write(
        f,
        "manifest.json",
        r#"{"board/": {"groups": ["leadership"], "oids": ["dana"]},
            "public/Salaries.csv": {"oids": ["alice"]}}"#,
    );

    // First run: every file with a rule added, then indexed; the one without refused, not made public.
    let (first, printed) = load(&parts, false).await;
    assert_eq!(
        outcomes(&first),
        expect(&[
            ("public/Handbook.md", "added"),
            ("groups/leadership/Offsite.md", "added"),
            ("board/Minutes.txt", "added"),
            ("public/Salaries.csv", "added"),
            ("Stray.md", "failed"),
        ])
    );
    assert!(
        printed
            .iter()
            .any(|l| l.starts_with("failed Stray.md: no access rule")),
        "{printed:?}"
    );
    assert_eq!(first.settled.len(), 4, "{:?}", first.settled);
    assert!(
        first
            .settled
            .iter()
            .all(|(_, s, _)| *s == DocumentStatus::Indexed),
        "{:?}",
        first.settled
    );
    assert!(printed.contains(&"indexed groups/leadership/Offsite.md".to_string()));
    assert_eq!(first.failed(), 1);
    assert!(
        first
            .summary()
            .starts_with("5 documents: 4 added, 0 updated, 0 unchanged, 0 deleted, 1 failed; ")
    );
    assert_eq!(parts.kb.ingested_documents(), 4);
    // The records know their content and origin (read after the wait: each indexed).
    let records = parts.documents.loaded(OPERATOR).await.unwrap();
    assert_eq!(records.len(), 4);
    let offsite = &records["groups/leadership/Offsite.md"];
    assert_eq!(offsite.name, "Offsite.md");
    assert_eq!(
        offsite.digest.as_deref(),
        Some(chat_core::document_digest(b"The quokkaline offsite is in May.").as_str())
    );
    assert_eq!(offsite.access.groups, ["leadership"]);
    assert_eq!(records["public/Handbook.md"].access.groups, ["everyone"]);
    assert_eq!(records["board/Minutes.txt"].access.oids, ["dana"]);

    // Search as each reader: exactly those the access lists name.
    let lee = person("lee", &["leadership"]);
    let sam = person("sam", &["engineering"]);
    let alice = person("alice", &[]);
    let bob = person("bob", &[]);
    assert_eq!(found(&parts, &lee, "quokkaline").await, ["Offsite.md"]);
    assert!(found(&parts, &sam, "quokkaline").await.is_empty());
    assert_eq!(found(&parts, &sam, "glimmerwort").await, ["Handbook.md"]);
    assert_eq!(found(&parts, &lee, "larkspire").await, ["Minutes.txt"]);
    assert_eq!(
        found(&parts, &person("dana", &[]), "larkspire").await,
        ["Minutes.txt"]
    );
    assert!(found(&parts, &sam, "larkspire").await.is_empty());
    assert_eq!(found(&parts, &alice, "zarquon").await, ["Salaries.csv"]);
    assert!(found(&parts, &bob, "zarquon").await.is_empty());
    assert!(found(&parts, &sam, "tumbleweft").await.is_empty());

    // Second run, the stray file gone: every file unchanged, nothing ingested, no record touched.
    std::fs::remove_file(f.join("Stray.md")).unwrap();
    let (second, _) = load(&parts, false).await;
    assert_eq!(
        outcomes(&second),
        expect(&[
            ("public/Handbook.md", "unchanged"),
            ("groups/leadership/Offsite.md", "unchanged"),
            ("board/Minutes.txt", "unchanged"),
            ("public/Salaries.csv", "unchanged"),
        ])
    );
    assert!(second.settled.is_empty());
    assert_eq!(second.failed(), 0);
    assert_eq!(parts.kb.ingested_documents(), 4);
    // The records as the first run's wait left them (indexed): not one `updated` moved.
    assert_eq!(parts.documents.loaded(OPERATOR).await.unwrap(), records);

    // One file edited, another's access changed by the manifest: only those two stored and ingested again.
    let before = parts.documents.loaded(OPERATOR).await.unwrap();
    write(
        f,
        "groups/leadership/Offsite.md",
        "The offsite moved: the bramblefinch retreat in June.",
    );
    write(
        f,
        "manifest.json",
        r#"{"board/": {"groups": ["leadership"], "oids": ["dana"]},
            "public/Salaries.csv": {"oids": ["bob"]}}"#,
    );
    let (third, printed) = load(&parts, false).await;
    assert_eq!(
        outcomes(&third),
        expect(&[
            ("public/Handbook.md", "unchanged"),
            ("groups/leadership/Offsite.md", "updated"),
            ("board/Minutes.txt", "unchanged"),
            ("public/Salaries.csv", "updated"),
        ])
    );
    assert!(printed.contains(&"updated groups/leadership/Offsite.md".to_string()));
    assert_eq!(parts.kb.ingested_documents(), 6);
    assert_eq!(third.settled.len(), 2);
    let after = parts.documents.loaded(OPERATOR).await.unwrap();
    for source in ["public/Handbook.md", "board/Minutes.txt"] {
        assert_eq!(after[source], before[source], "{source} was touched");
    }
    // The same document (id, key) with its new content: its new words found, its old ones gone.
    assert_eq!(
        after["groups/leadership/Offsite.md"].id,
        before["groups/leadership/Offsite.md"].id
    );
    assert_ne!(
        after["groups/leadership/Offsite.md"].digest,
        before["groups/leadership/Offsite.md"].digest
    );
    assert_eq!(found(&parts, &lee, "bramblefinch").await, ["Offsite.md"]);
    assert!(found(&parts, &lee, "quokkaline").await.is_empty());
    assert!(found(&parts, &sam, "bramblefinch").await.is_empty());
    // The new access list, in search and beside the bytes.
    assert_eq!(found(&parts, &bob, "zarquon").await, ["Salaries.csv"]);
    assert!(found(&parts, &alice, "zarquon").await.is_empty());
    assert_eq!(after["public/Salaries.csv"].access.oids, ["bob"]);

    // A removed file stays without delete_missing, and goes with it: index, bucket, record.
    std::fs::remove_file(f.join("public/Handbook.md")).unwrap();
    let (fourth, _) = load(&parts, false).await;
    assert!(!outcomes(&fourth).contains_key("public/Handbook.md"));
    assert_eq!(found(&parts, &sam, "glimmerwort").await, ["Handbook.md"]);
    let keys_before = parts.index.keys_of(OPERATOR).await.unwrap().len();
    let (fifth, printed) = load(&parts, true).await;
    assert_eq!(outcomes(&fifth)["public/Handbook.md"], "deleted");
    assert!(printed.contains(&"deleted public/Handbook.md".to_string()));
    assert_eq!(fifth.count(LoadOutcome::Unchanged), 3);
    assert_eq!(parts.kb.ingested_documents(), 6);
    assert!(found(&parts, &sam, "glimmerwort").await.is_empty());
    assert_eq!(
        parts.index.keys_of(OPERATOR).await.unwrap().len(),
        keys_before - 2
    );
    assert!(
        !parts
            .documents
            .loaded(OPERATOR)
            .await
            .unwrap()
            .contains_key("public/Handbook.md")
    );
}

#[tokio::test]
async fn a_manifest_that_names_nobody_or_a_bad_path_stops_the_load_before_anything_is_stored() {
    let parts = parts().await;
    write(&parts.folder, "public/A.md", "a");
    for manifest in [
        r#"{"public/": {}}"#,
        r#"{"../etc/": {"everyone": true}}"#,
        r#"{"public/": {"everyone": "yes"}}"#,
        r#"["public/"]"#,
    ] {
        write(&parts.folder, "manifest.json", manifest);
        let options = Options {
            folder: parts.folder.clone(),
            manifest: Some(parts.folder.join("manifest.json")),
            owner: OPERATOR.into(),
            delete_missing: false,
            wait: None,
            concurrency: 2,
        };
        let refused = load_documents::run(&parts.documents, &options, |_| {}).await;
        assert!(refused.is_err(), "{manifest}");
    }
    assert_eq!(parts.kb.ingested_documents(), 0);
    assert!(parts.documents.loaded(OPERATOR).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_document_the_knowledge_base_failed_is_loaded_again_by_the_next_run() {
    let parts = parts().await;
    let f = &parts.folder;
    write(
        f,
        "public/Guide.md",
        "The snorkelbine guide is for everyone.",
    );
    // The local knowledge base fails Word files with a reason, as Bedrock fails a file it cannot parse.
    write(
        f,
        "public/Notes.docx",
        "PK\u{3}\u{4} not really a Word file",
    );
    let options = |wait: Option<Duration>| Options {
        folder: parts.folder.clone(),
        manifest: None,
        owner: OPERATOR.into(),
        delete_missing: false,
        wait,
        concurrency: 2,
    };
    // A first run without --wait: both added, their records left `pending` as the run saw them.
    let first = load_documents::run(&parts.documents, &options(None), |_| {})
        .await
        .unwrap();
    assert_eq!(
        outcomes(&first),
        expect(&[("public/Guide.md", "added"), ("public/Notes.docx", "added")])
    );
    assert_eq!(parts.kb.ingested_documents(), 2);
    // The knowledge base settles both meanwhile (the Word file `failed`); the next run reads where each stands
    // before it compares: the indexed one is unchanged, the failed one is stored and ingested again, and, still
    // failing, is counted failed with the knowledge base's reason.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut printed = Vec::new();
    let second = load_documents::run(
        &parts.documents,
        &options(Some(Duration::from_secs(20))),
        |l| printed.push(l.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(
        outcomes(&second),
        expect(&[
            ("public/Guide.md", "unchanged"),
            ("public/Notes.docx", "updated")
        ])
    );
    assert_eq!(parts.kb.ingested_documents(), 3);
    assert_eq!(second.failed(), 1, "{printed:?}");
    assert!(
        printed
            .iter()
            .any(|l| l.starts_with("failed public/Notes.docx") && l.contains("Word")),
        "{printed:?}"
    );
}
