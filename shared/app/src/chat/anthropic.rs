//! Anthropic's Messages API on the chat functions: `POST /v1/messages` (whole, and `stream: true` as Anthropic's
//! server-sent events on the streaming function), `POST /v1/messages/count_tokens`, and `GET /v1/models` in
//! Anthropic's shape for a client that sends `anthropic-version` ([`model_page`], answered by the OpenAI routes'
//! handlers, which own that path); every fault in Anthropic's error shape. A message is the same turn as every
//! route's (admitted, reserved, settled; its meter under the route `/v1/messages`), stateless: nothing is stored
//! in history, and the signed reasoning goes to the client, which gives it back. The client's `metadata.user_id`
//! is in the turn's span for the exported trace only (`chat_runtime::TRACE_ONLY`). What the request asked that is
//! accepted without effect, and a `max_tokens` clamped, are named in the response's headers.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{any, post};
use chat_core::{ChatError, ChatModel, SessionStore};
use chat_edge::{
    ApiError, Arrived, CallerAnd, CountTokensBody, MessagesBody, error_response_in, json_response,
    only_in,
};
use chat_protocol::anthropic::{
    AnthropicErrors, MessageEvents, MessagesRequest, ModelInfo, ModelPage, TokenCount,
};
use chat_runtime::TurnMeter;

use super::{ChatState, Serving};

/// The route a message's metrics name.
const ROUTE: &str = "/v1/messages";

/// The Bedrock model that answered (the request names Anthropic's name, which the answer echoes).
pub(crate) const MODEL_HEADER: &str = "x-chat-model";
/// What the request asked that is accepted without effect here (comma-separated, by field).
pub(crate) const ACCEPTED_HEADER: &str = "x-chat-accepted-unused";
/// `max_tokens` as asked and the most this deployment writes, when it asked for more (`128000 to 32000`).
pub(crate) const CLAMPED_HEADER: &str = "x-chat-max-tokens-clamped";
/// Whether a count is `exact` (Bedrock's `CountTokens`) or an `estimate`.
pub(crate) const COUNT_HEADER: &str = "x-chat-token-count";

type AppState<M, St> = State<Arc<ChatState<M, St>>>;

/// The routes of Anthropic's Messages API on a chat function: `stream: true` answered as server-sent events where
/// `serving` streams, refused where it answers whole.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
) -> Router {
    let create = move |app: AppState<M, St>,
                       arrived: Arrived,
                       headers: HeaderMap,
                       request: Result<CallerAnd<MessagesBody>, ApiError>| async move {
        messages(app, arrived, headers, request, serving).await
    };
    Router::new()
        .route(
            "/v1/messages",
            only_in::<AnthropicErrors, _>("POST", post(create)),
        )
        .route(
            "/v1/messages/count_tokens",
            only_in::<AnthropicErrors, _>("POST", post(count_tokens)),
        )
        // Any other path under the Messages API is Anthropic's 404.
        .route(
            "/v1/messages/{*rest}",
            any(super::unknown::<AnthropicErrors>),
        )
        .with_state(state.clone())
}

/// Whether a request speaks Anthropic's API (its SDKs and Claude Code send `anthropic-version` on every request).
pub(crate) fn speaks_anthropic(headers: &HeaderMap) -> bool {
    headers.contains_key("anthropic-version")
}

/// The models as Anthropic's `GET /v1/models` lists them: the names of the operator's table that an allowed model
/// answers, then every allowed model by its Bedrock id.
pub(crate) fn model_page<M: ChatModel + 'static, St: SessionStore>(
    app: &ChatState<M, St>,
) -> ModelPage {
    let allowed = &app.service.settings().allowed_models;
    let names = app
        .anthropic_model_names
        .names()
        .filter(|name| app.anthropic_model_names.resolve(name, allowed).is_some())
        .map(ModelInfo::new);
    ModelPage::new(names.chain(allowed.iter().map(ModelInfo::new)).collect())
}

/// One model of [`model_page`], by its name or id, or an Anthropic 404.
pub(crate) fn one_model<M: ChatModel + 'static, St: SessionStore>(
    app: &ChatState<M, St>,
    id: &str,
) -> Response {
    let allowed = &app.service.settings().allowed_models;
    match app.anthropic_model_names.resolve(id, allowed) {
        Some(_) => json_response(StatusCode::OK, &ModelInfo::new(id)),
        None => error_response_in::<AnthropicErrors>(&ApiError::Chat(ChatError::ModelNotFound(
            id.to_string(),
        ))),
    }
}

/// The request's model resolved to the allowed Bedrock model that answers it, set on its completion.
fn resolve<M: ChatModel + 'static, St: SessionStore>(
    app: &ChatState<M, St>,
    request: &mut MessagesRequest,
) -> Result<String, ApiError> {
    let allowed = &app.service.settings().allowed_models;
    let id = app
        .anthropic_model_names
        .resolve(&request.model, allowed)
        .ok_or_else(|| ApiError::Chat(ChatError::ModelNotFound(request.model.clone())))?;
    request.completion.model_id = Some(id.clone());
    Ok(id)
}

/// `anthropic-beta` values, accepted and named: Bedrock's Converse takes no beta flags for these routes.
fn betas(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|b| format!("anthropic-beta={b}"))
        .collect()
}

fn set_header(response: &mut Response, name: &'static str, value: &str) {
    // A value a header cannot carry is left out rather than failing the answer.
    if let Ok(value) = HeaderValue::from_str(value) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
}

async fn messages<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    headers: HeaderMap,
    request: Result<CallerAnd<MessagesBody>, ApiError>,
    serving: Serving,
) -> Response {
    let (caller, mut request) = match app.arrived(serving, ROUTE, arrived, request) {
        Ok(CallerAnd(caller, MessagesBody(request))) => (caller, request),
        Err(e) => return error_response_in::<AnthropicErrors>(&e),
    };
    let model_id = match app.arrived(serving, ROUTE, arrived, resolve(&app, &mut request)) {
        Ok(id) => id,
        Err(e) => return error_response_in::<AnthropicErrors>(&e),
    };
    let meter = TurnMeter::start_at(serving.function, ROUTE, &model_id, arrived.0);
    let span = tracing::info_span!(
        "anthropic.messages",
        model = %model_id,
        stream = request.stream,
        trace_only.user = request.completion.user.as_deref(),
    );
    if let Err(e) = serving.whole_only(request.stream, ROUTE) {
        return super::refuse::<AnthropicErrors>(meter, e);
    }
    let mut accepted = request.accepted.clone();
    accepted.extend(betas(&headers));
    let encoder = MessageEvents::new(
        request.model.clone(),
        request.completion.stop_sequences.clone(),
    );
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
    let mut response = answered.unwrap_or_else(|e| error_response_in::<AnthropicErrors>(&e));
    set_header(&mut response, MODEL_HEADER, &model_id);
    if let Some(asked) = request.clamped_from {
        let cap = app.service.settings().limits.max_output_tokens;
        set_header(&mut response, CLAMPED_HEADER, &format!("{asked} to {cap}"));
    }
    if !accepted.is_empty() {
        set_header(&mut response, ACCEPTED_HEADER, &accepted.join(", "));
    }
    response
}

/// `POST /v1/messages/count_tokens`: the request's input tokens, counted by Bedrock's `CountTokens` where the
/// model has it (else estimated, and the header says so); uncharged, and no turn is admitted.
async fn count_tokens<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    request: Result<CallerAnd<CountTokensBody>, ApiError>,
) -> Response {
    let mut request = match request {
        Ok(CallerAnd(_, CountTokensBody(request))) => request,
        Err(e) => return error_response_in::<AnthropicErrors>(&e),
    };
    let model_id = match resolve(&app, &mut request) {
        Ok(id) => id,
        Err(e) => return error_response_in::<AnthropicErrors>(&e),
    };
    match app
        .service
        .count_completion(&request.turn, &request.completion)
        .await
    {
        Ok((input_tokens, exact)) => {
            let mut response = json_response(StatusCode::OK, &TokenCount { input_tokens });
            set_header(&mut response, MODEL_HEADER, &model_id);
            set_header(
                &mut response,
                COUNT_HEADER,
                if exact { "exact" } else { "estimate" },
            );
            response
        }
        Err(e) => error_response_in::<AnthropicErrors>(&ApiError::from(e)),
    }
}
