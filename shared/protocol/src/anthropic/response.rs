//! A completion's answer as Anthropic's SDKs parse it: a `message` whole, or its server-sent events (`event: <type>`
//! and `data: {json}`): `message_start` and a `ping`, then each content block as it comes (`content_block_start`,
//! its deltas: `thinking_delta` and the `signature_delta` that closes a signed block, `text_delta`,
//! `input_json_delta`; `content_block_stop`), then `message_delta` with the stop reason and the usage, and
//! `message_stop`. A fault after the first event is an `error` event in Anthropic's shape, and the stream ends.

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};

use chat_core::{
    Answer, FinishReason, ReasoningBlock, TokenUsage, ToolCall, TurnEnd, TurnEvent, TurnOpening,
};

use crate::encode::{Encoder, Fault, Whole, WholeEncoder, sse_named};

/// `usage`, as Bedrock counts it: input read from or written to the prompt cache apart from the rest, as Anthropic
/// counts it too.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl From<&TokenUsage> for Usage {
    fn from(usage: &TokenUsage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_creation_input_tokens: usage.cache_write_input_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
        }
    }
}

/// The spelling of a stop reason: `end_turn`, `max_tokens`, `tool_use`, `refusal`.
pub fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
    }
}

/// A message id as Anthropic's are spelled (`msg_…`).
fn message_id(id: &str) -> String {
    let bare = id
        .strip_prefix("msg_")
        .or_else(|| id.strip_prefix("chatcmpl-"))
        .unwrap_or(id);
    format!("msg_{bare}")
}

/// A thinking block as the client gives it back: its text and signature, or a redacted block's data (its bytes
/// in base64).
fn reasoning_block(block: &ReasoningBlock) -> Value {
    match &block.redacted {
        Some(bytes) => json!({
            "type": "redacted_thinking",
            "data": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
        None => json!({
            "type": "thinking",
            "thinking": block.text,
            "signature": block.signature.clone().unwrap_or_default(),
        }),
    }
}

fn tool_use(call: &ToolCall) -> Value {
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
}

/// The stop reason and the stop sequence: `stop_sequence` when the model stopped at one of the request's, which is
/// named when the request had only the one (Bedrock does not say which of several).
fn stopped(reason: FinishReason, at_sequence: bool, sequences: &[String]) -> (&'static str, Value) {
    if at_sequence {
        let which = match sequences {
            [one] => Value::from(one.as_str()),
            _ => Value::Null,
        };
        ("stop_sequence", which)
    } else {
        (stop_reason(reason), Value::Null)
    }
}

/// `answer` as a `message` of `model` (the name the request used): its signed thinking blocks (or its reasoning
/// unsigned, from a model that signs none), its text, its tool uses; `sequences` are the request's stop sequences.
pub fn message(answer: &Answer, model: &str, sequences: &[String]) -> Value {
    let mut content: Vec<Value> = answer
        .reasoning_blocks
        .iter()
        .map(reasoning_block)
        .collect();
    if content.is_empty()
        && let Some(reasoning) = answer.reasoning.as_deref().filter(|r| !r.is_empty())
    {
        content.push(json!({"type": "thinking", "thinking": reasoning, "signature": ""}));
    }
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        content.push(json!({"type": "text", "text": answer.content}));
    }
    content.extend(answer.tool_calls.iter().map(tool_use));
    let (reason, sequence) = stopped(answer.finish_reason, answer.stop_sequence, sequences);
    json!({
        "id": message_id(&answer.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": Usage::from(&answer.usage),
    })
}

/// The kind of the content block open in a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Thinking,
    Text,
}

/// A completion's answer as Anthropic's SDKs read it, for the one writer: streamed as Messages events, or whole as
/// a `message`. The model is the name the request used.
pub struct MessageEvents {
    model: String,
    /// The request's stop sequences, to name the one the model stopped at.
    stop_sequences: Vec<String>,
    /// The block open, and the index of the next block.
    open: Option<Open>,
    index: u32,
}

impl MessageEvents {
    pub fn new(model: impl Into<String>, stop_sequences: Vec<String>) -> Self {
        Self {
            model: model.into(),
            stop_sequences,
            open: None,
            index: 0,
        }
    }

    /// Opens a block of `content` (closing the one open).
    fn start(&mut self, out: &mut Vec<u8>, content: Value) {
        self.close(out);
        out.extend(sse_named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.index, "content_block": content}),
        ));
    }

    fn delta(&self, out: &mut Vec<u8>, delta: Value) {
        out.extend(sse_named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.index, "delta": delta}),
        ));
    }

    /// Closes the block open (a block started but not kept open, a tool use's, closes at once: see callers).
    fn close(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            self.stop(out);
        }
    }

    fn stop(&mut self, out: &mut Vec<u8>) {
        out.extend(sse_named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": self.index}),
        ));
        self.index += 1;
    }
}

impl Encoder for MessageEvents {
    type Opening = TurnOpening;
    type Event = TurnEvent;
    type Done = TurnEnd;

    fn opening(&mut self, opening: &TurnOpening) -> Vec<u8> {
        let mut out = sse_named(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": message_id(&opening.header.id),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": Usage::from(&TokenUsage::default()),
            }}),
        );
        out.extend(ping());
        out
    }

    fn event(&mut self, event: TurnEvent) -> Vec<u8> {
        let mut out = Vec::new();
        match event {
            TurnEvent::Reasoning(piece) => {
                if self.open != Some(Open::Thinking) {
                    self.start(
                        &mut out,
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    );
                    self.open = Some(Open::Thinking);
                }
                self.delta(
                    &mut out,
                    json!({"type": "thinking_delta", "thinking": piece}),
                );
            }
            TurnEvent::ReasoningBlock(block) => match &block.redacted {
                Some(_) => {
                    self.start(&mut out, reasoning_block(&block));
                    self.stop(&mut out);
                }
                None => {
                    if self.open != Some(Open::Thinking) {
                        self.start(
                            &mut out,
                            json!({"type": "thinking", "thinking": "", "signature": ""}),
                        );
                        self.open = Some(Open::Thinking);
                    }
                    let signature = block.signature.unwrap_or_default();
                    self.delta(
                        &mut out,
                        json!({"type": "signature_delta", "signature": signature}),
                    );
                    self.close(&mut out);
                }
            },
            TurnEvent::Text(text) => {
                if self.open != Some(Open::Text) {
                    self.start(&mut out, json!({"type": "text", "text": ""}));
                    self.open = Some(Open::Text);
                }
                self.delta(&mut out, json!({"type": "text_delta", "text": text}));
            }
            // Each tool use a block of its own: its input comes whole from Bedrock's stream, in one fragment.
            TurnEvent::ToolCall(call) => {
                self.start(
                    &mut out,
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                );
                self.delta(
                    &mut out,
                    json!({"type": "input_json_delta", "partial_json": call.input.to_string()}),
                );
                self.stop(&mut out);
            }
            // The note that reasoning is redacted comes with its block; the server's own tools' steps have no place
            // in Anthropic's events. The end is the writer's to hand to `done`.
            TurnEvent::RedactedReasoning(_)
            | TurnEvent::Thought(_)
            | TurnEvent::Found(_)
            | TurnEvent::End(_) => {}
        }
        out
    }

    fn done(&mut self, end: TurnEnd) -> Vec<u8> {
        let mut out = Vec::new();
        self.close(&mut out);
        let (reason, sequence) =
            stopped(end.finish_reason, end.stop_sequence, &self.stop_sequences);
        out.extend(sse_named(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": sequence},
                "usage": Usage::from(&end.usage),
            }),
        ));
        out.extend(sse_named("message_stop", &json!({"type": "message_stop"})));
        out
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        sse_named("error", &super::error::error_body(fault))
    }

    /// A `ping` after this long without an event: well within the 15 s after which Anthropic's clients and the
    /// proxies between them and a long-thinking model are known to give up.
    fn idle_every(&self) -> Option<std::time::Duration> {
        Some(PING_EVERY)
    }

    fn idle(&mut self) -> Vec<u8> {
        ping()
    }
}

/// How long a stream may be silent before a `ping`.
pub const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl WholeEncoder for MessageEvents {
    type Answer = Answer;

    fn whole(&mut self, answer: &Answer) -> Whole {
        Whole::json(&message(answer, &self.model, &self.stop_sequences))
    }
}

/// A `ping` event: what a stream sends while it waits, so that its client and the proxies between know it lives.
pub fn ping() -> Vec<u8> {
    sse_named("ping", &json!({"type": "ping"}))
}

/// The answer to `POST /v1/messages/count_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TokenCount {
    pub input_tokens: u64,
}
