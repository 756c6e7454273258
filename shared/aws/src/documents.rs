//! The documents' ports on AWS: their records in the chats' DynamoDB table ([`DynamoDocuments`]), and their bytes
//! in an S3 bucket beside their access lists, ingested one by one into a Bedrock knowledge base's S3 data source
//! ([`KnowledgeBaseDocuments`], `aws-sdk-bedrockagent`).
//!
//! | item | `pk` | `sk` | list index `byUpdated` (`gsi1pk`, `gsi1sk`) | attributes |
//! |---|---|---|---|---|
//! | a document | `DOCS#{owner}` | `DOC#{id}` | `DOCUMENTS`, `{id}` | `id`, `owner`, `name`, `kind`, `bytes`, `oids`, `groups`, `status`, `reason`, `created`, `updated`, `digest` (absent on items older than it), `source` (bulk-loaded documents only) |
//!
//! A document id begins with its time of creation ([`chat_core::new_document_id`]), so one query of the owner's
//! partition, backwards, lists their documents newest first, and one query of the list index's `DOCUMENTS`
//! partition lists everyone's (for administrators).
//!
//! In the bucket, a document is `{owner}/{id}/{name}` (the owner part as the files of messages name it: their id in
//! base64url), so the citation, the key's last part, is the file's name; beside it `{key}.metadata.json` holds
//! `{"metadataAttributes": {"oids": [...]}}` or `{"groups": [...]}`, the convention of docs/document-access.md,
//! so a full sync of the data source reads the same access list the ingestion gave inline.
//!
//! | the service or the SDK says | [`IndexError`] |
//! |---|---|
//! | throttling, a 5xx, no connection, no answer within the timeout | `Unavailable` |
//! | anything else (access denied, validation, an unknown knowledge base, data source or bucket) | `Failed` |

use std::time::Duration;

use aws_sdk_bedrockagent::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockagent::types::{
    ContentDataSourceType, DocumentContent, DocumentIdentifier, DocumentMetadata,
    DocumentStatus as KbStatus, KnowledgeBaseDocument, KnowledgeBaseDocumentDetail,
    MetadataAttribute, MetadataAttributeValue, MetadataSourceType, MetadataValueType, S3Content,
    S3Location,
};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_s3::primitives::ByteStream;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use chat_core::{
    AccessList, DocumentFuture, DocumentIndex, DocumentPage, DocumentRecord, DocumentStatus,
    DocumentStore, DocumentType, IndexError, IndexState, StoreError, StoreTimeouts,
};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::attachments::{deletion, keys_under, owner_prefix};
use crate::dynamo::{Expression, Item, failed, get_item, put_item, s};
use crate::table::{
    LIST_INDEX, LIST_PARTITION_KEY, LIST_SORT_KEY, PARTITION_KEY, SORT_KEY, item_key,
    with_sort_key_prefix,
};

/// The list index's partition that holds every document.
const ALL_DOCUMENTS: &str = "DOCUMENTS";

fn owner_pk(owner: &str) -> String {
    format!("DOCS#{owner}")
}

fn document_sk(id: &str) -> String {
    format!("DOC#{id}")
}

fn key_of(owner: &str, id: &str) -> Item {
    item_key(owner_pk(owner), document_sk(id))
}

/// A document's item, as stored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DocumentItem {
    pk: String,
    sk: String,
    gsi1pk: String,
    gsi1sk: String,
    id: String,
    owner: String,
    name: String,
    kind: String,
    bytes: u64,
    #[serde(default)]
    oids: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
    status: String,
    /// Empty when there is none.
    #[serde(default)]
    reason: String,
    created: i64,
    updated: i64,
    /// The bytes' SHA-256 in hex; absent on an item written before digests were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    /// The bulk load's source path; absent on an upload's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl DocumentItem {
    fn new(r: &DocumentRecord) -> Self {
        Self {
            pk: owner_pk(&r.owner),
            sk: document_sk(&r.id),
            gsi1pk: ALL_DOCUMENTS.into(),
            gsi1sk: r.id.clone(),
            id: r.id.clone(),
            owner: r.owner.clone(),
            name: r.name.clone(),
            kind: r.kind.as_str().into(),
            bytes: r.bytes,
            oids: r.access.oids.clone(),
            groups: r.access.groups.clone(),
            status: r.status.as_str().into(),
            reason: r.reason.clone().unwrap_or_default(),
            created: r.created,
            updated: r.updated,
            digest: r.digest.clone(),
            source: r.source.clone(),
        }
    }

    fn record(self) -> Result<DocumentRecord, StoreError> {
        let bad =
            |what: &str| StoreError::Failed(format!("a document item's {what} does not read"));
        Ok(DocumentRecord {
            kind: DocumentType::parse(&self.kind).ok_or_else(|| bad("kind"))?,
            status: DocumentStatus::parse(&self.status).ok_or_else(|| bad("status"))?,
            id: self.id,
            owner: self.owner,
            name: self.name,
            bytes: self.bytes,
            access: AccessList {
                oids: self.oids,
                groups: self.groups,
            },
            reason: (!self.reason.is_empty()).then_some(self.reason),
            created: self.created,
            updated: self.updated,
            digest: self.digest,
            source: self.source,
        })
    }
}

fn from_item(item: Item) -> Result<DocumentRecord, StoreError> {
    serde_dynamo::from_item::<_, DocumentItem>(item)
        .map_err(|e| StoreError::Failed(format!("a document item does not read: {e}")))?
        .record()
}

/// A page's cursor: the last key read, its string attributes as JSON in base64url.
fn encode_cursor(key: &Item) -> Option<String> {
    let map: serde_json::Map<String, serde_json::Value> = key
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), serde_json::Value::String(v.as_s().ok()?.clone()))))
        .collect();
    Some(URL_SAFE_NO_PAD.encode(serde_json::Value::Object(map).to_string()))
}

/// The key a cursor names, if it is one this listing (of `partition` on `attribute`) gave.
fn decode_cursor(cursor: &str, attribute: &str, partition: &str) -> Result<Item, StoreError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::InvalidCursor)?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)?;
    let allowed = [PARTITION_KEY, SORT_KEY, LIST_PARTITION_KEY, LIST_SORT_KEY];
    let mut key = Item::new();
    for (k, v) in map {
        let v = v.as_str().ok_or(StoreError::InvalidCursor)?;
        if !allowed.contains(&k.as_str()) {
            return Err(StoreError::InvalidCursor);
        }
        key.insert(k, s(v));
    }
    if key
        .get(attribute)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        != Some(partition)
    {
        return Err(StoreError::InvalidCursor);
    }
    Ok(key)
}

/// The documents' records in the chats' table, through the store's client (and so within its timeouts).
#[derive(Clone)]
pub struct DynamoDocuments {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoDocuments {
    pub(crate) fn new(client: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
        }
    }

    async fn put_record(&self, record: &DocumentRecord) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(DocumentItem::new(record))
            .map_err(|e| StoreError::Failed(format!("a document item: {e}")))?;
        let span = tracing::info_span!("documents.put");
        put_item(&self.client, &self.table, item, span).await
    }

    async fn get_record(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<Option<DocumentRecord>, StoreError> {
        let span = tracing::info_span!("documents.get");
        let got = get_item(&self.client, &self.table, key_of(owner, id), true, span).await?;
        got.map(from_item).transpose()
    }

    async fn list_records(
        &self,
        owner: Option<&str>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<DocumentPage, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .scan_index_forward(false)
            .limit(limit.clamp(1, 1000) as i32);
        let query = match owner {
            Some(owner) => {
                let pk = owner_pk(owner);
                let start = cursor
                    .map(|c| decode_cursor(c, PARTITION_KEY, &pk))
                    .transpose()?;
                with_sort_key_prefix(query, pk, "DOC#").set_exclusive_start_key(start)
            }
            None => {
                let start = cursor
                    .map(|c| decode_cursor(c, LIST_PARTITION_KEY, ALL_DOCUMENTS))
                    .transpose()?;
                query
                    .index_name(LIST_INDEX)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", LIST_PARTITION_KEY)
                    .expression_attribute_values(":pk", s(ALL_DOCUMENTS))
                    .set_exclusive_start_key(start)
            }
        };
        let page = query
            .send()
            .instrument(tracing::info_span!("documents.list"))
            .await
            .map_err(failed)?;
        let items = page
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DocumentPage {
            items,
            next: page.last_evaluated_key.as_ref().and_then(encode_cursor),
        })
    }

    async fn set_record_status(&self, record: &DocumentRecord) -> Result<(), StoreError> {
        // Only while the record exists: a status that arrives after a delete does not bring it back.
        let call = Expression::new()
            .set("status", s(record.status.as_str()))
            .set("reason", s(record.reason.clone().unwrap_or_default()))
            .set("updated", AttributeValue::N(record.updated.to_string()))
            .if_exists(PARTITION_KEY)
            .update_item(
                self.client.update_item().table_name(&self.table),
                key_of(&record.owner, &record.id),
            );
        match call
            .send()
            .instrument(tracing::info_span!("documents.set_status"))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("ConditionalCheckFailedException") => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }

    async fn delete_record(&self, owner: &str, id: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key_of(owner, id)))
            .send()
            .instrument(tracing::info_span!("documents.delete"))
            .await
            .map_err(failed)?;
        Ok(())
    }
}

impl DocumentStore for DynamoDocuments {
    fn put<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        Box::pin(self.put_record(record))
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> DocumentFuture<'a, Option<DocumentRecord>, StoreError> {
        Box::pin(self.get_record(owner, id))
    }

    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> DocumentFuture<'a, DocumentPage, StoreError> {
        Box::pin(self.list_records(owner, limit, cursor))
    }

    fn set_status<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), StoreError> {
        Box::pin(self.set_record_status(record))
    }

    fn delete<'a>(&'a self, owner: &'a str, id: &'a str) -> DocumentFuture<'a, (), StoreError> {
        Box::pin(self.delete_record(owner, id))
    }
}

/// What a failed call of either client means.
fn index_failed<E, R>(what: &str, e: SdkError<E, R>) -> IndexError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let unavailable = match &e {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(f) => !f.is_user(),
        SdkError::ServiceError(ctx) => matches!(
            ctx.err().code(),
            Some(
                "ThrottlingException"
                    | "ServiceQuotaExceededException"
                    | "InternalServerException"
                    | "ServiceUnavailableException"
                    | "SlowDown"
                    | "InternalError"
            )
        ),
        _ => false,
    };
    let detail = format!(
        "{what}: {}",
        aws_sdk_bedrockagent::error::DisplayErrorContext(&e)
    );
    if unavailable {
        IndexError::Unavailable(detail)
    } else {
        IndexError::Failed(detail)
    }
}

/// The knowledge base's status of a document as this backend's, with a reason a person can read.
pub fn state_of(status: &KbStatus, reason: Option<&str>) -> IndexState {
    let said = |lead: &str| {
        Some(match reason.filter(|r| !r.trim().is_empty()) {
            Some(r) => format!("{lead}: {}", r.trim()),
            None => format!("{lead}."),
        })
    };
    let (status, reason) = match status {
        KbStatus::Starting | KbStatus::Pending => (DocumentStatus::Pending, None),
        KbStatus::InProgress => (DocumentStatus::Indexing, None),
        KbStatus::Indexed | KbStatus::PartiallyIndexed | KbStatus::MetadataPartiallyIndexed => {
            (DocumentStatus::Indexed, None)
        }
        KbStatus::Failed | KbStatus::MetadataUpdateFailed => (
            DocumentStatus::Failed,
            said("The knowledge base could not index this document"),
        ),
        KbStatus::Ignored => (
            DocumentStatus::Failed,
            said("The knowledge base ignored this document (a type or size it does not take)"),
        ),
        KbStatus::NotFound => (
            DocumentStatus::Failed,
            said(
                "The knowledge base does not hold this document (it was removed or never arrived)",
            ),
        ),
        KbStatus::Deleting | KbStatus::DeleteInProgress => (
            DocumentStatus::Failed,
            said("The knowledge base is deleting this document"),
        ),
        other => (
            DocumentStatus::Failed,
            said(&format!(
                "The knowledge base gave this document the status {}",
                other.as_str()
            )),
        ),
    };
    IndexState { status, reason }
}

/// The attributes of an access list, as the knowledge base's metadata holds them (empty lists left out).
fn access_attributes(access: &AccessList) -> Vec<(&'static str, &[String])> {
    [("oids", &access.oids[..]), ("groups", &access.groups[..])]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// The `.metadata.json` beside a document: `{"metadataAttributes": {...}}`.
pub fn metadata_file(access: &AccessList) -> String {
    let attributes: serde_json::Map<String, serde_json::Value> = access_attributes(access)
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    serde_json::json!({ "metadataAttributes": attributes }).to_string()
}

/// The documents' bytes in an S3 bucket and their ingestion into a knowledge base's S3 data source.
#[derive(Clone)]
pub struct KnowledgeBaseDocuments {
    s3: aws_sdk_s3::Client,
    agent: aws_sdk_bedrockagent::Client,
    bucket: String,
    knowledge_base_id: String,
    data_source_id: String,
    timeout: Duration,
}

impl KnowledgeBaseDocuments {
    /// Clients from the shared AWS configuration: S3 from `s3` (addressed by path when it has an endpoint of its
    /// own, `AWS_ENDPOINT_URL_S3`), bedrock-agent from `agent` (`AWS_ENDPOINT_URL_BEDROCK_AGENT`); on AWS both are
    /// the same configuration. `timeout` bounds every call of either, its retries included.
    pub fn from_config(
        s3: &aws_config::SdkConfig,
        agent: &aws_config::SdkConfig,
        bucket: &str,
        knowledge_base_id: &str,
        data_source_id: &str,
        timeout: Duration,
        timeouts: StoreTimeouts,
    ) -> Self {
        let s3_timeouts = aws_smithy_types::timeout::TimeoutConfig::builder()
            .connect_timeout(timeouts.connect)
            .operation_attempt_timeout(timeout)
            .operation_timeout(timeout)
            .build();
        let agent_config = aws_sdk_bedrockagent::config::Builder::from(agent)
            .timeout_config(crate::whole_call_timeout(timeout))
            .build();
        Self {
            s3: crate::attachments::s3_client(s3, s3_timeouts),
            agent: aws_sdk_bedrockagent::Client::from_conf(agent_config),
            bucket: bucket.to_string(),
            knowledge_base_id: knowledge_base_id.to_string(),
            data_source_id: data_source_id.to_string(),
            timeout,
        }
    }

    /// The object key of a document.
    pub fn key(&self, record: &DocumentRecord) -> String {
        format!(
            "{}{}/{}",
            owner_prefix(&record.owner),
            record.id,
            record.name
        )
    }

    /// The S3 URI the knowledge base knows a document by.
    pub fn uri(&self, record: &DocumentRecord) -> String {
        format!("s3://{}/{}", self.bucket, self.key(record))
    }

    /// Creates the bucket when it does not exist yet (the local run and tests; a deployment's template makes its
    /// own).
    pub async fn ensure_bucket(&self) -> Result<(), IndexError> {
        let spans = [tracing::Span::none(), tracing::Span::none()];
        crate::attachments::ensure_bucket(&self.s3, &self.bucket, spans)
            .await
            .map_err(|e| index_failed("the documents bucket", e))
    }

    /// The keys the bucket holds under `owner`'s prefix (for tests and tools).
    pub async fn keys_of(&self, owner: &str) -> Result<Vec<String>, IndexError> {
        let span = tracing::Span::none();
        let (keys, _) = keys_under(&self.s3, &self.bucket, &owner_prefix(owner), None, span)
            .await
            .map_err(|e| index_failed("the documents bucket", e))?;
        Ok(keys)
    }

    /// One page of what the data source holds (`ListKnowledgeBaseDocuments`): each document's S3 URI and where it
    /// stands, and the token of the next page. For the operator's bulk load and reconciliation, which compare the
    /// data source with the records.
    pub async fn list_ingested(
        &self,
        next: Option<String>,
    ) -> Result<(Vec<(String, IndexState)>, Option<String>), IndexError> {
        let call = async {
            let out = self
                .agent
                .list_knowledge_base_documents()
                .knowledge_base_id(&self.knowledge_base_id)
                .data_source_id(&self.data_source_id)
                .set_next_token(next)
                .send()
                .instrument(tracing::info_span!("documents.list_ingested"))
                .await
                .map_err(|e| index_failed("the data source's documents", e))?;
            let listed = out
                .document_details()
                .iter()
                .filter_map(|d| {
                    Some((
                        Self::detail_uri(d)?.to_string(),
                        state_of(d.status(), d.status_reason()),
                    ))
                })
                .collect();
            Ok((listed, out.next_token().map(str::to_string)))
        };
        self.bounded("the data source's documents", call).await
    }

    async fn bounded<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, IndexError>>,
    ) -> Result<T, IndexError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(IndexError::Unavailable(format!(
                    "{what}: no answer in time"
                )))
            })
    }

    async fn put_document(&self, record: &DocumentRecord, bytes: Bytes) -> Result<(), IndexError> {
        let key = self.key(record);
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .content_type(record.kind.content_type())
            .body(ByteStream::from(bytes))
            .send()
            .instrument(tracing::info_span!("documents.put_object"))
            .await
            .map_err(|e| index_failed("the document's bytes", e))?;
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(format!("{key}.metadata.json"))
            .content_type("application/json")
            .body(ByteStream::from(metadata_file(&record.access).into_bytes()))
            .send()
            .instrument(tracing::info_span!("documents.put_metadata"))
            .await
            .map_err(|e| index_failed("the document's metadata", e))?;
        Ok(())
    }

    fn identifier(&self, record: &DocumentRecord) -> DocumentIdentifier {
        DocumentIdentifier::builder()
            .data_source_type(ContentDataSourceType::S3)
            .s3(S3Location::builder()
                .uri(self.uri(record))
                .build()
                .expect("a location has its URI"))
            .build()
            .expect("an identifier has its type")
    }

    fn detail_uri(detail: &KnowledgeBaseDocumentDetail) -> Option<&str> {
        detail.identifier()?.s3()?.uri().into()
    }

    async fn ingest_document(&self, record: &DocumentRecord) -> Result<IndexState, IndexError> {
        let location = S3Location::builder()
            .uri(self.uri(record))
            .build()
            .expect("a location has its URI");
        let attributes = access_attributes(&record.access)
            .into_iter()
            .map(|(key, values)| {
                MetadataAttribute::builder()
                    .key(key)
                    .value(
                        MetadataAttributeValue::builder()
                            .r#type(MetadataValueType::StringList)
                            .set_string_list_value(Some(values.to_vec()))
                            .build()
                            .expect("a value has its type"),
                    )
                    .build()
                    .expect("an attribute has its key and value")
            })
            .collect();
        let document = KnowledgeBaseDocument::builder()
            .content(
                DocumentContent::builder()
                    .data_source_type(ContentDataSourceType::S3)
                    .s3(S3Content::builder().s3_location(location).build())
                    .build()
                    .expect("content has its type"),
            )
            .metadata(
                DocumentMetadata::builder()
                    .r#type(MetadataSourceType::InLineAttribute)
                    .set_inline_attributes(Some(attributes))
                    .build()
                    .expect("metadata has its type"),
            )
            .build();
        let out = self
            .agent
            .ingest_knowledge_base_documents()
            .knowledge_base_id(&self.knowledge_base_id)
            .data_source_id(&self.data_source_id)
            // The same request sent again (the SDK's retry) is the same ingestion.
            .client_token(format!("ingest-{}-{}", record.id, record.updated))
            .documents(document)
            .send()
            .instrument(tracing::info_span!("documents.ingest", document = %record.id))
            .await
            .map_err(|e| index_failed("the ingestion", e))?;
        let detail = out
            .document_details()
            .first()
            .ok_or_else(|| IndexError::Failed("the ingestion answered no document".into()))?;
        Ok(state_of(detail.status(), detail.status_reason()))
    }

    async fn document_states(
        &self,
        records: &[DocumentRecord],
    ) -> Result<Vec<IndexState>, IndexError> {
        let mut states = Vec::with_capacity(records.len());
        // The API takes at most 10 identifiers a call.
        for batch in records.chunks(10) {
            let out = self
                .agent
                .get_knowledge_base_documents()
                .knowledge_base_id(&self.knowledge_base_id)
                .data_source_id(&self.data_source_id)
                .set_document_identifiers(Some(batch.iter().map(|r| self.identifier(r)).collect()))
                .send()
                .instrument(tracing::info_span!(
                    "documents.get_status",
                    documents = batch.len()
                ))
                .await
                .map_err(|e| index_failed("the documents' statuses", e))?;
            for record in batch {
                let uri = self.uri(record);
                let state = out
                    .document_details()
                    .iter()
                    .find(|d| Self::detail_uri(d) == Some(uri.as_str()))
                    .map(|d| state_of(d.status(), d.status_reason()))
                    .unwrap_or_else(|| state_of(&KbStatus::NotFound, None));
                states.push(state);
            }
        }
        Ok(states)
    }

    async fn remove_document(&self, record: &DocumentRecord) -> Result<(), IndexError> {
        let from_index = match self
            .agent
            .delete_knowledge_base_documents()
            .knowledge_base_id(&self.knowledge_base_id)
            .data_source_id(&self.data_source_id)
            .client_token(format!("delete-{}-{}", record.id, record.updated))
            .document_identifiers(self.identifier(record))
            .send()
            .instrument(tracing::info_span!("documents.delete_from_index", document = %record.id))
            .await
        {
            Ok(_) => Ok(()),
            // Not there (never ingested, or no such data source): nothing to remove from it.
            Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(()),
            Err(e) => Err(index_failed("the removal from the knowledge base", e)),
        };
        // The bytes go whatever the knowledge base said: a later sync must not find them again.
        let key = self.key(record);
        self.s3
            .delete_objects()
            .bucket(&self.bucket)
            .delete(deletion([key.clone(), format!("{key}.metadata.json")]))
            .send()
            .instrument(tracing::info_span!("documents.delete_objects"))
            .await
            .map_err(|e| index_failed("the document's removal from the bucket", e))?;
        from_index
    }
}

impl DocumentIndex for KnowledgeBaseDocuments {
    fn put<'a>(
        &'a self,
        record: &'a DocumentRecord,
        bytes: Bytes,
    ) -> DocumentFuture<'a, (), IndexError> {
        Box::pin(self.bounded("the document's upload", self.put_document(record, bytes)))
    }

    fn ingest<'a>(
        &'a self,
        record: &'a DocumentRecord,
    ) -> DocumentFuture<'a, IndexState, IndexError> {
        Box::pin(self.bounded("the ingestion", self.ingest_document(record)))
    }

    fn states<'a>(
        &'a self,
        records: &'a [DocumentRecord],
    ) -> DocumentFuture<'a, Vec<IndexState>, IndexError> {
        Box::pin(self.bounded("the statuses", self.document_states(records)))
    }

    fn remove<'a>(&'a self, record: &'a DocumentRecord) -> DocumentFuture<'a, (), IndexError> {
        Box::pin(self.bounded("the removal", self.remove_document(record)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knowledge_base_s_statuses_become_ours_with_reasons_for_a_person() {
        assert_eq!(
            state_of(&KbStatus::Starting, None).status,
            DocumentStatus::Pending
        );
        assert_eq!(
            state_of(&KbStatus::InProgress, None).status,
            DocumentStatus::Indexing
        );
        assert_eq!(
            state_of(&KbStatus::Indexed, None).status,
            DocumentStatus::Indexed
        );
        let failed = state_of(&KbStatus::Failed, Some("Unsupported file type"));
        assert_eq!(failed.status, DocumentStatus::Failed);
        assert_eq!(
            failed.reason.as_deref(),
            Some("The knowledge base could not index this document: Unsupported file type")
        );
    }

    #[test]
    fn the_metadata_file_is_the_convention_s() {
        let access = AccessList {
            oids: vec!["alice".into()],
            groups: vec![],
        };
        assert_eq!(
            metadata_file(&access),
            r#"{"metadataAttributes":{"oids":["alice"]}}"#
        );
    }

    #[test]
    fn an_item_keeps_the_digest_and_source_and_an_older_item_without_them_still_reads() {
        let older: Item = [
            ("pk", s("DOCS#jwt:alice")),
            ("sk", s("DOC#0123")),
            ("gsi1pk", s(ALL_DOCUMENTS)),
            ("gsi1sk", s("0123")),
            ("id", s("0123")),
            ("owner", s("jwt:alice")),
            ("name", s("Plan.md")),
            ("kind", s("markdown")),
            ("bytes", AttributeValue::N("6".into())),
            ("oids", AttributeValue::L(vec![s("alice")])),
            ("status", s("indexed")),
            ("created", AttributeValue::N("1".into())),
            ("updated", AttributeValue::N("2".into())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut record = from_item(older).unwrap();
        assert_eq!(
            (record.digest.as_deref(), record.source.as_deref()),
            (None, None)
        );
        assert_eq!(record.access.oids, ["alice"]);
        record.digest = Some("ab".repeat(32));
        record.source = Some("public/Plan.md".into());
        let item: Item = serde_dynamo::to_item(DocumentItem::new(&record)).unwrap();
        assert_eq!(item["digest"], s("ab".repeat(32)));
        assert_eq!(from_item(item).unwrap(), record);
    }

    #[test]
    fn a_cursor_names_only_its_own_listing() {
        let key = key_of("alice", "0123");
        let cursor = encode_cursor(&key).unwrap();
        assert!(decode_cursor(&cursor, PARTITION_KEY, &owner_pk("alice")).is_ok());
        assert_eq!(
            decode_cursor(&cursor, PARTITION_KEY, &owner_pk("bob")),
            Err(StoreError::InvalidCursor)
        );
        assert_eq!(
            decode_cursor("not base64!", PARTITION_KEY, "x"),
            Err(StoreError::InvalidCursor)
        );
    }
}
