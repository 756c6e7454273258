//! One chat turn, buffered: prepare the prompt, ask the model, shape what it said into an [`Answer`].

use chat_protocol::{Answer, ChatInput, Dialect, Field, FinishReason, Thought, TokenUsage};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::session::{continued_session, new_session, requested_chat};
use crate::{
    ChatError, ChatModel, ChatRecord, ChatSettings, FollowupSplitter, ModelError, ModelReply,
    Session, SessionStore, StopReason, StoredMessage, StreamingTurn, prepare_turn, title_of,
};
use chat_protocol::Role;
use chat_protocol::chat_ui::{ChatMode, display_time};

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

/// The chat core with its ports plugged in; built once per cold start and shared by every request.
pub struct ChatService<M, St> {
    model: M,
    store: St,
    settings: ChatSettings,
}

impl<M: ChatModel, St: SessionStore> ChatService<M, St> {
    pub fn new(model: M, store: St, settings: ChatSettings) -> Self {
        Self {
            model,
            store,
            settings,
        }
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

    /// The chat `owner`'s request continues, or a new one. An unknown or foreign chat is [`ChatError::ChatNotFound`]
    /// and nothing is written.
    pub async fn begin(
        &self,
        owner: &str,
        input: &ChatInput,
        mode: ChatMode,
    ) -> Result<Session, ChatError> {
        match requested_chat(input)? {
            None => {
                let mut session = new_session(
                    uuid::Uuid::new_v4().simple().to_string(),
                    mode,
                    &input.messages,
                );
                session.kept = input.dialect != Dialect::ChatUi;
                Ok(session)
            }
            Some(chat_id) => {
                let (chat, stored) = self.store.load(owner, &chat_id).await?;
                Ok(continued_session(
                    chat_id,
                    chat.mode,
                    &stored,
                    &input.messages,
                ))
            }
        }
    }

    /// Stores a turn whose answer is complete: the session's new messages and the answer, all or nothing.
    pub async fn save(
        &self,
        owner: &str,
        session: &Session,
        answer: &str,
    ) -> Result<(), ChatError> {
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        let mut messages = new_stored_messages(session, &shown_at);
        messages.push(stored_message(Role::Assistant, answer, &shown_at));
        self.store_turn(owner, session, &messages, &rfc3339_millis(now))
            .await
    }

    /// Stores `messages` as the turn of `session`: the chat is created by its first turn, continued by the others.
    /// A session that is not kept stores nothing. `now` (RFC 3339) is the chat's new `lastUpdated`.
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
            self.store.append(owner, &session.chat_id, messages).await?;
        }
        Ok(())
    }

    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(
        &self,
        owner: &str,
        input: &ChatInput,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let session = self.begin(owner, input, ChatMode::Standard).await?;
        let turn = prepare_turn(&self.settings, input, &session.conversation);
        let model_stream = self.model.converse_stream(&turn.request).await?;
        let mut streaming = StreamingTurn::new(
            TurnHeader::new(&turn.request.model_id),
            turn.prompt_thought,
            model_stream,
            input.overrides.suggest_followup_questions,
            session,
        );
        streaming.prime().await?;
        Ok(streaming)
    }

    /// Answers a validated request in full, and stores the turn before returning it.
    pub async fn answer(&self, owner: &str, input: &ChatInput) -> Result<Answer, ChatError> {
        let session = self.begin(owner, input, ChatMode::Standard).await?;
        let turn = prepare_turn(&self.settings, input, &session.conversation);
        let reply = self.model.converse(&turn.request).await?;
        let ModelReply {
            text,
            stop_reason,
            usage,
        } = reply;
        let finish_reason = finish_reason(&stop_reason)?;
        let (content, followup_questions) = if input.overrides.suggest_followup_questions {
            let (content, questions) = FollowupSplitter::split(&text);
            (content, Some(questions))
        } else {
            (text, None)
        };
        self.save(owner, &session, &content).await?;
        let header = TurnHeader::new(&turn.request.model_id);
        Ok(Answer {
            id: header.id,
            created: header.created,
            created_at: header.created_at,
            model: header.model,
            content,
            finish_reason,
            usage,
            prompt_thoughts: vec![turn.prompt_thought],
            result_thoughts: vec![usage_thought(usage, &stop_reason)],
            followup_questions,
            session_state: session.state(),
        })
    }
}

/// A message to store, with a new id; `shown_at` is its time as the Chat UI shows it ([`display_time`]).
pub(crate) fn stored_message(role: Role, content: &str, shown_at: &str) -> StoredMessage {
    StoredMessage {
        id: uuid::Uuid::new_v4().simple().to_string(),
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
        .map(|m| stored_message(m.role, &m.content, shown_at))
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
        props: Field::Value(json!({
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "stop_reason": stop,
        })),
        extra: Map::new(),
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
