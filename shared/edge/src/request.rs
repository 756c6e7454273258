//! Reading what a request asks: its JSON body within the configured size, what it accepts, and its query, each
//! refused with the API's own JSON error.

use axum::body::Body;
use axum::http::{HeaderMap, Uri, header};
use bytes::Bytes;
use chat_core::{InvalidRequest, RequestLimits};
use chat_protocol::{
    ChatInput, Endpoint, is_multipart, parse_chat_request, parse_multipart_chat_request,
    text_outside_files,
};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// Whether the request's `Accept` names `media_type`.
pub fn accepts(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(media_type)))
}

/// How much of a body past its limit is read and thrown away before the 413 is sent. A client that writes its
/// whole body before reading the answer (most do) otherwise finds the connection closed under it and sees a broken
/// pipe, never the 413: the server closes with unread bytes, and its TCP resets the connection. Beyond this much
/// the connection is closed anyway; what is read is never held.
pub const DRAIN_LIMIT_BYTES: u64 = 32 * 1024 * 1024;

/// How long the rest of a body past its limit is read before the 413 is sent anyway: a client trickling it would
/// otherwise hold the connection and its task for as long as it liked.
pub const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// The body, if it is JSON (or says nothing of its type) and no larger than `limit` bytes. Only as much as the
/// limit allows is held: a larger body is refused (its rest read and thrown away, see [`DRAIN_LIMIT_BYTES`]).
pub async fn read_json_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    check_json_type(headers)?;
    read_body(headers, body, limit, ApiError::PayloadTooLarge { limit }).await
}

/// A body of files (`multipart/form-data`, the documents' upload), no larger than `limit` bytes; past it a 413
/// (`ApiError::UploadTooLarge`), read as [`read_json_body`] reads (only as much as the limit allows is held).
pub async fn read_upload_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    read_body(headers, body, limit, ApiError::UploadTooLarge { limit }).await
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

/// The body, up to `limit` bytes; past it, `too_large`, once the rest is read and thrown away (up to
/// [`DRAIN_LIMIT_BYTES`] in all, for at most [`DRAIN_FOR`]), so that the client, done writing, reads the answer. A client that asked to be
/// told before it sends (`Expect: 100-continue`) a body whose length is over the limit is answered at once: it has
/// sent nothing, and will not.
async fn read_body(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
    too_large: ApiError,
) -> Result<Bytes, ApiError> {
    let declared = http_body::Body::size_hint(&body).lower();
    let waits_to_send = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if declared > limit as u64 && (waits_to_send || declared > DRAIN_LIMIT_BYTES) {
        return Err(too_large);
    }
    let broken = |e: axum::Error| {
        // A connection that broke off mid-body (a plain server's client went away), or a body that is not one.
        ApiError::from(InvalidRequest::body(format!(
            "the body could not be read: {e}"
        )))
    };
    let mut held = bytes::BytesMut::with_capacity(declared.min(limit as u64) as usize);
    let mut read: u64 = 0;
    // Set once the body is past its limit: the rest is read until then, no longer.
    let mut drain_until: Option<tokio::time::Instant> = None;
    loop {
        let frame = match drain_until {
            None => body.frame().await,
            Some(deadline) => match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => return Err(too_large),
            },
        };
        let Some(frame) = frame else { break };
        let Ok(data) = frame.map_err(broken)?.into_data() else {
            continue; // trailers
        };
        read += data.len() as u64;
        if read > limit as u64 {
            if read > DRAIN_LIMIT_BYTES {
                return Err(too_large);
            }
            drain_until.get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_FOR);
            held = bytes::BytesMut::new();
            continue;
        }
        held.extend_from_slice(&data);
    }
    if read > limit as u64 {
        return Err(too_large);
    }
    Ok(held.freeze())
}

/// A chat request sent to `endpoint`: JSON within `json_limit` bytes, or (to the protocol's routes) a request with
/// files, `multipart/form-data` or JSON, within `upload_limit` bytes; parsed and checked.
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
            let body = read_body(headers, body, limit, ApiError::UploadTooLarge { limit }).await?;
            Ok(parse_multipart_chat_request(&content_type, body, endpoint, limits).await?)
        }
        // JSON may carry files too (`messages[i].files`, in base64 or as byte arrays): such a body may be as large
        // as a multipart one, by its files alone.
        _ if endpoint == Endpoint::Protocol && upload_limit > json_limit => {
            let body = read_json_body(headers, body, upload_limit).await?;
            // Only the files may take a body past the JSON limit: the rest of it is parsed into JSON values.
            if body.len() > json_limit && text_outside_files(&body) > json_limit {
                return Err(ApiError::PayloadTooLarge { limit: json_limit });
            }
            Ok(parse_chat_request(&body, endpoint, limits)?)
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
