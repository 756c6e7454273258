//! OpenAI's Responses API as a dialect (`/v1/responses`): its request read strictly into the core's turn and
//! completion ([`request`]), its answer as the `response` object or its typed server-sent events ([`response`]).
//! Its errors are OpenAI's ([`crate::openai::OpenAiErrors`]).

pub mod request;
pub mod response;

pub use request::{
    Conversation, HOSTED_TOOLS, ResponsesRequest, SealedReasoning, ToolNames, ToolOrigin,
    conversation, is_reference, parse_responses_request, referenced,
};
pub use response::{
    ResponseContext, ResponseEvents, SealReasoning, Usage, response_id, whole_response,
};
