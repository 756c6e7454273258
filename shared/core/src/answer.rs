//! A standard turn's entry points: its one speaker's answer streamed, or answered whole (the streamed answer,
//! collected), and the turn stored once the answer is complete.

use crate::call::Call;
use crate::prompt::{Speaker, system_prompt};
use crate::turn::Turn;
use crate::{
    Answer, Caller, ChatError, ChatMode, ChatModel, ChatService, ModelStream, ReplyStream,
    SessionStore, StreamingTurn, TurnInput,
};

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let (turn, call) = self.prepare_standard(caller, input).await?;
        self.stream_prepared(turn, call).await
    }

    /// Starts the streamed answer of a prepared turn's call ([`Self::stream`]).
    pub(crate) async fn stream_prepared(
        &self,
        mut turn: Turn,
        call: Call,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
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
        let (turn, call) = self.prepare_standard(caller, input).await?;
        self.answer_prepared(caller, turn, call).await
    }

    /// Answers a prepared turn's call in full, and stores the turn ([`Self::answer`]).
    pub(crate) async fn answer_prepared(
        &self,
        caller: &Caller,
        turn: Turn,
        call: Call,
    ) -> Result<Answer, ChatError> {
        let answer = self.whole_prepared(turn, call).await?;
        self.collect(caller, answer).await
    }

    /// Starts an answer made whole by the model (Converse, not its stream), to read as a stream: what a buffered
    /// route reads to its end, then hands to [`Self::save_answered`] ([`Self::answer`] in steps).
    pub async fn whole(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<StreamingTurn<ReplyStream>, ChatError> {
        let (turn, call) = self.prepare_standard(caller, input).await?;
        self.whole_prepared(turn, call).await
    }

    /// The whole answer of a prepared turn's call, read as a stream ([`Self::whole`]).
    pub(crate) async fn whole_prepared(
        &self,
        mut turn: Turn,
        call: Call,
    ) -> Result<StreamingTurn<ReplyStream>, ChatError> {
        let first = self.model.converse(&call.request);
        let reply = turn
            .account
            .start_or_close(&call.request, Some(call.prompt_tokens), first)
            .await?;
        let thoughts = [turn.thoughts.clone(), call.thoughts.clone()].concat();
        // The driver reads the reply as it reads a stream, and notes what it spent.
        let first = (ReplyStream::new(reply), self.reply_starter());
        Ok(StreamingTurn::new(turn, call, first, thoughts))
    }

    /// A standard turn prepared, and its one speaker's call made ready.
    async fn prepare_standard(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<(Turn, Call), ChatError> {
        let hint = system_prompt(&self.settings, input, self.retriever.is_some());
        let turn = self
            .prepare(caller, input, (ChatMode::Standard, &hint))
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
        self.save_answered(caller, turn, end).await
    }

    /// Stores a turn whose answer was read to its `end` ([`StreamingTurn::next`] gave it), and returns the whole
    /// answer; a turn that is not stored has still spent (its account is settled either way).
    pub async fn save_answered<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
        end: crate::TurnEnd,
    ) -> Result<Answer, ChatError> {
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
