//! [`InMemoryApiKeys`]: the API-key port in memory, with the DynamoDB keys' semantics (found by hash, listed and
//! revoked per owner, at most so many unexpired keys each); and [`api_key_contract`], the checks every key store
//! passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chat_core::{ApiKeyFuture, ApiKeyRecord, ApiKeyRefusal, ApiKeyStore, Caller};

/// The keys in memory, by hash, and the owners as recorded at their sign-ins. Cheap to clone: clones share both.
#[derive(Clone, Default)]
pub struct InMemoryApiKeys {
    keys: Arc<Mutex<HashMap<String, ApiKeyRecord>>>,
    owners: Arc<Mutex<HashMap<String, Caller>>>,
}

impl InMemoryApiKeys {
    pub fn new() -> Self {
        Self::default()
    }
}

impl ApiKeyStore for InMemoryApiKeys {
    fn create<'a>(
        &'a self,
        key: &'a ApiKeyRecord,
        max: usize,
        now: i64,
    ) -> ApiKeyFuture<'a, Result<(), ApiKeyRefusal>> {
        let mut keys = self.keys.lock().unwrap();
        let held = keys
            .values()
            .filter(|k| k.caller.owner == key.caller.owner && !k.expired(now))
            .count();
        let answer = if held >= max {
            Err(ApiKeyRefusal::TooMany { max })
        } else {
            keys.insert(key.hash.clone(), key.clone());
            Ok(())
        };
        Box::pin(async move { Ok(answer) })
    }

    fn find<'a>(&'a self, hash: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
        let found = self.keys.lock().unwrap().get(hash).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn list<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Vec<ApiKeyRecord>> {
        let mut listed: Vec<_> = self
            .keys
            .lock()
            .unwrap()
            .values()
            .filter(|k| k.caller.owner == owner)
            .cloned()
            .collect();
        listed.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        Box::pin(async move { Ok(listed) })
    }

    fn revoke<'a>(&'a self, owner: &'a str, id: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
        let mut keys = self.keys.lock().unwrap();
        let hash = keys
            .values()
            .find(|k| k.caller.owner == owner && k.id == id)
            .map(|k| k.hash.clone());
        let revoked = hash.and_then(|h| keys.remove(&h));
        Box::pin(async move { Ok(revoked) })
    }

    fn touch<'a>(&'a self, key: &'a ApiKeyRecord, at: i64) -> ApiKeyFuture<'a, ()> {
        if let Some(kept) = self.keys.lock().unwrap().get_mut(&key.hash) {
            kept.last_used = Some(at);
        }
        Box::pin(async { Ok(()) })
    }

    fn record_owner<'a>(&'a self, caller: &'a Caller) -> ApiKeyFuture<'a, ()> {
        self.owners
            .lock()
            .unwrap()
            .insert(caller.owner.clone(), caller.clone());
        Box::pin(async { Ok(()) })
    }

    fn recorded_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<Caller>> {
        let recorded = self.owners.lock().unwrap().get(owner).cloned();
        Box::pin(async move { Ok(recorded) })
    }

    fn forget_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, ()> {
        self.owners.lock().unwrap().remove(owner);
        Box::pin(async { Ok(()) })
    }
}

/// One `#[tokio::test]` per check of [`api_key_contract`], each on a fresh store: `$fresh` is an expression whose
/// `.await` is an [`api_key_contract::Subject`]. The crate using it depends on tokio.
#[macro_export]
macro_rules! api_key_contract {
    ($fresh:expr) => {
        $crate::contract_tests!(api_key_contract, $fresh;
            a_key_is_found_by_its_hash_as_its_owner_made_it, a_key_is_listed_to_its_owner_only,
            a_revoked_key_is_found_no_more, another_owners_key_is_not_revoked,
            last_use_is_recorded_and_never_revives_a_revoked_key, an_owner_holds_at_most_max_unexpired_keys,
            an_expired_key_is_found_with_its_expiry, an_owner_is_recorded_as_last_seen_and_forgotten,
            revoking_an_owner_revokes_every_key_of_theirs_and_forgets_them,
        );
    };
}

/// The checks every [`ApiKeyStore`] passes, each given a fresh, empty store.
pub mod api_key_contract {
    use super::*;
    use chat_core::{Caller, NewApiKey};

    /// A fresh, empty store under test.
    pub struct Subject {
        pub store: Box<dyn ApiKeyStore>,
    }

    impl Subject {
        pub fn new(store: impl ApiKeyStore + 'static) -> Self {
            Self {
                store: Box::new(store),
            }
        }

        /// Stores `record` under `max` unexpired keys at `now`: the store answers, and the key is under the bound.
        async fn created(&self, record: &ApiKeyRecord, max: usize, now: i64) {
            self.store
                .create(record, max, now)
                .await
                .expect("the store answers")
                .expect("under the bound");
        }

        /// The key of `hash`, as the store answers.
        async fn found(&self, hash: &str) -> Option<ApiKeyRecord> {
            self.store.find(hash).await.expect("the store answers")
        }

        /// `owner`'s keys, as the store answers.
        async fn listed(&self, owner: &str) -> Vec<ApiKeyRecord> {
            self.store.list(owner).await.expect("the store answers")
        }

        /// `owner`'s key `id` revoked: what it revoked, as the store answers.
        async fn revoked(&self, owner: &str, id: &str) -> Option<ApiKeyRecord> {
            self.store
                .revoke(owner, id)
                .await
                .expect("the store answers")
        }
    }

    /// A time to make keys at (unix seconds): now, so that a table's expiry never removes them mid-test.
    pub fn now() -> i64 {
        time::OffsetDateTime::now_utc().unix_timestamp()
    }

    /// A caller with an oid and groups, as a signed-in user's is.
    pub fn alice() -> Caller {
        Caller {
            owner: "jwt:https://issuer.test:alice".into(),
            oid: Some("oid-alice".into()),
            groups: vec!["staff".into(), "eng".into()],
        }
    }

    pub fn bob() -> Caller {
        Caller {
            owner: "jwt:https://issuer.test:bob".into(),
            oid: Some("oid-bob".into()),
            groups: Vec::new(),
        }
    }

    async fn made(subject: &Subject, caller: Caller, name: &str) -> NewApiKey {
        let new = NewApiKey::generate(caller, name, now(), None);
        subject
            .created(&new.record, chat_core::MAX_KEYS_PER_OWNER, now())
            .await;
        new
    }

    pub async fn a_key_is_found_by_its_hash_as_its_owner_made_it(subject: &Subject) {
        let new = made(subject, alice(), "laptop").await;
        let found = subject
            .found(&chat_core::api_key_hash(&new.key))
            .await
            .expect("found by the key's hash");
        assert_eq!(found, new.record);
        assert_eq!(
            found.caller,
            alice(),
            "the caller as it was, groups and all"
        );
        assert_eq!(
            subject.found(&"0".repeat(64)).await,
            None,
            "an unknown hash finds nothing"
        );
    }

    pub async fn a_key_is_listed_to_its_owner_only(subject: &Subject) {
        let first = made(subject, alice(), "one").await;
        let second = made(subject, alice(), "two").await;
        made(subject, bob(), "bob's").await;
        let listed = subject.listed(&alice().owner).await;
        let mut ids: Vec<_> = listed.iter().map(|k| k.id.clone()).collect();
        ids.sort();
        let mut expected = vec![first.record.id.clone(), second.record.id.clone()];
        expected.sort();
        assert_eq!(ids, expected);
        let one = listed.iter().find(|k| k.id == first.record.id).unwrap();
        assert_eq!(one.name, "one");
        assert_eq!(one.hint, first.record.hint);
        assert_eq!(one.created, first.record.created);
        assert_eq!(subject.listed(&bob().owner).await.len(), 1);
        assert!(subject.listed("jwt:nobody").await.is_empty());
    }

    pub async fn a_revoked_key_is_found_no_more(subject: &Subject) {
        let kept = made(subject, alice(), "kept").await;
        let gone = made(subject, alice(), "gone").await;
        let revoked = subject
            .revoked(&alice().owner, &gone.record.id)
            .await
            .expect("the owner's key is revoked");
        assert_eq!(revoked.hash, gone.record.hash, "answers what it revoked");
        assert_eq!(subject.found(&gone.record.hash).await, None);
        let listed = subject.listed(&alice().owner).await;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, kept.record.id);
        assert!(subject.found(&kept.record.hash).await.is_some());
        // Revoking again finds nothing.
        assert_eq!(subject.revoked(&alice().owner, &gone.record.id).await, None);
    }

    pub async fn another_owners_key_is_not_revoked(subject: &Subject) {
        let key = made(subject, alice(), "alice's").await;
        assert_eq!(subject.revoked(&bob().owner, &key.record.id).await, None);
        assert!(subject.found(&key.record.hash).await.is_some());
        assert_eq!(subject.listed(&alice().owner).await.len(), 1);
    }

    pub async fn last_use_is_recorded_and_never_revives_a_revoked_key(subject: &Subject) {
        let key = made(subject, alice(), "used").await;
        let at = now() + 5;
        subject.store.touch(&key.record, at).await.unwrap();
        let listed = subject.listed(&alice().owner).await;
        assert_eq!(listed[0].last_used, Some(at));
        subject
            .revoked(&alice().owner, &key.record.id)
            .await
            .unwrap();
        subject.store.touch(&key.record, at + 1).await.unwrap();
        assert_eq!(subject.found(&key.record.hash).await, None);
        assert!(subject.listed(&alice().owner).await.is_empty());
    }

    pub async fn an_owner_holds_at_most_max_unexpired_keys(subject: &Subject) {
        let max = 3;
        let t = now();
        // An expired key does not count.
        let mut old = NewApiKey::generate(alice(), "old", t - 10 * 86_400, Some(1));
        old.record.expires = Some(t - 1);
        subject.created(&old.record, max, t).await;
        for i in 0..max {
            let new = NewApiKey::generate(alice(), &format!("k{i}"), t, None);
            subject.created(&new.record, max, t).await;
        }
        let over = NewApiKey::generate(alice(), "over", t, None);
        assert_eq!(
            subject.store.create(&over.record, max, t).await.unwrap(),
            Err(ApiKeyRefusal::TooMany { max })
        );
        assert_eq!(subject.found(&over.record.hash).await, None);
        // Another owner is not bound by alice's keys.
        let bobs = NewApiKey::generate(bob(), "b", t, None);
        subject.created(&bobs.record, max, t).await;
        // One revoked makes room.
        let first = subject.listed(&alice().owner).await;
        let live = first.iter().find(|k| !k.expired(t)).unwrap();
        subject.revoked(&alice().owner, &live.id).await.unwrap();
        subject.created(&over.record, max, t).await;
    }

    pub async fn an_expired_key_is_found_with_its_expiry(subject: &Subject) {
        let t = now();
        let mut key = NewApiKey::generate(alice(), "short", t - 2 * 86_400, Some(1));
        key.record.expires = Some(t - 60);
        subject
            .created(&key.record, chat_core::MAX_KEYS_PER_OWNER, t)
            .await;
        let found = subject.found(&key.record.hash).await.unwrap();
        assert_eq!(found.expires, Some(t - 60));
        assert!(found.expired(t));
        let later = NewApiKey::generate(alice(), "later", t, Some(30));
        subject
            .created(&later.record, chat_core::MAX_KEYS_PER_OWNER, t)
            .await;
        let found = subject.found(&later.record.hash).await.unwrap();
        assert_eq!(found.expires, Some(t + 30 * 86_400));
        assert!(!found.expired(t));
    }

    pub async fn an_owner_is_recorded_as_last_seen_and_forgotten(subject: &Subject) {
        let store = &subject.store;
        assert_eq!(store.recorded_owner(&alice().owner).await.unwrap(), None);
        store.record_owner(&alice()).await.unwrap();
        assert_eq!(
            store.recorded_owner(&alice().owner).await.unwrap(),
            Some(alice())
        );
        // A later sign-in replaces it: groups removed are gone.
        let fewer = Caller {
            groups: vec!["staff".into()],
            oid: Some("oid-alice-2".into()),
            ..alice()
        };
        store.record_owner(&fewer).await.unwrap();
        assert_eq!(
            store.recorded_owner(&alice().owner).await.unwrap(),
            Some(fewer.clone())
        );
        let no_groups = Caller {
            groups: Vec::new(),
            oid: None,
            ..alice()
        };
        store.record_owner(&no_groups).await.unwrap();
        assert_eq!(
            store.recorded_owner(&alice().owner).await.unwrap(),
            Some(no_groups)
        );
        assert_eq!(store.recorded_owner(&bob().owner).await.unwrap(), None);
        // What is recorded is not a key of theirs.
        made(subject, alice(), "laptop").await;
        assert_eq!(subject.listed(&alice().owner).await.len(), 1);
        store.forget_owner(&alice().owner).await.unwrap();
        assert_eq!(store.recorded_owner(&alice().owner).await.unwrap(), None);
        assert_eq!(subject.listed(&alice().owner).await.len(), 1);
        // Forgetting one never recorded is no failure.
        store.forget_owner(&bob().owner).await.unwrap();
    }

    pub async fn revoking_an_owner_revokes_every_key_of_theirs_and_forgets_them(subject: &Subject) {
        let keys = [
            made(subject, alice(), "one").await,
            made(subject, alice(), "two").await,
            made(subject, alice(), "three").await,
        ];
        let bobs = made(subject, bob(), "bob's").await;
        subject.store.record_owner(&alice()).await.unwrap();
        subject.store.record_owner(&bob()).await.unwrap();
        let revoked = chat_core::revoke_owner(&*subject.store, &alice().owner)
            .await
            .expect("the store answers");
        let mut ids: Vec<_> = revoked.iter().map(|k| k.id.clone()).collect();
        ids.sort();
        let mut expected: Vec<_> = keys.iter().map(|k| k.record.id.clone()).collect();
        expected.sort();
        assert_eq!(ids, expected, "every key of theirs, each once");
        for key in &keys {
            assert_eq!(subject.found(&key.record.hash).await, None);
        }
        assert!(subject.listed(&alice().owner).await.is_empty());
        assert_eq!(
            subject.store.recorded_owner(&alice().owner).await.unwrap(),
            None
        );
        // Another owner keeps theirs.
        assert!(subject.found(&bobs.record.hash).await.is_some());
        assert_eq!(
            subject.store.recorded_owner(&bob().owner).await.unwrap(),
            Some(bob())
        );
        // Again: nothing left to revoke.
        assert!(
            chat_core::revoke_owner(&*subject.store, &alice().owner)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
