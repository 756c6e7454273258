//! The model port: what the core asks of a chat model, in its own terms.

use std::collections::VecDeque;
use std::future::Future;

use serde_json::Value;

use crate::{
    Attachment, ModelError, ReasoningBlock, Role, TokenUsage, ToolCall, ToolResult, ToolSpec,
};

/// A message as the model gets it: consecutive messages of one role are one message with several text blocks,
/// because models want the roles to alternate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelMessage {
    pub role: Role,
    pub texts: Vec<String>,
    /// The files the message carries, their bytes at hand; each goes before the texts, after a line naming it
    /// ([`Attachment::label`]).
    pub files: Vec<Attachment>,
    /// The tools an assistant message asks for (after its texts).
    pub tool_uses: Vec<ToolCall>,
    /// The results a user message gives the model for the calls of the assistant message before it (before its
    /// texts).
    pub tool_results: Vec<ToolResult>,
    /// What an assistant message reasoned before it asked for its tools (first of all its blocks), signed by the
    /// model provider: a model that reasons wants its reasoning back, unchanged, before the tool uses it led to.
    pub reasoning: Vec<ReasoningBlock>,
}

impl ModelMessage {
    /// A message of text blocks only.
    pub fn text(role: Role, texts: Vec<String>) -> Self {
        Self {
            role,
            texts,
            files: Vec::new(),
            tool_uses: Vec::new(),
            tool_results: Vec::new(),
            reasoning: Vec::new(),
        }
    }
}

/// How long the answer may be and how the model samples it (`None`: the model's default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InferenceSettings {
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Only the `top_k` likeliest tokens; set only for a model whose profile takes it ([`crate::ModelProfile::top_k`]).
    pub top_k: Option<u32>,
}

/// Which tools the model must or may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// It chooses whether to ask for tools.
    #[default]
    Auto,
    /// It answers without tools (they are not offered).
    None,
    /// It asks for at least one tool, any of them.
    Any,
    /// It asks for this tool.
    Tool(String),
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

/// One call to the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    pub model_id: String,
    pub system: String,
    pub messages: Vec<ModelMessage>,
    pub inference: InferenceSettings,
    pub guardrail: Option<crate::Guardrail>,
    /// Passages given to the model as search results beside the last user message, with citations on (native
    /// citations): the model cites them by position in this list ([`ModelEvent::Citation`]).
    pub search_results: Vec<crate::Passage>,
    /// Whether the model reasons first, and how it is asked to.
    pub reasoning: Option<crate::Reasoning>,
    /// Cache points after the system prompt and before the newest user message, so that the next turn reads the
    /// conversation so far from the model's prompt cache.
    pub prompt_caching: bool,
    pub latency: Option<crate::Latency>,
    pub service_tier: Option<crate::ServiceTier>,
    /// The passages the guardrail's contextual grounding check measures the answer against; with it, the last user
    /// message's last text is the check's query. `None` when there is no guardrail or no search.
    pub grounding_source: Option<String>,
    /// The tools the model may ask for (none: it is offered no tools).
    pub tools: Vec<ToolSpec>,
    /// Which message is the question (its search results, its guardrail query and the cache point before it go
    /// with it); `None`: the last user message that is not a round of tool results.
    pub question: Option<usize>,
    /// Which of `tools` the model must or may ask for ([`ToolChoice::None`] is never sent: the tools are then
    /// not offered).
    pub tool_choice: ToolChoice,
    /// Sequences that end the answer where the model would write them.
    pub stop_sequences: Vec<String>,
    /// The shape the answer's text must have (the model provider's structured output).
    pub response_format: ResponseFormat,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StopReason {
    #[default]
    EndTurn,
    StopSequence,
    MaxTokens,
    GuardrailIntervened,
    ContentFiltered,
    /// The conversation filled the model's context window.
    ContextWindowExceeded,
    /// The model asks for tools ([`ModelEvent::ToolUse`]) and waits for their results.
    ToolUse,
    Other(String),
}

/// The model's whole answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelReply {
    pub text: String,
    pub stop_reason: StopReason,
    pub usage: TokenUsage,
    /// Citations of the request's search results: after `text[..at]`, the result at `source` is cited. In order.
    pub citations: Vec<ReplyCitation>,
    /// What the model reasoned before it answered (empty when it did not).
    pub reasoning: String,
    /// Whether part of the reasoning came encrypted (redacted by the model provider).
    pub reasoning_redacted: bool,
    /// What the guardrail assessed, when one is configured.
    pub guardrail: Option<GuardrailTrace>,
    /// How the call was served.
    pub served: Served,
    /// The tools the model asks for, in order (with [`StopReason::ToolUse`]).
    pub tool_calls: Vec<ToolCall>,
    /// The reasoning as the model provider signed it, block by block (its text is `reasoning`'s); empty when the
    /// provider signed none.
    pub reasoning_blocks: Vec<ReasoningBlock>,
}

/// How Bedrock served a call: the latency setting and service tier it used (`None` when it did not say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    pub latency: Option<String>,
    pub service_tier: Option<String>,
}

/// What a guardrail assessed in a turn: each finding of its policies, never the text it matched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardrailTrace {
    /// The guardrail's own summary (`Guardrail blocked.`).
    pub action_reason: Option<String>,
    pub findings: Vec<GuardrailFinding>,
}

impl GuardrailTrace {
    /// Whether any finding blocked or masked something.
    pub fn intervened(&self) -> bool {
        self.findings
            .iter()
            .any(|f| !f.action.eq_ignore_ascii_case("none"))
    }
}

/// One finding of a guardrail policy: which policy, what it found, what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailFinding {
    /// `input` (the question) or `output` (the answer).
    pub stage: &'static str,
    /// `content`, `topic`, `word`, `sensitive_information`, `contextual_grounding`, `automated_reasoning`.
    pub policy: &'static str,
    /// The filter, topic or entity type (`VIOLENCE`, `GROUNDING`, `EMAIL`).
    pub kind: String,
    /// `BLOCKED`, `ANONYMIZED`, `NONE` …
    pub action: String,
    pub confidence: Option<String>,
    /// A contextual grounding score and the threshold it was held to.
    pub score: Option<f64>,
    pub threshold: Option<f64>,
}

/// A citation in a whole answer: where in the text, and which search result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyCitation {
    /// A byte offset into the reply's text (at a character boundary).
    pub at: usize,
    /// The position of the cited result in the request's `search_results`.
    pub source: usize,
}

/// What a streaming model call produces, in order: reasoning pieces, text pieces (with citations of the search
/// results after the text they support), then why it stopped, then the guardrail's assessment, how the call was
/// served, and the token usage.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of the model's reasoning, which comes before its answer.
    Reasoning(String),
    /// The reasoning block the pieces since the last signature make is complete, signed thus by the model provider
    /// (to give it back, unchanged, with the tool uses it led to).
    ReasoningSignature(String),
    /// Reasoning the model provider sent encrypted (its bytes, to give back as they came): there is nothing of it to
    /// show.
    RedactedReasoning(Vec<u8>),
    Text(String),
    /// The text so far cites the request's search result at this position.
    Citation(usize),
    /// The model asks for a tool, its input whole (after the text it wrote before asking).
    ToolUse(ToolCall),
    Stop(StopReason),
    /// What the guardrail assessed (with the answer's end).
    Guardrail(GuardrailTrace),
    /// How the call was served (with the answer's end).
    Served(Served),
    Usage(TokenUsage),
}

/// An answer arriving from the model; dropping it stops reading from the model.
pub trait ModelStream: Send {
    /// The next event; `None` once the model has finished. A model silent past the configured timeout (before its
    /// first text, or between two texts) is a [`ModelError::Timeout`], so a stream never hangs on it.
    fn next_event(&mut self)
    -> impl Future<Output = Result<Option<ModelEvent>, ModelError>> + Send;
}

/// A chat model. Implementations classify their faults into [`ModelError`].
pub trait ChatModel: Send + Sync {
    type Stream: ModelStream + 'static;

    /// The whole answer; a call that outlasts the configured timeout, retries included, is a [`ModelError::Timeout`].
    fn converse(
        &self,
        request: &ModelRequest,
    ) -> impl Future<Output = Result<ModelReply, ModelError>> + Send;

    /// Starts a streamed answer; faults before the answer starts are returned here.
    fn converse_stream(
        &self,
        request: &ModelRequest,
    ) -> impl Future<Output = Result<Self::Stream, ModelError>> + Send;

    /// The input tokens `request` holds, counted exactly by the foundation model `counter` (its system prompt and
    /// messages, as [`ChatModel::converse`] would send them); `None` when that model cannot count. Bounded by the
    /// configured timeout, like every model call.
    fn count_tokens(
        &self,
        counter: &str,
        request: &ModelRequest,
    ) -> impl Future<Output = Result<Option<u64>, ModelError>> + Send;
}

/// A whole reply read as a stream, so that a buffered answer takes the streamed answer's steps.
pub struct ReplyStream {
    events: VecDeque<ModelEvent>,
}

impl ReplyStream {
    pub(crate) fn new(reply: ModelReply) -> Self {
        let mut events = VecDeque::with_capacity(6 + 2 * reply.citations.len());
        let redacted_block = reply.reasoning_blocks.iter().any(|b| b.redacted.is_some());
        if reply.reasoning_blocks.is_empty() {
            if !reply.reasoning.is_empty() {
                events.push_back(ModelEvent::Reasoning(reply.reasoning));
            }
        } else {
            for block in reply.reasoning_blocks {
                if !block.text.is_empty() {
                    events.push_back(ModelEvent::Reasoning(block.text));
                }
                if let Some(signature) = block.signature {
                    events.push_back(ModelEvent::ReasoningSignature(signature));
                }
                if let Some(bytes) = block.redacted {
                    events.push_back(ModelEvent::RedactedReasoning(bytes));
                }
            }
        }
        if reply.reasoning_redacted && !redacted_block {
            events.push_back(ModelEvent::RedactedReasoning(Vec::new()));
        }
        let mut from = 0;
        for citation in &reply.citations {
            let at = citation.at.clamp(from, reply.text.len());
            if let Some(text) = reply.text.get(from..at).filter(|t| !t.is_empty()) {
                events.push_back(ModelEvent::Text(text.to_string()));
            }
            events.push_back(ModelEvent::Citation(citation.source));
            from = at;
        }
        if let Some(rest) = reply.text.get(from..).filter(|t| !t.is_empty()) {
            events.push_back(ModelEvent::Text(rest.to_string()));
        }
        events.extend(reply.tool_calls.into_iter().map(ModelEvent::ToolUse));
        events.push_back(ModelEvent::Stop(reply.stop_reason));
        if let Some(trace) = reply.guardrail {
            events.push_back(ModelEvent::Guardrail(trace));
        }
        events.push_back(ModelEvent::Served(reply.served));
        events.push_back(ModelEvent::Usage(reply.usage));
        Self { events }
    }
}

impl ModelStream for ReplyStream {
    async fn next_event(&mut self) -> Result<Option<ModelEvent>, ModelError> {
        Ok(self.events.pop_front())
    }
}
