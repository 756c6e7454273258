//! Who speaks in a turn, and the one way any speaker's model call is made ready: a standard turn has one speaker
//! (the configured model, prompted as the settings and the request say), a multi-agent round one per agent message
//! (its instructions, model and temperature, seeing the others' messages attributed). Each sees the turn's
//! conversation its way, fitted to the prompt budget with the passages and counted where exactness matters.

use serde_json::{Value, json};

use crate::driver::{TurnTools, tools_with_reasoning};
use crate::prepare::passage_tokens;
use crate::prompt::{GROUNDING_INSTRUCTIONS, PreparedTurn, model_request, system_prompt};
use crate::thoughts::history_thought;
use crate::turn::{Turn, TurnHeader};
use crate::{
    ChatModel, ChatService, ChatSettings, CitationMode, Message, ModelRequest, Role, SessionStore,
    Thought, TurnInput, estimate_tokens,
};

/// Who speaks in one answer of a turn, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Speaker {
    /// The agent who speaks, as its messages are stored; `None` for the standard answer.
    pub name: Option<String>,
    /// The whole system prompt, instructions for the sources included.
    pub system: String,
    /// The speaker's own model; `None` is the configured one.
    pub model_id: Option<String>,
    /// The speaker's own temperature, over the request's.
    pub temperature: Option<f64>,
    /// How the passages are given to the model.
    pub citations: CitationMode,
    /// Whether the answer ends in follow-up questions, to cut out.
    pub followups: bool,
}

impl Speaker {
    /// The standard turn's speaker: the configured model, prompted as the settings and the request say.
    pub(crate) fn standard(settings: &ChatSettings, input: &TurnInput, grounded: bool) -> Self {
        Self {
            name: None,
            system: system_prompt(settings, input, grounded),
            model_id: None,
            temperature: None,
            citations: settings.retrieval.citations,
            followups: input.overrides.suggest_followup_questions,
        }
    }

    /// An agent of a group: its instructions, who it is talking with, how other agents' messages are shown, and
    /// (in a grounded round) to cite the sources in square brackets; its own model and temperature.
    pub(crate) fn agent(agent: &crate::Agent, group: &crate::AgentGroup, grounded: bool) -> Self {
        let others: Vec<&str> = group
            .agents
            .iter()
            .filter(|a| a.name != agent.name)
            .map(|a| a.name.as_str())
            .collect();
        let mut system = format!(
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
        // A grounded round's answers are whole, so its passages are never given as native search results.
        if grounded {
            system.push_str("\n\n");
            system.push_str(GROUNDING_INSTRUCTIONS);
        }
        Self {
            name: Some(agent.name.clone()),
            system,
            model_id: agent.model_id.clone(),
            temperature: agent.temperature,
            citations: CitationMode::Prompted,
            followups: false,
        }
    }

    /// The conversation as this speaker sees it. The standard speaker: as it is. An agent: its own messages are its
    /// turns; the user's (with their files) and the other agents' (attributed, "Name: text") are the other side.
    fn view(&self, conversation: &[Message], authors: &[Option<String>]) -> Vec<Message> {
        let Some(me) = &self.name else {
            return conversation.to_vec();
        };
        let mut out: Vec<Message> = Vec::with_capacity(conversation.len() + 1);
        for (message, author) in conversation.iter().zip(authors) {
            out.push(match author {
                Some(a) if a == me => Message::new(Role::Assistant, message.text()),
                Some(a) => Message::new(Role::User, format!("{a}: {}", message.text())),
                None => message.clone(),
            });
        }
        if out.last().is_some_and(|m| m.role == Role::Assistant) {
            out.push(Message::new(Role::User, "Continue."));
        }
        out
    }
}

/// A speaker's model call, ready to start: the request, what identifies its answer, its prompt's tokens as counted
/// or estimated, the tools it offers, and the thoughts of making it.
pub(crate) struct Call {
    pub speaker: Speaker,
    pub request: ModelRequest,
    pub header: TurnHeader,
    pub prompt_tokens: u64,
    pub tools: Option<TurnTools>,
    pub thoughts: Vec<Thought>,
}

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Makes `speaker`'s model call ready: the conversation as it sees it, fitted to the prompt budget beside its
    /// system prompt, the passages and the tools (a cut moving in steps where prompts are cached), the request
    /// built, the tools left out while the model reasons, the prompt counted where exactness matters, and the
    /// thoughts that tell what was sent.
    pub(crate) async fn speak(&self, turn: &Turn, input: &TurnInput, speaker: Speaker) -> Call {
        let settings = &self.settings;
        let budget = settings.model.max_prompt_tokens;
        let session = &turn.session;
        let mut conversation = speaker.view(&session.conversation, &session.authors);
        let system = estimate_tokens(&speaker.system);
        let passages = passage_tokens(turn.grounding.as_ref());
        let over = |conversation: &[Message], fixed: u64| {
            fixed
                + conversation
                    .iter()
                    .map(crate::estimate_message_tokens)
                    .sum::<u64>()
                > budget
        };
        // Whether the budget cut the history: the store stopped before the oldest message, or a fit had to cut.
        let cut = turn.cut || over(&conversation, system + passages);
        let (more, mut estimated) =
            crate::fit_conversation(&mut conversation, system + passages, budget);
        let mut left_out = session.left_out + more;
        // Cached prompts share a prefix only while the conversation starts at the same message: a cut moves in steps.
        // (Only a cut: a chat that fits, but starts with an answer left out, keeps the rest.)
        if settings.model.prompt_caching && cut {
            let (more, tokens) =
                crate::align_conversation(&mut conversation, left_out, crate::CACHE_FRIENDLY_STEP);
            left_out += more;
            estimated -= tokens;
        }
        // The tools go with every request the count sees, as they go to the model.
        let build = |conversation: &[Message], tools: &Option<TurnTools>| {
            let mut prepared = model_request(
                settings,
                input,
                (&speaker, conversation, turn.grounding.as_ref()),
            );
            prepared.request.tools = tools
                .iter()
                .flat_map(|t| t.tools.iter().map(|tool| tool.spec().clone()))
                .collect();
            prepared
        };
        let mut prepared: PreparedTurn = build(&conversation, &None);
        let mut thoughts = Vec::new();
        let (tools, reasoning_note) = tools_with_reasoning(&prepared.request, turn.tools.clone());
        thoughts.extend(reasoning_note);
        prepared = build(&conversation, &tools);
        let tool_tokens = crate::budget::estimate_tool_specs(&prepared.request.tools);
        estimated += tool_tokens;
        let counted = self
            .count_within_budget(
                system + passages + tool_tokens,
                (&mut conversation, &mut left_out),
                &mut prepared,
                &mut estimated,
                |conversation| build(conversation, &tools),
            )
            .await;
        thoughts.extend(history_thought(
            (conversation.len(), left_out, session.items_read),
            budget,
            estimated,
            counted,
        ));
        if let Some(Value::Object(props)) = prepared.prompt_thought.props.as_mut() {
            props.insert("max_prompt_tokens".into(), json!(budget));
            props.insert("estimated_prompt_tokens".into(), json!(estimated));
            if let Some(counted) = counted {
                props.insert("counted_prompt_tokens".into(), json!(counted));
            }
            props.insert("messages_left_out".into(), json!(left_out));
            if !session.is_new {
                props.insert("store_items_read".into(), json!(session.items_read));
            }
            if !prepared.request.tools.is_empty() {
                let names: Vec<&str> = prepared
                    .request
                    .tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect();
                props.insert("tools".into(), json!(names));
            }
        }
        if left_out > session.left_out
            && let Some(name) = &speaker.name
        {
            tracing::info!(agent = %name, messages_left_out = left_out, "the agent's view left out its oldest messages for the budget");
        }
        thoughts.push(prepared.prompt_thought);
        Call {
            header: TurnHeader::new(&prepared.request.model_id),
            request: prepared.request,
            prompt_tokens: counted.unwrap_or(estimated),
            tools,
            thoughts,
            speaker,
        }
    }
}
