//! What the strict dialects (Chat Completions, Messages, Responses) read alike, with [`Obj`]: the body, the model,
//! sampling held to the operator's `ALLOWED_OVERRIDES`, tool names and schemas, text and user content, the calls
//! waiting for their results. One reader, so that the dialects refuse the same fault in the same words.

use bytes::Bytes;
use serde_json::{Map, Value};

use chat_core::{
    Attachment, ChatError, ContentPart, InvalidRequest, Message, Overrides, ReasoningEffort,
    RequestLimits, ResponseFormat, Sampling, Thinking, ToolChoice, ToolExchange, ToolSpec,
    ToolStatus, TurnInput,
};

use crate::error::{not_an_object, not_json, utf8};
use crate::files::{base64, take};
use crate::object::{Api, Obj, kind_of};

/// The longest key of a metadata pair, as OpenAI's `Metadata` bounds it.
const MAX_METADATA_KEY_CHARS: usize = 64;

/// Why a temperature or `top_p` past 1 is refused (OpenAI's API takes a temperature up to 2).
pub(crate) const BEDROCK_UNIT: &str = "must be between 0 and 1 (the range Bedrock's models take)";

/// Whether a field's value is its default.
pub(crate) type IsDefault = fn(&Value) -> bool;

/// Fields taken only at their default value: the field, whether a value is that default, and the default as the
/// refusal says it. `null` is every one's default too.
pub(crate) type DefaultOnly = [(&'static str, IsDefault, &'static str)];

/// A request's body as the object it must be: UTF-8, JSON, an object.
pub(crate) fn body<A: Api>(body: &[u8]) -> Result<Obj<A>, ChatError> {
    utf8(body)?;
    let value: Value = serde_json::from_slice(body).map_err(not_json)?;
    let Value::Object(map) = value else {
        return Err(not_an_object().into());
    };
    Ok(Obj::of(String::new(), map))
}

/// The core's turn of `messages`: no overrides or session state (a dialect's client keeps its own conversation).
pub(crate) fn turn(messages: Vec<Message>) -> TurnInput {
    TurnInput {
        messages,
        overrides: Overrides::default(),
        session_state: None,
        session_field: "session_state",
        store_new_chat: false,
    }
}

/// Whether a tool's name is one Bedrock takes: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Refuses an empty conversation, and one longer than the deployment's `max_messages`.
pub(crate) fn message_count(len: usize, limits: &RequestLimits) -> Result<(), InvalidRequest> {
    if len == 0 {
        return Err(InvalidRequest::new(
            "messages",
            "must hold at least one message",
        ));
    }
    at_most("messages", "messages", len, limits)
}

/// Refuses more than the deployment's `max_messages` of `what` at `field`.
pub(crate) fn at_most(
    field: &str,
    what: &str,
    len: usize,
    limits: &RequestLimits,
) -> Result<(), InvalidRequest> {
    if len > limits.max_messages {
        return Err(InvalidRequest::new(
            field,
            format!(
                "holds {len} {what}, more than the limit of {}",
                limits.max_messages
            ),
        ));
    }
    Ok(())
}

/// How a request samples, how long its answer may be and how hard the model thinks.
pub(crate) struct Sampled {
    pub(crate) sampling: Sampling,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) thinking: Option<Thinking>,
}

impl Sampled {
    /// The sampling, answer length and effort a request asked, held to the operator's `ALLOWED_OVERRIDES` as the
    /// protocol's `context.overrides` (whose names they share): a refusal names the request's own field, `param`
    /// of an override's name.
    pub(crate) fn allowed(
        sampling: Sampling,
        max_tokens: Option<u64>,
        reasoning_effort: Option<ReasoningEffort>,
        thinking: Option<Thinking>,
        limits: &RequestLimits,
        param: impl Fn(&'static str) -> &'static str,
    ) -> Result<Self, InvalidRequest> {
        let as_overrides = Overrides {
            temperature: sampling.temperature,
            top_p: sampling.top_p,
            max_tokens: max_tokens.map(|n| n as u32),
            reasoning_effort,
            ..Overrides::default()
        };
        if let Some(used) = as_overrides
            .used()
            .into_iter()
            .find(|used| !limits.allowed_overrides.allows(used))
        {
            return Err(InvalidRequest::new(
                param(used),
                "is not allowed by this deployment (ALLOWED_OVERRIDES)",
            ));
        }
        Ok(Self {
            sampling,
            max_output_tokens: as_overrides.max_tokens,
            thinking,
        })
    }
}

impl<A: Api> Obj<A> {
    /// Refuses the first of `fields` present with a value other than its default.
    pub(crate) fn default_only(&mut self, fields: &DefaultOnly) -> Result<(), InvalidRequest> {
        for (name, is_default, default) in fields {
            if let Some(value) = self.value(name)
                && !is_default(&value)
            {
                return Err(InvalidRequest::new(
                    *name,
                    format!(
                        "is not supported by this backend except at its default value: {default}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `model`, which must name one.
    pub(crate) fn model(&mut self) -> Result<String, InvalidRequest> {
        let model: String = self.require("model")?;
        if model.trim().is_empty() {
            return Err(InvalidRequest::new("model", "must not be empty"));
        }
        Ok(model)
    }

    /// `stream_options`, only with `stream`: whether a last chunk carries the usage (`include_usage`, read where
    /// `usage`); obfuscation is refused, as the answer's `pieces` carry no obfuscation field.
    pub(crate) fn stream_options(
        &mut self,
        stream: bool,
        usage: bool,
        pieces: &str,
    ) -> Result<bool, InvalidRequest> {
        let Some(options) = self.value("stream_options") else {
            return Ok(false);
        };
        if !stream {
            return Err(InvalidRequest::new(
                "stream_options",
                "is only allowed when stream is true",
            ));
        }
        let mut options = Self::new("stream_options", options)?;
        let include = usage && options.take::<bool>("include_usage")?.unwrap_or(false);
        if options.take::<bool>("include_obfuscation")? == Some(true) {
            return Err(InvalidRequest::new(
                "stream_options.include_obfuscation",
                format!(
                    "is not supported by this backend except at false: {pieces} carry no obfuscation field"
                ),
            ));
        }
        options.finish()?;
        Ok(include)
    }

    /// A sampling setting from 0 to 1; another is refused as `refusal` says.
    pub(crate) fn unit(
        &mut self,
        name: &str,
        refusal: &str,
    ) -> Result<Option<f64>, InvalidRequest> {
        match self.take::<f64>(name)? {
            Some(x) if !(0.0..=1.0).contains(&x) => Err(InvalidRequest::new(name, refusal)),
            v => Ok(v),
        }
    }

    /// A text field kept in a trace, of `max` characters at most.
    pub(crate) fn bounded_text(
        &mut self,
        name: &str,
        max: usize,
    ) -> Result<Option<String>, InvalidRequest> {
        let text = self.take::<String>(name)?;
        if let Some(text) = &text {
            InvalidRequest::check_length(name, text, max)?;
        }
        Ok(text)
    }

    /// String pairs at `field` (OpenAI's `metadata`): at most `max_pairs`, keys of 64 characters at most and values
    /// of `max_value`.
    pub(crate) fn string_pairs(
        &mut self,
        field: &str,
        max_pairs: usize,
        max_value: usize,
    ) -> Result<Map<String, Value>, InvalidRequest> {
        let map = self.take::<Map<String, Value>>(field)?.unwrap_or_default();
        if map.len() > max_pairs {
            return Err(InvalidRequest::new(
                field,
                format!("holds {} pairs, more than {max_pairs}", map.len()),
            ));
        }
        for (key, value) in &map {
            // The key is the client's: quoted, so that the refusal's log line leaves it out.
            let path = format!("{field}[{key:?}]");
            InvalidRequest::check_length(&path, key, MAX_METADATA_KEY_CHARS)?;
            let Value::String(value) = value else {
                return Err(InvalidRequest::new(path, "expected a string"));
            };
            InvalidRequest::check_length(&path, value, max_value)?;
        }
        Ok(map)
    }

    /// Refuses `name`, the value of `field`, when it is no name Bedrock takes.
    pub(crate) fn check_tool_name(&self, field: &str, name: &str) -> Result<(), InvalidRequest> {
        if !is_tool_name(name) {
            return Err(InvalidRequest::new(
                self.at(field),
                "must be 1 to 64 letters, digits, underscores or hyphens",
            ));
        }
        Ok(())
    }

    /// Refuses `name`, a tool's `name`, when it is no name Bedrock takes or names a tool of `listed` again.
    pub(crate) fn check_new_tool(
        &self,
        name: &str,
        listed: &[ToolSpec],
    ) -> Result<(), InvalidRequest> {
        self.check_tool_name("name", name)?;
        if listed.iter().any(|s| s.name == name) {
            return Err(InvalidRequest::new(
                self.at("name"),
                "names a tool already listed: tool names must be unique",
            ));
        }
        Ok(())
    }

    /// A JSON schema object at `field`; absent, `default`, or refused as required when there is none.
    pub(crate) fn schema(
        &mut self,
        field: &str,
        default: Option<Value>,
    ) -> Result<Value, InvalidRequest> {
        match (self.value(field), default) {
            (Some(Value::Object(schema)), _) => Ok(Value::Object(schema)),
            (Some(other), _) => Err(InvalidRequest::new(
                self.at(field),
                format!("expected a JSON schema object, not {}", kind_of(&other)),
            )),
            (None, Some(default)) => Ok(default),
            (None, None) => Err(InvalidRequest::new(self.at(field), "is required")),
        }
    }

    /// A `json_schema` answer format's `name`, `description`, `schema` (absent, `default_schema` or refused) and
    /// `strict`.
    pub(crate) fn json_schema(
        &mut self,
        default_schema: Option<Value>,
    ) -> Result<ResponseFormat, InvalidRequest> {
        let name: String = self.require("name")?;
        self.check_tool_name("name", &name)?;
        let description = self.take::<String>("description")?;
        let schema = self.schema("schema", default_schema)?;
        let strict = self.take::<bool>("strict")?.unwrap_or(false);
        Ok(ResponseFormat::JsonSchema {
            name,
            description,
            schema,
            strict,
        })
    }

    /// Anthropic's `cache_control` (`{"type": "ephemeral", "ttl": …}`), checked and taken, its `ttl` only where
    /// `ttl_checked` (`5m` or `1h`); whether there was one.
    pub(crate) fn ephemeral(&mut self, ttl_checked: bool) -> Result<bool, InvalidRequest> {
        let Some(value) = self.value("cache_control") else {
            return Ok(false);
        };
        let mut control = Self::new(self.at("cache_control"), value)?;
        let kind: String = control.require("type")?;
        if kind != "ephemeral" {
            return Err(InvalidRequest::new(
                control.at("type"),
                "must be \"ephemeral\"",
            ));
        }
        if let Some(ttl) = control.take::<String>("ttl")?
            && ttl_checked
            && !matches!(ttl.as_str(), "5m" | "1h")
        {
            return Err(InvalidRequest::new(
                control.at("ttl"),
                "must be \"5m\" or \"1h\"",
            ));
        }
        control.finish()?;
        Ok(true)
    }

    /// A call's id at `field`: 1 to 64 characters.
    pub(crate) fn call_id(&mut self, field: &str) -> Result<String, InvalidRequest> {
        let id: String = self.require(field)?;
        if id.is_empty() || id.len() > 64 {
            return Err(InvalidRequest::new(
                self.at(field),
                "must be 1 to 64 characters",
            ));
        }
        Ok(id)
    }

    /// A function call's `arguments`: a JSON object as text (empty text an empty object).
    pub(crate) fn arguments(&mut self) -> Result<Value, InvalidRequest> {
        let arguments: String = self.require("arguments")?;
        match serde_json::from_str::<Value>(&arguments) {
            Ok(Value::Object(input)) => Ok(Value::Object(input)),
            _ if arguments.trim().is_empty() => Ok(Value::Object(Map::new())),
            _ => Err(InvalidRequest::new(
                self.at("arguments"),
                "must be a JSON object, as text",
            )),
        }
    }
}

/// OpenAI's `tool_choice`: absent `auto`; `auto`, `none` or `required` (any tool; anything else refused as `modes`
/// says); or an object, read by `named`. A tool asked of a request with no `tools` is refused as `no_tools` says.
pub(crate) fn tool_choice<A: Api>(
    body: &mut Obj<A>,
    tools: &[ToolSpec],
    modes: &str,
    no_tools: &str,
    named: impl FnOnce(Obj<A>) -> Result<ToolChoice, InvalidRequest>,
) -> Result<ToolChoice, InvalidRequest> {
    let choice = match body.value("tool_choice") {
        None => return Ok(ToolChoice::Auto),
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Any,
            _ => return Err(InvalidRequest::new("tool_choice", modes)),
        },
        Some(object) => named(Obj::new("tool_choice", object)?)?,
    };
    if tools.is_empty() && matches!(choice, ToolChoice::Any | ToolChoice::Tool(_)) {
        return Err(InvalidRequest::new("tool_choice", no_tools));
    }
    Ok(choice)
}

/// A model's call of the tool `name` with `input`, its result still to come.
pub(crate) fn call(id: String, name: String, input: Value) -> ToolExchange {
    ToolExchange {
        round: 0,
        id,
        name,
        input,
        output: String::new(),
        status: ToolStatus::Success,
    }
}

/// The end of a conversation (`messages`, or `input`): every call answered (else refused as `unanswered` says), a
/// user message, and files within their bounds.
pub(crate) fn settle(
    field: &str,
    pending: &[Pending],
    refusal: &str,
    messages: &[Message],
    limits: &RequestLimits,
) -> Result<(), ChatError> {
    unanswered(pending, refusal)?;
    if messages.is_empty() {
        return Err(InvalidRequest::new(
            field,
            "must hold a user message besides system and developer messages",
        )
        .into());
    }
    limits.files.check_messages(messages)?;
    Ok(())
}

/// A model's call waiting for its result: where its exchange stands in the conversation.
pub(crate) struct Pending {
    /// Where the call stands in the request.
    pub(crate) path: String,
    pub(crate) id: String,
    /// The tool it calls.
    pub(crate) name: String,
    /// The index of the assistant message in the conversation, and of the exchange among its parts.
    pub(crate) at: (usize, usize),
    pub(crate) answered: bool,
}

impl Pending {
    /// Marks the call answered by `output`, given to its exchange among `messages`, which is returned.
    pub(crate) fn answer<'m>(
        &mut self,
        messages: &'m mut [Message],
        output: String,
    ) -> Option<&'m mut ToolExchange> {
        self.answered = true;
        let (m, p) = self.at;
        match messages[m].content.get_mut(p) {
            Some(ContentPart::Tool(exchange)) => {
                exchange.output = output;
                Some(exchange)
            }
            _ => None,
        }
    }
}

/// The call `id` still waiting for its result, if any.
pub(crate) fn waiting<'p>(pending: &'p mut [Pending], id: &str) -> Option<&'p mut Pending> {
    pending.iter_mut().find(|p| p.id == id && !p.answered)
}

/// Gives `output` to the call `id` still waiting for its result, returning the call and its exchange among
/// `messages`; refused at `at` as `refusal` says when no call waits for it.
pub(crate) fn answer_waiting<'p, 'm>(
    pending: &'p mut [Pending],
    messages: &'m mut [Message],
    id: &str,
    output: String,
    (at, refusal): (String, &str),
) -> Result<(&'p Pending, Option<&'m mut ToolExchange>), InvalidRequest> {
    let Some(call) = waiting(pending, id) else {
        return Err(InvalidRequest::new(at, refusal));
    };
    let exchange = call.answer(messages, output);
    Ok((call, exchange))
}

/// Refuses a call nothing answered, as `refusal` says: the model reads every call with its result.
pub(crate) fn unanswered(pending: &[Pending], refusal: &str) -> Result<(), InvalidRequest> {
    match pending.iter().find(|p| !p.answered) {
        None => Ok(()),
        Some(call) => Err(InvalidRequest::new(call.path.clone(), refusal)),
    }
}

/// Refuses a content that is neither a string nor an array of parts.
fn neither_text_nor_parts(path: &str, other: &Value) -> InvalidRequest {
    InvalidRequest::new(
        path,
        format!(
            "expected a string or an array of parts, not {}",
            kind_of(other)
        ),
    )
}

/// A content that may be only text: a string, or parts each read to its text by `read` (given the part's type),
/// joined.
pub(crate) fn text_parts<A: Api>(
    path: &str,
    content: Value,
    mut read: impl FnMut(&str, &mut Obj<A>) -> Result<String, InvalidRequest>,
) -> Result<String, InvalidRequest> {
    match content {
        Value::String(text) => Ok(text),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let mut part = Obj::new(format!("{path}[{j}]"), part)?;
                let kind: String = part.require("type")?;
                texts.push(read(&kind, &mut part)?);
                part.finish()?;
            }
            Ok(texts.join("\n\n"))
        }
        other => Err(neither_text_nor_parts(path, &other)),
    }
}

/// What a user message's parts hold: their texts, and the files they attach (counted among the conversation's
/// `files`, to name those that come without a name, and held to `limits`).
pub(crate) struct UserParts<'a> {
    pub(crate) texts: Vec<String>,
    attached: Vec<Attachment>,
    files: &'a mut usize,
    limits: &'a RequestLimits,
}

impl UserParts<'_> {
    /// An image at `at` of a `data:` URL (the backend fetches nothing a client names), its base64 text at `data_at`.
    pub(crate) fn image(&mut self, at: &str, url: &str, data_at: &str) -> Result<(), ChatError> {
        let Some((media_type, data)) = data_url(url) else {
            return Err(InvalidRequest::new(
                at,
                "must be a data: URL (data:image/png;base64,…): this backend fetches nothing a client names",
            )
            .into());
        };
        let name = format!("image-{}", *self.files + 1);
        self.attach(at, media_type, data, data_at, Some(name))
    }

    /// A file at `at` of its `file_data` (base64, or a `data:` URL), at `data_at`; named `name`, or by its count.
    pub(crate) fn file(
        &mut self,
        at: &str,
        data: &str,
        data_at: &str,
        name: Option<String>,
    ) -> Result<(), ChatError> {
        let (media_type, data) = match data_url(data) {
            Some((media_type, data)) => (media_type, data),
            None => (None, data),
        };
        let name = name.unwrap_or_else(|| format!("file-{}", *self.files + 1));
        self.attach(at, media_type, data, data_at, Some(name))
    }

    /// The base64 `data` at `data_at`, attached as the file at `at`.
    fn attach(
        &mut self,
        at: &str,
        media_type: Option<&str>,
        data: &str,
        data_at: &str,
        name: Option<String>,
    ) -> Result<(), ChatError> {
        let bytes = base64(data_at, data)?;
        *self.files += 1;
        self.attached
            .push(take(at, name, media_type, Bytes::from(bytes), self.limits)?);
        Ok(())
    }
}

/// A user message's content: a string, or parts (at least one), each read by `part` (given its type; audio is
/// refused); its text and its files, which must not both be empty. `files` counts the conversation's files so far.
pub(crate) fn user_content<A: Api>(
    path: &str,
    content: Value,
    limits: &RequestLimits,
    files: &mut usize,
    part: fn(&str, &mut Obj<A>, &mut UserParts) -> Result<(), ChatError>,
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
        other => return Err(neither_text_nor_parts(path, &other).into()),
    };
    let mut user = UserParts {
        texts: Vec::new(),
        attached: Vec::new(),
        files,
        limits,
    };
    for (j, value) in parts.into_iter().enumerate() {
        let mut value = Obj::new(format!("{path}[{j}]"), value)?;
        let kind: String = value.require("type")?;
        if kind == "input_audio" {
            return Err(InvalidRequest::new(
                value.at("type"),
                "audio input is not supported by this backend",
            )
            .into());
        }
        part(&kind, &mut value, &mut user)?;
        value.finish()?;
    }
    let text = user.texts.join("\n\n");
    InvalidRequest::check_length(path, &text, limits.max_message_chars)?;
    if text.trim().is_empty() && user.attached.is_empty() {
        return Err(InvalidRequest::new(path, "must not be empty").into());
    }
    let mut content = Vec::with_capacity(user.attached.len() + 1);
    content.push(ContentPart::Text(text));
    content.extend(user.attached.into_iter().map(ContentPart::File));
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
