//! The Chat UI's multi-agent mode: a group of agents answers one user message in turn, each seeing the
//! conversation so far with every agent's messages attributed by name, until a turn limit or an approval phrase.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::prompt::Speaker;
use crate::turn::{Turn, new_stored_messages, stored_message};
use crate::{
    Caller, ChatError, ChatMode, ChatModel, ChatService, FinishReason, Message, ReplyStream, Role,
    Session, SessionStore, StoredMessage, StreamingTurn, Thought, TokenUsage, ToolExchange,
    TurnHeader, TurnInput, display_time, rfc3339_millis,
};

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

/// A round in progress: the turn (the chat, the conversation so far with who said what, the agents' messages to
/// store) and the group's policy state: who spoke, whether the round is over, and by when it must be.
pub struct AgentRound {
    /// The turn, between the agents' messages (each answer takes it while it speaks).
    turn: Option<Turn>,
    /// The user message the round answers, with its id and time (the batch answer echoes it).
    pub user_message: StoredMessage,
    /// When the round began (RFC 3339 with milliseconds): the echoed message's `CreatedAt`, and the chat's
    /// `lastUpdated` when the round is stored.
    pub started_at: String,
    messages: Vec<AgentMessage>,
    done: bool,
    /// When the round must end, whatever its agents are doing: before the function's own time is up, so that it
    /// is stored and answered rather than cut off. `None`: no bound.
    deadline: Option<Instant>,
    /// How long the longest agent message took: no agent starts with less time than that left.
    longest: Duration,
}

impl AgentRound {
    fn turn(&self) -> &Turn {
        self.turn
            .as_ref()
            .expect("the turn is back between messages")
    }

    fn turn_mut(&mut self) -> &mut Turn {
        self.turn
            .as_mut()
            .expect("the turn is back between messages")
    }

    /// The chat this round belongs to.
    pub fn session(&self) -> &Session {
        &self.turn().session
    }

    /// The thoughts known before the agents speak: the search, and the tools that are unavailable.
    pub fn thoughts(&self) -> &[Thought] {
        &self.turn().thoughts
    }

    /// The agents' messages so far.
    pub fn messages(&self) -> &[AgentMessage] {
        &self.messages
    }

    /// Every model call of the round so far: the search query's and each agent's message (and what an agent that
    /// failed had spent).
    pub fn spent(&self) -> crate::TurnSpent {
        self.turn().spent()
    }

    /// Ends the round by `deadline` (the earlier of it and any set before): an agent that has not finished by then
    /// is cut off, its message ending with what it had written, and no agent starts after it.
    pub fn end_by(&mut self, deadline: Instant) {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
    }

    /// Ends a round that stops before it is stored (its client went away, an agent failed): what it spent so far
    /// is settled with its owner's counters and its reservation released.
    pub async fn close_unfinished(&mut self) {
        self.turn_mut().account.close().await;
    }

    /// Whether another agent may start: the round's time left is at least the longest message's so far.
    fn time_for_another(&self) -> bool {
        self.deadline
            .is_none_or(|d| d.saturating_duration_since(Instant::now()) > self.longest)
    }

    /// The group's policy: the agent who speaks next (round robin), or `None` when the round is over (approved, at
    /// its turn limit, or past its deadline).
    fn next_speaker<'g>(&mut self, group: &'g AgentGroup) -> Option<&'g Agent> {
        if self.done || group.agents.is_empty() {
            return None;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.done = true;
            return None;
        }
        Some(&group.agents[self.messages.len() % group.agents.len()])
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

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a multi-agent round for the request's last user message: the turn prepared as a standard turn's is
    /// (its history, files, tools and one search, which every agent answers from). A round that fails after its
    /// admission is closed with what it spent.
    pub async fn agent_round(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<AgentRound, ChatError> {
        // The agents' instructions are short beside the history; each agent's view is fitted again to its prompt.
        let turn = self
            .prepare(caller, input, (ChatMode::MultiAgent, ""))
            .await?;
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        // The request's last message is the user's; when it is stored already, it is echoed but not stored again.
        let user_message = match new_stored_messages(&turn.session, &shown_at).pop() {
            Some(m) => m,
            None => stored_message(
                Role::User,
                &input.messages.last().map(|m| m.text()).unwrap_or_default(),
                &shown_at,
            ),
        };
        Ok(AgentRound {
            turn: Some(turn),
            user_message,
            started_at: rfc3339_millis(now),
            messages: Vec::new(),
            done: false,
            deadline: None,
            longest: Duration::ZERO,
        })
    }

    /// The next agent's message, or `None` when the round is over: the group's policy says who speaks, and the
    /// agent speaks as any speaker does (its call made ready, its answer through the turn driver, collected).
    pub async fn next_agent_message(
        &self,
        group: &AgentGroup,
        input: &TurnInput,
        round: &mut AgentRound,
    ) -> Result<Option<AgentMessage>, ChatError> {
        let Some(agent) = round.next_speaker(group) else {
            return Ok(None);
        };
        let started = Instant::now();
        let mut turn = round
            .turn
            .take()
            .expect("the turn is back between messages");
        let speaker = Speaker::agent(agent, group, turn.grounding.is_some());
        let call = self.speak(&turn, input, speaker).await;
        // The first call ends at the deadline too; one the deadline stopped is noted as it may have spent, and the
        // message ends empty.
        let deadline = round.deadline;
        let first = self.model().converse(&call.request);
        let first = async move {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, first).await.unwrap_or_else(|_| {
                    Err(crate::ModelError::Timeout("the round's time limit".into()))
                }),
                None => first.await,
            }
        };
        let first = match turn.account.start(&call.request, None, first).await {
            Ok(first) => Some(first),
            Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => None,
            Err(e) => {
                round.turn = Some(turn);
                return Err(e);
            }
        };
        let unstarted = first.is_none();
        let thoughts = call.thoughts.clone();
        let mut answer = StreamingTurn::new(
            turn,
            call,
            (
                ReplyStream::new(first.unwrap_or_default()),
                self.reply_starter(),
            ),
            Vec::new(),
        );
        answer.end_by(deadline);
        if unstarted {
            answer.time_up_unstarted();
        }
        let end = match answer.read_to_end().await {
            Ok(end) => end,
            Err(e) => {
                round.turn = Some(answer.abandon());
                return Err(e);
            }
        };
        let (finished, turn) = answer.finish();
        round.turn = Some(turn);
        round.longest = round.longest.max(started.elapsed());
        let approved = finished
            .text
            .to_lowercase()
            .contains(&group.approval_phrase.to_lowercase());
        let out_of_time = finished.timed_out || (!approved && !round.time_for_another());
        let mut thoughts: Vec<Thought> =
            thoughts.into_iter().chain(finished.tool_thoughts).collect();
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
            text: finished.text.clone(),
            header: finished.header,
            usage: finished.usage,
            finish_reason: if finished.timed_out {
                FinishReason::Length
            } else {
                end.finish_reason
            },
            finished_at: display_time(OffsetDateTime::now_utc().unix_timestamp()),
            citations: finished.grounding.is_some().then_some(end.citations),
            model_calls: finished.model_calls,
            calls_run: finished.calls_run,
            tools: finished.tools,
            thoughts,
            round_ended: ended,
        };
        // The next agents hear it.
        let session = &mut round.turn_mut().session;
        session
            .conversation
            .push(Message::new(Role::Assistant, finished.text));
        session.authors.push(Some(agent.name.clone()));
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
        self.finish_round(caller, &mut round).await?;
        Ok(round)
    }

    /// Stores a finished round as every turn is stored (the user's new messages and every agent's message, all or
    /// nothing, its account settled); returns what the round spent (every model call of it), which its caller's
    /// counters hold whether or not it is stored.
    pub async fn finish_round(
        &self,
        caller: &Caller,
        round: &mut AgentRound,
    ) -> Result<crate::TurnSpent, ChatError> {
        let spent = round.spent();
        let started_at = round.started_at.clone();
        let stored = self
            .save(&caller.owner, round.turn_mut(), Some(&started_at))
            .await;
        stored.map(|()| spent)
    }
}
