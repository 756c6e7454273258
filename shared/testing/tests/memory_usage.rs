//! The in-memory usage counters pass the counters' contract, as DynamoDB's do (chat-aws's `tests/usage.rs`).

use chat_testing::{InMemoryUsage, usage_contract};

#[tokio::test]
async fn spending_adds_up_per_owner_and_period() {
    usage_contract::spending_adds_up_per_owner_and_period(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn a_hold_is_counted_until_settled() {
    usage_contract::a_hold_is_counted_until_settled(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn a_settlement_sent_twice_counts_once() {
    usage_contract::a_settlement_sent_twice_counts_once(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn admission_is_one_atomic_step() {
    usage_contract::admission_is_one_atomic_step(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn turns_in_progress_count_against_a_quota() {
    usage_contract::turns_in_progress_count_against_a_quota(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn the_rate_window_slides_across_a_minute_boundary() {
    usage_contract::the_rate_window_slides_across_a_minute_boundary(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn concurrent_turns_all_count() {
    usage_contract::concurrent_turns_all_count(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn an_operators_limits_are_read_back() {
    let ledger = InMemoryUsage::new();
    let writer = ledger.clone();
    usage_contract::an_operators_limits_are_read_back(&ledger, |owner, limits| {
        writer.set_limits(owner, limits);
        async {}
    })
    .await;
}
