//! The writes that add to the table: a new chat (its item and first messages, landing only if no chat has its
//! key) and messages appended to a chat (as of the turn's own read of it, and read again only when the write lost a
//! race), each read back when its outcome is unknown; a turn's with its usage counters in the same transaction.

use std::sync::atomic::{AtomicBool, Ordering};

use chat_core::{
    Charged, ChatRecord, StoreError, StoredMessage, UsageCharge, UsageTotals, is_chat_id,
};

use super::DynamoStore;
use super::chat::{ChatItem, Commit, Meta, absent_guard, preview, tokens_of, version_guard};
use super::errors::WriteError;
use super::idempotency::new_token;
use super::keys::{chat_pk, new_generation, now_unix};
use super::messages::messages_items;
use super::write::{fits_one_transaction, fits_one_transaction_with};

impl DynamoStore {
    /// A new chat with `messages`, unless one with its id exists; with `charge` added to its owner's counters in
    /// the same transaction when the ledger counts in this table and everything fits one transaction.
    pub(super) async fn create_chat(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
        charge: Option<&UsageCharge<'_>>,
    ) -> Result<(ChatRecord, Charged), StoreError> {
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
        let counters = self
            .counter_updates(charge)
            .filter(|c| fits_one_transaction_with(&puts, c.len()));
        let charged = charged_if(counters.is_some());
        let guard = absent_guard(&self.table, &pk);
        let commit = item.create(&self.table);
        match self
            .write_with(puts, guard, commit, counters.unwrap_or_default())
            .await
        {
            Ok(()) => Ok((record, charged)),
            Err(WriteError::Race { commit: false }) => Err(StoreError::AlreadyExists),
            Err(WriteError::Failed(e)) => Err(e),
            // The chat may exist because this very write made it, its answer lost: read back. The counters landed
            // with it, or not at all.
            Err(failure) => match self.landed(owner, &chat.id, &token).await? {
                Some(meta) => Ok((meta.record, charged)),
                None => match failure {
                    WriteError::Unknown(e) => Err(e),
                    _ => Err(StoreError::AlreadyExists),
                },
            },
        }
    }

    /// Appends `messages` as of the chat item `read` (a turn's own read), or as of a fresh read of it. Only when
    /// the write loses a race (or the messages need a rewrite of the whole chat) is the chat item read again.
    /// `charge` goes in the same transaction as the messages when the ledger counts in this table and they fit
    /// one transaction (not in a rewrite, which may take several): every attempt carries it, so it lands exactly
    /// when the turn does.
    pub(super) async fn append_as_of(
        &self,
        owner: &str,
        chat_id: &str,
        read: Option<Meta>,
        messages: &[StoredMessage],
        spent: Option<&UsageTotals>,
        charge: Option<&UsageCharge<'_>>,
    ) -> Result<(ChatRecord, Charged), StoreError> {
        let pk = chat_pk(owner, chat_id);
        // Messages' times are display text (`10:15 AM`); the chat's own time is RFC 3339, as lists sort by it.
        let now = crate::now_millis();
        // One token for every attempt: an attempt whose answer was lost is found by the next one's read.
        let token = new_token();
        let read = std::sync::Mutex::new(read);
        // Whether an attempt carried the counters. Attempts write the same items but for their keys, so they carry
        // the counters all or none: one found landed by its token (its answer lost) carried them if this says so.
        let carried = AtomicBool::new(false);
        let landed_charged = || charged_if(carried.load(Ordering::Relaxed));
        self.retrying(|| async {
            let earlier = read.lock().expect("never poisoned").take();
            let meta = match earlier {
                Some(meta) => meta,
                None => self.read_meta(owner, chat_id).await?,
            };
            if meta.writes.contains(&token) {
                // An earlier attempt landed, though its answer said otherwise or never came.
                return Ok(Some((meta.record, landed_charged())));
            }
            let start = meta.record.message_count;
            let puts = messages_items(&pk, &meta.generation, start, messages, meta.expires_at);
            if !fits_one_transaction(&puts) {
                // Too much for one transaction: the chat is rewritten whole into a new generation, so that no
                // other writer's items can mix with these.
                let old = self.load_generation(&pk, &meta).await?;
                let rewritten = self
                    .rewrite(
                        owner,
                        &meta,
                        &[old, messages.to_vec()].concat(),
                        &now,
                        &token,
                        spent,
                    )
                    .await?;
                return Ok(rewritten.map(|record| (record, Charged::No)));
            }
            let counters = self
                .counter_updates(charge)
                .filter(|c| fits_one_transaction_with(&puts, c.len()));
            if counters.is_some() {
                carried.store(true, Ordering::Relaxed);
            }
            let charged = charged_if(counters.is_some());
            let commit = Commit::append(&meta, messages, &now, &token, spent);
            let update = commit.update(&self.table, owner);
            let guard = version_guard(&self.table, &pk, meta.version);
            match self
                .write_with(puts, guard, update, counters.unwrap_or_default())
                .await
            {
                Ok(()) => Ok(Some((commit.record(), charged))),
                // Lost, or this write's own earlier attempt won: the next round's read tells.
                Err(WriteError::Race { .. }) => Ok(None),
                Err(WriteError::Failed(e)) => Err(e),
                Err(WriteError::Unknown(e)) => match self.landed(owner, chat_id, &token).await? {
                    Some(now_meta) => Ok(Some((now_meta.record, landed_charged()))),
                    None => Err(e),
                },
            }
        })
        .await
    }
}

/// [`Charged::WithTurn`] when the write carried the counters.
fn charged_if(carried: bool) -> Charged {
    if carried {
        Charged::WithTurn
    } else {
        Charged::No
    }
}
