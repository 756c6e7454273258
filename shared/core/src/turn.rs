//! One chat turn, written once, and its entry points: prepare (`prepare.rs`) → each speaker's call made ready
//! (`speaker.rs`) → its answer through the turn driver (`streaming.rs`, `driver.rs`) → store the turn (`save.rs`).
//! The buffered answer takes the streamed path's steps: it is the streamed answer, collected; a multi-agent round
//! (`agents.rs`) takes them for each agent's message.

use time::OffsetDateTime;
use time::macros::format_description;

use crate::driver::TurnTools;
use crate::save::stored_message;
use crate::speaker::Speaker;
use crate::streaming::Finished;
use crate::{
    Answer, Caller, ChatError, ChatModel, ChatService, FinishReason, Grounding, ModelError,
    ModelStream, Prices, ReplyStream, Role, Session, SessionStore, StopReason, StoredMessage,
    StreamingTurn, Thought, TokenUsage, TurnInput, display_time,
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

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let (mut turn, call) = self.prepare_standard(caller, input).await?;
        let first = self.model.converse_stream(&call.request);
        let first = turn
            .account
            .start_or_close(&call.request, Some(call.prompt_tokens), first)
            .await?;
        let thoughts = [turn.thoughts.clone(), call.thoughts.clone()].concat();
        let mut streaming =
            StreamingTurn::new(turn, call, (first, self.stream_starter()), thoughts);
        if let Err(e) = streaming.prime().await {
            streaming.close_unfinished().await;
            return Err(e);
        }
        Ok(streaming)
    }

    /// Answers a validated request in full, and stores the turn before returning it.
    pub async fn answer(&self, caller: &Caller, input: &TurnInput) -> Result<Answer, ChatError> {
        let (mut turn, call) = self.prepare_standard(caller, input).await?;
        let first = self.model.converse(&call.request);
        let reply = turn
            .account
            .start_or_close(&call.request, Some(call.prompt_tokens), first)
            .await?;
        let thoughts = [turn.thoughts.clone(), call.thoughts.clone()].concat();
        // The driver reads the reply as it reads a stream, and notes what it spent.
        let first = (ReplyStream::new(reply), self.reply_starter());
        self.collect(caller, StreamingTurn::new(turn, call, first, thoughts))
            .await
    }

    /// A standard turn prepared, and its one speaker's call made ready.
    async fn prepare_standard(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<(Turn, crate::speaker::Call), ChatError> {
        let hint = crate::prompt::system_prompt(&self.settings, input, self.retriever.is_some());
        let turn = self
            .prepare(caller, input, (crate::ChatMode::Standard, &hint))
            .await?;
        let speaker = Speaker::standard(&self.settings, input, turn.grounding.is_some());
        let call = self.speak(&turn, input, speaker).await;
        Ok((turn, call))
    }

    /// Reads a turn's whole answer, then stores the turn; a turn that fails on the way is closed with what it spent.
    pub async fn collect<S: ModelStream>(
        &self,
        caller: &Caller,
        mut turn: StreamingTurn<S>,
    ) -> Result<Answer, ChatError> {
        let end = match turn.read_to_end().await {
            Ok(end) => end,
            Err(e) => {
                turn.close_unfinished().await;
                return Err(e);
            }
        };
        let (answer, mut turn) = turn.into_answer(end);
        self.save(&caller.owner, &mut turn, None).await?;
        Ok(answer)
    }

    /// Stores a streamed turn whose answer has been shown whole; returns what the turn spent.
    pub async fn save_streamed<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<crate::TurnSpent, ChatError> {
        let (_, mut turn) = turn.finish();
        let spent = turn.spent();
        self.save(&caller.owner, &mut turn, None).await?;
        Ok(spent)
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
