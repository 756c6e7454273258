//! Reading a chat as a whole (the chat item and every message, in one query) and as a turn reads it (the chat item
//! and the newest messages that fit the turn's budget, in one query backwards from the chat item), each read again
//! when a write or a replace got in its way.

use chat_core::{
    ChatRecord, HistoryBudget, LoadedChat, ReadMark, StoreError, StoredMessage,
    estimate_stored_tokens, is_chat_id,
};

use super::chat::{ChatItem, Meta};
use super::keys::{
    MESSAGES_BEFORE_META, META, chat_pk, message_end_sk, message_sk, sorts_before_meta,
};
use super::messages::{Assembly, position_of};
use super::{DynamoStore, query_page};
use crate::dynamo::{Item, s};
use crate::table::{PARTITION_KEY, SORT_KEY};

/// The estimated tokens of a message, on average, that a turn's first query is sized by: most chats' messages are
/// more (a question of some tens of tokens, an answer of some hundreds), so that query holds all the budget takes;
/// a chat of shorter ones reads on, sized by the chat item's estimate of its tokens.
const FIRST_PAGE_MESSAGE_TOKENS: u64 = 64;

/// The newest messages of a chat, as a turn reads them.
struct Newest {
    /// Oldest first; `None` when one was missing.
    messages: Option<Vec<StoredMessage>>,
    items_read: u64,
}

/// A turn's first query: the chat item, and the items that sort before it, newest first.
struct Head {
    meta: Meta,
    rest: Rest,
    items_read: u64,
}

/// What a turn's first query read after the chat item.
struct Rest {
    /// Newest first: the newest messages of a generation that sorts before the chat item (and any other
    /// generation's items among them, which a rewrite has not deleted yet).
    items: Vec<Item>,
    /// Where the query stopped, when it did before its end.
    last_key: Option<Item>,
}

/// What an item read backwards did to a turn's read.
enum Step {
    More,
    /// The budget is full, or the chat's first message is in.
    Done,
    /// A message counted is not there (its generation being deleted under a replace, or a write not yet landed).
    Missing,
}

/// A turn's read of one generation's messages, newest first, until the budget is full.
struct Backwards<'a> {
    generation: &'a str,
    count: u64,
    budget: HistoryBudget,
    /// Newest first.
    messages: Vec<StoredMessage>,
    spent: u64,
    /// A message's continuations come before its own item when read backwards: they wait for it.
    parts: Vec<Item>,
    /// The number of the newest message not read yet, plus one.
    expected: u64,
}

impl<'a> Backwards<'a> {
    fn new(meta: &'a Meta, budget: HistoryBudget) -> Self {
        Backwards {
            generation: &meta.generation,
            count: meta.record.message_count,
            budget,
            messages: Vec::new(),
            spent: 0,
            parts: Vec::new(),
            expected: meta.record.message_count,
        }
    }

    /// Takes the next item read backwards. Another generation's items, and messages past the chat's count (a
    /// write it does not count yet), are not the chat's.
    fn take(&mut self, item: Item) -> Step {
        let Some((seq, part)) = position_of(&item, self.generation) else {
            return Step::More;
        };
        if seq >= self.count {
            return Step::More;
        }
        if part > 0 {
            self.parts.push(item);
            return Step::More;
        }
        let mut assembly = Assembly::default();
        let whole = std::iter::once(item)
            .chain(self.parts.drain(..).rev())
            .filter_map(|i| assembly.push(i, self.generation))
            .next();
        self.parts.clear();
        match whole {
            Some((whole_seq, message)) if whole_seq == seq && seq + 1 == self.expected => {
                let tokens = estimate_stored_tokens(&message);
                if !self.budget.takes(self.messages.len(), self.spent, tokens) {
                    return Step::Done;
                }
                self.spent += tokens;
                self.messages.push(message);
                self.expected = seq;
                if seq == 0 { Step::Done } else { Step::More }
            }
            _ => Step::Missing,
        }
    }

    /// How many items the next query reads: as many as the budget should take of the messages not read yet, from
    /// the chat's estimated tokens (all of them when they fit), and a few more for long messages' continuations; 16
    /// when the chat's size is unknown. Before any message is read, as many as the budget should take of the whole
    /// chat.
    fn page(&self, meta: &Meta) -> i32 {
        let budget = self.budget.tokens.saturating_sub(self.spent);
        match meta.history_tokens.map(|t| t.saturating_sub(self.spent)) {
            Some(tokens) if tokens <= budget => self.expected.saturating_add(8),
            Some(tokens) => {
                let share =
                    u128::from(self.expected) * u128::from(budget) / u128::from(tokens.max(1));
                (share as u64).saturating_add(8)
            }
            None => 16,
        }
        .clamp(8, 1000) as i32
    }

    /// Takes `items`, read backwards, until the read ends: `None` while it needs more, else what it read (the
    /// messages, oldest first; `None` when one it counts is missing).
    fn take_all(
        &mut self,
        items: impl IntoIterator<Item = Item>,
    ) -> Option<Option<Vec<StoredMessage>>> {
        for item in items {
            match self.take(item) {
                Step::More => {}
                Step::Done => {
                    let mut messages = std::mem::take(&mut self.messages);
                    messages.reverse();
                    return Some(Some(messages));
                }
                Step::Missing => return Some(None),
            }
        }
        None
    }
}

/// How many items a turn's first query reads (the chat item with them): what the budget takes of messages of
/// [`FIRST_PAGE_MESSAGE_TOKENS`], and a few more for long messages' continuations.
fn first_page(budget: HistoryBudget) -> i32 {
    (budget.tokens / FIRST_PAGE_MESSAGE_TOKENS)
        .saturating_add(9)
        .clamp(9, 1000) as i32
}

/// Where a read backwards of `generation`'s messages below `expected` (those not read yet, and the continuations
/// of the newest of them) goes on after a query that stopped at `last_key`: from that key when it is among them,
/// from their newest when it is above them (the query stopped among another generation's items, ones not counted
/// yet, or right after the last message it took), and nowhere when it is below them (they were read past: some are
/// missing).
fn resume_from(last_key: Item, generation: &str, expected: u64) -> Option<Option<Item>> {
    let sk = last_key.get(SORT_KEY).and_then(|v| v.as_s().ok())?;
    if *sk > message_end_sk(generation, expected - 1) {
        Some(None)
    } else if *sk >= message_sk(generation, 0) {
        Some(Some(last_key))
    } else {
        None
    }
}

fn sort_key(item: &Item) -> Option<&str> {
    item.get(SORT_KEY)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

impl DynamoStore {
    /// The chat item and its messages in one `Query` (they share the partition key), paged only past DynamoDB's
    /// 1 MB a page.
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

    /// The chat item and its newest messages until the budget is full, in one `Query` backwards from the chat
    /// item (its messages sort just before it), sized by the budget: a turn reads about as many items as it sends
    /// messages, however long the chat, in one call for most chats. A chat whose messages the first query did not
    /// all hold (short messages, another generation's items not deleted yet, or messages written before they sorted
    /// before the chat item) reads on backwards in queries of its generation, sized by the chat item's estimate of
    /// its tokens and then doubling. The mark is the chat item as read.
    pub(super) async fn load_newest(
        &self,
        owner: &str,
        chat_id: &str,
        budget: HistoryBudget,
    ) -> Result<LoadedChat, StoreError> {
        if !is_chat_id(chat_id) {
            return Err(StoreError::NotFound);
        }
        let pk = chat_pk(owner, chat_id);
        let mut items_read = 0;
        for _ in 0..10 {
            let Head {
                meta,
                rest,
                items_read: read,
            } = self.read_head(&pk, budget).await?;
            items_read += read;
            let newest = self.read_newest(&pk, &meta, budget, rest).await?;
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
        // The messages of a generation that sorts before the chat item come first: they wait for it, which says
        // which generation is the chat's.
        let mut before: Vec<Item> = Vec::new();
        let mut read: Option<Forwards> = None;
        let mut start: Option<Item> = None;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PARTITION_KEY)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(true);
            let out = query_page(query, start.take()).await?;
            for item in out.items.unwrap_or_default() {
                if let Some(read) = &mut read {
                    read.take(item);
                    continue;
                }
                match sort_key(&item) {
                    Some(sk) if sk < META => before.push(item),
                    Some(META) => {
                        let chat = ChatItem::read(item)?;
                        if chat.expired() {
                            return Err(StoreError::NotFound);
                        }
                        let mut forwards = Forwards::new(chat.meta()?);
                        for item in before.drain(..) {
                            forwards.take(item);
                        }
                        read = Some(forwards);
                    }
                    // Past where the chat item sorts without it: there is no chat (only what a delete left behind).
                    _ => return Err(StoreError::NotFound),
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() && !read.as_ref().is_some_and(Forwards::done) => {
                    start = Some(key)
                }
                _ => break,
            }
        }
        read.ok_or(StoreError::NotFound).map(Forwards::finish)
    }

    /// The chat item, and in the same query backwards the newest items that sort before it (what the budget should
    /// take of a generation that sorts before it); an expired chat is not found.
    async fn read_head(&self, pk: &str, budget: HistoryBudget) -> Result<Head, StoreError> {
        let query = self
            .partition_query(pk, "#sk BETWEEN :messages AND :meta")
            .expression_attribute_values(":messages", s(MESSAGES_BEFORE_META))
            .expression_attribute_values(":meta", s(META))
            .scan_index_forward(false)
            .limit(first_page(budget))
            .consistent_read(true);
        let out = query_page(query, None).await?;
        let items_read = out.items().len() as u64;
        let mut items = out.items.unwrap_or_default().into_iter();
        // The chat item sorts last of the range: without it there is no chat (only what a delete left behind).
        let chat = match items.next() {
            Some(item) if sort_key(&item) == Some(META) => ChatItem::read(item)?,
            _ => return Err(StoreError::NotFound),
        };
        if chat.expired() {
            return Err(StoreError::NotFound);
        }
        Ok(Head {
            meta: chat.meta()?,
            rest: Rest {
                items: items.collect(),
                last_key: out.last_evaluated_key.filter(|key| !key.is_empty()),
            },
            items_read,
        })
    }

    /// The newest messages of the chat `meta` describes that fit `budget` (always the newest), oldest first: from
    /// the first query's items when its generation sorts before the chat item, then (or else) read backwards in
    /// queries of the generation, sized by the chat's estimated tokens (then doubling); `None` for the messages
    /// when one is missing (its generation is being deleted under a replace).
    async fn read_newest(
        &self,
        pk: &str,
        meta: &Meta,
        budget: HistoryBudget,
        head: Rest,
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
        let mut read = Backwards::new(meta, budget);
        let mut start: Option<Item> = None;
        if sorts_before_meta(generation) {
            if let Some(messages) = read.take_all(head.items) {
                newest.messages = messages;
                return Ok(newest);
            }
            // The first query ran out before the budget or the first message did: read on from where it stopped,
            // or else some were missing.
            match head
                .last_key
                .and_then(|key| resume_from(key, generation, read.expected))
            {
                Some(from) => start = from,
                None => {
                    newest.messages = None;
                    return Ok(newest);
                }
            }
        }
        // The messages not read yet, so that a query that starts from their newest starts after those read.
        let unread = (0, read.expected);
        let mut page = read.page(meta);
        loop {
            let query = self
                .messages_query(pk, generation, unread)
                .scan_index_forward(false)
                .limit(page);
            let out = query_page(query, start.take()).await?;
            newest.items_read += out.items().len() as u64;
            if let Some(messages) = read.take_all(out.items.unwrap_or_default()) {
                newest.messages = messages;
                return Ok(newest);
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                // Items that ran out before the budget or the first message did: some were missing.
                _ => {
                    newest.messages = None;
                    return Ok(newest);
                }
            }
            page = (page * 2).min(1000);
        }
    }
}

/// A chat's messages read forwards, as its chat item counts them.
struct Forwards {
    meta: Meta,
    messages: Vec<StoredMessage>,
    assembly: Assembly,
    /// A message counted was not there where it sorts.
    missing: bool,
}

impl Forwards {
    fn new(meta: Meta) -> Self {
        Forwards {
            meta,
            messages: Vec::new(),
            assembly: Assembly::default(),
            missing: false,
        }
    }

    /// Whether the read has every message the chat item counts, or is missing one.
    fn done(&self) -> bool {
        self.missing || self.messages.len() as u64 >= self.meta.record.message_count
    }

    /// Takes the chat's next item in key order: a message of its generation, once whole, in its place.
    fn take(&mut self, item: Item) {
        if self.done() {
            return;
        }
        let Some((seq, message)) = self.assembly.push(item, &self.meta.generation) else {
            return;
        };
        if seq == self.messages.len() as u64 {
            self.messages.push(message);
        } else {
            self.missing = true;
        }
    }

    /// The chat, when every message it counts was read.
    fn finish(self) -> Option<(Meta, Vec<StoredMessage>)> {
        (!self.missing && self.messages.len() as u64 == self.meta.record.message_count)
            .then_some((self.meta, self.messages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::{new_generation, part_sk};

    fn key(sk: String) -> Item {
        Item::from([(SORT_KEY.to_string(), s(sk))])
    }

    #[test]
    fn a_first_query_holds_what_the_budget_takes_of_messages_of_64_tokens() {
        assert_eq!(first_page(HistoryBudget { tokens: 0 }), 9);
        assert_eq!(first_page(HistoryBudget { tokens: 6_400 }), 109);
        assert_eq!(first_page(HistoryBudget::UNLIMITED), 1000);
    }

    #[test]
    fn a_read_goes_on_from_where_its_query_stopped_among_the_messages_left() {
        let g = new_generation();
        let from = |sk: String| resume_from(key(sk.clone()), &g, 5).map(|k| k.is_some());
        // Among messages 0 to 4: from there, the continuations of message 4 included.
        assert_eq!(from(message_sk(&g, 3)), Some(true));
        assert_eq!(from(part_sk(&g, 4, 2)), Some(true));
        assert_eq!(from(message_sk(&g, 0)), Some(true));
        // Above them (message 5 taken, one not counted, another generation after this one's): from message 4.
        assert_eq!(from(message_sk(&g, 5)), Some(false));
        assert_eq!(from(part_sk(&g, 9, 1)), Some(false));
        assert_eq!(from(message_sk("hffffffffffffffffff", 0)), Some(false));
        // Below them: they were read past.
        assert_eq!(from(message_sk("h", 0)), None);
    }
}
