//! The one way any speaker's model call is made ready: the turn's conversation as the speaker sees it, fitted to
//! the prompt budget with the passages and the tools (a completion's own among them), and the prompt counted where
//! exactness matters.

use serde_json::{Value, json};

use crate::budget::passage_tokens;
use crate::driver::TurnTools;
use crate::prompt::{PreparedTurn, Speaker, model_request};
use crate::thoughts::history_thought;
use crate::turn::{Turn, TurnHeader};
use crate::{
    ChatModel, ChatService, Message, ModelRequest, SessionStore, Thought, TurnInput,
    estimate_tokens,
};

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
        let settings = turn.scope.settings(&self.settings);
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
            // A stateless completion's own: the client's tools after the server's, its choice, stop sequences and
            // answer format, and the reasoning kept for the calls it continues.
            if let Some(plan) = &turn.scope.completion {
                plan.apply(&mut prepared.request);
            }
            prepared
        };
        let mut thoughts = Vec::new();
        // Tools are offered while the model reasons too: each round's signed reasoning goes back with its tool uses.
        let tools = turn.tools.clone();
        let mut prepared: PreparedTurn = build(&conversation, &tools);
        let tool_tokens = crate::budget::estimate_tool_specs(&prepared.request.tools);
        estimated += tool_tokens;
        let counted = self
            .count_within_budget(
                settings,
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
