//! Reading a chat as a whole (the chat item and every message, in one query) and as a turn reads it (the chat
//! item, then only the newest messages that fit the turn's budget), each read again when a write or a replace got
//! in its way.

use chat_core::{
    ChatRecord, HistoryBudget, LoadedChat, ReadMark, StoreError, StoredMessage,
    estimate_stored_tokens, is_chat_id,
};
use tracing::Instrument;

use super::DynamoStore;
use super::chat::{ChatItem, Meta};
use super::errors::failed;
use super::keys::{Item, META, chat_pk, s};
use super::messages::{Assembly, position_of};
use crate::table::{PARTITION_KEY, SORT_KEY};

/// The newest messages of a chat, as a turn reads them.
struct Newest {
    /// Oldest first; `None` when one was missing.
    messages: Option<Vec<StoredMessage>>,
    items_read: u64,
}

impl DynamoStore {
    /// The chat item and its messages in one `Query` (they share the partition key; the chat item, `META`, sorts
    /// before the messages, `MSG#…`), paged only past DynamoDB's 1 MB a page.
    pub(super) async fn load_whole(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> Result<(ChatRecord, Vec<StoredMessage>), StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        let pk = chat_pk(owner, chat_id);
        // A query is not isolated from a transaction: it may see some of a write's items and not others. A chat
        // item that counts messages the read did not see (a write landing, or a replace deleting the generation)
        // is read again; messages past its count (a write it does not count yet) are left out.
        for _ in 0..10 {
            if let Some((meta, messages)) = self.read_chat(&pk).await? {
                return Ok((meta.record, messages));
            }
        }
        Err(StoreError::Contended)
    }

    /// The chat item (one consistent `GetItem`), then its messages newest first (`Query` backwards, in pages that
    /// grow) until the budget is full: a turn reads about as many items as it sends messages, however long the
    /// chat. The mark is the chat item as read.
    pub(super) async fn load_newest(
        &self,
        owner: &str,
        chat_id: &str,
        budget: HistoryBudget,
    ) -> Result<LoadedChat, StoreError> {
        let pk = chat_pk(owner, chat_id);
        let mut items_read = 0;
        for _ in 0..10 {
            let meta = self.read_meta(owner, chat_id).await?;
            items_read += 1;
            let newest = self.read_newest(&pk, &meta, budget).await?;
            items_read += newest.items_read;
            // Replaced while being read: the generation's items were being deleted; read the chat again.
            if let Some(messages) = newest.messages {
                return Ok(LoadedChat {
                    record: meta.record.clone(),
                    messages,
                    mark: Some(ReadMark::new(meta)),
                    items_read,
                });
            }
        }
        Err(StoreError::Contended)
    }

    /// The chat item of `pk` and the messages it counts, from one query (paged past 1 MB); `None` when the
    /// messages it counts were not all there (see [`chat_core::SessionStore::load_for_turn`]).
    async fn read_chat(&self, pk: &str) -> Result<Option<(Meta, Vec<StoredMessage>)>, StoreError> {
        let mut meta: Option<Meta> = None;
        let mut messages = Vec::new();
        let mut assembly = Assembly::default();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PARTITION_KEY)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .instrument(tracing::info_span!("store.query"))
                .await
                .map_err(failed)?;
            for item in out.items.unwrap_or_default() {
                let Some(meta) = &meta else {
                    // The chat item sorts first; without it there is no chat (only what a delete left behind).
                    if item
                        .get(SORT_KEY)
                        .and_then(|v| v.as_s().ok())
                        .map(String::as_str)
                        != Some(META)
                    {
                        return Err(StoreError::NotFound);
                    }
                    let chat = ChatItem::read(item)?;
                    if chat.expired() {
                        return Err(StoreError::NotFound);
                    }
                    meta = Some(chat.meta()?);
                    continue;
                };
                let Some((seq, message)) = assembly.push(item, &meta.generation) else {
                    continue;
                };
                if seq >= meta.record.message_count {
                    break;
                }
                if seq != messages.len() as u64 {
                    return Ok(None);
                }
                messages.push(message);
            }
            let done = messages.len() as u64 >= meta.as_ref().map_or(0, |m| m.record.message_count);
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() && !done => start = Some(key),
                _ => break,
            }
        }
        let Some(meta) = meta else {
            return Err(StoreError::NotFound);
        };
        Ok((messages.len() as u64 == meta.record.message_count).then_some((meta, messages)))
    }

    /// The newest messages of the chat `meta` describes that fit `budget` (always the newest), oldest first, read
    /// backwards in pages sized by the chat's estimated tokens (then doubling); `None` for the messages when one is
    /// missing (its generation is being deleted under a replace).
    async fn read_newest(
        &self,
        pk: &str,
        meta: &Meta,
        budget: HistoryBudget,
    ) -> Result<Newest, StoreError> {
        let count = meta.record.message_count;
        let generation = &meta.generation;
        let mut newest = Newest {
            messages: Some(Vec::new()),
            items_read: 0,
        };
        if count == 0 {
            return Ok(newest);
        }
        let mut messages: Vec<StoredMessage> = Vec::new();
        let mut spent = 0u64;
        // A message's continuations come before its own item when read backwards: they wait for it.
        let mut parts: Vec<Item> = Vec::new();
        let mut expected = count;
        let mut done = false;
        // The first page: as many items as the budget should take, from the chat's estimated tokens (all of them when
        // the whole chat fits), and a few more for long messages' continuations; 16 when the chat's size is unknown.
        let mut page = match meta.history_tokens {
            Some(tokens) if tokens <= budget.tokens => count.saturating_add(8),
            Some(tokens) => {
                let share =
                    u128::from(count) * u128::from(budget.tokens) / u128::from(tokens.max(1));
                (share as u64).saturating_add(8)
            }
            None => 16,
        }
        .clamp(8, 1000) as i32;
        let mut start: Option<Item> = None;
        'pages: loop {
            let out = self
                .messages_query(pk, generation, (0, count))
                .scan_index_forward(false)
                .limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .instrument(tracing::info_span!("store.query"))
                .await
                .map_err(failed)?;
            newest.items_read += out.items().len() as u64;
            for item in out.items.unwrap_or_default() {
                let Some((seq, part)) = position_of(&item, generation) else {
                    continue;
                };
                if part > 0 {
                    parts.push(item);
                    continue;
                }
                let mut assembly = Assembly::default();
                let whole = std::iter::once(item)
                    .chain(parts.drain(..).rev())
                    .filter_map(|i| assembly.push(i, generation))
                    .next();
                parts.clear();
                match whole {
                    Some((whole_seq, message)) if whole_seq == seq && seq + 1 == expected => {
                        let tokens = estimate_stored_tokens(&message);
                        if !budget.takes(messages.len(), spent, tokens) {
                            done = true;
                            break 'pages;
                        }
                        spent += tokens;
                        messages.push(message);
                        expected = seq;
                        if seq == 0 {
                            done = true;
                            break 'pages;
                        }
                    }
                    _ => {
                        newest.messages = None;
                        return Ok(newest);
                    }
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
            page = (page * 2).min(1000);
        }
        // Items that ran out before the budget or the first message did: some were missing.
        if !done {
            newest.messages = None;
            return Ok(newest);
        }
        messages.reverse();
        newest.messages = Some(messages);
        Ok(newest)
    }
}
