//! The DynamoDB store against moto's server, through the real SDK client; faults between them through a fault
//! proxy.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::DynamoStore;
use chat_core::ChatMode;
use chat_core::Role;
use chat_core::{ChatRecord, SessionStore, StoreError, StoreTimeouts, StoredMessage};
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};

/// A chat id (32 hex characters) made from a readable name.
fn id(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex:0<32}")
}

async fn store() -> (DynamoStore, aws_sdk_dynamodb::Client, String) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    (
        DynamoStore::new(client.clone(), table.clone(), None),
        client,
        table,
    )
}

fn message(role: Role, content: &str) -> StoredMessage {
    StoredMessage {
        id: uuid::Uuid::new_v4().simple().to_string(),
        role,
        content: content.to_string(),
        timestamp: "2026-01-01T00:00:00.000Z".into(),
        agent_identifier: None,
        agent_name: None,
    }
}

fn chat(name: &str, updated: &str) -> ChatRecord {
    ChatRecord {
        id: id(name),
        mode: ChatMode::Standard,
        title: format!("chat {name}"),
        created_at: updated.into(),
        last_updated: updated.into(),
        last_message: String::new(),
        message_count: 0,
    }
}

#[tokio::test]
async fn a_chat_is_created_read_back_and_listed() {
    let (store, _, _) = store().await;
    let msgs = [
        message(Role::User, "hello"),
        message(Role::Assistant, "hi there"),
    ];
    let created = store
        .create("alice", &chat("c1", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    assert_eq!(created.message_count, 2);
    assert_eq!(created.last_message, "hi there");
    let (record, read) = store.load("alice", &id("c1")).await.unwrap();
    assert_eq!(record, created);
    assert_eq!(read, msgs);
    let page = store
        .list("alice", ChatMode::Standard, 10, None)
        .await
        .unwrap();
    assert_eq!(page.items, [created]);
    assert_eq!(page.next_cursor, None);
    assert!(
        store
            .list("alice", ChatMode::MultiAgent, 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        store
            .create("alice", &chat("c1", "x"), &msgs)
            .await
            .unwrap_err(),
        StoreError::AlreadyExists
    );
}

#[tokio::test]
async fn twenty_turns_at_once_all_land_whole() {
    let (store, _, _) = store().await;
    store
        .create("alice", &chat("busy", "2026-01-01T00:00:00.000Z"), &[])
        .await
        .unwrap();
    let turns = (0..20).map(|i| {
        let store = store.clone();
        async move {
            let pair = [
                message(Role::User, &format!("q{i}")),
                message(Role::Assistant, &format!("a{i}")),
            ];
            store.append("alice", &id("busy"), &pair).await
        }
    });
    for result in futures_util::future::join_all(turns).await {
        result.unwrap();
    }
    let (record, msgs) = store.load("alice", &id("busy")).await.unwrap();
    assert_eq!(record.message_count, 40);
    assert_eq!(msgs.len(), 40);
    let mut seen = HashSet::new();
    for pair in msgs.chunks(2) {
        // Each turn's question is followed by its own answer: no turn was split or interleaved.
        let i = pair[0].content.strip_prefix('q').expect("a question first");
        assert_eq!(pair[1].content, format!("a{i}"));
        assert!(seen.insert(i.to_string()), "turn {i} stored twice");
    }
    assert_eq!(seen.len(), 20);
    // Reading again gives the same order.
    assert_eq!(store.load("alice", &id("busy")).await.unwrap().1, msgs);
}

#[tokio::test]
async fn a_chat_of_three_megabytes_is_stored_and_read_back_whole() {
    let (store, _, _) = store().await;
    store
        .create("alice", &chat("big", "2026-01-01T00:00:00.000Z"), &[])
        .await
        .unwrap();
    let mut expected = Vec::new();
    // 40 messages of 75 000 characters: 3 MB, each message its own item, far from the 400 KB item limit.
    for turn in 0..20 {
        let pair = [
            message(Role::User, &format!("{turn:02}").repeat(37_500)),
            message(Role::Assistant, &format!("{:02}", turn + 50).repeat(37_500)),
        ];
        store.append("alice", &id("big"), &pair).await.unwrap();
        expected.extend(pair);
    }
    let (record, msgs) = store.load("alice", &id("big")).await.unwrap();
    assert_eq!(record.message_count, 40);
    let total: usize = msgs.iter().map(|m| m.content.len()).sum();
    assert_eq!(total, 3_000_000);
    assert_eq!(msgs, expected);
}

#[tokio::test]
async fn a_replace_is_seen_whole_and_the_old_messages_go() {
    let (store, client, table) = store().await;
    let old: Vec<_> = (0..150)
        .map(|i| message(Role::User, &format!("old {i}")))
        .collect();
    store
        .create("alice", &chat("r", "2026-01-01T00:00:00.000Z"), &old)
        .await
        .unwrap();
    let new: Vec<_> = (0..120)
        .map(|i| message(Role::Assistant, &format!("new {i}")))
        .collect();
    let record = store.replace("alice", &id("r"), &new).await.unwrap();
    assert_eq!(record.message_count, 120);
    assert_eq!(record.last_message, "new 119");
    assert_eq!(store.load("alice", &id("r")).await.unwrap().1, new);
    // Only the chat item and the 120 new messages remain.
    let items = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("CHAT#{}#alice", id("r"))))
        .send()
        .await
        .unwrap();
    assert_eq!(items.count(), 121, "the old generation is deleted");
}

#[tokio::test]
async fn paging_through_120_chats_gives_each_once_newest_first() {
    let (store, _, _) = store().await;
    for i in 0..120 {
        let at = format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60);
        store
            .create("alice", &chat(&format!("c{i:03}"), &at), &[])
            .await
            .unwrap();
    }
    store
        .create("bob", &chat("bobs", "2027-01-01T00:00:00.000Z"), &[])
        .await
        .unwrap();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = store
            .list("alice", ChatMode::Standard, 25, cursor.as_deref())
            .await
            .unwrap();
        assert!(page.items.len() <= 25);
        ids.extend(page.items.into_iter().map(|c| c.id));
        pages += 1;
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        pages, 5,
        "120 chats in pages of 25, with no empty last page"
    );
    let expected: Vec<String> = (0..120).rev().map(|i| id(&format!("c{i:03}"))).collect();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn another_owners_chat_is_not_found_by_any_operation() {
    let (store, _, _) = store().await;
    let msgs = [message(Role::User, "mine")];
    store
        .create("alice", &chat("a1", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    assert_eq!(
        store.load("bob", &id("a1")).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.append("bob", &id("a1"), &msgs).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.replace("bob", &id("a1"), &[]).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.delete("bob", &id("a1")).await.unwrap_err(),
        StoreError::NotFound
    );
    assert!(
        store
            .list("bob", ChatMode::Standard, 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Alice's chat is as it was.
    assert_eq!(store.load("alice", &id("a1")).await.unwrap().1, msgs);
}

#[tokio::test]
async fn cursors_are_checked() {
    let (store, _, _) = store().await;
    for i in 0..3 {
        store
            .create(
                "alice",
                &chat(
                    &format!("c{i}"),
                    &format!("2026-01-0{}T00:00:00.000Z", i + 1),
                ),
                &[],
            )
            .await
            .unwrap();
    }
    let page = store
        .list("alice", ChatMode::Standard, 1, None)
        .await
        .unwrap();
    let cursor = page.next_cursor.unwrap();
    assert_eq!(
        store
            .list("bob", ChatMode::Standard, 1, Some(&cursor))
            .await
            .unwrap_err(),
        StoreError::InvalidCursor
    );
    assert_eq!(
        store
            .list("alice", ChatMode::Standard, 1, Some("not-a-cursor"))
            .await
            .unwrap_err(),
        StoreError::InvalidCursor
    );
}

#[tokio::test]
async fn a_deleted_chat_is_gone() {
    let (store, _, _) = store().await;
    store
        .create(
            "alice",
            &chat("d", "2026-01-01T00:00:00.000Z"),
            &[message(Role::User, "x")],
        )
        .await
        .unwrap();
    store.delete("alice", &id("d")).await.unwrap();
    assert_eq!(
        store.load("alice", &id("d")).await.unwrap_err(),
        StoreError::NotFound
    );
    assert!(
        store
            .list("alice", ChatMode::Standard, 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        store.delete("alice", &id("d")).await.unwrap_err(),
        StoreError::NotFound
    );
}

#[tokio::test]
async fn expired_chats_are_ignored() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client.clone(), table.clone(), Some(30));
    store
        .create(
            "alice",
            &chat("e", "2026-01-01T00:00:00.000Z"),
            &[message(Role::User, "x")],
        )
        .await
        .unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("CHAT#{}#alice", id("e"))))
        .key("sk", AttributeValue::S("META".into()))
        .send()
        .await
        .unwrap();
    let expires: i64 = item.item().unwrap()["expiresAt"]
        .as_n()
        .unwrap()
        .parse()
        .unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!(
        (expires - now - 30 * 86_400).abs() < 60,
        "expires 30 days after creation"
    );
    // Past its expiry (and before DynamoDB gets round to deleting it), the chat is gone for readers.
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("CHAT#{}#alice", id("e"))))
        .key("sk", AttributeValue::S("META".into()))
        .update_expression("SET expiresAt = :past")
        .expression_attribute_values(":past", AttributeValue::N((now - 1).to_string()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        store.load("alice", &id("e")).await.unwrap_err(),
        StoreError::NotFound
    );
    assert!(
        store
            .list("alice", ChatMode::Standard, 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn appends_too_large_for_one_transaction_race_without_mixing() {
    let (store, _, _) = store().await;
    store
        .create(
            "alice",
            &chat("huge", "2026-01-01T00:00:00.000Z"),
            &[message(Role::User, "start")],
        )
        .await
        .unwrap();
    // Two writers of 150 messages each: each goes to its own generation, and they commit one after the other.
    let writers = ["a", "b"].map(|w| {
        let store = store.clone();
        async move {
            let batch: Vec<_> = (0..150)
                .map(|i| message(Role::User, &format!("{w}{i}")))
                .collect();
            store.append("alice", &id("huge"), &batch).await
        }
    });
    for result in futures_util::future::join_all(writers).await {
        result.unwrap();
    }
    let (record, msgs) = store.load("alice", &id("huge")).await.unwrap();
    assert_eq!(record.message_count, 301);
    assert_eq!(msgs[0].content, "start");
    for block in msgs[1..].chunks(150) {
        let writer = &block[0].content[..1];
        let expected: Vec<String> = (0..150).map(|i| format!("{writer}{i}")).collect();
        let got: Vec<String> = block.iter().map(|m| m.content.clone()).collect();
        assert_eq!(got, expected, "one writer's messages, whole and in order");
    }
}

#[tokio::test]
async fn deleting_a_chat_removes_every_message_item() {
    let (store, client, table) = store().await;
    let msgs: Vec<_> = (0..130)
        .map(|i| message(Role::User, &format!("m{i}")))
        .collect();
    store
        .create("alice", &chat("gone", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    store
        .append("alice", &id("gone"), &msgs[..3])
        .await
        .unwrap();
    store
        .replace("alice", &id("gone"), &msgs[..5])
        .await
        .unwrap();
    store.delete("alice", &id("gone")).await.unwrap();
    let left = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S(format!("CHAT#{}#alice", id("gone"))),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(left.count(), 0, "nothing of a deleted chat stays behind");
}

#[tokio::test]
async fn ids_that_are_not_chat_ids_name_no_chat() {
    let (store, _, _) = store().await;
    store
        .create(
            "x#bob",
            &chat("c", "2026-01-01T00:00:00.000Z"),
            &[message(Role::User, "bob's")],
        )
        .await
        .unwrap();
    // An id with a '#' could otherwise reach the key of another owner's chat.
    let forged = format!("{}#x", id("c"));
    assert_eq!(
        store.load("bob", &forged).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.delete("bob", &forged).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.load("x#bob", "short").await.unwrap_err(),
        StoreError::NotFound
    );
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
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    (
        DynamoStore::from_config(&sdk, &table, None, TIMEOUTS),
        DynamoStore::new(client, table, None),
        proxy,
    )
}

/// Runs `op`, which must fail as unavailable, within the operation timeout and a second.
async fn unavailable_in_time<T: std::fmt::Debug>(
    what: &str,
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
        took <= TIMEOUTS.operation + Duration::from_secs(1),
        "{what} took {took:?}"
    );
}

#[tokio::test]
async fn a_silent_store_is_unavailable_within_its_timeout() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = [message(Role::User, "hello")];
    direct
        .create("alice", &chat("quiet", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    proxy.set(Fault::Silent);
    unavailable_in_time("load", store.load("alice", &id("quiet"))).await;
    unavailable_in_time("list", store.list("alice", ChatMode::Standard, 10, None)).await;
    let turn = [message(Role::User, "q"), message(Role::Assistant, "a")];
    unavailable_in_time("append", store.append("alice", &id("quiet"), &turn)).await;
    // Nothing landed, and once the store answers again, so does the store.
    proxy.set(Fault::None);
    let (record, msgs) = store.load("alice", &id("quiet")).await.unwrap();
    assert_eq!((record.message_count, msgs), (1, first.to_vec()));
}

#[tokio::test]
async fn a_store_that_refuses_connections_is_unavailable() {
    let (store, direct, proxy) = behind_proxy().await;
    direct
        .create("alice", &chat("closed", "2026-01-01T00:00:00.000Z"), &[])
        .await
        .unwrap();
    // A connection first, so that the refusal also ends one the client holds.
    store.load("alice", &id("closed")).await.unwrap();
    proxy.set(Fault::Refuse);
    unavailable_in_time("load", store.load("alice", &id("closed"))).await;
    let turn = [message(Role::User, "q")];
    unavailable_in_time("append", store.append("alice", &id("closed"), &turn)).await;
    proxy.set(Fault::None);
    assert_eq!(
        store
            .load("alice", &id("closed"))
            .await
            .unwrap()
            .0
            .message_count,
        0
    );
}

#[tokio::test]
async fn a_turn_whose_answer_is_lost_once_is_stored_once() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = [message(Role::User, "q0"), message(Role::Assistant, "a0")];
    direct
        .create("alice", &chat("once", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, Some(1)));
    let turn = [message(Role::User, "q1"), message(Role::Assistant, "a1")];
    let record = store.append("alice", &id("once"), &turn).await.unwrap();
    assert_eq!(proxy.dropped(), 1);
    assert!(
        proxy.forwarded(TRANSACT_WRITE_ITEMS) >= 2,
        "the SDK sent the save again, and the store found it had landed"
    );
    assert_eq!(record.message_count, 4);
    let (stored, msgs) = direct.load("alice", &id("once")).await.unwrap();
    assert_eq!(stored.message_count, 4);
    assert_eq!(msgs, [first.as_slice(), &turn].concat());
}

#[tokio::test]
async fn a_turn_whose_answer_is_lost_on_every_attempt_is_stored_once_and_succeeds() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = [message(Role::User, "q0"), message(Role::Assistant, "a0")];
    direct
        .create("alice", &chat("always", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, None));
    let turn = [message(Role::User, "q1"), message(Role::Assistant, "a1")];
    let record = store.append("alice", &id("always"), &turn).await.unwrap();
    let sent = proxy.forwarded(TRANSACT_WRITE_ITEMS);
    assert!(sent >= 2, "the SDK tried {sent} times");
    assert_eq!(
        proxy.dropped() as usize,
        sent,
        "no answer to the save ever arrived"
    );
    assert_eq!(record.message_count, 4);
    let (_, msgs) = direct.load("alice", &id("always")).await.unwrap();
    assert_eq!(msgs, [first.as_slice(), &turn].concat());
    // A client that sends the same turn again makes a new request, which is a new turn, as any request is.
    proxy.set(Fault::None);
    store.append("alice", &id("always"), &turn).await.unwrap();
    let (record, msgs) = direct.load("alice", &id("always")).await.unwrap();
    assert_eq!(record.message_count, 6);
    assert_eq!(msgs, [first.as_slice(), &turn, &turn].concat());
}

#[tokio::test]
async fn a_new_chat_whose_answer_is_lost_is_created_once() {
    let (store, direct, proxy) = behind_proxy().await;
    let turn = [message(Role::User, "q"), message(Role::Assistant, "a")];
    for (name, times) in [("lost-once", Some(1)), ("lost-always", None)] {
        proxy.set(Fault::drop_responses(TRANSACT_WRITE_ITEMS, times));
        let dropped_before = proxy.dropped();
        let created = store
            .create("alice", &chat(name, "2026-01-01T00:00:00.000Z"), &turn)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(
            proxy.dropped() > dropped_before,
            "{name}: an answer was lost"
        );
        assert_eq!(created.message_count, 2, "{name}");
        let (_, msgs) = direct.load("alice", &id(name)).await.unwrap();
        assert_eq!(msgs, turn, "{name}");
    }
    proxy.set(Fault::None);
    let listed = direct
        .list("alice", ChatMode::Standard, 10, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2);
    // A second create of the same id is still refused: only the write's own attempts count as its own.
    assert_eq!(
        store
            .create("alice", &chat("lost-once", "x"), &turn)
            .await
            .unwrap_err(),
        StoreError::AlreadyExists
    );
}

/// The items under one chat's key.
async fn items_of(client: &aws_sdk_dynamodb::Client, table: &str, chat: &str) -> i32 {
    let mut count = 0;
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(format!("CHAT#{}#alice", id(chat))),
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
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    let store = DynamoStore::from_config(&sdk, &table, None, TIMEOUTS);
    let direct = DynamoStore::new(client.clone(), table.clone(), None);
    let old: Vec<_> = (0..3)
        .map(|i| message(Role::User, &format!("old {i}")))
        .collect();
    direct
        .create("alice", &chat("put", "2026-01-01T00:00:00.000Z"), &old)
        .await
        .unwrap();
    // One transaction (the answer lost once, then on every attempt), then three (the first one's answer lost).
    let small: Vec<_> = (0..2)
        .map(|i| message(Role::Assistant, &format!("new {i}")))
        .collect();
    let large: Vec<_> = (0..150)
        .map(|i| message(Role::Assistant, &format!("large {i}")))
        .collect();
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

// ---- Messages longer than an item, chats longer than a response ---------------------------------------------------

#[tokio::test]
async fn a_500000_character_message_is_stored_and_read_back_whole() {
    let (store, client, table) = store().await;
    // 500 000 characters of one byte, then of four bytes (2 MB), each past DynamoDB's 400 KB item limit.
    let digits = message(Role::Assistant, &"0123456789".repeat(50_000));
    let crabs = message(Role::Assistant, &"🦀".repeat(500_000));
    let first = [message(Role::User, "write a lot"), digits.clone()];
    let created = store
        .create("alice", &chat("long", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    assert_eq!(created.message_count, 2);
    assert_eq!(created.last_message, "0123456789".repeat(20));
    let second = [message(Role::User, "more"), crabs.clone()];
    store.append("alice", &id("long"), &second).await.unwrap();
    // 4 MB in one turn: more than one transaction carries, so it goes through a new generation.
    let third = [
        message(Role::User, &"é".repeat(500_000)),
        message(Role::Assistant, &"🦀".repeat(500_000)),
    ];
    let record = store.append("alice", &id("long"), &third).await.unwrap();
    assert_eq!(record.message_count, 6);
    let (record, msgs) = store.load("alice", &id("long")).await.unwrap();
    assert_eq!(record.message_count, 6);
    assert_eq!(msgs.len(), 6);
    assert_eq!(msgs[1].content.chars().count(), 500_000);
    assert_eq!(msgs, [first.as_slice(), &second, &third].concat());
    // One entry per message in the count and the list, though the long ones span several items.
    assert!(items_of(&client, &table, "long").await > 7);
    let listed = store
        .list("alice", ChatMode::Standard, 10, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].message_count, 6);
    assert_eq!(listed.items[0].last_message, "🦀".repeat(200));
    // Pages split between messages, never inside one.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .load_page("alice", &id("long"), cursor.as_deref(), 2, usize::MAX)
            .await
            .unwrap();
        paged.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, msgs);
}

#[tokio::test]
async fn a_chat_is_read_in_pages_that_join_back_whole() {
    let (store, _, _) = store().await;
    let msgs: Vec<_> = (0..30)
        .map(|i| message(Role::User, &format!("{i:02}").repeat(500)))
        .collect();
    store
        .create("alice", &chat("paged", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    // By size: each page holds what fits, and at least one message.
    let budget = 3 * msgs[0].wire_size() + 10;
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .load_page("alice", &id("paged"), cursor.as_deref(), usize::MAX, budget)
            .await
            .unwrap();
        assert!(
            page.items
                .iter()
                .map(StoredMessage::wire_size)
                .sum::<usize>()
                <= budget
        );
        pages.push(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages.len(), 10);
    assert_eq!(pages.concat(), msgs);
    // A chat that fits one page has no cursor.
    let whole = store
        .load_page("alice", &id("paged"), None, usize::MAX, usize::MAX)
        .await
        .unwrap();
    assert_eq!((whole.items, whole.next_cursor), (msgs.clone(), None));

    // Pages follow the chat as it was at the first page: a turn added meanwhile waits for a new read.
    let first = store
        .load_page("alice", &id("paged"), None, 20, usize::MAX)
        .await
        .unwrap();
    let cursor = first.next_cursor.unwrap();
    store
        .append("alice", &id("paged"), &[message(Role::User, "later")])
        .await
        .unwrap();
    let rest = store
        .load_page("alice", &id("paged"), Some(&cursor), 20, usize::MAX)
        .await
        .unwrap();
    assert_eq!(rest.next_cursor, None);
    assert_eq!([first.items, rest.items].concat(), msgs);

    // A cursor is refused for another chat, for another owner, made up, or once the chat was replaced.
    store
        .create("alice", &chat("other", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    store
        .create("bob", &chat("paged", "2026-01-01T00:00:00.000Z"), &msgs)
        .await
        .unwrap();
    for (owner, chat_id, cursor) in [
        ("alice", id("other"), cursor.as_str()),
        ("bob", id("paged"), cursor.as_str()),
        ("alice", id("paged"), "bm90IGEgY3Vyc29y"),
        ("alice", id("paged"), "!"),
    ] {
        assert_eq!(
            store
                .load_page(owner, &chat_id, Some(cursor), 20, usize::MAX)
                .await
                .unwrap_err(),
            StoreError::InvalidCursor,
            "{owner} {chat_id} {cursor}"
        );
    }
    store
        .replace("alice", &id("paged"), &msgs[..25])
        .await
        .unwrap();
    assert_eq!(
        store
            .load_page("alice", &id("paged"), Some(&cursor), 20, usize::MAX)
            .await
            .unwrap_err(),
        StoreError::InvalidCursor
    );
    assert_eq!(
        store
            .load_page("bob", &id("nothing"), None, 20, usize::MAX)
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
}
