//! The one writer of answers, whatever the dialect and however it is delivered: [`write_turn`] owns an answer's
//! lifecycle once its route has started it (the service has admitted the turn and holds its reservation): each event
//! encoded ([`chat_protocol::Encoder`]) and sent as it comes, the answer stored where its route stores and settled
//! before its last bytes, its meter finished, the answer closed with what it spent when the client goes away, and a
//! fault after the first byte sent as the dialect's last error line or event (never an `Err` from the body stream).
//! Buffered delivery ([`read_whole`]) is the same loop collected: the answer read to its end, settled, then written
//! whole.
//!
//! What an answer is made of is an [`Answering`]: a turn's ([`TurnAnswer`]), a multi-agent round's, a documents'
//! watch; each says how it goes on, settles and stops.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use chat_core::{
    Answer, Caller, ChatError, ChatModel, ChatService, Completion, ModelStream, SessionStore,
    StreamingTurn, TurnEnd, TurnEvent, TurnInput, TurnOpening, TurnSpent,
};
use chat_edge::ApiError;
use chat_protocol::{Encoder, Whole, WholeEncoder};
use chat_runtime::{FailureClass, TurnMeter, TurnOutcome};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

/// An answer in progress, as the writer drives it: its events as they come, then its settlement, or its stop.
pub(crate) trait Answering: Send + 'static {
    /// What the answer is made of, as it comes.
    type Event: Send;
    /// What is known once it is complete and settled (what its last bytes tell).
    type Done: Send;

    /// The next event; `Ok(None)` once the answer is complete (then [`Self::settle`]). An error ends it.
    fn next(&mut self) -> impl Future<Output = Result<Option<Self::Event>, ApiError>> + Send;

    /// Whether `event` is a piece of the answer itself: the first one is the meter's first token.
    fn is_answer(event: &Self::Event) -> bool;

    /// Stores the complete answer where its route stores, and settles what it spent, while its client is still
    /// there: what its last bytes tell, and what it spent (for the meter).
    fn settle(
        &mut self,
    ) -> impl Future<Output = Result<(Self::Done, Option<TurnSpent>), ApiError>> + Send;

    /// Ends an answer that stops before it is complete (its client went away, or it failed): what it spent so far is
    /// settled and its reservation released; nothing is stored.
    fn abandon(&mut self) -> impl Future<Output = ()> + Send;

    /// What a failed answer spent, when its meter counts it.
    fn spent_when_failed(&self) -> Option<TurnSpent> {
        None
    }

    /// By when a write must have gone out (`last`: the last bytes), when the answer itself is bounded in time (a
    /// documents' watch); `None`: a client that reads slowly slows the answer down.
    fn send_by(&self, _last: bool) -> Option<Instant> {
        None
    }
}

/// An answer that can also be delivered whole: settled into the whole answer its dialect writes at once.
pub(crate) trait AnsweringWhole: Answering {
    type Whole: Send;

    /// [`Answering::settle`] for buffered delivery: the whole answer, and what it spent.
    fn settle_whole(
        self,
    ) -> impl Future<Output = Result<(Self::Whole, TurnSpent), ApiError>> + Send;
}

/// A 200 whose body `answer` writes in `encoder`'s dialect as it goes on (a task of its own, under `span`), each
/// event written and flushed as it comes. The status and headers are fixed now: every later fault is the dialect's
/// last error line or event.
pub(crate) fn stream<A, E>(
    answer: A,
    mut encoder: E,
    opening: &E::Opening,
    meter: Option<TurnMeter>,
    span: tracing::Span,
) -> Response
where
    A: Answering,
    E: Encoder<Event = A::Event, Done = A::Done>,
{
    let content_type = encoder.content_type();
    let first = encoder.opening(opening);
    let (tx, body) = line_body();
    tokio::spawn(write_turn(answer, encoder, first, tx, meter).instrument(span));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .expect("a response built from valid parts")
}

/// A body written by whoever holds the sender, each piece sent as soon as it is written; it ends when the sender is
/// dropped. Its stream never fails: faults travel as the dialect's error lines.
fn line_body() -> (mpsc::Sender<Bytes>, Body) {
    // One piece in flight: a slow client slows the reading from the model instead of filling memory.
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, Infallible>(line), rx))
    });
    (tx, Body::from_stream(lines))
}

/// Writes `answer` after its opening bytes `first`: each event as it comes, then, once it is complete, stores and
/// settles it before its last bytes go out; a fault becomes the dialect's last bytes. A failed write means the client
/// went away: the answer stops there (the model is read no further) and is closed with what it spent.
pub(crate) async fn write_turn<A, E>(
    mut answer: A,
    mut encoder: E,
    first: Vec<u8>,
    tx: mpsc::Sender<Bytes>,
    mut meter: Option<TurnMeter>,
) where
    A: Answering,
    E: Encoder<Event = A::Event, Done = A::Done>,
{
    let send = |bytes: Vec<u8>, by: Option<Instant>| {
        let tx = tx.clone();
        async move {
            let sent = tx.send(bytes.into());
            match by {
                Some(by) => matches!(tokio::time::timeout_at(by, sent).await, Ok(Ok(()))),
                None => sent.await.is_ok(),
            }
        }
    };
    let finish = |meter: Option<TurnMeter>, outcome: TurnOutcome<'_>| {
        if let Some(meter) = meter {
            meter.finish(outcome);
        }
    };
    if !first.is_empty() && !send(first, answer.send_by(false)).await {
        answer.abandon().await;
        finish(meter, TurnOutcome::Abandoned);
        return;
    }
    loop {
        // A dialect that wants a sign of life while the answer is silent gets it between events; the event being
        // read is not dropped for it (the same read goes on).
        let idle_by = answer.send_by(false);
        let next = {
            let next = answer.next();
            match encoder.idle_every() {
                None => Some(next.await),
                Some(every) => {
                    tokio::pin!(next);
                    loop {
                        tokio::select! {
                            read = &mut next => break Some(read),
                            () = tokio::time::sleep(every) => {
                                if !send(encoder.idle(), idle_by).await {
                                    break None;
                                }
                            }
                        }
                    }
                }
            }
        };
        let Some(next) = next else {
            tracing::info!("the client went away; the answer stops and is not stored");
            answer.abandon().await;
            finish(meter, TurnOutcome::Abandoned);
            return;
        };
        let event = match next {
            Ok(Some(event)) => event,
            Ok(None) => {
                // Only a client still there gets the answer settled as complete: holding a slot for the last bytes
                // first makes the store and the end go together.
                let reserved = tx.reserve();
                let slot = match answer.send_by(true) {
                    Some(by) => tokio::time::timeout_at(by, reserved).await.ok(),
                    None => Some(reserved.await),
                };
                let Some(Ok(slot)) = slot else {
                    tracing::info!("the client went away before the end; the answer is not stored");
                    answer.abandon().await;
                    finish(meter, TurnOutcome::Abandoned);
                    return;
                };
                let last = match answer.settle().await {
                    Ok((done, spent)) => {
                        if let Some(spent) = &spent {
                            finish(meter, TurnOutcome::Answered(spent));
                        }
                        encoder.done(done)
                    }
                    Err(err) => {
                        let fault = err.fault();
                        let spent = answer.spent_when_failed();
                        finish(
                            meter,
                            TurnOutcome::Failed(FailureClass::of(&err), spent.as_ref()),
                        );
                        encoder.fault(&fault)
                    }
                };
                if !last.is_empty() {
                    slot.send(last.into());
                }
                return;
            }
            Err(err) => {
                let last = encoder.fault(&err.fault());
                send(last, answer.send_by(true)).await;
                answer.abandon().await;
                let spent = answer.spent_when_failed();
                finish(
                    meter,
                    TurnOutcome::Failed(FailureClass::of(&err), spent.as_ref()),
                );
                return;
            }
        };
        if A::is_answer(&event)
            && let Some(meter) = &mut meter
        {
            meter.first_token();
        }
        let bytes = encoder.event(event);
        if !bytes.is_empty() && !send(bytes, answer.send_by(false)).await {
            tracing::info!("the client went away; the answer stops and is not stored");
            answer.abandon().await;
            finish(meter, TurnOutcome::Abandoned);
            return;
        }
    }
}

/// Reads `answer` to its end and settles it (buffered delivery: the loop of [`write_turn`], collected), then writes
/// it whole in `encoder`'s dialect. A fault on the way closes the answer with what it spent and is the caller's to
/// answer with its status.
pub(crate) async fn read_whole<A, E>(
    mut answer: A,
    mut encoder: E,
    meter: TurnMeter,
) -> Result<Response, ApiError>
where
    A: AnsweringWhole,
    E: WholeEncoder<Answer = A::Whole>,
{
    let settled = async {
        loop {
            match answer.next().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(err) => {
                    answer.abandon().await;
                    return Err(err);
                }
            }
        }
        answer.settle_whole().await
    }
    .await;
    let mut meter = meter;
    match settled {
        Ok((whole, spent)) => {
            // A buffered answer's first token reaches the client with its last.
            meter.first_token();
            meter.finish(TurnOutcome::Answered(&spent));
            Ok(whole_response(encoder.whole(&whole)))
        }
        Err(err) => {
            meter.fail(&err);
            Err(err)
        }
    }
}

/// A whole answer as a 200.
pub(crate) fn whole_response(whole: Whole) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, whole.content_type)
        .body(Body::from(whole.body))
        .expect("a response built from valid parts")
}

/// A turn's answer (any dialect's: a protocol route's, a completion's), read from the model through the core's
/// [`StreamingTurn`] and stored (or, for a stateless completion, only settled) by the chat service once complete.
pub(crate) struct TurnAnswer<M, St, S> {
    service: Arc<ChatService<M, St>>,
    caller: Caller,
    /// The turn, until it is stored or closed.
    turn: Option<StreamingTurn<S>>,
    /// Its end, once read.
    end: Option<TurnEnd>,
}

impl<M, St, S> TurnAnswer<M, St, S> {
    pub(crate) fn new(
        service: Arc<ChatService<M, St>>,
        caller: Caller,
        turn: StreamingTurn<S>,
    ) -> Self {
        Self {
            service,
            caller,
            turn: Some(turn),
            end: None,
        }
    }

    /// The turn and its end, once read to it.
    fn complete(&mut self) -> Result<(StreamingTurn<S>, TurnEnd), ApiError> {
        match (self.turn.take(), self.end.take()) {
            (Some(turn), Some(end)) => Ok((turn, end)),
            _ => Err(ApiError::from(ChatError::Model(
                chat_core::ModelError::Failed("the answer ended without its end".into()),
            ))),
        }
    }
}

impl<M, St, S> Answering for TurnAnswer<M, St, S>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    S: ModelStream + 'static,
{
    type Event = TurnEvent;
    type Done = TurnEnd;

    async fn next(&mut self) -> Result<Option<TurnEvent>, ApiError> {
        let Some(turn) = self.turn.as_mut() else {
            return Ok(None);
        };
        match turn.next().await? {
            Some(TurnEvent::End(end)) => {
                self.end = Some(end);
                Ok(None)
            }
            event => Ok(event),
        }
    }

    fn is_answer(event: &TurnEvent) -> bool {
        matches!(event, TurnEvent::Text(_) | TurnEvent::ToolCall(_))
    }

    async fn settle(&mut self) -> Result<(TurnEnd, Option<TurnSpent>), ApiError> {
        let (turn, end) = self.complete()?;
        let spent = self.service.save_streamed(&self.caller, turn).await?;
        Ok((end, Some(spent)))
    }

    async fn abandon(&mut self) {
        if let Some(turn) = self.turn.as_mut() {
            turn.close_unfinished().await;
        }
    }
}

impl<M, St, S> AnsweringWhole for TurnAnswer<M, St, S>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    S: ModelStream + 'static,
{
    type Whole = Answer;

    async fn settle_whole(mut self) -> Result<(Answer, TurnSpent), ApiError> {
        let (turn, end) = self.complete()?;
        let answer = self.service.save_answered(&self.caller, turn, end).await?;
        let spent = answer.spent;
        Ok((answer, spent))
    }
}

/// An encoder of a turn's answer in one dialect, streamed or whole.
pub(crate) trait TurnEncoder:
    WholeEncoder<Opening = TurnOpening, Event = TurnEvent, Done = TurnEnd, Answer = Answer>
{
}

impl<E> TurnEncoder for E where
    E: WholeEncoder<Opening = TurnOpening, Event = TurnEvent, Done = TurnEnd, Answer = Answer>
{
}

/// A turn as the service started it (or failed to) for `caller`, to be answered streamed when `streamed`, else whole.
pub(crate) struct Started<S> {
    pub(crate) caller: Caller,
    pub(crate) turn: Result<StreamingTurn<S>, ChatError>,
    pub(crate) streamed: bool,
}

impl<S> Started<S> {
    pub(crate) fn new(
        caller: Caller,
        turn: Result<StreamingTurn<S>, ChatError>,
        streamed: bool,
    ) -> Self {
        Self {
            caller,
            turn,
            streamed,
        }
    }
}

/// How a started turn is answered, whichever stream it reads. A turn that did not start is a failed one, answered
/// with its status.
pub(crate) trait Delivery: Send {
    fn deliver<S: ModelStream + 'static>(
        self,
        started: Started<S>,
    ) -> impl Future<Output = Result<Response, ApiError>> + Send;
}

/// A turn's answer in `encoder`'s dialect: streamed by the one writer (a task under `span`), or read whole.
pub(crate) struct InDialect<'a, M, St, E> {
    pub(crate) app: &'a super::ChatState<M, St>,
    pub(crate) encoder: E,
    pub(crate) meter: TurnMeter,
    pub(crate) span: tracing::Span,
}

impl<M, St, E> InDialect<'_, M, St, E>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    E: TurnEncoder,
{
    /// `started` answered as `answer` makes it of the turn's own answer (given a streamed one's opening).
    pub(crate) async fn answer_as<S, A>(
        self,
        started: Started<S>,
        answer: impl FnOnce(TurnAnswer<M, St, S>, Option<&TurnOpening>) -> A + Send,
    ) -> Result<Response, ApiError>
    where
        S: ModelStream + 'static,
        A: AnsweringWhole<Event = TurnEvent, Done = TurnEnd, Whole = Answer>,
    {
        let Started {
            caller,
            turn,
            streamed,
        } = started;
        let mut turn = match turn {
            Ok(turn) => turn,
            Err(e) => {
                let e = ApiError::from(e);
                self.meter.fail(&e);
                return Err(e);
            }
        };
        let opening = streamed.then(|| turn.opening());
        let own = TurnAnswer::new(self.app.service.clone(), caller, turn);
        let answer = answer(own, opening.as_ref());
        match opening {
            Some(opening) => Ok(stream(
                answer,
                self.encoder,
                &opening,
                Some(self.meter),
                self.span,
            )),
            None => read_whole(answer, self.encoder, self.meter).await,
        }
    }
}

impl<M, St, E> Delivery for InDialect<'_, M, St, E>
where
    M: ChatModel + 'static,
    St: SessionStore + 'static,
    E: TurnEncoder,
{
    async fn deliver<S: ModelStream + 'static>(
        self,
        started: Started<S>,
    ) -> Result<Response, ApiError> {
        self.answer_as(started, |answer, _| answer).await
    }
}

impl<M: ChatModel + 'static, St: SessionStore + 'static> super::ChatState<M, St> {
    /// A stateless completion's turn, started by the service and delivered in `encoder`'s dialect under `span`:
    /// streamed when `stream`, else whole.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn complete<E>(
        &self,
        caller: Caller,
        turn: &TurnInput,
        completion: &Completion,
        stream: bool,
        encoder: E,
        meter: TurnMeter,
        span: tracing::Span,
    ) -> Result<Response, ApiError>
    where
        E: TurnEncoder,
    {
        let delivery = InDialect {
            app: self,
            encoder,
            meter,
            span: span.clone(),
        };
        self.complete_with(caller, turn, completion, stream, delivery, span)
            .await
    }

    /// A stateless completion's turn, started by the service and answered by `delivery` under `span`: streamed
    /// when `stream`, else whole.
    pub(crate) async fn complete_with(
        &self,
        caller: Caller,
        turn: &TurnInput,
        completion: &Completion,
        stream: bool,
        delivery: impl Delivery,
        span: tracing::Span,
    ) -> Result<Response, ApiError> {
        // The delivery's future is large (the writer's, a kept response's): on the heap, not on a test's small stack.
        async {
            if stream {
                let turn = self
                    .service
                    .complete_stream(&caller, turn, completion)
                    .await;
                Box::pin(delivery.deliver(Started::new(caller, turn, true))).await
            } else {
                let turn = self.service.complete_whole(&caller, turn, completion).await;
                Box::pin(delivery.deliver(Started::new(caller, turn, false))).await
            }
        }
        .instrument(span)
        .await
    }
}
