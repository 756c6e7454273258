//! `load-documents`: the operator's bulk load of a folder into the knowledge base (see the library, and
//! docs/document-access.md, "The operator's bulk load"). It builds the adapters the functions use from the same
//! settings (the table, the documents bucket, the knowledge base and its data source) and prints one line per
//! document, then a summary; its exit status is 1 when any document failed, 2 when the load could not start.
//!
//! ```text
//! load-documents FOLDER [--manifest FILE] [--owner ID] [--delete-missing] [--wait] [--wait-seconds N]
//!                [--concurrency N] [--table TABLE] [--bucket BUCKET] [--knowledge-base ID] [--data-source ID]
//!                [--everyone-group NAME]
//! ```
//!
//! The last five default to the functions' settings in the environment: `TABLE_NAME`, `DOCUMENTS_BUCKET`,
//! `KNOWLEDGE_BASE_ID`, `KNOWLEDGE_BASE_DATA_SOURCE_ID`, `DOCUMENT_EVERYONE_GROUP` (default `everyone`). Credentials,
//! Region and endpoints (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL_BEDROCK_AGENT`) come
//! from the usual AWS environment or profile.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chat_aws::{DynamoStore, KnowledgeBaseDocuments};
use chat_core::{DocumentSettings, Documents, StoreTimeouts};
use load_documents::{DEFAULT_CONCURRENCY, DEFAULT_WAIT, MAX_CONCURRENCY, Options};

const USAGE: &str = "usage: load-documents FOLDER [--manifest FILE] [--owner ID] [--delete-missing] [--wait] \
[--wait-seconds N] [--concurrency N] [--table TABLE] [--bucket BUCKET] [--knowledge-base ID] [--data-source ID] \
[--everyone-group NAME]
(--table, --bucket, --knowledge-base, --data-source and --everyone-group default to TABLE_NAME, DOCUMENTS_BUCKET,
KNOWLEDGE_BASE_ID, KNOWLEDGE_BASE_DATA_SOURCE_ID and DOCUMENT_EVERYONE_GROUP)";

/// How long one call of the documents' ports may take: a file of up to 50 MB to S3, an ingestion, a status.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// The table's bounds for a batch (not a person waiting): moto answers one request at a time.
const TABLE_TIMEOUTS: StoreTimeouts = StoreTimeouts {
    connect: Duration::from_secs(3),
    attempt: Duration::from_secs(15),
    operation: Duration::from_secs(30),
};

/// What the command was told: the options and the adapters' settings.
struct Command {
    options: Options,
    table: String,
    bucket: String,
    knowledge_base: String,
    data_source: String,
    everyone_group: String,
}

fn parse(args: &[String]) -> Result<Command, String> {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut folder = None;
    let mut values: std::collections::HashMap<&str, String> = Default::default();
    let (mut delete_missing, mut wait) = (false, false);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--delete-missing" => delete_missing = true,
            "--wait" => wait = true,
            "--help" | "-h" => return Err(String::new()),
            flag @ ("--manifest" | "--owner" | "--wait-seconds" | "--concurrency" | "--table"
            | "--bucket" | "--knowledge-base" | "--data-source" | "--everyone-group") => {
                let value = args.next().ok_or(format!("{flag} needs a value"))?;
                if values.insert(&flag[2..], value.clone()).is_some() {
                    return Err(format!("{flag} given twice"));
                }
            }
            other if other.starts_with("--") => return Err(format!("unknown option {other:?}")),
            other if folder.is_none() => folder = Some(PathBuf::from(other)),
            other => return Err(format!("one folder only ({other:?} is a second)")),
        }
    }
    let folder = folder.ok_or("give the folder to load")?;
    let setting = |flag: &str, name: &str| {
        values
            .get(flag)
            .cloned()
            .or_else(|| env(name))
            .ok_or(format!("--{flag} or {name} is required"))
    };
    let owner = values.get("owner").cloned().unwrap_or("operator".into());
    if owner.trim().is_empty() || owner.len() > 200 || owner.chars().any(char::is_control) {
        return Err("--owner must be 1 to 200 bytes without control characters".into());
    }
    let number = |flag: &str, default: u64, max: u64| -> Result<u64, String> {
        match values.get(flag) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(format!("--{flag}: a number from 1 to {max}")),
        }
    };
    let wait_seconds = number("wait-seconds", DEFAULT_WAIT.as_secs(), 86_400)?;
    Ok(Command {
        options: Options {
            folder,
            manifest: values.get("manifest").map(PathBuf::from),
            owner,
            delete_missing,
            wait: (wait || values.contains_key("wait-seconds"))
                .then(|| Duration::from_secs(wait_seconds)),
            concurrency: number(
                "concurrency",
                DEFAULT_CONCURRENCY as u64,
                MAX_CONCURRENCY as u64,
            )? as usize,
        },
        table: setting("table", "TABLE_NAME")?,
        bucket: setting("bucket", "DOCUMENTS_BUCKET")?,
        knowledge_base: setting("knowledge-base", "KNOWLEDGE_BASE_ID")?,
        data_source: setting("data-source", "KNOWLEDGE_BASE_DATA_SOURCE_ID")?,
        everyone_group: values
            .get("everyone-group")
            .cloned()
            .or_else(|| env("DOCUMENT_EVERYONE_GROUP"))
            .unwrap_or_else(|| "everyone".into()),
    })
}

/// The documents service over the functions' adapters.
async fn documents(command: &Command) -> Documents {
    let sdk = chat_aws::load_aws_config().await;
    let store = DynamoStore::from_config(&sdk, &command.table, None, TABLE_TIMEOUTS);
    let index = KnowledgeBaseDocuments::from_config(
        &sdk,
        &sdk,
        &command.bucket,
        &command.knowledge_base,
        &command.data_source,
        CALL_TIMEOUT,
        TABLE_TIMEOUTS,
    );
    Documents::new(
        Arc::new(store.documents()),
        Arc::new(index),
        DocumentSettings {
            everyone_group: command.everyone_group.clone(),
            timeout: CALL_TIMEOUT,
            ..DocumentSettings::default()
        },
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(c) => c,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("load-documents: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime.block_on(async {
        let documents = documents(&command).await;
        load_documents::run(&documents, &command.options, |line| println!("{line}")).await
    });
    match report {
        Ok(report) => {
            println!("{}", report.summary());
            if report.failed() > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("load-documents: {e}");
            ExitCode::from(2)
        }
    }
}
