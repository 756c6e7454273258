//! Reading what a request asks: its path, and its JSON body within the configured size.

use lambda_http::http::header;
use lambda_http::{Body, Request};

use crate::ApiError;

/// The request path without a trailing slash (`/chat/` is `/chat`).
pub fn normalized_path(request: &Request) -> &str {
    let path = request.uri().path();
    match path.trim_end_matches('/') {
        "" => "/",
        trimmed => trimmed,
    }
}

/// Whether the request's `Accept` names `media_type`.
pub fn accepts(request: &Request, media_type: &str) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(media_type)))
}

/// The body, if it is JSON (or says nothing of its type) and no larger than `limit` bytes.
pub fn read_json_body(request: &Request, limit: usize) -> Result<&[u8], ApiError> {
    if let Some(value) = request.headers().get(header::CONTENT_TYPE) {
        let value = value.to_str().unwrap_or("");
        let essence = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let is_json = essence == "application/json" || essence.ends_with("+json");
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(value.to_string()));
        }
    }
    let bytes: &[u8] = match request.body() {
        Body::Empty => &[],
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => &[],
    };
    if bytes.len() > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    Ok(bytes)
}
