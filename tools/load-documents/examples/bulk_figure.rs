//! The bulk load's figure, documents per minute: `cargo run -p load-documents --example bulk_figure [-- N [C]]`
//! generates N small Markdown files (default 200) under `public/`, `groups/leadership/` and `users/alice/`, and loads
//! them twice with `--wait` (C files in flight, default 6) on the parts the local run uses: moto's table and bucket
//! and the local knowledge base (its ingestion waits 100 ms before it starts, as in `make run`). It prints each run's
//! summary line, as the command prints it.

use std::sync::Arc;
use std::time::Duration;

use chat_aws::{DynamoStore, KnowledgeBaseDocuments};
use chat_core::{DocumentSettings, Documents, StoreTimeouts};
use load_documents::Options;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::{DATA_SOURCE_ID, LocalKnowledgeBase};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(200, |a| a.parse().expect("N is a number"));
    let concurrency: usize = args
        .next()
        .map_or(load_documents::DEFAULT_CONCURRENCY, |a| {
            a.parse().expect("C is a number")
        });
    let folder =
        std::env::temp_dir().join(format!("bulk-figure-{}", uuid::Uuid::new_v4().simple()));
    let words = [
        "kayak", "harbour", "lantern", "meadow", "quarry", "saddle", "thistle", "willow",
    ];
    for i in 0..n {
        let place = ["public", "groups/leadership", "users/alice"][i % 3];
        let path = folder.join(format!("{place}/note-{i:04}.md"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let body: Vec<&str> = (0..150)
            .map(|j| words[(i * 7 + j * 3) % words.len()])
            .collect();
        std::fs::write(
            &path,
            format!(
                "# Note {i}\n\n{}\n\nIts code word is bulkword{i}.\n",
                body.join(" ")
            ),
        )
        .unwrap();
    }

    let moto = LocalDynamo::shared().sdk_config().await;
    let kb = LocalKnowledgeBase::start_over_s3("FIGUREKB01", &moto, 100)
        .await
        .unwrap();
    let agent = kb.sdk_config().await;
    let timeouts = StoreTimeouts {
        connect: Duration::from_secs(3),
        attempt: Duration::from_secs(15),
        operation: Duration::from_secs(30),
    };
    let index = KnowledgeBaseDocuments::from_config(
        &moto,
        &agent,
        &format!("figure-{}", uuid::Uuid::new_v4().simple()),
        "FIGUREKB01",
        DATA_SOURCE_ID,
        Duration::from_secs(120),
        timeouts,
    );
    index.ensure_bucket().await.unwrap();
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let documents = Documents::new(
        Arc::new(DynamoStore::new(client, table, None).documents()),
        Arc::new(index),
        DocumentSettings {
            timeout: Duration::from_secs(120),
            ..DocumentSettings::default()
        },
    );
    let options = Options {
        folder: folder.clone(),
        manifest: None,
        owner: "operator".into(),
        delete_missing: false,
        wait: Some(Duration::from_secs(600)),
        concurrency,
    };
    for run in ["first run", "second run"] {
        let report = load_documents::run(&documents, &options, |_| {})
            .await
            .unwrap();
        println!(
            "{run} ({n} files, {concurrency} in flight, --wait): {}",
            report.summary()
        );
    }
    println!(
        "documents ingested by the local knowledge base: {}",
        kb.ingested_documents()
    );
    let _ = std::fs::remove_dir_all(&folder);
}
