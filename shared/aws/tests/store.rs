//! The DynamoDB store against moto's server, through the real SDK client; faults between them through a fault
//! proxy.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::DynamoStore;
use chat_core::{
    ChatMode, ChatService, ListRequest, PageRequest, Role, SessionStore, StoreError, StoreTimeouts,
    TurnWrite,
};
use chat_testing::contract::{AT, Subject, chat, fails, id, listed, message, numbered, seed, turn};
use chat_testing::{Script, ScriptedModel};
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};

mod support;

/// A store on a fresh table, whose items under a chat the contract's checks can count.
async fn fresh() -> Subject<DynamoStore> {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client.clone(), table.clone(), None);
    Subject::new(store).with_item_count(move |owner, chat_id| {
        let (client, table) = (client.clone(), table.clone());
        async move { items_under(&client, &table, &owner, &chat_id).await as usize }
    })
}

// What every store does, checked here on DynamoDB as the in-memory store's are in chat-testing.
chat_testing::store_contract!(fresh());

// ---- DynamoDB's own: expiry -----------------------------------------------------------------------------------------

#[tokio::test]
async fn expired_chats_are_ignored() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client.clone(), table.clone(), Some(30));
    seed(&store, "alice", "e", &[message(Role::User, "x")]).await;
    let item = chat_item(&client, &table, "e").await;
    let expires: i64 = item["expiresAt"].as_n().unwrap().parse().unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!(
        (expires - now - 30 * 86_400).abs() < 60,
        "expires 30 days after creation"
    );
    // Past its expiry (and before DynamoDB gets round to deleting it), the chat is gone for readers.
    client
        .update_item()
        .table_name(&table)
        .set_key(chat_key("e"))
        .update_expression("SET expiresAt = :past")
        .expression_attribute_values(":past", AttributeValue::N((now - 1).to_string()))
        .send()
        .await
        .unwrap();
    fails(store.load("alice", &id("e")), StoreError::NotFound, "load").await;
    assert!(listed(&store, "alice", ChatMode::Standard).await.is_empty());
}

// ---- Faults between the store and DynamoDB, through a fault proxy -------------------------------------------------

/// Short timeouts, so that the tests of a store that does not answer end soon.
const TIMEOUTS: StoreTimeouts = StoreTimeouts {
    connect: Duration::from_millis(500),
    attempt: Duration::from_millis(1000),
    operation: Duration::from_millis(2500),
};

/// A fresh table; a store that reaches it through a fault proxy (with [`TIMEOUTS`]), and one that reaches it
/// directly, to see what landed.
async fn behind_proxy() -> (DynamoStore, DynamoStore, FaultProxy) {
    let (store, direct, proxy, _) = behind_proxy_on_table().await;
    (store, direct, proxy)
}

/// [`behind_proxy`], with a client of the table and its name, to write and count items as they are.
async fn behind_proxy_on_table() -> (
    DynamoStore,
    DynamoStore,
    FaultProxy,
    (aws_sdk_dynamodb::Client, String),
) {
    support::behind_proxy(TIMEOUTS).await
}

/// Runs `op`, which must fail as unavailable, within the operation timeout and a second.
async fn unavailable_in_time<T: std::fmt::Debug>(
    what: &str,
    op: impl Future<Output = Result<T, StoreError>>,
) {
    unavailable_within(what, TIMEOUTS.operation, op).await;
}

/// Runs `op`, which must fail as unavailable, within `limit` and a second.
async fn unavailable_within<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    op: impl Future<Output = Result<T, StoreError>>,
) {
    let started = Instant::now();
    let result = op.await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{what}: {result:?}"
    );
    assert!(
        took <= limit + Duration::from_secs(1),
        "{what} took {took:?}"
    );
}

#[tokio::test]
async fn a_silent_store_is_unavailable_within_its_timeout() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = [message(Role::User, "hello")];
    seed(&direct, "alice", "quiet", &first).await;
    proxy.set(Fault::Silent);
    unavailable_in_time("load", store.load("alice", &id("quiet"))).await;
    unavailable_in_time(
        "list",
        store.list("alice", ListRequest::first(ChatMode::Standard, 10)),
    )
    .await;
    let asked = turn("q", "a");
    unavailable_in_time("append", store.append("alice", &id("quiet"), &asked)).await;
    // Nothing landed, and once the store answers again, so does the store.
    proxy.set(Fault::None);
    let (record, msgs) = store.load("alice", &id("quiet")).await.unwrap();
    assert_eq!((record.message_count, msgs), (1, first.to_vec()));
}

#[tokio::test]
async fn a_store_that_refuses_connections_is_unavailable() {
    let (store, direct, proxy) = behind_proxy().await;
    seed(&direct, "alice", "closed", &[]).await;
    // A connection first, so that the refusal also ends one the client holds.
    store.load("alice", &id("closed")).await.unwrap();
    proxy.set(Fault::Refuse);
    unavailable_in_time("load", store.load("alice", &id("closed"))).await;
    let question = [message(Role::User, "q")];
    unavailable_in_time("append", store.append("alice", &id("closed"), &question)).await;
    proxy.set(Fault::None);
    let (record, _) = store.load("alice", &id("closed")).await.unwrap();
    assert_eq!(record.message_count, 0);
}

#[tokio::test]
async fn a_turn_whose_answer_is_lost_once_is_stored_once() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = support::chat_of_one_turn(&direct, "once").await;
    proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, Some(1)));
    let second = turn("q1", "a1");
    let record = store.append("alice", &id("once"), &second).await.unwrap();
    assert_eq!(proxy.dropped(), 1);
    assert!(
        proxy.forwarded(TRANSACT_WRITE_ITEMS) >= 2,
        "the SDK sent the save again, and the store found it had landed"
    );
    assert_eq!(record.message_count, 4);
    let (stored, msgs) = direct.load("alice", &id("once")).await.unwrap();
    assert_eq!(stored.message_count, 4);
    assert_eq!(msgs, [first.as_slice(), &second].concat());
}

#[tokio::test]
async fn a_turn_whose_answer_is_lost_on_every_attempt_is_stored_once_and_succeeds() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = support::chat_of_one_turn(&direct, "always").await;
    proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, None));
    let second = turn("q1", "a1");
    let record = store.append("alice", &id("always"), &second).await.unwrap();
    let sent = proxy.forwarded(TRANSACT_WRITE_ITEMS);
    assert!(sent >= 2, "the SDK tried {sent} times");
    assert_eq!(
        proxy.dropped() as usize,
        sent,
        "no answer to the save ever arrived"
    );
    assert_eq!(record.message_count, 4);
    let (_, msgs) = direct.load("alice", &id("always")).await.unwrap();
    assert_eq!(msgs, [first.as_slice(), &second].concat());
    // A client that sends the same turn again makes a new request, which is a new turn, as any request is.
    proxy.set(Fault::None);
    store.append("alice", &id("always"), &second).await.unwrap();
    let (record, msgs) = direct.load("alice", &id("always")).await.unwrap();
    assert_eq!(record.message_count, 6);
    assert_eq!(msgs, [first.as_slice(), &second, &second].concat());
}

#[tokio::test]
async fn a_new_chat_whose_answer_is_lost_is_created_once() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = turn("q", "a");
    for (name, times) in [("lost-once", Some(1)), ("lost-always", None)] {
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let dropped_before = proxy.dropped();
        let created = store
            .create("alice", &chat(name, AT), &first)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(
            proxy.dropped() > dropped_before,
            "{name}: an answer was lost"
        );
        assert_eq!(created.message_count, 2, "{name}");
        let (_, msgs) = direct.load("alice", &id(name)).await.unwrap();
        assert_eq!(msgs, first, "{name}");
    }
    proxy.set(Fault::None);
    assert_eq!(listed(&direct, "alice", ChatMode::Standard).await.len(), 2);
    // A second create of the same id is still refused: only the write's own attempts count as its own.
    let same = chat("lost-once", "x");
    let again = store.create("alice", &same, &first);
    fails(again, StoreError::AlreadyExists, "a second create").await;
}

/// The items under the key of alice's chat `chat` (a name).
async fn items_of(client: &aws_sdk_dynamodb::Client, table: &str, chat: &str) -> i32 {
    items_under(client, table, "alice", &id(chat)).await
}

/// The items under one chat's key.
async fn items_under(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    owner: &str,
    chat_id: &str,
) -> i32 {
    let mut count = 0;
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(format!("CHAT#{chat_id}#{owner}")),
            )
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        count += page.count();
        match page.last_evaluated_key() {
            Some(key) if !key.is_empty() => start = Some(key.clone()),
            _ => return count,
        }
    }
}

#[tokio::test]
async fn a_replace_whose_answer_is_lost_lands_once_and_keeps_its_messages() {
    let (store, direct, proxy, (client, table)) = behind_proxy_on_table().await;
    let old = numbered(Role::User, "old ", 3);
    seed(&direct, "alice", "put", &old).await;
    // One transaction (the answer lost once, then on every attempt), then three (the first one's answer lost).
    let small = numbered(Role::Assistant, "new ", 2);
    let large = numbered(Role::Assistant, "large ", 150);
    for (what, times, messages) in [
        ("once", Some(1), &small),
        ("always", None, &small),
        ("large, once", Some(1), &large),
    ] {
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let record = store
            .replace("alice", &id("put"), messages)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!(record.message_count, messages.len() as u64, "{what}");
        proxy.set(Fault::None);
        let (_, msgs) = direct.load("alice", &id("put")).await.unwrap();
        assert_eq!(&msgs, messages, "{what}");
        // The replaced messages are gone; the new ones were not deleted as if the write had lost.
        assert_eq!(
            items_of(&client, &table, "put").await,
            messages.len() as i32 + 1,
            "{what}"
        );
    }
    // A write of several transactions whose first never answers is not committed: the honest answer is 503.
    proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, None));
    let result = store
        .replace("alice", &id("put"), &vec![old.clone(); 40].concat())
        .await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    proxy.set(Fault::None);
    assert_eq!(direct.load("alice", &id("put")).await.unwrap().1, large);
}

/// The target of DynamoDB's `UpdateItem`, for the fault proxy.
const UPDATE_ITEM: &str = "DynamoDB_20120810.UpdateItem";

#[tokio::test]
async fn a_rename_is_one_update_and_one_whose_answer_is_lost_is_read_back() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = support::chat_of_one_turn(&direct, "named").await;
    // One call: no read before it, nothing but the chat item written.
    let before = proxy.operations().len();
    let renamed = store
        .rename("alice", &id("named"), "First name")
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["UpdateItem"]);
    assert_eq!(renamed.title, "First name");
    assert_eq!(renamed.last_updated, AT);

    // Every answer to the update lost: the SDK sends it again, then the store reads the chat back and finds the
    // title it wrote.
    proxy.set(Fault::drop_responses(UPDATE_ITEM, None));
    let before = proxy.operations().len();
    let renamed = store
        .rename("alice", &id("named"), "Second name")
        .await
        .unwrap();
    let calls = proxy.operations()[before..].to_vec();
    assert!(proxy.dropped() >= 1, "{calls:?}");
    assert_eq!(
        calls.last().map(String::as_str),
        Some("GetItem"),
        "{calls:?}"
    );
    assert_eq!(renamed.title, "Second name");
    assert_eq!(renamed.message_count, 2);
    proxy.set(Fault::None);
    let (record, msgs) = direct.load("alice", &id("named")).await.unwrap();
    assert_eq!(record, renamed);
    assert_eq!(msgs, first);

    // A store that does not answer at all: unavailable once the update and then its read-back have each taken the
    // operation timeout (the update may have landed before the silence: only a read can tell), and the title as
    // it was.
    proxy.set(Fault::Silent);
    let named = id("named");
    let rename = store.rename("alice", &named, "Third");
    unavailable_within("rename", 2 * TIMEOUTS.operation, rename).await;
    proxy.set(Fault::None);
    assert_eq!(
        direct.load("alice", &id("named")).await.unwrap().0.title,
        "Second name"
    );
}

// ---- How many calls a turn makes ----------------------------------------------------------------------------------

/// A turn through the chat service: a new chat is one write; a continued chat is one read before the model (one
/// query backwards from the chat item: the chat item, then its newest messages, which sort just before it) and one
/// write after, for a chat of 2 or of 40 messages. (Before, the chat item was a `GetItem` of its own, and before the
/// context budget, a turn read the chat whole in one query: reads that grew with the chat.)
#[tokio::test]
async fn a_continued_turn_reads_once_and_writes_once() {
    let (store, _direct, proxy) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = ChatService::new(model.clone(), store, chat_testing::settings());
    let turns = support::turns_through(&service, &model, &proxy, 20, |turn| {
        Script::text(format!("answer {turn}"))
    })
    .await;
    let calls_per_turn: Vec<String> = turns.into_iter().map(|(calls, _)| calls).collect();
    assert_eq!(calls_per_turn[0], "TransactWriteItems", "a new chat");
    for (turn, calls) in calls_per_turn.iter().enumerate().skip(1) {
        // One query reads the chat item and what the budget takes (here, all of it).
        assert_eq!(calls, "Query TransactWriteItems", "turn {turn}");
    }
    // The model saw the whole chat on the last turn: the one query read every message.
    let last = model.last_request().unwrap();
    assert_eq!(last.messages.len(), 39);
}

/// The chat item of alice's chat `chat` (a name), as it is in the table.
async fn chat_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    chat: &str,
) -> HashMap<String, AttributeValue> {
    let get = client.get_item().table_name(table).set_key(chat_key(chat));
    get.send().await.unwrap().item.unwrap()
}

/// The key of alice's chat `chat`'s chat item.
fn chat_key(chat: &str) -> Option<HashMap<String, AttributeValue>> {
    Some(HashMap::from([
        (
            "pk".into(),
            AttributeValue::S(format!("CHAT#{}#alice", id(chat))),
        ),
        ("sk".into(), AttributeValue::S("META".into())),
    ]))
}

/// The generation alice's chat `chat` is at, from its chat item.
async fn generation_of(client: &aws_sdk_dynamodb::Client, table: &str, chat: &str) -> String {
    let item = chat_item(client, table, chat).await;
    item["generation"].as_s().unwrap().clone()
}

/// Puts a message item under alice's chat `chat` at sort key `sk`, as the store writes one.
async fn put_message_item(client: &aws_sdk_dynamodb::Client, table: &str, chat: &str, sk: &str) {
    let s = |v: &str| AttributeValue::S(v.into());
    client
        .put_item()
        .table_name(table)
        .item("pk", s(&format!("CHAT#{}#alice", id(chat))))
        .item("sk", s(sk))
        .item("id", s(sk))
        .item("role", s("user"))
        .item("content", s(&format!("not this chat's: {sk}")))
        .item("timestamp", s("10:15 AM"))
        .send()
        .await
        .unwrap();
}

/// A chat's messages sort just before its chat item, so one query reads both; another generation's items among
/// them (a rewrite's, not deleted yet) and messages the chat item does not count yet (a write landing) are not the
/// chat's, and a first query they fill reads on in the chat's own generation, from its newest message.
#[tokio::test]
async fn a_turn_reads_past_another_generations_items_and_ones_not_counted_yet() {
    let (store, direct, proxy, (client, table)) = behind_proxy_on_table().await;
    let messages = numbered(Role::User, "m", 30);
    seed(&direct, "alice", "mixed", &messages).await;
    let generation = generation_of(&client, &table, "mixed").await;
    assert!(
        generation.starts_with('h') && generation.len() == 17,
        "{generation}"
    );
    // Another generation's items above the chat's (read first, backwards) and below it; the chat's own messages
    // 30 and 31 that it does not count; and one written before messages sorted before the chat item.
    let (above, below) = ("hffffffffffffffff", "h0000000000000000");
    assert!(above > generation.as_str() && below < generation.as_str());
    for seq in 0..40 {
        put_message_item(&client, &table, "mixed", &format!("M#{above}#{seq:09}")).await;
    }
    for seq in 0..5 {
        put_message_item(&client, &table, "mixed", &format!("M#{below}#{seq:09}")).await;
    }
    for seq in [30, 31] {
        put_message_item(
            &client,
            &table,
            "mixed",
            &format!("M#{generation}#{seq:09}"),
        )
        .await;
    }
    put_message_item(&client, &table, "mixed", "MSG#00000000deadbeef#000000000").await;

    // A budget of 640 tokens: a first query of 19 items, here the chat item and 18 of the other generation's; the
    // rest in one query of the chat's generation.
    let budget = chat_core::HistoryBudget { tokens: 640 };
    let before = proxy.operations().len();
    let loaded = store
        .load_for_turn("alice", &id("mixed"), budget)
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["Query", "Query"]);
    assert_eq!(loaded.messages, messages);
    assert_eq!(loaded.items_read, 19 + 30);
    // A budget that takes all: one query, past the other generation's 40 items and the two not counted.
    let before = proxy.operations().len();
    let loaded = store
        .load_for_turn("alice", &id("mixed"), chat_core::HistoryBudget::UNLIMITED)
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["Query"]);
    assert_eq!(loaded.messages, messages);
    // The query's page held the other generation's items below the chat's too.
    assert_eq!(loaded.items_read, 1 + 40 + 2 + 30 + 5);
    // The budget's newest messages, after a first query of the chat item and the other generation's items.
    let budget = chat_core::HistoryBudget { tokens: 30 };
    let loaded = store
        .load_for_turn("alice", &id("mixed"), budget)
        .await
        .unwrap();
    assert_eq!(loaded.messages, messages[budget.newest(&messages)..]);
    assert_eq!(loaded.messages.len(), 6);

    // The whole chat, its pages, and a turn as of the read.
    let (record, all) = store.load("alice", &id("mixed")).await.unwrap();
    assert_eq!((record.message_count, &all), (30, &messages));
    let page = store
        .load_page("alice", &id("mixed"), PageRequest::unbounded(None, 1000))
        .await
        .unwrap();
    assert_eq!(page.items, messages);
    let asked = turn("q", "a");
    let before = proxy.operations().len();
    store
        .append_after(
            "alice",
            &id("mixed"),
            TurnWrite {
                mark: loaded.mark.as_ref(),
                messages: &asked,
                spent: &Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["TransactWriteItems"]);
    let (_, all) = direct.load("alice", &id("mixed")).await.unwrap();
    assert_eq!(all, [messages.as_slice(), &asked].concat());

    // A delete takes every item under the chat, whatever its generation or where it sorts.
    store.delete("alice", &id("mixed")).await.unwrap();
    assert_eq!(items_of(&client, &table, "mixed").await, 0);
}

/// A turn's read goes on past DynamoDB's 1 MB a page, a long message's continuations on one page and its own item on
/// the next, and its budget taken as on one page.
#[tokio::test]
async fn a_turn_reads_messages_over_several_pages_whole() {
    let (store, direct, proxy) = behind_proxy().await;
    // Six messages of 500 KB, each over two items: 3 MB.
    let messages: Vec<_> = (0..6)
        .map(|i| message(Role::Assistant, &format!("{i}{}", "x".repeat(500_000))))
        .collect();
    seed(&direct, "alice", "pages", &messages).await;
    let before = proxy.operations().len();
    let loaded = store
        .load_for_turn("alice", &id("pages"), chat_core::HistoryBudget::UNLIMITED)
        .await
        .unwrap();
    let calls = proxy.operations()[before..].to_vec();
    assert!(
        calls.len() >= 3 && calls.iter().all(|c| c == "Query"),
        "{calls:?}"
    );
    assert_eq!(loaded.messages, messages);
    assert_eq!(loaded.items_read, 1 + 12);
    let three = chat_core::estimate_stored_tokens(&messages[0]) * 3;
    let loaded = store
        .load_for_turn(
            "alice",
            &id("pages"),
            chat_core::HistoryBudget { tokens: three },
        )
        .await
        .unwrap();
    assert_eq!(loaded.messages, messages[3..]);
}

/// A long chat of short messages, whose budget takes more than a first query holds: it reads on from where that
/// query stopped, and takes exactly the newest messages the budget takes.
#[tokio::test]
async fn a_long_chat_of_short_messages_reads_on_from_its_first_query() {
    let (store, direct, proxy) = behind_proxy().await;
    let messages = numbered(Role::User, "m", 400);
    seed(&direct, "alice", "short", &messages).await;
    for tokens in [0, 64, 640, 1_280, 100_000] {
        let budget = chat_core::HistoryBudget { tokens };
        let before = proxy.operations().len();
        let loaded = store
            .load_for_turn("alice", &id("short"), budget)
            .await
            .unwrap();
        let calls = proxy.operations()[before..].len();
        let start = budget.newest(&messages);
        assert_eq!(loaded.messages, messages[start..], "budget {tokens}");
        // The first query holds what a budget takes of messages of 64 tokens and more; these are 5 or 6. It is
        // enough when it holds the chat item, the messages taken and the one that did not fit, if any.
        let taken = (400 - start) as u64;
        let first = (tokens / 64 + 9).min(1000);
        let needed = 1 + taken + u64::from(start > 0);
        assert_eq!(
            calls == 1,
            needed <= first,
            "budget {tokens}: {calls} queries for {taken}"
        );
        assert!(
            loaded.items_read <= 2 * taken + 20 || loaded.items_read <= first,
            "budget {tokens}: {} items read for {taken} messages",
            loaded.items_read
        );
    }
}
