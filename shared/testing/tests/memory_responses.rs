//! The in-memory kept responses pass the contract the DynamoDB store passes.

#[tokio::test]
async fn in_memory_responses_keep_the_contract() {
    chat_testing::response_store_contract(&chat_testing::InMemoryResponses::new()).await;
}
