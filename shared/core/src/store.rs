//! The store port: chats and their messages, per owner, as the core needs them.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{ChatMode, Role};

/// Whether `id` is a chat id this backend makes: 32 lowercase hex characters (128 random bits). Anything else names
/// no chat; checking it keeps ids from reaching into another key.
pub fn is_chat_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How long the reasoning of an answer that ended in the client's tool calls is kept for its continuation.
pub const REASONING_KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// Until when (unix seconds) reasoning kept at `now` is kept: [`REASONING_KEPT_FOR`] later.
pub fn reasoning_kept_until(now: i64) -> i64 {
    now + REASONING_KEPT_FOR.as_secs() as i64
}

/// Whether what a store keeps until `expires_at` (unix seconds: kept reasoning, a kept response) is past its time
/// at `now`. Stores delete expired items late: one past its time is gone all the same.
pub fn is_expired(expires_at: i64, now: i64) -> bool {
    expires_at <= now
}

/// Whether a store's write of a turn made its last settlement ([`crate::UsageCharge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Charged {
    /// With the turn, in the same write: the turn must not be settled again.
    WithTurn,
    /// Not settled (a store without the counters, or a write too large to carry them): the caller settles the turn
    /// through its ledger.
    No,
}

/// A message as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub id: String,
    pub role: Role,
    pub content: String,
    /// As the Chat UI shows it (`10:15 AM`, UTC) when the backend wrote it; as the client sent it when saved
    /// through `PUT /chat-history/{id}`.
    pub timestamp: String,
    pub agent_identifier: Option<String>,
    pub agent_name: Option<String>,
    /// The files the message carried, kept in the owner's files.
    pub files: Vec<crate::StoredFile>,
    /// The tools an answer called, with their results, in order: replayed to the model when the chat continues.
    pub tools: Vec<crate::ToolExchange>,
}

impl StoredMessage {
    /// A message of `role` saying `content`, under `id`, written at `timestamp`: no agent's, with no files and no
    /// tools (the setters below add them).
    pub fn new(
        id: impl Into<String>,
        role: Role,
        content: impl Into<String>,
        timestamp: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            role,
            content: content.into(),
            timestamp: timestamp.into(),
            agent_identifier: None,
            agent_name: None,
            files: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// The same message, said by the agent of this identifier.
    pub fn with_agent_identifier(mut self, identifier: Option<String>) -> Self {
        self.agent_identifier = identifier;
        self
    }

    /// The same message, said by the agent of this name.
    pub fn with_agent_name(mut self, name: Option<String>) -> Self {
        self.agent_name = name;
        self
    }

    /// The same message, carrying these files.
    pub fn with_files(mut self, files: Vec<crate::StoredFile>) -> Self {
        self.files = files;
        self
    }

    /// The same message, with the tools its answer called.
    pub fn with_tools(mut self, tools: Vec<crate::ToolExchange>) -> Self {
        self.tools = tools;
        self
    }

    /// An upper bound of this message's size in a buffered answer: as JSON, and again as that JSON sits, escaped
    /// once more, in the Lambda response that carries it (whose size Lambda limits), so that a page of messages
    /// can be kept under that limit.
    pub fn wire_size(&self) -> usize {
        // Field names, quotes and punctuation, escaped.
        const FIELDS: usize = 256;
        [
            Some(self.id.as_str()),
            Some(self.content.as_str()),
            Some(self.timestamp.as_str()),
            self.agent_identifier.as_deref(),
            self.agent_name.as_deref(),
        ]
        .into_iter()
        .flatten()
        .map(twice_escaped_size)
        .sum::<usize>()
            + FIELDS
            + self
                .files
                .iter()
                .map(|f| {
                    twice_escaped_size(&f.name) + twice_escaped_size(&f.content_type) + FILE_FIELDS
                })
                .sum::<usize>()
            + self
                .tools
                .iter()
                .map(|t| {
                    twice_escaped_size(&t.input.to_string())
                        + twice_escaped_size(&t.output)
                        + twice_escaped_size(&t.name)
                        + FIELDS
                })
                .sum::<usize>()
    }
}

/// A listed file's field names, its size and its presigned URL (which holds a signature and a session token).
const FILE_FIELDS: usize = 3072;

/// The length of `text` escaped as a JSON string and then once more: `"` and `\\` become four bytes (`\\\"`),
/// the short control escapes three (`\\n`), other control characters seven (`\\u0001`), everything else its
/// UTF-8 bytes, as serde_json writes them.
fn twice_escaped_size(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' => 4,
            b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 3,
            0..0x20 => 7,
            _ => 1,
        })
        .sum()
}

/// How long the store may take: to connect, for one attempt of a call, and for a whole call with its retries. A
/// store that does not answer within them is [`StoreError::Unavailable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreTimeouts {
    pub connect: Duration,
    pub attempt: Duration,
    pub operation: Duration,
}

impl Default for StoreTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_millis(1000),
            attempt: Duration::from_millis(2000),
            operation: Duration::from_millis(5000),
        }
    }
}

/// What the history list shows of a chat.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRecord {
    pub id: String,
    pub mode: ChatMode,
    pub title: String,
    pub created_at: String,
    pub last_updated: String,
    pub last_message: String,
    pub message_count: u64,
    /// Every turn's tokens and cost, added up.
    pub usage: crate::UsageTotals,
}

/// One page of a list, and the opaque cursor of the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such chat for this owner (whether it does not exist or is someone else's).
    #[error("no such chat")]
    NotFound,
    #[error("the chat already exists")]
    AlreadyExists,
    #[error("the cursor is not one this list gave")]
    InvalidCursor,
    #[error("too many concurrent writes to one chat")]
    Contended,
    /// The store did not answer in time, refused the connection, or answered that it cannot serve now: trying
    /// again later may work.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("the store failed: {0}")]
    Failed(String),
}

/// Where a chat stood when a store read it for a turn: the store's own, opaque to the core. The turn hands it back
/// with its write ([`SessionStore::append_after`]), so that the store need not read the chat again before writing
/// (it reads again only when another write got there first).
#[derive(Clone)]
pub struct ReadMark(Arc<dyn Any + Send + Sync>);

impl ReadMark {
    pub fn new<T: Any + Send + Sync>(mark: T) -> Self {
        Self(Arc::new(mark))
    }

    /// The store's own mark, if this is one of its kind.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for ReadMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadMark(..)")
    }
}

impl PartialEq for ReadMark {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A chat as a turn reads it: its newest messages (all of them, or as many as its budget took), with the store's
/// mark of that read.
#[derive(Debug, Clone)]
pub struct LoadedChat {
    pub record: ChatRecord,
    /// The newest messages, oldest first: the last `messages.len()` of the chat's `record.message_count`.
    pub messages: Vec<StoredMessage>,
    pub mark: Option<ReadMark>,
    /// How many items the store read for this: what the read cost, for the turn to show.
    pub items_read: u64,
}

/// What a turn writes after its read ([`SessionStore::append_after`]): the read's mark, the turn's messages, and
/// the tokens and cost it spent.
#[derive(Debug, Clone, Copy)]
pub struct TurnWrite<'a> {
    pub mark: Option<&'a ReadMark>,
    pub messages: &'a [StoredMessage],
    pub spent: &'a crate::UsageTotals,
}

/// Which page of a chat's messages to read ([`SessionStore::load_page`]): from `cursor` (the start when `None`),
/// at most `limit`, and as many as fit `max_bytes` ([`StoredMessage::wire_size`]) but at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest<'a> {
    pub cursor: Option<&'a str>,
    pub limit: usize,
    pub max_bytes: usize,
}

impl<'a> PageRequest<'a> {
    /// From `cursor`, at most `limit` messages, with no bound on their size.
    pub fn unbounded(cursor: Option<&'a str>, limit: usize) -> Self {
        Self {
            cursor,
            limit,
            max_bytes: usize::MAX,
        }
    }
}

/// Which page of an owner's chats to list ([`SessionStore::list`]): those of `mode`, at most `limit`, from `cursor`
/// (the first page when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRequest<'a> {
    pub mode: ChatMode,
    pub limit: usize,
    pub cursor: Option<&'a str>,
}

impl ListRequest<'_> {
    /// The first `limit` chats of `mode`.
    pub fn first(mode: ChatMode, limit: usize) -> Self {
        Self {
            mode,
            limit,
            cursor: None,
        }
    }
}

/// Where chats live. Every operation is scoped to an owner: another owner's chat is [`StoreError::NotFound`].
pub trait SessionStore: Send + Sync {
    /// A chat and all its messages, as one consistent snapshot.
    fn load(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> impl Future<Output = Result<(ChatRecord, Vec<StoredMessage>), StoreError>> + Send;

    /// The chat and its newest messages that fit `budget` (always the newest one), for a turn that will append to
    /// it, with the mark [`SessionStore::append_after`] takes. The store reads newest first and stops when the
    /// budget is full, so that a turn's reads do not grow with the chat.
    fn load_for_turn(
        &self,
        owner: &str,
        chat_id: &str,
        budget: crate::HistoryBudget,
    ) -> impl Future<Output = Result<LoadedChat, StoreError>> + Send;

    /// Adds a turn's `turn.messages` at the end of the chat, and its tokens and cost (`turn.spent`) to the chat's
    /// totals, all or nothing, after the read that left `turn.mark`: the store may write at once, as of that read,
    /// and read the chat again only when another write got there first.
    fn append_after(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

    /// [`SessionStore::append_after`], also adding the turn's `charge` to its owner's usage counters in the same
    /// write when this store keeps them (and the write has room): so that a stored turn is one write, counted
    /// exactly when it lands. The default charges nothing ([`Charged::No`]), and the caller counts the turn
    /// through its ledger.
    fn append_after_charging(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
        charge: &crate::UsageCharge<'_>,
    ) -> impl Future<Output = Result<(ChatRecord, Charged), StoreError>> + Send {
        let _ = charge;
        async move {
            let record = self.append_after(owner, chat_id, turn).await?;
            Ok((record, Charged::No))
        }
    }

    /// Keeps the signed reasoning `blocks` of an answer of `owner`'s that ended in the client's tool calls, under
    /// the first call's id, for a day ([`REASONING_KEPT_FOR`]): a stateless client sends the calls back without
    /// it, and a reasoning model wants it back with them.
    fn keep_reasoning(
        &self,
        owner: &str,
        call_id: &str,
        blocks: &[crate::ReasoningBlock],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The reasoning [`SessionStore::keep_reasoning`] kept for `owner` under `call_id`; `None` when there is none
    /// (never kept, another owner's, or expired).
    fn kept_reasoning(
        &self,
        owner: &str,
        call_id: &str,
    ) -> impl Future<Output = Result<Option<Vec<crate::ReasoningBlock>>, StoreError>> + Send;

    /// Creates a chat holding `messages`, with `chat.usage` as its totals so far.
    fn create(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

    /// [`SessionStore::create`], also adding the first turn's `charge` to its owner's usage counters in the same
    /// write when this store keeps them (see [`SessionStore::append_after_charging`]). The default charges nothing.
    fn create_charging(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
        charge: &crate::UsageCharge<'_>,
    ) -> impl Future<Output = Result<(ChatRecord, Charged), StoreError>> + Send {
        let _ = charge;
        async move { Ok((self.create(owner, chat, messages).await?, Charged::No)) }
    }

    /// Adds `messages` at the end of the chat, all or none, whatever else is written at the same time.
    fn append(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

    /// Replaces every message of the chat at once, as readers see it.
    fn replace(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

    /// One page of a chat's messages, oldest first, as `page` asks ([`PageRequest`]); with the cursor of the next
    /// page when there is more. Pages follow the chat as it was when the first one was read; a cursor of another
    /// chat, or of a chat replaced since, is [`StoreError::InvalidCursor`].
    fn load_page(
        &self,
        owner: &str,
        chat_id: &str,
        page: PageRequest<'_>,
    ) -> impl Future<Output = Result<Page<StoredMessage>, StoreError>> + Send;

    fn delete(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the chat the title `title` (already checked by the caller) and changes nothing else: not its messages,
    /// its totals, nor its `last_updated`, so that it keeps its place in the list (a rename is not activity).
    /// Returns the chat as renamed. Whatever turns write to the chat at the same time land whole, and the title
    /// stays.
    fn rename(
        &self,
        owner: &str,
        chat_id: &str,
        title: &str,
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

    /// The owner's chats as `page` asks ([`ListRequest`]), most recently updated first.
    fn list(
        &self,
        owner: &str,
        page: ListRequest<'_>,
    ) -> impl Future<Output = Result<Page<ChatRecord>, StoreError>> + Send;
}

/// A message of `role` saying `text`, with the id `m`, the time `t` and nothing else: what the crate's unit tests
/// store.
#[cfg(test)]
pub(crate) fn stored(role: Role, text: &str) -> StoredMessage {
    StoredMessage::new("m", role, text, "t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_wire_size_bounds_its_json_twice_escaped() {
        let message = StoredMessage::new(
            "m\"1",
            Role::Assistant,
            "line\nbreak \u{1} tab\t quote\" back\\ é 🦀".repeat(50),
            "10:15 AM",
        )
        .with_agent_identifier(Some("Analyst".into()));
        let json = serde_json::json!({
            "id": message.id, "content": message.content, "role": "assistant",
            "timestamp": message.timestamp, "agentIdentifier": message.agent_identifier,
        })
        .to_string();
        let wire = serde_json::to_string(&json).unwrap();
        assert!(
            wire.len() <= message.wire_size(),
            "{} > {}",
            wire.len(),
            message.wire_size()
        );
        // The escapes are counted, not guessed: the bound is within the fields' room of the real size.
        assert!(message.wire_size() - wire.len() < 256);
    }
}
