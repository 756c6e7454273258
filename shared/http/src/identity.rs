//! Who is calling, in one place for every function: the IAM caller of a function URL, the `sub` of a verified
//! Bearer JWT, or one local user when authentication is off for local runs.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use lambda_http::RequestExt;
use lambda_http::request::RequestContext;

use serde::Deserialize;

use chat_core::Caller;

use crate::{ApiError, ConfigError};

/// How callers prove who they are.
pub enum Auth {
    /// The function URL's `AWS_IAM` auth: the caller's ARN from the request context.
    Iam,
    /// `Authorization: Bearer <JWT>` verified against configured keys.
    Jwt(JwtVerifier),
    /// Everyone is the one configured user (local runs only).
    None { user: String },
}

/// Where the JWT signing keys come from.
pub enum KeySource {
    Url(String),
    File(String),
}

/// Verifies tokens: signature by a key of the JWKS, `iss`, `aud`, `exp`, and a `sub`.
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    /// The claim holding the caller's groups (`JWT_GROUPS_CLAIM`, default `groups`).
    groups_claim: String,
    source: KeySource,
    keys: RwLock<Option<(JwkSet, Instant)>>,
    http: reqwest::Client,
}

/// How long fetched keys are trusted before they are fetched again; an unknown key id refetches sooner.
const KEYS_FRESH_FOR: Duration = Duration::from_secs(600);
const REFETCH_AFTER: Duration = Duration::from_secs(30);
/// How far the issuer's clock may be from ours when `exp` and `nbf` are checked.
const CLOCK_SKEW_SECONDS: u64 = 60;

/// The longest owner id kept as it is. Owner ids go into partition keys (`CHAT#{chatId}#{owner}`,
/// `LIST#{mode}#{owner}`), which DynamoDB holds to 2,048 bytes. Every id a conforming issuer or AWS makes fits
/// (an OpenID Connect `sub` is at most 255 characters, an IAM ARN with its path well under 1 KB), so the chats of
/// existing users stay where they are; a longer id is replaced by its digest (see [`owner_id`]).
pub const MAX_OWNER_ID_BYTES: usize = 1024;

const NO_IAM_CALLER: &str =
    "the request carries no IAM caller (is the function URL's AuthType AWS_IAM?)";

#[derive(Deserialize)]
struct Claims {
    sub: String,
    /// Every other claim: the object id and the groups claim are read from here.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// What a verified token says of its holder.
struct Verified {
    sub: String,
    /// The `oid` claim (Microsoft Entra's object id), else `sub`: what documents' `oids` name.
    oid: String,
    groups: Vec<String>,
}

impl Auth {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|name: &str| std::env::var(name).ok())
    }

    /// From `AUTH_MODE` (`iam`, the default; `jwt`; `none`) and the variables each mode needs.
    pub fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let required = |name: &'static str| {
            get(name).ok_or(ConfigError {
                name,
                reason: "required when AUTH_MODE is jwt".into(),
            })
        };
        match get("AUTH_MODE")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("iam") => Ok(Auth::Iam),
            Some("none") => Ok(Auth::None {
                user: get("LOCAL_USER").unwrap_or_else(|| "local-user".into()),
            }),
            Some("jwt") => {
                let source = match (get("JWKS_URL"), get("JWKS_FILE")) {
                    (Some(url), _) => KeySource::Url(url),
                    (None, Some(file)) => KeySource::File(file),
                    (None, None) => {
                        return Err(ConfigError {
                            name: "JWKS_URL",
                            reason: "JWKS_URL or JWKS_FILE is required when AUTH_MODE is jwt"
                                .into(),
                        });
                    }
                };
                let issuer = required("JWT_ISSUER")?;
                if issuer.chars().any(char::is_control) {
                    return Err(ConfigError {
                        name: "JWT_ISSUER",
                        reason: "must not hold control characters".into(),
                    });
                }
                Ok(Auth::Jwt(JwtVerifier {
                    issuer,
                    audience: required("JWT_AUDIENCE")?,
                    groups_claim: get("JWT_GROUPS_CLAIM").unwrap_or_else(|| "groups".into()),
                    source,
                    keys: RwLock::new(None),
                    http: reqwest::Client::builder()
                        .timeout(Duration::from_secs(5))
                        .build()
                        .map_err(|e| ConfigError {
                            name: "JWKS_URL",
                            reason: format!("no HTTP client: {e}"),
                        })?,
                }))
            }
            Some(other) => Err(ConfigError {
                name: "AUTH_MODE",
                reason: format!("expected iam, jwt or none, got {other:?}"),
            }),
        }
    }

    /// Who calls, or 401: their owner id, and what documents' access lists name them by (their oid: the local
    /// user's name, the IAM caller's ARN, or the token's `oid`, else `sub`; and, for a token, its groups claim).
    pub async fn identify(&self, request: &impl CallerParts) -> Result<Caller, ApiError> {
        match self {
            Auth::None { user } => Ok(Caller {
                owner: owner_id("local", user),
                oid: Some(user.clone()),
                groups: Vec::new(),
            }),
            Auth::Iam => iam_caller(request)
                .map(|arn| Caller {
                    owner: owner_id("iam", &arn),
                    oid: Some(arn),
                    groups: Vec::new(),
                })
                .map_err(ApiError::Unauthorized),
            Auth::Jwt(verifier) => {
                let token = bearer(request).ok_or(ApiError::Unauthorized(
                    "no Authorization: Bearer token".into(),
                ))?;
                let verified = verifier
                    .verify(token)
                    .await
                    .map_err(ApiError::Unauthorized)?;
                Ok(Caller {
                    owner: owner_id("jwt", &format!("{}:{}", verifier.issuer, verified.sub)),
                    oid: Some(verified.oid),
                    groups: verified.groups,
                })
            }
        }
    }

    /// The caller's owner id, or 401. The id says how it was proven (`iam:`, `jwt:{issuer}:`, `local:`), so that
    /// users of different modes or issuers never share a history; see [`owner_id`] for its length.
    pub async fn caller(&self, request: &impl CallerParts) -> Result<String, ApiError> {
        Ok(self.identify(request).await?.owner)
    }
}

/// What identifying a caller reads of a request: its headers, and the Lambda request context (the function URL's
/// IAM caller) when Lambda's runtime handed it over. A whole request or its parts (as a handler holds them).
pub trait CallerParts {
    fn header_map(&self) -> &lambda_http::http::HeaderMap;
    fn lambda_context(&self) -> Option<&RequestContext>;
}

impl<B> CallerParts for lambda_http::http::Request<B> {
    fn header_map(&self) -> &lambda_http::http::HeaderMap {
        self.headers()
    }

    fn lambda_context(&self) -> Option<&RequestContext> {
        self.request_context_ref()
    }
}

impl CallerParts for lambda_http::http::request::Parts {
    fn header_map(&self) -> &lambda_http::http::HeaderMap {
        &self.headers
    }

    fn lambda_context(&self) -> Option<&RequestContext> {
        self.request_context_ref()
    }
}

/// The owner id of a caller that `scheme` (`jwt`, `iam`, `local`) proved to be `name`: `{scheme}:{name}` while that
/// is at most [`MAX_OWNER_ID_BYTES`] long, else `{scheme}-sha256:{hex of SHA-256 of {scheme}:{name}}`. The digest
/// keeps keys small whatever an issuer puts in `sub`; it is stable, distinct names give distinct digests, and a
/// digest form never equals a plain one (`jwt-sha256:` is not `jwt:`), so no two callers share a history.
pub fn owner_id(scheme: &str, name: &str) -> String {
    let plain = format!("{scheme}:{name}");
    if plain.len() <= MAX_OWNER_ID_BYTES {
        return plain;
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, plain.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{scheme}-sha256:{hex}")
}

/// `value`, what names a caller, if it can: an empty name would put every caller that has one into one shared
/// history, and control characters have no place in a name (nor in the logs and keys it reaches).
fn usable_name<'a>(what: &str, value: &'a str) -> Result<&'a str, String> {
    if value.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("{what} holds control characters"));
    }
    Ok(value)
}

fn iam_caller(request: &impl CallerParts) -> Result<String, String> {
    let Some(RequestContext::ApiGatewayV2(ctx)) = request.lambda_context() else {
        return Err(NO_IAM_CALLER.into());
    };
    let Some(iam) = ctx.authorizer.as_ref().and_then(|a| a.iam.as_ref()) else {
        return Err(NO_IAM_CALLER.into());
    };
    // Callers with Cognito identity-pool credentials all assume one role: their identity id tells them apart.
    // A name that is present but empty is refused, never passed over for a broader one (the shared role's ARN).
    if let Some(id) = iam
        .cognito_identity
        .as_ref()
        .and_then(|c| c.identity_id.as_deref())
    {
        return usable_name("the caller's Cognito identity id", id)
            .map(|id| format!("cognito:{id}"));
    }
    match (iam.user_arn.as_deref(), iam.caller_id.as_deref()) {
        (Some(arn), _) => usable_name("the caller's userArn", arn).map(str::to_string),
        (None, Some(id)) => usable_name("the caller's callerId", id).map(str::to_string),
        (None, None) => Err(NO_IAM_CALLER.into()),
    }
}

fn bearer(request: &impl CallerParts) -> Option<&str> {
    let value = request.header_map().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl JwtVerifier {
    /// The token's `sub`, when the token is one to accept.
    async fn verify(&self, token: &str) -> Result<Verified, String> {
        let header = decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        // RFC 7515 §4.1.11: a recipient must refuse a token whose `crit` names an extension it does not understand,
        // and this service understands none (an empty list is malformed: producers must not send one).
        if let Some(crit) = &header.crit {
            return Err(format!(
                "the token's header marks {crit:?} critical, and no extension is understood here"
            ));
        }
        // Only public-key signatures: a shared-secret algorithm would let anyone holding the JWKS sign tokens.
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
                | Algorithm::EdDSA
        ) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let jwk = self.key(header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("unusable key: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // A token is good from `nbf` (when it has one) until `exp`, give or take the clocks' skew.
        validation.validate_nbf = true;
        validation.leeway = CLOCK_SKEW_SECONDS;
        let data = decode::<Claims>(token, &key, &validation)
            .map_err(|e| format!("invalid token: {e}"))?;
        usable_name("the token's sub", &data.claims.sub)?;
        let claims = data.claims;
        let oid = match claims.other.get("oid").and_then(|v| v.as_str()) {
            Some(oid) if usable_name("the token's oid", oid).is_ok() => oid.to_string(),
            _ => claims.sub.clone(),
        };
        // A groups claim is a list of names (or one name); anything else names no group.
        let groups = match claims.other.get(&self.groups_claim) {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .filter_map(|g| g.as_str())
                .filter(|g| usable_name("a group", g).is_ok())
                .map(str::to_string)
                .collect(),
            Some(serde_json::Value::String(one)) if usable_name("a group", one).is_ok() => {
                vec![one.clone()]
            }
            _ => Vec::new(),
        };
        Ok(Verified {
            sub: claims.sub,
            oid,
            groups,
        })
    }

    /// The key `kid` names (or the only key, when the token names none), fetching the set when needed.
    async fn key(&self, kid: Option<&str>) -> Result<Jwk, String> {
        let find = |set: &JwkSet| match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let cached = self.keys.read().unwrap().clone();
        if let Some((set, fetched)) = &cached {
            let age = fetched.elapsed();
            if age < KEYS_FRESH_FOR {
                if let Some(k) = find(set) {
                    return Ok(k);
                }
                if age < REFETCH_AFTER {
                    return Err("no key matches the token".into());
                }
            }
        }
        let set = self.fetch().await?;
        let found = find(&set);
        *self.keys.write().unwrap() = Some((set, Instant::now()));
        found.ok_or_else(|| "no key matches the token".into())
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let text = match &self.source {
            KeySource::File(path) => {
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?
            }
            KeySource::Url(url) => self
                .http
                .get(url)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map_err(|e| format!("cannot fetch the signing keys: {e}"))?
                .text()
                .await
                .map_err(|e| format!("cannot fetch the signing keys: {e}"))?,
        };
        serde_json::from_str(&text).map_err(|e| format!("the signing keys are not a JWKS: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::Request;

    fn event(authorizer: Option<serde_json::Value>) -> Request {
        let mut event = serde_json::json!({
            "version": "2.0", "routeKey": "$default", "rawPath": "/chat", "rawQueryString": "",
            "headers": {"content-type": "application/json"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "abc", "domainName": "abc.lambda-url.us-east-1.on.aws",
                "domainPrefix": "abc", "requestId": "r", "routeKey": "$default", "stage": "$default",
                "time": "22/Nov/2026:06:00:00 +0000", "timeEpoch": 1795154400000_i64,
                "http": {"method": "POST", "path": "/chat", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.10", "userAgent": "t"}
            },
            "body": "{}", "isBase64Encoded": false
        });
        if let Some(a) = authorizer {
            event["requestContext"]["authorizer"] = a;
        }
        lambda_http::request::from_str(&event.to_string()).expect("a function URL event")
    }

    #[tokio::test]
    async fn the_iam_caller_comes_from_the_function_url_request_context() {
        let request = event(Some(serde_json::json!({"iam": {
            "accessKey": "AKIA", "accountId": "123456789012", "callerId": "AIDA",
            "userArn": "arn:aws:iam::123456789012:user/alice", "userId": "AIDA"
        }})));
        assert_eq!(
            Auth::Iam.caller(&request).await.unwrap(),
            "iam:arn:aws:iam::123456789012:user/alice"
        );
        let cognito = event(Some(serde_json::json!({"iam": {
            "accountId": "123456789012", "callerId": "AROA:CognitoIdentityCredentials",
            "userArn": "arn:aws:sts::123456789012:assumed-role/Auth/CognitoIdentityCredentials",
            "cognitoIdentity": {"amr": ["authenticated"], "identityId": "us-east-1:abc", "identityPoolId": "us-east-1:pool"}
        }})));
        assert_eq!(
            Auth::Iam.caller(&cognito).await.unwrap(),
            "iam:cognito:us-east-1:abc"
        );
        let anonymous = event(None);
        assert!(matches!(
            Auth::Iam.caller(&anonymous).await,
            Err(ApiError::Unauthorized(_))
        ));
    }

    #[tokio::test]
    async fn auth_mode_is_read_and_checked() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            Auth::from_lookup(&move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert!(matches!(with(&[]), Ok(Auth::Iam)));
        assert!(
            matches!(with(&[("AUTH_MODE", "none")]), Ok(Auth::None { user }) if user == "local-user")
        );
        assert_eq!(
            with(&[("AUTH_MODE", "jwt")]).err().unwrap().name,
            "JWKS_URL"
        );
        assert_eq!(
            with(&[("AUTH_MODE", "jwt"), ("JWKS_URL", "https://x")])
                .err()
                .unwrap()
                .name,
            "JWT_ISSUER"
        );
        assert_eq!(
            with(&[("AUTH_MODE", "magic")]).err().unwrap().name,
            "AUTH_MODE"
        );
        let request = event(None);
        let local = with(&[("AUTH_MODE", "none"), ("LOCAL_USER", "dev")]).unwrap();
        assert_eq!(local.caller(&request).await.unwrap(), "local:dev");
        assert_eq!(
            with(&[
                ("AUTH_MODE", "jwt"),
                ("JWKS_URL", "https://x"),
                ("JWT_AUDIENCE", "a"),
                ("JWT_ISSUER", "https://issuer\n.test"),
            ])
            .err()
            .unwrap()
            .name,
            "JWT_ISSUER"
        );
    }

    #[test]
    fn long_owner_ids_are_replaced_by_a_stable_digest() {
        let at_bound = "a".repeat(MAX_OWNER_ID_BYTES - "jwt:".len());
        assert_eq!(owner_id("jwt", &at_bound), format!("jwt:{at_bound}"));
        assert_eq!(owner_id("iam", "arn:x"), "iam:arn:x");

        let long = format!("https://issuer.test:{}", "s".repeat(3000));
        let hashed = owner_id("jwt", &long);
        assert!(hashed.starts_with("jwt-sha256:"), "{hashed}");
        assert_eq!(hashed.len(), "jwt-sha256:".len() + 64);
        assert!(
            hashed["jwt-sha256:".len()..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit())
        );
        assert_eq!(
            owner_id("jwt", &long),
            hashed,
            "the same caller, the same id"
        );
        // One byte over the bound is hashed; names that differ only at their end, or only in scheme, stay apart.
        let over = format!("{at_bound}b");
        assert!(owner_id("jwt", &over).starts_with("jwt-sha256:"));
        let mut other = long.clone();
        other.pop();
        other.push('t');
        assert_ne!(owner_id("jwt", &other), hashed);
        assert_ne!(owner_id("local", &long), hashed);
        assert!(owner_id("local", &long).starts_with("local-sha256:"));
    }

    #[tokio::test]
    async fn an_iam_caller_without_a_usable_name_is_refused() {
        let iam = |fields: serde_json::Value| event(Some(serde_json::json!({ "iam": fields })));
        for request in [
            iam(
                serde_json::json!({"accountId": "123456789012", "callerId": "AIDA", "userArn": ""}),
            ),
            iam(
                serde_json::json!({"accountId": "123456789012", "callerId": "AIDA", "userArn": "  "}),
            ),
            iam(serde_json::json!({"accountId": "123456789012", "callerId": ""})),
            iam(serde_json::json!({"accountId": "123456789012"})),
            // An empty identity id is refused, not exchanged for the ARN of the role every such caller shares.
            iam(serde_json::json!({
                "accountId": "123456789012", "callerId": "AROA:CognitoIdentityCredentials",
                "userArn": "arn:aws:sts::123456789012:assumed-role/Auth/CognitoIdentityCredentials",
                "cognitoIdentity": {"amr": ["authenticated"], "identityId": "", "identityPoolId": "p"}
            })),
            iam(
                serde_json::json!({"accountId": "123456789012", "userArn": "arn:aws:iam::1:user/a\u{7}b"}),
            ),
        ] {
            assert!(matches!(
                Auth::Iam.caller(&request).await,
                Err(ApiError::Unauthorized(_))
            ));
        }
        // Without an ARN, the caller id names the caller.
        let by_id =
            iam(serde_json::json!({"accountId": "123456789012", "callerId": "AIDAEXAMPLE"}));
        assert_eq!(Auth::Iam.caller(&by_id).await.unwrap(), "iam:AIDAEXAMPLE");
        // A long ARN is hashed like any long id.
        let path = "p/".repeat(600);
        let long = iam(serde_json::json!({
            "accountId": "123456789012", "userArn": format!("arn:aws:iam::123456789012:user/{path}alice")
        }));
        assert!(
            Auth::Iam
                .caller(&long)
                .await
                .unwrap()
                .starts_with("iam-sha256:")
        );
    }

    mod jwt {
        use super::*;
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        use jsonwebtoken::{EncodingKey, Header, encode};

        const ISSUER: &str = "https://issuer.test";
        const AUDIENCE: &str = "chat-backend";

        /// A verifier holding the public half of a key this test makes, and that key.
        fn verifier() -> (Auth, EncodingKey) {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(
                &ECDSA_P256_SHA256_FIXED_SIGNING,
                &SystemRandom::new(),
            )
            .unwrap();
            let key = EncodingKey::from_ec_der(pkcs8.as_ref());
            let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
            let auth = Auth::Jwt(JwtVerifier {
                issuer: ISSUER.into(),
                audience: AUDIENCE.into(),
                groups_claim: "groups".into(),
                source: KeySource::File("/nonexistent/jwks.json".into()),
                keys: RwLock::new(Some((JwkSet { keys: vec![jwk] }, Instant::now()))),
                http: reqwest::Client::new(),
            });
            (auth, key)
        }

        fn now() -> i64 {
            time::OffsetDateTime::now_utc().unix_timestamp()
        }

        fn token(key: &EncodingKey, header: &Header, claims: serde_json::Value) -> String {
            let mut all = serde_json::json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 3600, "iat": now()});
            all.as_object_mut()
                .unwrap()
                .extend(claims.as_object().unwrap().clone());
            encode(header, &all, key).unwrap()
        }

        async fn caller(auth: &Auth, token: &str) -> Result<String, ApiError> {
            let mut request = event(None);
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
            auth.caller(&request).await
        }

        #[tokio::test]
        async fn a_good_token_names_its_subject() {
            let (auth, key) = verifier();
            let es256 = Header::new(Algorithm::ES256);
            let good = token(&key, &es256, serde_json::json!({"sub": "alice"}));
            assert_eq!(
                caller(&auth, &good).await.unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            // A token valid from a moment ago, or from a few seconds ahead (the issuer's clock runs fast), is good.
            for nbf in [now() - 5, now() + 10] {
                let t = token(
                    &key,
                    &es256,
                    serde_json::json!({"sub": "alice", "nbf": nbf}),
                );
                assert_eq!(
                    caller(&auth, &t).await.unwrap(),
                    format!("jwt:{ISSUER}:alice")
                );
            }
        }

        #[tokio::test]
        async fn a_token_names_its_oid_and_groups_for_documents_access() {
            let (auth, key) = verifier();
            let es256 = Header::new(Algorithm::ES256);
            let identify = |t: String| {
                let mut request = event(None);
                request
                    .headers_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
                let auth = &auth;
                async move { auth.identify(&request).await.unwrap() }
            };
            let full = identify(token(
                &key,
                &es256,
                serde_json::json!({"sub": "s-1", "oid": "alice-oid", "groups": ["eng", 7, "hr"]}),
            ))
            .await;
            assert_eq!(full.oid.as_deref(), Some("alice-oid"));
            assert_eq!(full.groups, ["eng", "hr"]);
            assert_eq!(full.owner, format!("jwt:{ISSUER}:s-1"));
            // Without an oid claim the subject is the oid; a single group may be a string.
            let bare = identify(token(
                &key,
                &es256,
                serde_json::json!({"sub": "bob", "groups": "ops"}),
            ))
            .await;
            assert_eq!(bare.oid.as_deref(), Some("bob"));
            assert_eq!(bare.groups, ["ops"]);
        }

        #[tokio::test]
        async fn a_long_subject_is_hashed_stably_and_apart() {
            let (auth, key) = verifier();
            let es256 = Header::new(Algorithm::ES256);
            let sub = "x".repeat(3000);
            let first = caller(&auth, &token(&key, &es256, serde_json::json!({"sub": sub})))
                .await
                .unwrap();
            assert!(first.starts_with("jwt-sha256:"), "{first}");
            assert!(first.len() <= MAX_OWNER_ID_BYTES);
            let again = caller(&auth, &token(&key, &es256, serde_json::json!({"sub": sub})))
                .await
                .unwrap();
            assert_eq!(again, first);
            let other = format!("{}y", &sub[1..]);
            let second = caller(
                &auth,
                &token(&key, &es256, serde_json::json!({"sub": other})),
            )
            .await
            .unwrap();
            assert_ne!(second, first);
        }

        #[tokio::test]
        async fn tokens_to_refuse_are_401() {
            let (auth, key) = verifier();
            let es256 = Header::new(Algorithm::ES256);
            let mut critical = Header::new(Algorithm::ES256);
            critical.crit = Some(vec!["http://example.com/unknown-extension".into()]);
            critical
                .extras
                .insert("http://example.com/unknown-extension", true);
            let mut empty_crit = Header::new(Algorithm::ES256);
            empty_crit.crit = Some(vec![]);
            let day = 86_400;
            let refused = [
                (
                    "empty sub",
                    token(&key, &es256, serde_json::json!({"sub": ""})),
                ),
                (
                    "blank sub",
                    token(&key, &es256, serde_json::json!({"sub": "   "})),
                ),
                (
                    "control characters",
                    token(&key, &es256, serde_json::json!({"sub": "al\nice"})),
                ),
                (
                    "nbf a day ahead",
                    token(
                        &key,
                        &es256,
                        serde_json::json!({"sub": "alice", "nbf": now() + day}),
                    ),
                ),
                (
                    "nbf past the skew",
                    token(
                        &key,
                        &es256,
                        serde_json::json!({"sub": "alice", "nbf": now() + 120}),
                    ),
                ),
                (
                    "crit",
                    token(&key, &critical, serde_json::json!({"sub": "alice"})),
                ),
                (
                    "empty crit",
                    token(&key, &empty_crit, serde_json::json!({"sub": "alice"})),
                ),
            ];
            for (what, t) in refused {
                assert!(
                    matches!(caller(&auth, &t).await, Err(ApiError::Unauthorized(_))),
                    "{what}"
                );
            }
        }
    }
}
