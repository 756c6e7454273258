//! `POST /v1/embeddings` (OpenAI's embeddings API, issue 40) on both chat functions: the caller known as on every
//! chat route, the request read by the OpenAI dialect, the texts embedded by the chat service (admitted, reserved
//! and settled in the usage ledger as a turn is, metered on route `/v1/embeddings`), and faults in OpenAI's error
//! shape `{"error": {"message", "type", "param", "code"}}`. The client's `user` is recorded in the route's span
//! for the exported trace only: it is the body's text, which no log line holds (`chat_runtime::TRACE_ONLY`).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use chat_core::{ChatError, ChatModel, SessionStore, TurnSpent};
use chat_edge::{
    ApiError, Arrived, CallerAnd, JsonBody, error_response_in, json_response, only_in,
};
use chat_protocol::openai::OpenAiErrors;
use chat_protocol::openai::embeddings::{EmbeddingsResponse, parse_embeddings_request};
use chat_runtime::{TurnMeter, TurnOutcome};
use tracing::Instrument;

use super::ChatState;

/// The route's path, and its name in the metrics.
const ROUTE: &str = "/v1/embeddings";

/// `POST /v1/embeddings` on `state`, metered as `function`'s.
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    function: &'static str,
) -> Router {
    Router::new()
        .route(
            ROUTE,
            only_in::<OpenAiErrors, _>(
                "POST",
                post(
                    move |State(app): State<Arc<ChatState<M, St>>>,
                          arrived: Arrived,
                          request: Result<CallerAnd<JsonBody>, ApiError>| async move {
                        app.embeddings(function, arrived, request).await
                    },
                ),
            ),
        )
        .with_state(state.clone())
}

impl<M: ChatModel + 'static, St: SessionStore> ChatState<M, St> {
    async fn embeddings(
        &self,
        function: &'static str,
        Arrived(at): Arrived,
        request: Result<CallerAnd<JsonBody>, ApiError>,
    ) -> Response {
        let mut model = String::new();
        // The route's span: its duration a line of the log, the client's `user` for the exported trace only.
        let span = tracing::info_span!("embeddings", trace_only.user = tracing::field::Empty);
        let answered = async {
            let CallerAnd(caller, JsonBody(body)) = request?;
            let input = parse_embeddings_request(&body).map_err(ApiError::from)?;
            model.clone_from(&input.request.model);
            if let Some(user) = &input.user {
                span.record("trace_only.user", user.as_str());
            }
            let Some(embedder) = self.embedder.as_deref() else {
                return Err(ApiError::Chat(ChatError::ModelNotFound(
                    input.request.model,
                )));
            };
            let embeddings = self
                .service
                .embed(embedder, &self.embedding_models, &caller, &input.request)
                .await?;
            let spent = TurnSpent {
                totals: embeddings.usage,
                model_calls: 1,
                tool_calls: 0,
            };
            let answer = EmbeddingsResponse::new(embeddings, input.request.encoding);
            Ok::<_, ApiError>((json_response(StatusCode::OK, &answer), spent))
        }
        .instrument(span.clone())
        .await;
        // A metric's model is one the deployment serves: a client's made-up name would be a dimension of its own.
        if self.embedding_models.allowed(&model).is_none() {
            model.clear();
        }
        let meter = TurnMeter::start_at(function, ROUTE, &model, at);
        match answered {
            Ok((response, spent)) => {
                meter.finish(TurnOutcome::Answered(&spent));
                response
            }
            Err(e) => {
                meter.fail(&e);
                error_response_in::<OpenAiErrors>(&e)
            }
        }
    }
}
