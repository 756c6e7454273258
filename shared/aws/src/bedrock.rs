//! The model port on Amazon Bedrock's Converse API.

use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseError;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseOutput, GuardrailConfiguration, InferenceConfiguration,
    Message, StopReason as BedrockStop, SystemContentBlock,
};
use aws_smithy_types::timeout::TimeoutConfig;
use chat_core::{ChatModel, ModelError, ModelReply, ModelRequest, StopReason};
use chat_protocol::TokenUsage;

/// Bedrock as the chat model; holds one SDK client, built once per cold start.
#[derive(Clone)]
pub struct BedrockModel {
    client: Client,
}

impl BedrockModel {
    /// A client from the shared AWS configuration; `timeout` bounds each call until the model starts answering.
    pub fn new(config: &aws_config::SdkConfig, timeout: Duration) -> Self {
        let conf = aws_sdk_bedrockruntime::config::Builder::from(config)
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_attempt_timeout(timeout)
                    .build(),
            )
            .build();
        Self {
            client: Client::from_conf(conf),
        }
    }

    pub fn from_client(client: Client) -> Self {
        Self { client }
    }
}

fn messages(request: &ModelRequest) -> Result<Vec<Message>, ModelError> {
    request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                chat_protocol::Role::User => ConversationRole::User,
                chat_protocol::Role::Assistant => ConversationRole::Assistant,
            };
            m.texts
                .iter()
                .fold(Message::builder().role(role), |b, t| {
                    b.content(ContentBlock::Text(t.clone()))
                })
                .build()
                .map_err(|e| ModelError::Rejected(e.to_string()))
        })
        .collect()
}

fn inference(request: &ModelRequest) -> InferenceConfiguration {
    let i = &request.inference;
    InferenceConfiguration::builder()
        .max_tokens(i32::try_from(i.max_tokens).unwrap_or(i32::MAX))
        .set_temperature(i.temperature.map(|t| t as f32))
        .set_top_p(i.top_p.map(|p| p as f32))
        .build()
}

fn guardrail(request: &ModelRequest) -> Option<GuardrailConfiguration> {
    request.guardrail.as_ref().map(|g| {
        GuardrailConfiguration::builder()
            .guardrail_identifier(&g.id)
            .guardrail_version(&g.version)
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

/// Classifies an SDK error; what a service error said goes into the variant (for the log), never to the client.
pub(crate) fn classify<E, R>(
    err: SdkError<E, R>,
    service: impl FnOnce(&E) -> Option<ModelError>,
) -> ModelError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match &err {
        SdkError::ServiceError(ctx) => {
            let e = ctx.err();
            let message = e.message().unwrap_or_default().to_string();
            if let Some(known) = service(e) {
                return known;
            }
            match e.code() {
                Some("ThrottlingException") => ModelError::Throttled,
                Some("ValidationException") if says_too_long(&message) => {
                    ModelError::InputTooLong(message)
                }
                Some(code) => ModelError::Failed(format!("{code}: {message}")),
                None => ModelError::Failed(format!("{err:?}")),
            }
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

fn converse_error(e: &ConverseError) -> Option<ModelError> {
    let msg = |m: Option<&str>| m.unwrap_or_default().to_string();
    Some(match e {
        ConverseError::ThrottlingException(_) => ModelError::Throttled,
        ConverseError::ValidationException(v) if says_too_long(v.message().unwrap_or("")) => {
            ModelError::InputTooLong(msg(v.message()))
        }
        ConverseError::ValidationException(v) => ModelError::Rejected(msg(v.message())),
        ConverseError::AccessDeniedException(v) => ModelError::AccessDenied(msg(v.message())),
        ConverseError::ResourceNotFoundException(v) => ModelError::NotFound(msg(v.message())),
        ConverseError::ModelTimeoutException(v) => ModelError::Timeout(msg(v.message())),
        ConverseError::ModelErrorException(v) => ModelError::Failed(msg(v.message())),
        ConverseError::ModelNotReadyException(v) => ModelError::Unavailable(msg(v.message())),
        ConverseError::ServiceUnavailableException(v) => ModelError::Unavailable(msg(v.message())),
        ConverseError::InternalServerException(v) => ModelError::Failed(msg(v.message())),
        _ => return None,
    })
}

impl ChatModel for BedrockModel {
    async fn converse(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let output = self
            .client
            .converse()
            .model_id(&request.model_id)
            .system(SystemContentBlock::Text(request.system.clone()))
            .set_messages(Some(messages(request)?))
            .inference_config(inference(request))
            .set_guardrail_config(guardrail(request))
            .send()
            .await
            .map_err(|e| classify(e, converse_error))?;
        let text = match output.output() {
            Some(ConverseOutput::Message(m)) => m
                .content()
                .iter()
                .filter_map(|b| b.as_text().ok().cloned())
                .collect::<Vec<_>>()
                .concat(),
            _ => String::new(),
        };
        let usage = output
            .usage()
            .map_or_else(TokenUsage::default, |u| TokenUsage {
                input_tokens: u.input_tokens().max(0) as u64,
                output_tokens: u.output_tokens().max(0) as u64,
                total_tokens: u.total_tokens().max(0) as u64,
            });
        Ok(ModelReply {
            text,
            stop_reason: stop_reason(output.stop_reason()),
            usage,
        })
    }
}
