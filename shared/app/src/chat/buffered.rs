//! The buffered chat function's routes: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
//! `POST /multi-agent-chat/batch` (and the bare `POST /multi-agent-chat`), each answer written whole; and OpenAI's API
//! answered whole ([`super::openai`]).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use chat_core::{Answer, Caller, ChatModel, SessionStore, TurnSpent};
use chat_edge::{
    ApiError, Arrived, CallerAnd, ChatRequest, ChatRoute, ChatUiRoute, Deadline, json_response,
    only,
};
use chat_protocol::chat_ui::{ReplyShape, UiReply, round_events, round_reply, sse_event};
use chat_protocol::{ChatInput, Dialect, json_line, v2024_01_28, v2024_05_29};
use chat_runtime::{TurnMeter, TurnOutcome};

use super::{ChatFunction, ChatState, wants_events};

/// The buffered chat function (`functions/chat`).
pub struct Buffered;

/// This function's name in its metrics.
const FUNCTION: &str = "chat";

/// The state every route of this function holds.
type AppState<M, St> = State<Arc<ChatState<M, St>>>;

impl Buffered {
    /// The routes only this function answers: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
    /// `POST /multi-agent-chat/batch`. (The bare `/multi-agent-chat` is in its [`ChatFunction::routes`]: where
    /// all functions share one address, the streaming function answers it.)
    pub(crate) fn own_routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        Router::new()
            .route("/chat", only("POST", post(protocol_chat)))
            .route("/chat-ui/chat", only("POST", post(ui_chat)))
            .route("/multi-agent-chat/batch", only("POST", post(agents_chat)))
            .with_state(state.clone())
    }
}

impl ChatFunction for Buffered {
    /// Every route of the function, the bare `POST /multi-agent-chat` too (the Chat UI's documentation configures
    /// that URL; its current revision posts to it).
    fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
        state: &Arc<ChatState<M, St>>,
    ) -> Router {
        Self::own_routes(state)
            .merge(
                Router::new()
                    .route("/multi-agent-chat", only("POST", post(agents_chat)))
                    .with_state(state.clone()),
            )
            // OpenAI's API, answered whole (`stream: true` is the streaming function's).
            .merge(super::openai::routes(
                state,
                super::openai::Streaming::Refused(FUNCTION),
            ))
            .merge(super::embeddings::routes(state, FUNCTION))
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
    metered(app.meter(FUNCTION, "/chat", arrived), app.turn(request)).await
}

async fn ui_chat<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    request: Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>,
) -> Result<Response, ApiError> {
    metered(
        app.meter(FUNCTION, "/chat-ui/chat", arrived),
        app.turn(request),
    )
    .await
}

async fn agents_chat<M: ChatModel + 'static, St: SessionStore>(
    State(app): AppState<M, St>,
    arrived: Arrived,
    Deadline(deadline): Deadline,
    headers: HeaderMap,
    request: Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>,
) -> Result<Response, ApiError> {
    metered(
        app.meter(FUNCTION, "/multi-agent-chat/batch", arrived),
        async {
            let CallerAnd(caller, ChatRequest { input, .. }) = request?;
            app.whole_round(&caller, &input, wants_events(&headers), deadline)
                .await
        },
    )
    .await
}

impl<M: ChatModel + 'static, St: SessionStore> ChatState<M, St> {
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
    async fn whole_round(
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
