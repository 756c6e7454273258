//! The usage items (a user's ledger of counters, holds and rate windows; a turn's record mark, an upload's mark,
//! the places of open watches, the operator's limits): where each sits, how it reads, and every write of each,
//! built here only, so that a new counter is one change here. The conditions and the attributes of the limits are
//! built from the list of limits in force, one rule for every limit.
//!
//! The ledger item holds every running counter of its user as flat attributes (DynamoDB adds to no attribute of a
//! map that does not exist yet): a period's counter `{period}#{attribute}` (`DAY#2026-12-07#heldTokens`), a rate
//! window `RATE#{bucket}` (its requests), a turn's hold `HOLD#{turn id}` (a map, set whole).

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use chat_core::{
    Family, Hold, LimitKind, LimitOverrides, Limits, Period, PeriodUsage, Periods, RateWindow,
    Reserve, Resource, Upload, UploadUsage, UsageSnapshot, UsageTotals, WINDOW_SPAN,
};
use serde::Deserialize;
use time::Duration;

use crate::dynamo::{Expression, Item, n, s};
use crate::table::{EXPIRES_AT, PARTITION_KEY, SORT_KEY, StoredTotals, item_key, token_attributes};

/// How long the ledger item is kept past its last write: as long as a month's counter was (an operator can still
/// read a user's month a year on), so that it outlives every counter and hold it holds.
const LEDGER_KEPT_SECONDS: i64 = 400 * 86_400;
/// How long a hold is kept (in the ledger: until a write finds it past this and removes it): a turn lasts minutes;
/// a hold left by a turn that never settled is only bookkeeping, its reservation being in the counters.
const HOLD_KEPT_SECONDS: i64 = 2 * 86_400;
/// An upload's mark: only to read back a count whose answer was lost, so as long as its day's counter.
const UPLOAD_KEPT_SECONDS: i64 = 2 * 86_400;
/// A turn's record mark: the same, for a record whose answer was lost.
const RECORD_KEPT_SECONDS: i64 = 2 * 86_400;
/// At most so many stale attributes are removed by one write (the rest by the next), so that its expression stays
/// well within DynamoDB's 4 KB.
const REMOVED_PER_WRITE: usize = 60;

/// Every attribute a period's counter may have.
const COUNTER_ATTRIBUTES: [&str; 14] = [
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "cacheReadInputTokens",
    "cacheWriteInputTokens",
    "costUsd",
    "turns",
    "requests",
    "reservedTokens",
    "reservedCostUsd",
    "heldTokens",
    "heldCostUsd",
    "uploadedDocuments",
    "uploadedBytes",
];

/// The attribute of the operator's item that sets `kind` for its user: `{resource}Per{Period}` in camel case
/// (`tokensPerDay`, `uploadedBytesPerWeek`), `ratePerMinute` for requests per minute, its name from before, and the
/// resource alone for what is held at once (`openWatches`).
pub(super) fn limit_attribute(kind: LimitKind) -> String {
    if kind == LimitKind::REQUESTS_PER_MINUTE {
        return "ratePerMinute".into();
    }
    let mut name = String::new();
    let mut upper = false;
    for c in kind.resource.name().chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                name.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => name.push(c),
        }
    }
    if kind.period == Period::AtOnce {
        return name;
    }
    let period = kind.period.name();
    format!(
        "{name}Per{}{}",
        period[..1].to_ascii_uppercase(),
        &period[1..]
    )
}

/// A period's counters as stored (absent attributes are zero).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct PeriodItem {
    #[serde(flatten)]
    spent: StoredTotals,
    turns: u64,
    reserved_tokens: i64,
    reserved_cost_usd: Option<f64>,
    pub(super) requests: u64,
    uploaded_documents: u64,
    uploaded_bytes: u64,
}

/// The operator's item: each limit attribute it holds. An item with an attribute that does not read (an operator's
/// typo: not a number, a fraction of a whole resource, below zero) counts as empty, said in the log.
pub(super) fn limit_overrides(item: &Item) -> LimitOverrides {
    let mut overrides = LimitOverrides::default();
    for kind in LimitKind::ALL {
        let name = limit_attribute(kind);
        let Some(value) = item.get(&name) else {
            continue;
        };
        let amount = value
            .as_n()
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .filter(|v| kind.resource.is_dollars() || v.fract() == 0.0);
        match amount {
            Some(amount) => overrides.set(kind, Some(amount)),
            None => {
                tracing::warn!(item = "limits", attribute = %name, "a usage item does not read; taken as empty");
                return LimitOverrides::default();
            }
        }
    }
    overrides
}

impl PeriodItem {
    /// What was uploaded in the period.
    fn uploads(&self) -> UploadUsage {
        UploadUsage {
            documents: self.uploaded_documents,
            bytes: self.uploaded_bytes,
        }
    }

    pub(super) fn usage(&self) -> PeriodUsage {
        PeriodUsage {
            spent: UsageTotals::from(&self.spent),
            turns: self.turns,
            reserved: Reserve {
                tokens: self.reserved_tokens.max(0) as u64,
                cost_usd: self.reserved_cost_usd.map(|c| c.max(0.0)),
            },
            requests: self.requests,
            uploads: self.uploads(),
        }
    }
}

pub(super) fn usage_pk(owner: &str) -> String {
    format!("USAGE#{owner}")
}

pub(super) fn day_sk(periods: &Periods) -> String {
    format!("DAY#{}", periods.day)
}

pub(super) fn week_sk(periods: &Periods) -> String {
    format!("WEEK#{}", periods.week)
}

pub(super) fn month_sk(periods: &Periods) -> String {
    format!("MONTH#{}", periods.month)
}

/// The attribute of the ledger that counts the requests of the window that ends with `bucket`.
pub(super) fn window_attribute(bucket: i64) -> String {
    format!("RATE#{bucket:012}")
}

/// The attribute of the ledger that holds the hold of turn `id`.
pub(super) fn hold_attribute(id: &str) -> String {
    format!("HOLD#{id}")
}

fn record_sk(id: &str) -> String {
    format!("TURN#{id}")
}

fn upload_sk(id: &str) -> String {
    format!("UPLOAD#{id}")
}

pub(super) const LIMITS_SK: &str = "LIMITS";
pub(super) const LEDGER_SK: &str = "LEDGER";

/// The sort keys of the places of open watches begin so.
pub(super) const WATCH_SK_PREFIX: &str = "WATCH#";
/// How long a watch's place is kept past its holder's time: only for the table's expiry to take it away.
const WATCH_KEPT_SECONDS: i64 = 3_600;

/// The key of `owner`'s place `slot` of an open watch.
pub(super) fn watch_key(owner: &str, slot: u32) -> Item {
    key(owner, &format!("{WATCH_SK_PREFIX}{slot}"))
}

/// `lease` taking its place, on condition that the place is free at `now` (never taken, given back, or its holder's
/// time passed).
pub(super) fn watch_take(lease: &chat_core::WatchLease, now: i64) -> Expression {
    let until = lease.until.unix_timestamp();
    Expression::new()
        .set(WATCH_ID, s(&lease.id))
        .set(WATCH_UNTIL, n(until))
        .set(EXPIRES_AT, n(until + WATCH_KEPT_SECONDS))
        .if_absent_or(WATCH_UNTIL, "<", n(now))
}

/// `lease`'s place given back (its time ended now), on condition that it still holds it.
pub(super) fn watch_give_back(lease: &chat_core::WatchLease) -> Expression {
    Expression::new()
        .set(WATCH_UNTIL, n(0))
        .if_equals(WATCH_ID, s(&lease.id))
}

/// A place's holder and until when (Unix seconds) it holds it.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct WatchItem {
    pub(super) watch_id: String,
    pub(super) until: i64,
}

const WATCH_ID: &str = "watchId";
const WATCH_UNTIL: &str = "until";

/// The key of `owner`'s item `sk`.
pub(super) fn key(owner: &str, sk: &str) -> Item {
    item_key(usage_pk(owner), sk)
}

/// The key of `owner`'s ledger item.
pub(super) fn ledger_key(owner: &str) -> Item {
    key(owner, LEDGER_SK)
}

/// The key of the mark of a turn recorded without admission.
pub(super) fn record_key(hold: &Hold) -> Item {
    key(&hold.owner, &record_sk(&hold.id))
}

/// The key of `upload`'s mark.
pub(super) fn upload_key(upload: &Upload) -> Item {
    key(&upload.owner, &upload_sk(&upload.id))
}

/// Dollars as DynamoDB's decimal numbers take them, to a ten-billionth (so that adds and their reversals cancel).
fn dollars(v: f64) -> AttributeValue {
    n((v * 1e10).round() / 1e10)
}

/// Reads an item as `T`; an item that does not read (an operator's typo) counts as empty, said in the log.
pub(super) fn read_item<T: Default + for<'de> Deserialize<'de>>(
    item: Option<&Item>,
    what: &str,
) -> T {
    let Some(item) = item else {
        return T::default();
    };
    match serde_dynamo::from_item(item.clone()) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(item = what, error = %e, "a usage item does not read; taken as empty");
            T::default()
        }
    }
}

/// The limit attributes of an operator's item, as stored.
pub(super) fn limit_attributes(item: &Item) -> Item {
    LimitKind::ALL
        .iter()
        .map(|kind| limit_attribute(*kind))
        .filter_map(|name| item.get(&name).map(|v| (name.clone(), v.clone())))
        .collect()
}

/// One of the calendar counters a turn or an upload adds to (its day's, its week's or its month's): the prefix of
/// its attributes in the ledger (`DAY#2026-12-07`).
pub(super) struct Counter {
    pub(super) period: Period,
    pub(super) sk: String,
}

/// The day's, the week's and the month's counters of `periods`.
pub(super) fn period_counters(periods: &Periods) -> [Counter; 3] {
    let counter = |period, sk| Counter { period, sk };
    [
        counter(Period::Day, day_sk(periods)),
        counter(Period::Week, week_sk(periods)),
        counter(Period::Month, month_sk(periods)),
    ]
}

/// The attribute a limit of `resource` is checked against, and the amount it adds as a DynamoDB number.
fn checked_attribute(resource: Resource, amount: f64) -> (&'static str, AttributeValue) {
    match resource {
        Resource::Requests => ("requests", n(amount as u64)),
        Resource::Tokens => ("heldTokens", n(amount as u64)),
        Resource::Cost => ("heldCostUsd", dollars(amount)),
        Resource::UploadedDocuments => ("uploadedDocuments", n(amount as u64)),
        Resource::UploadedBytes => ("uploadedBytes", n(amount as u64)),
        // Held at once in the watches' places, never in a period's counter.
        Resource::OpenWatches => ("openWatches", n(amount as u64)),
    }
}

impl Counter {
    /// The ledger's attribute of this counter's `name` (`DAY#2026-12-07#heldTokens`).
    pub(super) fn attribute(&self, name: &str) -> String {
        format!("{}#{name}", self.sk)
    }

    /// The limits of turns of `limits` counted in this counter.
    pub(super) fn turn_limits<'a>(
        &self,
        limits: &'a Limits,
    ) -> impl Iterator<Item = (LimitKind, f64)> + 'a {
        let period = self.period;
        limits
            .of(Family::Turns)
            .filter(move |(kind, _)| kind.period == period)
    }

    /// The admission's add to this counter, to `e`: its `requests` (at least 1, at most each limit of requests:
    /// see [`Hold::requests`]), and `reserve` reserved and held, on condition that what it holds is under each of
    /// `limits`' limits of its period (and what was spent, for counters from before holds were kept, which have no
    /// `held…`), and that its requests keep the counter's within each limit of requests.
    fn reserve(
        &self,
        mut e: Expression,
        reserve: &Reserve,
        requests: u64,
        limits: &Limits,
    ) -> Expression {
        let a = |name: &str| self.attribute(name);
        // Beyond the one request of every turn, what the admission adds to a limit of requests.
        let more = requests.max(1) - 1;
        e = e
            .add(&a("requests"), n(more + 1))
            .add(&a("reservedTokens"), n(reserve.tokens))
            .add(&a("heldTokens"), n(reserve.tokens));
        if let Some(reserved) = reserve.cost_usd {
            e = e
                .add(&a("reservedCostUsd"), dollars(reserved))
                .add(&a("heldCostUsd"), dollars(reserved));
        }
        for (kind, limit) in self.turn_limits(limits) {
            let limit = match kind.resource {
                // `requests + more < limit`: the counter's requests stay within the limit once these are added.
                Resource::Requests => (limit - more as f64).max(0.0),
                _ => limit,
            };
            let (attribute, limit) = checked_attribute(kind.resource, limit);
            e = e.if_absent_or(&a(attribute), "<", limit.clone());
            e = match kind.resource {
                Resource::Tokens => e.if_absent_or(&a("totalTokens"), "<", limit),
                Resource::Cost => e.if_absent_or(&a("costUsd"), "<", limit),
                _ => e,
            };
        }
        e
    }

    /// A settlement's add to this counter, to `e`: `spent`, the reservation's change from `before` to `after`, the
    /// same change and `spent` to what is held, and one turn when the turn is over.
    fn settled(
        &self,
        mut e: Expression,
        spent: &UsageTotals,
        before: &Reserve,
        after: Option<&Reserve>,
    ) -> Expression {
        let a = |name: &str| self.attribute(name);
        let t = &spent.tokens;
        for (name, value) in token_attributes(t) {
            e = e.add(&a(name), value);
        }
        let after_tokens = after.map_or(0, |r| r.tokens) as i128;
        let change = after_tokens - before.tokens as i128;
        e = e
            .add(&a("reservedTokens"), n(change))
            .add(&a("heldTokens"), n(change + t.total_tokens as i128));
        let priced = spent.cost_usd.is_some()
            || before.cost_usd.is_some()
            || after.is_some_and(|r| r.cost_usd.is_some());
        if priced {
            let cost = spent.cost_usd.unwrap_or(0.0);
            let change =
                after.and_then(|r| r.cost_usd).unwrap_or(0.0) - before.cost_usd.unwrap_or(0.0);
            if spent.cost_usd.is_some() {
                e = e.add(&a("costUsd"), dollars(cost));
            }
            e = e
                .add(&a("reservedCostUsd"), dollars(change))
                .add(&a("heldCostUsd"), dollars(change + cost));
        }
        if after.is_none() {
            e = e.add(&a("turns"), n(1));
        }
        e
    }
}

/// The ledger's expiry, set by every write: a year on from `periods`' instant.
fn kept(e: Expression, periods: &Periods) -> Expression {
    e.set(
        EXPIRES_AT,
        n(periods.now.unix_timestamp() + LEDGER_KEPT_SECONDS),
    )
}

/// The admission of `hold` under `limits`, one update of the ledger: the hold set, on condition that the ledger
/// does not hold it yet (an admission that finds it landed before, its answer lost); the day's, the week's and the
/// month's counters add the request and the reservation, each on condition that it is under the limits of its
/// period; and, while a rate is limited, the request added to the seven windows it falls in, on condition that its
/// own holds fewer than the rate.
pub(super) fn admission(hold: &Hold, limits: &Limits) -> Expression {
    let periods = &hold.periods;
    let name = hold_attribute(&hold.id);
    let mut held = Item::from([
        ("reservedTokens".to_string(), n(hold.reserved.tokens)),
        ("day".to_string(), s(&periods.day)),
        ("week".to_string(), s(&periods.week)),
        ("month".to_string(), s(&periods.month)),
        ("version".to_string(), n(hold.version)),
        (
            EXPIRES_AT.to_string(),
            n(periods.now.unix_timestamp() + HOLD_KEPT_SECONDS),
        ),
    ]);
    if let Some(cost) = hold.reserved.cost_usd {
        held.insert("reservedCostUsd".into(), dollars(cost));
    }
    let mut e = Expression::new()
        .if_absent(&name)
        .set(&name, AttributeValue::M(held));
    for counter in period_counters(periods) {
        e = counter.reserve(e, &hold.reserved, hold.requests, limits);
    }
    if let Some(rate) = limits.get(LimitKind::REQUESTS_PER_MINUTE) {
        let requests = hold.requests.max(1);
        for m in 0..WINDOW_SPAN as i64 {
            // The request's own window (ending with its bucket) holds it to the rate; the later ones count it.
            let window = window_attribute(periods.bucket + m);
            e = e.add(&window, n(requests));
            if m == 0 {
                let rate = (rate as u64).saturating_sub(requests - 1);
                e = e.if_absent_or(&window, "<", n(rate));
            }
        }
    }
    kept(e, periods)
}

/// A settlement of `hold`, one update of the ledger: the hold moved on to `next` from the version it was written
/// for, or removed (the turn over), on condition that it is at that version (unless `guarded` is false: a last
/// settlement in a turn's own transaction, which its store writes once); the day's, the week's and the month's
/// counters of the turn's periods add `spent` and the change of the reservation.
pub(super) fn settlement(
    hold: &Hold,
    spent: &UsageTotals,
    next: Option<&Reserve>,
    guarded: bool,
) -> Expression {
    let name = hold_attribute(&hold.id);
    let mut e = Expression::new();
    if guarded {
        e = e.if_equals_at(&[&name, "version"], n(hold.version));
    }
    e = match next {
        Some(next) => {
            e = e
                .set_at(&[&name, "version"], n(hold.version + 1))
                .set_at(&[&name, "reservedTokens"], n(next.tokens));
            match next.cost_usd {
                Some(cost) => e.set_at(&[&name, "reservedCostUsd"], dollars(cost)),
                None => e,
            }
        }
        None => e.remove(&name),
    };
    for counter in period_counters(&hold.periods) {
        e = counter.settled(e, spent, &hold.reserved, next);
    }
    kept(e, &hold.periods)
}

/// A turn recorded whole ([`chat_core::UsageLedger::record`]), one update of the ledger: its `requests`, what it
/// spent and the turn added to its periods' counters, as an admission that reserved nothing and its last settlement
/// add them together (the same attributes).
pub(super) fn recording(hold: &Hold, spent: &UsageTotals) -> Expression {
    let mut e = Expression::new();
    for counter in period_counters(&hold.periods) {
        e = counter
            .settled(e, spent, &Reserve::default(), None)
            .add(&counter.attribute("requests"), n(hold.requests.max(1)));
    }
    kept(e, &hold.periods)
}

/// An upload's count, one update of the ledger: its documents and bytes added to each period's counter, on
/// condition that each holds at most each of `ceilings` of its period before it ([`chat_core::upload_ceilings`]),
/// so that the sums stay within the limits.
pub(super) fn upload_add(upload: &Upload, ceilings: &[(LimitKind, u64)]) -> Expression {
    let mut e = Expression::new();
    for counter in period_counters(&upload.periods) {
        e = e
            .add(&counter.attribute("uploadedDocuments"), n(upload.documents))
            .add(&counter.attribute("uploadedBytes"), n(upload.bytes));
        for (kind, ceiling) in ceilings.iter().filter(|(k, _)| k.period == counter.period) {
            let (attribute, ceiling) = checked_attribute(kind.resource, *ceiling as f64);
            e = e.if_absent_or(&counter.attribute(attribute), "<=", ceiling);
        }
    }
    kept(e, &upload.periods)
}

/// `e` removing `stale` (at most [`REMOVED_PER_WRITE`] of them; those `e` writes itself stay).
pub(super) fn removing<'a>(
    mut e: Expression,
    stale: impl IntoIterator<Item = &'a String>,
) -> Expression {
    for name in stale.into_iter().take(REMOVED_PER_WRITE) {
        e = e.remove(name);
    }
    e
}

/// The day's, the week's and the month's counters before `periods`' (their names), and those before these.
fn earlier(periods: &Periods) -> ([String; 3], [String; 3]) {
    let now = periods.now;
    let month_before = |at: time::OffsetDateTime| at - Duration::days(i64::from(at.day()));
    let last_month = month_before(now);
    let before = [
        day_sk(&Periods::at(now - Duration::days(1))),
        week_sk(&Periods::at(now - Duration::days(7))),
        month_sk(&Periods::at(last_month)),
    ];
    let older = [
        day_sk(&Periods::at(now - Duration::days(2))),
        week_sk(&Periods::at(now - Duration::days(14))),
        month_sk(&Periods::at(month_before(last_month))),
    ];
    (before, older)
}

/// The counters' attributes of the periods just before those a ledger keeps at `periods` (the day before
/// yesterday's, the week before last's, the month before last's: what a user who wrote then left behind), for the
/// writes that see no image of the ledger to tell what is stale.
pub(super) fn previous_periods(periods: &Periods) -> BTreeSet<String> {
    let (_, older) = earlier(periods);
    older
        .iter()
        .flat_map(|sk| COUNTER_ATTRIBUTES.iter().map(move |a| format!("{sk}#{a}")))
        .collect()
}

/// The attributes of `ledger` no read or write at `periods` or after uses any more: counters of periods before the
/// oldest it keeps of their kind (it keeps the day, the week and the month in progress and the ones before each: a
/// turn admitted before midnight settles in the day it began in, and `GET /usage` of a day just past reads it whole;
/// never a period after `periods`', which a turn admitted before midnight and settled after it sees in the ledger,
/// written by the turns of the day that has just begun), windows
/// that ended a whole window before its bucket (an admission sent again after a pause, or from an instance whose
/// clock is a little behind, still checks the window it was made in), holds past their expiry.
pub(super) fn stale_in(ledger: &Item, periods: &Periods) -> BTreeSet<String> {
    let now = periods.now.unix_timestamp();
    let (before, _) = earlier(periods);
    // The oldest label kept of each kind: ISO days, weeks and months sort as their strings do.
    let oldest: Vec<(String, &str)> = ["DAY#", "WEEK#", "MONTH#"]
        .iter()
        .zip(&before)
        .map(|(kind, sk)| (kind.to_string(), &sk[kind.len()..]))
        .collect();
    let last_stale_window = window_attribute(periods.bucket - WINDOW_SPAN as i64);
    ledger
        .iter()
        .filter(|(name, value)| {
            for (kind, oldest) in &oldest {
                if let Some(rest) = name.strip_prefix(kind.as_str()) {
                    let label = rest.split('#').next().unwrap_or_default();
                    return label < *oldest;
                }
            }
            if name.starts_with("RATE#") {
                return name.as_str() < last_stale_window.as_str();
            }
            if name.starts_with("HOLD#") {
                let expires = value
                    .as_m()
                    .ok()
                    .and_then(|m| m.get(EXPIRES_AT))
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse::<i64>().ok());
                return expires.is_some_and(|e| e < now);
            }
            false
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The counters of `ledger` (absent: none) at `periods`, with `limits`, the operator's item.
pub(super) fn snapshot(ledger: Option<&Item>, periods: &Periods, limits: &Item) -> UsageSnapshot {
    let empty = Item::new();
    let ledger = ledger.unwrap_or(&empty);
    let period = |counter: &Counter| {
        let prefix = format!("{}#", counter.sk);
        let item: Item = ledger
            .iter()
            .filter_map(|(name, v)| {
                name.strip_prefix(prefix.as_str())
                    .map(|a| (a.to_string(), v.clone()))
            })
            .collect();
        read_item::<PeriodItem>(Some(&item), "period").usage()
    };
    let [day, week, month] = period_counters(periods);
    let mut window = RateWindow::default();
    for (m, count) in window.counts.iter_mut().enumerate() {
        *count = ledger
            .get(&window_attribute(periods.bucket + m as i64))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    UsageSnapshot {
        day: period(&day),
        week: period(&week),
        month: period(&month),
        window,
        open_watches: 0,
        overrides: limit_overrides(limits),
    }
}

/// The version of the hold of turn `id` in `ledger`; `None` when it holds none (never admitted, or settled for
/// the last time).
pub(super) fn hold_version(ledger: Option<&Item>, id: &str) -> Option<u32> {
    ledger?
        .get(&hold_attribute(id))?
        .as_m()
        .ok()?
        .get("version")?
        .as_n()
        .ok()?
        .parse()
        .ok()
}

/// The ledger seeded from the counters' items of the layout before it (`DAY#…`, `WEEK#…`, `MONTH#…`), put on
/// condition that there is no ledger yet: their attributes, each named as the ledger names it.
pub(super) fn seed(periods: &Periods, old: &[Item]) -> (Expression, Item) {
    let mut seeded = Item::new();
    for item in old {
        let Some(sk) = item.get(SORT_KEY).and_then(|v| v.as_s().ok()) else {
            continue;
        };
        for (name, value) in item {
            if [PARTITION_KEY, SORT_KEY, EXPIRES_AT].contains(&name.as_str()) {
                continue;
            }
            seeded.insert(format!("{sk}#{name}"), value.clone());
        }
    }
    let mut e = Expression::new().if_absent(PARTITION_KEY);
    for (name, value) in &seeded {
        e = e.set(name, value.clone());
    }
    (kept(e, periods), seeded)
}

/// A turn recorded without admission: its mark put, on condition that it is not there yet (unless `guarded` is
/// false: in a turn's own transaction, which its store writes once), so that a record sent again finds it landed.
pub(super) fn record_put(table: &str, hold: &Hold, guarded: bool) -> TransactWriteItem {
    let mut item = record_key(hold);
    item.insert(
        EXPIRES_AT.into(),
        n(hold.periods.now.unix_timestamp() + RECORD_KEPT_SECONDS),
    );
    let e = Expression::new();
    let e = if guarded {
        e.if_absent(PARTITION_KEY)
    } else {
        e
    };
    e.put(table, item)
}

/// An upload's count: its mark put, on condition that it is not there yet (a count sent again finds it landed).
pub(super) fn upload_put(table: &str, upload: &Upload) -> TransactWriteItem {
    let mut item = upload_key(upload);
    item.insert("documents".into(), n(upload.documents));
    item.insert("bytes".into(), n(upload.bytes));
    item.insert("day".into(), s(&upload.periods.day));
    item.insert(
        EXPIRES_AT.into(),
        n(upload.periods.now.unix_timestamp() + UPLOAD_KEPT_SECONDS),
    );
    Expression::new().if_absent(PARTITION_KEY).put(table, item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::Update;

    fn hold(cost: Option<f64>) -> Hold {
        Hold::new(
            "alice",
            Reserve {
                tokens: 100,
                cost_usd: cost,
            },
            time::OffsetDateTime::from_unix_timestamp(1_780_000_000).unwrap(),
        )
    }

    /// The attributes an update names.
    fn attributes(update: &Update) -> BTreeSet<&str> {
        let names = update.expression_attribute_names().unwrap();
        names.values().map(String::as_str).collect()
    }

    #[test]
    fn each_limit_has_its_attribute_by_one_rule_and_a_typo_empties_the_item() {
        assert_eq!(limit_attribute(LimitKind::TOKENS_PER_DAY), "tokensPerDay");
        assert_eq!(
            limit_attribute(LimitKind::REQUESTS_PER_MINUTE),
            "ratePerMinute"
        );
        assert_eq!(
            limit_attribute(LimitKind::UPLOADED_BYTES_PER_DAY),
            "uploadedBytesPerDay"
        );
        let per_week = LimitKind::new(Resource::Requests, Period::Week);
        assert_eq!(limit_attribute(per_week), "requestsPerWeek");
        let item = Item::from([
            ("costPerMonth".to_string(), n(2.5)),
            ("requestsPerWeek".to_string(), n(3)),
            ("ratePerMinute".to_string(), n(0)),
        ]);
        let overrides = limit_overrides(&item);
        assert_eq!(overrides.get(LimitKind::COST_PER_MONTH), Some(2.5));
        assert_eq!(overrides.get(per_week), Some(3.0));
        assert_eq!(overrides.get(LimitKind::REQUESTS_PER_MINUTE), Some(0.0));
        assert_eq!(limit_attributes(&item).len(), 3);
        let typo = Item::from([
            ("tokensPerDay".to_string(), n(2.5)),
            ("costPerDay".to_string(), n(1)),
        ]);
        assert_eq!(limit_overrides(&typo), LimitOverrides::default());
    }

    /// The update an expression makes of alice's ledger, in a transaction.
    fn update(e: Expression) -> Update {
        e.update("t", ledger_key("alice")).update.unwrap()
    }

    #[test]
    fn an_admission_holds_each_counter_to_the_limits_of_its_period_in_one_update() {
        let hold = hold(None);
        let per_week = LimitKind::new(Resource::Requests, Period::Week);
        let limits = Limits::default()
            .with(per_week, 3.0)
            .with(LimitKind::TOKENS_PER_DAY, 100.0)
            .with(LimitKind::REQUESTS_PER_MINUTE, 10.0)
            .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 1.0);
        let [day, week, month] = period_counters(&hold.periods);
        let admitted = update(admission(&hold, &limits));
        let names = attributes(&admitted);
        let condition = admitted.condition_expression().unwrap();
        let checked = |attribute: &str| {
            let placeholder = admitted
                .expression_attribute_names()
                .unwrap()
                .iter()
                .find(|(_, a)| a.as_str() == attribute)
                .map(|(p, _)| p.clone())
                .unwrap_or_else(|| panic!("{attribute} not named"));
            condition.contains(&format!("{placeholder} <"))
        };
        assert!(checked(&day.attribute("heldTokens")));
        assert!(checked(&day.attribute("totalTokens")));
        assert!(checked(&week.attribute("requests")));
        assert!(!checked(&week.attribute("heldTokens")));
        assert!(!checked(&month.attribute("requests")));
        assert!(
            names.contains(month.attribute("requests").as_str()),
            "every request counted"
        );
        assert!(checked(&window_attribute(hold.periods.bucket)));
        assert!(!checked(&window_attribute(hold.periods.bucket + 1)));
        assert!(names.contains(window_attribute(hold.periods.bucket + 6).as_str()));
        assert!(
            condition.contains("attribute_not_exists("),
            "the hold absent"
        );
        assert!(names.contains(hold_attribute(&hold.id).as_str()));
        assert!(names.contains("expiresAt"));
    }

    #[test]
    fn a_last_settlement_counts_a_turn_and_an_unpriced_one_adds_no_cost() {
        let hold = hold(None);
        let spent = UsageTotals::default();
        let last = update(settlement(&hold, &spent, None, true));
        let day = day_sk(&hold.periods);
        let prefix = format!("{day}#");
        let of_day: BTreeSet<&str> = attributes(&last)
            .into_iter()
            .filter_map(|a| a.strip_prefix(prefix.as_str()))
            .collect();
        assert_eq!(
            of_day,
            BTreeSet::from([
                "cacheReadInputTokens",
                "cacheWriteInputTokens",
                "heldTokens",
                "inputTokens",
                "outputTokens",
                "reservedTokens",
                "totalTokens",
                "turns",
            ])
        );
        assert!(
            last.update_expression().contains("REMOVE"),
            "the hold removed"
        );
        assert!(last.condition_expression().is_some(), "at its version");
        let next = update(settlement(&hold, &spent, Some(&hold.reserved), true));
        assert!(!attributes(&next).contains(format!("{day}#turns").as_str()));
        assert!(!next.update_expression().contains("REMOVE"));
    }

    #[test]
    fn a_hold_moves_on_only_from_its_version_and_a_turns_own_settlement_has_no_condition() {
        let hold = hold(Some(0.5));
        let spent = UsageTotals::default();
        let moved = update(settlement(&hold, &spent, Some(&hold.reserved), false));
        let names = attributes(&moved);
        for name in ["reservedCostUsd", "reservedTokens", "version"] {
            assert!(names.contains(name), "{name}");
        }
        let guarded = update(settlement(&hold, &spent, Some(&hold.reserved), true));
        assert!(guarded.condition_expression().is_some());
        let own = update(settlement(&hold, &spent, None, false));
        assert_eq!(own.condition_expression(), None);
    }

    #[test]
    fn stale_attributes_are_past_periods_windows_and_holds_and_never_what_a_write_makes() {
        let hold = hold(Some(0.5));
        let periods = &hold.periods;
        let at = periods.now.unix_timestamp();
        let earlier = Periods::at(periods.now - Duration::days(70));
        let held =
            |expires: i64| AttributeValue::M(Item::from([("expiresAt".to_string(), n(expires))]));
        let ledger = Item::from([
            (format!("{}#turns", day_sk(periods)), n(1)),
            (format!("{}#turns", day_sk(&earlier)), n(1)),
            (format!("{}#turns", week_sk(&earlier)), n(1)),
            (format!("{}#turns", month_sk(&earlier)), n(1)),
            (format!("{}#turns", month_sk(periods)), n(1)),
            (
                window_attribute(periods.bucket - WINDOW_SPAN as i64 - 1),
                n(1),
            ),
            (window_attribute(periods.bucket - WINDOW_SPAN as i64), n(1)),
            (window_attribute(periods.bucket - 1), n(1)),
            (window_attribute(periods.bucket), n(1)),
            ("HOLD#old".to_string(), held(at - 1)),
            ("HOLD#open".to_string(), held(at + 60)),
            ("expiresAt".to_string(), n(at)),
        ]);
        let stale = stale_in(&ledger, periods);
        assert_eq!(
            stale,
            BTreeSet::from([
                format!("{}#turns", day_sk(&earlier)),
                format!("{}#turns", week_sk(&earlier)),
                format!("{}#turns", month_sk(&earlier)),
                window_attribute(periods.bucket - WINDOW_SPAN as i64 - 1),
                "HOLD#old".to_string(),
            ])
        );
        // Seen by a turn admitted before midnight and settled after it (its periods the day before), the counters
        // of the day, the week and the month that have just begun, which other turns write to, are no one's stale.
        for later in [1, 7, 31] {
            let next = Periods::at(periods.now + Duration::days(later));
            let ledger = Item::from([
                (format!("{}#requests", day_sk(&next)), n(1)),
                (format!("{}#requests", week_sk(&next)), n(1)),
                (format!("{}#uploadedBytes", month_sk(&next)), n(1)),
                (window_attribute(next.bucket), n(1)),
            ]);
            assert!(
                stale_in(&ledger, periods).is_empty(),
                "{later} days on: {:?}",
                stale_in(&ledger, periods)
            );
        }
        // A settlement of a turn of those earlier periods removes none of what it adds to.
        let mut old = hold.clone();
        old.periods = earlier.clone();
        let settled = update(removing(
            settlement(&old, &UsageTotals::default(), None, false),
            &stale,
        ));
        let removed = settled
            .update_expression()
            .split(" SET ")
            .next()
            .unwrap()
            .to_string();
        let names = settled.expression_attribute_names().unwrap();
        let placeholder = |a: &str| {
            names
                .iter()
                .find(|(_, n)| n.as_str() == a)
                .unwrap()
                .0
                .clone()
        };
        assert!(!removed.contains(&placeholder(&format!("{}#turns", day_sk(&earlier)))));
        assert!(removed.contains(&placeholder("HOLD#old")));
        // The counters read back from the ledger are the current periods'.
        let read = snapshot(Some(&ledger), periods, &Item::new());
        assert_eq!(
            (read.day.turns, read.week.turns, read.month.turns),
            (1, 0, 1)
        );
        assert_eq!(read.window.counts[0], 1);
        assert_eq!(
            previous_periods(periods).len(),
            3 * COUNTER_ATTRIBUTES.len()
        );
        let before = Periods::at(periods.now - Duration::days(1));
        let older = Periods::at(periods.now - Duration::days(2));
        assert!(previous_periods(periods).contains(&format!("{}#turns", day_sk(&older))));
        assert!(!previous_periods(periods).contains(&format!("{}#turns", day_sk(&before))));
        let yesterday = Item::from([(format!("{}#turns", day_sk(&before)), n(1))]);
        assert!(
            stale_in(&yesterday, periods).is_empty(),
            "the day before is kept"
        );
    }
}
