//! The usage items (a period's counters, a rate window, a turn's hold or record mark, an upload's mark, the
//! operator's limits): where each sits, how it reads, and every write of each, built here only, so that a new
//! counter is one change here. The conditions and the attributes of the limits are built from the list of limits in force, one rule for
//! every limit.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
use chat_core::{
    Family, Hold, LimitKind, LimitOverrides, Limits, Period, PeriodUsage, Periods, Reserve,
    Resource, Upload, UploadUsage, UsageTotals,
};
use serde::Deserialize;

use crate::dynamo::{Expression, Item, n, s};
use crate::table::{EXPIRES_AT, PARTITION_KEY, StoredTotals, item_key, token_attributes};

/// How long each counter is kept past its first write: a day's two days, a week's fifteen, a month's about thirteen
/// months (an operator can still read last year's same month), a window's an hour, a hold two days (a turn lasts
/// minutes; a hold left by a turn that never settled is only bookkeeping, its reservation being in the counters).
const DAY_KEPT_SECONDS: i64 = 2 * 86_400;
const WEEK_KEPT_SECONDS: i64 = 15 * 86_400;
const MONTH_KEPT_SECONDS: i64 = 400 * 86_400;
const WINDOW_KEPT_SECONDS: i64 = 3_600;
const HOLD_KEPT_SECONDS: i64 = 2 * 86_400;
/// An upload's mark: only to read back a count whose answer was lost, so as long as its day's counter.
const UPLOAD_KEPT_SECONDS: i64 = 2 * 86_400;
/// A turn's record mark: the same, for a record whose answer was lost.
const RECORD_KEPT_SECONDS: i64 = 2 * 86_400;

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

/// The window that ends with `bucket`.
pub(super) fn window_sk(bucket: i64) -> String {
    format!("RATE#{bucket:012}")
}

fn hold_sk(id: &str) -> String {
    format!("HOLD#{id}")
}

fn record_sk(id: &str) -> String {
    format!("TURN#{id}")
}

fn upload_sk(id: &str) -> String {
    format!("UPLOAD#{id}")
}

pub(super) const LIMITS_SK: &str = "LIMITS";

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

/// The key of `hold`'s item.
pub(super) fn hold_key(hold: &Hold) -> Item {
    key(&hold.owner, &hold_sk(&hold.id))
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

/// One of the calendar counters a turn or an upload adds to (its day's, its week's or its month's), with the expiry
/// it gets when the add creates it.
pub(super) struct Counter {
    pub(super) period: Period,
    pub(super) sk: String,
    expires_at: i64,
}

/// The day's, the week's and the month's counters of `periods`.
pub(super) fn period_counters(periods: &Periods) -> [Counter; 3] {
    let now = periods.now.unix_timestamp();
    let counter = |period, sk, kept| Counter {
        period,
        sk,
        expires_at: now + kept,
    };
    [
        counter(Period::Day, day_sk(periods), DAY_KEPT_SECONDS),
        counter(Period::Week, week_sk(periods), WEEK_KEPT_SECONDS),
        counter(Period::Month, month_sk(periods), MONTH_KEPT_SECONDS),
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

    /// The admission's add to this counter: its `requests` (at least 1, at most each limit of requests: see
    /// [`Hold::requests`]), and `reserve` reserved and held, on condition that what it holds is under each of
    /// `limits`' limits of its period (and what was spent, for counters from before holds were kept, which have no
    /// `held…`), and that its requests keep the counter's within each limit of requests.
    pub(super) fn reserve(
        &self,
        table: &str,
        owner: &str,
        reserve: &Reserve,
        requests: u64,
        limits: &Limits,
    ) -> TransactWriteItem {
        // Beyond the one request of every turn, what the admission adds to a limit of requests.
        let more = requests.max(1) - 1;
        let mut e = Expression::new()
            .add("requests", n(more + 1))
            .add("reservedTokens", n(reserve.tokens))
            .add("heldTokens", n(reserve.tokens));
        if let Some(reserved) = reserve.cost_usd {
            e = e
                .add("reservedCostUsd", dollars(reserved))
                .add("heldCostUsd", dollars(reserved));
        }
        e = e.set_if_absent(EXPIRES_AT, n(self.expires_at));
        for (kind, limit) in self.turn_limits(limits) {
            let limit = match kind.resource {
                // `requests + more < limit`: the counter's requests stay within the limit once these are added.
                Resource::Requests => (limit - more as f64).max(0.0),
                _ => limit,
            };
            let (attribute, limit) = checked_attribute(kind.resource, limit);
            e = e.if_absent_or(attribute, "<", limit.clone());
            e = match kind.resource {
                Resource::Tokens => e.if_absent_or("totalTokens", "<", limit),
                Resource::Cost => e.if_absent_or("costUsd", "<", limit),
                _ => e,
            };
        }
        e.update(table, key(owner, &self.sk))
    }

    /// A settlement's add to this counter: `spent`, the reservation's change from `before` to `after`, the same
    /// change and `spent` to what is held, and one turn when the turn is over.
    pub(super) fn settle(
        &self,
        table: &str,
        owner: &str,
        spent: &UsageTotals,
        before: &Reserve,
        after: Option<&Reserve>,
    ) -> TransactWriteItem {
        self.settled(spent, before, after)
            .update(table, key(owner, &self.sk))
    }

    /// A turn recorded whole ([`chat_core::UsageLedger::record`]): its `requests`, `spent` and the turn, as an
    /// admission that reserved nothing and its last settlement add them together (the same attributes).
    pub(super) fn record(
        &self,
        table: &str,
        owner: &str,
        spent: &UsageTotals,
        requests: u64,
    ) -> TransactWriteItem {
        self.settled(spent, &Reserve::default(), None)
            .add("requests", n(requests.max(1)))
            .update(table, key(owner, &self.sk))
    }

    /// The update of [`Counter::settle`].
    fn settled(
        &self,
        spent: &UsageTotals,
        before: &Reserve,
        after: Option<&Reserve>,
    ) -> Expression {
        let mut e = Expression::new();
        let t = &spent.tokens;
        for (name, value) in token_attributes(t) {
            e = e.add(name, value);
        }
        let after_tokens = after.map_or(0, |r| r.tokens) as i128;
        let change = after_tokens - before.tokens as i128;
        e = e
            .add("reservedTokens", n(change))
            .add("heldTokens", n(change + t.total_tokens as i128));
        let priced = spent.cost_usd.is_some()
            || before.cost_usd.is_some()
            || after.is_some_and(|r| r.cost_usd.is_some());
        if priced {
            let cost = spent.cost_usd.unwrap_or(0.0);
            let change =
                after.and_then(|r| r.cost_usd).unwrap_or(0.0) - before.cost_usd.unwrap_or(0.0);
            if spent.cost_usd.is_some() {
                e = e.add("costUsd", dollars(cost));
            }
            e = e
                .add("reservedCostUsd", dollars(change))
                .add("heldCostUsd", dollars(change + cost));
        }
        if after.is_none() {
            e = e.add("turns", n(1));
        }
        e.set_if_absent(EXPIRES_AT, n(self.expires_at))
    }
}

/// The admission's add to the rate window that ends with `bucket`: `requests` requests (at least 1, at most
/// `rate`), on condition (given `rate`, for the request's own window) that it holds at most `rate` once they are
/// added.
pub(super) fn window_admit(
    table: &str,
    owner: &str,
    bucket: i64,
    requests: u64,
    rate: Option<u64>,
) -> TransactWriteItem {
    let ends = Periods::bucket_starts(bucket + 1).unix_timestamp();
    let requests = requests.max(1);
    let mut e = Expression::new()
        .add("requests", n(requests))
        .set_if_absent(EXPIRES_AT, n(ends + WINDOW_KEPT_SECONDS));
    if let Some(rate) = rate {
        e = e.if_absent_or("requests", "<", n(rate.saturating_sub(requests - 1)));
    }
    e.update(table, key(owner, &window_sk(bucket)))
}

/// The admission's put of `hold`: its reservation, periods and version, on condition that it is not there yet (an
/// admission that finds it landed before, its answer lost).
pub(super) fn hold_put(table: &str, hold: &Hold) -> TransactWriteItem {
    let periods = &hold.periods;
    let mut item = hold_key(hold);
    item.insert("reservedTokens".into(), n(hold.reserved.tokens));
    if let Some(cost) = hold.reserved.cost_usd {
        item.insert("reservedCostUsd".into(), dollars(cost));
    }
    item.insert("day".into(), s(&periods.day));
    item.insert("week".into(), s(&periods.week));
    item.insert("month".into(), s(&periods.month));
    item.insert("version".into(), n(hold.version));
    item.insert(
        EXPIRES_AT.into(),
        n(periods.now.unix_timestamp() + HOLD_KEPT_SECONDS),
    );
    Expression::new().if_absent(PARTITION_KEY).put(table, item)
}

/// A settlement's write of `hold`: moved on to `next` from the version it was written for, or deleted (the turn
/// over), on condition that it is at that version (unless `guarded` is false, for a delete in a turn's own
/// transaction, which its store writes once).
pub(super) fn hold_settled(
    table: &str,
    hold: &Hold,
    next: Option<&Reserve>,
    guarded: bool,
) -> TransactWriteItem {
    let at_version = |e: Expression| e.if_equals("version", n(hold.version));
    match next {
        Some(next) => {
            let mut e = Expression::new()
                .set("version", n(hold.version + 1))
                .set("reservedTokens", n(next.tokens));
            if let Some(cost) = next.cost_usd {
                e = e.set("reservedCostUsd", dollars(cost));
            }
            at_version(e).update(table, hold_key(hold))
        }
        None if guarded => at_version(Expression::new()).delete(table, hold_key(hold)),
        None => Expression::new().delete(table, hold_key(hold)),
    }
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

/// An upload's count: its documents and bytes added to `counter`, on condition that the counter holds at most each
/// of `ceilings` of its period before it ([`chat_core::upload_ceilings`]), so that the sums stay within the limits.
pub(super) fn upload_add(
    table: &str,
    upload: &Upload,
    counter: &Counter,
    ceilings: &[(LimitKind, u64)],
) -> TransactWriteItem {
    let mut e = Expression::new()
        .add("uploadedDocuments", n(upload.documents))
        .add("uploadedBytes", n(upload.bytes))
        .set_if_absent(EXPIRES_AT, n(counter.expires_at));
    for (kind, ceiling) in ceilings.iter().filter(|(k, _)| k.period == counter.period) {
        let (attribute, ceiling) = checked_attribute(kind.resource, *ceiling as f64);
        e = e.if_absent_or(attribute, "<=", ceiling);
    }
    e.update(table, key(&upload.owner, &counter.sk))
}

/// The check that `owner`'s `LIMITS` item holds the limit attributes `seen` (only those; none where `seen` is
/// empty), which the admission's conditions assumed.
pub(super) fn limits_as_seen(table: &str, owner: &str, seen: &Item) -> ConditionCheck {
    let mut e = Expression::new();
    for kind in LimitKind::ALL {
        let name = limit_attribute(kind);
        e = match seen.get(&name) {
            Some(value) => e.if_equals(&name, value.clone()),
            None => e.if_absent(&name),
        };
    }
    e.check(table, key(owner, LIMITS_SK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::SORT_KEY;
    use aws_sdk_dynamodb::types::Update;
    use std::collections::BTreeSet;

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

    #[test]
    fn an_admission_holds_each_counter_to_the_limits_of_its_period() {
        let hold = hold(None);
        let per_week = LimitKind::new(Resource::Requests, Period::Week);
        let limits = Limits::default()
            .with(per_week, 3.0)
            .with(LimitKind::TOKENS_PER_DAY, 100.0)
            .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 1.0);
        let [day, week, month] = period_counters(&hold.periods);
        let admitted = |c: &Counter| {
            c.reserve("t", "alice", &hold.reserved, hold.requests, &limits)
                .update
                .unwrap()
        };
        let day = admitted(&day);
        assert!(day.condition_expression().is_some());
        assert!(attributes(&day).contains("totalTokens"));
        assert!(
            attributes(&day).contains("requests"),
            "every request counted"
        );
        let week = admitted(&week);
        assert!(week.condition_expression().is_some());
        assert!(!attributes(&week).contains("totalTokens"));
        let sk = week.key().get(SORT_KEY).and_then(|v| v.as_s().ok());
        assert!(sk.is_some_and(|sk| sk.starts_with("WEEK#")), "{sk:?}");
        assert_eq!(admitted(&month).condition_expression(), None);
    }

    #[test]
    fn a_last_settlement_counts_a_turn_and_an_unpriced_one_adds_no_cost() {
        let hold = hold(None);
        let [day, _, _] = period_counters(&hold.periods);
        let spent = UsageTotals::default();
        let last = day.settle("t", "alice", &spent, &hold.reserved, None);
        let update = last.update.unwrap();
        assert_eq!(
            attributes(&update),
            BTreeSet::from([
                "cacheReadInputTokens",
                "cacheWriteInputTokens",
                "expiresAt",
                "heldTokens",
                "inputTokens",
                "outputTokens",
                "reservedTokens",
                "totalTokens",
                "turns",
            ])
        );
        assert!(update.update_expression().contains("if_not_exists("));
        assert_eq!(update.condition_expression(), None);
        let next = day.settle("t", "alice", &spent, &hold.reserved, Some(&hold.reserved));
        assert!(!attributes(&next.update.unwrap()).contains(&"turns"));
    }

    #[test]
    fn a_hold_moves_on_only_from_its_version_and_a_turns_own_delete_has_no_condition() {
        let hold = hold(Some(0.5));
        let moved = hold_settled("t", &hold, Some(&hold.reserved), false)
            .update
            .unwrap();
        assert_eq!(
            attributes(&moved),
            BTreeSet::from(["reservedCostUsd", "reservedTokens", "version"])
        );
        assert!(moved.condition_expression().is_some());
        let guarded = hold_settled("t", &hold, None, true).delete.unwrap();
        assert!(guarded.condition_expression().is_some());
        let own = hold_settled("t", &hold, None, false).delete.unwrap();
        assert_eq!(own.condition_expression(), None);
        assert_eq!(own.expression_attribute_names(), None);
    }
}
