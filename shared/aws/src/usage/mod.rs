//! The per-user usage counters in the chats' DynamoDB table, so that quotas hold across every instance of the
//! functions: one ledger item per user holds every running counter (its periods', its rate windows', its turns'
//! holds), changed by one conditional update that makes every check and add in one atomic step.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | the user's ledger | `USAGE#{owner}` | `LEDGER` | per period, `{period}#{attribute}`: `DAY#2026-12-07#…`, `WEEK#2026-W50#…` (the ISO week), `MONTH#2026-12#…`, each the token counts, `costUsd`, `turns`; `requests` (admitted); `reservedTokens`, `reservedCostUsd` (held by turns not settled); `heldTokens`, `heldCostUsd` (spent and held: what the quotas are checked against); `uploadedDocuments`, `uploadedBytes` (counted while an upload quota is configured); per window of the rate limit `RATE#000176423456` (its last bucket of 10 s): the requests admitted in it; per open turn `HOLD#{turn id}`: a map of `reservedTokens`, `reservedCostUsd`, `day`, `week`, `month`, `version`, `expiresAt`; `expiresAt` (a year past its last write) |
//! | a turn's record mark (no limit held it) | `USAGE#{owner}` | `TURN#{turn id}` | `expiresAt` |
//! | an upload's mark | `USAGE#{owner}` | `UPLOAD#{upload id}` | `documents`, `bytes`, `day`, `expiresAt` |
//! | a place of an open watch of documents | `USAGE#{owner}` | `WATCH#{0 up to QUOTA_OPEN_WATCHES}` | `watchId` (its holder), `until` (Unix seconds: free after; 0 once given back), `expiresAt` |
//! | the operator's limits for the user | `USAGE#{owner}` | `LIMITS` | one attribute per limit, `{resource}Per{Period}` (`tokensPerDay`, `requestsPerWeek`; `ratePerMinute` for requests per minute) |
//!
//! **A turn no limit holds** (none configured) is written once, when it ends: one `TransactWriteItems` of two items
//! puts its record mark (unless it exists) and adds its request, what it spent and the turn to the ledger's day's,
//! week's and month's counters; nothing is written before its model call. A record whose answer is lost is read
//! back by its mark, and sent again only when the mark is not there. In a turn its store writes to this table, the
//! same writes go in the turn's own transaction ([`DynamoUsage::turn_settlement`]).
//!
//! **Admission** (under a limit) is one `UpdateItem` of the ledger: the turn's hold is set on condition that the
//! ledger does not hold it yet, the day's, the week's and the month's counters add the request and its reservation
//! on condition that what they hold is under each limit of their period (built from the list of limits in force, the
//! user's own from their `LIMITS` item), and the request is added to the seven windows it falls in on condition that
//! its own holds fewer than the rate limit. Admissions of one user at once are updates of one item, applied one
//! after the other, each checking what the one before left. Refused, nothing is written, and the ledger as it was
//! (`ReturnValuesOnConditionCheckFailure = ALL_OLD`) says which limit refused and until when, without another read of
//! the counters. A hold that counts several requests (one per model call of a request to embed: [`Hold::requests`])
//! adds them all, on condition that each count of requests stays within its limit once they are added; one of more
//! requests than a limit is refused without a write.
//!
//! **The operator's limits** (the `LIMITS` item, put by hand) are read by each instance with the ledger (one
//! `BatchGetItem`) the first time it admits a user, again once its copy is older than [`LIMITS_LIFE`], and again
//! whenever an admission or an upload is refused (a raise applies at once). A change therefore applies within a
//! minute on every instance.
//!
//! **A settlement** is one `UpdateItem` of the ledger too: the hold moves on from the version it was written for (or
//! is removed, the turn over), and the day's, the week's and the month's counters add what was spent and the change
//! of the reservation. The hold's condition makes every write of a turn happen once: an attempt sent again after its
//! answer was lost fails it, and the ledger it returns shows it landed. A turn's last settlement goes in the turn's
//! own transaction when the store writes to this table ([`DynamoUsage::turn_settlement`]), the same update of the
//! ledger beside the chat's items.
//!
//! **An upload's count** is one `TransactWriteItems` of two items: its mark is put (unless it exists), and the
//! ledger's day's, week's and month's counters add its documents and bytes on condition that the sums stay within
//! the upload limits of their period (each counter at most the limit less what the upload adds). Refused, nothing is
//! written, and the ledger and the operator's item, read afresh, say which limit refused and how much is left. A
//! count whose answer is lost (no answer in time) is read back by its mark, and sent again only when the mark is not
//! there: the mark's condition keeps it from ever counting twice. Where no upload quota is configured, nothing is
//! written.
//!
//! **What is stale** in a ledger (counters of past periods, windows past, holds of turns that never settled past
//! their expiry) is removed by the writes made anyway: each instance remembers, per user, what the last image of
//! the ledger it saw (an update's `ALL_NEW`, a refusal's `ALL_OLD`, a read) holds that is stale, and the next write
//! removes it (never what that write itself sets or adds, nor anything of a period after its own or of a window
//! less than a window before its own). A write that sees no image (a record, a turn's own transaction) removes the
//! counters of the day, the week and the month two before its own (the day before yesterday's, …), so that a user
//! with no limit, whose ledger no one reads, leaves at most the periods before a gap of two or more.
//!
//! **Upgrade** from the layout of one item per period: an instance that meets a user for the first time reads their
//! counters' items of the periods in progress with the ledger; where there is no ledger yet, it is seeded from them
//! (one conditional put, once). Holds and rate windows of that layout are not carried over.
//!
//! **A watch's place** is one conditional `UpdateItem`: the first place that is free (absent, or its `until`
//! passed) is taken, each tried in turn; every place held, nothing is written, and the earliest `until` says when to
//! try again. A take whose answer is lost is read back (the place holds the watch's id, or it does not). Giving it
//! back sets `until` to 0 on condition that the place still holds the watch's id; a watch that never gives it back
//! (its process gone) frees it when its `until` passes.
//!
//! Each item's writes are built in [`items`]; here, the calls they go in and what a refusal means.

mod items;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use chat_core::{
    Family, HeldPlaces, Hold, Limits, OverLimit, Periods, Reserve, Resource, StoreError, Upload,
    UploadQuota, UsageFuture, UsageLedger, UsageSnapshot, UsageTotals, WatchLease, WatchPlace,
    WatchSlots, upload_ceilings,
};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::dynamo::{Expression, Item, WriteFailure, failed, get_item, transact};
use crate::table::{SORT_KEY, with_sort_key_prefix};
use items::{
    LEDGER_SK, LIMITS_SK, WATCH_SK_PREFIX, WatchItem, admission, day_sk, hold_version, key,
    ledger_key, limit_attributes, limit_overrides, month_sk, previous_periods, read_item,
    record_key, record_put, recording, removing, seed, settlement, snapshot, stale_in, upload_add,
    upload_key, upload_put, usage_pk, watch_give_back, watch_key, watch_take, week_sk,
};

/// How often a write that another one of the same user's held up (it was not applied) is sent again, and an
/// admission whose refusal the ledger and a fresh read of the limits do not confirm (a turn settled meanwhile, the
/// limits raised) is tried again.
const ATTEMPTS: u32 = 8;

/// How many users one instance remembers before it forgets them all (and reads each again once).
const REMEMBERED_USERS: usize = 10_000;

/// How long an instance trusts its copy of a user's `LIMITS` item: a change an operator makes applies within it.
pub const LIMITS_LIFE: Duration = Duration::from_secs(60);

/// What an instance knows of one user.
#[derive(Clone)]
struct Known {
    /// Their `LIMITS` item as last read (its limit attributes only; empty: no item).
    limits: Item,
    /// When it was read.
    read_at: Instant,
    /// What the last image of their ledger this instance saw holds that is stale.
    stale: BTreeSet<String>,
}

/// A user's counters in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoUsage {
    client: Client,
    table: String,
    known: Arc<Mutex<HashMap<String, Known>>>,
}

/// What a read of a user's items gave.
struct Loaded {
    limits: Item,
    ledger: Option<Item>,
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

/// How an update of the ledger ended.
enum Updated {
    /// Applied.
    Done,
    /// Its condition failed: the ledger as it was (empty: there was none).
    Refused(Item),
    /// Held up by a transaction of the same user's (nothing applied, worth sending again).
    HeldUp,
    /// No answer, or one that does not say.
    Unknown(StoreError),
}

/// Whether `requests` requests are more than a limit of requests of `limits` (the rate limit, a requests quota)
/// allows at all: no admission's conditions can then hold.
fn passes_a_limit_alone(limits: &Limits, requests: u64) -> bool {
    limits
        .of(Family::Turns)
        .any(|(kind, limit)| kind.resource == Resource::Requests && requests as f64 > limit)
}

/// A short random pause before a write held up by another is sent again.
async fn pause() {
    tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(5..=40))).await;
}

impl DynamoUsage {
    pub fn new(client: Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
            known: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Whether this ledger's counters are items of `table`: then a store writing to that table can settle a turn in
    /// the turn's own transaction ([`DynamoUsage::turn_settlement`]).
    pub(crate) fn counts_in(&self, table: &str) -> bool {
        self.table == table
    }

    /// The writes that make a turn's last settlement in the turn's own transaction, when its store writes to this
    /// ledger's table: the same update of the ledger as [`UsageLedger::settle`] makes with no next reservation, the
    /// hold removed without a condition (the store writes the turn once: a retried attempt is found by its token),
    /// so that the counters read the same whichever way a turn was settled; or, for a turn not admitted, the same as
    /// [`UsageLedger::record`] makes, its mark put without a condition (a record through the ledger after a turn's
    /// write that landed, its answer lost, finds it and changes nothing).
    pub(crate) fn turn_settlement(
        &self,
        hold: &Hold,
        spent: &UsageTotals,
    ) -> Vec<TransactWriteItem> {
        let stale = self.stale(&hold.owner, &hold.periods);
        let ledger = ledger_key(&hold.owner);
        if hold.admitted {
            vec![removing(settlement(hold, spent, None, false), &stale).update(&self.table, ledger)]
        } else {
            vec![
                record_put(&self.table, hold, false),
                removing(recording(hold, spent), &stale).update(&self.table, ledger),
            ]
        }
    }

    fn with_known<T>(&self, f: impl FnOnce(&mut HashMap<String, Known>) -> T) -> T {
        f(&mut self.known.lock().expect("never poisoned"))
    }

    /// The user's `LIMITS` item as this instance read it less than [`LIMITS_LIFE`] ago.
    fn fresh_limits(&self, owner: &str) -> Option<Item> {
        self.with_known(|known| {
            known
                .get(owner)
                .filter(|k| k.read_at.elapsed() < LIMITS_LIFE)
                .map(|k| k.limits.clone())
        })
    }

    /// What a write at `periods` removes: the stale attributes this instance last saw in the user's ledger, or, where
    /// it saw none, the counters of the periods before.
    fn stale(&self, owner: &str, periods: &Periods) -> BTreeSet<String> {
        let seen = self.with_known(|known| known.get(owner).map(|k| k.stale.clone()));
        match seen {
            Some(stale) if !stale.is_empty() => stale,
            _ => previous_periods(periods),
        }
    }

    /// Remembers `limits`, read just now, for `owner`.
    fn remember_limits(&self, owner: &str, limits: Item) {
        self.with_known(|known| {
            if known.len() >= REMEMBERED_USERS {
                known.clear();
            }
            let entry = known.entry(owner.to_string()).or_insert_with(|| Known {
                limits: Item::new(),
                read_at: Instant::now(),
                stale: BTreeSet::new(),
            });
            entry.limits = limits;
            entry.read_at = Instant::now();
        });
    }

    /// Remembers what `ledger`, an image seen at `periods`, holds that is stale.
    fn remember_ledger(&self, owner: &str, ledger: &Item, periods: &Periods) {
        let stale = stale_in(ledger, periods);
        self.with_known(|known| {
            if let Some(k) = known.get_mut(owner) {
                k.stale = stale;
            }
        });
    }

    /// The item of `key` (a consistent read), `None` when there is none.
    async fn read(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let span = tracing::info_span!("store.usage.get_item");
        get_item(&self.client, &self.table, key, true, span).await
    }

    /// Reads `owner`'s limits item afresh, and remembers it.
    async fn reread_limits(&self, owner: &str) -> Result<Item, StoreError> {
        let item = self.read(key(owner, LIMITS_SK)).await?;
        let limits = limit_attributes(&item.unwrap_or_default());
        self.remember_limits(owner, limits.clone());
        Ok(limits)
    }

    /// `owner`'s `LIMITS` item and ledger, read in one `BatchGetItem`, and remembered. An instance that meets the
    /// user for the first time reads their counters' items of the layout before the ledger too, and where they have
    /// no ledger yet, seeds it from them (once).
    async fn load(&self, owner: &str, periods: &Periods) -> Result<Loaded, StoreError> {
        let first = self.with_known(|known| !known.contains_key(owner));
        let mut wanted = vec![LIMITS_SK.to_string(), LEDGER_SK.to_string()];
        if first {
            wanted.extend([day_sk(periods), week_sk(periods), month_sk(periods)]);
        }
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
                    let limits = limit_attributes(&found.remove(LIMITS_SK).unwrap_or_default());
                    let mut ledger = found.remove(LEDGER_SK);
                    let old: Vec<Item> = found.into_values().collect();
                    if ledger.is_none() && !old.is_empty() {
                        ledger = Some(self.seed(owner, periods, &old).await?);
                    }
                    self.remember_limits(owner, limits.clone());
                    if let Some(ledger) = &ledger {
                        self.remember_ledger(owner, ledger, periods);
                    }
                    return Ok(Loaded { limits, ledger });
                }
            }
        }
        Err(StoreError::Unavailable(
            "the usage counters stayed unprocessed".into(),
        ))
    }

    /// Seeds `owner`'s ledger from `old`, their counters' items of the layout before it, unless a ledger exists by
    /// now; the ledger as seeded.
    async fn seed(&self, owner: &str, periods: &Periods, old: &[Item]) -> Result<Item, StoreError> {
        let (e, seeded) = seed(periods, old);
        let sent = e
            .update_item(
                self.client.update_item().table_name(&self.table),
                ledger_key(owner),
            )
            .send()
            .instrument(tracing::info_span!("store.usage.seed"))
            .await;
        match sent {
            Ok(_) => Ok(seeded),
            // Another write made the ledger meanwhile: it stands.
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(self.read(ledger_key(owner)).await?.unwrap_or_default())
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// The user's limits, as this instance knows them within [`LIMITS_LIFE`], else read.
    async fn limits_of(&self, owner: &str, periods: &Periods) -> Result<Item, StoreError> {
        match self.fresh_limits(owner) {
            Some(limits) => Ok(limits),
            None => Ok(self.load(owner, periods).await?.limits),
        }
    }

    /// Sends `e` as one `UpdateItem` of `owner`'s ledger, removing what is stale, traced as `span`.
    async fn update_ledger(
        &self,
        owner: &str,
        periods: &Periods,
        e: Expression,
        span: tracing::Span,
    ) -> Updated {
        let e = removing(e, &self.stale(owner, periods));
        let sent = e
            .update_item(
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .return_values(ReturnValue::AllNew)
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    ),
                ledger_key(owner),
            )
            .send()
            .instrument(span)
            .await;
        match sent {
            Ok(out) => {
                let ledger = out.attributes.unwrap_or_default();
                self.remember_ledger(owner, &ledger, periods);
                Updated::Done
            }
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
                let ledger = refused.item.unwrap_or_default();
                self.remember_ledger(owner, &ledger, periods);
                Updated::Refused(ledger)
            }
            Err(e) => {
                let held_up = e.as_service_error().is_some_and(|e| {
                    matches!(
                        e.code(),
                        Some("TransactionConflictException" | "TransactionInProgressException")
                    )
                });
                if held_up {
                    Updated::HeldUp
                } else {
                    Updated::Unknown(failed(e))
                }
            }
        }
    }

    async fn admit_hold(
        &self,
        hold: &Hold,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        let owner = &hold.owner;
        let periods = &hold.periods;
        for attempt in 1..=ATTEMPTS {
            // The user's own limits matter only where some limit is configured.
            let limits = if configured.counts(Family::Turns) {
                configured.for_user(&limit_overrides(&self.limits_of(owner, periods).await?))
            } else {
                Limits::default()
            };
            if passes_a_limit_alone(&limits, hold.requests) {
                // More requests than a limit of requests allows (a request of many model calls): no write can let
                // it in. The counters and the user's own item, read afresh, say which limit refused it.
                let loaded = self.load(owner, periods).await?;
                match self.refusal(hold, configured, loaded) {
                    Err(over) => return Ok(Err(over)),
                    // The user's item, read just now, allows it.
                    Ok(()) => continue,
                }
            }
            let span = tracing::info_span!("store.usage.admit");
            let e = admission(hold, &limits);
            match self.update_ledger(owner, periods, e, span).await {
                Updated::Done => return Ok(Ok(())),
                Updated::Refused(ledger) => {
                    if hold_version(Some(&ledger), &hold.id).is_some() {
                        // The hold exists: an earlier attempt of this very admission landed, its answer lost.
                        return Ok(Ok(()));
                    }
                    // Refused by a limit: the operator's item read afresh (a raise applies at once).
                    let limits = self.reread_limits(owner).await?;
                    let loaded = Loaded {
                        limits,
                        ledger: Some(ledger),
                    };
                    match self.refusal(hold, configured, loaded) {
                        Err(over) => return Ok(Err(over)),
                        // Under the limits by now (a turn settled, the limits raised): tried again.
                        Ok(()) => continue,
                    }
                }
                Updated::HeldUp if attempt < ATTEMPTS => pause().await,
                Updated::HeldUp => break,
                Updated::Unknown(e) => {
                    // No answer, or one that does not say: the ledger tells whether the admission landed.
                    let ledger = self.read(ledger_key(owner)).await?;
                    if hold_version(ledger.as_ref(), &hold.id).is_some() {
                        return Ok(Ok(()));
                    }
                    return Err(e);
                }
            }
        }
        Err(StoreError::Unavailable(
            "the admission was held up by the user's other turns".into(),
        ))
    }

    /// Why the ledger refused `hold` under `configured`, read from `loaded`: which limit and until when (`Ok` when
    /// it allows it by now: a turn settled, or the user's own item read afresh).
    fn refusal(&self, hold: &Hold, configured: &Limits, loaded: Loaded) -> Result<(), OverLimit> {
        let snapshot = snapshot(loaded.ledger.as_ref(), &hold.periods, &loaded.limits);
        let limits = configured.for_user(&snapshot.overrides);
        chat_core::check_requests(&limits, &snapshot, &hold.periods, hold.requests)
    }

    async fn settle_hold(
        &self,
        hold: &Hold,
        spent: &UsageTotals,
        next: Option<&Reserve>,
    ) -> Result<(), StoreError> {
        // Whether the hold is past the version this settlement was written for: then it landed already.
        let landed =
            |ledger: Option<&Item>| hold_version(ledger, &hold.id).is_none_or(|v| v > hold.version);
        for attempt in 1..=ATTEMPTS {
            let span = tracing::info_span!("store.usage.settle");
            let e = settlement(hold, spent, next, true);
            let error = match self
                .update_ledger(&hold.owner, &hold.periods, e, span)
                .await
            {
                Updated::Done => return Ok(()),
                // The hold's condition failed: landed before (its answer lost), or a settlement of another version.
                Updated::Refused(ledger) if landed(Some(&ledger)) => return Ok(()),
                Updated::Refused(_) => {
                    return Err(StoreError::Failed(format!(
                        "the hold of turn {} is not at version {}",
                        hold.id, hold.version
                    )));
                }
                Updated::HeldUp if attempt < ATTEMPTS => {
                    pause().await;
                    continue;
                }
                Updated::HeldUp => break,
                Updated::Unknown(e) => e,
            };
            // No answer: read back whether it landed. Sent again only when it did not, which the hold's condition
            // keeps from ever counting twice.
            if landed(self.read(ledger_key(&hold.owner)).await?.as_ref()) {
                return Ok(());
            }
            if attempt == ATTEMPTS {
                return Err(error);
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
            let stale = self.stale(&hold.owner, &hold.periods);
            let ledger = removing(recording(hold, spent), &stale);
            let writes = vec![
                record_put(&self.table, hold, true),
                ledger.update(&self.table, ledger_key(&hold.owner)),
            ];
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
        let periods = &upload.periods;
        for attempt in 1..=ATTEMPTS {
            let seen = self.limits_of(owner, periods).await?;
            let limits = configured.for_user(&limit_overrides(&seen));
            let Some(ceilings) = upload_ceilings(&limits, upload) else {
                // More than a whole day's quota at once: no write can let it in.
                match self.upload_refusal(upload, configured).await? {
                    Err(over) => return Ok(Err(over)),
                    // The user's item, read just now, allows it.
                    Ok(()) => continue,
                }
            };
            let stale = self.stale(owner, periods);
            let ledger = removing(upload_add(upload, &ceilings), &stale);
            let writes = vec![
                upload_put(&self.table, upload),
                ledger.update(&self.table, ledger_key(owner)),
            ];
            let span = tracing::info_span!("store.usage.count_upload");
            let e = match transact(&self.client, writes, span).await {
                Ok(_) => return Ok(Ok(())),
                Err(e) => e,
            };
            if let Some(failed) = checks_failed(&e) {
                let failed_at = |i: usize| failed.get(i) == Some(&true);
                if failed_at(0) {
                    // The mark exists: an earlier attempt of this very count landed, its answer lost.
                    return Ok(Ok(()));
                }
                if failed_at(1) {
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

    /// Why the ledger refused `upload`, read from it and the operator's item afresh: which limit and how much is
    /// left (`Ok` when they allow it by now: a new day, or the user's own item read afresh).
    async fn upload_refusal(
        &self,
        upload: &Upload,
        configured: &Limits,
    ) -> Result<Result<(), OverLimit>, StoreError> {
        let loaded = self.load(&upload.owner, &upload.periods).await?;
        let snapshot = snapshot(loaded.ledger.as_ref(), &upload.periods, &loaded.limits);
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
            let loaded = self.load(owner, periods).await?;
            let mut read = snapshot(loaded.ledger.as_ref(), periods, &loaded.limits);
            read.open_watches = self.places_held(owner, periods.now).await?;
            Ok(read)
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
