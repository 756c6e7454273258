//! The DynamoDB usage counters against moto's server, through the real SDK client: the counters' contract (as the
//! in-memory counters pass it in chat-testing), the operator's item as the docs write it, the items' expiry, and
//! admissions and settlements whose answers are lost.

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::{DynamoStore, DynamoUsage};
use chat_core::{Hold, LimitOverrides, Limits, Period, Periods, Reserve, UsageLedger};
use chat_testing::usage_contract;
use local_dynamodb::LocalDynamo;

mod support;

async fn fresh() -> (DynamoUsage, aws_sdk_dynamodb::Client, String) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let ledger = DynamoStore::new(client.clone(), table.clone(), None).usage_ledger();
    (ledger, client, table)
}

/// The attribute of the operator's item for `kind`, by docs/operations.md's rule: the limit's name in camel case
/// (`tokensPerDay`, `requestsPerWeek`), but `ratePerMinute` for requests per minute.
fn attribute(kind: chat_core::LimitKind) -> String {
    if kind == chat_core::LimitKind::REQUESTS_PER_MINUTE {
        return "ratePerMinute".into();
    }
    let period = match kind.period {
        Period::Minute => "Minute",
        Period::Day => "Day",
        Period::Week => "Week",
        Period::Month => "Month",
        Period::AtOnce => "",
    };
    let resource = match kind.resource {
        chat_core::Resource::Requests => "requests",
        chat_core::Resource::Tokens => "tokens",
        chat_core::Resource::Cost => "cost",
        chat_core::Resource::UploadedDocuments => "uploadedDocuments",
        chat_core::Resource::UploadedBytes => "uploadedBytes",
        chat_core::Resource::OpenWatches => "openWatches",
    };
    if period.is_empty() {
        return resource.into();
    }
    format!("{resource}Per{period}")
}

/// A fresh ledger whose operator's items are written as docs/operations.md writes them (`put-item` with number
/// attributes).
async fn subject() -> usage_contract::Subject {
    let (ledger, client, table) = fresh().await;
    usage_contract::Subject::new(ledger, move |owner, limits: LimitOverrides| {
        let mut put = client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(format!("USAGE#{owner}")))
            .item("sk", AttributeValue::S("LIMITS".into()));
        for (kind, amount) in limits.iter() {
            put = put.item(attribute(kind), AttributeValue::N(amount.to_string()));
        }
        async move {
            put.send().await.unwrap();
        }
    })
}

// The counters' contract, checked here on DynamoDB as the in-memory counters' are in chat-testing.
chat_testing::usage_contract!(subject());

/// The places of open watches: the same contract as the in-memory ones pass.
#[tokio::test]
async fn watch_places_are_held_at_once() {
    let (ledger, _, _) = fresh().await;
    chat_testing::watch_contract::places_are_held_at_once(&ledger).await;
}

/// alice's ledger item, as stored.
async fn ledger_item(client: &aws_sdk_dynamodb::Client, table: &str, owner: &str) -> Item {
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("USAGE#{owner}")))
        .key("sk", AttributeValue::S("LEDGER".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap_or_else(|| panic!("{owner} has no ledger"))
}

type Item = std::collections::HashMap<String, AttributeValue>;

/// All of a user's counters are one ledger item, which expires a year after its last write, so the table does not
/// grow with every user who left; within it, what a past period, a past window or a hold never settled left behind
/// is removed by the next writes, so the item does not grow with every day: the counters of a day before, windows
/// past and a hold past its expiry are gone after an admission and a settlement, while an open hold stays, kept
/// a day or more.
#[tokio::test]
async fn counters_expire_after_their_period() {
    let (ledger, client, table) = fresh().await;
    let now = time::OffsetDateTime::now_utc();
    let periods = Periods::at(now);
    let limits = Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 100.0);
    let first = Hold::new("alice", Reserve::default(), now);
    ledger.admit(&first, &limits).await.unwrap().unwrap();
    // What an earlier day, an earlier window and a turn that never settled left in the ledger.
    let dead = AttributeValue::M(Item::from([
        ("version".to_string(), AttributeValue::N("0".into())),
        ("expiresAt".to_string(), AttributeValue::N("1".into())),
    ]));
    let left = [
        ("DAY#2000-01-01#turns", AttributeValue::N("3".into())),
        ("MONTH#2000-01#heldTokens", AttributeValue::N("3".into())),
        ("RATE#000000000001", AttributeValue::N("3".into())),
        ("HOLD#dead", dead),
    ];
    let mut put = client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("USAGE#alice".into()))
        .key("sk", AttributeValue::S("LEDGER".into()))
        .update_expression("SET #a = :a, #b = :b, #c = :c, #d = :d");
    for ((name, value), (n, v)) in left.iter().zip(
        ["a", "b", "c", "d"]
            .iter()
            .map(|p| (format!("#{p}"), format!(":{p}"))),
    ) {
        put = put
            .expression_attribute_names(n, *name)
            .expression_attribute_values(v, value.clone());
    }
    put.send().await.unwrap();
    assert!(
        ledger_item(&client, &table, "alice")
            .await
            .contains_key("HOLD#dead")
    );
    // An admission sees them (the ledger it returns), the next write removes them.
    let open = Hold::new("alice", Reserve::default(), now);
    ledger.admit(&open, &limits).await.unwrap().unwrap();
    ledger
        .settle(&first, &chat_core::UsageTotals::default(), None)
        .await
        .unwrap();
    let item = ledger_item(&client, &table, "alice").await;
    for (name, _) in &left {
        assert!(!item.contains_key(*name), "{name} left in {item:?}");
    }
    assert!(!item.contains_key(&format!("HOLD#{}", first.id)), "settled");
    let n = |v: &AttributeValue| v.as_n().unwrap().parse::<i64>().unwrap() - now.unix_timestamp();
    let kept = n(&item["expiresAt"]);
    assert!(
        (300 * 86_400..=500 * 86_400).contains(&kept),
        "ledger kept {kept} s"
    );
    let hold = n(&item[&format!("HOLD#{}", open.id)].as_m().unwrap()["expiresAt"]);
    assert!((86_400..=3 * 86_400).contains(&hold), "hold kept {hold} s");
    for m in 0..=chat_core::WINDOW_BUCKETS {
        let window = format!("RATE#{:012}", periods.bucket + m);
        assert_eq!(item[&window].as_n().unwrap(), "2", "{window}");
    }
    assert_eq!(
        item[&format!("DAY#{}#requests", periods.day)]
            .as_n()
            .unwrap(),
        "2"
    );
    assert_eq!(
        item[&format!("DAY#{}#turns", periods.day)].as_n().unwrap(),
        "1"
    );
}

// ---- A stored turn's settlement, in the turn's own transaction ---------------------------------------------------

use chat_core::{
    Caller, Charged, ChatService, HistoryBudget, Role, SessionStore, TokenUsage, TurnInput,
    TurnWrite, UsageCharge, UsageSnapshot, UsageTotals,
};
use chat_testing::contract::{AT, chat, id, message, numbered, turn};
use chat_testing::{InMemoryUsage, Script, ScriptedModel};
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};

/// The target of DynamoDB's `UpdateItem` (an admission's, a settlement's), as the proxy names it.
const UPDATE_ITEM: &str = "DynamoDB_20120810.UpdateItem";

/// A fresh table; a store that reaches it through a fault proxy, which counts the calls, and one that reaches it
/// directly, with the table's client and name.
async fn behind_proxy() -> (
    DynamoStore,
    DynamoStore,
    FaultProxy,
    (aws_sdk_dynamodb::Client, String),
) {
    support::behind_proxy(Default::default()).await
}

/// A service counting in `store`'s table under a limit of turns (one no turn here reaches): every turn is admitted.
fn service(store: DynamoStore, model: &ScriptedModel) -> ChatService<ScriptedModel, DynamoStore> {
    service_under(store, model, a_limit())
}

/// A limit in force that no turn here reaches.
fn a_limit() -> Limits {
    Limits::default().with(LimitKind::TOKENS_PER_DAY, 1e9)
}

/// A service counting in `store`'s table under `limits`.
fn service_under(
    store: DynamoStore,
    model: &ScriptedModel,
    limits: Limits,
) -> ChatService<ScriptedModel, DynamoStore> {
    let ledger: std::sync::Arc<dyn UsageLedger> = std::sync::Arc::new(store.usage_ledger());
    ChatService::new(model.clone(), store, chat_testing::settings())
        .with_usage(Some(ledger), limits)
}

/// Three turns of alice's in one chat through `service`, each answered with 10 and 5 tokens: what each called
/// through `proxy`, and what they spent together.
async fn three_turns(
    service: &ChatService<ScriptedModel, DynamoStore>,
    model: &ScriptedModel,
    proxy: &FaultProxy,
) -> (Vec<String>, UsageTotals) {
    let turns = support::turns_through(service, model, proxy, 3, |turn| {
        Script::text(format!("answer {turn}")).usage(10, 5)
    })
    .await;
    let mut calls = Vec::new();
    let mut spent = UsageTotals::default();
    for (called, answer) in turns {
        spent.add(&answer.spent.totals);
        calls.push(called);
    }
    (calls, spent)
}

/// alice's counters now, read directly.
async fn counters(direct: &DynamoStore) -> UsageSnapshot {
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    direct.usage_ledger().read("alice", &periods).await.unwrap()
}

/// A turn of a chat not kept (`store_new_chat: false`).
fn unstored() -> TurnInput {
    TurnInput {
        store_new_chat: false,
        ..chat_testing::ask("question", None)
    }
}

/// Alice's counters, which must hold `n` requests and `n` turns today (`what` says why).
async fn counted(direct: &DynamoStore, n: u64, what: &str) -> UsageSnapshot {
    let usage = counters(direct).await;
    assert_eq!((usage.day.requests, usage.day.turns), (n, n), "{what}");
    usage
}

/// The attributes of a counter (`DAY#…` or `MONTH#…`) in `owner`'s ledger item.
async fn counter_attributes(
    (client, table): &(aws_sdk_dynamodb::Client, String),
    owner: &str,
    sk: String,
) -> Vec<(String, AttributeValue)> {
    let prefix = format!("{sk}#");
    let mut attributes: Vec<(String, AttributeValue)> = ledger_item(client, table, owner)
        .await
        .into_iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .collect();
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    attributes
}

/// Under a limit, a stored turn is two writes: its admission (one `UpdateItem` of the ledger), and the turn's
/// transaction, which settles it (its spending added to the ledger's counters, its reservation released). The
/// user's first turn on an instance reads their limits and ledger first (`BatchGetItem`), a continued chat the
/// `Query` of its history. The counters come out as the ledger's own settlement makes them.
#[tokio::test]
async fn a_stored_turn_is_settled_in_its_own_transaction() {
    let (store, direct, proxy, table) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service(store, &model);
    let (calls, spent) = three_turns(&service, &model, &proxy).await;
    assert_eq!(
        calls,
        [
            "BatchGetItem UpdateItem TransactWriteItems",
            "UpdateItem Query TransactWriteItems",
            "UpdateItem Query TransactWriteItems"
        ]
    );
    let usage = counters(&direct).await;
    assert_eq!(usage.day.turns, 3);
    assert_eq!(usage.month.turns, 3);
    assert_eq!(usage.day.spent, spent);
    assert_eq!(usage.month.spent, spent);
    assert_eq!(usage.day.reserved.tokens, 0, "every reservation released");
    assert_eq!(usage.day.held().tokens, 45);
    assert_eq!(spent.tokens.total_tokens, 45);
    // The same item, attribute for attribute, as the ledger's own settlements make it (GET /usage and the limits
    // read it): bob's three turns, each admitted holding what alice's held and settled through the ledger.
    let ceiling = Reserve::of_call(
        chat_core::ModelOptions::for_model("test.model-v1", 8192).max_prompt_tokens,
        256,
        chat_core::ModelOptions::for_model("test.model-v1", 8192)
            .prices
            .as_ref(),
    );
    assert_counters_as_bobs_admitted_turns(&direct, &table, ceiling, &spent).await;
}

/// Alice's day's and month's counters, attribute for attribute, as the ledger's own admissions and settlements make
/// them (GET /usage and the limits read them): bob's three turns, each admitted holding `ceiling` and settled
/// through the ledger with a third of `spent` (alice's three turns of 10 and 5 tokens).
async fn assert_counters_as_bobs_admitted_turns(
    direct: &DynamoStore,
    table: &(aws_sdk_dynamodb::Client, String),
    ceiling: Reserve,
    spent: &UsageTotals,
) {
    let now = time::OffsetDateTime::now_utc();
    let periods = Periods::at(now);
    let ledger = direct.usage_ledger();
    let each = UsageTotals {
        tokens: TokenUsage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
            ..TokenUsage::default()
        },
        cost_usd: spent.cost_usd.map(|c| c / 3.0),
    };
    for _ in 0..3 {
        let hold = Hold::new("bob", ceiling, now);
        usage_contract::admit(&ledger, &hold).await;
        ledger.settle(&hold, &each, None).await.unwrap();
    }
    for sk in [
        format!("DAY#{}", periods.day),
        format!("MONTH#{}", periods.month),
    ] {
        assert_eq!(
            counter_attributes(table, "alice", sk.clone()).await,
            counter_attributes(table, "bob", sk).await
        );
    }
}

/// With no limit in force (the defaults), a stored turn writes nothing before its model call: its record (its
/// request, what it spent, the turn) goes in the turn's own transaction. A new chat is one `TransactWriteItems`, a
/// continued one the `Query` of its history and that write; the counters come out as the admitted turns' do.
#[tokio::test]
async fn a_stored_turn_no_limit_holds_is_recorded_in_its_own_transaction() {
    let (store, direct, proxy, table) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service_under(store, &model, Limits::default());
    let (calls, spent) = three_turns(&service, &model, &proxy).await;
    assert_eq!(
        calls,
        [
            "TransactWriteItems",
            "Query TransactWriteItems",
            "Query TransactWriteItems"
        ]
    );
    let usage = counters(&direct).await;
    for period in [usage.day, usage.week, usage.month] {
        assert_eq!((period.requests, period.turns), (3, 3));
        assert_eq!(period.spent, spent);
        assert_eq!(period.reserved.tokens, 0);
    }
    assert_eq!(
        usage.window.requests(),
        0,
        "no rate limit: no window written"
    );
    // The same attributes as admitted turns' that reserved nothing.
    assert_counters_as_bobs_admitted_turns(&direct, &table, Reserve::default(), &spent).await;
}

/// With no limit in force, a turn whose chat is not kept (a stateless completion's) is one write, after its
/// answer: its record through the ledger.
#[tokio::test]
async fn a_turn_not_stored_that_no_limit_holds_is_one_write_after_its_answer() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service_under(store, &model, Limits::default());
    model.push(Script::text("answer").usage(10, 5));
    let alice = Caller::owner("alice");
    service.answer(&alice, &unstored()).await.unwrap();
    assert_eq!(proxy.operations(), ["TransactWriteItems"]);
    let usage = counted(&direct, 1, "counted").await;
    assert_eq!(usage.month.spent.tokens.total_tokens, 15);
}

/// A record whose answer is lost is read back by its mark (or refused by it when sent again): counted once. So is
/// one through the ledger after a turn's write that carried it.
#[tokio::test]
async fn a_record_whose_answer_is_lost_counts_once() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let ledger = store.usage_ledger();
    let now = time::OffsetDateTime::now_utc();
    for times in [Some(1), Some(2)] {
        let hold = Hold::unadmitted("alice", now);
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        ledger.record(&hold, &spent_tokens(10)).await.unwrap();
        proxy.set(Fault::None);
        // Sent again by a caller that never heard: the mark refuses it.
        ledger.record(&hold, &spent_tokens(10)).await.unwrap();
    }
    let usage = counted(&direct, 2, "each once").await;
    assert_eq!(usage.day.spent.tokens.total_tokens, 20);
    // Carried by a turn's own write, then recorded through the ledger too (as after a write thought lost): the
    // mark that write put refuses the second.
    let read = chat_read_for_a_turn(&direct, "carried").await;
    let hold = Hold::unadmitted("alice", now);
    let spent = spent_tokens(10);
    let second = turn("q1", "a1");
    let charge = (&ledger, &hold, &spent);
    let (_, charged) = append_charging(&store, "carried", &read, &second, charge).await;
    assert_eq!(charged, Charged::WithTurn);
    ledger.record(&hold, &spent).await.unwrap();
    let usage = counted(&direct, 3, "counted").await;
    assert_eq!(usage.day.spent.tokens.total_tokens, 30);
}

/// A turn whose chat is not kept writes no turn: it is settled through the ledger, one `UpdateItem` (after the
/// admission's, and the first read of the user's limits and ledger).
#[tokio::test]
async fn a_turn_not_stored_is_settled_through_the_ledger() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = service(store, &model);
    model.push(Script::text("answer").usage(10, 5));
    let before = proxy.operations().len();
    let alice = Caller::owner("alice");
    service.answer(&alice, &unstored()).await.unwrap();
    assert_eq!(
        proxy.operations()[before..],
        ["BatchGetItem", "UpdateItem", "UpdateItem"],
        "the user's limits and ledger read once, an admission, a settlement"
    );
    let usage = counters(&direct).await;
    assert_eq!((usage.day.turns, usage.month.turns), (1, 1));
    assert_eq!(usage.day.spent.tokens.total_tokens, 15);
    assert_eq!(usage.day.reserved.tokens, 0);
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

/// A turn of alice's admitted now, holding 1,000 tokens and a dollar.
async fn admitted(ledger: &DynamoUsage) -> Hold {
    let hold = Hold::new(
        "alice",
        Reserve {
            tokens: 1000,
            cost_usd: Some(1.0),
        },
        time::OffsetDateTime::now_utc(),
    );
    usage_contract::admit(ledger, &hold).await;
    hold
}

/// A chat of alice's with two messages, and a turn's read of it (its mark).
async fn chat_read_for_a_turn(direct: &DynamoStore, name: &str) -> chat_core::LoadedChat {
    support::chat_of_one_turn(direct, name).await;
    direct
        .load_for_turn("alice", &id(name), HistoryBudget::UNLIMITED)
        .await
        .unwrap()
}

/// Appends `messages` to alice's chat `name` as of `read`, charging `spent` to `hold` in `ledger` in the same
/// write where it has room.
async fn append_charging(
    store: &DynamoStore,
    name: &str,
    read: &chat_core::LoadedChat,
    messages: &[chat_core::StoredMessage],
    (ledger, hold, spent): (&DynamoUsage, &Hold, &UsageTotals),
) -> (chat_core::ChatRecord, Charged) {
    let charge = UsageCharge {
        ledger,
        hold,
        spent,
    };
    let turn = TurnWrite {
        mark: read.mark.as_ref(),
        messages,
        spent,
    };
    let chat_id = id(name);
    let append = store.append_after_charging("alice", &chat_id, turn, &charge);
    append.await.unwrap()
}

/// A turn that lost a race (another write landed after its read) is tried again with its settlement in the same
/// retried transaction: settled once, with the turn.
#[tokio::test]
async fn a_turn_that_lost_a_race_carries_its_settlement_into_its_retry() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let read = chat_read_for_a_turn(&direct, "raced").await;
    // Another turn lands after this one's read.
    direct
        .append("alice", &id("raced"), &[message(Role::User, "other")])
        .await
        .unwrap();
    let ledger = store.usage_ledger();
    let hold = admitted(&ledger).await;
    let spent = spent_tokens(40);
    let second = turn("q1", "a1");
    let before = proxy.operations().len();
    let charge = (&ledger, &hold, &spent);
    let (record, charged) = append_charging(&store, "raced", &read, &second, charge).await;
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
    assert_eq!(usage.day.reserved.tokens, 0);
    // The hold is gone: a settlement through the ledger now (as after a write thought lost) changes nothing.
    ledger.settle(&hold, &spent, None).await.unwrap();
    assert_eq!(counters(&direct).await.day.spent, spent);
}

/// A turn whose write's answer was lost (once, or on every attempt) is read back as landed: its settlement landed
/// with it, and is not made again.
#[tokio::test]
async fn a_turn_whose_answer_is_lost_is_settled_once() {
    for (name, times) in [("lost-once", Some(1)), ("lost-always", None)] {
        let (store, direct, proxy, _) = behind_proxy().await;
        let read = chat_read_for_a_turn(&direct, name).await;
        let ledger = store.usage_ledger();
        let hold = admitted(&ledger).await;
        let spent = spent_tokens(40);
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let second = turn("q1", "a1");
        let charge = (&ledger, &hold, &spent);
        let (record, charged) = append_charging(&store, name, &read, &second, charge).await;
        proxy.set(Fault::None);
        assert!(proxy.dropped() >= 1, "{name}");
        assert!(proxy.forwarded(TRANSACT_WRITE_ITEMS) >= 2, "{name}");
        assert_eq!((record.message_count, charged), (4, Charged::WithTurn));
        let usage = counters(&direct).await;
        assert_eq!((usage.day.turns, usage.month.turns), (1, 1), "{name}");
        assert_eq!(usage.day.spent, spent, "{name}");
        assert_eq!(usage.day.reserved.tokens, 0, "{name}");
    }
}

/// A turn whose messages leave no room in one transaction for its settlement (here 99 items: with the commit and
/// the ledger's update, 101 actions), or that is rewritten into a new generation over several, is stored
/// without it: the store says so, and the caller settles it through the ledger.
#[tokio::test]
async fn a_turn_without_room_for_its_settlement_leaves_it_to_the_ledger() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let ledger = store.usage_ledger();
    let hold = admitted(&ledger).await;
    let spent = spent_tokens(40);
    for (name, messages) in [("full", 99), ("rewritten", 150)] {
        let read = chat_read_for_a_turn(&direct, name).await;
        let many = numbered(Role::User, "m", messages as usize);
        let before = proxy.operations().len();
        let charge = (&ledger, &hold, &spent);
        let (record, charged) = append_charging(&store, name, &read, &many, charge).await;
        assert_eq!((record.message_count, charged), (2 + messages, Charged::No));
        assert!(
            !proxy.operations()[before..].contains(&"UpdateItem".to_string()),
            "{name}"
        );
    }
    let usage = counters(&direct).await;
    assert_eq!(usage.day.turns, 0, "nothing was settled");
    assert_eq!(usage.day.reserved.tokens, 1000, "the hold stands");
}

/// A store settles only counters it keeps: a ledger in memory, or in another table, is left to settle the turn.
#[tokio::test]
async fn a_ledger_kept_elsewhere_is_not_settled_by_the_store() {
    let (store, direct, _proxy, (client, _)) = behind_proxy().await;
    let (_, other_table) = LocalDynamo::shared().fresh_table().await;
    let elsewhere = DynamoUsage::new(client, &other_table);
    let in_memory = InMemoryUsage::new();
    let periods = Periods::at(time::OffsetDateTime::now_utc());
    let spent = spent_tokens(40);
    let ledgers: [(&str, &dyn UsageLedger); 2] =
        [("another-table", &elsewhere), ("in-memory", &in_memory)];
    for (name, ledger) in ledgers {
        let hold = Hold::new("alice", Reserve::default(), periods.now);
        usage_contract::admit(ledger, &hold).await;
        let charge = UsageCharge {
            ledger,
            hold: &hold,
            spent: &spent,
        };
        let (_, charged) = store
            .create_charging(
                "alice",
                &chat(name, AT),
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

// ---- Admissions and settlements whose answers are lost ---------------------------------------------------------

/// An admission and a settlement whose answers are lost (the SDK sends them again, or the ledger reads back) are
/// each applied once: the hold's condition refuses the attempt after one that landed, and the read-back of the
/// hold tells it landed.
#[tokio::test]
async fn ledger_writes_whose_answers_are_lost_apply_once() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let ledger = store.usage_ledger();
    let now = time::OffsetDateTime::now_utc();
    let limits = Limits::default()
        .with(LimitKind::REQUESTS_PER_MINUTE, 10.0)
        .with(LimitKind::TOKENS_PER_DAY, 1_000_000.0);
    let mut hold = Hold::new(
        "alice",
        Reserve {
            tokens: 1000,
            cost_usd: Some(1.0),
        },
        now,
    );
    proxy.set(Fault::drop_responses(UPDATE_ITEM, Some(1)));
    assert_eq!(ledger.admit(&hold, &limits).await.unwrap(), Ok(()));
    assert_eq!(proxy.dropped(), 1);
    let usage = counters(&direct).await;
    assert_eq!(usage.window.requests(), 1, "the request counted once");
    assert_eq!(usage.day.reserved.tokens, 1000, "held once");
    proxy.set(Fault::drop_responses(UPDATE_ITEM, Some(1)));
    ledger
        .settle(
            &hold,
            &spent_tokens(100),
            Some(Reserve {
                tokens: 500,
                cost_usd: Some(0.5),
            }),
        )
        .await
        .unwrap();
    hold.version += 1;
    hold.reserved = Reserve {
        tokens: 500,
        cost_usd: Some(0.5),
    };
    proxy.set(Fault::drop_responses(UPDATE_ITEM, Some(1)));
    ledger.settle(&hold, &spent_tokens(50), None).await.unwrap();
    proxy.set(Fault::None);
    assert_eq!(proxy.dropped(), 3);
    let usage = counters(&direct).await;
    assert_eq!(usage.day.spent.tokens.total_tokens, 150);
    assert_eq!(usage.day.spent.cost_usd, Some(0.5));
    assert_eq!(usage.day.reserved.tokens, 0);
    assert_eq!(usage.day.reserved.cost_usd, Some(0.0));
    assert_eq!(usage.day.turns, 1);
}

// ---- Uploads counted against the upload quotas --------------------------------------------------------------------

use chat_core::{LimitKind, Upload, UploadQuota};

fn documents_per_day(n: u64) -> Limits {
    Limits::default().with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, n as f64)
}

/// Uploads sent at once are each one conditional write: under a limit of 3 documents a day, ten uploads of one
/// document at once pass three times, and the day counts three.
#[tokio::test]
async fn uploads_at_once_cannot_pass_the_limit_together() {
    let (ledger, _, _) = fresh().await;
    let now = time::OffsetDateTime::now_utc();
    let uploads: Vec<Upload> = (0..10).map(|_| Upload::new("alice", 1, 100, now)).collect();
    let limits = documents_per_day(3);
    let counted =
        futures_util::future::join_all(uploads.iter().map(|u| ledger.count_upload(u, &limits)))
            .await;
    let passed = counted.iter().filter(|c| matches!(c, Ok(Ok(())))).count();
    let refused: Vec<_> = counted
        .iter()
        .filter_map(|c| c.as_ref().unwrap().as_ref().err())
        .collect();
    assert_eq!(passed, 3, "{counted:?}");
    assert_eq!(refused.len(), 7);
    assert!(
        refused
            .iter()
            .all(|r| r.kind == LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
        "{refused:?}"
    );
    let today = ledger.read("alice", &Periods::at(now)).await.unwrap();
    assert_eq!(
        (today.day.uploads.documents, today.day.uploads.bytes),
        (3, 300)
    );
    // Another user's day is their own.
    let bob = Upload::new("bob", 3, 1, now);
    assert_eq!(ledger.count_upload(&bob, &limits).await.unwrap(), Ok(()));
}

/// A count whose answer is lost is read back by its mark (or refused by it when sent again): counted once.
#[tokio::test]
async fn an_upload_count_whose_answer_is_lost_counts_once() {
    let (store, direct, proxy, _) = behind_proxy().await;
    let ledger = store.usage_ledger();
    let now = time::OffsetDateTime::now_utc();
    let limits = documents_per_day(5);
    for times in [Some(1), None] {
        let upload = Upload::new("alice", 2, 10, now);
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let counted = ledger.count_upload(&upload, &limits).await;
        proxy.set(Fault::None);
        assert_eq!(counted.unwrap(), Ok(()), "lost {times:?}");
    }
    assert!(proxy.dropped() >= 2);
    let today = direct
        .usage_ledger()
        .read("alice", &Periods::at(now))
        .await
        .unwrap();
    assert_eq!(today.day.uploads.documents, 4, "each upload counted once");
    assert_eq!(today.day.uploads.bytes, 20);
}

/// The operator's item raises or lifts one user's upload quotas; with none configured nothing is counted, and no
/// item is written for an upload.
#[tokio::test]
async fn the_operators_item_sets_one_users_upload_quotas_and_none_configured_writes_nothing() {
    let (ledger, client, table) = fresh().await;
    let now = time::OffsetDateTime::now_utc();
    let limits = documents_per_day(1);
    let one = || Upload::new("erin", 1, 1, now);
    assert_eq!(ledger.count_upload(&one(), &limits).await.unwrap(), Ok(()));
    let refused = ledger
        .count_upload(&one(), &limits)
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        refused.message.contains("your 1 document for today"),
        "{}",
        refused.message
    );
    // Raised to 3 after erin was seen: the count's condition check finds the item changed and reads it.
    let set = |attributes: &[(&str, &str)]| {
        let mut put = client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S("USAGE#erin".into()))
            .item("sk", AttributeValue::S("LIMITS".into()));
        for (name, value) in attributes {
            put = put.item(*name, AttributeValue::N(value.to_string()));
        }
        put.send()
    };
    set(&[("uploadedDocumentsPerDay", "3")]).await.unwrap();
    assert_eq!(ledger.count_upload(&one(), &limits).await.unwrap(), Ok(()));
    assert_eq!(ledger.count_upload(&one(), &limits).await.unwrap(), Ok(()));
    assert!(ledger.count_upload(&one(), &limits).await.unwrap().is_err());
    let read = ledger.read("erin", &Periods::at(now)).await.unwrap();
    assert_eq!(
        read.overrides.get(LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
        Some(3.0)
    );
    assert_eq!(read.day.uploads.documents, 3);
    // Lifted: counted, never refused.
    set(&[("uploadedDocumentsPerDay", "0")]).await.unwrap();
    for _ in 0..3 {
        assert_eq!(ledger.count_upload(&one(), &limits).await.unwrap(), Ok(()));
    }
    // No upload quota configured: nothing written at all.
    let free = Upload::new("frank", 100, 1_000_000, now);
    assert_eq!(
        ledger
            .count_upload(&free, &Limits::default())
            .await
            .unwrap(),
        Ok(())
    );
    let items = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S("USAGE#frank".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(items.count(), 0);
}

// ---- Upgrade from the items of one period each ----------------------------------------------------------------------

/// Counters of the layout before the ledger (one item per user and period) seed a user's ledger the first time an
/// instance meets them, once: what they spent counts against their limits from their first admission, reads show
/// it, and another instance that meets them after adds on top of it (never seeds again).
#[tokio::test]
async fn counters_of_the_layout_before_seed_the_ledger_once() {
    let (ledger, client, table) = fresh().await;
    let now = time::OffsetDateTime::now_utc();
    let periods = Periods::at(now);
    let put_old = |owner: &str, sk: String, tokens: u64| {
        client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(format!("USAGE#{owner}")))
            .item("sk", AttributeValue::S(sk))
            .item("totalTokens", AttributeValue::N(tokens.to_string()))
            .item("heldTokens", AttributeValue::N(tokens.to_string()))
            .item("turns", AttributeValue::N("1".into()))
            .item("requests", AttributeValue::N("1".into()))
            .item("expiresAt", AttributeValue::N("9999999999".into()))
            .send()
    };
    for owner in ["uma", "vic"] {
        put_old(owner, format!("DAY#{}", periods.day), 100)
            .await
            .unwrap();
        put_old(owner, format!("WEEK#{}", periods.week), 300)
            .await
            .unwrap();
        put_old(owner, format!("MONTH#{}", periods.month), 900)
            .await
            .unwrap();
    }
    let read = ledger.read("uma", &periods).await.unwrap();
    let tokens = |p: chat_core::PeriodUsage| (p.spent.tokens.total_tokens, p.turns);
    assert_eq!(
        (tokens(read.day), tokens(read.week), tokens(read.month)),
        ((100, 1), (300, 1), (900, 1))
    );
    // Another instance meets uma: the ledger is there, it adds to it.
    let other = DynamoUsage::new(client.clone(), &table);
    let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 1000.0);
    let hold = Hold::new("uma", Reserve::default(), now);
    other.admit(&hold, &limits).await.unwrap().unwrap();
    other.settle(&hold, &spent_tokens(5), None).await.unwrap();
    let read = other.read("uma", &periods).await.unwrap();
    assert_eq!(
        (tokens(read.day), tokens(read.week), tokens(read.month)),
        ((105, 2), (305, 2), (905, 2))
    );
    let item = ledger_item(&client, &table, "uma").await;
    assert_eq!(
        item[&format!("DAY#{}#requests", periods.day)]
            .as_n()
            .unwrap(),
        "2"
    );
    // vic's first admission anywhere already counts what the items before held: a day of 100 tokens is full.
    let full = Limits::default().with(LimitKind::TOKENS_PER_DAY, 100.0);
    let vic = Hold::new("vic", Reserve::default(), now);
    let refused = ledger.admit(&vic, &full).await.unwrap().unwrap_err();
    assert_eq!(refused.kind, LimitKind::TOKENS_PER_DAY);
}
