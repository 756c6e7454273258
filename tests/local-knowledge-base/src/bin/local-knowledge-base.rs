//! Runs the local knowledge base as a process:
//! `local-knowledge-base [--port N] [--knowledge-base-id ID] [--collection DIR] [--s3-endpoint URL]`, or the same
//! from `LOCAL_KB_PORT`, `LOCAL_KB_ID`, `LOCAL_KB_COLLECTION` and `LOCAL_KB_S3_ENDPOINT` (the arguments win).
//! Defaults: port 9300, id `LOCALKB001`, the collection `samples/knowledge-base`, no S3 (uploaded documents then
//! fail to ingest, saying so); the S3 endpoint is where the document APIs read uploads (moto's, in the local run).

const USAGE: &str = "usage: local-knowledge-base [--port N] [--knowledge-base-id ID] [--collection DIR] [--s3-endpoint URL]";

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut port: u16 = env("LOCAL_KB_PORT")
        .map(|p| p.parse().expect("LOCAL_KB_PORT is a port number"))
        .unwrap_or(9300);
    let mut id = env("LOCAL_KB_ID").unwrap_or_else(|| "LOCALKB001".into());
    let mut collection =
        env("LOCAL_KB_COLLECTION").unwrap_or_else(|| "samples/knowledge-base".into());
    let mut s3 = env("LOCAL_KB_S3_ENDPOINT");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{arg} takes a value; {USAGE}"))
        };
        match arg.as_str() {
            "--port" => port = value().parse().expect("--port takes a port number"),
            "--knowledge-base-id" => id = value(),
            "--collection" => collection = value(),
            "--s3-endpoint" => s3 = Some(value()),
            other => panic!("unknown argument {other}; {USAGE}"),
        }
    }
    let started = std::time::Instant::now();
    let s3 = match s3 {
        Some(endpoint) => Some(local_serve::sdk_config(endpoint, "local-knowledge-base").await),
        None => None,
    };
    let server = local_knowledge_base::LocalKnowledgeBase::start_with(
        ([127, 0, 0, 1], port).into(),
        id,
        &collection,
        local_knowledge_base::DocumentSource {
            s3,
            ingest_delay_ms: 100,
        },
    )
    .await?;
    eprintln!(
        "local-knowledge-base: knowledge base {} ({} passages of {collection}, indexed in {} ms) listening on {}",
        server.knowledge_base_id(),
        server.passages(),
        started.elapsed().as_millis(),
        server.endpoint()
    );
    server.wait().await;
    Ok(())
}
