//! `make run`: the whole backend on one address, http://127.0.0.1:9000, with nothing installed by hand.
//!
//! Starts the local Bedrock-compatible server (in this process) and moto's DynamoDB server, creates the table,
//! and serves every route through `cargo lambda watch` with one local user (`AUTH_MODE=none`), answering CORS for
//! any origin (`CORS_ALLOWED_ORIGINS=*`). With `MODEL_ID` and AWS credentials in the environment (`AWS_PROFILE`
//! or `AWS_ACCESS_KEY_ID`), it uses real Bedrock and DynamoDB instead, and starts neither server.
//!
//! Retrieval: it also starts the local knowledge-base server (in this process, `tests/local-knowledge-base`), which
//! serves the knowledge base `LOCALKB001` over the sample collection `samples/knowledge-base` (or the folder
//! `LOCAL_KB_COLLECTION` names) in the `Retrieve` API's wire format, and gives the functions
//! `KNOWLEDGE_BASE_ID=LOCALKB001` and `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME` pointing at it, so that every
//! standard turn is grounded in those documents. When `KNOWLEDGE_BASE_ID` is set in the environment it is passed to
//! the functions as it is and no local knowledge base starts: `KNOWLEDGE_BASE_ID=` (empty) turns retrieval off (the
//! test suites' shared runs do this), any other id is searched wherever `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME`
//! (or, with real AWS, the region) points. With real AWS (below) and no `KNOWLEDGE_BASE_ID`, retrieval is off.
//!
//! With `--exit-with-stdin`, the functions are not rebuilt and reloaded when files change.
//!
//! Ports: `LOCAL_PORT` (9000), `LOCAL_BEDROCK_PORT` (9100), `LOCAL_DYNAMODB_PORT` (9200), `LOCAL_KB_PORT`
//! (`LOCAL_PORT` + 300, 9300 by default). The local model waits
//! `LOCAL_MODEL_PACE_MS` (30) before each word. With
//! `--exit-with-stdin`, it shuts down when its standard input closes (tests use this so nothing outlives them).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;

const TABLE_NAME: &str = "chat-local";
const LOCAL_MODEL_ID: &str = "local.echo-v1:0";
/// The id of the knowledge base the local knowledge-base server serves (ten alphanumerics, as Bedrock's are).
const LOCAL_KNOWLEDGE_BASE_ID: &str = "LOCALKB001";
/// The sample collection it serves, relative to the workspace root, unless `LOCAL_KB_COLLECTION` names another.
const SAMPLE_COLLECTION: &str = "samples/knowledge-base";
/// The local model's wait before each word (`LOCAL_MODEL_PACE_MS`), so that a person trying the local run sees
/// answers stream as a real model's do; tests that want speed set 0.
const DEFAULT_PACE_MS: u64 = 30;

fn port(name: &str, default: u16) -> u16 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("{name} must be a port number")))
        })
        .unwrap_or(default)
}

fn fail(message: &str) -> ! {
    eprintln!("local-run: {message}");
    std::process::exit(1);
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/local-run sits two levels below the workspace root")
        .to_path_buf()
}

fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn wait_for_port(port: u16, what: &str, limit: Duration) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > limit {
            fail(&format!("{what} did not open port {port} within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status code of `GET path` on the local address, if it answered. The whole response is read: hanging up
/// early on a streaming function makes cargo lambda abort the function's own response.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(900)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    std::str::from_utf8(response.get(9..12)?).ok()?.parse().ok()
}

struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

#[tokio::main]
async fn main() {
    let exit_with_stdin = std::env::args().any(|a| a == "--exit-with-stdin");
    let root = workspace_root();
    let tools = root.join(".tools/venv/bin");
    let run_port = port("LOCAL_PORT", 9000);
    let bedrock_port = port("LOCAL_BEDROCK_PORT", 9100);
    let dynamodb_port = port("LOCAL_DYNAMODB_PORT", 9200);
    let knowledge_base_port = port("LOCAL_KB_PORT", run_port.saturating_add(300));
    let real_aws = std::env::var_os("MODEL_ID").is_some()
        && (std::env::var_os("AWS_PROFILE").is_some()
            || std::env::var_os("AWS_ACCESS_KEY_ID").is_some());

    // The user's own KNOWLEDGE_BASE_ID (even an empty one, which turns retrieval off) goes to the functions as it
    // is, through the environment they inherit; otherwise the local knowledge base serves the sample collection.
    let local_knowledge_base = !real_aws && std::env::var_os("KNOWLEDGE_BASE_ID").is_none();

    if !tools.join("cargo-lambda").exists() {
        fail("the project's tools are missing; run `make tools` (make run does it for you)");
    }
    let mut ports = vec![run_port, bedrock_port, dynamodb_port];
    if local_knowledge_base {
        ports.push(knowledge_base_port);
    }
    for p in ports {
        if !port_is_free(p) {
            fail(&format!(
                "port {p} is in use: is another local run going? (ports are set by LOCAL_PORT, LOCAL_BEDROCK_PORT, LOCAL_DYNAMODB_PORT, LOCAL_KB_PORT)"
            ));
        }
    }

    let mut children = Children(Vec::new());
    let mut env: Vec<(String, String)> = Vec::new();
    let _bedrock;
    let _dynamodb;
    let _knowledge_base;
    if real_aws {
        eprintln!(
            "local-run: MODEL_ID and AWS credentials are set: using real Bedrock and DynamoDB (table {}).",
            std::env::var("TABLE_NAME")
                .unwrap_or_else(|_| "from TABLE_NAME, which must be set".into())
        );
    } else {
        let pace = Duration::from_millis(
            std::env::var("LOCAL_MODEL_PACE_MS")
                .ok()
                .map(|v| {
                    v.trim().parse().unwrap_or_else(|_| {
                        fail("LOCAL_MODEL_PACE_MS must be a whole number of milliseconds")
                    })
                })
                .unwrap_or(DEFAULT_PACE_MS),
        );
        _bedrock = LocalBedrock::start_paced(([127, 0, 0, 1], bedrock_port).into(), true, pace)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot start the local Bedrock server: {e}")));
        eprintln!(
            "local-run: local Bedrock server on http://127.0.0.1:{bedrock_port}, {} ms a word",
            pace.as_millis()
        );

        let dynamodb = LocalDynamo::start(Some(dynamodb_port)).unwrap_or_else(|e| fail(&e));
        let endpoint = dynamodb.endpoint();
        chat_aws::table::ensure_table(&dynamodb.client().await, TABLE_NAME)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot create the table: {e}")));
        _dynamodb = dynamodb;
        eprintln!("local-run: DynamoDB (moto) on {endpoint}, table {TABLE_NAME}");

        for (k, v) in [
            ("MODEL_ID", LOCAL_MODEL_ID.to_string()),
            ("TABLE_NAME", TABLE_NAME.to_string()),
            (
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                format!("http://127.0.0.1:{bedrock_port}"),
            ),
            ("AWS_ENDPOINT_URL_DYNAMODB", endpoint),
            ("AWS_ACCESS_KEY_ID", "local".into()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
            ("AWS_REGION", "us-east-1".into()),
        ] {
            env.push((k.into(), v));
        }
    }

    if local_knowledge_base {
        let collection = std::env::var_os("LOCAL_KB_COLLECTION")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(SAMPLE_COLLECTION));
        let started = Instant::now();
        let knowledge_base = LocalKnowledgeBase::start_on(
            ([127, 0, 0, 1], knowledge_base_port).into(),
            LOCAL_KNOWLEDGE_BASE_ID,
            &collection,
        )
        .await
        .unwrap_or_else(|e| {
            fail(&format!(
                "cannot start the local knowledge base over {}: {e}",
                collection.display()
            ))
        });
        eprintln!(
            "local-run: local knowledge base {LOCAL_KNOWLEDGE_BASE_ID} on {} ({} passages of {}, indexed in {} ms)",
            knowledge_base.endpoint(),
            knowledge_base.passages(),
            collection.display(),
            started.elapsed().as_millis()
        );
        env.push(("KNOWLEDGE_BASE_ID".into(), LOCAL_KNOWLEDGE_BASE_ID.into()));
        env.push((
            "AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME".into(),
            knowledge_base.endpoint(),
        ));
        _knowledge_base = knowledge_base;
    } else {
        match std::env::var("KNOWLEDGE_BASE_ID") {
            Ok(id) if !id.is_empty() => {
                eprintln!("local-run: retrieval from knowledge base {id} (KNOWLEDGE_BASE_ID)")
            }
            _ => eprintln!("local-run: retrieval off (KNOWLEDGE_BASE_ID is empty or unset)"),
        }
    }

    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    if std::env::var_os("CORS_ALLOWED_ORIGINS").is_none() {
        // Browser front ends on any local port; on AWS the function URLs answer CORS instead.
        env.push(("CORS_ALLOWED_ORIGINS".into(), "*".into()));
    }
    if std::env::var_os("AUTH_MODE").is_none() {
        // One local user, unless the environment asks for IAM or JWT callers.
        env.push(("AUTH_MODE".into(), "none".into()));
    }
    let watch = Command::new(tools.join("cargo-lambda"))
        .args([
            "lambda",
            "watch",
            "--invoke-address",
            "127.0.0.1",
            // The functions answer CORS themselves (CORS_ALLOWED_ORIGINS), by the rules the function URLs apply on
            // AWS; cargo lambda's own CORS would allow anything and hide them.
            "--disable-cors",
            "--invoke-port",
        ])
        .arg(run_port.to_string())
        // A test's local run (`--exit-with-stdin`) never reloads: a reload kills the request in flight, and files
        // written during a run (screenshots, a browser unpacking itself) must not restart the functions.
        .args(exit_with_stdin.then_some("--ignore-changes"))
        .current_dir(&root)
        .env("PATH", path)
        .envs(env)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("cannot start cargo lambda watch: {e}")));
    children.0.push(watch);
    wait_for_port(run_port, "cargo lambda watch", Duration::from_secs(120));
    // A function's first request waits while cargo lambda compiles it; a 405 is the function itself answering.
    let addr: SocketAddr = ([127, 0, 0, 1], run_port).into();
    for (function, path) in [
        ("chat", "/chat"),
        ("chat-stream", "/chat/stream"),
        ("history", "/chat-history/ready"),
    ] {
        match http_status(addr, path) {
            Some(405) => {}
            other => fail(&format!(
                "the {function} function did not come up (GET {path} answered {other:?})"
            )),
        }
    }
    eprintln!("local-run: ready on http://127.0.0.1:{run_port}");

    let stdin_closed = async {
        if exit_with_stdin {
            let _ = tokio::task::spawn_blocking(|| {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
            })
            .await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
        _ = stdin_closed => {}
    }
    eprintln!("local-run: stopping");
    drop(children);
}
