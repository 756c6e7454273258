//! The in-memory usage counters pass the counters' contract, as DynamoDB's do (chat-aws's `tests/usage.rs`).

use chat_testing::{InMemoryUsage, usage_contract};

#[tokio::test]
async fn spending_adds_up_per_owner_and_period() {
    usage_contract::spending_adds_up_per_owner_and_period(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn requests_count_per_minute_even_at_once() {
    usage_contract::requests_count_per_minute_even_at_once(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn concurrent_turns_all_count() {
    usage_contract::concurrent_turns_all_count(&InMemoryUsage::new()).await;
}

#[tokio::test]
async fn an_operators_limits_are_read_back() {
    let ledger = InMemoryUsage::new();
    let writer = ledger.clone();
    usage_contract::an_operators_limits_are_read_back(&ledger, |owner, limits| async move {
        writer.set_limits(owner, limits)
    })
    .await;
}
