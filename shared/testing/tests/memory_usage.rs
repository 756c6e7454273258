//! The in-memory usage counters pass the counters' contract, as DynamoDB's do (chat-aws's `tests/usage.rs`).

async fn fresh() -> chat_testing::usage_contract::Subject {
    chat_testing::usage_contract::Subject::in_memory()
}

chat_testing::usage_contract!(fresh());
