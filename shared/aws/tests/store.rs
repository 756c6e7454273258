//! The DynamoDB store against moto's server, through the real SDK client; faults between them through a fault
//! proxy.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::DynamoStore;
use chat_core::ChatMode;
use chat_core::Role;
use chat_core::{SessionStore, StoreError, StoreTimeouts};
use chat_testing::contract::{Subject, chat, id, message};
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::{Fault, FaultProxy, TRANSACT_WRITE_ITEMS};

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

/// The target of DynamoDB's `UpdateItem`, for the fault proxy.
const UPDATE_ITEM: &str = "DynamoDB_20120810.UpdateItem";

#[tokio::test]
async fn a_rename_is_one_update_and_one_whose_answer_is_lost_is_read_back() {
    let (store, direct, proxy) = behind_proxy().await;
    let first = [message(Role::User, "q0"), message(Role::Assistant, "a0")];
    direct
        .create("alice", &chat("named", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    // One call: no read before it, nothing but the chat item written.
    let before = proxy.operations().len();
    let renamed = store
        .rename("alice", &id("named"), "First name")
        .await
        .unwrap();
    assert_eq!(proxy.operations()[before..], ["UpdateItem"]);
    assert_eq!(renamed.title, "First name");
    assert_eq!(renamed.last_updated, "2026-01-01T00:00:00.000Z");

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
    let started = Instant::now();
    let result = store.rename("alice", &id("named"), "Third").await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    assert!(
        took <= 2 * TIMEOUTS.operation + Duration::from_secs(1),
        "rename took {took:?}"
    );
    proxy.set(Fault::None);
    assert_eq!(
        direct.load("alice", &id("named")).await.unwrap().0.title,
        "Second name"
    );
}

// ---- How many calls a turn makes ----------------------------------------------------------------------------------

/// A turn through the chat service: a new chat is one write; a continued chat is two reads (the chat item, then its
/// newest messages in one query, sized by the chat item's estimate of the chat's tokens) before the model and one
/// write after, for a chat of 2 or of 40 messages. (Before the context budget, a turn read the chat whole in one query: reads that grew with the
/// chat.)
#[tokio::test]
async fn a_continued_turn_reads_once_and_writes_once() {
    use chat_core::{Caller, ChatService, ChatSettings, Message, Overrides, TurnInput};

    use chat_testing::{Script, ScriptedModel};

    let (store, _direct, proxy) = behind_proxy().await;
    let model = ScriptedModel::new();
    let service = ChatService::new(
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
    );
    let alice = Caller::owner("alice");
    let ask = |text: &str, session: Option<&str>| TurnInput {
        messages: vec![Message::new(Role::User, text)],
        overrides: Overrides::default(),
        session_state: session.map(|s| serde_json::Value::String(s.into())),
        session_field: "sessionState",
        store_new_chat: true,
    };
    let mut calls_per_turn = Vec::new();
    let mut chat_id = None;
    for turn in 0..20 {
        model.push(Script::text(format!("answer {turn}")));
        let before = proxy.operations().len();
        let answer = service
            .answer(
                &alice,
                &ask(&format!("question {turn}"), chat_id.as_deref()),
            )
            .await
            .unwrap();
        chat_id = answer
            .session_state
            .and_then(|s| s.as_str().map(str::to_string));
        calls_per_turn.push(proxy.operations()[before..].join(" "));
    }
    assert_eq!(calls_per_turn[0], "TransactWriteItems", "a new chat");
    for (turn, calls) in calls_per_turn.iter().enumerate().skip(1) {
        // The chat item tells the chat's estimated size: one query reads what the budget takes (here, all of it).
        assert_eq!(calls, "GetItem Query TransactWriteItems", "turn {turn}");
    }
    // The model saw the whole chat on the last turn: the one query read every message.
    let last = model.last_request().unwrap();
    assert_eq!(last.messages.len(), 39);
}
