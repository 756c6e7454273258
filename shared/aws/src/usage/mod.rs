//! The per-user usage counters in the chats' DynamoDB table, so that quotas hold across every instance of the
//! functions: items per user and period, changed only by transactions whose conditions make every check and add
//! one atomic step, each item expiring after its period.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | a day's spending | `USAGE#{owner}` | `DAY#2026-11-25` | the token counts, `costUsd`, `turns`; `requests` (admitted); `reservedTokens`, `reservedCostUsd` (held by turns not settled); `heldTokens`, `heldCostUsd` (spent and held: what the quotas are checked against); `uploadedDocuments`, `uploadedBytes` (counted while an upload quota is configured); `expiresAt` |
//! | a week's spending | `USAGE#{owner}` | `WEEK#2026-W48` (the ISO week) | the same |
//! | a month's spending | `USAGE#{owner}` | `MONTH#2026-11` | the same |
//! | a window of the rate limit | `USAGE#{owner}` | `RATE#000176423456` (its last bucket of 10 s) | `requests` admitted in it, `expiresAt` |
//! | a turn's hold | `USAGE#{owner}` | `HOLD#{turn id}` | `reservedTokens`, `reservedCostUsd`, `day`, `week`, `month`, `version`, `expiresAt` |
//! | a turn's record mark (no limit held it) | `USAGE#{owner}` | `TURN#{turn id}` | `expiresAt` |
//! | an upload's mark | `USAGE#{owner}` | `UPLOAD#{upload id}` | `documents`, `bytes`, `day`, `expiresAt` |
//! | a place of an open watch of documents | `USAGE#{owner}` | `WATCH#{0 up to QUOTA_OPEN_WATCHES}` | `watchId` (its holder), `until` (Unix seconds: free after; 0 once given back), `expiresAt` |
//! | the operator's limits for the user | `USAGE#{owner}` | `LIMITS` | one attribute per limit, `{resource}Per{Period}` (`tokensPerDay`, `requestsPerWeek`; `ratePerMinute` for requests per minute) |
//!
//! **A turn no limit holds** (none configured) is written once, when it ends: one `TransactWriteItems` puts its
//! record mark (unless it exists) and adds its request, what it spent and the turn to the day's, the week's and the
//! month's counters; nothing is written before its model call. A record whose answer is lost is read back by its
//! mark, and sent again only when the mark is not there. In a turn its store writes to this table, the same writes
//! go in the turn's own transaction ([`turn_settlement`]).
//!
//! **Admission** (under a limit) is one `TransactWriteItems`: the turn's hold is put (unless it exists), the day's, the week's and
//! the month's counters add the request and its reservation on condition that what they hold is under each limit of
//! their period (built from the list of limits in force), the request is added to the seven windows it falls in on
//! condition that its own holds fewer than the rate limit, and a condition check of the
//! `LIMITS` item asserts the user's own limits the conditions assumed (read once per user and instance, and again
//! when the check fails). Refused, nothing is written; the counters are then read to say which limit refused and
//! until when. A hold that counts several requests (one per model call of a request to embed: [`Hold::requests`])
//! adds them all, on condition that each count of requests stays within its limit once they are added; one of more
//! requests than a limit is refused without a write.
//!
//! **A settlement** is one `TransactWriteItems` too: the hold moves on from the version it was written for (or is
//! deleted, the turn over), and the day's, the week's and the month's counters add what was spent and the change of the
//! reservation. The hold's condition makes every write of a turn happen once: an attempt sent again after its answer
//! was lost fails it, and is read back as landed. A turn's last settlement goes in the turn's own transaction when the
//! store writes to this table ([`turn_settlement`]).
//!
//! **An upload's count** is one `TransactWriteItems` too: its mark is put (unless it exists), the day's, the week's
//! and the month's counters add its documents and bytes on condition that the sums stay within the upload limits of
//! their period (each counter at most the limit less what the upload adds), and the same condition check of the
//! `LIMITS` item. Refused, nothing is
//! written, and the counters are read to say which limit refused and how much is left. A count whose answer is
//! lost (no answer in time) is read back by its mark, and sent again only when the mark is not there: the mark's
//! condition keeps it from ever counting twice. Where no upload quota is configured, nothing is written.
//!
//! **A watch's place** is one conditional `UpdateItem`: the first place that is free (absent, or its `until`
//! passed) is taken, each tried in turn; every place held, nothing is written, and the earliest `until` says when to
//! try again. A take whose answer is lost is read back (the place holds the watch's id, or it does not). Giving it
//! back sets `until` to 0 on condition that the place still holds the watch's id; a watch that never gives it back
//! (its process gone) frees it when its `until` passes.
//!
//! Each item's writes are built in [`items`]; here, the transactions they go in and what a refusal means.

mod items;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, TransactWriteItem};
use chat_core::{
    Family, HeldPlaces, Hold, LimitKind, Limits, OverLimit, Periods, RateWindow, Reserve, Resource,
    StoreError, Upload, UploadQuota, UsageFuture, UsageLedger, UsageSnapshot, UsageTotals,
    WINDOW_SPAN, WatchLease, WatchPlace, WatchSlots, upload_ceilings,
};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::dynamo::{Item, WriteFailure, failed, get_item, transact};
use crate::table::{SORT_KEY, with_sort_key_prefix};
use items::{
    LIMITS_SK, PeriodItem, WATCH_SK_PREFIX, WatchItem, day_sk, hold_key, hold_put, hold_settled,
    key, limit_attributes, limit_overrides, limits_as_seen, month_sk, period_counters, read_item,
    record_key, record_put, upload_add, upload_key, upload_put, usage_pk, watch_give_back,
    watch_key, watch_take, week_sk, window_admit, window_sk,
};

/// How often a transaction that another one of the same user's held up (it was not applied) is sent again, and an
/// admission whose refusal a fresh read does not confirm (a turn settled meanwhile) is tried again.
const ATTEMPTS: u32 = 8;

/// How many users' limits one instance remembers before it forgets them all (and reads each again once).
const REMEMBERED_USERS: usize = 10_000;

/// A user's counters in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoUsage {
    client: Client,
    table: String,
    /// Each user's `LIMITS` item as last read (its limit attributes only; empty: no item): admissions assert it.
    limits_seen: Arc<Mutex<HashMap<String, Item>>>,
}

/// The writes that settle `hold` with `spent` and `next` (see [`UsageLedger::settle`]): the hold moved on or
/// deleted, on condition that it is at its version (unless `guarded` is false: in a turn's own transaction, which
/// its store writes once), and the day's and the month's counters.
fn settlement(
    table: &str,
    hold: &Hold,
    spent: &UsageTotals,
    next: Option<&Reserve>,
    guarded: bool,
) -> Vec<TransactWriteItem> {
    let mut writes = vec![hold_settled(table, hold, next, guarded)];
    for counter in period_counters(&hold.periods) {
        writes.push(counter.settle(table, &hold.owner, spent, &hold.reserved, next));
    }
    writes
}

/// The writes that record the turn of `hold`, which was not admitted (see [`UsageLedger::record`]): its mark put,
/// on condition that it is not there yet (unless `guarded` is false: in a turn's own transaction), and the day's,
/// the week's and the month's counters.
fn recording(
    table: &str,
    hold: &Hold,
    spent: &UsageTotals,
    guarded: bool,
) -> Vec<TransactWriteItem> {
    let mut writes = vec![record_put(table, hold, guarded)];
    for counter in period_counters(&hold.periods) {
        writes.push(counter.record(table, &hold.owner, spent, hold.requests));
    }
    writes
}

/// The writes that make a turn's last settlement in the turn's own transaction, when its store writes to `table`:
/// the same as [`UsageLedger::settle`] makes with no next reservation, the hold deleted without a condition (the
/// store writes the turn once: a retried attempt is found by its token), so that the counters read the same
/// whichever way a turn was settled; or, for a turn not admitted, the same as [`UsageLedger::record`] makes, its
/// mark put without a condition (a record through the ledger after a turn's write that landed, its answer lost,
/// finds it and changes nothing).
pub(crate) fn turn_settlement(
    table: &str,
    hold: &Hold,
    spent: &UsageTotals,
) -> Vec<TransactWriteItem> {
    if hold.admitted {
        settlement(table, hold, spent, None, false)
    } else {
        recording(table, hold, spent, false)
    }
}

/// Why a transaction of the ledger was cancelled: whether each of its writes, in order, failed its condition.
fn checks_failed(e: &WriteFailure) -> Option<Vec<bool>> {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code() == Some("ConditionalCheckFailed"))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether a cancelled transaction was only held up by another one (nothing applied, worth sending again).
fn conflicted(e: &WriteFailure) -> bool {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
            c.cancellation_reasons()
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
                && !c
                    .cancellation_reasons()
                    .iter()
                    .any(|r| r.code() == Some("ConditionalCheckFailed"))
        }
        Some(other) => matches!(
            other.code(),
            Some("TransactionConflictException" | "TransactionInProgressException")
        ),
        None => false,
    }
}

/// Whether `requests` requests are more than a limit of requests of `limits` (the rate limit, a requests quota)
/// allows at all: no admission's conditions can then hold.
fn passes_a_limit_alone(limits: &Limits, requests: u64) -> bool {
    limits
        .of(Family::Turns)
        .any(|(kind, limit)| kind.resource == Resource::Requests && requests as f64 > limit)
}

/// A short random pause before a transaction held up by another is sent again.
async fn pause() {
    tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(5..=40))).await;
}

/// Where each part of an admission is in its transaction, to read its cancellation.
struct AdmissionLayout {
    hold: usize,
    /// The counters with a condition (a limit of their period).
    periods: Vec<usize>,
    window: Option<usize>,
    limits: Option<usize>,
}

impl DynamoUsage {
    pub fn new(client: Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
            limits_seen: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Whether this ledger's counters are items of `table`: then a store writing to that table can settle a turn in
    /// the turn's own transaction ([`turn_settlement`]).
    pub(crate) fn counts_in(&self, table: &str) -> bool {
        self.table == table
    }

    async fn read_counters(
        &self,
        owner: &str,
        periods: &Periods,
    ) -> Result<(UsageSnapshot, Item), StoreError> {
        let windows: Vec<String> = (0..WINDOW_SPAN as i64)
            .map(|m| window_sk(periods.bucket + m))
            .collect();
        let mut wanted = vec![
            day_sk(periods),
            week_sk(periods),
            month_sk(periods),
            LIMITS_SK.to_string(),
        ];
        wanted.extend(windows.iter().cloned());
        let mut keys = KeysAndAttributes::builder().consistent_read(true);
        for sk in &wanted {
            keys = keys.keys(key(owner, sk));
        }
        let mut request =
            HashMap::from([(self.table.clone(), keys.build().expect("keys are set"))]);
        let mut found: HashMap<String, Item> = HashMap::new();
        // BatchGetItem may leave keys unprocessed under load: they are asked again (a read, safe to repeat).
        for _ in 0..5 {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .instrument(tracing::info_span!("store.usage.batch_get_item"))
                .await
                .map_err(failed)?;
            for item in out
                .responses
                .unwrap_or_default()
                .remove(&self.table)
                .unwrap_or_default()
            {
                if let Some(AttributeValue::S(sk)) = item.get(SORT_KEY) {
                    found.insert(sk.clone(), item);
                }
            }
            match out.unprocessed_keys {
                Some(left) if !left.is_empty() => request = left,
                _ => {
                    let limits_item = found.remove(LIMITS_SK).unwrap_or_default();
                    let period = |sk: &str| read_item::<PeriodItem>(found.get(sk), "period");
                    let mut window = RateWindow::default();
                    for (m, sk) in windows.iter().enumerate() {
                        window.counts[m] = period(sk).requests;
                    }
                    let snapshot = UsageSnapshot {
                        day: period(&wanted[0]).usage(),
                        week: period(&wanted[1]).usage(),
                        month: period(&wanted[2]).usage(),
                        window,
                        open_watches: 0,
                        overrides: limit_overrides(&limits_item),
                    };
                    return Ok((snapshot, limit_attributes(&limits_item)));
                }
            }
        }
        Err(StoreError::Unavailable(
            "the usage counters stayed unprocessed".into(),
        ))
    }

    /// The user's `LIMITS` item as this instance last read it, and whether it has read it at all.
    fn limits_seen(&self, owner: &str) -> Option<Item> {
        self.limits_seen
            .lock()
            .expect("never poisoned")
            .get(owner)
            .cloned()
    }

    /// Reads `owner`'s limits item afresh, and remembers it.
    async fn reread_limits(&self, owner: &str) -> Result<(), StoreError> {
        let item = self.read_limits(owner).await?;
        self.remember_limits(owner, item);
        Ok(())
    }

    fn remember_limits(&self, owner: &str, item: Item) {
        let mut seen = self.limits_seen.lock().expect("never poisoned");
        if seen.len() >= REMEMBERED_USERS {
            seen.clear();
        }
        seen.insert(owner.to_string(), item);
    }

    /// The item of `key` (a consistent read), `None` when there is none.
    async fn read(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let span = tracing::info_span!("store.usage.get_item");
        get_item(&self.client, &self.table, key, true, span).await
    }

    async fn read_limits(&self, owner: &str) -> Result<Item, StoreError> {
        let item = self.read(key(owner, LIMITS_SK)).await?;
        Ok(limit_attributes(&item.unwrap_or_default()))
    }

    /// The admission's transaction for `hold` under `limits` (the user's own, from `seen`, their item's limit
    /// attributes, which a condition check asserts).
    fn admission(
        &self,
        hold: &Hold,
        limits: &Limits,
        seen: Option<&Item>,
    ) -> (Vec<TransactWriteItem>, AdmissionLayout) {
        let owner = &hold.owner;
        let table = &self.table;
        let mut writes = vec![hold_put(table, hold)];
        let mut layout = AdmissionLayout {
            hold: 0,
            periods: Vec::new(),
            window: None,
            limits: None,
        };
        for counter in period_counters(&hold.periods) {
            if counter.turn_limits(limits).next().is_some() {
                layout.periods.push(writes.len());
            }
            writes.push(counter.reserve(table, owner, &hold.reserved, hold.requests, limits));
        }
        if let Some(rate) = limits.get(LimitKind::REQUESTS_PER_MINUTE) {
            let rate = rate as u64;
            layout.window = Some(writes.len());
            for m in 0..WINDOW_SPAN as i64 {
                // The request's own window (ending with its bucket) holds it to the rate; the later ones count it.
                let bucket = hold.periods.bucket + m;
                writes.push(window_admit(
                    table,
                    owner,
                    bucket,
                    hold.requests,
                    (m == 0).then_some(rate),
                ));
            }
        }
        if let Some(seen) = seen {
            layout.limits = Some(writes.len());
            writes.push(
                TransactWriteItem::builder()
                    .condition_check(limits_as_seen(table, owner, seen))
                    .build(),
            );
        }
        (writes, layout)
    }

    async fn admit_hold(
        &self,
        hold: &Hold,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        let owner = &hold.owner;
        for attempt in 1..=ATTEMPTS {
            // The user's own limits matter only where some limit is configured.
            // A user this instance has not seen is taken to have no item of their own: the condition check tells
            // otherwise, and then the item is read.
            let seen = configured
                .counts(Family::Turns)
                .then(|| self.limits_seen(owner).unwrap_or_default());
            let limits = match &seen {
                Some(item) => configured.for_user(&limit_overrides(item)),
                None => Limits::default(),
            };
            if passes_a_limit_alone(&limits, hold.requests) {
                // More requests than a limit of requests allows (a request of many model calls): no write can let
                // it in. The counters and the user's own item, read afresh, say which limit refused it.
                match self.refusal(hold, configured).await? {
                    Err(over) => return Ok(Err(over)),
                    // The user's item, read just now, allows it.
                    Ok(()) => continue,
                }
            }
            let (writes, layout) = self.admission(hold, &limits, seen.as_ref());
            let span = tracing::info_span!("store.usage.admit");
            let sent = transact(&self.client, writes, span).await;
            let e = match sent {
                Ok(_) => {
                    if let Some(item) = seen {
                        self.remember_limits(owner, item);
                    }
                    return Ok(Ok(()));
                }
                Err(e) => e,
            };
            if let Some(failed) = checks_failed(&e) {
                let failed_at = |i: Option<usize>| i.and_then(|i| failed.get(i)) == Some(&true);
                if failed_at(Some(layout.hold)) {
                    // The hold exists: an earlier attempt of this very admission landed, its answer lost.
                    return Ok(Ok(()));
                }
                if failed_at(layout.limits) {
                    // The operator changed the user's limits since they were read: read them again.
                    self.reread_limits(owner).await?;
                    continue;
                }
                let refused = layout.periods.iter().any(|i| failed_at(Some(*i)))
                    || (0..WINDOW_SPAN).any(|m| failed_at(layout.window.map(|w| w + m)));
                if refused {
                    match self.refusal(hold, configured).await? {
                        Err(over) => return Ok(Err(over)),
                        // Under the limits again by now (a turn settled): tried again.
                        Ok(()) => continue,
                    }
                }
            }
            if conflicted(&e) && attempt < ATTEMPTS {
                pause().await;
                continue;
            }
            // No answer, or one that does not say: the hold tells whether the admission landed.
            return match self.hold_version(hold).await {
                Ok(Some(_)) => Ok(Ok(())),
                _ => Err(failed(e)),
            };
        }
        Err(StoreError::Unavailable(
            "the admission was held up by the user's other turns".into(),
        ))
    }

    /// Why the counters refused `hold` under `configured`, read from them: which limit and until when (`Ok` when
    /// they allow it by now: a turn settled, or the user's own item read afresh).
    async fn refusal(
        &self,
        hold: &Hold,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        let (snapshot, item) = self.read_counters(&hold.owner, &hold.periods).await?;
        self.remember_limits(&hold.owner, item);
        let limits = configured.for_user(&snapshot.overrides);
        Ok(chat_core::check_requests(
            &limits,
            &snapshot,
            &hold.periods,
            hold.requests,
        ))
    }

    /// The version of `hold` as stored; `None` when it is not (never admitted, or settled for the last time).
    async fn hold_version(&self, hold: &Hold) -> Result<Option<u32>, StoreError> {
        let item = self.read(hold_key(hold)).await?;
        Ok(item.and_then(|item| {
            item.get("version")
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse().ok())
        }))
    }

    async fn settle_hold(
        &self,
        hold: &Hold,
        spent: &UsageTotals,
        next: Option<&Reserve>,
    ) -> Result<(), StoreError> {
        // Whether the hold is past the version this settlement was written for: then it landed already.
        let landed = |version: Option<u32>| version.is_none_or(|v| v > hold.version);
        for attempt in 1..=ATTEMPTS {
            let writes = settlement(&self.table, hold, spent, next, true);
            let span = tracing::info_span!("store.usage.settle");
            let sent = transact(&self.client, writes, span).await;
            let e = match sent {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if conflicted(&e) && attempt < ATTEMPTS {
                pause().await;
                continue;
            }
            // The hold's condition failed, or no answer came: read back whether it landed. Sent again only when it
            // did not, which the hold's condition keeps from ever counting twice.
            if landed(self.hold_version(hold).await?) {
                return Ok(());
            }
            if checks_failed(&e).is_some() || attempt == ATTEMPTS {
                return Err(failed(e));
            }
        }
        Err(StoreError::Unavailable(
            "the settlement was held up by the user's other turns".into(),
        ))
    }
}

impl DynamoUsage {
    /// Records the turn of `hold` (see [`UsageLedger::record`]) in the transaction the module's documentation
    /// describes.
    async fn record_turn(&self, hold: &Hold, spent: &UsageTotals) -> Result<(), StoreError> {
        for attempt in 1..=ATTEMPTS {
            let writes = recording(&self.table, hold, spent, true);
            let span = tracing::info_span!("store.usage.record");
            let e = match transact(&self.client, writes, span).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if checks_failed(&e).is_some_and(|failed| failed.first() == Some(&true)) {
                // The mark exists: an earlier attempt of this very record landed, its answer lost.
                return Ok(());
            }
            if conflicted(&e) && attempt < ATTEMPTS {
                pause().await;
                continue;
            }
            // No answer, or one that does not say: the mark tells whether the record landed. Sent again only when
            // it did not and the failure may pass; the mark's condition keeps a late landing from counting twice.
            let known = checks_failed(&e).is_some();
            let e = failed(e);
            if self.marked(record_key(hold)).await? {
                return Ok(());
            }
            if known || !matches!(e, StoreError::Unavailable(_)) || attempt == ATTEMPTS {
                return Err(e);
            }
        }
        Err(StoreError::Unavailable(
            "the record was held up by the user's other writes".into(),
        ))
    }

    /// Whether the item of `key` (a mark) is stored: a consistent read.
    async fn marked(&self, key: Item) -> Result<bool, StoreError> {
        Ok(self.read(key).await?.is_some())
    }

    /// Counts `upload` under `configured` (see [`UploadQuota::count_upload`]), in the transaction the module's
    /// documentation describes.
    async fn count(
        &self,
        upload: &Upload,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        if !configured.counts(Family::Uploads) {
            return Ok(Ok(()));
        }
        let owner = &upload.owner;
        for attempt in 1..=ATTEMPTS {
            // As for an admission: a user this instance has not seen is taken to have no item of their own, and
            // the condition check tells otherwise.
            let seen = self.limits_seen(owner).unwrap_or_default();
            let limits = configured.for_user(&limit_overrides(&seen));
            let Some(ceilings) = upload_ceilings(&limits, upload) else {
                // More than a whole day's quota at once: no write can let it in.
                match self.upload_refusal(upload, configured).await? {
                    Err(over) => return Ok(Err(over)),
                    // The user's item, read just now, allows it.
                    Ok(()) => continue,
                }
            };
            let mut writes = vec![upload_put(&self.table, upload)];
            for counter in period_counters(&upload.periods) {
                writes.push(upload_add(&self.table, upload, &counter, &ceilings));
            }
            let check = writes.len();
            writes.push(
                TransactWriteItem::builder()
                    .condition_check(limits_as_seen(&self.table, owner, &seen))
                    .build(),
            );
            let span = tracing::info_span!("store.usage.count_upload");
            let e = match transact(&self.client, writes, span).await {
                Ok(_) => {
                    self.remember_limits(owner, seen);
                    return Ok(Ok(()));
                }
                Err(e) => e,
            };
            if let Some(failed) = checks_failed(&e) {
                let failed_at = |i: usize| failed.get(i) == Some(&true);
                if failed_at(0) {
                    // The mark exists: an earlier attempt of this very count landed, its answer lost.
                    return Ok(Ok(()));
                }
                if failed_at(check) {
                    // The operator changed the user's limits since they were read: read them again.
                    self.reread_limits(owner).await?;
                    continue;
                }
                if (1..check).any(failed_at) {
                    match self.upload_refusal(upload, configured).await? {
                        Err(over) => return Ok(Err(over)),
                        // The counters read allow it (the user's own item, read afresh): tried again.
                        Ok(()) => continue,
                    }
                }
            }
            if conflicted(&e) && attempt < ATTEMPTS {
                pause().await;
                continue;
            }
            // No answer, or one that does not say: the mark tells whether the count landed. Sent again only when
            // it did not and the failure may pass; the mark's condition keeps a late landing from counting twice.
            let known = checks_failed(&e).is_some();
            let e = failed(e);
            if self.upload_counted(upload).await? {
                return Ok(Ok(()));
            }
            if known || !matches!(e, StoreError::Unavailable(_)) || attempt == ATTEMPTS {
                return Err(e);
            }
        }
        Err(StoreError::Unavailable(
            "the upload's count was held up by the user's other writes".into(),
        ))
    }

    /// Why the counters refused `upload`, read from them: which limit and how much is left (`Ok` when they allow it
    /// by now: a new day, or the user's own item read afresh).
    async fn upload_refusal(
        &self,
        upload: &Upload,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        let (snapshot, item) = self.read_counters(&upload.owner, &upload.periods).await?;
        self.remember_limits(&upload.owner, item);
        let limits = configured.for_user(&snapshot.overrides);
        Ok(chat_core::check_upload(&limits, &snapshot, upload))
    }

    /// Whether `upload`'s count is stored (its mark is).
    async fn upload_counted(&self, upload: &Upload) -> Result<bool, StoreError> {
        self.marked(upload_key(upload)).await
    }
}

impl DynamoUsage {
    /// Takes the first of `owner`'s `limit` places free at `now`, for a watch until `until`.
    async fn take_place_of(
        &self,
        owner: &str,
        limit: u32,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<WatchPlace, StoreError> {
        let mut places = HeldPlaces::default();
        for slot in 0..limit {
            let lease = WatchLease::new(owner, slot, until);
            let sent = watch_take(&lease, now.unix_timestamp())
                .update_item(
                    self.client
                        .update_item()
                        .table_name(&self.table)
                        .return_values_on_condition_check_failure(
                            ReturnValuesOnConditionCheckFailure::AllOld,
                        ),
                    watch_key(owner, slot),
                )
                .send()
                .instrument(tracing::info_span!("store.usage.take_watch_place"))
                .await;
            match sent {
                Ok(_) => return Ok(WatchPlace::Taken(lease)),
                Err(SdkError::ServiceError(ctx))
                    if matches!(
                        ctx.err(),
                        UpdateItemError::ConditionalCheckFailedException(_)
                    ) =>
                {
                    let UpdateItemError::ConditionalCheckFailedException(refused) = ctx.into_err()
                    else {
                        unreachable!("matched above")
                    };
                    let held: WatchItem = read_item(refused.item.as_ref(), "watch");
                    let ends = OffsetDateTime::from_unix_timestamp(held.until).unwrap_or(until);
                    places.held_until(ends);
                }
                Err(e) => {
                    // No answer: whether the place was taken is read back, never taken again blindly.
                    let error = failed(e);
                    let item = self.read(watch_key(owner, slot)).await?;
                    let held: WatchItem = read_item(item.as_ref(), "watch");
                    if held.watch_id == lease.id {
                        return Ok(WatchPlace::Taken(lease));
                    }
                    return Err(error);
                }
            }
        }
        Ok(places.full(until))
    }

    /// How many of `owner`'s places are held at `now`.
    async fn places_held(&self, owner: &str, now: OffsetDateTime) -> Result<u64, StoreError> {
        let query = self.client.query().table_name(&self.table);
        let out = with_sort_key_prefix(query, usage_pk(owner), WATCH_SK_PREFIX)
            .send()
            .instrument(tracing::info_span!("store.usage.query"))
            .await
            .map_err(failed)?;
        let now = now.unix_timestamp();
        Ok(out
            .items
            .unwrap_or_default()
            .iter()
            .map(|item| read_item::<WatchItem>(Some(item), "watch"))
            .filter(|w| w.until >= now)
            .count() as u64)
    }
}

impl WatchSlots for DynamoUsage {
    fn take_place<'a>(
        &'a self,
        owner: &'a str,
        limit: u32,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> UsageFuture<'a, WatchPlace> {
        Box::pin(self.take_place_of(owner, limit, now, until))
    }

    fn give_back<'a>(&'a self, lease: &'a WatchLease) -> UsageFuture<'a, ()> {
        Box::pin(async move {
            let sent = watch_give_back(lease)
                .update_item(
                    self.client.update_item().table_name(&self.table),
                    watch_key(&lease.owner, lease.slot),
                )
                .send()
                .instrument(tracing::info_span!("store.usage.give_back_watch_place"))
                .await;
            match sent {
                // Given back before, or taken by another since its time passed: nothing of it is this watch's.
                Err(SdkError::ServiceError(ctx))
                    if matches!(
                        ctx.err(),
                        UpdateItemError::ConditionalCheckFailedException(_)
                    ) =>
                {
                    Ok(())
                }
                // Setting the same `until` again is harmless: sent again it changes nothing more.
                other => other.map(|_| ()).map_err(failed),
            }
        })
    }

    fn held<'a>(&'a self, owner: &'a str, now: OffsetDateTime) -> UsageFuture<'a, u64> {
        Box::pin(self.places_held(owner, now))
    }
}

impl UploadQuota for DynamoUsage {
    fn count_upload<'a>(
        &'a self,
        upload: &'a Upload,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>> {
        Box::pin(self.count(upload, limits))
    }
}

impl UsageLedger for DynamoUsage {
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot> {
        Box::pin(async move {
            let mut snapshot = self.read_counters(owner, periods).await?.0;
            snapshot.open_watches = self.places_held(owner, periods.now).await?;
            Ok(snapshot)
        })
    }

    fn admit<'a>(
        &'a self,
        hold: &'a Hold,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>> {
        Box::pin(self.admit_hold(hold, limits))
    }

    fn settle<'a>(
        &'a self,
        hold: &'a Hold,
        spent: &'a UsageTotals,
        next: Option<Reserve>,
    ) -> UsageFuture<'a, ()> {
        Box::pin(async move { self.settle_hold(hold, spent, next.as_ref()).await })
    }

    fn record<'a>(&'a self, hold: &'a Hold, spent: &'a UsageTotals) -> UsageFuture<'a, ()> {
        Box::pin(self.record_turn(hold, spent))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
