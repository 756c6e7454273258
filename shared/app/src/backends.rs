//! The adapters a function needs, built once per cold start from its configuration: the one place that turns
//! settings into AWS clients and MCP servers.

use std::sync::Arc;

use chat_aws::{
    BedrockEmbedder, BedrockKnowledgeBase, BedrockModel, DynamoStore, KnowledgeBaseDocuments,
    S3Attachments,
};
use chat_core::{AttachmentStore, DocumentSettings, Documents, Embedder, Retriever, ToolSource};

use chat_edge::ConfigError;

use crate::Config;

/// How long one call of the documents' ports may take (a document of a few MB to S3, an ingestion, a status).
pub const DOCUMENT_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The AWS configuration (region, credentials, endpoints from the environment), loaded once.
pub struct Backends {
    aws: aws_config::SdkConfig,
}

impl Backends {
    pub async fn load() -> Self {
        Self {
            aws: chat_aws::load_aws_config().await,
        }
    }

    /// Bedrock Converse, each call bounded by `MODEL_TIMEOUT_MS`.
    pub fn model(&self, config: &Config) -> BedrockModel {
        BedrockModel::new(&self.aws, config.model_timeout)
    }

    /// Bedrock's embedding models for `POST /v1/embeddings`, each call bounded by `MODEL_TIMEOUT_SECONDS`; `None`
    /// when `EMBEDDING_MODELS` names none.
    pub fn embedder(&self, config: &Config) -> Option<Arc<dyn Embedder>> {
        if config.embedding_models.is_empty() {
            return None;
        }
        Some(Arc::new(BedrockEmbedder::new(
            &self.aws,
            config.model_timeout,
        )))
    }

    /// The chats' table, with the store's timeouts and the chats' time to live.
    pub fn store(&self, config: &Config) -> DynamoStore {
        DynamoStore::from_config(
            &self.aws,
            &config.table_name,
            config.history_ttl_days,
            config.store_timeouts,
        )
    }

    /// The Cognito user pool `pool_id`, asked whether a key's owner may still act, each call bounded by `timeout`.
    pub fn accounts(
        &self,
        pool_id: &str,
        timeout: std::time::Duration,
    ) -> chat_aws::CognitoAccounts {
        chat_aws::CognitoAccounts::from_config(&self.aws, pool_id, timeout)
    }

    /// The bucket that keeps the files of messages, when `ATTACHMENTS_BUCKET` names one.
    pub fn attachments(&self, config: &Config) -> Option<Arc<dyn AttachmentStore>> {
        let bucket = config.attachments_bucket.as_deref()?;
        Some(Arc::new(S3Attachments::from_config(
            &self.aws,
            bucket,
            config.attachment_url_lifetime,
            config.store_timeouts,
        )))
    }

    /// The documents people upload into the knowledge base, when `KNOWLEDGE_BASE_ID`,
    /// `KNOWLEDGE_BASE_DATA_SOURCE_ID` and `DOCUMENTS_BUCKET` name one, its S3 data source and its bucket: records in
    /// the chats' table, bytes in the bucket, ingestion through bedrock-agent (`AWS_ENDPOINT_URL_BEDROCK_AGENT`
    /// points it at a local server), each call bounded by [`DOCUMENT_CALL_TIMEOUT`].
    pub fn documents(&self, config: &Config) -> Option<Documents> {
        let d = &config.documents;
        let (kb, ds, bucket) = config.uploads_into()?;
        let index = KnowledgeBaseDocuments::from_config(
            &self.aws,
            &self.aws,
            bucket,
            kb,
            ds,
            DOCUMENT_CALL_TIMEOUT,
            config.store_timeouts,
        );
        let everyone_group = match &config.chat.retrieval.access {
            chat_core::DocumentAccess::Enforced { everyone_group } => everyone_group.clone(),
            chat_core::DocumentAccess::Open => {
                chat_core::DocumentAccess::DEFAULT_EVERYONE_GROUP.to_string()
            }
        };
        Some(Documents::new(
            Arc::new(self.store(config).documents()),
            Arc::new(index),
            DocumentSettings {
                admin_group: d.admin_group.clone(),
                everyone_group,
                max_bytes: d.max_bytes,
                max_per_upload: d.max_per_upload,
                timeout: DOCUMENT_CALL_TIMEOUT,
            },
        ))
    }

    /// The knowledge base standard turns search, when `KNOWLEDGE_BASE_ID` names one.
    pub fn knowledge_base(&self, config: &Config) -> Option<Arc<dyn Retriever>> {
        BedrockKnowledgeBase::configured(
            &self.aws,
            config.knowledge_base_id.clone(),
            config.knowledge_base_timeout,
        )
    }
}

/// The MCP servers of `MCP_SERVERS`, their tools listed on the first turn (not here: a server down must not fail a
/// cold start). A list that does not parse is a configuration error; the message never holds a header's value.
pub fn mcp_servers(config: &Config) -> Result<Vec<Arc<dyn ToolSource>>, ConfigError> {
    let Some(json) = &config.mcp_servers else {
        return Ok(Vec::new());
    };
    let servers = chat_mcp::McpServers::from_json(
        &json.0,
        config.tool_bounds.call_timeout,
        crate::http_client(),
    )
    .map_err(|reason| ConfigError {
        name: "MCP_SERVERS",
        reason,
    })?
    .with_max_result_bytes(config.tool_bounds.max_result_bytes)
    .with_sessions(chat_mcp::Sessions {
        max: config.mcp_max_sessions,
        idle: config.mcp_session_idle,
    })
    .with_allow_required(config.mcp_require_allow);
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![Arc::new(servers)])
}
