//! The one HTTP client (reqwest) of a process's JWKS fetches, OTLP exports and MCP servers, so that the system's
//! roots are loaded once ([`chat_aws::https::system_roots`], the AWS SDK's loader) rather than once by each client
//! built, and their connections share one pool. It is built here, in the composition root, where both the AWS
//! adapters and the MCP servers' rules are known; the runtime is handed it for the OTLP exporter
//! (`chat_runtime::init_logging`).
//!
//! Its rules are the strictest any of them needs, the MCP servers' ([`chat_mcp::client_builder`]): a connection is
//! made within [`chat_mcp::LIST_TIMEOUT_CAP`], and a redirect is followed only within its origin and when it keeps
//! the method and body (307, 308), so that no header (an MCP server's or the collector's secret) goes to another
//! host; a JWKS or collector that answers with a redirect elsewhere is an error, not followed. Each use bounds its
//! own time: the JWKS fetch, each export (`OTEL_EXPORTER_OTLP_TIMEOUT`), each listing and tool call. The MCP
//! servers' connections are not reused (their requests say `Connection: close`, as rmcp keeps none idle).

use std::sync::OnceLock;

static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();

/// The process's client, built on first need (a function that fetches no JWKS, exports no span and calls no MCP
/// server builds none): rustls with the system's roots as the AWS SDK loads them.
pub fn http_client() -> reqwest::Client {
    CLIENT.get_or_init(build).clone()
}

fn build() -> reqwest::Client {
    let roots = chat_aws::https::system_roots()
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok());
    chat_mcp::client_builder()
        .tls_certs_only(roots)
        .build()
        .or_else(|e| {
            // A root rustls cannot read as a trust anchor fails the whole set: the platform's own verifier then
            // loads the same roots again, skipping it, as the SDK does.
            tracing::warn!(error = %e, "the system's roots as loaded: unusable; reqwest loads them itself");
            chat_mcp::client_builder().build()
        })
        // Only a TLS backend that cannot start fails here (rmcp's own client panics then too).
        .unwrap_or_default()
}
