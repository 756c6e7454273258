//! OpenAI's Responses API as a dialect (`/v1/responses`): its request read strictly into the core's turn and
//! completion ([`request`]), its answer as the `response` object or its typed server-sent events ([`response`]).
//! Its errors are OpenAI's, naming the request's own fields ([`error`]).

pub mod error;
pub mod request;
pub mod response;

pub use error::{ResponsesErrors, in_own_terms, own_param};
pub use request::{
    Conversation, HOSTED_TOOLS, ResponsesRequest, SealedReasoning, ToolNames, ToolOrigin,
    conversation, is_reference, parse_responses_request, referenced,
};
pub use response::{
    ResponseContext, ResponseEvents, SealReasoning, Usage, response_id, whole_response,
};
