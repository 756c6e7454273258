//! OpenAI's Chat Completions API on the chat functions: `POST /v1/chat/completions`, `GET /v1/models` and
//! `GET /v1/models/{id}`, every fault in OpenAI's error shape. The streaming function answers `stream: true` as
//! server-sent events, each chunk written and flushed as the model produces it; the buffered function answers the
//! rest and refuses `stream: true`, naming where to send it. A completion is the same turn as every route's (its
//! meter under the route `/v1/chat/completions`), stateless, with the client's `user` and `metadata` in its span,
//! for the exported trace only: they are the body's text, which no log line holds (`chat_runtime::TRACE_ONLY`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{any, get, post};
use chat_core::{ChatError, ChatModel, SessionStore};
use chat_edge::{
    ApiError, Arrived, CallerAnd, CompletionBody, Identified, error_response_in, json_response,
    only_in,
};
use chat_protocol::openai::{ChunkEvents, CompletionRequest, Model, ModelList, OpenAiErrors};

use super::{ChatState, Serving};

/// The route a completion's metrics name.
const ROUTE: &str = "/v1/chat/completions";

/// The header that names what of a completion request was not applied as sent: a parameter left out by its name
/// (`top_p` beside `temperature` for a model that takes one of them, `top_k` for a model that takes none, a vendor
/// parameter), an answer's length held to the model's limit or the operator's ceiling as `max_tokens=N`.
const IGNORED_PARAMETERS: HeaderName = HeaderName::from_static("x-ignored-parameters");

/// The state every route here holds.
type AppState<M, St> = State<Arc<ChatState<M, St>>>;

/// The routes of OpenAI's API on a chat function: `stream: true` answered as server-sent events where `serving`
/// streams, refused where it answers whole.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
) -> Router {
    let completions =
        move |app: AppState<M, St>,
              arrived: Arrived,
              request: Result<CallerAnd<CompletionBody>, ApiError>| async move {
            completions(app, arrived, request, serving).await
        };
    Router::new()
        .route(
            "/v1/chat/completions",
            only_in::<OpenAiErrors, _>("POST", post(completions)),
        )
        .route(
            "/v1/models",
            only_in::<OpenAiErrors, _>("GET", get(list_models)),
        )
        // A model id may be an ARN, slashes and all.
        .route(
            "/v1/models/{*id}",
            only_in::<OpenAiErrors, _>("GET", get(one_model)),
        )
        // Any other path of OpenAI's API is OpenAI's 404.
        .route("/v1/{*rest}", any(super::unknown::<OpenAiErrors>))
        .with_state(state.clone())
}

/// Every model a request may name, with what it does and the prices its cost is counted by: the chat models first
/// (the configured prices for `MODEL_ID`, each other model's list prices; the longest answer it gives, its model's
/// output limit under the operator's ceiling), then the embedding models.
fn models<M: ChatModel + 'static, St: SessionStore>(app: &ChatState<M, St>) -> Vec<Model> {
    let settings = app.service.settings();
    let mut ids: Vec<&str> = vec![settings.model_id.as_str()];
    ids.extend(
        settings
            .allowed_models
            .iter()
            .map(String::as_str)
            .filter(|id| *id != settings.model_id),
    );
    ids.into_iter()
        .map(|id| {
            let (prices, profile) = if id == settings.model_id {
                (settings.model.prices, settings.model.profile)
            } else {
                let profile = chat_core::ModelProfile::of(id);
                (profile.prices, profile)
            };
            let longest = settings
                .limits
                .output_ceiling
                .map_or(profile.max_output_tokens, |c| {
                    c.min(profile.max_output_tokens)
                });
            Model::new(id, prices.as_ref()).with_limits(longest, profile.context_window)
        })
        // The embedding models `/v1/embeddings` takes, with their input prices and bound on a request.
        .chain(
            app.embedding_models
                .ids()
                .iter()
                .map(|id| Model::embeddings(id, app.embedding_models.allowed(id))),
        )
        .collect()
}

async fn list_models<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    headers: axum::http::HeaderMap,
    caller: Result<Identified, ApiError>,
) -> Response {
    // Anthropic's SDKs and Claude Code list models at the same path, in Anthropic's shape.
    if super::anthropic::speaks_anthropic(&headers) {
        return match caller {
            Ok(_) => json_response(StatusCode::OK, &super::anthropic::model_page(&app)),
            Err(e) => error_response_in::<chat_protocol::anthropic::AnthropicErrors>(&e),
        };
    }
    match caller {
        Ok(_) => json_response(StatusCode::OK, &ModelList::new(models(&app))),
        Err(e) => error_response_in::<OpenAiErrors>(&e),
    }
}

async fn one_model<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    headers: axum::http::HeaderMap,
    caller: Result<Identified, ApiError>,
    Path(id): Path<String>,
) -> Response {
    if super::anthropic::speaks_anthropic(&headers) {
        return match caller {
            Ok(_) => super::anthropic::one_model(&app, &id),
            Err(e) => error_response_in::<chat_protocol::anthropic::AnthropicErrors>(&e),
        };
    }
    if let Err(e) = caller {
        return error_response_in::<OpenAiErrors>(&e);
    }
    match models(&app).into_iter().find(|m| m.id == id) {
        Some(model) => json_response(StatusCode::OK, &model),
        None => error_response_in::<OpenAiErrors>(&ApiError::Chat(ChatError::ModelNotFound(id))),
    }
}

/// The span a completion's turn runs in: the client's `user` (and `safety_identifier`, `prompt_cache_key`) and
/// `metadata`, recorded in the turn's exported trace and on no log line (`trace_only.…`: the body's text); the model
/// when it is one the operator allows (`model`, else none: a name the client made up is the body's text too).
fn completion_span(request: &CompletionRequest, model: Option<&str>) -> tracing::Span {
    let metadata = (!request.metadata.is_empty())
        .then(|| serde_json::Value::Object(request.metadata.clone()).to_string());
    tracing::info_span!(
        "chat.completion",
        model,
        stream = request.stream,
        trace_only.user = request.completion.user.as_deref(),
        trace_only.safety_identifier = request.safety_identifier.as_deref(),
        trace_only.prompt_cache_key = request.prompt_cache_key.as_deref(),
        trace_only.metadata = metadata.as_deref(),
    )
}

async fn completions<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<CompletionBody>, ApiError>,
    serving: Serving,
) -> Response {
    let (caller, mut request) = match app.arrived(serving, ROUTE, arrived, request) {
        Ok(CallerAnd(caller, CompletionBody(request))) => (caller, request),
        Err(e) => return error_response_in::<OpenAiErrors>(&e),
    };
    let (allowed, meter) = app.model_meter(serving, ROUTE, arrived, &request.model);
    let span = completion_span(&request, allowed);
    if let Err(e) = serving.whole_only(request.stream, ROUTE) {
        return super::refuse::<OpenAiErrors>(meter, e);
    }
    // The completion as its model takes it (a model the operator does not allow is refused below): what was left
    // out or held is named in the answer's header, beside the vendor parameters taken unapplied.
    let mut ignored = std::mem::take(&mut request.ignored);
    if let Ok(settings) = app.service.completion_settings(&request.completion) {
        ignored.extend(
            request
                .completion
                .fit(&settings.model.profile, settings.limits.output_ceiling),
        );
    }
    let encoder = ChunkEvents::new(request.model.clone(), request.include_usage);
    let answered = app
        .complete(
            caller,
            &request.turn,
            &request.completion,
            request.stream,
            encoder,
            meter,
            span,
        )
        .await;
    let mut response = answered.unwrap_or_else(|e| error_response_in::<OpenAiErrors>(&e));
    if !ignored.is_empty()
        && let Ok(value) = HeaderValue::from_str(&ignored.join(", "))
    {
        response.headers_mut().insert(IGNORED_PARAMETERS, value);
    }
    response
}
