//! A caller's documents followed while the knowledge base works on them ([`DocumentWatch`]), for the page that
//! shows their statuses as they change.

use super::Documents;
use super::types::{DocumentError, DocumentRecord, invalid};
use crate::{Caller, WatchLease, WatchPlace, watches_full};

/// The most documents one watch follows (`ids` named, or the newest of the caller's unsettled ones).
pub const MAX_WATCHED_DOCUMENTS: usize = 100;

/// What a watch says of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentChange {
    /// Where it stands now: first seen, or its status or reason changed.
    Now(DocumentRecord),
    /// It is no longer there (deleted since): its id.
    Gone(String),
}

/// A caller's documents followed while the knowledge base works on them: each [`DocumentWatch::poll`] asks where the
/// unsettled ones stand (through the same reads and refresh as [`Documents::get`], under the same rules and
/// timeouts) and says what changed; a settled document (`indexed`, `failed`) or a gone one is no longer followed.
/// How often to poll, and for how long, is the caller's.
pub struct DocumentWatch {
    documents: Documents,
    caller: Caller,
    /// The unsettled documents followed, as last seen.
    unsettled: Vec<DocumentRecord>,
    /// The watch's place among the caller's open ones, while a limit is configured and until it is given back.
    place: Option<WatchLease>,
}

impl Documents {
    /// Starts watching `caller`'s documents `ids` (each must be theirs: another's, or one that does not exist, is
    /// [`DocumentError::NotFound`], exactly as a read), or, with none named, their unsettled ones among their newest
    /// [`MAX_WATCHED_DOCUMENTS`]. Answers where each stands now, and the watch that follows the unsettled ones.
    /// Where open watches are limited, the watch first takes one of the caller's places (all held: a
    /// [`DocumentError::OverQuota`] that says when to try again) and holds it until [`DocumentWatch::end`].
    pub async fn watch(
        &self,
        caller: &Caller,
        ids: Option<&[String]>,
    ) -> Result<(Vec<DocumentRecord>, DocumentWatch), DocumentError> {
        let place = self.take_place(caller).await?;
        match self.watched(caller, ids).await {
            Ok(now) => {
                let unsettled = now
                    .iter()
                    .filter(|d| !d.status.is_settled())
                    .cloned()
                    .collect();
                let watch = DocumentWatch {
                    documents: self.clone(),
                    caller: caller.clone(),
                    unsettled,
                    place,
                };
                Ok((now, watch))
            }
            Err(e) => {
                self.give_back(place).await;
                Err(e)
            }
        }
    }

    /// A place among `caller`'s open watches, where they are limited.
    async fn take_place(&self, caller: &Caller) -> Result<Option<WatchLease>, DocumentError> {
        let Some(limit) = &self.watches else {
            return Ok(None);
        };
        let now = time::OffsetDateTime::now_utc();
        let until = now + limit.held_for;
        let place = self
            .bounded(
                "the watches' places",
                limit
                    .slots
                    .take_place(&caller.owner, limit.at_once, now, until),
            )
            .await?;
        match place {
            WatchPlace::Taken(lease) => Ok(Some(lease)),
            WatchPlace::Full { free_by } => Err(DocumentError::OverQuota(watches_full(
                limit.at_once.into(),
                free_by,
                now,
            ))),
        }
    }

    /// Gives a watch's place back; a failure only leaves it held until its time passes (said in the log).
    async fn give_back(&self, place: Option<WatchLease>) {
        let (Some(limit), Some(lease)) = (&self.watches, place) else {
            return;
        };
        if let Err(e) = self
            .bounded("the watches' places", limit.slots.give_back(&lease))
            .await
        {
            tracing::warn!(error = %e, until = %lease.until, "a watch's place not given back: held until its time passes");
        }
    }

    /// Where the documents a watch follows stand now.
    async fn watched(
        &self,
        caller: &Caller,
        ids: Option<&[String]>,
    ) -> Result<Vec<DocumentRecord>, DocumentError> {
        Ok(match ids {
            Some(ids) => {
                let mut unique: Vec<&str> = Vec::new();
                for id in ids {
                    if !unique.contains(&id.as_str()) {
                        unique.push(id);
                    }
                }
                if unique.is_empty() || unique.len() > MAX_WATCHED_DOCUMENTS {
                    return Err(invalid(
                        "ids",
                        format!("name 1 to {MAX_WATCHED_DOCUMENTS} documents"),
                    ));
                }
                let mut records = Vec::with_capacity(unique.len());
                for id in unique {
                    records.push(self.owned(caller, id).await?);
                }
                self.refresh(&mut records).await?;
                records
            }
            None => {
                let page = self
                    .list(caller, false, MAX_WATCHED_DOCUMENTS, None)
                    .await?;
                page.items
                    .into_iter()
                    .filter(|d| !d.status.is_settled())
                    .collect()
            }
        })
    }
}

impl DocumentWatch {
    /// Whether every document followed has settled (or gone): nothing more can change without someone asking.
    pub fn is_settled(&self) -> bool {
        self.unsettled.is_empty()
    }

    /// Ends the watch: its place among the caller's open watches is given back (once; a later call does nothing).
    pub async fn end(&mut self) {
        let place = self.place.take();
        self.documents.give_back(place).await;
    }

    /// How many documents are still followed.
    pub fn following(&self) -> usize {
        self.unsettled.len()
    }

    /// Asks once where the unsettled documents stand: their records read again (a deleted one is
    /// [`DocumentChange::Gone`]), then the knowledge base asked for all of them at once, what changed recorded.
    /// Answers the documents whose status or reason changed since the last look.
    pub async fn poll(&mut self) -> Result<Vec<DocumentChange>, DocumentError> {
        let documents = &self.documents;
        let mut changes = Vec::new();
        let mut current = Vec::with_capacity(self.unsettled.len());
        for seen in &self.unsettled {
            match documents
                .bounded(
                    "the record",
                    documents.store.get(&self.caller.owner, &seen.id),
                )
                .await?
            {
                Some(record) => current.push(record),
                None => changes.push(DocumentChange::Gone(seen.id.clone())),
            }
        }
        documents.refresh(&mut current).await?;
        let mut still = Vec::with_capacity(current.len());
        for record in current {
            let changed = self
                .unsettled
                .iter()
                .find(|seen| seen.id == record.id)
                .is_none_or(|seen| seen.status != record.status || seen.reason != record.reason);
            if changed {
                changes.push(DocumentChange::Now(record.clone()));
            }
            if !record.status.is_settled() {
                still.push(record);
            }
        }
        self.unsettled = still;
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::fakes::{caller, service};

    #[tokio::test]
    async fn a_watch_names_only_the_caller_s_documents_and_ends_settled_when_none_is_pending() {
        let s = service(None);
        let alice = caller("jwt:alice", Some("alice"), &[]);
        let ids = |v: &[&str]| v.iter().map(|i| i.to_string()).collect::<Vec<_>>();
        // An id she does not hold (whoever's it is) is not found, as a read; a malformed one too.
        assert!(matches!(
            s.watch(&alice, Some(&ids(&["0123456789abcdef0123456789abcdef"])))
                .await,
            Err(DocumentError::NotFound)
        ));
        assert!(matches!(
            s.watch(&alice, Some(&ids(&["../x"]))).await,
            Err(DocumentError::NotFound)
        ));
        assert!(matches!(
            s.watch(&alice, Some(&[])).await,
            Err(DocumentError::Invalid { .. })
        ));
        // Nothing unsettled: nothing to say, and settled at once.
        let (now, watch) = s.watch(&alice, None).await.unwrap();
        assert!(now.is_empty());
        assert!(watch.is_settled());
    }
}
