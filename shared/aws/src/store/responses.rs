//! The responses a Responses API client asks to keep (`store: true`), under their owner until they expire
//! (`RESPONSES_KEPT_DAYS`, DynamoDB's TTL on `expiresAt`): the dialect's JSON, kept whole in one item.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | kept response | `RESPONSE#{owner}` | `{response id}` | `body` (JSON: `response`, `input_items`, `history`), `expiresAt` |

use aws_sdk_dynamodb::types::ReturnValue;
use chat_core::{KeptFuture, KeptResponse, ResponseStore, StoreError};
use serde_json::{Value, json};
use tracing::Instrument;

use super::DynamoStore;
use super::keys::now_unix;
use crate::dynamo::{Item, failed, get_item, n, put_item, s};
use crate::table::{EXPIRES_AT, expires_at, item_key};

const BODY: &str = "body";

fn key(owner: &str, id: &str) -> Item {
    item_key(format!("RESPONSE#{owner}"), id)
}

/// A kept response from its item; `None` when it is past its time or unreadable as one.
fn from_item(item: &Item) -> Result<Option<KeptResponse>, StoreError> {
    let expires_at = expires_at(item).unwrap_or(0);
    let Some(body) = item.get(BODY).and_then(|v| v.as_s().ok()) else {
        return Ok(None);
    };
    let mut body: Value = serde_json::from_str(body)
        .map_err(|e| StoreError::Failed(format!("kept response unreadable: {e}")))?;
    let list = |v: Value| match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let kept = KeptResponse {
        response: body["response"].take(),
        input_items: list(body["input_items"].take()),
        history: list(body["history"].take()),
        expires_at,
    };
    // DynamoDB deletes expired items late: one past its time is gone all the same.
    Ok((!kept.expired(now_unix())).then_some(kept))
}

impl ResponseStore for DynamoStore {
    fn keep_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        kept: &'a KeptResponse,
    ) -> KeptFuture<'a, ()> {
        Box::pin(async move {
            let body = json!({"response": kept.response, "input_items": kept.input_items,
                "history": kept.history});
            let mut item = key(owner, id);
            item.insert(BODY.to_string(), s(body.to_string()));
            item.insert(EXPIRES_AT.to_string(), n(kept.expires_at));
            let span = tracing::info_span!("store.put_item");
            put_item(&self.client, &self.table, item, span).await
        })
    }

    fn kept_response<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> KeptFuture<'a, Option<KeptResponse>> {
        Box::pin(async move {
            let span = tracing::info_span!("store.get_item");
            match get_item(&self.client, &self.table, key(owner, id), false, span).await? {
                Some(item) => from_item(&item),
                None => Ok(None),
            }
        })
    }

    fn delete_response<'a>(&'a self, owner: &'a str, id: &'a str) -> KeptFuture<'a, bool> {
        Box::pin(async move {
            let out = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(owner, id)))
                .return_values(ReturnValue::AllOld)
                .send()
                .instrument(tracing::info_span!("store.delete_item"))
                .await
                .map_err(failed)?;
            Ok(match out.attributes {
                Some(item) => from_item(&item)?.is_some(),
                None => false,
            })
        })
    }
}
