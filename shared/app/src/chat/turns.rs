//! The AI Chat Protocol's routes and the Chat UI's standard chat: `POST /chat` and `POST /chat-ui/chat` on the buffered
//! function (each answer whole, in the request's dialect), `POST /chat/stream` on the streaming one (each line
//! written and flushed as the model produces text; a 2024-01-28 request with `stream: false` answered whole). The
//! answer is the one writer's ([`super::write`]) in the dialect's encoder ([`ProtocolAnswer`]).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use chat_core::{ChatModel, SessionStore};
use chat_edge::{ApiError, Arrived, CallerAnd, ChatRequest, ChatRoute, ChatUiRoute, only};
use chat_protocol::{Dialect, ProtocolAnswer};

use super::write::{Delivery, InDialect, Started};
use super::{ChatState, Serving};

/// The routes of `serving`: `/chat/stream` where it streams, else `/chat` and `/chat-ui/chat`.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
) -> Router {
    let turn = move |route: &'static str| {
        move |State(app): State<Arc<ChatState<M, St>>>,
              arrived: Arrived,
              request: Result<CallerAnd<ChatRequest>, ApiError>| async move {
            app.protocol_turn(serving, route, arrived, request).await
        }
    };
    let router = if serving.streams {
        Router::new().route("/chat/stream", only("POST", post(turn("/chat/stream"))))
    } else {
        let ui =
            move |State(app): State<Arc<ChatState<M, St>>>,
                  arrived: Arrived,
                  request: Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>| async move {
                app.protocol_turn(serving, "/chat-ui/chat", arrived, request)
                    .await
            };
        Router::new()
            .route("/chat", only("POST", post(turn("/chat"))))
            .route("/chat-ui/chat", only("POST", post(ui)))
    };
    router.with_state(state.clone())
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> ChatState<M, St> {
    /// A turn of the AI Chat Protocol or the Chat UI, read under its meter (a refusal is a failed turn: the caller
    /// first, then the body), answered in the request's dialect: streamed where `serving` streams and the dialect
    /// asks for lines, else whole.
    async fn protocol_turn<R: ChatRoute>(
        &self,
        serving: Serving,
        route: &'static str,
        arrived: Arrived,
        request: Result<CallerAnd<ChatRequest<R>>, ApiError>,
    ) -> Result<Response, ApiError> {
        let meter = self.meter(serving.function, route, arrived);
        let (caller, input) = match request {
            // Any Accept is fine: the official client sends `application/json` even where it streams.
            Ok(CallerAnd(caller, ChatRequest { input, .. })) => (caller, input),
            Err(e) => {
                meter.fail(&e);
                return Err(e);
            }
        };
        let encoder = ProtocolAnswer::new(input.dialect, input.spelling, self.ui_reply);
        let lines = !matches!(input.dialect, Dialect::V20240128 { stream: false });
        let delivery = InDialect {
            app: self,
            encoder,
            meter,
            span: tracing::Span::current(),
        };
        if serving.streams {
            let turn = self.service.stream(&caller, &input.turn).await;
            delivery.deliver(Started::new(caller, turn, lines)).await
        } else {
            let turn = self.service.whole(&caller, &input.turn).await;
            delivery.deliver(Started::new(caller, turn, false)).await
        }
    }
}
