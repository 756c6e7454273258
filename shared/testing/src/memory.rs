//! [`InMemoryStore`]: the store port in memory, with the semantics of the DynamoDB store (owner scoping, chat ids,
//! atomic writes, pages and cursors, the chat's bookkeeping), and faults to inject.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use chat_core::{
    ChatMode, ChatRecord, HistoryBudget, ListRequest, LoadedChat, Page, PageRequest, SessionStore,
    StoreError, StoredMessage, TurnWrite, UsageTotals, is_chat_id, rfc3339_millis,
};
use serde_json::{Value, json};

/// How much of the last message the history list shows (as the DynamoDB store keeps it).
const PREVIEW_CHARS: usize = 200;

/// The store's operations, to aim an injected fault at one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    Load,
    LoadPage,
    Create,
    Append,
    Replace,
    Delete,
    Rename,
    List,
    KeepReasoning,
    KeptReasoning,
}

impl StoreOp {
    fn writes(self) -> bool {
        matches!(
            self,
            StoreOp::Create
                | StoreOp::Append
                | StoreOp::Replace
                | StoreOp::Delete
                | StoreOp::Rename
                | StoreOp::KeepReasoning
        )
    }
}

/// Which operations a fault waits for.
#[derive(Debug, Clone, Copy)]
enum Target {
    Any,
    Writes,
    Op(StoreOp),
}

impl Target {
    fn matches(self, op: StoreOp) -> bool {
        match self {
            Target::Any => true,
            Target::Writes => op.writes(),
            Target::Op(o) => o == op,
        }
    }
}

struct Chat {
    record: ChatRecord,
    messages: Vec<StoredMessage>,
    /// New for every write that replaces the messages (unique in the store), so that a page cursor of the chat as it
    /// was is refused afterwards, as is one of another chat.
    generation: u64,
}

#[derive(Default)]
struct State {
    /// Chats by (owner, chat id).
    chats: BTreeMap<(String, String), Chat>,
    generations: u64,
    faults: VecDeque<(Target, StoreError)>,
    calls: Vec<StoreOp>,
    /// Reasoning kept for tool calls, by (owner, first call id): its blocks, and until when (Unix seconds).
    reasoning: BTreeMap<(String, String), (Vec<chat_core::ReasoningBlock>, i64)>,
}

/// Chats and their messages in memory. Clones share the same chats, so a test keeps one to look at what a service
/// holding another stored.
#[derive(Clone, Default)]
pub struct InMemoryStore {
    state: Arc<Mutex<State>>,
}

/// Makes `record` say it holds `messages` (and no other): their count, and the last one's preview.
fn holds(record: &mut ChatRecord, messages: &[StoredMessage]) {
    record.last_message = messages
        .last()
        .map(|m| preview(&m.content))
        .unwrap_or_default();
    record.message_count = messages.len() as u64;
}

fn preview(content: &str) -> String {
    content.chars().take(PREVIEW_CHARS).collect()
}

fn now_millis() -> String {
    rfc3339_millis(time::OffsetDateTime::now_utc())
}

fn mode_name(mode: ChatMode) -> &'static str {
    match mode {
        ChatMode::Standard => "standard",
        ChatMode::MultiAgent => "multiAgent",
    }
}

/// The key a list is sorted by, newest first (the DynamoDB store's list index: `lastUpdated#chatId`).
fn list_key(record: &ChatRecord) -> String {
    format!("{}#{}", record.last_updated, record.id)
}

/// An opaque cursor: JSON, in hex.
fn encode(value: &Value) -> String {
    value
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode(cursor: &str) -> Result<Value, StoreError> {
    if !cursor.len().is_multiple_of(2) || !cursor.is_ascii() {
        return Err(StoreError::InvalidCursor);
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| StoreError::InvalidCursor)?;
    serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)
}

impl InMemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next operation, whichever it is, fails with `error` and changes nothing.
    pub fn fail_next(&self, error: StoreError) {
        self.lock().faults.push_back((Target::Any, error));
    }

    /// The next write (create, append, replace, delete or rename) fails with `error` and changes nothing; reads before it
    /// answer as usual.
    pub fn fail_next_write(&self, error: StoreError) {
        self.lock().faults.push_back((Target::Writes, error));
    }

    /// The next call of `op` fails with `error` and changes nothing.
    pub fn fail_next_on(&self, op: StoreOp, error: StoreError) {
        self.lock().faults.push_back((Target::Op(op), error));
    }

    /// Every operation called so far, in order (failed ones included).
    pub fn calls(&self) -> Vec<StoreOp> {
        self.lock().calls.clone()
    }

    /// The writes called so far.
    pub fn writes(&self) -> usize {
        self.lock().calls.iter().filter(|op| op.writes()).count()
    }

    /// How many chats the store holds, of every owner.
    pub fn chat_count(&self) -> usize {
        self.lock().chats.len()
    }

    /// The chats of `owner` (any mode), newest first.
    pub fn chats_of(&self, owner: &str) -> Vec<ChatRecord> {
        let state = self.lock();
        let mut chats: Vec<ChatRecord> = state
            .chats
            .iter()
            .filter(|((o, _), _)| o == owner)
            .map(|(_, c)| c.record.clone())
            .collect();
        chats.sort_by_key(|c| std::cmp::Reverse(list_key(c)));
        chats
    }

    /// Records the call and takes the fault aimed at it, if any.
    fn begin(&self, op: StoreOp) -> Result<MutexGuard<'_, State>, StoreError> {
        let mut state = self.lock();
        state.calls.push(op);
        if let Some(at) = state.faults.iter().position(|(t, _)| t.matches(op)) {
            let (_, error) = state
                .faults
                .remove(at)
                .expect("the position is in the queue");
            return Err(error);
        }
        Ok(state)
    }

    fn next_generation(state: &mut State) -> u64 {
        state.generations += 1;
        state.generations
    }

    /// Adds `messages` at the end of the chat and `spent` to its totals (an append, or a turn's).
    fn appended(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
        spent: &UsageTotals,
    ) -> Result<ChatRecord, StoreError> {
        let mut state = self.begin(StoreOp::Append)?;
        let chat = state.chat_mut(owner, chat_id)?;
        chat.messages.extend_from_slice(messages);
        if let Some(last) = messages.last() {
            chat.record.last_message = preview(&last.content);
        }
        chat.record.message_count = chat.messages.len() as u64;
        chat.record.last_updated = now_millis();
        chat.record.usage.add(spent);
        Ok(chat.record.clone())
    }
}

impl State {
    fn chat_mut(&mut self, owner: &str, chat_id: &str) -> Result<&mut Chat, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        self.chats
            .get_mut(&(owner.to_string(), chat_id.to_string()))
            .ok_or(StoreError::NotFound)
    }
}

impl InMemoryStore {
    /// Makes the reasoning kept for `owner`'s call `call_id` expire now (as DynamoDB's TTL would a day later).
    pub fn expire_reasoning(&self, owner: &str, call_id: &str) {
        if let Some(kept) = self
            .lock()
            .reasoning
            .get_mut(&(owner.to_string(), call_id.to_string()))
        {
            kept.1 = 0;
        }
    }
}

fn now_seconds() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl SessionStore for InMemoryStore {
    async fn keep_reasoning(
        &self,
        owner: &str,
        call_id: &str,
        blocks: &[chat_core::ReasoningBlock],
    ) -> Result<(), StoreError> {
        let mut state = self.begin(StoreOp::KeepReasoning)?;
        let until = chat_core::reasoning_kept_until(now_seconds());
        state.reasoning.insert(
            (owner.to_string(), call_id.to_string()),
            (blocks.to_vec(), until),
        );
        Ok(())
    }

    async fn kept_reasoning(
        &self,
        owner: &str,
        call_id: &str,
    ) -> Result<Option<Vec<chat_core::ReasoningBlock>>, StoreError> {
        let state = self.begin(StoreOp::KeptReasoning)?;
        Ok(state
            .reasoning
            .get(&(owner.to_string(), call_id.to_string()))
            .filter(|(_, until)| !chat_core::is_expired(*until, now_seconds()))
            .map(|(blocks, _)| blocks.clone()))
    }

    async fn load(
        &self,
        owner: &str,
        chat_id: &str,
    ) -> Result<(ChatRecord, Vec<StoredMessage>), StoreError> {
        let mut state = self.begin(StoreOp::Load)?;
        let chat = state.chat_mut(owner, chat_id)?;
        Ok((chat.record.clone(), chat.messages.clone()))
    }

    async fn create(
        &self,
        owner: &str,
        chat: &ChatRecord,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let mut state = self.begin(StoreOp::Create)?;
        if !is_chat_id(&chat.id) {
            return Err(StoreError::Failed(format!(
                "{:?} is not a chat id",
                chat.id
            )));
        }
        let key = (owner.to_string(), chat.id.clone());
        if state.chats.contains_key(&key) {
            return Err(StoreError::AlreadyExists);
        }
        let mut record = chat.clone();
        holds(&mut record, messages);
        let generation = Self::next_generation(&mut state);
        state.chats.insert(
            key,
            Chat {
                record: record.clone(),
                messages: messages.to_vec(),
                generation,
            },
        );
        Ok(record)
    }

    /// The newest messages the budget takes; "items read" counts the chat and each message looked at, as a store
    /// reading newest first would.
    async fn load_for_turn(
        &self,
        owner: &str,
        chat_id: &str,
        budget: HistoryBudget,
    ) -> Result<LoadedChat, StoreError> {
        let mut state = self.begin(StoreOp::Load)?;
        let chat = state.chat_mut(owner, chat_id)?;
        let start = budget.newest(&chat.messages);
        Ok(LoadedChat {
            record: chat.record.clone(),
            messages: chat.messages[start..].to_vec(),
            mark: None,
            items_read: 1 + (chat.messages.len() - start) as u64 + u64::from(start > 0),
        })
    }

    async fn append_after(
        &self,
        owner: &str,
        chat_id: &str,
        turn: TurnWrite<'_>,
    ) -> Result<ChatRecord, StoreError> {
        self.appended(owner, chat_id, turn.messages, turn.spent)
    }

    async fn append(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        self.appended(owner, chat_id, messages, &UsageTotals::default())
    }

    async fn replace(
        &self,
        owner: &str,
        chat_id: &str,
        messages: &[StoredMessage],
    ) -> Result<ChatRecord, StoreError> {
        let mut state = self.begin(StoreOp::Replace)?;
        state.chat_mut(owner, chat_id)?;
        let generation = Self::next_generation(&mut state);
        let chat = state.chat_mut(owner, chat_id)?;
        chat.messages = messages.to_vec();
        chat.generation = generation;
        holds(&mut chat.record, messages);
        chat.record.last_updated = now_millis();
        Ok(chat.record.clone())
    }
    async fn load_page(
        &self,
        owner: &str,
        chat_id: &str,
        page: PageRequest<'_>,
    ) -> Result<Page<StoredMessage>, StoreError> {
        let PageRequest {
            cursor,
            limit,
            max_bytes,
        } = page;
        let mut state = self.begin(StoreOp::LoadPage)?;
        let chat = state.chat_mut(owner, chat_id)?;
        let count = chat.messages.len() as u64;
        let (from, end) = match cursor {
            None => (0, count),
            Some(cursor) => {
                let value = decode(cursor)?;
                let number = |name: &str| value.get(name).and_then(Value::as_u64);
                match (
                    value.get("chat").and_then(Value::as_str),
                    number("generation"),
                    number("next"),
                    number("end"),
                ) {
                    (Some(chat_of), Some(generation), Some(next), Some(end))
                        if chat_of == chat_id
                            && generation == chat.generation
                            && next < end
                            && end <= count =>
                    {
                        (next, end)
                    }
                    _ => return Err(StoreError::InvalidCursor),
                }
            }
        };
        let limit = limit.max(1);
        let mut items = Vec::new();
        let mut bytes = 0usize;
        let mut next = from;
        while next < end && items.len() < limit {
            let message = &chat.messages[next as usize];
            let size = message.wire_size();
            if !items.is_empty() && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            items.push(message.clone());
            next += 1;
        }
        let next_cursor = (next < end).then(|| {
            encode(&json!({
                "chat": chat_id, "generation": chat.generation, "next": next, "end": end,
            }))
        });
        Ok(Page { items, next_cursor })
    }

    async fn delete(&self, owner: &str, chat_id: &str) -> Result<(), StoreError> {
        let mut state = self.begin(StoreOp::Delete)?;
        state.chat_mut(owner, chat_id)?;
        state
            .chats
            .remove(&(owner.to_string(), chat_id.to_string()));
        Ok(())
    }

    /// Only the title changes: the chat keeps its `last_updated`, and so its place in the list.
    async fn rename(
        &self,
        owner: &str,
        chat_id: &str,
        title: &str,
    ) -> Result<ChatRecord, StoreError> {
        let mut state = self.begin(StoreOp::Rename)?;
        let chat = state.chat_mut(owner, chat_id)?;
        chat.record.title = title.to_string();
        Ok(chat.record.clone())
    }

    async fn list(
        &self,
        owner: &str,
        page: ListRequest<'_>,
    ) -> Result<Page<ChatRecord>, StoreError> {
        let (mode, limit, cursor) = (page.mode, page.limit, page.cursor);
        let state = self.begin(StoreOp::List)?;
        let after = match cursor {
            None => None,
            Some(cursor) => {
                let value = decode(cursor)?;
                let text = |name: &str| value.get(name).and_then(Value::as_str);
                match (text("owner"), text("mode"), text("key")) {
                    (Some(o), Some(m), Some(key)) if o == owner && m == mode_name(mode) => {
                        Some(key.to_string())
                    }
                    _ => return Err(StoreError::InvalidCursor),
                }
            }
        };
        let mut chats: Vec<&ChatRecord> = state
            .chats
            .iter()
            .filter(|((o, _), c)| o == owner && c.record.mode == mode)
            .map(|(_, c)| &c.record)
            .filter(|r| after.as_ref().is_none_or(|key| list_key(r) < *key))
            .collect();
        chats.sort_by_key(|r| std::cmp::Reverse(list_key(r)));
        let more = chats.len() > limit;
        chats.truncate(limit);
        let next_cursor = if more {
            chats.last().map(|r| {
                encode(&json!({"owner": owner, "mode": mode_name(mode), "key": list_key(r)}))
            })
        } else {
            None
        };
        Ok(Page {
            items: chats.into_iter().cloned().collect(),
            next_cursor,
        })
    }
}
