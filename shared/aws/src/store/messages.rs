//! A message's items, as structs in the attribute names and types the table has always had: the message's own
//! item, holding the first part of its text (and `parts` when there are more, as DynamoDB's items are at most
//! 400 KB), one item per further part, and their assembly back into messages as a query reads them.

use chat_core::{Role, StoredMessage};
use serde::{Deserialize, Serialize};

use super::keys::{message_sk, part_sk, position};
use crate::dynamo::Item;
use crate::table::SORT_KEY;

/// How much of a message's text one item holds: DynamoDB's items are at most 400 KB, and the message's other
/// attributes get what is left.
pub(super) const PART_BYTES: usize = 300 * 1024;

/// A message's own item. Absent attributes read as empty.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MessageItem {
    pk: String,
    sk: String,
    id: String,
    role: String,
    /// The first part of the text.
    content: String,
    timestamp: String,
    /// How many items hold the text, when more than this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    parts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_name: Option<String>,
    /// The tools the answer called, as JSON: a list of `{round, id, name, input, output, status}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<String>,
    /// The message's files as JSON: a list of `{name, contentType, size, key}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

/// A further part of a message's text.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartItem {
    #[serde(default)]
    pk: String,
    #[serde(default)]
    sk: String,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

impl MessageItem {
    fn message(self) -> StoredMessage {
        let role = match self.role.as_str() {
            "assistant" => Role::Assistant,
            _ => Role::User,
        };
        StoredMessage::new(self.id, role, self.content, self.timestamp)
            .with_agent_identifier(self.agent_identifier)
            .with_agent_name(self.agent_name)
            .with_files(
                self.files
                    .and_then(|json| serde_json::from_str(&json).ok())
                    .unwrap_or_default(),
            )
            .with_tools(
                self.tools
                    .and_then(|json| serde_json::from_str(&json).ok())
                    .unwrap_or_default(),
            )
    }
}

fn item_of(value: impl Serialize) -> Item {
    serde_dynamo::to_item(value).expect("a message's items always serialize")
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
pub(super) fn message_items(
    pk: &str,
    generation: &str,
    seq: u64,
    m: &StoredMessage,
    expires_at: Option<i64>,
) -> Vec<Item> {
    let parts = split_parts(&m.content);
    let own = MessageItem {
        pk: pk.to_string(),
        sk: message_sk(generation, seq),
        id: m.id.clone(),
        role: m.role.as_str().to_string(),
        content: parts[0].to_string(),
        timestamp: m.timestamp.clone(),
        parts: (parts.len() > 1).then_some(parts.len() as u32),
        agent_identifier: m.agent_identifier.clone(),
        agent_name: m.agent_name.clone(),
        tools: (!m.tools.is_empty())
            .then(|| serde_json::to_string(&m.tools).expect("tool exchanges always serialize")),
        files: (!m.files.is_empty())
            .then(|| serde_json::to_string(&m.files).expect("stored files always serialize")),
        expires_at,
    };
    let mut items = vec![item_of(own)];
    for (k, part) in parts.iter().enumerate().skip(1) {
        items.push(item_of(PartItem {
            pk: pk.to_string(),
            sk: part_sk(generation, seq, k as u32),
            content: part.to_string(),
            expires_at,
        }));
    }
    items
}

/// The items of `messages`, numbered from `first`.
pub(super) fn messages_items(
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

/// Where `item` sits in `generation` (see [`position`]).
pub(super) fn position_of(item: &Item, generation: &str) -> Option<(u64, u32)> {
    position(item.get(SORT_KEY)?.as_s().ok()?, generation)
}

/// Messages put back together from their items, which come in key order: a message's own item, then its
/// continuations. A message whose parts are not all there (its generation being deleted) is left out.
#[derive(Default)]
pub(super) struct Assembly {
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
    pub(super) fn push(&mut self, item: Item, generation: &str) -> Option<(u64, StoredMessage)> {
        let (seq, part) = position_of(&item, generation)?;
        let open = if part == 0 {
            let own: MessageItem = serde_dynamo::from_item(item).ok()?;
            Partial {
                seq,
                parts: own.parts.unwrap_or(1).max(1),
                message: own.message(),
                next: 1,
            }
        } else {
            let mut open = self
                .open
                .take()
                .filter(|o| o.seq == seq && o.next == part)?;
            let continuation: PartItem = serde_dynamo::from_item(item).ok()?;
            open.message.content.push_str(&continuation.content);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write::item_size;

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
    fn a_long_message_is_items_that_assemble_back_whole() {
        let message = StoredMessage::new(
            "m",
            Role::Assistant,
            "x".repeat(PART_BYTES * 2 + 10),
            "10:15 AM",
        )
        .with_agent_name(Some("Analyst".into()));
        let items = message_items("pk", "g", 4, &message, Some(9));
        assert_eq!(items.len(), 3);
        assert!(items.iter().all(|i| item_size(i) < 400 * 1024));
        let mut assembly = Assembly::default();
        assert_eq!(assembly.push(items[0].clone(), "g"), None);
        assert_eq!(assembly.push(items[1].clone(), "g"), None);
        assert_eq!(
            assembly.push(items[2].clone(), "g"),
            Some((4, message.clone()))
        );
        // A continuation without its message (the message's item already deleted) makes nothing.
        let mut partial = Assembly::default();
        assert_eq!(partial.push(items[1].clone(), "g"), None);
        assert_eq!(partial.push(items[2].clone(), "g"), None);
    }
}
