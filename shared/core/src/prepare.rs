//! The steps before any answer, for every turn whoever answers it: the admission, the session and its history
//! within the prompt budget, the files read back, the tools offered, the search (when configured); and the exact
//! count of a prompt where it matters.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::checks::check_overrides;
use crate::driver::TurnTools;
use crate::search::search;
use crate::session::{continued_session, new_session, requested_chat};
use crate::turn::{Scope, Turn};
use crate::{
    AttachmentError, Caller, ChatError, ChatMode, ChatModel, ChatService, ContentPart,
    HistoryBudget, InvalidRequest, Message, Session, SessionStore, Thought, TurnInput,
    estimate_tokens, fit_conversation,
};

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// The chat `owner`'s request continues, or a new one, with as much of its newest history as `budget` takes.
    /// An unknown or foreign chat is [`ChatError::ChatNotFound`] and nothing is written.
    pub async fn begin(
        &self,
        owner: &str,
        input: &TurnInput,
        mode: ChatMode,
        budget: HistoryBudget,
    ) -> Result<Session, ChatError> {
        match requested_chat(input)? {
            None => {
                let mut session = new_session(
                    uuid::Uuid::new_v4().simple().to_string(),
                    mode,
                    &input.messages,
                );
                session.kept = input.store_new_chat;
                Ok(session)
            }
            Some(chat_id) => {
                let loaded = self.store.load_for_turn(owner, &chat_id, budget).await?;
                let mut session = continued_session(
                    chat_id,
                    loaded.record.mode,
                    &loaded.messages,
                    loaded.record.message_count as usize,
                    &input.messages,
                );
                // The turn's write goes as of this read: the store need not read the chat again first.
                session.read_mark = loaded.mark;
                session.items_read = loaded.items_read;
                Ok(session)
            }
        }
    }

    /// The history a turn reads: what the prompt budget leaves beside the system prompt and the question.
    pub(crate) fn history_budget(
        settings: &crate::ChatSettings,
        input: &TurnInput,
        system: &str,
    ) -> HistoryBudget {
        let question = input
            .messages
            .last()
            .map(crate::estimate_message_tokens)
            .unwrap_or(0);
        HistoryBudget {
            tokens: settings
                .model
                .max_prompt_tokens
                .saturating_sub(estimate_tokens(system) + question),
        }
    }

    /// The tools a turn of `caller` offers the model: `search_documents` when the knowledge base is searched as a
    /// tool, then each source's. A name offered twice keeps its first tool. A source that offers nothing this turn
    /// (a server down) is said in the thought returned, never the turn's failure.
    pub(crate) async fn turn_tools(
        &self,
        scope: &Scope,
        caller: &Caller,
        input: &TurnInput,
    ) -> (Option<TurnTools>, Option<Thought>) {
        if !scope.server_tools {
            return (None, None);
        }
        let settings = scope.settings(&self.settings);
        let mut tools: Vec<Arc<dyn crate::Tool>> = Vec::new();
        if let Some(retriever) = self.retriever.as_ref().filter(|_| scope.retrieval)
            && settings.retrieval.when.as_tool()
        {
            tools.push(Arc::new(crate::search::SearchDocuments::new(
                retriever.clone(),
                settings,
                &input.overrides,
            )));
        }
        let mut unavailable = Vec::new();
        for source in &self.tool_sources {
            let listing = source.list(caller).await;
            for tool in listing.tools {
                if tools.iter().any(|t| t.spec().name == tool.spec().name) {
                    tracing::warn!(tool = %tool.spec().name, "a tool of this name is offered already: left out");
                } else {
                    tools.push(tool);
                }
            }
            unavailable.extend(listing.unavailable);
        }
        let thought = (!unavailable.is_empty()).then(|| Thought {
            title: "Tools unavailable".into(),
            description: Value::String(unavailable.join("; ")),
            props: Some(json!({ "unavailable": unavailable })),
        });
        let tools = (!tools.is_empty()).then(|| TurnTools {
            tools: Arc::from(tools),
            caller: caller.clone(),
            bounds: self.tool_bounds,
        });
        (tools, thought)
    }

    /// The steps before any answer, for every turn: the admission while the chat is read, the conversation fitted
    /// to the prompt budget beside `hint` (the system prompt as the speakers will have it, as near as is known), the
    /// files read back, the tools offered, and the search (when a knowledge base is searched first). A turn that
    /// fails after its admission is closed with what it spent.
    pub(crate) async fn prepare(
        &self,
        caller: &Caller,
        input: &TurnInput,
        (mode, hint): (ChatMode, &str),
    ) -> Result<Turn, ChatError> {
        self.prepare_scoped(caller, input, (mode, hint), Scope::standard())
            .await
    }

    /// [`Self::prepare`] under `scope`: the settings, grounding and tools of the turn's route.
    pub(crate) async fn prepare_scoped(
        &self,
        caller: &Caller,
        input: &TurnInput,
        (mode, hint): (ChatMode, &str),
        scope: Scope,
    ) -> Result<Turn, ChatError> {
        let settings = scope.settings(&self.settings);
        self.check_files(input)?;
        check_overrides(settings, &input.overrides)?;
        let budget = Self::history_budget(settings, input, hint);
        let (mut account, session) = self
            .admit_and_begin(settings, caller, input, mode, budget)
            .await?;
        match self
            .prepare_admitted(caller, input, (session, hint), &mut account, scope)
            .await
        {
            Ok(turn) => Ok(turn),
            Err(e) => {
                account.close().await;
                Err(e)
            }
        }
    }

    /// The steps of [`Self::prepare`] once admitted, its chat read: the turn takes `account` along.
    async fn prepare_admitted(
        &self,
        caller: &Caller,
        input: &TurnInput,
        (mut session, hint): (Session, &str),
        account: &mut crate::TurnAccount,
        scope: Scope,
    ) -> Result<Turn, ChatError> {
        let settings = scope.settings(&self.settings);
        let budget = settings.model.max_prompt_tokens;
        // Whether the budget cut the history: the store stopped before the oldest message, or a fit must cut.
        let fixed = estimate_tokens(hint);
        let cut = session.left_out > 0
            || fixed
                + session
                    .conversation
                    .iter()
                    .map(crate::estimate_message_tokens)
                    .sum::<u64>()
                > budget;
        // Fitted before the files are read and the search runs, so that neither reads what no prompt will hold.
        session.fit(fixed, budget);
        let mut thoughts = Vec::new();
        if let Some(thought) = self
            .read_files(&caller.owner, &mut session.conversation)
            .await?
        {
            thoughts.push(thought);
        }
        let (tools, tools_thought) = self.turn_tools(&scope, caller, input).await;
        thoughts.extend(tools_thought);
        // Tool calls of earlier turns go to the model as tool use while it is offered those tools (the client's
        // among them); as text otherwise.
        let offered: Vec<String> = tools
            .iter()
            .flat_map(|t| t.tools.iter().map(|tool| tool.spec().name.clone()))
            .chain(scope.client_tool_names())
            .collect();
        crate::prompt::tools_offered_or_text(
            &mut session.conversation,
            &offered.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let mut spent_before = crate::TurnSpent::default();
        let grounding = match self
            .retriever
            .as_ref()
            .filter(|_| scope.retrieval && settings.retrieval.when.before())
        {
            None => None,
            Some(retriever) => {
                let found = search(
                    (self.model.as_ref(), &mut *account),
                    retriever.as_ref(),
                    settings,
                    caller,
                    input,
                    &session.conversation,
                )
                .await?;
                thoughts.extend(found.thoughts);
                spent_before = found.spent;
                Some(found.grounding)
            }
        };
        let prices = settings.model.prices;
        Ok(Turn {
            scope,
            session,
            cut,
            tools,
            grounding,
            thoughts,
            prices,
            spent_before,
            account: account.take(),
            said: Vec::new(),
            tool_calls: 0,
            kept_reasoning: None,
        })
    }

    /// Counts the prepared prompt exactly where exactness matters, and leaves out more of its oldest messages while
    /// the count is over the budget. The estimate over-counts most text, but not every script (some take a token
    /// per character), an image past its usual size, or a document: once it is past half the budget, such an
    /// error could carry the prompt over, so the model that answers counts it (`CountTokens` costs nothing, and
    /// takes a round trip). A cut scales the estimate by how far off it was, then the prompt is counted again, a
    /// few times at most. A count that fails leaves the estimate to decide, as without a counter. Returns the last
    /// count. `conversation` is what the speaker sees (and how many of the chat's messages it leaves out), and
    /// `rebuild` makes the model call again from what is left of it: every speaker of a turn is counted alike.
    pub(crate) async fn count_within_budget(
        &self,
        settings: &crate::ChatSettings,
        fixed: u64,
        (conversation, left_out): (&mut Vec<Message>, &mut usize),
        prepared: &mut crate::PreparedTurn,
        estimated: &mut u64,
        rebuild: impl Fn(&[Message]) -> crate::PreparedTurn,
    ) -> Option<u64> {
        /// At most this many counts a turn: a cut sized by one count is close, and the last one is checked.
        const MAX_COUNTS: usize = 3;
        let counter = settings.model.token_counter.as_deref()?;
        let budget = settings.model.max_prompt_tokens;
        if estimated.saturating_mul(2) <= budget {
            return None;
        }
        let mut counted = None;
        for _ in 0..MAX_COUNTS {
            let exact = match self.model.count_tokens(counter, &prepared.request).await {
                Ok(Some(exact)) => exact,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(
                        operation = "CountTokens",
                        model_id = %counter,
                        error = %e,
                        "counting the prompt failed: the estimate decides"
                    );
                    break;
                }
            };
            counted = Some(exact);
            if exact <= budget || conversation.len() <= 1 {
                break;
            }
            // The estimate under-counted: hold it to the budget shrunk by as much, and leave out one message at least.
            let scaled = (u128::from(budget) * u128::from(*estimated) / u128::from(exact)) as u64;
            let (more, kept) =
                fit_conversation(conversation, fixed, scaled.min(estimated.saturating_sub(1)));
            *left_out += more;
            *estimated = kept;
            if settings.model.prompt_caching {
                let (more, tokens) =
                    crate::align_conversation(conversation, *left_out, crate::CACHE_FRIENDLY_STEP);
                *left_out += more;
                *estimated -= tokens;
            }
            *prepared = rebuild(conversation);
            counted = None;
        }
        counted
    }

    /// Refuses files this service cannot take: more or larger than the limits, on assistant messages, or any at
    /// all when it has nowhere to keep them.
    pub(crate) fn check_files(&self, input: &TurnInput) -> Result<(), ChatError> {
        self.settings.limits.files.check_messages(&input.messages)?;
        let has_files = input.messages.iter().any(|m| m.files().next().is_some());
        if has_files && self.attachments.is_none() {
            return Err(InvalidRequest::new(
                "messages",
                "this backend takes no files: it has nowhere to keep them (ATTACHMENTS_BUCKET is not set)",
            )
            .into());
        }
        Ok(())
    }

    /// Reads back the bytes of the conversation's stored files (an earlier turn's), so the model gets them again;
    /// a file no longer kept (expired) is replaced by a line saying so. The thought lists every file the model
    /// gets.
    pub(crate) async fn read_files(
        &self,
        owner: &str,
        conversation: &mut [Message],
    ) -> Result<Option<Thought>, ChatError> {
        let mut listed = Vec::new();
        for message in conversation.iter_mut() {
            for part in message.content.iter_mut() {
                let ContentPart::File(file) = part else {
                    continue;
                };
                if file.bytes.is_none() {
                    let read = match (&self.attachments, &file.key) {
                        (Some(store), Some(key)) => store.get(owner, key).await,
                        _ => Err(AttachmentError::NotFound),
                    };
                    match read {
                        Ok(bytes) => file.bytes = Some(bytes),
                        Err(AttachmentError::NotFound) => {
                            *part =
                                ContentPart::Text(format!("[file: {}, no longer kept]", file.name));
                            continue;
                        }
                        Err(e) => return Err(ChatError::Files(e)),
                    }
                }
                listed.push(json!({
                    "name": file.name,
                    "contentType": file.kind.content_type(),
                    "size": file.size,
                }));
            }
        }
        if listed.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = listed
            .iter()
            .map(|f| {
                format!(
                    "{} ({}, {} bytes)",
                    f["name"].as_str().unwrap_or(""),
                    f["contentType"].as_str().unwrap_or(""),
                    f["size"]
                )
            })
            .collect();
        Ok(Some(Thought {
            title: "Files sent to the model".into(),
            description: Value::String(names.join(", ")),
            props: Some(json!({ "files": listed })),
        }))
    }
}
