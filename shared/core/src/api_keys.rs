//! API keys, so that a program (an OpenAI client, a script) can act as the person who made the key: what a key is,
//! how it is made and hashed, and the port that keeps keys ([`ApiKeyStore`]), which DynamoDB and the tests' memory
//! implement.
//!
//! A key is `cbk_` and 43 characters of base64url: 32 random bytes from the operating system's generator. Only its
//! SHA-256 is kept. A plain hash (no salt, no slow KDF) is right here: a key has 256 bits of entropy, so no guess or
//! table finds one from its hash, and the hash must be computable in one step so that a key is checked with one
//! read by its hash. The prefix tells a key from a JWT (which starts with `ey`) before anything is parsed.
//!
//! A key acts as its owner as they are now: each sign-in of a person records their current oid and groups
//! ([`ApiKeyStore::record_owner`]), and a key's check acts with what was recorded last. The key also keeps a
//! snapshot of its owner's [`Caller`] (owner id, oid, groups) as it was when it was made, which it acts with while
//! nothing is recorded for its owner: a service account made by the operator's command never signs in, and a
//! person's record is dropped with their keys ([`revoke_owner`]). Where the people are an identity provider's that
//! can be asked ([`AccountDirectory`]: the template's Cognito user pool), a key whose owner is disabled or gone
//! there is refused.

use std::future::Future;
use std::pin::Pin;

use base64::Engine;

use crate::{Caller, StoreError};

/// How every key starts: what tells a key from a JWT.
pub const API_KEY_PREFIX: &str = "cbk_";

/// The most keys one owner may hold (expired keys not counted): each is a way into their account, and each costs an
/// item in the table.
pub const MAX_KEYS_PER_OWNER: usize = 20;

/// The longest name a key may be given, in characters.
pub const MAX_KEY_NAME_CHARS: usize = 100;

/// The longest life a key may be given, in days (ten years).
pub const MAX_KEY_DAYS: u32 = 3650;

/// How many random bytes a key carries.
const KEY_BYTES: usize = 32;

/// Whether `token` is shaped like a key (it may still be unknown): the prefix, and nothing a header cannot hold.
pub fn is_api_key(token: &str) -> bool {
    token.starts_with(API_KEY_PREFIX)
        && token.len() > API_KEY_PREFIX.len()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The hash a key is kept and found by: SHA-256, in lowercase hex. See the module's documentation for why a plain
/// hash is right.
pub fn api_key_hash(key: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A key kept: everything but the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    /// Its id (32 hex characters): what the owner lists and revokes it by. Not derived from the key.
    pub id: String,
    /// [`api_key_hash`] of the key: what it is found by.
    pub hash: String,
    /// Who it acts as: the owner's caller as it was when the key was made (`caller.owner` is the owner).
    pub caller: Caller,
    pub name: String,
    /// What the owner recognises it by: the prefix and the key's last four characters (`cbk_…x7Qa`).
    pub hint: String,
    /// Unix seconds.
    pub created: i64,
    /// Unix seconds of its last use, as recorded (at most once per cache life of an instance).
    pub last_used: Option<i64>,
    /// Unix seconds after which it no longer works; `None`: it does until revoked.
    pub expires: Option<i64>,
}

impl ApiKeyRecord {
    /// Whether it no longer works at `now` (unix seconds).
    pub fn expired(&self, now: i64) -> bool {
        self.expires.is_some_and(|at| at <= now)
    }
}

/// A key just made: the key itself (shown once, then never again) and its record.
pub struct NewApiKey {
    pub key: String,
    pub record: ApiKeyRecord,
}

impl NewApiKey {
    /// A new key for `caller`, named `name`, made at `now` (unix seconds), expiring after `expires_in_days` when
    /// given.
    pub fn generate(caller: Caller, name: &str, now: i64, expires_in_days: Option<u32>) -> Self {
        let mut random = [0u8; KEY_BYTES];
        aws_lc_rs::rand::fill(&mut random).expect("the operating system's random generator works");
        let key = format!(
            "{API_KEY_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
        );
        let hint = format!("{API_KEY_PREFIX}…{}", &key[key.len() - 4..]);
        let record = ApiKeyRecord {
            id: uuid::Uuid::new_v4().simple().to_string(),
            hash: api_key_hash(&key),
            caller,
            name: name.to_string(),
            hint,
            created: now,
            last_used: None,
            expires: expires_in_days.map(|days| now + i64::from(days) * 86_400),
        };
        Self { key, record }
    }
}

/// Why a key was not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiKeyRefusal {
    #[error("the owner holds {max} keys already: revoke one first")]
    TooMany { max: usize },
}

/// What every call of an [`ApiKeyStore`] gives: its answer, or the store's failure.
pub type ApiKeyFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The keys, per owner. Every method is one bounded call (or a few) of the store; none keeps the key itself.
pub trait ApiKeyStore: Send + Sync {
    /// Stores `key`, unless its owner holds `max` keys that have not expired at `now` already.
    fn create<'a>(
        &'a self,
        key: &'a ApiKeyRecord,
        max: usize,
        now: i64,
    ) -> ApiKeyFuture<'a, Result<(), ApiKeyRefusal>>;

    /// The key whose hash is `hash`, expired or not (its expiry is the caller's to check): one read.
    fn find<'a>(&'a self, hash: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>>;

    /// `owner`'s keys, oldest first, expired ones included until the table removes them.
    fn list<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Vec<ApiKeyRecord>>;

    /// Removes `owner`'s key `id` and answers what it was; `None` when `owner` holds no such key (another owner's
    /// id is not found, exactly like one that does not exist).
    fn revoke<'a>(&'a self, owner: &'a str, id: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>>;

    /// Records that `key` was used at `at` (unix seconds); a key revoked meanwhile stays revoked.
    fn touch<'a>(&'a self, key: &'a ApiKeyRecord, at: i64) -> ApiKeyFuture<'a, ()>;

    /// Records `caller` as its owner is now (their oid and groups at a sign-in), in place of what was recorded:
    /// what their keys act with from then on.
    fn record_owner<'a>(&'a self, caller: &'a Caller) -> ApiKeyFuture<'a, ()>;

    /// What was recorded last for `owner` by [`ApiKeyStore::record_owner`], if anything: one read.
    fn recorded_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<Caller>>;

    /// Drops what was recorded for `owner` (nothing recorded is no failure).
    fn forget_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, ()>;
}

/// The identity provider's own word on the people behind keys (the template's Cognito user pool): whether a person
/// may still act, asked when a key is read, so that a disabled or deleted person's keys stop with them.
pub trait AccountDirectory: Send + Sync {
    /// Whether `owner` may act: `Some(true)`; `Some(false)` when they are disabled or gone; `None` when `owner` is
    /// none of this directory's people (a service account, another issuer's), whom it does not judge. A directory
    /// out of reach is the store's failure (a 503, as for a table out of reach).
    fn active<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<bool>>;
}

impl ApiKeyRecord {
    /// This key as it acts: its owner as `recorded` says they are now, else (nothing recorded) as the key's
    /// snapshot says. The owner id is always the key's.
    pub fn acting_as(mut self, recorded: Option<Caller>) -> Self {
        if let Some(now) = recorded.filter(|c| c.owner == self.caller.owner) {
            self.caller.oid = now.oid;
            self.caller.groups = now.groups;
        }
        self
    }
}

/// Revokes every key of `owner` and drops what was recorded of them, so that none of their keys works once the
/// functions' caches forget it: the keys revoked, oldest first. Keys revoked one by one: a failure part way leaves
/// the rest listed, and running it again finishes the job.
pub async fn revoke_owner(
    store: &dyn ApiKeyStore,
    owner: &str,
) -> Result<Vec<ApiKeyRecord>, StoreError> {
    let mut revoked = Vec::new();
    for key in store.list(owner).await? {
        if let Some(key) = store.revoke(owner, &key.id).await? {
            revoked.push(key);
        }
    }
    store.forget_owner(owner).await?;
    Ok(revoked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_is_recognisable_random_and_kept_only_as_its_hash() {
        let a = NewApiKey::generate(Caller::owner("jwt:i:alice"), "laptop", 1_000, Some(2));
        let b = NewApiKey::generate(Caller::owner("jwt:i:alice"), "laptop", 1_000, None);
        assert!(is_api_key(&a.key), "{}", a.key);
        assert_eq!(a.key.len(), API_KEY_PREFIX.len() + 43);
        assert_ne!(a.key, b.key);
        assert_ne!(a.record.id, b.record.id);
        assert_eq!(a.record.hash, api_key_hash(&a.key));
        assert_eq!(a.record.hash.len(), 64);
        assert!(!a.record.hash.contains(&a.key[4..]));
        assert!(a.key.ends_with(a.record.hint.trim_start_matches("cbk_…")));
        assert_eq!(a.record.expires, Some(1_000 + 2 * 86_400));
        assert!(!a.record.expired(1_000 + 2 * 86_400 - 1));
        assert!(a.record.expired(1_000 + 2 * 86_400));
        assert!(!b.record.expired(i64::MAX));
        // A JWT is never taken for a key.
        assert!(!is_api_key("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.sig"));
        assert!(!is_api_key("cbk_"));
        assert!(!is_api_key("cbk_a b"));
    }
}
