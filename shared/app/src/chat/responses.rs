//! OpenAI's Responses API on the chat functions: `POST /v1/responses`, every fault in OpenAI's error shape. The
//! streaming function answers `stream: true` as OpenAI's typed server-sent events, each written and flushed as the
//! model produces it; the buffered function answers the rest and refuses `stream: true`, naming where to send it. A
//! response is the same turn as every route's (its meter under the route `/v1/responses`), with the client's `user`,
//! `metadata` and `client_metadata` in its span for the exported trace only. OpenAI's hosted tools offered in
//! `tools` are not given to the model, and are named in the answer's `x-ignored-tools` header.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::http::HeaderValue;
use axum::response::Response;
use axum::routing::post;
use chat_core::{ChatModel, InvalidRequest, SessionStore};
use chat_edge::{
    ApiError, Arrived, CallerAnd, ChatEdgeState, error_response_in, only_in, read_json_body,
};
use chat_protocol::openai::OpenAiErrors;
use chat_protocol::responses::{
    ResponseContext, ResponseEvents, ResponsesRequest, parse_responses_request,
};
use chat_runtime::TurnMeter;
use tracing::Instrument;

use super::{ChatState, Serving};

/// The route a response's metrics name.
const ROUTE: &str = "/v1/responses";

/// The header that names the hosted tools offered and left out.
pub const IGNORED_TOOLS_HEADER: &str = "x-ignored-tools";

type AppState<M, St> = State<Arc<ChatState<M, St>>>;

/// A Responses request: JSON within the larger of the state's JSON and upload limits (its images and files come
/// inside it, in base64), parsed strictly ([`parse_responses_request`]).
pub(crate) struct ResponsesBody(pub ResponsesRequest);

impl<S: ChatEdgeState> FromRequest<S> for ResponsesBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let limit = state.max_body_bytes().max(state.max_upload_bytes());
        let body = read_json_body(&parts.headers, body, limit).await?;
        Ok(ResponsesBody(parse_responses_request(
            &body,
            state.request_limits(),
        )?))
    }
}

/// The routes of the Responses API on a chat function: `stream: true` answered as events where `serving` streams,
/// refused where it answers whole.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
) -> Router {
    let create = move |app: AppState<M, St>,
                       arrived: Arrived,
                       request: Result<CallerAnd<ResponsesBody>, ApiError>| async move {
        create(app, arrived, request, serving).await
    };
    Router::new()
        .route(
            "/v1/responses",
            only_in::<OpenAiErrors, _>("POST", post(create)),
        )
        .with_state(state.clone())
}

/// The span a response's turn runs in: the client's `user`, `safety_identifier`, `prompt_cache_key`, `metadata`
/// and `client_metadata`, recorded in the turn's exported trace and on no log line (`trace_only.…`); the model when
/// it is one the operator allows.
fn response_span(request: &ResponsesRequest, model: Option<&str>) -> tracing::Span {
    let json = |map: &serde_json::Map<String, serde_json::Value>| {
        (!map.is_empty()).then(|| serde_json::Value::Object(map.clone()).to_string())
    };
    let metadata = json(&request.echo.metadata);
    let client_metadata = json(&request.client_metadata);
    tracing::info_span!(
        "chat.response",
        model,
        stream = request.stream,
        store = request.store,
        trace_only.user = request.completion.user.as_deref(),
        trace_only.safety_identifier = request.echo.safety_identifier.as_deref(),
        trace_only.prompt_cache_key = request.echo.prompt_cache_key.as_deref(),
        trace_only.metadata = metadata.as_deref(),
        trace_only.client_metadata = client_metadata.as_deref(),
    )
}

async fn create<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    Arrived(at): Arrived,
    request: Result<CallerAnd<ResponsesBody>, ApiError>,
    serving: Serving,
) -> Response {
    let settings = app.service.settings();
    let (caller, request) = match request {
        Ok(CallerAnd(caller, ResponsesBody(request))) => (caller, request),
        Err(e) => {
            TurnMeter::start_at(serving.function, ROUTE, &settings.model_id, at).fail(&e);
            return error_response_in::<OpenAiErrors>(&e);
        }
    };
    // The metrics name the model only when it is one the operator allows: a client's string is no dimension.
    let allowed = settings
        .allowed_models
        .contains(&request.model)
        .then_some(request.model.as_str());
    let meter = TurnMeter::start_at(
        serving.function,
        ROUTE,
        allowed.unwrap_or(&settings.model_id),
        at,
    );
    let span = response_span(&request, allowed);
    let refuse = |e: ApiError, meter: TurnMeter| {
        meter.fail(&e);
        error_response_in::<OpenAiErrors>(&e)
    };
    if request.stream && !serving.streams {
        let e = ApiError::from(InvalidRequest::new(
            "stream",
            "this function answers whole: send stream: true to POST /v1/responses on the streaming chat \
             function's URL (ChatStreamFunctionUrl, or the distribution's /v1/*, which routes there)",
        ));
        return refuse(e, meter);
    }
    if request.previous_response_id.is_some() {
        let e = ApiError::from(InvalidRequest::new(
            "previous_response_id",
            "is not supported by this backend yet: send the whole conversation in input",
        ));
        return refuse(e, meter);
    }
    let encoder = ResponseEvents::new(ResponseContext::of(&request));
    let (turn, completion) = (&request.turn, &request.completion);
    let answered = async {
        if request.stream {
            let turn = app.service.complete_stream(&caller, turn, completion).await;
            app.deliver(caller, turn, encoder, true, meter, span.clone())
                .await
        } else {
            let turn = app.service.complete_whole(&caller, turn, completion).await;
            app.deliver(caller, turn, encoder, false, meter, span.clone())
                .await
        }
    }
    .instrument(span.clone())
    .await;
    let mut response = answered.unwrap_or_else(|e| error_response_in::<OpenAiErrors>(&e));
    if !request.ignored_tools.is_empty()
        && let Ok(value) = HeaderValue::from_str(&request.ignored_tools.join(", "))
    {
        response.headers_mut().insert(IGNORED_TOOLS_HEADER, value);
    }
    response
}
