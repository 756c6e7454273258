//! The writes that take away: a chat rewritten whole into a new generation (a replace, or an append too large for
//! one transaction) and the old generation's items deleted after, and a chat deleted, its item first so that no
//! reader or writer sees what is left of it.

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use chat_core::{ChatRecord, StoreError, StoredMessage, UsageTotals};
use tracing::Instrument;

use super::chat::{self, Commit, Meta, version_guard};
use super::errors::{WriteError, lost_race, refused};
use super::idempotency::new_token;
use super::keys::{ALL_MESSAGES, chat_pk, generation_prefix, new_generation};
use super::messages::messages_items;
use super::{DynamoStore, query_page};
use crate::dynamo::{Item, failed, s, transact};

impl DynamoStore {
    /// The chat's messages replaced by `messages`, whatever they were.
    pub(super) async fn replace_messages(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let now = crate::now_millis();
        let token = new_token();
        self.retrying(|| async {
            let meta = self.read_meta(owner, chat_id).await?;
            if meta.writes.contains(&token) {
                return Ok(Some(meta.record));
            }
            self.rewrite(owner, &meta, messages, &now, &token, None)
                .await
        })
        .await
    }

    /// Writes `messages` as the chat's whole content in a new generation and switches to it in one step, as the
    /// write `token`; `None` when another write got there first (this attempt's items are removed again).
    pub(super) async fn rewrite(
        &self,
        owner: &str,
        meta: &Meta,
        messages: &[StoredMessage],
        now: &str,
        token: &str,
        spent: Option<&UsageTotals>,
    ) -> Result<Option<ChatRecord>, StoreError> {
        let pk = chat_pk(owner, &meta.record.id);
        // A new generation's messages sort before the chat item, whatever the old one's did: a rewrite moves a chat
        // written before to where a turn reads it in one query.
        let generation = new_generation();
        let puts = messages_items(&pk, &generation, 0, messages, meta.expires_at);
        let commit = Commit::rewrite(meta, &generation, messages, now, token, spent);
        let update = commit.update(&self.table, owner);
        let old = generation_prefix(&meta.generation);
        let mine = generation_prefix(&generation);
        let failure = match self
            .write(puts, version_guard(&self.table, &pk, meta.version), update)
            .await
        {
            Ok(()) => {
                self.delete_messages(&pk, &old).await;
                return Ok(Some(commit.record()));
            }
            Err(failure) => failure,
        };
        match failure {
            WriteError::Race { commit: false } => {
                self.delete_messages(&pk, &mine).await;
                Ok(None)
            }
            WriteError::Failed(e) => {
                // A store that does not answer would not delete either; the items are never read.
                if !matches!(e, StoreError::Unavailable(_)) {
                    self.delete_messages(&pk, &mine).await;
                }
                Err(e)
            }
            WriteError::Race { commit: true } | WriteError::Unknown(_) => {
                // Deleting this write's items before knowing it did not land could delete the chat's messages.
                if let Some(now_meta) = self.landed(owner, &meta.record.id, token).await? {
                    // It landed: the generation it replaced is no one's now.
                    self.delete_messages(&pk, &old).await;
                    return Ok(Some(now_meta.record));
                }
                match failure {
                    WriteError::Unknown(e) => Err(e),
                    _ => {
                        self.delete_messages(&pk, &mine).await;
                        Ok(None)
                    }
                }
            }
        }
    }

    /// The chat gone: its item (so that no one reads or writes it any more), then every message item.
    pub(super) async fn delete_chat(&self, owner: &str, chat_id: &str) -> Result<(), StoreError> {
        let pk = chat_pk(owner, chat_id);
        self.read_meta(owner, chat_id).await?;
        let span = tracing::info_span!("store.transact_write_items");
        let deleted = transact(&self.client, vec![chat::delete(&self.table, &pk)], span).await;
        match deleted {
            Ok(_) => {}
            Err(e) if lost_race(&e) => return Err(StoreError::NotFound),
            Err(e) if refused(&e) => return Err(failed(e)),
            // No answer: the chat is gone if the delete landed.
            Err(e) => match self.read_meta(owner, chat_id).await {
                Err(StoreError::NotFound) => {}
                Ok(_) => return Err(failed(e)),
                Err(other) => return Err(other),
            },
        }
        // The chat is gone for every reader and no write can land without it; every message item goes after it,
        // whatever its generation, before the chat item's key or after it.
        for prefix in ALL_MESSAGES {
            self.delete_messages(&pk, prefix).await;
        }
        Ok(())
    }

    /// Deletes every message item of `pk` whose sort key starts with `prefix` (best effort: what is left is never
    /// read, as it is not the chat's current generation, or the chat is gone).
    async fn delete_messages(&self, pk: &str, prefix: &str) {
        let mut start: Option<Item> = None;
        loop {
            let query = self
                .partition_query(pk, "begins_with(#sk, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
                .projection_expression("#pk, #sk");
            let page = query_page(query, start.take()).await;
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = ?e, "could not list messages to delete");
                    return;
                }
            };
            let requests: Vec<WriteRequest> = page
                .items()
                .iter()
                .map(|item| {
                    WriteRequest::builder()
                        .delete_request(
                            DeleteRequest::builder()
                                .set_key(Some(item.clone()))
                                .build()
                                .expect("a delete has its key"),
                        )
                        .build()
                })
                .collect();
            for chunk in requests.chunks(25) {
                let mut pending = chunk.to_vec();
                for _ in 0..5 {
                    match self
                        .client
                        .batch_write_item()
                        .request_items(&self.table, pending.clone())
                        .send()
                        .instrument(tracing::info_span!("store.batch_write_item"))
                        .await
                    {
                        Ok(out) => {
                            pending = out
                                .unprocessed_items()
                                .and_then(|u| u.get(&self.table))
                                .cloned()
                                .unwrap_or_default();
                            if pending.is_empty() {
                                break;
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = ?e, "could not delete messages");
                            break;
                        }
                    }
                }
            }
            match page.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return,
            }
        }
    }
}
