//! One chat turn, written once: begin the session → prepare the prompt → ask the model → shape the answer →
//! store the turn. The buffered answer takes the streamed path's steps: it is the streamed answer, collected.

use std::sync::Arc;

use crate::{Limits, Periods, UsageLedger};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::driver::{RoundStarter, TurnTools};
use crate::prompt::system_prompt;
use crate::search::search;
use crate::session::{continued_session, new_session, requested_chat};
use crate::{
    Answer, Caller, ChatError, ChatMode, ChatModel, ChatRecord, ChatSettings, FinishReason,
    Grounding, ModelError, ModelRequest, ModelStream, ReplyStream, Retriever, Role, Session,
    SessionStore, StopReason, StoredMessage, StreamingTurn, Thought, TokenUsage, TurnInput,
    display_time, prepare_turn, title_of,
};
use crate::{AttachmentError, AttachmentStore, ContentPart, InvalidRequest, Message, StoredFile};
use crate::{
    GuardrailTrace, HistoryBudget, Prices, ReasoningStyle, Served, UsageTotals, estimate_tokens,
    fit_conversation,
};
use crate::{ToolBounds, ToolSource};

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
}

/// The chat core with its ports plugged in; built once per cold start and shared by every request.
pub struct ChatService<M, St> {
    /// Shared with the rounds of the answers in progress, which start model calls of their own.
    model: Arc<M>,
    store: St,
    settings: ChatSettings,
    retriever: Option<Arc<dyn Retriever>>,
    attachments: Option<Arc<dyn AttachmentStore>>,
    /// Where what each user spends is counted, and the limits it is held to.
    ledger: Option<Arc<dyn UsageLedger>>,
    usage_limits: Limits,
    /// Where tools beyond the built-in ones come from (MCP servers), and the bounds every tool runs under.
    tool_sources: Vec<Arc<dyn ToolSource>>,
    tool_bounds: ToolBounds,
}

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    pub fn new(model: M, store: St, settings: ChatSettings) -> Self {
        Self {
            model: Arc::new(model),
            store,
            settings,
            retriever: None,
            attachments: None,
            ledger: None,
            usage_limits: Limits::default(),
            tool_sources: Vec::new(),
            tool_bounds: ToolBounds::default(),
        }
    }

    /// Offers the model the tools of `sources` (beside `search_documents`, offered when `RETRIEVAL` says so), run
    /// under `bounds`.
    pub fn with_tools(mut self, sources: Vec<Arc<dyn ToolSource>>, bounds: ToolBounds) -> Self {
        self.tool_sources = sources;
        self.tool_bounds = bounds;
        self
    }

    /// The tools a turn of `caller` offers the model: `search_documents` when the knowledge base is searched as a
    /// tool, then each source's. A name offered twice keeps its first tool. A source that offers nothing this turn
    /// (a server down) is said in the thought returned, never the turn's failure.
    pub(crate) async fn turn_tools(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> (Option<TurnTools>, Option<Thought>) {
        let mut tools: Vec<Arc<dyn crate::Tool>> = Vec::new();
        if let Some(retriever) = &self.retriever
            && self.settings.retrieval.when.as_tool()
        {
            tools.push(Arc::new(crate::search::SearchDocuments::new(
                retriever.clone(),
                &self.settings,
                &input.overrides,
            )));
        }
        let mut unavailable = Vec::new();
        for source in &self.tool_sources {
            let listing = source.list().await;
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

    /// Starts each streamed round of an answer.
    fn stream_starter(&self) -> RoundStarter<M::Stream> {
        let model = self.model.clone();
        Box::new(move |request| {
            let model = model.clone();
            Box::pin(async move { model.converse_stream(&request).await })
        })
    }

    /// Starts each round of a buffered answer: the whole reply, read as a stream.
    pub(crate) fn reply_starter(&self) -> RoundStarter<ReplyStream> {
        let model = self.model.clone();
        Box::new(move |request| {
            let model = model.clone();
            Box::pin(async move { model.converse(&request).await.map(ReplyStream::new) })
        })
    }

    /// Counts what each user spends in `ledger`, and holds them to `limits` (checked before every turn when any
    /// is set). `None` counts nothing and limits nothing.
    pub fn with_usage(mut self, ledger: Option<Arc<dyn UsageLedger>>, limits: Limits) -> Self {
        self.ledger = ledger;
        self.usage_limits = if self.ledger.is_some() {
            limits
        } else {
            Limits::default()
        };
        self
    }

    /// The limits users are held to (before an operator's item raises one user's).
    pub fn usage_limits(&self) -> &Limits {
        &self.usage_limits
    }

    /// Refuses a turn whose caller is over a quota or the rate limit, before anything is asked of the model: one
    /// read of their counters, and, when a rate is limited, the request counted. Nothing when no limit is set.
    pub async fn admit(&self, caller: &Caller) -> Result<(), ChatError> {
        let Some(ledger) = self.ledger.as_deref() else {
            return Ok(());
        };
        if !self.usage_limits.any() {
            return Ok(());
        }
        let periods = Periods::at(OffsetDateTime::now_utc());
        let usage = ledger
            .read(&caller.owner, &periods)
            .await
            .map_err(ChatError::Store)?;
        let limits = self.usage_limits.for_user(&usage.overrides);
        if let Err(refused) = crate::check(&limits, &usage, &periods) {
            tracing::info!(limit = ?refused.kind, retry_after = refused.retry_after, "over a limit: turn refused");
            return Err(ChatError::OverLimit(refused));
        }
        if limits.requests_per_minute.is_some() {
            ledger
                .count_request(&caller.owner, &periods)
                .await
                .map_err(ChatError::Store)?;
        }
        Ok(())
    }

    /// Counts a turn that ended before its answer did (its client went away, or the model failed on the way) with
    /// what it had spent ([`StreamingTurn::spent_so_far`], [`crate::AgentRound::spent`]). Without this, a client that
    /// always hangs up just before the end would spend without limit.
    pub async fn count_unfinished(&self, caller: &Caller, spent: crate::TurnSpent) {
        self.count_spent(&caller.owner, &spent).await;
    }

    /// Adds what a turn spent to its caller's counters. A failure is logged, not the turn's: its answer stands,
    /// and the counter is short by this turn rather than counted twice by a blind retry.
    pub(crate) async fn count_spent(&self, owner: &str, spent: &crate::TurnSpent) {
        let Some(ledger) = self.ledger.as_deref() else {
            return;
        };
        let periods = Periods::at(OffsetDateTime::now_utc());
        if let Err(e) = ledger.record(owner, &periods, &spent.totals).await {
            tracing::warn!(error = %e, "the turn's usage was not counted");
        }
    }

    /// Keeps the files of messages in `attachments`, per owner; `None` takes no files.
    pub fn with_attachments(mut self, attachments: Option<Arc<dyn AttachmentStore>>) -> Self {
        self.attachments = attachments;
        self
    }

    /// Where the owners' files are kept, when anywhere.
    pub fn attachments(&self) -> Option<&dyn AttachmentStore> {
        self.attachments.as_deref()
    }

    /// Grounds standard turns in what `retriever` finds; `None` answers from the model alone.
    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.retriever = retriever;
        self
    }

    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    pub fn store(&self) -> &St {
        &self.store
    }

    pub(crate) fn model(&self) -> &M {
        &self.model
    }

    pub(crate) fn retriever(&self) -> Option<&dyn Retriever> {
        self.retriever.as_deref()
    }

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
    pub(crate) fn history_budget(&self, input: &TurnInput, system: &str) -> HistoryBudget {
        let question = input
            .messages
            .last()
            .map(crate::estimate_message_tokens)
            .unwrap_or(0);
        HistoryBudget {
            tokens: self
                .settings
                .model
                .max_prompt_tokens
                .saturating_sub(estimate_tokens(system) + question),
        }
    }

    /// The steps before the model: the session, the search (when a knowledge base is configured), the prompt.
    async fn prepare(&self, caller: &Caller, input: &TurnInput) -> Result<Turn, ChatError> {
        self.check_files(input)?;
        check_overrides(&self.settings, &input.overrides)?;
        self.admit(caller).await?;
        let budget = self.settings.model.max_prompt_tokens;
        let system = system_prompt(&self.settings, input, self.retriever.is_some());
        let mut session = self
            .begin(
                &caller.owner,
                input,
                ChatMode::Standard,
                self.history_budget(input, &system),
            )
            .await?;
        // Whether the budget cut the history: the store stopped before the oldest message, or a fit had to cut.
        let over = |conversation: &[Message], fixed: u64| {
            fixed
                + conversation
                    .iter()
                    .map(crate::estimate_message_tokens)
                    .sum::<u64>()
                > budget
        };
        let mut cut = session.left_out > 0 || over(&session.conversation, estimate_tokens(&system));
        // Fitted before the files are read and the search runs, so that neither reads what the prompt leaves out.
        let (left_out, _) =
            fit_conversation(&mut session.conversation, estimate_tokens(&system), budget);
        session.left_out += left_out;
        let mut thoughts = Vec::new();
        if let Some(thought) = self
            .read_files(&caller.owner, &mut session.conversation)
            .await?
        {
            thoughts.push(thought);
        }
        let (tools, tools_thought) = self.turn_tools(caller, input).await;
        thoughts.extend(tools_thought);
        // Tool calls of earlier turns go to the model as tool use while it is offered those tools; as text otherwise.
        let offered: Vec<&str> = tools
            .iter()
            .flat_map(|t| t.tools.iter().map(|tool| tool.spec().name.as_str()))
            .collect();
        crate::prompt::tools_offered_or_text(&mut session.conversation, &offered);
        let mut spent_before = crate::TurnSpent::default();
        let grounding = match self
            .retriever
            .as_ref()
            .filter(|_| self.settings.retrieval.when.before())
        {
            None => None,
            Some(retriever) => {
                let found = search(
                    self.model.as_ref(),
                    retriever.as_ref(),
                    &self.settings,
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
        // The passages take their room too.
        let passages: u64 = grounding
            .iter()
            .flat_map(|g| &g.passages)
            .map(|p| estimate_tokens(&p.text) + estimate_tokens(&p.citation()) + 2)
            .sum();
        cut |= over(&session.conversation, estimate_tokens(&system) + passages);
        let (left_out, mut estimated) = fit_conversation(
            &mut session.conversation,
            estimate_tokens(&system) + passages,
            budget,
        );
        session.left_out += left_out;
        // Cached prompts share a prefix only while the conversation starts at the same message: a cut moves in steps.
        // (Only a cut: a chat that fits, but starts with an answer left out, keeps the rest.)
        if self.settings.model.prompt_caching && cut {
            let (more, tokens) = crate::align_conversation(
                &mut session.conversation,
                session.left_out,
                crate::CACHE_FRIENDLY_STEP,
            );
            session.left_out += more;
            estimated -= tokens;
        }
        let mut prepared = prepare_turn(
            &self.settings,
            input,
            &session.conversation,
            grounding.as_ref(),
        );
        let counted = self
            .count_within_budget(
                input,
                grounding.as_ref(),
                estimate_tokens(&system) + passages,
                &mut session,
                &mut prepared,
                &mut estimated,
            )
            .await;
        if let Some(thought) = history_thought(&session, budget, estimated, counted) {
            thoughts.push(thought);
        }
        if let Some(Value::Object(props)) = prepared.prompt_thought.props.as_mut() {
            props.insert("max_prompt_tokens".into(), json!(budget));
            props.insert("estimated_prompt_tokens".into(), json!(estimated));
            if let Some(counted) = counted {
                props.insert("counted_prompt_tokens".into(), json!(counted));
            }
            props.insert("messages_left_out".into(), json!(session.left_out));
            if !session.is_new {
                props.insert("store_items_read".into(), json!(session.items_read));
            }
        }
        prepared.request.tools = tools
            .iter()
            .flat_map(|t| t.tools.iter().map(|tool| tool.spec().clone()))
            .collect();
        if let Some(Value::Object(props)) = prepared.prompt_thought.props.as_mut()
            && !prepared.request.tools.is_empty()
        {
            props.insert("tools".into(), json!(offered));
        }
        thoughts.push(prepared.prompt_thought);
        Ok(Turn {
            session,
            header: TurnHeader::new(&prepared.request.model_id),
            request: prepared.request,
            thoughts,
            followups: input.overrides.suggest_followup_questions,
            grounding,
            prices: self.settings.model.prices,
            spent_before,
            prompt_tokens: counted.unwrap_or(estimated),
            tools,
        })
    }

    /// Counts the prepared prompt exactly where exactness matters, and leaves out more of its oldest messages while
    /// the count is over the budget. The estimate over-counts most text, but not every script (some take a token
    /// per character), an image past its usual size, or a document: once it is past half the budget, such an
    /// error could carry the prompt over, so the model that answers counts it (`CountTokens` costs nothing, and
    /// takes a round trip). A cut scales the estimate by how far off it was, then the prompt is counted again, a
    /// few times at most. A count that fails leaves the estimate to decide, as without a counter. Returns the last
    /// count.
    async fn count_within_budget(
        &self,
        input: &TurnInput,
        grounding: Option<&Grounding>,
        fixed: u64,
        session: &mut Session,
        prepared: &mut crate::PreparedTurn,
        estimated: &mut u64,
    ) -> Option<u64> {
        /// At most this many counts a turn: a cut sized by one count is close, and the last one is checked.
        const MAX_COUNTS: usize = 3;
        let counter = self.settings.model.token_counter.as_deref()?;
        let budget = self.settings.model.max_prompt_tokens;
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
            if exact <= budget || session.conversation.len() <= 1 {
                break;
            }
            // The estimate under-counted: hold it to the budget shrunk by as much, and leave out one message at least.
            let scaled = (u128::from(budget) * u128::from(*estimated) / u128::from(exact)) as u64;
            let (left_out, kept) = fit_conversation(
                &mut session.conversation,
                fixed,
                scaled.min(estimated.saturating_sub(1)),
            );
            session.left_out += left_out;
            *estimated = kept;
            if self.settings.model.prompt_caching {
                let (more, tokens) = crate::align_conversation(
                    &mut session.conversation,
                    session.left_out,
                    crate::CACHE_FRIENDLY_STEP,
                );
                session.left_out += more;
                *estimated -= tokens;
            }
            *prepared = prepare_turn(&self.settings, input, &session.conversation, grounding);
            counted = None;
        }
        counted
    }

    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let turn = self.prepare(caller, input).await?;
        let model_stream = self.model.converse_stream(&turn.request).await?;
        let mut streaming = StreamingTurn::new(turn, model_stream, self.stream_starter());
        streaming.prime().await?;
        Ok(streaming)
    }

    /// Answers a validated request in full, and stores the turn before returning it.
    pub async fn answer(&self, caller: &Caller, input: &TurnInput) -> Result<Answer, ChatError> {
        let turn = self.prepare(caller, input).await?;
        let reply = self.model.converse(&turn.request).await?;
        self.collect(
            caller,
            StreamingTurn::new(turn, ReplyStream::new(reply), self.reply_starter()),
        )
        .await
    }

    /// Reads a turn's whole answer, then stores the turn.
    pub async fn collect<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<Answer, ChatError> {
        let (answer, session, tools, spent) = turn.into_answer().await?;
        self.save(
            &caller.owner,
            &session,
            (&answer.content, tools),
            &spent,
            &answer.spent,
        )
        .await?;
        Ok(answer)
    }

    /// Stores a streamed turn whose answer has been shown whole; returns what the turn spent.
    pub async fn save_streamed<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<crate::TurnSpent, ChatError> {
        let (session, shown, tools, spent, turn_spent) = turn.into_parts();
        self.save(
            &caller.owner,
            &session,
            (&shown, tools),
            &spent,
            &turn_spent,
        )
        .await?;
        Ok(turn_spent)
    }

    /// Stores a turn whose answer is complete: the session's new messages and the answer, all or nothing.
    /// The turn's new files are kept first; a turn whose messages are not stored removes them again.
    async fn save(
        &self,
        owner: &str,
        session: &Session,
        (answer, tools): (&str, Vec<crate::ToolExchange>),
        spent: &UsageTotals,
        turn_spent: &crate::TurnSpent,
    ) -> Result<(), ChatError> {
        log_turn(session, spent);
        self.count_spent(owner, turn_spent).await;
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        let files = self.keep_files(owner, session).await?;
        let mut messages = new_stored_messages(session, &shown_at);
        for (message, files) in messages.iter_mut().zip(&files) {
            message.files = files.clone();
        }
        let mut answer = stored_message(Role::Assistant, answer, &shown_at);
        answer.tools = tools;
        messages.push(answer);
        let stored = self
            .store_turn(owner, session, &messages, &rfc3339_millis(now), spent)
            .await;
        if stored.is_err() {
            let keys: Vec<String> = files.into_iter().flatten().map(|f| f.key).collect();
            self.remove_files(owner, &keys).await;
        }
        stored
    }

    /// Refuses files this service cannot take: more or larger than the limits, on assistant messages, or any at
    /// all when it has nowhere to keep them.
    fn check_files(&self, input: &TurnInput) -> Result<(), ChatError> {
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
    async fn read_files(
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

    /// Stores the files of the turn's new messages in the owner's files: for each new message, its files as
    /// stored. Nothing is kept for a turn that is not stored; a file that fails removes those stored before it.
    async fn keep_files(
        &self,
        owner: &str,
        session: &Session,
    ) -> Result<Vec<Vec<StoredFile>>, ChatError> {
        let mut kept: Vec<Vec<StoredFile>> = Vec::with_capacity(session.new_messages.len());
        let Some(store) = self.attachments.as_deref().filter(|_| session.kept) else {
            return Ok(kept);
        };
        for message in &session.new_messages {
            let mut files = Vec::new();
            for file in message.files() {
                match store.put(owner, &session.chat_id, file).await {
                    Ok(key) => {
                        let mut stored = file.stored();
                        stored.key = key;
                        files.push(stored);
                    }
                    Err(e) => {
                        let keys: Vec<String> = kept
                            .into_iter()
                            .chain([files])
                            .flatten()
                            .map(|f| f.key)
                            .collect();
                        self.remove_files(owner, &keys).await;
                        return Err(ChatError::Files(e));
                    }
                }
            }
            kept.push(files);
        }
        Ok(kept)
    }

    /// Removes files a failed turn stored. Best effort: what stays is the owner's, unlisted, and expires with the
    /// bucket's lifecycle.
    async fn remove_files(&self, owner: &str, keys: &[String]) {
        if let (Some(store), false) = (&self.attachments, keys.is_empty()) {
            let _ = store.delete(owner, keys).await;
        }
    }

    /// Stores `messages` as the turn of `session`: the chat is created by its first turn, continued by the others.
    /// A session that is not kept stores nothing. `now` (RFC 3339) is the chat's new `lastUpdated`. Every turn,
    /// standard or multi-agent, is stored here, with what it `spent` added to the chat's totals.
    pub(crate) async fn store_turn(
        &self,
        owner: &str,
        session: &Session,
        messages: &[StoredMessage],
        now: &str,
        spent: &UsageTotals,
    ) -> Result<(), ChatError> {
        if !session.kept {
            return Ok(());
        }
        if session.is_new {
            let chat = ChatRecord {
                id: session.chat_id.clone(),
                mode: session.mode,
                title: title_of(&session.conversation),
                created_at: now.to_string(),
                last_updated: now.to_string(),
                last_message: String::new(),
                message_count: 0,
                usage: *spent,
            };
            self.store.create(owner, &chat, messages).await?;
        } else {
            self.store
                .append_after(
                    owner,
                    &session.chat_id,
                    session.read_mark.as_ref(),
                    messages,
                    spent,
                )
                .await?;
        }
        Ok(())
    }
}

/// A new message id: 32 hex characters.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A message to store, with a new id; `shown_at` is its time as the Chat UI shows it ([`display_time`]).
pub(crate) fn stored_message(role: Role, content: &str, shown_at: &str) -> StoredMessage {
    StoredMessage {
        id: new_message_id(),
        role,
        content: content.to_string(),
        timestamp: shown_at.to_string(),
        agent_identifier: None,
        agent_name: None,
        files: Vec::new(),
        tools: Vec::new(),
    }
}

/// The session's new messages, ready to store.
pub(crate) fn new_stored_messages(session: &Session, shown_at: &str) -> Vec<StoredMessage> {
    session
        .new_messages
        .iter()
        .map(|m| stored_message(m.role, &m.text(), shown_at))
        .collect()
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

/// Logs what a turn spent, once per turn: tokens, cache use and cost, never its words.
fn log_turn(session: &Session, spent: &UsageTotals) {
    let t = &spent.tokens;
    tracing::info!(
        chat_id = %session.chat_id,
        input_tokens = t.input_tokens,
        output_tokens = t.output_tokens,
        cache_read_input_tokens = t.cache_read_input_tokens,
        cache_write_input_tokens = t.cache_write_input_tokens,
        cost_usd = spent.cost_usd,
        messages_left_out = session.left_out,
        items_read = session.items_read,
        "turn cost"
    );
}

/// Refuses overrides the configuration does not allow: a latency or service tier not in its allowed list,
/// reasoning for a model that cannot be asked to reason, or more reasoning than `MAX_REASONING_EFFORT`.
pub(crate) fn check_overrides(
    settings: &ChatSettings,
    overrides: &crate::Overrides,
) -> Result<(), InvalidRequest> {
    let options = &settings.model;
    if let Some(latency) = overrides
        .latency
        .filter(|l| !options.allowed_latencies.contains(l))
    {
        return Err(InvalidRequest::new(
            "context.overrides.latency",
            format!(
                "{:?} is not allowed here (allowed: {})",
                latency.as_str(),
                allowed(options.allowed_latencies.iter().map(|l| l.as_str()))
            ),
        ));
    }
    if let Some(tier) = overrides
        .service_tier
        .filter(|t| !options.allowed_service_tiers.contains(t))
    {
        return Err(InvalidRequest::new(
            "context.overrides.service_tier",
            format!(
                "{:?} is not allowed here (allowed: {})",
                tier.as_str(),
                allowed(options.allowed_service_tiers.iter().map(|t| t.as_str()))
            ),
        ));
    }
    if overrides.reasoning_effort.is_some()
        && options.profile.reasoning == ReasoningStyle::Unsupported
    {
        return Err(InvalidRequest::new(
            "context.overrides.reasoning_effort",
            format!("the model {} cannot be asked to reason", settings.model_id),
        ));
    }
    if let (Some(asked), Some(most)) = (overrides.reasoning_effort, options.max_reasoning_effort)
        && asked > most
    {
        return Err(InvalidRequest::new(
            "context.overrides.reasoning_effort",
            format!(
                "{:?} is more than this deployment allows (at most {:?})",
                asked.as_str(),
                most.as_str()
            ),
        ));
    }
    Ok(())
}

fn allowed<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<&str> = values.collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

/// What the turn leaves out of the chat's history, when it leaves something out.
fn history_thought(
    session: &Session,
    budget: u64,
    estimated: u64,
    counted: Option<u64>,
) -> Option<Thought> {
    if session.left_out == 0 {
        return None;
    }
    let sent = session.conversation.len();
    let used = match counted {
        Some(counted) => format!("{counted} used, counted"),
        None => format!("about {estimated} used"),
    };
    let mut props = json!({
        "messages_sent": sent,
        "messages_left_out": session.left_out,
        "max_prompt_tokens": budget,
        "estimated_prompt_tokens": estimated,
        "store_items_read": session.items_read,
    });
    if let Some(counted) = counted {
        props["counted_prompt_tokens"] = json!(counted);
    }
    Some(Thought {
        title: "Conversation history".into(),
        description: Value::String(format!(
            "{sent} newest messages sent; {} earlier messages left out to stay within {budget} prompt tokens ({used})",
            session.left_out
        )),
        props: Some(props),
    })
}

/// The reasoning as shown: redacted reasoning is said to be there, never shown.
pub(crate) fn reasoning_text(reasoning: &str, redacted: bool) -> String {
    let mut text = reasoning.to_string();
    if redacted {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(REDACTED);
    }
    text
}

/// What stands for reasoning the model provider sent encrypted.
pub const REDACTED: &str =
    "[Part of the reasoning is redacted: the model provider sent it encrypted.]";

/// What the model reasoned, whole; redacted reasoning is said to be there, never shown.
pub(crate) fn reasoning_thought(reasoning: &str, redacted: bool) -> Thought {
    Thought {
        title: "Reasoning".into(),
        description: Value::String(reasoning_text(reasoning, redacted)),
        props: Some(json!({ "redacted": redacted })),
    }
}

/// What the guardrail assessed: each policy's finding and action, never the text it matched.
pub(crate) fn guardrail_thought(trace: &GuardrailTrace) -> Thought {
    let findings: Vec<Value> = trace
        .findings
        .iter()
        .map(|f| {
            let mut finding = json!({
                "stage": f.stage, "policy": f.policy, "type": f.kind, "action": f.action,
            });
            if let Some(c) = &f.confidence {
                finding["confidence"] = json!(c);
            }
            if let Some(s) = f.score {
                finding["score"] = json!(s);
            }
            if let Some(t) = f.threshold {
                finding["threshold"] = json!(t);
            }
            finding
        })
        .collect();
    let described: Vec<String> = trace
        .findings
        .iter()
        .map(|f| {
            let mut line = format!("{} {} {}: {}", f.stage, f.policy, f.kind, f.action);
            if let (Some(score), Some(threshold)) = (f.score, f.threshold) {
                line.push_str(&format!(" (score {score}, threshold {threshold})"));
            }
            line
        })
        .collect();
    let description = if described.is_empty() {
        "nothing found".to_string()
    } else {
        described.join("; ")
    };
    Thought {
        title: "Guardrail assessment".into(),
        description: Value::String(description),
        props: Some(json!({
            "intervened": trace.intervened(),
            "action_reason": trace.action_reason,
            "findings": findings,
        })),
    }
}

pub(crate) fn usage_thought(
    usage: TokenUsage,
    stop: &StopReason,
    cost_usd: Option<f64>,
    served: &Served,
) -> Thought {
    let stop = match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::GuardrailIntervened => "guardrail_intervened",
        StopReason::ContentFiltered => "content_filtered",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        StopReason::ToolUse => "tool_use",
        StopReason::Other(s) => s.as_str(),
    };
    let mut description = format!(
        "{} input tokens, {} output tokens, {} in all",
        usage.input_tokens, usage.output_tokens, usage.total_tokens
    );
    if usage.cache_read_input_tokens > 0 || usage.cache_write_input_tokens > 0 {
        description.push_str(&format!(
            "; {} read from the prompt cache, {} written to it",
            usage.cache_read_input_tokens, usage.cache_write_input_tokens
        ));
    }
    if let Some(cost) = cost_usd {
        description.push_str(&format!("; cost ${cost:.6}"));
    }
    let mut props = json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    });
    // The cache's counts when the prompt cache was used at all.
    if usage.cache_read_input_tokens > 0 || usage.cache_write_input_tokens > 0 {
        props["cache_read_input_tokens"] = json!(usage.cache_read_input_tokens);
        props["cache_write_input_tokens"] = json!(usage.cache_write_input_tokens);
    }
    props["stop_reason"] = json!(stop);
    if let Some(cost) = cost_usd {
        props["cost_usd"] = json!(cost);
    }
    if let Some(latency) = &served.latency {
        props["latency"] = json!(latency);
    }
    if let Some(tier) = &served.service_tier {
        props["service_tier"] = json!(tier);
    }
    Thought {
        title: "Token usage".into(),
        description: Value::String(description),
        props: Some(props),
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
