//! The settings of the chat core, read once per cold start by the functions.

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

/// Bounds on what one request may ask for; configurable, with defaults generous for real conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    pub max_messages: usize,
    pub max_message_chars: usize,
    /// The largest `max_tokens` a request may ask for.
    pub max_output_tokens: u32,
}

impl RequestLimits {
    /// The longest message `id` a save may carry. Ids are the client's own (the Chat UI makes short ones, this
    /// backend 32 hex characters); a bound keeps a message's item within DynamoDB's 400 KB whatever the id.
    pub const MAX_MESSAGE_ID_CHARS: usize = 200;
    /// The longest `agentIdentifier` or `agentName` a saved message may carry: agents' names are short.
    pub const MAX_AGENT_CHARS: usize = 200;
    /// The longest `timestamp` a saved message may carry. Times stay free text, as the Chat UI writes them
    /// (`10:15 AM`), or an RFC 3339 instant; 64 characters hold either with room to spare.
    pub const MAX_TIMESTAMP_CHARS: usize = 64;
    /// The longest session state a chat request may send as a string. This backend's session states are chat
    /// ids of 32 characters; anything far longer names no chat, and is refused before it reaches a key.
    pub const MAX_SESSION_STATE_CHARS: usize = 256;
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_messages: 500,
            max_message_chars: 80_000,
            max_output_tokens: 8192,
        }
    }
}
