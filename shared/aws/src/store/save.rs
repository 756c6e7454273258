//! The writes that add to the table: a new chat (its item and first messages, landing only if no chat has its
//! key) and messages appended to a chat (as of the turn's own read of it, and read again only when the write lost a
//! race), each read back when its outcome is unknown.

use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use chat_core::{ChatRecord, StoreError, StoredMessage, UsageTotals, is_chat_id};

use super::DynamoStore;
use super::chat::{ChatItem, Meta, preview, spending, tokens_of};
use super::errors::WriteError;
use super::idempotency::new_token;
use super::keys::{META, chat_pk, new_generation, now_unix, s};
use super::messages::messages_items;
use super::write::{Change, fits_one_transaction};
use crate::table::{PARTITION_KEY, SORT_KEY};

impl DynamoStore {
    /// A new chat with `messages`, unless one with its id exists.
    pub(super) async fn create_chat(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        if !is_chat_id(&chat.id) {
            return Err(StoreError::Failed(format!(
                "{:?} is not a chat id",
                chat.id
            )));
        }
        let pk = chat_pk(owner, &chat.id);
        let generation = new_generation();
        let token = new_token();
        let expires_at = self.ttl.map(|ttl| now_unix() + ttl.as_secs() as i64);
        let record = ChatRecord {
            last_message: messages
                .last()
                .map(|m| preview(&m.content))
                .unwrap_or_default(),
            message_count: messages.len() as u64,
            ..chat.clone()
        };
        let item = ChatItem::new(
            owner,
            &record,
            &generation,
            &token,
            expires_at,
            tokens_of(messages),
        );
        let puts = messages_items(&pk, &generation, 0, messages, expires_at);
        let guard = ConditionCheck::builder()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(&pk))
            .key(SORT_KEY, s(META))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PARTITION_KEY)
            .build()
            .expect("a condition check has its parts");
        let commit = TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item.into_item()))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", PARTITION_KEY)
                    .build()
                    .expect("a put has its table and item"),
            )
            .build();
        match self.write(puts, guard, commit).await {
            Ok(()) => Ok(record),
            Err(WriteError::Race { commit: false }) => Err(StoreError::AlreadyExists),
            Err(WriteError::Failed(e)) => Err(e),
            // The chat may exist because this very write made it, its answer lost: read back.
            Err(failure) => match self.landed(owner, &chat.id, &token).await? {
                Some(meta) => Ok(meta.record),
                None => match failure {
                    WriteError::Unknown(e) => Err(e),
                    _ => Err(StoreError::AlreadyExists),
                },
            },
        }
    }

    /// Appends `messages` as of the chat item `read` (a turn's own read), or as of a fresh read of it. Only when
    /// the write loses a race (or the messages need a rewrite of the whole chat) is the chat item read again.
    pub(super) async fn append_as_of(
        &self,
        owner: &str,
        chat_id: &str,
        read: Option<Meta>,
        messages: &[StoredMessage],
        spent: Option<&UsageTotals>,
    ) -> Result<ChatRecord, StoreError> {
        let pk = chat_pk(owner, chat_id);
        // Messages' times are display text (`10:15 AM`); the chat's own time is RFC 3339, as lists sort by it.
        let now = crate::now_millis();
        // One token for every attempt: an attempt whose answer was lost is found by the next one's read.
        let token = new_token();
        let read = std::sync::Mutex::new(read);
        self.retrying(|| async {
            let earlier = read.lock().expect("never poisoned").take();
            let meta = match earlier {
                Some(meta) => meta,
                None => self.read_meta(owner, chat_id).await?,
            };
            if meta.writes.contains(&token) {
                // An earlier attempt landed, though its answer said otherwise or never came.
                return Ok(Some(meta.record));
            }
            let start = meta.record.message_count;
            let puts = messages_items(&pk, &meta.generation, start, messages, meta.expires_at);
            if !fits_one_transaction(&puts) {
                // Too much for one transaction: the chat is rewritten whole into a new generation, so that no
                // other writer's items can mix with these.
                let old = self.load_generation(&pk, &meta).await?;
                return self
                    .rewrite(
                        owner,
                        &meta,
                        &[old, messages.to_vec()].concat(),
                        &now,
                        &token,
                        spent,
                    )
                    .await;
            }
            let last_message = messages
                .last()
                .map(|m| preview(&m.content))
                .unwrap_or_else(|| meta.record.last_message.clone());
            let count = start + messages.len() as u64;
            let commit = self.commit_update(
                owner,
                &meta,
                Change {
                    generation: &meta.generation,
                    count,
                    last_message: &last_message,
                    now: &now,
                    token: &token,
                    spent,
                    history_tokens: meta.history_tokens.map(|t| t + tokens_of(messages)),
                },
            );
            match self
                .write(puts, self.version_guard(&pk, meta.version), commit)
                .await
            {
                Ok(()) => Ok(Some(spending(
                    ChatRecord {
                        last_updated: now.clone(),
                        last_message,
                        message_count: count,
                        ..meta.record
                    },
                    spent,
                ))),
                // Lost, or this write's own earlier attempt won: the next round's read tells.
                Err(WriteError::Race { .. }) => Ok(None),
                Err(WriteError::Failed(e)) => Err(e),
                Err(WriteError::Unknown(e)) => match self.landed(owner, chat_id, &token).await? {
                    Some(now_meta) => Ok(Some(now_meta.record)),
                    None => Err(e),
                },
            }
        })
        .await
    }
}
