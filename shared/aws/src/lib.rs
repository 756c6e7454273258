//! Adapters from the chat core's ports to AWS: Bedrock Converse is the model, DynamoDB the store, a Bedrock
//! knowledge base the retriever.

mod attachments;
mod bedrock;
mod guardrail_trace;
mod knowledge_base;
mod store;
pub mod table;
mod usage;

pub use attachments::S3Attachments;
pub use bedrock::{BedrockModel, BedrockStream};
pub use knowledge_base::BedrockKnowledgeBase;
pub use store::DynamoStore;
pub use usage::DynamoUsage;

/// Now, as the history API writes times: RFC 3339 with milliseconds, UTC.
pub(crate) fn now_millis() -> String {
    chat_core::rfc3339_millis(time::OffsetDateTime::now_utc())
}

/// Loads the AWS configuration once per cold start: region, credentials and endpoints from the environment
/// (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME` and `AWS_ENDPOINT_URL_DYNAMODB` point
/// the clients at local servers).
pub async fn load_aws_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}
