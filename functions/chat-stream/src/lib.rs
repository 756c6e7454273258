//! The streaming chat function: `POST /chat/stream`, each line written and flushed as the model produces text,
//! and `POST /multi-agent-chat/stream`, one server-sent event per agent message.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{
    AgentGroup, AgentMessage, AgentRound, AttachmentStore, Caller, ChatModel, ChatService,
    DataPoints, Limits, ModelStream, RequestLimits, Retriever, SessionStore, StreamingTurn,
    Thought, ToolBounds, ToolSource, TurnEnd, TurnEvent, TurnInput, UsageLedger,
};
use chat_http::{
    ApiError, Arrived, Auth, CallerAnd, ChatBackends, ChatEdgeState, ChatRequest, ChatUiRoute,
    Config, ConfigError, Cors, Deadline, EdgeState, FailureClass, FunctionService, TurnMeter,
    TurnOutcome, error_body, error_line, json_response, only,
};
use chat_protocol::chat_ui::{ReplyShape, agent_event, round_reply, sse_event};
use chat_protocol::v2024_01_28::{ChatCompletion, ChatCompletionChunk, ChunkHeader};
use chat_protocol::v2024_05_29::StreamChunk;
use chat_protocol::{Dialect, ResponseContext, SessionSpelling, json_line};
use tokio::sync::mpsc;
use tracing::Instrument;

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

/// What a warm function keeps between requests. The core is shared with the tasks that write each stream.
pub struct App<M, St> {
    shared: Arc<Shared<M, St>>,
    cors: Cors,
}

struct Shared<M, St> {
    service: Arc<ChatService<M, St>>,
    agents: Arc<AgentGroup>,
    auth: Auth,
    max_body_bytes: usize,
    /// Largest request with files (`MAX_UPLOAD_BYTES`).
    max_upload_bytes: usize,
    ui_reply: ReplyShape,
    /// The limits users are held to once a ledger counts what they spend ([`App::with_usage`]).
    usage_limits: Limits,
}

/// This function's name in its metrics.
const FUNCTION: &str = "chat-stream";

/// The state every route of this function holds.
type AppState<M, St> = State<Arc<Shared<M, St>>>;

/// A body written line by line by whoever holds the sender, each line sent as soon as it is written; it ends when
/// the sender is dropped. Its stream never fails: faults travel as the protocol's error lines.
fn line_body() -> (mpsc::Sender<Bytes>, Body) {
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

impl<M: ChatModel + 'static, St: SessionStore + 'static> App<M, St> {
    pub fn new(model: M, store: St, auth: Auth, config: Config) -> Self {
        Self {
            shared: Arc::new(Shared {
                service: Arc::new(ChatService::new(model, store, config.chat)),
                agents: Arc::new(config.agents),
                auth,
                max_body_bytes: config.max_body_bytes,
                max_upload_bytes: config.max_upload_bytes,
                ui_reply: config.chat_ui_reply,
                usage_limits: config.usage_limits,
            }),
            cors: config.cors,
        }
    }

    /// Grounds standard turns in what `retriever` finds (a knowledge base); `None` answers from the model alone.
    pub fn with_retriever(self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.map_service(|service| service.with_retriever(retriever))
    }

    /// Keeps the files of messages in `attachments`; `None` takes no files.
    pub fn with_attachments(self, attachments: Option<Arc<dyn AttachmentStore>>) -> Self {
        self.map_service(|service| service.with_attachments(attachments))
    }

    /// Offers the model the tools of `sources` (MCP servers; `search_documents` comes with the retriever when
    /// `RETRIEVAL` says so), each call under `bounds`.
    pub fn with_tools(self, sources: Vec<Arc<dyn ToolSource>>, bounds: ToolBounds) -> Self {
        self.map_service(|service| service.with_tools(sources, bounds))
    }

    /// Counts what each user spends in `ledger` and holds them to the configured limits; `None` counts nothing.
    pub fn with_usage(self, ledger: Option<Arc<dyn UsageLedger>>) -> Self {
        let limits = self.shared.usage_limits;
        self.map_service(|service| service.with_usage(ledger, limits))
    }

    /// The app with its chat service changed by `change` (before it serves).
    fn map_service(self, change: impl FnOnce(ChatService<M, St>) -> ChatService<M, St>) -> Self {
        let Ok(Shared {
            service,
            agents,
            auth,
            max_body_bytes,
            max_upload_bytes,
            ui_reply,
            usage_limits,
        }) = Arc::try_unwrap(self.shared)
        else {
            unreachable!("the state is shared only once the app serves")
        };
        let Ok(service) = Arc::try_unwrap(service) else {
            unreachable!("the service is shared only once the app serves")
        };
        Self {
            shared: Arc::new(Shared {
                service: Arc::new(change(service)),
                agents,
                auth,
                max_body_bytes,
                max_upload_bytes,
                ui_reply,
                usage_limits,
            }),
            cors: self.cors,
        }
    }

    /// The routes: `POST /chat/stream`, `POST /multi-agent-chat/stream` and the bare `POST /multi-agent-chat` the
    /// Chat UI's documentation configures (events when asked for, else the whole round).
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/chat/stream", only("POST", post(stream_chat)))
            .route(
                "/multi-agent-chat/stream",
                only("POST", post(agents_stream)),
            )
            .route("/multi-agent-chat", only("POST", post(agents_bare)))
            .with_state(self.shared.clone())
    }

    /// The function's whole edge, as Lambda (response streaming) and the plain server run it.
    pub fn service(&self) -> FunctionService {
        chat_http::function_service(self.routes(), &self.cors, &[Method::POST])
    }

    /// Answers one request through the whole edge (what tests call; the runtime serves [`App::service`]). Faults
    /// before the first line are ordinary JSON error responses with their status.
    pub async fn handle<B>(&self, request: axum::http::Request<B>) -> Response
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        chat_http::answer_one(self.service(), request).await
    }
}

impl App<BedrockModel, DynamoStore> {
    /// The function as its cold start builds it: configuration, identity and clients from the environment.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let backends = ChatBackends::from_env().await?;
        let ledger: Arc<dyn UsageLedger> = Arc::new(backends.store.usage_ledger());
        let tool_bounds = backends.config.tool_bounds;
        // With a knowledge base configured, standard turns search it (first, or as the model's tool: RETRIEVAL).
        let app = App::new(
            backends.model,
            backends.store,
            backends.auth,
            backends.config,
        );
        Ok(app
            .with_retriever(backends.knowledge_base)
            .with_attachments(backends.attachments)
            .with_tools(backends.tools, tool_bounds)
            .with_usage(Some(ledger)))
    }
}

// A turn's request is read under its meter (a refusal is a failed turn): the caller first, then the body.

async fn stream_chat<M: ChatModel + 'static, St: SessionStore + 'static>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<ChatRequest>, ApiError>,
) -> Result<Response, ApiError> {
    let meter = app.meter("/chat/stream", arrived);
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
        app.meter("/multi-agent-chat/stream", arrived),
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
        app.meter("/multi-agent-chat/stream", arrived),
    )
    .await
}

impl<M: ChatModel, St: SessionStore> EdgeState for Shared<M, St> {
    fn auth(&self) -> &Auth {
        &self.auth
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }
}

impl<M: ChatModel + 'static, St: SessionStore> ChatEdgeState for Shared<M, St> {
    fn request_limits(&self) -> &RequestLimits {
        &self.service.settings().limits
    }

    fn max_upload_bytes(&self) -> usize {
        self.max_upload_bytes
    }
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> Shared<M, St> {
    /// A meter for a turn on `route`, from when its request arrived.
    fn meter(&self, route: &'static str, Arrived(at): Arrived) -> TurnMeter {
        TurnMeter::start_at(FUNCTION, route, &self.service.settings().model_id, at)
    }

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
            Ok(AgentStart::Events(started)) => Ok(self.agents(*started, meter)),
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

impl<M: ChatModel + 'static, St: SessionStore + 'static> Shared<M, St> {
    /// A multi-agent round as server-sent events, one per agent message, each written the moment that agent has
    /// finished. The first agent answers before the status is sent, so a fault there is an ordinary error.
    fn agents(&self, started: RoundInProgress, meter: TurnMeter) -> Response {
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
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .expect("a response built from valid parts")
    }
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

/// Whether the client asked for server-sent events.
fn wants_events(headers: &HeaderMap) -> bool {
    chat_http::accepts(headers, "text/event-stream")
}
