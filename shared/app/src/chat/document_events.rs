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
//! 404, a malformed `ids` a 400, documents off a 404). A caller holds at most `QUOTA_OPEN_WATCHES` watches open at
//! once (3 unless set): one more is a 429 with `Retry-After`, and each gives its place back as it ends.

use std::collections::VecDeque;
use std::time::Duration;

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use chat_core::{ChatModel, DocumentWatch, SessionStore, TurnSpent};
use chat_edge::{ApiError, Deadline, Identified, Query};
use chat_protocol::documents::{StatusEvents, WatchEvent};
use serde::Deserialize;
use tokio::time::Instant;

use super::ChatState;
use super::write::{Answering, stream};

/// How often the knowledge base is asked where the watched documents stand.
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// The longest one connection watches; the client connects again to go on.
pub const WATCH_AT_MOST: Duration = Duration::from_secs(5 * 60);
/// The longest a connection stays quiet: then a comment line keeps it (and every proxy on the way) open.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);
/// How long the last events (`end`, an error) may still take to go out once the watch is over.
const LAST_WORDS: Duration = Duration::from_secs(2);
/// The longest a watch holds its place among its caller's open ones (`QUOTA_OPEN_WATCHES`): it gives it back when it
/// ends, and a watch whose process died frees it after this.
pub(crate) const PLACE_HELD_FOR: Duration = Duration::from_secs(WATCH_AT_MOST.as_secs() + 60);

/// The query of `GET /documents/events`.
#[derive(Debug, Default, Deserialize)]
struct EventParams {
    /// Document ids, comma-separated.
    ids: Option<String>,
}

pub(super) async fn events<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): State<std::sync::Arc<ChatState<M, St>>>,
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
        .map_err(ApiError::from)?;
    let watch_ends = Instant::now() + WATCH_AT_MOST;
    let ends_at = deadline.map_or(watch_ends, |d| d.min(watch_ends));
    let answer = WatchAnswer {
        watch,
        ends_at,
        last_sent: Instant::now(),
        ready: VecDeque::new(),
        settled: false,
    };
    Ok(stream(
        answer,
        StatusEvents,
        &now,
        None,
        tracing::Span::current(),
    ))
}

/// A watch in progress, as the writer drives it: it polls until every watched document is settled or `ends_at`
/// comes. A client that stays connected but reads nothing holds a write no longer than the watch lasts; the last
/// words (`end`, an error) may take a moment past it, within the room the deadline leaves.
struct WatchAnswer {
    watch: DocumentWatch,
    ends_at: Instant,
    /// When the last event went out (or the watch began).
    last_sent: Instant,
    ready: VecDeque<WatchEvent>,
    /// Whether every watched document is settled (else the watch ended for time).
    settled: bool,
}

impl Answering for WatchAnswer {
    type Event = WatchEvent;
    /// Whether every watched document is settled.
    type Done = bool;

    async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                self.last_sent = Instant::now();
                return Ok(Some(event));
            }
            if self.watch.is_settled() {
                self.settled = true;
                return Ok(None);
            }
            let next = Instant::now() + POLL_EVERY;
            if next >= self.ends_at {
                tracing::debug!(
                    following = self.watch.following(),
                    "the documents' watch ends for time"
                );
                return Ok(None);
            }
            tokio::time::sleep_until(next).await;
            // A poll that would outlast the watch is given up: the client connects again to go on.
            let changes = match tokio::time::timeout_at(self.ends_at, self.watch.poll()).await {
                Ok(changes) => changes.map_err(ApiError::from)?,
                Err(_) => return Ok(None),
            };
            self.ready.extend(
                changes
                    .into_iter()
                    .map(|c| WatchEvent::Changed(Box::new(c))),
            );
            if self.ready.is_empty() && self.last_sent.elapsed() >= KEEP_ALIVE_EVERY {
                self.ready.push_back(WatchEvent::KeepAlive);
            }
        }
    }

    fn is_answer(_: &WatchEvent) -> bool {
        false
    }

    async fn settle(&mut self) -> Result<(bool, Option<TurnSpent>), ApiError> {
        self.watch.end().await;
        Ok((self.settled, None))
    }

    async fn abandon(&mut self) {
        self.watch.end().await;
    }

    fn send_by(&self, last: bool) -> Option<Instant> {
        Some(if last {
            Instant::now().max(self.ends_at) + LAST_WORDS
        } else {
            self.ends_at
        })
    }
}
