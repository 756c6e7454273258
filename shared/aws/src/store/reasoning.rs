//! The reasoning an answer gave before it asked for a client's tools (a stateless completion's), kept for a day
//! under its owner and its first call's id: a client sends the calls back without the signed reasoning a reasoning
//! model wants back with them.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | kept reasoning | `REASONING#{owner}` | `{first call id}` | `blocks` (JSON), `expiresAt` |

use chat_core::{ReasoningBlock, StoreError, is_expired, reasoning_kept_until};

use super::DynamoStore;
use super::keys::now_unix;
use crate::dynamo::{Item, get_item, n, put_item, s};
use crate::table::{EXPIRES_AT, expires_at, item_key};

const BLOCKS: &str = "blocks";

fn key(owner: &str, call_id: &str) -> Item {
    item_key(format!("REASONING#{owner}"), call_id)
}

impl DynamoStore {
    pub(super) async fn put_reasoning(
        &self,
        owner: &str,
        call_id: &str,
        blocks: &[ReasoningBlock],
    ) -> Result<(), StoreError> {
        let json = serde_json::to_string(blocks).map_err(|e| StoreError::Failed(e.to_string()))?;
        let mut item = key(owner, call_id);
        item.insert(BLOCKS.to_string(), s(json));
        item.insert(EXPIRES_AT.to_string(), n(reasoning_kept_until(now_unix())));
        let span = tracing::info_span!("store.put_item");
        put_item(&self.client, &self.table, item, span).await
    }

    pub(super) async fn get_reasoning(
        &self,
        owner: &str,
        call_id: &str,
    ) -> Result<Option<Vec<ReasoningBlock>>, StoreError> {
        let span = tracing::info_span!("store.get_item");
        let Some(item) =
            get_item(&self.client, &self.table, key(owner, call_id), false, span).await?
        else {
            return Ok(None);
        };
        // DynamoDB deletes expired items late: one past its time is gone all the same.
        if expires_at(&item).is_some_and(|t| is_expired(t, now_unix())) {
            return Ok(None);
        }
        let Some(json) = item.get(BLOCKS).and_then(|v| v.as_s().ok()) else {
            return Ok(None);
        };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| StoreError::Failed(format!("kept reasoning unreadable: {e}")))
    }
}
