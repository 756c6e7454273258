//! The issuer's signing keys (its JWKS), from a URL or a file: fetched one at a time, bounded in time and size, kept
//! for a while and a failure remembered, so that no caller can make the service hammer its issuer; each key read as
//! the one algorithm it verifies.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// Where the JWT signing keys come from.
#[derive(Clone)]
pub enum KeySource {
    Url(String),
    File(String),
}

/// The signature algorithms accepted: public-key ones only, since with a shared-secret algorithm anyone holding
/// the JWKS could sign tokens.
pub(super) const ACCEPTED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
/// The issuer's keys as a verifier holds them: where they come from, what was last fetched, and the one fetch at a
/// time. A clone shares what was fetched.
#[derive(Clone)]
pub(super) struct Keys {
    pub(super) source: KeySource,
    /// The keys last fetched and the last failure, read by every verification and written by the fetching task.
    pub(super) cache: Arc<Mutex<KeyCache>>,
    /// Held by the task that fetches, from before it starts until it has recorded what it found; the verifications
    /// that need a fetch meanwhile queue here and then read what it found.
    pub(super) fetching: Arc<tokio::sync::Mutex<()>>,
    pub(super) timing: KeyTiming,
    /// The process's one client (the composition root hands it over); the fetch's time is bounded where it runs
    /// (see `fetch_and_record`), by `KeyTiming::fetch_timeout`.
    pub(super) http: reqwest::Client,
}

/// How long what a fetch found is used.
#[derive(Clone, Copy)]
pub(super) struct KeyTiming {
    /// Fetched keys are used this long before they are fetched again.
    pub(super) fresh_for: Duration,
    /// A token naming a key the set does not hold fetches the set again, at most this often.
    pub(super) refetch_after: Duration,
    /// A failed fetch answers for this long (no fetch meanwhile).
    pub(super) failure_remembered_for: Duration,
    /// While fetches fail, the keys fetched last go on verifying until they are this old: a short outage of the
    /// issuer is not an outage of the service.
    pub(super) usable_for: Duration,
    /// How long a fetch may take, connecting and reading the JWKS whole ([`JWKS_TIMEOUT`]).
    pub(super) fetch_timeout: Duration,
}

impl Default for KeyTiming {
    fn default() -> Self {
        Self {
            fresh_for: Duration::from_secs(600),
            refetch_after: Duration::from_secs(30),
            failure_remembered_for: Duration::from_secs(30),
            usable_for: Duration::from_secs(3600),
            fetch_timeout: JWKS_TIMEOUT,
        }
    }
}

/// How long fetching the JWKS may take, connecting and reading it whole.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS read: an issuer's has a few keys (a few KiB); a larger answer is refused, read no further.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// A key of the JWKS that verifies signatures, with the one algorithm it verifies.
#[derive(Clone)]
pub(super) struct Key {
    pub(super) kid: Option<String>,
    pub(super) alg: Algorithm,
    pub(super) decoding: DecodingKey,
}

#[derive(Default)]
pub(super) struct KeyCache {
    pub(super) keys: Option<(Arc<[Key]>, Instant)>,
    /// Why the last fetch failed, and when, if it failed after the keys were fetched.
    pub(super) failure: Option<(String, Instant)>,
}

/// A JWKS, its keys unread.
#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<serde_json::Value>,
}

/// What the cache answers for a key id.
enum Lookup {
    Found(Key),
    Refused(String),
    Fetch,
}

impl Keys {
    pub(super) fn new(source: KeySource, http: reqwest::Client) -> Self {
        Self {
            source,
            cache: Arc::new(Mutex::new(KeyCache::default())),
            fetching: Arc::new(tokio::sync::Mutex::new(())),
            timing: KeyTiming::default(),
            http,
        }
    }

    /// The key `kid` names (or the only key, when the token names none), fetching the set when needed: one fetch at
    /// a time, which the others wait for and then use.
    pub(super) async fn key(&self, kid: Option<&str>) -> Result<Key, String> {
        if let Some(answer) = self.cached(kid) {
            return answer;
        }
        let turn = self.fetching.clone().lock_owned().await;
        // The fetch this waited for may have found the key, or failed: its answer stands.
        if let Some(answer) = self.cached(kid) {
            return answer;
        }
        // The fetch runs in a task that holds the turn and records its outcome: were this verification dropped
        // while it waits, the fetch goes on, and the verifications queued behind it read what it found.
        let fetch = tokio::spawn(Self::fetch_and_record(
            self.source.clone(),
            self.http.clone(),
            self.timing.fetch_timeout,
            self.cache.clone(),
            turn,
        ));
        match fetch.await {
            Ok(Ok(keys)) => find(&keys, kid)
                .cloned()
                .ok_or_else(|| NO_MATCHING_KEY.into()),
            Ok(Err(why)) => self.cached(kid).unwrap_or(Err(why)),
            // Only a panic in the fetch (or a runtime shutting down) ends up here; the turn is released either way.
            Err(e) => Err(format!("the fetch of the signing keys did not finish: {e}")),
        }
    }

    /// Fetches the keys and records them, or the failure, in `cache`, then gives `turn` back (by dropping it) so
    /// that the verifications waiting for this fetch read what it recorded.
    async fn fetch_and_record(
        source: KeySource,
        http: reqwest::Client,
        timeout: Duration,
        cache: Arc<Mutex<KeyCache>>,
        turn: tokio::sync::OwnedMutexGuard<()>,
    ) -> Result<Arc<[Key]>, String> {
        let outcome = Self::fetch(&source, &http, timeout).await;
        let mut recorded = cache.lock().unwrap();
        match &outcome {
            Ok(keys) => {
                recorded.keys = Some((keys.clone(), Instant::now()));
                recorded.failure = None;
            }
            Err(why) => {
                tracing::warn!(error = %why, "cannot fetch the JWT signing keys; tokens are checked against the last keys fetched, if any");
                recorded.failure = Some((why.clone(), Instant::now()));
            }
        }
        drop(recorded);
        drop(turn);
        outcome
    }

    /// What the cache answers for `kid`, or None when a fetch should answer.
    fn cached(&self, kid: Option<&str>) -> Option<Result<Key, String>> {
        match self.lookup(kid) {
            Lookup::Found(key) => Some(Ok(key)),
            Lookup::Refused(why) => Some(Err(why)),
            Lookup::Fetch => None,
        }
    }

    fn lookup(&self, kid: Option<&str>) -> Lookup {
        let cache = self.cache.lock().unwrap();
        let timing = &self.timing;
        let failed = cache
            .failure
            .as_ref()
            .filter(|(_, at)| at.elapsed() < timing.failure_remembered_for);
        if let Some((keys, fetched)) = &cache.keys {
            let age = fetched.elapsed();
            match find(keys, kid) {
                Some(key) if age < timing.fresh_for => return Lookup::Found(key.clone()),
                Some(key) if failed.is_some() && age < timing.usable_for => {
                    return Lookup::Found(key.clone());
                }
                Some(_) => {}
                None if age < timing.refetch_after => {
                    return Lookup::Refused(NO_MATCHING_KEY.into());
                }
                None => {}
            }
        }
        match failed {
            Some((why, _)) => Lookup::Refused(why.clone()),
            None => Lookup::Fetch,
        }
    }

    /// The keys of the JWKS that verify signatures (see [`signing_key`]); a set without any is a failed fetch. A
    /// download that takes longer than `timeout` is a failed fetch.
    async fn fetch(
        source: &KeySource,
        http: &reqwest::Client,
        timeout: Duration,
    ) -> Result<Arc<[Key]>, String> {
        let bytes = match source {
            KeySource::File(path) => {
                let mut bytes = Vec::new();
                std::fs::File::open(path)
                    .and_then(|f| f.take(MAX_JWKS_BYTES as u64 + 1).read_to_end(&mut bytes))
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                bytes
            }
            KeySource::Url(url) => tokio::time::timeout(timeout, Self::download(http, url))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
                .map_err(|e| format!("cannot fetch the signing keys from {url}: {e}"))?,
        };
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(format!(
                "the signing keys are over {MAX_JWKS_BYTES} bytes: refused"
            ));
        }
        // Each key on its own: one this library cannot read (a new key type) leaves the others usable.
        let set: RawJwks = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the signing keys are not a JWKS: {e}"))?;
        let keys: Vec<Key> = set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .filter_map(|jwk| signing_key(&jwk))
            .collect();
        if keys.is_empty() {
            return Err("the JWKS holds no key for the signatures accepted here".into());
        }
        Ok(keys.into())
    }

    /// The body at `url`, read in chunks and given up past [`MAX_JWKS_BYTES`] (the caller's timeout bounds the
    /// whole exchange).
    async fn download(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
        let too_large = || format!("the answer is over {MAX_JWKS_BYTES} bytes: refused");
        let mut response = http
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| e.to_string())?;
        if response
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

const NO_MATCHING_KEY: &str = "no key of the issuer matches the token";

/// The key `kid` names, or the only key when the token names none.
fn find<'a>(keys: &'a [Key], kid: Option<&str>) -> Option<&'a Key> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
        None if keys.len() == 1 => keys.first(),
        None => None,
    }
}

/// `jwk` as a key that verifies signatures, or None when it is not one: its `use` is not `sig` (or its `key_ops`
/// lack `verify`), or it verifies no algorithm accepted here. Its algorithm is its `alg`, else the one its type
/// implies: ES256 or ES384 by its curve, EdDSA for Ed25519, RS256 for RSA (what issuers that leave `alg` out of
/// their keys, such as Microsoft Entra ID, sign with).
pub(super) fn signing_key(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    if jwk
        .common
        .key_operations
        .as_ref()
        .is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
    {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(alg) => Algorithm::try_from(alg).ok()?,
        None => match &jwk.algorithm {
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => Algorithm::ES256,
                EllipticCurve::P384 => Algorithm::ES384,
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            _ => return None,
        },
    };
    if !ACCEPTED_ALGORITHMS.contains(&alg) {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        decoding,
    })
}
