//! One chat turn, buffered: prepare the prompt, ask the model, shape what it said into an [`Answer`].

use chat_protocol::{Answer, ChatInput, Field, FinishReason, Thought, TokenUsage};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::{
    ChatError, ChatModel, ChatSettings, FollowupSplitter, ModelError, ModelReply, StopReason,
    StreamingTurn, prepare_turn,
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

/// The chat core with its model port plugged in; built once per cold start and shared by every request.
pub struct ChatService<M> {
    model: M,
    settings: ChatSettings,
}

impl<M: ChatModel> ChatService<M> {
    pub fn new(model: M, settings: ChatSettings) -> Self {
        Self { model, settings }
    }

    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    /// Starts a streamed answer. The model is read until its first text (or its end), so that a fault before
    /// anything could be shown is still an error the caller can answer with a status.
    pub async fn stream(&self, input: &ChatInput) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let turn = prepare_turn(&self.settings, input);
        let model_stream = self.model.converse_stream(&turn.request).await?;
        let mut streaming = StreamingTurn::new(
            TurnHeader::new(&turn.request.model_id),
            turn.prompt_thought,
            model_stream,
            input.overrides.suggest_followup_questions,
        );
        streaming.prime().await?;
        Ok(streaming)
    }

    /// Answers a validated request in full.
    pub async fn answer(&self, input: &ChatInput) -> Result<Answer, ChatError> {
        let turn = prepare_turn(&self.settings, input);
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
            session_state: input.session_state.clone(),
        })
    }
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

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second]+00:00"
    ))
    .unwrap_or_default()
}
