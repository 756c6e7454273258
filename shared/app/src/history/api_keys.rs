//! `POST`, `GET /api-keys` and `DELETE /api-keys/{id}`: a signed-in person makes, lists and revokes their own API
//! keys, which programs then send in place of a JWT (see `chat_edge::ApiKeys`).
//!
//! - A key is answered once, by the create, and never again: only its hash is kept.
//! - Keys are managed by a person, not by a key: a caller proven by an API key is answered 403 on every route here
//!   (a leaked key cannot make itself a successor, list its siblings or revoke them).
//! - Another owner's key id answers 404, exactly like one that does not exist.
//! - An owner holds at most [`MAX_KEYS_PER_OWNER`] keys that have not expired.
//! - A key lasts `expires_in_days`, or when that is left out the operator's `API_KEY_DEFAULT_DAYS` (90 unless set;
//!   0: until revoked).
//! - Where keys are off (IAM mode, or an app built without a key store) these routes answer 404.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chat_core::{
    ApiKeyRecord, ApiKeyRefusal, InvalidRequest, MAX_KEY_DAYS, MAX_KEY_NAME_CHARS,
    MAX_KEYS_PER_OWNER, NewApiKey, SessionStore, is_chat_id, rfc3339_millis,
};
use chat_edge::{ApiError, ApiKeys, JsonBody, Proof, Proven, json_response};
use chat_protocol::parse_body;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{AppState, Shared};

/// What `POST /api-keys` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    name: String,
    #[serde(default)]
    expires_in_days: Option<u32>,
}

/// A key as `POST /api-keys` answers it: with the key itself, this once.
#[derive(Serialize)]
struct CreatedKey<'a> {
    id: &'a str,
    name: &'a str,
    key: &'a str,
    created: String,
    expires: Option<String>,
}

/// A key as `GET /api-keys` lists it: never the key nor its hash.
#[derive(Serialize)]
struct ListedKey<'a> {
    id: &'a str,
    name: &'a str,
    /// The prefix and the key's last four characters.
    hint: &'a str,
    created: String,
    last_used: Option<String>,
    expires: Option<String>,
    expired: bool,
}

fn time_of(unix: i64) -> String {
    OffsetDateTime::from_unix_timestamp(unix)
        .map(rfc3339_millis)
        .unwrap_or_default()
}

fn listed(key: &ApiKeyRecord, now: i64) -> ListedKey<'_> {
    ListedKey {
        id: &key.id,
        name: &key.name,
        hint: &key.hint,
        created: time_of(key.created),
        last_used: key.last_used.map(time_of),
        expires: key.expires.map(time_of),
        expired: key.expired(now),
    }
}

/// The keys of the app, when it takes keys, for a caller proven by the mode (a person); else 404 or 403.
fn keys_for<St>(app: &Shared<St>, proof: Proof) -> Result<&ApiKeys, ApiError> {
    let keys = app
        .auth
        .api_keys()
        .ok_or_else(|| ApiError::NotFound("/api-keys (API keys are off here)".into()))?;
    if proof == Proof::ApiKey {
        return Err(ApiError::Forbidden(
            "API keys are managed by a signed-in person: a request made with an API key cannot make, list or \
             revoke keys."
                .into(),
        ));
    }
    Ok(keys)
}

fn now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// A key's name: trimmed, not blank, at most [`MAX_KEY_NAME_CHARS`], no control characters.
fn key_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(InvalidRequest::new("name", "must not be blank").into());
    }
    if name.chars().any(char::is_control) {
        return Err(InvalidRequest::new("name", "must not hold control characters").into());
    }
    InvalidRequest::check_length("name", name, MAX_KEY_NAME_CHARS)?;
    Ok(name.to_string())
}

pub(super) async fn create<St: SessionStore>(
    State(app): AppState<St>,
    Proven(caller, proof): Proven,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let keys = keys_for(&app, proof)?;
    let body: CreateKey = parse_body(&body)?;
    let name = key_name(&body.name)?;
    if let Some(days) = body.expires_in_days
        && !(1..=MAX_KEY_DAYS).contains(&days)
    {
        return Err(InvalidRequest::new(
            "expires_in_days",
            format!("expected a whole number of days from 1 to {MAX_KEY_DAYS}"),
        )
        .into());
    }
    let now = now();
    // No life asked for: the operator's default (`API_KEY_DEFAULT_DAYS`, 90 days unless set).
    let days = body.expires_in_days.or(keys.default_days());
    let new = NewApiKey::generate(caller, &name, now, days);
    match keys
        .bounded(keys.store().create(&new.record, MAX_KEYS_PER_OWNER, now))
        .await?
    {
        Ok(()) => {}
        Err(ApiKeyRefusal::TooMany { max }) => {
            return Err(ApiError::Forbidden(format!(
                "You hold {max} API keys already, the most one person may: revoke one first."
            )));
        }
    }
    tracing::info!(key = %new.record.id, owner = %new.record.caller.owner, "API key made");
    Ok(json_response(
        StatusCode::CREATED,
        &CreatedKey {
            id: &new.record.id,
            name: &new.record.name,
            key: &new.key,
            created: time_of(new.record.created),
            expires: new.record.expires.map(time_of),
        },
    ))
}

pub(super) async fn list<St: SessionStore>(
    State(app): AppState<St>,
    Proven(caller, proof): Proven,
) -> Result<Response, ApiError> {
    let keys = keys_for(&app, proof)?;
    let owned = keys.bounded(keys.store().list(&caller.owner)).await?;
    let now = now();
    let body: Vec<_> = owned.iter().map(|k| listed(k, now)).collect();
    Ok(json_response(StatusCode::OK, &body))
}

pub(super) async fn revoke<St: SessionStore>(
    State(app): AppState<St>,
    Proven(caller, proof): Proven,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let keys = keys_for(&app, proof)?;
    let not_found = || ApiError::NotFound("/api-keys/{id} (no such API key)".into());
    let id = id.map(|Path(id)| id).map_err(|_| not_found())?;
    if !is_chat_id(&id) {
        return Err(not_found());
    }
    let revoked = keys
        .bounded(keys.store().revoke(&caller.owner, &id))
        .await?
        .ok_or_else(not_found)?;
    // Here at once; other instances within their cache's life.
    keys.forget(&revoked.hash);
    tracing::info!(key = %revoked.id, owner = %caller.owner, "API key revoked");
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::empty())
        .expect("a response built from valid parts"))
}
