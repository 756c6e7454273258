//! OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`: what the OpenAI SDKs read to raise
//! their typed errors, and which `type` and `code` each fault gets. Which status a fault has is the edge's
//! (`chat_edge::ApiError::fault`), the same in every dialect.

use serde::Serialize;

use crate::encode::{Fault, FaultKind};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ErrorBody {
    pub fn new(
        message: impl Into<String>,
        kind: &'static str,
        param: Option<String>,
        code: Option<&'static str>,
    ) -> Self {
        Self {
            error: ErrorObject {
                message: message.into(),
                kind,
                param,
                code,
            },
        }
    }
}

/// OpenAI's routes' errors (`/v1/…`), before any byte of an answer: [`error_body`].
pub struct OpenAiErrors;

impl crate::encode::ErrorShape for OpenAiErrors {
    fn error_body(fault: &Fault) -> Vec<u8> {
        crate::encode::json(&error_body(fault))
    }
}

/// OpenAI's error body for `fault`, as its SDKs read it to raise their typed errors: 401 `invalid_api_key`, 404
/// `model_not_found` (or `unknown_url` for a route), 405 `method_not_allowed`, 413 `request_too_large`, 429
/// `rate_limit_exceeded` (of type `insufficient_quota` for a quota, `requests` for a rate), 400
/// `invalid_request_error` naming `param`, 503 `service_unavailable`, and `server_error` for the other 5xx. Also
/// what a stream that has begun sends as its last event.
pub fn error_body(fault: &Fault) -> ErrorBody {
    const INVALID: &str = "invalid_request_error";
    let (kind, code) = match fault.kind {
        FaultKind::Unauthorized => (INVALID, Some("invalid_api_key")),
        FaultKind::ModelNotFound => (INVALID, Some("model_not_found")),
        FaultKind::OverQuota => ("insufficient_quota", Some("rate_limit_exceeded")),
        FaultKind::ContentFiltered => (INVALID, Some("content_filter")),
        FaultKind::UnknownRoute => (INVALID, Some("unknown_url")),
        FaultKind::MethodNotAllowed { .. } => (INVALID, Some("method_not_allowed")),
        _ if fault.status == 413 => (INVALID, Some("request_too_large")),
        _ if fault.status == 429 => ("requests", Some("rate_limit_exceeded")),
        _ if fault.status == 503 => ("server_error", Some("service_unavailable")),
        _ if fault.is_server_error() => ("server_error", None),
        _ => (INVALID, None),
    };
    ErrorBody::new(fault.message.clone(), kind, fault.param.clone(), code)
}
