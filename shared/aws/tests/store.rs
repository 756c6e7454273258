//! The DynamoDB store against moto's server, through the real SDK client.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::DynamoStore;
use chat_core::{ChatRecord, SessionStore, StoreError, StoredMessage};
use chat_protocol::Role;
use chat_protocol::chat_ui::ChatMode;
use local_dynamodb::LocalDynamo;

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
