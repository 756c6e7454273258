//! `make run`: the whole backend on one address, http://127.0.0.1:9000, with nothing installed by hand.
//!
//! Starts the local Bedrock-compatible server (in this process) and moto's DynamoDB server, creates the table, and
//! serves the three functions' routers (chat, chat-stream, history) in this process, through the same edge each
//! function serves on Lambda or as a plain server (`chat_runtime::serve_plain`): every request reaches the functions'
//! own code, whatever its bytes. One local user (`AUTH_MODE=none`) and CORS for pages of this machine only
//! (`CORS_ALLOWED_ORIGINS=http://localhost:*,http://127.0.0.1:*`: with no sign-in, any other page a developer
//! opens could read their chats and spend their Bedrock budget) unless the environment says otherwise. Every
//! server it starts listens on 127.0.0.1 only, for the same reason. With `MODEL_ID` and AWS credentials in the
//! environment (`AWS_PROFILE` or `AWS_ACCESS_KEY_ID`), it uses real Bedrock and DynamoDB instead, and starts neither
//! server.
//!
//! Retrieval: it also starts the local knowledge-base server (in this process, `tests/local-knowledge-base`), which
//! serves the knowledge base `LOCALKB001` over the sample collection `samples/knowledge-base` (or the folder
//! `LOCAL_KB_COLLECTION` names) in the `Retrieve` API's wire format, and gives the functions
//! `KNOWLEDGE_BASE_ID=LOCALKB001` and `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME` pointing at it, so that every
//! standard turn is grounded in those documents. Its data source `LOCALDATA1` takes uploads (`/documents`:
//! `DOCUMENTS_BUCKET=chat-local-documents` in moto's S3, `KNOWLEDGE_BASE_DATA_SOURCE_ID` and
//! `AWS_ENDPOINT_URL_BEDROCK_AGENT` pointing at it), which it reads back from moto and indexes. When `KNOWLEDGE_BASE_ID` is set in the environment it is passed to
//! the functions as it is and no local knowledge base starts: `KNOWLEDGE_BASE_ID=` (empty) turns retrieval off (the
//! test suites' shared runs do this), any other id is searched wherever `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME`
//! (or, with real AWS, the region) points. With real AWS (below) and no `KNOWLEDGE_BASE_ID`, retrieval is off.
//!
//! With `--cargo-lambda-watch`, the functions run as Lambda runs them instead, under `cargo lambda watch` (from
//! `make tools`) on the same port, which `cargo lambda invoke --data-file events/…` then reaches (the invoke suite
//! does this). With `--exit-with-stdin`, it shuts down when its standard input closes (tests use this so nothing
//! outlives them), and `cargo lambda watch` does not rebuild and reload on changes.
//!
//! Tools: it also starts the local MCP server (in this process, `tests/local-mcp`: `add`, `echo` and `sleep` over
//! streamable HTTP) and gives the functions
//! `MCP_SERVERS=[{"name":"local","url":"http://127.0.0.1:PORT/mcp","allow":["add","echo","sleep"]}]`, so that the
//! model is offered those tools (named in `allow`: with the local knowledge base on, `MCP_REQUIRE_ALLOW` is too). When `MCP_SERVERS` is set in the environment it is passed to the
//! functions as it is and no local MCP server starts: `MCP_SERVERS=` (empty) turns MCP tools off. Unless
//! `RETRIEVAL` is set, the model may also search the documents itself (`RETRIEVAL=both`: `search_documents`).
//!
//! Ports: `LOCAL_PORT` (9000), `LOCAL_BEDROCK_PORT` (9100), `LOCAL_DYNAMODB_PORT` (9200), `LOCAL_KB_PORT`
//! (`LOCAL_PORT` + 300, 9300 by default), `LOCAL_MCP_PORT` (`LOCAL_PORT` + 400, 9400 by default). The local model
//! waits `LOCAL_MODEL_PACE_MS` (30) before each word.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use local_bedrock::LocalBedrock;
use local_dynamodb::{LocalDynamo, workspace_root};
use local_knowledge_base::LocalKnowledgeBase;

const TABLE_NAME: &str = "chat-local";
/// The bucket of the files of messages, in moto beside the table.
const ATTACHMENTS_BUCKET: &str = "chat-local-attachments";
/// The bucket of the documents uploaded into the local knowledge base (`/documents`), in moto too.
const DOCUMENTS_BUCKET: &str = "chat-local-documents";
const LOCAL_MODEL_ID: &str = "local.echo-v1:0";
/// The model whose features and prices the local model takes.
const LOCAL_BASE_MODEL_ID: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let exit_with_stdin = args.iter().any(|a| a == "--exit-with-stdin");
    let via_cargo_lambda = args.iter().any(|a| a == "--cargo-lambda-watch");
    let root = workspace_root();
    let tools = root.join(".tools/venv/bin");
    let ports = Ports {
        run: port("LOCAL_PORT", 9000),
        bedrock: port("LOCAL_BEDROCK_PORT", 9100),
        dynamodb: port("LOCAL_DYNAMODB_PORT", 9200),
        knowledge_base: port(
            "LOCAL_KB_PORT",
            port("LOCAL_PORT", 9000).saturating_add(300),
        ),
        mcp: port(
            "LOCAL_MCP_PORT",
            port("LOCAL_PORT", 9000).saturating_add(400),
        ),
    };
    let real_aws = std::env::var_os("MODEL_ID").is_some()
        && (std::env::var_os("AWS_PROFILE").is_some()
            || std::env::var_os("AWS_ACCESS_KEY_ID").is_some());
    // The user's own KNOWLEDGE_BASE_ID (even an empty one, which turns retrieval off) goes to the functions as it
    // is, through the environment they inherit; otherwise the local knowledge base serves the sample collection.
    let local_knowledge_base = !real_aws && std::env::var_os("KNOWLEDGE_BASE_ID").is_none();
    // Likewise the user's own MCP_SERVERS (empty: no MCP tools); otherwise the local MCP server offers its tools,
    // with real Bedrock too (it needs nothing of AWS).
    let local_mcp = std::env::var_os("MCP_SERVERS").is_none();

    if via_cargo_lambda && !tools.join("cargo-lambda").exists() {
        fail("the project's tools are missing; run `make tools` (make run does it for you)");
    }
    let mut wanted = vec![ports.run];
    if !real_aws {
        wanted.extend([ports.bedrock, ports.dynamodb]);
    }
    if local_knowledge_base {
        wanted.push(ports.knowledge_base);
    }
    if local_mcp {
        wanted.push(ports.mcp);
    }
    for p in wanted {
        if !port_is_free(p) {
            fail(&format!(
                "port {p} is in use: is another local run going? (ports are set by LOCAL_PORT, LOCAL_BEDROCK_PORT, LOCAL_DYNAMODB_PORT, LOCAL_KB_PORT, LOCAL_MCP_PORT)"
            ));
        }
    }

    // What the functions read from their environment, as a deployment's template would set it.
    let mut env: Vec<(&str, String)> = Vec::new();
    if !real_aws {
        env.extend([
            ("MODEL_ID", LOCAL_MODEL_ID.to_string()),
            // The local model stands for Claude Sonnet 4.5: it reasons on request, takes cache points and is priced,
            // as the local Bedrock server plays along on the wire.
            (
                "BASE_MODEL_ID",
                std::env::var("BASE_MODEL_ID").unwrap_or_else(|_| LOCAL_BASE_MODEL_ID.to_string()),
            ),
            ("TABLE_NAME", TABLE_NAME.to_string()),
            (
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                format!("http://127.0.0.1:{}", ports.bedrock),
            ),
            (
                "AWS_ENDPOINT_URL_DYNAMODB",
                format!("http://127.0.0.1:{}", ports.dynamodb),
            ),
            // moto serves S3 on the same port.
            ("ATTACHMENTS_BUCKET", ATTACHMENTS_BUCKET.to_string()),
            (
                "AWS_ENDPOINT_URL_S3",
                format!("http://127.0.0.1:{}", ports.dynamodb),
            ),
            ("AWS_ACCESS_KEY_ID", "local".into()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]);
    }
    if !real_aws {
        // moto answers one request at a time, each list of fifty chats in about 0.2 s here: eight clients at once
        // wait their turns, and a deployment's store timeouts (2 s an attempt, 5 s a call) made some of them 503s,
        // with retries adding to the queue. Against moto the bounds are the queue's, unless set.
        for (name, value) in [
            ("STORE_ATTEMPT_TIMEOUT_MS", "15000"),
            ("STORE_TIMEOUT_MS", "30000"),
        ] {
            if std::env::var_os(name).is_none() {
                env.push((name, value.into()));
            }
        }
    }
    if local_knowledge_base {
        env.extend([
            ("KNOWLEDGE_BASE_ID", LOCAL_KNOWLEDGE_BASE_ID.to_string()),
            (
                "AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME",
                format!("http://127.0.0.1:{}", ports.knowledge_base),
            ),
            // Uploads (`/documents`): into moto's bucket, ingested by the local knowledge base's data source.
            ("DOCUMENTS_BUCKET", DOCUMENTS_BUCKET.to_string()),
            (
                "KNOWLEDGE_BASE_DATA_SOURCE_ID",
                local_knowledge_base::DATA_SOURCE_ID.to_string(),
            ),
            (
                "AWS_ENDPOINT_URL_BEDROCK_AGENT",
                format!("http://127.0.0.1:{}", ports.knowledge_base),
            ),
        ]);
    }
    // The model searches the sample documents as its tool too (search_documents), beside the search before it.
    if std::env::var_os("RETRIEVAL").is_none() {
        env.push(("RETRIEVAL", "both".into()));
    }
    if local_mcp {
        env.push((
            "MCP_SERVERS",
            format!(
                r#"[{{"name":"local","url":"{}","allow":["add","echo","sleep"]}}]"#,
                local_mcp::url(([127, 0, 0, 1], ports.mcp).into())
            ),
        ));
    }
    if std::env::var_os("RESPONSES_REASONING_KEY").is_none() {
        // The Responses API seals the reasoning a client keeps (`store: false`), as the template's generated secret
        // has a deployment do; a local run's key is a fixed, public one.
        env.push((
            "RESPONSES_REASONING_KEY",
            "local-run: not a secret, a deployment's key is generated".into(),
        ));
    }
    if std::env::var_os("CORS_ALLOWED_ORIGINS").is_none() {
        // Browser front ends served from this machine, on any port; on AWS the function URLs answer CORS instead.
        env.push(("CORS_ALLOWED_ORIGINS", chat_edge::LOOPBACK_ORIGINS.into()));
    }
    let auth_mode = std::env::var("AUTH_MODE").ok();
    if auth_mode.is_none() {
        // One local user, unless the environment asks for IAM or JWT callers.
        env.push(("AUTH_MODE", "none".into()));
    }
    if auth_mode.is_none_or(|m| m.trim().eq_ignore_ascii_case("none"))
        && std::env::var_os("ALLOW_ANONYMOUS").is_none()
    {
        // Under `cargo lambda watch` the functions see Lambda's variables, and refuse `none` there unless told that
        // anonymous callers are meant: here they are, this is a local run.
        env.push(("ALLOW_ANONYMOUS", "true".into()));
    }
    if !via_cargo_lambda {
        // The functions run in this process and read their configuration from its environment.
        for (name, value) in &env {
            // SAFETY: no other thread exists yet: the async runtime and every server start below.
            unsafe { std::env::set_var(name, value) };
        }
        // The system's roots from their bundle file only, as each function's own start reads them.
        // SAFETY: as above.
        let _bundle = unsafe { chat_aws::https::read_bundle_only() };
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start the async runtime: {e}")));
    runtime.block_on(run(Run {
        root,
        tools,
        ports,
        real_aws,
        local_knowledge_base,
        local_mcp,
        exit_with_stdin,
        via_cargo_lambda,
        env,
    }));
}

struct Ports {
    run: u16,
    bedrock: u16,
    dynamodb: u16,
    knowledge_base: u16,
    mcp: u16,
}

/// What `main` decided, for the async part.
struct Run {
    root: PathBuf,
    tools: PathBuf,
    ports: Ports,
    real_aws: bool,
    local_knowledge_base: bool,
    local_mcp: bool,
    exit_with_stdin: bool,
    via_cargo_lambda: bool,
    env: Vec<(&'static str, String)>,
}

async fn run(run: Run) {
    let mut children = Children(Vec::new());
    let _bedrock;
    let _dynamodb;
    let _knowledge_base;
    let _mcp;
    if run.real_aws {
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
        _bedrock =
            LocalBedrock::start_paced(([127, 0, 0, 1], run.ports.bedrock).into(), true, pace)
                .await
                .unwrap_or_else(|e| fail(&format!("cannot start the local Bedrock server: {e}")));
        eprintln!(
            "local-run: local Bedrock server on http://127.0.0.1:{}, {} ms a word",
            run.ports.bedrock,
            pace.as_millis()
        );

        let dynamodb = LocalDynamo::start(Some(run.ports.dynamodb)).unwrap_or_else(|e| fail(&e));
        let endpoint = dynamodb.endpoint();
        chat_aws::table::ensure_table(&dynamodb.client().await, TABLE_NAME)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot create the table: {e}")));
        chat_aws::S3Attachments::from_config(
            &dynamodb.sdk_config().await,
            ATTACHMENTS_BUCKET,
            Duration::from_secs(300),
            chat_core::StoreTimeouts::default(),
        )
        .ensure_bucket()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot create the bucket: {e}")));
        _dynamodb = dynamodb;
        eprintln!(
            "local-run: DynamoDB and S3 (moto) on {endpoint}, table {TABLE_NAME}, bucket {ATTACHMENTS_BUCKET}"
        );
    }

    if run.local_knowledge_base {
        let collection = std::env::var_os("LOCAL_KB_COLLECTION")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| run.root.join(SAMPLE_COLLECTION));
        let started = Instant::now();
        // Uploaded documents are read from moto's S3, where the functions put them.
        let s3 =
            LocalDynamo::sdk_config_at(&format!("http://127.0.0.1:{}", run.ports.dynamodb)).await;
        chat_aws::KnowledgeBaseDocuments::from_config(
            &s3,
            &s3,
            DOCUMENTS_BUCKET,
            LOCAL_KNOWLEDGE_BASE_ID,
            local_knowledge_base::DATA_SOURCE_ID,
            Duration::from_secs(30),
            chat_core::StoreTimeouts::default(),
        )
        .ensure_bucket()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot create the documents bucket: {e}")));
        let knowledge_base = LocalKnowledgeBase::start_with(
            ([127, 0, 0, 1], run.ports.knowledge_base).into(),
            LOCAL_KNOWLEDGE_BASE_ID,
            &collection,
            local_knowledge_base::DocumentSource {
                s3: Some(s3),
                ingest_delay_ms: 100,
            },
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
        _knowledge_base = knowledge_base;
    } else {
        match std::env::var("KNOWLEDGE_BASE_ID") {
            Ok(id) if !id.is_empty() => {
                eprintln!("local-run: retrieval from knowledge base {id} (KNOWLEDGE_BASE_ID)")
            }
            _ => eprintln!("local-run: retrieval off (KNOWLEDGE_BASE_ID is empty or unset)"),
        }
    }

    if run.local_mcp {
        let (addr, server) = local_mcp::start(([127, 0, 0, 1], run.ports.mcp).into())
            .await
            .unwrap_or_else(|e| fail(&format!("cannot start the local MCP server: {e}")));
        eprintln!(
            "local-run: local MCP server on {} (add, echo, sleep)",
            local_mcp::url(addr)
        );
        // Stops with the run (its task ends with the runtime).
        _mcp = server;
    } else {
        match std::env::var("MCP_SERVERS") {
            Ok(servers) if !servers.trim().is_empty() => {
                eprintln!("local-run: MCP servers from MCP_SERVERS")
            }
            _ => eprintln!("local-run: MCP tools off (MCP_SERVERS is empty)"),
        }
    }

    let exit_with_stdin = run.exit_with_stdin;
    let stdin_closed = async move {
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
    let stop = async move {
        tokio::select! {
            _ = chat_runtime::shutdown_signal() => {}
            _ = stdin_closed => {}
        }
        eprintln!("local-run: stopping");
    };

    if run.via_cargo_lambda {
        children.0.push(start_cargo_lambda_watch(
            &run.root,
            &run.tools,
            run.ports.run,
            run.exit_with_stdin,
            run.env,
        ));
        eprintln!("local-run: ready on http://127.0.0.1:{}", run.ports.run);
        stop.await;
        drop(children);
        return;
    }

    chat_runtime::init_logging(chat_app::http_client);
    let service = functions_service()
        .await
        .unwrap_or_else(|e| fail(&format!("the functions cannot start: {e}")));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", run.ports.run))
        .await
        .unwrap_or_else(|e| fail(&format!("cannot listen on port {}: {e}", run.ports.run)));
    eprintln!("local-run: ready on http://127.0.0.1:{}", run.ports.run);
    if let Err(e) = chat_runtime::serve_plain(listener, service, stop).await {
        fail(&format!("the server stopped: {e}"));
    }
}

/// The three functions' routes on one address, built by the composition root as the functions' own cold starts
/// build them, behind the edge every function has, answering only this machine's names.
async fn functions_service() -> Result<chat_runtime::FunctionService, chat_edge::ConfigError> {
    let app = chat_app::App::build::<chat_app::Everything>().await?;
    Ok(app
        .map_routes(|routes| routes.layer(axum::middleware::from_fn(loopback_host_only)))
        .service())
}

/// Answers only requests addressed to this machine by a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port).
/// Binding to 127.0.0.1 and the loopback-only CORS keep other machines and other pages out, but not DNS rebinding: a
/// page whose own name is made to resolve to 127.0.0.1 is same-origin with its requests here, so the browser asks no
/// CORS question. Its requests still carry its name in `Host`, and are refused.
async fn loopback_host_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if is_loopback_host(host) {
        return next.run(request).await;
    }
    (
        axum::http::StatusCode::MISDIRECTED_REQUEST,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        r#"{"error":"The local run answers only requests to localhost, 127.0.0.1 or [::1]."}"#,
    )
        .into_response()
}

/// Whether a `Host` value names this machine by a loopback name, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, after)) => (name, after),
            None => return false,
        },
        None => match host.find(':') {
            Some(at) => (&host[..at], &host[at..]),
            None => (host, ""),
        },
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok());
    port_ok
        && matches!(
            name.to_ascii_lowercase().as_str(),
            "localhost" | "127.0.0.1" | "::1"
        )
}

/// Whether `name` is one of the variables cargo sets for the package it runs or tests, not the user's own
/// configuration (`CARGO_HOME`, `CARGO_TARGET_DIR` and the like stay).
fn is_cargo_package_variable(name: &str) -> bool {
    [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
        || matches!(
            name,
            "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR" | "CARGO_RUSTC_CURRENT_DIR" | "OUT_DIR"
        )
}

/// The functions as Lambda runs them, under `cargo lambda watch` on `port`, with `env`; waits until each answers.
fn start_cargo_lambda_watch(
    root: &Path,
    tools: &Path,
    port: u16,
    exit_with_stdin: bool,
    env: Vec<(&'static str, String)>,
) -> Child {
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut watch = Command::new(tools.join("cargo-lambda"));
    // `cargo run` and `cargo test` hand their package's variables (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, …) to what
    // they run. Passed on to cargo lambda's own `cargo run`, they change the fingerprint of build scripts that watch
    // them (ring's does): the functions' TLS and SDK crates were compiled again here, and again by the next build.
    for (name, _) in std::env::vars_os() {
        if is_cargo_package_variable(&name.to_string_lossy()) {
            watch.env_remove(name);
        }
    }
    let watch = watch
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
        .arg(port.to_string())
        // A test's local run (`--exit-with-stdin`) never reloads: a reload kills the request in flight, and files
        // written during a run must not restart the functions.
        .args(exit_with_stdin.then_some("--ignore-changes"))
        .current_dir(root)
        .env("PATH", path)
        .envs(env)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("cannot start cargo lambda watch: {e}")));
    wait_for_port(port, "cargo lambda watch", Duration::from_secs(120));
    // A function's first request waits while cargo lambda compiles it; a 405 is the function itself answering.
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
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
    watch
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn only_loopback_names_are_this_machine() {
        for host in [
            "localhost",
            "localhost:9000",
            "127.0.0.1:9000",
            "[::1]:9000",
            "[::1]",
            "LOCALHOST:1",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example",
            "evil.example:9000",
            "localhost.evil.example:9000",
            "127.0.0.1.nip.io:9000",
            "localhost:9000:1",
            "localhost:x",
            "[::2]:9000",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
