//! [`InMemoryResponses`]: the kept responses' port in memory, with the DynamoDB store's semantics (by owner and id,
//! gone once expired); and [`response_store_contract`], the checks every kept responses' store passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chat_core::{KeptFuture, KeptResponse, ResponseStore};
use serde_json::json;

/// The kept responses in memory. Cheap to clone: clones share them.
#[derive(Clone, Default)]
pub struct InMemoryResponses {
    kept: Arc<Mutex<HashMap<(String, String), KeptResponse>>>,
}

impl InMemoryResponses {
    pub fn new() -> Self {
        Self::default()
    }
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl ResponseStore for InMemoryResponses {
    fn keep_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        kept: &'a KeptResponse,
    ) -> KeptFuture<'a, ()> {
        self.kept
            .lock()
            .unwrap()
            .insert((owner.to_string(), id.to_string()), kept.clone());
        Box::pin(async { Ok(()) })
    }

    fn kept_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> KeptFuture<'a, Option<KeptResponse>> {
        let kept = self
            .kept
            .lock()
            .unwrap()
            .get(&(owner.to_string(), id.to_string()))
            .filter(|k| !k.expired(now()))
            .cloned();
        Box::pin(async move { Ok(kept) })
    }

    fn delete_response<'a>(&'a self, owner: &'a str, id: &'a str) -> KeptFuture<'a, bool> {
        let gone = self
            .kept
            .lock()
            .unwrap()
            .remove(&(owner.to_string(), id.to_string()))
            .is_some_and(|k| !k.expired(now()));
        Box::pin(async move { Ok(gone) })
    }
}

/// What every kept responses' store does: a response kept is read back whole by its owner only, replaced by one of
/// its id, gone once expired, and deleted once (the second delete finds nothing).
pub async fn response_store_contract(store: &dyn ResponseStore) {
    let kept = KeptResponse {
        response: json!({"id": "resp_1", "object": "response", "output": [{"type": "message"}]}),
        input_items: vec![json!({"role": "user", "content": "hi"})],
        history: vec![
            json!({"role": "user", "content": "hi"}),
            json!({"type": "message", "role": "assistant"}),
        ],
        expires_at: now() + 3600,
    };
    store.keep_response("alice", "resp_1", &kept).await.unwrap();
    assert_eq!(
        store.kept_response("alice", "resp_1").await.unwrap(),
        Some(kept.clone())
    );
    assert_eq!(store.kept_response("bob", "resp_1").await.unwrap(), None);
    assert_eq!(store.kept_response("alice", "resp_2").await.unwrap(), None);
    assert!(!store.delete_response("bob", "resp_1").await.unwrap());
    let replaced = KeptResponse {
        history: Vec::new(),
        ..kept.clone()
    };
    store
        .keep_response("alice", "resp_1", &replaced)
        .await
        .unwrap();
    assert_eq!(
        store.kept_response("alice", "resp_1").await.unwrap(),
        Some(replaced)
    );
    assert!(store.delete_response("alice", "resp_1").await.unwrap());
    assert!(!store.delete_response("alice", "resp_1").await.unwrap());
    assert_eq!(store.kept_response("alice", "resp_1").await.unwrap(), None);
    let expired = KeptResponse {
        expires_at: now() - 1,
        ..kept
    };
    store
        .keep_response("alice", "resp_3", &expired)
        .await
        .unwrap();
    assert_eq!(store.kept_response("alice", "resp_3").await.unwrap(), None);
    assert!(!store.delete_response("alice", "resp_3").await.unwrap());
}
