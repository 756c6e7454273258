//! [`ScriptedModel`]: the model port answering from a script, and recording what it was asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use chat_core::{
    ChatModel, ModelError, ModelEvent, ModelReply, ModelRequest, ModelStream, ReplyCitation, Role,
    StopReason, TokenUsage,
};

/// The bytes of a scripted redacted reasoning block.
pub const REDACTED: &[u8] = b"redacted by the script";

/// One scripted answer: its text in pieces, why it stops, its usage, and faults at its start or after some pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub pieces: Vec<String>,
    pub stop: StopReason,
    /// `None`: one output token per piece, one input token per word of the request.
    pub usage: Option<TokenUsage>,
    /// The call fails before anything is answered.
    pub fail_at_start: Option<ModelError>,
    /// The stream fails after this many pieces (a buffered call fails whole).
    pub fail_after: Option<(usize, ModelError)>,
    /// Native citations: after piece `.0`, the request's search result `.1` is cited.
    pub citations: Vec<(usize, usize)>,
    /// Reasoning pieces before the answer, and whether a redacted block follows them.
    pub reasoning: Vec<String>,
    pub redacted: bool,
    /// The signature the model provider gives the reasoning (one block of all its pieces); `None`: unsigned.
    pub signature: Option<String>,
    /// The tools the model asks for after its text (the answer then stops for them).
    pub tool_calls: Vec<chat_core::ToolCall>,
}

impl Script {
    /// The model asks for `tools` (name, input), in order, after any text: the answer stops for their results.
    pub fn calls<'a>(tools: impl IntoIterator<Item = (&'a str, serde_json::Value)>) -> Self {
        let mut script = Self::pieces(Vec::<String>::new());
        script.tool_calls = tools
            .into_iter()
            .enumerate()
            .map(|(i, (name, input))| chat_core::ToolCall {
                id: format!("tooluse_{i}_{name}"),
                name: name.into(),
                input,
            })
            .collect();
        script.stop = StopReason::ToolUse;
        script
    }

    /// An answer in the given pieces (each one model delta), ending its turn.
    pub fn pieces<I, S>(pieces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            pieces: pieces.into_iter().map(Into::into).collect(),
            stop: StopReason::EndTurn,
            usage: None,
            fail_at_start: None,
            fail_after: None,
            citations: Vec::new(),
            reasoning: Vec::new(),
            redacted: false,
            signature: None,
            tool_calls: Vec::new(),
        }
    }

    /// The model reasons in these pieces before it answers.
    pub fn reasoning<I, S>(mut self, pieces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.reasoning = pieces.into_iter().map(Into::into).collect();
        self
    }

    /// The reasoning comes as one block signed `signature`.
    pub fn signed(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// Part of the model's reasoning comes redacted.
    pub fn redacted(mut self) -> Self {
        self.redacted = true;
        self
    }

    /// An answer of one piece.
    pub fn text(text: impl Into<String>) -> Self {
        Self::pieces([text.into()])
    }

    /// A call that fails before answering.
    pub fn error(error: ModelError) -> Self {
        Self {
            fail_at_start: Some(error),
            ..Self::pieces(Vec::<String>::new())
        }
    }

    pub fn stop(mut self, stop: StopReason) -> Self {
        self.stop = stop;
        self
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(TokenUsage {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
            ..TokenUsage::default()
        });
        self
    }

    /// Usage with prompt cache reads and writes.
    pub fn cached_usage(mut self, input: u64, output: u64, read: u64, write: u64) -> Self {
        self.usage = Some(TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output + read + write,
            cache_read_input_tokens: read,
            cache_write_input_tokens: write,
        });
        self
    }

    /// After piece `piece` (counted from 0), the answer cites the request's search result `source`.
    pub fn cite(mut self, piece: usize, source: usize) -> Self {
        self.citations.push((piece, source));
        self
    }

    /// The stream fails with `error` once `pieces` pieces were sent.
    pub fn fail_after(mut self, pieces: usize, error: ModelError) -> Self {
        self.fail_after = Some((pieces, error));
        self
    }

    /// What the local Bedrock server answers: `Echo: ` and the last user message, word by word.
    pub fn echo(request: &ModelRequest) -> Self {
        let last = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.texts.join("\n\n"))
            .unwrap_or_default();
        let mut pieces = vec!["Echo: ".to_string()];
        pieces.extend(last.split_inclusive(' ').map(str::to_string));
        Self::pieces(pieces)
    }

    fn usage_for(&self, request: &ModelRequest) -> TokenUsage {
        self.usage.unwrap_or_else(|| {
            let input = words(request);
            let output = self.pieces.len() as u64;
            TokenUsage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: input + output,
                ..TokenUsage::default()
            }
        })
    }
}

/// Text the budget's estimate under-counts: 30 one-letter words (59 bytes, which the estimate takes for 24 tokens),
/// 30 tokens to this model and to the local Bedrock server; `turn` varies the letters.
pub fn short_words(turn: usize) -> String {
    let letters: Vec<String> = (0..30)
        .map(|i| char::from(b'a' + ((turn + i) % 26) as u8).to_string())
        .collect();
    letters.join(" ")
}

/// The input tokens of `request` as this model counts them: a token a whitespace word of its texts, as the local
/// Bedrock server counts them.
fn words(request: &ModelRequest) -> u64 {
    request
        .messages
        .iter()
        .flat_map(|m| &m.texts)
        .chain([&request.system])
        .map(|t| t.split_whitespace().count() as u64)
        .sum()
}

#[derive(Default)]
struct Inner {
    scripts: VecDeque<Script>,
    requests: Vec<ModelRequest>,
    /// The prompts counted, as (counting model, input tokens).
    counts: Vec<(String, u64)>,
    /// Whether counting fails (`Some`) rather than counts.
    count_error: Option<ModelError>,
}

/// A chat model that answers from a queue of [`Script`]s, one per call, and echoes the last user message once the
/// queue is empty. Every request is recorded. Clones share the queue and the record.
#[derive(Clone, Default)]
pub struct ScriptedModel {
    inner: Arc<Mutex<Inner>>,
}

impl ScriptedModel {
    pub fn new() -> Self {
        Self::default()
    }

    /// A model that answers with `scripts`, in order.
    pub fn with(scripts: impl IntoIterator<Item = Script>) -> Self {
        let model = Self::new();
        for s in scripts {
            model.push(s);
        }
        model
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the answer to a later call.
    pub fn push(&self, script: Script) -> &Self {
        self.lock().scripts.push_back(script);
        self
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// The last request received.
    pub fn last_request(&self) -> Option<ModelRequest> {
        self.lock().requests.last().cloned()
    }

    /// Every count asked for, in order: the counting model and the tokens it answered.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.lock().counts.clone()
    }

    /// Counting fails with `error` from now on (`None`: it counts again).
    pub fn fail_counts(&self, error: Option<ModelError>) -> &Self {
        self.lock().count_error = error;
        self
    }

    /// Scripts not used yet.
    pub fn pending(&self) -> usize {
        self.lock().scripts.len()
    }

    /// Records the request and takes its script.
    fn take(&self, request: &ModelRequest) -> Script {
        let mut inner = self.lock();
        inner.requests.push(request.clone());
        inner
            .scripts
            .pop_front()
            .unwrap_or_else(|| Script::echo(request))
    }
}

/// A scripted answer read as a stream.
pub struct ScriptedStream {
    events: VecDeque<Result<ModelEvent, ModelError>>,
}

impl ModelStream for ScriptedStream {
    async fn next_event(&mut self) -> Result<Option<ModelEvent>, ModelError> {
        self.events.pop_front().transpose()
    }
}

impl ChatModel for ScriptedModel {
    type Stream = ScriptedStream;

    async fn converse(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let script = self.take(request);
        if let Some(e) = script.fail_at_start.clone() {
            return Err(e);
        }
        if let Some((_, e)) = script.fail_after.clone() {
            return Err(e);
        }
        let mut text = String::new();
        let mut citations = Vec::new();
        for (i, piece) in script.pieces.iter().enumerate() {
            text.push_str(piece);
            citations.extend(
                script
                    .citations
                    .iter()
                    .filter(|(after, _)| *after == i)
                    .map(|(_, source)| ReplyCitation {
                        at: text.len(),
                        source: *source,
                    }),
            );
        }
        Ok(ModelReply {
            text,
            stop_reason: script.stop.clone(),
            usage: script.usage_for(request),
            citations,
            reasoning: script.reasoning.concat(),
            reasoning_redacted: script.redacted,
            tool_calls: script.tool_calls.clone(),
            reasoning_blocks: script
                .signature
                .iter()
                .map(|signature| {
                    chat_core::ReasoningBlock::signed(script.reasoning.concat(), signature)
                })
                .chain(
                    script
                        .redacted
                        .then(|| chat_core::ReasoningBlock::redacted(REDACTED.to_vec())),
                )
                .collect(),
            ..ModelReply::default()
        })
    }

    async fn converse_stream(&self, request: &ModelRequest) -> Result<ScriptedStream, ModelError> {
        let script = self.take(request);
        if let Some(e) = script.fail_at_start.clone() {
            return Err(e);
        }
        let mut events = VecDeque::new();
        for piece in &script.reasoning {
            events.push_back(Ok(ModelEvent::Reasoning(piece.clone())));
        }
        if let Some(signature) = &script.signature {
            events.push_back(Ok(ModelEvent::ReasoningSignature(signature.clone())));
        }
        if script.redacted {
            events.push_back(Ok(ModelEvent::RedactedReasoning(REDACTED.to_vec())));
        }
        for (i, piece) in script.pieces.iter().enumerate() {
            if let Some((after, e)) = &script.fail_after
                && *after == i
            {
                events.push_back(Err(e.clone()));
                return Ok(ScriptedStream { events });
            }
            events.push_back(Ok(ModelEvent::Text(piece.clone())));
            for (_, source) in script.citations.iter().filter(|(after, _)| *after == i) {
                events.push_back(Ok(ModelEvent::Citation(*source)));
            }
        }
        if let Some((_, e)) = &script.fail_after {
            events.push_back(Err(e.clone()));
            return Ok(ScriptedStream { events });
        }
        for call in &script.tool_calls {
            events.push_back(Ok(ModelEvent::ToolUse(call.clone())));
        }
        events.push_back(Ok(ModelEvent::Stop(script.stop.clone())));
        events.push_back(Ok(ModelEvent::Usage(script.usage_for(request))));
        Ok(ScriptedStream { events })
    }

    async fn count_tokens(
        &self,
        counter: &str,
        request: &ModelRequest,
    ) -> Result<Option<u64>, ModelError> {
        let mut inner = self.lock();
        if let Some(e) = inner.count_error.clone() {
            return Err(e);
        }
        let tokens = words(request);
        inner.counts.push((counter.to_string(), tokens));
        Ok(Some(tokens))
    }
}
