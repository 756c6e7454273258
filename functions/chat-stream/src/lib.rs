//! The streaming chat function: `POST /chat/stream`, each line written and flushed as the model produces text,
//! and `POST /multi-agent-chat/stream`, one server-sent event per agent message.

mod body;

pub use body::LineBody;

use std::sync::Arc;

use bytes::Bytes;
use chat_core::{
    AgentGroup, AgentMessage, AgentRound, Caller, ChatModel, ChatService, ModelStream, Retriever,
    SessionStore, StreamingTurn, TurnEnd, TurnEvent, TurnInput,
};
use chat_http::{
    ApiError, Auth, Config, Cors, error_body, error_line, json_response, normalized_path,
    read_json_body,
};
use chat_protocol::chat_ui::{ReplyShape, agent_event, round_reply, sse_event};
use chat_protocol::v2024_01_28::{ChatCompletion, ChatCompletionChunk, ChunkHeader};
use chat_protocol::v2024_05_29::StreamChunk;
use chat_protocol::{
    Dialect, Endpoint, ResponseContext, SessionSpelling, json_line, parse_chat_request,
};
use lambda_http::http::{Method, StatusCode, header};
use lambda_http::{Body, Request, Response};
use tokio::sync::mpsc;
use tracing::Instrument;

/// What a warm function keeps between requests. The core is shared with the tasks that write each stream.
pub struct App<M, St> {
    service: Arc<ChatService<M, St>>,
    agents: Arc<AgentGroup>,
    auth: Auth,
    max_body_bytes: usize,
    cors: Cors,
    ui_reply: ReplyShape,
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
            service: Arc::new(ChatService::new(model, store, config.chat)),
            agents: Arc::new(config.agents),
            auth,
            max_body_bytes: config.max_body_bytes,
            cors: config.cors,
            ui_reply: config.chat_ui_reply,
        }
    }

    /// Grounds standard turns in what `retriever` finds (a knowledge base); `None` answers from the model alone.
    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        let Ok(service) = Arc::try_unwrap(self.service) else {
            unreachable!("the service is shared only once the app serves")
        };
        self.service = Arc::new(service.with_retriever(retriever));
        self
    }

    /// Answers one request. Faults before the first line are ordinary JSON error responses with their status.
    pub async fn handle(&self, request: Request) -> Response<LineBody> {
        chat_http::respond(&request, &self.cors, "POST", buffered, self.route(&request)).await
    }

    async fn route(&self, request: &Request) -> Result<Response<LineBody>, ApiError> {
        let multi_agent = match normalized_path(request) {
            "/chat/stream" => None,
            "/multi-agent-chat/stream" => Some(true),
            // The bare URL the Chat UI's documentation configures: events when asked for, else the whole round.
            "/multi-agent-chat" => Some(wants_events(request)),
            other => return Err(ApiError::NotFound(other.to_string())),
        };
        if request.method() != Method::POST {
            return Err(ApiError::MethodNotAllowed { allow: "POST" });
        }
        let caller = self.auth.identify(request).await?;
        // Any Accept is fine: the official client sends `application/json` even here.
        let body = read_json_body(request, self.max_body_bytes)?;
        if let Some(as_events) = multi_agent {
            let input =
                parse_chat_request(body, Endpoint::ChatUi, &self.service.settings().limits)?;
            if !as_events {
                let round = self
                    .service
                    .whole_round(&caller, &self.agents, &input.turn)
                    .await?;
                return Ok(buffered(json_response(
                    StatusCode::OK,
                    &round_reply(&round, self.ui_reply),
                )));
            }
            return self.agents(caller, input.turn).await;
        }
        let input = parse_chat_request(body, Endpoint::Protocol, &self.service.settings().limits)?;
        let turn = self.service.stream(&caller, &input.turn).await?;
        let framing = match input.dialect {
            Dialect::V20240128 { stream: false } => {
                let answer = self.service.collect(&caller, turn).await?;
                return Ok(buffered(json_response(
                    StatusCode::OK,
                    &ChatCompletion::from_answer(&answer, input.spelling),
                )));
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
        let (tx, body) = LineBody::channel();
        let first = framing.start(&turn);
        tokio::spawn(
            write_stream(self.service.clone(), caller, turn, framing, first, tx)
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

impl<M: ChatModel + 'static, St: SessionStore + 'static> App<M, St> {
    /// A multi-agent round as server-sent events, one per agent message, each written the moment that agent has
    /// finished. The first agent answers before the status is sent, so a fault there is an ordinary error.
    async fn agents(
        &self,
        caller: Caller,
        input: TurnInput,
    ) -> Result<Response<LineBody>, ApiError> {
        let mut round = self.service.agent_round(&caller, &input).await?;
        let first = self
            .service
            .next_agent_message(&self.agents, &input, &mut round)
            .await?;
        let (tx, body) = LineBody::channel();
        tokio::spawn(
            write_agents(
                self.service.clone(),
                self.agents.clone(),
                caller,
                input,
                round,
                first,
                tx,
            )
            .instrument(tracing::Span::current()),
        );
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .expect("a response built from valid parts"))
    }
}

/// Writes each agent's message as one event, then stores the round before the stream ends; a fault becomes an
/// event carrying `{"error": …}` and nothing is stored.
async fn write_agents<M: ChatModel, St: SessionStore>(
    service: Arc<ChatService<M, St>>,
    group: Arc<AgentGroup>,
    caller: Caller,
    input: TurnInput,
    mut round: AgentRound,
    first: Option<AgentMessage>,
    tx: mpsc::Sender<Bytes>,
) {
    let state = round.session.state();
    let mut next = first;
    while let Some(message) = next {
        if tx
            .send(sse_event(&agent_event(&message, state.as_ref())).into())
            .await
            .is_err()
        {
            tracing::info!("the client went away; the round stops and is not stored");
            return;
        }
        next = match service.next_agent_message(&group, &input, &mut round).await {
            Ok(message) => message,
            Err(err) => {
                let _ = tx
                    .send(sse_event(&error_body(&ApiError::from(err))).into())
                    .await;
                return;
            }
        };
    }
    let Ok(slot) = tx.reserve().await else {
        return;
    };
    if let Err(err) = service.save_round(&caller, &round).await {
        slot.send(sse_event(&error_body(&ApiError::from(err))).into());
    }
}

/// Writes the answer line by line, and stores the turn before the last line. A failed write means the client went
/// away: returning drops the turn, which stops reading from the model, and stores nothing.
async fn write_stream<M: ChatModel, St: SessionStore>(
    service: Arc<ChatService<M, St>>,
    caller: Caller,
    mut turn: StreamingTurn<M::Stream>,
    framing: Framing,
    first: Vec<u8>,
    tx: mpsc::Sender<Bytes>,
) {
    if tx.send(first.into()).await.is_err() {
        return;
    }
    loop {
        let line = match turn.next().await {
            Ok(Some(TurnEvent::Text(text))) => framing.text(text),
            Ok(Some(TurnEvent::End(end))) => {
                // Only a client still there gets the turn stored: holding a slot for the last line first makes
                // the store and the end line go together.
                let Ok(slot) = tx.reserve().await else {
                    tracing::info!("the client went away before the end; the turn is not stored");
                    return;
                };
                let last = match service.save_streamed(&caller, turn).await {
                    Ok(()) => framing.end(end),
                    Err(err) => error_line(&ApiError::from(err)),
                };
                slot.send(last.into());
                return;
            }
            Ok(None) => return,
            Err(err) => {
                let _ = tx.send(error_line(&ApiError::from(err)).into()).await;
                return;
            }
        };
        if tx.send(line.into()).await.is_err() {
            tracing::info!("the client went away; stopped reading from the model");
            return;
        }
    }
}

/// Whether the client asked for server-sent events.
fn wants_events(request: &Request) -> bool {
    chat_http::accepts(request, "text/event-stream")
}

/// A whole response (an error, or a non-streamed answer) as a one-frame body.
fn buffered(response: Response<Body>) -> Response<LineBody> {
    response.map(|body| {
        let bytes: Bytes = match body {
            Body::Text(t) => t.into(),
            Body::Binary(b) => b.into(),
            _ => Bytes::new(),
        };
        LineBody::Once(Some(bytes))
    })
}
