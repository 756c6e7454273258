//! The chat item (`META`), as one struct in the attribute names and types the table has always had, and every
//! write of it, built here only: a new chat's put, a commit's update ([`Commit`]), a rename, the guards that hold a
//! write to the chat's version or absence, and its delete; and what the store reads back of it ([`Meta`]: the
//! chat's record and where its messages are), as a turn reads it or as a writer whose answer was lost does.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, ReturnValue, TransactWriteItem};
use chat_core::{
    ChatRecord, StoreError, StoredMessage, UsageTotals, estimate_stored_tokens, is_chat_id,
};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::DynamoStore;
use super::idempotency::writes_after;
use super::keys::{
    META, chat_item_key, chat_pk, list_pk, list_sk, mode_name, mode_named, now_unix,
};
use crate::dynamo::{Expression, Item, failed, get_item, n, s};
use crate::table::{EXPIRES_AT, LIST_SORT_KEY, PARTITION_KEY, StoredTotals, token_attributes};

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
    /// The chat's totals, as the commits add to them (see [`usage_attributes`]); its cost written by
    /// [`ChatItem::into_item`], as an exact decimal.
    #[serde(flatten)]
    totals: StoredTotals,
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
            totals: StoredTotals::from(&record.usage),
        }
    }

    /// The item to put. The cost goes as the commits add it ([`usage_attributes`]): a decimal of fixed places,
    /// which serde would write as the float's shortest digits.
    pub(super) fn into_item(self) -> Item {
        let cost = cost_attribute(self.totals.cost_usd);
        let mut item: Item = serde_dynamo::to_item(self).expect("a chat item always serializes");
        if let Some(cost) = cost {
            item.insert("costUsd".into(), cost);
        }
        item
    }

    /// The put of a new chat's item, on condition that no chat has its key.
    pub(super) fn create(self, table: &str) -> TransactWriteItem {
        Expression::new()
            .if_absent(PARTITION_KEY)
            .put(table, self.into_item())
    }

    /// Reads a chat item.
    pub(super) fn read(item: Item) -> Result<Self, StoreError> {
        serde_dynamo::from_item(item)
            .map_err(|e| StoreError::Failed(format!("a chat item does not read: {e}")))
    }

    /// Whether the chat is past its expiry (and before DynamoDB gets round to deleting it).
    pub(super) fn expired(&self) -> bool {
        self.expires_at
            .is_some_and(|t| chat_core::is_expired(t, now_unix()))
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
                usage: UsageTotals::from(&self.totals),
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
    let mut attributes = token_attributes(&usage.tokens).to_vec();
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

/// The check that no chat item has the key `pk` (a new chat's, before its commit).
pub(super) fn absent_guard(table: &str, pk: &str) -> ConditionCheck {
    Expression::new()
        .if_absent(PARTITION_KEY)
        .check(table, chat_item_key(pk))
}

/// The check that the chat item of `pk` is still at `version`.
pub(super) fn version_guard(table: &str, pk: &str, version: u64) -> ConditionCheck {
    Expression::new()
        .if_equals("version", n(version))
        .check(table, chat_item_key(pk))
}

/// The chat item of `pk` deleted, on condition that it is there.
pub(super) fn delete(table: &str, pk: &str) -> TransactWriteItem {
    Expression::new()
        .if_exists(PARTITION_KEY)
        .delete(table, chat_item_key(pk))
}

/// What a write makes visible when it commits, as of the chat item it read: the messages' count and generation, the
/// next version, the write's token among the latest, what the list shows, the messages' estimated tokens and what
/// a turn spent.
pub(super) struct Commit<'a> {
    meta: &'a Meta,
    generation: &'a str,
    count: u64,
    last_message: String,
    /// The chat's new `lastUpdated`.
    now: &'a str,
    /// The write's token, kept in the chat item's latest writes.
    token: &'a str,
    /// A turn's tokens and cost, added to the chat's totals (`None` for a save, which spends nothing).
    spent: Option<&'a UsageTotals>,
    /// The messages' estimated prompt tokens after the write, when known.
    history_tokens: Option<u64>,
}

impl<'a> Commit<'a> {
    /// `messages` appended to the chat as `meta` says it is, in its generation.
    pub(super) fn append(
        meta: &'a Meta,
        messages: &[StoredMessage],
        now: &'a str,
        token: &'a str,
        spent: Option<&'a UsageTotals>,
    ) -> Self {
        Self::after(meta, None, messages, (now, token, spent))
    }

    /// The chat `meta` rewritten whole as `messages`, in the new `generation`.
    pub(super) fn rewrite(
        meta: &'a Meta,
        generation: &'a str,
        messages: &[StoredMessage],
        now: &'a str,
        token: &'a str,
        spent: Option<&'a UsageTotals>,
    ) -> Self {
        Self::after(meta, Some(generation), messages, (now, token, spent))
    }

    /// The chat `meta` with `messages` after its own (in its generation), or instead of them (in `rewritten`).
    fn after(
        meta: &'a Meta,
        rewritten: Option<&'a str>,
        messages: &[StoredMessage],
        (now, token, spent): (&'a str, &'a str, Option<&'a UsageTotals>),
    ) -> Self {
        let (generation, kept) = match rewritten {
            None => (meta.generation.as_str(), Some(&meta.record)),
            Some(generation) => (generation, None),
        };
        let kept_tokens = match kept {
            Some(_) => meta.history_tokens,
            None => Some(0),
        };
        Self {
            meta,
            generation,
            count: kept.map_or(0, |r| r.message_count) + messages.len() as u64,
            last_message: messages
                .last()
                .map(|m| preview(&m.content))
                .or_else(|| kept.map(|r| r.last_message.clone()))
                .unwrap_or_default(),
            now,
            token,
            spent,
            history_tokens: kept_tokens.map(|t| t + tokens_of(messages)),
        }
    }

    /// The chat item's update that makes the write visible, on condition that the chat is still at the version the
    /// write read.
    pub(super) fn update(&self, table: &str, owner: &str) -> TransactWriteItem {
        let meta = self.meta;
        let writes = writes_after(&meta.writes, self.token);
        let mut e = Expression::new()
            .set("messageCount", n(self.count))
            .set("generation", s(self.generation))
            .set("version", n(meta.version + 1))
            .set("lastUpdated", s(self.now))
            .set("lastMessage", s(&self.last_message))
            .set(LIST_SORT_KEY, s(list_sk(self.now, &meta.record.id)))
            .set(
                "writes",
                AttributeValue::L(writes.into_iter().map(s).collect()),
            );
        if let Some(tokens) = self.history_tokens {
            // Set, not added: the commit holds only at the version it was computed from.
            e = e.set(HISTORY_TOKENS, n(tokens));
        }
        if let Some(spent) = self.spent {
            // Added in the same commit as the turn's messages: a turn counts once, with them, or not at all.
            for (name, value) in usage_attributes(spent) {
                e = e.add(name, value);
            }
        }
        e.if_equals("version", n(meta.version))
            .update(table, chat_item_key(&chat_pk(owner, &meta.record.id)))
    }

    /// The chat's record once the write landed.
    pub(super) fn record(self) -> ChatRecord {
        spending(
            ChatRecord {
                last_updated: self.now.to_string(),
                last_message: self.last_message,
                message_count: self.count,
                ..self.meta.record.clone()
            },
            self.spent,
        )
    }
}

impl DynamoStore {
    /// The chat item (one consistent `GetItem`); an expired chat is not found.
    pub(super) async fn read_meta(&self, owner: &str, chat_id: &str) -> Result<Meta, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        let key = chat_item_key(&chat_pk(owner, chat_id));
        let span = tracing::info_span!("store.get_item");
        let out = get_item(&self.client, &self.table, key, true, span).await?;
        match out.map(ChatItem::read).transpose()? {
            Some(chat) if !chat.expired() => chat.meta(),
            _ => Err(StoreError::NotFound),
        }
    }

    /// After a write whose outcome is unknown: the chat as it is now if the write `token` landed (see
    /// [`super::idempotency`]).
    pub(super) async fn landed(
        &self,
        owner: &str,
        chat_id: &str,
        token: &str,
    ) -> Result<Option<Meta>, StoreError> {
        match self.read_meta(owner, chat_id).await {
            Ok(meta) => Ok(meta.writes.iter().any(|t| t == token).then_some(meta)),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
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
            let rename = Expression::new()
                .set("title", s(title))
                .if_exists(PARTITION_KEY)
                .if_absent_or(EXPIRES_AT, ">", n(now_unix()));
            let updated = rename
                .update_item(
                    self.client.update_item().table_name(&self.table),
                    chat_item_key(&chat_pk(owner, chat_id)),
                )
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
    use chat_core::{ChatMode, TokenUsage};
    use std::collections::HashMap;

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
    fn a_commit_writes_only_attributes_of_the_chat_item_as_of_the_version_read() {
        let item = ChatItem::new("alice", &record(Some(0.25)), "g", "t0", None, 7).into_item();
        let meta = ChatItem::read(item.clone()).unwrap().meta().unwrap();
        let message = StoredMessage::new(
            "m3",
            chat_core::Role::User,
            "x".repeat(PREVIEW_CHARS + 5),
            "10:15 AM",
        );
        let spent = record(Some(0.5)).usage;
        let now = "2026-01-03T00:00:00.000Z";
        let commit = Commit::append(
            &meta,
            std::slice::from_ref(&message),
            now,
            "t1",
            Some(&spent),
        );
        let written = commit.update("chats", "alice").update.unwrap();
        let (names, values) = (
            written.expression_attribute_names().unwrap(),
            written.expression_attribute_values().unwrap(),
        );
        // `#n = :v` and `#n :v` terms, as attribute and value.
        let terms = |expression: &str| -> HashMap<String, AttributeValue> {
            let words: Vec<&str> = expression
                .split([' ', ','])
                .filter(|w| !["", "=", "SET", "ADD"].contains(w))
                .collect();
            words
                .chunks(2)
                .map(|t| (names[t[0]].clone(), values[t[1]].clone()))
                .collect()
        };
        let update = terms(written.update_expression());
        let mut attributes: Vec<&str> = update.keys().map(String::as_str).collect();
        attributes.sort();
        assert_eq!(
            attributes,
            [
                "cacheReadInputTokens",
                "cacheWriteInputTokens",
                "costUsd",
                "generation",
                "gsi1sk",
                "historyTokens",
                "inputTokens",
                "lastMessage",
                "lastUpdated",
                "messageCount",
                "outputTokens",
                "totalTokens",
                "version",
                "writes",
            ]
        );
        for name in &attributes {
            assert!(
                item.contains_key(*name),
                "{name} is not an attribute of the chat item"
            );
        }
        assert_eq!(update["messageCount"], n(3));
        assert_eq!(update["version"], n(1));
        assert_eq!(update["writes"], AttributeValue::L(vec![s("t0"), s("t1")]));
        assert_eq!(update["inputTokens"], n(1));
        let condition = terms(written.condition_expression().unwrap());
        assert_eq!(condition, HashMap::from([("version".to_string(), n(0))]));
        let after = commit.record();
        assert_eq!(after.message_count, 3);
        assert_eq!(after.last_updated, now);
        assert_eq!(after.last_message.chars().count(), PREVIEW_CHARS);
        assert_eq!(after.usage.tokens.input_tokens, 2);
        assert_eq!(after.usage.cost_usd, Some(0.75));
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
