//! How a write lands: its items put in transactions within DynamoDB's bounds, the last one with the commit (the
//! chat item's update that makes them visible, [`super::chat::Commit`]), each guarded by the chat's version so
//! that a write that lost a race to another changes nothing anyone reads, and tried again while it loses.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
use chat_core::StoreError;

use super::DynamoStore;
use super::errors::{WriteError, lost_race, refused};
use crate::dynamo::{Expression, Item, failed, transact};

/// How many items one transaction may hold.
const TRANSACTION_LIMIT: usize = 100;
/// How many bytes of items one transaction carries at most: DynamoDB allows 4 MB; the rest is room for the
/// commit and for [`item_size`]'s estimate.
const TRANSACTION_BYTES: usize = 3 * 1024 * 1024;
/// How often a write that lost a race to another write of the same chat is tried again.
const WRITE_ATTEMPTS: u32 = 60;

/// About how many bytes DynamoDB counts for `item`: its attributes' names and values, and a little per item.
pub(super) fn item_size(item: &Item) -> usize {
    fn value_size(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(text) | AttributeValue::N(text) => text.len(),
            AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
            _ => 16,
        }
    }
    100 + item
        .iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum::<usize>()
}

/// `items` in transactions: at most [`TRANSACTION_LIMIT`]` - 1` items and [`TRANSACTION_BYTES`] each (one more
/// item, a condition or the commit, goes with each). Never empty: no items is one empty transaction.
fn transactions(items: Vec<Item>) -> Vec<Vec<Item>> {
    let mut chunks = vec![Vec::new()];
    let mut bytes = 0;
    for item in items {
        let size = item_size(&item);
        let chunk = chunks.last_mut().expect("never empty");
        if !chunk.is_empty()
            && (chunk.len() == TRANSACTION_LIMIT - 1 || bytes + size > TRANSACTION_BYTES)
        {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        chunks.last_mut().expect("never empty").push(item);
    }
    chunks
}

/// Whether `items` go in one transaction, with the commit.
pub(super) fn fits_one_transaction(items: &[Item]) -> bool {
    fits_one_transaction_with(items, 0)
}

/// Whether `items` go in one transaction with the commit and `alongside` more small updates (a turn's usage
/// counters, a few hundred bytes each, within [`TRANSACTION_BYTES`]' room).
pub(super) fn fits_one_transaction_with(items: &[Item], alongside: usize) -> bool {
    items.len() + 1 + alongside <= TRANSACTION_LIMIT
        && items.iter().map(item_size).sum::<usize>() <= TRANSACTION_BYTES
}

impl DynamoStore {
    /// Writes `puts` and then `commit`, atomically when they fit one transaction. Larger writes go in transactions
    /// that each check the chat is still at `guard` (its version, or its absence), so nothing lands unless the
    /// commit can; items a failed write left beyond the committed messages are never read and are overwritten.
    pub(super) async fn write(
        &self,
        puts: Vec<Item>,
        guard: ConditionCheck,
        commit: TransactWriteItem,
    ) -> Result<(), WriteError> {
        self.write_with(puts, guard, commit, Vec::new()).await
    }

    /// [`Self::write`], with `alongside` in the commit's transaction: writes that land exactly when the commit
    /// does (a turn's last settlement with its usage counters). The caller keeps them to writes that fit one transaction
    /// ([`fits_one_transaction_with`]), so that they land with the whole write, not only with its last part.
    pub(super) async fn write_with(
        &self,
        puts: Vec<Item>,
        guard: ConditionCheck,
        commit: TransactWriteItem,
        alongside: Vec<TransactWriteItem>,
    ) -> Result<(), WriteError> {
        let put = |item: Item| Expression::new().put(&self.table, item);
        let chunks = transactions(puts);
        let last = chunks.len() - 1;
        debug_assert!(
            alongside.is_empty() || last == 0,
            "updates alongside a split write"
        );
        let mut alongside = Some(alongside);
        let mut commit = Some(commit);
        for (i, chunk) in chunks.into_iter().enumerate() {
            let is_commit = i == last;
            let mut items: Vec<TransactWriteItem> = chunk.into_iter().map(put).collect();
            if is_commit {
                items.push(commit.take().expect("one commit, in the last transaction"));
                items.extend(alongside.take().into_iter().flatten());
            } else {
                items.push(
                    TransactWriteItem::builder()
                        .condition_check(guard.clone())
                        .build(),
                );
            }
            let span = tracing::info_span!("store.transact_write_items");
            if let Err(e) = transact(&self.client, items, span).await {
                return Err(if lost_race(&e) {
                    WriteError::Race { commit: is_commit }
                } else if !is_commit || refused(&e) {
                    WriteError::Failed(failed(e))
                } else {
                    WriteError::Unknown(failed(e))
                });
            }
        }
        Ok(())
    }

    /// Retries `attempt` while it loses races to other writes of the same chat.
    pub(super) async fn retrying<T, F, Fut>(&self, mut attempt: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, StoreError>>,
    {
        for round in 0..WRITE_ATTEMPTS {
            if let Some(record) = attempt().await? {
                return Ok(record);
            }
            // Jitter spreads the writers that lost so they do not collide again.
            let ceiling = 5 + 5 * u64::from(round.min(10));
            tokio::time::sleep(Duration::from_millis(fastrand::u64(1..=ceiling))).await;
        }
        Err(StoreError::Contended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::s;
    use crate::store::messages::PART_BYTES;
    use std::collections::HashMap;

    #[test]
    fn transactions_hold_at_most_99_items_and_3_mb() {
        let small: Vec<Item> = (0..250)
            .map(|i| HashMap::from([("k".to_string(), s(i.to_string()))]))
            .collect();
        let sizes: Vec<usize> = transactions(small).iter().map(Vec::len).collect();
        assert_eq!(sizes, [99, 99, 52]);
        let big: Vec<Item> = (0..25)
            .map(|_| HashMap::from([("k".to_string(), s("x".repeat(PART_BYTES)))]))
            .collect();
        let chunks = transactions(big);
        assert!(chunks.len() >= 3);
        for chunk in &chunks {
            assert!(chunk.iter().map(item_size).sum::<usize>() <= TRANSACTION_BYTES);
        }
        assert_eq!(chunks.iter().map(Vec::len).sum::<usize>(), 25);
        assert_eq!(transactions(Vec::new()).len(), 1);
    }
}
