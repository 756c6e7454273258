//! The streaming chat function's routes: `POST /chat/stream`, each line written and flushed as the model produces
//! text, and `POST /multi-agent-chat/stream` (and the bare `POST /multi-agent-chat`), one server-sent event per
//! agent message; OpenAI's API, `stream: true` as server-sent events ([`super::openai`]); and `GET /documents/events`,
//! the statuses of the caller's documents pushed as they change ([`super::document_events`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use chat_core::{
    AgentGroup, AgentMessage, AgentRound, Caller, ChatModel, ChatService, DataPoints, ModelStream,
    SessionStore, StreamingTurn, Thought, TurnEnd, TurnEvent, TurnInput,
};
use chat_edge::{
    ApiError, Arrived, CallerAnd, ChatRequest, ChatUiRoute, Deadline, error_body, error_line,
    json_response, only,
};
use chat_protocol::chat_ui::{agent_event, round_reply, sse_event};
use chat_protocol::v2024_01_28::{ChatCompletion, ChatCompletionChunk, ChunkHeader};
use chat_protocol::v2024_05_29::StreamChunk;
use chat_protocol::{Dialect, ResponseContext, SessionSpelling, json_line};
use chat_runtime::{FailureClass, TurnMeter, TurnOutcome};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::{ChatFunction, ChatState, wants_events};

/// The streaming chat function (`functions/chat-stream`).
pub struct Streamed;

impl ChatFunction for Streamed {
    /// The routes: `POST /chat/stream`, `POST /multi-agent-chat/stream` and the bare `POST /multi-agent-chat` the
    /// Chat UI's documentation configures (events when asked for, else the whole round); `GET /documents/events`
    /// (`super::document_events`); and OpenAI's API, `stream: true` as server-sent events (`super::openai`).
    fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        Router::new()
            .route("/chat/stream", only("POST", post(stream_chat)))
            .route(
                "/multi-agent-chat/stream",
                only("POST", post(agents_stream)),
            )
            .route("/multi-agent-chat", only("POST", post(agents_bare)))
            .route(
                "/documents/events",
                only("GET", get(super::document_events::events)),
            )
            .with_state(state.clone())
            .merge(super::openai::routes(
                state,
                super::openai::Streaming::Events(FUNCTION),
            ))
            .merge(super::embeddings::routes(state, FUNCTION))
    }
}

/// How a multi-agent request goes on once its first agent has spoken: answered whole, or as events.
enum AgentStart {
    Whole(Box<AgentRound>),
    Events(Box<RoundInProgress>),
}

/// A round whose first message is ready, to be written as events.
struct RoundInProgress {
    caller: Caller,
    input: TurnInput,
    round: AgentRound,
    first: Option<AgentMessage>,
}

/// This function's name in its metrics.
const FUNCTION: &str = "chat-stream";

/// The state every route of this function holds.
pub(super) type AppState<M, St> = State<Arc<ChatState<M, St>>>;

/// A body written line by line by whoever holds the sender, each line sent as soon as it is written; it ends when
/// the sender is dropped. Its stream never fails: faults travel as the protocol's error lines.
pub(super) fn line_body() -> (mpsc::Sender<Bytes>, Body) {
    // One line in flight: a slow client slows the reading from the model instead of filling memory.
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, Infallible>(line), rx))
    });
    (tx, Body::from_stream(lines))
}

/// How a dialect frames the lines of a streamed answer.
enum Framing {
    /// 2024-05-29: `delta` lines, `application/jsonl`.
    Deltas(SessionSpelling),
    /// 2024-01-28: `chat.completion.chunk` lines, `application/json-lines`.
    Chunks(ChunkHeader, SessionSpelling),
}

impl Framing {
    fn content_type(&self) -> &'static str {
        match self {
            Framing::Deltas(_) => "application/jsonl",
            Framing::Chunks(..) => "application/json-lines",
        }
    }

    fn start<S: ModelStream>(&self, turn: &StreamingTurn<S>) -> Vec<u8> {
        let context = ResponseContext::new(&turn.thoughts, None)
            .with_data_points(turn.data_points().as_ref());
        let state = turn.session().state();
        match self {
            Framing::Deltas(spelling) => json_line(&StreamChunk::start(context, state, *spelling)),
            Framing::Chunks(header, spelling) => json_line(&ChatCompletionChunk::start(
                header, context, state, *spelling,
            )),
        }
    }

    fn text(&self, text: String) -> Vec<u8> {
        match self {
            Framing::Deltas(_) => json_line(&StreamChunk::content(text)),
            Framing::Chunks(header, _) => json_line(&ChatCompletionChunk::content(header, text)),
        }
    }

    /// A piece of the model's reasoning (or the note that some is redacted), as a line of its own.
    fn reasoning(&self, piece: &str, redacted: bool) -> Vec<u8> {
        match self {
            Framing::Deltas(_) => json_line(&StreamChunk::reasoning(piece, redacted)),
            Framing::Chunks(header, _) => {
                json_line(&ChatCompletionChunk::reasoning(header, piece, redacted))
            }
        }
    }

    /// A thought as it happens (a tool call, its result), with the data points when a tool found more.
    fn thought(&self, thought: &Thought, data_points: Option<&DataPoints>) -> Vec<u8> {
        let context =
            ResponseContext::new(std::slice::from_ref(thought), None).with_data_points(data_points);
        match self {
            Framing::Deltas(_) => json_line(&StreamChunk::context(context)),
            Framing::Chunks(header, _) => json_line(&ChatCompletionChunk::context(header, context)),
        }
    }

    fn end(&self, end: TurnEnd) -> Vec<u8> {
        let context = ResponseContext::new(&end.result_thoughts, end.followup_questions);
        match self {
            Framing::Deltas(_) => json_line(&StreamChunk::end(context)),
            Framing::Chunks(header, _) => json_line(&ChatCompletionChunk::finish(
                header,
                end.finish_reason,
                end.usage,
                context,
            )),
        }
    }
}

// A turn's request is read under its meter (a refusal is a failed turn): the caller first, then the body.

async fn stream_chat<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<ChatRequest>, ApiError>,
) -> Result<Response, ApiError> {
    let meter = app.meter(FUNCTION, "/chat/stream", arrived);
    let started = async {
        // Any Accept is fine: the official client sends `application/json` even here.
        let CallerAnd(caller, ChatRequest { input, .. }) = request?;
        let turn = app.service.stream(&caller, &input.turn).await?;
        Ok((caller, input, turn))
    }
    .await;
    match started {
        Ok((caller, input, turn)) => app.stream(caller, input, turn, meter).await,
        Err(e) => {
            meter.fail(&e);
            Err(e)
        }
    }
}

/// A multi-agent round's request: who calls, then their Chat UI request.
type AgentsRequest = Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>;

async fn agents_stream<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    Deadline(deadline): Deadline,
    request: AgentsRequest,
) -> Result<Response, ApiError> {
    app.multi_agent(
        request,
        (true, deadline),
        app.meter(FUNCTION, "/multi-agent-chat/stream", arrived),
    )
    .await
}

async fn agents_bare<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    Deadline(deadline): Deadline,
    headers: HeaderMap,
    request: AgentsRequest,
) -> Result<Response, ApiError> {
    let as_events = wants_events(&headers);
    app.multi_agent(
        request,
        (as_events, deadline),
        app.meter(FUNCTION, "/multi-agent-chat/stream", arrived),
    )
    .await
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> ChatState<M, St> {
    /// A multi-agent round: as events, one per agent message, or answered whole; either way ended by `deadline`,
    /// the function's own less room to answer.
    async fn multi_agent(
        &self,
        request: AgentsRequest,
        (as_events, deadline): (bool, Option<tokio::time::Instant>),
        mut meter: TurnMeter,
    ) -> Result<Response, ApiError> {
        let started = async {
            let CallerAnd(caller, ChatRequest { input, .. }) = request?;
            if !as_events {
                let round = self
                    .service
                    .whole_round_by(&caller, &self.agents, &input.turn, deadline)
                    .await?;
                return Ok(AgentStart::Whole(Box::new(round)));
            }
            let mut round = self.service.agent_round(&caller, &input.turn).await?;
            if let Some(deadline) = deadline {
                round.end_by(deadline);
            }
            let first = match self
                .service
                .next_agent_message(&self.agents, &input.turn, &mut round)
                .await
            {
                Ok(first) => first,
                Err(e) => {
                    round.close_unfinished().await;
                    return Err(e.into());
                }
            };
            Ok(AgentStart::Events(Box::new(RoundInProgress {
                caller,
                input: input.turn,
                round,
                first,
            })))
        }
        .await;
        match started {
            Ok(AgentStart::Events(started)) => Ok(self.round_as_events(*started, meter)),
            Ok(AgentStart::Whole(round)) => {
                meter.first_token();
                meter.finish(TurnOutcome::Answered(&round.spent()));
                Ok(json_response(
                    StatusCode::OK,
                    &round_reply(&round, self.ui_reply),
                ))
            }
            Err(e) => {
                meter.fail(&e);
                Err(e)
            }
        }
    }

    async fn stream(
        &self,
        caller: Caller,
        input: chat_protocol::ChatInput,
        turn: StreamingTurn<M::Stream>,
        mut meter: TurnMeter,
    ) -> Result<Response, ApiError> {
        let framing = match input.dialect {
            Dialect::V20240128 { stream: false } => {
                return match self.service.collect(&caller, turn).await {
                    Ok(answer) => {
                        meter.first_token();
                        meter.finish(TurnOutcome::Answered(&answer.spent));
                        Ok(json_response(
                            StatusCode::OK,
                            &ChatCompletion::from_answer(&answer, input.spelling),
                        ))
                    }
                    Err(e) => {
                        let e = ApiError::from(e);
                        meter.fail(&e);
                        Err(e)
                    }
                };
            }
            Dialect::V20240128 { stream: true } => Framing::Chunks(
                ChunkHeader {
                    id: turn.header.id.clone(),
                    created: turn.header.created,
                    model: turn.header.model.clone(),
                },
                input.spelling,
            ),
            Dialect::V20240529 | Dialect::ChatUi => Framing::Deltas(input.spelling),
        };
        let content_type = framing.content_type();
        let (tx, body) = line_body();
        let first = framing.start(&turn);
        tokio::spawn(
            write_stream(
                self.service.clone(),
                caller,
                turn,
                framing,
                first,
                tx,
                meter,
            )
            // The writer outlives the handler; it logs under the request's id all the same.
            .instrument(tracing::Span::current()),
        );
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .expect("a response built from valid parts"))
    }
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> ChatState<M, St> {
    /// A multi-agent round as server-sent events, one per agent message, each written the moment that agent has
    /// finished. The first agent answers before the status is sent, so a fault there is an ordinary error.
    fn round_as_events(&self, started: RoundInProgress, meter: TurnMeter) -> Response {
        let (tx, body) = line_body();
        tokio::spawn(
            write_agents(
                self.service.clone(),
                self.agents.clone(),
                started,
                tx,
                meter,
            )
            .instrument(tracing::Span::current()),
        );
        event_stream(body)
    }
}

/// A 200 of server-sent events whose `body` a task writes as the answer goes on.
pub(super) fn event_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .expect("a response built from valid parts")
}

/// Writes each agent's message as one event, then stores the round before the stream ends; a fault becomes an
/// event carrying `{"error": …}` and nothing is stored.
async fn write_agents<M: ChatModel + 'static, St: SessionStore>(
    service: Arc<ChatService<M, St>>,
    group: Arc<AgentGroup>,
    started: RoundInProgress,
    tx: mpsc::Sender<Bytes>,
    mut meter: TurnMeter,
) {
    let RoundInProgress {
        caller,
        input,
        mut round,
        first,
    } = started;
    let state = round.session().state();
    let mut next = first;
    while let Some(message) = next {
        if tx
            .send(sse_event(&agent_event(&message, state.as_ref())).into())
            .await
            .is_err()
        {
            tracing::info!("the client went away; the round stops and is not stored");
            round.close_unfinished().await;
            meter.finish(TurnOutcome::Abandoned);
            return;
        }
        meter.first_token();
        next = match service.next_agent_message(&group, &input, &mut round).await {
            Ok(message) => message,
            Err(err) => {
                let err = ApiError::from(err);
                let _ = tx.send(sse_event(&error_body(&err)).into()).await;
                round.close_unfinished().await;
                meter.finish(TurnOutcome::Failed(
                    FailureClass::of(&err),
                    Some(&round.spent()),
                ));
                return;
            }
        };
    }
    let Ok(slot) = tx.reserve().await else {
        round.close_unfinished().await;
        meter.finish(TurnOutcome::Abandoned);
        return;
    };
    match service.finish_round(&caller, &mut round).await {
        Ok(spent) => meter.finish(TurnOutcome::Answered(&spent)),
        Err(err) => {
            let err = ApiError::from(err);
            slot.send(sse_event(&error_body(&err)).into());
            meter.finish(TurnOutcome::Failed(
                FailureClass::of(&err),
                Some(&round.spent()),
            ));
        }
    }
}

/// Writes the answer line by line, and stores the turn before the last line. A failed write means the client went
/// away: returning drops the turn, which stops reading from the model, and stores nothing.
async fn write_stream<M: ChatModel + 'static, St: SessionStore>(
    service: Arc<ChatService<M, St>>,
    caller: Caller,
    mut turn: StreamingTurn<M::Stream>,
    framing: Framing,
    first: Vec<u8>,
    tx: mpsc::Sender<Bytes>,
    mut meter: TurnMeter,
) {
    // How many data points the client has been sent.
    let mut sent_points = turn.data_points().map(|p| p.text.len());
    if tx.send(first.into()).await.is_err() {
        turn.close_unfinished().await;
        meter.finish(TurnOutcome::Abandoned);
        return;
    }
    loop {
        let line = match turn.next().await {
            Ok(Some(TurnEvent::Text(text))) => {
                meter.first_token();
                framing.text(text)
            }
            Ok(Some(TurnEvent::Reasoning(piece))) => framing.reasoning(&piece, false),
            Ok(Some(TurnEvent::RedactedReasoning(note))) => framing.reasoning(&note, true),
            // Only a stateless completion's answer asks for the client's tools; no turn of these dialects does.
            Ok(Some(TurnEvent::ToolCall(_))) => continue,
            Ok(Some(TurnEvent::Thought(thought))) => {
                // Data points go again only when a tool found passages: the first line had the others.
                let points = turn.data_points();
                let grew = points.as_ref().map(|p| p.text.len()) != sent_points;
                sent_points = points.as_ref().map(|p| p.text.len());
                framing.thought(&thought, points.as_ref().filter(|_| grew))
            }
            Ok(Some(TurnEvent::End(end))) => {
                // Only a client still there gets the turn stored: holding a slot for the last line first makes
                // the store and the end line go together.
                let Ok(slot) = tx.reserve().await else {
                    tracing::info!("the client went away before the end; the turn is not stored");
                    turn.close_unfinished().await;
                    meter.finish(TurnOutcome::Abandoned);
                    return;
                };
                let last = match service.save_streamed(&caller, turn).await {
                    Ok(spent) => {
                        meter.finish(TurnOutcome::Answered(&spent));
                        framing.end(end)
                    }
                    Err(err) => {
                        let err = ApiError::from(err);
                        meter.fail(&err);
                        error_line(&err)
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
                let _ = tx.send(error_line(&err).into()).await;
                turn.close_unfinished().await;
                meter.fail(&err);
                return;
            }
        };
        if tx.send(line.into()).await.is_err() {
            tracing::info!("the client went away; stopped reading from the model");
            turn.close_unfinished().await;
            meter.finish(TurnOutcome::Abandoned);
            return;
        }
    }
}
