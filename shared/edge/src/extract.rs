//! What a handler takes from a request, as axum extractors: who calls, a JSON body within the limit, a chat request
//! in its dialect. Each refuses with the API's own error ([`ApiError`]), as the readers they wrap do
//! ([`Auth::identify`], [`read_json_body`], [`read_chat_request`]). A function's state says how callers are known
//! and how large a body may be ([`EdgeState`], [`ChatEdgeState`]).
//!
//! Axum runs a handler's extractors in the order of its arguments and answers the first refusal, so a handler that
//! takes [`Identified`] before a body refuses a request without credentials before reading anything of its body. A
//! handler that must see every refusal itself (to count it, as a turn's meter does) takes
//! `Result<CallerAnd<T>, ApiError>`: the body is read only once the caller is known all the same.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use chat_core::{Caller, RequestLimits};
use chat_protocol::anthropic::{MessagesRequest, MessagesRoute, parse_messages_request};
use chat_protocol::openai::{CompletionRequest, parse_completion_request_with};
use chat_protocol::{ChatInput, Endpoint};

use crate::{ApiError, Auth, Proof, read_chat_request, read_json_body};

/// What the extractors read of a function's state: how callers are known, and the largest JSON body.
pub trait EdgeState: Send + Sync {
    fn auth(&self) -> &Auth;
    /// The largest JSON body a route takes (`MAX_BODY_BYTES`, or the history's own).
    fn max_body_bytes(&self) -> usize;
}

/// What a chat request's extractor reads of the state besides: the bounds of a request, and the largest request
/// with files.
pub trait ChatEdgeState: EdgeState {
    fn request_limits(&self) -> &RequestLimits;
    /// `MAX_UPLOAD_BYTES`.
    fn max_upload_bytes(&self) -> usize;
    /// The parameters a Chat Completions request may carry unapplied besides the vendor ones every deployment takes
    /// (`OPENAI_IGNORED_PARAMETERS`).
    fn ignored_parameters(&self) -> &[String] {
        &[]
    }
}

impl<T: EdgeState + ?Sized> EdgeState for Arc<T> {
    fn auth(&self) -> &Auth {
        (**self).auth()
    }

    fn max_body_bytes(&self) -> usize {
        (**self).max_body_bytes()
    }
}

impl<T: ChatEdgeState + ?Sized> ChatEdgeState for Arc<T> {
    fn request_limits(&self) -> &RequestLimits {
        (**self).request_limits()
    }

    fn max_upload_bytes(&self) -> usize {
        (**self).max_upload_bytes()
    }

    fn ignored_parameters(&self) -> &[String] {
        (**self).ignored_parameters()
    }
}

/// When the request reached its handler, before any extractor after this one read anything of it: what a turn's
/// meter counts from.
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub Instant);

impl<S: Send + Sync> FromRequestParts<S> for Arrived {
    type Rejection = Infallible;

    async fn from_request_parts(_parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Arrived(Instant::now()))
    }
}

/// When the request must be answered by: the invocation's deadline under Lambda, less room to store and answer
/// what was done (a quarter of the time left, at most [`ROOM_TO_FINISH`]); `None` where no deadline is known (a
/// plain server), or where the one given has passed already when the request arrives (an emulator's that is not
/// Lambda's: `cargo lambda watch` gives such). What a multi-agent round ends by, so that the function's timeout
/// never cuts it off.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub Option<tokio::time::Instant>);

/// The most room a deadline leaves before the invocation's own to store and answer.
pub const ROOM_TO_FINISH: std::time::Duration = std::time::Duration::from_secs(10);

impl Deadline {
    /// The deadline of an invocation that must end at `invocation_ends`, as seen at `now`; `None` when that has
    /// passed.
    pub fn before(
        invocation_ends: std::time::SystemTime,
        now: std::time::SystemTime,
    ) -> Option<tokio::time::Instant> {
        let left = invocation_ends
            .duration_since(now)
            .ok()
            .filter(|left| !left.is_zero())?;
        let room = (left / 4).min(ROOM_TO_FINISH);
        Some(tokio::time::Instant::now() + (left - room))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Deadline {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Deadline(
            parts
                .extensions
                .get::<lambda_http::Context>()
                .and_then(|context| {
                    Deadline::before(context.deadline(), std::time::SystemTime::now())
                }),
        ))
    }
}

/// Who calls, as the state's [`Auth`] knows them; else 401.
#[derive(Debug, Clone)]
pub struct Identified(pub Caller);

impl<S: EdgeState> FromRequestParts<S> for Identified {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        state.auth().identify(&*parts).await.map(Identified)
    }
}

/// Who calls and how they were proven (by an API key, or by the mode); else 401.
#[derive(Debug, Clone)]
pub struct Proven(pub Caller, pub Proof);

impl<S: EdgeState> FromRequestParts<S> for Proven {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let (caller, proof) = state.auth().identify_proven(&*parts).await?;
        Ok(Proven(caller, proof))
    }
}

/// The body, if it is JSON (or says nothing of its type) and within the state's [`EdgeState::max_body_bytes`];
/// else 415 or 413 (see [`read_json_body`]).
#[derive(Debug, Clone)]
pub struct JsonBody(pub Bytes);

impl<S: EdgeState> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        read_json_body(&parts.headers, body, state.max_body_bytes())
            .await
            .map(JsonBody)
    }
}

/// Which family of routes a chat request came to (see [`Endpoint`]), as a type: [`ProtocolRoute`] or
/// [`ChatUiRoute`].
pub trait ChatRoute: Send + Sync {
    const ENDPOINT: Endpoint;
}

/// `/chat`, `/chat/stream`: the AI Chat Protocol, either version; JSON or `multipart/form-data` with files.
pub struct ProtocolRoute;

/// The Chat UI's routes (`/chat-ui/chat`, the multi-agent ones): JSON.
pub struct ChatUiRoute;

impl ChatRoute for ProtocolRoute {
    const ENDPOINT: Endpoint = Endpoint::Protocol;
}

impl ChatRoute for ChatUiRoute {
    const ENDPOINT: Endpoint = Endpoint::ChatUi;
}

/// A chat request sent to route `R`, read within the state's limits, parsed and checked: its turn and the dialect
/// it is answered in (see [`read_chat_request`]).
pub struct ChatRequest<R = ProtocolRoute> {
    pub input: ChatInput,
    route: PhantomData<R>,
}

impl<S: ChatEdgeState, R: ChatRoute> FromRequest<S> for ChatRequest<R> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let input = read_chat_request(
            &parts.headers,
            body,
            R::ENDPOINT,
            state.request_limits(),
            state.max_body_bytes(),
            state.max_upload_bytes(),
        )
        .await?;
        Ok(ChatRequest {
            input,
            route: PhantomData,
        })
    }
}

/// A Chat Completions request (`POST /v1/chat/completions`): JSON within the larger of the state's JSON and upload
/// limits (its images and files come inside it, in base64), parsed strictly ([`parse_completion_request_with`], the
/// operator's ignored parameters taken).
pub struct CompletionBody(pub CompletionRequest);

impl<S: ChatEdgeState> FromRequest<S> for CompletionBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = read_dialect_body(request, state).await?;
        Ok(CompletionBody(parse_completion_request_with(
            &body,
            state.request_limits(),
            state.ignored_parameters(),
        )?))
    }
}

/// A Messages request (`POST /v1/messages`): JSON within the larger of the state's JSON and upload limits (its
/// images and documents come inside it, in base64), parsed strictly ([`parse_messages_request`]).
pub struct MessagesBody(pub MessagesRequest);

impl<S: ChatEdgeState> FromRequest<S> for MessagesBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        read_messages(request, state, MessagesRoute::Create)
            .await
            .map(MessagesBody)
    }
}

/// A count of a Messages request's tokens (`POST /v1/messages/count_tokens`): [`MessagesBody`] without
/// `max_tokens` and `stream`.
pub struct CountTokensBody(pub MessagesRequest);

impl<S: ChatEdgeState> FromRequest<S> for CountTokensBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        read_messages(request, state, MessagesRoute::CountTokens)
            .await
            .map(CountTokensBody)
    }
}

async fn read_messages<S: ChatEdgeState>(
    request: Request,
    state: &S,
    route: MessagesRoute,
) -> Result<MessagesRequest, ApiError> {
    let body = read_dialect_body(request, state).await?;
    Ok(parse_messages_request(
        &body,
        state.request_limits(),
        route,
    )?)
}

/// The JSON body of a dialect's request (Chat Completions, Messages, Responses), within the larger of the state's
/// JSON and upload limits: its images and files come inside it, in base64.
pub async fn read_dialect_body<S: ChatEdgeState>(
    request: Request,
    state: &S,
) -> Result<Bytes, ApiError> {
    let (parts, body) = request.into_parts();
    let limit = state.max_body_bytes().max(state.max_upload_bytes());
    read_json_body(&parts.headers, body, limit).await
}

/// Who calls, and then what `T` reads of the rest of the request: `T` is read only once the caller is known. What
/// a handler takes as `Result<CallerAnd<T>, ApiError>` to see a refusal of either itself.
pub struct CallerAnd<T>(pub Caller, pub T);

impl<S, T> FromRequest<S> for CallerAnd<T>
where
    S: EdgeState,
    T: FromRequest<S>,
    T::Rejection: Into<ApiError>,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let Identified(caller) = Identified::from_request_parts(&mut parts, state).await?;
        let rest = T::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(Into::into)?;
        Ok(CallerAnd(caller, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;

    /// The deadline a request's Lambda context gives, as the extractor reads it.
    async fn deadline_of(context: Option<lambda_http::Context>) -> Option<std::time::Duration> {
        let mut request = axum::http::Request::new(());
        if let Some(context) = context {
            request.extensions_mut().insert(context);
        }
        let (mut parts, ()) = request.into_parts();
        let Deadline(deadline) = Deadline::from_request_parts(&mut parts, &()).await.unwrap();
        deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
    }

    fn ending_in(from_now: i64) -> lambda_http::Context {
        let mut context = lambda_http::Context::default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        context.deadline = (now + from_now) as u64;
        context
    }

    #[tokio::test]
    async fn a_deadline_leaves_room_to_answer_and_one_passed_already_is_none() {
        let secs = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64().round() as u64);
        // 300 s left: ends 10 s before (the most room); 20 s left: a quarter of them, 5 s before.
        assert_eq!(secs(deadline_of(Some(ending_in(300_000))).await), Some(290));
        assert_eq!(secs(deadline_of(Some(ending_in(20_000))).await), Some(15));
        // No context (a plain server), Lambda's default (0), or a deadline passed on arrival (an emulator's).
        assert_eq!(deadline_of(None).await, None);
        assert_eq!(
            deadline_of(Some(lambda_http::Context::default())).await,
            None
        );
        assert_eq!(deadline_of(Some(ending_in(-1_000))).await, None);
    }

    struct State {
        auth: Auth,
        limits: RequestLimits,
    }

    impl EdgeState for State {
        fn auth(&self) -> &Auth {
            &self.auth
        }

        fn max_body_bytes(&self) -> usize {
            16
        }
    }

    impl ChatEdgeState for State {
        fn request_limits(&self) -> &RequestLimits {
            &self.limits
        }

        fn max_upload_bytes(&self) -> usize {
            16
        }
    }

    fn state(auth: Auth) -> Arc<State> {
        Arc::new(State {
            auth,
            limits: RequestLimits::default(),
        })
    }

    fn post(content_type: &str, body: &'static str) -> Request {
        axum::http::Request::post("/chat")
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap()
    }

    #[tokio::test]
    async fn a_caller_without_credentials_is_refused_before_the_body_is_read() {
        // IAM auth with no request context: no caller. The body is neither JSON nor within the limit, and would be
        // refused for that if it were read.
        let refused = CallerAnd::<JsonBody>::from_request(
            post("text/plain", "far more than sixteen bytes"),
            &state(Auth::Iam),
        )
        .await
        .err()
        .expect("no caller");
        assert_eq!(refused.into_response().status(), StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn a_known_caller_s_body_is_held_to_the_state_s_limit_and_type() {
        let local = || {
            state(Auth::None {
                user: "alice".into(),
            })
        };
        let CallerAnd(caller, JsonBody(body)) =
            CallerAnd::<JsonBody>::from_request(post("application/json", "{}"), &local())
                .await
                .expect("a known caller's JSON");
        assert_eq!(caller.oid.as_deref(), Some("alice"));
        assert_eq!(&body[..], b"{}");
        fn status<T>(refused: Result<T, ApiError>) -> StatusCode {
            refused.err().expect("refused").status()
        }
        let too_large = JsonBody::from_request(
            post("application/json", "far more than sixteen bytes"),
            &local(),
        )
        .await;
        assert_eq!(status(too_large), StatusCode::PAYLOAD_TOO_LARGE);
        let not_json = JsonBody::from_request(post("text/plain", "{}"), &local()).await;
        assert_eq!(status(not_json), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let not_a_chat =
            ChatRequest::<ChatUiRoute>::from_request(post("application/json", "{}"), &local())
                .await;
        assert_eq!(status(not_a_chat), StatusCode::BAD_REQUEST);
    }
}
