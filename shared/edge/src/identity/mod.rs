//! Who is calling, in one place for every function: the IAM caller of a function URL, the `sub` of a verified
//! Bearer JWT, or one local user when authentication is off for local runs; and, in JWT mode and local runs, the
//! owner of an API key sent in place of a JWT.
//!
//! - [`iam`]: the function URL's IAM caller (or a Cognito identity);
//! - [`api_keys`]: an API key checked by a read of its hash and of its owner's last sign-in, kept briefly per
//!   instance;
//! - [`jwt`]: a Bearer token verified: its signature, issuer, audience, times and claims;
//! - [`jwks`]: the issuer's keys, fetched and kept so that no caller can turn the fetch against the service.

use chat_core::Caller;
use lambda_http::RequestExt;
use lambda_http::request::RequestContext;

use crate::{ApiError, ConfigError};

mod api_keys;
mod iam;
mod jwks;
mod jwt;

pub use api_keys::{ApiKeySettings, ApiKeys, DEFAULT_CACHE_SECONDS};
pub use jwks::KeySource;
pub use jwt::JwtVerifier;

/// How callers prove who they are. A clone shares its verifier's keys.
#[derive(Clone)]
pub enum Auth {
    /// The function URL's `AWS_IAM` auth: the caller's ARN from the request context.
    Iam,
    /// `Authorization: Bearer <JWT>` verified against configured keys.
    Jwt(Box<JwtVerifier>),
    /// Everyone is the one configured user (local runs only).
    None { user: String },
    /// A mode ([`Auth::Jwt`] or [`Auth::None`]) that also takes API keys: see [`Auth::with_api_keys`].
    Keyed(Box<Keyed>),
}

/// A mode and the API keys it takes besides.
#[derive(Clone)]
pub struct Keyed {
    mode: Auth,
    keys: ApiKeys,
}

/// How a caller was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// By an API key: a program acting for the key's owner.
    ApiKey,
    /// By the mode itself: a JWT, the function URL's IAM auth, or the local run's one user.
    Mode,
}

/// The longest owner id kept as it is. Owner ids go into partition keys (`CHAT#{chatId}#{owner}`,
/// `LIST#{mode}#{owner}`), which DynamoDB holds to 2,048 bytes. Every id a conforming issuer or AWS makes fits
/// (an OpenID Connect `sub` is at most 255 characters, an IAM ARN with its path well under 1 KB), so the chats of
/// existing users stay where they are; a longer id is replaced by its digest (see [`owner_id`]).
pub const MAX_OWNER_ID_BYTES: usize = 1024;

impl Auth {
    /// From the environment; in JWT mode the keys are fetched through `http` (the process's one client, built only
    /// then).
    pub fn from_env(http: impl FnOnce() -> reqwest::Client) -> Result<Self, ConfigError> {
        Self::from_lookup_with(&|name: &str| std::env::var(name).ok(), http)
    }

    /// From `lookup`, with a client of its own for the keys (tests).
    pub fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_lookup_with(lookup, reqwest::Client::new)
    }

    /// From `AUTH_MODE` (`iam`, the default; `jwt`; `none`) and the variables each mode needs; in JWT mode the keys
    /// are fetched through `http`.
    pub fn from_lookup_with(
        lookup: &impl Fn(&str) -> Option<String>,
        http: impl FnOnce() -> reqwest::Client,
    ) -> Result<Self, ConfigError> {
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
            Some("none") => {
                // On Lambda, `none` would make every caller of a URL one user, able to read every chat: only when
                // the operator says so as well.
                let on_lambda = get("AWS_LAMBDA_FUNCTION_NAME").is_some()
                    || get("AWS_LAMBDA_RUNTIME_API").is_some();
                let allowed = match get("ALLOW_ANONYMOUS").map(|v| v.trim().to_ascii_lowercase()) {
                    None => false,
                    Some(v) if v == "true" => true,
                    Some(v) if v == "false" => false,
                    Some(other) => {
                        return Err(ConfigError {
                            name: "ALLOW_ANONYMOUS",
                            reason: format!("expected true or false, got {other:?}"),
                        });
                    }
                };
                if on_lambda && !allowed {
                    return Err(ConfigError {
                        name: "AUTH_MODE",
                        reason: "none makes every caller one user; on Lambda it also needs \
                                 ALLOW_ANONYMOUS=true (use iam or jwt for a deployment)"
                            .into(),
                    });
                }
                Ok(Auth::None {
                    user: get("LOCAL_USER").unwrap_or_else(|| "local-user".into()),
                })
            }
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
                // Set, it always wins; else `oid` for Microsoft Entra ID, `sub` for any other issuer.
                let oid_claim = get("JWT_OID_CLAIM")
                    .map(|claim| claim.trim().to_string())
                    .unwrap_or_else(|| jwt::default_oid_claim(&issuer).to_string());
                Ok(Auth::Jwt(Box::new(JwtVerifier::new(
                    issuer,
                    required("JWT_AUDIENCE")?,
                    get("JWT_GROUPS_CLAIM").unwrap_or_else(|| "groups".into()),
                    oid_claim,
                    source,
                    http(),
                ))))
            }
            Some(other) => Err(ConfigError {
                name: "AUTH_MODE",
                reason: format!("expected iam, jwt or none, got {other:?}"),
            }),
        }
    }

    /// This mode, taking `keys` as well: in JWT mode a Bearer token that is an API key (`cbk_…`) acts as its owner,
    /// any other is verified as a JWT; in a local run (`none`) a request without a Bearer token is the local user as
    /// before, one with a Bearer token must carry a key this backend issued. In IAM mode keys are off (the function
    /// URL's IAM auth is the identity, and its `Authorization` header is a SigV4 signature): `self` is returned as
    /// it is.
    pub fn with_api_keys(self, keys: ApiKeys) -> Self {
        match self {
            Auth::Iam => Auth::Iam,
            Auth::Keyed(keyed) => Auth::Keyed(Box::new(Keyed {
                mode: keyed.mode,
                keys,
            })),
            mode => Auth::Keyed(Box::new(Keyed { mode, keys })),
        }
    }

    /// The API keys this mode takes, if any.
    pub fn api_keys(&self) -> Option<&ApiKeys> {
        match self {
            Auth::Keyed(keyed) => Some(&keyed.keys),
            _ => None,
        }
    }

    /// The mode's name, as `AUTH_MODE` spells it: `iam`, `jwt` or `none`.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Auth::Iam => "iam",
            Auth::Jwt(_) => "jwt",
            Auth::None { .. } => "none",
            Auth::Keyed(keyed) => keyed.mode.mode_name(),
        }
    }

    /// Who calls, or 401: their owner id, and what documents' access lists name them by (their oid: the local
    /// user's name, the IAM caller's ARN, or the token's `JWT_OID_CLAIM` claim; and, for a token, its groups claim). A
    /// key acts as its owner signed in last (as they were when it was made, if nothing is recorded).
    pub async fn identify(&self, request: &impl CallerParts) -> Result<Caller, ApiError> {
        Ok(self.identify_proven(request).await?.0)
    }

    /// Who calls, and how they were proven (by an API key or by the mode), or 401.
    pub async fn identify_proven(
        &self,
        request: &impl CallerParts,
    ) -> Result<(Caller, Proof), ApiError> {
        let Auth::Keyed(keyed) = self else {
            return Ok((self.identify_by_mode(request).await?, Proof::Mode));
        };
        match jwt::bearer(request) {
            Some(token) if chat_core::is_api_key(token) => {
                Ok((keyed.keys.check(token).await?, Proof::ApiKey))
            }
            Some(_) if matches!(keyed.mode, Auth::None { .. }) => Err(ApiError::Unauthorized(
                "a local run takes as a Bearer token only an API key it issued".into(),
            )),
            _ => {
                let caller = keyed.mode.identify_by_mode(request).await?;
                // A verified sign-in says what the person's keys act with now.
                if matches!(keyed.mode, Auth::Jwt(_)) {
                    keyed.keys.signed_in(&caller);
                }
                Ok((caller, Proof::Mode))
            }
        }
    }

    /// Who the mode itself says calls.
    async fn identify_by_mode(&self, request: &impl CallerParts) -> Result<Caller, ApiError> {
        match self {
            Auth::Keyed(keyed) => Box::pin(keyed.mode.identify_by_mode(request)).await,
            Auth::None { user } => Ok(Caller {
                owner: owner_id("local", user),
                oid: Some(user.clone()),
                groups: Vec::new(),
            }),
            Auth::Iam => iam::iam_caller(request)
                .map(|arn| Caller {
                    owner: owner_id("iam", &arn),
                    oid: Some(arn),
                    groups: Vec::new(),
                })
                .map_err(ApiError::Unauthorized),
            Auth::Jwt(verifier) => {
                let token = jwt::bearer(request).ok_or(ApiError::Unauthorized(
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use jsonwebtoken::Algorithm;
    use jsonwebtoken::jwk::Jwk;

    use super::jwks::*;
    use super::jwt::*;
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
        // On Lambda, no anonymous callers unless the operator says so too.
        for lambda in ["AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_RUNTIME_API"] {
            let refused = Auth::from_lookup(&|k: &str| match k {
                "AUTH_MODE" => Some("none".into()),
                k if k == lambda => Some("chat".into()),
                _ => None,
            })
            .err()
            .unwrap();
            assert_eq!(refused.name, "AUTH_MODE", "{lambda}");
            assert!(refused.reason.contains("ALLOW_ANONYMOUS=true"), "{refused}");
        }
        assert_eq!(
            with(&[
                ("AUTH_MODE", "none"),
                ("AWS_LAMBDA_FUNCTION_NAME", "chat"),
                ("ALLOW_ANONYMOUS", "false"),
            ])
            .err()
            .unwrap()
            .name,
            "AUTH_MODE"
        );
        assert!(matches!(
            with(&[
                ("AUTH_MODE", "none"),
                ("AWS_LAMBDA_FUNCTION_NAME", "chat"),
                ("ALLOW_ANONYMOUS", "TRUE"),
            ]),
            Ok(Auth::None { .. })
        ));
        assert_eq!(
            with(&[("AUTH_MODE", "none"), ("ALLOW_ANONYMOUS", "yes")])
                .err()
                .unwrap()
                .name,
            "ALLOW_ANONYMOUS"
        );
        // Lambda's variables do not matter to the other modes.
        assert!(matches!(
            with(&[
                ("AUTH_MODE", "iam"),
                ("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
            ]),
            Ok(Auth::Iam)
        ));
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
            verifier_naming_by("sub")
        }

        /// [`verifier`], whose oid claim (`JWT_OID_CLAIM`) is `oid_claim`.
        fn verifier_naming_by(oid_claim: &str) -> (Auth, EncodingKey) {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(
                &ECDSA_P256_SHA256_FIXED_SIGNING,
                &SystemRandom::new(),
            )
            .unwrap();
            let key = EncodingKey::from_ec_der(pkcs8.as_ref());
            let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
            let verifier = JwtVerifier::new(
                ISSUER.into(),
                AUDIENCE.into(),
                "groups".into(),
                oid_claim.into(),
                KeySource::File("/nonexistent/jwks.json".into()),
                reqwest::Client::new(),
            );
            verifier.keys.cache.lock().unwrap().keys =
                Some((vec![signing_key(&jwk).unwrap()].into(), Instant::now()));
            (Auth::Jwt(Box::new(verifier)), key)
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
        async fn a_token_in_x_api_key_is_read_as_a_bearer_token_is() {
            // Anthropic's clients send their key as `x-api-key`; the Bearer form wins where both come.
            let (auth, key) = verifier();
            let es256 = Header::new(Algorithm::ES256);
            let alice = token(&key, &es256, serde_json::json!({"sub": "alice"}));
            let bob = token(&key, &es256, serde_json::json!({"sub": "bob"}));
            let with = |headers: &[(&'static str, String)]| {
                let mut request = event(None);
                for (name, value) in headers {
                    request.headers_mut().insert(*name, value.parse().unwrap());
                }
                request
            };
            let keyed = with(&[("x-api-key", alice.clone())]);
            assert_eq!(
                auth.caller(&keyed).await.unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            let both = with(&[
                ("authorization", format!("Bearer {bob}")),
                ("x-api-key", alice.clone()),
            ]);
            assert_eq!(
                auth.caller(&both).await.unwrap(),
                format!("jwt:{ISSUER}:bob")
            );
            // Another scheme in Authorization leaves the key to x-api-key; an empty key is no credential.
            let basic = with(&[
                ("authorization", "Basic Ym9iOng=".to_string()),
                ("x-api-key", alice),
            ]);
            assert_eq!(
                auth.caller(&basic).await.unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            let empty = with(&[("x-api-key", " ".to_string())]);
            assert!(matches!(
                auth.caller(&empty).await,
                Err(ApiError::Unauthorized(_))
            ));
        }

        #[tokio::test]
        async fn a_token_names_its_oid_and_groups_for_documents_access() {
            let (auth, key) = verifier();
            // The same keys, naming callers by their `oid` claim (`JWT_OID_CLAIM=oid`, Entra's default).
            let Auth::Jwt(mut by_oid) = auth.clone() else {
                unreachable!()
            };
            by_oid.oid_claim = "oid".into();
            let by_oid = Auth::Jwt(by_oid);
            let es256 = Header::new(Algorithm::ES256);
            let identify_by = |auth: &Auth, t: String| {
                let mut request = event(None);
                request
                    .headers_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
                let auth = auth.clone();
                async move { auth.identify(&request).await.unwrap() }
            };
            let identify = |t: String| identify_by(&by_oid, t);
            let full = identify(token(
                &key,
                &es256,
                serde_json::json!({"sub": "s-1", "oid": "alice-oid", "groups": ["eng", 7, "hr"]}),
            ))
            .await;
            assert_eq!(full.oid.as_deref(), Some("alice-oid"));
            assert_eq!(full.groups, ["eng", "hr"]);
            assert_eq!(full.owner, format!("jwt:{ISSUER}:s-1"));
            // With the oid claim `sub` (the default but for Entra), the subject is the oid, whatever `oid` says; a
            // single group may be a string.
            let bare = identify_by(
                &auth,
                token(
                    &key,
                    &es256,
                    serde_json::json!({"sub": "bob", "oid": "alice-oid", "groups": "ops"}),
                ),
            )
            .await;
            assert_eq!(bare.oid.as_deref(), Some("bob"));
            assert_eq!(bare.groups, ["ops"]);
        }

        #[tokio::test]
        async fn a_token_without_its_oid_claim_is_refused_not_named_by_its_subject() {
            let (auth, key) = verifier_naming_by("oid");
            let es256 = Header::new(Algorithm::ES256);
            for (what, claims) in [
                ("no oid", serde_json::json!({"sub": "alice"})),
                ("empty oid", serde_json::json!({"sub": "alice", "oid": ""})),
                (
                    "control characters",
                    serde_json::json!({"sub": "alice", "oid": "a\nb"}),
                ),
                ("a number", serde_json::json!({"sub": "alice", "oid": 7})),
            ] {
                let answer = caller(&auth, &token(&key, &es256, claims)).await;
                assert!(
                    matches!(&answer, Err(ApiError::Unauthorized(_))),
                    "{what}: {answer:?}"
                );
            }
            let good = token(
                &key,
                &es256,
                serde_json::json!({"sub": "s", "oid": "alice"}),
            );
            assert_eq!(
                caller(&auth, &good).await.unwrap(),
                format!("jwt:{ISSUER}:s")
            );
        }

        #[test]
        fn the_oid_claim_is_oid_for_entra_issuers_sub_for_others_and_as_set_when_set() {
            let claim_of = |pairs: &[(&str, &str)]| {
                let pairs: Vec<(String, String)> = [
                    ("AUTH_MODE", "jwt"),
                    ("JWKS_URL", "https://x"),
                    ("JWT_AUDIENCE", "a"),
                ]
                .iter()
                .chain(pairs)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                match Auth::from_lookup(&|k: &str| {
                    pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
                }) {
                    Ok(Auth::Jwt(v)) => v.oid_claim.clone(),
                    _ => panic!("a JWT mode"),
                }
            };
            let entra = [
                "https://login.microsoftonline.com/0000-tenant/v2.0",
                "https://sts.windows.net/0000-tenant/",
                "https://LOGIN.MicrosoftOnline.com/tenant/v2.0",
                "https://login.microsoftonline.com:443/tenant/v2.0",
            ];
            let others = [
                "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_pool",
                "https://issuer.test",
                "https://login.microsoftonline.com.example.test/tenant",
                "https://example.test/login.microsoftonline.com",
                "https://login.microsoftonline.com@example.test/",
                "https://accounts.google.com",
            ];
            // Each issuer's claim when none is set, and a claim set, which wins.
            for (issuers, unset, set) in [
                (&entra[..], "oid", "sub"),
                (&others[..], "sub", "employee_id"),
            ] {
                for issuer in issuers {
                    assert_eq!(claim_of(&[("JWT_ISSUER", issuer)]), unset, "{issuer}");
                    assert_eq!(
                        claim_of(&[("JWT_ISSUER", issuer), ("JWT_OID_CLAIM", set)]),
                        set,
                        "{issuer}"
                    );
                }
            }
            // Empty is unset.
            assert_eq!(
                claim_of(&[
                    ("JWT_ISSUER", "https://sts.windows.net/t/"),
                    ("JWT_OID_CLAIM", " ")
                ]),
                "oid"
            );
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

        /// What the test issuer answers for its JWKS.
        #[derive(Clone)]
        enum Answer {
            /// This body with its length, after a pause.
            Json { body: String, pause: Duration },
            /// This body without a length: read until the connection closes.
            Unframed(String),
            /// This status and no body.
            Status(u16),
        }

        /// A JWKS server on a loopback port that counts the requests it is sent.
        struct Issuer {
            url: String,
            requests: Arc<std::sync::atomic::AtomicUsize>,
            answer: Arc<Mutex<Answer>>,
        }

        impl Issuer {
            async fn start(answer: Answer) -> Self {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!(
                    "http://{}/.well-known/jwks.json",
                    listener.local_addr().unwrap()
                );
                let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let answer = Arc::new(Mutex::new(answer));
                let (counted, answers) = (requests.clone(), answer.clone());
                tokio::spawn(async move {
                    while let Ok((socket, _)) = listener.accept().await {
                        tokio::spawn(Self::serve(socket, counted.clone(), answers.clone()));
                    }
                });
                Self {
                    url,
                    requests,
                    answer,
                }
            }

            async fn serve(
                mut socket: tokio::net::TcpStream,
                requests: Arc<std::sync::atomic::AtomicUsize>,
                answer: Arc<Mutex<Answer>>,
            ) {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = answer.lock().unwrap().clone();
                let response = match answer {
                    Answer::Json { body, pause } => {
                        tokio::time::sleep(pause).await;
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    }
                    Answer::Unframed(body) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}"
                    ),
                    Answer::Status(code) => format!(
                        "HTTP/1.1 {code} Not Now\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    ),
                };
                // The verifier may hang up before reading all of it (a JWKS too large): nothing to do then.
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            }

            fn requests(&self) -> usize {
                self.requests.load(std::sync::atomic::Ordering::SeqCst)
            }

            fn answer(&self, answer: Answer) {
                *self.answer.lock().unwrap() = answer;
            }
        }

        /// A key made for a test, its JWK (with `kid`, `use` and `alg` set or removed by the test) and its signing
        /// half.
        struct Signer {
            key: EncodingKey,
            jwk: serde_json::Value,
        }

        impl Signer {
            fn ec(kid: &str) -> Self {
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    &SystemRandom::new(),
                )
                .unwrap();
                Self::with_jwk(
                    EncodingKey::from_ec_der(pkcs8.as_ref()),
                    Algorithm::ES256,
                    kid,
                )
            }

            fn rsa(kid: &str) -> Self {
                use aws_lc_rs::encoding::AsDer;
                use base64::Engine;
                let pair =
                    aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
                let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
                let text = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
                let lines: Vec<&str> = text
                    .as_bytes()
                    .chunks(64)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect();
                let pem = format!(
                    "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
                    lines.join("\n")
                );
                Self::with_jwk(
                    EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
                    Algorithm::RS256,
                    kid,
                )
            }

            fn with_jwk(key: EncodingKey, alg: Algorithm, kid: &str) -> Self {
                let mut jwk =
                    serde_json::to_value(Jwk::from_encoding_key(&key, alg).unwrap()).unwrap();
                jwk["kid"] = kid.into();
                jwk["use"] = "sig".into();
                Self { key, jwk }
            }

            /// The JWK with `field` set to `value`, or removed when `value` is null.
            fn jwk_with(&self, field: &str, value: serde_json::Value) -> serde_json::Value {
                let mut jwk = self.jwk.clone();
                match value {
                    serde_json::Value::Null => {
                        jwk.as_object_mut().unwrap().remove(field);
                    }
                    value => jwk[field] = value,
                }
                jwk
            }

            /// A good token for `sub`, signed with `alg`, its header naming `kid`.
            fn token(&self, alg: Algorithm, kid: Option<&str>, sub: &str) -> String {
                let mut header = Header::new(alg);
                header.kid = kid.map(str::to_string);
                token(&self.key, &header, serde_json::json!({ "sub": sub }))
            }
        }

        fn jwks(keys: &[&serde_json::Value]) -> String {
            serde_json::json!({ "keys": keys }).to_string()
        }

        fn keys(body: String) -> Answer {
            Answer::Json {
                body,
                pause: Duration::ZERO,
            }
        }

        fn from_url(url: &str, timing: KeyTiming) -> Auth {
            let mut verifier = JwtVerifier::new(
                ISSUER.into(),
                AUDIENCE.into(),
                "groups".into(),
                "sub".into(),
                KeySource::Url(url.into()),
                reqwest::Client::new(),
            );
            verifier.keys.timing = timing;
            Auth::Jwt(Box::new(verifier))
        }

        fn refused(answer: Result<String, ApiError>) -> String {
            match answer {
                Err(ApiError::Unauthorized(why)) => why,
                other => panic!("expected a 401, got {other:?}"),
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn concurrent_verifications_with_a_cold_cache_fetch_the_keys_once() {
            let signer = Signer::ec("k1");
            // The issuer answers slowly, so that every verification starts while the fetch is under way.
            let issuer = Issuer::start(Answer::Json {
                body: jwks(&[&signer.jwk]),
                pause: Duration::from_millis(300),
            })
            .await;
            let auth = Arc::new(from_url(&issuer.url, KeyTiming::default()));
            let tasks: Vec<_> = (0..24)
                .map(|i| {
                    let (auth, token) = (
                        auth.clone(),
                        signer.token(Algorithm::ES256, Some("k1"), &format!("user-{i}")),
                    );
                    tokio::spawn(async move { caller(&auth, &token).await })
                })
                .collect();
            for (i, task) in tasks.into_iter().enumerate() {
                assert_eq!(
                    task.await.unwrap().unwrap(),
                    format!("jwt:{ISSUER}:user-{i}")
                );
            }
            assert_eq!(issuer.requests(), 1, "one fetch for all of them");
            // Later verifications use the keys fetched.
            let later = signer.token(Algorithm::ES256, Some("k1"), "later");
            caller(&auth, &later).await.unwrap();
            assert_eq!(issuer.requests(), 1);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn a_down_issuer_is_asked_once_while_its_failure_is_remembered() {
            let signer = Signer::ec("k1");
            let issuer = Issuer::start(Answer::Status(503)).await;
            let auth = Arc::new(from_url(&issuer.url, KeyTiming::default()));
            let token = signer.token(Algorithm::ES256, Some("k1"), "alice");
            for _ in 0..20 {
                let why = refused(caller(&auth, &token).await);
                assert!(why.contains("503"), "{why}");
            }
            // Concurrent ones, and tokens naming keys never seen, are answered from the failure as well.
            let tasks: Vec<_> = (0..10)
                .map(|i| {
                    let auth = auth.clone();
                    let token =
                        signer.token(Algorithm::ES256, Some(&format!("other-{i}")), "mallory");
                    tokio::spawn(async move { caller(&auth, &token).await })
                })
                .collect();
            for task in tasks {
                refused(task.await.unwrap());
            }
            assert_eq!(
                issuer.requests(),
                1,
                "one fetch while the failure is remembered"
            );
        }

        #[tokio::test]
        async fn a_failed_fetch_is_tried_again_once_its_window_passed() {
            let signer = Signer::ec("k1");
            let issuer = Issuer::start(Answer::Status(500)).await;
            let auth = from_url(
                &issuer.url,
                KeyTiming {
                    failure_remembered_for: Duration::from_millis(200),
                    ..KeyTiming::default()
                },
            );
            let token = signer.token(Algorithm::ES256, Some("k1"), "alice");
            refused(caller(&auth, &token).await);
            assert_eq!(issuer.requests(), 1);
            issuer.answer(keys(jwks(&[&signer.jwk])));
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(
                caller(&auth, &token).await.unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            assert_eq!(issuer.requests(), 2);
        }

        #[tokio::test]
        async fn a_fetch_whose_verification_went_away_still_answers_for_the_others() {
            let signer = Signer::ec("k1");
            let token = signer.token(Algorithm::ES256, Some("k1"), "alice");
            // The issuer hangs: it answers long after the verifier gives up on it.
            let hangs = Answer::Json {
                body: jwks(&[&signer.jwk]),
                pause: Duration::from_secs(60),
            };
            let timing = KeyTiming {
                fetch_timeout: Duration::from_millis(500),
                ..KeyTiming::default()
            };
            // A verification that starts the fetch is dropped (its client hung up), as are those of clients that
            // come and go while the fetch runs.
            async fn abandon(auth: &Auth, token: &str) {
                let gone =
                    tokio::time::timeout(Duration::from_millis(50), caller(auth, token)).await;
                assert!(gone.is_err(), "the issuer answered: {gone:?}");
            }

            // Verifications that come while that fetch runs wait for it and take its answer: no second fetch.
            let issuer = Issuer::start(hangs.clone()).await;
            let auth = from_url(&issuer.url, timing);
            abandon(&auth, &token).await;
            while issuer.requests() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for _ in 0..3 {
                abandon(&auth, &token).await;
            }
            let why = refused(caller(&auth, &token).await);
            assert!(why.contains("no answer within 500ms"), "{why}");
            // And its failure is remembered.
            for _ in 0..3 {
                assert_eq!(refused(caller(&auth, &token).await), why);
            }
            assert_eq!(
                issuer.requests(),
                1,
                "one fetch, though its starter went away"
            );

            // A verification that comes after the abandoned fetch failed finds its failure recorded.
            let issuer = Issuer::start(hangs).await;
            let auth = from_url(&issuer.url, timing);
            abandon(&auth, &token).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let why = refused(caller(&auth, &token).await);
            assert!(why.contains("no answer within 500ms"), "{why}");
            assert_eq!(issuer.requests(), 1);
        }

        #[tokio::test]
        async fn while_the_issuer_is_down_the_keys_fetched_last_verify_for_a_while() {
            let signer = Signer::ec("k1");
            let token = signer.token(Algorithm::ES256, Some("k1"), "alice");
            // Keys are never fresh here: every verification would fetch, were it not for the remembered failure.
            let stale = KeyTiming {
                fresh_for: Duration::ZERO,
                ..KeyTiming::default()
            };
            let issuer = Issuer::start(keys(jwks(&[&signer.jwk]))).await;
            let auth = from_url(&issuer.url, stale);
            caller(&auth, &token).await.unwrap();
            issuer.answer(Answer::Status(503));
            for _ in 0..5 {
                caller(&auth, &token).await.unwrap();
            }
            assert_eq!(issuer.requests(), 2, "one failed refresh, remembered");

            // Past `usable_for`, they no longer do.
            let issuer = Issuer::start(keys(jwks(&[&signer.jwk]))).await;
            let auth = from_url(
                &issuer.url,
                KeyTiming {
                    usable_for: Duration::ZERO,
                    ..stale
                },
            );
            caller(&auth, &token).await.unwrap();
            issuer.answer(Answer::Status(503));
            refused(caller(&auth, &token).await);
            assert_eq!(issuer.requests(), 2);
        }

        #[tokio::test]
        async fn an_oversized_jwks_is_refused() {
            let signer = Signer::ec("k1");
            let token = signer.token(Algorithm::ES256, Some("k1"), "alice");
            let padded = |bytes: usize| {
                serde_json::json!({"keys": [signer.jwk], "padding": "x".repeat(bytes)}).to_string()
            };
            // Under the limit, a large JWKS is read.
            let issuer = Issuer::start(keys(padded(200 * 1024))).await;
            caller(&from_url(&issuer.url, KeyTiming::default()), &token)
                .await
                .unwrap();
            // Over it, with its length announced or not, it is refused, and the refusal remembered.
            for answer in [
                keys(padded(MAX_JWKS_BYTES)),
                Answer::Unframed(padded(MAX_JWKS_BYTES)),
                Answer::Unframed(padded(20 * MAX_JWKS_BYTES)),
            ] {
                let issuer = Issuer::start(answer).await;
                let auth = from_url(&issuer.url, KeyTiming::default());
                for _ in 0..3 {
                    let why = refused(caller(&auth, &token).await);
                    assert!(why.contains("over 262144 bytes"), "{why}");
                }
                assert_eq!(issuer.requests(), 1);
            }
        }

        #[tokio::test]
        async fn keys_not_for_signatures_are_not_used() {
            let encryption = Signer::ec("enc");
            let signing = Signer::ec("sig");
            let issuer = Issuer::start(keys(jwks(&[
                &encryption.jwk_with("use", "enc".into()),
                &signing.jwk,
            ])))
            .await;
            let auth = from_url(&issuer.url, KeyTiming::default());
            refused(
                caller(
                    &auth,
                    &encryption.token(Algorithm::ES256, Some("enc"), "mallory"),
                )
                .await,
            );
            assert_eq!(
                caller(
                    &auth,
                    &signing.token(Algorithm::ES256, Some("sig"), "alice")
                )
                .await
                .unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            // A token naming no key is checked against the only key for signatures.
            assert_eq!(
                caller(&auth, &signing.token(Algorithm::ES256, None, "bob"))
                    .await
                    .unwrap(),
                format!("jwt:{ISSUER}:bob")
            );
            refused(caller(&auth, &encryption.token(Algorithm::ES256, None, "mallory")).await);

            // Nor is a key whose key_ops lack verify; a set with no key for signatures is a failed fetch.
            let mut only_encrypts = signing.jwk_with("use", serde_json::Value::Null);
            only_encrypts["key_ops"] = serde_json::json!(["encrypt"]);
            let issuer = Issuer::start(keys(jwks(&[&only_encrypts]))).await;
            let auth = from_url(&issuer.url, KeyTiming::default());
            let why = refused(
                caller(
                    &auth,
                    &signing.token(Algorithm::ES256, Some("sig"), "alice"),
                )
                .await,
            );
            assert!(why.contains("no key for the signatures"), "{why}");
        }

        #[tokio::test]
        async fn the_algorithm_is_the_keys_never_the_tokens() {
            let rsa = Signer::rsa("rsa");
            // An RSA key without alg verifies RS256 only: the same key's valid PSS signature is refused.
            let issuer =
                Issuer::start(keys(jwks(&[&rsa.jwk_with("alg", serde_json::Value::Null)]))).await;
            let auth = from_url(&issuer.url, KeyTiming::default());
            assert_eq!(
                caller(&auth, &rsa.token(Algorithm::RS256, Some("rsa"), "alice"))
                    .await
                    .unwrap(),
                format!("jwt:{ISSUER}:alice")
            );
            let why =
                refused(caller(&auth, &rsa.token(Algorithm::PS256, Some("rsa"), "alice")).await);
            assert!(why.contains("verifies RS256 only"), "{why}");

            // A key that says PS256 verifies PS256, and not RS256.
            let issuer = Issuer::start(keys(jwks(&[&rsa.jwk_with("alg", "PS256".into())]))).await;
            let auth = from_url(&issuer.url, KeyTiming::default());
            caller(&auth, &rsa.token(Algorithm::PS256, Some("rsa"), "alice"))
                .await
                .unwrap();
            refused(caller(&auth, &rsa.token(Algorithm::RS256, Some("rsa"), "alice")).await);

            // An EC key without alg verifies what its curve makes; a header naming another is refused.
            let ec = Signer::ec("ec");
            let issuer =
                Issuer::start(keys(jwks(&[&ec.jwk_with("alg", serde_json::Value::Null)]))).await;
            let auth = from_url(&issuer.url, KeyTiming::default());
            let good = ec.token(Algorithm::ES256, Some("ec"), "alice");
            caller(&auth, &good).await.unwrap();
            use base64::Engine;
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            let (_, rest) = good.split_once('.').unwrap();
            let relabelled = format!(
                "{}.{rest}",
                b64.encode(r#"{"alg":"ES384","typ":"JWT","kid":"ec"}"#)
            );
            let why = refused(caller(&auth, &relabelled).await);
            assert!(why.contains("verifies ES256 only"), "{why}");
            // A shared-secret algorithm is refused before any key is fetched.
            let hs = token(
                &EncodingKey::from_secret(b"the JWKS is public"),
                &Header::new(Algorithm::HS256),
                serde_json::json!({"sub": "mallory"}),
            );
            let issuer = Issuer::start(keys(jwks(&[&ec.jwk]))).await;
            refused(caller(&from_url(&issuer.url, KeyTiming::default()), &hs).await);
            assert_eq!(issuer.requests(), 0);
        }
    }
}
