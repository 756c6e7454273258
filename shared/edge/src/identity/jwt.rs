//! A Bearer token verified: a key of the issuer's JWKS ([`super::jwks`]) signs it with an accepted public-key
//! algorithm, and its issuer, audience, times and `sub` hold; its oid claim (`JWT_OID_CLAIM`) and groups are what
//! documents' access lists name.

use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;

use super::jwks::{ACCEPTED_ALGORITHMS, KeySource, Keys};
use super::{CallerParts, usable_name};

/// Verifies tokens: signature by a key of the JWKS, `iss`, `aud`, `exp`, and a `sub`.
///
/// The JWKS is fetched so that no caller can turn it against the service or its issuer: one fetch at a time (the
/// verifications that need it wait for it and use what it found), bounded in time and size, and a
/// failed fetch is remembered for a while ([`super::jwks`]), so that tokens
/// sent while the issuer is down (or with key ids it never made) do not make a fetch each. A fetch runs in a task of
/// its own, which records what it found even when the verification that started it is gone (its client hung up, or
/// Lambda's timeout struck): otherwise a client that connects and hangs up again and again would make a fetch each
/// time while the issuer hangs.
#[derive(Clone)]
pub struct JwtVerifier {
    pub(super) issuer: String,
    pub(super) audience: String,
    /// The claim holding the caller's groups (`JWT_GROUPS_CLAIM`, default `groups`).
    pub(super) groups_claim: String,
    /// The claim whose value names the caller in documents' `oids` (`JWT_OID_CLAIM`; see [`default_oid_claim`]).
    pub(super) oid_claim: String,
    /// The issuer's keys, fetched as they are needed.
    pub(super) keys: Keys,
}

/// How far the issuer's clock may be from ours when `exp` and `nbf` are checked.
const CLOCK_SKEW_SECONDS: u64 = 60;

#[derive(Deserialize)]
struct Claims {
    sub: String,
    /// Every other claim: the object id and the groups claim are read from here.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// What a verified token says of its holder.
pub(super) struct Verified {
    pub(super) sub: String,
    /// The value of the oid claim (`JWT_OID_CLAIM`): what documents' `oids` name.
    pub(super) oid: String,
    pub(super) groups: Vec<String>,
}

/// The claim naming a caller in documents' `oids` when `JWT_OID_CLAIM` is not set: `oid` for Microsoft Entra ID
/// (an issuer on `login.microsoftonline.com` or `sts.windows.net`), whose `sub` differs per application and whose
/// `oid` is the user's object id that access lists name; `sub` for every other issuer.
pub fn default_oid_claim(issuer: &str) -> &'static str {
    let rest = issuer.split_once("://").map_or(issuer, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.trim_end_matches('.') {
        "login.microsoftonline.com" | "sts.windows.net" => "oid",
        _ => "sub",
    }
}

/// The token a request presents, in either form clients send one: `Authorization: Bearer <token>` (OpenAI's SDKs, the
/// page once signed in, Claude Code's `ANTHROPIC_AUTH_TOKEN`), else `x-api-key: <token>` (Anthropic's SDKs, Claude
/// Code's `ANTHROPIC_API_KEY`). The one place a credential is read from a request.
pub(super) fn bearer(request: &impl CallerParts) -> Option<&str> {
    let headers = request.header_map();
    let authorization = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    authorization
        .or_else(|| {
            headers
                .get("x-api-key")
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
        })
        .filter(|t| !t.is_empty())
}

impl JwtVerifier {
    pub(super) fn new(
        issuer: String,
        audience: String,
        groups_claim: String,
        oid_claim: String,
        source: KeySource,
        http: reqwest::Client,
    ) -> Self {
        Self {
            issuer,
            audience,
            groups_claim,
            oid_claim,
            keys: Keys::new(source, http),
        }
    }

    /// The token's `sub`, when the token is one to accept.
    pub(super) async fn verify(&self, token: &str) -> Result<Verified, String> {
        let header = decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        // RFC 7515 §4.1.11: a recipient must refuse a token whose `crit` names an extension it does not understand,
        // and this service understands none (an empty list is malformed: producers must not send one).
        if let Some(crit) = &header.crit {
            return Err(format!(
                "the token's header marks {crit:?} critical, and no extension is understood here"
            ));
        }
        // Refused before any key is looked for, so that such tokens never make a fetch.
        if !ACCEPTED_ALGORITHMS.contains(&header.alg) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let key = self.keys.key(header.kid.as_deref()).await?;
        // The key says how it verifies, never the token: a token may not pick another algorithm for the key
        // (RSASSA-PSS for a PKCS #1 key, or the other way round).
        if header.alg != key.alg {
            return Err(format!(
                "the token is signed with {:?}, and its key verifies {:?} only",
                header.alg, key.alg
            ));
        }
        let mut validation = Validation::new(key.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // A token is good from `nbf` (when it has one) until `exp`, give or take the clocks' skew.
        validation.validate_nbf = true;
        validation.leeway = CLOCK_SKEW_SECONDS;
        let data = decode::<Claims>(token, &key.decoding, &validation)
            .map_err(|e| format!("invalid token: {e}"))?;
        usable_name("the token's sub", &data.claims.sub)?;
        let claims = data.claims;
        // The oid claim names the caller in access lists: a token without it (or with one that names nobody) is
        // refused, never taken as its `sub`, which may name someone else in those lists.
        let oid = if self.oid_claim == "sub" {
            claims.sub.clone()
        } else {
            let claim = &self.oid_claim;
            match claims.other.get(claim) {
                Some(serde_json::Value::String(oid)) => {
                    usable_name(&format!("the token's {claim}"), oid)?.to_string()
                }
                Some(_) => return Err(format!("the token's {claim} claim is not a string")),
                None => {
                    return Err(format!(
                        "the token has no {claim} claim (JWT_OID_CLAIM), which names its holder"
                    ));
                }
            }
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
}
