//! A caller's documents read and deleted: one by id, a page of theirs (or everyone's, for administrators), a
//! delete from the knowledge base, the bucket and the table, and the status refresh every read shares.

use super::Documents;
use super::types::{DocumentError, DocumentPage, DocumentRecord, is_document_id, now};
use crate::Caller;

impl Documents {
    /// `caller`'s document `id`, its status brought up to date.
    pub async fn get(&self, caller: &Caller, id: &str) -> Result<DocumentRecord, DocumentError> {
        let record = self.owned(caller, id).await?;
        let mut records = vec![record];
        self.refresh(&mut records).await?;
        Ok(records.pop().expect("one record"))
    }

    /// A page of `caller`'s documents, or (`all`, administrators only) everyone's, their statuses brought up to
    /// date.
    pub async fn list(
        &self,
        caller: &Caller,
        all: bool,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<DocumentPage, DocumentError> {
        if all && !self.is_admin(caller) {
            return Err(DocumentError::Forbidden(
                "Only a document administrator may list everyone's documents.".into(),
            ));
        }
        let owner = (!all).then_some(caller.owner.as_str());
        let mut page = self
            .bounded("the records", self.store.list(owner, limit, cursor))
            .await?;
        self.refresh(&mut page.items).await?;
        Ok(page)
    }

    /// `caller`'s record of the document `id` as stored (its status as last recorded).
    pub(super) async fn owned(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<DocumentRecord, DocumentError> {
        if !is_document_id(id) {
            return Err(DocumentError::NotFound);
        }
        self.bounded("the record", self.store.get(&caller.owner, id))
            .await?
            .ok_or(DocumentError::NotFound)
    }

    /// Asks the knowledge base where the unsettled ones stand, and records what changed.
    pub(super) async fn refresh(
        &self,
        records: &mut [DocumentRecord],
    ) -> Result<(), DocumentError> {
        let unsettled: Vec<usize> = (0..records.len())
            .filter(|&i| !records[i].status.is_settled())
            .collect();
        if unsettled.is_empty() {
            return Ok(());
        }
        let asked: Vec<DocumentRecord> = unsettled.iter().map(|&i| records[i].clone()).collect();
        let states = self
            .bounded("the statuses", self.index.states(&asked))
            .await?;
        for (&i, state) in unsettled.iter().zip(states) {
            let record = &mut records[i];
            if record.status != state.status || record.reason != state.reason {
                record.status = state.status;
                record.reason = state.reason;
                record.updated = now();
                self.bounded("the record", self.store.set_status(record))
                    .await?;
            }
        }
        Ok(())
    }

    /// Deletes `caller`'s document `id`: from the knowledge base, the bucket, then its record.
    pub async fn delete(&self, caller: &Caller, id: &str) -> Result<(), DocumentError> {
        let record = self.owned(caller, id).await?;
        self.remove(&record).await
    }

    /// Removes a document: from the knowledge base and the bucket, then its record.
    pub(super) async fn remove(&self, record: &DocumentRecord) -> Result<(), DocumentError> {
        self.bounded("the removal", self.index.remove(record))
            .await?;
        self.bounded("the record", self.store.delete(&record.owner, &record.id))
            .await?;
        tracing::info!(document = %record.id, owner = %record.owner, "document deleted");
        Ok(())
    }

    /// Brings the statuses of `records` up to date: the knowledge base is asked about the unsettled ones, and what
    /// changed is recorded (as a read through the routes does).
    pub async fn refresh_statuses(
        &self,
        records: &mut [DocumentRecord],
    ) -> Result<(), DocumentError> {
        self.refresh(records).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::fakes::{caller, service};

    #[tokio::test]
    async fn everyone_s_list_is_for_administrators_only_and_another_s_document_is_not_found() {
        let s = service(Some("doc-admins"));
        let alice = caller("jwt:alice", Some("alice"), &[]);
        assert!(matches!(
            s.list(&alice, true, 10, None).await,
            Err(DocumentError::Forbidden(_))
        ));
        assert!(s.list(&alice, false, 10, None).await.is_ok());
        let admin = caller("jwt:dana", Some("dana"), &["doc-admins"]);
        assert!(s.list(&admin, true, 10, None).await.is_ok());
        assert_eq!(
            s.get(&alice, "0123456789abcdef0123456789abcdef").await,
            Err(DocumentError::NotFound)
        );
        assert_eq!(s.delete(&alice, "nope").await, Err(DocumentError::NotFound));
    }
}
