//! `GET /documents/events`: the statuses of the caller's documents pushed to the page while the knowledge base works
//! on them, as server-sent events, on the streaming function (the history function's answers are buffered on
//! Lambda, so they cannot push). The rules are the core's ([`chat_core::DocumentWatch`]): the same reads, refreshes
//! and 404s as `GET /documents/{id}`; this module only times the polls and writes the events.
//!
//! First one `document` event per document watched (those `?ids=a,b` names, else the caller's unsettled ones), with
//! the same JSON as `GET /documents/{id}`; then, polling the knowledge base every [`POLL_EVERY`], a `document` event
//! whenever one's status or reason changes, and a `deleted` event (`{"id": …}`) when one is deleted meanwhile. It
//! ends with an `end` event (`{"settled": true}`) once every watched document is `indexed` or `failed`, or
//! (`{"settled": false}`: connect again to go on) after [`WATCH_AT_MOST`] or before the function's own deadline. A
//! comment line keeps a quiet connection open every [`KEEP_ALIVE_EVERY`]. A fault once the events have begun is an
//! `error` event (`{"error": …}`), then `end`; before, an ordinary JSON error (an unknown or another user's id is a
//! 404, a malformed `ids` a 400, documents off a 404).

use std::time::Duration;

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use bytes::Bytes;
use chat_core::{ChatModel, DocumentChange, DocumentRecord, DocumentWatch, SessionStore};
use chat_edge::{ApiError, Deadline, Identified, Query, error_body};
use chat_protocol::documents::view;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use super::streamed::{AppState, event_stream, line_body};
use crate::history::documents::api_error;

/// How often the knowledge base is asked where the watched documents stand.
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// The longest one connection watches; the client connects again to go on.
pub const WATCH_AT_MOST: Duration = Duration::from_secs(5 * 60);
/// The longest a connection stays quiet: then a comment line keeps it (and every proxy on the way) open.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);
/// How long the last events (`end`, an error) may still take to go out once the watch is over.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// The query of `GET /documents/events`.
#[derive(Debug, Default, Deserialize)]
struct EventParams {
    /// Document ids, comma-separated.
    ids: Option<String>,
}

/// The `end` event's data.
#[derive(Serialize)]
struct End {
    /// Every watched document is settled (`false`: the watch stopped for time; connect again to go on).
    settled: bool,
}

/// The `deleted` event's data.
#[derive(Serialize)]
struct Deleted<'a> {
    id: &'a str,
}

/// One server-sent event named `name` carrying `data` as JSON.
fn event<T: Serialize>(name: &str, data: &T) -> Bytes {
    let json = serde_json::to_string(data).expect("events always serialize");
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

fn document_event(record: &DocumentRecord) -> Bytes {
    event("document", &view(record, false))
}

pub(super) async fn events<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    Identified(caller): Identified,
    Deadline(deadline): Deadline,
    uri: Uri,
) -> Result<Response, ApiError> {
    let documents = app
        .documents
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("/documents (documents are off here)".into()))?;
    let Query(params) = Query::<EventParams>::from_uri(&uri)?;
    // How many may be named, once each, is the core's to say (`Documents::watch`).
    let ids: Option<Vec<String>> = params.ids.as_deref().map(|ids| {
        ids.split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .collect()
    });
    // Where each stands now is read before the status is sent: a fault here is an ordinary error.
    let (now, watch) = documents
        .watch(&caller, ids.as_deref())
        .await
        .map_err(api_error)?;
    let watch_ends = Instant::now() + WATCH_AT_MOST;
    let ends_at = deadline.map_or(watch_ends, |d| d.min(watch_ends));
    let (tx, body) = line_body();
    tokio::spawn(write_events(now, watch, tx, ends_at).instrument(tracing::Span::current()));
    Ok(event_stream(body))
}

/// Writes the first events, then polls until every watched document is settled, `ends_at` comes, or the client goes
/// away (a write fails); the stream itself never fails.
async fn write_events(
    now: Vec<DocumentRecord>,
    mut watch: DocumentWatch,
    tx: mpsc::Sender<Bytes>,
    ends_at: Instant,
) {
    // A client that stays connected but reads nothing holds a send no longer than the watch lasts; the last words
    // (`end`, an error) may take a moment past it, within the room the deadline leaves.
    let send = |line: Bytes, by: Instant| {
        let tx = tx.clone();
        async move { matches!(tokio::time::timeout_at(by, tx.send(line)).await, Ok(Ok(()))) }
    };
    let last_words = || Instant::now().max(ends_at) + LAST_WORDS;
    for record in &now {
        if !send(document_event(record), ends_at).await {
            return;
        }
    }
    let mut last_sent = Instant::now();
    loop {
        if watch.is_settled() {
            send(event("end", &End { settled: true }), last_words()).await;
            return;
        }
        let next = Instant::now() + POLL_EVERY;
        if next >= ends_at {
            tracing::debug!(
                following = watch.following(),
                "the documents' watch ends for time"
            );
            send(event("end", &End { settled: false }), last_words()).await;
            return;
        }
        tokio::time::sleep_until(next).await;
        // A poll that would outlast the watch is given up: the client connects again to go on.
        let changes = match tokio::time::timeout_at(ends_at, watch.poll()).await {
            Ok(Ok(changes)) => changes,
            Ok(Err(e)) => {
                let err = api_error(e);
                send(event("error", &error_body(&err)), last_words()).await;
                send(event("end", &End { settled: false }), last_words()).await;
                return;
            }
            Err(_) => {
                send(event("end", &End { settled: false }), last_words()).await;
                return;
            }
        };
        let mut lines: Vec<Bytes> = changes
            .iter()
            .map(|change| match change {
                DocumentChange::Now(record) => document_event(record),
                DocumentChange::Gone(id) => event("deleted", &Deleted { id }),
            })
            .collect();
        if lines.is_empty() && last_sent.elapsed() >= KEEP_ALIVE_EVERY {
            lines.push(Bytes::from_static(b": keep-alive\n\n"));
        }
        for line in lines {
            if !send(line, ends_at).await {
                return;
            }
            last_sent = Instant::now();
        }
    }
}
