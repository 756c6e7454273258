//! OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`: what the OpenAI SDKs read to raise
//! their typed errors. Which status, type and code each fault gets is decided at the edge, beside the other
//! dialects' errors (`chat_edge::openai_error_response`).

use serde::Serialize;

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
