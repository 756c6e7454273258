//! One chat turn, written once, and its entry points: prepare (`prepare.rs`) → ask the model through the turn
//! driver (`streaming.rs`, `driver.rs`) → shape the answer → store the turn (`save.rs`). The buffered answer takes
//! the streamed path's steps: it is the streamed answer, collected.

use time::OffsetDateTime;
use time::macros::format_description;

use crate::driver::TurnTools;
use crate::{
    Answer, Caller, ChatError, ChatModel, ChatService, FinishReason, Grounding, ModelError,
    ModelRequest, ModelStream, Prices, ReplyStream, Session, SessionStore, StopReason,
    StreamingTurn, Thought, TurnInput,
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

/// A turn ready for the model: its chat, the model call, and what the steps before the model did.
pub(crate) struct Turn {
    pub session: Session,
    pub header: TurnHeader,
    pub request: ModelRequest,
    /// The thoughts known before the answer, in the order the steps happened.
    pub thoughts: Vec<Thought>,
    /// Whether the answer ends in follow-up questions to cut out.
    pub followups: bool,
    /// What the search found, when the turn searched.
    pub grounding: Option<Grounding>,
    /// What a million tokens cost, to price the turn.
    pub prices: Option<Prices>,
    /// What the turn spent before the answer (writing the search query).
    pub spent_before: crate::TurnSpent,
    /// The prompt's tokens, counted when it was counted, else estimated: what an answer cut off before the model
    /// reported its usage is taken to have read.
    pub prompt_tokens: u64,
    /// The tools the model is offered, and who they run for.
    pub tools: Option<TurnTools>,
    /// The turn's account with its owner's counters, opened by its admission.
    pub account: crate::TurnAccount,
}
impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let mut turn = self.prepare(caller, input).await?;
        let call = self.model.converse_stream(&turn.request);
        let model_stream = turn
            .account
            .start_or_close(&turn.request, Some(turn.prompt_tokens), call)
            .await?;
        let mut streaming = StreamingTurn::new(turn, model_stream, self.stream_starter());
        if let Err(e) = streaming.prime().await {
            streaming.close_unfinished().await;
            return Err(e);
        }
        Ok(streaming)
    }

    /// Answers a validated request in full, and stores the turn before returning it.
    pub async fn answer(&self, caller: &Caller, input: &TurnInput) -> Result<Answer, ChatError> {
        let mut turn = self.prepare(caller, input).await?;
        let call = self.model.converse(&turn.request);
        let reply = turn
            .account
            .start_or_close(&turn.request, Some(turn.prompt_tokens), call)
            .await?;
        // The driver reads the reply as it reads a stream, and notes what it spent.
        self.collect(
            caller,
            StreamingTurn::new(turn, ReplyStream::new(reply), self.reply_starter()),
        )
        .await
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
        let (answer, parts) = turn.into_answer(end);
        self.save(&caller.owner, parts).await?;
        Ok(answer)
    }

    /// Stores a streamed turn whose answer has been shown whole; returns what the turn spent.
    pub async fn save_streamed<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<crate::TurnSpent, ChatError> {
        let parts = turn.into_parts();
        let turn_spent = parts.turn_spent;
        self.save(&caller.owner, parts).await?;
        Ok(turn_spent)
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
