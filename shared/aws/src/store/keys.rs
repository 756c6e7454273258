//! Where the store's items sit (see [`crate::table`]): the keys of a chat, of its messages and of their
//! continuations, made so that one query reads them in order, and the attribute values keys are made of.
//!
//! A chat's messages sit before its chat item (`M#…`, as `'#'` sorts before `'E'`), so that one query backwards from
//! `META` reads the chat item and then the newest messages: a turn's whole read. Generations written before that
//! (whose token is 16 hex digits) keep their messages after it (`MSG#…`) and are read as they always were, until a
//! rewrite moves the chat to a new generation; the generation's token tells which (see [`new_generation`]).

use chat_core::ChatMode;
use time::OffsetDateTime;

use super::idempotency::new_token;
use crate::dynamo::Item;
use crate::table::item_key;

/// The sort key of the chat item: after its messages (`M#…`), before those of generations written before (`MSG#…`).
pub(super) const META: &str = "META";
/// The start of the sort keys of the messages of a generation that sorts before the chat item.
pub(super) const MESSAGES_BEFORE_META: &str = "M#";
/// The start of the sort keys of the messages of a generation written before messages sorted before the chat item
/// (one whose token is 16 hex digits).
const MESSAGES_AFTER_META: &str = "MSG#";
/// The starts of every message item's sort key, of whatever generation.
pub(super) const ALL_MESSAGES: [&str; 2] = [MESSAGES_BEFORE_META, MESSAGES_AFTER_META];
/// How a generation whose messages sort before the chat item starts: not a hex digit, so no generation written
/// before (16 hex digits) does.
const BEFORE_META_MARK: char = 'h';

pub(super) fn chat_pk(owner: &str, chat_id: &str) -> String {
    format!("CHAT#{chat_id}#{owner}")
}

/// The key of the chat item of `pk` (a [`chat_pk`]).
pub(super) fn chat_item_key(pk: &str) -> Item {
    item_key(pk, META)
}

pub(super) fn list_pk(owner: &str, mode: ChatMode) -> String {
    format!("LIST#{}#{owner}", mode_name(mode))
}

/// The list index's sort key of a chat: most recently updated last, so a backwards query lists newest first.
pub(super) fn list_sk(last_updated: &str, chat_id: &str) -> String {
    format!("{last_updated}#{chat_id}")
}

/// A new generation's token: random, so that two writes never share keys, and marked as one whose messages sort
/// before the chat item.
pub(super) fn new_generation() -> String {
    format!("{BEFORE_META_MARK}{}", new_token())
}

/// Whether `generation`'s messages sort before the chat item, where a query backwards from it reads them.
pub(super) fn sorts_before_meta(generation: &str) -> bool {
    generation.starts_with(BEFORE_META_MARK)
}

/// The start of every message key of `generation`, before the generation.
fn messages_start(generation: &str) -> &'static str {
    if sorts_before_meta(generation) {
        MESSAGES_BEFORE_META
    } else {
        MESSAGES_AFTER_META
    }
}

pub(super) fn message_sk(generation: &str, seq: u64) -> String {
    format!("{}{seq:09}", generation_prefix(generation))
}

/// The start of the sort keys of every item of `generation`.
pub(super) fn generation_prefix(generation: &str) -> String {
    format!("{}{generation}#", messages_start(generation))
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
        .strip_prefix(messages_start(generation))?
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
        for g in ["0123456789abcdef", new_generation().as_str()] {
            let mut keys = vec![
                message_sk(g, 2),
                part_sk(g, 1, 2),
                message_sk(g, 10),
                part_sk(g, 1, 1),
                message_sk(g, 1),
                message_end_sk(g, 1),
            ];
            keys.sort();
            assert_eq!(
                keys,
                [
                    message_sk(g, 1),
                    part_sk(g, 1, 1),
                    part_sk(g, 1, 2),
                    message_end_sk(g, 1),
                    message_sk(g, 2),
                    message_sk(g, 10),
                ]
            );
            assert_eq!(position(&part_sk(g, 7, 3), g), Some((7, 3)));
            assert_eq!(position(&message_sk(g, 7), g), Some((7, 0)));
            assert_eq!(position(&message_sk("hffff", 7), g), None);
            assert_eq!(position(&message_sk("ffff", 7), g), None);
            assert!(message_sk(g, 7).starts_with(&generation_prefix(g)));
            assert!(
                ALL_MESSAGES
                    .iter()
                    .any(|p| generation_prefix(g).starts_with(p))
            );
        }
    }

    #[test]
    fn a_new_generations_messages_sort_before_the_chat_item_and_earlier_ones_after() {
        let new = new_generation();
        assert!(sorts_before_meta(&new));
        assert_eq!(new.len(), 17);
        // Every generation written before is 16 hex digits.
        for old in ["0000000000000000", "00000000deadbeef", "ffffffffffffffff"] {
            assert!(!sorts_before_meta(old));
            assert!(message_sk(old, 0).as_str() > META);
            assert!(message_sk(old, 0).starts_with("MSG#"));
        }
        // Between `M#` and `META`: what a query backwards from the chat item reads next.
        for key in [message_sk(&new, 0), part_sk(&new, 999_999_999, 999)] {
            assert!(
                key.as_str() >= MESSAGES_BEFORE_META && key.as_str() < META,
                "{key}"
            );
        }
        assert!(!ALL_MESSAGES.iter().any(|p| META.starts_with(p)));
    }
}
