//! The model port: what the core asks of a chat model, in its own terms.

use std::collections::VecDeque;
use std::future::Future;

use crate::{ModelError, Role, TokenUsage};

/// A message as the model gets it: consecutive messages of one role are one message with several text blocks,
/// because models want the roles to alternate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelMessage {
    pub role: Role,
    pub texts: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InferenceSettings {
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
}

/// One call to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub model_id: String,
    pub system: String,
    pub messages: Vec<ModelMessage>,
    pub inference: InferenceSettings,
    pub guardrail: Option<crate::Guardrail>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    StopSequence,
    MaxTokens,
    GuardrailIntervened,
    ContentFiltered,
    /// The conversation filled the model's context window.
    ContextWindowExceeded,
    Other(String),
}

/// The model's whole answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub text: String,
    pub stop_reason: StopReason,
    pub usage: TokenUsage,
}

/// What a streaming model call produces, in order: text pieces, then why it stopped, then the token usage.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Text(String),
    Stop(StopReason),
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
}

/// A whole reply read as a stream, so that a buffered answer takes the streamed answer's steps.
pub(crate) struct ReplyStream {
    events: VecDeque<ModelEvent>,
}

impl ReplyStream {
    pub(crate) fn new(reply: ModelReply) -> Self {
        let mut events = VecDeque::with_capacity(3);
        if !reply.text.is_empty() {
            events.push_back(ModelEvent::Text(reply.text));
        }
        events.push_back(ModelEvent::Stop(reply.stop_reason));
        events.push_back(ModelEvent::Usage(reply.usage));
        Self { events }
    }
}

impl ModelStream for ReplyStream {
    async fn next_event(&mut self) -> Result<Option<ModelEvent>, ModelError> {
        Ok(self.events.pop_front())
    }
}
