//! API keys in place of a JWT (or, in a local run, of nobody), so that a program acts as the person who made the
//! key: a key is checked by one read of its hash in the key store ([`chat_core::ApiKeyStore`]), and what that read
//! found is kept for a short while per instance.
//!
//! The cache's life (`API_KEY_CACHE_SECONDS`, default 60) is how long a revoked key may still work on an instance
//! that checked it before the revoke (the instance that revokes it forgets it at once), and how often a key's last
//! use is recorded: at most once per life per key and instance, in a task of its own, bounded by the store's
//! timeout, whose failure is logged and never fails the request. An expired key is refused whatever the cache holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chat_core::{ApiKeyRecord, ApiKeyStore, Caller, ChatError, StoreError, api_key_hash};
use time::OffsetDateTime;

use crate::{ApiError, ConfigError};

/// How long a key's check is kept, unless `API_KEY_CACHE_SECONDS` says otherwise.
pub const DEFAULT_CACHE_SECONDS: u64 = 60;

/// The longest cache life an operator may set: a revoked key must stop working within a time a person waits for.
const MAX_CACHE_SECONDS: u64 = 3600;

/// How many keys' checks one instance keeps before it forgets them all (and reads each again once): a bound on
/// what callers sending made-up keys can make it hold.
const REMEMBERED_KEYS: usize = 10_000;

/// The settings of key checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiKeySettings {
    /// `API_KEY_CACHE_SECONDS`: how long a check is kept (0: every request reads the store).
    pub cache_life: Duration,
}

impl Default for ApiKeySettings {
    fn default() -> Self {
        Self {
            cache_life: Duration::from_secs(DEFAULT_CACHE_SECONDS),
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
        Ok(Self {
            cache_life: Duration::from_secs(seconds),
        })
    }
}

/// What an instance found for a key's hash, and when.
#[derive(Clone)]
struct Checked {
    key: Option<ApiKeyRecord>,
    read_at: Instant,
    /// When this instance last recorded the key's use.
    touched_at: Option<Instant>,
}

/// The key store and what this instance remembers of it. A clone shares both.
#[derive(Clone)]
pub struct ApiKeys {
    store: Arc<dyn ApiKeyStore>,
    cache_life: Duration,
    /// The bound of every call this makes of the store.
    timeout: Duration,
    checked: Arc<Mutex<HashMap<String, Checked>>>,
}

impl ApiKeys {
    /// Keys kept in `store`, checks kept per `settings`, every call of the store bounded by `timeout`.
    pub fn new(store: Arc<dyn ApiKeyStore>, settings: ApiKeySettings, timeout: Duration) -> Self {
        Self {
            store,
            cache_life: settings.cache_life,
            timeout,
            checked: Arc::default(),
        }
    }

    /// The store (the history function lists, makes and revokes keys in it).
    pub fn store(&self) -> &dyn ApiKeyStore {
        &*self.store
    }

    /// The bound of a call of the store.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Forgets what this instance found for `hash` (a key revoked here stops working here at once).
    pub fn forget(&self, hash: &str) {
        self.checked.lock().unwrap().remove(hash);
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
            .get(&hash)
            .filter(|c| now.duration_since(c.read_at) < self.cache_life)
            .map(|c| c.key.clone());
        let found = match kept {
            Some(found) => found,
            None => {
                let found = self.bounded(self.store.find(&hash)).await?;
                let mut checked = self.checked.lock().unwrap();
                if checked.len() >= REMEMBERED_KEYS && !checked.contains_key(&hash) {
                    checked.clear();
                }
                let touched_at = checked.get(&hash).and_then(|c| c.touched_at);
                checked.insert(
                    hash.clone(),
                    Checked {
                        key: found.clone(),
                        read_at: now,
                        touched_at,
                    },
                );
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

    /// Records the key's use when this instance has not within the cache's life: in a task of its own, bounded,
    /// its failure logged only.
    fn record_use(&self, hash: &str, key: &ApiKeyRecord, now: Instant, unix_now: i64) {
        {
            let mut checked = self.checked.lock().unwrap();
            let Some(entry) = checked.get_mut(hash) else {
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
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, store.touch(&key, unix_now)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, key = %key.id, "an API key's last use is not recorded")
                }
                Err(_) => {
                    tracing::warn!(key = %key.id, "an API key's last use is not recorded: no answer in time")
                }
            }
        });
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
        /// Every find fails, as a table out of reach.
        down: bool,
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
            let down = self.down;
            Box::pin(async move {
                if down {
                    Err(StoreError::Unavailable("down".into()))
                } else {
                    Ok(found)
                }
            })
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
    }

    fn keys(store: &Arc<Counting>, cache_life: Duration) -> ApiKeys {
        ApiKeys::new(
            store.clone(),
            ApiKeySettings { cache_life },
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
}
