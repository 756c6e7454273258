//! API keys in place of a JWT (or, in a local run, of nobody), so that a program acts as the person who made the
//! key: a key is checked by a read of its hash in the key store ([`chat_core::ApiKeyStore`]) with its owner's
//! record, and what that read found is kept for a short while per instance.
//!
//! The cache's life (`API_KEY_CACHE_SECONDS`, default 60) is how long a revoked key (or a key whose owner the user
//! pool disabled or deleted) may still work on an instance that checked it before (the instance that revokes it
//! forgets it at once), and how often a key's last
//! use is recorded: at most once per life per key and instance, in a task of its own, bounded by the store's
//! timeout, whose failure is logged and never fails the request. An expired key is refused whatever the cache holds.
//!
//! A key acts with its owner as they signed in last: every verified sign-in records the person's oid and groups in
//! the store ([`ApiKeyStore::record_owner`]) when they differ from what this instance saw of them last (so a
//! write per person and instance and change, not per request: in a task of its own, bounded by the store's
//! timeout, its failure logged and never failing the request), and a key's read on a cache miss reads the owner's
//! record with it (at once when this instance knows the owner from an earlier read, else right after). Nothing
//! recorded (a service account, or an owner whose keys were all revoked): the key's own snapshot.
//!
//! With an [`AccountDirectory`] (the template's Cognito user pool, [`ApiKeys::with_accounts`]), each read of a key
//! also asks it about the key's owner, at the same time as their record: disabled or gone, the key is refused as an
//! unknown one (401); a directory out of reach fails the check as the store does (503).
//!
//! Keys found and hashes that found nothing are kept apart, each up to [`REMEMBERED_KEYS`]: made-up `cbk_` tokens
//! cost one read each per cache life, and however many are sent they fill only their own side, never pushing out
//! the checks of real keys.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

use chat_core::{
    AccountDirectory, ApiKeyRecord, ApiKeyStore, Caller, ChatError, MAX_KEY_DAYS, StoreError,
    api_key_hash,
};

/// A person as a sign-in showed them: their oid and groups.
type Seen = (Option<String>, Vec<String>);
use time::OffsetDateTime;

use crate::{ApiError, ConfigError};

/// How long a key's check is kept, unless `API_KEY_CACHE_SECONDS` says otherwise.
pub const DEFAULT_CACHE_SECONDS: u64 = 60;

/// How many days a key lasts when its maker asks for no other life, unless `API_KEY_DEFAULT_DAYS` says otherwise:
/// a key forgotten in a script or a departed person's laptop stops by itself.
pub const DEFAULT_KEY_DAYS: u32 = 90;

/// The longest cache life an operator may set: a revoked key must stop working within a time a person waits for.
const MAX_CACHE_SECONDS: u64 = 3600;

/// How many keys found one instance keeps before it forgets them all (and reads each again once), and apart from
/// them how many hashes that found nothing: a bound on what callers sending made-up keys can make it hold.
const REMEMBERED_KEYS: usize = 10_000;

/// The settings of key checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiKeySettings {
    /// `API_KEY_CACHE_SECONDS`: how long a check is kept (0: every request reads the store).
    pub cache_life: Duration,
    /// `API_KEY_DEFAULT_DAYS`: how long a key lasts when its maker asks for no other life; `None` (set to 0): such
    /// a key never expires.
    pub default_days: Option<u32>,
}

impl Default for ApiKeySettings {
    fn default() -> Self {
        Self {
            cache_life: Duration::from_secs(DEFAULT_CACHE_SECONDS),
            default_days: Some(DEFAULT_KEY_DAYS),
        }
    }
}

impl ApiKeySettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|name: &str| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let seconds = match lookup("API_KEY_CACHE_SECONDS").filter(|v| !v.trim().is_empty()) {
            None => DEFAULT_CACHE_SECONDS,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| *s <= MAX_CACHE_SECONDS)
                .ok_or(ConfigError {
                    name: "API_KEY_CACHE_SECONDS",
                    reason: format!("expected a whole number from 0 to {MAX_CACHE_SECONDS}"),
                })?,
        };
        let default_days = match lookup("API_KEY_DEFAULT_DAYS").filter(|v| !v.trim().is_empty()) {
            None => Some(DEFAULT_KEY_DAYS),
            Some(v) => match v.trim().parse::<u32>().ok().filter(|d| *d <= MAX_KEY_DAYS) {
                Some(0) => None,
                Some(days) => Some(days),
                None => {
                    return Err(ConfigError {
                        name: "API_KEY_DEFAULT_DAYS",
                        reason: format!(
                            "expected a whole number of days from 0 (keys last until revoked) to {MAX_KEY_DAYS}"
                        ),
                    });
                }
            },
        };
        Ok(Self {
            cache_life: Duration::from_secs(seconds),
            default_days,
        })
    }
}

/// A key an instance found, and when.
#[derive(Clone)]
struct Checked {
    key: ApiKeyRecord,
    read_at: Instant,
    /// When this instance last recorded the key's use.
    touched_at: Option<Instant>,
}

/// What an instance remembers of its reads: the keys found, and apart from them the hashes that found nothing (and
/// when), each side bounded on its own.
#[derive(Default)]
struct Remembered {
    found: HashMap<String, Checked>,
    refused: HashMap<String, Instant>,
    /// What this instance recorded of each person who signed in (or is recording now), by owner id.
    signed_in: HashMap<String, Seen>,
}

impl Remembered {
    /// What a read within `life` found for `hash`: `Some(Some(key))`, `Some(None)` (nothing), or `None` (no read).
    fn kept(&self, hash: &str, now: Instant, life: Duration) -> Option<Option<ApiKeyRecord>> {
        let fresh = |read_at: Instant| now.duration_since(read_at) < life;
        if let Some(c) = self.found.get(hash).filter(|c| fresh(c.read_at)) {
            return Some(Some(c.key.clone()));
        }
        self.refused
            .get(hash)
            .filter(|read_at| fresh(**read_at))
            .map(|_| None)
    }

    /// Keeps what a read at `now` found for `hash`, on its own side (that side forgotten first when full).
    fn keep(&mut self, hash: &str, found: Option<&ApiKeyRecord>, now: Instant) {
        match found {
            Some(key) => {
                self.refused.remove(hash);
                if self.found.len() >= REMEMBERED_KEYS && !self.found.contains_key(hash) {
                    self.found.clear();
                }
                let touched_at = self.found.get(hash).and_then(|c| c.touched_at);
                self.found.insert(
                    hash.to_string(),
                    Checked {
                        key: key.clone(),
                        read_at: now,
                        touched_at,
                    },
                );
            }
            None => {
                self.found.remove(hash);
                if self.refused.len() >= REMEMBERED_KEYS && !self.refused.contains_key(hash) {
                    self.refused.clear();
                }
                self.refused.insert(hash.to_string(), now);
            }
        }
    }
}

/// The key store and what this instance remembers of it. A clone shares both.
#[derive(Clone)]
pub struct ApiKeys {
    store: Arc<dyn ApiKeyStore>,
    cache_life: Duration,
    default_days: Option<u32>,
    /// The bound of every call this makes of the store.
    timeout: Duration,
    checked: Arc<Mutex<Remembered>>,
    /// Where the people behind keys are asked whether they may still act (the template's user pool), if anywhere.
    accounts: Option<Arc<dyn AccountDirectory>>,
}

impl ApiKeys {
    /// Keys kept in `store`, checks kept per `settings`, every call of the store bounded by `timeout`.
    pub fn new(store: Arc<dyn ApiKeyStore>, settings: ApiKeySettings, timeout: Duration) -> Self {
        Self {
            store,
            cache_life: settings.cache_life,
            default_days: settings.default_days,
            timeout,
            checked: Arc::default(),
            accounts: None,
        }
    }

    /// These keys, refused when `accounts` says their owner is disabled or gone (asked with every read of a key,
    /// so once per key per instance per cache life).
    pub fn with_accounts(self, accounts: Arc<dyn AccountDirectory>) -> Self {
        Self {
            accounts: Some(accounts),
            ..self
        }
    }

    /// The store (the history function lists, makes and revokes keys in it).
    pub fn store(&self) -> &dyn ApiKeyStore {
        &*self.store
    }

    /// How many days a key lasts when its maker asks for no other life (`None`: until revoked).
    pub fn default_days(&self) -> Option<u32> {
        self.default_days
    }

    /// The bound of a call of the store.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Forgets what this instance found for `hash` (a key revoked here stops working here at once).
    pub fn forget(&self, hash: &str) {
        let mut checked = self.checked.lock().unwrap();
        checked.found.remove(hash);
        checked.refused.remove(hash);
    }

    /// `call` of the store, within the timeout; a store out of reach is a 503, as anywhere else.
    pub async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, ApiError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(StoreError::Unavailable(format!(
                    "the API keys gave no answer within {:?}",
                    self.timeout
                )))
            })
            .map_err(|e| ApiError::Chat(ChatError::Store(e)))
    }

    /// The caller `key` acts as, or 401 (unknown, revoked or expired).
    pub(super) async fn check(&self, key: &str) -> Result<Caller, ApiError> {
        let hash = api_key_hash(key);
        let now = Instant::now();
        let kept = self
            .checked
            .lock()
            .unwrap()
            .kept(&hash, now, self.cache_life);
        let found = match kept {
            Some(found) => found,
            None => {
                let known_owner = self
                    .checked
                    .lock()
                    .unwrap()
                    .found
                    .get(&hash)
                    .map(|c| c.key.caller.owner.clone());
                let found = self.bounded(self.read(&hash, known_owner)).await?;
                self.checked
                    .lock()
                    .unwrap()
                    .keep(&hash, found.as_ref(), now);
                found
            }
        };
        let Some(found) = found else {
            return Err(ApiError::Unauthorized("no such API key".into()));
        };
        let unix_now = OffsetDateTime::now_utc().unix_timestamp();
        if found.expired(unix_now) {
            return Err(ApiError::Unauthorized("the API key has expired".into()));
        }
        self.record_use(&hash, &found, now, unix_now);
        Ok(found.caller)
    }

    /// The key of `hash` as it acts (see [`ApiKeyRecord::acting_as`]): its item, its owner's record and (with a
    /// directory) whether the owner may still act, read at once when `known_owner` (from an earlier read) is still
    /// the key's, else the key first. `None`: no such key, or its owner is disabled or gone.
    async fn read(
        &self,
        hash: &str,
        known_owner: Option<String>,
    ) -> Result<Option<ApiKeyRecord>, StoreError> {
        let (key, (recorded, active)) = match known_owner {
            Some(owner) => {
                let (found, about) = tokio::join!(self.store.find(hash), self.about(&owner));
                match found? {
                    None => return Ok(None),
                    Some(key) if key.caller.owner == owner => (key, about?),
                    Some(key) => {
                        let about = self.about(&key.caller.owner).await?;
                        (key, about)
                    }
                }
            }
            None => {
                let Some(key) = self.store.find(hash).await? else {
                    return Ok(None);
                };
                let about = self.about(&key.caller.owner).await?;
                (key, about)
            }
        };
        if active == Some(false) {
            tracing::info!(key = %key.id, "an API key refused: its owner is disabled or gone in the user pool");
            return Ok(None);
        }
        Ok(Some(key.acting_as(recorded)))
    }

    /// What is known of `owner` besides their key: their record as they signed in last, and whether the directory
    /// (if any) says they may act, asked at once.
    async fn about(&self, owner: &str) -> Result<(Option<Caller>, Option<bool>), StoreError> {
        let active = async {
            match &self.accounts {
                Some(accounts) => accounts.active(owner).await,
                None => Ok(None),
            }
        };
        let (recorded, active) = tokio::join!(self.store.recorded_owner(owner), active);
        Ok((recorded?, active?))
    }

    /// Records `caller`, just proven by a sign-in, as its owner is now, unless this instance saw them so last: in a
    /// task of its own, bounded, its failure logged (and the record tried again at their next sign-in). Their keys
    /// this instance holds act so at once.
    pub(super) fn signed_in(&self, caller: &Caller) {
        let seen: Seen = (caller.oid.clone(), caller.groups.clone());
        {
            let mut checked = self.checked.lock().unwrap();
            if checked.signed_in.get(&caller.owner) == Some(&seen) {
                return;
            }
            if checked.signed_in.len() >= REMEMBERED_KEYS {
                checked.signed_in.clear();
            }
            checked.signed_in.insert(caller.owner.clone(), seen.clone());
            for c in checked
                .found
                .values_mut()
                .filter(|c| c.key.caller.owner == caller.owner)
            {
                c.key.caller.oid.clone_from(&caller.oid);
                c.key.caller.groups.clone_from(&caller.groups);
            }
        }
        let (store, caller, timeout) = (self.store.clone(), caller.clone(), self.timeout);
        let checked = self.checked.clone();
        // In the request's span, so that the write's own span is part of the request's trace, not a trace alone.
        tokio::spawn(
            async move {
            let failure = match tokio::time::timeout(timeout, store.record_owner(&caller)).await {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer in time".to_string(),
            };
            tracing::warn!(error = %failure, "a person's groups are not recorded for their API keys");
            let mut checked = checked.lock().unwrap();
            if checked.signed_in.get(&caller.owner) == Some(&seen) {
                checked.signed_in.remove(&caller.owner);
            }
        }
            .in_current_span(),
        );
    }

    /// Records the key's use when this instance has not within the cache's life: in a task of its own, bounded,
    /// its failure logged only.
    fn record_use(&self, hash: &str, key: &ApiKeyRecord, now: Instant, unix_now: i64) {
        {
            let mut checked = self.checked.lock().unwrap();
            let Some(entry) = checked.found.get_mut(hash) else {
                return;
            };
            if entry.touched_at.is_some_and(|t| {
                now.duration_since(t) < self.cache_life.max(Duration::from_secs(1))
            }) {
                return;
            }
            entry.touched_at = Some(now);
        }
        let (store, key, timeout) = (self.store.clone(), key.clone(), self.timeout);
        tokio::spawn(
            async move {
            match tokio::time::timeout(timeout, store.touch(&key, unix_now)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, key = %key.id, "an API key's last use is not recorded")
                }
                Err(_) => {
                    tracing::warn!(key = %key.id, "an API key's last use is not recorded: no answer in time")
                }
            }
        }
            .in_current_span(),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chat_core::{ApiKeyFuture, ApiKeyRefusal, NewApiKey};

    use super::*;

    /// A store of one key that counts what it is asked.
    #[derive(Default)]
    struct Counting {
        key: Mutex<Option<ApiKeyRecord>>,
        finds: AtomicUsize,
        touches: AtomicUsize,
        /// The owners as recorded, and how many records were written.
        owners: Mutex<HashMap<String, Caller>>,
        records: AtomicUsize,
        /// Every find fails, as a table out of reach.
        down: bool,
    }

    impl Counting {
        /// `value`, or a table out of reach when the store is down.
        fn answer<'a, T: Send + 'a>(&self, value: T) -> ApiKeyFuture<'a, T> {
            let answer = if self.down {
                Err(StoreError::Unavailable("down".into()))
            } else {
                Ok(value)
            };
            Box::pin(async move { answer })
        }
    }

    impl ApiKeyStore for Counting {
        /// Keeps `key` as the one key (these tests check keys; they make none through here).
        fn create<'a>(
            &'a self,
            key: &'a ApiKeyRecord,
            _: usize,
            _: i64,
        ) -> ApiKeyFuture<'a, Result<(), ApiKeyRefusal>> {
            *self.key.lock().unwrap() = Some(key.clone());
            Box::pin(async { Ok(Ok(())) })
        }

        fn find<'a>(&'a self, hash: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
            self.finds.fetch_add(1, Ordering::SeqCst);
            let found = self.key.lock().unwrap().clone().filter(|k| k.hash == hash);
            self.answer(found)
        }

        fn list<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Vec<ApiKeyRecord>> {
            let keys: Vec<ApiKeyRecord> = self
                .key
                .lock()
                .unwrap()
                .clone()
                .filter(|k| k.caller.owner == owner)
                .into_iter()
                .collect();
            Box::pin(async move { Ok(keys) })
        }

        fn revoke<'a>(
            &'a self,
            owner: &'a str,
            id: &'a str,
        ) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
            let mut key = self.key.lock().unwrap();
            let revoked = key.take_if(|k| k.caller.owner == owner && k.id == id);
            Box::pin(async move { Ok(revoked) })
        }

        fn touch<'a>(&'a self, _: &'a ApiKeyRecord, _: i64) -> ApiKeyFuture<'a, ()> {
            self.touches.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }

        fn record_owner<'a>(&'a self, caller: &'a Caller) -> ApiKeyFuture<'a, ()> {
            self.records.fetch_add(1, Ordering::SeqCst);
            self.owners
                .lock()
                .unwrap()
                .insert(caller.owner.clone(), caller.clone());
            Box::pin(async { Ok(()) })
        }

        fn recorded_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<Caller>> {
            let recorded = self.owners.lock().unwrap().get(owner).cloned();
            self.answer(recorded)
        }

        fn forget_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, ()> {
            self.owners.lock().unwrap().remove(owner);
            Box::pin(async { Ok(()) })
        }
    }

    /// Waits (a little) for the tasks of `keys` to run.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn person(groups: &[&str]) -> Caller {
        Caller {
            owner: "jwt:i:alice".into(),
            oid: Some("oid-alice".into()),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[tokio::test]
    async fn a_key_acts_with_its_owners_groups_as_they_signed_in_last() {
        let new = NewApiKey::generate(person(&["admins", "staff"]), "k", now(), None);
        let store = Arc::new(Counting::default());
        *store.key.lock().unwrap() = Some(new.record.clone());
        let life = Duration::from_millis(200);
        let keys = keys(&store, life);
        // Nothing recorded: the key's snapshot.
        assert_eq!(
            keys.check(&new.key).await.unwrap(),
            person(&["admins", "staff"])
        );
        // Signing in records them, once per change (not per request).
        for _ in 0..5 {
            keys.signed_in(&person(&["staff"]));
        }
        settle().await;
        assert_eq!(store.records.load(Ordering::SeqCst), 1);
        assert_eq!(
            store.owners.lock().unwrap()["jwt:i:alice"],
            person(&["staff"])
        );
        // This instance's cached key acts so at once, without a read.
        let finds = store.finds.load(Ordering::SeqCst);
        assert_eq!(keys.check(&new.key).await.unwrap(), person(&["staff"]));
        assert_eq!(store.finds.load(Ordering::SeqCst), finds);
        // Another instance (its own cache) reads the record with the key.
        let other = self::keys(&store, life);
        assert_eq!(other.check(&new.key).await.unwrap(), person(&["staff"]));
        // A change is recorded again, and reaches the other instance after its cache's life (both read at once,
        // the owner being known).
        keys.signed_in(&person(&[]));
        settle().await;
        assert_eq!(store.records.load(Ordering::SeqCst), 2);
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        assert_eq!(other.check(&new.key).await.unwrap(), person(&[]));
        // The oid follows too; the owner id is always the key's.
        let moved = Caller {
            oid: Some("oid-2".into()),
            ..person(&["x"])
        };
        keys.signed_in(&moved);
        settle().await;
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        assert_eq!(other.check(&new.key).await.unwrap(), moved);
        // Forgotten (all their keys revoked): the snapshot again, after the cache's life.
        store.owners.lock().unwrap().clear();
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        assert_eq!(
            other.check(&new.key).await.unwrap(),
            person(&["admins", "staff"])
        );
    }

    /// A directory whose answer the test sets: `Ok(Some(enabled))`, `Ok(None)` (not its person), or down.
    struct Directory(Mutex<Result<Option<bool>, ()>>, AtomicUsize);

    impl AccountDirectory for Directory {
        fn active<'a>(&'a self, _: &'a str) -> ApiKeyFuture<'a, Option<bool>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            let answer = *self.0.lock().unwrap();
            Box::pin(async move {
                answer.map_err(|()| StoreError::Unavailable("the pool is down".into()))
            })
        }
    }

    #[tokio::test]
    async fn a_key_of_an_owner_disabled_in_the_directory_is_refused_after_the_cache_life() {
        let new = NewApiKey::generate(person(&["staff"]), "k", now(), None);
        let store = Arc::new(Counting::default());
        *store.key.lock().unwrap() = Some(new.record.clone());
        let directory = Arc::new(Directory(Mutex::new(Ok(Some(true))), AtomicUsize::new(0)));
        let life = Duration::from_millis(200);
        let keys = keys(&store, life).with_accounts(directory.clone());
        for _ in 0..5 {
            keys.check(&new.key).await.unwrap();
        }
        assert_eq!(directory.1.load(Ordering::SeqCst), 1, "asked once per read");
        // Disabled (or deleted): still taken within the life, refused after it, as a revoked key is.
        *directory.0.lock().unwrap() = Ok(Some(false));
        keys.check(&new.key).await.unwrap();
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        let refused = keys.check(&new.key).await.unwrap_err();
        assert_eq!(refused.status(), axum::http::StatusCode::UNAUTHORIZED);
        // Enabled again: the key works again after the life.
        *directory.0.lock().unwrap() = Ok(Some(true));
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        keys.check(&new.key).await.unwrap();
        // Not the directory's person (a service account): the key works.
        *directory.0.lock().unwrap() = Ok(None);
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        keys.check(&new.key).await.unwrap();
        // The directory out of reach: a 503 to try again, as for the table.
        *directory.0.lock().unwrap() = Err(());
        tokio::time::sleep(life + Duration::from_millis(20)).await;
        let down = keys.check(&new.key).await.unwrap_err();
        assert_eq!(down.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(down.retry_after().is_some());
    }

    /// A store whose writes of owners fail: the record is tried again at the next sign-in.
    #[tokio::test]
    async fn a_record_that_failed_is_tried_again_at_the_next_sign_in() {
        #[derive(Default)]
        struct Failing {
            inner: Counting,
        }
        impl ApiKeyStore for Failing {
            fn create<'a>(
                &'a self,
                key: &'a ApiKeyRecord,
                max: usize,
                now: i64,
            ) -> ApiKeyFuture<'a, Result<(), ApiKeyRefusal>> {
                self.inner.create(key, max, now)
            }
            fn find<'a>(&'a self, hash: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
                self.inner.find(hash)
            }
            fn list<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Vec<ApiKeyRecord>> {
                self.inner.list(owner)
            }
            fn revoke<'a>(
                &'a self,
                owner: &'a str,
                id: &'a str,
            ) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
                self.inner.revoke(owner, id)
            }
            fn touch<'a>(&'a self, key: &'a ApiKeyRecord, at: i64) -> ApiKeyFuture<'a, ()> {
                self.inner.touch(key, at)
            }
            fn record_owner<'a>(&'a self, _: &'a Caller) -> ApiKeyFuture<'a, ()> {
                self.inner.records.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Err(StoreError::Unavailable("down".into())) })
            }
            fn recorded_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<Caller>> {
                self.inner.recorded_owner(owner)
            }
            fn forget_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, ()> {
                self.inner.forget_owner(owner)
            }
        }
        let store = Arc::new(Failing::default());
        let keys = ApiKeys::new(
            store.clone(),
            ApiKeySettings::default(),
            Duration::from_secs(1),
        );
        keys.signed_in(&person(&["staff"]));
        settle().await;
        keys.signed_in(&person(&["staff"]));
        settle().await;
        assert_eq!(store.inner.records.load(Ordering::SeqCst), 2);
    }

    fn keys(store: &Arc<Counting>, cache_life: Duration) -> ApiKeys {
        ApiKeys::new(
            store.clone(),
            ApiKeySettings {
                cache_life,
                ..ApiKeySettings::default()
            },
            Duration::from_secs(1),
        )
    }

    fn now() -> i64 {
        OffsetDateTime::now_utc().unix_timestamp()
    }

    #[tokio::test]
    async fn a_key_is_read_once_per_cache_life_and_its_use_recorded_once() {
        let new = NewApiKey::generate(Caller::owner("jwt:i:alice"), "k", now(), None);
        let store = Arc::new(Counting::default());
        *store.key.lock().unwrap() = Some(new.record.clone());
        let keys = keys(&store, Duration::from_millis(300));
        for _ in 0..20 {
            assert_eq!(keys.check(&new.key).await.unwrap().owner, "jwt:i:alice");
        }
        // The use is written in a task of its own: given time to run.
        for _ in 0..100 {
            if store.touches.load(Ordering::SeqCst) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(store.finds.load(Ordering::SeqCst), 1, "one read");
        assert_eq!(
            store.touches.load(Ordering::SeqCst),
            1,
            "one write of its use"
        );
        // Revoked in the store: still taken within the life, refused after it.
        *store.key.lock().unwrap() = None;
        keys.check(&new.key).await.unwrap();
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(matches!(
            keys.check(&new.key).await,
            Err(ApiError::Unauthorized(_))
        ));
        assert_eq!(store.finds.load(Ordering::SeqCst), 2);
        // An unknown key is remembered as unknown for the life too.
        let unknown = NewApiKey::generate(Caller::owner("x"), "u", now(), None);
        for _ in 0..5 {
            assert!(keys.check(&unknown.key).await.is_err());
        }
        assert_eq!(store.finds.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_expired_key_is_refused_though_it_was_cached_alive_and_a_down_store_is_a_503() {
        let mut new = NewApiKey::generate(Caller::owner("jwt:i:alice"), "k", now(), None);
        new.record.expires = Some(now() + 1);
        let store = Arc::new(Counting::default());
        *store.key.lock().unwrap() = Some(new.record.clone());
        let keys = keys(&store, Duration::from_secs(60));
        keys.check(&new.key).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(matches!(
            keys.check(&new.key).await,
            Err(ApiError::Unauthorized(why)) if why.contains("expired")
        ));
        assert_eq!(store.finds.load(Ordering::SeqCst), 1);

        let down = Arc::new(Counting {
            down: true,
            ..Counting::default()
        });
        let refused = ApiKeys::new(down, ApiKeySettings::default(), Duration::from_secs(1))
            .check(&new.key)
            .await
            .unwrap_err();
        assert_eq!(
            refused.status(),
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        );
        assert!(refused.retry_after().is_some());
    }

    #[tokio::test]
    async fn made_up_keys_are_read_once_each_and_never_push_a_real_key_out() {
        let new = NewApiKey::generate(Caller::owner("jwt:i:alice"), "k", now(), None);
        let store = Arc::new(Counting::default());
        *store.key.lock().unwrap() = Some(new.record.clone());
        let keys = keys(&store, Duration::from_secs(60));
        keys.check(&new.key).await.unwrap();
        // More made-up keys than an instance remembers: each read once, the real key's check kept.
        let made_up: Vec<String> = (0..REMEMBERED_KEYS + 10)
            .map(|i| format!("cbk_{i:043}"))
            .collect();
        for key in &made_up {
            assert!(keys.check(key).await.is_err());
        }
        assert_eq!(store.finds.load(Ordering::SeqCst), 1 + made_up.len());
        keys.check(&new.key).await.unwrap();
        assert_eq!(
            store.finds.load(Ordering::SeqCst),
            1 + made_up.len(),
            "the real key is still remembered"
        );
        // The last made-up one is remembered as nothing: sent again, no read.
        assert!(keys.check(made_up.last().unwrap()).await.is_err());
        assert_eq!(store.finds.load(Ordering::SeqCst), 1 + made_up.len());
    }

    #[test]
    fn the_cache_life_is_read_and_checked() {
        let read = |v: &'static str| {
            ApiKeySettings::from_lookup(&move |name: &str| {
                (name == "API_KEY_CACHE_SECONDS").then(|| v.to_string())
            })
        };
        assert_eq!(read("").unwrap().cache_life, Duration::from_secs(60));
        assert_eq!(read("0").unwrap().cache_life, Duration::ZERO);
        assert_eq!(read(" 5 ").unwrap().cache_life, Duration::from_secs(5));
        for bad in ["-1", "3601", "soon"] {
            assert_eq!(read(bad).unwrap_err().name, "API_KEY_CACHE_SECONDS");
        }
    }

    #[test]
    fn keys_last_90_days_unless_the_operator_says_otherwise() {
        let read = |v: &'static str| {
            ApiKeySettings::from_lookup(&move |name: &str| {
                (name == "API_KEY_DEFAULT_DAYS").then(|| v.to_string())
            })
        };
        assert_eq!(read("").unwrap().default_days, Some(90));
        assert_eq!(ApiKeySettings::default().default_days, Some(90));
        assert_eq!(read("30").unwrap().default_days, Some(30));
        assert_eq!(read("0").unwrap().default_days, None, "0: until revoked");
        assert_eq!(read("3650").unwrap().default_days, Some(3650));
        for bad in ["-1", "3651", "a month"] {
            assert_eq!(read(bad).unwrap_err().name, "API_KEY_DEFAULT_DAYS");
        }
    }
}
