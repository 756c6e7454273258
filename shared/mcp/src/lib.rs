//! MCP servers as tools of the chat core ([`chat_core::ToolSource`]), through rmcp (the official Rust MCP SDK) as
//! the client over streamable HTTP.
//!
//! - `MCP_SERVERS` ([`McpServers::from_json`]) names the servers: `[{name, url, headers?, allow?, forward_user?}]`.
//! - Least privilege: a server's tools are offered when its entry names them in `allow`; without `allow`, only the
//!   tools its server marks read-only (the MCP tool annotation `readOnlyHint: true`), so that a tool which acts in
//!   the world is offered only by the operator's choice. With [`McpServers::with_allow_required`]
//!   (`MCP_REQUIRE_ALLOW`, on by default where documents are searched) only `allow` offers a tool: a read-only tool's
//!   arguments still leave for its server, and could carry what the model read out of the documents.
//! - Nothing connects at cold start: the first turn's [`ToolSource::list`] connects to every server at once and
//!   lists its tools, each server within the listing timeout: the `list_timeout` given, at most
//!   [`LIST_TIMEOUT_CAP`] (listing happens before the model is called). What a server listed is kept for the
//!   turns after.
//! - A session per caller: each caller (by owner id) talks to a server in an MCP session of their own, opened at
//!   their first listing or call, so that a server which keeps state per session never carries one user's state to
//!   another. A server keeps at most [`Sessions::max`] sessions (the least recently used is closed to open
//!   another), each closed after [`Sessions::idle`] unused. With `forward_user`, every request also carries the
//!   caller's owner id in `X-Chat-User` ([`USER_HEADER`]).
//! - A server that could not be listed, or whose connection failed under a call, offers nothing and says so in
//!   one line of [`ToolListing::unavailable`]; it never fails the turn. That failure is the answer of every turn
//!   for [`RETRY_AFTER`] ([`McpServers::with_retry_after`]), without a wait; the first turn after it lists the
//!   server again.
//! - Its tools are offered under their own names, made to fit Bedrock's `[a-zA-Z0-9_-]{1,64}`; a name two servers
//!   share becomes `{server}_{tool}` for each.
//! - A call sends the model's input as the tool's arguments; the result's text is what the model reads (other
//!   content described in a few words), and `isError: true` is an error result. The answer is read as it arrives
//!   and kept only up to the result bound and a margin ([`McpServers::with_max_result_bytes`]): past it nothing is
//!   read, and the model reads the start of the text with a note that it was cut ([`transport`]).
//! - Header values are secrets: sent on every request, marked sensitive, redacted from `Debug`, and kept out of
//!   every line, error and thought this crate makes. So are the URL's user-info and query: the URL is shown as
//!   `scheme://host:port/path` ([`ServerConfig::shown_url`]).

mod config;
mod cut;
mod transport;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use chat_core::{Caller, Tool, ToolFuture, ToolListing, ToolOutput, ToolSource, ToolSpec};
use futures_util::future::join_all;
use http::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tokio::sync::{Mutex, OnceCell};
use tracing::Instrument;

pub use config::{ServerConfig, USER_HEADER};
use transport::BoundedClient;
pub use transport::{client_builder, http_client};

/// The longest tool name Bedrock takes.
const MAX_TOOL_NAME: usize = 64;

/// The longest a server's listing (connection, MCP handshake, `tools/list`) may take, whatever `list_timeout` is
/// given (the tool call timeout, 30 s by default): listing happens before the model is called, on the turn's
/// critical path, so a server that hangs in the handshake would hold every turn for the whole call timeout.
pub const LIST_TIMEOUT_CAP: Duration = Duration::from_secs(5);

/// How long a server's failure (a listing that failed, or its connection lost under a call) is the answer of every
/// turn, without a wait, before a turn lists the server again: a server that is down or hangs costs one listing
/// timeout per interval rather than one per turn.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The bounds on the callers' sessions with one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions {
    /// How many callers' sessions one server keeps open; the least recently used is closed to open another.
    pub max: usize,
    /// How long a session is kept unused before it is closed.
    pub idle: Duration,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            max: 16,
            idle: Duration::from_secs(300),
        }
    }
}

/// The MCP servers of `MCP_SERVERS`, as a source of tools.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    list_timeout: Duration,
    retry_after: Duration,
    /// Set once a task closes idle sessions (started by the first listing, inside the runtime).
    sweeping: std::sync::OnceLock<()>,
}

impl fmt::Debug for McpServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self.servers.iter().map(|s| &s.config).collect::<Vec<_>>(),
            )
            .field("list_timeout", &self.list_timeout)
            .field("retry_after", &self.retry_after)
            .field("sessions", &self.servers.first().map(|s| s.bounds))
            .field(
                "max_result_bytes",
                &self.servers.first().map(|s| s.max_result_bytes),
            )
            .finish()
    }
}

/// One server: its configuration, what it listed, and its callers' sessions.
struct Server {
    config: ServerConfig,
    /// The header values, kept out of what this crate says.
    secrets: Arc<[String]>,
    client: BoundedClient,
    /// The bytes of a result's text the model reads (`TOOL_RESULT_MAX_BYTES`).
    max_result_bytes: usize,
    bounds: Sessions,
    /// Held while listing, so that turns arriving together share one attempt.
    state: Mutex<State>,
    /// Each caller's session, by owner id.
    sessions: std::sync::Mutex<HashMap<String, Arc<Slot>>>,
}

#[derive(Default)]
struct State {
    listed: Option<Arc<Listed>>,
    /// The last failure: when it happened, and why (said in the unavailable line).
    failed: Option<Failure>,
}

/// When a listing failed or a connection was lost, and why (redacted).
type Failure = (Instant, String);

/// The tools a server listed (`allow`, or `readOnlyHint`, applied), kept for the turns after.
struct Listed {
    tools: Vec<rmcp::model::Tool>,
    /// Set when a call failed for want of the server: when, and why. The server's failure from then on.
    broken: std::sync::Mutex<Option<Failure>>,
}

impl Listed {
    fn broken(&self) -> Option<Failure> {
        self.broken
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set_broken(&self, reason: &str) {
        self.broken
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get_or_insert_with(|| (Instant::now(), reason.to_string()));
    }
}

/// A caller's place for their session: opened once, by the first of their listings or calls that needs it (the
/// others wait for it), and when it was last used.
#[derive(Default)]
struct Slot {
    session: OnceCell<Arc<Session>>,
    last_used: std::sync::Mutex<Option<Instant>>,
}

impl Slot {
    fn last_used(&self) -> Option<Instant> {
        *self
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
    }
}

/// A live MCP session with a server, one caller's. Dropping it ends the session (rmcp asks the server to close it).
struct Session {
    service: RunningService<RoleClient, ClientConfig>,
}

impl McpServers {
    /// The servers `MCP_SERVERS` names (empty, or `null`: none), each listed within `list_timeout` (at most
    /// [`LIST_TIMEOUT_CAP`]), all through `http` (one built with [`client_builder`]'s rules). The error names what
    /// is wrong (never a header value, nor the URL's user-info or query).
    pub fn from_json(
        json: &str,
        list_timeout: Duration,
        http: reqwest::Client,
    ) -> Result<McpServers, String> {
        let servers = config::parse(json)?;
        Ok(McpServers::new(servers, list_timeout, http))
    }

    /// The servers of `configs`, each listed within `list_timeout` (at most [`LIST_TIMEOUT_CAP`]), all through
    /// `http` (one built with [`client_builder`]'s rules), a failure kept for [`RETRY_AFTER`], the default result
    /// bound (`TOOL_RESULT_MAX_BYTES`'s) and [`Sessions::default`].
    pub fn new(
        configs: Vec<ServerConfig>,
        list_timeout: Duration,
        http: reqwest::Client,
    ) -> McpServers {
        McpServers {
            servers: configs
                .into_iter()
                .map(|config| {
                    Server::new(
                        config,
                        http.clone(),
                        chat_core::ToolBounds::default().max_result_bytes,
                        Sessions::default(),
                    )
                })
                .collect(),
            list_timeout: list_timeout.min(LIST_TIMEOUT_CAP),
            retry_after: RETRY_AFTER,
            sweeping: std::sync::OnceLock::new(),
        }
    }

    /// How long a server's failure is every turn's answer before a turn lists it again ([`RETRY_AFTER`] unless
    /// set).
    pub fn with_retry_after(mut self, retry_after: Duration) -> McpServers {
        self.retry_after = retry_after;
        self
    }

    /// The bytes of a result's text the model reads (`TOOL_RESULT_MAX_BYTES`): an answer is read no further than
    /// them and a margin for the JSON around the text.
    pub fn with_max_result_bytes(self, max_result_bytes: usize) -> McpServers {
        self.rebuilt(|server| (server.config.clone(), max_result_bytes, server.bounds))
    }

    /// The bounds on each server's callers' sessions (`MCP_MAX_SESSIONS`, `MCP_SESSION_IDLE_MS`).
    pub fn with_sessions(self, sessions: Sessions) -> McpServers {
        self.rebuilt(|server| (server.config.clone(), server.max_result_bytes, sessions))
    }

    /// With `required` (`MCP_REQUIRE_ALLOW`), a server's tools are offered only when its `allow` names them: a server
    /// without `allow` offers none, whatever it marks read-only (said once, at the cold start).
    pub fn with_allow_required(self, required: bool) -> McpServers {
        if !required {
            return self;
        }
        self.rebuilt(|server| {
            let mut config = server.config.clone();
            if config.allow.is_none() {
                tracing::warn!(
                    mcp_server = %config.name,
                    "MCP_REQUIRE_ALLOW is on and the MCP server's entry has no allow: it offers no tools; name the \
                     tools it may offer in its allow"
                );
                config.allow = Some(Vec::new());
            }
            (config, server.max_result_bytes, server.bounds)
        })
    }

    /// The servers made anew with another configuration or other bounds (before any was listed).
    fn rebuilt(
        mut self,
        settings: impl Fn(&Server) -> (ServerConfig, usize, Sessions),
    ) -> McpServers {
        self.servers = self
            .servers
            .iter()
            .map(|server| {
                let (config, max_result_bytes, sessions) = settings(server);
                Server::new(
                    config,
                    server.client.http().clone(),
                    max_result_bytes,
                    sessions,
                )
            })
            .collect();
        self
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The configured servers' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(|s| s.config.name.as_str())
    }

    async fn list_all(&self, caller: &Caller) -> ToolListing {
        self.sweep_in_the_background();
        let asked = Instant::now();
        let listed = join_all(
            self.servers
                .iter()
                .map(|server| server.listing(caller, asked, self.list_timeout, self.retry_after)),
        )
        .await;
        let mut unavailable = Vec::new();
        let mut up = Vec::new();
        for (server, outcome) in self.servers.iter().zip(listed) {
            match outcome {
                Ok(listed) => up.push((server.clone(), listed)),
                Err(reason) => unavailable.push(format!(
                    "MCP server {} is unavailable ({reason}): its tools are left out of this turn",
                    server.config.name
                )),
            }
        }
        ToolListing {
            tools: name_tools(&up),
            unavailable,
        }
    }

    /// Starts, once, a task that closes the sessions left idle past their time, so that they end even when no
    /// turn comes (each listing and call closes them too). It ends with the servers.
    fn sweep_in_the_background(&self) {
        if self.servers.is_empty() || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        self.sweeping.get_or_init(|| {
            let servers: Vec<Weak<Server>> = self.servers.iter().map(Arc::downgrade).collect();
            let every = (self.servers[0].bounds.idle / 2)
                .clamp(Duration::from_millis(50), Duration::from_secs(60));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let mut any = false;
                    for server in servers.iter().filter_map(Weak::upgrade) {
                        any = true;
                        server.close_idle_sessions();
                    }
                    if !any {
                        return;
                    }
                }
            });
        });
    }
}

impl ToolSource for McpServers {
    fn list<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> Pin<Box<dyn Future<Output = ToolListing> + Send + 'a>> {
        Box::pin(self.list_all(caller))
    }
}

impl Server {
    fn new(
        config: ServerConfig,
        http: reqwest::Client,
        max_result_bytes: usize,
        bounds: Sessions,
    ) -> Arc<Server> {
        Arc::new(Server {
            secrets: config.secrets().into(),
            client: BoundedClient::new(
                http,
                max_result_bytes.saturating_add(transport::ANSWER_MARGIN_BYTES),
            ),
            config,
            max_result_bytes,
            bounds: Sessions {
                max: bounds.max.max(1),
                idle: bounds.idle,
            },
            state: Mutex::new(State::default()),
            sessions: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The tools the server listed, unless a call found it gone since; otherwise it is listed now, in the caller's
    /// session, within `timeout`. A failure (a listing's, or the connection's under a call) less than
    /// `retry_after` old is this turn's answer, without a wait; so is the failure of an attempt that ended after
    /// `asked` (another turn's, while this one waited for it), rather than a second wait.
    async fn listing(
        &self,
        caller: &Caller,
        asked: Instant,
        timeout: Duration,
        retry_after: Duration,
    ) -> Result<Arc<Listed>, String> {
        let mut state = self.state.lock().await;
        if let Some(listed) = &state.listed {
            match listed.broken() {
                None => return Ok(listed.clone()),
                Some(failure) => {
                    // The server was lost: every session with it goes (dropping one ends it).
                    state.listed = None;
                    state.failed = Some(failure);
                    self.close_all_sessions();
                }
            }
        }
        if let Some((ended, reason)) = &state.failed
            && (*ended >= asked || ended.elapsed() < retry_after)
        {
            tracing::debug!(
                mcp_server = %self.config.name,
                reason = %reason,
                "the MCP server failed a moment ago: its tools are left out of this turn"
            );
            return Err(reason.clone());
        }
        let started = Instant::now();
        let outcome = match tokio::time::timeout(timeout, self.list_tools(caller)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        };
        match outcome {
            Ok(tools) => {
                tracing::info!(
                    mcp_server = %self.config.name,
                    tools = tools.len(),
                    duration_ms = started.elapsed().as_millis() as u64,
                    "listed the MCP server's tools"
                );
                let listed = Arc::new(Listed {
                    tools,
                    broken: std::sync::Mutex::new(None),
                });
                state.listed = Some(listed.clone());
                state.failed = None;
                Ok(listed)
            }
            Err(reason) => {
                let reason = redact(&reason, &self.secrets);
                tracing::warn!(
                    mcp_server = %self.config.name,
                    reason = %reason,
                    duration_ms = started.elapsed().as_millis() as u64,
                    "the MCP server could not be listed: its tools are left out of this turn"
                );
                self.close_session_of(&caller.owner);
                state.failed = Some((Instant::now(), reason.clone()));
                Err(reason)
            }
        }
    }

    /// Lists the tools in the caller's session, keeping those `allow` names or, without `allow`, those the server
    /// marks read-only.
    async fn list_tools(&self, caller: &Caller) -> Result<Vec<rmcp::model::Tool>, String> {
        let session = self.session(caller).await?;
        let mut tools = session
            .service
            .list_all_tools()
            .await
            .map_err(|e| describe(&e))?;
        match &self.config.allow {
            Some(allow) => tools.retain(|tool| allow.iter().any(|name| *name == tool.name)),
            None => {
                let (read_only, acting): (Vec<_>, Vec<_>) = tools.into_iter().partition(|tool| {
                    tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
                });
                if !acting.is_empty() {
                    let names: Vec<&str> = acting.iter().map(|t| t.name.as_ref()).collect();
                    tracing::info!(
                        mcp_server = %self.config.name,
                        left_out = %names.join(", "),
                        "tools the MCP server does not mark read-only (readOnlyHint) are not offered: name them in \
                         the server's allow to offer them"
                    );
                }
                tools = read_only;
            }
        }
        Ok(tools)
    }

    /// The caller's session: the one open, or one opened now (the MCP handshake). A caller's listings and calls
    /// that need it at once share one opening.
    async fn session(&self, caller: &Caller) -> Result<Arc<Session>, String> {
        let slot = self.slot(&caller.owner);
        slot.session
            .get_or_try_init(|| self.open(caller))
            .await
            .cloned()
    }

    /// The caller's place, made if they have none: the sessions idle past their time are closed first, then, when
    /// the server holds as many as it may, the least recently used.
    fn slot(&self, owner: &str) -> Arc<Slot> {
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.drop_idle(&mut sessions);
        if !sessions.contains_key(owner) {
            while sessions.len() >= self.bounds.max {
                let oldest = sessions
                    .iter()
                    .min_by_key(|(_, slot)| slot.last_used())
                    .map(|(owner, _)| owner.clone());
                match oldest {
                    Some(oldest) => {
                        tracing::debug!(
                            mcp_server = %self.config.name,
                            "the least recently used MCP session is closed for another caller's"
                        );
                        sessions.remove(&oldest);
                    }
                    None => break,
                }
            }
        }
        let slot = sessions.entry(owner.to_string()).or_default().clone();
        slot.touch();
        slot
    }

    fn drop_idle(&self, sessions: &mut HashMap<String, Arc<Slot>>) {
        let idle = self.bounds.idle;
        sessions.retain(|_, slot| slot.last_used().is_none_or(|used| used.elapsed() < idle));
    }

    fn close_idle_sessions(&self) {
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.drop_idle(&mut sessions);
    }

    fn close_session_of(&self, owner: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(owner);
    }

    fn close_all_sessions(&self) {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }

    /// Opens a session for the caller (the MCP handshake), its requests carrying the configured headers and, with
    /// `forward_user`, the caller's owner id.
    async fn open(&self, caller: &Caller) -> Result<Arc<Session>, String> {
        let mut headers: HashMap<HeaderName, HeaderValue> =
            self.config.headers.iter().cloned().collect();
        if self.config.forward_user {
            headers.insert(
                HeaderName::from_static(USER_HEADER),
                user_value(&caller.owner),
            );
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.config.url.as_str())
            .custom_headers(headers);
        config.max_json_response_size = transport::OTHER_MESSAGES_MAX_BYTES;
        config.max_sse_event_size = transport::OTHER_MESSAGES_MAX_BYTES;
        let transport = StreamableHttpClientTransport::with_client(self.client.clone(), config);
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("chat-mcp", env!("CARGO_PKG_VERSION")),
        );
        // The session outlives this turn: its tasks (and rmcp's `serve_inner` span) belong to a span of their own,
        // not to the turn's request span, whose requestId and trace every line of the session would carry. (At
        // INFO: a span filtered out would leave them in the turn's.)
        let span = tracing::info_span!(parent: None, "mcp.session", mcp_server = %self.config.name);
        let service = client
            .serve(transport)
            .instrument(span)
            .await
            .map_err(|e| describe(&e))?;
        tracing::debug!(mcp_server = %self.config.name, "opened an MCP session for a caller");
        Ok(Arc::new(Session { service }))
    }
}

/// The owner id as a header value: as it is where it is visible ASCII, each other byte (and `%`) as `%XX`.
fn user_value(owner: &str) -> HeaderValue {
    let mut encoded = String::with_capacity(owner.len());
    for byte in owner.bytes() {
        if byte.is_ascii_graphic() && byte != b'%' {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let mut value = HeaderValue::from_str(&encoded).unwrap_or(HeaderValue::from_static(""));
    value.set_sensitive(true);
    value
}

/// The tools of the servers that are up, under the names the model is offered: each tool's own name made to fit
/// Bedrock's; where two servers offer the same name, `{server}_{tool}` for each. A tool whose name cannot be made
/// to fit, or comes out the same as one named before it, is left out (and logged).
fn name_tools(up: &[(Arc<Server>, Arc<Listed>)]) -> Vec<Arc<dyn Tool>> {
    let mut servers_of: HashMap<String, usize> = HashMap::new();
    for (_, listed) in up {
        let mut seen = std::collections::HashSet::new();
        for tool in &listed.tools {
            if let Some(name) = bedrock_name(&tool.name)
                && seen.insert(name.clone())
            {
                *servers_of.entry(name).or_default() += 1;
            }
        }
    }
    let mut taken = std::collections::HashSet::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (server, listed) in up {
        for tool in &listed.tools {
            let Some(own) = bedrock_name(&tool.name) else {
                tracing::warn!(
                    mcp_server = %server.config.name,
                    tool = %tool.name,
                    "an MCP tool whose name has no character Bedrock takes is left out"
                );
                continue;
            };
            let name = if servers_of.get(&own).copied().unwrap_or(0) > 1 {
                match bedrock_name(&format!("{}_{}", server.config.name, tool.name)) {
                    Some(name) => name,
                    None => continue,
                }
            } else {
                own
            };
            if !taken.insert(name.clone()) {
                tracing::warn!(
                    mcp_server = %server.config.name,
                    tool = %tool.name,
                    offered_as = %name,
                    "an MCP tool is left out: a tool listed before it is offered under the same name"
                );
                continue;
            }
            tools.push(Arc::new(McpTool {
                spec: ToolSpec {
                    strict: false,
                    name,
                    description: description(tool, &server.config.name),
                    input_schema: input_schema(tool),
                },
                mcp_name: tool.name.to_string(),
                server: server.clone(),
                listed: listed.clone(),
            }));
        }
    }
    tools
}

/// `name` made to fit `[a-zA-Z0-9_-]{1,64}`: every other character becomes `_`, and it is cut at 64. `None` when
/// nothing of it is left (empty, or no letter, digit, `_` or `-` at all).
pub fn bedrock_name(name: &str) -> Option<String> {
    if !name
        .chars()
        .any(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return None;
    }
    let fitted: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect();
    Some(fitted)
}

fn description(tool: &rmcp::model::Tool, server: &str) -> String {
    match (tool.description.as_deref(), tool.title.as_deref()) {
        (Some(description), _) if !description.trim().is_empty() => description.to_string(),
        (_, Some(title)) if !title.trim().is_empty() => title.to_string(),
        _ => format!("The tool {} of the MCP server {server}.", tool.name),
    }
}

/// The tool's input schema as the server gave it (an object schema; `type` is added when it is missing).
fn input_schema(tool: &rmcp::model::Tool) -> Value {
    let mut schema = (*tool.input_schema).clone();
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    Value::Object(schema)
}

/// One MCP server's tool, as the core calls it.
struct McpTool {
    spec: ToolSpec,
    /// The name the server knows it by.
    mcp_name: String,
    server: Arc<Server>,
    /// The listing it came from, marked broken when a call finds the server gone.
    listed: Arc<Listed>,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut params = CallToolRequestParams::new(self.mcp_name.clone());
            match input {
                Value::Object(arguments) => params = params.with_arguments(arguments.clone()),
                Value::Null => {}
                _ => return Err("the tool's input must be a JSON object".to_string()),
            }
            let server = &self.server.config.name;
            let session = match self.server.session(caller).await {
                Ok(session) => session,
                Err(reason) => {
                    let reason = redact(&reason, &self.server.secrets);
                    // The server's failure from now on: the turns of the next `retry_after` leave its tools out.
                    self.listed.set_broken(&reason);
                    tracing::warn!(
                        mcp_server = %server,
                        tool = %self.mcp_name,
                        reason = %reason,
                        "an MCP session could not be opened for a call"
                    );
                    return Err(format!(
                        "the MCP server {server} could not be reached ({reason})"
                    ));
                }
            };
            match session.service.call_tool(params).await {
                Ok(result) => {
                    let text = redact(&result_text(&result), &self.server.secrets);
                    let text = match result.meta.as_ref().and_then(|m| m.get(cut::CUT_META)) {
                        Some(_) => with_cut_note(
                            text,
                            self.server.max_result_bytes,
                            self.server
                                .max_result_bytes
                                .saturating_add(transport::ANSWER_MARGIN_BYTES),
                        ),
                        None => text,
                    };
                    if result.is_error == Some(true) {
                        Err(text)
                    } else {
                        Ok(ToolOutput {
                            text,
                            passages: Vec::new(),
                        })
                    }
                }
                Err(ServiceError::McpError(error)) => Err(redact(
                    &format!(
                        "the MCP server {server} refused the call: {}",
                        error.message
                    ),
                    &self.server.secrets,
                )),
                Err(error) => {
                    let reason = redact(&describe(&error), &self.server.secrets);
                    if matches!(
                        error,
                        ServiceError::TransportSend(_)
                            | ServiceError::TransportClosed
                            | ServiceError::Cancelled { .. }
                    ) {
                        // The server's failure from now on: the turns of the next `retry_after` leave its tools
                        // out; the first after lists it again. The caller's session goes with it.
                        self.listed.set_broken(&reason);
                        self.server.close_session_of(&caller.owner);
                    }
                    tracing::warn!(
                        mcp_server = %server,
                        tool = %self.mcp_name,
                        reason = %reason,
                        "an MCP tool call failed on its way"
                    );
                    Err(format!(
                        "the MCP server {server} could not be reached ({reason})"
                    ))
                }
            }
        })
    }
}

/// The text of a result whose answer was cut while it was read (past `read_limit` bytes), made to fit `max_bytes`
/// with a note saying so at its end.
fn with_cut_note(text: String, max_bytes: usize, read_limit: usize) -> String {
    let note = |shown: usize| {
        format!(
            "\n[cut: the MCP server's answer was longer than {read_limit} bytes and was not read further; the first \
             {shown} bytes of its text are shown]"
        )
    };
    let room = max_bytes.saturating_sub(note(text.len()).len());
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{}", &text[..end], note(end))
}

/// What the model reads of a result: its text content, one block a line, other content in a few words; the
/// structured content as JSON when there is no content.
fn result_text(result: &CallToolResult) -> String {
    if result.content.is_empty() {
        return match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => String::new(),
        };
    }
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!(
                "[an image ({}, {} bytes of base64) the model is not shown]",
                image.mime_type,
                image.data.len()
            ),
            ContentBlock::Audio(audio) => {
                format!("[audio ({}) the model is not given]", audio.mime_type)
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[binary resource {uri} ({}) the model is not given]",
                    mime_type.as_deref().unwrap_or("unknown type")
                ),
                _ => "[a resource of a kind the model is not given]".to_string(),
            },
            ContentBlock::ResourceLink(link) => {
                format!("[link to the resource {} ({})]", link.name, link.uri)
            }
            _ => "[content of a kind the model is not given]".to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a connection, a listing or a call failed, in a few words: read from the error and its sources, never
/// their text as it is (a server's answer could quote anything, a URL could hold a key).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut io_kind = None;
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
        }
        text.push_str(&e.to_string().to_ascii_lowercase());
        text.push('\n');
        next = e.source();
    }
    // rmcp keeps the transport's error in fields its `source()` does not give (the reqwest error, and below it
    // the socket's): their debug form names them.
    text.push_str(&format!("{error:?}").to_ascii_lowercase());
    use std::io::ErrorKind;
    if io_kind == Some(ErrorKind::ConnectionRefused)
        || text.contains("connection refused")
        || text.contains("connectionrefused")
    {
        return "connection refused".into();
    }
    if text.contains("dns error")
        || text.contains("failed to lookup address")
        || text.contains("name or service not known")
    {
        return "its host name did not resolve".into();
    }
    if text.contains("certificate")
        || text.contains("tls handshake")
        || text.contains("handshake failure")
    {
        return "the TLS handshake failed".into();
    }
    if text.contains("auth required") {
        return "it asked for credentials (HTTP 401)".into();
    }
    if text.contains("insufficient scope") {
        return "it refused the credentials (HTTP 403)".into();
    }
    if let Some(status) = http_status(&text) {
        return format!("HTTP {status}");
    }
    if io_kind == Some(ErrorKind::TimedOut)
        || text.contains("timed out")
        || text.contains("timeout")
    {
        return "it timed out".into();
    }
    if matches!(
        io_kind,
        Some(ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe)
    ) || text.contains("connection reset")
        || text.contains("connection closed")
        || text.contains("transport closed")
        || text.contains("channel closed")
    {
        return "the connection closed".into();
    }
    if text.contains("session expired") {
        return "its session expired".into();
    }
    if text.contains("json-rpc error") || text.contains("mcp error") {
        return "it answered with an MCP error".into();
    }
    if text.contains("error sending request") || text.contains("client error") {
        return "the request could not be sent".into();
    }
    "it did not answer as an MCP server".into()
}

/// The status of an `HTTP NNN` (or `status code NNN`) in `text`, an error's words.
fn http_status(text: &str) -> Option<&str> {
    for marker in ["http ", "status code ", "status: "] {
        let mut rest = text;
        while let Some(at) = rest.find(marker) {
            let after = &rest[at + marker.len()..];
            let digits = after
                .get(..3)
                .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
            if let Some(d) = digits
                && !after[3..].starts_with(|c: char| c.is_ascii_digit())
                && (b'1'..=b'5').contains(&d.as_bytes()[0])
            {
                return Some(d);
            }
            rest = after;
        }
    }
    None
}

/// `text` with every header value (and a bearer token on its own) replaced.
fn redact(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets {
        if !secret.is_empty() && text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "<redacted>");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_to_fit_bedrock() {
        assert_eq!(bedrock_name("add").as_deref(), Some("add"));
        assert_eq!(
            bedrock_name("files.read/v2").as_deref(),
            Some("files_read_v2")
        );
        assert_eq!(bedrock_name("é-x").as_deref(), Some("_-x"));
        assert_eq!(bedrock_name(&"a".repeat(100)).map(|n| n.len()), Some(64));
        assert_eq!(bedrock_name(""), None);
        assert_eq!(bedrock_name("..."), None);
    }

    #[test]
    fn secrets_are_redacted() {
        let secrets = ["Bearer s3cret".to_string(), "s3cret".to_string()];
        assert_eq!(
            redact("got Bearer s3cret and s3cret", &secrets),
            "got <redacted> and <redacted>"
        );
    }

    #[test]
    fn http_statuses_are_found_in_words() {
        assert_eq!(
            http_status("unexpected server response: http 500: oops"),
            Some("500")
        );
        assert_eq!(
            http_status("http status client error (404 not found)"),
            None
        );
        assert_eq!(http_status("status code 503"), Some("503"));
        assert_eq!(http_status("http 5000"), None);
    }

    #[test]
    fn results_read_as_text() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::text("two"),
        ]);
        assert_eq!(
            result_text(&result),
            "one\n[an image (image/png, 8 bytes of base64) the model is not shown]\ntwo"
        );
    }

    #[tokio::test]
    async fn a_tool_the_server_does_not_know_is_an_error_the_model_reads() {
        let (addr, _server) = local_mcp::start(([127, 0, 0, 1], 0).into()).await.unwrap();
        let source = McpServers::from_json(
            &format!(r#"[{{"name":"local","url":"{}"}}]"#, local_mcp::url(addr)),
            Duration::from_secs(10),
            http_client(),
        )
        .unwrap();
        let caller = Caller::owner("u");
        let listing = source.list(&caller).await;
        let (server, listed) = {
            let state = source.servers[0].state.lock().await;
            (source.servers[0].clone(), state.listed.clone().unwrap())
        };
        assert_eq!(listing.tools.len(), 3);
        // As if the server had dropped a tool since it was listed.
        let gone = McpTool {
            spec: listing.tools[0].spec().clone(),
            mcp_name: "gone".into(),
            server: server.clone(),
            listed: listed.clone(),
        };
        let error = gone
            .call(&caller, &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(
            error.starts_with("the MCP server local refused the call"),
            "{error}"
        );
        // A refusal is the server answering: the server and the caller's session are kept.
        assert!(listed.broken().is_none());
        assert!(server.sessions.lock().unwrap().contains_key("u"));
    }

    #[test]
    fn a_cut_text_fits_the_bound_with_its_note() {
        let text = with_cut_note("é".repeat(1_000), 300, 70_000);
        assert!(text.len() <= 300, "{}", text.len());
        assert!(text.starts_with("éé"));
        assert!(
            text.ends_with("the first 42 bytes of its text are shown]")
                || text.contains("[cut: the MCP server's answer was longer than 70000 bytes"),
            "{text}"
        );
        let shown: usize = text
            .rsplit("the first ")
            .next()
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(text.find('\n').unwrap(), shown);
    }

    #[test]
    fn an_owner_id_is_a_header_value_as_it_is_where_it_can_be() {
        assert_eq!(
            user_value("jwt:https://issuer/:sub-1").to_str().unwrap(),
            "jwt:https://issuer/:sub-1"
        );
        assert_eq!(
            user_value("local:ana maría%").to_str().unwrap(),
            "local:ana%20mar%C3%ADa%25"
        );
        assert!(user_value("x").is_sensitive());
    }
}
