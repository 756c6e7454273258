//! The store port on DynamoDB: one item per chat and one per message (a long message continues over a few more;
//! see [`crate::table`]), written in transactions guarded by the chat's version so that concurrent turns both land
//! whole, and read back whenever a write's outcome is unknown, so that none lands twice.
//!
//! By concern, each below the ones after it:
//! - [`idempotency`]: write tokens; [`keys`]: where items sit; [`chat`]: the chat item and every write of it (a
//!   new chat's put, a commit, a rename, the guards, the delete), and its read-back when a write's answer was lost;
//!   [`messages`]: a message's items and their assembly.
//! - [`read`]: a chat read whole, or as a turn reads it (in one query, as its messages sort just before the chat
//!   item); [`pages`]: its messages in pages; [`list`]: the list index.
//! - [`write`]: transactions within DynamoDB's bounds, each guarded, the last with the commit; [`errors`]: what a
//!   failed write means.
//! - [`save`]: new chats and appends (a turn's with its usage counters, when they fit its one transaction);
//!   [`rewrite`]: rewrites, replaces and deletes.
//!
//! Items are read and written as serde structs ([`serde_dynamo`]) in the attribute names and types the table has
//! always had, so that chats written before read back the same.

mod chat;
mod errors;
mod idempotency;
mod keys;
mod list;
mod messages;
mod pages;
mod read;
mod reasoning;
mod responses;
mod rewrite;
mod save;
mod write;

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::StalledStreamProtectionConfig;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::TransactWriteItem;
use aws_smithy_types::timeout::TimeoutConfig;
use chat_core::{
    Charged, ChatRecord, HistoryBudget, ListRequest, LoadedChat, Page, PageRequest, SessionStore,
    StoreError, StoreTimeouts, StoredMessage, TurnWrite, UsageCharge,
};
use tracing::Instrument;

use crate::dynamo::{Item, failed, s};
use crate::table::{PARTITION_KEY, SORT_KEY};

/// Sends a query of the store, traced as `store.query`: its page of items from the key `start` (the first page when
/// `None`).
async fn query_page(
    query: QueryFluentBuilder,
    start: Option<Item>,
) -> Result<QueryOutput, StoreError> {
    query
        .set_exclusive_start_key(start)
        .send()
        .instrument(tracing::info_span!("store.query"))
        .await
        .map_err(failed)
}

/// Chats and messages in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Chats expire this long after they were created; `None` keeps them.
    ttl: Option<Duration>,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>, ttl_days: Option<u32>) -> Self {
        Self {
            client,
            table: table.into(),
            ttl: ttl_days.map(|d| Duration::from_secs(u64::from(d) * 86_400)),
        }
    }

    /// A store on the table `table`, with a client from the shared AWS configuration whose every call is bounded
    /// by `timeouts`: a store that does not answer is an error within them, not a request held open.
    pub fn from_config(
        config: &aws_config::SdkConfig,
        table: &str,
        ttl_days: Option<u32>,
        timeouts: StoreTimeouts,
    ) -> Self {
        let client_config = aws_sdk_dynamodb::config::Builder::from(config)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(timeouts.connect)
                    .operation_attempt_timeout(timeouts.attempt)
                    .operation_timeout(timeouts.operation)
                    .build(),
            )
            // Every call is bounded by the timeouts above, so the SDK's watch for a stalled body (a grace period of 5 s,
            // longer than an attempt's 2 s by default) would only add its bookkeeping to every poll of every call.
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .build();
        Self::new(Client::from_conf(client_config), table, ttl_days)
    }

    /// The per-user usage counters, in this store's table (through the same client). A turn this store writes for
    /// a service counting in this ledger adds its spending to them in its own transaction
    /// ([`SessionStore::append_after_charging`]).
    pub fn usage_ledger(&self) -> crate::DynamoUsage {
        crate::DynamoUsage::new(self.client.clone(), &self.table)
    }

    /// The documents' records, in this store's table (through the same client, so within the same timeouts).
    pub fn documents(&self) -> crate::DynamoDocuments {
        crate::DynamoDocuments::new(self.client.clone(), &self.table)
    }

    /// The API keys, in this store's table (through the same client, so within the same timeouts).
    pub fn api_keys(&self) -> crate::DynamoApiKeys {
        crate::DynamoApiKeys::new(self.client.clone(), &self.table)
    }

    /// The writes that make `charge` (a turn's last settlement) in the turn's transaction, when its ledger counts
    /// in this table; `None` when it counts elsewhere (another table, or not DynamoDB), where this store cannot.
    fn counter_updates(&self, charge: Option<&UsageCharge<'_>>) -> Option<Vec<TransactWriteItem>> {
        let charge = charge?;
        let ledger = charge
            .ledger
            .as_any()?
            .downcast_ref::<crate::DynamoUsage>()?;
        ledger
            .counts_in(&self.table)
            .then(|| ledger.turn_settlement(charge.hold, charge.spent))
    }

    /// A query of the items of the partition `pk`, those whose sort key (`#sk`) meets `sort_condition`.
    fn partition_query(&self, pk: &str, sort_condition: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression(format!("#pk = :pk AND {sort_condition}"))
            .expression_attribute_names("#pk", PARTITION_KEY)
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":pk", s(pk))
    }

    /// A turn's write as of the read its mark holds (when the mark is this store's), with `charge` when given.
    async fn append_turn(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
        charge: Option<&UsageCharge<'_>>,
    ) -> Result<(ChatRecord, Charged), StoreError> {
        let read = turn.mark.and_then(|m| m.get::<chat::Meta>()).cloned();
        self.append_as_of(
            owner,
            chat_id,
            read,
            turn.messages,
            Some(turn.spent),
            charge,
        )
        .await
    }
}

impl SessionStore for DynamoStore {
    async fn keep_reasoning(
        &self,
        owner: &str,
        call_id: &str,
        blocks: &[chat_core::ReasoningBlock],
    ) -> Result<(), StoreError> {
        self.put_reasoning(owner, call_id, blocks).await
    }

    async fn kept_reasoning(
        &self,
        owner: &str,
        call_id: &str,
    ) -> Result<Option<Vec<chat_core::ReasoningBlock>>, StoreError> {
        self.get_reasoning(owner, call_id).await
    }

    async fn load(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> Result<(ChatRecord, Vec<StoredMessage>), StoreError> {
        self.load_whole(owner, chat_id).await
    }

    async fn load_for_turn(
        &self,
        owner: &str,
        chat_id: &str,
        budget: HistoryBudget,
    ) -> Result<LoadedChat, StoreError> {
        self.load_newest(owner, chat_id, budget).await
    }

    async fn append_after(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
    ) -> Result<ChatRecord, StoreError> {
        let (record, _) = self.append_turn(owner, chat_id, turn, None).await?;
        Ok(record)
    }

    async fn append_after_charging(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
        charge: &UsageCharge<'_>,
    ) -> Result<(ChatRecord, Charged), StoreError> {
        self.append_turn(owner, chat_id, turn, Some(charge)).await
    }

    async fn load_page(
        &self,
        owner: &str,
        chat_id: &str,
        page: PageRequest<'_>,
    ) -> Result<Page<StoredMessage>, StoreError> {
        self.page_of_messages(owner, chat_id, page).await
    }

    async fn create(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let (record, _) = self.create_chat(owner, chat, messages, None).await?;
        Ok(record)
    }

    async fn create_charging(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
        charge: &UsageCharge<'_>,
    ) -> Result<(ChatRecord, Charged), StoreError> {
        self.create_chat(owner, chat, messages, Some(charge)).await
    }

    async fn append(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let (record, _) = self
            .append_as_of(owner, chat_id, None, messages, None, None)
            .await?;
        Ok(record)
    }

    async fn replace(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        self.replace_messages(owner, chat_id, messages).await
    }

    async fn delete(&self, owner: &str, chat_id: &str) -> Result<(), StoreError> {
        self.delete_chat(owner, chat_id).await
    }

    async fn rename(
        &self,
        owner: &str,
        chat_id: &str,
        title: &str,
    ) -> Result<ChatRecord, StoreError> {
        self.rename_chat(owner, chat_id, title).await
    }

    async fn list(
        &self,
        owner: &str,
        page: ListRequest<'_>,
    ) -> Result<Page<ChatRecord>, StoreError> {
        self.list_chats(owner, page).await
    }
}
