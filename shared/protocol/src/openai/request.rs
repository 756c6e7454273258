//! Reading a Chat Completions request strictly: every field of OpenAI's `CreateChatCompletionRequest` is honoured,
//! taken only at its default value, or (a client's own bookkeeping that changes nothing: a `tool` message's `name`,
//! a call's `index`, `cache_control`) taken; another vendor's parameters ([`VENDOR_PARAMETERS`]) are taken and
//! named back; anything else (another value, a field no one defines) is a 400 naming the field, so that nothing a
//! client asks is dropped in silence. The request becomes the core's terms:
//! `system` and `developer` messages the completion's system blocks, `temperature` and `top_p` its sampling,
//! `max_tokens` its answer's length, `reasoning_effort` its thinking, `required` its tool choice of any tool, an
//! assistant's tool calls with the `tool` messages that answer them the [`ContentPart::Tool`] parts of its message.

use crate::object::{self, Api, kind_of, typed};
use bytes::Bytes;
use serde_json::{Map, Value};

use chat_core::{
    ChatError, Completion, ContentPart, InvalidRequest, Message, Overrides, ReasoningEffort,
    RequestLimits, ResponseFormat, Role, Sampling, Thinking, ToolChoice, ToolExchange, ToolSpec,
    ToolStatus, TurnInput,
};

use crate::error::{not_an_object, not_json, utf8};
use crate::files::{base64, take};

/// The most `metadata` pairs, and the longest key and value, as OpenAI's `Metadata` bounds them.
pub const MAX_METADATA_PAIRS: usize = 16;
const MAX_METADATA_KEY_CHARS: usize = 64;
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

/// Whether a field's value is its default.
type IsDefault = fn(&Value) -> bool;

/// The fields taken only at their default value: the field, whether a value is that default, and the default as
/// the refusal says it. `null` is every one's default too.
const DEFAULT_ONLY: &[(&str, IsDefault, &str)] = &[
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
    utf8(body)?;
    let value: Value = serde_json::from_slice(body).map_err(not_json)?;
    let Value::Object(map) = value else {
        return Err(not_an_object().into());
    };
    let mut body = Obj::of(String::new(), map);
    for (name, is_default, default) in DEFAULT_ONLY {
        if let Some(value) = body.value(name)
            && !is_default(&value)
        {
            return Err(InvalidRequest::new(
                *name,
                format!("is not supported by this backend except at its default value: {default}"),
            )
            .into());
        }
    }
    let model: String = body.require("model")?;
    if model.trim().is_empty() {
        return Err(InvalidRequest::new("model", "must not be empty").into());
    }
    let stream = body.take::<bool>("stream")?.unwrap_or(false);
    let include_usage = match body.value("stream_options") {
        None => false,
        Some(_) if !stream => {
            return Err(InvalidRequest::new(
                "stream_options",
                "is only allowed when stream is true",
            )
            .into());
        }
        Some(options) => {
            let mut options = Obj::new("stream_options", options)?;
            let include = options.take::<bool>("include_usage")?.unwrap_or(false);
            if options.take::<bool>("include_obfuscation")? == Some(true) {
                return Err(InvalidRequest::new(
                    "stream_options.include_obfuscation",
                    "is not supported by this backend except at false: chunks carry no obfuscation field",
                )
                .into());
            }
            options.finish()?;
            include
        }
    };
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
    let user = bounded_text(&mut body, "user")?;
    let safety_identifier = bounded_text(&mut body, "safety_identifier")?;
    let prompt_cache_key = bounded_text(&mut body, "prompt_cache_key")?;
    let metadata = metadata(&mut body)?;
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
        turn: TurnInput {
            messages,
            overrides: Overrides::default(),
            session_state: None,
            session_field: "session_state",
            store_new_chat: false,
        },
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

/// How a request samples, how long its answer may be and how hard the model thinks.
struct Sampled {
    sampling: Sampling,
    max_output_tokens: Option<u32>,
    thinking: Option<Thinking>,
}

/// `temperature`, `top_p`, `max_tokens` / `max_completion_tokens` and `reasoning_effort` in the core's terms, held
/// to the same bounds and to the operator's `ALLOWED_OVERRIDES` as the protocol's `context.overrides` (whose names
/// they share).
fn sampled(body: &mut Obj, limits: &RequestLimits) -> Result<Sampled, InvalidRequest> {
    // Bedrock's models sample at a temperature of 0 to 1 (OpenAI's API takes up to 2): a higher one is refused, not
    // cut down.
    let unit = |name: &str, v: Option<f64>| match v {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(InvalidRequest::new(
            name,
            "must be between 0 and 1 (the range Bedrock's models take)",
        )),
        _ => Ok(v),
    };
    let temperature = unit("temperature", body.take("temperature")?)?;
    let top_p = unit("top_p", body.take("top_p")?)?;
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
    let as_overrides = Overrides {
        temperature,
        top_p,
        max_tokens: max.map(|n| n as u32),
        reasoning_effort,
        ..Overrides::default()
    };
    if let Some(used) = as_overrides
        .used()
        .into_iter()
        .find(|used| !limits.allowed_overrides.allows(used))
    {
        let param = match used {
            "max_tokens" => name,
            other => other,
        };
        return Err(InvalidRequest::new(
            param,
            "is not allowed by this deployment (ALLOWED_OVERRIDES)",
        ));
    }
    Ok(Sampled {
        sampling: Sampling {
            temperature,
            top_p,
            top_k,
        },
        max_output_tokens: as_overrides.max_tokens,
        thinking: if off {
            Some(Thinking::Off)
        } else {
            reasoning_effort.map(Thinking::Effort)
        },
    })
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

/// Whether a tool's name is one Bedrock takes: `[A-Za-z0-9_-]{1,64}`.
fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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
        if !is_tool_name(&name) {
            return Err(InvalidRequest::new(
                function.at("name"),
                "must be 1 to 64 letters, digits, underscores or hyphens",
            ));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(InvalidRequest::new(
                function.at("name"),
                "names a tool already listed: tool names must be unique",
            ));
        }
        let description = function.take::<String>("description")?.unwrap_or_default();
        let parameters = match function.value("parameters") {
            None => serde_json::json!({"type": "object", "properties": {}}),
            Some(Value::Object(schema)) => Value::Object(schema),
            Some(other) => {
                return Err(InvalidRequest::new(
                    function.at("parameters"),
                    format!("expected a JSON schema object, not {}", kind_of(&other)),
                ));
            }
        };
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
    let choice = match body.value("tool_choice") {
        None => return Ok(ToolChoice::Auto),
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Any,
            _ => {
                return Err(InvalidRequest::new(
                    "tool_choice",
                    "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}",
                ));
            }
        },
        Some(named) => {
            let mut named = Obj::new("tool_choice", named)?;
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
            ToolChoice::Tool(name)
        }
    };
    if tools.is_empty() && matches!(choice, ToolChoice::Any | ToolChoice::Tool(_)) {
        return Err(InvalidRequest::new(
            "tool_choice",
            "asks for a tool, but the request lists no tools",
        ));
    }
    Ok(choice)
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
            let name: String = spec.require("name")?;
            if !is_tool_name(&name) {
                return Err(InvalidRequest::new(
                    spec.at("name"),
                    "must be 1 to 64 letters, digits, underscores or hyphens",
                ));
            }
            let description = spec.take::<String>("description")?;
            let schema = match spec.value("schema") {
                None => serde_json::json!({"type": "object"}),
                Some(Value::Object(schema)) => Value::Object(schema),
                Some(other) => {
                    return Err(InvalidRequest::new(
                        spec.at("schema"),
                        format!("expected a JSON schema object, not {}", kind_of(&other)),
                    ));
                }
            };
            let strict = spec.take::<bool>("strict")?.unwrap_or(false);
            spec.finish()?;
            ResponseFormat::JsonSchema {
                name,
                description,
                schema,
                strict,
            }
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

fn bounded_text(body: &mut Obj, name: &str) -> Result<Option<String>, InvalidRequest> {
    let text = body.take::<String>(name)?;
    if let Some(text) = &text {
        InvalidRequest::check_length(name, text, MAX_USER_CHARS)?;
    }
    Ok(text)
}

/// `metadata`: up to 16 string pairs, keys of 64 characters at most and values of 512.
fn metadata(body: &mut Obj) -> Result<Map<String, Value>, InvalidRequest> {
    let Some(map) = body.take::<Map<String, Value>>("metadata")? else {
        return Ok(Map::new());
    };
    if map.len() > MAX_METADATA_PAIRS {
        return Err(InvalidRequest::new(
            "metadata",
            format!("holds {} pairs, more than {MAX_METADATA_PAIRS}", map.len()),
        ));
    }
    for (key, value) in &map {
        // The key is the client's: quoted, so that the refusal's log line leaves it out.
        let path = format!("metadata[{key:?}]");
        InvalidRequest::check_length(&path, key, MAX_METADATA_KEY_CHARS)?;
        let Value::String(value) = value else {
            return Err(InvalidRequest::new(path, "expected a string"));
        };
        InvalidRequest::check_length(&path, value, MAX_METADATA_VALUE_CHARS)?;
    }
    Ok(map)
}

/// An assistant's tool call waiting for its `tool` message: where its exchange stands in the conversation.
struct Pending {
    /// `messages[i].tool_calls[j]` of the call.
    path: String,
    id: String,
    /// The function it calls, which a `tool` message's `name` must repeat when it has one.
    name: String,
    /// The index of the assistant message in the conversation, and of the exchange among its parts.
    at: (usize, usize),
    answered: bool,
}

/// The messages as the completion's system blocks (system and developer messages, one block each, in order) and
/// the core's conversation.
fn conversation(
    wire: Vec<Value>,
    limits: &RequestLimits,
) -> Result<(Vec<String>, Vec<Message>), ChatError> {
    if wire.is_empty() {
        return Err(InvalidRequest::new("messages", "must hold at least one message").into());
    }
    if wire.len() > limits.max_messages {
        return Err(InvalidRequest::new(
            "messages",
            format!(
                "holds {} messages, more than the limit of {}",
                wire.len(),
                limits.max_messages
            ),
        )
        .into());
    }
    let mut system: Vec<String> = Vec::new();
    let mut messages: Vec<Message> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut files = 0usize;
    for (i, message) in wire.into_iter().enumerate() {
        let mut message = Obj::new(format!("messages[{i}]"), message)?;
        let role: String = message.require("role")?;
        cache_control(&mut message)?;
        if role != "tool" {
            unanswered(&pending)?;
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
                let parts = user_content(
                    &content_path,
                    message.require("content")?,
                    limits,
                    &mut files,
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
                let Some(call) = pending.iter_mut().find(|p| p.id == id && !p.answered) else {
                    return Err(InvalidRequest::new(
                        message.at("tool_call_id"),
                        "answers no unanswered tool call of the assistant message just before",
                    )
                    .into());
                };
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
                call.answered = true;
                let (m, p) = call.at;
                if let Some(ContentPart::Tool(exchange)) = messages[m].content.get_mut(p) {
                    exchange.output = output;
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
    unanswered(&pending)?;
    if messages.is_empty() {
        return Err(InvalidRequest::new(
            "messages",
            "must hold a user message besides system and developer messages",
        )
        .into());
    }
    limits.files.check_messages(&messages)?;
    Ok((system, messages))
}

/// Anthropic's `cache_control` that Cline and Roo Code put on messages and content parts (`{"type": "ephemeral"}`,
/// with a `ttl` of `5m` or `1h`): taken, as the backend caches the same prefixes itself where the model caches (a
/// cache point after the system prompt and one before the newest question, within Bedrock's bound on cache points);
/// another type is refused.
fn cache_control(object: &mut Obj) -> Result<(), InvalidRequest> {
    let Some(value) = object.value("cache_control") else {
        return Ok(());
    };
    let mut control = Obj::new(object.at("cache_control"), value)?;
    let kind: String = control.require("type")?;
    if kind != "ephemeral" {
        return Err(InvalidRequest::new(
            control.at("type"),
            "must be \"ephemeral\"",
        ));
    }
    if let Some(ttl) = control.take::<String>("ttl")?
        && !matches!(ttl.as_str(), "5m" | "1h")
    {
        return Err(InvalidRequest::new(
            control.at("ttl"),
            "must be \"5m\" or \"1h\"",
        ));
    }
    control.finish()
}

/// Refuses a tool call no `tool` message answered: the model reads every call with its result.
fn unanswered(pending: &[Pending]) -> Result<(), InvalidRequest> {
    match pending.iter().find(|p| !p.answered) {
        None => Ok(()),
        Some(call) => Err(InvalidRequest::new(
            call.path.clone(),
            "has no tool message answering it: send its result as {\"role\": \"tool\", \"tool_call_id\": …, \"content\": …} right after this message",
        )),
    }
}

/// An assistant message's tool call, as a call whose result is still to come.
fn tool_call(path: &str, call: Value) -> Result<ToolExchange, InvalidRequest> {
    let mut call = Obj::new(path, call)?;
    let id: String = call.require("id")?;
    if id.is_empty() || id.len() > 64 {
        return Err(InvalidRequest::new(
            call.at("id"),
            "must be 1 to 64 characters",
        ));
    }
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
    if !is_tool_name(&name) {
        return Err(InvalidRequest::new(
            function.at("name"),
            "must be 1 to 64 letters, digits, underscores or hyphens",
        ));
    }
    let arguments: String = function.require("arguments")?;
    let input = match serde_json::from_str::<Value>(&arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => {
            return Err(InvalidRequest::new(
                function.at("arguments"),
                "must be a JSON object, as text",
            ));
        }
    };
    function.finish()?;
    Ok(ToolExchange {
        round: 0,
        id,
        name,
        input,
        output: String::new(),
        status: ToolStatus::Success,
    })
}

/// A content that may be only text: a string, or `text` parts (an assistant's also `refusal` parts), joined.
fn text_content(path: &str, content: Value, assistant: bool) -> Result<String, InvalidRequest> {
    match content {
        Value::String(text) => Ok(text),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let mut part = Obj::new(format!("{path}[{j}]"), part)?;
                let kind: String = part.require("type")?;
                let text: String = match kind.as_str() {
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
                part.refuse(
                    "prompt_cache_breakpoint",
                    "is not supported by this backend: prompts are cached by the backend",
                )?;
                cache_control(&mut part)?;
                part.finish()?;
                texts.push(text);
            }
            Ok(texts.join("\n\n"))
        }
        other => Err(InvalidRequest::new(
            path,
            format!(
                "expected a string or an array of parts, not {}",
                kind_of(&other)
            ),
        )),
    }
}

/// A user message's content: text, images (`data:` URLs only: the backend fetches nothing a client names) and
/// files (`file_data`); `files` counts the message's files so far, to name those that come without a name.
fn user_content(
    path: &str,
    content: Value,
    limits: &RequestLimits,
    files: &mut usize,
) -> Result<Vec<ContentPart>, ChatError> {
    let parts = match content {
        Value::String(text) => {
            if text.trim().is_empty() {
                return Err(InvalidRequest::new(path, "must not be empty").into());
            }
            InvalidRequest::check_length(path, &text, limits.max_message_chars)?;
            return Ok(vec![ContentPart::Text(text)]);
        }
        Value::Array(parts) if !parts.is_empty() => parts,
        Value::Array(_) => {
            return Err(InvalidRequest::new(path, "must hold at least one part").into());
        }
        other => {
            return Err(InvalidRequest::new(
                path,
                format!(
                    "expected a string or an array of parts, not {}",
                    kind_of(&other)
                ),
            )
            .into());
        }
    };
    let mut texts: Vec<String> = Vec::new();
    let mut attached = Vec::new();
    for (j, part) in parts.into_iter().enumerate() {
        let mut part = Obj::new(format!("{path}[{j}]"), part)?;
        let kind: String = part.require("type")?;
        match kind.as_str() {
            "text" => texts.push(part.require("text")?),
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
                let Some((media_type, data)) = data_url(&url) else {
                    return Err(InvalidRequest::new(
                        at,
                        "must be a data: URL (data:image/png;base64,…): this backend fetches nothing a client names",
                    )
                    .into());
                };
                let bytes = base64(&format!("{at}.url"), data)?;
                *files += 1;
                attached.push(take(
                    &at,
                    Some(format!("image-{}", *files)),
                    media_type,
                    Bytes::from(bytes),
                    limits,
                )?);
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
                let (media_type, data) = match data_url(&data) {
                    Some((media_type, data)) => (media_type, data),
                    None => (None, data.as_str()),
                };
                let bytes = base64(&format!("{at}.file_data"), data)?;
                *files += 1;
                let name = name.unwrap_or_else(|| format!("file-{}", *files));
                attached.push(take(
                    &at,
                    Some(name),
                    media_type,
                    Bytes::from(bytes),
                    limits,
                )?);
            }
            "input_audio" => {
                return Err(InvalidRequest::new(
                    part.at("type"),
                    "audio input is not supported by this backend",
                )
                .into());
            }
            _ => {
                return Err(InvalidRequest::new(
                    part.at("type"),
                    "must be \"text\", \"image_url\" or \"file\"",
                )
                .into());
            }
        }
        part.refuse(
            "prompt_cache_breakpoint",
            "is not supported by this backend: prompts are cached by the backend",
        )?;
        cache_control(&mut part)?;
        part.finish()?;
    }
    let text = texts.join("\n\n");
    InvalidRequest::check_length(path, &text, limits.max_message_chars)?;
    if text.trim().is_empty() && attached.is_empty() {
        return Err(InvalidRequest::new(path, "must not be empty").into());
    }
    let mut content = Vec::with_capacity(attached.len() + 1);
    content.push(ContentPart::Text(text));
    content.extend(attached.into_iter().map(ContentPart::File));
    Ok(content)
}

/// A `data:` URL's media type (when it names one) and its base64 text; `None` when `url` is no base64 data URL.
fn data_url(url: &str) -> Option<(Option<&str>, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    let media_type = media_type.split(';').next().filter(|t| !t.is_empty());
    Some((media_type, data))
}
