//! What a turn of a dialect whose client keeps the conversation (OpenAI's Chat Completions today; Anthropic's
//! Messages and OpenAI's Responses to come) adds to the core's turn, in the model's terms rather than one dialect's:
//! the client's system blocks and model, sampling, the answer's length, how the model thinks, the client's tools
//! (the model asks, the client runs them) and the choice among them, stop sequences, the answer's format, and that
//! nothing is stored. The conversation itself is the core's ([`crate::Message`]): a client's tool call and its
//! result are a [`crate::ContentPart::Tool`] of the assistant message that asked. [`Plan`] is what a completion
//! adds to each of its model calls.

use std::collections::HashMap;

use crate::{
    ModelProfile, ModelRequest, ReasoningBlock, ReasoningEffort, ReasoningStyle, ResponseFormat,
    Role, ToolChoice, ToolSpec,
};

/// A stateless turn's own request, beside its [`crate::TurnInput`] (whose `messages` are the whole conversation
/// the client sent, and whose new chat is never stored).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The client's system prompt, block by block in order (OpenAI's `system` and `developer` messages, Anthropic's
    /// `system` text blocks, Responses' `instructions`): joined with a blank line between blocks, it replaces the
    /// configured system prompt. Empty: the configured one.
    pub system: Vec<String>,
    /// The model to answer with, one the operator allows; `None`: the configured default.
    pub model_id: Option<String>,
    pub sampling: Sampling,
    /// The most tokens the answer may hold, its thinking budget aside; `None`: the configured default.
    pub max_output_tokens: Option<u32>,
    /// How the model thinks before it answers; `None`: as configured.
    pub thinking: Option<Thinking>,
    /// The client's tools: the model may ask for them, the client runs them and sends their results back.
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    /// Whether the model may ask for several tools in one answer.
    pub parallel_tool_calls: bool,
    /// Sequences that end the answer where the model writes them (not part of the answer).
    pub stop_sequences: Vec<String>,
    /// The shape the answer's text must have (structured output).
    pub response_format: ResponseFormat,
    /// The end user the client names, recorded in the turn's trace.
    pub user: Option<String>,
    /// Whether the client keeps the model's signed reasoning itself (Anthropic's Messages: its thinking blocks come
    /// in the answer, each told as it completes, [`crate::TurnEvent::ReasoningBlock`], and go back with the tool
    /// uses they led to, unchanged): the backend keeps none, and [`Self::reasoning`] is what the client gave back.
    pub client_keeps_reasoning: bool,
    /// The signed reasoning the client gave back, under the id of the first tool call of the assistant message it
    /// came with.
    pub reasoning: HashMap<String, Vec<ReasoningBlock>>,
}

impl Default for Completion {
    fn default() -> Self {
        Self {
            system: Vec::new(),
            model_id: None,
            sampling: Sampling::default(),
            max_output_tokens: None,
            thinking: None,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            stop_sequences: Vec::new(),
            response_format: ResponseFormat::Text,
            user: None,
            client_keeps_reasoning: false,
            reasoning: HashMap::new(),
        }
    }
}

impl Completion {
    /// The system prompt the client's blocks make, when it sent any.
    pub fn system_prompt(&self) -> Option<String> {
        (!self.system.is_empty()).then(|| self.system.join("\n\n"))
    }

    /// Fits the completion to what its model takes, rather than have the model refuse it: `top_p` left out when
    /// the model takes `temperature` or `top_p` and both came (`temperature` wins: it is the one clients set on
    /// purpose, `top_p` a default they copy); `top_k` left out for a model that takes none; the answer's length
    /// held to the model's output limit (less the thinking budget of a Claude that thinks within one) and the
    /// operator's `ceiling` (`MAX_OUTPUT_TOKENS`, when set). What changed,
    /// as the answer names it to the client: a parameter left out by its name, a length held by `name=tokens`.
    pub fn fit(&mut self, profile: &ModelProfile, ceiling: Option<u32>) -> Vec<String> {
        let mut changed = Vec::new();
        let sampling = &mut self.sampling;
        if profile.temperature_or_top_p
            && sampling.temperature.is_some()
            && sampling.top_p.is_some()
        {
            sampling.top_p = None;
            changed.push("top_p".to_string());
        }
        if !profile.top_k && sampling.top_k.take().is_some() {
            changed.push("top_k".to_string());
        }
        // Claude of a thinking budget thinks within the answer's tokens: the budget is added to what the client
        // asked for, so the two together stay within the model's limit.
        let thinking = match (profile.reasoning, self.thinking) {
            (ReasoningStyle::AnthropicBudget, Some(Thinking::Effort(effort))) => {
                effort.budget_tokens()
            }
            (ReasoningStyle::AnthropicBudget, Some(Thinking::Budget(tokens))) => tokens,
            _ => 0,
        };
        let model_limit = profile.max_output_tokens.saturating_sub(thinking).max(1);
        let limit = ceiling.map_or(model_limit, |c| c.min(model_limit));
        if let Some(tokens) = self.max_output_tokens.as_mut()
            && *tokens > limit
        {
            *tokens = limit;
            changed.push(format!("max_tokens={limit}"));
        }
        changed
    }
}

/// How the model picks its next token; `None` in each: the model's default (or the configured one).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sampling {
    /// From 0 to 1.
    pub temperature: Option<f64>,
    /// Nucleus sampling: only the likeliest tokens whose probabilities add up to this.
    pub top_p: Option<f64>,
    /// Only the `top_k` likeliest tokens (the models whose profile says they take it).
    pub top_k: Option<u32>,
}

/// How the model thinks before it answers, when the client says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// It answers without thinking first, whatever is configured.
    Off,
    /// It thinks this hard (each model family as its style takes an effort).
    Effort(ReasoningEffort),
    /// It thinks within this many tokens: the budget itself for a model that takes one, the nearest effort for a
    /// model that takes an effort.
    Budget(u32),
}

/// The least thinking budget a model takes (Anthropic's bound).
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// What a completion adds to each of its model calls.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The client's tools the model is offered (none with [`ToolChoice::None`]).
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    /// Whether the model may ask for several client tools in one answer (otherwise only its first call is
    /// returned: Converse has no field that says so for every model).
    pub parallel: bool,
    pub stop: Vec<String>,
    /// Sampling among the likeliest tokens only, for a model that takes it.
    pub top_k: Option<u32>,
    pub response_format: ResponseFormat,
    /// The signed reasoning kept for an earlier answer's client calls, under its first call's id.
    pub reasoning: HashMap<String, Vec<ReasoningBlock>>,
    /// Whether the client keeps the reasoning ([`Completion::client_keeps_reasoning`]): each block is told as it
    /// completes, and none is kept by the backend.
    pub client_keeps_reasoning: bool,
}

impl Plan {
    /// Adds the completion's own to a model call: the client's tools after the server's, the tool choice when
    /// tools are offered, the stop sequences, `top_k` unless Claude thinks (it then takes no sampling settings), the
    /// answer format, and the kept reasoning before the tool uses it led to (while the model reasons).
    pub(crate) fn apply(&self, request: &mut ModelRequest) {
        request.tools.extend(self.tools.iter().cloned());
        if !request.tools.is_empty() {
            request.tool_choice = self.tool_choice.clone();
        }
        request.stop_sequences = self.stop.clone();
        let claude_thinks = request.reasoning.is_some_and(|r| {
            matches!(
                r.style,
                ReasoningStyle::AnthropicBudget | ReasoningStyle::AnthropicAdaptive
            )
        });
        if !claude_thinks {
            request.inference.top_k = self.top_k;
        }
        request.response_format = self.response_format.clone();
        if request.reasoning.is_some() {
            for message in request
                .messages
                .iter_mut()
                .filter(|m| m.role == Role::Assistant)
            {
                if let Some(blocks) = message
                    .tool_uses
                    .first()
                    .and_then(|call| self.reasoning.get(&call.id))
                {
                    message.reasoning = blocks.clone();
                }
            }
        }
    }
}
