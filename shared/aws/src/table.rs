//! The one DynamoDB table: its keys, its list index and its expiry attribute, so that the local run and the tests
//! create exactly what the SAM template declares.
//!
//! | item | `pk` | `sk` | list index (`gsi1pk`, `gsi1sk`) |
//! |---|---|---|---|
//! | a chat | `CHAT#{chatId}#{owner}` | `META` | `LIST#{mode}#{owner}`, `{lastUpdated}#{chatId}` |
//! | a message | `CHAT#{chatId}#{owner}` | `M#{generation}#{seq}` | none |
//! | kept reasoning (`store/reasoning.rs`) | `REASONING#{owner}` | the first tool call's id | none |
//! | an API key, as it is checked | `APIKEY#{sha256 of the key}` | `APIKEY` | none |
//! | an API key, as its owner lists it | `APIKEYS#{owner}` | `KEY#{id}` | none |
//! | a document uploaded into the knowledge base | `DOCS#{owner}` | `DOC#{id}` | `DOCUMENTS`, `{id}` |
//!
//! A message sorts before its chat item (`'#' < 'E'`), so that a turn reads both in one query backwards from
//! `META`; the generations written before that (16 hex digits) keep their messages after it, as
//! `MSG#{generation}#{seq}`.
//!
//! The usage counters' items are described in [`crate::DynamoUsage`]'s module, the API keys' in
//! [`crate::DynamoApiKeys`]'s.
//!
//! The owner is part of every chat's key, so another owner's chat is not found, exactly like one that does not exist.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use chat_core::{TokenUsage, UsageTotals};
use serde::{Deserialize, Serialize};

use crate::dynamo::{Item, n, s};

/// Partition key attribute.
pub const PARTITION_KEY: &str = "pk";
/// Sort key attribute.
pub const SORT_KEY: &str = "sk";
/// The index that lists an owner's chats of one mode, most recently updated first.
pub const LIST_INDEX: &str = "byUpdated";
pub const LIST_PARTITION_KEY: &str = "gsi1pk";
pub const LIST_SORT_KEY: &str = "gsi1sk";
/// Unix time (seconds) after which DynamoDB may delete an item; reads ignore items past it.
pub const EXPIRES_AT: &str = "expiresAt";

/// The key of the item `sk` of the partition `pk`.
pub(crate) fn item_key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    Item::from([
        (PARTITION_KEY.to_string(), s(pk)),
        (SORT_KEY.to_string(), s(sk)),
    ])
}

/// `query` narrowed to the items of the partition `pk` whose sort key begins with `prefix`, read consistently.
pub(crate) fn with_sort_key_prefix(
    query: QueryFluentBuilder,
    pk: impl Into<String>,
    prefix: &str,
) -> QueryFluentBuilder {
    query
        .consistent_read(true)
        .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
        .expression_attribute_names("#pk", PARTITION_KEY)
        .expression_attribute_names("#sk", SORT_KEY)
        .expression_attribute_values(":pk", s(pk))
        .expression_attribute_values(":prefix", s(prefix))
}

/// When `item` expires ([`EXPIRES_AT`]); `None` when it does not say (or not as a number).
pub(crate) fn expires_at(item: &Item) -> Option<i64> {
    item.get(EXPIRES_AT)
        .and_then(|v| v.as_n().ok())
        .and_then(|t| t.parse::<i64>().ok())
}

/// Token counts as attributes, named alike wherever the table keeps them (a chat's totals, a period's spending).
pub(crate) fn token_attributes(t: &TokenUsage) -> [(&'static str, AttributeValue); 5] {
    [
        ("inputTokens", n(t.input_tokens)),
        ("outputTokens", n(t.output_tokens)),
        ("totalTokens", n(t.total_tokens)),
        ("cacheReadInputTokens", n(t.cache_read_input_tokens)),
        ("cacheWriteInputTokens", n(t.cache_write_input_tokens)),
    ]
}

/// Tokens and their cost as an item keeps them (a chat's totals, a period's spending), named as
/// [`token_attributes`] writes them; an absent attribute reads as zero, no cost. The cost is not serialized: it is
/// written apart, as an exact decimal.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct StoredTotals {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    cache_read_input_tokens: u64,
    cache_write_input_tokens: u64,
    #[serde(skip_serializing)]
    pub(crate) cost_usd: Option<f64>,
}

impl From<&UsageTotals> for StoredTotals {
    fn from(usage: &UsageTotals) -> Self {
        let t = &usage.tokens;
        Self {
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            total_tokens: t.total_tokens,
            cache_read_input_tokens: t.cache_read_input_tokens,
            cache_write_input_tokens: t.cache_write_input_tokens,
            cost_usd: usage.cost_usd,
        }
    }
}

impl From<&StoredTotals> for UsageTotals {
    fn from(stored: &StoredTotals) -> Self {
        Self {
            tokens: TokenUsage {
                input_tokens: stored.input_tokens,
                output_tokens: stored.output_tokens,
                total_tokens: stored.total_tokens,
                cache_read_input_tokens: stored.cache_read_input_tokens,
                cache_write_input_tokens: stored.cache_write_input_tokens,
            },
            cost_usd: stored.cost_usd,
        }
    }
}

fn key(attr: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(attr)
        .key_type(kind)
        .build()
        .expect("key schema has its required fields")
}

fn attribute(attr: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(attr)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("attribute definition has its required fields")
}

/// Creates the table (on demand, with the list index and expiry on [`EXPIRES_AT`]) unless it exists already.
pub async fn ensure_table(client: &Client, name: &str) -> Result<(), aws_sdk_dynamodb::Error> {
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash))
        .key_schema(key(SORT_KEY, KeyType::Range))
        .attribute_definitions(attribute(PARTITION_KEY))
        .attribute_definitions(attribute(SORT_KEY))
        .attribute_definitions(attribute(LIST_PARTITION_KEY))
        .attribute_definitions(attribute(LIST_SORT_KEY))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(LIST_INDEX)
                .key_schema(key(LIST_PARTITION_KEY, KeyType::Hash))
                .key_schema(key(LIST_SORT_KEY, KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .expect("index has its required fields"),
        )
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e) if e.code() == Some("ResourceInUseException") => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(EXPIRES_AT)
                .build()
                .expect("TTL specification has its required fields"),
        )
        .send()
        .await?;
    Ok(())
}
