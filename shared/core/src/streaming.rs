//! One chat turn, streamed: the model's text passes through as it comes, follow-up questions are held back, and
//! the end carries what only the end knows (why it stopped, token usage, the questions).

use std::collections::VecDeque;

use crate::turn::{
    Turn, finish_reason, guardrail_thought, reasoning_text, reasoning_thought, usage_thought,
};
use crate::{
    Answer, ChatError, DataPoints, FinishReason, FollowupSplitter, Grounding, GuardrailTrace,
    ModelError, ModelEvent, ModelStream, Prices, Served, Session, StopReason, Thought, TokenUsage,
    TurnHeader, UsageTotals,
};

/// What a streaming turn yields.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A piece of the model's reasoning to show now (never empty), before the answer's text: never part of it.
    Reasoning(String),
    /// The model's reasoning goes on, encrypted by its provider: there is nothing to show but the note that it is
    /// redacted (this text; after reasoning shown, it starts on a paragraph of its own, as the whole reasoning has it).
    RedactedReasoning(String),
    /// Text to show now (never empty).
    Text(String),
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
}

/// A turn whose answer is being streamed from the model.
pub struct StreamingTurn<S> {
    pub header: TurnHeader,
    /// The thoughts known before the answer (the prompt, and the search when there is one).
    pub thoughts: Vec<Thought>,
    model: Option<S>,
    session: Session,
    grounding: Option<Grounding>,
    /// Whether the model's text so far ends in white space (a citation mark then needs none before it).
    after_space: bool,
    /// Everything the model said, citation marks included (before follow-up questions are cut out).
    said: String,
    /// Everything shown so far: what the turn stores as the answer.
    shown: String,
    splitter: Option<FollowupSplitter>,
    ready: VecDeque<TurnEvent>,
    stop: Option<StopReason>,
    usage: TokenUsage,
    /// Everything the model reasoned, and whether some of it was redacted.
    reasoning: String,
    reasoning_redacted: bool,
    guardrail: Option<GuardrailTrace>,
    served: Served,
    prices: Option<Prices>,
    /// What the turn spent before the answer (writing the search query).
    spent_before: crate::TurnSpent,
    /// The prompt's tokens as the turn counted or estimated them.
    prompt_tokens: u64,
}

impl<S: ModelStream> StreamingTurn<S> {
    pub(crate) fn new(turn: Turn, model: S) -> Self {
        Self {
            header: turn.header,
            thoughts: turn.thoughts,
            model: Some(model),
            session: turn.session,
            grounding: turn.grounding,
            after_space: true,
            said: String::new(),
            shown: String::new(),
            splitter: turn.followups.then(FollowupSplitter::new),
            ready: VecDeque::new(),
            stop: None,
            usage: TokenUsage::default(),
            reasoning: String::new(),
            reasoning_redacted: false,
            guardrail: None,
            served: Served::default(),
            prices: turn.prices,
            spent_before: turn.spent_before,
            prompt_tokens: turn.prompt_tokens,
        }
    }

    /// What the answer is grounded in, known before it starts; `None` when the turn did not search.
    pub fn data_points(&self) -> Option<DataPoints> {
        self.grounding.as_ref().map(Grounding::data_points)
    }

    /// The chat this turn belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The answer as shown so far (all of it, once [`TurnEvent::End`] has been yielded).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The chat, the answer as shown, what its answer spent and what the whole turn spent, once the turn is over.
    pub(crate) fn into_parts(self) -> (Session, String, UsageTotals, crate::TurnSpent) {
        let spent = self.spent();
        let turn_spent = self.turn_spent();
        (self.session, self.shown, spent, turn_spent)
    }

    /// Every model call of the turn: the answer's and those before it.
    fn turn_spent(&self) -> crate::TurnSpent {
        let mut answer = crate::TurnSpent::default();
        answer.add_call(self.usage, self.prices.as_ref());
        self.spent_before.plus(&answer)
    }

    /// What the turn has spent so far: exactly, once the model reported its usage; before that (an answer cut off),
    /// the prompt's tokens and an estimate of what the model wrote and reasoned.
    pub fn spent_so_far(&self) -> crate::TurnSpent {
        if self.usage.total_tokens > 0 {
            return self.turn_spent();
        }
        let output = crate::estimate_tokens(&self.said) + crate::estimate_tokens(&self.reasoning);
        let usage = TokenUsage {
            input_tokens: self.prompt_tokens,
            output_tokens: output,
            total_tokens: self.prompt_tokens + output,
            ..TokenUsage::default()
        };
        let mut answer = crate::TurnSpent::default();
        answer.add_call(usage, self.prices.as_ref());
        self.spent_before.plus(&answer)
    }

    /// The turn's tokens and, when prices are known, their cost: priced here only.
    fn spent(&self) -> UsageTotals {
        UsageTotals::of(self.usage, self.prices.as_ref())
    }

    /// Reads from the model until there is something to yield.
    pub(crate) async fn prime(&mut self) -> Result<(), ChatError> {
        while self.ready.is_empty() && self.model.is_some() {
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

    /// Reads the whole answer; this is the one place an [`Answer`] is made. The caller still stores the turn.
    pub(crate) async fn into_answer(mut self) -> Result<(Answer, Session, UsageTotals), ChatError> {
        while let Some(event) = self.next().await? {
            match event {
                TurnEvent::Text(_) | TurnEvent::Reasoning(_) | TurnEvent::RedactedReasoning(_) => {}
                TurnEvent::End(end) => {
                    let spent = self.spent();
                    let turn_spent = self.turn_spent();
                    let session_state = self.session.state();
                    let answer = Answer {
                        id: self.header.id,
                        created: self.header.created,
                        created_at: self.header.created_at,
                        model: self.header.model,
                        content: self.shown,
                        finish_reason: end.finish_reason,
                        usage: end.usage,
                        prompt_thoughts: self.thoughts,
                        result_thoughts: end.result_thoughts,
                        followup_questions: end.followup_questions,
                        session_state,
                        data_points: self.grounding.as_ref().map(Grounding::data_points),
                        citations: end.citations,
                        cost_usd: end.cost_usd,
                        spent: turn_spent,
                        reasoning: (!self.reasoning.is_empty() || self.reasoning_redacted)
                            .then(|| reasoning_text(&self.reasoning, self.reasoning_redacted)),
                        reasoning_redacted: self.reasoning_redacted,
                    };
                    return Ok((answer, self.session, spent));
                }
            }
        }
        Err(ModelError::Failed("the answer ended without its end".into()).into())
    }

    /// Takes the model's next text: held back while it may be follow-up questions, else ready to show.
    fn push_text(&mut self, text: String) {
        if let Some(last) = text.chars().last() {
            self.after_space = last.is_whitespace();
        }
        self.said.push_str(&text);
        let shown = match &mut self.splitter {
            Some(splitter) => splitter.push(&text),
            None => text,
        };
        if !shown.is_empty() {
            self.ready.push_back(TurnEvent::Text(shown));
        }
    }

    async fn pull(&mut self) -> Result<(), ChatError> {
        let Some(model) = self.model.as_mut() else {
            return Ok(());
        };
        let event = match model.next_event().await {
            Ok(event) => event,
            Err(e) => {
                self.model = None;
                return Err(e.into());
            }
        };
        match event {
            Some(ModelEvent::Citation(source)) => {
                let Some(name) = self
                    .grounding
                    .as_ref()
                    .and_then(|g| g.passages.get(source))
                    .map(|p| p.citation())
                else {
                    // A citation of nothing this turn gave the model: there is no name to show.
                    return Ok(());
                };
                let mark = if self.after_space {
                    format!("[{name}]")
                } else {
                    format!(" [{name}]")
                };
                self.push_text(mark);
            }
            Some(ModelEvent::Text(text)) => self.push_text(text),
            Some(ModelEvent::ToolUse(_)) => {}
            Some(ModelEvent::Reasoning(text)) => {
                if !text.is_empty() {
                    self.reasoning.push_str(&text);
                    self.ready.push_back(TurnEvent::Reasoning(text));
                }
            }
            Some(ModelEvent::RedactedReasoning) => {
                if !self.reasoning_redacted {
                    self.reasoning_redacted = true;
                    let note =
                        reasoning_text(&self.reasoning, true)[self.reasoning.len()..].to_string();
                    self.ready.push_back(TurnEvent::RedactedReasoning(note));
                }
            }
            Some(ModelEvent::Guardrail(trace)) => self.guardrail = Some(trace),
            Some(ModelEvent::Served(served)) => self.served = served,
            // A guardrail that stops the answer ends the turn as an error, even after text was shown; the stream is
            // read to its end first, for the guardrail's assessment that follows the stop.
            Some(ModelEvent::Stop(stop)) => self.stop = Some(stop),
            Some(ModelEvent::Usage(usage)) => self.usage = usage,
            None => {
                self.model = None;
                let stop = self.stop.take().ok_or_else(|| {
                    ChatError::from(ModelError::Failed(
                        "the model stream ended before the answer did".into(),
                    ))
                })?;
                if let Err(e) = finish_reason(&stop) {
                    if let Some(trace) = &self.guardrail {
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
                let citations = self
                    .grounding
                    .as_ref()
                    .map(|g| g.cited_in(&self.said))
                    .unwrap_or_default();
                let cost_usd = self.spent().cost_usd;
                let mut result_thoughts = Vec::new();
                if !self.reasoning.is_empty() || self.reasoning_redacted {
                    result_thoughts
                        .push(reasoning_thought(&self.reasoning, self.reasoning_redacted));
                }
                if let Some(trace) = &self.guardrail {
                    result_thoughts.push(guardrail_thought(trace));
                }
                result_thoughts.push(usage_thought(self.usage, &stop, cost_usd, &self.served));
                self.ready.push_back(TurnEvent::End(TurnEnd {
                    finish_reason: finish_reason(&stop)?,
                    usage: self.usage,
                    cost_usd,
                    followup_questions,
                    result_thoughts,
                    citations,
                }));
            }
        }
        Ok(())
    }
}
