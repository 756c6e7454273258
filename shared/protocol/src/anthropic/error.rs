//! Anthropic's error body, `{"type": "error", "error": {"type", "message"}}`: what Anthropic's SDKs read to raise
//! their typed errors (`BadRequestError`, `AuthenticationError`, `RateLimitError`, `OverloadedError`, …), and the
//! status each fault gets in this dialect: a model throttled past the retries is Anthropic's 529 `overloaded_error`.

use serde::Serialize;

use crate::encode::{ErrorShape, Fault, FaultKind, json};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub error: ErrorObject,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
}

/// The Messages API's routes' errors (`/v1/messages…`), before any byte of an answer.
pub struct AnthropicErrors;

impl ErrorShape for AnthropicErrors {
    fn error_body(fault: &Fault) -> Vec<u8> {
        json(&error_body(fault))
    }

    fn status(fault: &Fault) -> u16 {
        match fault.kind {
            FaultKind::ModelThrottled => 529,
            // The client sent the conversation as the model gets it: a 400, which the SDKs and Claude Code do not
            // retry, as they would a 500.
            FaultKind::ModelRejected => 400,
            _ => fault.status,
        }
    }
}

/// Anthropic's error body for `fault`: 400 `invalid_request_error` (its message names the field), 401
/// `authentication_error`, 403 `permission_error`, 404 `not_found_error`, 413 `request_too_large`, 429
/// `rate_limit_error`, 529 `overloaded_error` (the model throttled), 500 `api_error`. Also what a stream that has
/// begun sends as its `error` event.
pub fn error_body(fault: &Fault) -> ErrorBody {
    let kind = match fault.kind {
        FaultKind::Unauthorized => "authentication_error",
        FaultKind::Forbidden => "permission_error",
        FaultKind::UnknownRoute | FaultKind::ModelNotFound => "not_found_error",
        FaultKind::ModelThrottled => "overloaded_error",
        FaultKind::ModelRejected => "invalid_request_error",
        FaultKind::OverQuota | FaultKind::OverRate => "rate_limit_error",
        _ if fault.status == 413 => "request_too_large",
        _ if fault.status == 429 => "rate_limit_error",
        _ if fault.status == 401 => "authentication_error",
        _ if fault.status == 403 => "permission_error",
        _ if fault.status == 404 => "not_found_error",
        _ if fault.status == 503 || fault.status == 529 => "overloaded_error",
        _ if fault.is_server_error() => "api_error",
        _ => "invalid_request_error",
    };
    if fault.kind == FaultKind::ModelRejected {
        return ErrorBody {
            kind: "error",
            error: ErrorObject {
                kind,
                message: "The model refused the request as invalid: check what the conversation gives back as it \
                          came (thinking blocks and their signatures unchanged, every tool_use answered by a \
                          tool_result)."
                    .into(),
            },
        };
    }
    let message = match &fault.param {
        Some(param) if !fault.message.contains(param.as_str()) => {
            format!("{param}: {}", fault.message)
        }
        _ => fault.message.clone(),
    };
    ErrorBody {
        kind: "error",
        error: ErrorObject { kind, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(status: u16, kind: FaultKind) -> Fault {
        Fault {
            status,
            message: "m".into(),
            kind,
            param: None,
            retry_after: None,
        }
    }

    #[test]
    fn each_fault_has_anthropics_type_and_a_throttled_model_is_529() {
        let kind = |f: Fault| error_body(&f).error.kind;
        assert_eq!(
            kind(fault(400, FaultKind::Invalid)),
            "invalid_request_error"
        );
        assert_eq!(
            kind(fault(401, FaultKind::Unauthorized)),
            "authentication_error"
        );
        assert_eq!(kind(fault(403, FaultKind::Forbidden)), "permission_error");
        assert_eq!(
            kind(fault(404, FaultKind::ModelNotFound)),
            "not_found_error"
        );
        assert_eq!(kind(fault(413, FaultKind::Invalid)), "request_too_large");
        assert_eq!(kind(fault(429, FaultKind::OverQuota)), "rate_limit_error");
        assert_eq!(kind(fault(500, FaultKind::Other)), "api_error");
        let throttled = fault(429, FaultKind::ModelThrottled);
        assert_eq!(kind(throttled.clone()), "overloaded_error");
        assert_eq!(AnthropicErrors::status(&throttled), 529);
        assert_eq!(
            AnthropicErrors::status(&fault(429, FaultKind::OverRate)),
            429
        );
        let body: serde_json::Value = serde_json::from_slice(&AnthropicErrors::error_body(&fault(
            400,
            FaultKind::Invalid,
        )))
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": "m"}})
        );
    }
}
