//! The turn driver: one loop of model rounds that every answer goes through. A round streams the model's answer;
//! when the model asks for tools they run together, each under the operator's bounds, each call and result a
//! thought as it happens, and the next round reads their results, until the model answers or the rounds allowed
//! are spent (then it answers without tools). A streamed standard turn reads it event by event, a buffered turn
//! collects it, and each agent of a multi-agent round speaks through it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::{Value, json};

use crate::account::TurnAccount;
use crate::thoughts::reasoning_text;
use crate::thoughts::{call_thought, result_thought};
use crate::tools::{ToolRun, run_call};
use crate::{
    Caller, ChatError, Grounding, GuardrailTrace, ModelError, ModelEvent, ModelMessage,
    ModelRequest, ModelStream, Role, Served, StopReason, Thought, TokenUsage, Tool, ToolBounds,
    ToolCall, ToolExchange, ToolResult, ToolStatus,
};

/// Starts a model round for a request: a streamed call, or a whole answer read as a stream.
pub(crate) type RoundStarter<S> = Box<
    dyn FnMut(ModelRequest) -> Pin<Box<dyn Future<Output = Result<S, ModelError>> + Send>> + Send,
>;

/// The tools a turn offers, who they run for, and the bounds they run under.
#[derive(Clone)]
pub(crate) struct TurnTools {
    pub tools: Arc<[Arc<dyn Tool>]>,
    pub caller: Caller,
    pub bounds: ToolBounds,
}

/// What the driver yields, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DriverEvent {
    Reasoning(String),
    RedactedReasoning(String),
    /// A block of reasoning is complete, signed (or redacted), told only when the client keeps the reasoning.
    ReasoningBlock(crate::ReasoningBlock),
    /// The model's text (citation marks included), never empty.
    Text(String),
    /// A tool call as the model asks for it, or its result as it arrives.
    Thought(Thought),
    /// The model asks for a tool of the client's: the answer ends once the round does, for the client to run it.
    ToolCall(ToolCall),
    /// The answer is complete: why the last round stopped. The last event.
    Done(StopReason),
}

type Running = FuturesUnordered<Pin<Box<dyn Future<Output = ToolRun> + Send>>>;

/// One answer in the making: the request of the current round, its model stream, and what the rounds so far said,
/// called and spent.
pub(crate) struct RoundDriver<S> {
    request: ModelRequest,
    model: Option<S>,
    start: RoundStarter<S>,
    tools: Option<TurnTools>,
    /// Tool rounds run so far.
    round: u32,
    /// Which of the request's messages is the question (the last one when the answer began).
    question: usize,
    /// What the current round said before it asked for tools, and the tools it asks for.
    round_text: String,
    round_calls: Vec<ToolCall>,
    running: Option<Running>,
    round_runs: Vec<ToolRun>,
    ready: VecDeque<DriverEvent>,
    stop: Option<StopReason>,
    done: bool,
    /// Whether the text so far ends in white space (a citation mark then needs none before it).
    after_space: bool,
    /// Whether a round's model call is under way and has not reported its usage yet.
    round_open: bool,
    /// Whether the next text starts a round after one that already said something: it goes on a new paragraph.
    round_break: bool,
    /// The calls that ran (calls answered "not run" at the round limit are not among them).
    pub calls_run: u32,
    /// Every call and result of the turn, in order: stored with the answer.
    pub exchanges: Vec<ToolExchange>,
    /// The thoughts of the tool calls, in order.
    pub tool_thoughts: Vec<Thought>,
    /// What the answer is grounded in: the search before the model, then what its tools found.
    pub grounding: Option<Grounding>,
    /// Everything the model said, citation marks included.
    pub said: String,
    /// Each model call's usage, in order.
    pub calls: Vec<TokenUsage>,
    pub reasoning: String,
    pub reasoning_redacted: bool,
    pub guardrail: Option<GuardrailTrace>,
    pub served: Served,
    /// The turn's account with its owner's counters: each round is covered before it starts, and each call's
    /// spending noted when it ends.
    pub account: TurnAccount,
    /// The current round's prompt tokens as the turn counted or estimated them (the first round's); `None`: estimated
    /// from the request when needed.
    round_prompt: Option<u64>,
    /// When the answer must stop, whatever it is doing (a multi-agent round's time limit); `None`: no bound.
    deadline: Option<tokio::time::Instant>,
    /// Whether the deadline stopped the answer: it ended with what it had ([`StopReason::MaxTokens`]).
    pub timed_out: bool,
    /// The names of the client's tools (a stateless completion's): a call of one ends the answer.
    client_tools: Vec<String>,
    /// Whether at most one client call is returned (`parallel_tool_calls: false`).
    one_client_call: bool,
    /// The client's tools the model asked for, in order.
    pub client_calls: Vec<ToolCall>,
    /// The current round's reasoning, block by block as the model provider signed them, and the text of the
    /// block not signed yet: given back before the round's tool uses.
    pub round_reasoning: Vec<crate::ReasoningBlock>,
    reasoning_open: String,
    /// Whether each block of reasoning is told as it completes ([`DriverEvent::ReasoningBlock`]): the client keeps
    /// the reasoning.
    tell_blocks: bool,
}

/// `work`, unless `deadline` comes first (`None`).
async fn before<T>(
    deadline: Option<tokio::time::Instant>,
    work: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, work).await.ok(),
        None => Some(work.await),
    }
}

impl<S: ModelStream> RoundDriver<S> {
    pub(crate) fn new(
        request: ModelRequest,
        first: S,
        start: RoundStarter<S>,
        tools: Option<TurnTools>,
        grounding: Option<Grounding>,
        (account, prompt_tokens): (TurnAccount, u64),
    ) -> Self {
        let question = request.messages.len().saturating_sub(1);
        Self {
            request,
            model: Some(first),
            start,
            tools: tools.filter(|t| !t.tools.is_empty()),
            round: 0,
            question,
            round_text: String::new(),
            round_calls: Vec::new(),
            running: None,
            round_runs: Vec::new(),
            ready: VecDeque::new(),
            stop: None,
            done: false,
            after_space: true,
            round_open: true,
            round_break: false,
            calls_run: 0,
            exchanges: Vec::new(),
            tool_thoughts: Vec::new(),
            grounding,
            said: String::new(),
            calls: Vec::new(),
            reasoning: String::new(),
            reasoning_redacted: false,
            guardrail: None,
            served: Served::default(),
            account,
            round_prompt: Some(prompt_tokens),
            deadline: None,
            timed_out: false,
            client_tools: Vec::new(),
            one_client_call: false,
            client_calls: Vec::new(),
            round_reasoning: Vec::new(),
            tell_blocks: false,
            reasoning_open: String::new(),
        }
    }

    /// Calls of the tools named `names` are the client's: the answer ends with them (at most one when `one`).
    pub(crate) fn client_tools(&mut self, names: Vec<String>, one: bool) {
        self.client_tools = names;
        self.one_client_call = one;
    }

    /// Tells each block of reasoning as it completes, signed or redacted ([`DriverEvent::ReasoningBlock`]), for a
    /// client that keeps the reasoning itself.
    pub(crate) fn tell_reasoning_blocks(&mut self) {
        self.tell_blocks = true;
    }

    /// Stops the answer at `deadline` with what it has: the model's round or the tools running are cut off there
    /// (never a write of the account, which always completes).
    pub(crate) fn end_by(&mut self, deadline: Option<tokio::time::Instant>) {
        self.deadline = deadline;
    }

    /// The deadline came before the first round could start (its call is noted by whoever made it): the answer
    /// ends empty.
    pub(crate) fn time_up_unstarted(&mut self) {
        self.round_open = false;
        self.time_up();
    }

    /// The deadline has come: the answer ends here, what the round spent estimated.
    fn time_up(&mut self) {
        self.cut_off();
        self.running = None;
        self.timed_out = true;
        self.ready
            .push_back(DriverEvent::Done(StopReason::MaxTokens));
        self.done = true;
    }

    /// Every model call's usage, added up.
    pub(crate) fn usage(&self) -> TokenUsage {
        let mut all = TokenUsage::default();
        for call in &self.calls {
            all.add(call);
        }
        all
    }

    /// Whether the answer is complete and all of it read: an answer the deadline ended before its first round
    /// ([`Self::time_up_unstarted`]) still has its end to yield.
    pub(crate) fn is_done(&self) -> bool {
        self.done && self.ready.is_empty()
    }

    /// When a round is being read and the model has not reported its usage yet (an answer cut off now): about what
    /// it has spent so far, its prompt and what it has written (and, in the first round, reasoned).
    pub(crate) fn unreported(&self) -> Option<TokenUsage> {
        if !self.round_open {
            return None;
        }
        let reasoned = if self.round == 0 {
            crate::estimate_tokens(&self.reasoning)
        } else {
            0
        };
        let input = self
            .round_prompt
            .unwrap_or_else(|| crate::estimate_request_tokens(&self.request));
        let output = crate::estimate_tokens(&self.round_text) + reasoned;
        Some(TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..TokenUsage::default()
        })
    }

    /// The answer stops here, its round cut off: what the round spent so far is noted in the account, as estimated.
    pub(crate) fn cut_off(&mut self) {
        if let Some(usage) = self.unreported() {
            self.account.add_call(usage);
            self.round_open = false;
        }
        self.model = None;
    }

    /// The next event; `None` after [`DriverEvent::Done`]. An error ends the answer.
    pub(crate) async fn next(&mut self) -> Result<Option<DriverEvent>, ChatError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.done {
                return Ok(None);
            }
            self.pull().await?;
        }
    }

    fn push_text(&mut self, mut text: String) {
        if std::mem::take(&mut self.round_break) && !self.after_space {
            text.insert_str(0, "\n\n");
        }
        if let Some(last) = text.chars().last() {
            self.after_space = last.is_whitespace();
        }
        self.said.push_str(&text);
        self.round_text.push_str(&text);
        self.ready.push_back(DriverEvent::Text(text));
    }

    fn thought(&mut self, thought: Thought) {
        self.tool_thoughts.push(thought.clone());
        self.ready.push_back(DriverEvent::Thought(thought));
    }

    async fn pull(&mut self) -> Result<(), ChatError> {
        if let Some(running) = self.running.as_mut() {
            let Some(next) = before(self.deadline, running.next()).await else {
                self.time_up();
                return Ok(());
            };
            match next {
                Some(mut run) => {
                    // What a search found joins the answer's grounding as it arrives, so that the result's line
                    // carries it.
                    let passages = std::mem::take(&mut run.passages);
                    if !passages.is_empty() {
                        let grounding = self.grounding.get_or_insert_with(Grounding::default);
                        for passage in passages {
                            if !grounding.passages.contains(&passage) {
                                grounding.passages.push(passage);
                            }
                        }
                    }
                    self.thought(result_thought(&run));
                    self.round_runs.push(run);
                }
                None => {
                    self.running = None;
                    self.next_round(None).await?;
                }
            }
            return Ok(());
        }
        let Some(model) = self.model.as_mut() else {
            self.done = true;
            return Ok(());
        };
        let Some(next) = before(self.deadline, model.next_event()).await else {
            self.time_up();
            return Ok(());
        };
        let event = match next {
            Ok(event) => event,
            Err(e) => {
                // A round that failed on its way spent what it read and wrote, unless the model never ran it.
                if self.round_text.is_empty() && crate::account::model_did_not_run(&e) {
                    self.round_open = false;
                }
                self.cut_off();
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
            Some(ModelEvent::Text(text)) => {
                if !text.is_empty() {
                    self.push_text(text);
                }
            }
            Some(ModelEvent::Reasoning(text)) => {
                if !text.is_empty() {
                    self.reasoning.push_str(&text);
                    self.reasoning_open.push_str(&text);
                    self.ready.push_back(DriverEvent::Reasoning(text));
                }
            }
            Some(ModelEvent::RedactedReasoning(bytes)) => {
                if !bytes.is_empty() {
                    let block = crate::ReasoningBlock::redacted(bytes);
                    if self.tell_blocks {
                        self.ready
                            .push_back(DriverEvent::ReasoningBlock(block.clone()));
                    }
                    self.round_reasoning.push(block);
                }
                if !self.reasoning_redacted {
                    self.reasoning_redacted = true;
                    let note =
                        reasoning_text(&self.reasoning, true)[self.reasoning.len()..].to_string();
                    self.ready.push_back(DriverEvent::RedactedReasoning(note));
                }
            }
            Some(ModelEvent::ReasoningSignature(signature)) => {
                let block = crate::ReasoningBlock::signed(
                    std::mem::take(&mut self.reasoning_open),
                    signature,
                );
                if self.tell_blocks {
                    self.ready
                        .push_back(DriverEvent::ReasoningBlock(block.clone()));
                }
                self.round_reasoning.push(block);
            }
            Some(ModelEvent::ToolUse(call)) if self.client_tools.contains(&call.name) => {
                if self.one_client_call && !self.client_calls.is_empty() {
                    tracing::info!(tool = %call.name, "parallel_tool_calls is false: a further call is left out");
                } else {
                    self.client_calls.push(call.clone());
                    self.ready.push_back(DriverEvent::ToolCall(call));
                }
            }
            Some(ModelEvent::ToolUse(call)) => {
                self.thought(call_thought(&call, self.round));
                self.round_calls.push(call);
            }
            Some(ModelEvent::Guardrail(trace)) => self.guardrail = Some(trace),
            Some(ModelEvent::Served(served)) => self.served = served,
            Some(ModelEvent::Stop(stop)) => self.stop = Some(stop),
            Some(ModelEvent::Usage(usage)) => {
                self.calls.push(usage);
                self.account.add_call(usage);
                self.round_open = false;
            }
            None => {
                // A stream that ended without saying what it spent is counted as estimated.
                self.cut_off();
                let stop = self.stop.take().ok_or_else(|| {
                    ChatError::from(ModelError::Failed(
                        "the model stream ended before the answer did".into(),
                    ))
                })?;
                // Calls of the client's tools end the answer, for the client to run them (the server's calls of the
                // same round, if any, are not run: the client continues from its own calls).
                if !self.client_calls.is_empty() {
                    if !self.round_calls.is_empty() {
                        tracing::info!(
                            calls = self.round_calls.len(),
                            "the model asked for server tools beside the client's: only the client's are returned"
                        );
                    }
                    self.ready.push_back(DriverEvent::Done(StopReason::ToolUse));
                    self.done = true;
                // Calls of a request that offered no tools (which Bedrock would not send) end the answer.
                } else if stop == StopReason::ToolUse
                    && !self.round_calls.is_empty()
                    && !self.request.tools.is_empty()
                {
                    self.run_tools().await?;
                } else {
                    self.ready.push_back(DriverEvent::Done(stop));
                    self.done = true;
                }
            }
        }
        Ok(())
    }

    /// Runs the round's calls together, or, when no more rounds are allowed, answers them with an error and asks
    /// the model to answer without tools.
    async fn run_tools(&mut self) -> Result<(), ChatError> {
        let allowed = self
            .tools
            .as_ref()
            .filter(|t| self.round < t.bounds.max_rounds)
            .cloned();
        let Some(tools) = allowed else {
            let most = self.tools.as_ref().map_or(0, |t| t.bounds.max_rounds);
            let why = format!(
                "not run: this answer may make at most {most} rounds of tool calls; answer with what you have"
            );
            self.thought(Thought {
                title: "Tool rounds".into(),
                description: Value::String(format!(
                    "the limit of {most} rounds of tool calls is reached: the model answers without tools"
                )),
                props: Some(json!({ "max_tool_rounds": most, "calls_not_run": self.round_calls.len() })),
            });
            let round = self.round;
            let runs = self
                .round_calls
                .iter()
                .map(|call| not_run(call, round, why.clone()))
                .collect();
            self.round_runs = runs;
            return self.next_round(Some(())).await;
        };
        // At most `max_calls_per_round` of the round's calls run, the first asked; the others are answered "not run".
        let most = tools.bounds.max_calls_per_round.max(1) as usize;
        let (run, past) = self.round_calls.split_at(self.round_calls.len().min(most));
        let round = self.round;
        let not_run: Vec<ToolRun> = past
            .iter()
            .map(|call| {
                let why = format!(
                    "not run: at most {most} tool calls run in one round; ask for fewer at once"
                );
                not_run(call, round, why)
            })
            .collect();
        let running: Running = FuturesUnordered::new();
        self.calls_run += run.len() as u32;
        for call in run.iter().cloned() {
            running.push(Box::pin(run_call(
                tools.tools.clone(),
                tools.caller.clone(),
                call,
                self.round,
                tools.bounds,
            )));
        }
        if !not_run.is_empty() {
            self.thought(Thought {
                title: "Tool calls".into(),
                description: Value::String(format!(
                    "the model asked for {} tool calls in one round: the first {most} run, the other {} are not run",
                    self.round_calls.len(),
                    not_run.len()
                )),
                props: Some(
                    json!({ "max_tool_calls_per_round": most, "calls_not_run": not_run.len() }),
                ),
            });
        }
        self.round_runs = not_run;
        self.running = Some(running);
        Ok(())
    }

    /// Gives the model the round's calls and their results, and starts the next round. `last`: no more tools are
    /// allowed, so the model reads the whole exchange as text and is offered none.
    async fn next_round(&mut self, last: Option<()>) -> Result<(), ChatError> {
        // The results in the order the model asked, whatever order they finished in.
        let mut runs = std::mem::take(&mut self.round_runs);
        runs.sort_by_key(|run| {
            self.round_calls
                .iter()
                .position(|c| c.id == run.exchange.id)
                .unwrap_or(usize::MAX)
        });
        let text = std::mem::take(&mut self.round_text);
        let mut asked = ModelMessage::text(Role::Assistant, Vec::new());
        if !text.trim().is_empty() {
            asked.texts.push(text);
        }
        asked.tool_uses = std::mem::take(&mut self.round_calls);
        // The round's signed reasoning goes back before its tool uses, as the model wants it.
        asked.reasoning = std::mem::take(&mut self.round_reasoning);
        self.reasoning_open.clear();
        // A choice the client forced holds for the first round only: then the model answers as it chooses.
        self.request.tool_choice = crate::ToolChoice::Auto;
        let mut answered = ModelMessage::text(Role::User, Vec::new());
        answered.tool_results = runs
            .iter()
            .map(|run| ToolResult {
                id: run.exchange.id.clone(),
                text: run.exchange.output.clone(),
                status: run.exchange.status,
            })
            .collect();
        for run in runs {
            self.exchanges.push(run.exchange);
        }
        self.request.messages.push(asked);
        self.request.messages.push(answered);
        self.round += 1;
        if last.is_some() {
            // The question stays the question once its tool rounds are text like it.
            self.request.question = Some(self.question);
            self.request.messages = tools_as_text(std::mem::take(&mut self.request.messages));
            self.request.tools.clear();
        }
        self.round_break = !self.said.is_empty();
        // Each round is covered by the turn's reservation before it starts; its prompt is estimated.
        self.round_prompt = None;
        let deadline = self.deadline;
        let call = (self.start)(self.request.clone());
        let call = async move {
            before(deadline, call)
                .await
                .unwrap_or_else(|| Err(ModelError::Timeout("the answer's time limit".into())))
        };
        match self.account.start(&self.request, None, call).await {
            Ok(stream) => {
                self.round_open = true;
                self.model = Some(stream);
                Ok(())
            }
            // What the call may have spent is noted; the answer ends with what it has.
            Err(_) if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) => {
                self.time_up();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// A call of `round` answered with an error saying why it was not run.
fn not_run(call: &ToolCall, round: u32, why: String) -> ToolRun {
    ToolRun {
        exchange: ToolExchange {
            round,
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            output: why,
            status: ToolStatus::Error,
        },
        passages: Vec::new(),
        duration: std::time::Duration::ZERO,
    }
}

/// `messages` with every tool call and result written as text, for a request that offers no tools (the model
/// provider refuses tool blocks without them): the model still reads what was asked and answered.
pub(crate) fn tools_as_text(messages: Vec<ModelMessage>) -> Vec<ModelMessage> {
    let mut names: Vec<(String, String)> = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    for mut message in messages {
        for call in message.tool_uses.drain(..) {
            message
                .texts
                .push(format!("[tool {} called with {}]", call.name, call.input));
            names.push((call.id, call.name));
        }
        let results: Vec<String> = message
            .tool_results
            .drain(..)
            .map(|r| {
                let name = names
                    .iter()
                    .find(|(id, _)| *id == r.id)
                    .map_or("a tool", |(_, n)| n.as_str());
                format!("[tool {name} → {}: {}]", r.status.as_str(), r.text)
            })
            .collect();
        if !results.is_empty() {
            message.texts.insert(0, results.join("\n"));
        }
        out.push(message);
    }
    out
}
