//! The settings of the chat core, read once per cold start by the functions.

use chat_protocol::RequestLimits;

/// A Bedrock guardrail to apply to every turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guardrail {
    pub id: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatSettings {
    pub model_id: String,
    pub system_prompt: String,
    /// `max_tokens` when a request does not override it.
    pub default_max_tokens: u32,
    pub guardrail: Option<Guardrail>,
    pub limits: RequestLimits,
}

impl ChatSettings {
    pub const DEFAULT_SYSTEM_PROMPT: &'static str =
        "You are a helpful assistant. Answer clearly and concisely.";
    pub const DEFAULT_MAX_TOKENS: u32 = 1024;
}
