//! The per-user usage counters in the chats' DynamoDB table, so that quotas hold across every instance of the
//! functions: items per user and period, changed only by transactions whose conditions make every check and add
//! one atomic step, each item expiring after its period.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | a day's spending | `USAGE#{owner}` | `DAY#2026-11-25` | the token counts, `costUsd`, `turns`; `reservedTokens`, `reservedCostUsd` (held by turns not settled); `heldTokens`, `heldCostUsd` (spent and held: what the quotas are checked against); `expiresAt` |
//! | a month's spending | `USAGE#{owner}` | `MONTH#2026-11` | the same |
//! | a window of the rate limit | `USAGE#{owner}` | `RATE#000176423456` (its last bucket of 10 s) | `requests` admitted in it, `expiresAt` |
//! | a turn's hold | `USAGE#{owner}` | `HOLD#{turn id}` | `reservedTokens`, `reservedCostUsd`, `day`, `month`, `version`, `expiresAt` |
//! | the operator's limits for the user | `USAGE#{owner}` | `LIMITS` | `tokensPerDay`, `tokensPerMonth`, `costPerDay`, `costPerMonth`, `ratePerMinute` |
//!
//! **Admission** is one `TransactWriteItems`: the turn's hold is put (unless it exists), the day's and the month's
//! counters add its reservation on condition that what they hold is under each quota, the request is added to the
//! seven windows it falls in on condition that its own holds fewer than the rate limit, and a condition check of the
//! `LIMITS` item asserts the user's own limits the conditions assumed (read once per user and instance, and again
//! when the check fails). Refused, nothing is written; the counters are then read to say which limit refused and
//! until when.
//!
//! **A settlement** is one `TransactWriteItems` too: the hold moves on from the version it was written for (or is
//! deleted, the turn over), and the counters add what was spent and the change of the reservation. The hold's
//! condition makes every write of a turn happen once: an attempt sent again after its answer was lost fails it,
//! and is read back as landed. A turn's last settlement goes in the turn's own transaction when the store writes to
//! this table ([`turn_settlement`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, TransactWriteItem, Update,
};
use chat_core::{
    Hold, LimitOverrides, Limits, OverLimit, PeriodUsage, Periods, RateWindow, Reserve, StoreError,
    TokenUsage, UsageFuture, UsageLedger, UsageSnapshot, UsageTotals, WINDOW_SPAN,
};
use serde::Deserialize;
use tracing::Instrument;

use crate::store::failed;
use crate::table::{EXPIRES_AT, PARTITION_KEY, SORT_KEY};

type Item = HashMap<String, AttributeValue>;

/// How long each counter is kept past its period's start: a day's two days, a month's about thirteen months (an
/// operator can still read last year's same month), a window's an hour, a hold two days (a turn lasts minutes; a
/// hold left by a turn that never settled is only bookkeeping, its reservation being in the counters).
const DAY_KEPT_SECONDS: i64 = 2 * 86_400;
const MONTH_KEPT_SECONDS: i64 = 400 * 86_400;
const WINDOW_KEPT_SECONDS: i64 = 3_600;
const HOLD_KEPT_SECONDS: i64 = 2 * 86_400;

/// How often a transaction that another one of the same user's held up (it was not applied) is sent again, and an
/// admission whose refusal a fresh read does not confirm (a turn settled meanwhile) is tried again.
const ATTEMPTS: u32 = 8;

/// The attributes of the operator's item that set limits.
const LIMIT_ATTRIBUTES: [&str; 5] = [
    "tokensPerDay",
    "tokensPerMonth",
    "costPerDay",
    "costPerMonth",
    "ratePerMinute",
];

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

/// A period's counters as stored (absent attributes are zero).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PeriodItem {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    cache_read_input_tokens: u64,
    cache_write_input_tokens: u64,
    cost_usd: Option<f64>,
    turns: u64,
    reserved_tokens: i64,
    reserved_cost_usd: Option<f64>,
    requests: u64,
}

/// The operator's item.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct LimitsItem {
    tokens_per_day: Option<u64>,
    tokens_per_month: Option<u64>,
    cost_per_day: Option<f64>,
    cost_per_month: Option<f64>,
    rate_per_minute: Option<u64>,
}

impl LimitsItem {
    fn overrides(&self) -> LimitOverrides {
        LimitOverrides {
            tokens_per_day: self.tokens_per_day,
            tokens_per_month: self.tokens_per_month,
            cost_per_day: self.cost_per_day,
            cost_per_month: self.cost_per_month,
            requests_per_minute: self.rate_per_minute,
        }
    }
}

impl PeriodItem {
    fn usage(&self) -> PeriodUsage {
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

fn day_sk(periods: &Periods) -> String {
    format!("DAY#{}", periods.day)
}

fn month_sk(periods: &Periods) -> String {
    format!("MONTH#{}", periods.month)
}

/// The window that ends with `bucket`.
fn window_sk(bucket: i64) -> String {
    format!("RATE#{bucket:012}")
}

fn hold_sk(id: &str) -> String {
    format!("HOLD#{id}")
}

const LIMITS_SK: &str = "LIMITS";

fn key(owner: &str, sk: &str) -> Item {
    HashMap::from([
        (
            PARTITION_KEY.to_string(),
            AttributeValue::S(usage_pk(owner)),
        ),
        (SORT_KEY.to_string(), AttributeValue::S(sk.to_string())),
    ])
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Dollars as DynamoDB's decimal numbers take them, to a ten-billionth (so that adds and their reversals cancel).
fn dollars(v: f64) -> AttributeValue {
    n((v * 1e10).round() / 1e10)
}

/// Reads an item as `T`; an item that does not read (an operator's typo) counts as empty, said in the log.
fn read_item<T: Default + for<'de> Deserialize<'de>>(item: Option<&Item>, what: &str) -> T {
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

/// An update expression built term by term, with its names and values: `ADD`s, `SET`s and a condition.
#[derive(Default)]
struct Expression {
    adds: Vec<String>,
    sets: Vec<String>,
    conditions: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expression {
    /// `#name` for an attribute.
    fn name(&mut self, attribute: &str) -> String {
        let placeholder = format!("#{attribute}");
        self.names
            .insert(placeholder.clone(), attribute.to_string());
        placeholder
    }

    /// `:x` for a value, numbered.
    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    fn add(&mut self, attribute: &str, value: AttributeValue) {
        let (name, value) = (self.name(attribute), self.value(value));
        self.adds.push(format!("{name} {value}"));
    }

    /// Sets the item's expiry when this write creates it.
    fn expires(&mut self, at: i64) {
        let (name, value) = (self.name(EXPIRES_AT), self.value(n(at)));
        self.sets
            .push(format!("{name} = if_not_exists({name}, {value})"));
    }

    /// A condition that `attribute` is absent or under `limit`.
    fn under(&mut self, attribute: &str, limit: AttributeValue) {
        let (name, value) = (self.name(attribute), self.value(limit));
        self.conditions.push(format!(
            "(attribute_not_exists({name}) OR {name} < {value})"
        ));
    }

    fn update(self, table: &str, key: Item) -> Update {
        let mut expression = Vec::new();
        if !self.adds.is_empty() {
            expression.push(format!("ADD {}", self.adds.join(", ")));
        }
        if !self.sets.is_empty() {
            expression.push(format!("SET {}", self.sets.join(", ")));
        }
        Update::builder()
            .table_name(table)
            .set_key(Some(key))
            .update_expression(expression.join(" "))
            .set_condition_expression(
                (!self.conditions.is_empty()).then(|| self.conditions.join(" AND ")),
            )
            .set_expression_attribute_names(Some(self.names))
            .set_expression_attribute_values(Some(self.values))
            .build()
            .expect("an update has its table, key and expression")
    }
}

/// The two spending counters a turn adds to (its day's and its month's), each with the expiry it gets when the add
/// creates it.
fn period_counters(periods: &Periods) -> [(String, i64); 2] {
    let now = periods.now.unix_timestamp();
    [
        (day_sk(periods), now + DAY_KEPT_SECONDS),
        (month_sk(periods), now + MONTH_KEPT_SECONDS),
    ]
}

/// What a settlement adds to a spending counter: `spent`, the reservation's change from `before` to `after`, the
/// same change and `spent` to what is held, and one turn when the turn is over.
fn settlement_adds(
    spent: &UsageTotals,
    before: &Reserve,
    after: Option<&Reserve>,
    expires_at: i64,
) -> Expression {
    let mut e = Expression::default();
    let t = &spent.tokens;
    for (name, value) in [
        ("inputTokens", t.input_tokens),
        ("outputTokens", t.output_tokens),
        ("totalTokens", t.total_tokens),
        ("cacheReadInputTokens", t.cache_read_input_tokens),
        ("cacheWriteInputTokens", t.cache_write_input_tokens),
    ] {
        e.add(name, n(value));
    }
    let after_tokens = after.map_or(0, |r| r.tokens) as i128;
    let change = after_tokens - before.tokens as i128;
    e.add("reservedTokens", n(change));
    e.add("heldTokens", n(change + t.total_tokens as i128));
    let priced = spent.cost_usd.is_some()
        || before.cost_usd.is_some()
        || after.is_some_and(|r| r.cost_usd.is_some());
    if priced {
        let cost = spent.cost_usd.unwrap_or(0.0);
        let change = after.and_then(|r| r.cost_usd).unwrap_or(0.0) - before.cost_usd.unwrap_or(0.0);
        if spent.cost_usd.is_some() {
            e.add("costUsd", dollars(cost));
        }
        e.add("reservedCostUsd", dollars(change));
        e.add("heldCostUsd", dollars(change + cost));
    }
    if after.is_none() {
        e.add("turns", n(1));
    }
    e.expires(expires_at);
    e
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
    let hold_key = key(&hold.owner, &hold_sk(&hold.id));
    let version = n(hold.version);
    let hold_write = match next {
        Some(next) => {
            let mut update = Update::builder()
                .table_name(table)
                .set_key(Some(hold_key))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", version)
                .expression_attribute_values(":next", n(hold.version + 1))
                .expression_attribute_values(":tokens", n(next.tokens));
            let mut expression = "SET version = :next, reservedTokens = :tokens".to_string();
            if let Some(cost) = next.cost_usd {
                expression.push_str(", reservedCostUsd = :cost");
                update = update.expression_attribute_values(":cost", dollars(cost));
            }
            TransactWriteItem::builder()
                .update(
                    update
                        .update_expression(expression)
                        .build()
                        .expect("an update has its parts"),
                )
                .build()
        }
        None => {
            let mut delete = Delete::builder().table_name(table).set_key(Some(hold_key));
            if guarded {
                delete = delete
                    .condition_expression("version = :v")
                    .expression_attribute_values(":v", version);
            }
            TransactWriteItem::builder()
                .delete(delete.build().expect("a delete has its parts"))
                .build()
        }
    };
    let mut writes = vec![hold_write];
    for (sk, expires_at) in period_counters(&hold.periods) {
        let adds = settlement_adds(spent, &hold.reserved, next, expires_at);
        writes.push(
            TransactWriteItem::builder()
                .update(adds.update(table, key(&hold.owner, &sk)))
                .build(),
        );
    }
    writes
}

/// The writes that make a turn's last settlement in the turn's own transaction, when its store writes to `table`:
/// the same as [`UsageLedger::settle`] makes with no next reservation, the hold deleted without a condition (the
/// store writes the turn once: a retried attempt is found by its token), so that the counters read the same
/// whichever way a turn was settled.
pub(crate) fn turn_settlement(
    table: &str,
    hold: &Hold,
    spent: &UsageTotals,
) -> Vec<TransactWriteItem> {
    settlement(table, hold, spent, None, false)
}

/// Why a transaction of the ledger was cancelled: by which of its writes, in order.
fn cancellation_reasons(
    e: &aws_sdk_dynamodb::error::SdkError<
        TransactWriteItemsError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> Option<Vec<Option<String>>> {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether a cancelled transaction was only held up by another one (nothing applied, worth sending again).
fn conflicted(
    e: &aws_sdk_dynamodb::error::SdkError<
        TransactWriteItemsError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> bool {
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

/// A short random pause before a transaction held up by another is sent again.
async fn pause() {
    tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(5..=40))).await;
}

/// Where each part of an admission is in its transaction, to read its cancellation.
struct AdmissionLayout {
    hold: usize,
    periods: [Option<usize>; 2],
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
        let mut wanted = vec![day_sk(periods), month_sk(periods), LIMITS_SK.to_string()];
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
                    let limits: LimitsItem = read_item(Some(&limits_item), "limits");
                    let mut window = RateWindow::default();
                    for (m, sk) in windows.iter().enumerate() {
                        window.counts[m] = period(sk).requests;
                    }
                    let snapshot = UsageSnapshot {
                        day: period(&wanted[0]).usage(),
                        month: period(&wanted[1]).usage(),
                        window,
                        overrides: limits.overrides(),
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

    fn remember_limits(&self, owner: &str, item: Item) {
        let mut seen = self.limits_seen.lock().expect("never poisoned");
        if seen.len() >= REMEMBERED_USERS {
            seen.clear();
        }
        seen.insert(owner.to_string(), item);
    }

    async fn read_limits(&self, owner: &str) -> Result<Item, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(owner, LIMITS_SK)))
            .consistent_read(true)
            .send()
            .instrument(tracing::info_span!("store.usage.get_item"))
            .await
            .map_err(failed)?;
        Ok(limit_attributes(&out.item.unwrap_or_default()))
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
        let periods = &hold.periods;
        let mut writes = Vec::new();
        let mut hold_item = key(owner, &hold_sk(&hold.id));
        hold_item.insert("reservedTokens".into(), n(hold.reserved.tokens));
        if let Some(cost) = hold.reserved.cost_usd {
            hold_item.insert("reservedCostUsd".into(), dollars(cost));
        }
        hold_item.insert("day".into(), AttributeValue::S(periods.day.clone()));
        hold_item.insert("month".into(), AttributeValue::S(periods.month.clone()));
        hold_item.insert("version".into(), n(hold.version));
        hold_item.insert(
            EXPIRES_AT.into(),
            n(periods.now.unix_timestamp() + HOLD_KEPT_SECONDS),
        );
        writes.push(
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(hold_item))
                        .condition_expression("attribute_not_exists(#pk)")
                        .expression_attribute_names("#pk", PARTITION_KEY)
                        .build()
                        .expect("a put has its parts"),
                )
                .build(),
        );
        let mut layout = AdmissionLayout {
            hold: 0,
            periods: [None, None],
            window: None,
            limits: None,
        };
        let quotas = [
            (limits.tokens_per_day, limits.cost_per_day),
            (limits.tokens_per_month, limits.cost_per_month),
        ];
        for (i, ((sk, expires_at), (tokens, cost))) in
            period_counters(periods).into_iter().zip(quotas).enumerate()
        {
            let mut e = Expression::default();
            e.add("reservedTokens", n(hold.reserved.tokens));
            e.add("heldTokens", n(hold.reserved.tokens));
            if let Some(reserved) = hold.reserved.cost_usd {
                e.add("reservedCostUsd", dollars(reserved));
                e.add("heldCostUsd", dollars(reserved));
            }
            e.expires(expires_at);
            // What is held, and what was spent (counters from before holds were kept have no `held…`).
            if let Some(limit) = tokens {
                e.under("heldTokens", n(limit));
                e.under("totalTokens", n(limit));
            }
            if let Some(limit) = cost {
                e.under("heldCostUsd", dollars(limit));
                e.under("costUsd", dollars(limit));
            }
            if tokens.is_some() || cost.is_some() {
                layout.periods[i] = Some(writes.len());
            }
            writes.push(
                TransactWriteItem::builder()
                    .update(e.update(&self.table, key(owner, &sk)))
                    .build(),
            );
        }
        if let Some(rate) = limits.requests_per_minute {
            layout.window = Some(writes.len());
            for m in 0..WINDOW_SPAN as i64 {
                let bucket = periods.bucket + m;
                let mut e = Expression::default();
                e.add("requests", n(1));
                let ends = Periods::bucket_starts(bucket + 1).unix_timestamp();
                e.expires(ends + WINDOW_KEPT_SECONDS);
                if m == 0 {
                    e.under("requests", n(rate));
                }
                writes.push(
                    TransactWriteItem::builder()
                        .update(e.update(&self.table, key(owner, &window_sk(bucket))))
                        .build(),
                );
            }
        }
        if let Some(seen) = seen {
            layout.limits = Some(writes.len());
            let mut check = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(key(owner, LIMITS_SK)));
            let mut conditions = Vec::new();
            for (i, name) in LIMIT_ATTRIBUTES.iter().enumerate() {
                check = check.expression_attribute_names(format!("#l{i}"), *name);
                match seen.get(*name) {
                    Some(value) => {
                        conditions.push(format!("#l{i} = :l{i}"));
                        check = check.expression_attribute_values(format!(":l{i}"), value.clone());
                    }
                    None => conditions.push(format!("attribute_not_exists(#l{i})")),
                }
            }
            writes.push(
                TransactWriteItem::builder()
                    .condition_check(
                        check
                            .condition_expression(conditions.join(" AND "))
                            .build()
                            .expect("a condition check has its parts"),
                    )
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
                .any()
                .then(|| self.limits_seen(owner).unwrap_or_default());
            let limits = match &seen {
                Some(item) => {
                    configured.for_user(&read_item::<LimitsItem>(Some(item), "limits").overrides())
                }
                None => Limits::default(),
            };
            let (writes, layout) = self.admission(hold, &limits, seen.as_ref());
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .instrument(tracing::info_span!("store.usage.admit"))
                .await;
            let e = match sent {
                Ok(_) => {
                    if let Some(item) = seen {
                        self.remember_limits(owner, item);
                    }
                    return Ok(Ok(()));
                }
                Err(e) => e,
            };
            if let Some(reasons) = cancellation_reasons(&e) {
                let failed_at = |i: Option<usize>| {
                    i.and_then(|i| reasons.get(i))
                        .is_some_and(|r| r.as_deref() == Some("ConditionalCheckFailed"))
                };
                if failed_at(Some(layout.hold)) {
                    // The hold exists: an earlier attempt of this very admission landed, its answer lost.
                    return Ok(Ok(()));
                }
                if failed_at(layout.limits) {
                    // The operator changed the user's limits since they were read: read them again.
                    let item = self.read_limits(owner).await?;
                    self.remember_limits(owner, item);
                    continue;
                }
                let refused = layout.periods.iter().any(|i| failed_at(*i))
                    || (0..WINDOW_SPAN).any(|m| failed_at(layout.window.map(|w| w + m)));
                if refused {
                    let (snapshot, item) = self.read_counters(owner, &hold.periods).await?;
                    self.remember_limits(owner, item);
                    let limits = configured.for_user(&snapshot.overrides);
                    match chat_core::check(&limits, &snapshot, &hold.periods) {
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

    /// The version of `hold` as stored; `None` when it is not (never admitted, or settled for the last time).
    async fn hold_version(&self, hold: &Hold) -> Result<Option<u32>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(&hold.owner, &hold_sk(&hold.id))))
            .consistent_read(true)
            .send()
            .instrument(tracing::info_span!("store.usage.get_item"))
            .await
            .map_err(failed)?;
        Ok(out.item.and_then(|item| {
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
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(settlement(&self.table, hold, spent, next, true)))
                .send()
                .instrument(tracing::info_span!("store.usage.settle"))
                .await;
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
            if cancellation_reasons(&e).is_some() || attempt == ATTEMPTS {
                return Err(failed(e));
            }
        }
        Err(StoreError::Unavailable(
            "the settlement was held up by the user's other turns".into(),
        ))
    }
}

/// The limit attributes of an operator's item, as stored.
fn limit_attributes(item: &Item) -> Item {
    LIMIT_ATTRIBUTES
        .iter()
        .filter_map(|name| item.get(*name).map(|v| (name.to_string(), v.clone())))
        .collect()
}

impl UsageLedger for DynamoUsage {
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot> {
        Box::pin(async move { Ok(self.read_counters(owner, periods).await?.0) })
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

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
