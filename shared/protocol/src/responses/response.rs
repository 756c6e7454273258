//! A Responses answer as OpenAI's SDKs and Codex parse it: the `response` object whole, or streamed as typed
//! server-sent events (`event: <type>\ndata: {json}\n\n`), each with its increasing `sequence_number`:
//! `response.created`, `response.in_progress`, then for each output item `response.output_item.added`, its parts
//! and deltas (`response.content_part.added`, `response.output_text.delta`, …, `response.function_call_arguments.delta`,
//! `response.reasoning_summary_text.delta`) and `response.output_item.done`, and last `response.completed` (or
//! `response.incomplete` when the answer was cut at `max_output_tokens`, or `response.failed` for a fault after the
//! first event). Item ids are made from the response's id and the item's place, so the stream's items and the
//! whole answer's are the same.

use serde::Serialize;
use serde_json::{Map, Value, json};

use chat_core::{
    Answer, FinishReason, ReasoningBlock, TokenUsage, ToolCall, TurnEnd, TurnEvent, TurnOpening,
};

use crate::encode::{Encoder, Fault, Whole, WholeEncoder, sse_named};
use crate::openai::error_body;

use super::request::{Echo, ResponsesRequest, ToolNames, ToolOrigin};

/// `usage`, in the Responses API's terms (as Chat Completions counts it: all of the prompt in `input_tokens`, the
/// part read from the cache in `cached_tokens`; `reasoning_tokens` estimated from the reasoning's text, within
/// `output_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn of(usage: &TokenUsage, reasoning: &str) -> Self {
        crate::openai::Usage::of(usage, reasoning).into()
    }
}

impl From<crate::openai::Usage> for Usage {
    /// Chat Completions' counts under the Responses API's names.
    fn from(counted: crate::openai::Usage) -> Self {
        Self {
            input_tokens: counted.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: counted.prompt_tokens_details.cached_tokens,
            },
            output_tokens: counted.completion_tokens,
            output_tokens_details: OutputTokensDetails {
                reasoning_tokens: counted.completion_tokens_details.reasoning_tokens,
            },
            total_tokens: counted.total_tokens,
        }
    }
}

/// What every answer of one request repeats: the request's echo, the model it named, how its tools are named,
/// whether the reasoning is shown, and how the client is given the signed reasoning it keeps (`None`: it keeps none).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseContext {
    pub model: String,
    pub echo: Echo,
    pub tool_names: ToolNames,
    pub summarize_reasoning: bool,
    pub seal: Option<SealReasoning>,
}

impl ResponseContext {
    pub fn of(request: &ResponsesRequest) -> Self {
        Self {
            model: request.model.clone(),
            echo: request.echo.clone(),
            tool_names: request.tool_names.clone(),
            summarize_reasoning: request.summarize_reasoning,
            seal: None,
        }
    }

    /// The `encrypted_content` of `blocks`, when the client keeps the reasoning and there is some.
    fn sealed(&self, blocks: &[ReasoningBlock]) -> Option<String> {
        let seal = self.seal.as_ref().filter(|_| !blocks.is_empty())?;
        Some((seal.0)(blocks))
    }
}

/// Seals the model's signed reasoning as a reasoning item's `encrypted_content`, which only the deployment that
/// sealed it opens (the app holds the key; this crate writes bytes).
#[derive(Clone)]
pub struct SealReasoning(pub std::sync::Arc<SealFn>);

/// What seals: the blocks in, the `encrypted_content` out.
pub type SealFn = dyn Fn(&[ReasoningBlock]) -> String + Send + Sync;

impl std::fmt::Debug for SealReasoning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealReasoning")
    }
}

impl PartialEq for SealReasoning {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A response's id from its turn's (`chatcmpl-…`): `resp_…`.
pub fn response_id(turn_id: &str) -> String {
    let hex = turn_id.rsplit(['-', '_']).next().unwrap_or(turn_id);
    format!("resp_{hex}")
}

/// The id of the output item at `index` of response `id`, of kind `prefix` (`msg`, `fc`, `rs`, `ctc`).
fn item_id(prefix: &str, id: &str, index: usize) -> String {
    let hex = id.strip_prefix("resp_").unwrap_or(id);
    format!("{prefix}_{hex}{index:03}")
}

/// The `response` object: `status` `in_progress`, no output yet.
pub fn response_object(context: &ResponseContext, id: &str, created_at: i64) -> Map<String, Value> {
    let echo = &context.echo;
    let object = json!({
        "id": id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "max_tool_calls": null,
        "model": context.model,
        "output": [],
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": echo.previous_response_id,
        "prompt_cache_key": echo.prompt_cache_key,
        "reasoning": echo.reasoning,
        "safety_identifier": echo.safety_identifier,
        "service_tier": "default",
        "store": echo.store,
        "temperature": echo.temperature,
        "text": echo.text,
        "tool_choice": echo.tool_choice,
        "tools": echo.tools,
        "top_logprobs": 0,
        "top_p": echo.top_p,
        "truncation": echo.truncation,
        "usage": null,
        "user": echo.user,
        "metadata": echo.metadata,
    });
    match object {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// A function or custom tool call as an output item.
fn call_item(names: &ToolNames, id: &str, index: usize, call: &ToolCall, done: bool) -> Value {
    let status = if done { "completed" } else { "in_progress" };
    match names.origin(&call.name) {
        ToolOrigin::Custom { name } => json!({
            "type": "custom_tool_call",
            "id": item_id("ctc", id, index),
            "status": status,
            "call_id": call.id,
            "name": name,
            "input": if done { custom_input(call) } else { String::new() },
        }),
        ToolOrigin::Function { namespace, name } => {
            let mut item = json!({
                "type": "function_call",
                "id": item_id("fc", id, index),
                "status": status,
                "call_id": call.id,
                "name": name,
                "arguments": if done { call.input.to_string() } else { String::new() },
            });
            if let Some(namespace) = namespace {
                item["namespace"] = Value::from(namespace);
            }
            item
        }
    }
}

/// A custom tool call's free-form input: its one argument.
fn custom_input(call: &ToolCall) -> String {
    match &call.input["input"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A message item; done, its text with the citations of `sources` it makes ([`annotations`]).
fn message_item(id: &str, index: usize, text: &str, done: bool, sources: &[String]) -> Value {
    json!({
        "type": "message",
        "id": item_id("msg", id, index),
        "status": if done { "completed" } else { "in_progress" },
        "role": "assistant",
        "content": if done {
            json!([output_text(text, annotations(text, sources))])
        } else {
            json!([])
        },
    })
}

fn output_text(text: &str, annotations: Vec<Value>) -> Value {
    json!({"type": "output_text", "text": text, "annotations": annotations, "logprobs": []})
}

/// The citations `text` makes of the passages found (`sources`, their citation names, as the data points list
/// them): a `file_citation` for each `[name]` in it, in the order they stand, its `index` the character where the
/// citation stands, its `file_id` and `filename` the document's name.
fn annotations(text: &str, sources: &[String]) -> Vec<Value> {
    let mut cited: Vec<(usize, &str)> = Vec::new();
    for name in sources {
        let marker = format!("[{name}]");
        cited.extend(
            text.match_indices(&marker)
                .map(|(at, _)| (at, name.as_str())),
        );
    }
    cited.sort();
    cited
        .into_iter()
        .map(|(at, name)| {
            json!({"type": "file_citation", "file_id": name, "filename": name,
                "index": text[..at].chars().count()})
        })
        .collect()
}

fn reasoning_item(id: &str, index: usize, text: Option<&str>) -> Value {
    let summary = match text {
        Some(text) => json!([{"type": "summary_text", "text": text}]),
        None => json!([]),
    };
    json!({"type": "reasoning", "id": item_id("rs", id, index), "summary": summary})
}

/// `item` with the `encrypted_content` the client keeps, when there is one.
fn with_sealed(mut item: Value, sealed: Option<String>) -> Value {
    if let Some(sealed) = sealed {
        item["encrypted_content"] = Value::from(sealed);
    }
    item
}

/// The status of an answer that finished for `reason`, and why it is incomplete when it is.
fn finished(reason: FinishReason) -> (&'static str, Value) {
    match reason {
        FinishReason::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        FinishReason::ContentFilter => ("incomplete", json!({"reason": "content_filter"})),
        FinishReason::Stop | FinishReason::ToolCalls => ("completed", Value::Null),
    }
}

/// The whole `response` object of `answer`.
pub fn whole_response(context: &ResponseContext, answer: &Answer) -> Value {
    let id = response_id(&answer.id);
    let mut object = response_object(context, &id, answer.created);
    let mut output = Vec::new();
    let reasoning = answer.reasoning.as_deref().unwrap_or("");
    let sealed = context.sealed(&answer.reasoning_blocks);
    if context.summarize_reasoning && !reasoning.is_empty() {
        let item = reasoning_item(&id, output.len(), Some(reasoning));
        output.push(with_sealed(item, sealed));
    } else if sealed.is_some() {
        output.push(with_sealed(reasoning_item(&id, output.len(), None), sealed));
    }
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        let sources = answer
            .data_points
            .as_ref()
            .map(|d| d.citations.as_slice())
            .unwrap_or_default();
        output.push(message_item(
            &id,
            output.len(),
            &answer.content,
            true,
            sources,
        ));
    }
    for call in &answer.tool_calls {
        output.push(call_item(
            &context.tool_names,
            &id,
            output.len(),
            call,
            true,
        ));
    }
    let (status, incomplete) = finished(answer.finish_reason);
    object.insert("status".into(), Value::from(status));
    object.insert("incomplete_details".into(), incomplete);
    object.insert("output".into(), Value::Array(output));
    object.insert(
        "usage".into(),
        serde_json::to_value(Usage::of(&answer.usage, reasoning)).expect("usage serializes"),
    );
    Value::Object(object)
}

/// The output item being streamed: what it is, where, and its text so far.
struct Open {
    kind: Streamed,
    index: usize,
    text: String,
}

/// An output item streamed as its text comes: the reasoning summary's, or the answer's message.
#[derive(Clone, Copy, PartialEq)]
enum Streamed {
    Reasoning,
    Message,
}

impl Streamed {
    /// The item as it is added (response `id`'s item `index`), its text to come.
    fn added(self, id: &str, index: usize) -> Value {
        match self {
            Streamed::Reasoning => reasoning_item(id, index, None),
            Streamed::Message => message_item(id, index, "", false, &[]),
        }
    }

    /// The event that adds the item's text part, and its data.
    fn part_added(self, id: &str, index: usize) -> (&'static str, Value) {
        match self {
            Streamed::Reasoning => (
                "response.reasoning_summary_part.added",
                json!({"item_id": item_id("rs", id, index), "output_index": index,
                    "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            ),
            Streamed::Message => (
                "response.content_part.added",
                json!({"item_id": item_id("msg", id, index), "output_index": index,
                    "content_index": 0, "part": output_text("", Vec::new())}),
            ),
        }
    }

    /// The event that adds `piece` to the item's text, and its data.
    fn delta(self, id: &str, index: usize, piece: String) -> (&'static str, Value) {
        match self {
            Streamed::Reasoning => (
                "response.reasoning_summary_text.delta",
                json!({"item_id": item_id("rs", id, index), "output_index": index,
                    "summary_index": 0, "delta": piece}),
            ),
            Streamed::Message => (
                "response.output_text.delta",
                json!({"item_id": item_id("msg", id, index), "output_index": index,
                    "content_index": 0, "delta": piece, "logprobs": []}),
            ),
        }
    }
}

/// A response's answer as OpenAI's SDKs read it, for the one writer: streamed as typed events, or whole as the
/// `response` object.
pub struct ResponseEvents {
    context: ResponseContext,
    /// The next event's `sequence_number`.
    sequence: u64,
    /// The response as it stands: its id, its output items so far (done).
    response: Map<String, Value>,
    id: String,
    open: Option<Open>,
    /// All the reasoning shown (or not), whose tokens the usage estimates.
    reasoning: String,
    /// The signed reasoning told since the last reasoning item, for the next one's `encrypted_content` (only when
    /// the client keeps it).
    blocks: Vec<ReasoningBlock>,
    /// The citation names of the passages found so far, which the text's citations name.
    sources: Vec<String>,
}

impl ResponseEvents {
    pub fn new(context: ResponseContext) -> Self {
        Self {
            context,
            sequence: 0,
            response: Map::new(),
            id: String::new(),
            open: None,
            reasoning: String::new(),
            blocks: Vec::new(),
            sources: Vec::new(),
        }
    }

    /// The response with its output so far (what `response.completed` and a stored response hold).
    pub fn response(&self) -> Value {
        Value::Object(self.response.clone())
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Vec<u8> {
        data["type"] = Value::from(kind);
        data["sequence_number"] = Value::from(self.sequence);
        self.sequence += 1;
        sse_named(kind, &data)
    }

    fn output(&mut self) -> &mut Vec<Value> {
        match self.response.get_mut("output") {
            Some(Value::Array(output)) => output,
            _ => unreachable!("the opening made the output"),
        }
    }

    fn next_index(&mut self) -> usize {
        self.output().len()
    }

    /// Ends the item being streamed, if any: its last events and `response.output_item.done`. Signed reasoning
    /// the client keeps goes in the reasoning item it ends, or, when none is shown, in an item of its own.
    fn close(&mut self) -> Vec<u8> {
        let id = self.id.clone();
        let mut out = Vec::new();
        let shown = matches!(&self.open, Some(open) if open.kind == Streamed::Reasoning);
        let sealed = self.context.sealed(&std::mem::take(&mut self.blocks));
        match self.open.take() {
            None => {}
            Some(Open {
                kind: Streamed::Reasoning,
                index,
                text,
            }) => {
                let item_id = item_id("rs", &id, index);
                out.extend(self.event(
                    "response.reasoning_summary_text.done",
                    json!({"item_id": item_id, "output_index": index, "summary_index": 0, "text": text}),
                ));
                out.extend(self.event(
                    "response.reasoning_summary_part.done",
                    json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                        "part": {"type": "summary_text", "text": text}}),
                ));
                let item = with_sealed(reasoning_item(&id, index, Some(&text)), sealed.clone());
                out.extend(self.event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                self.output().push(item);
            }
            Some(Open {
                kind: Streamed::Message,
                index,
                text,
            }) => {
                let item_id = item_id("msg", &id, index);
                let annotations = annotations(&text, &self.sources);
                for (at, annotation) in annotations.iter().enumerate() {
                    out.extend(self.event(
                        "response.output_text.annotation.added",
                        json!({"item_id": item_id, "output_index": index, "content_index": 0,
                            "annotation_index": at, "annotation": annotation}),
                    ));
                }
                out.extend(self.event(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": index, "content_index": 0,
                        "text": text, "logprobs": []}),
                ));
                out.extend(self.event(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": index, "content_index": 0,
                        "part": output_text(&text, annotations)}),
                ));
                let item = message_item(&id, index, &text, true, &self.sources);
                out.extend(self.event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                self.output().push(item);
            }
        }
        if !shown && sealed.is_some() {
            let index = self.next_index();
            let added = reasoning_item(&id, index, None);
            out.extend(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            ));
            let item = with_sealed(added, sealed);
            out.extend(self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            ));
            self.output().push(item);
        }
        out
    }

    fn reasoning_piece(&mut self, piece: String) -> Vec<u8> {
        self.reasoning.push_str(&piece);
        if !self.context.summarize_reasoning {
            return Vec::new();
        }
        self.add(Streamed::Reasoning, piece)
    }

    fn text(&mut self, piece: String) -> Vec<u8> {
        self.add(Streamed::Message, piece)
    }

    /// Adds `piece` to the text of the item of `kind` being streamed, after opening one (and closing any other) when
    /// none is: the events that say so.
    fn add(&mut self, kind: Streamed, piece: String) -> Vec<u8> {
        let mut out = Vec::new();
        if self.open.as_ref().is_none_or(|open| open.kind != kind) {
            out.extend(self.close());
            let index = self.next_index();
            let item = kind.added(&self.id, index);
            out.extend(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            ));
            let (event, part) = kind.part_added(&self.id, index);
            out.extend(self.event(event, part));
            self.open = Some(Open {
                kind,
                index,
                text: String::new(),
            });
        }
        let open = self.open.as_mut().expect("opened above");
        open.text.push_str(&piece);
        let (event, delta) = kind.delta(&self.id, open.index, piece);
        out.extend(self.event(event, delta));
        out
    }

    fn call(&mut self, call: ToolCall) -> Vec<u8> {
        let mut out = self.close();
        let index = self.next_index();
        let added = call_item(&self.context.tool_names, &self.id, index, &call, false);
        let done = call_item(&self.context.tool_names, &self.id, index, &call, true);
        let item_id = added["id"].clone();
        out.extend(self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        ));
        if done["type"] == "custom_tool_call" {
            let input = done["input"].clone();
            out.extend(self.event(
                "response.custom_tool_call_input.delta",
                json!({"item_id": item_id, "output_index": index, "delta": input}),
            ));
            out.extend(self.event(
                "response.custom_tool_call_input.done",
                json!({"item_id": item_id, "output_index": index, "input": input}),
            ));
        } else {
            let arguments = done["arguments"].clone();
            out.extend(self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": arguments}),
            ));
            out.extend(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "name": done["name"],
                    "arguments": arguments}),
            ));
        }
        out.extend(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        ));
        self.output().push(done);
        out
    }
}

impl Encoder for ResponseEvents {
    type Opening = TurnOpening;
    type Event = TurnEvent;
    type Done = TurnEnd;

    fn opening(&mut self, opening: &TurnOpening) -> Vec<u8> {
        self.id = response_id(&opening.header.id);
        if let Some(found) = &opening.data_points {
            self.sources = found.citations.clone();
        }
        self.response = response_object(&self.context, &self.id, opening.header.created);
        let response = self.response();
        let mut out = self.event("response.created", json!({"response": response}));
        out.extend(self.event("response.in_progress", json!({"response": response})));
        out
    }

    fn event(&mut self, event: TurnEvent) -> Vec<u8> {
        match event {
            TurnEvent::Text(text) => self.text(text),
            TurnEvent::Reasoning(piece) | TurnEvent::RedactedReasoning(piece) => {
                self.reasoning_piece(piece)
            }
            TurnEvent::ToolCall(call) => self.call(call),
            // Signed reasoning (told only when the client keeps it): sealed into the reasoning item it ends.
            TurnEvent::ReasoningBlock(block) => {
                if self.context.seal.is_some() {
                    self.blocks.push(block);
                }
                Vec::new()
            }
            // What a search found: the names the text's citations make annotations of.
            TurnEvent::Found(found) => {
                self.sources = found.citations;
                Vec::new()
            }
            // What the server's own tools did shows in the text; the end is the writer's to hand to `done`.
            TurnEvent::Thought(_) | TurnEvent::End(_) => Vec::new(),
        }
    }

    fn done(&mut self, end: TurnEnd) -> Vec<u8> {
        let mut out = self.close();
        let (status, incomplete) = finished(end.finish_reason);
        let usage = Usage::of(&end.usage, &self.reasoning);
        self.response.insert("status".into(), Value::from(status));
        self.response
            .insert("incomplete_details".into(), incomplete);
        self.response.insert(
            "usage".into(),
            serde_json::to_value(usage).expect("usage serializes"),
        );
        let response = self.response();
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.extend(self.event(kind, json!({ "response": response })));
        out
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        let body = error_body(fault).error;
        let code = body.code.unwrap_or(body.kind);
        self.response.insert("status".into(), Value::from("failed"));
        self.response.insert(
            "error".into(),
            json!({"code": code, "message": body.message}),
        );
        let response = self.response();
        self.event("response.failed", json!({ "response": response }))
    }
}

impl WholeEncoder for ResponseEvents {
    type Answer = Answer;

    fn whole(&mut self, answer: &Answer) -> Whole {
        Whole::json(&whole_response(&self.context, answer))
    }
}

#[cfg(test)]
mod tests {
    use chat_core::{DataPoints, RequestLimits, TurnHeader};

    use super::*;
    use crate::responses::parse_responses_request;

    fn sources() -> Vec<String> {
        vec!["Parental_Leave.md".into(), "Benefits.pdf".into()]
    }

    #[test]
    fn each_citation_of_a_source_found_is_an_annotation_where_it_stands() {
        let text = "Twelve weeks [Parental_Leave.md]. Also dental [Benefits.pdf] [Parental_Leave.md] [Other.md].";
        let found = annotations(text, &sources());
        let at = |name: &str, from: usize| {
            text[..from + text[from..].find(name).unwrap()]
                .chars()
                .count()
        };
        assert_eq!(
            found,
            vec![
                json!({"type": "file_citation", "file_id": "Parental_Leave.md", "filename": "Parental_Leave.md",
                    "index": at("[Parental_Leave.md]", 0)}),
                json!({"type": "file_citation", "file_id": "Benefits.pdf", "filename": "Benefits.pdf",
                    "index": at("[Benefits.pdf]", 0)}),
                json!({"type": "file_citation", "file_id": "Parental_Leave.md", "filename": "Parental_Leave.md",
                    "index": at("[Parental_Leave.md]", 20)}),
            ]
        );
        // Characters, not bytes, as the SDKs index a string.
        assert_eq!(annotations("é [Benefits.pdf]", &sources())[0]["index"], 2);
        assert!(annotations("No citation here.", &sources()).is_empty());
    }

    #[test]
    fn a_streamed_message_announces_its_annotations_and_holds_them_when_done() {
        let request = parse_responses_request(
            br#"{"model": "m", "input": "Leave?", "store": false}"#,
            &RequestLimits::default(),
        )
        .unwrap();
        let mut events = ResponseEvents::new(ResponseContext::of(&request));
        let header = TurnHeader {
            id: "chatcmpl-1".into(),
            created: 1,
            created_at: "1970-01-01T00:00:01Z".into(),
            model: "m".into(),
        };
        let mut out = events.opening(&TurnOpening {
            header,
            thoughts: Vec::new(),
            data_points: Some(DataPoints {
                text: Vec::new(),
                citations: sources(),
            }),
            session_state: None,
        });
        out.extend(Encoder::event(
            &mut events,
            TurnEvent::Text("Twelve weeks [Parental_Leave.md].".into()),
        ));
        out.extend(events.done(TurnEnd {
            finish_reason: FinishReason::Stop,
            usage: TokenUsage::default(),
            cost_usd: None,
            followup_questions: None,
            result_thoughts: Vec::new(),
            citations: vec!["Parental_Leave.md".into()],
            stop_sequence: false,
        }));
        let text = String::from_utf8(out).unwrap();
        let data: Vec<Value> = text
            .split_terminator("\n\n")
            .map(|e| serde_json::from_str(e.split_once("\ndata: ").unwrap().1).unwrap())
            .collect();
        let added = data
            .iter()
            .position(|e| e["type"] == "response.output_text.annotation.added")
            .unwrap_or_else(|| panic!("{text}"));
        let annotation = json!({"type": "file_citation", "file_id": "Parental_Leave.md",
            "filename": "Parental_Leave.md", "index": 13});
        assert_eq!(data[added]["annotation"], annotation);
        assert_eq!(data[added]["annotation_index"], 0);
        assert_eq!(data[added + 1]["type"], "response.output_text.done");
        let completed = data.last().unwrap();
        assert_eq!(
            completed["response"]["output"][0]["content"][0]["annotations"],
            json!([annotation])
        );
    }
}
