//! Where the store's items sit (see [`crate::table`]): the keys of a chat, of its messages and of their
//! continuations, made so that one query reads them in order, and the attribute values keys are made of.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use chat_core::ChatMode;
use time::OffsetDateTime;

/// An item as the SDK takes and gives it.
pub(super) type Item = HashMap<String, AttributeValue>;

/// The sort key of the chat item, which sorts before its messages' (`MSG#…`).
pub(super) const META: &str = "META";
/// The start of every message item's sort key, of whatever generation.
pub(super) const ALL_MESSAGES: &str = "MSG#";

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn chat_pk(owner: &str, chat_id: &str) -> String {
    format!("CHAT#{chat_id}#{owner}")
}

pub(super) fn list_pk(owner: &str, mode: ChatMode) -> String {
    format!("LIST#{}#{owner}", mode_name(mode))
}

/// The list index's sort key of a chat: most recently updated last, so a backwards query lists newest first.
pub(super) fn list_sk(last_updated: &str, chat_id: &str) -> String {
    format!("{last_updated}#{chat_id}")
}

pub(super) fn message_sk(generation: &str, seq: u64) -> String {
    format!("MSG#{generation}#{seq:09}")
}

/// The start of the sort keys of every item of `generation`.
pub(super) fn generation_prefix(generation: &str) -> String {
    format!("MSG#{generation}#")
}

/// The key of a message's `part`-th continuation: right after the message's own item, before the next message.
pub(super) fn part_sk(generation: &str, seq: u64, part: u32) -> String {
    format!("{}#p{part:03}", message_sk(generation, seq))
}

/// A key after every item of message `seq` (its continuations included) and before the next message's.
pub(super) fn message_end_sk(generation: &str, seq: u64) -> String {
    format!("{}#q", message_sk(generation, seq))
}

/// Where an item of `generation` sits: its message's number and which part of it (0 for the message's own item).
pub(super) fn position(sk: &str, generation: &str) -> Option<(u64, u32)> {
    let rest = sk
        .strip_prefix("MSG#")?
        .strip_prefix(generation)?
        .strip_prefix('#')?;
    match rest.split_once("#p") {
        None => Some((rest.parse().ok()?, 0)),
        Some((seq, part)) => Some((seq.parse().ok()?, part.parse().ok()?)),
    }
}

pub(super) fn mode_name(mode: ChatMode) -> &'static str {
    match mode {
        ChatMode::Standard => "standard",
        ChatMode::MultiAgent => "multiAgent",
    }
}

/// The mode a chat item names; anything but `multiAgent` is standard.
pub(super) fn mode_named(name: &str) -> ChatMode {
    match name {
        "multiAgent" => ChatMode::MultiAgent,
        _ => ChatMode::Standard,
    }
}

pub(super) fn now_unix() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(message_sk("g", 7).starts_with(&generation_prefix("g")));
        assert!(generation_prefix("g").starts_with(ALL_MESSAGES));
    }
}
