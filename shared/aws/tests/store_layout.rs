//! The table's layout, against moto's server: a chat written attribute for attribute as the store wrote it before its
//! items were serde structs (raw `PutItem`s: the chat item after one turn, a message with files, an answer with tool
//! exchanges, a long answer continued over two items) reads back whole through every read of the store and takes a
//! turn; and what the store writes now has the same keys (but for where a new generation's messages sort),
//! attribute names and attribute types.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use chat_aws::DynamoStore;
use chat_core::{
    ChatMode, ChatRecord, HistoryBudget, ListRequest, LoadedChat, PageRequest, Role, SessionStore,
    StoreTimeouts, StoredFile, StoredMessage, TokenUsage, ToolExchange, ToolStatus, TurnWrite,
    UsageTotals, estimate_stored_tokens,
};
use chat_testing::contract::{all_pages, id, spent};
use local_dynamodb::LocalDynamo;

mod support;

/// The old chat's messages' generation.
const GENERATION: &str = "00000000deadbeef";
/// How much of a message's text one item held.
const PART_BYTES: usize = 300 * 1024;

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

async fn put(client: &Client, table: &str, item: Vec<(&str, AttributeValue)>) {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(
            item.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ))
        .send()
        .await
        .unwrap();
}

fn files() -> Vec<StoredFile> {
    vec![StoredFile {
        name: "chart.png".into(),
        content_type: "image/png".into(),
        size: 3,
        key: "files/alice/0123/chart.png".into(),
    }]
}

fn tools() -> Vec<ToolExchange> {
    vec![ToolExchange {
        round: 0,
        id: "tooluse_1".into(),
        name: "lookup".into(),
        input: serde_json::json!({"q": "revenue"}),
        output: "42".into(),
        status: ToolStatus::Error,
    }]
}

/// The three messages: a question with a file, an agent's answer with a tool call, and a long answer.
fn messages() -> Vec<StoredMessage> {
    let message =
        |id: &str, role, content: String| StoredMessage::new(id, role, content, "10:15 AM");
    vec![
        message("m0", Role::User, "what is in the chart?".into()).with_files(files()),
        message("m1", Role::Assistant, "It shows 42.".into())
            .with_agent_identifier(Some("analyst".into()))
            .with_agent_name(Some("Analyst".into()))
            .with_tools(tools()),
        // Over two items: 2,000 bytes past what the first holds.
        message("m2", Role::Assistant, "é".repeat(PART_BYTES / 2 + 1000)),
    ]
}

/// Writes alice's chat `chat_id` as the store wrote it before: one turn after its creation (version 1, two write
/// tokens, its totals as the commit added them), expiring in a day.
async fn put_old_chat(client: &Client, table: &str, chat_id: &str) {
    let pk = format!("CHAT#{chat_id}#alice");
    let expires = time::OffsetDateTime::now_utc().unix_timestamp() + 86_400;
    let msgs = messages();
    let tokens: u64 = msgs.iter().map(estimate_stored_tokens).sum();
    let preview: String = msgs[2].content.chars().take(200).collect();
    put(
        client,
        table,
        vec![
            ("pk", s(&pk)),
            ("sk", s("META")),
            ("chatId", s(chat_id)),
            ("owner", s("alice")),
            ("mode", s("multiAgent")),
            ("title", s("Revenue")),
            ("createdAt", s("2026-01-01T00:00:00.000Z")),
            ("lastUpdated", s("2026-01-02T00:00:00.000Z")),
            ("lastMessage", s(preview)),
            ("messageCount", n(3)),
            ("generation", s(GENERATION)),
            ("version", n(1)),
            (
                "writes",
                AttributeValue::L(vec![s("00000000000000a1"), s("00000000000000a2")]),
            ),
            ("gsi1pk", s("LIST#multiAgent#alice")),
            ("gsi1sk", s(format!("2026-01-02T00:00:00.000Z#{chat_id}"))),
            ("expiresAt", n(expires)),
            ("historyTokens", n(tokens)),
            ("inputTokens", n(10)),
            ("outputTokens", n(5)),
            ("totalTokens", n(37)),
            ("cacheReadInputTokens", n(20)),
            ("cacheWriteInputTokens", n(2)),
            ("costUsd", n("0.001000000000")),
        ],
    )
    .await;
    let sk = |seq: u64| format!("MSG#{GENERATION}#{seq:09}");
    let own = |seq: u64, m: &StoredMessage, content: &str| {
        vec![
            ("pk", s(&pk)),
            ("sk", s(sk(seq))),
            ("id", s(&m.id)),
            ("role", s(m.role.as_str())),
            ("content", s(content)),
            ("timestamp", s(&m.timestamp)),
            ("expiresAt", n(expires)),
        ]
    };
    let mut first = own(0, &msgs[0], &msgs[0].content);
    first.push(("files", s(serde_json::to_string(&msgs[0].files).unwrap())));
    put(client, table, first).await;
    let mut second = own(1, &msgs[1], &msgs[1].content);
    second.push(("agentIdentifier", s("analyst")));
    second.push(("agentName", s("Analyst")));
    second.push(("tools", s(serde_json::to_string(&msgs[1].tools).unwrap())));
    put(client, table, second).await;
    let (head, tail) = msgs[2].content.split_at(PART_BYTES);
    let mut third = own(2, &msgs[2], head);
    third.push(("parts", n(2)));
    put(client, table, third).await;
    put(
        client,
        table,
        vec![
            ("pk", s(&pk)),
            ("sk", s(format!("{}#p001", sk(2)))),
            ("content", s(tail)),
            ("expiresAt", n(expires)),
        ],
    )
    .await;
}

fn old_record(chat_id: &str) -> ChatRecord {
    ChatRecord {
        id: chat_id.into(),
        mode: ChatMode::MultiAgent,
        title: "Revenue".into(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        last_updated: "2026-01-02T00:00:00.000Z".into(),
        last_message: messages()[2].content.chars().take(200).collect(),
        message_count: 3,
        usage: spent(),
    }
}

#[tokio::test]
async fn a_chat_in_the_old_layout_reads_back_whole_and_takes_a_turn() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client.clone(), table.clone(), None);
    let chat_id = id("old layout");
    put_old_chat(&client, &table, &chat_id).await;
    let expected = messages();
    assert_eq!(expected[2].content.len(), PART_BYTES + 2000);

    let (record, msgs) = store.load("alice", &chat_id).await.unwrap();
    assert_eq!(record, old_record(&chat_id));
    assert_eq!(msgs, expected);

    let all = store
        .load_for_turn("alice", &chat_id, HistoryBudget::UNLIMITED)
        .await
        .unwrap();
    assert_eq!(
        (&all.record, &all.messages),
        (&old_record(&chat_id), &expected)
    );
    assert_eq!(
        all.items_read,
        1 + 4,
        "the chat item, then three messages in four items"
    );
    // Read backwards, the long answer's continuation comes before its own item.
    let newest = store
        .load_for_turn("alice", &chat_id, HistoryBudget { tokens: 1 })
        .await
        .unwrap();
    assert_eq!(newest.messages, expected[2..]);

    let paged = pages_of(&store, &chat_id, 1).await;
    assert!(paged.iter().all(|page| page.len() == 1), "{paged:?}");
    let paged = paged.concat();
    assert_eq!(paged, expected);

    let listed = store
        .list("alice", ListRequest::first(ChatMode::MultiAgent, 10))
        .await
        .unwrap();
    assert_eq!(listed.items, [old_record(&chat_id)]);

    // A turn as of that read: the chat item counts it, its token among the old ones, its spending added.
    let turn = [StoredMessage::new(
        "m3",
        Role::User,
        "and last year?",
        "10:16 AM",
    )];
    let after = append_after_read(&store, &chat_id, &all, &turn).await;
    assert_eq!(after.message_count, 4);
    assert_eq!(after.usage.tokens.input_tokens, 20);
    let meta = get(&client, &table, &chat_id, "META").await;
    assert_eq!(meta["version"], n(2));
    assert_eq!(meta["messageCount"], n(4));
    let AttributeValue::L(writes) = &meta["writes"] else {
        panic!("writes is a list: {:?}", meta["writes"])
    };
    assert_eq!(writes.len(), 3);
    assert_eq!(writes[..2], [s("00000000000000a1"), s("00000000000000a2")]);
    let tokens: u64 = expected
        .iter()
        .chain(&turn)
        .map(estimate_stored_tokens)
        .sum();
    assert_eq!(meta["historyTokens"], n(tokens));
    let cost: f64 = meta["costUsd"].as_n().unwrap().parse().unwrap();
    assert!((cost - 0.002).abs() < 1e-12, "{cost}");
    let (record, msgs) = store.load("alice", &chat_id).await.unwrap();
    assert_eq!(msgs, [expected.as_slice(), &turn].concat());
    assert_eq!(record.usage.tokens.cache_read_input_tokens, 40);
}

/// An old chat takes turns as it is (its messages after its chat item: a turn reads the chat item, then its
/// messages), until a write rewrites it into a new generation, whose messages sort before the chat item: from then on a
/// turn reads in one query.
#[tokio::test]
async fn an_old_chat_takes_turns_and_a_rewrite_moves_its_messages_before_its_chat_item() {
    let timeouts = StoreTimeouts {
        connect: Duration::from_secs(2),
        attempt: Duration::from_secs(5),
        operation: Duration::from_secs(10),
    };
    let (store, _, proxy, (client, table)) = support::behind_proxy(timeouts).await;
    let chat_id = id("moved");
    put_old_chat(&client, &table, &chat_id).await;
    let old = messages();
    let calls = |from: usize| proxy.operations()[from..].join(" ");
    let read_whole = || store.load_for_turn("alice", &chat_id, HistoryBudget::UNLIMITED);

    // A turn of the old chat: two queries (the chat item, then its messages after it) and the write.
    let before = proxy.operations().len();
    let loaded = read_whole().await.unwrap();
    assert_eq!(loaded.messages, old);
    let turn = vec![
        StoredMessage {
            id: "q".into(),
            ..old[0].clone()
        },
        StoredMessage {
            id: "a".into(),
            ..old[1].clone()
        },
    ];
    append_after_read(&store, &chat_id, &loaded, &turn).await;
    assert_eq!(calls(before), "Query Query TransactWriteItems");
    assert_eq!(
        messages_under(&client, &table, &chat_id, "MSG#").await,
        4 + 2
    );
    let kept = [old.as_slice(), &turn].concat();

    // An append too large for one transaction rewrites the chat whole, into a new generation before the chat item;
    // the old one's items go.
    let large: Vec<StoredMessage> = (0..120)
        .map(|i| StoredMessage {
            id: format!("large {i}"),
            content: format!("large {i}"),
            ..old[1].clone()
        })
        .collect();
    let record = store.append("alice", &chat_id, &large).await.unwrap();
    assert_eq!(record.message_count, 5 + 120);
    let AttributeValue::S(generation) = &get(&client, &table, &chat_id, "META").await["generation"]
    else {
        panic!("a generation")
    };
    assert!(generation.starts_with('h'), "{generation}");
    assert_eq!(messages_under(&client, &table, &chat_id, "MSG#").await, 0);
    assert_eq!(
        messages_under(&client, &table, &chat_id, &format!("M#{generation}#")).await,
        126,
        "125 messages, the long one over two items"
    );
    let all = [kept.as_slice(), &large].concat();

    // Every read as before, and a turn in one query and one write.
    let (record, msgs) = store.load("alice", &chat_id).await.unwrap();
    assert_eq!((record.message_count, &msgs), (125, &all));
    let paged = pages_of(&store, &chat_id, 50).await;
    assert_eq!(paged.concat(), all);
    let before = proxy.operations().len();
    let loaded = read_whole().await.unwrap();
    assert_eq!(loaded.messages, all);
    assert_eq!(loaded.items_read, 1 + 126);
    append_after_read(&store, &chat_id, &loaded, &turn).await;
    assert_eq!(calls(before), "Query TransactWriteItems");
    let (record, msgs) = store.load("alice", &chat_id).await.unwrap();
    assert_eq!(record.message_count, 127);
    assert_eq!(msgs, [all.as_slice(), &turn].concat());
    store.delete("alice", &chat_id).await.unwrap();
    // Nothing is left: every key under a chat starts with `M` (`META`, `M#…`, `MSG#…`).
    assert_eq!(messages_under(&client, &table, &chat_id, "M").await, 0);
}

/// How many items under alice's chat have a sort key that starts with `prefix`.
/// Alice's `turn` added to her chat `chat_id` as of the read `read`, with [`spent`].
async fn append_after_read(
    store: &DynamoStore,
    chat_id: &str,
    read: &LoadedChat,
    turn: &[StoredMessage],
) -> ChatRecord {
    let write = TurnWrite {
        mark: read.mark.as_ref(),
        messages: turn,
        spent: &spent(),
    };
    store.append_after("alice", chat_id, write).await.unwrap()
}

/// Every page of alice's chat `chat_id`, `size` messages a page.
async fn pages_of(store: &DynamoStore, chat_id: &str, size: usize) -> Vec<Vec<StoredMessage>> {
    all_pages(|cursor| async move {
        let page = store.load_page(
            "alice",
            chat_id,
            PageRequest::unbounded(cursor.as_deref(), size),
        );
        page.await.unwrap()
    })
    .await
}

async fn messages_under(client: &Client, table: &str, chat_id: &str, prefix: &str) -> i32 {
    client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
        .expression_attribute_values(":pk", s(format!("CHAT#{chat_id}#alice")))
        .expression_attribute_values(":prefix", s(prefix))
        .send()
        .await
        .unwrap()
        .count()
}

/// The stored item under alice's chat with sort key `sk`.
async fn get(
    client: &Client,
    table: &str,
    chat_id: &str,
    sk: &str,
) -> std::collections::HashMap<String, AttributeValue> {
    client
        .get_item()
        .table_name(table)
        .key("pk", s(format!("CHAT#{chat_id}#alice")))
        .key("sk", s(sk))
        .send()
        .await
        .unwrap()
        .item
        .unwrap_or_else(|| panic!("no item {sk}"))
}

/// An item's attribute names, each with its type.
fn layout(
    item: &std::collections::HashMap<String, AttributeValue>,
) -> BTreeMap<&str, &'static str> {
    item.iter()
        .map(|(name, value)| {
            let kind = match value {
                AttributeValue::S(_) => "S",
                AttributeValue::N(_) => "N",
                AttributeValue::L(_) => "L",
                other => panic!("{name} is {other:?}"),
            };
            (name.as_str(), kind)
        })
        .collect()
}

fn expected_layout(names: &[(&'static str, &'static str)]) -> BTreeMap<&'static str, &'static str> {
    names.iter().copied().collect()
}

#[tokio::test]
async fn the_store_writes_the_same_layout_as_before() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let store = DynamoStore::new(client.clone(), table.clone(), Some(30));
    let chat_id = id("new layout");
    let chat = ChatRecord {
        usage: UsageTotals {
            tokens: TokenUsage {
                input_tokens: 3,
                ..Default::default()
            },
            cost_usd: Some(0.5),
        },
        ..old_record(&chat_id)
    };
    let msgs = messages();
    store.create("alice", &chat, &msgs).await.unwrap();

    let meta = get(&client, &table, &chat_id, "META").await;
    assert_eq!(
        layout(&meta),
        expected_layout(&[
            ("pk", "S"),
            ("sk", "S"),
            ("chatId", "S"),
            ("owner", "S"),
            ("mode", "S"),
            ("title", "S"),
            ("createdAt", "S"),
            ("lastUpdated", "S"),
            ("lastMessage", "S"),
            ("messageCount", "N"),
            ("generation", "S"),
            ("version", "N"),
            ("writes", "L"),
            ("gsi1pk", "S"),
            ("gsi1sk", "S"),
            ("expiresAt", "N"),
            ("historyTokens", "N"),
            ("inputTokens", "N"),
            ("outputTokens", "N"),
            ("totalTokens", "N"),
            ("cacheReadInputTokens", "N"),
            ("cacheWriteInputTokens", "N"),
            ("costUsd", "N"),
        ])
    );
    assert_eq!(
        (&meta["chatId"], &meta["owner"], &meta["mode"]),
        (&s(&chat_id), &s("alice"), &s("multiAgent"))
    );
    assert_eq!(meta["gsi1pk"], s("LIST#multiAgent#alice"));
    assert_eq!(
        meta["gsi1sk"],
        s(format!("2026-01-02T00:00:00.000Z#{chat_id}"))
    );
    assert_eq!((&meta["messageCount"], &meta["version"]), (&n(3), &n(0)));
    assert_eq!(
        (&meta["inputTokens"], &meta["outputTokens"]),
        (&n(3), &n(0))
    );
    let cost: f64 = meta["costUsd"].as_n().unwrap().parse().unwrap();
    assert_eq!(cost, 0.5);
    let AttributeValue::S(generation) = &meta["generation"] else {
        panic!("a generation")
    };
    // Changed by design: a new generation is `h` and 16 hex digits, and its messages sort before the chat item
    // (`M#…`, where they were `MSG#…`), so that one query backwards from it reads a turn's chat. Everything else
    // of the items is as before.
    assert!(
        generation.len() == 17
            && generation.starts_with('h')
            && generation[1..].chars().all(|c| c.is_ascii_hexdigit()),
        "{generation}"
    );
    let sk = |seq: u64| format!("M#{generation}#{seq:09}");

    let own = [
        ("pk", "S"),
        ("sk", "S"),
        ("id", "S"),
        ("role", "S"),
        ("content", "S"),
        ("timestamp", "S"),
        ("expiresAt", "N"),
    ];
    let first = get(&client, &table, &chat_id, &sk(0)).await;
    assert_eq!(
        layout(&first),
        expected_layout(&[own.as_slice(), &[("files", "S")]].concat())
    );
    assert_eq!(first["files"], s(serde_json::to_string(&files()).unwrap()));
    assert_eq!(first["role"], s("user"));
    let second = get(&client, &table, &chat_id, &sk(1)).await;
    assert_eq!(
        layout(&second),
        expected_layout(
            &[
                own.as_slice(),
                &[("agentIdentifier", "S"), ("agentName", "S"), ("tools", "S")]
            ]
            .concat()
        )
    );
    assert_eq!(second["tools"], s(serde_json::to_string(&tools()).unwrap()));
    assert_eq!(second["role"], s("assistant"));
    let third = get(&client, &table, &chat_id, &sk(2)).await;
    assert_eq!(
        layout(&third),
        expected_layout(&[own.as_slice(), &[("parts", "N")]].concat())
    );
    assert_eq!(third["parts"], n(2));
    let continuation = get(&client, &table, &chat_id, &format!("{}#p001", sk(2))).await;
    assert_eq!(
        layout(&continuation),
        expected_layout(&[
            ("pk", "S"),
            ("sk", "S"),
            ("content", "S"),
            ("expiresAt", "N")
        ])
    );
    let (head, tail) = msgs[2].content.split_at(PART_BYTES);
    assert_eq!(
        (&third["content"], &continuation["content"]),
        (&s(head), &s(tail))
    );
    assert_eq!(third["expiresAt"], meta["expiresAt"]);
}
