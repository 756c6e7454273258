//! An upload: every file checked and the whole upload counted against the upload quotas before anything is
//! stored, then each file's record, bytes and ingestion, with what was put removed when a step fails.

use bytes::Bytes;

use super::Documents;
use super::types::{
    AccessChoice, DocumentError, DocumentRecord, DocumentStatus, DocumentType, IndexState,
    NewDocument, document_digest, invalid, new_document_id, now,
};
use crate::{Caller, StoreError, Upload};

/// The longest file name kept, in bytes (the key holds it, and S3's keys are at most 1024 bytes).
pub const MAX_DOCUMENT_NAME_BYTES: usize = 200;

/// A file name made safe for a key and a citation: its last path segment, without control characters, `/`, `\`
/// or `#` (which a citation's `#page=N` would confuse), at most [`MAX_DOCUMENT_NAME_BYTES`].
pub fn document_file_name(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let clean: String = last
        .chars()
        .filter(|c| !c.is_control() && !matches!(c, '#' | '?' | '%'))
        .collect();
    let clean = clean.trim().trim_start_matches('.').to_string();
    if clean.is_empty() || clean.len() > MAX_DOCUMENT_NAME_BYTES {
        return None;
    }
    Some(clean)
}

/// One file's name, type and bytes checked, as an upload's and a bulk load's are: a usable name, a type the
/// knowledge base takes, not empty, at most `max_bytes`, and bytes that can be the type the name says. A refusal
/// names the file in quotes, as the client wrote it: the log line of a refusal leaves quoted spans out, so that no
/// file name reaches the logs.
pub(super) fn check_file(
    file_name: &str,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<(String, DocumentType), DocumentError> {
    let name = document_file_name(file_name)
        .ok_or_else(|| invalid("files", format!("{file_name:?} is not a usable file name")))?;
    let kind = DocumentType::from_name(&name).ok_or_else(|| {
        invalid(
            "files",
            format!(
                "{name:?}: the knowledge base takes PDF, Markdown, text, HTML, Word and CSV files \
                 (.pdf, .md, .txt, .html, .docx, .doc, .csv)"
            ),
        )
    })?;
    if bytes.len() > max_bytes {
        return Err(DocumentError::TooLarge {
            name,
            limit: max_bytes,
        });
    }
    if bytes.is_empty() {
        return Err(invalid("files", format!("{name:?} is empty")));
    }
    if !kind.accepts(bytes) {
        return Err(invalid(
            "files",
            format!("{name:?}: its bytes are not a {} file", kind.as_str()),
        ));
    }
    Ok((name, kind))
}

impl Documents {
    /// Checks every file before anything is stored: their count, each one's name, type and size.
    pub fn check(
        &self,
        files: &[NewDocument],
    ) -> Result<Vec<(String, DocumentType)>, DocumentError> {
        if files.is_empty() {
            return Err(invalid("files", "send at least one file"));
        }
        if files.len() > self.settings.max_per_upload {
            return Err(invalid(
                "files",
                format!(
                    "at most {} files in one upload",
                    self.settings.max_per_upload
                ),
            ));
        }
        files
            .iter()
            .map(|file| check_file(&file.name, &file.bytes, self.settings.max_bytes))
            .collect()
    }

    /// Uploads `files` for `caller` with the access they chose, each ingested at once. Every file is checked, and
    /// the whole upload counted against the upload quotas, before any is stored; a file whose bytes or ingestion fail has what was put of it removed, and the error
    /// is answered (the files before it stay uploaded).
    pub async fn upload(
        &self,
        caller: &Caller,
        files: Vec<NewDocument>,
        choice: &AccessChoice,
    ) -> Result<Vec<DocumentRecord>, DocumentError> {
        let access = self.access_for(caller, choice)?;
        let checked = self.check(&files)?;
        self.count(caller, &files).await?;
        let mut done = Vec::with_capacity(files.len());
        for (file, (name, kind)) in files.into_iter().zip(checked) {
            let now = now();
            let record = DocumentRecord {
                id: new_document_id(),
                owner: caller.owner.clone(),
                name,
                kind,
                bytes: file.bytes.len() as u64,
                access: access.clone(),
                status: DocumentStatus::Pending,
                reason: None,
                created: now,
                updated: now,
                digest: Some(document_digest(&file.bytes)),
                source: None,
            };
            let record = self.put_new(record, file.bytes).await?;
            tracing::info!(document = %record.id, owner = %record.owner, status = record.status.as_str(), "document uploaded");
            done.push(record);
        }
        Ok(done)
    }

    /// Counts the whole upload in `caller`'s periods against the upload quotas, where any is configured; refused, it
    /// is [`DocumentError::OverQuota`] and nothing may be stored.
    async fn count(&self, caller: &Caller, files: &[NewDocument]) -> Result<(), DocumentError> {
        let Some((quota, limits)) = &self.quota else {
            return Ok(());
        };
        let bytes = files.iter().map(|f| f.bytes.len() as u64).sum();
        let upload = Upload::new(
            &caller.owner,
            files.len() as u64,
            bytes,
            time::OffsetDateTime::now_utc(),
        );
        match tokio::time::timeout(self.settings.timeout, quota.count_upload(&upload, limits)).await
        {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(over))) => {
                tracing::info!(owner = %upload.owner, limit = ?over.kind, documents = upload.documents, bytes = upload.bytes, "upload refused by a quota");
                Err(DocumentError::OverQuota(over))
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                Err(StoreError::Unavailable("the usage counters: no answer in time".into()).into())
            }
        }
    }

    /// Stores a new document: its record (pending), its bytes and metadata, its ingestion, then the status the
    /// knowledge base answered. What fails on the way has what was put removed.
    pub(super) async fn put_new(
        &self,
        mut record: DocumentRecord,
        bytes: Bytes,
    ) -> Result<DocumentRecord, DocumentError> {
        self.bounded("the record", self.store.put(&record)).await?;
        let state = self.put_and_ingest(&record, bytes).await?;
        record.status = state.status;
        record.reason = state.reason;
        self.bounded("the record", self.store.set_status(&record))
            .await?;
        Ok(record)
    }

    /// Puts the bytes and metadata of `record` and asks the knowledge base to ingest them; when either fails,
    /// what was put of the document (its record too) is removed, so nothing is left half-visible.
    pub(super) async fn put_and_ingest(
        &self,
        record: &DocumentRecord,
        bytes: Bytes,
    ) -> Result<IndexState, DocumentError> {
        let state = match self
            .bounded("the bytes", self.index.put(record, bytes))
            .await
        {
            Ok(()) => {
                self.bounded("the ingestion", self.index.ingest(record))
                    .await
            }
            Err(e) => Err(e),
        };
        if state.is_err() {
            self.undo(record).await;
        }
        state
    }

    /// Removes what an upload put, as far as it can: a failure here is logged (the record says what was meant).
    async fn undo(&self, record: &DocumentRecord) {
        if let Err(e) = self.bounded("the removal", self.index.remove(record)).await {
            tracing::warn!(document = %record.id, error = %e, "a failed upload's bytes were not removed");
        }
        if let Err(e) = self
            .bounded("the record", self.store.delete(&record.owner, &record.id))
            .await
        {
            tracing::warn!(document = %record.id, error = %e, "a failed upload's record was not removed");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::documents::fakes::{Nothing, caller, docs, service};
    use crate::documents::types::is_document_id;
    use crate::{Limits, OverLimit, UploadQuota};

    #[test]
    fn a_refusal_names_the_file_in_quotes_only() {
        let refusals = [
            check_file("Salaries.exe", b"MZ", 100),
            check_file("Salaries.csv", b"", 100),
            check_file("Salaries.pdf", b"not a pdf", 100),
            check_file("Salaries.csv", &[b'a'; 101], 100),
        ];
        for refused in refusals {
            let text = refused.unwrap_err().to_string();
            assert!(text.contains("\"Salaries."), "{text}");
            assert_eq!(text.matches("Salaries").count(), 1, "{text}");
        }
    }

    /// Upload quotas that admit `room` documents in all, counting the uploads asked about.
    struct Quota {
        room: u64,
        asked: std::sync::Mutex<Vec<(u64, u64)>>,
    }

    impl UploadQuota for Quota {
        fn count_upload<'a>(
            &'a self,
            upload: &'a Upload,
            limits: &'a Limits,
        ) -> crate::UsageFuture<'a, Result<(), OverLimit>> {
            let mut asked = self.asked.lock().unwrap();
            let before: u64 = asked.iter().map(|(d, _)| d).sum();
            asked.push((upload.documents, upload.bytes));
            let mut today = crate::UsageSnapshot::default();
            today.day.uploads.documents = before;
            let limits = limits.with(
                crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY,
                self.room as f64,
            );
            let counted = crate::check_upload(&limits, &today, upload);
            if counted.is_err() {
                asked.pop();
            }
            Box::pin(async move { Ok(counted) })
        }
    }

    #[tokio::test]
    async fn an_upload_is_counted_whole_before_any_file_is_stored_and_refused_stores_nothing() {
        let file = |name: &str| NewDocument {
            name: name.into(),
            bytes: Bytes::from_static(b"some text"),
        };
        let alice = caller("jwt:alice", Some("alice"), &[]);
        let records = Arc::new(Nothing::default());
        let quota = Arc::new(Quota {
            room: 3,
            asked: Default::default(),
        });
        let limits = Limits::default().with(crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 3.0);
        let s = Documents::new(records.clone(), Arc::new(Nothing::default()), docs(None))
            .with_upload_quota(quota.clone(), limits);
        let stored = || records.records_put();
        let choice = AccessChoice::default();
        s.upload(&alice, vec![file("a.md"), file("b.md")], &choice)
            .await
            .unwrap();
        assert_eq!(
            *quota.asked.lock().unwrap(),
            [(2, 18)],
            "counted whole, once"
        );
        assert_eq!(stored(), 2);
        let refused = s
            .upload(&alice, vec![file("c.md"), file("d.md")], &choice)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, DocumentError::OverQuota(o) if o.kind == crate::LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
            "{refused:?}"
        );
        assert_eq!(stored(), 2, "nothing of a refused upload stored");
        // A file that is not acceptable is refused before anything is counted.
        assert!(matches!(
            s.upload(&alice, vec![file("x.exe")], &choice).await,
            Err(DocumentError::Invalid { .. })
        ));
        assert_eq!(quota.asked.lock().unwrap().len(), 1);
        // With no limit configured, the port is never asked.
        let off = Documents::new(records.clone(), Arc::new(Nothing::default()), docs(None))
            .with_upload_quota(quota.clone(), Limits::default());
        off.upload(&alice, vec![file("e.md")], &choice)
            .await
            .unwrap();
        assert_eq!(quota.asked.lock().unwrap().len(), 1);
        assert_eq!(stored(), 3);
    }

    #[test]
    fn files_are_checked_for_count_type_size_and_bytes() {
        let s = service(None);
        let file = |name: &str, bytes: &'static [u8]| NewDocument {
            name: name.into(),
            bytes: Bytes::from_static(bytes),
        };
        assert_eq!(
            s.check(&[file("../notes/Plan.MD", b"# plan")]).unwrap(),
            [("Plan.MD".to_string(), DocumentType::Markdown)]
        );
        assert!(s.check(&[]).is_err());
        assert!(
            s.check(&[file("a.md", b"a"), file("b.md", b"b"), file("c.md", b"c")])
                .is_err()
        );
        assert!(matches!(
            s.check(&[file("tool.exe", b"MZ")]),
            Err(DocumentError::Invalid { .. })
        ));
        assert!(matches!(
            s.check(&[file("big.txt", &[b'a'; 101])]),
            Err(DocumentError::TooLarge { limit: 100, .. })
        ));
        assert!(s.check(&[file("fake.pdf", b"hello")]).is_err());
        assert!(s.check(&[file("real.pdf", b"%PDF-1.4 ...")]).is_ok());
        assert!(s.check(&[file("bin.txt", &[0xff, 0xfe, 0x00])]).is_err());
        assert!(s.check(&[file("empty.md", b"")]).is_err());
    }

    #[test]
    fn names_are_made_safe_for_keys_and_citations() {
        assert_eq!(
            document_file_name("C:\\x\\a#b.md").as_deref(),
            Some("ab.md")
        );
        assert_eq!(document_file_name("..").as_deref(), None);
        assert_eq!(document_file_name(&"a".repeat(300)), None);
        assert!(is_document_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_document_id("../etc"));
        let (a, b) = (new_document_id(), new_document_id());
        assert!(is_document_id(&a) && a != b);
    }
}
