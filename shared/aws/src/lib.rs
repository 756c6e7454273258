//! Adapters from the chat core's ports to AWS: Bedrock Converse is the model, DynamoDB the store, a Bedrock
//! knowledge base the retriever.

mod accounts;
mod api_keys;
mod attachments;
mod bedrock;
mod documents;
mod dynamo;
mod embeddings;
mod guardrail_trace;
pub mod https;
mod knowledge_base;
mod store;
pub mod table;
mod usage;

pub use accounts::CognitoAccounts;
pub use api_keys::DynamoApiKeys;
pub use attachments::S3Attachments;
pub use bedrock::{BedrockModel, BedrockStream};
pub use documents::{DynamoDocuments, KnowledgeBaseDocuments, metadata_file, state_of};
pub use embeddings::BedrockEmbedder;
pub use knowledge_base::BedrockKnowledgeBase;
pub use store::DynamoStore;
pub use usage::DynamoUsage;

/// Now, as the history API writes times: RFC 3339 with milliseconds, UTC.
pub(crate) fn now_millis() -> String {
    chat_core::rfc3339_millis(time::OffsetDateTime::now_utc())
}

/// `timeout` as the bound of a whole call (every attempt and the back-offs between them) and of each attempt: an
/// attempt's bound alone would let the SDK's retries multiply it (three attempts: three times the bound).
pub(crate) fn whole_call_timeout(
    timeout: std::time::Duration,
) -> aws_smithy_types::timeout::TimeoutConfig {
    aws_smithy_types::timeout::TimeoutConfig::builder()
        .operation_timeout(timeout)
        .operation_attempt_timeout(timeout)
        .build()
}

/// A Bedrock runtime client from the shared AWS configuration, every call bounded by `timeout`
/// ([`whole_call_timeout`]).
pub(crate) fn bedrock_runtime(
    config: &aws_config::SdkConfig,
    timeout: std::time::Duration,
) -> aws_sdk_bedrockruntime::Client {
    let conf = aws_sdk_bedrockruntime::config::Builder::from(config)
        .timeout_config(whole_call_timeout(timeout))
        .build();
    aws_sdk_bedrockruntime::Client::from_conf(conf)
}

/// Loads the AWS configuration once per cold start: region, credentials and endpoints from the environment
/// (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME` and `AWS_ENDPOINT_URL_DYNAMODB` point
/// the clients at local servers), and one HTTP client, one connection pool, for every SDK client built from it
/// ([`https::https_client`]).
pub async fn load_aws_config() -> aws_config::SdkConfig {
    aws_config_loader().load().await
}

/// What [`load_aws_config`] loads, before it loads it (a test adds its endpoint).
///
/// On Lambda the role's credentials and the Region are in the environment, where the default chains look first:
/// taking them from there directly skips building those chains (among them an STS client for web identity, whose
/// construction was the largest single cost of a cold start's configuration). Without them (a profile, SSO, a
/// container's credentials, SnapStart), the default chains as before.
pub fn aws_config_loader() -> aws_config::ConfigLoader {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if set("AWS_ACCESS_KEY_ID").is_some() && set("AWS_SECRET_ACCESS_KEY").is_some() {
        loader = loader.credentials_provider(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        );
    }
    if let Some(region) = set("AWS_REGION").or_else(|| set("AWS_DEFAULT_REGION")) {
        loader = loader.region(aws_config::Region::new(region));
    }
    match https::https_client() {
        Ok(client) => loader.http_client(client),
        Err(e) => {
            tracing::warn!(error = %e, "no shared HTTPS client: each AWS client builds its own");
            loader
        }
    }
}
