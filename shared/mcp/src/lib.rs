//! MCP servers as tools of the chat core ([`chat_core::ToolSource`]), through rmcp (the official Rust MCP SDK) as
//! the client over streamable HTTP.
//!
//! - `MCP_SERVERS` ([`McpServers::from_json`]) names the servers: `[{name, url, headers?, allow?}]`.
//! - Nothing connects at cold start: the first turn's [`ToolSource::list`] connects to every server at once and
//!   lists its tools, each server within the listing timeout: the `list_timeout` given, at most
//!   [`LIST_TIMEOUT_CAP`] (listing happens before the model is called). What a server listed is kept for the
//!   turns after.
//! - A server that could not be listed, or whose connection failed under a call, offers nothing and says so in
//!   one line of [`ToolListing::unavailable`]; it never fails the turn. That failure is the answer of every turn
//!   for [`RETRY_AFTER`] ([`McpServers::with_retry_after`]), without a wait; the first turn after it lists the
//!   server again.
//! - Its tools are offered under their own names, made to fit Bedrock's `[a-zA-Z0-9_-]{1,64}`; a name two servers
//!   share becomes `{server}_{tool}` for each. `allow` keeps only the tools it names.
//! - A call sends the model's input as the tool's arguments; the result's text is what the model reads (other
//!   content described in a few words), and `isError: true` is an error result.
//! - Header values are secrets: sent on every request, marked sensitive, redacted from `Debug`, and kept out of
//!   every line, error and thought this crate makes. So are the URL's user-info and query: the URL is shown as
//!   `scheme://host:port/path` ([`ServerConfig::shown_url`]).
//!
//! The calls run as the backend, not as the user: an MCP server is given no caller identity.

mod config;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chat_core::{Caller, Tool, ToolFuture, ToolListing, ToolOutput, ToolSource, ToolSpec};
use futures_util::future::join_all;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tokio::sync::Mutex;
use tracing::Instrument;

pub use config::ServerConfig;

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

/// The MCP servers of `MCP_SERVERS`, as a source of tools.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    list_timeout: Duration,
    retry_after: Duration,
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
            .finish()
    }
}

/// One server: its configuration and its connection, once listed.
struct Server {
    config: ServerConfig,
    /// The header values, kept out of what this crate says.
    secrets: Arc<[String]>,
    /// Held while connecting and listing, so that turns arriving together share one attempt.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    connection: Option<Arc<Connection>>,
    /// The last failure: when it happened, and why (said in the unavailable line).
    failed: Option<Failure>,
}

/// When a listing failed or a connection was lost, and why (redacted).
type Failure = (Instant, String);

/// A live session with a server and the tools it listed (`allow` applied).
struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    tools: Vec<rmcp::model::Tool>,
    /// Set when a call failed for want of the connection: when, and why. The server's failure from then on.
    broken: std::sync::Mutex<Option<Failure>>,
}

impl Connection {
    fn broken(&self) -> Option<Failure> {
        self.broken
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl McpServers {
    /// The servers `MCP_SERVERS` names (empty, or `null`: none), each listed within `list_timeout` (at most
    /// [`LIST_TIMEOUT_CAP`]). The error names what is wrong (never a header value, nor the URL's user-info or
    /// query).
    pub fn from_json(json: &str, list_timeout: Duration) -> Result<McpServers, String> {
        let servers = config::parse(json)?;
        Ok(McpServers::new(servers, list_timeout))
    }

    /// The servers of `configs`, each listed within `list_timeout` (at most [`LIST_TIMEOUT_CAP`]), a failure kept
    /// for [`RETRY_AFTER`].
    pub fn new(configs: Vec<ServerConfig>, list_timeout: Duration) -> McpServers {
        McpServers {
            servers: configs
                .into_iter()
                .map(|config| {
                    Arc::new(Server {
                        secrets: config.secrets().into(),
                        config,
                        state: Mutex::new(State::default()),
                    })
                })
                .collect(),
            list_timeout: list_timeout.min(LIST_TIMEOUT_CAP),
            retry_after: RETRY_AFTER,
        }
    }

    /// How long a server's failure is every turn's answer before a turn lists it again ([`RETRY_AFTER`] unless
    /// set).
    pub fn with_retry_after(mut self, retry_after: Duration) -> McpServers {
        self.retry_after = retry_after;
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

    async fn list_all(&self) -> ToolListing {
        let asked = Instant::now();
        let listed = join_all(
            self.servers
                .iter()
                .map(|server| server.listing(asked, self.list_timeout, self.retry_after)),
        )
        .await;
        let mut unavailable = Vec::new();
        let mut up = Vec::new();
        for (server, outcome) in self.servers.iter().zip(listed) {
            match outcome {
                Ok(connection) => up.push((server.clone(), connection)),
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
}

impl ToolSource for McpServers {
    fn list(&self) -> Pin<Box<dyn Future<Output = ToolListing> + Send + '_>> {
        Box::pin(self.list_all())
    }
}

impl Server {
    /// The server's connection and tools: those it listed before, unless its connection broke since; otherwise it
    /// is connected and listed now, within `timeout`. A failure (a listing's, or the connection's under a call)
    /// less than `retry_after` old is this turn's answer, without a wait; so is the failure of an attempt that
    /// ended after `asked` (another turn's, while this one waited for it), rather than a second wait.
    async fn listing(
        &self,
        asked: Instant,
        timeout: Duration,
        retry_after: Duration,
    ) -> Result<Arc<Connection>, String> {
        let mut state = self.state.lock().await;
        if let Some(connection) = &state.connection {
            match connection.broken() {
                None => return Ok(connection.clone()),
                Some(failure) => {
                    // Dropping the service ends its session.
                    state.connection = None;
                    state.failed = Some(failure);
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
        let outcome = match tokio::time::timeout(timeout, self.connect()).await {
            Ok(Ok(connection)) => Ok(Arc::new(connection)),
            Ok(Err(reason)) => Err(reason),
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        };
        match outcome {
            Ok(connection) => {
                tracing::info!(
                    mcp_server = %self.config.name,
                    tools = connection.tools.len(),
                    duration_ms = started.elapsed().as_millis() as u64,
                    "listed the MCP server's tools"
                );
                state.connection = Some(connection.clone());
                state.failed = None;
                Ok(connection)
            }
            Err(reason) => {
                let reason = redact(&reason, &self.secrets);
                tracing::warn!(
                    mcp_server = %self.config.name,
                    reason = %reason,
                    duration_ms = started.elapsed().as_millis() as u64,
                    "the MCP server could not be listed: its tools are left out of this turn"
                );
                state.failed = Some((Instant::now(), reason.clone()));
                Err(reason)
            }
        }
    }

    /// Connects (the MCP handshake) and lists the tools, keeping those `allow` names.
    async fn connect(&self) -> Result<Connection, String> {
        let headers: HashMap<_, _> = self.config.headers.iter().cloned().collect();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.config.url.as_str())
                .custom_headers(headers),
        );
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("chat-mcp", env!("CARGO_PKG_VERSION")),
        );
        // The session outlives this turn: its tasks (and rmcp's `serve_inner` span) belong to a span of their own,
        // not to the turn's request span, whose requestId and trace every line of the session would carry. (At
        // INFO: a span filtered out would leave them in the turn's.)
        let session =
            tracing::info_span!(parent: None, "mcp.session", mcp_server = %self.config.name);
        let service = client
            .serve(transport)
            .instrument(session)
            .await
            .map_err(|e| describe(&e))?;
        let mut tools = service.list_all_tools().await.map_err(|e| describe(&e))?;
        if let Some(allow) = &self.config.allow {
            tools.retain(|tool| allow.iter().any(|name| *name == tool.name));
        }
        Ok(Connection {
            service,
            tools,
            broken: std::sync::Mutex::new(None),
        })
    }
}

/// The tools of the servers that are up, under the names the model is offered: each tool's own name made to fit
/// Bedrock's; where two servers offer the same name, `{server}_{tool}` for each. A tool whose name cannot be made
/// to fit, or comes out the same as one named before it, is left out (and logged).
fn name_tools(up: &[(Arc<Server>, Arc<Connection>)]) -> Vec<Arc<dyn Tool>> {
    let mut servers_of: HashMap<String, usize> = HashMap::new();
    for (_, connection) in up {
        let mut seen = std::collections::HashSet::new();
        for tool in &connection.tools {
            if let Some(name) = bedrock_name(&tool.name)
                && seen.insert(name.clone())
            {
                *servers_of.entry(name).or_default() += 1;
            }
        }
    }
    let mut taken = std::collections::HashSet::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (server, connection) in up {
        for tool in &connection.tools {
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
                    name,
                    description: description(tool, &server.config.name),
                    input_schema: input_schema(tool),
                },
                mcp_name: tool.name.to_string(),
                server: server.clone(),
                connection: connection.clone(),
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
    connection: Arc<Connection>,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, _caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut params = CallToolRequestParams::new(self.mcp_name.clone());
            match input {
                Value::Object(arguments) => params = params.with_arguments(arguments.clone()),
                Value::Null => {}
                _ => return Err("the tool's input must be a JSON object".to_string()),
            }
            let server = &self.server.config.name;
            match self.connection.service.call_tool(params).await {
                Ok(result) => {
                    let text = redact(&result_text(&result), &self.server.secrets);
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
                        // out; the first after lists it again.
                        let mut broken = self
                            .connection
                            .broken
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner());
                        broken.get_or_insert_with(|| (Instant::now(), reason.clone()));
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
        )
        .unwrap();
        let listing = source.list().await;
        let (server, connection) = {
            let state = source.servers[0].state.lock().await;
            (source.servers[0].clone(), state.connection.clone().unwrap())
        };
        assert_eq!(listing.tools.len(), 3);
        // As if the server had dropped a tool since it was listed.
        let gone = McpTool {
            spec: listing.tools[0].spec().clone(),
            mcp_name: "gone".into(),
            server,
            connection: connection.clone(),
        };
        let error = gone
            .call(&Caller::owner("u"), &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(
            error.starts_with("the MCP server local refused the call"),
            "{error}"
        );
        // A refusal is the server answering: its connection is kept.
        assert!(connection.broken().is_none());
    }
}
