//! What one user may spend, and what they have spent: the counters that hold the [`Limits`] across every instance
//! of the functions. Each limit is a resource over a period ([`crate::LimitKind`]); the counters are one per UTC day,
//! ISO week and month, and the sliding minute of the rate limit.
//!
//! With no limit of turns configured (the defaults), nothing is written before a turn's model call: the turn is
//! recorded once it ends, whatever ended it (an answer, a failure, a client gone), in one write
//! ([`UsageLedger::record`]: its request, what it spent and the turn, in the periods it began in). No limit needs to
//! see turns in progress then, and the user's own item cannot set one (it only replaces or lifts configured limits).
//! A turn whose process dies before it ends is then not counted.
//!
//! Under a limit, every turn is admitted by one atomic write ([`UsageLedger::admit`]) that checks the user's limits against what
//! they have spent *and what their turns in progress hold*, counts the request in its periods (and in the rate window
//! while a rate is limited; a request to embed counts one per model call, [`Hold::requests`]), and holds the turn's
//! reservation ([`Hold`]): the most its first model call can spend (a prompt up to the budget and the output cap),
//! priced. A turn settles what its model calls spent as it goes
//! ([`UsageLedger::settle`]): whenever its reservation no longer covers its next call, and once when it ends,
//! whatever ended it (an answer, a failure, a client gone). A turn that never settles (its process died, the
//! function's timeout struck) leaves its reservation counted: an operator is never under-counted. Turns running at
//! once therefore see each other: twenty sent together under a quota that holds five reservations admit five.
//!
//! The rate limit is a sliding window of buckets of [`BUCKET_SECONDS`]: a request is admitted while fewer than the
//! limit were admitted in its own bucket and the [`WINDOW_BUCKETS`] before it. No 60-second window can then hold
//! more than the limit (any 60 seconds lie within seven buckets), and a user who sends without pause gets the limit
//! about every 70 seconds.
//!
//! An upload into the knowledge base is counted whole, every file of it, in its uploader's periods before any file is
//! stored ([`UploadQuota::count_upload`]): one conditional write adds its documents and bytes if each period's sums
//! stay within the upload limits. An upload counted that then fails is still counted (what was counted may have been
//! stored): the quota bounds what may have reached the knowledge base, never under it.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use time::{Date, Duration, Month, OffsetDateTime, Time};

use crate::limits::{Family, LimitKind, LimitOverrides, Limits, Period, Resource};
use crate::{StoreError, UsageTotals};

/// How many seconds one bucket of the rate window spans.
pub const BUCKET_SECONDS: i64 = 10;
/// How many buckets before a request's own the rate window reaches back: 60 seconds of them.
pub const WINDOW_BUCKETS: i64 = 60 / BUCKET_SECONDS;
/// How many window counts one admitted request adds to: its own bucket's window and the next
/// [`WINDOW_BUCKETS`] ones, each of which it falls in.
pub const WINDOW_SPAN: usize = WINDOW_BUCKETS as usize + 1;

/// The periods an instant falls in (UTC), as the counters' keys name them, and when each ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Periods {
    /// `2026-11-25`
    pub day: String,
    /// `2026-W48`: the ISO week (from Monday), numbered in its ISO year.
    pub week: String,
    /// `2026-11`
    pub month: String,
    /// The rate window's bucket: Unix seconds divided by [`BUCKET_SECONDS`].
    pub bucket: i64,
    pub day_ends: OffsetDateTime,
    pub week_ends: OffsetDateTime,
    pub month_ends: OffsetDateTime,
    pub now: OffsetDateTime,
}

impl Periods {
    pub fn at(now: OffsetDateTime) -> Self {
        let now = now.to_offset(time::UtcOffset::UTC);
        let date = now.date();
        let midnight = |d: Option<Date>| {
            d.unwrap_or(Date::MAX)
                .with_time(Time::MIDNIGHT)
                .assume_utc()
        };
        let day_ends = midnight(date.next_day());
        let (year, month) = match date.month() {
            Month::December => (date.year() + 1, Month::January),
            m => (date.year(), m.next()),
        };
        let month_ends = midnight(Date::from_calendar_date(year, month, 1).ok());
        let (iso_year, week, weekday) = date.to_iso_week_date();
        let days_left = 7 - i64::from(weekday.number_days_from_monday());
        let week_ends = midnight(date.checked_add(Duration::days(days_left)));
        Self {
            day: format!(
                "{:04}-{:02}-{:02}",
                date.year(),
                u8::from(date.month()),
                date.day()
            ),
            week: format!("{iso_year:04}-W{week:02}"),
            month: format!("{:04}-{:02}", date.year(), u8::from(date.month())),
            bucket: now.unix_timestamp().div_euclid(BUCKET_SECONDS),
            day_ends,
            week_ends,
            month_ends,
            now,
        }
    }

    /// The name of the calendar period `period` this instant falls in (`2026-11-25`, `2026-W48`, `2026-11`); the
    /// minute's is its bucket.
    pub fn label(&self, period: Period) -> String {
        match period {
            Period::Minute => self.bucket.to_string(),
            Period::Day => self.day.clone(),
            Period::Week => self.week.clone(),
            Period::Month => self.month.clone(),
            Period::AtOnce => "now".into(),
        }
    }

    /// When the calendar period `period` ends (the minute's window: when this bucket leaves it; what is held at
    /// once: now, as it counts only what is held).
    pub fn ends(&self, period: Period) -> OffsetDateTime {
        match period {
            Period::Minute => Self::bucket_starts(self.bucket + WINDOW_SPAN as i64),
            Period::Day => self.day_ends,
            Period::Week => self.week_ends,
            Period::Month => self.month_ends,
            Period::AtOnce => self.now,
        }
    }

    /// When bucket `bucket` of the rate window starts.
    pub fn bucket_starts(bucket: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(bucket.saturating_mul(BUCKET_SECONDS))
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }

    /// Whole seconds until `end`, at least 1 (a client told to wait 0 s would ask again at once).
    pub fn seconds_until(&self, end: OffsetDateTime) -> u64 {
        let left = (end - self.now).whole_milliseconds().max(0) as u64;
        left.div_ceil(1000).max(1)
    }
}

/// Tokens and US dollars held against a user's quotas: what a turn reserves for a model call, priced.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reserve {
    pub tokens: u64,
    /// `None` when the model's prices are unknown (then nothing is held against a cost quota).
    pub cost_usd: Option<f64>,
}

impl Reserve {
    /// The most a model call can spend: `prompt` tokens read and `output` written, priced by `prices` when known.
    pub fn of_call(prompt: u64, output: u64, prices: Option<&crate::Prices>) -> Self {
        let usage = crate::TokenUsage {
            input_tokens: prompt,
            output_tokens: output,
            total_tokens: prompt.saturating_add(output),
            ..crate::TokenUsage::default()
        };
        Self {
            tokens: usage.total_tokens,
            cost_usd: prices.map(|p| p.cost(&usage)),
        }
    }

    /// What `spent` holds against the quotas.
    pub fn of_spent(spent: &UsageTotals) -> Self {
        Self {
            tokens: spent.tokens.total_tokens,
            cost_usd: spent.cost_usd,
        }
    }

    /// Both together.
    pub fn plus(&self, other: &Reserve) -> Reserve {
        Reserve {
            tokens: self.tokens.saturating_add(other.tokens),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (None, None) => None,
                (a, b) => Some(round_dollars(a.unwrap_or(0.0) + b.unwrap_or(0.0))),
            },
        }
    }

    /// This less `other` (never below nothing).
    pub fn minus(&self, other: &Reserve) -> Reserve {
        Reserve {
            tokens: self.tokens.saturating_sub(other.tokens),
            cost_usd: self
                .cost_usd
                .map(|c| round_dollars(c - other.cost_usd.unwrap_or(0.0)).max(0.0)),
        }
    }

    /// Whether this holds at least `other`, in tokens and in dollars.
    pub fn covers(&self, other: &Reserve) -> bool {
        self.tokens >= other.tokens
            && self.cost_usd.unwrap_or(0.0) + 1e-9 >= other.cost_usd.unwrap_or(0.0)
    }
}

/// Dollars to a ten-billionth, as prices are computed, so that sums and differences show no binary noise.
pub(crate) fn round_dollars(v: f64) -> f64 {
    (v * 1e10).round() / 1e10
}

/// One turn's reservation in its owner's counters, from its admission to its last settlement.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub owner: String,
    /// The turn's own id (32 hex characters), unique.
    pub id: String,
    /// The periods the turn was admitted in: what it holds and what it spends count in these, whenever it ends.
    pub periods: Periods,
    /// What the counters hold for the turn now, beside what it has settled as spent.
    pub reserved: Reserve,
    /// How many settlements have changed it: each is applied only to the version it was written for, so that a
    /// settlement sent again (its answer lost) is never counted twice.
    pub version: u32,
    /// Whether the turn was admitted, this hold written with its reservation ([`UsageLedger::admit`]). `false`: no
    /// limit held the turn, nothing was written for it, it reserves nothing, and it is recorded whole once it ends
    /// ([`UsageLedger::record`]).
    pub admitted: bool,
    /// How many requests the turn counts in the rate window and the request counters, at least 1: a chat turn one,
    /// a request to embed one per model call it makes (Titan takes one text per call), so that what bounds the
    /// calls to the model bounds them however many a request carries ([`Hold::counting`]).
    pub requests: u64,
}

impl Hold {
    /// A new turn's hold of `reserved`, admitted now.
    pub fn new(owner: &str, reserved: Reserve, now: OffsetDateTime) -> Self {
        Self {
            owner: owner.to_string(),
            id: uuid::Uuid::new_v4().simple().to_string(),
            periods: Periods::at(now),
            reserved,
            version: 0,
            admitted: true,
            requests: 1,
        }
    }

    /// This hold counting `requests` requests (at least 1) rather than one: a request that makes that many model
    /// calls.
    pub fn counting(self, requests: u64) -> Self {
        Self {
            requests: requests.max(1),
            ..self
        }
    }

    /// A new turn that no limit holds, begun now: nothing is written for it until it is recorded.
    pub fn unadmitted(owner: &str, now: OffsetDateTime) -> Self {
        Self {
            admitted: false,
            ..Self::new(owner, Reserve::default(), now)
        }
    }
}

/// What a user spent in one period, and what their turns in progress hold in it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PeriodUsage {
    pub spent: UsageTotals,
    /// Turns answered (one per request to a model route, counted when it settles).
    pub turns: u64,
    /// What turns not settled yet hold: in progress, or never settled (a process that died).
    pub reserved: Reserve,
    /// Requests to the model routes admitted (counted when admitted, whatever became of them).
    pub requests: u64,
    /// What was uploaded (counted only while an upload limit is configured).
    pub uploads: UploadUsage,
}

impl PeriodUsage {
    /// What counts against the period's quotas: what was spent and what is held.
    pub fn held(&self) -> Reserve {
        Reserve::of_spent(&self.spent).plus(&self.reserved)
    }

    /// How much of `resource` counts against a limit of this period: what was spent or admitted, and what turns in
    /// progress hold.
    pub fn used(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Tokens => self.held().tokens as f64,
            Resource::Cost => self.held().cost_usd.unwrap_or(0.0),
            _ => self.spent_alone(resource),
        }
    }

    /// How much of `resource` was spent, without what turns in progress hold.
    fn spent_alone(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Requests => self.requests as f64,
            Resource::Tokens => self.spent.tokens.total_tokens as f64,
            Resource::Cost => self.spent.cost_usd.unwrap_or(0.0),
            Resource::UploadedDocuments => self.uploads.documents as f64,
            Resource::UploadedBytes => self.uploads.bytes as f64,
            Resource::OpenWatches => 0.0,
        }
    }
}

/// The requests a user was admitted in the rate window: `counts[0]` in the window that ends now (this bucket and
/// the [`WINDOW_BUCKETS`] before it), `counts[m]` those of them still in the window that ends `m` buckets later.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateWindow {
    pub counts: [u64; WINDOW_SPAN],
}

impl RateWindow {
    /// Requests admitted in the window that ends now.
    pub fn requests(&self) -> u64 {
        self.counts[0]
    }

    /// When the window holds fewer than `limit` requests: now when it already does, else the start of the first
    /// later bucket whose window does (at the latest, once this bucket has left the window).
    pub fn below_at(&self, limit: u64, periods: &Periods) -> OffsetDateTime {
        match (0..WINDOW_SPAN).find(|&m| self.counts[m] < limit) {
            Some(0) => periods.now,
            Some(m) => Periods::bucket_starts(periods.bucket + m as i64),
            None => Periods::bucket_starts(periods.bucket + WINDOW_SPAN as i64),
        }
    }
}

/// A user's counters, as one read gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSnapshot {
    pub day: PeriodUsage,
    pub week: PeriodUsage,
    pub month: PeriodUsage,
    /// Requests to the model routes admitted in the rate window (counted only while a rate limit applies).
    pub window: RateWindow,
    /// Watches of documents open now (read only where `GET /usage` asks).
    pub open_watches: u64,
    pub overrides: LimitOverrides,
}

impl UsageSnapshot {
    /// The counter of the calendar period `period` (the minute's is [`UsageSnapshot::window`]: `None`).
    pub fn counter(&self, period: Period) -> Option<&PeriodUsage> {
        match period {
            Period::Minute | Period::AtOnce => None,
            Period::Day => Some(&self.day),
            Period::Week => Some(&self.week),
            Period::Month => Some(&self.month),
        }
    }

    /// How much of `kind`'s resource counts against it now.
    pub fn used(&self, kind: LimitKind) -> f64 {
        match (self.counter(kind.period), kind.period) {
            (Some(counter), _) => counter.used(kind.resource),
            (None, Period::AtOnce) => self.open_watches as f64,
            (None, _) => self.window.requests() as f64,
        }
    }
}

pub type UsageFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The port to the per-user counters. Every method is one call to the store, but for a refusal, which reads the
/// counters to say which limit refused and until when.
pub trait UsageLedger: Send + Sync {
    /// This ledger as its own type, so that a store keeping these very counters can recognise it and settle a
    /// turn in the turn's own write ([`crate::SessionStore::create_charging`]). `None` (the default): no store
    /// recognises it, and every turn is settled through [`UsageLedger::settle`].
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// The user's counters of the periods of `periods`, and the operator's limits for them: one read.
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot>;

    /// Admits the turn of `hold` under `limits` (the configured ones: the ledger applies the owner's own item) in
    /// one atomic write: when no limit is reached, by what the owner spent and what their turns in progress hold,
    /// nor the rate window is full, the request is counted in the window (while a rate is limited) and the hold's
    /// reservation is added to its day's and month's counters. A refusal writes nothing and says which limit
    /// refused and when to try again.
    fn admit<'a>(
        &'a self,
        hold: &'a Hold,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>>;

    /// Adds `spent` to the hold's periods and changes what it holds: to `next` while the turn goes on, or, with
    /// `None`, releases it and counts the turn, which is then over. Applied once: a settlement of a version the hold
    /// is past already (an earlier attempt of this one landed) changes nothing.
    fn settle<'a>(
        &'a self,
        hold: &'a Hold,
        spent: &'a UsageTotals,
        next: Option<Reserve>,
    ) -> UsageFuture<'a, ()>;

    /// Records the turn of `hold`, which was not admitted (no limit held it: [`Hold::unadmitted`]), once it is over:
    /// its request, `spent` and the turn added to the hold's periods in one write. Applied once: an attempt whose
    /// answer was lost is read back by the turn's id, and sent again only when it did not land.
    fn record<'a>(&'a self, hold: &'a Hold, spent: &'a UsageTotals) -> UsageFuture<'a, ()>;
}

/// A turn's last settlement, offered to the store that writes the turn, so that a store keeping `ledger`'s counters
/// makes it in the same write (counted exactly when the turn lands). A store that does not keep them leaves it, and
/// the turn is settled through `ledger`. A turn that was not admitted ([`Hold::admitted`]) is recorded whole by it.
#[derive(Clone, Copy)]
pub struct UsageCharge<'a> {
    /// The ledger the turn would otherwise be settled in: the store settles only counters it knows to be these.
    pub ledger: &'a dyn UsageLedger,
    /// The turn's hold: released by the charge when it was admitted, else only its owner, id and periods count.
    pub hold: &'a Hold,
    /// What the turn spent that it has not settled yet.
    pub spent: &'a UsageTotals,
}

/// A turn refused because its user is over a limit: what to tell them, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OverLimit {
    pub kind: LimitKind,
    /// Seconds until the limit lets the user in again (`Retry-After`).
    pub retry_after: u64,
    pub message: String,
    /// The request alone passes the limit (more model calls than it allows): no wait lets it in, so it is no
    /// throttle to retry but a request too large.
    pub alone: bool,
}

impl OverLimit {
    /// Whether it is the rate limit (a throttle of requests) rather than a quota of spending.
    pub fn is_rate(&self) -> bool {
        self.kind == LimitKind::REQUESTS_PER_MINUTE
    }
}

/// How long a user whose quota is reached only by their turns in progress waits: about one turn's time, after
/// which those turns have settled what they really spent.
pub const HELD_RETRY_SECONDS: u64 = 10;

/// The first limit of turns `usage` has reached, if any: the rate window full, or a quota reached by what was
/// spent and what turns in progress hold. The limit that lets the user in last decides when to try again. A quota
/// reached only because of turns in progress is tried again shortly ([`HELD_RETRY_SECONDS`]), when they have
/// settled.
pub fn check(limits: &Limits, usage: &UsageSnapshot, periods: &Periods) -> Result<(), OverLimit> {
    check_requests(limits, usage, periods, 1)
}

/// [`check`] for a request that counts `requests` requests ([`Hold::requests`]): a limit of requests (the rate
/// limit, a requests quota) refuses it when those requests would pass it, which a request of more than the limit
/// always would (it is told to send fewer at a time). With one request, exactly [`check`].
pub fn check_requests(
    limits: &Limits,
    usage: &UsageSnapshot,
    periods: &Periods,
    requests: u64,
) -> Result<(), OverLimit> {
    let mut refusals: Vec<(LimitKind, OffsetDateTime, String, bool)> = Vec::new();
    let soon = periods.now + Duration::seconds(HELD_RETRY_SECONDS as i64);
    // Beyond the one request every turn counts, what the request adds to a limit of requests.
    let more = requests.max(1) - 1;
    for (kind, limit) in limits.of(Family::Turns) {
        let Some(counter) = usage.counter(kind.period) else {
            // The minute: the rate window.
            let limit = limit as u64;
            if usage.window.requests().saturating_add(more) >= limit {
                let (at, message) = if more >= limit {
                    (
                        Periods::bucket_starts(periods.bucket + WINDOW_SPAN as i64),
                        too_many_calls(requests, &plural(limit, "request"), "a minute"),
                    )
                } else {
                    (
                        usage.window.below_at(limit - more, periods),
                        format!(
                            "Too many requests: the limit is {limit} a minute. Try again shortly."
                        ),
                    )
                };
                refusals.push((kind, at, message, more >= limit));
            }
            continue;
        };
        let more = if kind.resource == Resource::Requests {
            more as f64
        } else {
            0.0
        };
        if counter.used(kind.resource) + more < limit {
            continue;
        }
        let spent_alone = counter.spent_alone(kind.resource) + more >= limit;
        let message = if more == 0.0 || counter.used(kind.resource) >= limit {
            quota_message(kind, limit, spent_alone)
        } else if more >= limit {
            too_many_calls(
                requests,
                &plural(limit as u64, "request"),
                words(kind.period).per,
            )
        } else {
            let left = (limit - counter.used(kind.resource)) as u64;
            let PeriodWords { this, per, resets } = words(kind.period);
            format!(
                "This request makes {requests} model calls, each counted as a request, but only {left} of your {} \
                 {per} {} left {this}. Send fewer texts per request, or wait until the quota resets {resets}.",
                plural(limit as u64, "request"),
                if left == 1 { "is" } else { "are" }
            )
        };
        refusals.push((
            kind,
            if spent_alone {
                periods.ends(kind.period)
            } else {
                soon
            },
            message,
            more > 0.0 && more >= limit,
        ));
    }
    // A request no wait lets in is told so first; else the limit that lets it in last decides when to try again.
    match refusals
        .into_iter()
        .max_by_key(|(_, at, _, alone)| (*alone, *at))
    {
        None => Ok(()),
        Some((kind, at, message, alone)) => Err(OverLimit {
            kind,
            retry_after: periods.seconds_until(at),
            message,
            alone,
        }),
    }
}

/// What a request of more model calls than a limit of requests allows is told: no wait lets it in.
fn too_many_calls(requests: u64, limit: &str, per: &str) -> String {
    format!(
        "Too many requests: this request makes {requests} model calls, each counted as a request, and the limit is \
         {limit} {per}. Send fewer texts per request."
    )
}

/// How a period is said to a person: `today`, `a day`, and when its quota resets.
struct PeriodWords {
    this: &'static str,
    per: &'static str,
    resets: &'static str,
}

fn words(period: Period) -> PeriodWords {
    let (this, per, resets) = match period {
        Period::Minute => ("this minute", "a minute", "within a minute"),
        Period::Day => ("today", "a day", "at midnight UTC"),
        Period::Week => ("this week", "a week", "on Monday at 00:00 UTC"),
        Period::Month => ("this month", "a month", "on the first of next month (UTC)"),
        Period::AtOnce => ("at once", "at once", "as soon as one ends"),
    };
    PeriodWords { this, per, resets }
}

/// What a user over quota `kind` of `limit` is told: spent, or held by their turns in progress.
fn quota_message(kind: LimitKind, limit: f64, spent: bool) -> String {
    let what = match kind.resource {
        Resource::Cost => format!("${limit} of model use"),
        Resource::Requests => plural(limit as u64, "request"),
        Resource::Tokens => format!("{limit} tokens"),
        Resource::UploadedDocuments => plural(limit as u64, "document"),
        Resource::UploadedBytes => size(limit as u64),
        Resource::OpenWatches => format!("{limit} open watches"),
    };
    let PeriodWords { this, resets, .. } = words(kind.period);
    if spent {
        format!("You have used your {what} for {this}. The quota resets {resets}.")
    } else {
        format!(
            "Your answers in progress hold the rest of your {what} for {this}. Try again when they have finished."
        )
    }
}

// ---- Uploads ----------------------------------------------------------------------------------------------------

/// What a user uploaded in one period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UploadUsage {
    pub documents: u64,
    pub bytes: u64,
}

/// One upload, counted whole (every file of it) in its owner's periods before any file is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub owner: String,
    /// The upload's own id (32 hex characters), unique: a count sent again (its answer lost) finds it landed.
    pub id: String,
    pub documents: u64,
    pub bytes: u64,
    /// The periods (UTC) it counts in.
    pub periods: Periods,
}

impl Upload {
    pub fn new(owner: &str, documents: u64, bytes: u64, now: OffsetDateTime) -> Self {
        Self {
            owner: owner.to_string(),
            id: uuid::Uuid::new_v4().simple().to_string(),
            documents,
            bytes,
            periods: Periods::at(now),
        }
    }

    /// How much of `resource` the upload adds (nothing of a resource of turns).
    pub fn amount(&self, resource: Resource) -> u64 {
        match resource {
            Resource::UploadedDocuments => self.documents,
            Resource::UploadedBytes => self.bytes,
            _ => 0,
        }
    }
}

/// The port that counts uploads in the per-user counters (the usage ledger's store).
pub trait UploadQuota: Send + Sync {
    /// Counts `upload` in its owner's periods under `limits` (the configured ones, of which the upload limits
    /// apply: the ledger applies the owner's own item) in one atomic write: its documents and bytes are added on
    /// condition that each period's sums stay within each limit. A refusal writes nothing and says which limit
    /// refused, how much is left and until when. An attempt whose answer is lost is read back, never counted twice.
    /// With no upload limit configured nothing is counted.
    fn count_upload<'a>(
        &'a self,
        upload: &'a Upload,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>>;
}

/// The most each upload limit's counter may hold before `upload` for it to fit (the limit less what it adds), which
/// the conditional write asserts; `None` when the upload alone is more than a limit.
pub fn upload_ceilings(limits: &Limits, upload: &Upload) -> Option<Vec<(LimitKind, u64)>> {
    limits
        .of(Family::Uploads)
        .map(|(kind, limit)| {
            (limit as u64)
                .checked_sub(upload.amount(kind.resource))
                .map(|ceiling| (kind, ceiling))
        })
        .collect()
}

/// Whether `upload` fits in what is left of its periods' upload limits after `usage`: the first limit it would
/// pass, said for a person (which limit, how much is left), refuses it until its period ends (UTC).
pub fn check_upload(
    limits: &Limits,
    usage: &UsageSnapshot,
    upload: &Upload,
) -> Result<(), OverLimit> {
    let periods = &upload.periods;
    for (kind, limit) in limits.of(Family::Uploads) {
        let Some(counter) = usage.counter(kind.period) else {
            continue;
        };
        let limit = limit as u64;
        let used = counter.spent_alone(kind.resource) as u64;
        let n = upload.amount(kind.resource);
        if used.saturating_add(n) <= limit {
            continue;
        }
        let left = limit.saturating_sub(used);
        let PeriodWords { this, per, resets } = words(kind.period);
        let message = if kind.resource == Resource::UploadedDocuments {
            if n > limit {
                format!(
                    "This upload has {} and you may upload at most {} {per}: send fewer at a time.",
                    plural(n, "document"),
                    plural(limit, "document")
                )
            } else if left == 0 {
                format!(
                    "You have uploaded your {} for {this}. The quota resets {resets}.",
                    plural(limit, "document")
                )
            } else {
                format!(
                    "This upload has {} but only {} of your {} {per} {} left {this}. Send fewer, or wait until the \
                     quota resets {resets}.",
                    plural(n, "document"),
                    left,
                    plural(limit, "document"),
                    if left == 1 { "is" } else { "are" }
                )
            }
        } else if n > limit {
            format!(
                "This upload is {} and you may upload at most {} {per}: send smaller or fewer files.",
                size(n),
                size(limit)
            )
        } else if left == 0 {
            format!(
                "You have uploaded your {} for {this}. The quota resets {resets}.",
                size(limit)
            )
        } else {
            format!(
                "This upload is {} but only {} of your {} {per} is left {this}. Send smaller or fewer files, or \
                 wait until the quota resets {resets}.",
                size(n),
                size(left),
                size(limit)
            )
        };
        return Err(OverLimit {
            kind,
            retry_after: periods.seconds_until(periods.ends(kind.period)),
            message,
            alone: false,
        });
    }
    Ok(())
}

// ---- Watches ----------------------------------------------------------------------------------------------------

/// One open watch's place among the places its owner may hold at once ([`WatchSlots`]): held until the watch gives
/// it back, or until `until` passes (a watch whose process died gives its place back then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchLease {
    pub owner: String,
    /// Which of the owner's places: 0 up to the limit.
    pub slot: u32,
    /// The watch's own id (32 hex characters): a place is given back only by the watch that holds it.
    pub id: String,
    pub until: OffsetDateTime,
}

impl WatchLease {
    /// A new watch's claim on place `slot` of `owner`'s, until `until`.
    pub fn new(owner: &str, slot: u32, until: OffsetDateTime) -> Self {
        Self {
            owner: owner.to_string(),
            slot,
            id: uuid::Uuid::new_v4().simple().to_string(),
            until,
        }
    }
}

/// What asking for a watch's place gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchPlace {
    Taken(WatchLease),
    /// Every place is held: the first frees by `free_by` at the latest.
    Full {
        free_by: OffsetDateTime,
    },
}

/// Whether a place taken until `until` is still held at `now`: until its second has passed (DynamoDB's condition
/// compares whole seconds).
pub fn place_held(until: OffsetDateTime, now: OffsetDateTime) -> bool {
    until.unix_timestamp() >= now.unix_timestamp()
}

/// The places found held while a watch looks for a free one, in turn: when the first of them frees.
#[derive(Debug, Default)]
pub struct HeldPlaces {
    free_by: Option<OffsetDateTime>,
}

impl HeldPlaces {
    /// One more place held, until `ends`.
    pub fn held_until(&mut self, ends: OffsetDateTime) {
        self.free_by = Some(self.free_by.map_or(ends, |f| f.min(ends)));
    }

    /// Every place held: full until the first frees (by `until`, the watch's own end, when none said).
    pub fn full(self, until: OffsetDateTime) -> WatchPlace {
        WatchPlace::Full {
            free_by: self.free_by.unwrap_or(until),
        }
    }
}

/// The port to the places of open watches, shared by every instance of the functions. Taking a place is one
/// conditional write per place tried; giving it back one write.
pub trait WatchSlots: Send + Sync {
    /// Takes the first of `owner`'s `limit` places that is free at `now` (never taken, given back, or its holder's
    /// time passed), for a watch that ends by `until`.
    fn take_place<'a>(
        &'a self,
        owner: &'a str,
        limit: u32,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> UsageFuture<'a, WatchPlace>;

    /// Gives `lease`'s place back, if it still holds it.
    fn give_back<'a>(&'a self, lease: &'a WatchLease) -> UsageFuture<'a, ()>;

    /// How many of `owner`'s places are held at `now`.
    fn held<'a>(&'a self, owner: &'a str, now: OffsetDateTime) -> UsageFuture<'a, u64>;
}

/// The refusal of a watch beyond `limit` open at once: try again when the first place frees (`free_by` at the
/// latest; sooner when a watch ends first).
pub fn watches_full(limit: u64, free_by: OffsetDateTime, now: OffsetDateTime) -> OverLimit {
    let left = (free_by - now).whole_milliseconds().max(0) as u64;
    OverLimit {
        kind: LimitKind::OPEN_WATCHES,
        alone: false,
        retry_after: left.div_ceil(1000).max(1),
        message: format!(
            "You have {} of your documents open, the most at once: close one (another tab of the page?) or try \
             again when one ends.",
            plural(limit, "watch").replace("watchs", "watches")
        ),
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A size for a person: `512 bytes`, `1.5 MB` (binary units, one decimal).
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return plural(bytes, "byte");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// What `GET /usage` answers: the caller's spending this day and month, what their turns in progress hold, the
/// limits that apply to them and when each period resets; and every limit in force, in `limits`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageReport {
    pub today: PeriodReport,
    pub this_month: PeriodReport,
    pub this_minute: MinuteReport,
    pub uploads_today: UploadReport,
    /// Every limit that applies to the user, each with what counts against it now.
    pub limits: Vec<LimitReport>,
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
    /// Tokens held by turns not settled: in progress, or never settled (counted against the quota all the same).
    pub reserved_tokens: u64,
    /// US dollars held likewise; `null` when no price is known.
    pub reserved_cost_usd: Option<f64>,
    /// `null`: no limit.
    pub token_limit: Option<u64>,
    pub cost_limit_usd: Option<f64>,
    /// RFC 3339.
    pub resets_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinuteReport {
    /// Requests admitted in the last minute (the sliding window that ends now).
    pub requests: u64,
    pub request_limit: Option<u64>,
    /// When the window next lets one of them go (now when it holds none).
    pub resets_at: String,
}

/// What a user uploaded today (UTC) and the daily upload quotas that apply to them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UploadReport {
    /// `2026-11-25` (UTC).
    pub period: String,
    /// Documents uploaded today (counted only while an upload quota is configured).
    pub documents: u64,
    pub bytes: u64,
    /// `null`: no limit.
    pub document_limit: Option<u64>,
    pub byte_limit: Option<u64>,
    /// RFC 3339.
    pub resets_at: String,
}

/// One limit in force and what counts against it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitReport {
    /// `requests_per_day`: `{resource}_per_{period}`.
    pub name: LimitKind,
    /// `requests`, `tokens`, `cost` (US dollars), `uploaded_documents` or `uploaded_bytes`.
    pub resource: &'static str,
    /// `minute` (the sliding window), `day`, `week` (ISO, from Monday) or `month` (UTC).
    pub period: &'static str,
    /// What counts against it: spent or admitted, and what turns in progress hold.
    pub used: Amount,
    pub limit: Amount,
    /// RFC 3339: when the period ends (the minute's window: when it next lets a request go).
    pub resets_at: String,
}

/// An amount of a resource: a whole number, or US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Amount {
    Whole(u64),
    Dollars(f64),
}

impl Amount {
    fn of(resource: Resource, v: f64) -> Self {
        if resource.is_dollars() {
            Amount::Dollars(round_dollars(v))
        } else {
            Amount::Whole(v as u64)
        }
    }
}

/// The report of `usage` under `limits` (already the user's own, [`Limits::for_user`]).
pub fn report(limits: &Limits, usage: &UsageSnapshot, periods: &Periods) -> UsageReport {
    let whole = |kind: LimitKind| limits.get(kind).map(|v| v as u64);
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
            reserved_tokens: p.reserved.tokens,
            reserved_cost_usd: p.reserved.cost_usd,
            token_limit,
            cost_limit_usd: cost_limit,
            resets_at: crate::rfc3339_millis(ends),
        }
    };
    let requests = usage.window.requests();
    let minute_resets = crate::rfc3339_millis(usage.window.below_at(requests, periods));
    UsageReport {
        today: period(
            &periods.day,
            &usage.day,
            whole(LimitKind::TOKENS_PER_DAY),
            limits.get(LimitKind::COST_PER_DAY),
            periods.day_ends,
        ),
        this_month: period(
            &periods.month,
            &usage.month,
            whole(LimitKind::TOKENS_PER_MONTH),
            limits.get(LimitKind::COST_PER_MONTH),
            periods.month_ends,
        ),
        this_minute: MinuteReport {
            requests,
            request_limit: whole(LimitKind::REQUESTS_PER_MINUTE),
            resets_at: minute_resets.clone(),
        },
        uploads_today: UploadReport {
            period: periods.day.clone(),
            documents: usage.day.uploads.documents,
            bytes: usage.day.uploads.bytes,
            document_limit: whole(LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
            byte_limit: whole(LimitKind::UPLOADED_BYTES_PER_DAY),
            resets_at: crate::rfc3339_millis(periods.day_ends),
        },
        limits: limits
            .iter()
            .map(|(kind, limit)| LimitReport {
                name: kind,
                resource: kind.resource.name(),
                period: kind.period.name(),
                used: Amount::of(kind.resource, usage.used(kind)),
                limit: Amount::of(kind.resource, limit),
                resets_at: match kind.period {
                    Period::Minute => minute_resets.clone(),
                    period => crate::rfc3339_millis(periods.ends(period)),
                },
            })
            .collect(),
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
            reserved: Reserve::default(),
            ..PeriodUsage::default()
        }
    }

    fn window(counts: [u64; WINDOW_SPAN]) -> RateWindow {
        RateWindow { counts }
    }

    #[test]
    fn periods_are_utc_and_end_at_their_boundaries() {
        let p = Periods::at(datetime!(2026-12-31 23:59:30.5 UTC));
        assert_eq!(p.day, "2026-12-31");
        assert_eq!(p.month, "2026-12");
        assert_eq!(p.day_ends, datetime!(2027-01-01 0:00 UTC));
        assert_eq!(p.month_ends, datetime!(2027-01-01 0:00 UTC));
        assert_eq!(
            Periods::bucket_starts(p.bucket),
            datetime!(2026-12-31 23:59:30 UTC)
        );
        assert_eq!(p.seconds_until(Periods::bucket_starts(p.bucket + 1)), 10);
        let p = Periods::at(datetime!(2026-11-25 14:51:00 +02:00));
        assert_eq!(p.day, "2026-11-25");
        assert_eq!(p.seconds_until(p.day_ends), 11 * 3600 + 9 * 60);
    }

    #[test]
    fn a_week_is_the_iso_week_from_monday() {
        // Thursday 2026-12-31 is in ISO week 53 of 2026, which ends on Monday 2027-01-04.
        let p = Periods::at(datetime!(2026-12-31 23:59:30.5 UTC));
        assert_eq!(p.week, "2026-W53");
        assert_eq!(p.week_ends, datetime!(2027-01-04 0:00 UTC));
        // A Monday begins its own week.
        let monday = Periods::at(datetime!(2026-11-23 00:00 UTC));
        assert_eq!(monday.week, "2026-W48");
        assert_eq!(monday.week_ends, datetime!(2026-11-30 0:00 UTC));
    }

    #[test]
    fn a_requests_quota_refuses_once_the_periods_requests_are_admitted() {
        // A Wednesday evening.
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let per_week = LimitKind::new(Resource::Requests, Period::Week);
        let limits = Limits::default().with(per_week, 3.0);
        let mut usage = UsageSnapshot::default();
        usage.week.requests = 2;
        assert!(check(&limits, &usage, &periods).is_ok());
        usage.week.requests = 3;
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, per_week);
        assert!(!refused.is_rate());
        assert_eq!(refused.retry_after, 4 * 86400 + 2 * 3600, "until Monday");
        assert_eq!(
            refused.message,
            "You have used your 3 requests for this week. The quota resets on Monday at 00:00 UTC."
        );
    }

    #[test]
    fn the_report_lists_every_limit_in_force() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let per_day = LimitKind::new(Resource::Requests, Period::Day);
        let limits = Limits::default()
            .with(per_day, 1.0)
            .with(LimitKind::COST_PER_MONTH, 2.5);
        let mut usage = UsageSnapshot::default();
        usage.day.requests = 1;
        usage.month = spent(10, 0.5);
        let report = serde_json::to_value(report(&limits, &usage, &periods)).unwrap();
        assert_eq!(
            report["limits"],
            serde_json::json!([
                {"name": "requests_per_day", "resource": "requests", "period": "day", "used": 1,
                 "limit": 1, "resets_at": "2026-11-26T00:00:00.000Z"},
                {"name": "cost_per_month", "resource": "cost", "period": "month", "used": 0.5,
                 "limit": 2.5, "resets_at": "2026-12-01T00:00:00.000Z"},
            ])
        );
        assert_eq!(report["today"]["token_limit"], serde_json::Value::Null);
        assert_eq!(report["this_month"]["cost_limit_usd"], 2.5);
    }

    #[test]
    fn a_limit_reached_refuses_until_its_period_ends() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 400.0);
        let mut usage = UsageSnapshot {
            day: spent(399, 0.1),
            ..UsageSnapshot::default()
        };
        assert!(check(&limits, &usage, &periods).is_ok());
        usage.day = spent(400, 0.1);
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, LimitKind::TOKENS_PER_DAY);
        assert_eq!(refused.retry_after, 2 * 3600);
        assert!(
            refused.message.contains("400 tokens"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn turns_in_progress_hold_the_quota_until_they_settle() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 400.0);
        let mut usage = UsageSnapshot {
            day: spent(100, 0.1),
            ..UsageSnapshot::default()
        };
        usage.day.reserved = Reserve {
            tokens: 300,
            cost_usd: None,
        };
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, LimitKind::TOKENS_PER_DAY);
        assert_eq!(refused.retry_after, HELD_RETRY_SECONDS);
        assert!(
            refused.message.contains("in progress"),
            "{}",
            refused.message
        );
        usage.day.reserved.tokens = 299;
        assert!(check(&limits, &usage, &periods).is_ok());
    }

    #[test]
    fn the_limit_that_lets_in_last_decides_when_to_try_again() {
        let periods = Periods::at(datetime!(2026-11-25 22:00 UTC));
        let limits = Limits::default()
            .with(LimitKind::TOKENS_PER_DAY, 10.0)
            .with(LimitKind::COST_PER_MONTH, 1.0)
            .with(LimitKind::REQUESTS_PER_MINUTE, 1.0);
        let usage = UsageSnapshot {
            day: spent(10, 1.0),
            month: spent(10, 1.0),
            window: window([1, 1, 1, 1, 1, 1, 1]),
            ..UsageSnapshot::default()
        };
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert_eq!(refused.kind, LimitKind::COST_PER_MONTH);
        assert_eq!(refused.retry_after, 5 * 86400 + 2 * 3600);
    }

    #[test]
    fn the_rate_limit_counts_requests_in_the_sliding_window() {
        let periods = Periods::at(datetime!(2026-11-25 22:00:45 UTC));
        let limits = Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 5.0);
        let mut usage = UsageSnapshot {
            window: window([4, 4, 3, 3, 1, 0, 0]),
            ..UsageSnapshot::default()
        };
        assert!(check(&limits, &usage, &periods).is_ok());
        // Five in the window: the first bucket whose window holds fewer frees the user, 15 s from now.
        usage.window = window([5, 5, 4, 3, 1, 0, 0]);
        let refused = check(&limits, &usage, &periods).unwrap_err();
        assert!(refused.is_rate());
        assert_eq!(refused.retry_after, 15);
        // All five in this very bucket: only when it leaves the window, 70 s after it began.
        usage.window = window([5; WINDOW_SPAN]);
        assert_eq!(
            check(&limits, &usage, &periods).unwrap_err().retry_after,
            65
        );
    }

    #[test]
    fn a_request_of_many_calls_counts_each_against_the_limits_of_requests() {
        let periods = Periods::at(datetime!(2026-11-25 22:00:45 UTC));
        let per_day = LimitKind::new(Resource::Requests, Period::Day);
        let limits = Limits::default()
            .with(LimitKind::REQUESTS_PER_MINUTE, 100.0)
            .with(per_day, 1000.0)
            .with(LimitKind::TOKENS_PER_DAY, 500.0);
        let mut usage = UsageSnapshot {
            window: window([96, 96, 96, 40, 0, 0, 0]),
            ..UsageSnapshot::default()
        };
        usage.day.requests = 96;
        usage.day.spent.tokens.total_tokens = 499;
        assert!(check_requests(&limits, &usage, &periods, 4).is_ok());
        assert_eq!(
            check(&limits, &usage, &periods),
            check_requests(&limits, &usage, &periods, 1)
        );
        // 5 more would be 101 in the window: refused until the window that ends 3 buckets on holds at most 95.
        let refused = check_requests(&limits, &usage, &periods, 5).unwrap_err();
        assert!(refused.is_rate());
        assert_eq!(refused.retry_after, 25);
        // More than the limit at once: no window lets it in.
        let refused =
            check_requests(&limits, &UsageSnapshot::default(), &periods, 101).unwrap_err();
        assert!(refused.is_rate());
        assert!(
            refused.message.contains("101 model calls"),
            "{}",
            refused.message
        );
        // The day's requests count the calls too; a quota of tokens does not.
        usage.window = RateWindow::default();
        usage.day.requests = 998;
        let refused = check_requests(&limits, &usage, &periods, 3).unwrap_err();
        assert_eq!(refused.kind, per_day);
        assert!(
            refused
                .message
                .contains("only 2 of your 1000 requests a day are left today"),
            "{}",
            refused.message
        );
        assert!(check_requests(&limits, &usage, &periods, 2).is_ok());
    }

    #[test]
    fn a_reserve_covers_one_that_is_no_larger() {
        let prices = crate::Prices {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        let call = Reserve::of_call(1000, 100, Some(&prices));
        assert_eq!(call.tokens, 1100);
        assert_eq!(call.cost_usd, Some(0.0045));
        assert!(call.plus(&call).covers(&call));
        assert!(!call.covers(&call.plus(&Reserve::of_call(1, 0, Some(&prices)))));
        assert!(Reserve::of_call(10, 0, None).covers(&Reserve::of_call(10, 0, None)));
    }

    #[test]
    fn an_operator_item_replaces_or_lifts_a_users_limits() {
        let limits = Limits::default()
            .with(LimitKind::TOKENS_PER_DAY, 400.0)
            .with(LimitKind::COST_PER_MONTH, 5.0)
            .with(LimitKind::REQUESTS_PER_MINUTE, 5.0);
        let user = limits.for_user(
            &LimitOverrides::default()
                .with(LimitKind::TOKENS_PER_DAY, 10_000.0)
                .with(LimitKind::REQUESTS_PER_MINUTE, 0.0),
        );
        assert_eq!(user.get(LimitKind::TOKENS_PER_DAY), Some(10_000.0));
        assert_eq!(user.get(LimitKind::COST_PER_MONTH), Some(5.0));
        assert_eq!(user.get(LimitKind::REQUESTS_PER_MINUTE), None);
        assert!(!Limits::default().any());
        assert!(user.any());
        // Where nothing is configured, an item has nothing to change.
        assert_eq!(
            Limits::default()
                .for_user(&LimitOverrides::default().with(LimitKind::TOKENS_PER_DAY, 5.0)),
            Limits::default()
        );
    }

    /// Counters that hold `documents` and `bytes` uploaded today (and so this week and month).
    fn uploaded(documents: u64, bytes: u64) -> UsageSnapshot {
        let period = PeriodUsage {
            uploads: UploadUsage { documents, bytes },
            ..PeriodUsage::default()
        };
        UsageSnapshot {
            day: period,
            week: period,
            month: period,
            ..UsageSnapshot::default()
        }
    }

    fn upload(documents: u64, bytes: u64) -> Upload {
        Upload::new("alice", documents, bytes, datetime!(2026-11-25 22:00 UTC))
    }

    #[test]
    fn an_upload_passes_while_the_days_sums_stay_within_each_limit() {
        let limits = Limits::default()
            .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 2.0)
            .with(LimitKind::UPLOADED_BYTES_PER_DAY, 1000.0);
        let none = uploaded(0, 0);
        assert!(check_upload(&limits, &none, &upload(2, 1000)).is_ok());
        assert_eq!(
            upload_ceilings(&limits, &upload(2, 1000)),
            Some(vec![
                (LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 0),
                (LimitKind::UPLOADED_BYTES_PER_DAY, 0)
            ])
        );
        assert_eq!(
            upload_ceilings(&limits, &upload(1, 10)),
            Some(vec![
                (LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 1),
                (LimitKind::UPLOADED_BYTES_PER_DAY, 990)
            ])
        );
        // The third document of the day: refused until midnight UTC, saying none is left.
        let two = uploaded(2, 20);
        let refused = check_upload(&limits, &two, &upload(1, 10)).unwrap_err();
        assert_eq!(refused.kind, LimitKind::UPLOADED_DOCUMENTS_PER_DAY);
        assert_eq!(refused.retry_after, 2 * 3600);
        assert!(
            refused.message.contains("your 2 documents for today"),
            "{}",
            refused.message
        );
        // One left, two sent: the message says how many are left.
        let one = uploaded(1, 20);
        let refused = check_upload(&limits, &one, &upload(2, 10)).unwrap_err();
        assert!(
            refused
                .message
                .contains("only 1 of your 2 documents a day is left"),
            "{}",
            refused.message
        );
        // The count allows it, the bytes do not.
        let refused = check_upload(&limits, &one, &upload(1, 981)).unwrap_err();
        assert_eq!(refused.kind, LimitKind::UPLOADED_BYTES_PER_DAY);
        assert!(refused.message.contains("980 bytes"), "{}", refused.message);
        assert!(check_upload(&limits, &one, &upload(1, 980)).is_ok());
        // More than a whole day's quota at once: no write could let it in.
        assert_eq!(upload_ceilings(&limits, &upload(3, 1)), None);
        assert_eq!(upload_ceilings(&limits, &upload(1, 1001)), None);
        let refused = check_upload(&limits, &none, &upload(3, 1)).unwrap_err();
        assert!(
            refused.message.contains("send fewer at a time"),
            "{}",
            refused.message
        );
        // No limit: nothing refused, nothing asserted.
        let off = Limits::default();
        assert!(!off.any());
        assert!(check_upload(&off, &two, &upload(100, u64::MAX / 2)).is_ok());
        assert_eq!(upload_ceilings(&off, &upload(100, 1)), Some(vec![]));
    }

    #[test]
    fn an_operator_item_replaces_or_lifts_a_users_upload_limits() {
        let limits = Limits::default()
            .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 2.0)
            .with(LimitKind::UPLOADED_BYTES_PER_DAY, 1000.0);
        let user = limits.for_user(
            &LimitOverrides::default()
                .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 50.0)
                .with(LimitKind::UPLOADED_BYTES_PER_DAY, 0.0),
        );
        assert_eq!(user.get(LimitKind::UPLOADED_DOCUMENTS_PER_DAY), Some(50.0));
        assert_eq!(user.get(LimitKind::UPLOADED_BYTES_PER_DAY), None);
        assert_eq!(
            Limits::default().for_user(
                &LimitOverrides::default().with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 5.0)
            ),
            Limits::default()
        );
    }

    #[test]
    fn sizes_read_for_a_person() {
        assert_eq!(size(1), "1 byte");
        assert_eq!(size(1023), "1023 bytes");
        assert_eq!(size(1536), "1.5 KB");
        assert_eq!(size(5 * 1024 * 1024), "5.0 MB");
    }
}
