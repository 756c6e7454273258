//! The operator's bulk load: a folder's files loaded as documents under the access lists the operator names,
//! each compared with its record from the last load (by digest and access list) so that only what changed is
//! stored and ingested again, and what is gone from the folder removed.

use std::collections::HashMap;

use bytes::Bytes;

use super::Documents;
use super::access::names;
use super::types::{
    AccessList, DocumentError, DocumentRecord, DocumentStatus, DocumentType, document_digest,
    invalid, new_document_id, now,
};
use super::upload::check_file;

/// The most bytes one bulk-loaded file may hold: 50 MB, what a Bedrock knowledge base ingests of one file (its own
/// quota). The upload route's bound (`MAX_UPLOADED_DOCUMENT_BYTES`) is a function URL's request's; the operator's
/// command sends its files straight to S3, so the knowledge base's is the one that holds.
pub const MAX_LOADED_DOCUMENT_BYTES: usize = 50 * 1000 * 1000;
/// The longest source path kept, in bytes.
pub const MAX_SOURCE_BYTES: usize = 1024;

/// Who may find a bulk-loaded document, as the operator says (a manifest's rule, or the folder's layout).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadAccess {
    pub groups: Vec<String>,
    pub oids: Vec<String>,
    /// Everyone (the everyone group).
    pub everyone: bool,
}

/// What a bulk load did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoadOutcome {
    /// A new document: stored and ingested.
    Added,
    /// Its bytes or its access list changed: stored again under the same document and ingested again.
    Updated,
    /// The same bytes and access list as its record's: nothing was called.
    Unchanged,
    /// Gone from the folder: removed from the knowledge base, the bucket and the table.
    Deleted,
}

impl LoadOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Deleted => "deleted",
        }
    }
}

/// Whether `source` is a usable source path: relative, `/`-separated, no empty, `.` or `..` segment, no control
/// characters or `\`, at most [`MAX_SOURCE_BYTES`].
pub fn is_source_path(source: &str) -> bool {
    !source.is_empty()
        && source.len() <= MAX_SOURCE_BYTES
        && !source.chars().any(|c| c.is_control() || c == '\\')
        && source
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Whether two access lists name the same oids and groups, in any order.
fn same_access(a: &AccessList, b: &AccessList) -> bool {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    sorted(&a.oids) == sorted(&b.oids) && sorted(&a.groups) == sorted(&b.groups)
}

impl Documents {
    /// The access list of what the operator loads: the groups, oids and everyone they name, checked as an
    /// administrator's are. It must name someone: a file nobody may find is refused, never made public.
    pub fn load_access(&self, access: &LoadAccess) -> Result<AccessList, DocumentError> {
        let mut groups = names("groups", &access.groups)?;
        if access.everyone && !groups.contains(&self.settings.everyone_group) {
            groups.push(self.settings.everyone_group.clone());
        }
        let oids = names("oids", &access.oids)?;
        if groups.is_empty() && oids.is_empty() {
            return Err(invalid(
                "access",
                "name the groups, the oids or everyone who may find it",
            ));
        }
        Ok(AccessList { oids, groups })
    }

    /// `owner`'s bulk-loaded documents by their source path: every page of their records, read once (those
    /// without a source, uploads, are left out), the statuses of those still unsettled brought up to date (so that
    /// one the knowledge base has failed since is loaded again).
    pub async fn loaded(
        &self,
        owner: &str,
    ) -> Result<HashMap<String, DocumentRecord>, DocumentError> {
        let mut by_source = HashMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .bounded(
                    "the records",
                    self.store.list(Some(owner), 1000, cursor.as_deref()),
                )
                .await?;
            let mut records: Vec<DocumentRecord> = page
                .items
                .into_iter()
                .filter(|record| record.source.is_some())
                .collect();
            self.refresh(&mut records).await?;
            for record in records {
                if let Some(source) = record.source.clone() {
                    by_source.insert(source, record);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(by_source),
            }
        }
    }

    /// Loads one file for `owner` (the operator's owner id) from `source` (its path in the folder loaded) with
    /// `access`, given its record from the last load (`existing`, from [`Documents::loaded`]):
    ///
    /// - the same bytes (digest) and access list, and not `failed`: [`LoadOutcome::Unchanged`], and nothing is
    ///   called (a document the knowledge base failed is stored and ingested again, as an edited one is);
    /// - other bytes or another access list: its bytes and metadata are put again under the same document and
    ///   ingested again (status back to `pending`): [`LoadOutcome::Updated`];
    /// - no record: a new document, as an upload makes one: [`LoadOutcome::Added`].
    ///
    /// The file is checked as an upload's are, but bounded by [`MAX_LOADED_DOCUMENT_BYTES`]. An update whose
    /// bytes or ingestion fail has the document removed (its old version too, whose access list may be one the
    /// operator no longer wants), so nothing is left half-visible; the next load adds it again.
    pub async fn load(
        &self,
        owner: &str,
        source: &str,
        bytes: Bytes,
        access: &AccessList,
        existing: Option<&DocumentRecord>,
    ) -> Result<(LoadOutcome, DocumentRecord), DocumentError> {
        if !is_source_path(source) {
            return Err(invalid(
                "source",
                format!("{source:?} is not a relative path of 1 to {MAX_SOURCE_BYTES} bytes"),
            ));
        }
        if access.oids.is_empty() && access.groups.is_empty() {
            return Err(invalid("access", "a loaded document needs an access list"));
        }
        let (name, kind) = check_file(source, &bytes, MAX_LOADED_DOCUMENT_BYTES)?;
        let digest = document_digest(&bytes);
        let now = now();
        let old = match existing {
            Some(old)
                if old.digest.as_deref() == Some(digest.as_str())
                    && same_access(&old.access, access)
                    && old.status != DocumentStatus::Failed =>
            {
                return Ok((LoadOutcome::Unchanged, old.clone()));
            }
            // The same key: stored again in place.
            Some(old) if old.name == name => old,
            // Another name (the rules that make names changed): the old one goes, a new one comes.
            Some(old) => {
                self.remove(old).await?;
                let record = self
                    .put_new(
                        self.loaded_record(owner, source, name, kind, &bytes, access, digest, now),
                        bytes,
                    )
                    .await?;
                return Ok((LoadOutcome::Updated, record));
            }
            None => {
                let record = self
                    .put_new(
                        self.loaded_record(owner, source, name, kind, &bytes, access, digest, now),
                        bytes,
                    )
                    .await?;
                tracing::info!(document = %record.id, owner, source, "document loaded");
                return Ok((LoadOutcome::Added, record));
            }
        };
        let mut record = DocumentRecord {
            kind,
            bytes: bytes.len() as u64,
            access: access.clone(),
            status: DocumentStatus::Pending,
            reason: None,
            // Later than the last: each ingestion of a document is its own request (its client token).
            updated: now.max(old.updated + 1),
            digest: Some(digest),
            ..old.clone()
        };
        let state = self.put_and_ingest(&record, bytes).await?;
        record.status = state.status;
        record.reason = state.reason;
        self.bounded("the record", self.store.put(&record)).await?;
        tracing::info!(document = %record.id, owner, source, "document loaded again");
        Ok((LoadOutcome::Updated, record))
    }

    #[allow(clippy::too_many_arguments)]
    fn loaded_record(
        &self,
        owner: &str,
        source: &str,
        name: String,
        kind: DocumentType,
        bytes: &[u8],
        access: &AccessList,
        digest: String,
        now: i64,
    ) -> DocumentRecord {
        DocumentRecord {
            id: new_document_id(),
            owner: owner.to_string(),
            name,
            kind,
            bytes: bytes.len() as u64,
            access: access.clone(),
            status: DocumentStatus::Pending,
            reason: None,
            created: now,
            updated: now,
            digest: Some(digest),
            source: Some(source.to_string()),
        }
    }

    /// Removes a bulk-loaded document whose file is gone from the folder (the operator asked for it).
    pub async fn unload(&self, record: &DocumentRecord) -> Result<(), DocumentError> {
        self.remove(record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::fakes::service;

    #[test]
    fn what_the_operator_loads_names_who_may_find_it_and_comes_from_a_relative_path() {
        let s = service(None);
        let access = |groups: &[&str], oids: &[&str], everyone| LoadAccess {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            oids: oids.iter().map(|o| o.to_string()).collect(),
            everyone,
        };
        assert_eq!(
            s.load_access(&access(&[" leadership ", "leadership"], &["lee"], true))
                .unwrap(),
            AccessList {
                oids: vec!["lee".into()],
                groups: vec!["leadership".into(), "everyone".into()]
            }
        );
        // Nobody named: refused, never public.
        assert!(matches!(
            s.load_access(&access(&[], &[], false)),
            Err(DocumentError::Invalid { .. })
        ));
        assert!(s.load_access(&access(&[""], &[], false)).is_err());
        assert!(s.load_access(&access(&[], &["a\nb"], false)).is_err());
        assert!(is_source_path("groups/leadership/Offsite.md"));
        for bad in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b", "a/"] {
            assert!(!is_source_path(bad), "{bad:?}");
        }
        assert_eq!(
            document_digest(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
