//! [`InMemoryDocumentStore`] and [`InMemoryDocumentIndex`]: the documents' two ports in memory, with the semantics
//! of their AWS adapters (the records as DynamoDB keeps them, the bytes and their ingestion as S3 and a knowledge
//! base do); and [`document_contract`], the checks every pair of adapters passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chat_core::{
    DocumentFuture, DocumentIndex, DocumentPage, DocumentRecord, DocumentStatus, DocumentStore,
    DocumentType, IndexError, IndexState, StoreError,
};

/// The documents' records in memory, per owner. Cheap to clone: clones share the records.
///
/// Like DynamoDB's: a put replaces the record with its id, a status change touches the status, reason and time
/// alone and only while the record exists, a listing is newest first (ids sort by their time of creation), and a
/// cursor names the listing that gave it (another listing's is [`StoreError::InvalidCursor`]).
#[derive(Clone, Default)]
pub struct InMemoryDocumentStore {
    /// `(owner, id)` to the record.
    records: Arc<Mutex<HashMap<(String, String), DocumentRecord>>>,
}

impl InMemoryDocumentStore {
    pub fn new() -> Self {
        Self::default()
    }
}

/// The listing a cursor belongs to: an owner's, or everyone's.
fn listing_of(owner: Option<&str>) -> String {
    match owner {
        Some(owner) => format!("owner:{owner}"),
        None => "all".into(),
    }
}

impl DocumentStore for InMemoryDocumentStore {
    fn put<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        self.records
            .lock()
            .unwrap()
            .insert((record.owner.clone(), record.id.clone()), record.clone());
        Box::pin(async { Ok(()) })
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError> {
        let found = self
            .records
            .lock()
            .unwrap()
            .get(&(owner.to_string(), id.to_string()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> DocumentFuture<'a, DocumentPage, StoreError> {
        let listing = listing_of(owner);
        let after = match cursor {
            None => Ok(None),
            Some(cursor) => match cursor.rsplit_once('#') {
                Some((of, id)) if of == listing => Ok(Some(id.to_string())),
                _ => Err(StoreError::InvalidCursor),
            },
        };
        let page = after.map(|after| {
            let mut items: Vec<DocumentRecord> = self
                .records
                .lock()
                .unwrap()
                .values()
                .filter(|r| owner.is_none_or(|o| r.owner == o))
                .filter(|r| after.as_ref().is_none_or(|a| r.id < *a))
                .cloned()
                .collect();
            items.sort_by(|a, b| b.id.cmp(&a.id));
            let limit = limit.clamp(1, 1000);
            let next = (items.len() > limit).then(|| format!("{listing}#{}", items[limit - 1].id));
            items.truncate(limit);
            DocumentPage { items, next }
        });
        Box::pin(async move { page })
    }

    fn set_status<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        if let Some(kept) = self
            .records
            .lock()
            .unwrap()
            .get_mut(&(record.owner.clone(), record.id.clone()))
        {
            kept.status = record.status;
            kept.reason = record.reason.clone();
            kept.updated = record.updated;
        }
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(&'a self, owner: &'a str, id: &'a str) -> DocumentFuture<'a, (), StoreError> {
        self.records
            .lock()
            .unwrap()
            .remove(&(owner.to_string(), id.to_string()));
        Box::pin(async { Ok(()) })
    }
}

/// What the index holds of one document: its bytes and access list as put, and where its ingestion stands.
#[derive(Debug, Clone)]
struct Held {
    record: DocumentRecord,
    bytes: Bytes,
    /// `None` until ingested.
    ingested: Option<IndexState>,
}

/// The documents' bytes and their ingestion in memory. Cheap to clone: clones share what is held.
///
/// Like the knowledge base's: a document is known by its owner, id and name (the object key); an ingestion answers
/// `pending`, and the next look finds it `indexed`, or `failed` with a reason when its bytes do not parse (text
/// that is not UTF-8, a PDF without its `%%EOF` trailer); a document not held is `failed` (the knowledge base does
/// not hold it); a removal of what is not held does nothing.
#[derive(Clone, Default)]
pub struct InMemoryDocumentIndex {
    /// The object key (`{owner}/{id}/{name}`) to what is held.
    held: Arc<Mutex<HashMap<String, Held>>>,
}

impl InMemoryDocumentIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// The object keys held under `owner`, sorted.
    pub fn keys_of(&self, owner: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .held
            .lock()
            .unwrap()
            .values()
            .filter(|h| h.record.owner == owner)
            .map(|h| key_of(&h.record))
            .collect();
        keys.sort();
        keys
    }

    /// The bytes held for `record`, and the access list put beside them.
    pub fn held(&self, record: &DocumentRecord) -> Option<(Bytes, chat_core::AccessList)> {
        self.held
            .lock()
            .unwrap()
            .get(&key_of(record))
            .map(|h| (h.bytes.clone(), h.record.access.clone()))
    }
}

fn key_of(record: &DocumentRecord) -> String {
    format!("{}/{}/{}", record.owner, record.id, record.name)
}

/// Why the bytes of a document do not parse, as a knowledge base would say it; `None` when they do.
fn parse_failure(record: &DocumentRecord, bytes: &[u8]) -> Option<String> {
    let name = &record.name;
    match record.kind {
        DocumentType::Pdf if !bytes.trim_ascii_end().ends_with(b"%%EOF") => Some(format!(
            "The knowledge base could not index this document: the PDF {name} could not be parsed."
        )),
        DocumentType::Markdown | DocumentType::Text | DocumentType::Html | DocumentType::Csv
            if std::str::from_utf8(bytes).is_err() =>
        {
            Some(format!(
                "The knowledge base could not index this document: {name} is not UTF-8 text."
            ))
        }
        _ => None,
    }
}

fn not_held() -> IndexState {
    IndexState {
        status: DocumentStatus::Failed,
        reason: Some(
            "The knowledge base does not hold this document (it was removed or never arrived)."
                .into(),
        ),
    }
}

impl DocumentIndex for InMemoryDocumentIndex {
    fn put<'a>(
        &'a self,
        record: &'a DocumentRecord,
        bytes: Bytes,
    ) -> DocumentFuture<'a, (), IndexError> {
        self.held.lock().unwrap().insert(
            key_of(record),
            Held {
                record: record.clone(),
                bytes,
                ingested: None,
            },
        );
        Box::pin(async { Ok(()) })
    }

    fn ingest<'a>(
        &'a self,
        record: &'a DocumentRecord,
    ) -> DocumentFuture<'a, IndexState, IndexError> {
        let answer = match self.held.lock().unwrap().get_mut(&key_of(record)) {
            Some(held) => {
                let pending = IndexState {
                    status: DocumentStatus::Pending,
                    reason: None,
                };
                held.ingested = Some(pending.clone());
                Ok(pending)
            }
            None => Err(IndexError::Failed(format!(
                "the ingestion: no object {} to ingest",
                key_of(record)
            ))),
        };
        Box::pin(async move { answer })
    }

    fn states<'a>(
        &'a self,
        records: &'a [DocumentRecord],
    ) -> DocumentFuture<'a, Vec<IndexState>, IndexError> {
        let mut held = self.held.lock().unwrap();
        let states = records
            .iter()
            .map(|record| match held.get_mut(&key_of(record)) {
                Some(Held {
                    record: kept,
                    bytes,
                    ingested: Some(state),
                }) => {
                    // The look after the ingestion finds it done.
                    if !state.status.is_settled() {
                        *state = match parse_failure(kept, bytes) {
                            Some(reason) => IndexState {
                                status: DocumentStatus::Failed,
                                reason: Some(reason),
                            },
                            None => IndexState {
                                status: DocumentStatus::Indexed,
                                reason: None,
                            },
                        };
                    }
                    state.clone()
                }
                _ => not_held(),
            })
            .collect();
        Box::pin(async move { Ok(states) })
    }

    fn remove<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), IndexError> {
        self.held.lock().unwrap().remove(&key_of(record));
        Box::pin(async { Ok(()) })
    }
}

/// One `#[tokio::test]` per check of [`document_contract`], each on a fresh subject: `$fresh` is an expression
/// whose `.await` is a [`document_contract::Subject`]. The crate using it depends on tokio.
#[macro_export]
macro_rules! document_contract {
    ($fresh:expr) => {
        $crate::contract_tests!(document_contract, $fresh;
            a_record_is_read_back_whole_by_its_owner_alone, a_record_put_again_is_replaced,
            an_owner_s_records_are_listed_newest_first_in_pages_that_join_back_whole,
            everyone_s_records_are_listed_newest_first_in_pages, a_cursor_serves_only_the_listing_that_gave_it,
            a_status_change_touches_status_reason_and_time_alone, a_status_change_never_revives_a_deleted_record,
            a_delete_removes_the_owner_s_record_alone_and_deleting_nothing_is_no_error,
            an_ingested_document_settles_and_states_answer_in_the_order_asked,
            a_removed_document_is_held_no_more_and_removing_it_again_is_no_error,
            a_document_put_and_ingested_again_settles_again,
        );
    };
}

/// The checks every pair of documents' ports ([`DocumentStore`], [`DocumentIndex`]) passes, each given a fresh,
/// empty pair.
pub mod document_contract {
    use std::any::Any;
    use std::future::Future;
    use std::pin::Pin;
    use std::time::{Duration, Instant};

    use chat_core::AccessList;

    use crate::bytes::simple_pdf;

    use super::*;

    /// Counts the objects an index holds under an owner.
    pub type HeldCount =
        Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = usize> + Send>> + Send + Sync>;

    /// A fresh, empty pair of ports under test.
    pub struct Subject {
        pub store: Arc<dyn DocumentStore>,
        pub index: Arc<dyn DocumentIndex>,
        held: Option<HeldCount>,
        /// What must live as long as the ports (a local server).
        _keep: Option<Box<dyn Any + Send + Sync>>,
    }

    impl Subject {
        pub fn new(
            store: impl DocumentStore + 'static,
            index: impl DocumentIndex + 'static,
        ) -> Self {
            Self {
                store: Arc::new(store),
                index: Arc::new(index),
                held: None,
                _keep: None,
            }
        }

        /// The in-memory ports, whose index tells what it holds.
        pub fn in_memory() -> Self {
            let index = InMemoryDocumentIndex::new();
            let observed = index.clone();
            Self::new(InMemoryDocumentStore::new(), index).with_held_count(move |owner| {
                let held = observed.keys_of(&owner).len();
                async move { held }
            })
        }

        /// Also checks what the index holds under an owner (its objects), counted by `count`.
        pub fn with_held_count<F, Fut>(mut self, count: F) -> Self
        where
            F: Fn(String) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = usize> + Send + 'static,
        {
            self.held = Some(Arc::new(move |owner| Box::pin(count(owner))));
            self
        }

        /// Keeps `value` (a local server the ports talk to) as long as the subject.
        pub fn keeping(mut self, value: impl Any + Send + Sync) -> Self {
            self._keep = Some(Box::new(value));
            self
        }

        /// How many objects the index holds under `owner`, when it can tell.
        pub async fn held(&self, owner: &str) -> Option<usize> {
            match &self.held {
                Some(count) => Some(count(owner.to_string()).await),
                None => None,
            }
        }
    }

    /// An owner id, as a signed-in user's is.
    pub const ALICE: &str = "jwt:https://issuer.test:alice";
    pub const BOB: &str = "jwt:https://issuer.test:bob";

    /// A document id that sorts by `n` (the larger, the newer), unique to this run.
    pub fn id(n: u64) -> String {
        let random = uuid::Uuid::new_v4().simple().to_string();
        format!("{n:012x}{}", &random[..20])
    }

    /// A pending Markdown record of `owner`'s, private to them, with every optional field set.
    pub fn record(owner: &str, id: &str, name: &str) -> DocumentRecord {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        DocumentRecord {
            id: id.to_string(),
            owner: owner.to_string(),
            name: name.to_string(),
            kind: DocumentType::from_name(name).expect("a name with a type taken"),
            bytes: 12,
            access: AccessList {
                oids: vec![owner.rsplit(':').next().unwrap().to_string()],
                groups: vec![],
            },
            status: DocumentStatus::Pending,
            reason: None,
            created: now,
            updated: now,
            digest: Some("ab".repeat(32)),
            source: Some(format!("folder/{name}")),
        }
    }

    async fn put(subject: &Subject, record: &DocumentRecord) {
        subject.store.put(record).await.expect("the store answers");
    }

    async fn get(subject: &Subject, owner: &str, id: &str) -> Option<DocumentRecord> {
        subject
            .store
            .get(owner, id)
            .await
            .expect("the store answers")
    }

    /// Every page of a listing, joined, with the number of pages read.
    async fn every_page(
        subject: &Subject,
        owner: Option<&str>,
        limit: usize,
    ) -> (Vec<DocumentRecord>, usize) {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = subject
                .store
                .list(owner, limit, cursor.as_deref())
                .await
                .expect("the store answers");
            pages += 1;
            assert!(page.items.len() <= limit, "at most the limit a page");
            all.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return (all, pages),
            }
            assert!(pages < 100, "the listing ends");
        }
    }

    fn ids(records: &[DocumentRecord]) -> Vec<&str> {
        records.iter().map(|r| r.id.as_str()).collect()
    }

    pub async fn a_record_is_read_back_whole_by_its_owner_alone(subject: &Subject) {
        let mut kept = record(ALICE, &id(1), "Plan.md");
        kept.access.groups = vec!["leadership".into(), "everyone".into()];
        kept.status = DocumentStatus::Failed;
        kept.reason = Some("could not be parsed".into());
        put(subject, &kept).await;
        assert_eq!(get(subject, ALICE, &kept.id).await, Some(kept.clone()));
        assert_eq!(
            get(subject, BOB, &kept.id).await,
            None,
            "another owner finds nothing"
        );
        assert_eq!(
            get(subject, ALICE, &id(2)).await,
            None,
            "an unknown id finds nothing"
        );
        // A record without the optional fields reads back without them.
        let mut bare = record(ALICE, &id(3), "Notes.txt");
        bare.digest = None;
        bare.source = None;
        bare.access = AccessList {
            oids: vec![],
            groups: vec!["staff".into()],
        };
        put(subject, &bare).await;
        assert_eq!(get(subject, ALICE, &bare.id).await, Some(bare));
    }

    pub async fn a_record_put_again_is_replaced(subject: &Subject) {
        let first = record(ALICE, &id(1), "Plan.md");
        put(subject, &first).await;
        let again = DocumentRecord {
            bytes: 99,
            digest: Some("cd".repeat(32)),
            access: AccessList {
                oids: vec![],
                groups: vec!["leadership".into()],
            },
            status: DocumentStatus::Indexing,
            updated: first.updated + 1,
            ..first.clone()
        };
        put(subject, &again).await;
        assert_eq!(get(subject, ALICE, &first.id).await, Some(again.clone()));
        let (listed, _) = every_page(subject, Some(ALICE), 10).await;
        assert_eq!(listed, [again], "one record, the new one");
    }

    pub async fn an_owner_s_records_are_listed_newest_first_in_pages_that_join_back_whole(
        subject: &Subject,
    ) {
        let alice: Vec<DocumentRecord> = (1..=5)
            .map(|n| record(ALICE, &id(n * 10), &format!("a{n}.md")))
            .collect();
        // Put out of order: the listing's order is the ids'.
        for r in alice
            .iter()
            .rev()
            .step_by(2)
            .chain(alice.iter().skip(1).step_by(2))
        {
            put(subject, r).await;
        }
        for n in [15, 35] {
            put(subject, &record(BOB, &id(n), "b.md")).await;
        }
        let newest_first: Vec<&str> = alice.iter().rev().map(|r| r.id.as_str()).collect();
        for limit in [1, 2, 5, 10] {
            let (listed, pages) = every_page(subject, Some(ALICE), limit).await;
            assert_eq!(ids(&listed), newest_first, "pages of {limit}");
            assert!(
                pages >= 5_usize.div_ceil(limit),
                "pages of {limit}: {pages}"
            );
        }
        let first = subject.store.list(Some(ALICE), 2, None).await.unwrap();
        assert_eq!(ids(&first.items), newest_first[..2]);
        assert!(first.next.is_some(), "more to read");
        assert_eq!(first.items[0], alice[4], "each record whole");
        let (bobs, _) = every_page(subject, Some(BOB), 10).await;
        assert_eq!(bobs.len(), 2);
        assert!(bobs.iter().all(|r| r.owner == BOB));
        let (nobody, _) = every_page(subject, Some("jwt:nobody"), 10).await;
        assert!(nobody.is_empty());
    }

    pub async fn everyone_s_records_are_listed_newest_first_in_pages(subject: &Subject) {
        let mut all = Vec::new();
        for (n, owner) in [(1, ALICE), (2, BOB), (3, ALICE), (4, "jwt:carol"), (5, BOB)] {
            let r = record(owner, &id(n), "x.md");
            put(subject, &r).await;
            all.push(r);
        }
        all.reverse();
        for limit in [1, 2, 10] {
            let (listed, _) = every_page(subject, None, limit).await;
            assert_eq!(listed, all, "pages of {limit}");
        }
    }

    pub async fn a_cursor_serves_only_the_listing_that_gave_it(subject: &Subject) {
        for n in 1..=3 {
            put(subject, &record(ALICE, &id(n), "a.md")).await;
            put(subject, &record(BOB, &id(n + 10), "b.md")).await;
        }
        let alices = subject.store.list(Some(ALICE), 1, None).await.unwrap();
        let cursor = alices.next.expect("more of alice's");
        let refused = |r: Result<DocumentPage, StoreError>| {
            assert!(matches!(r, Err(StoreError::InvalidCursor)), "{r:?}");
        };
        refused(subject.store.list(Some(BOB), 1, Some(&cursor)).await);
        refused(subject.store.list(None, 1, Some(&cursor)).await);
        refused(
            subject
                .store
                .list(Some(ALICE), 1, Some("not a cursor!"))
                .await,
        );
        let everyone = subject.store.list(None, 1, None).await.unwrap();
        let all_cursor = everyone.next.expect("more of everyone's");
        refused(subject.store.list(Some(ALICE), 1, Some(&all_cursor)).await);
        // Its own listing takes it.
        let next = subject
            .store
            .list(Some(ALICE), 1, Some(&cursor))
            .await
            .unwrap();
        assert_eq!(next.items.len(), 1);
        assert_ne!(next.items[0].id, alices.items[0].id);
    }

    pub async fn a_status_change_touches_status_reason_and_time_alone(subject: &Subject) {
        let kept = record(ALICE, &id(1), "Plan.md");
        put(subject, &kept).await;
        let failed = DocumentRecord {
            status: DocumentStatus::Failed,
            reason: Some("The PDF could not be parsed.".into()),
            updated: kept.updated + 5,
            // Not a status: not written.
            name: "Other.md".into(),
            bytes: 1,
            ..kept.clone()
        };
        subject.store.set_status(&failed).await.unwrap();
        let read = get(subject, ALICE, &kept.id).await.unwrap();
        assert_eq!(
            read,
            DocumentRecord {
                status: DocumentStatus::Failed,
                reason: failed.reason.clone(),
                updated: kept.updated + 5,
                ..kept.clone()
            }
        );
        // A reason taken away is gone.
        let indexed = DocumentRecord {
            status: DocumentStatus::Indexed,
            reason: None,
            updated: kept.updated + 6,
            ..kept.clone()
        };
        subject.store.set_status(&indexed).await.unwrap();
        assert_eq!(get(subject, ALICE, &kept.id).await, Some(indexed));
    }

    pub async fn a_status_change_never_revives_a_deleted_record(subject: &Subject) {
        let kept = record(ALICE, &id(1), "Plan.md");
        put(subject, &kept).await;
        subject.store.delete(ALICE, &kept.id).await.unwrap();
        let late = DocumentRecord {
            status: DocumentStatus::Indexed,
            ..kept.clone()
        };
        subject.store.set_status(&late).await.unwrap();
        assert_eq!(get(subject, ALICE, &kept.id).await, None);
        let (listed, _) = every_page(subject, None, 10).await;
        assert!(listed.is_empty(), "{listed:?}");
        // Nor makes one that never was.
        let never = record(BOB, &id(2), "b.md");
        subject.store.set_status(&never).await.unwrap();
        assert_eq!(get(subject, BOB, &never.id).await, None);
    }

    pub async fn a_delete_removes_the_owner_s_record_alone_and_deleting_nothing_is_no_error(
        subject: &Subject,
    ) {
        let mine = record(ALICE, &id(1), "Plan.md");
        let other = record(ALICE, &id(2), "Notes.md");
        put(subject, &mine).await;
        put(subject, &other).await;
        // Bob's delete of alice's id deletes nothing.
        subject.store.delete(BOB, &mine.id).await.unwrap();
        assert_eq!(get(subject, ALICE, &mine.id).await, Some(mine.clone()));
        subject.store.delete(ALICE, &mine.id).await.unwrap();
        assert_eq!(get(subject, ALICE, &mine.id).await, None);
        assert_eq!(get(subject, ALICE, &other.id).await, Some(other.clone()));
        let (listed, _) = every_page(subject, None, 10).await;
        assert_eq!(listed, [other]);
        subject.store.delete(ALICE, &mine.id).await.unwrap();
        subject.store.delete(ALICE, &id(3)).await.unwrap();
    }

    /// Puts and ingests `record` with `bytes`; the ingestion's answer.
    async fn put_and_ingest(
        subject: &Subject,
        record: &DocumentRecord,
        bytes: Bytes,
    ) -> IndexState {
        subject
            .index
            .put(record, bytes)
            .await
            .expect("the bytes are put");
        subject
            .index
            .ingest(record)
            .await
            .expect("the ingestion is taken")
    }

    /// The states of `records` once every one has settled (within 20 seconds).
    async fn settled(subject: &Subject, records: &[DocumentRecord]) -> Vec<IndexState> {
        let started = Instant::now();
        loop {
            let states = subject
                .index
                .states(records)
                .await
                .expect("the index answers");
            assert_eq!(states.len(), records.len(), "one state for each asked");
            if states.iter().all(|s| s.status.is_settled()) {
                return states;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "still {states:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn an_ingested_document_settles_and_states_answer_in_the_order_asked(
        subject: &Subject,
    ) {
        let good = record(ALICE, &id(1), "Kayaks.md");
        let paper = record(ALICE, &id(2), "Paddles.pdf");
        let broken = record(ALICE, &id(3), "Broken.pdf");
        for (r, bytes) in [
            (
                &good,
                Bytes::from_static(b"# Kayaks\n\nThe fleet has twelve boats."),
            ),
            (&paper, simple_pdf(&["Paddles are stored dry."]).into()),
            (
                &broken,
                Bytes::from_static(b"%PDF-1.7\nthis is not a real PDF body"),
            ),
        ] {
            let state = put_and_ingest(subject, r, bytes).await;
            assert_ne!(state.status, DocumentStatus::Failed, "{r:?}: {state:?}");
        }
        if let Some(held) = subject.held(ALICE).await {
            assert!(held >= 3, "each document's bytes held: {held}");
        }
        let asked = [broken.clone(), good.clone(), paper.clone()];
        let states = settled(subject, &asked).await;
        assert_eq!(states[0].status, DocumentStatus::Failed, "{states:?}");
        let reason = states[0].reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("Broken.pdf"),
            "a reason naming it: {reason}"
        );
        for state in &states[1..] {
            assert_eq!(
                state,
                &IndexState {
                    status: DocumentStatus::Indexed,
                    reason: None
                }
            );
        }
        // Asked in another order, answered in that order.
        let states = settled(subject, &[good.clone(), broken.clone()]).await;
        assert_eq!(
            states.iter().map(|s| s.status).collect::<Vec<_>>(),
            [DocumentStatus::Indexed, DocumentStatus::Failed]
        );
        // One never put is not held.
        let never = settled(subject, &[record(ALICE, &id(4), "Never.md")]).await;
        assert_eq!(never[0].status, DocumentStatus::Failed);
        assert!(never[0].reason.is_some(), "a reason for a person");
    }

    pub async fn a_removed_document_is_held_no_more_and_removing_it_again_is_no_error(
        subject: &Subject,
    ) {
        let gone = record(ALICE, &id(1), "Gone.md");
        let kept = record(ALICE, &id(2), "Kept.md");
        let bobs = record(BOB, &id(3), "Bobs.md");
        for r in [&gone, &kept, &bobs] {
            put_and_ingest(subject, r, Bytes::from_static(b"some text")).await;
        }
        settled(subject, &[gone.clone(), kept.clone(), bobs.clone()]).await;
        let before = subject.held(ALICE).await;
        subject.index.remove(&gone).await.expect("removed");
        let states = settled(subject, &[gone.clone(), kept.clone(), bobs.clone()]).await;
        assert_eq!(states[0].status, DocumentStatus::Failed, "no longer held");
        assert_eq!(states[1].status, DocumentStatus::Indexed);
        assert_eq!(states[2].status, DocumentStatus::Indexed);
        if let (Some(before), Some(after)) = (before, subject.held(ALICE).await) {
            assert!(after < before && after > 0, "{before} then {after}");
        }
        subject.index.remove(&gone).await.expect("removing again");
        subject
            .index
            .remove(&record(ALICE, &id(4), "Never.md"))
            .await
            .expect("removing what never was");
        subject.index.remove(&kept).await.expect("removed");
        if let Some(after) = subject.held(ALICE).await {
            assert_eq!(after, 0, "nothing of alice's left");
        }
        assert_eq!(
            settled(subject, std::slice::from_ref(&bobs)).await[0].status,
            DocumentStatus::Indexed,
            "another owner's untouched"
        );
    }

    pub async fn a_document_put_and_ingested_again_settles_again(subject: &Subject) {
        let first = record(ALICE, &id(1), "Plan.md");
        put_and_ingest(
            subject,
            &first,
            Bytes::from_static(b"# Plan\n\nversion one"),
        )
        .await;
        assert_eq!(
            settled(subject, std::slice::from_ref(&first)).await[0].status,
            DocumentStatus::Indexed
        );
        // The bulk load's update: the same key, new bytes and access, a later time.
        let again = DocumentRecord {
            access: AccessList {
                oids: vec![],
                groups: vec!["leadership".into()],
            },
            updated: first.updated + 1,
            ..first.clone()
        };
        let state = put_and_ingest(
            subject,
            &again,
            Bytes::from_static(b"# Plan\n\nversion two"),
        )
        .await;
        assert_ne!(state.status, DocumentStatus::Failed, "{state:?}");
        assert_eq!(
            settled(subject, std::slice::from_ref(&again)).await[0].status,
            DocumentStatus::Indexed
        );
    }
}
