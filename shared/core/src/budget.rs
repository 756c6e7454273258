//! The context budget: how many tokens a prompt may hold, estimated cheaply, so that a conversation never fails
//! for being long and a turn reads no more of its history than it can send.

use crate::{Attachment, FileKind, Message, Role, StoredMessage};

/// Tokens counted for a message beside its text (its role and the blocks' framing).
const MESSAGE_TOKENS: u64 = 4;
/// What an image costs at most: models scale images to about 1.15 megapixels, some 1,600 tokens.
const IMAGE_TOKENS: u64 = 1_600;

/// About how many tokens `text` is, rounded up: a token is three bytes or more of UTF-8 in every tokenizer of the
/// models this backend knows (four characters of English on average), so this over-counts rather than under.
pub fn estimate_tokens(text: &str) -> u64 {
    text.len().div_ceil(3) as u64
}

/// About how many tokens a file of `kind` and `size` bytes is to the model.
pub fn estimate_file_tokens(kind: FileKind, size: u64) -> u64 {
    if kind.is_image() {
        IMAGE_TOKENS
    } else {
        size.div_ceil(3)
    }
}

fn attachment_tokens(file: &Attachment) -> u64 {
    estimate_file_tokens(file.kind, file.size)
}

/// About how many tokens `message` is in a prompt.
pub fn estimate_message_tokens(message: &Message) -> u64 {
    MESSAGE_TOKENS
        + estimate_tokens(&message.text())
        + message.files().map(attachment_tokens).sum::<u64>()
        + message.tools().map(tool_tokens).sum::<u64>()
}

/// About how many tokens a replayed tool call and its result take: the call's input and the result, and the
/// blocks' framing.
fn tool_tokens(exchange: &crate::ToolExchange) -> u64 {
    2 * MESSAGE_TOKENS
        + estimate_tokens(&exchange.name)
        + estimate_tokens(&exchange.input.to_string())
        + estimate_tokens(&exchange.output)
}

/// About how many tokens a whole model call reads: its system prompt, its messages (texts, files, tool calls and
/// results), the passages given as search results and the tools it is offered. What a turn reserves for a call it
/// did not count: a tool round's, or an agent's.
pub fn estimate_request_tokens(request: &crate::ModelRequest) -> u64 {
    let messages: u64 = request
        .messages
        .iter()
        .map(|m| {
            MESSAGE_TOKENS
                + m.texts.iter().map(|t| estimate_tokens(t)).sum::<u64>()
                + m.files.iter().map(attachment_tokens).sum::<u64>()
                + m.tool_uses
                    .iter()
                    .map(|c| {
                        MESSAGE_TOKENS
                            + estimate_tokens(&c.name)
                            + estimate_tokens(&c.input.to_string())
                    })
                    .sum::<u64>()
                + m.tool_results
                    .iter()
                    .map(|r| MESSAGE_TOKENS + estimate_tokens(&r.text))
                    .sum::<u64>()
        })
        .sum();
    let passages: u64 = request
        .search_results
        .iter()
        .map(|p| estimate_tokens(&p.text) + estimate_tokens(&p.citation()) + 2)
        .sum();
    estimate_tokens(&request.system) + messages + passages + estimate_tool_specs(&request.tools)
}

/// About how many tokens offering `tools` adds to a prompt: their names, descriptions and input schemas.
pub(crate) fn estimate_tool_specs(tools: &[crate::ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            estimate_tokens(&t.name)
                + estimate_tokens(&t.description)
                + estimate_tokens(&t.input_schema.to_string())
        })
        .sum()
}

/// About how many tokens the passages take in the prompt.
pub(crate) fn passage_tokens(grounding: Option<&crate::Grounding>) -> u64 {
    grounding
        .iter()
        .flat_map(|g| &g.passages)
        .map(|p| estimate_tokens(&p.text) + estimate_tokens(&p.citation()) + 2)
        .sum()
}

/// About how many tokens a stored message is in a prompt (as [`estimate_message_tokens`] counts it once read).
pub fn estimate_stored_tokens(message: &StoredMessage) -> u64 {
    MESSAGE_TOKENS
        + estimate_tokens(&message.content)
        + message
            .files
            .iter()
            .map(|f| match f.attachment() {
                Some(a) => attachment_tokens(&a),
                None => estimate_tokens(&f.name),
            })
            .sum::<u64>()
        + message.tools.iter().map(tool_tokens).sum::<u64>()
}

/// How much of a chat's newest history a turn reads: the newest messages whose estimated tokens fit `tokens`,
/// and always the newest one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBudget {
    pub tokens: u64,
}

impl HistoryBudget {
    /// No bound: the whole history.
    pub const UNLIMITED: HistoryBudget = HistoryBudget { tokens: u64::MAX };

    /// Where the newest messages of `messages` that fit begin (a store reading newest first stops there).
    pub fn newest(&self, messages: &[StoredMessage]) -> usize {
        let mut spent = 0u64;
        for (i, message) in messages.iter().enumerate().rev() {
            spent = spent.saturating_add(estimate_stored_tokens(message));
            if spent > self.tokens && i + 1 < messages.len() {
                return i + 1;
            }
        }
        0
    }

    /// Whether a store that has read messages worth `spent` tokens (`read` of them) may take one of `next` more.
    pub fn takes(&self, read: usize, spent: u64, next: u64) -> bool {
        read == 0 || spent.saturating_add(next) <= self.tokens
    }
}

/// Leaves out the oldest messages of `conversation` until the rest and `fixed` (the system prompt, the passages)
/// fit `budget`: never the last message, and never half of a question and its answer (an answer whose question is
/// left out goes too, and so does any answer the conversation would start with: models take a conversation that
/// starts with the user). Returns how many were left out, and the estimate of what is kept (with `fixed`).
pub fn fit_conversation(conversation: &mut Vec<Message>, fixed: u64, budget: u64) -> (usize, u64) {
    let tokens: Vec<u64> = conversation.iter().map(estimate_message_tokens).collect();
    let mut total = fixed + tokens.iter().sum::<u64>();
    let last = conversation.len().saturating_sub(1);
    let mut start = 0;
    while total > budget && start < last {
        total -= tokens[start];
        start += 1;
    }
    while start < last && conversation[start].role == Role::Assistant {
        total -= tokens[start];
        start += 1;
    }
    conversation.drain(..start);
    (start, total)
}

/// How many messages a cut of the history moves at a time when prompts are cached: a turn that must leave more out
/// drops the oldest up to the next multiple of this, so the conversation's start stays put for several turns and
/// their prompts share a cached prefix.
pub const CACHE_FRIENDLY_STEP: usize = 8;

/// With `left_out` of the chat's messages already left out before `conversation`, leaves out more of its oldest so
/// that the first one kept is at a multiple of `step` in the whole chat (never the last message, and never an answer
/// first). Returns how many more were left out and their estimated tokens.
pub fn align_conversation(
    conversation: &mut Vec<Message>,
    left_out: usize,
    step: usize,
) -> (usize, u64) {
    if left_out == 0 || step < 2 {
        return (0, 0);
    }
    let last = conversation.len().saturating_sub(1);
    let mut extra = (step - left_out % step) % step;
    extra = extra.min(last);
    while extra < last && conversation[extra].role == Role::Assistant {
        extra += 1;
    }
    let tokens = conversation[..extra]
        .iter()
        .map(estimate_message_tokens)
        .sum();
    conversation.drain(..extra);
    (extra, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stored;

    #[test]
    fn estimates_over_count_english_and_count_every_byte_of_other_scripts() {
        assert_eq!(estimate_tokens(""), 0);
        // 44 bytes: about 10 tokens in any tokenizer; the estimate is above.
        assert_eq!(
            estimate_tokens("The quick brown fox jumps over the lazy dog."),
            15
        );
        assert_eq!(estimate_tokens("日本語"), 3);
    }

    #[test]
    fn the_newest_messages_that_fit_are_read_and_always_the_newest_one() {
        let messages: Vec<_> = (0..10)
            .map(|i| {
                stored(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    &"x".repeat(30),
                )
            })
            .collect();
        // Each is 4 + 10 = 14 tokens.
        assert_eq!(HistoryBudget { tokens: 28 }.newest(&messages), 8);
        assert_eq!(HistoryBudget { tokens: 41 }.newest(&messages), 8);
        assert_eq!(HistoryBudget { tokens: 1 }.newest(&messages), 9);
        assert_eq!(HistoryBudget::UNLIMITED.newest(&messages), 0);
    }

    #[test]
    fn a_cut_moves_in_steps_so_the_start_stays_put() {
        let m = |i: usize| {
            Message::new(
                if i.is_multiple_of(2) {
                    Role::User
                } else {
                    Role::Assistant
                },
                format!("m{i}"),
            )
        };
        // 13 left out already: 3 more make 16, a multiple of 8.
        let mut conversation: Vec<Message> = (13..30).map(m).collect();
        let (extra, _) = align_conversation(&mut conversation, 13, 8);
        assert_eq!(extra, 3);
        assert_eq!(conversation[0].text(), "m16");
        // Already aligned, or nothing left out: nothing more.
        assert_eq!(align_conversation(&mut conversation, 16, 8).0, 0);
        let mut short: Vec<Message> = (0..5).map(m).collect();
        assert_eq!(align_conversation(&mut short, 0, 8).0, 0);
        // Never the question.
        let mut one = vec![m(14)];
        assert_eq!(align_conversation(&mut one, 13, 8).0, 0);
    }

    #[test]
    fn fitting_leaves_out_the_oldest_pairs_and_never_the_question() {
        let m = |role, n| Message::new(role, "y".repeat(n));
        let mut conversation = vec![
            m(Role::User, 30),
            m(Role::Assistant, 30),
            m(Role::User, 30),
            m(Role::Assistant, 30),
            m(Role::User, 30),
        ];
        // 5 × 14 = 70 with nothing fixed; 10 fixed: 80. A budget of 60 leaves out the first pair.
        let (left_out, kept) = fit_conversation(&mut conversation, 10, 60);
        assert_eq!((left_out, kept), (2, 52));
        assert_eq!(conversation.len(), 3);
        // A budget that the first user message alone would exceed takes its answer with it.
        let mut conversation = vec![m(Role::User, 30), m(Role::Assistant, 30), m(Role::User, 30)];
        let (left_out, _) = fit_conversation(&mut conversation, 0, 30);
        assert_eq!(left_out, 2);
        assert_eq!(conversation[0].role, Role::User);
        // The question stays, however long.
        let mut conversation = vec![m(Role::User, 3000)];
        assert_eq!(fit_conversation(&mut conversation, 0, 10).0, 0);
    }
}
