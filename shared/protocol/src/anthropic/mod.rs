//! Anthropic's Messages API as a dialect (`/v1/messages`, `/v1/messages/count_tokens`, and `/v1/models` to a client
//! that sends `anthropic-version`): its request read strictly into the core's turn and completion ([`request`]),
//! its answers as a `message` and its server-sent events ([`response`]), its error body ([`error`]), and which
//! Bedrock model answers an Anthropic model name ([`models`]).

pub mod error;
pub mod models;
pub mod request;
pub mod response;

pub use error::{AnthropicErrors, error_body};
pub use models::{ModelInfo, ModelNames, ModelPage};
pub use request::{MessagesRequest, MessagesRoute, parse_messages_request};
pub use response::{MessageEvents, TokenCount, Usage, message, ping, stop_reason};
