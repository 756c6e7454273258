//! The store port on DynamoDB: one item per chat and one per message (a long message continues over a few more;
//! see [`crate::table`]), written in transactions guarded by the chat's version so that concurrent turns both land
//! whole, and read back whenever a write's outcome is unknown, so that none lands twice.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, Update,
    WriteRequest,
};
use aws_smithy_types::timeout::TimeoutConfig;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chat_core::ChatMode;
use chat_core::Role;
use chat_core::{
    ChatRecord, HistoryBudget, LoadedChat, Page, ReadMark, SessionStore, StoreError, StoreTimeouts,
    StoredMessage, TokenUsage, UsageTotals, estimate_stored_tokens, is_chat_id,
};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::table::{
    EXPIRES_AT, LIST_INDEX, LIST_PARTITION_KEY, LIST_SORT_KEY, PARTITION_KEY, SORT_KEY,
};

type Item = HashMap<String, AttributeValue>;
type WriteFailure = SdkError<TransactWriteItemsError, HttpResponse>;

/// How many items one transaction may hold.
const TRANSACTION_LIMIT: usize = 100;
/// How many bytes of items one transaction carries at most: DynamoDB allows 4 MB; the rest is room for the
/// commit and for [`item_size`]'s estimate.
const TRANSACTION_BYTES: usize = 3 * 1024 * 1024;
/// How much of a message's text one item holds: DynamoDB's items are at most 400 KB, and the message's other
/// attributes get what is left.
const PART_BYTES: usize = 300 * 1024;
/// How many of the latest writes' tokens the chat item keeps, so that a writer whose answer was lost can tell
/// whether its write landed (far more writes than can land on one chat while a writer reads back).
const WRITES_KEPT: usize = 64;
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
#[derive(Clone)]
struct Meta {
    record: ChatRecord,
    /// The messages' generation: a random token, new for every write that cannot be one transaction, so that two
    /// such writes never share keys.
    generation: String,
    version: u64,
    expires_at: Option<i64>,
    /// The tokens of the latest writes that landed, oldest first.
    writes: Vec<String>,
    /// The estimated prompt tokens of all the messages ([`estimate_stored_tokens`]), which sizes a turn's read;
    /// `None` for a chat written before it was kept.
    history_tokens: Option<u64>,
}

/// What a write makes visible when it commits.
struct Change<'a> {
    generation: &'a str,
    count: u64,
    last_message: &'a str,
    /// The chat's new `lastUpdated`.
    now: &'a str,
    /// The write's token, kept in the chat item's latest writes.
    token: &'a str,
    /// A turn's tokens and cost, added to the chat's totals (`None` for a save, which spends nothing).
    spent: Option<&'a UsageTotals>,
    /// The messages' estimated prompt tokens after the write, when known.
    history_tokens: Option<u64>,
}

/// Why a write did not land, or may not have.
enum WriteError {
    /// Another write of the chat got there first: a condition failed. When it was the commit's, an earlier attempt
    /// of the same commit (the SDK retries one whose answer was lost) may be what changed the chat.
    Race { commit: bool },
    /// Nothing of the write is visible: the commit was never sent, or the store refused it.
    Failed(StoreError),
    /// The commit failed without saying whether it (or an earlier attempt of it) landed.
    Unknown(StoreError),
}

/// A random token: a generation's, or a write's.
fn new_token() -> String {
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

/// The key of a message's `part`-th continuation: right after the message's own item, before the next message.
fn part_sk(generation: &str, seq: u64, part: u32) -> String {
    format!("{}#p{part:03}", message_sk(generation, seq))
}

/// A key after every item of message `seq` (its continuations included) and before the next message's.
fn message_end_sk(generation: &str, seq: u64) -> String {
    format!("{}#q", message_sk(generation, seq))
}

/// Where an item of `generation` sits: its message's number and which part of it (0 for the message's own item).
fn position(sk: &str, generation: &str) -> Option<(u64, u32)> {
    let rest = sk
        .strip_prefix("MSG#")?
        .strip_prefix(generation)?
        .strip_prefix('#')?;
    match rest.split_once("#p") {
        None => Some((rest.parse().ok()?, 0)),
        Some((seq, part)) => Some((seq.parse().ok()?, part.parse().ok()?)),
    }
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

/// What a failed call means for the caller: the store out of reach (no answer in time, no connection, a response
/// cut off, a server error or throttling past the SDK's retries) is [`StoreError::Unavailable`], worth trying again
/// later; anything else (a request the store refuses) is a fault of ours.
pub(crate) fn failed<E>(e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let unavailable = match &e {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(f) => !f.is_user(),
        SdkError::ServiceError(ctx) => {
            ctx.raw().status().is_server_error() || is_throttling(ctx.err().code())
        }
        _ => false,
    };
    let detail = format!("{:?}", aws_sdk_dynamodb::error::DisplayErrorContext(&e));
    if unavailable {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Failed(detail)
    }
}

fn is_throttling(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ThrottlingException"
                | "ThrottlingError"
                | "ProvisionedThroughputExceededException"
                | "ProvisionedThroughputExceeded"
                | "RequestLimitExceeded"
        )
    )
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
            usage: usage_of(item),
        },
        generation: get_s(item, "generation").unwrap_or_default(),
        version: get_n(item, "version").unwrap_or(0) as u64,
        expires_at: get_n(item, EXPIRES_AT),
        history_tokens: get_n(item, HISTORY_TOKENS).map(|n| n.max(0) as u64),
        writes: item
            .get("writes")
            .and_then(|v| v.as_l().ok())
            .map(|list| list.iter().filter_map(|v| v.as_s().ok().cloned()).collect())
            .unwrap_or_default(),
    })
}

/// The chat's running totals of tokens and cost (absent attributes are zero; no cost attribute, no known cost).
fn usage_of(item: &Item) -> UsageTotals {
    let count = |name: &str| get_n(item, name).unwrap_or(0).max(0) as u64;
    UsageTotals {
        tokens: TokenUsage {
            input_tokens: count("inputTokens"),
            output_tokens: count("outputTokens"),
            total_tokens: count("totalTokens"),
            cache_read_input_tokens: count("cacheReadInputTokens"),
            cache_write_input_tokens: count("cacheWriteInputTokens"),
        },
        cost_usd: item
            .get("costUsd")
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok()),
    }
}

/// The attributes of `usage` (a chat's totals, or what a turn adds to them), named as the chat item keeps them.
fn usage_attributes(usage: &UsageTotals) -> Vec<(&'static str, AttributeValue)> {
    let t = &usage.tokens;
    let mut attributes = vec![
        ("inputTokens", n(t.input_tokens)),
        ("outputTokens", n(t.output_tokens)),
        ("totalTokens", n(t.total_tokens)),
        ("cacheReadInputTokens", n(t.cache_read_input_tokens)),
        ("cacheWriteInputTokens", n(t.cache_write_input_tokens)),
    ];
    if let Some(cost) = usage.cost_usd.filter(|c| c.is_finite()) {
        // Decimal, as DynamoDB adds numbers exactly: a chat's total does not drift.
        attributes.push(("costUsd", n(format!("{cost:.12}"))));
    }
    attributes
}

/// The attribute that keeps a chat's estimated prompt tokens.
const HISTORY_TOKENS: &str = "historyTokens";

/// The estimated prompt tokens of `messages`.
fn tokens_of(messages: &[StoredMessage]) -> u64 {
    messages.iter().map(estimate_stored_tokens).sum()
}

/// `record` with `spent` added to its totals.
fn spending(mut record: ChatRecord, spent: Option<&UsageTotals>) -> ChatRecord {
    if let Some(spent) = spent {
        record.usage.add(spent);
    }
    record
}

/// The chat's latest write tokens after the write `token`.
fn writes_after(meta: &Meta, token: &str) -> AttributeValue {
    let keep = meta.writes.len().min(WRITES_KEPT - 1);
    AttributeValue::L(
        meta.writes[meta.writes.len() - keep..]
            .iter()
            .map(|t| s(t.as_str()))
            .chain([s(token)])
            .collect(),
    )
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
        // The message's files as JSON: a list of `{name, contentType, size, key}`.
        files: get_s(item, "files")
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default(),
        // The tools the answer called, as JSON: a list of `{round, id, name, input, output, status}`.
        tools: get_s(item, "tools")
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default(),
    }
}

/// `text` in pieces of at most [`PART_BYTES`], cut between characters.
fn split_parts(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > PART_BYTES {
        let mut cut = PART_BYTES;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        parts.push(head);
        rest = tail;
    }
    parts.push(rest);
    parts
}

/// The items of message `seq`: its own (with the first part of its text, and `parts` when there are more) and one
/// per further part of its text.
fn message_items(
    pk: &str,
    generation: &str,
    seq: u64,
    m: &StoredMessage,
    expires_at: Option<i64>,
) -> Vec<Item> {
    let parts = split_parts(&m.content);
    let mut item: Item = HashMap::from([
        (PARTITION_KEY.to_string(), s(pk)),
        (SORT_KEY.to_string(), s(message_sk(generation, seq))),
        ("id".to_string(), s(&m.id)),
        ("role".to_string(), s(m.role.as_str())),
        ("content".to_string(), s(parts[0])),
        ("timestamp".to_string(), s(&m.timestamp)),
    ]);
    if parts.len() > 1 {
        item.insert("parts".into(), n(parts.len()));
    }
    if let Some(a) = &m.agent_identifier {
        item.insert("agentIdentifier".into(), s(a));
    }
    if let Some(a) = &m.agent_name {
        item.insert("agentName".into(), s(a));
    }
    if !m.tools.is_empty() {
        let tools = serde_json::to_string(&m.tools).expect("tool exchanges always serialize");
        item.insert("tools".into(), s(tools));
    }
    if !m.files.is_empty() {
        let files = serde_json::to_string(&m.files).expect("stored files always serialize");
        item.insert("files".into(), s(files));
    }
    let mut items = vec![item];
    for (k, part) in parts.iter().enumerate().skip(1) {
        items.push(HashMap::from([
            (PARTITION_KEY.to_string(), s(pk)),
            (SORT_KEY.to_string(), s(part_sk(generation, seq, k as u32))),
            ("content".to_string(), s(*part)),
        ]));
    }
    if let Some(t) = expires_at {
        for item in &mut items {
            item.insert(EXPIRES_AT.into(), n(t));
        }
    }
    items
}

/// The items of `messages`, numbered from `first`.
fn messages_items(
    pk: &str,
    generation: &str,
    first: u64,
    messages: &[StoredMessage],
    expires_at: Option<i64>,
) -> Vec<Item> {
    messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| message_items(pk, generation, first + i as u64, m, expires_at))
        .collect()
}

/// About how many bytes DynamoDB counts for `item`: its attributes' names and values, and a little per item.
fn item_size(item: &Item) -> usize {
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
fn fits_one_transaction(items: &[Item]) -> bool {
    items.len() < TRANSACTION_LIMIT
        && items.iter().map(item_size).sum::<usize>() <= TRANSACTION_BYTES
}

/// Messages put back together from their items, which come in key order: a message's own item, then its
/// continuations. A message whose parts are not all there (its generation being deleted) is left out.
#[derive(Default)]
struct Assembly {
    open: Option<Partial>,
}

struct Partial {
    seq: u64,
    message: StoredMessage,
    parts: u32,
    next: u32,
}

impl Assembly {
    /// Takes the next item; a message once it is whole.
    fn push(&mut self, item: &Item, generation: &str) -> Option<(u64, StoredMessage)> {
        let (seq, part) = position(&get_s(item, SORT_KEY)?, generation)?;
        let open = if part == 0 {
            Partial {
                seq,
                message: message_of(item),
                parts: get_n(item, "parts").unwrap_or(1).max(1) as u32,
                next: 1,
            }
        } else {
            let mut open = self
                .open
                .take()
                .filter(|o| o.seq == seq && o.next == part)?;
            open.message
                .content
                .push_str(item.get("content").and_then(|v| v.as_s().ok())?);
            open.next += 1;
            open
        };
        if open.next >= open.parts {
            return Some((open.seq, open.message));
        }
        self.open = Some(open);
        None
    }
}

/// The newest messages of a chat, as a turn reads them.
struct Newest {
    /// Oldest first; `None` when one was missing.
    messages: Option<Vec<StoredMessage>>,
    items_read: u64,
}

/// A run of messages read from one generation.
struct Run {
    messages: Vec<StoredMessage>,
    /// The number of the message after the last one read.
    next: u64,
    /// Whether every message up to where the read stopped was there (a replace deleting the generation was not
    /// in the way).
    whole: bool,
}

/// Whether a failed commit certainly did not land, on this attempt or an earlier one the SDK made: the store refused
/// the request itself (validation, size, access), as it would have refused every attempt. A lost race, throttling,
/// a server error or no answer at all may hide an earlier attempt that landed.
fn refused(e: &WriteFailure) -> bool {
    match e {
        SdkError::ConstructionFailure(_) => true,
        SdkError::ServiceError(ctx) => match ctx.err() {
            TransactWriteItemsError::TransactionCanceledException(c) => {
                c.cancellation_reasons().iter().any(|r| {
                    matches!(
                        r.code(),
                        Some("ValidationError" | "ItemCollectionSizeLimitExceeded")
                    )
                })
            }
            other => {
                ctx.raw().status().is_client_error()
                    && !is_throttling(other.code())
                    && !matches!(
                        other.code(),
                        Some("TransactionInProgressException" | "TransactionConflictException")
                    )
            }
        },
        _ => false,
    }
}

/// Whether a failed transaction lost a race: every item that failed, failed its condition or conflicted with
/// another transaction. Throttling, validation or size failures are faults, not races.
fn lost_race(e: &WriteFailure) -> bool {
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
            .build();
        Self::new(Client::from_conf(client_config), table, ttl_days)
    }

    /// The per-user usage counters, in this store's table (through the same client).
    pub fn usage_ledger(&self) -> crate::DynamoUsage {
        crate::DynamoUsage::new(self.client.clone(), &self.table)
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
            .instrument(tracing::info_span!("store.get_item"))
            .await
            .map_err(failed)?;
        match out.item() {
            Some(item) if !expired(item) => meta_of(item),
            _ => Err(StoreError::NotFound),
        }
    }

    /// After a write whose outcome is unknown: the chat as it is now if the write `token` landed.
    async fn landed(
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

    /// Messages `from..to` of one generation, in order: all of them, or as many as `limit` and `max_bytes` (of
    /// [`StoredMessage::wire_size`]) allow, at least one. Reads only a little past what it returns.
    async fn read_run(
        &self,
        pk: &str,
        generation: &str,
        (from, to): (u64, u64),
        limit: usize,
        max_bytes: usize,
    ) -> Result<Run, StoreError> {
        let mut run = Run {
            messages: Vec::new(),
            next: from,
            whole: true,
        };
        if from >= to {
            return Ok(run);
        }
        let mut assembly = Assembly::default();
        let mut bytes = 0usize;
        let mut stopped = false;
        let mut start: Option<Item> = None;
        'pages: loop {
            let wanted = limit.saturating_sub(run.messages.len()).clamp(1, 1000);
            let out = self
                .messages_query(pk, generation, (from, to))
                .limit(wanted as i32)
                .set_exclusive_start_key(start.take())
                .send()
                .instrument(tracing::info_span!("store.query"))
                .await
                .map_err(failed)?;
            for item in out.items() {
                let Some((seq, message)) = assembly.push(item, generation) else {
                    continue;
                };
                if seq != run.next {
                    // A message is missing: the generation is being deleted under a replace.
                    run.whole = false;
                    break 'pages;
                }
                let size = message.wire_size();
                if !run.messages.is_empty() && bytes + size > max_bytes {
                    stopped = true;
                    break 'pages;
                }
                bytes += size;
                run.messages.push(message);
                run.next += 1;
                if run.messages.len() >= limit {
                    stopped = true;
                    break 'pages;
                }
            }
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => break,
            }
        }
        if !stopped && run.next < to {
            run.whole = false;
        }
        Ok(run)
    }

    /// A consistent query of the items of messages `from..to` of one generation, their continuations included.
    fn messages_query(
        &self,
        pk: &str,
        generation: &str,
        (from, to): (u64, u64),
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :last")
            .expression_attribute_names("#pk", PARTITION_KEY)
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":first", s(message_sk(generation, from)))
            .expression_attribute_values(":last", s(message_end_sk(generation, to - 1)))
            .consistent_read(true)
    }

    /// Writes `puts` and then `commit`, atomically when they fit one transaction. Larger writes go in transactions
    /// that each check the chat is still at `guard` (its version, or its absence), so nothing lands unless the
    /// commit can; items a failed write left beyond the committed messages are never read and are overwritten.
    async fn write(
        &self,
        puts: Vec<Item>,
        guard: ConditionCheck,
        commit: TransactWriteItem,
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
        let mut commit = Some(commit);
        for (i, chunk) in chunks.into_iter().enumerate() {
            let is_commit = i == last;
            let mut items: Vec<TransactWriteItem> = chunk.into_iter().map(put).collect();
            items.push(if is_commit {
                commit.take().expect("one commit, in the last transaction")
            } else {
                TransactWriteItem::builder()
                    .condition_check(guard.clone())
                    .build()
            });
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

    /// The update that makes new messages visible: count, generation, version, the write's token, and what the
    /// list shows.
    fn commit_update(&self, owner: &str, meta: &Meta, change: Change) -> TransactWriteItem {
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
            .key(SORT_KEY, s("META"))
            .condition_expression("version = :v")
            .expression_attribute_names("#lsk", LIST_SORT_KEY)
            .expression_attribute_names("#writes", "writes")
            .expression_attribute_values(":count", n(count))
            .expression_attribute_values(":gen", s(generation))
            .expression_attribute_values(":next", n(meta.version + 1))
            .expression_attribute_values(":v", n(meta.version))
            .expression_attribute_values(":now", s(now))
            .expression_attribute_values(":last", s(last_message))
            .expression_attribute_values(":lsk", s(format!("{now}#{}", meta.record.id)))
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
                .instrument(tracing::info_span!("store.query"))
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

    /// Writes `messages` as the chat's whole content in a new generation and switches to it in one step, as the
    /// write `token`; `None` when another write got there first (this attempt's items are removed again).
    async fn rewrite(
        &self,
        owner: &str,
        meta: &Meta,
        messages: &[StoredMessage],
        now: &str,
        token: &str,
        spent: Option<&UsageTotals>,
    ) -> Result<Option<ChatRecord>, StoreError> {
        let pk = chat_pk(owner, &meta.record.id);
        let generation = new_token();
        let puts = messages_items(&pk, &generation, 0, messages, meta.expires_at);
        let last_message = messages
            .last()
            .map(|m| preview(&m.content))
            .unwrap_or_default();
        let count = messages.len() as u64;
        let commit = self.commit_update(
            owner,
            meta,
            Change {
                generation: &generation,
                count,
                last_message: &last_message,
                now,
                token,
                spent,
                history_tokens: Some(tokens_of(messages)),
            },
        );
        let old = format!("MSG#{}#", meta.generation);
        let mine = format!("MSG#{generation}#");
        let failure = match self
            .write(puts, self.version_guard(&pk, meta.version), commit)
            .await
        {
            Ok(()) => {
                self.delete_messages(&pk, &old).await;
                return Ok(Some(spending(
                    ChatRecord {
                        last_updated: now.to_string(),
                        last_message,
                        message_count: count,
                        ..meta.record.clone()
                    },
                    spent,
                )));
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
}

/// The position of the next page of a chat's messages, as an opaque string: the chat, its generation, the next
/// message and where the pages end (the chat's length when the first page was read).
fn encode_message_cursor(chat_id: &str, generation: &str, next: u64, end: u64) -> String {
    let value =
        serde_json::json!({"chat": chat_id, "generation": generation, "next": next, "end": end});
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Reads a message cursor back: the range it leaves to read. One of another chat, of a chat replaced since, or made
/// up is refused.
fn decode_message_cursor(
    cursor: &str,
    chat_id: &str,
    meta: &Meta,
) -> Result<(u64, u64), StoreError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::InvalidCursor)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)?;
    let text = |name: &str| value.get(name).and_then(|v| v.as_str());
    let number = |name: &str| value.get(name).and_then(|v| v.as_u64());
    match (
        text("chat"),
        text("generation"),
        number("next"),
        number("end"),
    ) {
        (Some(chat), Some(generation), Some(next), Some(end))
            if chat == chat_id
                && generation == meta.generation
                && next < end
                && end <= meta.record.message_count =>
        {
            Ok((next, end))
        }
        _ => Err(StoreError::InvalidCursor),
    }
}

impl SessionStore for DynamoStore {
    /// The chat item and its messages in one `Query` (they share the partition key; the chat item, `META`, sorts
    /// before the messages, `MSG#…`), paged only past DynamoDB's 1 MB a page.
    async fn load(
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
    async fn load_for_turn(
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

    async fn append_after(
        &self,
        owner: &str,
        chat_id: &str,
        mark: Option<&ReadMark>,
        messages: &[StoredMessage],
        spent: &UsageTotals,
    ) -> Result<ChatRecord, StoreError> {
        let read = mark.and_then(|m| m.get::<Meta>()).cloned();
        self.append_as_of(owner, chat_id, read, messages, Some(spent))
            .await
    }

    async fn load_page(
        &self,
        owner: &str,
        chat_id: &str,
        cursor: Option<&str>,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Page<StoredMessage>, StoreError> {
        let pk = chat_pk(owner, chat_id);
        for _ in 0..10 {
            let meta = self.read_meta(owner, chat_id).await?;
            let (from, end) = match cursor {
                None => (0, meta.record.message_count),
                Some(cursor) => decode_message_cursor(cursor, chat_id, &meta)?,
            };
            let run = self
                .read_run(&pk, &meta.generation, (from, end), limit.max(1), max_bytes)
                .await?;
            // Replaced while being read: the first page starts again; a later page's cursor is refused next time.
            if !run.whole {
                continue;
            }
            let next_cursor = (run.next < end)
                .then(|| encode_message_cursor(chat_id, &meta.generation, run.next, end));
            return Ok(Page {
                items: run.messages,
                next_cursor,
            });
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
        let generation = new_token();
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
            ("writes".to_string(), AttributeValue::L(vec![s(&token)])),
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
        meta.insert(HISTORY_TOKENS.into(), n(tokens_of(messages)));
        meta.extend(
            usage_attributes(&record.usage)
                .into_iter()
                .map(|(name, value)| (name.to_string(), value)),
        );
        let puts = messages_items(&pk, &generation, 0, messages, expires_at);
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

    async fn append(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        self.append_as_of(owner, chat_id, None, messages, None)
            .await
    }

    async fn replace(
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
            .instrument(tracing::info_span!("store.transact_write_items"))
            .await;
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
                .instrument(tracing::info_span!("store.query"))
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

impl DynamoStore {
    /// Appends `messages` as of the chat item `read` (a turn's own read), or as of a fresh read of it. Only when
    /// the write loses a race (or the messages need a rewrite of the whole chat) is the chat item read again.
    async fn append_as_of(
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

    /// The chat item of `pk` and the messages it counts, from one query (paged past 1 MB); `None` when the
    /// messages it counts were not all there (see [`SessionStore::load_for_turn`]).
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
            for item in out.items() {
                let Some(meta) = &meta else {
                    // The chat item sorts first; without it there is no chat (only what a delete left behind).
                    if get_s(item, SORT_KEY).as_deref() != Some("META") || expired(item) {
                        return Err(StoreError::NotFound);
                    }
                    meta = Some(meta_of(item)?);
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
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() && !done => start = Some(key.clone()),
                _ => break,
            }
        }
        let Some(meta) = meta else {
            return Err(StoreError::NotFound);
        };
        Ok((messages.len() as u64 == meta.record.message_count).then_some((meta, messages)))
    }

    /// The newest messages of the chat `meta` describes that fit `budget` (always the newest), oldest first, read
    /// backwards in pages sized by the chat's estimated tokens (then doubling); `None` for the messages when one is missing (its generation is being
    /// deleted under a replace).
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
            for item in out.items() {
                let Some((seq, part)) =
                    get_s(item, SORT_KEY).and_then(|sk| position(&sk, generation))
                else {
                    continue;
                };
                if part > 0 {
                    parts.push(item.clone());
                    continue;
                }
                let mut assembly = Assembly::default();
                let whole = std::iter::once(item)
                    .chain(parts.iter().rev())
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
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
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

    /// Every message of the chat's current generation (for a write that rewrites it whole).
    async fn load_generation(
        &self,
        pk: &str,
        meta: &Meta,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let run = self
            .read_run(
                pk,
                &meta.generation,
                (0, meta.record.message_count),
                usize::MAX,
                usize::MAX,
            )
            .await?;
        if run.whole {
            Ok(run.messages)
        } else {
            // Replaced meanwhile: this write's version check fails; it tries again from a new read.
            Err(StoreError::Contended)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_between_characters_and_joins_back() {
        let text = "aé🦀".repeat(200_000); // 1.4 MB, characters of 1, 2 and 4 bytes
        let parts = split_parts(&text);
        assert_eq!(parts.len(), text.len().div_ceil(PART_BYTES));
        assert!(parts.iter().all(|p| p.len() <= PART_BYTES && !p.is_empty()));
        assert_eq!(parts.concat(), text);
        assert_eq!(split_parts(""), [""]);
    }

    #[test]
    fn parts_sort_between_their_message_and_the_next() {
        let mut keys = vec![
            message_sk("g", 2),
            part_sk("g", 1, 2),
            message_sk("g", 10),
            part_sk("g", 1, 1),
            message_sk("g", 1),
            message_end_sk("g", 1),
        ];
        keys.sort();
        assert_eq!(
            keys,
            [
                message_sk("g", 1),
                part_sk("g", 1, 1),
                part_sk("g", 1, 2),
                message_end_sk("g", 1),
                message_sk("g", 2),
                message_sk("g", 10),
            ]
        );
        assert_eq!(position(&part_sk("g", 7, 3), "g"), Some((7, 3)));
        assert_eq!(position(&message_sk("g", 7), "g"), Some((7, 0)));
        assert_eq!(position(&message_sk("h", 7), "g"), None);
    }

    #[test]
    fn a_long_message_is_items_that_assemble_back_whole() {
        let message = StoredMessage {
            id: "m".into(),
            role: Role::Assistant,
            content: "x".repeat(PART_BYTES * 2 + 10),
            timestamp: "10:15 AM".into(),
            agent_identifier: None,
            agent_name: Some("Analyst".into()),
            files: Vec::new(),
            tools: Vec::new(),
        };
        let items = message_items("pk", "g", 4, &message, Some(9));
        assert_eq!(items.len(), 3);
        assert!(items.iter().all(|i| item_size(i) < 400 * 1024));
        let mut assembly = Assembly::default();
        assert_eq!(assembly.push(&items[0], "g"), None);
        assert_eq!(assembly.push(&items[1], "g"), None);
        assert_eq!(assembly.push(&items[2], "g"), Some((4, message.clone())));
        // A continuation without its message (the message's item already deleted) makes nothing.
        let mut partial = Assembly::default();
        assert_eq!(partial.push(&items[1], "g"), None);
        assert_eq!(partial.push(&items[2], "g"), None);
    }

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

    #[test]
    fn the_chat_keeps_its_latest_write_tokens() {
        let mut meta = Meta {
            record: ChatRecord {
                id: "c".into(),
                mode: ChatMode::Standard,
                title: String::new(),
                created_at: String::new(),
                last_updated: String::new(),
                last_message: String::new(),
                message_count: 0,
                usage: Default::default(),
            },
            generation: "g".into(),
            version: 0,
            expires_at: None,
            writes: Vec::new(),
            history_tokens: None,
        };
        for i in 0..100 {
            let token = format!("t{i}");
            let AttributeValue::L(list) = writes_after(&meta, &token) else {
                panic!("a list")
            };
            meta.writes = list.iter().map(|v| v.as_s().unwrap().clone()).collect();
        }
        assert_eq!(meta.writes.len(), WRITES_KEPT);
        assert_eq!(meta.writes.last().unwrap(), "t99");
        assert_eq!(meta.writes[0], format!("t{}", 100 - WRITES_KEPT));
    }
}
