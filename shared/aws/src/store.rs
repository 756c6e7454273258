//! The store port on DynamoDB: one item per chat and one per message (see [`crate::table`]), written in
//! transactions guarded by the chat's version so that concurrent turns both land whole.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, Update,
    WriteRequest,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chat_core::{ChatRecord, Page, SessionStore, StoreError, StoredMessage, is_chat_id};
use chat_protocol::Role;
use chat_protocol::chat_ui::ChatMode;
use time::OffsetDateTime;

use crate::table::{
    EXPIRES_AT, LIST_INDEX, LIST_PARTITION_KEY, LIST_SORT_KEY, PARTITION_KEY, SORT_KEY,
};

type Item = HashMap<String, AttributeValue>;

/// How many items one transaction may hold.
const TRANSACTION_LIMIT: usize = 100;
/// How often a write that lost a race to another write of the same chat is tried again.
const WRITE_ATTEMPTS: u32 = 60;
/// How much of the last message the history list shows.
const PREVIEW_CHARS: usize = 200;

/// Chats and messages in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Chats expire this long after they were created; `None` keeps them.
    ttl: Option<Duration>,
}

/// What the chat item says about where its messages are.
struct Meta {
    record: ChatRecord,
    /// The messages' generation: a random token, new for every write that cannot be one transaction, so that two
    /// such writes never share keys.
    generation: String,
    version: u64,
    expires_at: Option<i64>,
}

fn new_generation() -> String {
    format!("{:016x}", fastrand::u64(..))
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn chat_pk(owner: &str, chat_id: &str) -> String {
    format!("CHAT#{chat_id}#{owner}")
}

fn list_pk(owner: &str, mode: ChatMode) -> String {
    format!("LIST#{}#{owner}", mode_name(mode))
}

fn message_sk(generation: &str, seq: u64) -> String {
    format!("MSG#{generation}#{seq:09}")
}

fn mode_name(mode: ChatMode) -> &'static str {
    match mode {
        ChatMode::Standard => "standard",
        ChatMode::MultiAgent => "multiAgent",
    }
}

fn now_unix() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

fn preview(content: &str) -> String {
    content.chars().take(PREVIEW_CHARS).collect()
}

fn failed<E: std::fmt::Debug>(e: E) -> StoreError {
    StoreError::Failed(format!("{e:?}"))
}

fn get_s(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn expired(item: &Item) -> bool {
    get_n(item, EXPIRES_AT).is_some_and(|t| t <= now_unix())
}

fn meta_of(item: &Item) -> Result<Meta, StoreError> {
    let missing = |name: &str| StoreError::Failed(format!("chat item without {name}"));
    let mode = match get_s(item, "mode").as_deref() {
        Some("multiAgent") => ChatMode::MultiAgent,
        _ => ChatMode::Standard,
    };
    Ok(Meta {
        record: ChatRecord {
            id: get_s(item, "chatId").ok_or_else(|| missing("chatId"))?,
            mode,
            title: get_s(item, "title").unwrap_or_default(),
            created_at: get_s(item, "createdAt").unwrap_or_default(),
            last_updated: get_s(item, "lastUpdated").unwrap_or_default(),
            last_message: get_s(item, "lastMessage").unwrap_or_default(),
            message_count: get_n(item, "messageCount").unwrap_or(0) as u64,
        },
        generation: get_s(item, "generation").unwrap_or_default(),
        version: get_n(item, "version").unwrap_or(0) as u64,
        expires_at: get_n(item, EXPIRES_AT),
    })
}

fn message_of(item: &Item) -> StoredMessage {
    StoredMessage {
        id: get_s(item, "id").unwrap_or_default(),
        role: match get_s(item, "role").as_deref() {
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        },
        content: get_s(item, "content").unwrap_or_default(),
        timestamp: get_s(item, "timestamp").unwrap_or_default(),
        agent_identifier: get_s(item, "agentIdentifier"),
        agent_name: get_s(item, "agentName"),
    }
}

fn message_item(pk: &str, sk: String, m: &StoredMessage, expires_at: Option<i64>) -> Item {
    let mut item: Item = HashMap::from([
        (PARTITION_KEY.to_string(), s(pk)),
        (SORT_KEY.to_string(), s(sk)),
        ("id".to_string(), s(&m.id)),
        ("role".to_string(), s(m.role.as_str())),
        ("content".to_string(), s(&m.content)),
        ("timestamp".to_string(), s(&m.timestamp)),
    ]);
    if let Some(a) = &m.agent_identifier {
        item.insert("agentIdentifier".into(), s(a));
    }
    if let Some(a) = &m.agent_name {
        item.insert("agentName".into(), s(a));
    }
    if let Some(t) = expires_at {
        item.insert(EXPIRES_AT.into(), n(t));
    }
    item
}

/// Whether a failed transaction lost a race: every item that failed, failed its condition or conflicted with
/// another transaction. Throttling, validation or size failures are faults, not races.
fn lost_race<R>(e: &SdkError<TransactWriteItemsError, R>) -> bool {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
            let reasons = c.cancellation_reasons();
            !reasons.is_empty()
                && reasons.iter().all(|r| {
                    matches!(
                        r.code(),
                        None | Some("None")
                            | Some("ConditionalCheckFailed")
                            | Some("TransactionConflict")
                    )
                })
        }
        Some(other) => other.code() == Some("TransactionConflictException"),
        None => false,
    }
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>, ttl_days: Option<u32>) -> Self {
        Self {
            client,
            table: table.into(),
            ttl: ttl_days.map(|d| Duration::from_secs(u64::from(d) * 86_400)),
        }
    }

    /// A store on the table `table`, with a client from the shared AWS configuration.
    pub fn from_config(config: &aws_config::SdkConfig, table: &str, ttl_days: Option<u32>) -> Self {
        Self::new(Client::new(config), table, ttl_days)
    }

    async fn read_meta(&self, owner: &str, chat_id: &str) -> Result<Meta, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(chat_pk(owner, chat_id)))
            .key(SORT_KEY, s("META"))
            .consistent_read(true)
            .send()
            .await
            .map_err(failed)?;
        match out.item() {
            Some(item) if !expired(item) => meta_of(item),
            _ => Err(StoreError::NotFound),
        }
    }

    /// The messages of one generation, in order.
    async fn read_messages(
        &self,
        pk: &str,
        generation: &str,
        count: u64,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let mut messages = Vec::with_capacity(count as usize);
        if count == 0 {
            return Ok(messages);
        }
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :last")
                .expression_attribute_names("#pk", PARTITION_KEY)
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":first", s(message_sk(generation, 0)))
                .expression_attribute_values(":last", s(message_sk(generation, count - 1)))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(failed)?;
            messages.extend(out.items().iter().map(message_of));
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(messages),
            }
        }
    }

    /// Writes `puts` and then `commit`, atomically when they fit one transaction. Larger writes go in transactions
    /// that each check the chat is still at `guard` (its version, or its absence), so nothing lands unless the
    /// commit can; items a failed write left beyond the committed messages are never read and are overwritten.
    async fn write(
        &self,
        puts: Vec<Item>,
        guard: ConditionCheck,
        commit: TransactWriteItem,
    ) -> Result<
        (),
        SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError>,
    > {
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
        let mut puts: Vec<TransactWriteItem> = puts.into_iter().map(put).collect();
        while puts.len() > TRANSACTION_LIMIT - 1 {
            let rest = puts.split_off(TRANSACTION_LIMIT - 1);
            let mut chunk = std::mem::replace(&mut puts, rest);
            chunk.push(
                TransactWriteItem::builder()
                    .condition_check(guard.clone())
                    .build(),
            );
            self.client
                .transact_write_items()
                .set_transact_items(Some(chunk))
                .send()
                .await?;
        }
        puts.push(commit);
        self.client
            .transact_write_items()
            .set_transact_items(Some(puts))
            .send()
            .await?;
        Ok(())
    }

    fn version_guard(&self, pk: &str, version: u64) -> ConditionCheck {
        ConditionCheck::builder()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(pk))
            .key(SORT_KEY, s("META"))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(version))
            .build()
            .expect("a condition check has its parts")
    }

    /// The update that makes new messages visible: count, generation, version, and what the list shows.
    fn commit_update(
        &self,
        owner: &str,
        meta: &Meta,
        generation: &str,
        count: u64,
        last_message: &str,
        now: &str,
    ) -> TransactWriteItem {
        let pk = chat_pk(owner, &meta.record.id);
        TransactWriteItem::builder()
            .update(
                Update::builder()
                    .table_name(&self.table)
                    .key(PARTITION_KEY, s(&pk))
                    .key(SORT_KEY, s("META"))
                    .update_expression(
                        "SET messageCount = :count, generation = :gen, version = :next, \
                         lastUpdated = :now, lastMessage = :last, #lsk = :lsk",
                    )
                    .condition_expression("version = :v")
                    .expression_attribute_names("#lsk", LIST_SORT_KEY)
                    .expression_attribute_values(":count", n(count))
                    .expression_attribute_values(":gen", s(generation))
                    .expression_attribute_values(":next", n(meta.version + 1))
                    .expression_attribute_values(":v", n(meta.version))
                    .expression_attribute_values(":now", s(now))
                    .expression_attribute_values(":last", s(last_message))
                    .expression_attribute_values(":lsk", s(format!("{now}#{}", meta.record.id)))
                    .build()
                    .expect("an update has its parts"),
            )
            .build()
    }

    /// Retries `attempt` while it loses races to other writes of the same chat.
    async fn retrying<T, F, Fut>(&self, mut attempt: F) -> Result<T, StoreError>
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

    /// Deletes every message item of `pk` whose sort key starts with `prefix` (best effort: what is left is never
    /// read, as it is not the chat's current generation, or the chat is gone).
    async fn delete_messages(&self, pk: &str, prefix: &str) {
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", PARTITION_KEY)
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":prefix", s(prefix))
                .projection_expression("#pk, #sk")
                .set_exclusive_start_key(start.take())
                .send()
                .await;
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

    /// Writes `messages` as the chat's whole content in a new generation and switches to it in one step; `None`
    /// when another write got there first (this attempt's items are removed again).
    async fn rewrite(
        &self,
        owner: &str,
        meta: &Meta,
        messages: &[StoredMessage],
        now: &str,
    ) -> Result<Option<ChatRecord>, StoreError> {
        let pk = chat_pk(owner, &meta.record.id);
        let generation = new_generation();
        let puts = messages
            .iter()
            .enumerate()
            .map(|(i, m)| message_item(&pk, message_sk(&generation, i as u64), m, meta.expires_at))
            .collect();
        let last_message = messages
            .last()
            .map(|m| preview(&m.content))
            .unwrap_or_default();
        let count = messages.len() as u64;
        let commit = self.commit_update(owner, meta, &generation, count, &last_message, now);
        match self
            .write(puts, self.version_guard(&pk, meta.version), commit)
            .await
        {
            Ok(()) => {
                self.delete_messages(&pk, &format!("MSG#{}#", meta.generation))
                    .await;
                Ok(Some(ChatRecord {
                    last_updated: now.to_string(),
                    last_message,
                    message_count: count,
                    ..meta.record.clone()
                }))
            }
            Err(e) if lost_race(&e) => {
                self.delete_messages(&pk, &format!("MSG#{generation}#"))
                    .await;
                Ok(None)
            }
            Err(e) => {
                self.delete_messages(&pk, &format!("MSG#{generation}#"))
                    .await;
                Err(failed(e))
            }
        }
    }
}

impl SessionStore for DynamoStore {
    async fn load(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> Result<(ChatRecord, Vec<StoredMessage>), StoreError> {
        let pk = chat_pk(owner, chat_id);
        // A replace that lands between reading the chat and its messages removes the old ones: read again.
        for _ in 0..10 {
            let meta = self.read_meta(owner, chat_id).await?;
            let messages = self
                .read_messages(&pk, &meta.generation, meta.record.message_count)
                .await?;
            if messages.len() as u64 == meta.record.message_count {
                return Ok((meta.record, messages));
            }
        }
        Err(StoreError::Contended)
    }

    async fn create(
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
        let expires_at = self.ttl.map(|ttl| now_unix() + ttl.as_secs() as i64);
        let record = ChatRecord {
            last_message: messages
                .last()
                .map(|m| preview(&m.content))
                .unwrap_or_default(),
            message_count: messages.len() as u64,
            ..chat.clone()
        };
        let mut meta: Item = HashMap::from([
            (PARTITION_KEY.to_string(), s(&pk)),
            (SORT_KEY.to_string(), s("META")),
            ("chatId".to_string(), s(&record.id)),
            ("owner".to_string(), s(owner)),
            ("mode".to_string(), s(mode_name(record.mode))),
            ("title".to_string(), s(&record.title)),
            ("createdAt".to_string(), s(&record.created_at)),
            ("lastUpdated".to_string(), s(&record.last_updated)),
            ("lastMessage".to_string(), s(&record.last_message)),
            ("messageCount".to_string(), n(record.message_count)),
            ("generation".to_string(), s(&generation)),
            ("version".to_string(), n(0)),
            (
                LIST_PARTITION_KEY.to_string(),
                s(list_pk(owner, record.mode)),
            ),
            (
                LIST_SORT_KEY.to_string(),
                s(format!("{}#{}", record.last_updated, record.id)),
            ),
        ]);
        if let Some(t) = expires_at {
            meta.insert(EXPIRES_AT.into(), n(t));
        }
        let puts = messages
            .iter()
            .enumerate()
            .map(|(seq, m)| message_item(&pk, message_sk(&generation, seq as u64), m, expires_at))
            .collect();
        let guard = ConditionCheck::builder()
            .table_name(&self.table)
            .key(PARTITION_KEY, s(&pk))
            .key(SORT_KEY, s("META"))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PARTITION_KEY)
            .build()
            .expect("a condition check has its parts");
        let commit = TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(meta))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", PARTITION_KEY)
                    .build()
                    .expect("a put has its table and item"),
            )
            .build();
        match self.write(puts, guard, commit).await {
            Ok(()) => Ok(record),
            Err(e) if lost_race(&e) => Err(StoreError::AlreadyExists),
            Err(e) => Err(failed(e)),
        }
    }

    async fn append(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let pk = chat_pk(owner, chat_id);
        // Messages' times are display text (`10:15 AM`); the chat's own time is RFC 3339, as lists sort by it.
        let now = crate::now_millis();
        self.retrying(|| async {
            let meta = self.read_meta(owner, chat_id).await?;
            if messages.len() >= TRANSACTION_LIMIT {
                // Too many for one transaction: the chat is rewritten whole into a new generation, so that no
                // other writer's items can mix with these.
                let old = self
                    .read_messages(&pk, &meta.generation, meta.record.message_count)
                    .await?;
                return self
                    .rewrite(owner, &meta, &[old, messages.to_vec()].concat(), &now)
                    .await;
            }
            let start = meta.record.message_count;
            let puts = messages
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    message_item(
                        &pk,
                        message_sk(&meta.generation, start + i as u64),
                        m,
                        meta.expires_at,
                    )
                })
                .collect();
            let last_message = messages
                .last()
                .map(|m| preview(&m.content))
                .unwrap_or_else(|| meta.record.last_message.clone());
            let count = start + messages.len() as u64;
            let commit =
                self.commit_update(owner, &meta, &meta.generation, count, &last_message, &now);
            match self
                .write(puts, self.version_guard(&pk, meta.version), commit)
                .await
            {
                Ok(()) => Ok(Some(ChatRecord {
                    last_updated: now.clone(),
                    last_message,
                    message_count: count,
                    ..meta.record
                })),
                Err(e) if lost_race(&e) => Ok(None),
                Err(e) => Err(failed(e)),
            }
        })
        .await
    }

    async fn replace(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let now = crate::now_millis();
        self.retrying(|| async {
            let meta = self.read_meta(owner, chat_id).await?;
            self.rewrite(owner, &meta, messages, &now).await
        })
        .await
    }

    async fn delete(&self, owner: &str, chat_id: &str) -> Result<(), StoreError> {
        let pk = chat_pk(owner, chat_id);
        self.read_meta(owner, chat_id).await?;
        let deleted = self
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .key(PARTITION_KEY, s(&pk))
                            .key(SORT_KEY, s("META"))
                            .condition_expression("attribute_exists(#pk)")
                            .expression_attribute_names("#pk", PARTITION_KEY)
                            .build()
                            .expect("a delete has its parts"),
                    )
                    .build(),
            )
            .send()
            .await;
        match deleted {
            Ok(_) => {}
            Err(e) if lost_race(&e) => return Err(StoreError::NotFound),
            Err(e) => return Err(failed(e)),
        }
        // The chat is gone for every reader and no write can land without it; every message item goes after it,
        // whatever its generation.
        self.delete_messages(&pk, "MSG#").await;
        Ok(())
    }

    async fn list(
        &self,
        owner: &str,
        mode: ChatMode,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ChatRecord>, StoreError> {
        let partition = list_pk(owner, mode);
        let start = cursor.map(|c| decode_cursor(c, &partition)).transpose()?;
        let mut items: Vec<Item> = Vec::new();
        let mut from = start;
        // One more than asked tells whether there is a next page; expired chats are skipped.
        while items.len() <= limit {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(LIST_INDEX)
                .key_condition_expression("#p = :p")
                .expression_attribute_names("#p", LIST_PARTITION_KEY)
                .expression_attribute_values(":p", s(&partition))
                .scan_index_forward(false)
                .limit((limit + 1 - items.len()) as i32)
                .set_exclusive_start_key(from.take())
                .send()
                .await
                .map_err(failed)?;
            items.extend(out.items().iter().filter(|i| !expired(i)).cloned());
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => from = Some(key.clone()),
                _ => break,
            }
        }
        let next_cursor = if items.len() > limit {
            items.truncate(limit);
            items.last().map(encode_cursor)
        } else {
            None
        };
        let records = items
            .iter()
            .map(|i| meta_of(i).map(|m| m.record))
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items: records,
            next_cursor,
        })
    }
}

/// The position after `item` in the list index, as an opaque string.
fn encode_cursor(item: &Item) -> String {
    let key: serde_json::Map<String, serde_json::Value> =
        [PARTITION_KEY, SORT_KEY, LIST_PARTITION_KEY, LIST_SORT_KEY]
            .iter()
            .filter_map(|k| get_s(item, k).map(|v| (k.to_string(), serde_json::Value::String(v))))
            .collect();
    URL_SAFE_NO_PAD.encode(serde_json::Value::Object(key).to_string())
}

/// Reads a cursor back; one from another list (or made up) is refused.
fn decode_cursor(cursor: &str, partition: &str) -> Result<Item, StoreError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::InvalidCursor)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)?;
    let mut key = Item::new();
    for name in [PARTITION_KEY, SORT_KEY, LIST_PARTITION_KEY, LIST_SORT_KEY] {
        let v = value
            .get(name)
            .and_then(|v| v.as_str())
            .ok_or(StoreError::InvalidCursor)?;
        key.insert(name.to_string(), s(v));
    }
    if get_s(&key, LIST_PARTITION_KEY).as_deref() != Some(partition) {
        return Err(StoreError::InvalidCursor);
    }
    Ok(key)
}
