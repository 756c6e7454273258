//! A completion's answer as OpenAI's SDKs parse it: `chat.completion` whole, or `chat.completion.chunk`s streamed as
//! server-sent events (`data: {chunk}\n\n`, ending `data: [DONE]\n\n`).

use serde::Serialize;

use chat_core::{
    Answer, FinishReason, TokenUsage, ToolCall, TurnEnd, TurnEvent, TurnOpening, estimate_tokens,
};

use crate::encode::{Encoder, Fault, Whole, WholeEncoder};
use crate::openai_finish_reason;

/// `usage`, in OpenAI's terms. Bedrock counts input read from or written to the prompt cache apart from the rest;
/// OpenAI's `prompt_tokens` counts all of the prompt, and `cached_tokens` the part read from the cache. Bedrock does
/// not report reasoning tokens apart: `reasoning_tokens` is an estimate from the reasoning's text (a token per three
/// bytes, at most the output), counted within `completion_tokens` as OpenAI counts it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub prompt_tokens_details: PromptTokensDetails,
    pub completion_tokens_details: CompletionTokensDetails,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: u64,
}

impl Usage {
    /// The usage of an answer that reasoned `reasoning` (the text shown, empty when it did not).
    pub fn of(usage: &TokenUsage, reasoning: &str) -> Self {
        let prompt_tokens =
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_write_input_tokens;
        Self {
            prompt_tokens,
            completion_tokens: usage.output_tokens,
            total_tokens: prompt_tokens + usage.output_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: usage.cache_read_input_tokens,
            },
            completion_tokens_details: CompletionTokensDetails {
                reasoning_tokens: estimate_tokens(reasoning).min(usage.output_tokens),
            },
        }
    }
}

/// A tool call as a message carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// The input as JSON text.
    pub arguments: String,
}

impl From<&ToolCall> for MessageToolCall {
    fn from(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            kind: "function",
            function: FunctionCall {
                name: call.name.clone(),
                arguments: call.input.to_string(),
            },
        }
    }
}

/// What a `chat.completion` and each of its `chat.completion.chunk`s open with: the completion's id, the object's
/// type, when the completion was made, and the model the request named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionObject {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub model: String,
}

/// `chat.completion`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatCompletion {
    #[serde(flatten)]
    pub opening: CompletionObject,
    pub choices: Vec<Choice>,
    pub usage: Usage,
    pub system_fingerprint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<()>,
    pub finish_reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    /// `null` when the answer is only tool calls.
    pub content: Option<String>,
    pub refusal: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MessageToolCall>,
    /// What the model reasoned before it answered, as the Bedrock access gateway and DeepSeek's API name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// The spelling of a finish reason.
pub fn finish_reason(reason: FinishReason) -> &'static str {
    openai_finish_reason(reason)
}

impl ChatCompletion {
    /// `answer` as a `chat.completion` of `model` (the id the request named).
    pub fn from_answer(answer: &Answer, model: &str) -> Self {
        let reasoning = answer.reasoning.as_deref().unwrap_or("");
        let content = (!answer.content.is_empty() || answer.tool_calls.is_empty())
            .then(|| answer.content.clone());
        Self {
            opening: CompletionObject {
                id: answer.id.clone(),
                object: "chat.completion",
                created: answer.created,
                model: model.to_string(),
            },
            choices: vec![Choice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant",
                    content,
                    refusal: None,
                    tool_calls: answer
                        .tool_calls
                        .iter()
                        .map(MessageToolCall::from)
                        .collect(),
                    reasoning_content: answer.reasoning.clone(),
                },
                logprobs: None,
                finish_reason: finish_reason(answer.finish_reason),
            }],
            usage: Usage::of(&answer.usage, reasoning),
            system_fingerprint: None,
        }
    }
}

/// What every chunk of one answer repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHeader {
    pub id: String,
    pub created: i64,
    pub model: String,
    /// Whether every chunk has `usage` (`null` but in the last), as `stream_options.include_usage` asks.
    pub include_usage: bool,
}

/// `chat.completion.chunk`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatCompletionChunk {
    #[serde(flatten)]
    pub opening: CompletionObject,
    pub system_fingerprint: Option<String>,
    pub choices: Vec<ChunkChoice>,
    /// Present (`null` but in the usage chunk) only when the request asked for usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChunkDelta,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ChunkDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A tool call streamed: the whole call in one fragment (its arguments complete).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallDelta {
    pub index: u32,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

impl ChatCompletionChunk {
    /// A chunk of the answer `header` opens, with `choices` and `usage`.
    fn of(header: &ChunkHeader, choices: Vec<ChunkChoice>, usage: Option<Option<Usage>>) -> Self {
        Self {
            opening: CompletionObject {
                id: header.id.clone(),
                object: "chat.completion.chunk",
                created: header.created,
                model: header.model.clone(),
            },
            system_fingerprint: None,
            choices,
            usage,
        }
    }

    /// A chunk of the one choice: `delta`, and why it finished at the end.
    fn with(header: &ChunkHeader, delta: ChunkDelta, finish: Option<FinishReason>) -> Self {
        let choice = ChunkChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason: finish.map(finish_reason),
        };
        Self::of(header, vec![choice], header.include_usage.then_some(None))
    }

    /// The first chunk: the role, and empty content.
    pub fn start(header: &ChunkHeader) -> Self {
        Self::with(
            header,
            ChunkDelta {
                role: Some("assistant"),
                content: Some(String::new()),
                ..ChunkDelta::default()
            },
            None,
        )
    }

    pub fn content(header: &ChunkHeader, text: String) -> Self {
        Self::with(
            header,
            ChunkDelta {
                content: Some(text),
                ..ChunkDelta::default()
            },
            None,
        )
    }

    pub fn reasoning(header: &ChunkHeader, text: String) -> Self {
        Self::with(
            header,
            ChunkDelta {
                reasoning_content: Some(text),
                ..ChunkDelta::default()
            },
            None,
        )
    }

    /// The `index`-th tool call of the answer, whole.
    pub fn tool_call(header: &ChunkHeader, index: u32, call: &ToolCall) -> Self {
        let call = MessageToolCall::from(call);
        Self::with(
            header,
            ChunkDelta {
                tool_calls: vec![ToolCallDelta {
                    index,
                    id: call.id,
                    kind: call.kind,
                    function: call.function,
                }],
                ..ChunkDelta::default()
            },
            None,
        )
    }

    /// The last chunk of the choice: an empty delta and why it finished.
    pub fn finish(header: &ChunkHeader, reason: FinishReason) -> Self {
        Self::with(header, ChunkDelta::default(), Some(reason))
    }

    /// The usage chunk after the last, when asked for: no choices.
    pub fn usage(header: &ChunkHeader, usage: Usage) -> Self {
        Self::of(header, Vec::new(), Some(Some(usage)))
    }
}

pub use crate::encode::sse_data;

/// The event that ends a stream.
pub const SSE_DONE: &[u8] = b"data: [DONE]\n\n";

/// A completion's answer as OpenAI's SDKs read it, for the one writer: streamed as `chat.completion.chunk`s (the
/// role first, then each piece of text, reasoning and each tool call as the model gives it, the finish, the usage
/// when asked for, and `[DONE]`; a fault after the first chunk an event `{"error": …}` in OpenAI's shape), or whole
/// as a `chat.completion`. The model is the id the request named.
pub struct ChunkEvents {
    model: String,
    include_usage: bool,
    /// What every chunk repeats, known at the opening.
    header: Option<ChunkHeader>,
    /// The reasoning shown, whose tokens the usage estimates.
    reasoning: String,
    /// How many tool calls were sent: the next one's index.
    calls: u32,
}

impl ChunkEvents {
    pub fn new(model: impl Into<String>, include_usage: bool) -> Self {
        Self {
            model: model.into(),
            include_usage,
            header: None,
            reasoning: String::new(),
            calls: 0,
        }
    }

    fn header(&self) -> &ChunkHeader {
        self.header
            .as_ref()
            .expect("the writer opens an answer before its events")
    }
}

impl Encoder for ChunkEvents {
    type Opening = TurnOpening;
    type Event = TurnEvent;
    type Done = TurnEnd;

    fn opening(&mut self, opening: &TurnOpening) -> Vec<u8> {
        let header = ChunkHeader {
            id: opening.header.id.clone(),
            created: opening.header.created,
            model: self.model.clone(),
            include_usage: self.include_usage,
        };
        let chunk = sse_data(&ChatCompletionChunk::start(&header));
        self.header = Some(header);
        chunk
    }

    fn event(&mut self, event: TurnEvent) -> Vec<u8> {
        match event {
            TurnEvent::Text(text) => sse_data(&ChatCompletionChunk::content(self.header(), text)),
            TurnEvent::Reasoning(piece) | TurnEvent::RedactedReasoning(piece) => {
                self.reasoning.push_str(&piece);
                sse_data(&ChatCompletionChunk::reasoning(self.header(), piece))
            }
            TurnEvent::ToolCall(call) => {
                self.calls += 1;
                sse_data(&ChatCompletionChunk::tool_call(
                    self.header(),
                    self.calls - 1,
                    &call,
                ))
            }
            // What the server's own tools did (when the operator turns them on) shows in the text's citations;
            // OpenAI's chunks have no place for the steps themselves. The end is the writer's to hand to `done`.
            TurnEvent::Thought(_)
            | TurnEvent::Found(_)
            | TurnEvent::ReasoningBlock(_)
            | TurnEvent::End(_) => Vec::new(),
        }
    }

    fn done(&mut self, end: TurnEnd) -> Vec<u8> {
        let header = self.header();
        let mut last = sse_data(&ChatCompletionChunk::finish(header, end.finish_reason));
        if header.include_usage {
            last.extend(sse_data(&ChatCompletionChunk::usage(
                header,
                Usage::of(&end.usage, &self.reasoning),
            )));
        }
        last.extend_from_slice(SSE_DONE);
        last
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        sse_data(&super::error::error_body(fault))
    }
}

impl WholeEncoder for ChunkEvents {
    type Answer = Answer;

    fn whole(&mut self, answer: &Answer) -> Whole {
        Whole::json(&ChatCompletion::from_answer(answer, &self.model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    /// A chunk and a whole completion open with the same members, in OpenAI's order, to the byte.
    #[test]
    fn a_chunk_and_a_completion_open_with_id_object_created_and_model_in_order() {
        let header = ChunkHeader {
            id: "c".into(),
            created: 1,
            model: "m".into(),
            include_usage: true,
        };
        assert_eq!(
            text(&ChatCompletionChunk::content(&header, "Hi".into())),
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}"#
        );
        let usage = Usage::of(&TokenUsage::default(), "");
        assert_eq!(
            text(&ChatCompletionChunk::usage(&header, usage)),
            format!(
                r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[],"usage":{}}}"#,
                text(&usage)
            )
        );
        let whole = ChatCompletion {
            opening: CompletionObject {
                id: "c".into(),
                object: "chat.completion",
                created: 1,
                model: "m".into(),
            },
            choices: Vec::new(),
            usage,
            system_fingerprint: None,
        };
        assert_eq!(
            text(&whole),
            format!(
                r#"{{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[],"usage":{},"system_fingerprint":null}}"#,
                text(&usage)
            )
        );
    }
}
