//! The buffered chat function: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
//! `POST /multi-agent-chat/batch` (and the bare `POST /multi-agent-chat`).

use std::sync::Arc;

use chat_core::{AgentGroup, Answer, Caller, ChatModel, ChatService, Retriever, SessionStore};
use chat_http::{ApiError, Auth, Config, Cors, json_response, normalized_path, read_json_body};
use chat_protocol::chat_ui::{ReplyShape, UiReply, round_events, round_reply, sse_event};
use chat_protocol::{
    ChatInput, Dialect, Endpoint, json_line, parse_chat_request, v2024_01_28, v2024_05_29,
};
use lambda_http::http::{Method, StatusCode, header};
use lambda_http::{Body, Request, Response};

/// What a warm function keeps between requests: the chat core with its ports, how callers are known, and the
/// edge limits.
pub struct App<M, St> {
    service: ChatService<M, St>,
    agents: AgentGroup,
    auth: Auth,
    max_body_bytes: usize,
    cors: Cors,
    ui_reply: ReplyShape,
}

impl<M: ChatModel, St: SessionStore> App<M, St> {
    pub fn new(model: M, store: St, auth: Auth, config: Config) -> Self {
        Self {
            service: ChatService::new(model, store, config.chat),
            agents: config.agents,
            auth,
            max_body_bytes: config.max_body_bytes,
            cors: config.cors,
            ui_reply: config.chat_ui_reply,
        }
    }

    /// Grounds standard turns in what `retriever` finds (a knowledge base); `None` answers from the model alone.
    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.service = self.service.with_retriever(retriever);
        self
    }

    /// Answers one request; every failure is already an HTTP response here.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        chat_http::respond(&request, &self.cors, "POST", |r| r, self.route(&request)).await
    }

    async fn route(&self, request: &Request) -> Result<Response<Body>, ApiError> {
        let (endpoint, multi_agent) = match normalized_path(request) {
            "/chat" => (Endpoint::Protocol, false),
            "/chat-ui/chat" => (Endpoint::ChatUi, false),
            // The Chat UI's documentation configures the bare URL; its current revision posts to it.
            "/multi-agent-chat/batch" | "/multi-agent-chat" => (Endpoint::ChatUi, true),
            other => return Err(ApiError::NotFound(other.to_string())),
        };
        if request.method() != Method::POST {
            return Err(ApiError::MethodNotAllowed { allow: "POST" });
        }
        let caller = self.auth.identify(request).await?;
        let body = read_json_body(request, self.max_body_bytes)?;
        let input = parse_chat_request(body, endpoint, &self.service.settings().limits)?;
        if multi_agent {
            return self.agents(&caller, &input, wants_events(request)).await;
        }
        let answer = self.service.answer(&caller, &input.turn).await?;
        Ok(render(&input, &answer, self.ui_reply))
    }

    /// A multi-agent round, answered whole: the user's message echoed, then each agent's message (or the
    /// agents' messages in the page's current shape); as server-sent events (all at once) when the client asked
    /// for `text/event-stream`.
    async fn agents(
        &self,
        caller: &Caller,
        input: &ChatInput,
        as_events: bool,
    ) -> Result<Response<Body>, ApiError> {
        let round = self
            .service
            .whole_round(caller, &self.agents, &input.turn)
            .await?;
        if as_events {
            let body: Vec<u8> = round_events(&round).iter().flat_map(sse_event).collect();
            return Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from(body))
                .expect("a response built from valid parts"));
        }
        Ok(json_response(
            StatusCode::OK,
            &round_reply(&round, self.ui_reply),
        ))
    }
}

/// Whether the client asked for server-sent events.
fn wants_events(request: &Request) -> bool {
    chat_http::accepts(request, "text/event-stream")
}

/// The answer in the shape the request's dialect expects.
fn render(input: &ChatInput, answer: &Answer, ui_reply: ReplyShape) -> Response<Body> {
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
