//! The in-memory usage counters pass the counters' contract, as DynamoDB's do (chat-aws's `tests/usage.rs`).

async fn fresh() -> chat_testing::usage_contract::Subject {
    chat_testing::usage_contract::Subject::in_memory()
}

chat_testing::usage_contract!(fresh());

#[tokio::test]
async fn watch_places_are_held_at_once() {
    chat_testing::watch_contract::places_are_held_at_once(&chat_testing::InMemoryUsage::new())
        .await;
}
