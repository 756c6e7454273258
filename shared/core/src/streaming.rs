//! One answer of a turn, streamed, whoever speaks it: the model's text passes through as it comes (through the turn
//! driver's rounds, with the tools' thoughts as they happen), follow-up questions are held back, and the end carries
//! what only the end knows (why it stopped, token usage, the questions).

use std::collections::VecDeque;

use crate::call::Call;
use crate::driver::{DriverEvent, RoundDriver, RoundStarter};
use crate::prompt::Speaker;
use crate::thoughts::{guardrail_thought, reasoning_text, reasoning_thought, usage_thought};
use crate::turn::{Finished, Turn, finish_reason};
use crate::{
    Answer, ChatError, DataPoints, FinishReason, FollowupSplitter, Grounding, ModelError,
    ModelStream, Prices, Session, Thought, TokenUsage, ToolExchange, TurnHeader, UsageTotals,
};

/// What a streaming turn yields.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A piece of the model's reasoning to show now (never empty), before the answer's text: never part of it.
    Reasoning(String),
    /// The model's reasoning goes on, encrypted by its provider: there is nothing to show but the note that it is
    /// redacted (this text; after reasoning shown, it starts on a paragraph of its own, as the whole reasoning has it).
    RedactedReasoning(String),
    /// A block of the reasoning is complete: the pieces since the last block, as the model provider signed them,
    /// or reasoning it sent encrypted (its bytes). Told only to a completion whose client keeps the reasoning
    /// ([`crate::Completion::client_keeps_reasoning`]), to give it back unchanged with the tool uses it led to.
    ReasoningBlock(crate::ReasoningBlock),
    /// Text to show now (never empty).
    Text(String),
    /// What the answer is grounded in grew (a tool found passages): all of it so far, told just before the thought of
    /// the tool's result.
    Found(DataPoints),
    /// A thought to show now: a tool call as the model asks for it, or its result as it arrives.
    Thought(Thought),
    /// The model asks for a tool of the client's (a stateless completion's), as the call arrives whole: the answer
    /// ends with [`FinishReason::ToolCalls`] once the model's round does.
    ToolCall(crate::ToolCall),
    /// The answer is complete; this is the last event.
    End(TurnEnd),
}

/// What is known once the answer is complete.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub finish_reason: FinishReason,
    pub usage: TokenUsage,
    /// What the turn cost, when prices are known.
    pub cost_usd: Option<f64>,
    /// `Some` when the request asked for follow-up questions.
    pub followup_questions: Option<Vec<String>>,
    pub result_thoughts: Vec<Thought>,
    /// The passages the answer cited, by name, in the order first cited.
    pub citations: Vec<String>,
    /// Whether the model stopped at one of the request's stop sequences (a [`FinishReason::Stop`] that a dialect
    /// may tell apart, as Anthropic's `stop_sequence` does).
    pub stop_sequence: bool,
}

/// What a streamed answer tells before its first event: what identifies it, the thoughts known before it (the
/// prompt, and the search when there is one), what the search found, and the chat's session state.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOpening {
    pub header: TurnHeader,
    pub thoughts: Vec<Thought>,
    pub data_points: Option<DataPoints>,
    pub session_state: Option<serde_json::Value>,
}

/// A turn's answer, streamed: one speaker's, through the turn driver's rounds over the turn's prepared conversation.
pub struct StreamingTurn<S> {
    pub header: TurnHeader,
    /// The thoughts known before the answer (the prompt, and the search when there is one).
    pub thoughts: Vec<Thought>,
    driver: RoundDriver<S>,
    /// The turn this answer belongs to (its account is the driver's while it answers).
    turn: Turn,
    speaker: Speaker,
    /// Everything shown so far: what the turn stores as the answer.
    shown: String,
    splitter: Option<FollowupSplitter>,
    ready: VecDeque<TurnEvent>,
    prices: Option<Prices>,
    /// How many passages the client has been told of ([`TurnEvent::Found`]); `None` while the answer is grounded in
    /// nothing.
    passages_told: Option<usize>,
}

impl<S: ModelStream> StreamingTurn<S> {
    /// `speaker`'s answer to `turn` through the call made ready for it, whose first round `first` answers; `thoughts`
    /// are what the answer tells before it.
    pub(crate) fn new(
        mut turn: Turn,
        call: Call,
        (first, start): (S, RoundStarter<S>),
        thoughts: Vec<Thought>,
    ) -> Self {
        let account = turn.account.take();
        let mut driver = RoundDriver::new(
            call.request,
            first,
            start,
            call.tools,
            turn.grounding.clone(),
            (account, call.prompt_tokens),
        );
        if let Some(plan) = &turn.scope.completion {
            driver.client_tools(turn.scope.client_tool_names().collect(), !plan.parallel);
            if plan.client_keeps_reasoning {
                driver.tell_reasoning_blocks();
            }
        }
        Self {
            header: call.header,
            thoughts,
            driver,
            splitter: call.speaker.followups.then(FollowupSplitter::new),
            speaker: call.speaker,
            prices: turn.prices,
            passages_told: turn.grounding.as_ref().map(|g| g.passages.len()),
            turn,
            shown: String::new(),
            ready: VecDeque::new(),
        }
    }

    /// What the answer tells before its first event ([`TurnOpening`]). It takes the thoughts it tells: an
    /// [`Answer`] made of this turn afterwards holds only those of its answer.
    pub fn opening(&mut self) -> TurnOpening {
        // It tells all that was found so far: what a tool found while the answer was started is not told again.
        self.ready
            .retain(|event| !matches!(event, TurnEvent::Found(_)));
        self.passages_told = self.driver.grounding.as_ref().map(|g| g.passages.len());
        TurnOpening {
            header: self.header.clone(),
            thoughts: std::mem::take(&mut self.thoughts),
            data_points: self.data_points(),
            session_state: self.session().state(),
        }
    }

    /// Stops the answer at `deadline` with what it has ([`RoundDriver::end_by`]).
    pub(crate) fn end_by(&mut self, deadline: Option<tokio::time::Instant>) {
        self.driver.end_by(deadline);
    }

    /// The answer ends before it starts: its deadline came before its first call did (which is noted as it may
    /// have spent).
    pub(crate) fn time_up_unstarted(&mut self) {
        self.driver.time_up_unstarted();
    }

    /// What the answer is grounded in so far: the search before it, and what its tools have found; `None` when it
    /// has searched nothing.
    pub fn data_points(&self) -> Option<DataPoints> {
        self.driver.grounding.as_ref().map(Grounding::data_points)
    }

    /// The chat this turn belongs to.
    pub fn session(&self) -> &Session {
        &self.turn.session
    }

    /// The answer as shown so far (all of it, once [`TurnEvent::End`] has been yielded).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The tools the answer called so far, with their results.
    pub fn tool_exchanges(&self) -> &[ToolExchange] {
        &self.driver.exchanges
    }

    /// Every model call and tool call of the turn: its answers' rounds and those before them.
    fn turn_spent(&self) -> crate::TurnSpent {
        crate::TurnSpent {
            totals: self.driver.account.spent(),
            model_calls: self.driver.account.calls(),
            tool_calls: self.turn.tool_calls + self.driver.calls_run,
        }
    }

    /// What the turn has spent so far: exactly, for each round the model reported its usage; for a round cut off
    /// before that, the prompt's tokens and an estimate of what the model wrote and reasoned.
    pub fn spent_so_far(&self) -> crate::TurnSpent {
        let mut spent = self.turn_spent();
        if let Some(usage) = self.driver.unreported() {
            spent.add_call(usage, self.prices.as_ref());
        }
        spent
    }

    /// Ends a turn that stops before its answer is complete (its client went away, or it failed on the way): what
    /// it spent so far, the round cut off estimated, is settled with its owner's counters and its reservation
    /// released. Without this the reservation stays counted until the period ends.
    pub async fn close_unfinished(&mut self) {
        self.driver.cut_off();
        self.driver.account.close().await;
    }

    /// The answer's tokens and, when prices are known, their cost: priced here only.
    fn spent(&self) -> UsageTotals {
        UsageTotals::of(self.driver.usage(), self.prices.as_ref())
    }

    /// Reads from the model until there is something to yield.
    pub(crate) async fn prime(&mut self) -> Result<(), ChatError> {
        while self.ready.is_empty() && !self.driver.is_done() {
            self.pull().await?;
        }
        Ok(())
    }

    /// The next event; `None` after [`TurnEvent::End`]. An error ends the turn.
    pub async fn next(&mut self) -> Result<Option<TurnEvent>, ChatError> {
        self.prime().await?;
        let event = self.ready.pop_front();
        if let Some(TurnEvent::Text(text)) = &event {
            self.shown.push_str(text);
        }
        Ok(event)
    }

    /// Reads the answer to its end; an error ends the turn (the caller closes it).
    pub(crate) async fn read_to_end(&mut self) -> Result<TurnEnd, ChatError> {
        while let Some(event) = self.next().await? {
            if let TurnEvent::End(end) = event {
                return Ok(end);
            }
        }
        Err(ModelError::Failed("the answer ended without its end".into()).into())
    }

    /// The turn, its account back from the answer, which is over: what the answer finished with is added to the
    /// turn as said (to store), and returned.
    pub(crate) fn finish(self) -> (Finished, Turn) {
        let mut turn = self.turn;
        let driver = self.driver;
        let finished = Finished {
            usage: driver.usage(),
            model_calls: driver.calls.len() as u32,
            calls_run: driver.calls_run,
            timed_out: driver.timed_out,
            reasoning_redacted: driver.reasoning_redacted,
            speaker: self.speaker,
            header: self.header,
            text: self.shown,
            tools: driver.exchanges,
            tool_thoughts: driver.tool_thoughts,
            grounding: driver.grounding,
            reasoning: driver.reasoning,
            tool_calls: driver.client_calls,
        };
        turn.account = driver.account;
        // The signed reasoning of an answer that asks for the client's tools is kept for the continuation.
        let signed: Vec<crate::ReasoningBlock> = driver
            .round_reasoning
            .into_iter()
            .filter(crate::ReasoningBlock::kept)
            .collect();
        let client_keeps = turn
            .scope
            .completion
            .as_ref()
            .is_some_and(|plan| plan.client_keeps_reasoning);
        if let Some(first) = finished.tool_calls.first()
            && !signed.is_empty()
            && !client_keeps
        {
            turn.kept_reasoning = Some((first.id.clone(), signed));
        }
        turn.say(&finished);
        (finished, turn)
    }

    /// The turn, its account back from an answer that failed (the caller closes it).
    pub(crate) fn abandon(self) -> Turn {
        let mut turn = self.turn;
        turn.tool_calls += self.driver.calls_run;
        turn.account = self.driver.account;
        turn
    }

    /// The whole answer, once [`Self::read_to_end`] gave its `end`, and the turn that said it; this is the one
    /// place an [`Answer`] is made. The caller still stores the turn.
    pub(crate) fn into_answer(self, end: TurnEnd) -> (Answer, Turn) {
        let turn_spent = self.turn_spent();
        let session_state = self.turn.session.state();
        // The tools' thoughts happened after the prompt's and before the answer's.
        let mut prompt_thoughts = self.thoughts.clone();
        let reasoning_blocks: Vec<crate::ReasoningBlock> = self
            .driver
            .round_reasoning
            .iter()
            .filter(|block| block.kept())
            .cloned()
            .collect();
        let (finished, turn) = self.finish();
        prompt_thoughts.extend(finished.tool_thoughts);
        let answer = Answer {
            id: finished.header.id,
            created: finished.header.created,
            created_at: finished.header.created_at,
            model: finished.header.model,
            content: finished.text,
            finish_reason: end.finish_reason,
            usage: end.usage,
            prompt_thoughts,
            result_thoughts: end.result_thoughts,
            followup_questions: end.followup_questions,
            session_state,
            data_points: finished.grounding.as_ref().map(Grounding::data_points),
            citations: end.citations,
            cost_usd: end.cost_usd,
            spent: turn_spent,
            reasoning: (!finished.reasoning.is_empty() || finished.reasoning_redacted)
                .then(|| reasoning_text(&finished.reasoning, finished.reasoning_redacted)),
            reasoning_redacted: finished.reasoning_redacted,
            tools: finished.tools,
            tool_calls: finished.tool_calls,
            reasoning_blocks,
            stop_sequence: end.stop_sequence,
        };
        (answer, turn)
    }

    /// Takes the model's next text: held back while it may be follow-up questions, else ready to show.
    fn push_text(&mut self, text: String) {
        let shown = match &mut self.splitter {
            Some(splitter) => splitter.push(&text),
            None => text,
        };
        if !shown.is_empty() {
            self.ready.push_back(TurnEvent::Text(shown));
        }
    }

    async fn pull(&mut self) -> Result<(), ChatError> {
        let Some(event) = self.driver.next().await? else {
            return Ok(());
        };
        match event {
            DriverEvent::Text(text) => self.push_text(text),
            DriverEvent::Reasoning(text) => self.ready.push_back(TurnEvent::Reasoning(text)),
            DriverEvent::RedactedReasoning(note) => {
                self.ready.push_back(TurnEvent::RedactedReasoning(note))
            }
            DriverEvent::Thought(thought) => {
                // What a tool found is told with the thought of its result.
                let found = self.driver.grounding.as_ref().map(|g| g.passages.len());
                if found != self.passages_told {
                    self.passages_told = found;
                    if let Some(points) = self.data_points() {
                        self.ready.push_back(TurnEvent::Found(points));
                    }
                }
                self.ready.push_back(TurnEvent::Thought(thought));
            }
            DriverEvent::ToolCall(call) => self.ready.push_back(TurnEvent::ToolCall(call)),
            DriverEvent::ReasoningBlock(block) => {
                self.ready.push_back(TurnEvent::ReasoningBlock(block))
            }
            DriverEvent::Done(stop) => {
                let driver = &self.driver;
                if let Err(e) = finish_reason(&stop) {
                    if let Some(trace) = &driver.guardrail {
                        tracing::warn!(
                            guardrail = %guardrail_thought(trace).description,
                            "the guardrail intervened"
                        );
                    }
                    return Err(e);
                }
                let (rest, followup_questions) = match self.splitter.take() {
                    Some(splitter) => {
                        let (rest, questions) = splitter.finish();
                        (rest, Some(questions))
                    }
                    None => (String::new(), None),
                };
                if !rest.is_empty() {
                    self.ready.push_back(TurnEvent::Text(rest));
                }
                let citations = driver
                    .grounding
                    .as_ref()
                    .map(|g| g.cited_in(&driver.said))
                    .unwrap_or_default();
                let cost_usd = self.spent().cost_usd;
                let usage = driver.usage();
                let mut result_thoughts = Vec::new();
                if !driver.reasoning.is_empty() || driver.reasoning_redacted {
                    result_thoughts.push(reasoning_thought(
                        &driver.reasoning,
                        driver.reasoning_redacted,
                    ));
                }
                if let Some(trace) = &driver.guardrail {
                    result_thoughts.push(guardrail_thought(trace));
                }
                result_thoughts.push(usage_thought(usage, &stop, cost_usd, &driver.served));
                let finish_reason = if driver.client_calls.is_empty() {
                    finish_reason(&stop)?
                } else {
                    FinishReason::ToolCalls
                };
                let stop_sequence =
                    finish_reason == FinishReason::Stop && stop == crate::StopReason::StopSequence;
                self.ready.push_back(TurnEvent::End(TurnEnd {
                    finish_reason,
                    usage,
                    cost_usd,
                    followup_questions,
                    result_thoughts,
                    citations,
                    stop_sequence,
                }));
            }
        }
        Ok(())
    }
}
