//! The model port on Amazon Bedrock's Converse API.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::BuildError;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_sdk_bedrockruntime::types::{
    AnyToolChoice, CachePointBlock, CachePointType, CitationLocation, CitationsConfig,
    ContentBlock, ContentBlockDelta, ContentBlockStart, ConversationRole, ConverseOutput,
    ConverseStreamOutput, ConverseTokensRequest, CountTokensInput, DocumentBlock,
    DocumentFormat as BedrockDocumentFormat, DocumentSource, GuardrailConfiguration,
    GuardrailConverseContentBlock, GuardrailConverseContentQualifier, GuardrailConverseTextBlock,
    GuardrailStreamConfiguration, GuardrailStreamProcessingMode, GuardrailTrace, ImageBlock,
    ImageFormat as BedrockImageFormat, ImageSource, InferenceConfiguration, JsonSchemaDefinition,
    Message, OutputConfig, OutputFormat, OutputFormatStructure, OutputFormatType,
    PerformanceConfigLatency, PerformanceConfiguration, ReasoningContentBlock,
    ReasoningContentBlockDelta, ReasoningTextBlock, SearchResultBlock, SearchResultContentBlock,
    ServiceTier as BedrockServiceTier, ServiceTierType, SpecificToolChoice,
    StopReason as BedrockStop, SystemContentBlock, Tool as BedrockTool,
    ToolChoice as BedrockToolChoice, ToolConfiguration, ToolInputSchema, ToolResultBlock,
    ToolResultContentBlock, ToolResultStatus, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::{Blob, Document, Number};
use chat_core::TokenUsage;
use chat_core::{
    ChatModel, ModelError, ModelEvent, ModelReply, ModelRequest, ModelStream, Passage,
    ReplyCitation, Served, StopReason, ToolCall, ToolStatus,
};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::guardrail_trace::guardrail_trace;

/// Bedrock as the chat model; holds one SDK client, built once per cold start.
#[derive(Clone)]
pub struct BedrockModel {
    client: Client,
    /// `MODEL_TIMEOUT_SECONDS`: the longest the model may be silent (see [`BedrockModel::new`]).
    timeout: Duration,
    /// Whether `CountTokens` still counts: once Bedrock says the model cannot, it is not asked again while this
    /// process lives (and clones share that).
    counting: Arc<AtomicBool>,
}

impl BedrockModel {
    /// A client from the shared AWS configuration. `timeout` bounds a whole buffered call (every attempt and the
    /// back-offs between them), the wait for a stream's first text and any gap between its deltas.
    pub fn new(config: &aws_config::SdkConfig, timeout: Duration) -> Self {
        // The SDK's timeouts stop once a response's headers are in, so a stream's body is timed below, and the calls
        // carry a timer of their own as well.
        Self {
            client: crate::bedrock_runtime(config, timeout),
            timeout,
            counting: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl BedrockModel {
    /// `call` within the model's timeout (past it: silent, waiting for `waiting_for`), traced in `span`, a failure
    /// classified.
    async fn within<T, E, R>(
        &self,
        call: impl Future<Output = Result<T, SdkError<E, R>>>,
        span: &tracing::Span,
        waiting_for: &str,
    ) -> Result<T, ModelError>
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        match tokio::time::timeout(self.timeout, call)
            .instrument(span.clone())
            .await
        {
            Ok(output) => output.map_err(classify),
            Err(_) => Err(silent(self.timeout, waiting_for)),
        }
    }
}

/// Whether a count failed for every request to come, rather than for this one: the model cannot count tokens (as
/// Bedrock says of Nova, and of some Claude models in some Regions), or the role may not ask (a stack deployed
/// without `bedrock:CountTokens`).
fn cannot_count(err: &ModelError) -> bool {
    match err {
        ModelError::AccessDenied(_) => true,
        ModelError::Rejected(message) => {
            let message = message.to_ascii_lowercase();
            message.contains("support") && message.contains("count")
        }
        _ => false,
    }
}

/// A Converse request this adapter could not build (a field it must set left unset): its own fault, not the
/// request's, so not a refusal the client could correct.
fn unbuilt(e: BuildError) -> ModelError {
    ModelError::Failed(format!("building the Converse request: {e}"))
}

/// The fault for a model that stayed silent past the timeout.
fn silent(timeout: Duration, waiting_for: &str) -> ModelError {
    ModelError::Timeout(format!(
        "no {waiting_for} within {} ms (MODEL_TIMEOUT_SECONDS)",
        timeout.as_millis()
    ))
}

/// A file as a Converse image or document block; `name` is the document's name, distinct in the request.
fn file_block(file: &chat_core::Attachment, name: &str) -> Result<ContentBlock, ModelError> {
    use chat_core::{DocumentFormat as D, FileKind, ImageFormat as I};
    let bytes = file
        .bytes
        .as_ref()
        .ok_or_else(|| ModelError::Failed(format!("{} has no bytes", file.name)))?;
    let blob = Blob::new(bytes.to_vec());
    Ok(match file.kind {
        FileKind::Image(format) => ContentBlock::Image(
            ImageBlock::builder()
                .format(match format {
                    I::Png => BedrockImageFormat::Png,
                    I::Jpeg => BedrockImageFormat::Jpeg,
                    I::Gif => BedrockImageFormat::Gif,
                    I::Webp => BedrockImageFormat::Webp,
                })
                .source(ImageSource::Bytes(blob))
                .build()
                .map_err(unbuilt)?,
        ),
        FileKind::Document(format) => ContentBlock::Document(
            DocumentBlock::builder()
                .format(match format {
                    D::Pdf => BedrockDocumentFormat::Pdf,
                    D::Csv => BedrockDocumentFormat::Csv,
                    D::Doc => BedrockDocumentFormat::Doc,
                    D::Docx => BedrockDocumentFormat::Docx,
                    D::Xls => BedrockDocumentFormat::Xls,
                    D::Xlsx => BedrockDocumentFormat::Xlsx,
                    D::Html => BedrockDocumentFormat::Html,
                    D::Txt => BedrockDocumentFormat::Txt,
                    D::Md => BedrockDocumentFormat::Md,
                })
                .name(name)
                .source(DocumentSource::Bytes(blob))
                .build()
                .map_err(unbuilt)?,
        ),
    })
}

fn messages(request: &ModelRequest) -> Result<Vec<Message>, ModelError> {
    // The question: the last user message that is not a round of tool results. Its search results, its guardrail
    // query and the cache point before it stay with it however many tool rounds follow.
    let last = request.question.unwrap_or_else(|| {
        request
            .messages
            .iter()
            .rposition(|m| m.role == chat_core::Role::User && m.tool_results.is_empty())
            .unwrap_or(request.messages.len().saturating_sub(1))
    });
    // Converse refuses toolUse and toolResult blocks in a request without a toolConfig, so a request that offers no
    // tools gets its conversation's tool exchanges as text (the model still reads what was asked and answered), as
    // the core's `tools_as_text` writes them; the core does that itself before a last round, this is the backstop.
    let offered = !request.tools.is_empty();
    let tool_names: std::collections::HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|m| &m.tool_uses)
        .map(|call| (call.id.as_str(), call.name.as_str()))
        .collect();
    // Converse refuses two documents of one name in a request.
    let mut document_names = chat_core::distinct_names(
        request
            .messages
            .iter()
            .flat_map(|m| &m.files)
            .filter(|f| !f.kind.is_image())
            .map(|f| f.name.as_str()),
    )
    .into_iter();
    request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let role = match m.role {
                chat_core::Role::User => ConversationRole::User,
                chat_core::Role::Assistant => ConversationRole::Assistant,
            };
            let mut message = Message::builder().role(role);
            // An assistant message's signed reasoning first, unchanged, as the model wants it back before the tool
            // uses it led to (a block without a signature is never given back).
            if offered {
                for block in m.reasoning.iter().filter(|_| !m.tool_uses.is_empty()) {
                    let content = match (&block.signature, &block.redacted) {
                        (_, Some(bytes)) => {
                            ReasoningContentBlock::RedactedContent(Blob::new(bytes.clone()))
                        }
                        (Some(signature), None) => ReasoningContentBlock::ReasoningText(
                            ReasoningTextBlock::builder()
                                .text(&block.text)
                                .signature(signature)
                                .build()
                                .map_err(unbuilt)?,
                        ),
                        (None, None) => continue,
                    };
                    message = message.content(ContentBlock::ReasoningContent(content));
                }
            }
            // The results of the previous message's calls come first in a user message, as Claude wants them.
            for result in &m.tool_results {
                message = message.content(if offered {
                    ContentBlock::ToolResult(
                        ToolResultBlock::builder()
                            .tool_use_id(&result.id)
                            .content(ToolResultContentBlock::Text(result.text.clone()))
                            .status(match result.status {
                                ToolStatus::Success => ToolResultStatus::Success,
                                ToolStatus::Error => ToolResultStatus::Error,
                            })
                            .build()
                            .map_err(unbuilt)?,
                    )
                } else {
                    let name = tool_names.get(result.id.as_str()).unwrap_or(&"a tool");
                    ContentBlock::Text(format!(
                        "[tool {name} → {}: {}]",
                        result.status.as_str(),
                        result.text
                    ))
                });
            }
            // Native citations: the passages go first in the question's message, as search results the model
            // may cite by position.
            if i == last && m.role == chat_core::Role::User {
                for passage in &request.search_results {
                    message = message.content(ContentBlock::SearchResult(search_result(passage)?));
                }
            }
            // Each file after a line naming it (an image block has no name of its own; a document needs a text
            // beside it), then the message's text; a text left empty beside files is no block (Converse refuses
            // blank text).
            for file in &m.files {
                let name = if file.kind.is_image() {
                    String::new()
                } else {
                    document_names.next().unwrap_or_default()
                };
                message = message
                    .content(ContentBlock::Text(file.label()))
                    .content(file_block(file, &name)?);
            }
            // A text left empty beside other blocks (files, tool calls or results) is no block.
            let alone = m.files.is_empty() && m.tool_uses.is_empty() && m.tool_results.is_empty();
            let texts: Vec<&String> = m
                .texts
                .iter()
                .filter(|t| alone || !t.trim().is_empty())
                .collect();
            let question = i == last && m.role == chat_core::Role::User;
            for (j, text) in texts.iter().enumerate() {
                message = match &request.grounding_source {
                    // The guardrail's grounding check: the question is its query, the passages its source.
                    Some(source) if question && j + 1 == texts.len() => message
                        .content(guard_content(
                            text,
                            GuardrailConverseContentQualifier::Query,
                        )?)
                        .content(guard_content(
                            source,
                            GuardrailConverseContentQualifier::GroundingSource,
                        )?),
                    _ => message.content(ContentBlock::Text((*text).clone())),
                };
            }
            // The calls an assistant message made, after what it wrote.
            for call in &m.tool_uses {
                message = message.content(if offered {
                    ContentBlock::ToolUse(
                        ToolUseBlock::builder()
                            .tool_use_id(&call.id)
                            .name(&call.name)
                            .input(document(&call.input))
                            .build()
                            .map_err(unbuilt)?,
                    )
                } else {
                    ContentBlock::Text(format!("[tool {} called with {}]", call.name, call.input))
                });
            }
            // The conversation up to the newest question is the next turn's cached prefix.
            if request.prompt_caching && i + 1 == last && last > 0 {
                message = message.content(ContentBlock::CachePoint(cache_point()?));
            }
            message.build().map_err(unbuilt)
        })
        .collect()
}

fn cache_point() -> Result<CachePointBlock, ModelError> {
    CachePointBlock::builder()
        .r#type(CachePointType::Default)
        .build()
        .map_err(unbuilt)
}

fn guard_content(
    text: &str,
    qualifier: GuardrailConverseContentQualifier,
) -> Result<ContentBlock, ModelError> {
    Ok(ContentBlock::GuardContent(
        GuardrailConverseContentBlock::Text(
            GuardrailConverseTextBlock::builder()
                .text(text)
                .qualifiers(qualifier)
                .build()
                .map_err(unbuilt)?,
        ),
    ))
}

/// The span of a model call named `$name` (`converse` or `converse_stream`) of `$request`: the model and, once
/// known, the outcome (`ok` or `error`) and the tokens; never text.
macro_rules! call_span {
    ($name:literal, $request:expr) => {
        tracing::info_span!(
            $name,
            model_id = %$request.model_id,
            outcome = Empty,
            input_tokens = Empty,
            output_tokens = Empty
        )
    };
}

/// `$builder` (of a `converse` or a `converse_stream` call: two builder types with the same setters) given
/// everything of `$request` both calls send alike: the model, the system prompt, the messages, the tools, the
/// inference settings, the extra fields, the latency and the tier. The guardrail is set apart (a stream's has more).
macro_rules! asked {
    ($builder:expr, $request:expr) => {
        $builder
            .model_id(&$request.model_id)
            .set_system(Some(system($request)?))
            .set_messages(Some(messages($request)?))
            .set_tool_config(tool_config($request)?)
            .inference_config(inference($request))
            .set_additional_model_request_fields(additional_fields($request))
            .set_performance_config(performance($request))
            .set_service_tier(service_tier($request))
            .set_output_config(output_config($request)?)
    };
}

/// The system prompt, then a cache point when caching: it is the same on every turn.
fn system(request: &ModelRequest) -> Result<Vec<SystemContentBlock>, ModelError> {
    let mut blocks = vec![SystemContentBlock::Text(request.system.clone())];
    if request.prompt_caching {
        blocks.push(SystemContentBlock::CachePoint(cache_point()?));
    }
    Ok(blocks)
}

/// The tools the model may ask for, `None` when it is offered none (Converse then gets no `toolConfig`). Where the
/// cache points go does not change: Bedrock reads the tools before the system prompt, so the cache point after the
/// system prompt covers them too.
fn tool_config(request: &ModelRequest) -> Result<Option<ToolConfiguration>, ModelError> {
    if request.tools.is_empty() {
        return Ok(None);
    }
    let mut config = ToolConfiguration::builder();
    for tool in &request.tools {
        let spec = ToolSpecification::builder()
            .name(&tool.name)
            // Bedrock refuses an empty description.
            .set_description(Some(tool.description.clone()).filter(|d| !d.trim().is_empty()))
            .input_schema(ToolInputSchema::Json(document(&tool.input_schema)))
            // Strict tool use only where asked: a model without it refuses the field.
            .set_strict(tool.strict.then_some(true))
            .build()
            .map_err(unbuilt)?;
        config = config.tools(BedrockTool::ToolSpec(spec));
    }
    // `auto` is Converse's default: it is not sent, so a model that takes no tool choice is asked nothing new.
    config = config.set_tool_choice(match &request.tool_choice {
        chat_core::ToolChoice::Auto | chat_core::ToolChoice::None => None,
        chat_core::ToolChoice::Any => {
            Some(BedrockToolChoice::Any(AnyToolChoice::builder().build()))
        }
        chat_core::ToolChoice::Tool(name) => Some(BedrockToolChoice::Tool(
            SpecificToolChoice::builder()
                .name(name)
                .build()
                .map_err(unbuilt)?,
        )),
    });
    config.build().map(Some).map_err(unbuilt)
}

/// The answer's format: Bedrock's structured output (`outputConfig.textFormat`) with the schema the request asks
/// for; a JSON object of any shape is the schema `{"type": "object"}`. `None` for text.
fn output_config(request: &ModelRequest) -> Result<Option<OutputConfig>, ModelError> {
    let (schema, name, description) = match &request.response_format {
        chat_core::ResponseFormat::Text => return Ok(None),
        chat_core::ResponseFormat::JsonObject => {
            (serde_json::json!({"type": "object"}), None, None)
        }
        chat_core::ResponseFormat::JsonSchema {
            name,
            description,
            schema,
            ..
        } => (schema.clone(), Some(name.clone()), description.clone()),
    };
    let definition = JsonSchemaDefinition::builder()
        .schema(schema.to_string())
        .set_name(name)
        .set_description(description)
        .build()
        .map_err(unbuilt)?;
    let format = OutputFormat::builder()
        .r#type(OutputFormatType::JsonSchema)
        .structure(OutputFormatStructure::JsonSchema(definition))
        .build()
        .map_err(unbuilt)?;
    Ok(Some(OutputConfig::builder().text_format(format).build()))
}

/// A JSON value as a Smithy document (for `additionalModelRequestFields`, tool schemas and tool inputs).
fn document(value: &serde_json::Value) -> Document {
    use serde_json::Value;
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Document::Number(Number::PosInt(u)),
            (_, Some(i), _) => Document::Number(Number::NegInt(i)),
            (_, _, f) => Document::Number(Number::Float(f.unwrap_or_default())),
        },
        Value::String(s) => Document::String(s.clone()),
        Value::Array(a) => Document::Array(a.iter().map(document).collect()),
        Value::Object(o) => {
            Document::Object(o.iter().map(|(k, v)| (k.clone(), document(v))).collect())
        }
    }
}

/// A Smithy document as a JSON value (a tool call's input): the one conversion the knowledge base's metadata uses
/// too (objects' keys sorted, so a call's stored input is the same whatever order the SDK read it in).
fn json_value(document: &Document) -> serde_json::Value {
    crate::knowledge_base::json(document)
}

/// The input of a streamed tool call, from its concatenated `toolUse` input deltas. No delta at all is an empty
/// input (`{}`, as a tool without parameters gets). Input that is not a JSON object, which a model should never
/// send, is also `{}`, with a warning: the call still happens and the tool tells the model what its input lacks,
/// which it reads and can correct in the next round, rather than the whole turn failing for one malformed call;
/// and the call is stored and replayed to Bedrock later, which refuses a `toolUse` input that is not an object.
fn tool_input(name: &str, raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::Value::Object(Default::default());
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value @ serde_json::Value::Object(_)) => value,
        parsed => {
            tracing::warn!(
                tool = name,
                input_bytes = raw.len(),
                error = parsed.err().map(|e| e.to_string()),
                "the model's tool input is not a JSON object: the tool is called with {{}}"
            );
            serde_json::Value::Object(Default::default())
        }
    }
}

/// The model-specific fields of a call: how to reason, and Anthropic's `top_k` (the core sets it only for a model
/// that takes it). `None` when there are neither.
fn additional_fields(request: &ModelRequest) -> Option<Document> {
    let top_k = request.inference.top_k;
    if request.reasoning.is_none() && top_k.is_none() {
        return None;
    }
    let mut fields = request
        .reasoning
        .map(|r| r.request_fields())
        .unwrap_or_else(|| serde_json::json!({}));
    if let (Some(k), Some(fields)) = (top_k, fields.as_object_mut()) {
        fields.insert("top_k".into(), k.into());
    }
    Some(document(&fields))
}

fn performance(request: &ModelRequest) -> Option<PerformanceConfiguration> {
    request.latency.map(|l| {
        PerformanceConfiguration::builder()
            .latency(match l {
                chat_core::Latency::Standard => PerformanceConfigLatency::Standard,
                chat_core::Latency::Optimized => PerformanceConfigLatency::Optimized,
            })
            .build()
    })
}

fn service_tier(request: &ModelRequest) -> Option<BedrockServiceTier> {
    request.service_tier.and_then(|t| {
        BedrockServiceTier::builder()
            .r#type(match t {
                chat_core::ServiceTier::Default => ServiceTierType::Default,
                chat_core::ServiceTier::Priority => ServiceTierType::Priority,
                chat_core::ServiceTier::Flex => ServiceTierType::Flex,
            })
            .build()
            .ok()
    })
}

/// What Bedrock says it served: the latency setting and the service tier.
fn served(
    performance: Option<&PerformanceConfiguration>,
    tier: Option<&BedrockServiceTier>,
) -> Served {
    Served {
        latency: performance.map(|p| p.latency().as_str().to_string()),
        service_tier: tier.map(|t| t.r#type().as_str().to_string()),
    }
}

/// A passage as a Converse search result, with citations on.
fn search_result(passage: &Passage) -> Result<SearchResultBlock, ModelError> {
    SearchResultBlock::builder()
        .source(&passage.source)
        .title(passage.citation())
        .content(
            SearchResultContentBlock::builder()
                .text(&passage.text)
                .build()
                .map_err(unbuilt)?,
        )
        .citations(
            CitationsConfig::builder()
                .enabled(true)
                .build()
                .map_err(unbuilt)?,
        )
        .build()
        .map_err(unbuilt)
}

/// The search result a citation points at, by its position in the request.
fn cited_result(location: Option<&CitationLocation>) -> Option<usize> {
    let index = location?
        .as_search_result_location()
        .ok()?
        .search_result_index()?;
    usize::try_from(index).ok()
}

fn inference(request: &ModelRequest) -> InferenceConfiguration {
    let i = &request.inference;
    InferenceConfiguration::builder()
        .max_tokens(i32::try_from(i.max_tokens).unwrap_or(i32::MAX))
        .set_temperature(i.temperature.map(|t| t as f32))
        .set_top_p(i.top_p.map(|p| p as f32))
        .set_stop_sequences(
            (!request.stop_sequences.is_empty()).then(|| request.stop_sequences.clone()),
        )
        .build()
}

/// The guardrail, with its trace on: its assessment becomes a thought.
fn guardrail(request: &ModelRequest) -> Option<GuardrailConfiguration> {
    request.guardrail.as_ref().map(|g| {
        GuardrailConfiguration::builder()
            .guardrail_identifier(&g.id)
            .guardrail_version(&g.version)
            .trace(GuardrailTrace::Enabled)
            .build()
    })
}

pub(crate) fn stop_reason(stop: &BedrockStop) -> StopReason {
    match stop {
        BedrockStop::EndTurn => StopReason::EndTurn,
        BedrockStop::StopSequence => StopReason::StopSequence,
        BedrockStop::MaxTokens => StopReason::MaxTokens,
        BedrockStop::GuardrailIntervened => StopReason::GuardrailIntervened,
        BedrockStop::ContentFiltered => StopReason::ContentFiltered,
        BedrockStop::ModelContextWindowExceeded => StopReason::ContextWindowExceeded,
        BedrockStop::ToolUse => StopReason::ToolUse,
        other => StopReason::Other(other.as_str().to_string()),
    }
}

/// Whether a validation message says the input did not fit the model's context.
pub(crate) fn says_too_long(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "too long",
        "too many tokens",
        "context length",
        "context window",
        "maximum context",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// Classifies a fault by its error code, the same way for `converse`, `converse_stream` and exception frames inside
/// a stream (whose codes start in lower case). What the service said goes into the variant, for the log only.
pub(crate) fn classify_code(code: Option<&str>, message: &str) -> ModelError {
    let code = code.unwrap_or_default();
    let message = message.to_string();
    match code.to_ascii_lowercase().as_str() {
        "throttlingexception" => ModelError::Throttled,
        "validationexception" if says_too_long(&message) => ModelError::InputTooLong(message),
        "validationexception" => ModelError::Rejected(message),
        "accessdeniedexception" => ModelError::AccessDenied(message),
        "resourcenotfoundexception" => ModelError::NotFound(message),
        "modeltimeoutexception" => ModelError::Timeout(message),
        "servicequotaexceededexception" => ModelError::Throttled,
        "serviceunavailableexception" | "modelnotreadyexception" => {
            ModelError::Unavailable(message)
        }
        _ => ModelError::Failed(format!("{code}: {message}")),
    }
}

/// Classifies an SDK error: a service error by its code, otherwise by what failed on the way.
pub(crate) fn classify<E, R>(err: SdkError<E, R>) -> ModelError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match &err {
        SdkError::ServiceError(ctx) => {
            let e = ctx.err();
            classify_code(e.code(), e.message().unwrap_or_default())
        }
        SdkError::TimeoutError(_) => {
            ModelError::Timeout("no answer within the configured timeout".into())
        }
        SdkError::DispatchFailure(f) => {
            ModelError::Unavailable(format!("cannot reach the model: {f:?}"))
        }
        _ => ModelError::Failed(format!("{err:?}")),
    }
}

fn usage(u: &aws_sdk_bedrockruntime::types::TokenUsage) -> TokenUsage {
    let count = |n: i32| n.max(0) as u64;
    TokenUsage {
        input_tokens: count(u.input_tokens()),
        output_tokens: count(u.output_tokens()),
        total_tokens: count(u.total_tokens()),
        cache_read_input_tokens: u.cache_read_input_tokens().map_or(0, count),
        cache_write_input_tokens: u.cache_write_input_tokens().map_or(0, count),
    }
}

fn millis(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// A streamed answer from ConverseStream.
pub struct BedrockStream {
    receiver: EventReceiver<ConverseStreamOutput, ConverseStreamOutputError>,
    /// `model.converse_stream`, from the call until the stream is dropped: its close line is the whole answer's time.
    span: Span,
    model_id: String,
    started: Instant,
    first_text_ms: Option<u64>,
    timeout: Duration,
    /// Events read and not yet returned: the end's metadata carries several.
    pending: std::collections::VecDeque<ModelEvent>,
    /// The tool calls being streamed, by content block index: their id, name and input so far.
    tool_blocks: std::collections::BTreeMap<i32, PendingCall>,
    /// The tool calls returned so far (for the log).
    tool_calls: usize,
}

/// A tool call whose input is still arriving.
struct PendingCall {
    id: String,
    name: String,
    input: String,
}

impl PendingCall {
    fn finish(self) -> ToolCall {
        let input = tool_input(&self.name, &self.input);
        ToolCall {
            id: self.id,
            name: self.name,
            input,
        }
    }
}

impl BedrockStream {
    /// Reads the next event, or fails once the model has been silent too long: until the first text, counted from
    /// the start of the call (a model may open the stream at once and then say nothing); after it, from when the
    /// caller asks, so that a caller slow to read (its client is) never counts as the model's silence.
    async fn recv(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<ConverseStreamOutput>, ModelError> {
        let waiting_for = if self.first_text_ms.is_some() {
            "next delta"
        } else {
            "first text"
        };
        let received = tokio::time::timeout_at(deadline.into(), self.receiver.recv())
            .instrument(self.span.clone())
            .await;
        match &received {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => {
                self.span.record("outcome", "ok");
            }
            _ => {
                self.span.record("outcome", "error");
            }
        }
        match received {
            Ok(event) => event.map_err(classify),
            Err(_) => {
                let err = silent(self.timeout, waiting_for);
                tracing::warn!(
                    operation = "ConverseStream",
                    model_id = %self.model_id,
                    latency_ms = millis(self.started),
                    first_text_ms = self.first_text_ms,
                    error = %err,
                    "model call failed"
                );
                Err(err)
            }
        }
    }
}

impl ModelStream for BedrockStream {
    async fn next_event(&mut self) -> Result<Option<ModelEvent>, ModelError> {
        // One deadline for everything read before the next event this returns: events without text (the message
        // and block starts) do not extend it.
        if let Some(event) = self.pending.pop_front() {
            return Ok(Some(event));
        }
        let mut deadline = match self.first_text_ms {
            None => self.started + self.timeout,
            Some(_) => Instant::now() + self.timeout,
        };
        loop {
            let Some(event) = self.recv(deadline).await? else {
                return Ok(None);
            };
            match event {
                ConverseStreamOutput::ContentBlockDelta(d) => match d.delta() {
                    Some(ContentBlockDelta::Text(text)) if !text.is_empty() => {
                        self.first_text_ms
                            .get_or_insert_with(|| millis(self.started));
                        return Ok(Some(ModelEvent::Text(text.clone())));
                    }
                    Some(ContentBlockDelta::Citation(citation)) => {
                        if let Some(source) = cited_result(citation.location()) {
                            return Ok(Some(ModelEvent::Citation(source)));
                        }
                    }
                    // Reasoning is the model's first output: it counts as the end of its silence too.
                    Some(ContentBlockDelta::ReasoningContent(reasoning)) => match reasoning {
                        ReasoningContentBlockDelta::Text(text) if !text.is_empty() => {
                            self.first_text_ms
                                .get_or_insert_with(|| millis(self.started));
                            return Ok(Some(ModelEvent::Reasoning(text.clone())));
                        }
                        ReasoningContentBlockDelta::RedactedContent(bytes) => {
                            self.first_text_ms
                                .get_or_insert_with(|| millis(self.started));
                            return Ok(Some(ModelEvent::RedactedReasoning(
                                bytes.as_ref().to_vec(),
                            )));
                        }
                        // The signature proves the reasoning to the model when it is given back with the tool uses
                        // it led to: it closes the block.
                        ReasoningContentBlockDelta::Signature(signature)
                            if !signature.is_empty() =>
                        {
                            return Ok(Some(ModelEvent::ReasoningSignature(signature.clone())));
                        }
                        _ => {}
                    },
                    // A piece of a tool call's input: the model is writing, so it is not silent, though nothing
                    // is returned until the call is whole.
                    Some(ContentBlockDelta::ToolUse(piece)) => {
                        self.first_text_ms
                            .get_or_insert_with(|| millis(self.started));
                        deadline = Instant::now() + self.timeout;
                        if let Some(call) = self.tool_blocks.get_mut(&d.content_block_index()) {
                            call.input.push_str(piece.input());
                        }
                    }
                    _ => {}
                },
                ConverseStreamOutput::ContentBlockStart(start) => {
                    if let Some(ContentBlockStart::ToolUse(tool)) = start.start() {
                        self.tool_blocks.insert(
                            start.content_block_index(),
                            PendingCall {
                                id: tool.tool_use_id().to_string(),
                                name: tool.name().to_string(),
                                input: String::new(),
                            },
                        );
                    }
                }
                ConverseStreamOutput::ContentBlockStop(stop) => {
                    if let Some(call) = self.tool_blocks.remove(&stop.content_block_index()) {
                        self.tool_calls += 1;
                        return Ok(Some(ModelEvent::ToolUse(call.finish())));
                    }
                }
                ConverseStreamOutput::MessageStop(stop) => {
                    // A call whose block never stopped is still the model's request, whole as it came.
                    let unfinished = std::mem::take(&mut self.tool_blocks);
                    self.tool_calls += unfinished.len();
                    self.pending.extend(
                        unfinished
                            .into_values()
                            .map(|call| ModelEvent::ToolUse(call.finish())),
                    );
                    self.pending
                        .push_back(ModelEvent::Stop(stop_reason(stop.stop_reason())));
                    return Ok(self.pending.pop_front());
                }
                ConverseStreamOutput::Metadata(m) => {
                    self.span.record("outcome", "ok");
                    if let Some(u) = m.usage() {
                        self.span.record("input_tokens", u.input_tokens());
                        self.span.record("output_tokens", u.output_tokens());
                    }
                    // The last event of an answer: its cost and timing, never its text.
                    tracing::info!(
                        operation = "ConverseStream",
                        model_id = %self.model_id,
                        latency_ms = millis(self.started),
                        first_text_ms = self.first_text_ms,
                        model_latency_ms = m.metrics().map(|x| x.latency_ms()),
                        input_tokens = m.usage().map(|u| u.input_tokens()),
                        output_tokens = m.usage().map(|u| u.output_tokens()),
                        cache_read_input_tokens = m.usage().and_then(|u| u.cache_read_input_tokens()),
                        cache_write_input_tokens = m.usage().and_then(|u| u.cache_write_input_tokens()),
                        tool_calls = self.tool_calls,
                        "model answered"
                    );
                    if let Some(trace) = m.trace().and_then(|t| t.guardrail()) {
                        self.pending
                            .push_back(ModelEvent::Guardrail(guardrail_trace(trace)));
                    }
                    self.pending.push_back(ModelEvent::Served(served(
                        m.performance_config(),
                        m.service_tier(),
                    )));
                    if let Some(u) = m.usage() {
                        self.pending.push_back(ModelEvent::Usage(usage(u)));
                    }
                    return Ok(self.pending.pop_front());
                }
                // messageStart, the start and stop of other blocks, and events this backend does not use.
                _ => {}
            }
        }
    }
}

/// Logs a model call that failed (with how long it took: timeouts and throttling show here) and passes the error on.
fn failed(
    operation: &str,
    request: &ModelRequest,
    started: Instant,
    err: ModelError,
) -> ModelError {
    tracing::warn!(
        operation,
        model_id = %request.model_id,
        latency_ms = millis(started),
        error = %err,
        "model call failed"
    );
    err
}

impl ChatModel for BedrockModel {
    type Stream = BedrockStream;

    async fn count_tokens(
        &self,
        counter: &str,
        request: &ModelRequest,
    ) -> Result<Option<u64>, ModelError> {
        if !self.counting.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let started = Instant::now();
        let span = tracing::info_span!(
            "model.count_tokens",
            model_id = %counter,
            outcome = Empty,
            input_tokens = Empty
        );
        let input = ConverseTokensRequest::builder()
            .set_system(Some(system(request)?))
            .set_messages(Some(messages(request)?))
            .set_tool_config(tool_config(request)?)
            .build();
        let call = self
            .client
            .count_tokens()
            .model_id(counter)
            .input(CountTokensInput::Converse(input))
            .send();
        let output = self.within(call, &span, "token count").await;
        span.record("outcome", if output.is_ok() { "ok" } else { "error" });
        match output {
            Ok(output) => {
                let tokens = output.input_tokens().max(0) as u64;
                span.record("input_tokens", tokens);
                tracing::debug!(
                    operation = "CountTokens",
                    model_id = %counter,
                    latency_ms = millis(started),
                    input_tokens = tokens,
                    "prompt counted"
                );
                Ok(Some(tokens))
            }
            Err(e) if cannot_count(&e) => {
                self.counting.store(false, Ordering::Relaxed);
                tracing::warn!(
                    model_id = %counter,
                    error = %e,
                    "the model cannot count tokens here: the estimate decides from now on"
                );
                Ok(None)
            }
            // The core logs it, with what follows from it.
            Err(e) => Err(e),
        }
    }

    async fn converse(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let started = Instant::now();
        let span = call_span!("model.converse", request);
        let call = asked!(self.client.converse(), request)
            .set_guardrail_config(guardrail(request))
            .send();
        let output = self.within(call, &span, "answer").await;
        span.record("outcome", if output.is_ok() { "ok" } else { "error" });
        let output = output.map_err(|e| failed("Converse", request, started, e))?;
        let mut text = String::new();
        let mut citations = Vec::new();
        let mut reasoning = String::new();
        let mut reasoning_redacted = false;
        let mut reasoning_blocks = Vec::new();
        let mut tool_calls = Vec::new();
        if let Some(ConverseOutput::Message(m)) = output.output() {
            for block in m.content() {
                match block {
                    ContentBlock::Text(t) => text.push_str(t),
                    ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(r)) => {
                        reasoning.push_str(r.text());
                        if let Some(signature) = r.signature() {
                            reasoning_blocks
                                .push(chat_core::ReasoningBlock::signed(r.text(), signature));
                        }
                    }
                    ContentBlock::ReasoningContent(ReasoningContentBlock::RedactedContent(
                        bytes,
                    )) => {
                        reasoning_redacted = true;
                        reasoning_blocks
                            .push(chat_core::ReasoningBlock::redacted(bytes.as_ref().to_vec()));
                    }
                    // Cited text: the citations follow the text they support.
                    ContentBlock::CitationsContent(cited) => {
                        for generated in cited.content() {
                            if let Ok(t) = generated.as_text() {
                                text.push_str(t);
                            }
                        }
                        citations.extend(cited.citations().iter().filter_map(|c| {
                            cited_result(c.location()).map(|source| ReplyCitation {
                                at: text.len(),
                                source,
                            })
                        }));
                    }
                    ContentBlock::ToolUse(call) => tool_calls.push(ToolCall {
                        id: call.tool_use_id().to_string(),
                        name: call.name().to_string(),
                        input: match json_value(call.input()) {
                            input @ serde_json::Value::Object(_) => input,
                            // Null when the model sent no input; anything else as a malformed streamed input is.
                            serde_json::Value::Null => tool_input(call.name(), ""),
                            other => tool_input(call.name(), &other.to_string()),
                        },
                    }),
                    _ => {}
                }
            }
        }
        let reply = ModelReply {
            text,
            stop_reason: stop_reason(output.stop_reason()),
            usage: output.usage().map(usage).unwrap_or_default(),
            citations,
            reasoning,
            reasoning_redacted,
            guardrail: output
                .trace()
                .and_then(|t| t.guardrail())
                .map(guardrail_trace),
            served: served(output.performance_config(), output.service_tier()),
            tool_calls,
            reasoning_blocks,
        };
        span.record("input_tokens", reply.usage.input_tokens);
        span.record("output_tokens", reply.usage.output_tokens);
        tracing::info!(
            operation = "Converse",
            model_id = %request.model_id,
            latency_ms = millis(started),
            model_latency_ms = output.metrics().map(|m| m.latency_ms()),
            input_tokens = reply.usage.input_tokens,
            output_tokens = reply.usage.output_tokens,
            cache_read_input_tokens = reply.usage.cache_read_input_tokens,
            cache_write_input_tokens = reply.usage.cache_write_input_tokens,
            stop_reason = ?reply.stop_reason,
            tool_calls = reply.tool_calls.len(),
            "model answered"
        );
        Ok(reply)
    }

    async fn converse_stream(&self, request: &ModelRequest) -> Result<BedrockStream, ModelError> {
        let started = Instant::now();
        let span = call_span!("model.converse_stream", request);
        let guardrail = request.guardrail.as_ref().map(|g| {
            GuardrailStreamConfiguration::builder()
                .guardrail_identifier(&g.id)
                .guardrail_version(&g.version)
                .trace(GuardrailTrace::Enabled)
                .stream_processing_mode(if g.stream_async {
                    GuardrailStreamProcessingMode::Async
                } else {
                    GuardrailStreamProcessingMode::Sync
                })
                .build()
        });
        let call = asked!(self.client.converse_stream(), request)
            .set_guardrail_config(guardrail)
            .send();
        // Opening the stream counts towards the wait for the first text.
        let output = self.within(call, &span, "first text").await.map_err(|e| {
            span.record("outcome", "error");
            failed("ConverseStream", request, started, e)
        })?;
        Ok(BedrockStream {
            receiver: output.stream,
            span,
            model_id: request.model_id.clone(),
            started,
            first_text_ms: None,
            timeout: self.timeout,
            pending: std::collections::VecDeque::new(),
            tool_blocks: std::collections::BTreeMap::new(),
            tool_calls: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_input_that_is_empty_or_not_an_object_is_called_with_an_empty_object() {
        let call = |raw: &str| {
            PendingCall {
                id: "tooluse_1".into(),
                name: "add".into(),
                input: raw.into(),
            }
            .finish()
        };
        assert_eq!(
            call(r#"{"a": 2, "b": [1.5, -3, null, true, "x"]}"#).input,
            serde_json::json!({"a": 2, "b": [1.5, -3, null, true, "x"]})
        );
        for raw in ["", "  ", r#"{"a": 2"#, "[1, 2]", "5", "null"] {
            assert_eq!(call(raw).input, serde_json::json!({}), "{raw:?}");
        }
    }

    #[test]
    fn json_goes_to_a_document_and_back_unchanged() {
        let value = serde_json::json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": -5, "maximum": 18446744073709551615_u64}},
            "weights": [0.25, 1e-3],
            "none": null,
            "on": false,
        });
        assert_eq!(json_value(&document(&value)), value);
        assert_eq!(
            json_value(&Document::Number(Number::Float(f64::NAN))),
            serde_json::Value::Null
        );
    }

    fn message(role: chat_core::Role, texts: &[&str]) -> chat_core::ModelMessage {
        chat_core::ModelMessage::text(role, texts.iter().map(|t| t.to_string()).collect())
    }

    #[test]
    fn results_go_first_and_calls_last_and_blank_texts_beside_them_go_nowhere() {
        let call = ToolCall {
            id: "tooluse_1".into(),
            name: "add".into(),
            input: serde_json::json!({"a": 1}),
        };
        let request = ModelRequest {
            messages: vec![
                message(chat_core::Role::User, &["Add"]),
                chat_core::ModelMessage {
                    tool_uses: vec![call.clone()],
                    ..message(chat_core::Role::Assistant, &["Adding.", " "])
                },
                chat_core::ModelMessage {
                    tool_results: vec![chat_core::ToolResult {
                        id: call.id.clone(),
                        text: "1".into(),
                        status: ToolStatus::Error,
                    }],
                    ..message(chat_core::Role::User, &["", "And then?"])
                },
            ],
            tools: vec![chat_core::ToolSpec {
                strict: false,
                name: "add".into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            ..ModelRequest::default()
        };
        let sent = messages(&request).unwrap();
        let assistant = sent[1].content();
        assert_eq!(assistant.len(), 2, "{assistant:?}");
        assert_eq!(assistant[0].as_text().unwrap(), "Adding.");
        let tool_use = assistant[1].as_tool_use().unwrap();
        assert_eq!(
            (tool_use.tool_use_id(), tool_use.name()),
            ("tooluse_1", "add")
        );
        assert_eq!(json_value(tool_use.input()), call.input);
        let user = sent[2].content();
        assert_eq!(user.len(), 2, "{user:?}");
        let result = user[0].as_tool_result().unwrap();
        assert_eq!(result.tool_use_id(), "tooluse_1");
        assert_eq!(result.status(), Some(&ToolResultStatus::Error));
        assert_eq!(result.content()[0].as_text().unwrap(), "1");
        assert_eq!(user[1].as_text().unwrap(), "And then?");

        // An empty description is left out: Bedrock refuses it.
        let config = tool_config(&request).unwrap().unwrap();
        let spec = config.tools()[0].as_tool_spec().unwrap();
        assert_eq!(spec.description(), None);
        assert!(tool_config(&ModelRequest::default()).unwrap().is_none());
    }

    #[test]
    fn a_model_that_cannot_count_or_a_role_that_may_not_stops_counting_and_nothing_else_does() {
        let refused = classify_code(
            Some("ValidationException"),
            "The provided model doesn't support counting tokens.",
        );
        assert!(cannot_count(&refused));
        assert!(cannot_count(&classify_code(
            Some("AccessDeniedException"),
            "not authorized to perform: bedrock:CountTokens"
        )));
        for passing in [
            classify_code(Some("ThrottlingException"), "slow down"),
            classify_code(Some("ValidationException"), "messages: malformed"),
            classify_code(Some("ServiceUnavailableException"), "try again"),
            silent(Duration::from_secs(1), "token count"),
        ] {
            assert!(!cannot_count(&passing), "{passing:?}");
        }
    }
}
