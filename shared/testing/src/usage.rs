//! [`InMemoryUsage`]: the usage-counter port in memory, with the DynamoDB counters' semantics (per owner and
//! period, atomic adds, the operator's limits item); and [`usage_contract`], the checks every ledger passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chat_core::{
    LimitOverrides, PeriodUsage, Periods, UsageFuture, UsageLedger, UsageSnapshot, UsageTotals,
};

#[derive(Default)]
struct Counters {
    /// By (owner, period key).
    periods: HashMap<(String, String), PeriodUsage>,
    requests: HashMap<(String, String), u64>,
    limits: HashMap<String, LimitOverrides>,
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
}

fn add(into: &mut PeriodUsage, spent: &UsageTotals) {
    into.spent.add(spent);
    into.turns += 1;
}

impl UsageLedger for InMemoryUsage {
    fn read<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, UsageSnapshot> {
        let c = self.counters.lock().unwrap();
        let period = |key: String| {
            c.periods
                .get(&(owner.to_string(), key))
                .copied()
                .unwrap_or_default()
        };
        let snapshot = UsageSnapshot {
            day: period(format!("DAY#{}", periods.day)),
            month: period(format!("MONTH#{}", periods.month)),
            minute_requests: c
                .requests
                .get(&(owner.to_string(), periods.minute.clone()))
                .copied()
                .unwrap_or(0),
            overrides: c.limits.get(owner).copied().unwrap_or_default(),
        };
        Box::pin(async move { Ok(snapshot) })
    }

    fn count_request<'a>(&'a self, owner: &'a str, periods: &'a Periods) -> UsageFuture<'a, ()> {
        *self
            .counters
            .lock()
            .unwrap()
            .requests
            .entry((owner.to_string(), periods.minute.clone()))
            .or_default() += 1;
        Box::pin(async { Ok(()) })
    }

    fn record<'a>(
        &'a self,
        owner: &'a str,
        periods: &'a Periods,
        spent: &'a UsageTotals,
    ) -> UsageFuture<'a, ()> {
        let mut c = self.counters.lock().unwrap();
        for key in [
            format!("DAY#{}", periods.day),
            format!("MONTH#{}", periods.month),
        ] {
            add(
                c.periods.entry((owner.to_string(), key)).or_default(),
                spent,
            );
        }
        Box::pin(async { Ok(()) })
    }
}

/// The checks every [`UsageLedger`] passes; `set_limits` writes an operator's item for an owner as the ledger's
/// store keeps it.
pub mod usage_contract {
    use super::*;
    use chat_core::TokenUsage;
    use time::macros::datetime;

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

    /// Turns add up per owner and period: the day's and the month's, and another owner's apart.
    pub async fn spending_adds_up_per_owner_and_period(ledger: &dyn UsageLedger) {
        let today = Periods::at(datetime!(2026-11-25 10:00 UTC));
        let tomorrow = Periods::at(datetime!(2026-11-26 10:00 UTC));
        let next_month = Periods::at(datetime!(2026-12-01 10:00 UTC));
        ledger
            .record("alice", &today, &spent(100, 0.25))
            .await
            .unwrap();
        ledger
            .record("alice", &today, &spent(40, 0.5))
            .await
            .unwrap();
        ledger
            .record("alice", &tomorrow, &spent(8, 0.125))
            .await
            .unwrap();
        ledger
            .record("bob", &today, &spent(1000, 2.0))
            .await
            .unwrap();
        let alice = ledger.read("alice", &today).await.unwrap();
        assert_eq!(alice.day.spent.tokens.total_tokens, 140);
        assert_eq!(alice.day.spent.tokens.output_tokens, 25 + 10);
        assert_eq!(alice.day.spent.cost_usd, Some(0.75));
        assert_eq!(alice.day.turns, 2);
        assert_eq!(alice.month.spent.tokens.total_tokens, 148);
        assert_eq!(alice.month.turns, 3);
        let later = ledger.read("alice", &next_month).await.unwrap();
        assert_eq!(later.day, PeriodUsage::default());
        assert_eq!(later.month, PeriodUsage::default());
        let bob = ledger.read("bob", &today).await.unwrap();
        assert_eq!(bob.day.spent.tokens.total_tokens, 1000);
        assert_eq!(bob.month.turns, 1);
        let carol = ledger.read("carol", &today).await.unwrap();
        assert_eq!(carol, UsageSnapshot::default());
    }

    /// Requests are counted per minute; twenty at once all count.
    pub async fn requests_count_per_minute_even_at_once(ledger: &dyn UsageLedger) {
        let now = Periods::at(datetime!(2026-11-25 10:00:10 UTC));
        let next = Periods::at(datetime!(2026-11-25 10:01:10 UTC));
        let all: Vec<_> = (0..20)
            .map(|_| ledger.count_request("alice", &now))
            .collect();
        for result in futures_util::future::join_all(all).await {
            result.unwrap();
        }
        ledger.count_request("alice", &next).await.unwrap();
        assert_eq!(
            ledger.read("alice", &now).await.unwrap().minute_requests,
            20
        );
        assert_eq!(
            ledger.read("alice", &next).await.unwrap().minute_requests,
            1
        );
        assert_eq!(ledger.read("bob", &now).await.unwrap().minute_requests, 0);
    }

    /// Adds at once from many turns all land (atomic adds, no lost update).
    pub async fn concurrent_turns_all_count(ledger: &dyn UsageLedger) {
        let now = Periods::at(datetime!(2026-11-25 10:00 UTC));
        let one = spent(10, 0.5);
        let all: Vec<_> = (0..20).map(|_| ledger.record("dana", &now, &one)).collect();
        for result in futures_util::future::join_all(all).await {
            result.unwrap();
        }
        let dana = ledger.read("dana", &now).await.unwrap();
        assert_eq!(dana.day.turns, 20);
        assert_eq!(dana.day.spent.tokens.total_tokens, 200);
        assert_eq!(dana.month.spent.cost_usd, Some(10.0));
    }

    /// The operator's item is read with the counters.
    pub async fn an_operators_limits_are_read_back<F, Fut>(ledger: &dyn UsageLedger, set_limits: F)
    where
        F: FnOnce(&'static str, LimitOverrides) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let now = Periods::at(datetime!(2026-11-25 10:00 UTC));
        let raised = LimitOverrides {
            tokens_per_day: Some(5000),
            cost_per_month: Some(12.5),
            requests_per_minute: Some(0),
            ..LimitOverrides::default()
        };
        set_limits("erin", raised).await;
        assert_eq!(ledger.read("erin", &now).await.unwrap().overrides, raised);
        assert_eq!(
            ledger.read("frank", &now).await.unwrap().overrides,
            LimitOverrides::default()
        );
    }
}
