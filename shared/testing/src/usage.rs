//! [`InMemoryUsage`]: the usage-counter port in memory, with the DynamoDB counters' semantics (per owner and
//! period, admission and settlement each one atomic step, holds applied once, the operator's limits item); and
//! [`usage_contract`], the checks every ledger passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chat_core::{
    Hold, LimitKind, LimitOverrides, Limits, OverLimit, PeriodUsage, Periods, RateWindow, Reserve,
    Upload, UploadQuota, UsageFuture, UsageLedger, UsageSnapshot, UsageTotals, WINDOW_SPAN,
    WatchLease, WatchPlace, WatchSlots,
};
use time::OffsetDateTime;

#[derive(Default)]
struct Counters {
    /// By (owner, period key): `DAY#…`, `WEEK#…`, `MONTH#…`, as the table's items.
    periods: HashMap<(String, String), PeriodUsage>,
    /// Requests admitted in the window that ends with a bucket, by (owner, bucket).
    windows: HashMap<(String, i64), u64>,
    /// The open holds by id, as last settled.
    holds: HashMap<String, Hold>,
    /// The turns recorded without admission, by id (one recorded again changes nothing).
    recorded: std::collections::HashSet<String>,
    limits: HashMap<String, LimitOverrides>,
    /// The uploads counted, by id (one counted again changes nothing).
    uploads_counted: std::collections::HashSet<String>,
    /// The places of open watches, by (owner, slot): the holder's id and until when it holds it.
    watches: HashMap<(String, u32), (String, OffsetDateTime)>,
}

impl Counters {
    fn snapshot(&self, owner: &str, periods: &Periods) -> UsageSnapshot {
        let period = |key: String| {
            self.periods
                .get(&(owner.to_string(), key))
                .copied()
                .unwrap_or_default()
        };
        let mut window = RateWindow::default();
        for (m, count) in window.counts.iter_mut().enumerate() {
            *count = self
                .windows
                .get(&(owner.to_string(), periods.bucket + m as i64))
                .copied()
                .unwrap_or(0);
        }
        let [day, week, month] = period_keys(periods);
        UsageSnapshot {
            day: period(day),
            week: period(week),
            month: period(month),
            window,
            open_watches: self.watches_held(owner, periods.now),
            overrides: self.limits.get(owner).copied().unwrap_or_default(),
        }
    }

    /// What `owner` used in `periods`, and the limits that apply to them: `limits` with their own item's.
    fn as_seen(&self, owner: &str, periods: &Periods, limits: &Limits) -> (UsageSnapshot, Limits) {
        let snapshot = self.snapshot(owner, periods);
        let limits = limits.for_user(&snapshot.overrides);
        (snapshot, limits)
    }

    /// How many of `owner`'s watch places are held at `now` (as DynamoDB's condition: to the second).
    fn watches_held(&self, owner: &str, now: OffsetDateTime) -> u64 {
        self.watches
            .iter()
            .filter(|((o, _), (_, until))| o == owner && chat_core::place_held(*until, now))
            .count() as u64
    }

    /// Changes each of the owner's calendar counters (day, week, month) of `periods`.
    fn each_period(&mut self, owner: &str, periods: &Periods, change: impl Fn(&mut PeriodUsage)) {
        for key in period_keys(periods) {
            change(self.periods.entry((owner.to_string(), key)).or_default());
        }
    }
}

/// The keys of the day's, the week's and the month's counters.
fn period_keys(periods: &Periods) -> [String; 3] {
    [
        format!("DAY#{}", periods.day),
        format!("WEEK#{}", periods.week),
        format!("MONTH#{}", periods.month),
    ]
}

/// The counters in memory. Cheap to clone: clones share the counters.
#[derive(Clone, Default)]
pub struct InMemoryUsage {
    counters: Arc<Mutex<Counters>>,
}

impl InMemoryUsage {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the operator's item in the table does: `owner`'s own limits.
    pub fn set_limits(&self, owner: &str, limits: LimitOverrides) {
        self.counters
            .lock()
            .unwrap()
            .limits
            .insert(owner.to_string(), limits);
    }

    /// How many holds are open (turns admitted and not settled for the last time).
    pub fn open_holds(&self) -> usize {
        self.counters.lock().unwrap().holds.len()
    }
}

impl UploadQuota for InMemoryUsage {
    fn count_upload<'a>(
        &'a self,
        upload: &'a Upload,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>> {
        let counted = (|| {
            let mut c = self.counters.lock().unwrap();
            if c.uploads_counted.contains(&upload.id) {
                return Ok(());
            }
            let (snapshot, limits) = c.as_seen(&upload.owner, &upload.periods, limits);
            chat_core::check_upload(&limits, &snapshot, upload)?;
            c.each_period(&upload.owner, &upload.periods, |p| {
                p.uploads.documents += upload.documents;
                p.uploads.bytes += upload.bytes;
            });
            c.uploads_counted.insert(upload.id.clone());
            Ok(())
        })();
        Box::pin(async move { Ok(counted) })
    }
}

impl WatchSlots for InMemoryUsage {
    fn take_place<'a>(
        &'a self,
        owner: &'a str,
        limit: u32,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> UsageFuture<'a, WatchPlace> {
        let mut c = self.counters.lock().unwrap();
        let mut held = chat_core::HeldPlaces::default();
        let mut place = None;
        for slot in 0..limit {
            match c.watches.get(&(owner.to_string(), slot)) {
                // As DynamoDB's condition: held while `until` is not before now (to the second).
                Some((_, ends)) if chat_core::place_held(*ends, now) => held.held_until(*ends),
                _ => {
                    let lease = WatchLease::new(owner, slot, until);
                    c.watches
                        .insert((owner.to_string(), slot), (lease.id.clone(), lease.until));
                    place = Some(WatchPlace::Taken(lease));
                    break;
                }
            }
        }
        let place = place.unwrap_or_else(|| held.full(until));
        Box::pin(async move { Ok(place) })
    }

    fn give_back<'a>(&'a self, lease: &'a WatchLease) -> UsageFuture<'a, ()> {
        let mut c = self.counters.lock().unwrap();
        let key = (lease.owner.clone(), lease.slot);
        if c.watches.get(&key).is_some_and(|(id, _)| *id == lease.id) {
            c.watches.remove(&key);
        }
        Box::pin(async { Ok(()) })
    }

    fn held<'a>(&'a self, owner: &'a str, now: OffsetDateTime) -> UsageFuture<'a, u64> {
        let held = self.counters.lock().unwrap().watches_held(owner, now);
        Box::pin(async move { Ok(held) })
    }
}

impl UsageLedger for InMemoryUsage {
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot> {
        let snapshot = self.counters.lock().unwrap().snapshot(owner, periods);
        Box::pin(async move { Ok(snapshot) })
    }

    fn admit<'a>(
        &'a self,
        hold: &'a Hold,
        limits: &'a Limits,
    ) -> UsageFuture<'a, Result<(), OverLimit>> {
        let admitted = (|| {
            let mut c = self.counters.lock().unwrap();
            if c.holds.contains_key(&hold.id) {
                return Ok(());
            }
            let (snapshot, limits) = c.as_seen(&hold.owner, &hold.periods, limits);
            chat_core::check_requests(&limits, &snapshot, &hold.periods, hold.requests)?;
            if limits.get(LimitKind::REQUESTS_PER_MINUTE).is_some() {
                for m in 0..WINDOW_SPAN as i64 {
                    *c.windows
                        .entry((hold.owner.clone(), hold.periods.bucket + m))
                        .or_default() += hold.requests;
                }
            }
            c.each_period(&hold.owner, &hold.periods, |p| {
                p.reserved = p.reserved.plus(&hold.reserved);
                p.requests += hold.requests;
            });
            c.holds.insert(hold.id.clone(), hold.clone());
            Ok(())
        })();
        Box::pin(async move { Ok(admitted) })
    }

    fn settle<'a>(
        &'a self,
        hold: &'a Hold,
        spent: &'a UsageTotals,
        next: Option<Reserve>,
    ) -> UsageFuture<'a, ()> {
        let mut c = self.counters.lock().unwrap();
        // Applied to the version it was written for only: one sent again changes nothing.
        if c.holds.get(&hold.id).map(|h| h.version) == Some(hold.version) {
            c.each_period(&hold.owner, &hold.periods, |p| {
                p.spent.add(spent);
                p.reserved = p.reserved.minus(&hold.reserved);
                match next {
                    Some(next) => p.reserved = p.reserved.plus(&next),
                    None => p.turns += 1,
                }
            });
            match next {
                Some(next) => {
                    let stored = c.holds.get_mut(&hold.id).expect("checked above");
                    stored.version += 1;
                    stored.reserved = next;
                }
                None => {
                    c.holds.remove(&hold.id);
                }
            }
        }
        Box::pin(async { Ok(()) })
    }

    fn record<'a>(&'a self, hold: &'a Hold, spent: &'a UsageTotals) -> UsageFuture<'a, ()> {
        let mut c = self.counters.lock().unwrap();
        if c.recorded.insert(hold.id.clone()) {
            c.each_period(&hold.owner, &hold.periods, |p| {
                p.spent.add(spent);
                p.requests += hold.requests;
                p.turns += 1;
            });
        }
        Box::pin(async { Ok(()) })
    }
}

/// One `#[tokio::test]` per check of [`usage_contract`], each on a fresh subject: `$fresh` is an expression whose
/// `.await` is a [`usage_contract::Subject`] (e.g. `fresh_subject()`, an `async fn`). The crate using it depends on
/// tokio.
#[macro_export]
macro_rules! usage_contract {
    ($fresh:expr) => {
        $crate::contract_tests!(usage_contract, $fresh;
            spending_adds_up_per_owner_and_period, a_hold_is_counted_until_settled,
            a_settlement_sent_twice_counts_once, admission_is_one_atomic_step,
            turns_in_progress_count_against_a_quota, the_rate_window_slides_across_a_minute_boundary,
            concurrent_turns_all_count, an_operators_limits_are_read_back,
            a_requests_quota_admits_exactly_its_limit, a_week_counts_across_its_days,
            a_turn_recorded_without_admission_counts_once, a_hold_of_many_requests_counts_each,
        );
    };
}

/// The checks every [`WatchSlots`] passes (the in-memory places and DynamoDB's), given a fresh one.
pub mod watch_contract {
    use super::*;
    use time::Duration;
    use time::macros::datetime;

    fn taken(place: WatchPlace) -> WatchLease {
        match place {
            WatchPlace::Taken(lease) => lease,
            full => panic!("expected a place, got {full:?}"),
        }
    }

    /// Three places at once: a fourth watch is refused until the first place frees (its holder's `until`, the
    /// earliest), a place given back is taken again at once, an owner's places are theirs alone, a place whose time
    /// passed (its holder's process gone) is taken again, and a stale holder cannot give back another's place.
    pub async fn places_are_held_at_once(slots: &dyn WatchSlots) {
        let now = datetime!(2026-11-25 10:00 UTC);
        let until = |s: i64| now + Duration::seconds(s);
        let a = taken(slots.take_place("ada", 3, now, until(300)).await.unwrap());
        let b = taken(slots.take_place("ada", 3, now, until(200)).await.unwrap());
        let c = taken(slots.take_place("ada", 3, now, until(400)).await.unwrap());
        let mut places = vec![a.slot, b.slot, c.slot];
        places.sort();
        assert_eq!(places, [0, 1, 2], "each watch its own place");
        assert_eq!(slots.held("ada", now).await.unwrap(), 3);
        assert_eq!(
            slots.take_place("ada", 3, now, until(300)).await.unwrap(),
            WatchPlace::Full {
                free_by: until(200)
            },
            "the fourth refused until the earliest frees"
        );
        // Another owner's places are their own.
        taken(slots.take_place("bo", 3, now, until(300)).await.unwrap());
        assert_eq!(slots.held("bo", now).await.unwrap(), 1);
        // Given back: taken again at once, in the place freed.
        slots.give_back(&b).await.unwrap();
        slots.give_back(&b).await.unwrap();
        assert_eq!(slots.held("ada", now).await.unwrap(), 2);
        let d = taken(slots.take_place("ada", 3, now, until(300)).await.unwrap());
        assert_eq!(d.slot, b.slot);
        // The stale holder of that place gives back nothing of the new one's.
        slots.give_back(&b).await.unwrap();
        assert!(matches!(
            slots.take_place("ada", 3, now, until(300)).await.unwrap(),
            WatchPlace::Full { .. }
        ));
        // Once a holder's time has passed, its place is free for another, and no longer counted as held.
        let later = until(301);
        assert_eq!(slots.held("ada", later).await.unwrap(), 1);
        let e = taken(slots.take_place("ada", 3, later, until(900)).await.unwrap());
        assert!(e.slot == a.slot || e.slot == d.slot, "{e:?}");
        // A smaller limit counts only its own places.
        assert!(matches!(
            slots.take_place("ada", 1, later, until(900)).await.unwrap(),
            WatchPlace::Full { .. }
        ));
    }
}

/// The checks every [`UsageLedger`] passes, each given a [`Subject`](usage_contract::Subject): a fresh ledger, and how
/// to write an operator's item for an owner as the ledger's store keeps it.
pub mod usage_contract {
    use super::*;
    use chat_core::{Period, Resource, TokenUsage};
    use std::future::Future;
    use std::pin::Pin;
    use time::OffsetDateTime;
    use time::macros::datetime;

    /// Writes an operator's limits item for an owner.
    type SetLimits = Box<
        dyn Fn(&'static str, LimitOverrides) -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync,
    >;

    /// A fresh ledger under test, and how its operator's items are written.
    pub struct Subject {
        pub ledger: Box<dyn UsageLedger>,
        set_limits: SetLimits,
    }

    impl Subject {
        /// `set_limits` writes `owner`'s operator's item as `ledger`'s store keeps it.
        pub fn new<F, Fut>(ledger: impl UsageLedger + 'static, set_limits: F) -> Self
        where
            F: Fn(&'static str, LimitOverrides) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = ()> + 'static,
        {
            Self {
                ledger: Box::new(ledger),
                set_limits: Box::new(move |owner, limits| Box::pin(set_limits(owner, limits))),
            }
        }

        /// The in-memory counters, whose operator's items are [`InMemoryUsage::set_limits`].
        pub fn in_memory() -> Self {
            let ledger = InMemoryUsage::new();
            let writer = ledger.clone();
            Self::new(ledger, move |owner, limits| {
                writer.set_limits(owner, limits);
                async {}
            })
        }
    }

    fn spent(total: u64, cost: f64) -> UsageTotals {
        UsageTotals {
            tokens: TokenUsage {
                input_tokens: total - total / 4,
                output_tokens: total / 4,
                total_tokens: total,
                cache_read_input_tokens: 0,
                cache_write_input_tokens: 0,
            },
            cost_usd: Some(cost),
        }
    }

    fn reserve(tokens: u64, cost: f64) -> Reserve {
        Reserve {
            tokens,
            cost_usd: Some(cost),
        }
    }

    /// A turn of `owner` admitted at `at`, holding `reserved`, then settled with `used`: what a turn does.
    async fn turn(
        ledger: &dyn UsageLedger,
        owner: &str,
        at: OffsetDateTime,
        reserved: Reserve,
        used: UsageTotals,
    ) {
        let hold = Hold::new(owner, reserved, at);
        admit(ledger, &hold).await;
        ledger.settle(&hold, &used, None).await.unwrap();
    }

    /// Admits `hold` under the default limits (none).
    pub async fn admit(ledger: &dyn UsageLedger, hold: &Hold) {
        let admitted = ledger.admit(hold, &Limits::default()).await;
        admitted.unwrap().unwrap();
    }

    /// Turns add up per owner and period: the day's and the month's, and another owner's apart; a settled turn
    /// holds nothing more.
    pub async fn spending_adds_up_per_owner_and_period(subject: &Subject) {
        let ledger = &*subject.ledger;
        let today = datetime!(2026-11-25 10:00 UTC);
        let tomorrow = datetime!(2026-11-26 10:00 UTC);
        let r = reserve(1000, 1.0);
        turn(ledger, "alice", today, r, spent(100, 0.25)).await;
        turn(ledger, "alice", today, r, spent(40, 0.5)).await;
        turn(ledger, "alice", tomorrow, r, spent(8, 0.125)).await;
        turn(ledger, "bob", today, r, spent(1000, 2.0)).await;
        let today = Periods::at(today);
        let alice = ledger.read("alice", &today).await.unwrap();
        assert_eq!(alice.day.spent.tokens.total_tokens, 140);
        assert_eq!(alice.day.spent.tokens.output_tokens, 25 + 10);
        assert_eq!(alice.day.spent.cost_usd, Some(0.75));
        assert_eq!(alice.day.turns, 2);
        assert_eq!(alice.day.reserved.tokens, 0, "settled turns hold nothing");
        assert_eq!(alice.day.reserved.cost_usd.unwrap_or(0.0), 0.0);
        assert_eq!(alice.month.spent.tokens.total_tokens, 148);
        assert_eq!(alice.month.turns, 3);
        let later = ledger
            .read("alice", &Periods::at(datetime!(2026-12-01 10:00 UTC)))
            .await
            .unwrap();
        assert_eq!(later.day, PeriodUsage::default());
        assert_eq!(later.month, PeriodUsage::default());
        let bob = ledger.read("bob", &today).await.unwrap();
        assert_eq!(bob.day.spent.tokens.total_tokens, 1000);
        assert_eq!(bob.month.turns, 1);
        let carol = ledger.read("carol", &today).await.unwrap();
        assert_eq!(carol, UsageSnapshot::default());
    }

    /// A turn that no limit held is recorded once it ends, in the periods it began in: its request, what it spent
    /// and the turn, nothing held and no rate window counted; recorded again (its answer lost), it counts once; it
    /// adds up with turns admitted and settled as one of them would.
    pub async fn a_turn_recorded_without_admission_counts_once(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00 UTC);
        let periods = Periods::at(at);
        let hold = Hold::unadmitted("hana", at);
        assert!(!hold.admitted);
        ledger.record(&hold, &spent(100, 0.25)).await.unwrap();
        ledger.record(&hold, &spent(100, 0.25)).await.unwrap();
        let read = ledger.read("hana", &periods).await.unwrap();
        for period in [read.day, read.week, read.month] {
            assert_eq!(period.spent, spent(100, 0.25));
            assert_eq!((period.requests, period.turns), (1, 1), "counted once");
            assert_eq!(period.reserved.tokens, 0);
            assert_eq!(period.held().tokens, 100);
        }
        assert_eq!(
            read.window.requests(),
            0,
            "no rate limit: no window counted"
        );
        turn(ledger, "hana", at, reserve(500, 0.5), spent(40, 0.5)).await;
        let read = ledger.read("hana", &periods).await.unwrap();
        assert_eq!(read.day.spent.tokens.total_tokens, 140);
        assert_eq!(read.day.spent.cost_usd, Some(0.75));
        assert_eq!((read.day.requests, read.day.turns), (2, 2));
        assert_eq!(read.day.held().tokens, 140);
    }

    /// A turn holds its reservation from its admission until it settles: what it spent so far and a new
    /// reservation while it goes on, everything and nothing held once over. A turn never settled (its process gone)
    /// stays counted as reserved.
    pub async fn a_hold_is_counted_until_settled(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00 UTC);
        let periods = Periods::at(at);
        let mut hold = Hold::new("gina", reserve(500, 0.5), at);
        admit(ledger, &hold).await;
        let read = ledger.read("gina", &periods).await.unwrap();
        assert_eq!(read.day.reserved, reserve(500, 0.5));
        assert_eq!(read.month.reserved, reserve(500, 0.5));
        assert_eq!(read.day.held(), reserve(500, 0.5));
        assert_eq!(read.day.turns, 0);
        // A first call spent 120 tokens; the next is covered by 700.
        ledger
            .settle(&hold, &spent(120, 0.125), Some(reserve(700, 0.75)))
            .await
            .unwrap();
        hold.version += 1;
        hold.reserved = reserve(700, 0.75);
        let read = ledger.read("gina", &periods).await.unwrap();
        assert_eq!(read.day.spent.tokens.total_tokens, 120);
        assert_eq!(read.day.reserved, reserve(700, 0.75));
        assert_eq!(read.day.held(), reserve(820, 0.875));
        ledger.settle(&hold, &spent(200, 0.25), None).await.unwrap();
        let read = ledger.read("gina", &periods).await.unwrap();
        assert_eq!(read.day.spent.tokens.total_tokens, 320);
        assert_eq!(read.day.spent.cost_usd, Some(0.375));
        assert_eq!(read.day.reserved.tokens, 0);
        assert_eq!(read.day.turns, 1);
        // Another turn admitted and never settled: its reservation stays.
        let lost = Hold::new("gina", reserve(900, 0.9), at);
        admit(ledger, &lost).await;
        let read = ledger.read("gina", &periods).await.unwrap();
        assert_eq!(read.day.reserved, reserve(900, 0.9));
        assert_eq!(read.day.held().tokens, 1220);
    }

    /// A settlement sent twice (its answer lost, say) is applied once; so is an admission.
    pub async fn a_settlement_sent_twice_counts_once(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00 UTC);
        let periods = Periods::at(at);
        let mut hold = Hold::new("hana", reserve(300, 0.3), at);
        for _ in 0..2 {
            admit(ledger, &hold).await;
        }
        for _ in 0..2 {
            ledger
                .settle(&hold, &spent(100, 0.1), Some(reserve(300, 0.3)))
                .await
                .unwrap();
        }
        hold.version += 1;
        for _ in 0..2 {
            ledger.settle(&hold, &spent(40, 0.04), None).await.unwrap();
        }
        let read = ledger.read("hana", &periods).await.unwrap();
        assert_eq!(read.day.spent.tokens.total_tokens, 140);
        assert_eq!(read.day.turns, 1);
        assert_eq!(read.day.reserved.tokens, 0);
        assert_eq!(read.month.held().tokens, 140);
    }

    /// Fifty requests at once under a rate limit of ten a minute: exactly ten are admitted, the others refused
    /// with the rate limit and when to try again.
    pub async fn admission_is_one_atomic_step(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00:10 UTC);
        let limits = Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 10.0);
        let holds: Vec<Hold> = (0..50)
            .map(|_| Hold::new("ivan", reserve(10, 0.01), at))
            .collect();
        let all = holds.iter().map(|h| ledger.admit(h, &limits));
        let results = futures_util::future::join_all(all).await;
        let admitted = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        assert_eq!(admitted, 10, "{results:?}");
        for refused in results
            .iter()
            .filter_map(|r| r.as_ref().unwrap().as_ref().err())
        {
            assert!(refused.is_rate(), "{refused:?}");
            assert!((1..=70).contains(&refused.retry_after), "{refused:?}");
        }
        let read = ledger.read("ivan", &Periods::at(at)).await.unwrap();
        assert_eq!(read.window.requests(), 10);
        assert_eq!(read.day.reserved.tokens, 100, "only the admitted hold");
    }

    /// Twenty turns at once under a daily token quota that holds five of their reservations: five are admitted
    /// (what their turns in progress hold counts), the rest refused; once one settles for less, one more gets in.
    pub async fn turns_in_progress_count_against_a_quota(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00 UTC);
        let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 5.0 * 1000.0);
        let holds: Vec<Hold> = (0..20)
            .map(|_| Hold::new("jane", reserve(1000, 1.0), at))
            .collect();
        let results =
            futures_util::future::join_all(holds.iter().map(|h| ledger.admit(h, &limits))).await;
        let admitted: Vec<&Hold> = holds
            .iter()
            .zip(&results)
            .filter(|(_, r)| matches!(r, Ok(Ok(()))))
            .map(|(h, _)| h)
            .collect();
        assert_eq!(admitted.len(), 5, "{results:?}");
        let refused = results
            .iter()
            .find_map(|r| r.as_ref().unwrap().as_ref().err())
            .unwrap();
        assert_eq!(refused.kind, LimitKind::TOKENS_PER_DAY);
        assert_eq!(refused.retry_after, chat_core::HELD_RETRY_SECONDS);
        ledger
            .settle(admitted[0], &spent(100, 0.1), None)
            .await
            .unwrap();
        let another = Hold::new("jane", reserve(1000, 1.0), at);
        assert_eq!(ledger.admit(&another, &limits).await.unwrap(), Ok(()));
        let third = Hold::new("jane", reserve(1000, 1.0), at);
        assert!(ledger.admit(&third, &limits).await.unwrap().is_err());
    }

    /// A burst at the end of one minute holds the rate limit across the boundary: no 60 seconds admit more than
    /// the limit, and the first request after the burst has left the window is admitted.
    pub async fn the_rate_window_slides_across_a_minute_boundary(subject: &Subject) {
        let ledger = &*subject.ledger;
        let limits = Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 10.0);
        let admit = |at: OffsetDateTime| {
            let hold = Hold::new("kim", reserve(1, 0.0), at);
            async move { ledger.admit(&hold, &limits).await.unwrap() }
        };
        for _ in 0..10 {
            assert_eq!(admit(datetime!(2026-11-25 10:00:59 UTC)).await, Ok(()));
        }
        // The next minute has begun: a fixed window would admit ten more here.
        let refused = admit(datetime!(2026-11-25 10:01:01 UTC)).await.unwrap_err();
        assert!(refused.is_rate());
        assert_eq!(
            refused.retry_after, 59,
            "when the burst has left the window"
        );
        assert!(admit(datetime!(2026-11-25 10:01:45 UTC)).await.is_err());
        assert!(admit(datetime!(2026-11-25 10:01:59 UTC)).await.is_err());
        assert_eq!(admit(datetime!(2026-11-25 10:02:00 UTC)).await, Ok(()));
    }

    /// Settlements at once from many turns all land (atomic adds, no lost update).
    pub async fn concurrent_turns_all_count(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00 UTC);
        let holds: Vec<Hold> = (0..20)
            .map(|_| Hold::new("dana", reserve(50, 1.0), at))
            .collect();
        let none = Limits::default();
        for result in
            futures_util::future::join_all(holds.iter().map(|h| ledger.admit(h, &none))).await
        {
            result.unwrap().unwrap();
        }
        let one = spent(10, 0.5);
        for result in
            futures_util::future::join_all(holds.iter().map(|h| ledger.settle(h, &one, None))).await
        {
            result.unwrap();
        }
        let dana = ledger.read("dana", &Periods::at(at)).await.unwrap();
        assert_eq!(dana.day.turns, 20);
        assert_eq!(dana.day.spent.tokens.total_tokens, 200);
        assert_eq!(dana.month.spent.cost_usd, Some(10.0));
        assert_eq!(dana.day.reserved.tokens, 0);
    }

    /// The operator's item is read with the counters, and holds at admission, also when it changes after a user's
    /// first turn.
    pub async fn an_operators_limits_are_read_back(subject: &Subject) {
        let (ledger, set_limits) = (&*subject.ledger, &subject.set_limits);
        let at = datetime!(2026-11-25 10:00 UTC);
        let now = Periods::at(at);
        let raised = LimitOverrides::default()
            .with(LimitKind::TOKENS_PER_DAY, 5000.0)
            .with(LimitKind::COST_PER_MONTH, 12.5)
            .with(LimitKind::REQUESTS_PER_MINUTE, 0.0);
        set_limits("erin", raised).await;
        assert_eq!(ledger.read("erin", &now).await.unwrap().overrides, raised);
        assert_eq!(
            ledger.read("frank", &now).await.unwrap().overrides,
            LimitOverrides::default()
        );
        // Configured: 100 tokens a day. Frank has no item: refused once he holds 100.
        let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 100.0);
        let frank = |tokens| Hold::new("frank", reserve(tokens, 0.0), at);
        assert_eq!(ledger.admit(&frank(100), &limits).await.unwrap(), Ok(()));
        assert!(ledger.admit(&frank(1), &limits).await.unwrap().is_err());
        // His item raises it, after he was seen: the next admission holds to it.
        let daily = |tokens| LimitOverrides::default().with(LimitKind::TOKENS_PER_DAY, tokens);
        set_limits("frank", daily(150.0)).await;
        assert_eq!(ledger.admit(&frank(50), &limits).await.unwrap(), Ok(()));
        assert!(ledger.admit(&frank(1), &limits).await.unwrap().is_err());
        // Lowered again: refused at once.
        set_limits("frank", daily(10.0)).await;
        let lowered = ledger.admit(&frank(1), &limits).await.unwrap();
        assert_eq!(lowered.unwrap_err().kind, LimitKind::TOKENS_PER_DAY);
        // Erin's item lifts her rate limit and raises her daily tokens.
        let erin = Hold::new("erin", reserve(4000, 0.0), at);
        let strict = Limits::default()
            .with(LimitKind::TOKENS_PER_DAY, 100.0)
            .with(LimitKind::REQUESTS_PER_MINUTE, 1.0);
        assert_eq!(ledger.admit(&erin, &strict).await.unwrap(), Ok(()));
        let erin = Hold::new("erin", reserve(1, 0.0), at);
        assert_eq!(ledger.admit(&erin, &strict).await.unwrap(), Ok(()));
    }

    /// A limit that is only configuration: twenty requests at once under three a day admit exactly three, counted
    /// in the day, the week and the month; the others are refused until midnight UTC. The operator's item raises
    /// it by the attribute of the same rule (`requestsPerDay`).
    pub async fn a_requests_quota_admits_exactly_its_limit(subject: &Subject) {
        let (ledger, set_limits) = (&*subject.ledger, &subject.set_limits);
        let at = datetime!(2026-11-25 22:00 UTC);
        let per_day = LimitKind::new(Resource::Requests, Period::Day);
        let limits = Limits::default().with(per_day, 3.0);
        let holds: Vec<Hold> = (0..20)
            .map(|_| Hold::new("lena", reserve(10, 0.01), at))
            .collect();
        let results =
            futures_util::future::join_all(holds.iter().map(|h| ledger.admit(h, &limits))).await;
        let admitted = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        assert_eq!(admitted, 3, "{results:?}");
        for refused in results
            .iter()
            .filter_map(|r| r.as_ref().unwrap().as_ref().err())
        {
            assert_eq!(refused.kind, per_day);
            assert_eq!(refused.retry_after, 2 * 3600, "until midnight UTC");
        }
        let read = ledger.read("lena", &Periods::at(at)).await.unwrap();
        assert_eq!(
            (read.day.requests, read.week.requests, read.month.requests),
            (3, 3, 3)
        );
        set_limits("lena", LimitOverrides::default().with(per_day, 5.0)).await;
        for expected in [true, true, false] {
            let hold = Hold::new("lena", reserve(10, 0.01), at);
            let admitted = ledger.admit(&hold, &limits).await.unwrap();
            assert_eq!(admitted.is_ok(), expected, "{admitted:?}");
        }
    }

    /// A hold of many requests (a request to embed that makes one model call per text) counts each of them in the
    /// rate window and the request counters, admitted whole or refused whole before anything is written: under a
    /// rate of 100 a minute, 96 are admitted and counted as 96, then 5 more are refused by the rate limit while 4
    /// fit; 101 at once are refused whatever the window holds; three of 40 sent together admit two. A requests quota
    /// counts them the same way, and a hold of many requests recorded without admission records them all, once.
    pub async fn a_hold_of_many_requests_counts_each(subject: &Subject) {
        let ledger = &*subject.ledger;
        let at = datetime!(2026-11-25 10:00:10 UTC);
        let periods = Periods::at(at);
        let rate = Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 100.0);
        let calls = |owner, n| Hold::new(owner, reserve(10, 0.01), at).counting(n);
        assert_eq!(calls("nina", 0).requests, 1, "every turn counts one");
        assert_eq!(
            ledger.admit(&calls("nina", 96), &rate).await.unwrap(),
            Ok(())
        );
        let read = ledger.read("nina", &periods).await.unwrap();
        assert_eq!(read.window.requests(), 96);
        assert_eq!(
            (read.day.requests, read.week.requests, read.month.requests),
            (96, 96, 96)
        );
        let refused = ledger
            .admit(&calls("nina", 5), &rate)
            .await
            .unwrap()
            .unwrap_err();
        assert!(refused.is_rate(), "{refused:?}");
        assert!(!refused.alone, "a wait lets it in: {refused:?}");
        assert!((1..=70).contains(&refused.retry_after), "{refused:?}");
        let read = ledger.read("nina", &periods).await.unwrap();
        assert_eq!(
            (read.window.requests(), read.day.requests),
            (96, 96),
            "a refusal writes nothing"
        );
        assert_eq!(read.day.reserved.tokens, 10, "only the admitted hold");
        assert_eq!(
            ledger.admit(&calls("nina", 4), &rate).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            ledger
                .read("nina", &periods)
                .await
                .unwrap()
                .window
                .requests(),
            100
        );
        // More than the limit at once: refused even where the window holds nothing, told to send fewer.
        let refused = ledger
            .admit(&calls("omar", 101), &rate)
            .await
            .unwrap()
            .unwrap_err();
        assert!(refused.is_rate(), "{refused:?}");
        assert!(refused.alone, "no wait lets it in: {refused:?}");
        assert!(
            refused.message.contains("101 model calls"),
            "{}",
            refused.message
        );
        assert_eq!(
            ledger.read("omar", &periods).await.unwrap(),
            UsageSnapshot::default()
        );
        // Admitted atomically: three of 40 at once under 100 admit two.
        let holds: Vec<Hold> = (0..3).map(|_| calls("pia", 40)).collect();
        let results =
            futures_util::future::join_all(holds.iter().map(|h| ledger.admit(h, &rate))).await;
        let admitted = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        assert_eq!(admitted, 2, "{results:?}");
        assert_eq!(
            ledger
                .read("pia", &periods)
                .await
                .unwrap()
                .window
                .requests(),
            80
        );
        // A requests quota of 10 a day: 8, then 3 refused until midnight (2 left), then 2.
        let per_day = LimitKind::new(Resource::Requests, Period::Day);
        let quota = Limits::default().with(per_day, 10.0);
        assert_eq!(
            ledger.admit(&calls("quinn", 8), &quota).await.unwrap(),
            Ok(())
        );
        let refused = ledger
            .admit(&calls("quinn", 3), &quota)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.kind, per_day);
        assert!(
            refused.message.contains("only 2 of your 10 requests"),
            "{}",
            refused.message
        );
        assert_eq!(
            ledger.admit(&calls("quinn", 2), &quota).await.unwrap(),
            Ok(())
        );
        let read = ledger.read("quinn", &periods).await.unwrap();
        assert_eq!((read.day.requests, read.month.requests), (10, 10));
        assert_eq!(
            read.window.requests(),
            0,
            "no rate limit: no window counted"
        );
        // Recorded without admission: all its requests, once.
        let hold = Hold::unadmitted("rosa", at).counting(96);
        for _ in 0..2 {
            ledger.record(&hold, &spent(96, 0.0)).await.unwrap();
        }
        let read = ledger.read("rosa", &periods).await.unwrap();
        assert_eq!((read.day.requests, read.day.turns), (96, 1));
    }

    /// A weekly quota counts every day of the ISO week and lets the user in again on Monday (UTC).
    pub async fn a_week_counts_across_its_days(subject: &Subject) {
        let ledger = &*subject.ledger;
        let per_week = LimitKind::new(Resource::Tokens, Period::Week);
        let limits = Limits::default().with(per_week, 1500.0);
        // Monday, then Wednesday of the same week.
        for at in [
            datetime!(2026-11-23 09:00 UTC),
            datetime!(2026-11-25 09:00 UTC),
        ] {
            let hold = Hold::new("mona", reserve(100, 0.0), at);
            assert_eq!(ledger.admit(&hold, &limits).await.unwrap(), Ok(()));
            ledger.settle(&hold, &spent(800, 0.0), None).await.unwrap();
        }
        let thursday = datetime!(2026-11-26 09:00 UTC);
        let read = ledger.read("mona", &Periods::at(thursday)).await.unwrap();
        assert_eq!(read.week.spent.tokens.total_tokens, 1600);
        assert_eq!(read.day.spent.tokens.total_tokens, 0, "another day");
        let refused = ledger
            .admit(&Hold::new("mona", reserve(100, 0.0), thursday), &limits)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.kind, per_week);
        assert_eq!(refused.retry_after, 3 * 86400 + 15 * 3600, "until Monday");
        let monday = datetime!(2026-11-30 00:00 UTC);
        let next_week = Hold::new("mona", reserve(100, 0.0), monday);
        assert_eq!(ledger.admit(&next_week, &limits).await.unwrap(), Ok(()));
    }
}
