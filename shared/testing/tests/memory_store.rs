//! The in-memory store passes the store's contract, as DynamoDB does (chat-aws's `tests/store.rs`); and its faults
//! change nothing.

use chat_core::{ChatMode, Role, SessionStore, StoreError};
use chat_testing::contract::{Subject, fails, id, listed, message, seed, turn};
use chat_testing::{InMemoryStore, StoreOp};

async fn fresh() -> Subject<InMemoryStore> {
    Subject::new(InMemoryStore::new())
}

chat_testing::store_contract!(fresh());

#[tokio::test]
async fn an_injected_fault_fails_one_call_and_changes_nothing() {
    let store = InMemoryStore::new();
    let first = [message(Role::User, "q")];
    seed(&store, "alice", "f", &first).await;
    store.fail_next_write(StoreError::Unavailable("down".into()));
    // A read passes; the next write fails, and only it.
    store.load("alice", &id("f")).await.unwrap();
    let second = turn("q2", "a2");
    let down = StoreError::Unavailable("down".into());
    fails(store.append("alice", &id("f"), &second), down, "append").await;
    assert_eq!(store.load("alice", &id("f")).await.unwrap().1, first);
    store.fail_next_on(StoreOp::List, StoreError::Failed("x".into()));
    assert!(
        store
            .list(
                "alice",
                chat_core::ListRequest::first(ChatMode::Standard, 10)
            )
            .await
            .is_err()
    );
    assert_eq!(listed(&store, "alice", ChatMode::Standard).await.len(), 1);
    store.fail_next(StoreError::Contended);
    fails(store.load("alice", &id("f")), StoreError::Contended, "load").await;
    store.append("alice", &id("f"), &second).await.unwrap();
    assert_eq!(
        store.load("alice", &id("f")).await.unwrap().0.message_count,
        3
    );
    assert_eq!(store.writes(), 3);
}
