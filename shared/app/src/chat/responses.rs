//! OpenAI's Responses API on the chat functions: `POST /v1/responses`, and the kept responses' `GET` and `DELETE
//! /v1/responses/{id}` and `GET /v1/responses/{id}/input_items`, every fault in OpenAI's error shape. The
//! streaming function answers `stream: true` as OpenAI's typed server-sent events, each written and flushed as the
//! model produces it; the buffered function answers the rest and refuses `stream: true`, naming where to send it. A
//! response is the same turn as every route's (its meter under the route `/v1/responses`), with the client's `user`,
//! `metadata` and `client_metadata` in its span for the exported trace only. OpenAI's hosted tools offered in
//! `tools` are not given to the model, and are named in the answer's `x-ignored-tools` header. A response asked to
//! be kept (`store: true`, the default) is kept under its owner once settled, with the conversation it ends, so
//! that `previous_response_id` continues it (another owner's id is a 404, as one never kept).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use chat_core::{
    Answer, Caller, ChatError, ChatModel, InvalidRequest, KeptResponse, ModelStream, ResponseStore,
    SessionStore, TurnEnd, TurnEvent, TurnOpening, TurnSpent,
};
use chat_edge::{
    ApiError, Arrived, CallerAnd, ChatEdgeState, Identified, error_response_in, json_response,
    only_in, read_dialect_body,
};
use chat_protocol::responses::{
    ResponseContext, ResponseEvents, ResponsesErrors, ResponsesRequest, SealReasoning,
    conversation, in_own_terms, is_reference, parse_responses_request, referenced, whole_response,
};
use chat_protocol::{Encoder, ErrorShape, Fault, FaultKind};
use chat_runtime::TurnMeter;
use serde_json::{Value, json};

use super::write::{Answering, AnsweringWhole, Delivery, InDialect, Started, TurnAnswer};
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
        let body = read_dialect_body(request, state).await?;
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
            only_in::<ResponsesErrors, _>("POST", post(create)),
        )
        .route(
            "/v1/responses/{id}",
            only_in::<ResponsesErrors, _>("GET, DELETE", get(retrieve).delete(delete)),
        )
        .route(
            "/v1/responses/{id}/input_items",
            only_in::<ResponsesErrors, _>("GET", get(input_items)),
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
    arrived: Arrived,
    request: Result<CallerAnd<ResponsesBody>, ApiError>,
    serving: Serving,
) -> Response {
    let (caller, request) = match app.arrived(serving, ROUTE, arrived, request) {
        Ok(CallerAnd(caller, ResponsesBody(request))) => (caller, request),
        Err(e) => return error_response_in::<ResponsesErrors>(&e),
    };
    let (allowed, meter) = app.model_meter(serving, ROUTE, arrived, &request.model);
    let span = response_span(&request, allowed);
    let refuse = |e: ApiError, meter: TurnMeter| super::refuse::<ResponsesErrors>(meter, e);
    if let Err(e) = serving.whole_only(request.stream, ROUTE) {
        return refuse(e, meter);
    }
    let mut request = request;
    if request.deferred {
        match continued(&app, &caller, &mut request).await {
            Ok(()) => {}
            Err(Refusal::Api(e)) => return refuse(e, meter),
            Err(Refusal::NotFound(response)) => {
                meter.fail(&ApiError::NotFound("/v1/responses/{id}".into()));
                return response;
            }
        }
    }
    // Kept only where there is a store to keep it in: the answer says so.
    let keep = match (&app.responses, request.store) {
        (Some(store), true) => Some(store.clone()),
        _ => None,
    };
    request.echo.store = keep.is_some();
    if let Err(e) = open_sealed(&app, &caller, &mut request) {
        return refuse(e, meter);
    }
    // A client that keeps nothing here and asks for the encrypted reasoning keeps the signed reasoning itself,
    // sealed, where the deployment has a key; otherwise the backend keeps it (for a day, or with the response).
    let seal = app
        .reasoning_seal
        .clone()
        .filter(|_| keep.is_none() && request.include_encrypted_reasoning);
    request.completion.client_keeps_reasoning = seal.is_some();
    let mut context = ResponseContext::of(&request);
    context.seal = seal.map(|seal| {
        let owner = caller.owner.clone();
        SealReasoning(Arc::new(move |blocks| seal.seal(&owner, blocks)))
    });
    let encoder = ResponseEvents::new(context.clone());
    let keeping = keep.map(|store| Keeping {
        store,
        owner: caller.owner.clone(),
        context,
        input_items: request.input_items.clone(),
        history: request.history.clone(),
        kept_for: app.responses_kept_for,
    });
    let delivery = KeptOnce {
        dialect: InDialect {
            app: &app,
            encoder,
            meter,
            span: span.clone(),
        },
        keeping,
    };
    let answered = app
        .complete_with(
            caller,
            &request.turn,
            &request.completion,
            request.stream,
            delivery,
            span,
        )
        .await;
    let mut response = answered.unwrap_or_else(|e| error_response_in::<ResponsesErrors>(&e));
    if !request.ignored_tools.is_empty()
        && let Ok(value) = HeaderValue::from_str(&request.ignored_tools.join(", "))
    {
        response.headers_mut().insert(IGNORED_TOOLS_HEADER, value);
    }
    response
}

/// The signed reasoning the client gave back sealed (`encrypted_content`), opened for the completion under the
/// first call it led to; one this deployment did not seal for the caller, or that changed, is a 400 naming it. A
/// deployment without a key takes the field and reads the reasoning it kept instead, as before.
fn open_sealed<M: ChatModel + 'static, St: SessionStore>(
    app: &ChatState<M, St>,
    caller: &Caller,
    request: &mut ResponsesRequest,
) -> Result<(), ApiError> {
    let Some(seal) = &app.reasoning_seal else {
        return Ok(());
    };
    for sealed in &request.sealed_reasoning {
        let blocks = seal.open(&caller.owner, &sealed.sealed).ok_or_else(|| {
            InvalidRequest::new(
                sealed.path.clone(),
                "could not be verified: it was not sealed by this deployment for you, or it changed",
            )
        })?;
        request
            .completion
            .reasoning
            .entry(sealed.call_id.clone())
            .or_default()
            .extend(blocks);
    }
    Ok(())
}

/// Why a request cannot go on: an error as the edge answers it, or a 404 already written.
enum Refusal {
    Api(ApiError),
    NotFound(Response),
}

/// Whether `id` can be a response's id (`resp_` and hex, as [`chat_protocol::responses::response_id`] makes them):
/// any other names nothing kept, and is not looked for (DynamoDB refuses an empty key).
fn is_response_id(id: &str) -> bool {
    id.strip_prefix("resp_").is_some_and(|hex| {
        (1..=64).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// OpenAI's 404 for a response id that names no response of the caller's (never kept, expired, deleted, or another
/// owner's: the same answer), naming `param` when the id came in a field.
fn no_such_response(id: &str, param: Option<&str>) -> Response {
    let fault = Fault {
        status: 404,
        // The id is the client's: quoted, as the body's text.
        message: format!("No response with id {id:?} is kept for you."),
        kind: FaultKind::Other,
        param: param.map(str::to_string),
        retry_after: None,
    };
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(ResponsesErrors::error_body(&fault)))
        .expect("a response built from valid parts")
}

/// The request's conversation read once what it refers to is found: a kept response's items (`item_reference`, as
/// the AI SDK sends them) in place of the references, and after a kept response's conversation when it continues
/// one (`previous_response_id`), then its own input.
async fn continued<M: ChatModel + 'static, St: SessionStore + 'static>(
    app: &ChatState<M, St>,
    caller: &Caller,
    request: &mut ResponsesRequest,
) -> Result<(), Refusal> {
    let store_failed = |e| Refusal::Api(ApiError::Chat(ChatError::Store(e)));
    let mut kept_by_id: HashMap<String, Option<KeptResponse>> = HashMap::new();
    let mut find = async |id: &str| -> Result<Option<KeptResponse>, Refusal> {
        if !kept_by_id.contains_key(id) {
            let kept = match &app.responses {
                Some(_) if !is_response_id(id) => None,
                Some(store) => store
                    .kept_response(&caller.owner, id)
                    .await
                    .map_err(store_failed)?,
                None => None,
            };
            kept_by_id.insert(id.to_string(), kept);
        }
        Ok(kept_by_id[id].clone())
    };
    for (i, item) in request.input_items.iter_mut().enumerate() {
        if !is_reference(item) {
            continue;
        }
        let not_found = || {
            Refusal::Api(ApiError::from(InvalidRequest::new(
                format!("input[{i}].id"),
                "names no item of a response kept for you",
            )))
        };
        let id = item["id"].as_str().ok_or_else(not_found)?.to_string();
        let (response_id, index) = referenced(&id).ok_or_else(not_found)?;
        let kept = find(&response_id).await?.ok_or_else(not_found)?;
        let output = kept.response["output"].get(index).cloned();
        *item = output
            .filter(|o| o["id"] == id.as_str())
            .ok_or_else(not_found)?;
    }
    let mut history = Vec::new();
    if let Some(previous) = request.previous_response_id.clone() {
        let kept = find(&previous).await?.ok_or_else(|| {
            Refusal::NotFound(no_such_response(&previous, Some("previous_response_id")))
        })?;
        history = kept.history;
    }
    let before = history.len();
    history.extend(request.input_items.iter().cloned());
    let (system, messages, sealed_reasoning) = conversation(
        request.echo.instructions.as_deref(),
        &history,
        &app.service.settings().limits,
    )
    .map_err(|e| Refusal::Api(ApiError::Chat(input_at(e, before))))?;
    request.completion.system = system;
    request.turn.messages = messages;
    request.sealed_reasoning = sealed_reasoning
        .into_iter()
        .map(|mut sealed| {
            sealed.path = own_path(&sealed.path, before);
            sealed
        })
        .collect();
    request.history = history;
    Ok(())
}

/// A refusal of the completion's checks, naming its field as Chat Completions spells it (`reasoning_effort` for a
/// model that cannot reason or an effort past `MAX_REASONING_EFFORT`, `response_format`), by the Responses request's
/// own path for it (`reasoning.effort`, `text.format`).
fn own_terms(e: ChatError) -> ChatError {
    match e {
        ChatError::Invalid(mut invalid) => {
            invalid.path = in_own_terms(&invalid.path);
            ChatError::Invalid(invalid)
        }
        e => e,
    }
}

/// Names `input[i]` of a refusal by its place in the request's own input, after `before` kept items.
fn input_at(e: ChatError, before: usize) -> ChatError {
    let ChatError::Invalid(mut invalid) = e else {
        return e;
    };
    invalid.path = own_path(&invalid.path, before);
    ChatError::Invalid(invalid)
}

/// `input[i]…` of the conversation as the place in the request's own input, after `before` kept items.
fn own_path(path: &str, before: usize) -> String {
    if let Some(rest) = path.strip_prefix("input[")
        && let Some((index, tail)) = rest.split_once(']')
        && let Some(own) = index
            .parse::<usize>()
            .ok()
            .and_then(|i| i.checked_sub(before))
    {
        return format!("input[{own}]{tail}");
    }
    path.to_string()
}

/// What keeping a response takes: where, whose, how it is answered, and what it continues.
struct Keeping {
    store: Arc<dyn ResponseStore>,
    owner: String,
    context: ResponseContext,
    input_items: Vec<Value>,
    /// The conversation before this response's output: the kept one's, then this request's input.
    history: Vec<Value>,
    kept_for: std::time::Duration,
}

impl Keeping {
    /// Keeps `response` (its output ends the conversation a continuation starts from).
    async fn keep(&self, response: Value) -> Result<(), ApiError> {
        let mut history = self.history.clone();
        if let Some(output) = response["output"].as_array() {
            history.extend(output.iter().cloned());
        }
        let id = response["id"].as_str().unwrap_or_default().to_string();
        let kept = KeptResponse {
            response,
            input_items: self.input_items.clone(),
            history,
            expires_at: time::OffsetDateTime::now_utc().unix_timestamp()
                + self.kept_for.as_secs() as i64,
        };
        // The answer is settled and the client has most of it: a response that cannot be kept (over DynamoDB's
        // 400 KB item, or the store unavailable) is still answered, and is not found later.
        if let Err(e) = self.store.keep_response(&self.owner, &id, &kept).await {
            tracing::warn!(error = %e, "keeping the response failed: it is answered, and not kept");
        }
        Ok(())
    }
}

/// A response's answer that is kept once settled: the writer's turn answer, with the same `response` object the
/// client gets made beside it (a second encoder whose bytes are dropped), kept before the last bytes go out.
struct Kept<M, St, S> {
    inner: TurnAnswer<M, St, S>,
    /// The shadow of a streamed answer (a whole one's `response` is made from the whole answer).
    shadow: Option<ResponseEvents>,
    keeping: Keeping,
}

impl<M, St, S> Answering for Kept<M, St, S>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    S: ModelStream + 'static,
{
    type Event = TurnEvent;
    type Done = TurnEnd;

    async fn next(&mut self) -> Result<Option<TurnEvent>, ApiError> {
        let event = self.inner.next().await?;
        if let (Some(shadow), Some(event)) = (&mut self.shadow, &event) {
            shadow.event(event.clone());
        }
        Ok(event)
    }

    fn is_answer(event: &TurnEvent) -> bool {
        TurnAnswer::<M, St, S>::is_answer(event)
    }

    async fn settle(&mut self) -> Result<(TurnEnd, Option<TurnSpent>), ApiError> {
        let (end, spent) = self.inner.settle().await?;
        if let Some(shadow) = &mut self.shadow {
            shadow.done(end.clone());
            self.keeping.keep(shadow.response()).await?;
        }
        Ok((end, spent))
    }

    async fn abandon(&mut self) {
        self.inner.abandon().await;
    }

    fn spent_when_failed(&self) -> Option<TurnSpent> {
        self.inner.spent_when_failed()
    }
}

impl<M, St, S> AnsweringWhole for Kept<M, St, S>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    S: ModelStream + 'static,
{
    type Whole = Answer;

    async fn settle_whole(self) -> Result<(Answer, TurnSpent), ApiError> {
        let (answer, spent) = self.inner.settle_whole().await?;
        self.keeping
            .keep(whole_response(&self.keeping.context, &answer))
            .await?;
        Ok((answer, spent))
    }
}

/// A response's answer in its own terms ([`own_terms`]), in its dialect, and kept once settled when `keeping` says
/// where.
struct KeptOnce<'a, M, St> {
    dialect: InDialect<'a, M, St, ResponseEvents>,
    keeping: Option<Keeping>,
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> Delivery for KeptOnce<'_, M, St> {
    async fn deliver<S: ModelStream + 'static>(
        self,
        mut started: Started<S>,
    ) -> Result<Response, ApiError> {
        started.turn = started.turn.map_err(own_terms);
        let Some(keeping) = self.keeping else {
            return self.dialect.deliver(started).await;
        };
        let kept = |inner, opening: Option<&TurnOpening>| {
            // A streamed answer's `response` is made beside it by a shadow encoder; a whole one's, from the whole
            // answer.
            let shadow = opening.map(|opening| {
                let mut shadow = ResponseEvents::new(keeping.context.clone());
                shadow.opening(opening);
                shadow
            });
            Kept {
                inner,
                shadow,
                keeping,
            }
        };
        self.dialect.answer_as(started, kept).await
    }
}

/// The caller's kept response `id`, or the answer that refuses it.
async fn kept<M: ChatModel + 'static, St: SessionStore>(
    app: &ChatState<M, St>,
    caller: Result<Identified, ApiError>,
    id: &str,
) -> Result<(Caller, KeptResponse), Response> {
    let Identified(caller) = caller.map_err(|e| error_response_in::<ResponsesErrors>(&e))?;
    let Some(store) = app.responses.as_ref().filter(|_| is_response_id(id)) else {
        return Err(no_such_response(id, None));
    };
    match store.kept_response(&caller.owner, id).await {
        Ok(Some(kept)) => Ok((caller, kept)),
        Ok(None) => Err(no_such_response(id, None)),
        Err(e) => Err(error_response_in::<ResponsesErrors>(&ApiError::Chat(
            ChatError::Store(e),
        ))),
    }
}

/// `GET /v1/responses/{id}`: the kept `response` object.
async fn retrieve<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    caller: Result<Identified, ApiError>,
    Path(id): Path<String>,
) -> Response {
    match kept(&app, caller, &id).await {
        Ok((_, kept)) => json_response(StatusCode::OK, &kept.response),
        Err(response) => response,
    }
}

/// `DELETE /v1/responses/{id}`: the kept response deleted.
async fn delete<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    caller: Result<Identified, ApiError>,
    Path(id): Path<String>,
) -> Response {
    let Identified(caller) = match caller {
        Ok(caller) => caller,
        Err(e) => return error_response_in::<ResponsesErrors>(&e),
    };
    let Some(store) = app.responses.as_ref().filter(|_| is_response_id(&id)) else {
        return no_such_response(&id, None);
    };
    match store.delete_response(&caller.owner, &id).await {
        Ok(true) => json_response(
            StatusCode::OK,
            &json!({"id": id, "object": "response", "deleted": true}),
        ),
        Ok(false) => no_such_response(&id, None),
        Err(e) => error_response_in::<ResponsesErrors>(&ApiError::Chat(ChatError::Store(e))),
    }
}

/// The most items a page of `input_items` holds, and its default.
const MAX_ITEMS_PAGE: usize = 100;
const DEFAULT_ITEMS_PAGE: usize = 20;

/// `GET /v1/responses/{id}/input_items`: the kept response's input items as a list (`order` `desc` by default, or
/// `asc`; `limit` 1 to 100, 20 by default; `after` an item id), each with its id.
async fn input_items<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    caller: Result<Identified, ApiError>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let (_, kept) = match kept(&app, caller, &id).await {
        Ok(kept) => kept,
        Err(response) => return response,
    };
    let refuse = |param: &str, reason: &str| {
        error_response_in::<ResponsesErrors>(&ApiError::from(InvalidRequest::new(param, reason)))
    };
    let mut items: Vec<Value> = kept
        .input_items
        .into_iter()
        .enumerate()
        .map(|(i, mut item)| {
            if item.get("id").is_none_or(Value::is_null) {
                let hex = id.strip_prefix("resp_").unwrap_or(&id);
                item["id"] = Value::from(format!("in_{hex}{i:03}"));
            }
            if item.get("type").is_none() {
                item["type"] = Value::from("message");
            }
            item
        })
        .collect();
    for name in query.keys() {
        if !matches!(
            name.as_str(),
            "order" | "limit" | "after" | "include[]" | "include"
        ) {
            return refuse(name, "is not a parameter of this list");
        }
    }
    match query.get("order").map(String::as_str) {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(_) => return refuse("order", "must be \"asc\" or \"desc\""),
    }
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => DEFAULT_ITEMS_PAGE,
        Some(Ok(n)) if (1..=MAX_ITEMS_PAGE).contains(&n) => n,
        Some(_) => return refuse("limit", "must be a whole number from 1 to 100"),
    };
    if let Some(after) = query.get("after") {
        match items.iter().position(|item| item["id"] == after.as_str()) {
            Some(at) => {
                items.drain(..=at);
            }
            None => return refuse("after", "names no item of this list"),
        }
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    let first_id = items.first().map(|i| i["id"].clone());
    let last_id = items.last().map(|i| i["id"].clone());
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": items, "first_id": first_id, "last_id": last_id,
            "has_more": has_more}),
    )
}
