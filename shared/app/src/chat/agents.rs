//! The Chat UI's multi-agent routes: `POST /multi-agent-chat/stream` on the streaming function (one server-sent
//! event per agent message, each written the moment that agent has finished), `POST /multi-agent-chat/batch` on the
//! buffered one (the whole round), and the bare `POST /multi-agent-chat` the Chat UI's documentation configures on
//! both (events when the client asks for `text/event-stream` and the function streams, else the whole round, as
//! events all at once when asked for). A round answers through the one writer ([`super::write`]) as a
//! [`RoundAnswer`], in [`AgentEvents`]; it ends by the function's own deadline less room to store and answer.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use chat_core::{
    AgentGroup, AgentMessage, AgentRound, Caller, ChatModel, ChatService, SessionStore, TurnInput,
    TurnSpent,
};
use chat_edge::{ApiError, Arrived, CallerAnd, ChatRequest, ChatUiRoute, Deadline, only};
use chat_protocol::AgentEvents;
use tokio::time::Instant;

use super::write::{Answering, AnsweringWhole, read_whole, stream};
use super::{ChatState, Serving, wants_events};

/// A multi-agent round's request: who calls, then their Chat UI request.
type AgentsRequest = Result<CallerAnd<ChatRequest<ChatUiRoute>>, ApiError>;

/// The multi-agent routes of `serving`: its own (`/multi-agent-chat/stream` where it streams, else
/// `/multi-agent-chat/batch`), and, with `bare`, the bare `/multi-agent-chat` (where all functions share one
/// address, the streaming function's answers it).
pub(crate) fn routes<M: ChatModel + 'static, St: SessionStore + 'static>(
    state: &Arc<ChatState<M, St>>,
    serving: Serving,
    bare: bool,
) -> Router {
    let own = if serving.streams {
        "/multi-agent-chat/stream"
    } else {
        "/multi-agent-chat/batch"
    };
    // Each function's metrics name its own route, the bare one too.
    let round = move |as_events: Option<bool>| {
        move |State(app): State<Arc<ChatState<M, St>>>,
              arrived: Arrived,
              Deadline(deadline): Deadline,
              headers: HeaderMap,
              request: AgentsRequest| async move {
            let as_events = as_events.unwrap_or_else(|| wants_events(&headers));
            app.round(serving, own, (as_events, deadline), arrived, request)
                .await
        }
    };
    let mut router = Router::new().route(
        own,
        // The streaming function's own route always streams; the batch answers events only when asked for.
        only("POST", post(round(serving.streams.then_some(true)))),
    );
    if bare {
        router = router.route("/multi-agent-chat", only("POST", post(round(None))));
    }
    router.with_state(state.clone())
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> ChatState<M, St> {
    /// A multi-agent round, ended by `deadline`: as events, one per agent message, where `serving` streams and the
    /// client asked for them; else whole (as events all at once when asked for). Where it streams, the first agent
    /// answers before the status is sent, so that a fault there is an ordinary error.
    async fn round(
        &self,
        serving: Serving,
        route: &'static str,
        (as_events, deadline): (bool, Option<Instant>),
        arrived: Arrived,
        request: AgentsRequest,
    ) -> Result<Response, ApiError> {
        let meter = self.meter(serving.function, route, arrived);
        let started = async {
            let CallerAnd(caller, ChatRequest { input, .. }) = request?;
            let mut round = self.service.agent_round(&caller, &input.turn).await?;
            if let Some(deadline) = deadline {
                round.end_by(deadline);
            }
            Ok::<_, ApiError>(RoundAnswer {
                service: self.service.clone(),
                group: self.agents.clone(),
                caller,
                input: input.turn,
                round,
                first: None,
            })
        }
        .await;
        let mut answer = match started {
            Ok(answer) => answer,
            Err(e) => {
                meter.fail(&e);
                return Err(e);
            }
        };
        let encoder = AgentEvents::new(self.ui_reply, as_events);
        if !(serving.streams && as_events) {
            return read_whole(answer, encoder, meter).await;
        }
        match answer.next().await {
            Ok(first) => answer.first = Some(first),
            Err(e) => {
                answer.abandon().await;
                meter.fail(&e);
                return Err(e);
            }
        }
        let state = answer.round.session().state();
        Ok(stream(
            answer,
            encoder,
            &state,
            Some(meter),
            tracing::Span::current(),
        ))
    }
}

/// A multi-agent round in progress: the group's agents speak in turn until the round is over, then it is stored.
pub(crate) struct RoundAnswer<M, St> {
    service: Arc<ChatService<M, St>>,
    group: Arc<AgentGroup>,
    caller: Caller,
    input: TurnInput,
    round: AgentRound,
    /// The first agent's message, when it has spoken before the answer began (`Some(None)`: the round was over
    /// before any agent spoke).
    first: Option<Option<AgentMessage>>,
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> Answering for RoundAnswer<M, St> {
    type Event = AgentMessage;
    type Done = ();

    async fn next(&mut self) -> Result<Option<AgentMessage>, ApiError> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        Ok(self
            .service
            .next_agent_message(&self.group, &self.input, &mut self.round)
            .await?)
    }

    fn is_answer(_: &AgentMessage) -> bool {
        true
    }

    async fn settle(&mut self) -> Result<((), Option<TurnSpent>), ApiError> {
        let spent = self
            .service
            .finish_round(&self.caller, &mut self.round)
            .await?;
        Ok(((), Some(spent)))
    }

    async fn abandon(&mut self) {
        self.round.close_unfinished().await;
    }

    fn spent_when_failed(&self) -> Option<TurnSpent> {
        Some(self.round.spent())
    }
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> AnsweringWhole for RoundAnswer<M, St> {
    type Whole = AgentRound;

    async fn settle_whole(mut self) -> Result<(AgentRound, TurnSpent), ApiError> {
        let spent = self
            .service
            .finish_round(&self.caller, &mut self.round)
            .await?;
        Ok((self.round, spent))
    }
}
