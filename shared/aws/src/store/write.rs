//! How a write lands: its items put in transactions within DynamoDB's bounds, the last one with the commit (the
//! chat item's update that makes them visible), each guarded by the chat's version so that a write that lost a race
//! to another changes nothing anyone reads, and tried again while it loses.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use chat_core::{StoreError, UsageTotals};
use tracing::Instrument;

use super::DynamoStore;
use super::chat::{HISTORY_TOKENS, Meta, usage_attributes};
use super::errors::{WriteError, failed, lost_race, refused};
use super::idempotency::writes_after;
use super::keys::{Item, META, chat_pk, list_sk, n, s};
use crate::table::{LIST_SORT_KEY, PARTITION_KEY, SORT_KEY};

/// How many items one transaction may hold.
const TRANSACTION_LIMIT: usize = 100;
/// How many bytes of items one transaction carries at most: DynamoDB allows 4 MB; the rest is room for the
/// commit and for [`item_size`]'s estimate.
const TRANSACTION_BYTES: usize = 3 * 1024 * 1024;
/// How often a write that lost a race to another write of the same chat is tried again.
const WRITE_ATTEMPTS: u32 = 60;

/// What a write makes visible when it commits.
pub(super) struct Change<'a> {
    pub(super) generation: &'a str,
    pub(super) count: u64,
    pub(super) last_message: &'a str,
    /// The chat's new `lastUpdated`.
    pub(super) now: &'a str,
    /// The write's token, kept in the chat item's latest writes.
    pub(super) token: &'a str,
    /// A turn's tokens and cost, added to the chat's totals (`None` for a save, which spends nothing).
    pub(super) spent: Option<&'a UsageTotals>,
    /// The messages' estimated prompt tokens after the write, when known.
    pub(super) history_tokens: Option<u64>,
}

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
        let put = |item: Item| {
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(item))
                        .build()
                        .expect("a put has its table and item"),
                )
                .build()
        };
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
            if let Err(e) = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .instrument(tracing::info_span!("store.transact_write_items"))
                .await
            {
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

    /// The check that the chat item is still at `version`.
    pub(super) fn version_guard(&self, pk: &str, version: u64) -> ConditionCheck {
        ConditionCheck::builder()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(pk))
            .key(SORT_KEY, s(META))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(version))
            .build()
            .expect("a condition check has its parts")
    }

    /// The update that makes new messages visible: count, generation, version, the write's token, and what the
    /// list shows.
    pub(super) fn commit_update(
        &self,
        owner: &str,
        meta: &Meta,
        change: Change,
    ) -> TransactWriteItem {
        let Change {
            generation,
            count,
            last_message,
            now,
            token,
            spent,
            history_tokens,
        } = change;
        let pk = chat_pk(owner, &meta.record.id);
        let mut expression = String::from(
            "SET messageCount = :count, generation = :gen, version = :next, \
             lastUpdated = :now, lastMessage = :last, #lsk = :lsk, #writes = :writes",
        );
        let mut update = Update::builder()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(&pk))
            .key(SORT_KEY, s(META))
            .condition_expression("version = :v")
            .expression_attribute_names("#lsk", LIST_SORT_KEY)
            .expression_attribute_names("#writes", "writes")
            .expression_attribute_values(":count", n(count))
            .expression_attribute_values(":gen", s(generation))
            .expression_attribute_values(":next", n(meta.version + 1))
            .expression_attribute_values(":v", n(meta.version))
            .expression_attribute_values(":now", s(now))
            .expression_attribute_values(":last", s(last_message))
            .expression_attribute_values(":lsk", s(list_sk(now, &meta.record.id)))
            .expression_attribute_values(":writes", writes_after(meta, token));
        if let Some(tokens) = history_tokens {
            // Set, not added: the commit holds only at the version it was computed from.
            expression.push_str(", #historyTokens = :historyTokens");
            update = update
                .expression_attribute_names("#historyTokens", HISTORY_TOKENS)
                .expression_attribute_values(":historyTokens", n(tokens));
        }
        if let Some(spent) = spent {
            // Added in the same commit as the turn's messages: a turn counts once, with them, or not at all.
            let added: Vec<String> = usage_attributes(spent)
                .into_iter()
                .map(|(name, value)| {
                    update = std::mem::take(&mut update)
                        .expression_attribute_names(format!("#{name}"), name)
                        .expression_attribute_values(format!(":{name}"), value);
                    format!("#{name} :{name}")
                })
                .collect();
            expression.push_str(" ADD ");
            expression.push_str(&added.join(", "));
        }
        TransactWriteItem::builder()
            .update(
                update
                    .update_expression(expression)
                    .build()
                    .expect("an update has its parts"),
            )
            .build()
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
