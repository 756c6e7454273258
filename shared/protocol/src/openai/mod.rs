//! OpenAI's Chat Completions API as a dialect (`/v1/chat/completions`, `/v1/models`): its request read strictly
//! into the core's turn and completion ([`request`]), its answers as `chat.completion` and
//! `chat.completion.chunk` ([`response`]), its error body ([`error`]) and model objects ([`models`]); and its
//! `/v1/embeddings` ([`embeddings`], its token ids decoded with [`cl100k`]).

pub mod cl100k;
pub mod embeddings;
pub mod error;
pub mod models;
pub mod request;
pub mod response;

pub use error::{ErrorBody, ErrorObject, OpenAiErrors, error_body};
pub use models::{Model, ModelList, Pricing};
pub use request::{
    CompletionRequest, MAX_METADATA_PAIRS, VENDOR_PARAMETERS, parse_completion_request,
    parse_completion_request_with,
};
pub use response::{
    ChatCompletion, ChatCompletionChunk, ChunkEvents, ChunkHeader, CompletionObject, SSE_DONE,
    Usage, sse_data,
};
