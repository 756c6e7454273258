//! The Chat UI's multi-agent mode: a group of agents answers one user message in turn, each seeing the
//! conversation so far with every agent's messages attributed by name, until a turn limit or an approval phrase.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::checks::check_overrides;
use crate::driver::{DriverEvent, RoundDriver, TurnTools, tools_with_reasoning};
use crate::prepare::passage_tokens;
use crate::prompt::{GROUNDING_INSTRUCTIONS, Speaker, model_request};
use crate::save::{new_stored_messages, stored_message};
use crate::search::search;
use crate::turn::finish_reason;
use crate::{
    Caller, ChatError, ChatMode, ChatModel, ChatService, CitationMode, FinishReason, Grounding,
    Message, Role, Session, SessionStore, StoredMessage, TokenUsage, TurnHeader, TurnInput,
    display_time, rfc3339_millis,
};
use crate::{ReplyStream, StopReason, Thought, ToolExchange, TurnAccount, UsageTotals};

/// One agent of the group.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    pub instructions: String,
    /// A model of its own; the configured model when absent.
    #[serde(default)]
    pub model_id: Option<String>,
    #[serde(default)]
    pub temperature: Option<f64>,
}

/// The configured group, and when a round ends.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentGroup {
    pub agents: Vec<Agent>,
    /// Most agent messages in one round.
    pub max_turns: usize,
    /// A message containing this (ignoring case) ends the round.
    pub approval_phrase: String,
}

impl AgentGroup {
    /// BusinessAnalyst, SoftwareEngineer and ProductOwner, two rounds at most, ended by "APPROVED".
    pub fn default_group() -> Self {
        let agent = |name: &str, instructions: &str| Agent {
            name: name.into(),
            instructions: instructions.into(),
            model_id: None,
            temperature: None,
        };
        Self {
            agents: vec![
                agent(
                    "BusinessAnalyst",
                    "You are a business analyst. Turn the user's request into clear requirements: goals, \
                     users, constraints and open questions. Be concise; use short lists.",
                ),
                agent(
                    "SoftwareEngineer",
                    "You are a senior software engineer. Propose a concrete technical approach that meets \
                     the requirements discussed so far: components, data, risks and a first step. Be concise.",
                ),
                agent(
                    "ProductOwner",
                    "You are the product owner. Review the requirements and the technical approach against \
                     the user's goal. If they are good enough to start, say APPROVED and summarise the plan in \
                     two sentences; otherwise say exactly what must change.",
                ),
            ],
            max_turns: 6,
            approval_phrase: "APPROVED".into(),
        }
    }

    /// Agents from JSON: `[{"name", "instructions", "model_id"?, "temperature"?}, …]`.
    pub fn agents_from_json(json: &str) -> Result<Vec<Agent>, String> {
        let agents: Vec<Agent> = serde_json::from_str(json).map_err(|e| e.to_string())?;
        if agents.is_empty() {
            return Err("the group needs at least one agent".into());
        }
        for a in &agents {
            if a.name.trim().is_empty() || a.instructions.trim().is_empty() {
                return Err("every agent needs a name and instructions".into());
            }
        }
        Ok(agents)
    }
}

/// One agent's message.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMessage {
    pub agent: String,
    pub text: String,
    pub header: TurnHeader,
    pub usage: TokenUsage,
    pub finish_reason: FinishReason,
    /// When the message was finished, as the history stores it (the Chat UI's display form).
    pub finished_at: String,
    /// The passages this message cites, by name; `None` when the round did not search.
    pub citations: Option<Vec<String>>,
    /// How many model calls the message took (one, and one more per round of tool calls).
    pub model_calls: u32,
    /// The tools the agent called, with their results, and their thoughts.
    pub tools: Vec<ToolExchange>,
    /// How many of those calls ran (those past the round limit did not).
    pub calls_run: u32,
    pub thoughts: Vec<Thought>,
    /// Why the round ended with this message before its agents had done (its time limit), told with it; also among
    /// its thoughts.
    pub round_ended: Option<Thought>,
}

/// A round in progress: the chat, the conversation so far (with who said what), and the agents' messages.
pub struct AgentRound {
    pub session: Session,
    /// The user message the round answers, with its id and time (the batch answer echoes it).
    pub user_message: StoredMessage,
    /// When the round began (RFC 3339 with milliseconds): the echoed message's `CreatedAt`, and the chat's
    /// `lastUpdated` when the round is stored.
    pub started_at: String,
    /// The request's messages not stored yet, ready to store.
    new_messages: Vec<StoredMessage>,
    /// The conversation so far, each message with the agent who said it (`None`: the user, or a standard
    /// answer); fitted to the prompt budget and its files read, once for the round.
    transcript: Vec<(Option<String>, Message)>,
    messages: Vec<AgentMessage>,
    done: bool,
    /// What the round's one search found, when a knowledge base is configured: every agent sees these sources.
    grounding: Option<Grounding>,
    /// What the round spent before its agents spoke (writing the search query).
    spent_before: crate::TurnSpent,
    /// The tools every agent is offered, and who they run for.
    tools: Option<TurnTools>,
    /// The thoughts known before the agents speak: the search, and the tools that are unavailable.
    pub thoughts: Vec<Thought>,
    /// The round's account with its owner's counters: every agent's model calls are covered and noted in it.
    account: TurnAccount,
    /// When the round must end, whatever its agents are doing: before the function's own time is up, so that it
    /// is stored and answered rather than cut off. `None`: no bound.
    deadline: Option<Instant>,
    /// How long the longest agent message took: no agent starts with less time than that left.
    longest: Duration,
}

impl AgentRound {
    /// The agents' messages so far.
    pub fn messages(&self) -> &[AgentMessage] {
        &self.messages
    }

    /// Every model call of the round so far: the search query's and each agent's message (and what an agent that
    /// failed had spent).
    pub fn spent(&self) -> crate::TurnSpent {
        let mut spent = self.spent_before;
        spent.totals = self.account.spent();
        spent.model_calls = self.account.calls();
        for m in &self.messages {
            spent.tool_calls += m.calls_run;
        }
        spent
    }

    /// Ends the round by `deadline` (the earlier of it and any set before): an agent that has not finished by then
    /// is cut off, its message ending with what it had written, and no agent starts after it.
    pub fn end_by(&mut self, deadline: Instant) {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
    }

    /// Ends a round that stops before it is stored (its client went away, an agent failed): what it spent so far
    /// is settled with its owner's counters and its reservation released.
    pub async fn close_unfinished(&mut self) {
        self.account.close().await;
    }

    /// Whether another agent may start: the round's time left is at least the longest message's so far.
    fn time_for_another(&self) -> bool {
        self.deadline
            .is_none_or(|d| d.saturating_duration_since(Instant::now()) > self.longest)
    }
}

/// The thought a round ended by its time limit carries, on its last message.
fn round_ended(messages: usize) -> Thought {
    Thought {
        title: "Round ended".into(),
        description: Value::String(format!(
            "the round reached its time limit after {messages} agent message{}: it ends with what it has",
            if messages == 1 { "" } else { "s" }
        )),
        props: Some(json!({ "reason": "time_limit", "messages": messages })),
    }
}

/// The conversation as `agent` sees it: its own messages are its turns; the user's (with their files) and the
/// other agents' messages (attributed, "Name: text") are the other side.
fn agent_view(transcript: &[(Option<String>, Message)], agent: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(transcript.len() + 1);
    for (author, message) in transcript {
        out.push(match author {
            Some(a) if a == agent => Message::new(Role::Assistant, message.text()),
            Some(a) => Message::new(Role::User, format!("{a}: {}", message.text())),
            None => message.clone(),
        });
    }
    if out.last().is_some_and(|m| m.role == Role::Assistant) {
        out.push(Message::new(Role::User, "Continue."));
    }
    out
}

/// A message the round hears as its text and files: an agent's as its text (its tool calls were its own), the
/// others' with their files (a stored one's to be read back).
fn heard(stored: &StoredMessage) -> Message {
    match stored.agent_identifier {
        Some(_) => Message::new(stored.role, stored.content.clone()),
        None => Message::with_files(
            stored.role,
            stored.content.clone(),
            stored.files.iter().filter_map(|f| f.attachment()).collect(),
        ),
    }
}

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a multi-agent round for the request's last user message. A round that fails after its admission is
    /// closed with what it spent.
    pub async fn agent_round(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<AgentRound, ChatError> {
        self.check_files(input)?;
        check_overrides(self.settings(), &input.overrides)?;
        // The agents' instructions are short beside the history; the budget is the whole prompt's less the question.
        let (mut account, session) = self
            .admit_and_begin(
                caller,
                input,
                ChatMode::MultiAgent,
                self.history_budget(input, ""),
            )
            .await?;
        match self
            .agent_round_admitted(caller, input, session, &mut account)
            .await
        {
            Ok(round) => Ok(round),
            Err(e) => {
                account.close().await;
                Err(e)
            }
        }
    }

    /// The steps of [`Self::agent_round`] once admitted, its chat read: the round takes `account` along.
    async fn agent_round_admitted(
        &self,
        caller: &Caller,
        input: &TurnInput,
        mut session: Session,
        account: &mut TurnAccount,
    ) -> Result<AgentRound, ChatError> {
        // The stored history keeps who said what; the request's new messages follow it.
        let (mut authors, mut conversation): (Vec<Option<String>>, Vec<Message>) = session
            .history
            .iter()
            .map(|m| (m.agent_identifier.clone(), heard(m)))
            .chain(session.new_messages.iter().map(|m| {
                let files = m.files().cloned().collect();
                (None, Message::with_files(m.role, m.text(), files))
            }))
            .unzip();
        // Fitted to the budget before the files are read, so that none is read that no agent would see; each agent's
        // view is fitted again to its own prompt.
        let (left_out, _) = crate::fit_conversation(
            &mut conversation,
            0,
            self.settings().model.max_prompt_tokens,
        );
        authors.drain(..left_out);
        session.left_out += left_out;
        let mut thoughts: Vec<Thought> = Vec::new();
        thoughts.extend(self.read_files(&caller.owner, &mut conversation).await?);
        let transcript = authors.into_iter().zip(conversation).collect();
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        let new_messages = new_stored_messages(&session, &shown_at);
        // The request's last message is the user's; when it is stored already, it is echoed but not stored again.
        let user_message = match new_messages.last() {
            Some(m) => m.clone(),
            None => stored_message(
                Role::User,
                &input.messages.last().map(|m| m.text()).unwrap_or_default(),
                &shown_at,
            ),
        };
        let (tools, tools_thought) = self.turn_tools(caller, input).await;
        thoughts.extend(tools_thought);
        // One search per round, for the user's message; the agents answer from the same sources.
        let (grounding, spent_before) = match self
            .retriever()
            .filter(|_| self.settings().retrieval.when.before())
        {
            None => (None, crate::TurnSpent::default()),
            Some(retriever) => {
                let found = search(
                    (self.model(), &mut *account),
                    retriever,
                    self.settings(),
                    caller,
                    input,
                    &session.conversation,
                )
                .await?;
                thoughts.extend(found.thoughts);
                (Some(found.grounding), found.spent)
            }
        };
        Ok(AgentRound {
            user_message,
            started_at: rfc3339_millis(now),
            new_messages,
            session,
            transcript,
            messages: Vec::new(),
            done: false,
            grounding,
            spent_before,
            tools,
            thoughts,
            account: account.take(),
            deadline: None,
            longest: Duration::ZERO,
        })
    }

    /// The next agent's message, or `None` when the round is over.
    pub async fn next_agent_message(
        &self,
        group: &AgentGroup,
        input: &TurnInput,
        round: &mut AgentRound,
    ) -> Result<Option<AgentMessage>, ChatError> {
        if round.done || group.agents.is_empty() {
            return Ok(None);
        }
        let started = Instant::now();
        // No agent starts once the deadline has passed.
        if round.deadline.is_some_and(|d| started >= d) {
            round.done = true;
            return Ok(None);
        }
        let agent = &group.agents[round.messages.len() % group.agents.len()];
        let others: Vec<&str> = group
            .agents
            .iter()
            .filter(|a| a.name != agent.name)
            .map(|a| a.name.as_str())
            .collect();
        let system = format!(
            "{}\n\nYou are {}, in a group conversation with the user{}. Messages from the other agents are \
             shown as \"Name: text\". Answer only as {}.",
            agent.instructions,
            agent.name,
            if others.is_empty() {
                String::new()
            } else {
                format!(" and the agents {}", others.join(", "))
            },
            agent.name
        );
        let settings = self.settings();
        let mut system = system;
        // A grounded round lists its sources after the conversation, and every agent is told to cite them (in
        // square brackets: a round's answers are whole, so they are never given as native search results).
        if round.grounding.is_some() {
            system.push_str("\n\n");
            system.push_str(GROUNDING_INSTRUCTIONS);
        }
        // The agent's model call is built as a standard turn's, from the agent's policy: its instructions, model and
        // temperature, the conversation as it sees it (files included) fitted to the budget and counted.
        let mut conversation = agent_view(&round.transcript, &agent.name);
        let fixed = crate::estimate_tokens(&system) + passage_tokens(round.grounding.as_ref());
        let (mut left_out, mut estimated) =
            crate::fit_conversation(&mut conversation, fixed, settings.model.max_prompt_tokens);
        let build = |conversation: &[Message]| {
            model_request(
                settings,
                input,
                &Speaker {
                    system: system.clone(),
                    model_id: agent.model_id.as_deref(),
                    temperature: agent.temperature,
                    conversation,
                    grounding: round.grounding.as_ref(),
                    citations: CitationMode::Prompted,
                },
            )
        };
        let mut prepared = build(&conversation);
        self.count_within_budget(
            fixed,
            (&mut conversation, &mut left_out),
            &mut prepared,
            &mut estimated,
            &build,
        )
        .await;
        if left_out > 0 {
            tracing::info!(agent = %agent.name, messages_left_out = left_out, "the agent's view left out its oldest messages for the budget");
        }
        let mut request = prepared.request;
        let (tools, reasoning_note) = tools_with_reasoning(&request, round.tools.clone());
        request.tools = tools
            .iter()
            .flat_map(|t| t.tools.iter().map(|tool| tool.spec().clone()))
            .collect();
        // The agent speaks through the turn driver: its rounds of tool calls, bounded as a standard turn's, each
        // model call covered by the round's reservation; by the round's deadline it stops with what it has.
        let deadline = round.deadline;
        let call = self.model().converse(&request);
        let call = async move {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, call).await.unwrap_or_else(|_| {
                    Err(crate::ModelError::Timeout("the round's time limit".into()))
                }),
                None => call.await,
            }
        };
        let first = match round.account.start(&request, None, call).await {
            Ok(first) => Some(first),
            // The call is noted as it may have spent; the message ends empty, and the round with it.
            Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => None,
            Err(e) => return Err(e),
        };
        let model_id = request.model_id.clone();
        let prompt = crate::estimate_request_tokens(&request);
        let unstarted = first.is_none();
        let mut driver = RoundDriver::new(
            request,
            ReplyStream::new(first.unwrap_or_default()),
            self.reply_starter(),
            tools,
            round.grounding.clone(),
            (round.account.take(), prompt),
        );
        driver.end_by(deadline);
        if unstarted {
            driver.time_up_unstarted();
        }
        let mut stop = StopReason::EndTurn;
        let read = loop {
            match driver.next().await {
                Ok(Some(DriverEvent::Done(reason))) => stop = reason,
                Ok(Some(_)) => {}
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let cut = driver.timed_out;
        let finish_reason = if cut {
            Ok(FinishReason::Length)
        } else {
            read.and_then(|()| finish_reason(&stop))
        };
        let text = driver.said.clone();
        let usage = driver.usage();
        let model_calls = driver.calls.len() as u32;
        let calls_run = driver.calls_run;
        let citations = driver.grounding.as_ref().map(|g| g.cited_in(&text));
        let exchanges = std::mem::take(&mut driver.exchanges);
        let tool_thoughts = std::mem::take(&mut driver.tool_thoughts);
        round.account = driver.into_account();
        let finish_reason = finish_reason?;
        round.longest = round.longest.max(started.elapsed());
        let approved = text
            .to_lowercase()
            .contains(&group.approval_phrase.to_lowercase());
        let out_of_time = cut || (!approved && !round.time_for_another());
        let mut thoughts: Vec<Thought> = reasoning_note.into_iter().chain(tool_thoughts).collect();
        let ended = out_of_time.then(|| round_ended(round.messages.len() + 1));
        if let Some(ended) = &ended {
            thoughts.push(ended.clone());
            tracing::info!(
                messages = round.messages.len() + 1,
                "the multi-agent round reached its time limit: it ends with what it has"
            );
        }
        let message = AgentMessage {
            agent: agent.name.clone(),
            text: text.clone(),
            header: TurnHeader::new(&model_id),
            usage,
            finish_reason,
            finished_at: display_time(OffsetDateTime::now_utc().unix_timestamp()),
            citations,
            model_calls,
            calls_run,
            tools: exchanges,
            thoughts,
            round_ended: ended,
        };
        round.transcript.push((
            Some(agent.name.clone()),
            Message::new(Role::Assistant, text.clone()),
        ));
        round.messages.push(message.clone());
        round.done = approved || out_of_time || round.messages.len() >= group.max_turns;
        Ok(Some(message))
    }

    /// A whole round, stored once complete.
    pub async fn whole_round(
        &self,
        caller: &Caller,
        group: &AgentGroup,
        input: &TurnInput,
    ) -> Result<AgentRound, ChatError> {
        self.whole_round_by(caller, group, input, None).await
    }

    /// A whole round that ends by `deadline` ([`AgentRound::end_by`]), stored once complete; a round that fails on
    /// the way is closed with what it spent.
    pub async fn whole_round_by(
        &self,
        caller: &Caller,
        group: &AgentGroup,
        input: &TurnInput,
        deadline: Option<Instant>,
    ) -> Result<AgentRound, ChatError> {
        let mut round = self.agent_round(caller, input).await?;
        if let Some(deadline) = deadline {
            round.end_by(deadline);
        }
        loop {
            match self.next_agent_message(group, input, &mut round).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    round.close_unfinished().await;
                    return Err(e);
                }
            }
        }
        self.save_round(caller, &mut round).await?;
        Ok(round)
    }

    /// Stores a finished round: the user's new messages and every agent's message, all or nothing, and settles its
    /// account; returns what the round spent (every model call of it), which its caller's counters hold whether or
    /// not it is stored.
    pub async fn save_round(
        &self,
        caller: &Caller,
        round: &mut AgentRound,
    ) -> Result<crate::TurnSpent, ChatError> {
        let mut messages = round.new_messages.clone();
        let prices = self.settings().model.prices;
        let mut spent = UsageTotals::default();
        for m in &round.messages {
            spent.add(&UsageTotals::of(m.usage, prices.as_ref()));
        }
        let turn_spent = round.spent();
        // The user's new files are kept as a standard turn keeps them, and removed again when the round is not stored.
        let files = match self.keep_files(&caller.owner, &round.session).await {
            Ok(files) => files,
            Err(e) => {
                // Not stored, but spent all the same.
                round.close_unfinished().await;
                return Err(e);
            }
        };
        for (message, files) in messages.iter_mut().zip(&files) {
            message.files = files.clone();
        }
        messages.extend(round.messages.iter().map(|m| StoredMessage {
            id: m.header.id.clone(),
            role: Role::Assistant,
            content: m.text.clone(),
            timestamp: m.finished_at.clone(),
            agent_identifier: Some(m.agent.clone()),
            agent_name: Some(m.agent.clone()),
            files: Vec::new(),
            tools: m.tools.clone(),
        }));
        let stored = self
            .store_and_settle(
                &caller.owner,
                &round.session,
                &messages,
                &round.started_at,
                (&spent, &mut round.account),
            )
            .await;
        if stored.is_err() {
            let keys: Vec<String> = files.into_iter().flatten().map(|f| f.key).collect();
            self.remove_files(&caller.owner, &keys).await;
        }
        stored.map(|()| turn_spent)
    }
}
