//! The JSON of a document, as `GET /documents`, `GET /documents/{id}`, an upload's answer and the `document` events
//! of `GET /documents/events` all give it: one view of the core's [`DocumentRecord`], kept with the other wire types.

use chat_core::{DocumentRecord, rfc3339_millis};
use serde::Serialize;
use time::OffsetDateTime;

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
