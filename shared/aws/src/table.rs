//! The one DynamoDB table: its key schema and expiry attribute, so the local run and tests create exactly what
//! the SAM template declares.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification,
};

/// Partition key attribute.
pub const PARTITION_KEY: &str = "pk";
/// Sort key attribute.
pub const SORT_KEY: &str = "sk";
/// Unix time (seconds) after which DynamoDB may delete an item; reads ignore items past it.
pub const EXPIRES_AT: &str = "expiresAt";

/// Creates the table (on demand, with expiry on [`EXPIRES_AT`]) unless it exists already.
pub async fn ensure_table(client: &Client, name: &str) -> Result<(), aws_sdk_dynamodb::Error> {
    let key = |attr: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(attr)
            .key_type(kind)
            .build()
            .expect("key schema has its required fields")
    };
    let attribute = |attr: &str| {
        AttributeDefinition::builder()
            .attribute_name(attr)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition has its required fields")
    };
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash))
        .key_schema(key(SORT_KEY, KeyType::Range))
        .attribute_definitions(attribute(PARTITION_KEY))
        .attribute_definitions(attribute(SORT_KEY))
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
