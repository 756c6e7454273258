//! The DynamoDB API keys against moto's server, through the real SDK client: the keys' contract (as the in-memory
//! keys pass it in chat-testing), and the items as they sit in the table: the hash and never the key, the expiry in
//! the table's TTL attribute, a revoke that leaves nothing behind.

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::{DynamoApiKeys, DynamoStore};
use chat_core::{ApiKeyStore, MAX_KEYS_PER_OWNER, NewApiKey};
use chat_testing::api_key_contract::{self, Subject, alice};
use local_dynamodb::LocalDynamo;

async fn fresh() -> (DynamoApiKeys, aws_sdk_dynamodb::Client, String) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let keys = DynamoStore::new(client.clone(), table.clone(), None).api_keys();
    (keys, client, table)
}

async fn subject() -> Subject {
    Subject::new(fresh().await.0)
}

chat_testing::api_key_contract!(subject());

/// Every item of the table, as stored.
async fn all_items(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    client
        .scan()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default()
}

#[tokio::test]
async fn a_key_is_kept_as_its_hash_with_its_expiry_in_the_ttl_attribute() {
    let (keys, client, table) = fresh().await;
    let now = api_key_contract::now();
    let new = NewApiKey::generate(alice(), "ci", now, Some(7));
    keys.create(&new.record, MAX_KEYS_PER_OWNER, now)
        .await
        .unwrap()
        .unwrap();
    let items = all_items(&client, &table).await;
    assert_eq!(items.len(), 2, "a checked item and a listing item");
    let text = format!("{items:?}");
    assert!(
        !text.contains(&new.key[4..]),
        "the key itself is never stored"
    );
    let keys_of: Vec<(String, String)> = items
        .iter()
        .map(|i| {
            (
                i["pk"].as_s().unwrap().clone(),
                i["sk"].as_s().unwrap().clone(),
            )
        })
        .collect();
    assert!(
        keys_of.contains(&(format!("APIKEY#{}", new.record.hash), "APIKEY".into())),
        "{keys_of:?}"
    );
    assert!(
        keys_of.contains(&(
            format!("APIKEYS#{}", alice().owner),
            format!("KEY#{}", new.record.id)
        )),
        "{keys_of:?}"
    );
    for item in &items {
        let expires: i64 = item[chat_aws::table::EXPIRES_AT]
            .as_n()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(expires, now + 7 * 86_400);
        assert_eq!(item["owner"].as_s().unwrap(), &alice().owner);
    }
    // A revoke removes both.
    keys.revoke(&alice().owner, &new.record.id)
        .await
        .unwrap()
        .unwrap();
    assert!(all_items(&client, &table).await.is_empty());
}
