//! What one user may spend, and what they have spent: quotas of tokens and cost per UTC day and calendar month,
//! a rate of requests per minute, and the counters that hold across every instance of the functions.
//!
//! A turn is admitted with one read of the user's counters ([`UsageLedger::read`]); what it spent is added when it
//! ends: in the turn's own write when the store keeps the counters ([`UsageCharge`]), otherwise through
//! [`UsageLedger::record`] (an atomic add per period). Between the two a turn runs unchecked, so a user may
//! overshoot a quota by the turns already running when it was reached: at most one per instance serving them.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use time::{Date, Duration, Month, OffsetDateTime, Time};

use crate::{StoreError, UsageTotals};

/// What one turn spent, every model call of it counted (the query it wrote, each agent's message, the answer).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnSpent {
    pub totals: UsageTotals,
    /// Calls to the model that answered (`CountTokens` costs nothing and is not one).
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl TurnSpent {
    /// Counts one model call that used `usage`, priced by `prices` when known.
    pub fn add_call(&mut self, usage: crate::TokenUsage, prices: Option<&crate::Prices>) {
        self.totals.add(&UsageTotals::of(usage, prices));
        self.model_calls += 1;
    }

    /// Both turns' spending.
    pub fn plus(mut self, other: &TurnSpent) -> TurnSpent {
        self.totals.add(&other.totals);
        self.model_calls += other.model_calls;
        self.tool_calls += other.tool_calls;
        self
    }
}

/// The configured limits; each `None` is no limit. All `None` (the default): nothing is read or checked before a
/// turn.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    /// US dollars.
    pub cost_per_day: Option<f64>,
    /// US dollars.
    pub cost_per_month: Option<f64>,
    /// Requests to the model routes per minute.
    pub requests_per_minute: Option<u64>,
}

impl Limits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.tokens_per_day.is_some()
            || self.tokens_per_month.is_some()
            || self.cost_per_day.is_some()
            || self.cost_per_month.is_some()
            || self.requests_per_minute.is_some()
    }

    /// The limits for one user: the operator's item replaces each configured limit it names (0 there: none). With
    /// no limit configured nothing is checked, so an item changes nothing either.
    pub fn for_user(&self, raised: &LimitOverrides) -> Limits {
        if !self.any() {
            return Limits::default();
        }
        fn pick<T: PartialEq + Default>(configured: Option<T>, raised: Option<T>) -> Option<T> {
            match raised {
                None => configured,
                Some(v) if v == T::default() => None,
                Some(v) => Some(v),
            }
        }
        Limits {
            tokens_per_day: pick(self.tokens_per_day, raised.tokens_per_day),
            tokens_per_month: pick(self.tokens_per_month, raised.tokens_per_month),
            cost_per_day: pick(self.cost_per_day, raised.cost_per_day),
            cost_per_month: pick(self.cost_per_month, raised.cost_per_month),
            requests_per_minute: pick(self.requests_per_minute, raised.requests_per_minute),
        }
    }
}

/// One user's own limits, set by the operator in the store (see docs/operations.md); each `Some` replaces the
/// configured limit, `Some(0)` lifts it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitOverrides {
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    pub cost_per_day: Option<f64>,
    pub cost_per_month: Option<f64>,
    pub requests_per_minute: Option<u64>,
}

/// The periods an instant falls in (UTC), as the counters' keys name them, and when each ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Periods {
    /// `2026-11-25`
    pub day: String,
    /// `2026-11`
    pub month: String,
    /// `2026-11-25T14:51`
    pub minute: String,
    pub day_ends: OffsetDateTime,
    pub month_ends: OffsetDateTime,
    pub minute_ends: OffsetDateTime,
    pub now: OffsetDateTime,
}

impl Periods {
    pub fn at(now: OffsetDateTime) -> Self {
        let now = now.to_offset(time::UtcOffset::UTC);
        let date = now.date();
        let day_ends = date
            .next_day()
            .unwrap_or(Date::MAX)
            .with_time(Time::MIDNIGHT)
            .assume_utc();
        let (year, month) = match date.month() {
            Month::December => (date.year() + 1, Month::January),
            m => (date.year(), m.next()),
        };
        let month_ends = Date::from_calendar_date(year, month, 1)
            .unwrap_or(Date::MAX)
            .with_time(Time::MIDNIGHT)
            .assume_utc();
        let minute_start = now
            .replace_second(0)
            .and_then(|t| t.replace_nanosecond(0))
            .unwrap_or(now);
        Self {
            day: format!(
                "{:04}-{:02}-{:02}",
                date.year(),
                u8::from(date.month()),
                date.day()
            ),
            month: format!("{:04}-{:02}", date.year(), u8::from(date.month())),
            minute: format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}",
                date.year(),
                u8::from(date.month()),
                date.day(),
                now.hour(),
                now.minute()
            ),
            day_ends,
            month_ends,
            minute_ends: minute_start + Duration::MINUTE,
            now,
        }
    }

    /// Whole seconds until `end`, at least 1 (a client told to wait 0 s would ask again at once).
    pub fn seconds_until(&self, end: OffsetDateTime) -> u64 {
        let left = (end - self.now).whole_milliseconds().max(0) as u64;
        left.div_ceil(1000).max(1)
    }
}

/// What a user spent in one period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PeriodUsage {
    pub spent: UsageTotals,
    /// Turns answered (one per request to a model route that reached its end).
    pub turns: u64,
}

/// A user's counters, as one read gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSnapshot {
    pub day: PeriodUsage,
    pub month: PeriodUsage,
    /// Requests to the model routes in the current minute.
    pub minute_requests: u64,
    pub overrides: LimitOverrides,
}

pub type UsageFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The port to the per-user counters. Every method is one call to the store.
pub trait UsageLedger: Send + Sync {
    /// This ledger as its own type, so that a store keeping these very counters can recognise it and add a turn's
    /// spending in the turn's own write ([`crate::SessionStore::create_charging`]). `None` (the default): no store
    /// recognises it, and every turn is counted through [`UsageLedger::record`].
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// The user's counters of the periods of `periods`, and the operator's limits for them: one read.
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot>;
    /// Counts one request to a model route in the current minute.
    fn count_request<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, ()>;
    /// Adds what a turn spent to the day's and the month's counters (atomically, whatever else runs).
    fn record<'a>(
        &'a self,
        owner: &'a str,
        periods: &'a Periods,
        spent: &'a UsageTotals,
    ) -> UsageFuture<'a, ()>;
}

/// What a turn spent, offered to the store that writes the turn, so that a store keeping `ledger`'s counters adds
/// it to them in the same write (one call instead of three, and counted exactly when the turn lands). A store that
/// does not keep them leaves it, and the turn is counted through `ledger` as any turn not stored.
#[derive(Clone, Copy)]
pub struct UsageCharge<'a> {
    /// The ledger the turn would otherwise be counted in: the store charges only counters it knows to be these.
    pub ledger: &'a dyn UsageLedger,
    pub periods: &'a Periods,
    pub spent: &'a UsageTotals,
}

/// Whether a store's write of a turn added its [`UsageCharge`] to the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Charged {
    /// With the turn, in the same write: the turn must not be counted again.
    WithTurn,
    /// Not charged (a store without the counters, or a write too large to carry them): the caller counts the turn
    /// through its ledger.
    No,
}

/// Which limit refused a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    TokensPerDay,
    TokensPerMonth,
    CostPerDay,
    CostPerMonth,
    RequestsPerMinute,
}

/// A turn refused because its user is over a limit: what to tell them, and when to try again.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct OverLimit {
    pub kind: LimitKind,
    /// Seconds until the period ends (`Retry-After`).
    pub retry_after: u64,
    pub message: String,
}

impl OverLimit {
    /// Whether it is the rate limit (a throttle of requests) rather than a quota of spending.
    pub fn is_rate(&self) -> bool {
        self.kind == LimitKind::RequestsPerMinute
    }
}

/// The first limit `usage` has reached, if any; the period that ends last decides when to try again, as only its
/// end frees the user.
pub fn check(limits: &Limits, usage: &UsageSnapshot, periods: &Periods) -> Result<(), OverLimit> {
    let mut refusals = Vec::new();
    let tokens = |p: &PeriodUsage| p.spent.tokens.total_tokens;
    let cost = |p: &PeriodUsage| p.spent.cost_usd.unwrap_or(0.0);
    if let Some(limit) = limits.requests_per_minute
        && usage.minute_requests >= limit
    {
        refusals.push((
            LimitKind::RequestsPerMinute,
            periods.minute_ends,
            format!("Too many requests: the limit is {limit} a minute. Try again in a minute."),
        ));
    }
    if let Some(limit) = limits.tokens_per_day
        && tokens(&usage.day) >= limit
    {
        refusals.push((
            LimitKind::TokensPerDay,
            periods.day_ends,
            format!(
                "You have used your {limit} tokens for today. The quota resets at midnight UTC."
            ),
        ));
    }
    if let Some(limit) = limits.cost_per_day
        && cost(&usage.day) >= limit
    {
        refusals.push((
            LimitKind::CostPerDay,
            periods.day_ends,
            format!(
                "You have used your ${limit} of model use for today. The quota resets at midnight UTC."
            ),
        ));
    }
    if let Some(limit) = limits.tokens_per_month
        && tokens(&usage.month) >= limit
    {
        refusals.push((
            LimitKind::TokensPerMonth,
            periods.month_ends,
            format!(
                "You have used your {limit} tokens for this month. The quota resets on the first of next month (UTC)."
            ),
        ));
    }
    if let Some(limit) = limits.cost_per_month
        && cost(&usage.month) >= limit
    {
        refusals.push((
            LimitKind::CostPerMonth,
            periods.month_ends,
            format!(
                "You have used your ${limit} of model use for this month. The quota resets on the first of next month (UTC)."
            ),
        ));
    }
    match refusals.into_iter().max_by_key(|(_, ends, _)| *ends) {
        None => Ok(()),
        Some((kind, ends, message)) => Err(OverLimit {
            kind,
            retry_after: periods.seconds_until(ends),
            message,
        }),
    }
}

/// What `GET /usage` answers: the caller's spending this day and month, the limits that apply to them and when
/// each period resets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageReport {
    pub today: PeriodReport,
    pub this_month: PeriodReport,
    pub this_minute: MinuteReport,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodReport {
    /// `2026-11-25` or `2026-11` (UTC).
    pub period: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub total_tokens: u64,
    /// US dollars; `null` when the model's prices are unknown.
    pub cost_usd: Option<f64>,
    pub turns: u64,
    /// `null`: no limit.
    pub token_limit: Option<u64>,
    pub cost_limit_usd: Option<f64>,
    /// RFC 3339.
    pub resets_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinuteReport {
    pub requests: u64,
    pub request_limit: Option<u64>,
    pub resets_at: String,
}

/// The report of `usage` under `limits` (already the user's own, [`Limits::for_user`]).
pub fn report(limits: &Limits, usage: &UsageSnapshot, periods: &Periods) -> UsageReport {
    let period = |name: &str,
                  p: &PeriodUsage,
                  token_limit: Option<u64>,
                  cost_limit: Option<f64>,
                  ends: OffsetDateTime| {
        let t = &p.spent.tokens;
        PeriodReport {
            period: name.to_string(),
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cache_read_input_tokens: t.cache_read_input_tokens,
            cache_write_input_tokens: t.cache_write_input_tokens,
            total_tokens: t.total_tokens,
            cost_usd: p.spent.cost_usd,
            turns: p.turns,
            token_limit,
            cost_limit_usd: cost_limit,
            resets_at: crate::rfc3339_millis(ends),
        }
    };
    UsageReport {
        today: period(
            &periods.day,
            &usage.day,
            limits.tokens_per_day,
            limits.cost_per_day,
            periods.day_ends,
        ),
        this_month: period(
            &periods.month,
            &usage.month,
            limits.tokens_per_month,
            limits.cost_per_month,
            periods.month_ends,
        ),
        this_minute: MinuteReport {
            requests: usage.minute_requests,
            request_limit: limits.requests_per_minute,
            resets_at: crate::rfc3339_millis(periods.minute_ends),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TokenUsage;
    use time::macros::datetime;

    fn spent(tokens: u64, cost: f64) -> PeriodUsage {
        PeriodUsage {
            spent: UsageTotals {
                tokens: TokenUsage {
                    total_tokens: tokens,
                    ..TokenUsage::default()
                },
                cost_usd: Some(cost),
            },
            turns: 1,
        }
    }

    #[test]
    fn periods_are_utc_and_end_at_their_boundaries() {
        let p = Periods::at(datetime!(2026-12-31 23:59:30.5 UTC));
        assert_eq!(p.day, "2026-12-31");
        assert_eq!(p.month, "2026-12");
        assert_eq!(p.minute, "2026-12-31T23:59");
        assert_eq!(p.day_ends, datetime!(2027-01-01 0:00 UTC));
        assert_eq!(p.month_ends, datetime!(2027-01-01 0:00 UTC));
        assert_eq!(p.seconds_until(p.minute_ends), 30);
        let p = Periods::at(datetime!(2026-11-25 14:51:00 +02:00));
        assert_eq!(p.day, "2026-11-25");
        assert_eq!(p.minute, "2026-11-25T12:51");
        assert_eq!(p.seconds_until(p.day_ends), 11 * 3600 + 9 * 60);
    }

    #[test]
    fn a_limit_reached_refuses_until_its_period_ends() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let limits = Limits {
            tokens_per_day: Some(400),
            ..Limits::default()
        };
        let mut usage = UsageSnapshot {
            day: spent(399, 0.1),
            ..UsageSnapshot::default()
        };
        assert!(check(&limits, &usage, &periods).is_ok());
        usage.day = spent(400, 0.1);
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, LimitKind::TokensPerDay);
        assert_eq!(refused.retry_after, 2 * 3600);
        assert!(
            refused.message.contains("400 tokens"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn the_period_that_ends_last_decides_when_to_try_again() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let limits = Limits {
            tokens_per_day: Some(10),
            cost_per_month: Some(1.0),
            requests_per_minute: Some(1),
            ..Limits::default()
        };
        let usage = UsageSnapshot {
            day: spent(10, 1.0),
            month: spent(10, 1.0),
            minute_requests: 1,
            ..UsageSnapshot::default()
        };
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, LimitKind::CostPerMonth);
        assert_eq!(refused.retry_after, 5 * 86400 + 2 * 3600);
    }

    #[test]
    fn the_rate_limit_counts_requests_in_the_minute() {
        let periods = Periods::at(datetime!(2026-11-25 22:00:45 UTC));
        let limits = Limits {
            requests_per_minute: Some(5),
            ..Limits::default()
        };
        let mut usage = UsageSnapshot {
            minute_requests: 4,
            ..UsageSnapshot::default()
        };
        assert!(check(&limits, &usage, &periods).is_ok());
        usage.minute_requests = 5;
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert!(refused.is_rate());
        assert_eq!(refused.retry_after, 15);
    }

    #[test]
    fn an_operator_item_replaces_or_lifts_a_users_limits() {
        let limits = Limits {
            tokens_per_day: Some(400),
            cost_per_month: Some(5.0),
            requests_per_minute: Some(5),
            ..Limits::default()
        };
        let user = limits.for_user(&LimitOverrides {
            tokens_per_day: Some(10_000),
            requests_per_minute: Some(0),
            ..LimitOverrides::default()
        });
        assert_eq!(user.tokens_per_day, Some(10_000));
        assert_eq!(user.cost_per_month, Some(5.0));
        assert_eq!(user.requests_per_minute, None);
        assert!(!Limits::default().any());
        assert!(user.any());
        // Where nothing is configured, an item has nothing to change.
        assert_eq!(
            Limits::default().for_user(&LimitOverrides {
                tokens_per_day: Some(5),
                ..LimitOverrides::default()
            }),
            Limits::default()
        );
    }
}
