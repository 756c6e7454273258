//! The JSON of a document, as `GET /documents`, `GET /documents/{id}`, an upload's answer and the `document` events
//! of `GET /documents/events` all give it: one view of the core's [`DocumentRecord`], kept with the other wire types;
//! and those events as an encoder ([`StatusEvents`]).

use chat_core::{DocumentChange, DocumentRecord, rfc3339_millis};
use serde::Serialize;
use time::OffsetDateTime;

use crate::ErrorBody;
use crate::encode::{Encoder, Fault, sse_named};

/// A document as the API answers it.
#[derive(Serialize)]
pub struct DocumentView<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    bytes: u64,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// Who may find it in search: `oids` and `groups`, as its metadata says.
    access: AccessView<'a>,
    created: String,
    updated: String,
    /// Whose it is (in everyone's list, for administrators).
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    /// The SHA-256 of its bytes, in hex (absent on documents stored before digests were kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a str>,
    /// Its path in the folder the operator's bulk load read (bulk-loaded documents only).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
}

/// Who may find a document in search, as its view gives it.
#[derive(Serialize)]
pub struct AccessView<'a> {
    oids: &'a [String],
    groups: &'a [String],
}

fn time_of(unix: i64) -> String {
    OffsetDateTime::from_unix_timestamp(unix)
        .map(rfc3339_millis)
        .unwrap_or_default()
}

/// A document as the API answers it (`with_owner`: in everyone's list).
pub fn view(d: &DocumentRecord, with_owner: bool) -> DocumentView<'_> {
    DocumentView {
        id: &d.id,
        name: &d.name,
        kind: d.kind.as_str(),
        bytes: d.bytes,
        status: d.status.as_str(),
        reason: d.reason.as_deref(),
        access: AccessView {
            oids: &d.access.oids,
            groups: &d.access.groups,
        },
        created: time_of(d.created),
        updated: time_of(d.updated),
        owner: with_owner.then_some(d.owner.as_str()),
        digest: d.digest.as_deref(),
        source: d.source.as_deref(),
    }
}

#[cfg(test)]
mod tests {
    use chat_core::{AccessList, DocumentStatus, DocumentType};
    use serde_json::json;

    use super::*;

    fn record() -> DocumentRecord {
        DocumentRecord {
            id: "0123456789abcdef0123456789abcdef".into(),
            owner: "jwt:alice".into(),
            name: "Plan.md".into(),
            kind: DocumentType::Markdown,
            bytes: 6,
            access: AccessList {
                oids: vec!["alice".into()],
                groups: vec![],
            },
            status: DocumentStatus::Failed,
            reason: Some("not parsed".into()),
            created: 0,
            updated: 1,
            digest: None,
            source: Some("public/Plan.md".into()),
        }
    }

    #[test]
    fn a_document_reads_as_the_api_answers_it_its_owner_only_in_everyone_s_list() {
        let d = record();
        assert_eq!(
            serde_json::to_value(view(&d, false)).unwrap(),
            json!({
                "id": "0123456789abcdef0123456789abcdef",
                "name": "Plan.md",
                "type": "markdown",
                "bytes": 6,
                "status": "failed",
                "reason": "not parsed",
                "access": {"oids": ["alice"], "groups": []},
                "created": "1970-01-01T00:00:00.000Z",
                "updated": "1970-01-01T00:00:01.000Z",
                "source": "public/Plan.md",
            })
        );
        assert_eq!(
            serde_json::to_value(view(&d, true)).unwrap()["owner"],
            "jwt:alice"
        );
    }
}

/// What a documents' watch tells after where the documents stood at first (`GET /documents/events`).
pub enum WatchEvent {
    /// A document's status or reason changed, or it was deleted.
    Changed(Box<DocumentChange>),
    /// Nothing changed for a while: a comment keeps the connection (and every proxy on the way) open.
    KeepAlive,
}

/// A documents' watch as server-sent events, for the one writer: first a `document` event per document watched
/// (the same JSON as `GET /documents/{id}`), then a `document` event whenever one's status or reason changes and a
/// `deleted` event (`{"id": …}`) when one is deleted, comment lines to keep a quiet connection open, and `end`
/// (`{"settled": true}` once every one is settled; `false`: connect again to go on); a fault an `error` event
/// (`{"error": …}`), then `end`.
pub struct StatusEvents;

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

fn document_event(record: &DocumentRecord) -> Vec<u8> {
    sse_named("document", &view(record, false))
}

impl Encoder for StatusEvents {
    /// Where each watched document stands at first.
    type Opening = Vec<DocumentRecord>;
    type Event = WatchEvent;
    /// Whether every watched document is settled.
    type Done = bool;

    fn opening(&mut self, now: &Vec<DocumentRecord>) -> Vec<u8> {
        now.iter().flat_map(document_event).collect()
    }

    fn event(&mut self, event: WatchEvent) -> Vec<u8> {
        match event {
            WatchEvent::Changed(change) => match *change {
                DocumentChange::Now(record) => document_event(&record),
                DocumentChange::Gone(id) => sse_named("deleted", &Deleted { id: &id }),
            },
            WatchEvent::KeepAlive => b": keep-alive\n\n".to_vec(),
        }
    }

    fn done(&mut self, settled: bool) -> Vec<u8> {
        sse_named("end", &End { settled })
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        let mut last = sse_named("error", &ErrorBody::new(fault.message.clone()));
        last.extend(self.done(false));
        last
    }
}
