//! The chat item (`META`), as one struct in the attribute names and types the table has always had: what a new
//! chat writes, and what the store reads back of it ([`Meta`]: the chat's record and where its messages are).

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use chat_core::{
    ChatRecord, StoreError, StoredMessage, TokenUsage, UsageTotals, estimate_stored_tokens,
    is_chat_id,
};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::DynamoStore;
use super::errors::failed;
use super::keys::{Item, META, chat_pk, list_pk, list_sk, mode_name, mode_named, n, now_unix, s};
use crate::table::{PARTITION_KEY, SORT_KEY};

/// How much of the last message the history list shows.
const PREVIEW_CHARS: usize = 200;
/// The attribute that keeps a chat's estimated prompt tokens.
pub(super) const HISTORY_TOKENS: &str = "historyTokens";

/// What the chat item says about where its messages are.
#[derive(Clone)]
pub(super) struct Meta {
    pub(super) record: ChatRecord,
    /// The messages' generation: a random token, new for every write that cannot be one transaction, so that two
    /// such writes never share keys.
    pub(super) generation: String,
    pub(super) version: u64,
    pub(super) expires_at: Option<i64>,
    /// The tokens of the latest writes that landed, oldest first.
    pub(super) writes: Vec<String>,
    /// The estimated prompt tokens of all the messages ([`estimate_stored_tokens`]), which sizes a turn's read;
    /// `None` for a chat written before it was kept.
    pub(super) history_tokens: Option<u64>,
}

/// The chat item as stored. Absent attributes read as empty (zero, no cost, no expiry); the list index's keys are
/// read too, as a page of the list ends at one.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct ChatItem {
    pub(super) pk: String,
    pub(super) sk: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    chat_id: Option<String>,
    owner: String,
    mode: String,
    title: String,
    created_at: String,
    last_updated: String,
    last_message: String,
    message_count: u64,
    generation: String,
    version: u64,
    writes: Vec<String>,
    pub(super) gsi1pk: String,
    pub(super) gsi1sk: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    history_tokens: Option<u64>,
    // The chat's totals, as the commits add to them (see [`usage_attributes`]).
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    cache_read_input_tokens: u64,
    cache_write_input_tokens: u64,
    /// Written by [`ChatItem::into_item`], as an exact decimal.
    #[serde(skip_serializing)]
    cost_usd: Option<f64>,
}

impl ChatItem {
    /// A new chat's item: `record` with its messages' estimated tokens, at version 0, its first write `token`.
    pub(super) fn new(
        owner: &str,
        record: &ChatRecord,
        generation: &str,
        token: &str,
        expires_at: Option<i64>,
        history_tokens: u64,
    ) -> Self {
        let t = &record.usage.tokens;
        ChatItem {
            pk: chat_pk(owner, &record.id),
            sk: META.to_string(),
            chat_id: Some(record.id.clone()),
            owner: owner.to_string(),
            mode: mode_name(record.mode).to_string(),
            title: record.title.clone(),
            created_at: record.created_at.clone(),
            last_updated: record.last_updated.clone(),
            last_message: record.last_message.clone(),
            message_count: record.message_count,
            generation: generation.to_string(),
            version: 0,
            writes: vec![token.to_string()],
            gsi1pk: list_pk(owner, record.mode),
            gsi1sk: list_sk(&record.last_updated, &record.id),
            expires_at,
            history_tokens: Some(history_tokens),
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            total_tokens: t.total_tokens,
            cache_read_input_tokens: t.cache_read_input_tokens,
            cache_write_input_tokens: t.cache_write_input_tokens,
            cost_usd: record.usage.cost_usd,
        }
    }

    /// The item to put. The cost goes as the commits add it ([`usage_attributes`]): a decimal of fixed places,
    /// which serde would write as the float's shortest digits.
    pub(super) fn into_item(self) -> Item {
        let cost = cost_attribute(self.cost_usd);
        let mut item: Item = serde_dynamo::to_item(self).expect("a chat item always serializes");
        if let Some(cost) = cost {
            item.insert("costUsd".into(), cost);
        }
        item
    }

    /// Reads a chat item.
    pub(super) fn read(item: Item) -> Result<Self, StoreError> {
        serde_dynamo::from_item(item)
            .map_err(|e| StoreError::Failed(format!("a chat item does not read: {e}")))
    }

    /// Whether the chat is past its expiry (and before DynamoDB gets round to deleting it).
    pub(super) fn expired(&self) -> bool {
        self.expires_at.is_some_and(|t| t <= now_unix())
    }

    pub(super) fn meta(self) -> Result<Meta, StoreError> {
        let chat_id = self
            .chat_id
            .ok_or_else(|| StoreError::Failed("chat item without chatId".into()))?;
        Ok(Meta {
            record: ChatRecord {
                id: chat_id,
                mode: mode_named(&self.mode),
                title: self.title,
                created_at: self.created_at,
                last_updated: self.last_updated,
                last_message: self.last_message,
                message_count: self.message_count,
                usage: UsageTotals {
                    tokens: TokenUsage {
                        input_tokens: self.input_tokens,
                        output_tokens: self.output_tokens,
                        total_tokens: self.total_tokens,
                        cache_read_input_tokens: self.cache_read_input_tokens,
                        cache_write_input_tokens: self.cache_write_input_tokens,
                    },
                    cost_usd: self.cost_usd,
                },
            },
            generation: self.generation,
            version: self.version,
            expires_at: self.expires_at,
            writes: self.writes,
            history_tokens: self.history_tokens,
        })
    }
}

/// A cost as the chat item keeps it: decimal, as DynamoDB adds numbers exactly, so a chat's total does not drift.
fn cost_attribute(cost: Option<f64>) -> Option<AttributeValue> {
    cost.filter(|c| c.is_finite())
        .map(|cost| n(format!("{cost:.12}")))
}

/// The attributes of `usage` (what a turn adds to a chat's totals), named as the chat item keeps them.
pub(super) fn usage_attributes(usage: &UsageTotals) -> Vec<(&'static str, AttributeValue)> {
    let t = &usage.tokens;
    let mut attributes = vec![
        ("inputTokens", n(t.input_tokens)),
        ("outputTokens", n(t.output_tokens)),
        ("totalTokens", n(t.total_tokens)),
        ("cacheReadInputTokens", n(t.cache_read_input_tokens)),
        ("cacheWriteInputTokens", n(t.cache_write_input_tokens)),
    ];
    if let Some(cost) = cost_attribute(usage.cost_usd) {
        attributes.push(("costUsd", cost));
    }
    attributes
}

/// The estimated prompt tokens of `messages`.
pub(super) fn tokens_of(messages: &[StoredMessage]) -> u64 {
    messages.iter().map(estimate_stored_tokens).sum()
}

/// `record` with `spent` added to its totals.
pub(super) fn spending(mut record: ChatRecord, spent: Option<&UsageTotals>) -> ChatRecord {
    if let Some(spent) = spent {
        record.usage.add(spent);
    }
    record
}

/// What the list shows of a chat's last message.
pub(super) fn preview(content: &str) -> String {
    content.chars().take(PREVIEW_CHARS).collect()
}

impl DynamoStore {
    /// The chat item (one consistent `GetItem`); an expired chat is not found.
    pub(super) async fn read_meta(&self, owner: &str, chat_id: &str) -> Result<Meta, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(chat_pk(owner, chat_id)))
            .key(SORT_KEY, s(META))
            .consistent_read(true)
            .send()
            .instrument(tracing::info_span!("store.get_item"))
            .await
            .map_err(failed)?;
        match out.item.map(ChatItem::read).transpose()? {
            Some(chat) if !chat.expired() => chat.meta(),
            _ => Err(StoreError::NotFound),
        }
    }

    /// The chat's title set to `title`, in one `UpdateItem` of the chat item on the condition that the chat is
    /// there and not expired (its key names the owner, so it is the caller's). Nothing else changes: not the
    /// version (a turn that read the chat before still commits as of its read, and commits never write the
    /// title), nor `lastUpdated` (so the list index keeps the chat where it was; the index carries the new title
    /// with the item). When the answer is lost, the chat is read back: a title already `title` is the rename
    /// landed, whichever attempt of it did.
    pub(super) async fn rename_chat(
        &self,
        owner: &str,
        chat_id: &str,
        title: &str,
    ) -> Result<ChatRecord, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        self.retrying(|| async {
            let updated = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PARTITION_KEY, s(chat_pk(owner, chat_id)))
                .key(SORT_KEY, s(META))
                .update_expression("SET #title = :title")
                .condition_expression(
                    "attribute_exists(#pk) AND (attribute_not_exists(#expires) OR #expires > :now)",
                )
                .expression_attribute_names("#title", "title")
                .expression_attribute_names("#pk", PARTITION_KEY)
                .expression_attribute_names("#expires", "expiresAt")
                .expression_attribute_values(":title", s(title))
                .expression_attribute_values(":now", n(now_unix()))
                .return_values(ReturnValue::AllNew)
                .send()
                .instrument(tracing::info_span!("store.update_item"))
                .await;
            let error = match updated {
                Ok(out) => {
                    let item = out.attributes.ok_or_else(|| {
                        StoreError::Failed("a rename answered without the chat".into())
                    })?;
                    return ChatItem::read(item)?.meta().map(|m| Some(m.record));
                }
                Err(e) => e,
            };
            match error.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(_)) => {
                    return Err(StoreError::NotFound);
                }
                // A transaction (a turn's commit) held the item: this attempt changed nothing; try again.
                Some(UpdateItemError::TransactionConflictException(_)) => return Ok(None),
                _ => {}
            }
            match failed(error) {
                // No answer, or one that does not say the update was refused: an earlier attempt (the SDK's own
                // retry) may have landed. Read back rather than guess.
                StoreError::Unavailable(detail) => match self.read_meta(owner, chat_id).await? {
                    meta if meta.record.title == title => Ok(Some(meta.record)),
                    _ => Err(StoreError::Unavailable(detail)),
                },
                refused => Err(refused),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chat_core::ChatMode;

    fn record(cost_usd: Option<f64>) -> ChatRecord {
        ChatRecord {
            id: "c".into(),
            mode: ChatMode::MultiAgent,
            title: "t".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            last_updated: "2026-01-02T00:00:00.000Z".into(),
            last_message: "hi".into(),
            message_count: 2,
            usage: UsageTotals {
                tokens: TokenUsage {
                    input_tokens: 1,
                    output_tokens: 2,
                    total_tokens: 3,
                    cache_read_input_tokens: 4,
                    cache_write_input_tokens: 5,
                },
                cost_usd,
            },
        }
    }

    #[test]
    fn a_new_chat_item_holds_its_totals_as_the_commits_add_them() {
        let record = record(Some(0.1 + 0.2));
        let item = ChatItem::new("alice", &record, "g", "t0", None, 7).into_item();
        for (name, value) in usage_attributes(&record.usage) {
            assert_eq!(item.get(name), Some(&value), "{name}");
        }
        assert_eq!(item["costUsd"], n("0.300000000000"));
        assert!(!item.contains_key("expiresAt"));
        let without_cost = ChatItem::new("alice", &self::record(None), "g", "t0", Some(9), 7);
        let item = without_cost.into_item();
        assert!(!item.contains_key("costUsd"));
        assert_eq!(item["expiresAt"], n(9));
    }

    #[test]
    fn a_chat_item_reads_back_as_written() {
        let record = record(Some(0.25));
        let item = ChatItem::new("alice", &record, "g", "t0", Some(9), 7).into_item();
        let meta = ChatItem::read(item).unwrap().meta().unwrap();
        assert_eq!(meta.record, record);
        assert_eq!(
            (meta.generation.as_str(), meta.version, meta.expires_at),
            ("g", 0, Some(9))
        );
        assert_eq!(
            (meta.writes, meta.history_tokens),
            (vec!["t0".into()], Some(7))
        );
    }
}
