//! The store port: chats and their messages, per owner, as the core needs them.

use std::future::Future;

use chat_protocol::Role;
use chat_protocol::chat_ui::ChatMode;

/// Whether `id` is a chat id this backend makes: 32 lowercase hex characters (128 random bits). Anything else names
/// no chat; checking it keeps ids from reaching into another key.
pub fn is_chat_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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
}

/// What the history list shows of a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRecord {
    pub id: String,
    pub mode: ChatMode,
    pub title: String,
    pub created_at: String,
    pub last_updated: String,
    pub last_message: String,
    pub message_count: u64,
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
    #[error("the store failed: {0}")]
    Failed(String),
}

/// Where chats live. Every operation is scoped to an owner: another owner's chat is [`StoreError::NotFound`].
pub trait SessionStore: Send + Sync {
    /// A chat and all its messages, as one consistent snapshot.
    fn load(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> impl Future<Output = Result<(ChatRecord, Vec<StoredMessage>), StoreError>> + Send;

    /// Creates a chat holding `messages`.
    fn create(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
    ) -> impl Future<Output = Result<ChatRecord, StoreError>> + Send;

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

    fn delete(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The owner's chats of `mode`, most recently updated first.
    fn list(
        &self,
        owner: &str,
        mode: ChatMode,
        limit: usize,
        cursor: Option<&str>,
    ) -> impl Future<Output = Result<Page<ChatRecord>, StoreError>> + Send;
}
