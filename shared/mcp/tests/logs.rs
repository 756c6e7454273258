//! What a turn's MCP listing and calls write to the log: no header value at any level, and rmcp's session (which
//! outlives the turn) not inside the turn's span.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chat_core::{Caller, ToolSource};
use chat_mcp::McpServers;
use chat_testing::LogLines;
use serde_json::json;
use tracing::Instrument;
use tracing::span::{Attributes, Id};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const TOKEN: &str = "tok-l0gged-never";

/// A span's name and the names of the spans it was opened in.
type Opened = (String, Vec<String>);

/// Each span opened.
#[derive(Clone, Default)]
struct Parents(Arc<Mutex<Vec<Opened>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Parents {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let ancestors = ctx
            .span(id)
            .map(|span| span.scope().skip(1).map(|s| s.name().to_string()).collect())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_string(), ancestors));
    }
}

#[tokio::test]
async fn no_header_value_is_logged_and_the_session_is_not_the_turns() {
    let lines = LogLines::default();
    let parents = Parents::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::registry()
        .with(LevelFilter::TRACE)
        .with(parents.clone())
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL),
        );
    let _guard = tracing::subscriber::set_default(subscriber);

    let (addr, _server) = local_mcp::start_with(
        ([127, 0, 0, 1], 0).into(),
        local_mcp::Options {
            bearer_token: Some(TOKEN.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let right = McpServers::from_json(
        &json!([{"name": "guarded", "url": local_mcp::url(addr), "headers": {"Authorization": format!("Bearer {TOKEN}")}}])
            .to_string(),
        Duration::from_secs(10),
        chat_mcp::http_client(),
    )
    .unwrap();
    let wrong = McpServers::from_json(
        &json!([{"name": "guarded", "url": local_mcp::url(addr), "headers": {"Authorization": "Bearer wrong-s3cret"}}])
            .to_string(),
        Duration::from_secs(10),
        chat_mcp::http_client(),
    )
    .unwrap();
    let turn = tracing::info_span!("turn");
    async {
        let listing = right.list(&Caller::owner("u")).await;
        assert_eq!(listing.tools.len(), 3, "{:?}", listing.unavailable);
        let add = listing
            .tools
            .iter()
            .find(|t| t.spec().name == "add")
            .unwrap();
        assert_eq!(
            add.call(&Caller::owner("u"), &json!({"a": 2, "b": 3}))
                .await
                .unwrap()
                .text,
            "5"
        );
        let refused = wrong.list(&Caller::owner("u")).await;
        assert_eq!(refused.unavailable.len(), 1);
    }
    .instrument(turn)
    .await;
    drop(right);
    drop(wrong);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let logged = lines.text();
    // The log holds the run (the listing line is there), and no value of a header.
    assert!(logged.contains("listed the MCP server's tools"), "{logged}");
    assert!(logged.contains("could not be listed"), "{logged}");
    assert!(!logged.contains(TOKEN), "{logged}");
    assert!(!logged.contains("wrong-s3cret"), "{logged}");

    let parents = parents.0.lock().unwrap();
    let sessions: Vec<_> = parents
        .iter()
        .filter(|(name, _)| name == "serve_inner")
        .collect();
    assert!(
        !sessions.is_empty(),
        "rmcp opens a serve_inner span per session: {parents:?}"
    );
    for (_, ancestors) in sessions {
        assert!(!ancestors.iter().any(|a| a == "turn"), "{ancestors:?}");
    }
}
