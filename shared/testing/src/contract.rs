//! The store's contract: what every [`SessionStore`] does, as checks run once against each store (the in-memory
//! one in this crate's tests, DynamoDB on moto in chat-aws's). [`store_contract!`](crate::store_contract) makes one
//! test per check.
//!
//! A store that keeps records of its own (DynamoDB's items) can also be asked how many it keeps under a chat
//! ([`Subject::with_item_count`]), so that the checks see that a replace or a delete leaves nothing behind and that
//! long messages span several records; the in-memory store has none to count.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chat_core::{
    ChatMode, ChatRecord, HistoryBudget, ListRequest, LoadedChat, Page, PageRequest, Role,
    SessionStore, StoreError, StoredMessage, TokenUsage, TurnWrite, UsageTotals,
};

/// Counts the records a store keeps under one chat: `(owner, chat_id)` to a count.
pub type ItemCount =
    Arc<dyn Fn(String, String) -> Pin<Box<dyn Future<Output = usize> + Send>> + Send + Sync>;

/// A fresh, empty store under test.
pub struct Subject<S> {
    pub store: S,
    items: Option<ItemCount>,
}

impl<S: SessionStore> Subject<S> {
    pub fn new(store: S) -> Self {
        Self { store, items: None }
    }

    /// Also checks how many records the store keeps under a chat, counted by `count`.
    pub fn with_item_count<F, Fut>(mut self, count: F) -> Self
    where
        F: Fn(String, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = usize> + Send + 'static,
    {
        self.items = Some(Arc::new(move |owner, chat| Box::pin(count(owner, chat))));
        self
    }

    /// How many records the store keeps under `owner`'s chat `chat_id`, when it can tell.
    pub async fn items(&self, owner: &str, chat_id: &str) -> Option<usize> {
        match &self.items {
            Some(count) => Some(count(owner.to_string(), chat_id.to_string()).await),
            None => None,
        }
    }
}

/// A chat id (32 hex characters) made from a readable name.
pub fn id(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex:0<32}")
}

/// A message with a new id.
pub fn message(role: Role, content: &str) -> StoredMessage {
    StoredMessage::new(
        uuid::Uuid::new_v4().simple().to_string(),
        role,
        content,
        "2026-01-01T00:00:00.000Z",
    )
}

/// A standard chat named `name`, last updated at `updated`.
pub fn chat(name: &str, updated: &str) -> ChatRecord {
    ChatRecord {
        id: id(name),
        mode: ChatMode::Standard,
        title: format!("chat {name}"),
        created_at: updated.into(),
        last_updated: updated.into(),
        last_message: String::new(),
        message_count: 0,
        usage: UsageTotals::default(),
    }
}

/// What one scripted turn spends: 10 input tokens, 5 output, 20 read from the cache, 2 written, $0.001.
pub fn spent() -> UsageTotals {
    UsageTotals {
        tokens: TokenUsage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 37,
            cache_read_input_tokens: 20,
            cache_write_input_tokens: 2,
        },
        cost_usd: Some(0.001),
    }
}

/// When a check's chats are made, unless it says otherwise.
pub const AT: &str = "2026-01-01T00:00:00.000Z";

/// `owner`'s standard chat `name`, made at [`AT`] with `msgs`: the record the store answers.
pub async fn seed<S: SessionStore>(
    store: &S,
    owner: &str,
    name: &str,
    msgs: &[StoredMessage],
) -> ChatRecord {
    store.create(owner, &chat(name, AT), msgs).await.unwrap()
}

/// `n` messages of `role`, their contents `prefix` followed by their number from 0.
pub fn numbered(role: Role, prefix: &str, n: usize) -> Vec<StoredMessage> {
    (0..n)
        .map(|i| message(role, &format!("{prefix}{i}")))
        .collect()
}

/// A turn's two messages: the user's `question` and the assistant's `answer`.
pub fn turn(question: &str, answer: &str) -> [StoredMessage; 2] {
    [
        message(Role::User, question),
        message(Role::Assistant, answer),
    ]
}

/// Turn `i`: the question `q{i}` and its answer `a{i}`.
pub fn numbered_turn(i: usize) -> [StoredMessage; 2] {
    turn(&format!("q{i}"), &format!("a{i}"))
}

/// The first ten of `owner`'s chats of `mode`.
pub async fn listed<S: SessionStore>(store: &S, owner: &str, mode: ChatMode) -> Vec<ChatRecord> {
    store
        .list(owner, ListRequest::first(mode, 10))
        .await
        .unwrap()
        .items
}

/// Asserts that `op` fails with `expected`.
pub async fn fails<T: std::fmt::Debug>(
    op: impl Future<Output = Result<T, StoreError>>,
    expected: StoreError,
    what: &str,
) {
    assert_eq!(op.await.unwrap_err(), expected, "{what}");
}

/// Every page of a paged read, from the first (no cursor) to the one without a next cursor.
pub async fn all_pages<T, F, Fut>(mut read: F) -> Vec<Vec<T>>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Page<T>>,
{
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let page = read(cursor.take()).await;
        pages.push(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return pages,
        }
    }
}

/// Asserts that `msgs` are `n` whole turns ([`numbered_turn`]), in any order: each question followed by its own
/// answer, none split, interleaved or stored twice.
pub fn assert_whole_turns(msgs: &[StoredMessage], n: usize) {
    assert_eq!(msgs.len(), 2 * n);
    let mut seen = HashSet::new();
    for pair in msgs.chunks(2) {
        let i = pair[0].content.strip_prefix('q').expect("a question first");
        assert_eq!(pair[1].content, format!("a{i}"));
        assert!(seen.insert(i.to_string()), "turn {i} stored twice");
    }
    assert_eq!(seen.len(), n);
}

/// `n` reads of alice's chat `name` for a turn, all made before any turn writes.
async fn reads_for_turns<S: SessionStore>(store: &S, name: &str, n: usize) -> Vec<LoadedChat> {
    let mut reads = Vec::new();
    for _ in 0..n {
        let chat_id = id(name);
        let read = store.load_for_turn("alice", &chat_id, HistoryBudget::UNLIMITED);
        reads.push(read.await.unwrap());
    }
    reads
}

/// Each read's turn ([`numbered_turn`]) appended at once to alice's chat `name`, as of that read, spending
/// [`spent`]: the records the appends answer.
async fn turns_as_of<S: SessionStore>(
    store: &S,
    name: &str,
    reads: &[LoadedChat],
) -> Vec<Result<ChatRecord, StoreError>> {
    let turns = reads.iter().enumerate().map(|(i, read)| async move {
        let pair = numbered_turn(i);
        let turn = TurnWrite {
            mark: read.mark.as_ref(),
            messages: &pair,
            spent: &spent(),
        };
        store.append_after("alice", &id(name), turn).await
    });
    futures_util::future::join_all(turns).await
}

/// One `#[tokio::test]` per check of the contract, each on a fresh subject: `$fresh` is an expression whose
/// `.await` is a [`Subject`] (e.g. `fresh_subject()`, an `async fn`). The crate using it depends on tokio.
#[macro_export]
macro_rules! store_contract {
    ($fresh:expr) => {
        $crate::contract_tests!(contract, $fresh;
            a_chat_is_created_read_back_and_listed, twenty_turns_at_once_all_land_whole,
            turns_written_as_of_their_own_read_all_land_once,
            a_chat_of_three_megabytes_is_stored_and_read_back_whole,
            a_replace_is_seen_whole_and_the_old_messages_go, paging_through_120_chats_gives_each_once_newest_first,
            another_owners_chat_is_not_found_by_any_operation, cursors_are_checked, a_deleted_chat_is_gone,
            appends_too_large_for_one_transaction_race_without_mixing, deleting_a_chat_removes_every_message_item,
            ids_that_are_not_chat_ids_name_no_chat, a_500000_character_message_is_stored_and_read_back_whole,
            a_chat_is_read_in_pages_that_join_back_whole, a_messages_files_are_kept_with_it,
            a_turn_reads_only_the_newest_messages_its_budget_takes, a_rename_changes_the_title_and_nothing_else,
            a_rename_finds_only_the_owners_existing_chat, a_rename_among_turns_keeps_its_title_and_every_turn,
        );
    };
}

/// One `#[tokio::test]` per check named, each calling `$crate::$module::$check` with a fresh subject (`$fresh`,
/// awaited): what [`store_contract!`](crate::store_contract) and [`usage_contract!`](crate::usage_contract) expand
/// to.
#[doc(hidden)]
#[macro_export]
macro_rules! contract_tests {
    ($module:ident, $fresh:expr; $($check:ident),+ $(,)?) => {
        $(
            #[::tokio::test]
            async fn $check() {
                let subject = $fresh.await;
                $crate::$module::$check(&subject).await;
            }
        )+
    };
}

pub async fn a_chat_is_created_read_back_and_listed<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    let msgs = turn("hello", "hi there");
    let created = seed(store, "alice", "c1", &msgs).await;
    assert_eq!(created.message_count, 2);
    assert_eq!(created.last_message, "hi there");
    let (record, read) = store.load("alice", &id("c1")).await.unwrap();
    assert_eq!(record, created);
    assert_eq!(read, msgs);
    let page = store
        .list("alice", ListRequest::first(ChatMode::Standard, 10))
        .await
        .unwrap();
    assert_eq!(page.items, [created]);
    assert_eq!(page.next_cursor, None);
    assert!(
        listed(store, "alice", ChatMode::MultiAgent)
            .await
            .is_empty()
    );
    let same = chat("c1", "x");
    let again = store.create("alice", &same, &msgs);
    fails(again, StoreError::AlreadyExists, "a second create").await;
}

pub async fn twenty_turns_at_once_all_land_whole<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    seed(store, "alice", "busy", &[]).await;
    let turns = (0..20).map(|i| async move {
        let pair = numbered_turn(i);
        store.append("alice", &id("busy"), &pair).await
    });
    for result in futures_util::future::join_all(turns).await {
        result.unwrap();
    }
    let (record, msgs) = store.load("alice", &id("busy")).await.unwrap();
    assert_eq!(record.message_count, 40);
    // Each turn's question is followed by its own answer: no turn was split or interleaved.
    assert_whole_turns(&msgs, 20);
    // Reading again gives the same order.
    assert_eq!(store.load("alice", &id("busy")).await.unwrap().1, msgs);
}

/// As a turn writes: read the chat (with the store's mark), then append as of that read. Reads that other turns'
/// writes overtook must still land, each once, whole and in order.
pub async fn turns_written_as_of_their_own_read_all_land_once<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    seed(store, "alice", "marks", &[message(Role::User, "first")]).await;
    // Every turn reads before any writes: all but the first write find the chat changed since their read.
    let reads = reads_for_turns(store, "marks", 8).await;
    assert!(
        reads
            .iter()
            .all(|r| r.record.message_count == 1 && r.messages.len() == 1)
    );
    let mut counts = Vec::new();
    for result in turns_as_of(store, "marks", &reads).await {
        counts.push(result.unwrap().message_count);
    }
    counts.sort();
    assert_eq!(counts, (1..=8).map(|n| 1 + 2 * n).collect::<Vec<u64>>());
    let loaded = store
        .load_for_turn("alice", &id("marks"), HistoryBudget::UNLIMITED)
        .await
        .unwrap();
    assert_eq!(loaded.record.message_count, 17);
    // Each turn's spending is added once, with its messages.
    let totals = loaded.record.usage;
    assert_eq!(totals.tokens.input_tokens, 80);
    assert_eq!(totals.tokens.output_tokens, 40);
    assert_eq!(totals.tokens.total_tokens, 8 * 37);
    assert_eq!(totals.tokens.cache_read_input_tokens, 160);
    assert_eq!(totals.tokens.cache_write_input_tokens, 16);
    assert!(
        (totals.cost_usd.unwrap() - 0.008).abs() < 1e-9,
        "{totals:?}"
    );
    assert_eq!(
        listed(store, "alice", ChatMode::Standard).await[0].usage,
        totals
    );
    assert_eq!(loaded.messages[0].content, "first");
    assert_whole_turns(&loaded.messages[1..], 8);
    // Another owner's read names no chat.
    let marks = id("marks");
    let bobs = store.load_for_turn("bob", &marks, HistoryBudget::UNLIMITED);
    fails(bobs, StoreError::NotFound, "bob's read").await;
}

pub async fn a_chat_of_three_megabytes_is_stored_and_read_back_whole<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    seed(store, "alice", "big", &[]).await;
    let mut expected = Vec::new();
    // 40 messages of 75 000 characters: 3 MB, each message its own item, far from the 400 KB item limit.
    for turn in 0..20 {
        let pair = [
            message(Role::User, &format!("{turn:02}").repeat(37_500)),
            message(Role::Assistant, &format!("{:02}", turn + 50).repeat(37_500)),
        ];
        store.append("alice", &id("big"), &pair).await.unwrap();
        expected.extend(pair);
    }
    let (record, msgs) = store.load("alice", &id("big")).await.unwrap();
    assert_eq!(record.message_count, 40);
    let total: usize = msgs.iter().map(|m| m.content.len()).sum();
    assert_eq!(total, 3_000_000);
    assert_eq!(msgs, expected);
}

pub async fn a_replace_is_seen_whole_and_the_old_messages_go<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    seed(store, "alice", "r", &numbered(Role::User, "old ", 150)).await;
    let new = numbered(Role::Assistant, "new ", 120);
    let record = store.replace("alice", &id("r"), &new).await.unwrap();
    assert_eq!(record.message_count, 120);
    assert_eq!(record.last_message, "new 119");
    assert_eq!(store.load("alice", &id("r")).await.unwrap().1, new);
    // Only the chat item and the 120 new messages remain.
    if let Some(items) = subject.items("alice", &id("r")).await {
        assert_eq!(items, 121, "the old generation is deleted");
    }
}

pub async fn paging_through_120_chats_gives_each_once_newest_first<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    for i in 0..120 {
        let at = format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60);
        let made = chat(&format!("c{i:03}"), &at);
        store.create("alice", &made, &[]).await.unwrap();
    }
    let bobs = chat("bobs", "2027-01-01T00:00:00.000Z");
    store.create("bob", &bobs, &[]).await.unwrap();
    let pages = all_pages(|cursor| async move {
        let page = store.list(
            "alice",
            ListRequest {
                cursor: cursor.as_deref(),
                ..ListRequest::first(ChatMode::Standard, 25)
            },
        );
        page.await.unwrap()
    })
    .await;
    assert!(pages.iter().all(|page| page.len() <= 25));
    assert_eq!(
        pages.len(),
        5,
        "120 chats in pages of 25, with no empty last page"
    );
    let ids: Vec<String> = pages.concat().into_iter().map(|c| c.id).collect();
    let expected: Vec<String> = (0..120).rev().map(|i| id(&format!("c{i:03}"))).collect();
    assert_eq!(ids, expected);
}

pub async fn another_owners_chat_is_not_found_by_any_operation<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    let msgs = [message(Role::User, "mine")];
    seed(store, "alice", "a1", &msgs).await;
    let a1 = id("a1");
    fails(store.load("bob", &a1), StoreError::NotFound, "load").await;
    fails(
        store.append("bob", &a1, &msgs),
        StoreError::NotFound,
        "append",
    )
    .await;
    fails(
        store.replace("bob", &a1, &[]),
        StoreError::NotFound,
        "replace",
    )
    .await;
    fails(store.delete("bob", &a1), StoreError::NotFound, "delete").await;
    let rename = store.rename("bob", &a1, "bob's now");
    fails(rename, StoreError::NotFound, "rename").await;
    assert!(listed(store, "bob", ChatMode::Standard).await.is_empty());
    // Alice's chat is as it was.
    assert_eq!(store.load("alice", &a1).await.unwrap().1, msgs);
    assert_eq!(store.load("alice", &a1).await.unwrap().0.title, "chat a1");
}

pub async fn cursors_are_checked<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    for i in 0..3 {
        let at = format!("2026-01-0{}T00:00:00.000Z", i + 1);
        store
            .create("alice", &chat(&format!("c{i}"), &at), &[])
            .await
            .unwrap();
    }
    let page = store
        .list("alice", ListRequest::first(ChatMode::Standard, 1))
        .await
        .unwrap();
    let cursor = page.next_cursor.unwrap();
    for (owner, cursor) in [("bob", cursor.as_str()), ("alice", "not-a-cursor")] {
        let listed = store.list(
            owner,
            ListRequest {
                cursor: Some(cursor),
                ..ListRequest::first(ChatMode::Standard, 1)
            },
        );
        fails(listed, StoreError::InvalidCursor, owner).await;
    }
}

pub async fn a_deleted_chat_is_gone<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    seed(store, "alice", "d", &[message(Role::User, "x")]).await;
    store.delete("alice", &id("d")).await.unwrap();
    fails(store.load("alice", &id("d")), StoreError::NotFound, "load").await;
    assert!(listed(store, "alice", ChatMode::Standard).await.is_empty());
    let d = id("d");
    let again = store.delete("alice", &d);
    fails(again, StoreError::NotFound, "a second delete").await;
}

pub async fn appends_too_large_for_one_transaction_race_without_mixing<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    seed(store, "alice", "huge", &[message(Role::User, "start")]).await;
    // Two writers of 150 messages each: each goes to its own generation, and they commit one after the other.
    let writers = ["a", "b"].map(|w| async move {
        let batch = numbered(Role::User, w, 150);
        store.append("alice", &id("huge"), &batch).await
    });
    for result in futures_util::future::join_all(writers).await {
        result.unwrap();
    }
    let (record, msgs) = store.load("alice", &id("huge")).await.unwrap();
    assert_eq!(record.message_count, 301);
    assert_eq!(msgs[0].content, "start");
    for block in msgs[1..].chunks(150) {
        let writer = &block[0].content[..1];
        let expected: Vec<String> = (0..150).map(|i| format!("{writer}{i}")).collect();
        let got: Vec<String> = block.iter().map(|m| m.content.clone()).collect();
        assert_eq!(got, expected, "one writer's messages, whole and in order");
    }
}

pub async fn deleting_a_chat_removes_every_message_item<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    let msgs = numbered(Role::User, "m", 130);
    seed(store, "alice", "gone", &msgs).await;
    let gone = id("gone");
    store.append("alice", &gone, &msgs[..3]).await.unwrap();
    store.replace("alice", &gone, &msgs[..5]).await.unwrap();
    store.delete("alice", &gone).await.unwrap();
    fails(store.load("alice", &gone), StoreError::NotFound, "load").await;
    if let Some(left) = subject.items("alice", &gone).await {
        assert_eq!(left, 0, "nothing of a deleted chat stays behind");
    }
}

pub async fn ids_that_are_not_chat_ids_name_no_chat<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    seed(store, "x#bob", "c", &[message(Role::User, "bob's")]).await;
    // An id with a '#' could otherwise reach the key of another owner's chat.
    let forged = format!("{}#x", id("c"));
    fails(store.load("bob", &forged), StoreError::NotFound, "load").await;
    fails(store.delete("bob", &forged), StoreError::NotFound, "delete").await;
    let short = store.load("x#bob", "short");
    fails(short, StoreError::NotFound, "a short id").await;
}

pub async fn a_500000_character_message_is_stored_and_read_back_whole<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    // 500 000 characters of one byte, then of four bytes (2 MB), each past DynamoDB's 400 KB item limit.
    let digits = message(Role::Assistant, &"0123456789".repeat(50_000));
    let crabs = message(Role::Assistant, &"🦀".repeat(500_000));
    let first = [message(Role::User, "write a lot"), digits.clone()];
    let created = seed(store, "alice", "long", &first).await;
    assert_eq!(created.message_count, 2);
    assert_eq!(created.last_message, "0123456789".repeat(20));
    let second = [message(Role::User, "more"), crabs.clone()];
    store.append("alice", &id("long"), &second).await.unwrap();
    // 4 MB in one turn: more than one transaction carries, so it goes through a new generation.
    let third = turn(&"é".repeat(500_000), &"🦀".repeat(500_000));
    let record = store.append("alice", &id("long"), &third).await.unwrap();
    assert_eq!(record.message_count, 6);
    let (record, msgs) = store.load("alice", &id("long")).await.unwrap();
    assert_eq!(record.message_count, 6);
    assert_eq!(msgs.len(), 6);
    assert_eq!(msgs[1].content.chars().count(), 500_000);
    assert_eq!(msgs, [first.as_slice(), &second, &third].concat());
    // One entry per message in the count and the list, though the long ones span several items.
    if let Some(items) = subject.items("alice", &id("long")).await {
        assert!(items > 7);
    }
    let chats = listed(store, "alice", ChatMode::Standard).await;
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].message_count, 6);
    assert_eq!(chats[0].last_message, "🦀".repeat(200));
    // Pages split between messages, never inside one.
    let paged = all_pages(|cursor| async move {
        let long = id("long");
        let page = store.load_page("alice", &long, PageRequest::unbounded(cursor.as_deref(), 2));
        page.await.unwrap()
    })
    .await;
    assert_eq!(paged.concat(), msgs);
}

pub async fn a_chat_is_read_in_pages_that_join_back_whole<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    let msgs: Vec<_> = (0..30)
        .map(|i| message(Role::User, &format!("{i:02}").repeat(500)))
        .collect();
    seed(store, "alice", "paged", &msgs).await;
    // By size: each page holds what fits, and at least one message.
    let budget = 3 * msgs[0].wire_size() + 10;
    let pages = all_pages(|cursor| async move {
        let paged = id("paged");
        let page = store.load_page(
            "alice",
            &paged,
            PageRequest {
                cursor: cursor.as_deref(),
                limit: usize::MAX,
                max_bytes: budget,
            },
        );
        page.await.unwrap()
    })
    .await;
    for page in &pages {
        assert!(page.iter().map(StoredMessage::wire_size).sum::<usize>() <= budget);
    }
    assert_eq!(pages.len(), 10);
    assert_eq!(pages.concat(), msgs);
    // A chat that fits one page has no cursor.
    let whole = store
        .load_page(
            "alice",
            &id("paged"),
            PageRequest::unbounded(None, usize::MAX),
        )
        .await
        .unwrap();
    assert_eq!((whole.items, whole.next_cursor), (msgs.clone(), None));

    // Pages follow the chat as it was at the first page: a turn added meanwhile waits for a new read.
    let first = store
        .load_page("alice", &id("paged"), PageRequest::unbounded(None, 20))
        .await
        .unwrap();
    let cursor = first.next_cursor.unwrap();
    let later = [message(Role::User, "later")];
    store.append("alice", &id("paged"), &later).await.unwrap();
    let rest = store
        .load_page(
            "alice",
            &id("paged"),
            PageRequest::unbounded(Some(&cursor), 20),
        )
        .await
        .unwrap();
    assert_eq!(rest.next_cursor, None);
    assert_eq!([first.items, rest.items].concat(), msgs);

    // A cursor is refused for another chat, for another owner, made up, or once the chat was replaced.
    seed(store, "alice", "other", &msgs).await;
    seed(store, "bob", "paged", &msgs).await;
    for (owner, chat_id, cursor) in [
        ("alice", id("other"), cursor.as_str()),
        ("bob", id("paged"), cursor.as_str()),
        ("alice", id("paged"), "bm90IGEgY3Vyc29y"),
        ("alice", id("paged"), "!"),
    ] {
        let page = store.load_page(owner, &chat_id, PageRequest::unbounded(Some(cursor), 20));
        let what = format!("{owner} {chat_id} {cursor}");
        fails(page, StoreError::InvalidCursor, &what).await;
    }
    store
        .replace("alice", &id("paged"), &msgs[..25])
        .await
        .unwrap();
    let (paged, nothing) = (id("paged"), id("nothing"));
    let replaced = store.load_page("alice", &paged, PageRequest::unbounded(Some(&cursor), 20));
    fails(replaced, StoreError::InvalidCursor, "replaced").await;
    let no_chat = store.load_page("bob", &nothing, PageRequest::unbounded(None, 20));
    fails(no_chat, StoreError::NotFound, "no such chat").await;
}

pub async fn a_messages_files_are_kept_with_it<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    let file = |name: &str, content_type: &str, size: u64| chat_core::StoredFile {
        name: name.into(),
        content_type: content_type.into(),
        size,
        key: format!("owner/{}/{name}", id("f1")),
    };
    let [mut question, answer] = turn("What are these?", "A screenshot and a report.");
    question.files = vec![
        file("shot.png", "image/png", 67),
        file("Q3 \"final\" report.pdf", "application/pdf", 4_718_592),
    ];
    seed(store, "alice", "f1", &[question.clone(), answer.clone()]).await;
    // A long message with files: its files stay with it across its items.
    let mut long = message(Role::User, &"x".repeat(700_000));
    long.files = vec![file("big.md", "text/markdown", 10)];
    store
        .append("alice", &id("f1"), &[long.clone()])
        .await
        .unwrap();
    let (_, read) = store.load("alice", &id("f1")).await.unwrap();
    assert_eq!(read, [question.clone(), answer, long]);
    let page = store
        .load_page("alice", &id("f1"), PageRequest::unbounded(None, 1))
        .await
        .unwrap();
    assert_eq!(page.items[0].files, question.files);
}

/// A turn reads the chat's newest messages its budget takes, newest first, and no more: with the same messages
/// as the whole chat's tail, its long messages whole, and items read that grow with what it takes, not with the
/// chat.
pub async fn a_turn_reads_only_the_newest_messages_its_budget_takes<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    // 300 messages; the 290th is 700,000 characters (several items in DynamoDB).
    let messages: Vec<StoredMessage> = (0..300)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = if i == 290 {
                format!("long {i} {}", "é".repeat(350_000))
            } else {
                format!("message {i} {}", "words ".repeat(i % 7))
            };
            message(role, &text)
        })
        .collect();
    seed(store, "alice", "budget", &messages).await;
    for tokens in [0, 50, 200, 1_000, 240_000, 400_000] {
        let budget = HistoryBudget { tokens };
        let loaded = store
            .load_for_turn("alice", &id("budget"), budget)
            .await
            .unwrap();
        let start = budget.newest(&messages);
        assert_eq!(loaded.record.message_count, 300);
        assert_eq!(loaded.messages.len(), 300 - start, "budget {tokens}");
        assert_eq!(loaded.messages, messages[start..], "budget {tokens}");
        assert!(
            !loaded.messages.is_empty(),
            "the newest message is always read"
        );
        // What was read: the chat item, the messages' items (the long one's several), and less than a page more.
        let parts = if start <= 290 { 3 } else { 0 };
        let read = (loaded.items_read, loaded.messages.len());
        assert!(
            read.0 <= 1 + (300 - start) as u64 + parts + 256,
            "budget {tokens}: {read:?} (items read, messages)"
        );
        if start > 200 {
            assert!(
                read.0 <= 2 * (300 - start) as u64 + 20,
                "budget {tokens}: {read:?} (items read, messages)"
            );
        }
    }
    let budget = id("budget");
    let whole = store.load_for_turn("alice", &budget, HistoryBudget::UNLIMITED);
    assert_eq!(whole.await.unwrap().messages, messages);
}

/// A rename sets the title, as every read then shows it, and nothing else: the messages, the counts, the totals and
/// `last_updated` stay, so the chat keeps its place in the list (a rename is not activity); no record is added.
pub async fn a_rename_changes_the_title_and_nothing_else<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    let msgs = turn("hello", "hi there");
    let older = ChatRecord {
        usage: spent(),
        ..chat("older", AT)
    };
    store.create("alice", &older, &msgs).await.unwrap();
    let newer = chat("newer", "2030-01-02T00:00:00.000Z");
    store.create("alice", &newer, &[]).await.unwrap();
    let mut agents = chat("agents", "2026-01-03T00:00:00.000Z");
    agents.mode = ChatMode::MultiAgent;
    store.create("alice", &agents, &[]).await.unwrap();
    let (before, _) = store.load("alice", &id("older")).await.unwrap();
    let items_before = subject.items("alice", &id("older")).await;

    let title = "Q3 \"plan\" — 🦀 #1";
    let renamed = store.rename("alice", &id("older"), title).await.unwrap();
    assert_eq!(
        renamed,
        ChatRecord {
            title: title.into(),
            ..before.clone()
        }
    );
    let (record, read) = store.load("alice", &id("older")).await.unwrap();
    assert_eq!(record, renamed);
    assert_eq!(read, msgs);
    assert_eq!(subject.items("alice", &id("older")).await, items_before);
    // The newer chat stays first: the rename did not move the older one up.
    let chats = listed(store, "alice", ChatMode::Standard).await;
    let ids: Vec<&str> = chats.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, [id("newer"), id("older")]);
    assert_eq!(chats[1], renamed);
    assert_eq!(chats[0].title, "chat newer");

    // Renamed again, and a chat of the other mode, in its own list.
    let again = store.rename("alice", &id("older"), "Plan").await.unwrap();
    assert_eq!((again.title.as_str(), again.usage), ("Plan", before.usage));
    let agents_id = id("agents");
    let at_work = store.rename("alice", &agents_id, "Agents at work");
    at_work.await.unwrap();
    let agents = listed(store, "alice", ChatMode::MultiAgent).await;
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].title, "Agents at work");
    assert_eq!(agents[0].mode, ChatMode::MultiAgent);
    assert_eq!(agents[0].last_updated, "2026-01-03T00:00:00.000Z");
}

/// A rename names a chat as every operation does: another owner's, a deleted one, one never made and an id that is
/// no chat id are not found, and nothing is created or changed.
pub async fn a_rename_finds_only_the_owners_existing_chat<S: SessionStore>(subject: &Subject<S>) {
    let store = &subject.store;
    seed(store, "x#bob", "c", &[]).await;
    seed(store, "alice", "gone", &[]).await;
    store.delete("alice", &id("gone")).await.unwrap();
    let forged = format!("{}#x", id("c"));
    for (owner, chat_id) in [
        ("bob", forged.as_str()),
        ("x", id("c").as_str()),
        ("alice", id("c").as_str()),
        ("alice", id("gone").as_str()),
        ("alice", id("never").as_str()),
        ("alice", "not-a-chat-id"),
    ] {
        let rename = store.rename(owner, chat_id, "mine");
        fails(rename, StoreError::NotFound, &format!("{owner} {chat_id}")).await;
    }
    assert_eq!(
        store.load("x#bob", &id("c")).await.unwrap().0.title,
        "chat c"
    );
    for owner in ["alice", "bob", "x"] {
        let chats = listed(store, owner, ChatMode::Standard).await;
        assert!(chats.is_empty(), "{owner}");
    }
    if let Some(left) = subject.items("alice", &id("gone")).await {
        assert_eq!(left, 0, "a rename of a deleted chat makes nothing");
    }
}

/// A rename while turns write to the chat: each turn lands whole and once, as of its own read from before the
/// rename, and the title stays renamed.
pub async fn a_rename_among_turns_keeps_its_title_and_every_turn<S: SessionStore>(
    subject: &Subject<S>,
) {
    let store = &subject.store;
    seed(store, "alice", "busy", &[message(Role::User, "first")]).await;
    let reads = reads_for_turns(store, "busy", 6).await;
    let rename = async {
        store
            .rename("alice", &id("busy"), "Renamed while busy")
            .await
            .map(|_| ())
    };
    let (turns, renamed) =
        futures_util::future::join(turns_as_of(store, "busy", &reads), rename).await;
    renamed.unwrap();
    for result in turns {
        result.unwrap();
    }
    let (record, msgs) = store.load("alice", &id("busy")).await.unwrap();
    assert_eq!(record.title, "Renamed while busy");
    assert_eq!(record.message_count, 13);
    assert_eq!(msgs.len(), 13);
    assert_eq!(record.usage.tokens.input_tokens, 60);
    assert_whole_turns(&msgs[1..], 6);
    // A turn after the rename keeps the title too.
    let later = [message(Role::User, "later")];
    let after = store.append("alice", &id("busy"), &later).await.unwrap();
    assert_eq!(after.title, "Renamed while busy");
    let chats = listed(store, "alice", ChatMode::Standard).await;
    assert_eq!(chats[0].title, "Renamed while busy");
}
