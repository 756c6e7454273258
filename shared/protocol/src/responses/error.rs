//! The Responses route's errors: OpenAI's shape ([`crate::openai::OpenAiErrors`]), naming the request's own fields.
//! The completion's checks and a model's refusal name a field as Chat Completions spells it (`reasoning_effort`,
//! `max_tokens`, `response_format`): on `/v1/responses` a client is told its own request's path for it.

use crate::encode::{ErrorShape, Fault, FaultKind};
use crate::openai::OpenAiErrors;

/// The path in a Responses request of a field named as Chat Completions spells it; `None`: the same name (or none
/// of a Responses request's).
pub fn own_param(param: &str) -> Option<&'static str> {
    match param {
        "reasoning_effort" => Some("reasoning.effort"),
        "max_tokens" => Some("max_output_tokens"),
        "response_format" => Some("text.format"),
        "messages" => Some("input"),
        _ => None,
    }
}

/// `path` as a Responses request names it ([`own_param`]).
pub fn in_own_terms(path: &str) -> String {
    own_param(path).map_or_else(|| path.to_string(), str::to_string)
}

/// OpenAI's errors as `/v1/responses` answers them: a model's refusal names the Responses request's own field.
/// (Only a model's refusal is renamed here, as its field is found in Chat Completions' words; a refusal of the
/// request itself names the field as the request wrote it, even one such as `max_tokens` that is no field of it.)
pub struct ResponsesErrors;

impl ErrorShape for ResponsesErrors {
    fn error_body(fault: &Fault) -> Vec<u8> {
        if fault.kind == FaultKind::ModelRejected
            && let Some(own) = fault.param.as_deref().and_then(own_param)
        {
            let mut fault = fault.clone();
            fault.param = Some(own.to_string());
            return OpenAiErrors::error_body(&fault);
        }
        OpenAiErrors::error_body(fault)
    }

    fn status(fault: &Fault) -> u16 {
        OpenAiErrors::status(fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param_of(kind: FaultKind, param: &str) -> serde_json::Value {
        let fault = Fault {
            status: 400,
            message: "m".into(),
            kind,
            param: Some(param.into()),
            retry_after: None,
        };
        let body: serde_json::Value =
            serde_json::from_slice(&ResponsesErrors::error_body(&fault)).unwrap();
        body["error"]["param"].clone()
    }

    #[test]
    fn a_models_refusal_names_the_responses_field_and_a_requests_own_refusal_stays() {
        assert_eq!(
            param_of(FaultKind::ModelRejected, "reasoning_effort"),
            "reasoning.effort"
        );
        assert_eq!(
            param_of(FaultKind::ModelRejected, "max_tokens"),
            "max_output_tokens"
        );
        assert_eq!(
            param_of(FaultKind::ModelRejected, "response_format"),
            "text.format"
        );
        assert_eq!(param_of(FaultKind::ModelRejected, "messages"), "input");
        assert_eq!(param_of(FaultKind::ModelRejected, "tools"), "tools");
        // A Responses request that sends `max_tokens` (no field of it) is told of `max_tokens`.
        assert_eq!(param_of(FaultKind::Invalid, "max_tokens"), "max_tokens");
    }
}
