//! The buffered chat function: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
//! `POST /multi-agent-chat/batch` (and the bare `POST /multi-agent-chat`).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{
    AgentGroup, Answer, AttachmentStore, Caller, ChatModel, ChatService, Limits, RequestLimits,
    Retriever, SessionStore, ToolBounds, ToolSource, TurnSpent, UsageLedger,
};
use chat_http::{
    ApiError, Arrived, Auth, CallerAnd, ChatBackends, ChatEdgeState, ChatRequest, ChatRoute,
    ChatUiRoute, Config, ConfigError, Cors, Deadline, EdgeState, FunctionService, TurnMeter,
    TurnOutcome, json_response, only,
};
use chat_protocol::chat_ui::{ReplyShape, UiReply, round_events, round_reply, sse_event};
use chat_protocol::{ChatInput, Dialect, json_line, v2024_01_28, v2024_05_29};

/// What a warm function keeps between requests: the chat core with its ports, how callers are known, and the
/// edge limits. Cheap to clone: the routes share it.
pub struct App<M, St> {
    shared: Arc<Shared<M, St>>,
    cors: Cors,
}

struct Shared<M, St> {
    service: ChatService<M, St>,
    agents: AgentGroup,
    auth: Auth,
    max_body_bytes: usize,
    /// Largest request with files (`MAX_UPLOAD_BYTES`).
    max_upload_bytes: usize,
    ui_reply: ReplyShape,
    /// The limits users are held to once a ledger counts what they spend ([`App::with_usage`]).
    usage_limits: Limits,
}

/// This function's name in its metrics.
const FUNCTION: &str = "chat";

/// The state every route of this function holds.
type AppState<M, St> = State<Arc<Shared<M, St>>>;

impl<M: ChatModel + 'static, St: SessionStore + 'static> App<M, St> {
    pub fn new(model: M, store: St, auth: Auth, config: Config) -> Self {
        Self {
            shared: Arc::new(Shared {
                service: ChatService::new(model, store, config.chat),
                agents: config.agents,
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
        let Ok(shared) = Arc::try_unwrap(self.shared) else {
            unreachable!("the state is shared only once the app serves")
        };
        Self {
            shared: Arc::new(Shared {
                service: change(shared.service),
                ..shared
            }),
            cors: self.cors,
        }
    }

    /// The routes only this function answers: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
    /// `POST /multi-agent-chat/batch`. (The bare `/multi-agent-chat` is in [`App::routes`]: where all functions
    /// share one address, the streaming function answers it.)
    pub fn own_routes(&self) -> Router {
        Router::new()
            .route("/chat", only("POST", post(protocol_chat)))
            .route("/chat-ui/chat", only("POST", post(ui_chat)))
            .route("/multi-agent-chat/batch", only("POST", post(agents_chat)))
            .with_state(self.shared.clone())
    }

    /// Every route of the function, the bare `POST /multi-agent-chat` too (the Chat UI's documentation configures
    /// that URL; its current revision posts to it).
    pub fn routes(&self) -> Router {
        self.own_routes().merge(
            Router::new()
                .route("/multi-agent-chat", only("POST", post(agents_chat)))
                .with_state(self.shared.clone()),
        )
    }

    /// The function's whole edge, as Lambda and the plain server run it.
    pub fn service(&self) -> FunctionService {
        chat_http::function_service(self.routes(), &self.cors, &[Method::POST])
    }

    /// Answers one request through the whole edge (what tests call; the runtime serves [`App::service`]).
    pub async fn handle<B>(&self, request: axum::http::Request<B>) -> Response
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
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

/// Runs a turn under its meter: the record says how it ended and what it spent.
async fn metered(
    mut meter: TurnMeter,
    turn: impl Future<Output = Result<(Response, TurnSpent), ApiError>>,
) -> Result<Response, ApiError> {
    match turn.await {
        Ok((response, spent)) => {
            // A buffered answer's first token reaches the client with its last.
            meter.first_token();
            meter.finish(TurnOutcome::Answered(&spent));
            Ok(response)
        }
        Err(e) => {
            meter.fail(&e);
            Err(e)
        }
    }
}

// A turn's request is read under its meter (a refusal is a failed turn): the caller first, then the body.

async fn protocol_chat<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<ChatRequest>, ApiError>,
) -> Result<Response, ApiError> {
    metered(app.meter("/chat", arrived), app.turn(request)).await
}

async fn ui_chat<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>,
) -> Result<Response, ApiError> {
    metered(app.meter("/chat-ui/chat", arrived), app.turn(request)).await
}

async fn agents_chat<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    Deadline(deadline): Deadline,
    headers: HeaderMap,
    request: Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>,
) -> Result<Response, ApiError> {
    metered(app.meter("/multi-agent-chat/batch", arrived), async {
        let CallerAnd(caller, ChatRequest { input, .. }) = request?;
        app.agents(&caller, &input, wants_events(&headers), deadline)
            .await
    })
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

impl<M: ChatModel + 'static, St: SessionStore> Shared<M, St> {
    /// A meter for a turn on `route`, from when its request arrived.
    fn meter(&self, route: &'static str, Arrived(at): Arrived) -> TurnMeter {
        TurnMeter::start_at(FUNCTION, route, &self.service.settings().model_id, at)
    }

    async fn turn<R: ChatRoute>(
        &self,
        request: Result<CallerAnd<ChatRequest<R>>, ApiError>,
    ) -> Result<(Response, TurnSpent), ApiError> {
        let CallerAnd(caller, ChatRequest { input, .. }) = request?;
        let answer = self.service.answer(&caller, &input.turn).await?;
        Ok((render(&input, &answer, self.ui_reply), answer.spent))
    }

    /// A multi-agent round, answered whole: the user's message echoed, then each agent's message (or the
    /// agents' messages in the page's current shape); as server-sent events (all at once) when the client asked
    /// for `text/event-stream`. It ends by `deadline`, the function's own less room to answer.
    async fn agents(
        &self,
        caller: &Caller,
        input: &ChatInput,
        as_events: bool,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(Response, TurnSpent), ApiError> {
        let round = self
            .service
            .whole_round_by(caller, &self.agents, &input.turn, deadline)
            .await?;
        if as_events {
            let body: Vec<u8> = round_events(&round).iter().flat_map(sse_event).collect();
            return Ok((
                Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "text/event-stream")
                    .body(Body::from(body))
                    .expect("a response built from valid parts"),
                round.spent(),
            ));
        }
        Ok((
            json_response(StatusCode::OK, &round_reply(&round, self.ui_reply)),
            round.spent(),
        ))
    }
}

/// Whether the client asked for server-sent events.
fn wants_events(headers: &HeaderMap) -> bool {
    chat_http::accepts(headers, "text/event-stream")
}

/// The answer in the shape the request's dialect expects.
fn render(input: &ChatInput, answer: &Answer, ui_reply: ReplyShape) -> Response {
    match input.dialect {
        Dialect::V20240529 => json_response(
            StatusCode::OK,
            &v2024_05_29::ChatResponse::from_answer(answer, input.spelling),
        ),
        Dialect::V20240128 { stream: false } => json_response(
            StatusCode::OK,
            &v2024_01_28::ChatCompletion::from_answer(answer, input.spelling),
        ),
        Dialect::V20240128 { stream: true } => {
            // A buffered function cannot stream: it sends the very lines chat-stream would, all at once.
            let body: Vec<u8> = v2024_01_28::chunks_of(answer, input.spelling)
                .iter()
                .flat_map(json_line)
                .collect();
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json-lines")
                .body(Body::from(body))
                .expect("a response built from valid parts")
        }
        Dialect::ChatUi => json_response(StatusCode::OK, &UiReply::from_answer(answer, ui_reply)),
    }
}
