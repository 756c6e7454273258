//! A turn as its steps hand it on, whoever answers it: the chat and conversation, what was answered so far and
//! each answer as stored, and what identifies an answer. The steps: prepare (`prepare.rs`) → each speaker's call
//! made ready (`call.rs`) → its answer through the turn driver (`streaming.rs`, `driver.rs`) → store the turn
//! (`save.rs`); the entry points in `answer.rs` and `agents.rs`.

use time::OffsetDateTime;
use time::macros::format_description;

use crate::driver::TurnTools;
use crate::prompt::Speaker;
use crate::{
    ChatError, FinishReason, Grounding, ModelError, Prices, Role, Session, StopReason,
    StoredMessage, Thought, TokenUsage, ToolExchange, display_time,
};

/// What identifies one answer: its id, when it was made, and by which model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnHeader {
    pub id: String,
    /// Unix seconds.
    pub created: i64,
    /// The same instant as RFC 3339.
    pub created_at: String,
    pub model: String,
}

impl TurnHeader {
    pub(crate) fn new(model: &str) -> Self {
        let now = OffsetDateTime::now_utc();
        Self {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: now.unix_timestamp(),
            created_at: rfc3339(now),
            model: model.to_string(),
        }
    }
}

/// A turn, whoever answers it: its chat and the conversation so far (who said what, fitted to the prompt budget,
/// files read), the tools offered, what the search found, the thoughts of the steps before any answer, its account
/// with the owner's counters, and what was answered so far (to store once the turn is over).
pub(crate) struct Turn {
    /// The route's settings, grounding and tools the turn answers under.
    pub scope: Scope,
    pub session: Session,
    /// Whether the budget cut the chat's history before any answer (a prompt cache then wants the cut in steps).
    pub cut: bool,
    /// The tools the model is offered, and who they run for.
    pub tools: Option<TurnTools>,
    /// What the search found, when the turn searched.
    pub grounding: Option<Grounding>,
    /// The thoughts known before any answer, in the order the steps happened.
    pub thoughts: Vec<Thought>,
    /// What a million tokens cost, to price the turn.
    pub prices: Option<Prices>,
    /// What the turn spent before its answers (writing the search query).
    pub spent_before: crate::TurnSpent,
    /// The turn's account with its owner's counters, opened by its admission.
    pub account: crate::TurnAccount,
    /// The answers so far, as they are stored, each with what its model calls used.
    pub said: Vec<(StoredMessage, TokenUsage)>,
    /// The tool calls its answers ran.
    pub tool_calls: u32,
    /// The signed reasoning of an answer that ended in the client's tool calls, under the first call's id: kept
    /// in the store when the turn is saved, to give back to the model when the client continues.
    pub kept_reasoning: Option<(String, Vec<crate::ReasoningBlock>)>,
}

/// What a turn's route decides beyond its request: the settings it answers under when not the service's (a
/// completion's model and instructions), whether the knowledge base grounds it, whether the server's tools are
/// offered, and what a stateless completion adds.
pub(crate) struct Scope {
    pub own: Option<Box<crate::ChatSettings>>,
    pub retrieval: bool,
    pub server_tools: bool,
    pub completion: Option<Box<crate::completion::Plan>>,
}

impl Scope {
    /// The protocol routes': the service's settings, its search and its tools, as configured.
    pub(crate) fn standard() -> Self {
        Self {
            own: None,
            retrieval: true,
            server_tools: true,
            completion: None,
        }
    }

    /// The settings the turn answers under.
    pub(crate) fn settings<'a>(
        &'a self,
        service: &'a crate::ChatSettings,
    ) -> &'a crate::ChatSettings {
        self.own.as_deref().unwrap_or(service)
    }

    /// The names of the client's tools the model is offered.
    pub(crate) fn client_tool_names(&self) -> impl Iterator<Item = String> + '_ {
        self.completion
            .iter()
            .flat_map(|plan| plan.tools.iter().map(|t| t.name.clone()))
    }
}

impl Turn {
    /// Adds an answer that finished to what the turn stores: a standard answer under a new id, an agent's message
    /// under its answer's id and its name, each with its tool calls.
    pub(crate) fn say(&mut self, finished: &Finished) {
        let shown_at = display_time(OffsetDateTime::now_utc().unix_timestamp());
        let mut message = stored_message(Role::Assistant, &finished.text, &shown_at);
        if let Some(name) = &finished.speaker.name {
            message.id = finished.header.id.clone();
            message.agent_identifier = Some(name.clone());
            message.agent_name = Some(name.clone());
        }
        message.tools = finished.tools.clone();
        self.said.push((message, finished.usage));
        self.tool_calls += finished.calls_run;
    }

    /// Every model call and tool call of the turn so far.
    pub(crate) fn spent(&self) -> crate::TurnSpent {
        crate::TurnSpent {
            totals: self.account.spent(),
            model_calls: self.account.calls(),
            tool_calls: self.spent_before.tool_calls + self.tool_calls,
        }
    }
}

/// A guardrail or filter that stopped the model is the client's 400, not an answer.
pub(crate) fn finish_reason(stop: &StopReason) -> Result<FinishReason, ChatError> {
    match stop {
        StopReason::GuardrailIntervened | StopReason::ContentFiltered => {
            Err(ChatError::ContentFiltered)
        }
        StopReason::ContextWindowExceeded => Err(ModelError::InputTooLong(
            "the model stopped: context window exceeded".into(),
        )
        .into()),
        StopReason::MaxTokens => Ok(FinishReason::Length),
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::Other(_) => Ok(FinishReason::Stop),
    }
}
/// RFC 3339 with milliseconds, as the history API shows times (`2023-04-05T14:48:00.000Z`).
pub fn rfc3339_millis(t: OffsetDateTime) -> String {
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    ))
    .unwrap_or_default()
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second]+00:00"
    ))
    .unwrap_or_default()
}

/// What an answer finished with, to store and to tell.
pub(crate) struct Finished {
    pub speaker: Speaker,
    pub header: TurnHeader,
    /// The answer as shown.
    pub text: String,
    /// Every model call of the answer's usage, added up.
    pub usage: TokenUsage,
    pub model_calls: u32,
    pub calls_run: u32,
    pub tools: Vec<ToolExchange>,
    pub tool_thoughts: Vec<Thought>,
    /// What the answer is grounded in: the turn's search and what its tools found.
    pub grounding: Option<Grounding>,
    pub reasoning: String,
    pub reasoning_redacted: bool,
    /// Whether the answer's deadline cut it off.
    pub timed_out: bool,
    /// The client's tools the model asks for (a stateless completion's answer).
    pub tool_calls: Vec<crate::ToolCall>,
}

/// A new message id: 32 hex characters.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A message to store, with a new id; `shown_at` is its time as the Chat UI shows it ([`display_time`]).
pub(crate) fn stored_message(role: Role, content: &str, shown_at: &str) -> StoredMessage {
    StoredMessage::new(new_message_id(), role, content, shown_at)
}

/// The session's new messages, ready to store.
pub(crate) fn new_stored_messages(session: &Session, shown_at: &str) -> Vec<StoredMessage> {
    session
        .new_messages
        .iter()
        .map(|m| stored_message(m.role, &m.text(), shown_at))
        .collect()
}
