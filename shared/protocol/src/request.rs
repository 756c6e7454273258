//! Reading a chat request body: which dialect it speaks, and whether it is acceptable.

use serde::de::DeserializeOwned;
use serde_json::Value;

use chat_core::{ChatError, InvalidRequest, Overrides, RequestLimits, TurnInput};

use crate::error::{at_original_message, from_path_error, not_an_object, not_json, utf8};
use crate::files::{Files, from_json, split_json};
use crate::{
    ChatInput, Dialect, Endpoint, Field, Message, RequestContext, Role, SessionSpelling,
    SessionState, WireMessage, chat_ui, v2024_01_28, v2024_05_29,
};

/// Parses and validates a chat request body sent to `endpoint`, its messages' `files` included (see
/// [`crate::files`]). A fault is a 400 naming the field, a file larger than its kind may be a 413.
pub fn parse_chat_request(
    body: &[u8],
    endpoint: Endpoint,
    limits: &RequestLimits,
) -> Result<ChatInput, ChatError> {
    parse_with_files(body, endpoint, limits, Files::default())
}

/// Parses a chat request body whose messages may carry files: `parts` sent beside it (as multipart parts), or
/// `files` inside it; a message's files come one way or the other. Files are held to the request's limits (how
/// many, on which messages) as well as each to its own.
pub(crate) fn parse_with_files(
    body: &[u8],
    endpoint: Endpoint,
    limits: &RequestLimits,
    mut parts: Files,
) -> Result<ChatInput, ChatError> {
    let (value, sent) = split_json(body)?;
    for (i, sent) in from_json(sent, endpoint, limits)? {
        if parts.contains_key(&i) {
            return Err(InvalidRequest::new(
                format!("messages[{i}].files"),
                "this message's files came both as multipart parts and in the JSON; send each file once",
            )
            .into());
        }
        parts.insert(i, sent);
    }
    message_fields(&value)?;
    let input = typed_request(value, endpoint, limits, parts)?;
    limits.files.check_messages(&input.turn.messages)?;
    Ok(input)
}

/// The fields a message may carry besides `role`, `content` and `files`, which are not read but must not be
/// mistaken for read (on every route: one schema for a message): `context` (the official client's
/// `AIChatMessage.context`) is the application's own,
/// kept like a request context's unknown members, so it must be an object; `function_call` and `tool_calls`
/// (the protocol's examples of an answer's message) are taken only as `null` (`tool_calls` also as `[]`), since
/// this backend sends no tool calls and replays none. Messages that are not objects are left for the typed parse to refuse.
fn message_fields(body: &Value) -> Result<(), InvalidRequest> {
    let Some(Value::Array(messages)) = body.get("messages") else {
        return Ok(());
    };
    for (i, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            continue;
        };
        match message.get("context") {
            None | Some(Value::Null | Value::Object(_)) => {}
            Some(_) => {
                return Err(InvalidRequest::new(
                    format!("messages[{i}].context"),
                    "expected an object",
                ));
            }
        }
        for calls in ["function_call", "tool_calls"] {
            match message.get(calls) {
                None | Some(Value::Null) => {}
                Some(Value::Array(list)) if calls == "tool_calls" && list.is_empty() => {}
                Some(_) => {
                    return Err(InvalidRequest::new(
                        format!("messages[{i}].{calls}"),
                        "this backend takes no tool calls in messages: send null or leave it out",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The request as its dialect's types read it, with each message's files.
fn typed_request(
    mut value: Value,
    endpoint: Endpoint,
    limits: &RequestLimits,
    files: Files,
) -> Result<ChatInput, InvalidRequest> {
    match endpoint {
        Endpoint::ChatUi => {
            let notes = chat_ui::mark_ui_notes(&mut value);
            let r: chat_ui::ChatRequest = typed(value)?;
            let (messages, kept) = chat_ui::drop_ui_notes(r.messages, &notes);
            let session = session_state(r.session_state, false)?;
            build(Dialect::ChatUi, messages, r.context, session, limits, files)
                .map_err(|e| at_original_message(e, &kept))
        }
        Endpoint::Protocol => match value.get("stream") {
            Some(Value::Bool(stream)) => {
                let stream = *stream;
                let r: v2024_01_28::ChatRequest = typed(value)?;
                let session = session_state(r.session_state, true)?;
                build(
                    Dialect::V20240128 { stream },
                    r.messages,
                    r.context,
                    session,
                    limits,
                    files,
                )
            }
            None | Some(Value::Null) => {
                let r: v2024_05_29::ChatRequest = typed(value)?;
                let session = session_state(r.session_state, false)?;
                build(
                    Dialect::V20240529,
                    r.messages,
                    r.context,
                    session,
                    limits,
                    files,
                )
            }
            Some(_) => Err(InvalidRequest::new("stream", "expected a boolean")),
        },
    }
}

/// Parses a `PUT /chat-history/{id}` body. Every message, the Chat UI's notes included (see
/// [`chat_ui::mark_ui_notes`]), must be well-formed, its content at most `limits.max_message_chars` long and every
/// other field it stores within its bound ([`RequestLimits::MAX_MESSAGE_ID_CHARS`] and the others); the notes are
/// not stored. A chat saved holds at most `limits.max_messages` messages besides its notes, as a chat request does:
/// a chat saved is one the next turn may send whole.
pub fn parse_replace_request(
    body: &[u8],
    limits: &RequestLimits,
) -> Result<chat_ui::ReplaceMessagesRequest, InvalidRequest> {
    let mut value = json_object(body)?;
    let notes = chat_ui::mark_ui_notes(&mut value);
    let mut request: chat_ui::ReplaceMessagesRequest = typed(value)?;
    let kept = request.messages.len() - notes.len();
    if kept > limits.max_messages {
        return Err(InvalidRequest::new(
            "messages",
            format!(
                "holds {kept} messages, more than the limit of {}",
                limits.max_messages
            ),
        ));
    }
    let max_message_chars = limits.max_message_chars;
    for (i, m) in request.messages.iter().enumerate() {
        let check = |field: &str, text: &str, limit: usize| {
            InvalidRequest::check_length(&format!("messages[{i}].{field}"), text, limit)
        };
        check("id", &m.id, RequestLimits::MAX_MESSAGE_ID_CHARS)?;
        check("content", &m.content, max_message_chars)?;
        check(
            "timestamp",
            &m.timestamp,
            RequestLimits::MAX_TIMESTAMP_CHARS,
        )?;
        if let Some(agent) = &m.agent_identifier {
            check("agentIdentifier", agent, RequestLimits::MAX_AGENT_CHARS)?;
        }
        if let Some(agent) = &m.agent_name {
            check("agentName", agent, RequestLimits::MAX_AGENT_CHARS)?;
        }
    }
    request.messages = chat_ui::drop_ui_notes(request.messages, &notes).0;
    Ok(request)
}

/// Parses a JSON body into `T`, naming the field and the reason when it does not fit.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, InvalidRequest> {
    typed(json_object(body)?)
}

/// The body as a JSON object, or why it is not one.
fn json_object(body: &[u8]) -> Result<Value, InvalidRequest> {
    utf8(body)?;
    let value: Value = serde_json::from_slice(body).map_err(not_json)?;
    if !value.is_object() {
        return Err(not_an_object());
    }
    Ok(value)
}

fn typed<T: DeserializeOwned>(value: Value) -> Result<T, InvalidRequest> {
    serde_path_to_error::deserialize(value).map_err(from_path_error)
}

/// The session state and the spelling to answer in. A request's spelling wins; without one, the dialect's own.
fn session_state(
    sent: SessionState,
    snake_by_default: bool,
) -> Result<(Option<Value>, SessionSpelling), InvalidRequest> {
    match (sent.camel, sent.snake) {
        (Field::Missing, Field::Missing) => Ok((
            None,
            if snake_by_default {
                SessionSpelling::Snake
            } else {
                SessionSpelling::Camel
            },
        )),
        (camel, Field::Missing) => {
            bounded("sessionState", camel.into_option(), SessionSpelling::Camel)
        }
        (Field::Missing, snake) => {
            bounded("session_state", snake.into_option(), SessionSpelling::Snake)
        }
        _ => Err(InvalidRequest::new(
            "session_state",
            "send sessionState or session_state, not both",
        )),
    }
}

/// A session state sent as a string is used to find a chat, so it is held to
/// [`RequestLimits::MAX_SESSION_STATE_CHARS`]; what else it may be is the core's to judge.
fn bounded(
    field: &str,
    state: Option<Value>,
    spelling: SessionSpelling,
) -> Result<(Option<Value>, SessionSpelling), InvalidRequest> {
    if let Some(Value::String(text)) = &state {
        InvalidRequest::check_length(field, text, RequestLimits::MAX_SESSION_STATE_CHARS)?;
    }
    Ok((state, spelling))
}

fn build(
    dialect: Dialect,
    wire_messages: Vec<WireMessage>,
    context: Field<RequestContext>,
    (session_state, spelling): (Option<Value>, SessionSpelling),
    limits: &RequestLimits,
    files: Files,
) -> Result<ChatInput, InvalidRequest> {
    let messages = messages(wire_messages, limits, files)?;
    let overrides = overrides(context, limits)?;
    Ok(ChatInput {
        dialect,
        spelling,
        turn: TurnInput {
            messages,
            overrides,
            session_state,
            session_field: spelling.field(),
            store_new_chat: dialect != Dialect::ChatUi,
        },
    })
}

/// The messages, each with its files. A message that carries files may have no text.
fn messages(
    wire: Vec<WireMessage>,
    limits: &RequestLimits,
    mut files: Files,
) -> Result<Vec<Message>, InvalidRequest> {
    crate::read::message_count(wire.len(), limits)?;
    for (i, m) in wire.iter().enumerate() {
        let path = format!("messages[{i}].content");
        if m.content.trim().is_empty() && !files.contains_key(&i) {
            return Err(InvalidRequest::new(path, "must not be empty"));
        }
        InvalidRequest::check_length(&path, &m.content, limits.max_message_chars)?;
    }
    if wire[0].role != Role::User {
        return Err(InvalidRequest::new(
            "messages[0].role",
            "the conversation must start with a user message",
        ));
    }
    let last = wire.len() - 1;
    if wire[last].role != Role::User {
        return Err(InvalidRequest::new(
            format!("messages[{last}].role"),
            "the last message must come from the user",
        ));
    }
    if let Some((&i, _)) = files.range(wire.len()..).next() {
        return Err(InvalidRequest::new(
            format!("messages[{i}].files[0]"),
            format!(
                "there is no messages[{i}]: the request has {} messages",
                wire.len()
            ),
        ));
    }
    Ok(wire
        .into_iter()
        .enumerate()
        .map(|(i, m)| Message::with_files(m.role, m.content, files.remove(&i).unwrap_or_default()))
        .collect())
}

/// The most names of unknown overrides a prompt thought lists.
const MAX_NOT_USED: usize = 20;

fn overrides(
    context: Field<RequestContext>,
    limits: &RequestLimits,
) -> Result<Overrides, InvalidRequest> {
    let Some(wire) = context
        .into_option()
        .and_then(|c| c.overrides.into_option())
    else {
        return Ok(Overrides::default());
    };
    let unit = |name: &str, v: Option<f64>| match v {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(InvalidRequest::new(
            format!("context.overrides.{name}"),
            "must be between 0 and 1",
        )),
        _ => Ok(v),
    };
    let temperature = unit("temperature", wire.temperature.into_option())?;
    let top_p = unit("top_p", wire.top_p.into_option())?;
    // A count of at least 1 and at most `max`.
    let count = |name: &str, v: Option<u64>, max: u64| match v {
        Some(n) if !(1..=max).contains(&n) => Err(InvalidRequest::new(
            format!("context.overrides.{name}"),
            format!("must be between 1 and {max}"),
        )),
        _ => Ok(v),
    };
    let max_output_tokens = u64::from(limits.max_output_tokens);
    let max_tokens = count(
        "max_tokens",
        wire.max_tokens.into_option(),
        max_output_tokens,
    )?
    .map(|n| n as u32);
    let top = count("top", wire.top.into_option(), limits.max_top as u64)?.map(|n| n as usize);
    let retrieval_mode = choice("retrieval_mode", wire.retrieval_mode.into_option())?;
    let minimum_search_score = unit(
        "minimum_search_score",
        wire.minimum_search_score.into_option(),
    )?;
    fn choice<T: std::str::FromStr<Err = String>>(
        name: &str,
        value: Option<String>,
    ) -> Result<Option<T>, InvalidRequest> {
        value
            .map(|v| {
                v.parse().map_err(|reason| {
                    InvalidRequest::new(format!("context.overrides.{name}"), reason)
                })
            })
            .transpose()
    }
    // Other backends' settings change nothing here; their names (a bounded few, each cut short) are said in the
    // prompt thought rather than dropped in silence.
    let not_used: Vec<String> = wire
        .extra
        .keys()
        .take(MAX_NOT_USED)
        .map(|name| name.chars().take(64).collect())
        .collect();
    let reasoning_effort = choice("reasoning_effort", wire.reasoning_effort.into_option())?;
    let latency = choice("latency", wire.latency.into_option())?;
    let service_tier = choice("service_tier", wire.service_tier.into_option())?;
    let overrides = Overrides {
        temperature,
        top_p,
        max_tokens,
        suggest_followup_questions: wire.suggest_followup_questions.into_option() == Some(true),
        prompt_template: wire
            .prompt_template
            .into_option()
            .filter(|t| !t.trim().is_empty()),
        top,
        retrieval_mode,
        minimum_search_score,
        // The reference front end sends an empty category for "exclude none".
        exclude_category: wire
            .exclude_category
            .into_option()
            .filter(|c| !c.trim().is_empty()),
        use_oid_security_filter: wire.use_oid_security_filter.into_option() == Some(true),
        use_groups_security_filter: wire.use_groups_security_filter.into_option() == Some(true),
        reasoning_effort,
        latency,
        service_tier,
        not_used,
    };
    // The operator's list decides what a request may change; one it does not allow is refused, not ignored, so
    // the client learns its setting was not applied.
    if let Some(name) = overrides
        .used()
        .into_iter()
        .find(|name| !limits.allowed_overrides.allows(name))
    {
        let allowed: Vec<&str> = limits.allowed_overrides.names().collect();
        return Err(InvalidRequest::new(
            format!("context.overrides.{name}"),
            format!(
                "is not allowed by this deployment (ALLOWED_OVERRIDES allows: {})",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        ));
    }
    Ok(overrides)
}
