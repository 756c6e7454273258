//! OpenAI's Chat Completions API on the chat functions: `POST /v1/chat/completions`, `GET /v1/models` and
//! `GET /v1/models/{id}`, every fault in OpenAI's error shape. The streaming function answers `stream: true` as
//! server-sent events, each chunk written and flushed as the model produces it; the buffered function answers the
//! rest and refuses `stream: true`, naming where to send it. A completion is the same turn as every route's (its
//! meter under the route `/v1/chat/completions`), stateless, with the client's `user` and `metadata` in its span,
//! for the exported trace only: they are the body's text, which no log line holds (`chat_runtime::TRACE_ONLY`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{any, get, post};
use bytes::Bytes;
use chat_core::{Caller, ChatError, ChatModel, ChatService, InvalidRequest, SessionStore};
use chat_core::{StreamingTurn, TurnEvent};
use chat_edge::{
    ApiError, Arrived, CallerAnd, CompletionBody, Identified, json_response, only_openai,
    openai_error_body, openai_error_response,
};
use chat_protocol::openai::{
    ChatCompletion, ChatCompletionChunk, ChunkHeader, CompletionRequest, Model, ModelList,
    SSE_DONE, Usage, sse_data,
};
use chat_runtime::{FailureClass, TurnMeter, TurnOutcome};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::ChatState;

/// The route a completion's metrics name.
const ROUTE: &str = "/v1/chat/completions";

/// The state every route here holds.
type AppState<M, St> = State<Arc<ChatState<M, St>>>;

/// How the function answers `stream: true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// As server-sent events (the streaming function, `function` in its metrics).
    Events(&'static str),
    /// Refused: the buffered function, `function` in its metrics.
    Refused(&'static str),
}

/// The routes of OpenAI's API on a chat function that answers `stream: true` as `streaming` says.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    streaming: Streaming,
) -> Router {
    let completions =
        move |app: AppState<M, St>,
              arrived: Arrived,
              request: Result<CallerAnd<CompletionBody>, ApiError>| async move {
            completions(app, arrived, request, streaming).await
        };
    Router::new()
        .route(
            "/v1/chat/completions",
            only_openai("POST", post(completions)),
        )
        .route("/v1/models", only_openai("GET", get(list_models)))
        // A model id may be an ARN, slashes and all.
        .route("/v1/models/{*id}", only_openai("GET", get(one_model)))
        // Any other path of OpenAI's API is OpenAI's 404, as its clients expect it.
        .route("/v1/{*rest}", any(unknown))
        .with_state(state.clone())
}

async fn unknown(uri: axum::http::Uri) -> Response {
    openai_error_response(&ApiError::NotFound(uri.path().to_string()))
}

/// Every model a request may name, with the prices its cost is counted by: the chat models (the configured prices
/// for `MODEL_ID`, each other model's list prices), then the embedding models.
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
            let prices = if id == settings.model_id {
                settings.model.prices
            } else {
                chat_core::ModelProfile::of(id).prices
            };
            Model::new(id, prices.as_ref())
        })
        // The embedding models `/v1/embeddings` takes, with their input prices.
        .chain(app.embedding_models.ids().iter().map(|id| {
            let prices = app
                .embedding_models
                .allowed(id)
                .map(|profile| profile.prices);
            Model::new(id, prices.as_ref())
        }))
        .collect()
}

async fn list_models<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    caller: Result<Identified, ApiError>,
) -> Response {
    match caller {
        Ok(_) => json_response(StatusCode::OK, &ModelList::new(models(&app))),
        Err(e) => openai_error_response(&e),
    }
}

async fn one_model<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    caller: Result<Identified, ApiError>,
    Path(id): Path<String>,
) -> Response {
    if let Err(e) = caller {
        return openai_error_response(&e);
    }
    match models(&app).into_iter().find(|m| m.id == id) {
        Some(model) => json_response(StatusCode::OK, &model),
        None => openai_error_response(&ApiError::Chat(ChatError::ModelNotFound(id))),
    }
}

/// The span a completion's turn runs in: the client's `user` (and `safety_identifier`) and `metadata`, recorded in
/// the turn's exported trace and on no log line (`trace_only.…`: the body's text); the model when it is one the
/// operator allows (`model`, else none: a name the client made up is the body's text too).
fn completion_span(request: &CompletionRequest, model: Option<&str>) -> tracing::Span {
    let metadata = (!request.metadata.is_empty())
        .then(|| serde_json::Value::Object(request.metadata.clone()).to_string());
    tracing::info_span!(
        "chat.completion",
        model,
        stream = request.stream,
        trace_only.user = request.completion.user.as_deref(),
        trace_only.safety_identifier = request.safety_identifier.as_deref(),
        trace_only.metadata = metadata.as_deref(),
    )
}

async fn completions<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    Arrived(at): Arrived,
    request: Result<CallerAnd<CompletionBody>, ApiError>,
    streaming: Streaming,
) -> Response {
    let function = match streaming {
        Streaming::Events(function) | Streaming::Refused(function) => function,
    };
    let settings = app.service.settings();
    let (caller, request) = match request {
        Ok(CallerAnd(caller, CompletionBody(request))) => (caller, request),
        Err(e) => {
            TurnMeter::start_at(function, ROUTE, &settings.model_id, at).fail(&e);
            return openai_error_response(&e);
        }
    };
    // The metrics name the model only when it is one the operator allows: a client's string is no dimension.
    let allowed = settings
        .allowed_models
        .contains(&request.model)
        .then_some(request.model.as_str());
    let meter = TurnMeter::start_at(function, ROUTE, allowed.unwrap_or(&settings.model_id), at);
    let span = completion_span(&request, allowed);
    match (request.stream, streaming) {
        (false, _) => {
            whole(&app.service, caller, request, meter)
                .instrument(span)
                .await
        }
        (true, Streaming::Refused(_)) => {
            let e = ApiError::from(InvalidRequest::new(
                "stream",
                "this function answers whole: send stream: true to POST /v1/chat/completions on the streaming \
                 chat function's URL (ChatStreamFunctionUrl, or the distribution's /v1/*, which routes there)",
            ));
            meter.fail(&e);
            openai_error_response(&e)
        }
        (true, Streaming::Events(_)) => {
            let started = app
                .service
                .complete_stream(&caller, &request.turn, &request.completion)
                .instrument(span.clone())
                .await;
            match started {
                Ok(turn) => events(app.service.clone(), caller, request, turn, meter, span),
                Err(e) => {
                    let e = ApiError::from(e);
                    meter.fail(&e);
                    openai_error_response(&e)
                }
            }
        }
    }
}

/// A completion answered whole: one `chat.completion`.
async fn whole<M: ChatModel + 'static, St: SessionStore>(
    service: &ChatService<M, St>,
    caller: Caller,
    request: CompletionRequest,
    mut meter: TurnMeter,
) -> Response {
    match service
        .complete(&caller, &request.turn, &request.completion)
        .await
    {
        Ok(answer) => {
            meter.first_token();
            meter.finish(TurnOutcome::Answered(&answer.spent));
            json_response(
                StatusCode::OK,
                &ChatCompletion::from_answer(&answer, &request.model),
            )
        }
        Err(e) => {
            let e = ApiError::from(e);
            meter.fail(&e);
            openai_error_response(&e)
        }
    }
}

/// A completion streamed as server-sent events, written by a task of its own as the model answers.
fn events<M: ChatModel + 'static, St: SessionStore + 'static>(
    service: Arc<ChatService<M, St>>,
    caller: Caller,
    request: CompletionRequest,
    turn: StreamingTurn<M::Stream>,
    meter: TurnMeter,
    span: tracing::Span,
) -> Response {
    let header = ChunkHeader {
        id: turn.header.id.clone(),
        created: turn.header.created,
        model: request.model.clone(),
        include_usage: request.include_usage,
    };
    let (tx, body) = super::streamed::line_body();
    tokio::spawn(write_events(service, caller, turn, header, tx, meter).instrument(span));
    super::streamed::event_stream(body)
}

/// Writes the answer chunk by chunk: the role first, then each piece of text, reasoning and each tool call as the
/// model gives it, the finish, the usage when asked for, and `[DONE]`. A fault after the first chunk is an event
/// `{"error": …}` that ends the stream. A failed write means the client went away: the turn is closed with what it
/// spent, and the model is read no further.
async fn write_events<M: ChatModel + 'static, St: SessionStore>(
    service: Arc<ChatService<M, St>>,
    caller: Caller,
    mut turn: StreamingTurn<M::Stream>,
    header: ChunkHeader,
    tx: mpsc::Sender<Bytes>,
    mut meter: TurnMeter,
) {
    if tx
        .send(sse_data(&ChatCompletionChunk::start(&header)).into())
        .await
        .is_err()
    {
        turn.close_unfinished().await;
        meter.finish(TurnOutcome::Abandoned);
        return;
    }
    let mut reasoning = String::new();
    let mut calls = 0u32;
    loop {
        let event = match turn.next().await {
            Ok(Some(TurnEvent::Text(text))) => {
                meter.first_token();
                ChatCompletionChunk::content(&header, text)
            }
            Ok(Some(TurnEvent::Reasoning(piece) | TurnEvent::RedactedReasoning(piece))) => {
                reasoning.push_str(&piece);
                ChatCompletionChunk::reasoning(&header, piece)
            }
            Ok(Some(TurnEvent::ToolCall(call))) => {
                meter.first_token();
                calls += 1;
                ChatCompletionChunk::tool_call(&header, calls - 1, &call)
            }
            // What the server's own tools did (when the operator turns them on) shows in the text's citations;
            // OpenAI's chunks have no place for the steps themselves.
            Ok(Some(TurnEvent::Thought(_))) => continue,
            Ok(Some(TurnEvent::End(end))) => {
                // Only a client still there gets the end: holding a slot for it first makes the turn's settling and
                // the last events go together.
                let Ok(slot) = tx.reserve().await else {
                    turn.close_unfinished().await;
                    meter.finish(TurnOutcome::Abandoned);
                    return;
                };
                let last = match service.save_streamed(&caller, turn).await {
                    Ok(spent) => {
                        meter.finish(TurnOutcome::Answered(&spent));
                        let mut last =
                            sse_data(&ChatCompletionChunk::finish(&header, end.finish_reason));
                        if header.include_usage {
                            last.extend(sse_data(&ChatCompletionChunk::usage(
                                &header,
                                Usage::of(&end.usage, &reasoning),
                            )));
                        }
                        last.extend_from_slice(SSE_DONE);
                        last
                    }
                    Err(err) => {
                        let err = ApiError::from(err);
                        meter.finish(TurnOutcome::Failed(FailureClass::of(&err), None));
                        sse_data(&openai_error_body(&err))
                    }
                };
                slot.send(last.into());
                return;
            }
            Ok(None) => {
                meter.finish(TurnOutcome::Abandoned);
                return;
            }
            Err(err) => {
                let err = ApiError::from(err);
                let _ = tx.send(sse_data(&openai_error_body(&err)).into()).await;
                turn.close_unfinished().await;
                meter.fail(&err);
                return;
            }
        };
        if tx.send(sse_data(&event).into()).await.is_err() {
            tracing::info!("the client went away; stopped reading from the model");
            turn.close_unfinished().await;
            meter.finish(TurnOutcome::Abandoned);
            return;
        }
    }
}
