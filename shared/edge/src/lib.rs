//! What every function's routes stand on at the HTTP edge: who is calling (identity: IAM, JWT, one local user),
//! reading a request (extractors, bodies, queries), CORS, and errors as responses in one place. No AWS client and no
//! runtime here: the composition root (`chat-app`) builds the routes on this, the runtime (`chat-runtime`) serves them.

mod cors;
mod error;
mod extract;
mod identity;
mod request;
mod routes;

pub use cors::{Cors, LOOPBACK_ORIGINS};
pub use error::{
    ApiError, ConfigError, LONGEST_RETRY_SECONDS, error_response, error_response_in, json_response,
    settings_in,
};
pub use extract::{
    Arrived, CallerAnd, ChatEdgeState, ChatRequest, ChatRoute, ChatUiRoute, CompletionBody,
    CountTokensBody, Deadline, EdgeState, Identified, JsonBody, MessagesBody, ProtocolRoute,
    Proven, ROOM_TO_FINISH, read_dialect_body,
};
pub use identity::{
    ApiKeySettings, ApiKeys, Auth, CallerParts, DEFAULT_CACHE_SECONDS, JwtVerifier, KeySource,
    Keyed, Proof,
};
pub use request::{
    DRAIN_FOR, DRAIN_LIMIT_BYTES, Query, accepts, read_chat_request, read_json_body,
    read_upload_body,
};
pub use routes::{only, only_in};
