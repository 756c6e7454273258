//! The usage items (a period's spending counters, a rate window, a turn's hold, an upload's mark, the operator's
//! limits): where each
//! sits, how it reads, and every write of each, built here only, so that a new counter is one change here.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
use chat_core::{
    Hold, LimitOverrides, PeriodUsage, Periods, Reserve, TokenUsage, Upload, UploadUsage,
    UsageTotals,
};
use serde::Deserialize;

use crate::dynamo::{Expression, Item, n, s};
use crate::table::{EXPIRES_AT, PARTITION_KEY, SORT_KEY, token_attributes};

/// How long each counter is kept past its period's start: a day's two days, a month's about thirteen months (an
/// operator can still read last year's same month), a window's an hour, a hold two days (a turn lasts minutes; a
/// hold left by a turn that never settled is only bookkeeping, its reservation being in the counters).
const DAY_KEPT_SECONDS: i64 = 2 * 86_400;
const MONTH_KEPT_SECONDS: i64 = 400 * 86_400;
const WINDOW_KEPT_SECONDS: i64 = 3_600;
const HOLD_KEPT_SECONDS: i64 = 2 * 86_400;
/// An upload's mark: only to read back a count whose answer was lost, so as long as its day's counter.
const UPLOAD_KEPT_SECONDS: i64 = 2 * 86_400;

/// The attributes of the operator's item that set limits.
const LIMIT_ATTRIBUTES: [&str; 7] = [
    "tokensPerDay",
    "tokensPerMonth",
    "costPerDay",
    "costPerMonth",
    "ratePerMinute",
    "uploadedDocumentsPerDay",
    "uploadedBytesPerDay",
];

/// A period's counters as stored (absent attributes are zero).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct PeriodItem {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    cache_read_input_tokens: u64,
    cache_write_input_tokens: u64,
    cost_usd: Option<f64>,
    turns: u64,
    reserved_tokens: i64,
    reserved_cost_usd: Option<f64>,
    pub(super) requests: u64,
    uploaded_documents: u64,
    uploaded_bytes: u64,
}

/// The operator's item.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct LimitsItem {
    tokens_per_day: Option<u64>,
    tokens_per_month: Option<u64>,
    cost_per_day: Option<f64>,
    cost_per_month: Option<f64>,
    rate_per_minute: Option<u64>,
    uploaded_documents_per_day: Option<u64>,
    uploaded_bytes_per_day: Option<u64>,
}

impl LimitsItem {
    pub(super) fn overrides(&self) -> LimitOverrides {
        LimitOverrides {
            tokens_per_day: self.tokens_per_day,
            tokens_per_month: self.tokens_per_month,
            cost_per_day: self.cost_per_day,
            cost_per_month: self.cost_per_month,
            requests_per_minute: self.rate_per_minute,
            uploaded_documents_per_day: self.uploaded_documents_per_day,
            uploaded_bytes_per_day: self.uploaded_bytes_per_day,
        }
    }
}

impl PeriodItem {
    /// What was uploaded in the period (a day's counter only).
    pub(super) fn uploads(&self) -> UploadUsage {
        UploadUsage {
            documents: self.uploaded_documents,
            bytes: self.uploaded_bytes,
        }
    }

    pub(super) fn usage(&self) -> PeriodUsage {
        PeriodUsage {
            spent: UsageTotals {
                tokens: TokenUsage {
                    input_tokens: self.input_tokens,
                    output_tokens: self.output_tokens,
                    total_tokens: self.total_tokens,
                    cache_read_input_tokens: self.cache_read_input_tokens,
                    cache_write_input_tokens: self.cache_write_input_tokens,
                },
                cost_usd: self.cost_usd,
            },
            turns: self.turns,
            reserved: Reserve {
                tokens: self.reserved_tokens.max(0) as u64,
                cost_usd: self.reserved_cost_usd.map(|c| c.max(0.0)),
            },
        }
    }
}

fn usage_pk(owner: &str) -> String {
    format!("USAGE#{owner}")
}

pub(super) fn day_sk(periods: &Periods) -> String {
    format!("DAY#{}", periods.day)
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

fn upload_sk(id: &str) -> String {
    format!("UPLOAD#{id}")
}

pub(super) const LIMITS_SK: &str = "LIMITS";

/// The key of `owner`'s item `sk`.
pub(super) fn key(owner: &str, sk: &str) -> Item {
    Item::from([
        (PARTITION_KEY.to_string(), s(usage_pk(owner))),
        (SORT_KEY.to_string(), s(sk)),
    ])
}

/// The key of `hold`'s item.
pub(super) fn hold_key(hold: &Hold) -> Item {
    key(&hold.owner, &hold_sk(&hold.id))
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
    LIMIT_ATTRIBUTES
        .iter()
        .filter_map(|name| item.get(*name).map(|v| (name.to_string(), v.clone())))
        .collect()
}

/// One of the two spending counters a turn adds to (its day's or its month's), with the expiry it gets when the
/// add creates it.
pub(super) struct Counter {
    pub(super) sk: String,
    expires_at: i64,
}

/// The turn's day's and month's counters.
pub(super) fn period_counters(periods: &Periods) -> [Counter; 2] {
    let now = periods.now.unix_timestamp();
    [
        Counter {
            sk: day_sk(periods),
            expires_at: now + DAY_KEPT_SECONDS,
        },
        Counter {
            sk: month_sk(periods),
            expires_at: now + MONTH_KEPT_SECONDS,
        },
    ]
}

/// What a quota allows a period: tokens, dollars (`None`: no quota).
pub(super) type Quota = (Option<u64>, Option<f64>);

impl Counter {
    /// The admission's add to this counter: `reserve` reserved and held, on condition that what it holds and
    /// what was spent are under each of `quota`'s limits (counters from before holds were kept have no `held…`).
    pub(super) fn reserve(
        &self,
        table: &str,
        owner: &str,
        reserve: &Reserve,
        (tokens, cost): Quota,
    ) -> TransactWriteItem {
        let mut e = Expression::new()
            .add("reservedTokens", n(reserve.tokens))
            .add("heldTokens", n(reserve.tokens));
        if let Some(reserved) = reserve.cost_usd {
            e = e
                .add("reservedCostUsd", dollars(reserved))
                .add("heldCostUsd", dollars(reserved));
        }
        e = e.set_if_absent(EXPIRES_AT, n(self.expires_at));
        if let Some(limit) = tokens {
            e = e
                .if_absent_or_under("heldTokens", n(limit))
                .if_absent_or_under("totalTokens", n(limit));
        }
        if let Some(limit) = cost {
            e = e
                .if_absent_or_under("heldCostUsd", dollars(limit))
                .if_absent_or_under("costUsd", dollars(limit));
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
            .update(table, key(owner, &self.sk))
    }
}

/// The admission's add to the rate window that ends with `bucket`: one request, on condition (given `rate`, for
/// the request's own window) that it holds fewer than `rate`.
pub(super) fn window_admit(
    table: &str,
    owner: &str,
    bucket: i64,
    rate: Option<u64>,
) -> TransactWriteItem {
    let ends = Periods::bucket_starts(bucket + 1).unix_timestamp();
    let mut e = Expression::new()
        .add("requests", n(1))
        .set_if_absent(EXPIRES_AT, n(ends + WINDOW_KEPT_SECONDS));
    if let Some(rate) = rate {
        e = e.if_absent_or_under("requests", n(rate));
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

/// An upload's count: its documents and bytes added to its day's counter, on condition that the counter holds at
/// most each of `ceilings` (documents, bytes; `None`: no limit) before it, so that the sums stay within the quotas.
pub(super) fn upload_add(
    table: &str,
    upload: &Upload,
    (documents, bytes): (Option<u64>, Option<u64>),
) -> TransactWriteItem {
    let [day, _] = period_counters(&upload.periods);
    let mut e = Expression::new()
        .add("uploadedDocuments", n(upload.documents))
        .add("uploadedBytes", n(upload.bytes))
        .set_if_absent(EXPIRES_AT, n(day.expires_at));
    if let Some(ceiling) = documents {
        e = e.if_absent_or_at_most("uploadedDocuments", n(ceiling));
    }
    if let Some(ceiling) = bytes {
        e = e.if_absent_or_at_most("uploadedBytes", n(ceiling));
    }
    e.update(table, key(&upload.owner, &day.sk))
}

/// The check that `owner`'s `LIMITS` item holds the limit attributes `seen` (only those; none where `seen` is
/// empty), which the admission's conditions assumed.
pub(super) fn limits_as_seen(table: &str, owner: &str, seen: &Item) -> ConditionCheck {
    let mut e = Expression::new();
    for name in LIMIT_ATTRIBUTES {
        e = match seen.get(name) {
            Some(value) => e.if_equals(name, value.clone()),
            None => e.if_absent(name),
        };
    }
    e.check(table, key(owner, LIMITS_SK))
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn a_last_settlement_counts_a_turn_and_an_unpriced_one_adds_no_cost() {
        let hold = hold(None);
        let [day, _] = period_counters(&hold.periods);
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
