//! The one place where errors become HTTP: a status and a message for a person; internals go to the log only.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chat_core::{
    AttachmentError, ChatError, DocumentError, IndexError, ModelError, SearchError, StoreError,
};
use chat_protocol::{ErrorShape, Fault, FaultKind, PlainErrors};
use serde::Serialize;

/// A setting that cannot be used, found at a cold start: which environment variable, and why (never a secret: at most
/// the setting's value). The runtime reports it (`chat_runtime::start`); nothing is served with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {name}: {reason}")]
pub struct ConfigError {
    pub name: &'static str,
    pub reason: String,
}

/// A lookup of settings in name/value pairs, the first pair of a name winning: what a `from_lookup` reads in place of
/// the environment, for tests and tools.
pub fn settings_in<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

/// Everything a request can fail with, from the edge (route, method, body) to the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed; allowed: {allow}")]
    MethodNotAllowed { allow: &'static str },
    #[error("body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// A request with files larger than `MAX_UPLOAD_BYTES`.
    #[error("multipart body larger than {limit} bytes")]
    UploadTooLarge { limit: usize },
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// The caller is known, and may not do this; the text says why, to them.
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("invalid cursor")]
    InvalidCursor,
    #[error("content type {0:?} is not JSON")]
    UnsupportedMediaType(String),
    #[error(transparent)]
    Chat(#[from] ChatError),
}

impl From<chat_core::InvalidRequest> for ApiError {
    fn from(e: chat_core::InvalidRequest) -> Self {
        ApiError::Chat(e.into())
    }
}

/// A documents error as the API answers it: an unknown or another user's document is a 404 (the same), a quota a
/// 429 with `Retry-After` (midnight UTC) and the message that says which quota and how much is left, the index's
/// faults as the store's.
impl From<DocumentError> for ApiError {
    fn from(e: DocumentError) -> Self {
        match e {
            DocumentError::NotFound => {
                ApiError::NotFound("/documents/{id} (no such document)".into())
            }
            DocumentError::Forbidden(why) => ApiError::Forbidden(why),
            DocumentError::Invalid { field, reason } => {
                chat_core::InvalidRequest::new(field, reason).into()
            }
            DocumentError::TooLarge { name, limit } => chat_core::InvalidRequest::new(
                "files",
                format!("{name:?} is larger than {limit} bytes, the most one document may be"),
            )
            .into(),
            DocumentError::OverQuota(over) => ApiError::Chat(ChatError::OverLimit(over)),
            DocumentError::Store(e) => ApiError::Chat(ChatError::Store(e)),
            DocumentError::Index(IndexError::Unavailable(detail)) => {
                ApiError::Chat(ChatError::Store(StoreError::Unavailable(detail)))
            }
            DocumentError::Index(IndexError::Failed(detail)) => {
                ApiError::Chat(ChatError::Store(StoreError::Failed(detail)))
            }
        }
    }
}

/// A store that did not answer is usually back within a second or two (a network blip, a throttled partition).
const STORE_RETRY_AFTER_SECONDS: u32 = 1;

/// Bedrock throttled the model or the knowledge base even after the SDK's retries (its per-minute quota spent): a
/// few seconds let it refill. The clients' SDKs wait on `Retry-After` before their own retry.
const THROTTLED_RETRY_AFTER_SECONDS: u32 = 5;

/// The longest wait a client is left to retry after by itself. A quota spent until its period ends (midnight UTC, the
/// week's or the month's end) is answered `x-should-retry: false` besides its `Retry-After`: Anthropic's and OpenAI's
/// SDKs retry a 429 by default, and Anthropic's sleeps whatever `Retry-After` says, so a capped user's Claude Code or
/// SDK call would hang until the reset instead of showing the sentence that says why.
pub const LONGEST_RETRY_SECONDS: u32 = 60;

/// The protocol's own wording for a fault whose details only the log may see.
const INTERNAL: &str = "The app encountered an error processing your request.\nIf you are an administrator of the app, view the full error in the logs.";

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound(_)
            | ApiError::Chat(ChatError::ChatNotFound | ChatError::ModelNotFound(_)) => {
                StatusCode::NOT_FOUND
            }
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::InvalidCursor => StatusCode::BAD_REQUEST,
            ApiError::Chat(ChatError::Store(
                StoreError::Contended | StoreError::Unavailable(_),
            )) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Chat(ChatError::Store(StoreError::InvalidCursor)) => StatusCode::BAD_REQUEST,
            ApiError::Chat(ChatError::Store(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge { .. }
            | ApiError::UploadTooLarge { .. }
            | ApiError::Chat(ChatError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Chat(ChatError::Files(AttachmentError::Unavailable(_))) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Chat(ChatError::Files(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Chat(ChatError::Invalid(_) | ChatError::ContentFiltered) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Chat(ChatError::OverLimit(_)) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Chat(ChatError::Model(m)) => match m {
                ModelError::Throttled => StatusCode::TOO_MANY_REQUESTS,
                // Bedrock's ValidationException: the request asks what the model does not take, which the client
                // can change (never a 500, which SDKs retry).
                ModelError::InputTooLong(_) | ModelError::Rejected(_) => StatusCode::BAD_REQUEST,
                ModelError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
                ModelError::Failed(_) => StatusCode::BAD_GATEWAY,
                ModelError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
                ModelError::AccessDenied(_) | ModelError::NotFound(_) => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            },
            ApiError::Chat(ChatError::Search(e)) => match e {
                SearchError::Throttled => StatusCode::TOO_MANY_REQUESTS,
                SearchError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
                SearchError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
                SearchError::AccessDenied(_)
                | SearchError::NotFound(_)
                | SearchError::Rejected(_)
                | SearchError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// How many seconds the client should wait before trying again (`Retry-After`), for faults that pass.
    pub fn retry_after(&self) -> Option<u32> {
        match self {
            ApiError::Chat(ChatError::Store(StoreError::Unavailable(_))) => {
                Some(STORE_RETRY_AFTER_SECONDS)
            }
            ApiError::Chat(ChatError::OverLimit(over)) => {
                Some(u32::try_from(over.retry_after).unwrap_or(u32::MAX))
            }
            ApiError::Chat(
                ChatError::Model(ModelError::Throttled) | ChatError::Search(SearchError::Throttled),
            ) => Some(THROTTLED_RETRY_AFTER_SECONDS),
            _ => None,
        }
    }

    /// What the client is told.
    pub fn public_message(&self) -> String {
        match self {
            ApiError::NotFound(path) => format!("There is nothing at {path}."),
            ApiError::Chat(ChatError::ChatNotFound) => "There is no chat with that id.".into(),
            ApiError::Chat(ChatError::ModelNotFound(id)) => format!(
                "The model `{id}` does not exist or this deployment does not serve it; GET /v1/models lists those it does."
            ),
            ApiError::Unauthorized(_) => "Missing or invalid credentials.".into(),
            ApiError::Forbidden(why) => why.clone(),
            ApiError::InvalidCursor | ApiError::Chat(ChatError::Store(StoreError::InvalidCursor)) => {
                "cursor: not a cursor this list gave".into()
            }
            ApiError::Chat(ChatError::Store(StoreError::Contended)) => {
                "Too many changes to this chat at once. Please try again.".into()
            }
            ApiError::Chat(ChatError::Store(StoreError::Unavailable(_))) => {
                "The chat store is not answering right now. Please try again in a moment.".into()
            }
            ApiError::Chat(ChatError::Store(_)) => INTERNAL.into(),
            ApiError::Chat(ChatError::OverLimit(over)) => over.message.clone(),
            ApiError::MethodNotAllowed { allow } => {
                format!("This route does not answer that method; use {allow}.")
            }
            ApiError::PayloadTooLarge { limit } => {
                format!("The request body is larger than the limit of {limit} bytes.")
            }
            ApiError::UploadTooLarge { limit } => format!(
                "The request with its files is larger than the limit of {limit} bytes (MAX_UPLOAD_BYTES: a Lambda \
                 request carries at most 6 MB, files in base64). Send fewer or smaller files, or send them over \
                 several turns."
            ),
            ApiError::UnsupportedMediaType(_) => {
                "The request body must be JSON (Content-Type: application/json).".into()
            }
            ApiError::Chat(ChatError::Invalid(e) | ChatError::TooLarge(e)) => e.to_string(),
            ApiError::Chat(ChatError::Files(AttachmentError::Unavailable(_))) => {
                "The file store is not answering right now. Please try again in a moment.".into()
            }
            ApiError::Chat(ChatError::Files(_)) => INTERNAL.into(),
            ApiError::Chat(ChatError::ContentFiltered) => {
                "Your message contains content that was flagged by the content filter.".into()
            }
            ApiError::Chat(ChatError::Model(m)) => match m {
                ModelError::Throttled => {
                    "The model is receiving too many requests. Please try again in a moment.".into()
                }
                ModelError::InputTooLong(_) => {
                    "Your conversation is longer than the model can read. Start a new chat or send a shorter message.".into()
                }
                ModelError::Timeout(_) => "The model took too long to answer. Please try again.".into(),
                ModelError::Failed(_) | ModelError::Unavailable(_) => {
                    "The model could not answer right now. Please try again.".into()
                }
                ModelError::Rejected(why) => format!("The model refused the request: {why}"),
                ModelError::AccessDenied(_) | ModelError::NotFound(_) => INTERNAL.into(),
            },
            ApiError::Chat(ChatError::Search(e)) => match e {
                SearchError::Throttled => {
                    "The document search is receiving too many requests. Please try again in a moment."
                        .into()
                }
                SearchError::Timeout(_) => {
                    "The document search took too long to answer. Please try again.".into()
                }
                SearchError::Unavailable(_) => {
                    "The document search could not answer right now. Please try again.".into()
                }
                SearchError::AccessDenied(_)
                | SearchError::NotFound(_)
                | SearchError::Rejected(_)
                | SearchError::Failed(_) => INTERNAL.into(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(&self)
    }
}

/// A JSON response with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            serde_json::to_string(body).expect("response types always serialize"),
        ))
        .expect("a response built from valid parts")
}

/// The error as the client sees it, `{"error": "…"}` with its status; the details are logged.
pub fn error_response(err: &ApiError) -> Response {
    error_response_in::<PlainErrors>(err)
}

/// The error as the routes of a dialect whose errors have the shape `S` answer it before any byte of an answer: the
/// body in that shape, and, the same in every dialect, the status, `Allow` on a 405 and `Retry-After` when the
/// client should try again later; the details are logged.
pub fn error_response_in<S: ErrorShape>(err: &ApiError) -> Response {
    let fault = err.fault();
    let mut response = Response::builder()
        .status(S::status(&fault))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(S::error_body(&fault)))
        .expect("a response built from valid parts");
    if let FaultKind::MethodNotAllowed { allow } = fault.kind {
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    }
    if let Some(seconds) = fault.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        if seconds > LONGEST_RETRY_SECONDS {
            response
                .headers_mut()
                .insert("x-should-retry", header::HeaderValue::from_static("false"));
        }
    }
    response
}

impl ApiError {
    /// The fault as a client is told it, in whichever dialect (`chat_protocol::Encoder::fault`,
    /// [`error_response_in`]); its details are logged here, once per answer.
    pub fn fault(&self) -> Fault {
        let status = status_and_log(self);
        Fault {
            status: status.as_u16(),
            message: self.public_message(),
            kind: self.fault_kind(),
            param: self.param(),
            retry_after: self.retry_after(),
        }
    }

    /// What kind of fault this is, where a dialect names kinds beyond the status.
    fn fault_kind(&self) -> FaultKind {
        match self {
            ApiError::Unauthorized(_) => FaultKind::Unauthorized,
            ApiError::Forbidden(_) => FaultKind::Forbidden,
            ApiError::NotFound(_) => FaultKind::UnknownRoute,
            ApiError::MethodNotAllowed { allow } => FaultKind::MethodNotAllowed { allow },
            ApiError::Chat(ChatError::ModelNotFound(_)) => FaultKind::ModelNotFound,
            ApiError::Chat(ChatError::OverLimit(over)) if over.is_rate() => FaultKind::OverRate,
            ApiError::Chat(ChatError::OverLimit(_)) => FaultKind::OverQuota,
            ApiError::Chat(ChatError::Model(ModelError::Throttled)) => FaultKind::ModelThrottled,
            ApiError::Chat(ChatError::Model(ModelError::Rejected(_))) => FaultKind::ModelRejected,
            ApiError::Chat(ChatError::ContentFiltered) => FaultKind::ContentFiltered,
            ApiError::PayloadTooLarge { .. }
            | ApiError::UploadTooLarge { .. }
            | ApiError::InvalidCursor
            | ApiError::UnsupportedMediaType(_)
            | ApiError::Chat(
                ChatError::Invalid(_)
                | ChatError::TooLarge(_)
                | ChatError::Store(StoreError::InvalidCursor)
                | ChatError::Model(ModelError::InputTooLong(_)),
            ) => FaultKind::Invalid,
            _ => FaultKind::Other,
        }
    }

    /// The request's field at fault, when one is.
    fn param(&self) -> Option<String> {
        match self {
            ApiError::Chat(ChatError::Invalid(e) | ChatError::TooLarge(e))
                if !e.path.is_empty() =>
            {
                Some(e.path.clone())
            }
            ApiError::Chat(ChatError::ModelNotFound(_)) => Some("model".into()),
            ApiError::Chat(ChatError::Model(ModelError::Rejected(why))) => {
                refused_param(why).map(String::from)
            }
            ApiError::Chat(ChatError::Model(ModelError::InputTooLong(_))) => {
                Some("messages".into())
            }
            _ => None,
        }
    }
}

/// The request's field a model's refusal (Bedrock's `ValidationException` message) is about, in the names of
/// OpenAI's API, where its words tell: the first of these that the message mentions. `top_p` before `temperature`,
/// as the message of a model that takes only one of them names both, and `top_p` is the one to leave out.
fn refused_param(message: &str) -> Option<&'static str> {
    const WORDS: &[(&str, &str)] = &[
        ("top_p", "top_p"),
        ("topp", "top_p"),
        ("top_k", "top_k"),
        ("temperature", "temperature"),
        ("budget_tokens", "reasoning_effort"),
        ("thinking", "reasoning_effort"),
        ("reasoning", "reasoning_effort"),
        ("max_tokens", "max_tokens"),
        ("maxtokens", "max_tokens"),
        ("stopsequences", "stop"),
        ("toolchoice", "tool_choice"),
        ("tool_choice", "tool_choice"),
        ("toolconfig", "tools"),
        ("tools", "tools"),
        ("outputconfig", "response_format"),
        ("textformat", "response_format"),
        ("messages", "messages"),
    ];
    let message = message.to_ascii_lowercase();
    WORDS
        .iter()
        .find(|(word, _)| message.contains(word))
        .map(|(_, param)| *param)
}

fn status_and_log(err: &ApiError) -> StatusCode {
    let status = err.status();
    let error = without_quotes(&err.to_string());
    if status.is_server_error() {
        tracing::error!(status = status.as_u16(), %error, "request failed");
    } else {
        tracing::info!(status = status.as_u16(), %error, "request refused");
    }
    status
}

/// `text` with every quoted span (`"…"`, as Debug and serde quote a string, and `` `…` ``, as serde quotes a
/// value or a key) made `…`: an error about a request's shape quotes what the client wrote (`invalid type: string
/// "…", expected a sequence`), and the log holds no word of a request. What the error says of it stays.
fn without_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '`' {
            out.push(c);
            continue;
        }
        out.push(c);
        out.push('…');
        // To the closing quote (a `"` escaped inside a Debug string does not close it); an unclosed one hides the
        // rest.
        while let Some(inner) = chars.next() {
            if inner == '\\' && c == '"' {
                chars.next();
            } else if inner == c {
                out.push(c);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_the_operator_does_not_allow_is_a_404_naming_it() {
        let e = ApiError::Chat(ChatError::ModelNotFound("x.y-v1".into()));
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert!(
            e.public_message().contains("`x.y-v1`"),
            "{}",
            e.public_message()
        );
    }

    #[test]
    fn what_a_client_wrote_is_not_logged_with_its_refusal() {
        assert_eq!(
            without_quotes(
                r#"messages: invalid type: string "secret \"words\"", expected a sequence"#
            ),
            r#"messages: invalid type: string "…", expected a sequence"#
        );
        assert_eq!(
            without_quotes("unknown variant `secret`, expected `user` or `assistant`"),
            "unknown variant `…`, expected `…` or `…`"
        );
        assert_eq!(
            without_quotes(r#"an unclosed "secret"#),
            r#"an unclosed "…"#
        );
        assert_eq!(
            without_quotes("body larger than 10 bytes"),
            "body larger than 10 bytes"
        );
        // A document's name is the client's words: its refusal says it to the client, never to the log.
        let too_large = ApiError::from(DocumentError::TooLarge {
            name: "Salaries 2026.pdf".into(),
            limit: 10,
        });
        assert!(too_large.public_message().contains("Salaries 2026.pdf"));
        assert!(!without_quotes(&too_large.to_string()).contains("Salaries"));
    }

    async fn openai_body(err: ApiError) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = error_response_in::<chat_protocol::openai::OpenAiErrors>(&err);
        let status = response.status();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, retry, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn openai_routes_answer_faults_in_openais_shape_with_the_same_status() {
        let (status, _, body) = openai_body(ApiError::Unauthorized("bad signature".into())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert_eq!(body["error"]["param"], serde_json::Value::Null);
        assert!(!body.to_string().contains("bad signature"));

        let (status, _, body) = openai_body(ChatError::ModelNotFound("gpt-4o".into()).into()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["code"], "model_not_found");
        assert_eq!(body["error"]["param"], "model");

        let over = chat_core::OverLimit {
            kind: chat_core::LimitKind::REQUESTS_PER_MINUTE,
            retry_after: 42,
            message: "Too many requests.".into(),
            alone: false,
        };
        let (status, retry, body) = openai_body(ChatError::OverLimit(over).into()).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(retry.as_deref(), Some("42"));
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        assert_eq!(body["error"]["message"], "Too many requests.");

        let (status, _, body) =
            openai_body(chat_core::InvalidRequest::new("n", "must be 1").into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "n");
        assert_eq!(body["error"]["message"], "n: must be 1");

        let (status, _, body) = openai_body(ApiError::PayloadTooLarge { limit: 10 }).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body["error"]["code"], "request_too_large");

        let (status, _, body) =
            openai_body(ChatError::Model(ModelError::Failed("x".into())).into()).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(body["error"]["type"], "server_error");
    }

    #[tokio::test]
    async fn a_models_refusal_is_the_clients_400_naming_the_field_where_it_can_be_told() {
        let refusal = |why: &str| ChatError::Model(ModelError::Rejected(why.into())).into();
        let (status, _, body) = openai_body(refusal(
            "The model returned the following errors: `temperature` and `top_p` cannot both be specified for this model. Please use only one.",
        ))
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "top_p");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot both be specified"),
            "{body}"
        );
        let (status, _, body) = openai_body(refusal(
            "1 validation error detected: Value at 'toolConfig.tools.1.member.toolSpec.name' failed to satisfy constraint",
        ))
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["param"], "tools");
        let (status, _, body) = openai_body(refusal("The provided request is not valid")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["param"], serde_json::Value::Null);
        assert_eq!(
            body["error"]["message"],
            "The model refused the request: The provided request is not valid"
        );
    }

    #[tokio::test]
    async fn a_throttled_model_or_search_is_a_429_to_retry_after_a_few_seconds() {
        for err in [
            ApiError::from(ChatError::Model(ModelError::Throttled)),
            ApiError::from(ChatError::Search(SearchError::Throttled)),
        ] {
            let response = error_response(&err);
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS, "{err:?}");
            assert_eq!(response.headers()[header::RETRY_AFTER], "5", "{err:?}");
            // The same on the OpenAI-compatible routes, whose SDKs wait on it.
            let (status, retry, _) = openai_body(err).await;
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(retry.as_deref(), Some("5"));
        }
        // A model that failed otherwise is no invitation to come back at once.
        let failed = error_response(&ApiError::from(ChatError::Model(ModelError::Failed(
            "x".into(),
        ))));
        assert!(failed.headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn a_quota_spent_until_its_period_ends_tells_the_sdks_not_to_retry() {
        let over = |retry_after| {
            ApiError::from(ChatError::OverLimit(chat_core::OverLimit {
                kind: chat_core::LimitKind::COST_PER_DAY,
                retry_after,
                message: "You have used your $5 of model use for today.".into(),
                alone: false,
            }))
        };
        let spent = error_response(&over(20_000));
        assert_eq!(spent.headers()[header::RETRY_AFTER], "20000");
        assert_eq!(spent.headers()["x-should-retry"], "false");
        // Held by turns in progress, or the rate limit's minute: worth the SDK's own retry.
        for retryable in [
            over(10),
            over(60),
            ApiError::from(ChatError::Model(ModelError::Throttled)),
        ] {
            let response = error_response(&retryable);
            assert!(response.headers().contains_key(header::RETRY_AFTER));
            assert!(
                response.headers().get("x-should-retry").is_none(),
                "{retryable:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_unavailable_store_is_a_503_to_retry_after_a_second() {
        let err = ApiError::from(ChatError::Store(StoreError::Unavailable("timeout".into())));
        let response = error_response(&err);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a JSON text body");
        let text = std::str::from_utf8(&bytes).expect("a JSON text body");
        let body: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            body["error"],
            "The chat store is not answering right now. Please try again in a moment."
        );
        // The details stay in the log.
        assert!(!text.contains("timeout"));
        // Other faults carry no Retry-After.
        let other = error_response(&ApiError::from(ChatError::Store(StoreError::Failed(
            "x".into(),
        ))));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(other.headers().get(header::RETRY_AFTER).is_none());
    }
}
