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

// ---- A stored turn's spending, in the turn's own transaction ------------------------------------------------------

use chat_core::{
    Caller, Charged, ChatService, ChatSettings, HistoryBudget, Message, Overrides, Role,
    SessionStore, TokenUsage, TurnInput, UsageCharge, UsageSnapshot, UsageTotals,
};
use chat_testing::contract::{chat, id, message};
use chat_testing::{InMemoryUsage, Script, ScriptedModel};
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};

/// A fresh table; a store that reaches it through a fault proxy, which counts the calls, and one that reaches it
/// directly, with the table's client and name.
async fn behind_proxy() -> (
    DynamoStore,
    DynamoStore,
    FaultProxy,
    (aws_sdk_dynamodb::Client, String),
) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    (
        DynamoStore::from_config(&sdk, &table, None, Default::default()),
        DynamoStore::new(client.clone(), table.clone(), None),
        proxy,
        (client, table),
    )
}

fn service(store: DynamoStore, model: &ScriptedModel) -> ChatService<ScriptedModel, DynamoStore> {
    let ledger: std::sync::Arc<dyn UsageLedger> = std::sync::Arc::new(store.usage_ledger());
    ChatService::new(
        model.clone(),
        store,
        ChatSettings {
            model_id: "test.model-v1".into(),
            system_prompt: "Be brief.".into(),
            default_max_tokens: 256,
            guardrail: None,
            limits: Default::default(),
            retrieval: Default::default(),
            model: chat_core::ModelOptions::for_model("test.model-v1", 8192),
        },
    )
    .with_usage(Some(ledger), Default::default())
}

fn ask(text: &str, session: Option<&str>, store_new_chat: bool) -> TurnInput {
    TurnInput {
        messages: vec![Message::new(Role::User, text)],
        overrides: Overrides::default(),
        session_state: session.map(|s| serde_json::Value::String(s.into())),
        session_field: "sessionState",
        store_new_chat,
    }
}

/// alice's counters now, read directly.
async fn counters(direct: &DynamoStore) -> UsageSnapshot {
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    direct.usage_ledger().read("alice", &periods).await.unwrap()
}

/// The attribute names of a counter item (`DAY#…` or `MONTH#…`) of `owner`.
async fn counter_attributes(
    (client, table): &(aws_sdk_dynamodb::Client, String),
    owner: &str,
    sk: String,
) -> Vec<String> {
    let out = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("USAGE#{owner}")))
        .key("sk", AttributeValue::S(sk))
        .send()
        .await
        .unwrap();
    let mut names: Vec<String> = out.item().unwrap().keys().cloned().collect();
    names.sort();
    names
}

/// A stored turn is one write, the turn's transaction, which adds its spending to the day's and the month's
/// counters: a new chat is `TransactWriteItems` alone, a continued one `Query TransactWriteItems` (before, each
/// was preceded by two `UpdateItem`s of the ledger). The counters come out as the ledger's own adds make them.
#[tokio::test]
async fn a_stored_turn_is_one_transaction_with_its_counters() {
    let (store, direct, proxy, table) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service(store, &model);
    let alice = Caller::owner("alice");
    let mut calls = Vec::new();
    let mut chat_id = None;
    let mut spent = UsageTotals::default();
    for turn in 0..3 {
        model.push(Script::text(format!("answer {turn}")).usage(10, 5));
        let before = proxy.operations().len();
        let answer = service
            .answer(
                &alice,
                &ask(&format!("question {turn}"), chat_id.as_deref(), true),
            )
            .await
            .unwrap();
        spent.add(&answer.spent.totals);
        chat_id = answer
            .session_state
            .and_then(|s| s.as_str().map(str::to_string));
        calls.push(proxy.operations()[before..].join(" "));
    }
    assert_eq!(
        calls,
        [
            "TransactWriteItems",
            "Query TransactWriteItems",
            "Query TransactWriteItems"
        ]
    );
    let usage = counters(&direct).await;
    assert_eq!(usage.day.turns, 3);
    assert_eq!(usage.month.turns, 3);
    assert_eq!(usage.day.spent, spent);
    assert_eq!(usage.month.spent, spent);
    assert_eq!(spent.tokens.total_tokens, 45);
    // The same item, attribute for attribute, as the ledger's own adds write (GET /usage and the limits read it).
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    direct
        .usage_ledger()
        .record("bob", &periods, &spent)
        .await
        .unwrap();
    for sk in [
        format!("DAY#{}", periods.day),
        format!("MONTH#{}", periods.month),
    ] {
        assert_eq!(
            counter_attributes(&table, "alice", sk.clone()).await,
            counter_attributes(&table, "bob", sk).await
        );
    }
}

/// A turn whose chat is not kept writes no turn: it is counted through the ledger, as before.
#[tokio::test]
async fn a_turn_not_stored_is_counted_through_the_ledger() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service(store, &model);
    model.push(Script::text("answer").usage(10, 5));
    let before = proxy.operations().len();
    service
        .answer(&Caller::owner("alice"), &ask("question", None, false))
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["UpdateItem", "UpdateItem"]);
    let usage = counters(&direct).await;
    assert_eq!((usage.day.turns, usage.month.turns), (1, 1));
    assert_eq!(usage.day.spent.tokens.total_tokens, 15);
}

fn spent_tokens(total: u64) -> UsageTotals {
    UsageTotals {
        tokens: TokenUsage {
            input_tokens: total - 1,
            output_tokens: 1,
            total_tokens: total,
            ..TokenUsage::default()
        },
        cost_usd: Some(0.25),
    }
}

/// A chat of alice's with two messages, and a turn's read of it (its mark).
async fn chat_read_for_a_turn(direct: &DynamoStore, name: &str) -> chat_core::LoadedChat {
    let first = [message(Role::User, "q0"), message(Role::Assistant, "a0")];
    direct
        .create("alice", &chat(name, "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    direct
        .load_for_turn("alice", &id(name), HistoryBudget::UNLIMITED)
        .await
        .unwrap()
}

/// A turn that lost a race (another write landed after its read) is tried again with its counters in the same
/// retried transaction: counted once, with the turn.
#[tokio::test]
async fn a_turn_that_lost_a_race_carries_its_counters_into_its_retry() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let read = chat_read_for_a_turn(&direct, "raced").await;
    // Another turn lands after this one's read.
    direct
        .append("alice", &id("raced"), &[message(Role::User, "other")])
        .await
        .unwrap();
    let ledger = store.usage_ledger();
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    let spent = spent_tokens(40);
    let charge = UsageCharge {
        ledger: &ledger,
        periods: &periods,
        spent: &spent,
    };
    let turn = [message(Role::User, "q1"), message(Role::Assistant, "a1")];
    let before = proxy.operations().len();
    let (record, charged) = store
        .append_after_charging(
            "alice",
            &id("raced"),
            read.mark.as_ref(),
            &turn,
            &spent,
            &charge,
        )
        .await
        .unwrap();
    assert_eq!(charged, Charged::WithTurn);
    assert_eq!(record.message_count, 5);
    assert_eq!(
        proxy.operations()[before..],
        ["TransactWriteItems", "GetItem", "TransactWriteItems"],
        "lost, read again, written again"
    );
    let usage = counters(&direct).await;
    assert_eq!((usage.day.turns, usage.month.turns), (1, 1));
    assert_eq!(usage.day.spent, spent);
    assert_eq!(usage.month.spent, spent);
}

/// A turn whose write's answer was lost (once, or on every attempt) is read back as landed: its counters landed
/// with it, and are not added again.
#[tokio::test]
async fn a_turn_whose_answer_is_lost_is_counted_once() {
    for (name, times) in [("lost-once", Some(1)), ("lost-always", None)] {
        let (store, direct, proxy, _) = behind_proxy().await;
        let read = chat_read_for_a_turn(&direct, name).await;
        let ledger = store.usage_ledger();
        let periods = Periods::at(time::OffsetDateTime::now_utc());
        let spent = spent_tokens(40);
        let charge = UsageCharge {
            ledger: &ledger,
            periods: &periods,
            spent: &spent,
        };
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let turn = [message(Role::User, "q1"), message(Role::Assistant, "a1")];
        let (record, charged) = store
            .append_after_charging(
                "alice",
                &id(name),
                read.mark.as_ref(),
                &turn,
                &spent,
                &charge,
            )
            .await
            .unwrap();
        proxy.set(Fault::None);
        assert!(proxy.dropped() >= 1, "{name}");
        assert!(proxy.forwarded(TRANSACT_WRITE_ITEMS) >= 2, "{name}");
        assert_eq!((record.message_count, charged), (4, Charged::WithTurn));
        let usage = counters(&direct).await;
        assert_eq!((usage.day.turns, usage.month.turns), (1, 1), "{name}");
        assert_eq!(usage.day.spent, spent, "{name}");
    }
}

/// A turn whose messages leave no room in one transaction for the counters (here 98 items: with the commit and
/// the two counters, 101 actions), or that is rewritten into a new generation over several, is stored without
/// them: the store says so, and the caller counts it through the ledger.
#[tokio::test]
async fn a_turn_without_room_for_its_counters_leaves_them_to_the_ledger() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let ledger = store.usage_ledger();
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    let spent = spent_tokens(40);
    let charge = UsageCharge {
        ledger: &ledger,
        periods: &periods,
        spent: &spent,
    };
    for (name, messages) in [("full", 98), ("rewritten", 150)] {
        let read = chat_read_for_a_turn(&direct, name).await;
        let turn: Vec<_> = (0..messages)
            .map(|i| message(Role::User, &format!("m{i}")))
            .collect();
        let before = proxy.operations().len();
        let (record, charged) = store
            .append_after_charging(
                "alice",
                &id(name),
                read.mark.as_ref(),
                &turn,
                &spent,
                &charge,
            )
            .await
            .unwrap();
        assert_eq!((record.message_count, charged), (2 + messages, Charged::No));
        assert!(
            !proxy.operations()[before..].contains(&"UpdateItem".to_string()),
            "{name}"
        );
    }
    let usage = counters(&direct).await;
    assert_eq!(usage.day.turns, 0, "nothing was charged");
}

/// A store charges only counters it keeps: a ledger in memory, or in another table, is left to count the turn.
#[tokio::test]
async fn a_ledger_kept_elsewhere_is_not_charged_by_the_store() {
    let (store, direct, _proxy, (client, _)) = behind_proxy().await;
    let (_, other_table) = LocalDynamo::shared().fresh_table().await;
    let elsewhere = DynamoUsage::new(client, &other_table);
    let in_memory = InMemoryUsage::new();
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    let spent = spent_tokens(40);
    let ledgers: [(&str, &dyn UsageLedger); 2] =
        [("another-table", &elsewhere), ("in-memory", &in_memory)];
    for (name, ledger) in ledgers {
        let charge = UsageCharge {
            ledger,
            periods: &periods,
            spent: &spent,
        };
        let (_, charged) = store
            .create_charging(
                "alice",
                &chat(name, "2026-01-01T00:00:00.000Z"),
                &[message(Role::User, "q")],
                &charge,
            )
            .await
            .unwrap();
        assert_eq!(charged, Charged::No, "{name}");
        assert_eq!(ledger.read("alice", &periods).await.unwrap().day.turns, 0);
    }
    assert_eq!(counters(&direct).await.day.turns, 0);
}
