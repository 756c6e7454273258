//! What can go wrong in a turn, typed; the HTTP edge maps each kind to a status in one place.

use crate::InvalidRequest;

/// A fault reported by the model port, already classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("the model throttled the request past the client's retries")]
    Throttled,
    #[error("the conversation is longer than the model's context: {0}")]
    InputTooLong(String),
    #[error("the backend may not use the model: {0}")]
    AccessDenied(String),
    #[error("the model or a resource it needs does not exist: {0}")]
    NotFound(String),
    #[error("the model rejected the request: {0}")]
    Rejected(String),
    #[error("the model did not answer in time: {0}")]
    Timeout(String),
    #[error("the model failed: {0}")]
    Failed(String),
    #[error("the model service is unavailable: {0}")]
    Unavailable(String),
}

/// Why a chat turn did not produce an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    #[error("invalid request: {0}")]
    Invalid(#[from] InvalidRequest),
    /// A file larger than its kind may be.
    #[error("too large: {0}")]
    TooLarge(InvalidRequest),
    #[error("a guardrail or content filter blocked the conversation")]
    ContentFiltered,
    /// The request names a model the operator does not allow (`MODEL_ID`, `ALLOWED_MODELS`): the model id. The
    /// message leaves it out, as it is logged with the refusal and the id is the client's text; the client's answer
    /// names it (chat-edge's `public_message`).
    #[error("no such model")]
    ModelNotFound(String),
    /// The session state names a chat that does not exist for this caller.
    #[error("no such chat for this caller")]
    ChatNotFound,
    #[error(transparent)]
    Store(crate::StoreError),
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The knowledge base failed the turn's search.
    #[error(transparent)]
    Search(crate::SearchError),
    /// The store of the owner's files failed the turn.
    #[error(transparent)]
    Files(crate::AttachmentError),
    /// The caller is over a quota or the rate limit: nothing was asked of the model.
    #[error(transparent)]
    OverLimit(crate::OverLimit),
}

impl From<crate::FileRefusal> for ChatError {
    fn from(refusal: crate::FileRefusal) -> Self {
        match refusal {
            crate::FileRefusal::Invalid(e) => ChatError::Invalid(e),
            crate::FileRefusal::TooLarge(e) => ChatError::TooLarge(e),
        }
    }
}
