//! The reasoning an answer gave before it asked for a client's tools (a stateless completion's), kept for a day
//! under its owner and its first call's id: a client sends the calls back without the signed reasoning a reasoning
//! model wants back with them.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | kept reasoning | `REASONING#{owner}` | `{first call id}` | `blocks` (JSON), `expiresAt` |

use chat_core::{REASONING_KEPT_FOR, ReasoningBlock, StoreError};
use time::OffsetDateTime;
use tracing::Instrument;

use super::DynamoStore;
use crate::dynamo::{Item, failed, n, s};
use crate::table::{EXPIRES_AT, PARTITION_KEY, SORT_KEY};

const BLOCKS: &str = "blocks";

fn key(owner: &str, call_id: &str) -> Item {
    Item::from([
        (PARTITION_KEY.to_string(), s(format!("REASONING#{owner}"))),
        (SORT_KEY.to_string(), s(call_id)),
    ])
}

fn now_unix() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
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
        item.insert(
            EXPIRES_AT.to_string(),
            n(now_unix() + REASONING_KEPT_FOR.as_secs() as i64),
        );
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .instrument(tracing::info_span!("store.put_item"))
            .await
            .map_err(failed)?;
        Ok(())
    }

    pub(super) async fn get_reasoning(
        &self,
        owner: &str,
        call_id: &str,
    ) -> Result<Option<Vec<ReasoningBlock>>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(owner, call_id)))
            .send()
            .instrument(tracing::info_span!("store.get_item"))
            .await
            .map_err(failed)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        // DynamoDB deletes expired items late: one past its time is gone all the same.
        let expired = item
            .get(EXPIRES_AT)
            .and_then(|v| v.as_n().ok())
            .and_then(|t| t.parse::<i64>().ok())
            .is_some_and(|t| t <= now_unix());
        if expired {
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
