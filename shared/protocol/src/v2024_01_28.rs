//! AI Chat Protocol 2024-01-28: OpenAI-style `chat.completion` and `chat.completion.chunk`, chosen by a boolean `stream`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::openai_finish_reason;
use crate::{
    Answer, ContextAndState, Delta, Field, FinishReason, RequestContext, ResponseContext, Role,
    SessionSpelling, SessionState, TokenUsage, WireMessage,
};

/// A chat request of this dialect: it says whether it wants a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<WireMessage>,
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<RequestContext>,
    #[serde(flatten)]
    pub session_state: SessionState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// OpenAI-style token counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionUsage {
    pub completion_tokens: u64,
    /// Every token of the prompt, those read from and written to the prompt cache included (as OpenAI counts).
    pub prompt_tokens: u64,
    pub total_tokens: u64,
    /// Prompt tokens read from the model's prompt cache.
    #[serde(default, skip_serializing_if = "crate::field::is_zero")]
    pub cache_read_input_tokens: u64,
    /// Prompt tokens written to it.
    #[serde(default, skip_serializing_if = "crate::field::is_zero")]
    pub cache_write_input_tokens: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl From<TokenUsage> for CompletionUsage {
    fn from(u: TokenUsage) -> Self {
        Self {
            completion_tokens: u.output_tokens,
            prompt_tokens: u.input_tokens + u.cache_read_input_tokens + u.cache_write_input_tokens,
            total_tokens: u.total_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            cache_write_input_tokens: u.cache_write_input_tokens,
            extra: Map::new(),
        }
    }
}

/// The answer to `stream: false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    pub choices: Vec<Choice>,
    pub created: i64,
    pub id: String,
    pub model: String,
    pub object: String,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub usage: Field<CompletionUsage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub index: u32,
    pub message: WireMessage,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub finish_reason: Field<String>,
    #[serde(flatten)]
    pub context_and_state: ContextAndState,
}

impl ChatCompletion {
    pub const OBJECT: &'static str = "chat.completion";

    pub fn from_answer(answer: &Answer, spelling: SessionSpelling) -> Self {
        Self {
            choices: vec![Choice {
                index: 0,
                message: WireMessage::assistant(answer.content.clone()),
                finish_reason: Field::Value(openai_finish_reason(answer.finish_reason).to_string()),
                context_and_state: ContextAndState::of_answer(answer, spelling),
            }],
            created: answer.created,
            id: answer.id.clone(),
            model: answer.model.clone(),
            object: Self::OBJECT.to_string(),
            usage: Field::Value(answer.usage.into()),
            extra: Map::new(),
        }
    }
}

/// One line of a `stream: true` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    // The spec's own first chunk has no id, created or model; ours always do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub choices: Vec<ChunkChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub object: String,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub usage: Field<CompletionUsage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    pub delta: Delta,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub finish_reason: Field<String>,
    pub index: u32,
    #[serde(flatten)]
    pub context_and_state: ContextAndState,
}

/// What every chunk of one completion shares.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHeader {
    pub id: String,
    pub created: i64,
    pub model: String,
}

impl ChatCompletionChunk {
    pub const OBJECT: &'static str = "chat.completion.chunk";

    fn with_choice(header: &ChunkHeader, choice: ChunkChoice) -> Self {
        Self {
            id: Some(header.id.clone()),
            choices: vec![choice],
            created: Some(header.created),
            model: Some(header.model.clone()),
            object: Self::OBJECT.to_string(),
            usage: Field::Missing,
            extra: Map::new(),
        }
    }

    /// The one choice of a chunk: `delta`, and what else is carried with it.
    fn choice(delta: Delta, context_and_state: ContextAndState) -> ChunkChoice {
        ChunkChoice {
            delta,
            finish_reason: Field::Null,
            index: 0,
            context_and_state,
        }
    }

    /// The first chunk: the assistant's role, the context known before the answer, and the session state.
    pub fn start(
        header: &ChunkHeader,
        context: ResponseContext,
        session_state: Option<Value>,
        spelling: SessionSpelling,
    ) -> Self {
        let carried = ContextAndState::answer(Some(context), session_state, spelling);
        Self::with_choice(header, Self::choice(Delta::role(Role::Assistant), carried))
    }

    /// A piece of the answer's text.
    pub fn content(header: &ChunkHeader, text: impl Into<String>) -> Self {
        let carried = ContextAndState::line(None);
        Self::with_choice(header, Self::choice(Delta::content(text), carried))
    }

    /// A piece of the model's reasoning, in the choice's context (never in its delta: it is not the answer).
    pub fn reasoning(header: &ChunkHeader, piece: &str, redacted: bool) -> Self {
        Self::context(header, ResponseContext::reasoning(piece, redacted))
    }

    /// A chunk carrying context as it happens (a tool call, its result, what a search found), in the choice's
    /// context: no text.
    pub fn context(header: &ChunkHeader, context: ResponseContext) -> Self {
        let carried = ContextAndState::line(Some(context));
        Self::with_choice(header, Self::choice(Delta::default(), carried))
    }

    /// The last chunk: why the model stopped, the token usage, and context learned at the end.
    pub fn finish(
        header: &ChunkHeader,
        finish_reason: FinishReason,
        usage: TokenUsage,
        context: ResponseContext,
    ) -> Self {
        let mut chunk = Self::context(header, context);
        chunk.choices[0].finish_reason =
            Field::Value(openai_finish_reason(finish_reason).to_string());
        chunk.usage = Field::Value(usage.into());
        chunk
    }
}

/// The whole `stream: true` answer as its chunks: the same lines a streamed turn sends, all at once.
pub fn chunks_of(answer: &Answer, spelling: SessionSpelling) -> Vec<ChatCompletionChunk> {
    let header = ChunkHeader {
        id: answer.id.clone(),
        created: answer.created,
        model: answer.model.clone(),
    };
    let mut chunks = vec![ChatCompletionChunk::start(
        &header,
        ResponseContext::new(&answer.prompt_thoughts, None)
            .with_data_points(answer.data_points.as_ref()),
        answer.session_state.clone(),
        spelling,
    )];
    if let Some(reasoning) = &answer.reasoning {
        chunks.push(ChatCompletionChunk::reasoning(
            &header,
            reasoning,
            answer.reasoning_redacted,
        ));
    }
    if !answer.content.is_empty() {
        chunks.push(ChatCompletionChunk::content(
            &header,
            answer.content.clone(),
        ));
    }
    chunks.push(ChatCompletionChunk::finish(
        &header,
        answer.finish_reason,
        answer.usage,
        ResponseContext::new(&answer.result_thoughts, answer.followup_questions.clone()),
    ));
    chunks
}
