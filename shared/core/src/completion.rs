//! What a turn of a dialect whose client keeps the conversation (OpenAI's Chat Completions) adds to the core's
//! turn: the client's own instructions and model, its function tools (the model asks, the client runs them), how
//! the model must answer, and that nothing is stored. The conversation itself is the core's ([`crate::Message`]):
//! a client's tool call and its result are a [`crate::ContentPart::Tool`] of the assistant message that asked.

use serde_json::Value;

use crate::ToolSpec;

/// A stateless turn's own request, beside its [`crate::TurnInput`] (whose `messages` are the whole conversation
/// the client sent, and whose new chat is never stored).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The client's `system` and `developer` messages, joined in order: the system prompt in place of the
    /// configured one (`None`: the configured one).
    pub instructions: Option<String>,
    /// The model to answer with, one the operator allows; `None`: the configured default.
    pub model_id: Option<String>,
    /// The client's function tools: the model may ask for them, the client runs them and sends their results back.
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    /// Whether the model may ask for several tools in one answer.
    pub parallel_tool_calls: bool,
    /// Sequences that end the answer where the model writes them (not part of the answer).
    pub stop: Vec<String>,
    pub response_format: ResponseFormat,
    /// The end user the client names, recorded in the turn's trace.
    pub user: Option<String>,
}

impl Default for Completion {
    fn default() -> Self {
        Self {
            instructions: None,
            model_id: None,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            stop: Vec::new(),
            response_format: ResponseFormat::Text,
            user: None,
        }
    }
}

/// Which tools the model must or may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// It chooses whether to ask for tools.
    #[default]
    Auto,
    /// It answers without tools (they are not offered).
    None,
    /// It asks for at least one tool.
    Required,
    /// It asks for this tool.
    Function(String),
}

/// The shape the answer's text must have.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ResponseFormat {
    #[default]
    Text,
    /// A JSON object, any.
    JsonObject,
    /// A JSON value valid against `schema`.
    JsonSchema {
        name: String,
        description: Option<String>,
        schema: Value,
        strict: bool,
    },
}
