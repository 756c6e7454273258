//! One chat turn, written once: begin the session → prepare the prompt → ask the model → shape the answer →
//! store the turn. The buffered answer takes the streamed path's steps: it is the streamed answer, collected.

use std::sync::Arc;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::search::search;
use crate::session::{continued_session, new_session, requested_chat};
use crate::{
    Answer, Caller, ChatError, ChatMode, ChatModel, ChatRecord, ChatSettings, FinishReason,
    Grounding, ModelError, ModelRequest, ModelStream, ReplyStream, Retriever, Role, Session,
    SessionStore, StopReason, StoredMessage, StreamingTurn, Thought, TokenUsage, TurnInput,
    display_time, prepare_turn, title_of,
};

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
}

/// The chat core with its ports plugged in; built once per cold start and shared by every request.
pub struct ChatService<M, St> {
    model: M,
    store: St,
    settings: ChatSettings,
    retriever: Option<Arc<dyn Retriever>>,
}

impl<M: ChatModel, St: SessionStore> ChatService<M, St> {
    pub fn new(model: M, store: St, settings: ChatSettings) -> Self {
        Self {
            model,
            store,
            settings,
            retriever: None,
        }
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

    /// The chat `owner`'s request continues, or a new one. An unknown or foreign chat is [`ChatError::ChatNotFound`]
    /// and nothing is written.
    pub async fn begin(
        &self,
        owner: &str,
        input: &TurnInput,
        mode: ChatMode,
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
                let loaded = self.store.load_for_turn(owner, &chat_id).await?;
                let mut session = continued_session(
                    chat_id,
                    loaded.record.mode,
                    &loaded.messages,
                    &input.messages,
                );
                // The turn's write goes as of this read: the store need not read the chat again first.
                session.read_mark = loaded.mark;
                Ok(session)
            }
        }
    }

    /// The steps before the model: the session, the search (when a knowledge base is configured), the prompt.
    async fn prepare(&self, caller: &Caller, input: &TurnInput) -> Result<Turn, ChatError> {
        let session = self.begin(&caller.owner, input, ChatMode::Standard).await?;
        let mut thoughts = Vec::new();
        let grounding = match &self.retriever {
            None => None,
            Some(retriever) => {
                let found = search(
                    &self.model,
                    retriever.as_ref(),
                    &self.settings,
                    caller,
                    input,
                    &session.conversation,
                )
                .await?;
                thoughts.extend(found.thoughts);
                Some(found.grounding)
            }
        };
        let prepared = prepare_turn(
            &self.settings,
            input,
            &session.conversation,
            grounding.as_ref(),
        );
        thoughts.push(prepared.prompt_thought);
        Ok(Turn {
            session,
            header: TurnHeader::new(&prepared.request.model_id),
            request: prepared.request,
            thoughts,
            followups: input.overrides.suggest_followup_questions,
            grounding,
        })
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
        let mut streaming = StreamingTurn::new(turn, model_stream);
        streaming.prime().await?;
        Ok(streaming)
    }

    /// Answers a validated request in full, and stores the turn before returning it.
    pub async fn answer(&self, caller: &Caller, input: &TurnInput) -> Result<Answer, ChatError> {
        let turn = self.prepare(caller, input).await?;
        let reply = self.model.converse(&turn.request).await?;
        self.collect(caller, StreamingTurn::new(turn, ReplyStream::new(reply)))
            .await
    }

    /// Reads a turn's whole answer, then stores the turn.
    pub async fn collect<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<Answer, ChatError> {
        let (answer, session) = turn.into_answer().await?;
        self.save(&caller.owner, &session, &answer.content).await?;
        Ok(answer)
    }

    /// Stores a streamed turn whose answer has been shown whole.
    pub async fn save_streamed<S: ModelStream>(
        &self,
        caller: &Caller,
        turn: StreamingTurn<S>,
    ) -> Result<(), ChatError> {
        let (session, shown) = turn.into_parts();
        self.save(&caller.owner, &session, &shown).await
    }

    /// Stores a turn whose answer is complete: the session's new messages and the answer, all or nothing.
    async fn save(&self, owner: &str, session: &Session, answer: &str) -> Result<(), ChatError> {
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        let mut messages = new_stored_messages(session, &shown_at);
        messages.push(stored_message(Role::Assistant, answer, &shown_at));
        self.store_turn(owner, session, &messages, &rfc3339_millis(now))
            .await
    }

    /// Stores `messages` as the turn of `session`: the chat is created by its first turn, continued by the others.
    /// A session that is not kept stores nothing. `now` (RFC 3339) is the chat's new `lastUpdated`. Every turn,
    /// standard or multi-agent, is stored here.
    pub(crate) async fn store_turn(
        &self,
        owner: &str,
        session: &Session,
        messages: &[StoredMessage],
        now: &str,
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
            };
            self.store.create(owner, &chat, messages).await?;
        } else {
            self.store
                .append_after(
                    owner,
                    &session.chat_id,
                    session.read_mark.as_ref(),
                    messages,
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
        StopReason::EndTurn | StopReason::StopSequence | StopReason::Other(_) => {
            Ok(FinishReason::Stop)
        }
    }
}

pub(crate) fn usage_thought(usage: TokenUsage, stop: &StopReason) -> Thought {
    let stop = match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::GuardrailIntervened => "guardrail_intervened",
        StopReason::ContentFiltered => "content_filtered",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        StopReason::Other(s) => s.as_str(),
    };
    Thought {
        title: "Token usage".into(),
        description: Value::String(format!(
            "{} input tokens, {} output tokens, {} in all",
            usage.input_tokens, usage.output_tokens, usage.total_tokens
        )),
        props: Some(json!({
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "stop_reason": stop,
        })),
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
