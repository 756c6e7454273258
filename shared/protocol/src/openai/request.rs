//! Reading a Chat Completions request strictly: every field of OpenAI's `CreateChatCompletionRequest` is honoured,
//! taken only at its default value, or (a client's own bookkeeping that changes nothing: a `tool` message's `name`,
//! a call's `index`, `cache_control`) taken; another vendor's parameters ([`VENDOR_PARAMETERS`]) are taken and
//! named back; anything else (another value, a field no one defines) is a 400 naming the field, so that nothing a
//! client asks is dropped in silence. The request becomes the core's terms:
//! `system` and `developer` messages the completion's system blocks, `temperature` and `top_p` its sampling,
//! `max_tokens` its answer's length, `reasoning_effort` its thinking, `required` its tool choice of any tool, an
//! assistant's tool calls with the `tool` messages that answer them the [`ContentPart::Tool`] parts of its message.

use crate::object::{self, Api, typed};
use crate::read::{
    self, BEDROCK_UNIT, DefaultOnly, Pending, Sampled, UserParts, answer_waiting, text_parts,
    unanswered,
};
use serde_json::{Map, Value};

use chat_core::{
    ChatError, Completion, ContentPart, InvalidRequest, Message, ReasoningEffort, RequestLimits,
    ResponseFormat, Role, Sampling, Thinking, ToolChoice, ToolExchange, ToolSpec, TurnInput,
};

/// The most `metadata` pairs, and the longest key and value, as OpenAI's `Metadata` bounds them.
pub const MAX_METADATA_PAIRS: usize = 16;
const MAX_METADATA_VALUE_CHARS: usize = 512;
/// The longest `user` / `safety_identifier` / `prompt_cache_key` kept in a trace.
const MAX_USER_CHARS: usize = 256;
/// The most stop sequences (OpenAI's bound).
const MAX_STOP: usize = 4;

/// A Chat Completions request, read: the core's turn and completion, and how the answer is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    pub turn: TurnInput,
    pub completion: Completion,
    /// The model the request named (echoed in the answer's `model`).
    pub model: String,
    /// As server-sent events (`stream: true`).
    pub stream: bool,
    /// A last chunk with the usage (`stream_options.include_usage`).
    pub include_usage: bool,
    /// The request's `metadata`, recorded in the turn's trace.
    pub metadata: Map<String, Value>,
    /// `safety_identifier`, recorded in the turn's trace beside `user`.
    pub safety_identifier: Option<String>,
    /// `prompt_cache_key`, a client's hint for OpenAI's cache routing (the backend places its own cache points):
    /// recorded in the turn's trace, changing nothing in the answer.
    pub prompt_cache_key: Option<String>,
    /// The vendor parameters the request carried, taken and left unapplied ([`VENDOR_PARAMETERS`] and the
    /// operator's own): the answer names them to the client.
    pub ignored: Vec<String>,
}

/// Parameters of other vendors' APIs that mean nothing on Bedrock, which clients copy to the top level of a Chat
/// Completions request (Open WebUI sends each advanced parameter a user sets, Ollama's among them): taken and named
/// in the answer, never applied. An operator adds names with `OPENAI_IGNORED_PARAMETERS`.
pub const VENDOR_PARAMETERS: &[&str] = &[
    // Ollama's options.
    "num_ctx",
    "num_batch",
    "num_keep",
    "num_predict",
    "num_gpu",
    "num_thread",
    "repeat_penalty",
    "repeat_last_n",
    "mirostat",
    "mirostat_eta",
    "mirostat_tau",
    "tfs_z",
    "typical_p",
    "min_p",
    "use_mmap",
    "use_mlock",
    "keep_alive",
    "think",
    // vLLM's and llama.cpp's sampling beyond OpenAI's.
    "repetition_penalty",
];

/// The fields taken only at their default value.
const DEFAULT_ONLY: &DefaultOnly = &[
    ("n", |v| v.as_u64() == Some(1), "1 (one choice)"),
    ("seed", |_| false, "null (sampling is not seeded)"),
    ("logprobs", |v| v == &Value::Bool(false), "false"),
    ("top_logprobs", |_| false, "null (no log probabilities)"),
    (
        "logit_bias",
        |v| v.as_object().is_some_and(Map::is_empty),
        "{} or null",
    ),
    ("presence_penalty", is_zero, "0"),
    ("frequency_penalty", is_zero, "0"),
    ("audio", |_| false, "null (text output only)"),
    (
        "modalities",
        |v| v.as_array().is_some_and(|m| m == &[Value::from("text")]),
        "[\"text\"]",
    ),
    ("prediction", |_| false, "null (no predicted output)"),
    (
        "service_tier",
        |v| matches!(v.as_str(), Some("auto" | "default")),
        "\"auto\" or \"default\"",
    ),
    (
        "store",
        |v| v == &Value::Bool(false),
        "false (nothing is stored)",
    ),
    ("verbosity", |v| v.as_str() == Some("medium"), "\"medium\""),
    ("web_search_options", |_| false, "null (no web search)"),
    ("prompt_cache_retention", |_| false, "null"),
    ("prompt_cache_options", |_| false, "null"),
    (
        "moderation",
        |_| false,
        "null (the deployment's guardrail applies)",
    ),
    ("function_call", |_| false, "null (use tool_choice)"),
    ("functions", |_| false, "null (use tools)"),
];

fn is_zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}

/// Parses and checks a `POST /v1/chat/completions` body. A fault is a 400 naming the field (`param`); a file
/// larger than its kind may be a 413.
pub fn parse_completion_request(
    body: &[u8],
    limits: &RequestLimits,
) -> Result<CompletionRequest, ChatError> {
    parse_completion_request_with(body, limits, &[])
}

/// [`parse_completion_request`], with `also_ignored` taken as [`VENDOR_PARAMETERS`] are (the operator's
/// `OPENAI_IGNORED_PARAMETERS`).
pub fn parse_completion_request_with(
    body: &[u8],
    limits: &RequestLimits,
    also_ignored: &[String],
) -> Result<CompletionRequest, ChatError> {
    let mut body: Obj = read::body(body)?;
    body.default_only(DEFAULT_ONLY)?;
    let model = body.model()?;
    let stream = body.take::<bool>("stream")?.unwrap_or(false);
    let include_usage = body.stream_options(stream, true, "chunks")?;
    let Sampled {
        sampling,
        max_output_tokens,
        thinking,
    } = sampled(&mut body, limits)?;
    let stop = stop(&mut body)?;
    let tools = tools(&mut body)?;
    let tool_choice = tool_choice(&mut body, &tools)?;
    let parallel_tool_calls = body.take::<bool>("parallel_tool_calls")?.unwrap_or(true);
    let response_format = response_format(&mut body)?;
    let user = body.bounded_text("user", MAX_USER_CHARS)?;
    let safety_identifier = body.bounded_text("safety_identifier", MAX_USER_CHARS)?;
    let prompt_cache_key = body.bounded_text("prompt_cache_key", MAX_USER_CHARS)?;
    let metadata = body.string_pairs("metadata", MAX_METADATA_PAIRS, MAX_METADATA_VALUE_CHARS)?;
    let messages = body.require::<Vec<Value>>("messages")?;
    // Another vendor's parameters, taken (whatever their value) and named back; any other field is still refused.
    let ignored: Vec<String> = VENDOR_PARAMETERS
        .iter()
        .copied()
        .chain(also_ignored.iter().map(String::as_str))
        .filter(|name| body.map.remove(*name).is_some())
        .map(String::from)
        .collect();
    body.finish()?;
    let (system, messages) = conversation(messages, limits)?;
    Ok(CompletionRequest {
        turn: read::turn(messages),
        completion: Completion {
            system,
            model_id: Some(model.clone()),
            sampling,
            max_output_tokens,
            thinking,
            tools,
            tool_choice,
            parallel_tool_calls,
            stop_sequences: stop,
            response_format,
            user,
            ..Completion::default()
        },
        model,
        stream,
        include_usage,
        metadata,
        safety_identifier,
        prompt_cache_key,
        ignored,
    })
}

/// The API whose requests [`Obj`] reads here, as its refusals name it.
enum ChatCompletions {}

impl Api for ChatCompletions {
    const NAME: &'static str = "OpenAI's Chat Completions API";
}

/// A JSON object of this API's requests, read field by field.
type Obj = object::Obj<ChatCompletions>;

/// `temperature`, `top_p`, `max_tokens` / `max_completion_tokens` and `reasoning_effort` in the core's terms, held
/// to the same bounds and to the operator's `ALLOWED_OVERRIDES` as the protocol's `context.overrides` (whose names
/// they share).
fn sampled(body: &mut Obj, limits: &RequestLimits) -> Result<Sampled, InvalidRequest> {
    // Bedrock's models sample at a temperature of 0 to 1 (OpenAI's API takes up to 2): a higher one is refused, not
    // cut down.
    let temperature = body.unit("temperature", BEDROCK_UNIT)?;
    let top_p = body.unit("top_p", BEDROCK_UNIT)?;
    let max_tokens: Option<u64> = body.take("max_tokens")?;
    let max_completion_tokens: Option<u64> = body.take("max_completion_tokens")?;
    let (name, max) = match (max_tokens, max_completion_tokens) {
        (Some(a), Some(b)) if a != b => {
            return Err(InvalidRequest::new(
                "max_tokens",
                "differs from max_completion_tokens: send one of them",
            ));
        }
        (_, Some(b)) => ("max_completion_tokens", Some(b)),
        (a, None) => ("max_tokens", a),
    };
    // Any length is taken: the completion is held to its model's output limit and the operator's ceiling once the
    // model is known (`Completion::fit`), which the answer names.
    if max == Some(0) {
        return Err(InvalidRequest::new(name, "must be at least 1"));
    }
    let max = max.map(|n| n.min(u64::from(u32::MAX)));
    // `top_k` (not OpenAI's, sent by clients that copy a model's settings): honoured for a model that takes it.
    let top_k = match body.take::<u64>("top_k")? {
        Some(0) => {
            return Err(InvalidRequest::new("top_k", "must be at least 1"));
        }
        k => k.map(|k| k.min(u64::from(u32::MAX)) as u32),
    };
    // Every effort OpenAI defines, as the nearest one Bedrock's reasoning models take: `minimal` the least budget,
    // `xhigh` the most; `none` no reasoning.
    let (reasoning_effort, off) = match body.take::<String>("reasoning_effort")?.as_deref() {
        None => (None, false),
        Some("none") => (None, true),
        Some("minimal") => (Some(ReasoningEffort::Low), false),
        Some("xhigh") => (Some(ReasoningEffort::High), false),
        Some(effort) => (
            Some(effort.parse::<ReasoningEffort>().map_err(|_| {
                InvalidRequest::new(
                    "reasoning_effort",
                    "must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"",
                )
            })?),
            false,
        ),
    };
    let thinking = if off {
        Some(Thinking::Off)
    } else {
        reasoning_effort.map(Thinking::Effort)
    };
    let sampling = Sampling {
        temperature,
        top_p,
        top_k,
    };
    Sampled::allowed(
        sampling,
        max,
        reasoning_effort,
        thinking,
        limits,
        |used| match used {
            "max_tokens" => name,
            other => other,
        },
    )
}

/// `stop`: a string or up to four strings.
fn stop(body: &mut Obj) -> Result<Vec<String>, InvalidRequest> {
    let stop = match body.value("stop") {
        None => Vec::new(),
        Some(Value::String(one)) => vec![one],
        Some(list) => typed::<Vec<String>>("stop", list)?,
    };
    if stop.len() > MAX_STOP {
        return Err(InvalidRequest::new(
            "stop",
            format!("holds {} sequences, more than {MAX_STOP}", stop.len()),
        ));
    }
    if let Some(i) = stop.iter().position(String::is_empty) {
        return Err(InvalidRequest::new(
            format!("stop[{i}]"),
            "must not be empty",
        ));
    }
    Ok(stop)
}

/// `tools`: function tools only.
fn tools(body: &mut Obj) -> Result<Vec<ToolSpec>, InvalidRequest> {
    let Some(list) = body.take::<Vec<Value>>("tools")? else {
        return Ok(Vec::new());
    };
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for (i, tool) in list.into_iter().enumerate() {
        let mut tool = Obj::new(format!("tools[{i}]"), tool)?;
        let kind: String = tool.require("type")?;
        if kind != "function" {
            return Err(InvalidRequest::new(
                tool.at("type"),
                "must be \"function\": this backend takes function tools only",
            ));
        }
        let mut function = Obj::new(tool.at("function"), tool.require::<Value>("function")?)?;
        tool.finish()?;
        let name: String = function.require("name")?;
        function.check_new_tool(&name, &specs)?;
        let description = function.take::<String>("description")?.unwrap_or_default();
        let parameters = function.schema(
            "parameters",
            Some(serde_json::json!({"type": "object", "properties": {}})),
        )?;
        // Honoured as Bedrock's strict tool use where the model has it (the core decides); the schema is given
        // either way.
        let strict = function.take::<bool>("strict")?.unwrap_or(false);
        function.finish()?;
        specs.push(ToolSpec {
            strict,
            name,
            description,
            input_schema: parameters,
        });
    }
    Ok(specs)
}

/// `tool_choice`: `auto`, `none`, `required`, or a named function among `tools`.
fn tool_choice(body: &mut Obj, tools: &[ToolSpec]) -> Result<ToolChoice, InvalidRequest> {
    read::tool_choice(
        body,
        tools,
        "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}",
        "asks for a tool, but the request lists no tools",
        |mut named| {
            let kind: String = named.require("type")?;
            if kind != "function" {
                return Err(InvalidRequest::new(
                    "tool_choice.type",
                    "must be \"function\": this backend takes function tools only",
                ));
            }
            let mut function =
                Obj::new("tool_choice.function", named.require::<Value>("function")?)?;
            named.finish()?;
            let name: String = function.require("name")?;
            function.finish()?;
            if !tools.iter().any(|t| t.name == name) {
                return Err(InvalidRequest::new(
                    "tool_choice.function.name",
                    "names no tool of tools",
                ));
            }
            Ok(ToolChoice::Tool(name))
        },
    )
}

/// `response_format`: `text`, `json_object`, or `json_schema` with its schema.
fn response_format(body: &mut Obj) -> Result<ResponseFormat, InvalidRequest> {
    let Some(format) = body.value("response_format") else {
        return Ok(ResponseFormat::Text);
    };
    let mut format = Obj::new("response_format", format)?;
    let kind: String = format.require("type")?;
    let parsed = match kind.as_str() {
        "text" => ResponseFormat::Text,
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => {
            let mut spec = Obj::new(
                "response_format.json_schema",
                format.require::<Value>("json_schema")?,
            )?;
            let parsed = spec.json_schema(Some(serde_json::json!({"type": "object"})))?;
            spec.finish()?;
            parsed
        }
        _ => {
            return Err(InvalidRequest::new(
                "response_format.type",
                "must be \"text\", \"json_object\" or \"json_schema\"",
            ));
        }
    };
    format.finish()?;
    Ok(parsed)
}

/// The messages as the completion's system blocks (system and developer messages, one block each, in order) and
/// the core's conversation.
fn conversation(
    wire: Vec<Value>,
    limits: &RequestLimits,
) -> Result<(Vec<String>, Vec<Message>), ChatError> {
    read::message_count(wire.len(), limits)?;
    let mut system: Vec<String> = Vec::new();
    let mut messages: Vec<Message> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut files = 0usize;
    for (i, message) in wire.into_iter().enumerate() {
        let mut message = Obj::new(format!("messages[{i}]"), message)?;
        let role: String = message.require("role")?;
        cache_control(&mut message)?;
        if role != "tool" {
            unanswered(&pending, UNANSWERED)?;
            pending.clear();
        }
        let content_path = message.at("content");
        match role.as_str() {
            "system" | "developer" => {
                message.refuse("name", "is not supported by this backend: leave it out")?;
                let text = text_content(&content_path, message.require("content")?, false)?;
                InvalidRequest::check_length(&content_path, &text, limits.max_message_chars)?;
                system.push(text);
            }
            "user" => {
                message.refuse("name", "is not supported by this backend: leave it out")?;
                let parts = read::user_content(
                    &content_path,
                    message.require("content")?,
                    limits,
                    &mut files,
                    user_part,
                )?;
                messages.push(Message {
                    role: Role::User,
                    content: parts,
                });
            }
            "assistant" => {
                message.refuse("name", "is not supported by this backend: leave it out")?;
                message.refuse("audio", "is not supported by this backend: leave it out")?;
                message.refuse(
                    "function_call",
                    "is deprecated and not supported by this backend: send tool_calls",
                )?;
                let mut text = match message.value("content") {
                    None => String::new(),
                    Some(content) => text_content(&content_path, content, true)?,
                };
                // The reasoning this backend sent with the answer, as clients send an answer back whole: the model
                // gets the reasoning the backend kept (signed, as the model provider needs it), not this copy.
                message.take::<String>("reasoning_content")?;
                // A refusal the client got back is what the model said.
                if let Some(refusal) = message.take::<String>("refusal")? {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&refusal);
                }
                InvalidRequest::check_length(&content_path, &text, limits.max_message_chars)?;
                let calls = message
                    .take::<Vec<Value>>("tool_calls")?
                    .unwrap_or_default();
                if text.trim().is_empty() && calls.is_empty() {
                    return Err(InvalidRequest::new(
                        content_path,
                        "must not be empty when the message has no tool_calls",
                    )
                    .into());
                }
                let mut parts = Vec::with_capacity(calls.len() + 1);
                for (j, call) in calls.into_iter().enumerate() {
                    let path = format!("messages[{i}].tool_calls[{j}]");
                    let exchange = tool_call(&path, call)?;
                    if pending.iter().any(|p| p.id == exchange.id) {
                        return Err(InvalidRequest::new(
                            format!("{path}.id"),
                            "repeats the id of another call of this message",
                        )
                        .into());
                    }
                    pending.push(Pending {
                        path,
                        id: exchange.id.clone(),
                        name: exchange.name.clone(),
                        at: (messages.len(), parts.len()),
                        answered: false,
                    });
                    parts.push(ContentPart::Tool(exchange));
                }
                if !text.trim().is_empty() {
                    parts.push(ContentPart::Text(text));
                }
                messages.push(Message {
                    role: Role::Assistant,
                    content: parts,
                });
            }
            "tool" => {
                let id: String = message.require("tool_call_id")?;
                let output = text_content(&content_path, message.require("content")?, false)?;
                InvalidRequest::check_length(&content_path, &output, limits.max_message_chars)?;
                let unanswered_at = message.at("tool_call_id");
                let refusal =
                    "answers no unanswered tool call of the assistant message just before";
                let (call, _) = answer_waiting(
                    &mut pending,
                    &mut messages,
                    &id,
                    output,
                    (unanswered_at, refusal),
                )?;
                // LangChain.js (and LibreChat, which runs on it) name the function a result answers: the
                // client's bookkeeping, taken when it names the call's own function.
                if let Some(name) = message.take::<String>("name")?
                    && name != call.name
                {
                    return Err(InvalidRequest::new(
                        message.at("name"),
                        format!(
                            "names another function than the call it answers, which called {:?}",
                            call.name
                        ),
                    )
                    .into());
                }
            }
            "function" => {
                return Err(InvalidRequest::new(
                    message.at("role"),
                    "\"function\" messages are deprecated and not supported: send \"tool\" messages",
                )
                .into());
            }
            _ => {
                return Err(InvalidRequest::new(
                    message.at("role"),
                    "must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\"",
                )
                .into());
            }
        }
        message.finish()?;
    }
    read::settle("messages", &pending, UNANSWERED, &messages, limits)?;
    Ok((system, messages))
}

/// Anthropic's `cache_control` that Cline and Roo Code put on messages and content parts (`{"type": "ephemeral"}`,
/// with a `ttl` of `5m` or `1h`): taken, as the backend caches the same prefixes itself where the model caches (a
/// cache point after the system prompt and one before the newest question, within Bedrock's bound on cache points);
/// another type is refused.
fn cache_control(object: &mut Obj) -> Result<(), InvalidRequest> {
    object.ephemeral(true).map(|_| ())
}

/// Why a tool call no `tool` message answered is refused.
const UNANSWERED: &str = "has no tool message answering it: send its result as {\"role\": \"tool\", \"tool_call_id\": …, \"content\": …} right after this message";

/// An assistant message's tool call, as a call whose result is still to come.
fn tool_call(path: &str, call: Value) -> Result<ToolExchange, InvalidRequest> {
    let mut call = Obj::new(path, call)?;
    let id = call.call_id("id")?;
    let kind: String = call.require("type")?;
    if kind != "function" {
        return Err(InvalidRequest::new(call.at("type"), "must be \"function\""));
    }
    let mut function = Obj::new(call.at("function"), call.require::<Value>("function")?)?;
    // The call's position in the streamed answer it came from, which clients such as Open WebUI send back: their
    // bookkeeping.
    call.take::<u64>("index")?;
    call.finish()?;
    let name: String = function.require("name")?;
    function.check_tool_name("name", &name)?;
    let input = function.arguments()?;
    function.finish()?;
    Ok(read::call(id, name, input))
}

/// A content that may be only text: a string, or `text` parts (an assistant's also `refusal` parts), joined.
fn text_content(path: &str, content: Value, assistant: bool) -> Result<String, InvalidRequest> {
    text_parts(path, content, |kind, part: &mut Obj| {
        let text: String = match kind {
            "text" => part.require("text")?,
            "refusal" if assistant => part.require("refusal")?,
            _ => {
                return Err(InvalidRequest::new(
                    part.at("type"),
                    if assistant {
                        "must be \"text\" or \"refusal\""
                    } else {
                        "must be \"text\": this message takes text only"
                    },
                ));
            }
        };
        breakpoints(part)?;
        Ok(text)
    })
}

/// A part's cache breakpoints: Anthropic's `cache_control`, taken; OpenAI's `prompt_cache_breakpoint`, refused.
fn breakpoints(part: &mut Obj) -> Result<(), InvalidRequest> {
    part.refuse(
        "prompt_cache_breakpoint",
        "is not supported by this backend: prompts are cached by the backend",
    )?;
    cache_control(part)
}

/// A part of a user message's content: text, an image (a `data:` URL only: the backend fetches nothing a client
/// names) or a file (`file_data`).
fn user_part(kind: &str, part: &mut Obj, user: &mut UserParts) -> Result<(), ChatError> {
    match kind {
        "text" => user.texts.push(part.require("text")?),
        "image_url" => {
            let at = part.at("image_url");
            let mut image = Obj::new(at.clone(), part.require::<Value>("image_url")?)?;
            let url: String = image.require("url")?;
            if let Some(detail) = image.take::<String>("detail")?
                && detail != "auto"
            {
                return Err(InvalidRequest::new(
                    image.at("detail"),
                    "is not supported by this backend except at \"auto\"",
                )
                .into());
            }
            image.finish()?;
            user.image(&at, &url, &format!("{at}.url"))?;
        }
        "file" => {
            let at = part.at("file");
            let mut file = Obj::new(at.clone(), part.require::<Value>("file")?)?;
            file.refuse(
                "file_id",
                "is not supported by this backend (it keeps no uploaded files): send the file's file_data",
            )?;
            let data: String = file.require("file_data")?;
            let name = file.take::<String>("filename")?;
            file.finish()?;
            user.file(&at, &data, &format!("{at}.file_data"), name)?;
        }
        _ => {
            return Err(InvalidRequest::new(
                part.at("type"),
                "must be \"text\", \"image_url\" or \"file\"",
            )
            .into());
        }
    }
    breakpoints(part)?;
    Ok(())
}
