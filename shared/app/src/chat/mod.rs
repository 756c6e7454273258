//! The two chat functions' one application: the chat service with its ports, how callers are known and the edge's
//! limits, held once; the buffered function ([`Buffered`]) and the streaming one ([`Streamed`]) differ only in the
//! routes they answer and whether they stream ([`Serving`]). Each dialect's routes are a module of their own; every
//! answer goes through the one writer ([`write`]).
//!
//! - [`turns`]: the AI Chat Protocol (`/chat`, `/chat/stream`) and the Chat UI's standard chat (`/chat-ui/chat`);
//! - [`agents`]: the Chat UI's multi-agent chat;
//! - [`openai`], [`embeddings`]: OpenAI's API (`/v1/…`);
//! - [`anthropic`]: Anthropic's Messages API (`/v1/messages…`);
//! - [`responses`]: OpenAI's Responses API (`/v1/responses`);
//! - [`document_events`]: the documents' statuses pushed (`GET /documents/events`).

use std::marker::PhantomData;
use std::sync::Arc;

use axum::Router;
use axum::http::Method;
use axum::response::Response;
use axum::routing::get;
use chat_core::{
    AgentGroup, AttachmentStore, ChatModel, ChatService, Documents, Embedder, EmbeddingModels,
    Limits, RequestLimits, ResponseStore, Retriever, SessionStore, ToolBounds, ToolSource,
    UsageLedger,
};
use chat_edge::{ApiError, Arrived, Auth, ChatEdgeState, Cors, EdgeState, error_response_in, only};
use chat_protocol::ErrorShape;
use chat_protocol::chat_ui::ReplyShape;
use chat_runtime::{FunctionService, TurnMeter};

use crate::Config;
use crate::before_serving::take_back;

pub(crate) use document_events::PLACE_HELD_FOR;

mod agents;
mod anthropic;
mod document_events;
mod embeddings;
mod openai;
mod responses;
mod sealed_reasoning;
mod turns;
mod write;

/// How a chat function serves answers: its name in the metrics, and whether it streams them (chat-stream, whose
/// function URL streams its responses) or answers them whole (chat, whose responses Lambda buffers). A dialect's
/// routes are the same code on both, told which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Serving {
    pub function: &'static str,
    pub streams: bool,
}

/// The buffered chat function (`functions/chat`).
pub struct Buffered;

/// The streaming chat function (`functions/chat-stream`).
pub struct Streamed;

impl Buffered {
    const SERVING: Serving = Serving {
        function: "chat",
        streams: false,
    };

    /// The routes only this function answers: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
    /// `POST /multi-agent-chat/batch`. (The bare `/multi-agent-chat` and OpenAI's API are in its
    /// [`ChatFunction::routes`]: where all functions share one address, the streaming function answers them.)
    pub(crate) fn own_routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        turns::routes(state, Self::SERVING).merge(agents::routes(state, Self::SERVING, false))
    }
}

impl ChatFunction for Buffered {
    /// It serves no documents route: the root gives it no documents (nor their SDK client, which it never calls).
    const PUSHES_DOCUMENTS: bool = false;

    /// Its own routes, the bare `POST /multi-agent-chat` (the Chat UI's documentation configures that URL; its
    /// current revision posts to it) and OpenAI's API answered whole (`stream: true` is the streaming function's).
    fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        both_functions_routes(state, Self::SERVING)
    }
}

/// The routes both functions answer, each as `serving` says (whole, or streamed where asked): the protocol's and
/// the Chat UI's turns, the bare `POST /multi-agent-chat`, and the Anthropic, OpenAI and Responses APIs.
fn both_functions_routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
) -> Router {
    turns::routes(state, serving)
        .merge(agents::routes(state, serving, true))
        .merge(anthropic::routes(state, serving))
        .merge(openai::routes(state, serving))
        .merge(responses::routes(state, serving))
        .merge(embeddings::routes(state, serving.function))
}

impl Streamed {
    const SERVING: Serving = Serving {
        function: "chat-stream",
        streams: true,
    };
}

impl ChatFunction for Streamed {
    const PUSHES_DOCUMENTS: bool = true;

    /// `POST /chat/stream`, `POST /multi-agent-chat/stream` and the bare `POST /multi-agent-chat` (events when asked
    /// for, else the whole round), `GET /documents/events`, and OpenAI's API, `stream: true` as server-sent events.
    fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        both_functions_routes(state, Self::SERVING).merge(
            Router::new()
                .route(
                    "/documents/events",
                    only("GET", get(document_events::events)),
                )
                .with_state(state.clone()),
        )
    }
}

/// Which chat function an app is: the routes it answers (each handler writes its answer its own way).
pub trait ChatFunction: Send + Sync + 'static {
    /// Whether it pushes the documents' statuses (`GET /documents/events`): only then does the root build it the
    /// documents ([`ChatApp::with_documents`]), so that a function without that route links neither them nor
    /// bedrock-agent's client.
    const PUSHES_DOCUMENTS: bool;

    /// Every route of the function, on `state`.
    fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router;
}

/// A chat function as it serves: what a warm function keeps between requests. Cheap to clone: the routes share
/// it.
pub struct ChatApp<M, St, F> {
    state: Arc<ChatState<M, St>>,
    cors: Cors,
    function: PhantomData<F>,
}

/// What every chat route holds: the core is shared with the tasks that write each stream.
pub struct ChatState<M, St> {
    service: Arc<ChatService<M, St>>,
    agents: Arc<AgentGroup>,
    auth: Auth,
    max_body_bytes: usize,
    /// Largest request with files (`MAX_UPLOAD_BYTES`).
    max_upload_bytes: usize,
    /// `OPENAI_IGNORED_PARAMETERS`.
    ignored_parameters: Vec<String>,
    ui_reply: ReplyShape,
    /// The limits users are held to once a ledger counts what they spend ([`ChatApp::with_usage`]).
    usage_limits: Limits,
    /// The embedding models `POST /v1/embeddings` serves (`EMBEDDING_MODELS`), and the adapter that asks them
    /// ([`ChatApp::with_embedder`]); without one, the route serves no model.
    embedding_models: EmbeddingModels,
    /// Which allowed model answers an Anthropic model name on `/v1/messages` (`ANTHROPIC_MODEL_NAMES`).
    anthropic_model_names: chat_protocol::anthropic::ModelNames,
    embedder: Option<Arc<dyn Embedder>>,
    /// The documents people upload, whose statuses `GET /documents/events` pushes ([`ChatApp::with_documents`]);
    /// `None`: documents are off here (404).
    documents: Option<Documents>,
    /// Where the Responses API keeps the responses asked to be kept, and for how long
    /// ([`ChatApp::with_responses`]); `None`: none are kept.
    responses: Option<Arc<dyn ResponseStore>>,
    responses_kept_for: std::time::Duration,
    /// Seals the signed reasoning a Responses client keeps (`RESPONSES_REASONING_KEY`); `None`: the backend keeps it.
    reasoning_seal: Option<Arc<sealed_reasoning::ReasoningSeal>>,
}

impl<M: ChatModel + 'static, St: SessionStore + 'static, F: ChatFunction> ChatApp<M, St, F> {
    pub fn new(model: M, store: St, auth: Auth, config: Config) -> Self {
        Self {
            state: Arc::new(ChatState {
                service: Arc::new(ChatService::new(model, store, config.chat)),
                agents: Arc::new(config.agents),
                auth,
                max_body_bytes: config.max_body_bytes,
                max_upload_bytes: config.max_upload_bytes,
                ignored_parameters: config.ignored_parameters,
                ui_reply: config.chat_ui_reply,
                usage_limits: config.usage_limits,
                embedding_models: config.embedding_models,
                anthropic_model_names: config.anthropic_model_names,
                embedder: None,
                documents: None,
                responses: None,
                responses_kept_for: std::time::Duration::from_secs(
                    u64::from(config.responses_kept_days) * 86_400,
                ),
                reasoning_seal: config
                    .responses_reasoning_key
                    .map(|key| Arc::new(sealed_reasoning::ReasoningSeal::new(&key.0))),
            }),
            cors: config.cors,
            function: PhantomData,
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
        let limits = self.state.usage_limits;
        self.map_service(|service| service.with_usage(ledger, limits))
    }

    /// Embeds texts for `POST /v1/embeddings` with `embedder` (the models of `EMBEDDING_MODELS`); `None` serves
    /// no embedding model.
    pub fn with_embedder(self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.map_state(|state| ChatState { embedder, ..state })
    }

    /// Pushes the statuses of the documents of `documents` (`GET /documents/events`, on the streaming function);
    /// `None` answers that route 404.
    pub fn with_documents(self, documents: Option<Documents>) -> Self {
        self.map_state(|state| ChatState { documents, ..state })
    }

    /// Keeps the Responses API's responses asked to be kept (`store: true`) in `responses`; `None` keeps none.
    pub fn with_responses(self, responses: Option<Arc<dyn ResponseStore>>) -> Self {
        self.map_state(|state| ChatState { responses, ..state })
    }

    /// The app with its state changed by `change` (before it serves).
    fn map_state(self, change: impl FnOnce(ChatState<M, St>) -> ChatState<M, St>) -> Self {
        Self {
            state: Arc::new(change(take_back(self.state))),
            ..self
        }
    }

    /// The app with its chat service changed by `change` (before it serves).
    fn map_service(self, change: impl FnOnce(ChatService<M, St>) -> ChatService<M, St>) -> Self {
        self.map_state(|state| ChatState {
            service: Arc::new(change(take_back(state.service))),
            ..state
        })
    }

    /// The function's routes (see [`Buffered`] and [`Streamed`]).
    pub fn routes(&self) -> Router {
        F::routes(&self.state)
    }

    /// The function's whole edge, as Lambda and the plain server run it.
    pub fn service(&self) -> FunctionService {
        chat_runtime::function_service(self.routes(), &self.cors, &[Method::GET, Method::POST])
    }

    /// Answers one request through the whole edge (what tests call; the runtime serves [`ChatApp::service`]).
    /// Faults before a stream's first line are ordinary JSON error responses with their status.
    pub async fn handle<B>(&self, request: axum::http::Request<B>) -> Response
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        chat_runtime::answer_one(self.service(), request).await
    }

    pub(crate) fn state(&self) -> &Arc<ChatState<M, St>> {
        &self.state
    }
}

impl<M: ChatModel, St: SessionStore> EdgeState for ChatState<M, St> {
    fn auth(&self) -> &Auth {
        &self.auth
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }
}

impl<M: ChatModel + 'static, St: SessionStore> ChatEdgeState for ChatState<M, St> {
    fn request_limits(&self) -> &RequestLimits {
        &self.service.settings().limits
    }

    fn max_upload_bytes(&self) -> usize {
        self.max_upload_bytes
    }

    fn ignored_parameters(&self) -> &[String] {
        &self.ignored_parameters
    }
}

impl<M: ChatModel + 'static, St: SessionStore> ChatState<M, St> {
    /// A meter for a turn of `function` on `route`, from when its request arrived.
    fn meter(
        &self,
        function: &'static str,
        route: &'static str,
        Arrived(at): Arrived,
    ) -> TurnMeter {
        TurnMeter::start_at(function, route, &self.service.settings().model_id, at)
    }

    /// A dialect's request as its extractor read it; one that could not be read is a failed turn of `route`.
    fn arrived<T>(
        &self,
        serving: Serving,
        route: &'static str,
        arrived: Arrived,
        request: Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        request.inspect_err(|e| self.meter(serving.function, route, arrived).fail(e))
    }

    /// A meter for a turn of `route` that names `model`, from when its request arrived, and the model when the
    /// operator allows it: the metrics name it only then (a client's string is no dimension), else the deployment's
    /// model.
    fn model_meter<'m>(
        &self,
        serving: Serving,
        route: &'static str,
        Arrived(at): Arrived,
        model: &'m str,
    ) -> (Option<&'m str>, TurnMeter) {
        let settings = self.service.settings();
        let allowed = settings
            .allowed_models
            .iter()
            .any(|m| m == model)
            .then_some(model);
        let meter = TurnMeter::start_at(
            serving.function,
            route,
            allowed.unwrap_or(&settings.model_id),
            at,
        );
        (allowed, meter)
    }
}

impl Serving {
    /// Refuses `stream: true` where this function answers whole, naming where to send it (`POST {path}` on the
    /// streaming function).
    fn whole_only(self, stream: bool, path: &str) -> Result<(), ApiError> {
        if stream && !self.streams {
            return Err(ApiError::from(chat_core::InvalidRequest::new(
                "stream",
                format!(
                    "this function answers whole: send stream: true to POST {path} on the streaming chat \
                     function's URL (ChatStreamFunctionUrl, or the distribution's /v1/*, which routes there)"
                ),
            )));
        }
        Ok(())
    }
}

/// A turn refused before it started: metered as failed, answered in `E`'s shape.
fn refuse<E: ErrorShape>(meter: TurnMeter, e: ApiError) -> Response {
    meter.fail(&e);
    error_response_in::<E>(&e)
}

/// Any other path under a dialect's API: its 404, in its shape (as its clients expect it).
async fn unknown<E: ErrorShape>(uri: axum::http::Uri) -> Response {
    error_response_in::<E>(&ApiError::NotFound(uri.path().to_string()))
}

/// Whether the client asked for server-sent events.
fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    chat_edge::accepts(headers, "text/event-stream")
}
