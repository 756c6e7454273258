//! A local MCP server over streamable HTTP, for tests and the local run (`make run`): rmcp's server side (its
//! `StreamableHttpService`) at `/mcp` on an axum server, offering four tools:
//!
//! | tool | input | result | annotated |
//! |---|---|---|---|
//! | `add` | `{a, b}` (numbers) | their sum as text (`"5"`); a sum that is not a finite number is an error result (`isError`) | `readOnlyHint: true` |
//! | `echo` | `{message}` | the message | `readOnlyHint: true` |
//! | `sleep` | `{ms}` | waits `ms` milliseconds (at most a minute), then says `"slept N ms"` | `readOnlyHint: true` |
//! | `note` | `{text}` | keeps the text in the MCP session's notes and returns them all, one a line (state per session) | not read-only |
//!
//! With [`Options::bearer_token`] set, every request must carry `Authorization: Bearer TOKEN`; others are answered
//! 401 (so a test can tell that a client's configured header was sent). With [`Options::record`], each request's
//! MCP session id and `X-Chat-User` header are recorded. rmcp's own checks stay on: only loopback `Host` names
//! are served. [`flood`] is another server, answering a tool call with as many bytes as it is asked for.

pub mod flood;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The path the server answers MCP on.
pub const PATH: &str = "/mcp";
/// The longest `sleep` waits.
pub const MAX_SLEEP_MS: u64 = 60_000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddInput {
    /// The first number.
    pub a: f64,
    /// The second number.
    pub b: f64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoInput {
    /// The text to send back.
    pub message: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SleepInput {
    /// How many milliseconds to wait (at most 60000).
    pub ms: u64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NoteInput {
    /// The text to keep.
    pub text: String,
}

/// The tools, as rmcp's tool router routes them; one per MCP session, with that session's notes.
#[derive(Debug, Clone)]
pub struct LocalTools {
    tool_router: ToolRouter<Self>,
    notes: Arc<Mutex<Vec<String>>>,
}

impl Default for LocalTools {
    fn default() -> Self {
        Self {
            tool_router: Self::tool_router(),
            notes: Arc::default(),
        }
    }
}

#[tool_router]
impl LocalTools {
    #[tool(
        description = "Adds two numbers and returns their sum.",
        annotations(read_only_hint = true)
    )]
    fn add(
        &self,
        Parameters(AddInput { a, b }): Parameters<AddInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let sum = a + b;
        Ok(if sum.is_finite() {
            CallToolResult::success(vec![ContentBlock::text(sum.to_string())])
        } else {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "the sum of {a} and {b} is not a finite number"
            ))])
        })
    }

    #[tool(
        description = "Returns the message it is given.",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(EchoInput { message }): Parameters<EchoInput>) -> String {
        message
    }

    #[tool(
        description = "Waits the given number of milliseconds (at most 60000), then says so.",
        annotations(read_only_hint = true)
    )]
    async fn sleep(&self, Parameters(SleepInput { ms }): Parameters<SleepInput>) -> String {
        let ms = ms.min(MAX_SLEEP_MS);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("slept {ms} ms")
    }

    #[tool(
        description = "Keeps a note in this session and returns the session's notes, one a line.",
        annotations(read_only_hint = false)
    )]
    fn note(&self, Parameters(NoteInput { text }): Parameters<NoteInput>) -> String {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.push(text);
        notes.join("\n")
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LocalTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("local-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions("A local MCP server for tests: add, echo, sleep and note.")
    }
}

/// How the server is started.
#[derive(Clone, Default)]
pub struct Options {
    /// When set, requests without `Authorization: Bearer <token>` are refused with 401.
    pub bearer_token: Option<String>,
    /// When set, every request is recorded in it.
    pub record: Option<Recorder>,
}

/// What a request carried: its HTTP method, its `Mcp-Session-Id` and its `X-Chat-User` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub session: Option<String>,
    pub user: Option<String>,
}

/// The requests a server has seen, in order.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn push(&self, seen: Seen) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(seen);
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("record", &self.record.is_some())
            .finish()
    }
}

/// The server's routes: MCP at [`PATH`], behind the bearer check when a token is set.
pub fn router(options: Options) -> Router {
    let service: StreamableHttpService<LocalTools, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(LocalTools::default()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
    let mut router = Router::new().nest_service(PATH, service);
    if let Some(recorder) = options.record {
        router = router.layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let header = |name: &str| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                recorder.push(Seen {
                    method: request.method().to_string(),
                    session: header("mcp-session-id"),
                    user: header("x-chat-user"),
                });
                next.run(request)
            },
        ));
    }
    match options.bearer_token {
        None => router,
        Some(token) => {
            let expected: Arc<str> = Arc::from(format!("Bearer {token}"));
            router.layer(axum::middleware::from_fn(
                move |request: Request, next: Next| {
                    let expected = expected.clone();
                    async move {
                        let given = request
                            .headers()
                            .get(header::AUTHORIZATION)
                            .and_then(|v| v.to_str().ok());
                        if given == Some(&*expected) {
                            next.run(request).await
                        } else {
                            unauthorized()
                        }
                    }
                },
            ))
        }
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required",
    )
        .into_response()
}

/// Starts the server on `addr` (port 0 for any free port); returns the address it listens on and its task, which
/// serves until it is aborted.
pub async fn start(addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    start_with(addr, Options::default()).await
}

/// [`start`] with options.
pub async fn start_with(
    addr: SocketAddr,
    options: Options,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let app = router(options);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("local-mcp: the server stopped: {e}");
        }
    });
    Ok((addr, task))
}

/// The URL a client reaches a server listening on `addr` at.
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}{PATH}")
}
