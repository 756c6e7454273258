//! The DynamoDB usage counters against moto's server, through the real SDK client: the counters' contract (as the
//! in-memory counters pass it in chat-testing), the operator's item as the docs write it, and the items' expiry.

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::{DynamoStore, DynamoUsage};
use chat_core::{Periods, UsageLedger};
use chat_testing::usage_contract;
use local_dynamodb::LocalDynamo;

async fn fresh() -> (DynamoUsage, aws_sdk_dynamodb::Client, String) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let ledger = DynamoStore::new(client.clone(), table.clone(), None).usage_ledger();
    (ledger, client, table)
}

#[tokio::test]
async fn spending_adds_up_per_owner_and_period() {
    usage_contract::spending_adds_up_per_owner_and_period(&fresh().await.0).await;
}

#[tokio::test]
async fn requests_count_per_minute_even_at_once() {
    usage_contract::requests_count_per_minute_even_at_once(&fresh().await.0).await;
}

#[tokio::test]
async fn concurrent_turns_all_count() {
    usage_contract::concurrent_turns_all_count(&fresh().await.0).await;
}

/// The operator's item, written as docs/operations.md writes it (`put-item` with number attributes).
#[tokio::test]
async fn an_operators_limits_are_read_back() {
    let (ledger, client, table) = fresh().await;
    usage_contract::an_operators_limits_are_read_back(&ledger, |owner, limits| {
        let mut put = client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(format!("USAGE#{owner}")))
            .item("sk", AttributeValue::S("LIMITS".into()));
        let numbers = [
            ("tokensPerDay", limits.tokens_per_day.map(|v| v.to_string())),
            (
                "tokensPerMonth",
                limits.tokens_per_month.map(|v| v.to_string()),
            ),
            ("costPerDay", limits.cost_per_day.map(|v| v.to_string())),
            ("costPerMonth", limits.cost_per_month.map(|v| v.to_string())),
            (
                "ratePerMinute",
                limits.requests_per_minute.map(|v| v.to_string()),
            ),
        ];
        for (name, value) in numbers {
            if let Some(value) = value {
                put = put.item(name, AttributeValue::N(value));
            }
        }
        async move {
            put.send().await.unwrap();
        }
    })
    .await;
}

/// Each counter expires after its period, so the table does not grow with every user's every day.
#[tokio::test]
async fn counters_expire_after_their_period() {
    let (ledger, client, table) = fresh().await;
    let now = Periods::at(time::OffsetDateTime::now_utc());
    ledger
        .record("alice", &now, &chat_core::UsageTotals::default())
        .await
        .unwrap();
    ledger.count_request("alice", &now).await.unwrap();
    let expires = |sk: String| {
        let (client, table) = (client.clone(), table.clone());
        async move {
            let item = client
                .get_item()
                .table_name(&table)
                .key("pk", AttributeValue::S("USAGE#alice".into()))
                .key("sk", AttributeValue::S(sk))
                .send()
                .await
                .unwrap();
            item.item().unwrap()["expiresAt"]
                .as_n()
                .unwrap()
                .parse::<i64>()
                .unwrap()
                - now.now.unix_timestamp()
        }
    };
    let day = expires(format!("DAY#{}", now.day)).await;
    let month = expires(format!("MONTH#{}", now.month)).await;
    let minute = expires(format!("MINUTE#{}", now.minute)).await;
    assert!((86_400..=3 * 86_400).contains(&day), "day kept {day} s");
    assert!(
        (31 * 86_400..=500 * 86_400).contains(&month),
        "month kept {month} s"
    );
    assert!((60..=2 * 3_600).contains(&minute), "minute kept {minute} s");
}
