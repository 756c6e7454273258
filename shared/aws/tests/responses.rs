//! The kept responses (`store: true` of the Responses API) in DynamoDB against moto's server, through the real SDK
//! client: the contract the in-memory store passes, and the item as it sits in the table, its expiry in the TTL
//! attribute.

use chat_core::ResponseStore;
use local_dynamodb::LocalDynamo;

async fn fresh_store() -> chat_aws::DynamoStore {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    chat_aws::DynamoStore::new(client, table, None)
}

#[tokio::test]
async fn dynamodb_responses_keep_the_contract() {
    chat_testing::response_store_contract(&fresh_store().await).await;
}

#[tokio::test]
async fn a_kept_response_is_one_item_under_its_owner_with_its_expiry() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = chat_aws::DynamoStore::new(client.clone(), table.clone(), None);
    let kept = chat_core::KeptResponse {
        response: serde_json::json!({"id": "resp_9"}),
        input_items: Vec::new(),
        history: Vec::new(),
        expires_at: 4_000_000_000,
    };
    store.keep_response("alice", "resp_9", &kept).await.unwrap();
    let items = client
        .scan()
        .table_name(&table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap();
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(item["pk"].as_s().unwrap(), "RESPONSE#alice");
    assert_eq!(item["sk"].as_s().unwrap(), "resp_9");
    assert_eq!(item["expiresAt"].as_n().unwrap(), "4000000000");
}
