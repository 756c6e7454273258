//! Reading a Responses request strictly: every field of OpenAI's `CreateResponse` is honoured, accepted at its
//! default (or, where a client sends it on every request, accepted and recorded), or refused with a 400 naming it;
//! a field OpenAI's API does not define is a 400 too. The request becomes the core's terms as a Chat Completions
//! request does: `instructions` and the `system`/`developer` messages the completion's system blocks,
//! `max_output_tokens` its answer's length, `reasoning.effort` its thinking, an assistant's `function_call` items
//! with the `function_call_output` items that answer them the [`ContentPart::Tool`] parts of one assistant message.
//!
//! Tools: `function` tools are given to the model as they are; a `namespace` tool's functions under qualified names
//! (`{namespace}__{name}`, as Bedrock's tool names take no dot) and answered under their own name and namespace; a
//! `custom` tool (free-form input) as a function of one string argument `input`; OpenAI's hosted tools
//! (`web_search`, `file_search`, …) are not given to the model at all and are named in [`ResponsesRequest::ignored_tools`]
//! (Codex offers `web_search` on every request: a 400 would lock it out), while a `tool_choice` forcing one is a 400.

use crate::object::{self, Api, kind_of};
use crate::read::{
    self, BEDROCK_UNIT, DefaultOnly, Pending, Sampled, UserParts, answer_waiting, is_tool_name,
    text_parts, unanswered, waiting,
};
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use chat_core::{
    ChatError, Completion, ContentPart, InvalidRequest, Message, ReasoningEffort, RequestLimits,
    ResponseFormat, Role, Sampling, Thinking, ToolChoice, ToolSpec, TurnInput,
};

/// The most `metadata` pairs, and the longest key and value, as OpenAI's `Metadata` bounds them.
const MAX_METADATA_PAIRS: usize = 16;
const MAX_METADATA_VALUE_CHARS: usize = 512;
/// `client_metadata`'s bounds: Codex's turn metadata is JSON text of some 800 characters.
const MAX_CLIENT_METADATA_PAIRS: usize = 32;
const MAX_CLIENT_METADATA_VALUE_CHARS: usize = 4096;
/// The longest `user` / `safety_identifier` / `prompt_cache_key` kept in a trace.
const MAX_USER_CHARS: usize = 256;
/// What joins a namespace and its function's name in the name the model is given.
pub const NAMESPACE_SEPARATOR: &str = "__";

/// OpenAI's hosted tools: run by OpenAI's servers, not the client's. Offered, they are left out (the model is not
/// told of them); forced by `tool_choice`, a 400.
pub const HOSTED_TOOLS: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "file_search",
    "code_interpreter",
    "computer_use",
    "computer_use_preview",
    "computer",
    "image_generation",
    "local_shell",
    "shell",
    "apply_patch",
    "mcp",
    "tool_search",
];

/// What a tool the model is given by one name is, to the client: the name it answers under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOrigin {
    /// A function tool, alone (`namespace: None`) or of a `namespace` tool.
    Function {
        namespace: Option<String>,
        name: String,
    },
    /// A `custom` tool: its one argument `input` is the call's free-form input.
    Custom { name: String },
}

/// The client's tools by the names the model knows them by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolNames(HashMap<String, ToolOrigin>);

impl ToolNames {
    /// What the model's tool `name` is to the client; a name not offered is a function of that name.
    pub fn origin(&self, name: &str) -> ToolOrigin {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| ToolOrigin::Function {
                namespace: None,
                name: name.to_string(),
            })
    }
}

/// The model's name of a function of `namespace` (or alone).
pub fn qualified(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}{NAMESPACE_SEPARATOR}{name}"),
        None => name.to_string(),
    }
}

/// What the `response` object repeats of its request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Echo {
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub parallel_tool_calls: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// As sent (`"auto"` when absent).
    pub tool_choice: Value,
    /// The tools as sent, hosted ones included.
    pub tools: Vec<Value>,
    /// `{"effort", "summary"}` as sent (both `null` when absent).
    pub reasoning: Value,
    /// `{"format": …}` as sent (`{"type": "text"}` when absent).
    pub text: Value,
    pub truncation: String,
    pub user: Option<String>,
    pub metadata: Map<String, Value>,
    pub prompt_cache_key: Option<String>,
    pub safety_identifier: Option<String>,
    pub store: bool,
    pub previous_response_id: Option<String>,
}

/// A Responses request, read: the core's turn and completion, and how the answer is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesRequest {
    pub turn: TurnInput,
    pub completion: Completion,
    /// The model the request named (echoed in the answer's `model`).
    pub model: String,
    /// As typed server-sent events (`stream: true`).
    pub stream: bool,
    /// Whether the response is to be kept (`store`, OpenAI's default `true`).
    pub store: bool,
    pub previous_response_id: Option<String>,
    /// The `input` items as sent (a string made one user message), to keep with a stored response.
    pub input_items: Vec<Value>,
    /// The conversation as items before the answer: the kept one's a `previous_response_id` continues (the app
    /// prepends it), then `input_items`.
    pub history: Vec<Value>,
    /// Whether the conversation is still to be read (`turn.messages` and `completion.system` are empty): the request
    /// continues a kept response, or refers to kept items ([`is_reference`]).
    pub deferred: bool,
    /// `include: ["reasoning.encrypted_content"]`.
    pub include_encrypted_reasoning: bool,
    /// The `encrypted_content` of the `reasoning` items given back, each with the call it led to.
    pub sealed_reasoning: Vec<SealedReasoning>,
    /// Whether the reasoning is shown as a summary (`reasoning.summary` set).
    pub summarize_reasoning: bool,
    /// OpenAI's hosted tools offered and left out, by type, in order.
    pub ignored_tools: Vec<String>,
    pub tool_names: ToolNames,
    /// `client_metadata`, recorded in the turn's trace beside `metadata`.
    pub client_metadata: Map<String, Value>,
    pub echo: Echo,
}

/// A `reasoning` item's `encrypted_content` given back (sealed by the app, which opens it): where it was, and the
/// id of the first call after it, whose assistant message the model gets it back with.
#[derive(Debug, Clone, PartialEq)]
pub struct SealedReasoning {
    /// `input[i].encrypted_content`, as a refusal names it.
    pub path: String,
    pub call_id: String,
    pub sealed: String,
}

/// A conversation read from items: the system blocks, the messages, and the sealed reasoning given back.
pub type Conversation = (Vec<String>, Vec<Message>, Vec<SealedReasoning>);

/// The fields taken only at their default value.
const DEFAULT_ONLY: &DefaultOnly = &[
    ("background", |v| v == &Value::Bool(false), "false"),
    (
        "conversation",
        |_| false,
        "null (use previous_response_id, or send the conversation in input)",
    ),
    ("prompt", |_| false, "null (no stored prompt templates)"),
    ("max_tool_calls", |_| false, "null"),
    ("top_logprobs", |v| v.as_u64() == Some(0), "0"),
    (
        "service_tier",
        |v| matches!(v.as_str(), Some("auto" | "default")),
        "\"auto\" or \"default\"",
    ),
    (
        "prompt_cache_retention",
        |_| false,
        "null (prompts are cached by the backend)",
    ),
    ("context_management", |_| false, "null"),
];

/// Parses and checks a `POST /v1/responses` body. A fault is a 400 naming the field (`param`); a file larger than
/// its kind may be a 413.
pub fn parse_responses_request(
    body: &[u8],
    limits: &RequestLimits,
) -> Result<ResponsesRequest, ChatError> {
    let mut body: Obj = read::body(body)?;
    body.default_only(DEFAULT_ONLY)?;
    let model = body.model()?;
    let stream = body.take::<bool>("stream")?.unwrap_or(false);
    body.stream_options(stream, false, "events")?;
    let store = body.take::<bool>("store")?.unwrap_or(true);
    let previous_response_id = body.take::<String>("previous_response_id")?;
    let include_encrypted_reasoning = include(&mut body)?;
    let (reasoning_echo, effort, summarize_reasoning) = reasoning(&mut body)?;
    let sampled = sampled(&mut body, limits, effort)?;
    let (tools, tool_names, ignored_tools, tools_echo) = tools(&mut body)?;
    let tool_choice_echo = body
        .map
        .get("tool_choice")
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| Value::from("auto"));
    let tool_choice = tool_choice(&mut body, &tools, &tool_names)?;
    let parallel_tool_calls = body.take::<bool>("parallel_tool_calls")?.unwrap_or(true);
    let (response_format, text_echo) = text(&mut body)?;
    let truncation = match body.take::<String>("truncation")? {
        None => "disabled".to_string(),
        Some(t) if t == "disabled" || t == "auto" => t,
        Some(_) => {
            return Err(
                InvalidRequest::new("truncation", "must be \"auto\" or \"disabled\"").into(),
            );
        }
    };
    let user = body.bounded_text("user", MAX_USER_CHARS)?;
    let safety_identifier = body.bounded_text("safety_identifier", MAX_USER_CHARS)?;
    let prompt_cache_key = body.bounded_text("prompt_cache_key", MAX_USER_CHARS)?;
    let metadata = body.string_pairs("metadata", MAX_METADATA_PAIRS, MAX_METADATA_VALUE_CHARS)?;
    // What Codex sends of its session and turn: ids, and its turn's metadata as JSON text.
    let client_metadata = body.string_pairs(
        "client_metadata",
        MAX_CLIENT_METADATA_PAIRS,
        MAX_CLIENT_METADATA_VALUE_CHARS,
    )?;
    let instructions = body.take::<String>("instructions")?;
    if let Some(text) = &instructions {
        InvalidRequest::check_length("instructions", text, limits.max_message_chars)?;
    }
    let input_items = input_items(body.require::<Value>("input")?)?;
    body.finish()?;
    // A continuation's items are read after the kept ones they continue, and a reference once it is the item it
    // names (the app's to do: it has them).
    let deferred = previous_response_id.is_some() || input_items.iter().any(is_reference);
    let (system, messages, sealed_reasoning) = if deferred {
        (Vec::new(), Vec::new(), Vec::new())
    } else {
        conversation(instructions.as_deref(), &input_items, limits)?
    };
    let echo = Echo {
        instructions,
        max_output_tokens: sampled.max_output_tokens,
        parallel_tool_calls,
        temperature: sampled.sampling.temperature,
        top_p: sampled.sampling.top_p,
        tool_choice: tool_choice_echo,
        tools: tools_echo,
        reasoning: reasoning_echo,
        text: text_echo,
        truncation,
        user: user.clone(),
        metadata: metadata.clone(),
        prompt_cache_key,
        safety_identifier,
        store,
        previous_response_id: previous_response_id.clone(),
    };
    Ok(ResponsesRequest {
        turn: read::turn(messages),
        completion: Completion {
            system,
            model_id: Some(model.clone()),
            sampling: sampled.sampling,
            max_output_tokens: sampled.max_output_tokens,
            thinking: sampled.thinking,
            tools,
            tool_choice,
            parallel_tool_calls,
            stop_sequences: Vec::new(),
            response_format,
            user,
            // The reasoning kept for a client's tool calls is the backend's (the core's store), as for Chat
            // Completions; Anthropic's Messages alone keeps it in the client.
            ..Completion::default()
        },
        model,
        stream,
        store,
        previous_response_id,
        history: input_items.clone(),
        input_items,
        deferred,
        include_encrypted_reasoning,
        sealed_reasoning,
        summarize_reasoning,
        ignored_tools,
        tool_names,
        client_metadata,
        echo,
    })
}

/// The API whose requests [`Obj`] reads here, as its refusals name it.
enum Responses {}

impl Api for Responses {
    const NAME: &'static str = "OpenAI's Responses API";
}

/// A JSON object of this API's requests, read field by field.
type Obj = object::Obj<Responses>;

/// `include`: `reasoning.encrypted_content` is honoured; what names output this backend does not make (the hosted
/// tools' results, log probabilities) is refused.
fn include(body: &mut Obj) -> Result<bool, InvalidRequest> {
    let Some(list) = body.take::<Vec<String>>("include")? else {
        return Ok(false);
    };
    let mut encrypted = false;
    for (i, item) in list.iter().enumerate() {
        match item.as_str() {
            "reasoning.encrypted_content" => encrypted = true,
            // What this backend never leaves out: the input's image URLs are the client's own.
            "message.input_image.image_url" => {}
            _ => {
                return Err(InvalidRequest::new(
                    format!("include[{i}]"),
                    "is not supported by this backend: it takes \"reasoning.encrypted_content\"",
                ));
            }
        }
    }
    Ok(encrypted)
}

/// `reasoning`: `effort` (`none` is no thinking; `minimal` the least effort, `xhigh` the most) and `summary`
/// (whether the reasoning is shown, as a summary item). Returns the echo, the thinking and whether to show it.
fn reasoning(body: &mut Obj) -> Result<(Value, Option<Thinking>, bool), InvalidRequest> {
    let Some(value) = body.value("reasoning") else {
        return Ok((json!({"effort": null, "summary": null}), None, false));
    };
    let mut reasoning = Obj::new("reasoning", value)?;
    let effort = reasoning.take::<String>("effort")?;
    let thinking = match effort.as_deref() {
        None => None,
        Some("none") => Some(Thinking::Off),
        Some("minimal" | "low") => Some(Thinking::Effort(ReasoningEffort::Low)),
        Some("medium") => Some(Thinking::Effort(ReasoningEffort::Medium)),
        Some("high" | "xhigh") => Some(Thinking::Effort(ReasoningEffort::High)),
        Some(_) => {
            return Err(InvalidRequest::new(
                "reasoning.effort",
                "must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"",
            ));
        }
    };
    let summary = match reasoning.take::<String>("summary")? {
        None => reasoning.take::<String>("generate_summary")?,
        some => {
            reasoning.take::<String>("generate_summary")?;
            some
        }
    };
    if let Some(s) = &summary
        && !matches!(s.as_str(), "auto" | "concise" | "detailed")
    {
        return Err(InvalidRequest::new(
            "reasoning.summary",
            "must be \"auto\", \"concise\" or \"detailed\"",
        ));
    }
    reasoning.finish()?;
    let echo = json!({"effort": effort, "summary": summary});
    Ok((echo, thinking, summary.is_some()))
}

/// `temperature`, `top_p` and `max_output_tokens` in the core's terms, with the reasoning's effort held to the same
/// bounds and to the operator's `ALLOWED_OVERRIDES` as the protocol's `context.overrides`.
fn sampled(
    body: &mut Obj,
    limits: &RequestLimits,
    thinking: Option<Thinking>,
) -> Result<Sampled, InvalidRequest> {
    // Bedrock's models sample at a temperature of 0 to 1 (OpenAI's API takes up to 2): a higher one is refused.
    let temperature = body.unit("temperature", BEDROCK_UNIT)?;
    let top_p = body.unit("top_p", BEDROCK_UNIT)?;
    let max: Option<u64> = body.take("max_output_tokens")?;
    let cap = u64::from(limits.max_output_tokens);
    if let Some(n) = max
        && !(1..=cap).contains(&n)
    {
        return Err(InvalidRequest::new(
            "max_output_tokens",
            format!("must be between 1 and {cap} (this deployment's MAX_OUTPUT_TOKENS)"),
        ));
    }
    let reasoning_effort = match thinking {
        Some(Thinking::Effort(effort)) => Some(effort),
        _ => None,
    };
    let sampling = Sampling {
        temperature,
        top_p,
        top_k: None,
    };
    Sampled::allowed(
        sampling,
        max,
        reasoning_effort,
        thinking,
        limits,
        |used| match used {
            "max_tokens" => "max_output_tokens",
            "reasoning_effort" => "reasoning.effort",
            other => other,
        },
    )
}

/// The schema of a custom tool's input, as the model is given it: one string.
fn custom_schema() -> Value {
    json!({"type": "object", "properties": {"input": {"type": "string",
        "description": "The tool's whole input, as free-form text."}}, "required": ["input"]})
}

type Tools = (Vec<ToolSpec>, ToolNames, Vec<String>, Vec<Value>);

/// `tools`: function tools, `namespace` tools of functions, `custom` tools, and OpenAI's hosted tools (left out).
fn tools(body: &mut Obj) -> Result<Tools, InvalidRequest> {
    let Some(list) = body.take::<Vec<Value>>("tools")? else {
        return Ok(Default::default());
    };
    let echo = list.clone();
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(list.len());
    let mut names = ToolNames::default();
    let mut ignored: Vec<String> = Vec::new();
    for (i, tool) in list.into_iter().enumerate() {
        let mut tool = Obj::new(format!("tools[{i}]"), tool)?;
        let kind: String = tool.require("type")?;
        match kind.as_str() {
            "function" => {
                let (spec, name) = function_tool(tool, None)?;
                add(&mut specs, &mut names, spec, name, i)?;
            }
            "namespace" => {
                let namespace: String = tool.require("name")?;
                tool.take::<String>("description")?;
                let inner = tool.require::<Vec<Value>>("tools")?;
                let at = tool.at("tools");
                tool.finish()?;
                for (j, function) in inner.into_iter().enumerate() {
                    let mut function = Obj::new(format!("{at}[{j}]"), function)?;
                    let kind: String = function.require("type")?;
                    if kind != "function" {
                        return Err(InvalidRequest::new(
                            function.at("type"),
                            "must be \"function\": a namespace groups function tools",
                        ));
                    }
                    let (spec, name) = function_tool(function, Some(&namespace))?;
                    add(&mut specs, &mut names, spec, name, i)?;
                }
            }
            "custom" => {
                let name: String = tool.require("name")?;
                let description = tool.take::<String>("description")?.unwrap_or_default();
                // The grammar or text format of the input: the model is told it is free-form text.
                let format = tool.take::<Value>("format")?;
                tool.finish()?;
                let mut description = description;
                if let Some(format) = format.filter(|f| f["type"] == "grammar") {
                    description.push_str(&format!(
                        "\n\nThe input follows this {} grammar:\n{}",
                        format["syntax"].as_str().unwrap_or(""),
                        format["definition"].as_str().unwrap_or("")
                    ));
                }
                let spec = ToolSpec {
                    name: name.clone(),
                    description,
                    input_schema: custom_schema(),
                    strict: false,
                };
                add(&mut specs, &mut names, spec, ToolOrigin::Custom { name }, i)?;
            }
            hosted if HOSTED_TOOLS.contains(&hosted) => ignored.push(kind),
            _ => {
                return Err(InvalidRequest::new(
                    tool.at("type"),
                    "must be \"function\", \"namespace\", \"custom\" or one of OpenAI's hosted tools",
                ));
            }
        }
    }
    Ok((specs, names, ignored, echo))
}

fn add(
    specs: &mut Vec<ToolSpec>,
    names: &mut ToolNames,
    spec: ToolSpec,
    origin: ToolOrigin,
    i: usize,
) -> Result<(), InvalidRequest> {
    if !is_tool_name(&spec.name) {
        return Err(InvalidRequest::new(
            format!("tools[{i}].name"),
            "must make a name of 1 to 64 letters, digits, underscores or hyphens (a namespace's and its function's names joined by __)",
        ));
    }
    if specs.iter().any(|s| s.name == spec.name) {
        return Err(InvalidRequest::new(
            format!("tools[{i}].name"),
            format!(
                "names the tool {:?} again: tool names must be unique",
                spec.name
            ),
        ));
    }
    names.0.insert(spec.name.clone(), origin);
    specs.push(spec);
    Ok(())
}

/// A function tool (`{"type": "function", "name", "description", "parameters", "strict"}`), of `namespace` or
/// alone: its spec under the name the model knows it by. `strict` is taken either way: Bedrock's tool use does not
/// enforce a schema, and the model is given it.
fn function_tool(
    mut tool: Obj,
    namespace: Option<&str>,
) -> Result<(ToolSpec, ToolOrigin), InvalidRequest> {
    let name: String = tool.require("name")?;
    let description = tool.take::<String>("description")?.unwrap_or_default();
    let parameters = tool.schema(
        "parameters",
        Some(json!({"type": "object", "properties": {}})),
    )?;
    // Honoured as Bedrock's strict tool use where the model has it (the schema given either way).
    let strict = tool.take::<bool>("strict")?.unwrap_or(false);
    tool.take::<bool>("defer_loading")?;
    tool.finish()?;
    let spec = ToolSpec {
        name: qualified(namespace, &name),
        description,
        input_schema: parameters,
        strict,
    };
    let origin = ToolOrigin::Function {
        namespace: namespace.map(str::to_string),
        name,
    };
    Ok((spec, origin))
}

/// `tool_choice`: `auto`, `none`, `required`, a named function or custom tool among `tools`; one of OpenAI's hosted
/// tools is a 400 naming it.
fn tool_choice(
    body: &mut Obj,
    tools: &[ToolSpec],
    names: &ToolNames,
) -> Result<ToolChoice, InvalidRequest> {
    read::tool_choice(
        body,
        tools,
        "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": …}",
        "asks for a tool, but the request offers the model no tools",
        |mut named| {
            let kind: String = named.require("type")?;
            match kind.as_str() {
                "function" | "custom" => {
                    let name: String = named.require("name")?;
                    let namespace = named.take::<String>("namespace")?;
                    named.finish()?;
                    let model_name = qualified(namespace.as_deref(), &name);
                    let offered = tools.iter().any(|t| t.name == model_name)
                        && matches!(
                            (names.origin(&model_name), kind.as_str()),
                            (ToolOrigin::Function { .. }, "function")
                                | (ToolOrigin::Custom { .. }, "custom")
                        );
                    if !offered {
                        return Err(InvalidRequest::new(
                            "tool_choice.name",
                            format!("names no {kind} tool of tools"),
                        ));
                    }
                    Ok(ToolChoice::Tool(model_name))
                }
                hosted if HOSTED_TOOLS.contains(&hosted) => Err(InvalidRequest::new(
                    "tool_choice",
                    format!(
                        "forces OpenAI's hosted tool {hosted:?}, which this backend does not run"
                    ),
                )),
                _ => Err(InvalidRequest::new(
                    "tool_choice.type",
                    "must be \"function\" or \"custom\"",
                )),
            }
        },
    )
}

/// `text`: its `format` (`text`, `json_object`, or `json_schema` with its schema) and `verbosity` (taken: the
/// model answers at its own length).
fn text(body: &mut Obj) -> Result<(ResponseFormat, Value), InvalidRequest> {
    let default_echo = json!({"format": {"type": "text"}});
    let Some(text) = body.value("text") else {
        return Ok((ResponseFormat::Text, default_echo));
    };
    let mut echo = text.clone();
    let mut text = Obj::new("text", text)?;
    if let Some(verbosity) = text.take::<String>("verbosity")?
        && !matches!(verbosity.as_str(), "low" | "medium" | "high")
    {
        return Err(InvalidRequest::new(
            "text.verbosity",
            "must be \"low\", \"medium\" or \"high\"",
        ));
    }
    let Some(format) = text.value("format") else {
        text.finish()?;
        echo["format"] = json!({"type": "text"});
        return Ok((ResponseFormat::Text, echo));
    };
    text.finish()?;
    let mut format = Obj::new("text.format", format)?;
    let kind: String = format.require("type")?;
    let parsed = match kind.as_str() {
        "text" => ResponseFormat::Text,
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => format.json_schema(None)?,
        _ => {
            return Err(InvalidRequest::new(
                "text.format.type",
                "must be \"text\", \"json_object\" or \"json_schema\"",
            ));
        }
    };
    format.finish()?;
    Ok((parsed, echo))
}

/// `input` as items: a string is one user message of it.
fn input_items(input: Value) -> Result<Vec<Value>, InvalidRequest> {
    match input {
        Value::String(text) => Ok(vec![json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})]),
        Value::Array(items) if !items.is_empty() => Ok(items),
        Value::Array(_) => Err(InvalidRequest::new("input", "must hold at least one item")),
        other => Err(InvalidRequest::new(
            "input",
            format!(
                "expected a string or an array of items, not {}",
                kind_of(&other)
            ),
        )),
    }
}

/// Whether an input item is a reference to a kept item (`{"type": "item_reference", "id"}`), as the AI SDK sends
/// the items of a kept response back.
pub fn is_reference(item: &Value) -> bool {
    item["type"] == "item_reference"
}

/// The kept response an output item's id names, and the item's place in its output: ids are made from the response's
/// ([`crate::responses::response`]), `{kind}_{hex}{index:03}` of `resp_{hex}`.
pub fn referenced(item_id: &str) -> Option<(String, usize)> {
    let (kind, rest) = item_id.split_once('_')?;
    if !matches!(kind, "msg" | "fc" | "rs" | "ctc") || rest.len() <= 3 || !rest.is_ascii() {
        return None;
    }
    let (hex, index) = rest.split_at(rest.len() - 3);
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((format!("resp_{hex}"), index.parse().ok()?))
}

/// The conversation `items` make (a continuation's after the kept ones), as the
/// completion's system blocks (`instructions`, then each `system` and `developer` message, in order) and the core's
/// messages. Each run of an assistant's messages and calls is one assistant message, its calls answered by the
/// `function_call_output` items after it; a call of the run after those starts the next. A `reasoning` item's
/// `encrypted_content` goes with the first call after it.
pub fn conversation(
    instructions: Option<&str>,
    items: &[Value],
    limits: &RequestLimits,
) -> Result<Conversation, ChatError> {
    read::at_most("input", "items", items.len(), limits)?;
    let mut system: Vec<String> = instructions
        .filter(|t| !t.trim().is_empty())
        .map(|t| vec![t.to_string()])
        .unwrap_or_default();
    let mut messages: Vec<Message> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    // The sealed reasoning given back, and that which awaits the call it led to.
    let mut sealed_reasoning: Vec<SealedReasoning> = Vec::new();
    let mut awaiting_call: Vec<(String, String)> = Vec::new();
    // Whether the last assistant message takes more of the model's parts (no output came since).
    let mut open = false;
    let mut files = 0usize;
    for (i, item) in items.iter().enumerate() {
        let mut item = Obj::new(format!("input[{i}]"), item.clone())?;
        let kind = item
            .take::<String>("type")?
            .unwrap_or_else(|| "message".to_string());
        // The ids and statuses of items a client gives back are the backend's own: taken, not needed.
        item.take::<String>("id")?;
        item.take::<String>("status")?;
        match kind.as_str() {
            "message" => {
                let role: String = item.require("role")?;
                let path = item.at("content");
                match role.as_str() {
                    "system" | "developer" => {
                        let text = text_content(&path, item.require("content")?, false)?;
                        InvalidRequest::check_length(&path, &text, limits.max_message_chars)?;
                        system.push(text);
                    }
                    "user" => {
                        unanswered(&pending, UNANSWERED)?;
                        pending.clear();
                        awaiting_call.clear();
                        open = false;
                        let parts = read::user_content(
                            &path,
                            item.require("content")?,
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
                        let text = text_content(&path, item.require("content")?, true)?;
                        InvalidRequest::check_length(&path, &text, limits.max_message_chars)?;
                        item.take::<String>("phase")?;
                        let message = assistant(&mut messages, &mut open, &pending)?;
                        if !text.trim().is_empty() {
                            let content = &mut messages[message].content;
                            match content
                                .iter_mut()
                                .find(|p| matches!(p, ContentPart::Text(_)))
                            {
                                Some(ContentPart::Text(said)) => {
                                    said.push_str("\n\n");
                                    said.push_str(&text);
                                }
                                _ => content.push(ContentPart::Text(text)),
                            }
                        }
                    }
                    _ => {
                        return Err(InvalidRequest::new(
                            item.at("role"),
                            "must be \"user\", \"assistant\", \"system\" or \"developer\"",
                        )
                        .into());
                    }
                }
            }
            "function_call" | "custom_tool_call" => {
                let path = format!("input[{i}]");
                let id = item.call_id("call_id")?;
                let name: String = item.require("name")?;
                let (name, input) = if kind == "function_call" {
                    let namespace = item.take::<String>("namespace")?;
                    let input = item.arguments()?;
                    (qualified(namespace.as_deref(), &name), input)
                } else {
                    let input: String = item.require("input")?;
                    (name, json!({ "input": input }))
                };
                item.check_tool_name("name", &name)?;
                let message = assistant(&mut messages, &mut open, &pending)?;
                sealed_reasoning.extend(awaiting_call.drain(..).map(|(path, sealed)| {
                    SealedReasoning {
                        path,
                        call_id: id.clone(),
                        sealed,
                    }
                }));
                if waiting(&mut pending, &id).is_some() {
                    return Err(InvalidRequest::new(
                        item.at("call_id"),
                        "repeats the call_id of another call not yet answered",
                    )
                    .into());
                }
                let content = &mut messages[message].content;
                // The calls go before the text (the core replays them so).
                let at = content
                    .iter()
                    .take_while(|p| matches!(p, ContentPart::Tool(_)))
                    .count();
                content.insert(
                    at,
                    ContentPart::Tool(read::call(id.clone(), name.clone(), input)),
                );
                // Insertion moved the text after it, never another call.
                pending.push(Pending {
                    path,
                    id,
                    name,
                    at: (message, at),
                    answered: false,
                });
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id: String = item.require("call_id")?;
                let path = item.at("output");
                let output = output_text(&path, item.require("output")?)?;
                InvalidRequest::check_length(&path, &output, limits.max_message_chars)?;
                let refusal = "answers no unanswered call of the items before it";
                let at = (item.at("call_id"), refusal);
                answer_waiting(&mut pending, &mut messages, &id, output, at)?;
                open = false;
            }
            "reasoning" => {
                // The reasoning a client gives back: the model gets the signed reasoning (the backend's, or the
                // sealed copy the client kept) for the calls that follow it, not this summary.
                item.take::<Value>("summary")?;
                item.take::<Value>("content")?;
                if let Some(sealed) = item.take::<String>("encrypted_content")? {
                    awaiting_call.push((item.at("encrypted_content"), sealed));
                }
            }
            "item_reference" => {
                return Err(InvalidRequest::new(
                    item.at("id"),
                    "names no item of a response kept for you",
                )
                .into());
            }
            _ => {
                return Err(InvalidRequest::new(
                    item.at("type"),
                    "must be \"message\", \"function_call\", \"function_call_output\", \"custom_tool_call\", \"custom_tool_call_output\" or \"reasoning\"",
                )
                .into());
            }
        }
        item.finish()?;
    }
    read::settle("input", &pending, UNANSWERED, &messages, limits)?;
    Ok((system, messages, sealed_reasoning))
}

/// The index of the assistant message the model's next part goes in: the open one, else a new one.
fn assistant(
    messages: &mut Vec<Message>,
    open: &mut bool,
    pending: &[Pending],
) -> Result<usize, InvalidRequest> {
    if !*open {
        // Calls of an earlier run must all be answered before the model speaks again.
        unanswered(pending, UNANSWERED)?;
        messages.push(Message {
            role: Role::Assistant,
            content: Vec::new(),
        });
        *open = true;
    }
    Ok(messages.len() - 1)
}

/// Why a call no output answered is refused.
const UNANSWERED: &str = "has no function_call_output answering it: send its result as {\"type\": \"function_call_output\", \"call_id\": …, \"output\": …} after it";

/// A call's output: a string, or `input_text` parts joined.
fn output_text(path: &str, output: Value) -> Result<String, InvalidRequest> {
    text_parts(path, output, |kind, part: &mut Obj| match kind {
        "input_text" | "output_text" => {
            let text = part.require::<String>("text")?;
            part.take::<Value>("annotations")?;
            Ok(text)
        }
        // A tool's result reaches the model as text (Converse's tool results here are text): an image or a file a
        // tool returned (Codex's view_image) is said to be there, not dropped in silence.
        "input_image" | "input_file" => {
            part.map.clear();
            Ok(format!(
                "[the tool returned an {} here, which this backend cannot show the model]",
                if kind == "input_image" {
                    "image"
                } else {
                    "file"
                }
            ))
        }
        _ => Err(InvalidRequest::new(
            part.at("type"),
            "must be \"input_text\", \"input_image\" or \"input_file\"",
        )),
    })
}

/// A content that may be only text: a string, or text parts (`input_text`; an assistant's `output_text` and
/// `refusal`), joined.
fn text_content(path: &str, content: Value, assistant: bool) -> Result<String, InvalidRequest> {
    text_parts(path, content, |kind, part: &mut Obj| match kind {
        "input_text" => part.require("text"),
        "output_text" if assistant => {
            part.take::<Value>("annotations")?;
            part.take::<Value>("logprobs")?;
            part.require("text")
        }
        "refusal" if assistant => part.require("refusal"),
        _ => Err(InvalidRequest::new(
            part.at("type"),
            if assistant {
                "must be \"output_text\" or \"refusal\""
            } else {
                "must be \"input_text\": this message takes text only"
            },
        )),
    })
}

/// A part of a user message's content: text, an image (`input_image` of a `data:` URL: the backend fetches nothing
/// a client names) or a file (`input_file` of `file_data`).
fn user_part(kind: &str, part: &mut Obj, user: &mut UserParts) -> Result<(), ChatError> {
    match kind {
        "input_text" => user.texts.push(part.require("text")?),
        "input_image" => {
            part.refuse(
                "file_id",
                "is not supported by this backend (it keeps no uploaded files): send a data: URL as image_url",
            )?;
            if let Some(detail) = part.take::<String>("detail")?
                && !matches!(detail.as_str(), "auto" | "low" | "high" | "original")
            {
                return Err(InvalidRequest::new(
                    part.at("detail"),
                    "must be \"auto\", \"low\", \"high\" or \"original\"",
                )
                .into());
            }
            let at = part.at("image_url");
            let url: String = part.require("image_url")?;
            user.image(&at, &url, &at)?;
        }
        "input_file" => {
            part.refuse(
                "file_id",
                "is not supported by this backend (it keeps no uploaded files): send the file's file_data",
            )?;
            part.refuse(
                "file_url",
                "is not supported by this backend (it fetches nothing a client names): send the file's file_data",
            )?;
            let at = part.at("file_data");
            let data: String = part.require("file_data")?;
            let name = part.take::<String>("filename")?;
            user.file(&at, &data, &at, name)?;
        }
        _ => {
            return Err(InvalidRequest::new(
                part.at("type"),
                "must be \"input_text\", \"input_image\" or \"input_file\"",
            )
            .into());
        }
    }
    Ok(())
}
