//! What the store and the usage ledger share of DynamoDB, below both: items as the SDK takes them, the one way a
//! write's expressions are built ([`Expression`]), and what a failed call means ([`failed`]).

mod expression;
mod failure;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

pub(crate) use expression::Expression;
pub(crate) use failure::{failed, is_throttling};

/// An item (or a key) as the SDK takes and gives it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A string attribute.
pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute, written as `v` displays.
pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
