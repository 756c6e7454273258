//! The in-memory store passes the store's contract, as DynamoDB does (chat-aws's `tests/store.rs`); and its faults
//! change nothing.

use chat_core::{ChatMode, Role, SessionStore, StoreError};
use chat_testing::contract::{Subject, chat, id, message};
use chat_testing::{InMemoryStore, StoreOp};

async fn fresh() -> Subject<InMemoryStore> {
    Subject::new(InMemoryStore::new())
}

chat_testing::store_contract!(fresh());

#[tokio::test]
async fn an_injected_fault_fails_one_call_and_changes_nothing() {
    let store = InMemoryStore::new();
    let first = [message(Role::User, "q")];
    store
        .create("alice", &chat("f", "2026-01-01T00:00:00.000Z"), &first)
        .await
        .unwrap();
    store.fail_next_write(StoreError::Unavailable("down".into()));
    // A read passes; the next write fails, and only it.
    store.load("alice", &id("f")).await.unwrap();
    let turn = [message(Role::User, "q2"), message(Role::Assistant, "a2")];
    assert_eq!(
        store.append("alice", &id("f"), &turn).await.unwrap_err(),
        StoreError::Unavailable("down".into())
    );
    assert_eq!(store.load("alice", &id("f")).await.unwrap().1, first);
    store.fail_next_on(StoreOp::List, StoreError::Failed("x".into()));
    assert!(
        store
            .list("alice", ChatMode::Standard, 10, None)
            .await
            .is_err()
    );
    assert_eq!(
        store
            .list("alice", ChatMode::Standard, 10, None)
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    store.fail_next(StoreError::Contended);
    assert_eq!(
        store.load("alice", &id("f")).await.unwrap_err(),
        StoreError::Contended
    );
    store.append("alice", &id("f"), &turn).await.unwrap();
    assert_eq!(
        store.load("alice", &id("f")).await.unwrap().0.message_count,
        3
    );
    assert_eq!(store.writes(), 3);
}
