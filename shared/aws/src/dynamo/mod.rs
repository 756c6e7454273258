//! What the store and the usage ledger share of DynamoDB, below both: items as the SDK takes them, the one way a
//! write's expressions are built ([`Expression`]), and what a failed call means ([`failed`]).

mod expression;
mod failure;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use chat_core::StoreError;
use tracing::Instrument;

pub(crate) use expression::Expression;
pub(crate) use failure::{failed, is_throttling};

/// An item (or a key) as the SDK takes and gives it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// How a transaction failed: the store and the ledger each read what that means for them.
pub(crate) type WriteFailure = SdkError<TransactWriteItemsError, HttpResponse>;

/// Sends `items` as one transaction, all or none, traced as `span`.
pub(crate) async fn transact(
    client: &Client,
    items: Vec<TransactWriteItem>,
    span: tracing::Span,
) -> Result<(), WriteFailure> {
    client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .instrument(span)
        .await
        .map(|_| ())
}

/// The item at `key` in `table`, `None` when there is none; read `consistent`ly (every write acknowledged before
/// it seen) or as DynamoDB reads by default; traced as `span`.
pub(crate) async fn get_item(
    client: &Client,
    table: &str,
    key: Item,
    consistent: bool,
    span: tracing::Span,
) -> Result<Option<Item>, StoreError> {
    client
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .set_consistent_read(consistent.then_some(true))
        .send()
        .instrument(span)
        .await
        .map(|out| out.item)
        .map_err(failed)
}

/// Puts `item` in `table` (in place of any item of its key), traced as `span`.
pub(crate) async fn put_item(
    client: &Client,
    table: &str,
    item: Item,
    span: tracing::Span,
) -> Result<(), StoreError> {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .instrument(span)
        .await
        .map(|_| ())
        .map_err(failed)
}

/// A string attribute.
pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute, written as `v` displays.
pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
