//! The per-user usage counters in the chats' DynamoDB table, so that quotas hold across every instance of the
//! functions: one item per user and period, added to atomically (`ADD`), each expiring after its period.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | a day's spending | `USAGE#{owner}` | `DAY#2026-11-25` | the token counts, `costUsd`, `turns`, `expiresAt` |
//! | a month's spending | `USAGE#{owner}` | `MONTH#2026-11` | the same |
//! | a minute's requests | `USAGE#{owner}` | `MINUTE#2026-11-25T14:51` | `requests`, `expiresAt` |
//! | the operator's limits for the user | `USAGE#{owner}` | `LIMITS` | `tokensPerDay`, `tokensPerMonth`, `costPerDay`, `costPerMonth`, `ratePerMinute` |
//!
//! The adds are sent once, never retried: an add whose answer was lost may have landed, and adding it again would
//! count a turn twice (only an add DynamoDB refused, as a turn's transaction held its item, is sent again). A lost add leaves the counter short by one turn (logged), which a quota can bear.
//!
//! A stored turn's spending is added in the turn's own transaction instead ([`turn_counter_updates`], the same
//! adds), when the store writes to this table: one write per turn, whose fate (retried after a lost race, read back
//! when its answer is lost) the counters share.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Update};
use chat_core::{
    LimitOverrides, PeriodUsage, Periods, StoreError, TokenUsage, UsageFuture, UsageLedger,
    UsageSnapshot, UsageTotals,
};
use serde::Deserialize;
use tracing::Instrument;

use crate::store::failed;
use crate::table::{EXPIRES_AT, PARTITION_KEY, SORT_KEY};

type Item = HashMap<String, AttributeValue>;

/// How long each counter is kept past its period's start: a day's two days, a month's about thirteen months (an
/// operator can still read last year's same month), a minute's an hour.
const DAY_KEPT_SECONDS: i64 = 2 * 86_400;
const MONTH_KEPT_SECONDS: i64 = 400 * 86_400;
const MINUTE_KEPT_SECONDS: i64 = 3_600;

/// How often an add refused because a turn's transaction held its item is sent (it was not applied).
const CONFLICT_ATTEMPTS: u32 = 4;

/// A user's counters in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoUsage {
    client: Client,
    /// The same client without retries, for the adds (sent once: see the module's notes), built once here rather
    /// than overridden on every add, which cost each add a new set of the client's runtime components.
    unretried: Client,
    table: String,
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

fn minute_sk(periods: &Periods) -> String {
    format!("MINUTE#{}", periods.minute)
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

impl DynamoUsage {
    pub fn new(client: Client, table: &str) -> Self {
        let unretried = Client::from_conf(
            client
                .config()
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        Self {
            client,
            unretried,
            table: table.to_string(),
        }
    }

    async fn read_counters(
        &self,
        owner: &str,
        periods: &Periods,
    ) -> Result<UsageSnapshot, StoreError> {
        let wanted = [
            day_sk(periods),
            month_sk(periods),
            minute_sk(periods),
            LIMITS_SK.to_string(),
        ];
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
                    let period = |sk: &str| read_item::<PeriodItem>(found.get(sk), "period");
                    let limits: LimitsItem = read_item(found.get(LIMITS_SK), "limits");
                    return Ok(UsageSnapshot {
                        day: period(&wanted[0]).usage(),
                        month: period(&wanted[1]).usage(),
                        minute_requests: period(&wanted[2]).requests,
                        overrides: LimitOverrides {
                            tokens_per_day: limits.tokens_per_day,
                            tokens_per_month: limits.tokens_per_month,
                            cost_per_day: limits.cost_per_day,
                            cost_per_month: limits.cost_per_month,
                            requests_per_minute: limits.rate_per_minute,
                        },
                    });
                }
            }
        }
        Err(StoreError::Unavailable(
            "the usage counters stayed unprocessed".into(),
        ))
    }

    /// One atomic add to a counter item, sent once (see the module's notes).
    async fn add(
        &self,
        owner: &str,
        sk: String,
        adds: &[(&str, AttributeValue)],
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let add = CounterAdd::new(adds, expires_at);
        let mut attempt = 1;
        loop {
            let sent = self
                .unretried
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(owner, &sk)))
                .update_expression(add.expression.clone())
                .set_expression_attribute_names(Some(add.names.clone()))
                .set_expression_attribute_values(Some(add.values.clone()))
                .send()
                .instrument(tracing::info_span!("store.usage.update_item"))
                .await;
            match sent {
                Ok(_) => return Ok(()),
                // A turn's transaction held the item (turns add to these counters in their own transactions): the
                // add was refused, not applied, so sending it again cannot count it twice.
                Err(e)
                    if attempt < CONFLICT_ATTEMPTS
                        && e.as_service_error().and_then(|s| s.code())
                            == Some("TransactionConflictException") =>
                {
                    attempt += 1;
                    let wait = fastrand::u64(5..=25);
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                }
                Err(e) => return Err(failed(e)),
            }
        }
    }
}

impl UsageLedger for DynamoUsage {
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot> {
        Box::pin(self.read_counters(owner, periods))
    }

    fn count_request<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, ()> {
        Box::pin(async move {
            let expires = periods.minute_ends.unix_timestamp() + MINUTE_KEPT_SECONDS;
            self.add(owner, minute_sk(periods), &[("requests", n(1))], expires)
                .await
        })
    }

    fn record<'a>(
        &'a self,
        owner: &'a str,
        periods: &'a Periods,
        spent: &'a UsageTotals,
    ) -> UsageFuture<'a, ()> {
        Box::pin(async move {
            let adds = turn_adds(spent);
            let [(day, day_expires), (month, month_expires)] = turn_counters(periods);
            let (day, month) = futures_util::future::join(
                self.add(owner, day, &adds, day_expires),
                self.add(owner, month, &adds, month_expires),
            )
            .await;
            day.and(month)
        })
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl DynamoUsage {
    /// Whether this ledger's counters are items of `table`: then a store writing to that table can add a turn's
    /// spending to them in the turn's own transaction ([`turn_counter_updates`]).
    pub(crate) fn counts_in(&self, table: &str) -> bool {
        self.table == table
    }
}

/// What a turn adds to each of its period's counters: its tokens, its cost when known, and one turn.
fn turn_adds(spent: &UsageTotals) -> Vec<(&'static str, AttributeValue)> {
    let t = &spent.tokens;
    let mut adds = vec![
        ("inputTokens", n(t.input_tokens)),
        ("outputTokens", n(t.output_tokens)),
        ("totalTokens", n(t.total_tokens)),
        ("cacheReadInputTokens", n(t.cache_read_input_tokens)),
        ("cacheWriteInputTokens", n(t.cache_write_input_tokens)),
        ("turns", n(1)),
    ];
    if let Some(cost) = spent.cost_usd {
        adds.push(("costUsd", n(cost)));
    }
    adds
}

/// The counters a turn adds to (the day's and the month's), each with the expiry it gets when the add creates it.
fn turn_counters(periods: &Periods) -> [(String, i64); 2] {
    let now = periods.now.unix_timestamp();
    [
        (day_sk(periods), now + DAY_KEPT_SECONDS),
        (month_sk(periods), now + MONTH_KEPT_SECONDS),
    ]
}

/// An atomic add to a counter item, as an update expression: `ADD` each attribute, and set the item's expiry
/// when the add creates it. The same for a ledger's own `UpdateItem` and for a turn's transaction.
struct CounterAdd {
    expression: String,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl CounterAdd {
    fn new(adds: &[(&str, AttributeValue)], expires_at: i64) -> Self {
        let mut terms = Vec::with_capacity(adds.len());
        let mut names = HashMap::from([("#exp".to_string(), EXPIRES_AT.to_string())]);
        let mut values = HashMap::from([(":exp".to_string(), n(expires_at))]);
        for (i, (name, value)) in adds.iter().enumerate() {
            terms.push(format!("#a{i} :a{i}"));
            names.insert(format!("#a{i}"), name.to_string());
            values.insert(format!(":a{i}"), value.clone());
        }
        Self {
            expression: format!(
                "ADD {} SET #exp = if_not_exists(#exp, :exp)",
                terms.join(", ")
            ),
            names,
            values,
        }
    }
}

/// The updates that add what a turn `spent` to `owner`'s day and month counters in `table`, for the transaction
/// that stores the turn: the same items, attributes and expiry as [`UsageLedger::record`] adds, so that the
/// counters read the same whichever way a turn was counted. In the turn's transaction they land exactly when the
/// turn does (retried with it after a lost race, never again once it is read back as landed).
pub(crate) fn turn_counter_updates(
    table: &str,
    owner: &str,
    periods: &Periods,
    spent: &UsageTotals,
) -> Vec<Update> {
    let adds = turn_adds(spent);
    turn_counters(periods)
        .into_iter()
        .map(|(sk, expires_at)| {
            let add = CounterAdd::new(&adds, expires_at);
            Update::builder()
                .table_name(table)
                .set_key(Some(key(owner, &sk)))
                .update_expression(add.expression)
                .set_expression_attribute_names(Some(add.names))
                .set_expression_attribute_values(Some(add.values))
                .build()
                .expect("an update has its table, key and expression")
        })
        .collect()
}
