//! Who is calling, in one place for every function: the IAM caller of a function URL, the `sub` of a verified
//! Bearer JWT, or one local user when authentication is off for local runs.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde::Deserialize;

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
    source: KeySource,
    keys: RwLock<Option<(JwkSet, Instant)>>,
    http: reqwest::Client,
}

/// How long fetched keys are trusted before they are fetched again; an unknown key id refetches sooner.
const KEYS_FRESH_FOR: Duration = Duration::from_secs(600);
const REFETCH_AFTER: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
struct Claims {
    sub: String,
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
                Ok(Auth::Jwt(JwtVerifier {
                    issuer: required("JWT_ISSUER")?,
                    audience: required("JWT_AUDIENCE")?,
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

    /// The caller's user id, or 401. The id says how it was proven (`iam:`, `jwt:{issuer}:`, `local:`), so that
    /// users of different modes or issuers never share a history.
    pub async fn caller(&self, request: &Request) -> Result<String, ApiError> {
        match self {
            Auth::None { user } => Ok(format!("local:{user}")),
            Auth::Iam => {
                iam_caller(request)
                    .map(|c| format!("iam:{c}"))
                    .ok_or(ApiError::Unauthorized(
                    "the request carries no IAM caller (is the function URL's AuthType AWS_IAM?)"
                        .into(),
                ))
            }
            Auth::Jwt(verifier) => {
                let token = bearer(request).ok_or(ApiError::Unauthorized(
                    "no Authorization: Bearer token".into(),
                ))?;
                let sub = verifier
                    .verify(token)
                    .await
                    .map_err(ApiError::Unauthorized)?;
                Ok(format!("jwt:{}:{sub}", verifier.issuer))
            }
        }
    }
}

fn iam_caller(request: &Request) -> Option<String> {
    let RequestContext::ApiGatewayV2(ctx) = request.request_context_ref()? else {
        return None;
    };
    let iam = ctx.authorizer.as_ref()?.iam.as_ref()?;
    // Callers with Cognito identity-pool credentials all assume one role: their identity id tells them apart.
    if let Some(id) = iam
        .cognito_identity
        .as_ref()
        .and_then(|c| c.identity_id.clone())
    {
        return Some(format!("cognito:{id}"));
    }
    iam.user_arn.clone().or_else(|| iam.caller_id.clone())
}

fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl JwtVerifier {
    async fn verify(&self, token: &str) -> Result<String, String> {
        let header = decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
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
        let data = decode::<Claims>(token, &key, &validation)
            .map_err(|e| format!("invalid token: {e}"))?;
        Ok(data.claims.sub)
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
    }
}
