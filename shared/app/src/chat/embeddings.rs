//! `POST /v1/embeddings` (OpenAI's embeddings API, issue 40) on both chat functions: the caller known as on every
//! chat route, the request read by the OpenAI dialect, the texts embedded by the chat service (admitted, reserved
//! and settled in the usage ledger as a turn is, metered on route `/v1/embeddings`), and faults in OpenAI's error
//! shape `{"error": {"message", "type", "param", "code"}}`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chat_core::{ChatError, ChatModel, EmbedError, SessionStore, TurnSpent};
use chat_edge::{ApiError, Arrived, CallerAnd, JsonBody, json_response, only};
use chat_protocol::openai::embeddings::{EmbeddingsResponse, parse_embeddings_request};
use chat_runtime::{TurnMeter, TurnOutcome};
use serde_json::json;

use super::ChatState;

/// The route's path, and its name in the metrics.
const ROUTE: &str = "/v1/embeddings";

/// `POST /v1/embeddings` on `state`, metered as `function`'s.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    function: &'static str,
) -> Router {
    Router::new()
        .route(
            ROUTE,
            only(
                "POST",
                post(
                    move |State(app): State<Arc<ChatState<M, St>>>,
                          arrived: Arrived,
                          request: Result<CallerAnd<JsonBody>, ApiError>| async move {
                        app.embeddings(function, arrived, request).await
                    },
                ),
            ),
        )
        .with_state(state.clone())
}

/// Why an embeddings request was not answered, as OpenAI's error renders it.
enum Refusal {
    /// What every route can fail with.
    Api(ApiError),
    /// A model that is not one of `EMBEDDING_MODELS`.
    ModelNotFound(String),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Refusal::Api(e)
    }
}

impl From<EmbedError> for Refusal {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::ModelNotFound(model) => Refusal::ModelNotFound(model),
            EmbedError::Chat(e) => Refusal::Api(ApiError::Chat(e)),
        }
    }
}

impl<M: ChatModel + 'static, St: SessionStore> ChatState<M, St> {
    async fn embeddings(
        &self,
        function: &'static str,
        Arrived(at): Arrived,
        request: Result<CallerAnd<JsonBody>, ApiError>,
    ) -> Response {
        let mut model = String::new();
        let answered = async {
            let CallerAnd(caller, JsonBody(body)) = request?;
            let input = parse_embeddings_request(&body).map_err(ApiError::from)?;
            model.clone_from(&input.request.model);
            if let Some(user) = &input.user {
                tracing::info!(openai_user = %user, "embeddings request");
            }
            let Some(embedder) = self.embedder.as_deref() else {
                return Err(Refusal::ModelNotFound(input.request.model));
            };
            let embeddings = self
                .service
                .embed(embedder, &self.embedding_models, &caller, &input.request)
                .await?;
            let spent = TurnSpent {
                totals: embeddings.usage,
                model_calls: 1,
                tool_calls: 0,
            };
            let answer = EmbeddingsResponse::new(embeddings, input.encoding_format);
            Ok::<_, Refusal>((json_response(StatusCode::OK, &answer), spent))
        }
        .await;
        // A metric's model is one the deployment serves: a client's made-up name would be a dimension of its own.
        if self.embedding_models.allowed(&model).is_none() {
            model.clear();
        }
        let meter = TurnMeter::start_at(function, ROUTE, &model, at);
        match answered {
            Ok((response, spent)) => {
                meter.finish(TurnOutcome::Answered(&spent));
                response
            }
            Err(Refusal::Api(e)) => {
                meter.fail(&e);
                openai_error(&e)
            }
            Err(Refusal::ModelNotFound(model)) => {
                let e = ApiError::NotFound(format!("model {model}"));
                meter.fail(&e);
                error_response(
                    StatusCode::NOT_FOUND,
                    &format!(
                        "The model `{model}` does not exist or is not an embedding model this backend serves{}.",
                        if self.embedding_models.is_empty() {
                            " (embeddings are off here)".to_string()
                        } else {
                            format!(": {}", self.embedding_models.ids().join(", "))
                        }
                    ),
                    "invalid_request_error",
                    Some("model"),
                    Some("model_not_found"),
                    None,
                )
            }
        }
    }
}

// TODO(merge): use the dialect's OpenAI error renderer (shared/protocol/src/openai/error.rs and the edge mapping)
// in place of this minimal one.

/// `e` in OpenAI's error shape, with the status the edge gives it and its `Retry-After`.
fn openai_error(e: &ApiError) -> Response {
    let status = e.status();
    let (kind, param, code) = match e {
        ApiError::Unauthorized(_) => ("invalid_request_error", None, Some("invalid_api_key")),
        ApiError::Chat(ChatError::Invalid(invalid) | ChatError::TooLarge(invalid)) => (
            "invalid_request_error",
            Some(invalid.path.as_str()).filter(|p| !p.is_empty()),
            None,
        ),
        _ if status == StatusCode::TOO_MANY_REQUESTS => {
            ("rate_limit_error", None, Some("rate_limit_exceeded"))
        }
        _ if status.is_server_error() => ("server_error", None, None),
        _ => ("invalid_request_error", None, None),
    };
    let message = match e {
        // The field is `param`; the message says what is wrong with it.
        ApiError::Chat(ChatError::Invalid(invalid) | ChatError::TooLarge(invalid)) => {
            invalid.to_string()
        }
        e => e.public_message(),
    };
    error_response(status, &message, kind, param, code, e.retry_after())
}

fn error_response(
    status: StatusCode,
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
    retry_after: Option<u32>,
) -> Response {
    let mut response = json_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": param, "code": code}}),
    );
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response.into_response()
}
