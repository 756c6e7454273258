//! Reading a Messages request (`POST /v1/messages`, `/v1/messages/count_tokens`) strictly into the core's turn and
//! completion: every field of Anthropic's API is honoured, or accepted and named (what Bedrock does not offer, and
//! what Claude Code sends on every request: `context_management`, `output_config.effort` beyond the efforts,
//! `defer_loading`, `thinking.display`, `cache_control`), or refused with a 400 naming it; nothing is dropped in
//! silence. `max_tokens` past the deployment's bound is clamped to it (and said so), never refused, as Claude Code
//! asks for more than most models write. The conversation becomes the core's: an assistant's `tool_use` blocks with
//! the `tool_result` blocks of the user message after it are [`ContentPart::Tool`] parts of the assistant message,
//! and its `thinking` and `redacted_thinking` blocks the signed reasoning given back with them, byte for byte.

use crate::object::{self, Api, kind_of};
use crate::read::{self, Pending, answer_waiting, unanswered};
use std::collections::HashMap;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Map, Value};

use chat_core::{
    ChatError, Completion, ContentPart, InvalidRequest, Message, ReasoningBlock, ReasoningEffort,
    RequestLimits, ResponseFormat, Role, Sampling, Thinking, ToolChoice, ToolSpec, ToolStatus,
    TurnInput,
};

use crate::files::{base64, take};

/// The longest `metadata.user_id` kept in a trace (Claude Code's is a JSON string of a few ids).
const MAX_USER_CHARS: usize = 512;

/// Which route the body came to: a message's (`max_tokens` required, `stream` taken) or a count's (neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagesRoute {
    Create,
    CountTokens,
}

/// A Messages request, read: the core's turn and completion, how the answer is sent, and what the response's
/// headers say of the request (a clamp, what was accepted without effect).
#[derive(Debug, Clone, PartialEq)]
pub struct MessagesRequest {
    pub turn: TurnInput,
    pub completion: Completion,
    /// The model the request named (echoed in the answer's `model`); the completion's `model_id` is set from it
    /// by whoever knows the operator's table of names.
    pub model: String,
    /// As server-sent events (`stream: true`).
    pub stream: bool,
    /// `max_tokens` as asked, when it was more than the deployment writes (`MAX_OUTPUT_TOKENS`): the answer is held
    /// to the completion's `max_output_tokens` instead.
    pub clamped_from: Option<u64>,
    /// What the request asked that is accepted without effect here, by field (and value where it matters), in the
    /// order met: the response names them (`x-chat-accepted-unused`).
    pub accepted: Vec<String>,
}

/// Parses and checks a Messages body. A fault is a 400 naming the field; a file larger than its kind may be a 413.
pub fn parse_messages_request(
    body: &[u8],
    limits: &RequestLimits,
    route: MessagesRoute,
) -> Result<MessagesRequest, ChatError> {
    let mut body: Obj = read::body(body)?;
    let mut accepted = Vec::new();
    let model = body.model()?;
    let (stream, max_tokens) = match route {
        MessagesRoute::Create => (
            body.take::<bool>("stream")?.unwrap_or(false),
            Some(body.require::<u64>("max_tokens")?),
        ),
        MessagesRoute::CountTokens => (false, None),
    };
    if max_tokens == Some(0) {
        return Err(InvalidRequest::new("max_tokens", "must be at least 1").into());
    }
    let temperature = body.unit("temperature", "must be between 0 and 1")?;
    let top_p = body.unit("top_p", "must be between 0 and 1")?;
    let top_k: Option<u32> = body.take("top_k")?;
    let stop_sequences = body
        .take::<Vec<String>>("stop_sequences")?
        .unwrap_or_default();
    if let Some(i) = stop_sequences.iter().position(String::is_empty) {
        return Err(
            InvalidRequest::new(format!("stop_sequences[{i}]"), "must not be empty").into(),
        );
    }
    let (effort, response_format) = output_config(&mut body, &mut accepted)?;
    let thinking = thinking(&mut body, effort, &mut accepted)?;
    let (tools, server_tools) = tools(&mut body, &mut accepted)?;
    let (tool_choice, parallel) = tool_choice(&mut body, &tools, &server_tools)?;
    let user = metadata(&mut body)?;
    if body.value("context_management").is_some() {
        accepted.push("context_management".into());
    }
    if let Some(tier) = body.take::<String>("service_tier")? {
        if !matches!(tier.as_str(), "auto" | "standard_only") {
            return Err(InvalidRequest::new(
                "service_tier",
                "must be \"auto\" or \"standard_only\"",
            )
            .into());
        }
        accepted.push(format!("service_tier={tier}"));
    }
    body.refuse(
        "container",
        "is not supported by this backend: it runs no code execution containers",
    )?;
    body.refuse(
        "mcp_servers",
        "is not supported by this backend: its MCP servers are the operator's (MCP_SERVERS)",
    )?;
    let system = system(&mut body, limits, &mut accepted)?;
    let messages = body.require::<Vec<Value>>("messages")?;
    body.finish()?;
    let (messages, reasoning) = conversation(messages, limits, &mut accepted)?;
    // Anthropic's max_tokens holds the thinking budget; the core's answer length does not.
    let cap = u64::from(limits.max_output_tokens);
    let (answer_tokens, clamped_from) = match max_tokens {
        None => (None, None),
        Some(n) if n > cap => (Some(cap), Some(n)),
        Some(n) => (Some(n), None),
    };
    // Held to the deployment's bound, the budget is too: the thinking and the answer together stay within it, as
    // Anthropic's max_tokens holds both (Claude Code asks 32000 with a budget of 31999), and the answer keeps at
    // least a quarter of the bound (1024 at the least) so that a turn that thinks its fill still answers. A budget
    // that cannot keep Bedrock's least (1024) then leaves thinking off.
    let answer_room = (cap / 4).max(1024);
    let thinking = match (thinking, clamped_from) {
        (Some(Thinking::Budget(budget)), Some(_))
            if u64::from(budget) > cap.saturating_sub(answer_room) =>
        {
            if cap.saturating_sub(answer_room) >= u64::from(chat_core::MIN_THINKING_BUDGET) {
                let held = (cap - answer_room) as u32;
                accepted.push(format!("thinking.budget_tokens={budget} (held to {held})"));
                Some(Thinking::Budget(held))
            } else {
                accepted.push(format!("thinking.budget_tokens={budget} (thinking off)"));
                Some(Thinking::Off)
            }
        }
        (thinking, _) => thinking,
    };
    let max_output_tokens = answer_tokens.map(|n| {
        let budget = match thinking {
            Some(Thinking::Budget(b)) => u64::from(b),
            _ => 0,
        };
        n.saturating_sub(budget).max(1) as u32
    });
    if let Some(Thinking::Budget(budget)) = thinking
        && let Some(n) = max_tokens
        && clamped_from.is_none()
        && u64::from(budget) >= n
    {
        return Err(InvalidRequest::new(
            "thinking.budget_tokens",
            format!("must be less than max_tokens ({n})"),
        )
        .into());
    }
    // Each named once, in the order first met.
    let mut seen = std::collections::HashSet::new();
    accepted.retain(|name| seen.insert(name.clone()));
    Ok(MessagesRequest {
        turn: read::turn(messages),
        completion: Completion {
            system,
            model_id: Some(model.clone()),
            sampling: Sampling {
                temperature,
                top_p,
                top_k,
            },
            max_output_tokens,
            thinking,
            tools,
            tool_choice,
            parallel_tool_calls: parallel,
            stop_sequences,
            response_format,
            user,
            client_keeps_reasoning: true,
            reasoning,
        },
        model,
        stream,
        clamped_from,
        accepted,
    })
}

/// The API whose requests [`Obj`] reads here, as its refusals name it.
enum Messages {}

impl Api for Messages {
    const NAME: &'static str = "Anthropic's Messages API";
}

/// A JSON object of this API's requests, read field by field.
type Obj = object::Obj<Messages>;

impl Obj {
    /// `cache_control`, checked and taken: the backend places Bedrock's cache points itself (after the system
    /// prompt and before the newest message), so a client's breakpoint is accepted and named.
    fn cache_control(&mut self, accepted: &mut Vec<String>) -> Result<(), InvalidRequest> {
        if self.ephemeral(false)? {
            accepted.push("cache_control".into());
        }
        Ok(())
    }
}

/// `output_config`: `effort` (how hard an adaptive thinker thinks: `max` is thought at `high`, the most Bedrock's
/// efforts here hold, and named) and `format` (a JSON schema the answer keeps to).
fn output_config(
    body: &mut Obj,
    accepted: &mut Vec<String>,
) -> Result<(Option<ReasoningEffort>, ResponseFormat), InvalidRequest> {
    let Some(config) = body.value("output_config") else {
        return Ok((None, ResponseFormat::Text));
    };
    let mut config = Obj::new("output_config", config)?;
    let effort = match config.take::<String>("effort")? {
        None => None,
        Some(effort) => Some(match effort.as_str() {
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            "max" | "xhigh" => {
                accepted.push(format!("output_config.effort={effort} (thought at high)"));
                ReasoningEffort::High
            }
            _ => {
                return Err(InvalidRequest::new(
                    "output_config.effort",
                    "must be \"low\", \"medium\", \"high\" or \"max\"",
                ));
            }
        }),
    };
    let format = match config.value("format") {
        None => ResponseFormat::Text,
        Some(format) => {
            let mut format = Obj::new("output_config.format", format)?;
            let kind: String = format.require("type")?;
            if kind != "json_schema" {
                return Err(InvalidRequest::new(
                    format.at("type"),
                    "must be \"json_schema\"",
                ));
            }
            let schema = match format.value("schema") {
                Some(Value::Object(schema)) => Value::Object(schema),
                _ => {
                    return Err(InvalidRequest::new(
                        format.at("schema"),
                        "is required: a JSON schema object",
                    ));
                }
            };
            format.finish()?;
            ResponseFormat::JsonSchema {
                name: "answer".into(),
                description: None,
                schema,
                strict: true,
            }
        }
    };
    config.finish()?;
    Ok((effort, format))
}

/// `thinking`: `enabled` with `budget_tokens`, `disabled`, or `adaptive` (at `output_config.effort`, medium by
/// default). Absent, the model does not think, as Anthropic's API has it.
fn thinking(
    body: &mut Obj,
    effort: Option<ReasoningEffort>,
    accepted: &mut Vec<String>,
) -> Result<Option<Thinking>, InvalidRequest> {
    let Some(value) = body.value("thinking") else {
        if effort.is_some() {
            accepted.push("output_config.effort (without thinking)".into());
        }
        return Ok(Some(Thinking::Off));
    };
    let mut thinking = Obj::new("thinking", value)?;
    let kind: String = thinking.require("type")?;
    let parsed = match kind.as_str() {
        "enabled" => {
            let budget: u32 = thinking.require("budget_tokens")?;
            if budget < chat_core::MIN_THINKING_BUDGET {
                return Err(InvalidRequest::new(
                    "thinking.budget_tokens",
                    format!("must be at least {}", chat_core::MIN_THINKING_BUDGET),
                ));
            }
            Thinking::Budget(budget)
        }
        "disabled" => Thinking::Off,
        "adaptive" => Thinking::Effort(effort.unwrap_or(ReasoningEffort::Medium)),
        _ => {
            return Err(InvalidRequest::new(
                "thinking.type",
                "must be \"enabled\", \"disabled\" or \"adaptive\"",
            ));
        }
    };
    if let Some(display) = thinking.take::<String>("display")? {
        if !matches!(display.as_str(), "summarized" | "omitted") {
            return Err(InvalidRequest::new(
                "thinking.display",
                "must be \"summarized\" or \"omitted\"",
            ));
        }
        // The thinking is shown as Bedrock gives it: its signature covers its text, which goes back whole.
        if display == "omitted" {
            accepted.push("thinking.display=omitted (shown)".into());
        }
    }
    thinking.finish()?;
    Ok(Some(parsed))
}

/// A tool Anthropic defines, listed: its name, and where it is listed with its type (`tools[3] (web_search_…)`).
type ServerTool = (String, String);

/// The signed reasoning a client gave back, under the id of the first tool use of its assistant message.
type GivenReasoning = HashMap<String, Vec<ReasoningBlock>>;

/// `tools`: the client's tools (`custom`, or no `type`) with their `input_schema`; the names of Anthropic's server
/// tools listed (web search, code execution, …), which are refused only when the request asks for one to be used.
fn tools(
    body: &mut Obj,
    accepted: &mut Vec<String>,
) -> Result<(Vec<ToolSpec>, Vec<ServerTool>), InvalidRequest> {
    let Some(list) = body.take::<Vec<Value>>("tools")? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(list.len());
    let mut server = Vec::new();
    for (i, tool) in list.into_iter().enumerate() {
        let mut tool = Obj::new(format!("tools[{i}]"), tool)?;
        let kind = tool.take::<String>("type")?;
        let name: String = tool.require("name")?;
        if let Some(kind) = kind.filter(|k| k != "custom") {
            // A tool Anthropic defines (and runs, or defines for the client): not Bedrock's to offer here.
            server.push((name, format!("{} ({kind:?})", tool.path)));
            continue;
        }
        tool.check_new_tool(&name, &specs)?;
        let description = tool.take::<String>("description")?.unwrap_or_default();
        let input_schema = tool.schema("input_schema", None)?;
        tool.cache_control(accepted)?;
        if tool.take::<bool>("defer_loading")? == Some(true) {
            accepted.push("tools[].defer_loading (offered at once)".into());
        }
        // Honoured as Bedrock's strict tool use where the model has it (the schema given either way).
        let strict = tool.take::<bool>("strict")? == Some(true);
        if tool.value("input_examples").is_some() {
            accepted.push("tools[].input_examples".into());
        }
        if tool.value("allowed_callers").is_some() {
            accepted.push("tools[].allowed_callers".into());
        }
        tool.finish()?;
        specs.push(ToolSpec {
            name,
            description,
            input_schema,
            strict,
        });
    }
    if !server.is_empty() {
        accepted.push(format!(
            "{} (not offered: Anthropic's own tools)",
            server
                .iter()
                .map(|(_, at)| at.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((specs, server))
}

/// `tool_choice`: `auto`, `any`, `tool` (a named tool among `tools`) or `none`, with `disable_parallel_tool_use`.
fn tool_choice(
    body: &mut Obj,
    tools: &[ToolSpec],
    server: &[ServerTool],
) -> Result<(ToolChoice, bool), InvalidRequest> {
    let Some(value) = body.value("tool_choice") else {
        return Ok((ToolChoice::Auto, true));
    };
    let mut choice = Obj::new("tool_choice", value)?;
    let kind: String = choice.require("type")?;
    let parsed = match kind.as_str() {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "any" => ToolChoice::Any,
        "tool" => {
            let name: String = choice.require("name")?;
            if let Some((_, at)) = server.iter().find(|(n, _)| *n == name) {
                return Err(InvalidRequest::new(
                    "tool_choice.name",
                    format!(
                        "asks for {at}, a tool Anthropic runs itself: this backend runs none (only the client's tools)"
                    ),
                ));
            }
            if !tools.iter().any(|t| t.name == name) {
                return Err(InvalidRequest::new(
                    "tool_choice.name",
                    "names no tool of tools",
                ));
            }
            ToolChoice::Tool(name)
        }
        _ => {
            return Err(InvalidRequest::new(
                "tool_choice.type",
                "must be \"auto\", \"any\", \"tool\" or \"none\"",
            ));
        }
    };
    let one = choice
        .take::<bool>("disable_parallel_tool_use")?
        .unwrap_or(false);
    choice.finish()?;
    if tools.is_empty() && matches!(parsed, ToolChoice::Any) {
        return Err(InvalidRequest::new(
            "tool_choice",
            "asks for a tool, but the request lists no tools of the client's",
        ));
    }
    Ok((parsed, !one))
}

/// `metadata`: `user_id`, for the turn's trace only.
fn metadata(body: &mut Obj) -> Result<Option<String>, InvalidRequest> {
    let Some(value) = body.value("metadata") else {
        return Ok(None);
    };
    let mut metadata = Obj::new("metadata", value)?;
    let user = metadata.take::<String>("user_id")?;
    metadata.finish()?;
    Ok(user.map(|u| u.chars().take(MAX_USER_CHARS).collect()))
}

/// `system`: a string, or text blocks (each a system block of the completion, in order).
fn system(
    body: &mut Obj,
    limits: &RequestLimits,
    accepted: &mut Vec<String>,
) -> Result<Vec<String>, InvalidRequest> {
    let blocks = match body.value("system") {
        None => return Ok(Vec::new()),
        Some(Value::String(text)) => vec![text],
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (i, block) in blocks.into_iter().enumerate() {
                let mut block = Obj::new(format!("system[{i}]"), block)?;
                let kind: String = block.require("type")?;
                if kind != "text" {
                    return Err(InvalidRequest::new(block.at("type"), "must be \"text\""));
                }
                let text: String = block.require("text")?;
                block.cache_control(accepted)?;
                block.refuse("citations", "is not supported by this backend in system")?;
                block.finish()?;
                texts.push(text);
            }
            texts
        }
        Some(other) => {
            return Err(InvalidRequest::new(
                "system",
                format!("expected a string or text blocks, not {}", kind_of(&other)),
            ));
        }
    };
    for (i, text) in blocks.iter().enumerate() {
        InvalidRequest::check_length(&format!("system[{i}]"), text, limits.max_message_chars)?;
    }
    Ok(blocks
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .collect())
}

/// A message's own `output_config` (Claude Code's per-turn control, on the system message it sends): its `effort`
/// checked, and accepted without effect (the request's `output_config` decides the answer's effort, and Claude
/// Code sends the same there).
fn per_turn_output_config(
    message: &mut Obj,
    accepted: &mut Vec<String>,
) -> Result<(), InvalidRequest> {
    let Some(config) = message.value("output_config") else {
        return Ok(());
    };
    let mut config = Obj::new(message.at("output_config"), config)?;
    if let Some(effort) = config.take::<String>("effort")?
        && !matches!(effort.as_str(), "low" | "medium" | "high" | "max" | "xhigh")
    {
        return Err(InvalidRequest::new(
            config.at("effort"),
            "must be \"low\", \"medium\", \"high\", \"max\" or \"xhigh\"",
        ));
    }
    config.finish()?;
    let name = "messages[].output_config (the request's output_config holds)";
    if !accepted.iter().any(|a| a == name) {
        accepted.push(name.into());
    }
    Ok(())
}

/// A `system` message's text: its content a string or text blocks (with `cache_control`, accepted), joined.
fn system_message(
    path: &str,
    content: Vec<Value>,
    accepted: &mut Vec<String>,
) -> Result<String, InvalidRequest> {
    let mut texts = Vec::with_capacity(content.len());
    for (j, block) in content.into_iter().enumerate() {
        let mut block = Obj::new(format!("{path}[{j}]"), block)?;
        let kind: String = block.require("type")?;
        if kind != "text" {
            return Err(InvalidRequest::new(
                block.at("type"),
                "must be \"text\" in a system message",
            ));
        }
        texts.push(block.require::<String>("text")?);
        block.cache_control(accepted)?;
        block.finish()?;
    }
    Ok(texts.join("\n\n"))
}

/// The messages as the core's conversation, and the signed reasoning the client gave back, under the id of the
/// first tool use of the assistant message it came with.
fn conversation(
    wire: Vec<Value>,
    limits: &RequestLimits,
    accepted: &mut Vec<String>,
) -> Result<(Vec<Message>, GivenReasoning), ChatError> {
    read::message_count(wire.len(), limits)?;
    let mut messages: Vec<Message> = Vec::new();
    let mut reasoning = HashMap::new();
    // The tool uses of the assistant message just before, waiting for their results.
    let mut pending: Vec<Pending> = Vec::new();
    // The texts of `system` messages waiting for the results of the tool uses before them (a tool use and its
    // result must stay next to each other).
    let mut held: Vec<String> = Vec::new();
    let mut files = 0usize;
    for (i, message) in wire.into_iter().enumerate() {
        let mut message = Obj::new(format!("messages[{i}]"), message)?;
        let role: String = message.require("role")?;
        let content_path = message.at("content");
        let content = match message.value("content") {
            Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
            Some(Value::Array(blocks)) => blocks,
            Some(other) => {
                return Err(InvalidRequest::new(
                    content_path,
                    format!(
                        "expected a string or content blocks, not {}",
                        kind_of(&other)
                    ),
                )
                .into());
            }
            None => return Err(InvalidRequest::new(content_path, "is required").into()),
        };
        per_turn_output_config(&mut message, accepted)?;
        message.finish()?;
        match role.as_str() {
            "user" => {
                let user = user_blocks(&content_path, content, limits, &mut files, accepted)?;
                for (path, id, output, status) in user.results {
                    let refusal =
                        "answers no unanswered tool_use of the assistant message just before";
                    let at = (format!("{path}.tool_use_id"), refusal);
                    let (_, exchange) =
                        answer_waiting(&mut pending, &mut messages, &id, output, at)?;
                    if let Some(exchange) = exchange {
                        exchange.status = status;
                    }
                }
                unanswered(&pending, UNANSWERED)?;
                pending.clear();
                let mut texts = user.texts;
                texts.append(&mut held);
                let text = texts.join("\n\n");
                InvalidRequest::check_length(&content_path, &text, limits.max_message_chars)?;
                if !text.trim().is_empty() || !user.files.is_empty() {
                    let mut parts = vec![ContentPart::Text(text)];
                    parts.extend(user.files.into_iter().map(ContentPart::File));
                    messages.push(Message {
                        role: Role::User,
                        content: parts,
                    });
                }
            }
            "assistant" => {
                unanswered(&pending, UNANSWERED)?;
                pending.clear();
                let mut texts = Vec::new();
                let mut parts = Vec::new();
                let mut blocks = Vec::new();
                for (j, block) in content.into_iter().enumerate() {
                    let mut block = Obj::new(format!("{content_path}[{j}]"), block)?;
                    let kind: String = block.require("type")?;
                    match kind.as_str() {
                        "text" => {
                            texts.push(block.require::<String>("text")?);
                            block.value("citations");
                        }
                        "thinking" => {
                            let text: String = block.require("thinking")?;
                            let signature: String = block.require("signature")?;
                            blocks.push(ReasoningBlock::signed(text, signature));
                        }
                        "redacted_thinking" => {
                            let data: String = block.require("data")?;
                            let bytes = base64::engine::general_purpose::STANDARD
                                .decode(data.as_bytes())
                                .map_err(|_| {
                                    InvalidRequest::new(
                                        block.at("data"),
                                        "must be the data this backend sent, unchanged",
                                    )
                                })?;
                            blocks.push(ReasoningBlock::redacted(bytes));
                        }
                        "tool_use" => {
                            let id = block.call_id("id")?;
                            if pending.iter().any(|p| p.id == id) {
                                return Err(InvalidRequest::new(
                                    block.at("id"),
                                    "repeats the id of another tool_use of this message",
                                )
                                .into());
                            }
                            let name: String = block.require("name")?;
                            let input = match block.value("input") {
                                None => Value::Object(Map::new()),
                                Some(Value::Object(input)) => Value::Object(input),
                                Some(other) => {
                                    return Err(InvalidRequest::new(
                                        block.at("input"),
                                        format!("expected an object, not {}", kind_of(&other)),
                                    )
                                    .into());
                                }
                            };
                            pending.push(Pending {
                                path: block.path.clone(),
                                id: id.clone(),
                                name: name.clone(),
                                at: (messages.len(), parts.len()),
                                answered: false,
                            });
                            parts.push(ContentPart::Tool(read::call(id, name, input)));
                        }
                        "server_tool_use"
                        | "web_search_tool_result"
                        | "code_execution_tool_result" => {
                            return Err(InvalidRequest::new(
                                block.at("type"),
                                "is a server tool's block: this backend runs none of Anthropic's tools",
                            )
                            .into());
                        }
                        _ => {
                            return Err(InvalidRequest::new(
                                block.at("type"),
                                "must be \"text\", \"thinking\", \"redacted_thinking\" or \"tool_use\" in an assistant message",
                            )
                            .into());
                        }
                    }
                    block.cache_control(accepted)?;
                    block.finish()?;
                }
                let text = texts.join("\n\n");
                InvalidRequest::check_length(&content_path, &text, limits.max_message_chars)?;
                if let Some(first) = pending.first()
                    && !blocks.is_empty()
                {
                    reasoning.insert(first.id.clone(), blocks);
                }
                if !text.trim().is_empty() {
                    parts.push(ContentPart::Text(text));
                }
                if !parts.is_empty() {
                    messages.push(Message {
                        role: Role::Assistant,
                        content: parts,
                    });
                }
            }
            // The client's instructions at their place in the conversation (Claude Code's environment, after the
            // question): Bedrock's conversations hold no system turn, so its text is the user's turn's, where it is
            // (the core joins it with the user message beside it), or after the results of the tool uses it follows.
            "system" => {
                let text = system_message(&content_path, content, accepted)?;
                InvalidRequest::check_length(&content_path, &text, limits.max_message_chars)?;
                if text.trim().is_empty() {
                    continue;
                }
                if pending.is_empty() {
                    messages.push(Message {
                        role: Role::User,
                        content: vec![ContentPart::Text(text)],
                    });
                } else {
                    held.push(text);
                }
            }
            _ => {
                return Err(InvalidRequest::new(
                    format!("messages[{i}].role"),
                    "must be \"user\", \"assistant\" or \"system\"",
                )
                .into());
            }
        }
    }
    unanswered(&pending, UNANSWERED)?;
    if !messages.iter().any(|m| m.role == Role::User) {
        return Err(InvalidRequest::new("messages", "must hold a user message").into());
    }
    limits.files.check_messages(&messages)?;
    Ok((messages, reasoning))
}

/// Why a tool use no `tool_result` answered is refused.
const UNANSWERED: &str = "has no tool_result answering it in the user message right after";

/// What a user message holds: its texts, its files (images and documents, a tool result's images too) and its
/// tool results (the block's path, the call's id, the result's text, whether it failed).
struct UserBlocks {
    texts: Vec<String>,
    files: Vec<chat_core::Attachment>,
    results: Vec<(String, String, String, ToolStatus)>,
}

fn user_blocks(
    path: &str,
    content: Vec<Value>,
    limits: &RequestLimits,
    files: &mut usize,
    accepted: &mut Vec<String>,
) -> Result<UserBlocks, ChatError> {
    let mut user = UserBlocks {
        texts: Vec::new(),
        files: Vec::new(),
        results: Vec::new(),
    };
    for (j, block) in content.into_iter().enumerate() {
        let mut block = Obj::new(format!("{path}[{j}]"), block)?;
        let kind: String = block.require("type")?;
        match kind.as_str() {
            "text" => {
                user.texts.push(block.require::<String>("text")?);
                block.value("citations");
            }
            "image" => {
                let source = block.require::<Value>("source")?;
                *files += 1;
                user.files.push(source_file(
                    &block.at("source"),
                    source,
                    Some(format!("image-{}", *files)),
                    limits,
                )?);
            }
            "document" => {
                let title = block.take::<String>("title")?;
                let context = block.take::<String>("context")?;
                if block.value("citations").is_some() {
                    accepted.push("document.citations".into());
                }
                let at = block.at("source");
                let mut source = Obj::new(at.clone(), block.require::<Value>("source")?)?;
                let kind: String = source.require("type")?;
                match kind.as_str() {
                    "text" => {
                        let data: String = source.require("data")?;
                        source.take::<String>("media_type")?;
                        source.finish()?;
                        let mut text = String::new();
                        if let Some(title) = &title {
                            text.push_str(&format!("Document: {title}\n"));
                        }
                        if let Some(context) = &context {
                            text.push_str(&format!("{context}\n"));
                        }
                        text.push_str(&data);
                        user.texts.push(text);
                    }
                    "base64" => {
                        source.map.insert("type".into(), Value::from("base64"));
                        *files += 1;
                        let name = title
                            .clone()
                            .unwrap_or_else(|| format!("document-{}", *files));
                        user.files.push(source_file(
                            &at,
                            Value::Object(source.map),
                            Some(name),
                            limits,
                        )?);
                        if let Some(context) = context {
                            user.texts.push(context);
                        }
                    }
                    "content" => {
                        let blocks: Vec<Value> = source.require("content")?;
                        source.finish()?;
                        for (k, part) in blocks.into_iter().enumerate() {
                            let mut part = Obj::new(format!("{at}.content[{k}]"), part)?;
                            let kind: String = part.require("type")?;
                            if kind != "text" {
                                return Err(InvalidRequest::new(
                                    part.at("type"),
                                    "must be \"text\"",
                                )
                                .into());
                            }
                            user.texts.push(part.require::<String>("text")?);
                            part.cache_control(accepted)?;
                            part.finish()?;
                        }
                    }
                    "url" | "file" => {
                        return Err(InvalidRequest::new(
                            source.at("type"),
                            "is not supported by this backend (it fetches nothing a client names): send the document as base64 or text",
                        )
                        .into());
                    }
                    _ => {
                        return Err(InvalidRequest::new(
                            source.at("type"),
                            "must be \"base64\", \"text\" or \"content\"",
                        )
                        .into());
                    }
                }
            }
            "tool_result" => {
                let id: String = block.require("tool_use_id")?;
                let failed = block.take::<bool>("is_error")?.unwrap_or(false);
                let mut texts = Vec::new();
                match block.value("content") {
                    None => {}
                    Some(Value::String(text)) => texts.push(text),
                    Some(Value::Array(parts)) => {
                        for (k, part) in parts.into_iter().enumerate() {
                            let mut part = Obj::new(format!("{}.content[{k}]", block.path), part)?;
                            let kind: String = part.require("type")?;
                            match kind.as_str() {
                                "text" => {
                                    texts.push(part.require::<String>("text")?);
                                    part.value("citations");
                                }
                                // The model reads a result's image beside the results, in the same user message.
                                "image" => {
                                    let source = part.require::<Value>("source")?;
                                    *files += 1;
                                    user.files.push(source_file(
                                        &part.at("source"),
                                        source,
                                        Some(format!("image-{}", *files)),
                                        limits,
                                    )?);
                                }
                                _ => {
                                    return Err(InvalidRequest::new(
                                        part.at("type"),
                                        "must be \"text\" or \"image\"",
                                    )
                                    .into());
                                }
                            }
                            part.cache_control(accepted)?;
                            part.finish()?;
                        }
                    }
                    Some(other) => {
                        return Err(InvalidRequest::new(
                            block.at("content"),
                            format!("expected a string or blocks, not {}", kind_of(&other)),
                        )
                        .into());
                    }
                }
                let output = texts.join("\n\n");
                InvalidRequest::check_length(
                    &block.at("content"),
                    &output,
                    limits.max_message_chars,
                )?;
                let status = if failed {
                    ToolStatus::Error
                } else {
                    ToolStatus::Success
                };
                user.results.push((block.path.clone(), id, output, status));
            }
            "search_result" | "container_upload" => {
                return Err(InvalidRequest::new(
                    block.at("type"),
                    "is not supported by this backend",
                )
                .into());
            }
            _ => {
                return Err(InvalidRequest::new(
                    block.at("type"),
                    "must be \"text\", \"image\", \"document\" or \"tool_result\" in a user message",
                )
                .into());
            }
        }
        block.cache_control(accepted)?;
        block.finish()?;
    }
    Ok(user)
}

/// An image's or a document's `source`: base64 data and its media type (the backend fetches no URL).
fn source_file(
    at: &str,
    source: Value,
    name: Option<String>,
    limits: &RequestLimits,
) -> Result<chat_core::Attachment, ChatError> {
    let mut source = Obj::new(at, source)?;
    let kind: String = source.require("type")?;
    if kind != "base64" {
        return Err(InvalidRequest::new(
            source.at("type"),
            "must be \"base64\": this backend fetches nothing a client names",
        )
        .into());
    }
    let media_type: String = source.require("media_type")?;
    let data: String = source.require("data")?;
    source.finish()?;
    let bytes = base64(&format!("{at}.data"), &data)?;
    take(at, name, Some(&media_type), Bytes::from(bytes), limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<MessagesRequest, ChatError> {
        let limits = RequestLimits {
            max_output_tokens: 8192,
            ..RequestLimits::default()
        };
        parse_messages_request(body.to_string().as_bytes(), &limits, MessagesRoute::Create)
    }

    fn refused(body: Value) -> String {
        match parse(body) {
            Err(ChatError::Invalid(e)) => e.path,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_system_message_is_the_users_turn_where_it_stands() {
        // Claude Code's default models: its environment as a system message after the question.
        let request = parse(json!({"model": "m", "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "system", "content": [
                {"type": "text", "text": "env: linux", "cache_control": {"type": "ephemeral"}}
            ], "output_config": {"effort": "medium"}}
        ]}))
        .unwrap();
        assert!(
            request
                .accepted
                .iter()
                .any(|a| a.starts_with("messages[].output_config")),
            "{:?}",
            request.accepted
        );
        let texts: Vec<(Role, String)> = request
            .turn
            .messages
            .iter()
            .map(|m| (m.role, m.text()))
            .collect();
        assert_eq!(
            texts,
            [(Role::User, "q".into()), (Role::User, "env: linux".into())]
        );
        // Between a tool use and its result, it waits for the result: the two stay next to each other.
        let request = parse(json!({"model": "m", "max_tokens": 100,
            "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "system", "content": "mind the time"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]}
            ]}))
        .unwrap();
        let roles: Vec<Role> = request.turn.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        assert_eq!(request.turn.messages[2].text(), "mind the time");
        // Only text: anything else in a system message is refused by its path.
        let refused = parse(json!({"model": "m", "max_tokens": 100, "messages": [
            {"role": "user", "content": "q"},
            {"role": "system", "content": [{"type": "image", "source": {}}]}
        ]}))
        .unwrap_err();
        assert!(
            refused.to_string().contains("messages[1].content[0].type"),
            "{refused}"
        );
    }

    #[test]
    fn thinking_goes_back_under_the_first_tool_use_and_results_join_their_calls() {
        let redacted = base64::engine::general_purpose::STANDARD.encode(b"opaque");
        let request = parse(json!({"model": "m", "max_tokens": 100_000,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": redacted},
                    {"type": "tool_use", "id": "a", "name": "t", "input": {"x": 1}},
                    {"type": "tool_use", "id": "b", "name": "t", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "b", "content": "failed", "is_error": true},
                    {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "ok"}]}
                ]}
            ]}))
        .unwrap();
        assert_eq!(
            request.completion.reasoning["a"],
            vec![
                ReasoningBlock::signed("hmm", "sig"),
                ReasoningBlock::redacted(b"opaque".to_vec())
            ]
        );
        assert!(request.completion.client_keeps_reasoning);
        let ContentPart::Tool(b) = &request.turn.messages[1].content[1] else {
            panic!()
        };
        assert_eq!((b.output.as_str(), b.status), ("failed", ToolStatus::Error));
        // The results alone make no user message: the model reads them with their calls.
        assert_eq!(request.turn.messages.len(), 2);
        // max_tokens past the deployment's is clamped, the thinking budget within it.
        assert_eq!(request.clamped_from, Some(100_000));
        assert_eq!(request.completion.max_output_tokens, Some(8192 - 2048));
        assert_eq!(request.completion.thinking, Some(Thinking::Budget(2048)));
    }

    #[test]
    fn a_budget_past_the_deployments_bound_is_held_with_the_answer_within_it() {
        // Claude Code: max_tokens 32000 and a budget of 31999, against a bound of 8192.
        let ask = |max_tokens: u64, budget: u64| {
            parse(json!({"model": "m", "max_tokens": max_tokens,
                "thinking": {"type": "enabled", "budget_tokens": budget},
                "messages": [{"role": "user", "content": "q"}]}))
            .unwrap()
        };
        let request = ask(32_000, 31_999);
        assert_eq!(request.clamped_from, Some(32_000));
        // The answer keeps a quarter of the bound: 8192 / 4.
        assert_eq!(request.completion.thinking, Some(Thinking::Budget(6144)));
        assert_eq!(request.completion.max_output_tokens, Some(2048));
        assert!(
            request
                .accepted
                .contains(&"thinking.budget_tokens=31999 (held to 6144)".to_string()),
            "{:?}",
            request.accepted
        );
        // A budget within the bound is the client's.
        let request = ask(32_000, 4_000);
        assert_eq!(request.completion.thinking, Some(Thinking::Budget(4_000)));
        assert_eq!(request.completion.max_output_tokens, Some(8192 - 4_000));
    }

    #[test]
    fn what_is_not_taken_is_refused_by_name_and_what_claude_code_sends_is_named() {
        let ask = |extra: Value| {
            let mut body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "q"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        assert_eq!(refused(ask(json!({"nope": 1}))), "nope");
        assert_eq!(refused(ask(json!({"temperature": 2}))), "temperature");
        assert_eq!(
            refused(ask(
                json!({"thinking": {"type": "enabled", "budget_tokens": 100}})
            )),
            "thinking.budget_tokens"
        );
        assert_eq!(
            refused(ask(json!({"messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x"}}]}]}))),
            "messages[0].content[0].source.type"
        );
        assert_eq!(
            refused(ask(json!({"messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "user", "content": "no result"}]}))),
            "messages[1].content[0]"
        );
        let request = parse(ask(json!({
            "thinking": {"type": "adaptive", "display": "omitted"},
            "output_config": {"effort": "max"},
            "context_management": {"edits": []},
            "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}},
                       {"type": "text", "text": "t", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "tools": [{"name": "t", "input_schema": {"type": "object"}, "defer_loading": true}]
        })))
        .unwrap();
        assert_eq!(
            request.completion.thinking,
            Some(Thinking::Effort(ReasoningEffort::High))
        );
        assert_eq!(request.completion.system, ["s", "t"]);
        assert_eq!(
            request.accepted,
            [
                "output_config.effort=max (thought at high)",
                "thinking.display=omitted (shown)",
                "tools[].defer_loading (offered at once)",
                "context_management",
                "cache_control"
            ]
        );
        // Without thinking, the model does not think.
        assert_eq!(
            parse(ask(json!({}))).unwrap().completion.thinking,
            Some(Thinking::Off)
        );
    }
}
