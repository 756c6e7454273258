//! Reading what a request asks: its JSON body within the configured size, what it accepts, and its query, each
//! refused with the API's own JSON error.

use axum::body::Body;
use axum::http::{HeaderMap, Uri, header};
use bytes::Bytes;
use chat_core::{InvalidRequest, RequestLimits};
use chat_protocol::{
    ChatInput, Endpoint, is_multipart, parse_chat_request, parse_multipart_chat_request,
};
use serde::de::DeserializeOwned;

use crate::ApiError;

/// Whether the request's `Accept` names `media_type`.
pub fn accepts(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(media_type)))
}

/// The body, if it is JSON (or says nothing of its type) and no larger than `limit` bytes. Only as much as the
/// limit allows is read: a larger body is refused without being held whole.
pub async fn read_json_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    check_json_type(headers)?;
    read_body(body, limit, ApiError::PayloadTooLarge { limit }).await
}

/// Refuses a body that says it is something other than JSON.
fn check_json_type(headers: &HeaderMap) -> Result<(), ApiError> {
    if let Some(value) = headers.get(header::CONTENT_TYPE) {
        // A value that is not visible ASCII is no JSON media type either, and is named as far as it can be.
        let value = String::from_utf8_lossy(value.as_bytes());
        let essence = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let is_json = essence == "application/json" || essence.ends_with("+json");
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(value.into_owned()));
        }
    }
    Ok(())
}

/// The body, up to `limit` bytes; past it, `too_large`.
async fn read_body(body: Body, limit: usize, too_large: ApiError) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        // Past the limit, or a connection that broke off mid-body (a plain server's client went away).
        let source = std::error::Error::source(&e);
        if source.is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) {
            too_large
        } else {
            ApiError::from(InvalidRequest::body(format!(
                "the body could not be read: {e}"
            )))
        }
    })
}

/// A chat request sent to `endpoint`: JSON within `json_limit` bytes, or (to the protocol's routes) a
/// `multipart/form-data` request with files within `upload_limit` bytes; parsed and checked.
pub async fn read_chat_request(
    headers: &HeaderMap,
    body: Body,
    endpoint: Endpoint,
    limits: &RequestLimits,
    json_limit: usize,
    upload_limit: usize,
) -> Result<ChatInput, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    match content_type {
        Some(content_type) if endpoint == Endpoint::Protocol && is_multipart(&content_type) => {
            let limit = upload_limit;
            let body = read_body(body, limit, ApiError::UploadTooLarge { limit }).await?;
            Ok(parse_multipart_chat_request(&content_type, body, endpoint, limits).await?)
        }
        _ => {
            let body = read_json_body(headers, body, json_limit).await?;
            Ok(parse_chat_request(&body, endpoint, limits)?)
        }
    }
}

/// A query string as `T` (typed, with each parameter's own checks left to the handler), read where the handler
/// says (after the caller is known); a query that does not parse (a parameter given twice) is a 400 naming it.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned> Query<T> {
    /// The query of `uri`, typed.
    pub fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(uri.query().unwrap_or(""))
            .map(Query)
            .map_err(|e| InvalidRequest::new("query", e.to_string()).into())
    }
}
