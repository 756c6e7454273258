//! A chat's messages in pages (`GET /chat-history/{id}`), each as many as its limit and size allow, the next page's
//! position an opaque cursor that holds only while the chat is not replaced; and the run of messages a rewrite
//! starts from.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chat_core::{Page, PageRequest, StoreError, StoredMessage};
use serde::{Deserialize, Serialize};

use super::chat::Meta;
use super::keys::{chat_pk, message_end_sk, message_sk};
use super::messages::Assembly;
use super::{DynamoStore, query_page};
use crate::dynamo::{Item, s};

/// A run of messages read from one generation.
struct Run {
    messages: Vec<StoredMessage>,
    /// The number of the message after the last one read.
    next: u64,
    /// Whether every message up to where the read stopped was there (a replace deleting the generation was not
    /// in the way).
    whole: bool,
}

/// The position of the next page of a chat's messages: the chat, its generation, the next message and where the
/// pages end (the chat's length when the first page was read).
#[derive(Serialize, Deserialize)]
struct MessageCursor {
    chat: String,
    generation: String,
    next: u64,
    end: u64,
}

impl MessageCursor {
    /// As an opaque string.
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_string(self).expect("a cursor always serializes"))
    }

    /// Reads a cursor back: the range it leaves to read. One of another chat, of a chat replaced since, or made up
    /// is refused.
    fn decode(cursor: &str, chat_id: &str, meta: &Meta) -> Result<(u64, u64), StoreError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| StoreError::InvalidCursor)?;
        match serde_json::from_slice::<MessageCursor>(&bytes) {
            Ok(MessageCursor {
                chat,
                generation,
                next,
                end,
            }) if chat == chat_id
                && generation == meta.generation
                && next < end
                && end <= meta.record.message_count =>
            {
                Ok((next, end))
            }
            _ => Err(StoreError::InvalidCursor),
        }
    }
}

impl DynamoStore {
    /// A page of the chat's messages, from the cursor's position or the first.
    pub(super) async fn page_of_messages(
        &self,
        owner: &str,
        chat_id: &str,
        page: PageRequest<'_>,
    ) -> Result<Page<StoredMessage>, StoreError> {
        let pk = chat_pk(owner, chat_id);
        for _ in 0..10 {
            let meta = self.read_meta(owner, chat_id).await?;
            let (from, end) = match page.cursor {
                None => (0, meta.record.message_count),
                Some(cursor) => MessageCursor::decode(cursor, chat_id, &meta)?,
            };
            let run = self
                .read_run(
                    &pk,
                    &meta.generation,
                    (from, end),
                    page.limit.max(1),
                    page.max_bytes,
                )
                .await?;
            // Replaced while being read: the first page starts again; a later page's cursor is refused next time.
            if !run.whole {
                continue;
            }
            let next_cursor = (run.next < end).then(|| {
                MessageCursor {
                    chat: chat_id.to_string(),
                    generation: meta.generation.clone(),
                    next: run.next,
                    end,
                }
                .encode()
            });
            return Ok(Page {
                items: run.messages,
                next_cursor,
            });
        }
        Err(StoreError::Contended)
    }

    /// Every message of the chat's current generation (for a write that rewrites it whole).
    pub(super) async fn load_generation(
        &self,
        pk: &str,
        meta: &Meta,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let run = self
            .read_run(
                pk,
                &meta.generation,
                (0, meta.record.message_count),
                usize::MAX,
                usize::MAX,
            )
            .await?;
        if run.whole {
            Ok(run.messages)
        } else {
            // Replaced meanwhile: this write's version check fails; it tries again from a new read.
            Err(StoreError::Contended)
        }
    }

    /// Messages `from..to` of one generation, in order: all of them, or as many as `limit` and `max_bytes` (of
    /// [`StoredMessage::wire_size`]) allow, at least one. Reads only a little past what it returns.
    async fn read_run(
        &self,
        pk: &str,
        generation: &str,
        (from, to): (u64, u64),
        limit: usize,
        max_bytes: usize,
    ) -> Result<Run, StoreError> {
        let mut run = Run {
            messages: Vec::new(),
            next: from,
            whole: true,
        };
        if from >= to {
            return Ok(run);
        }
        let mut assembly = Assembly::default();
        let mut bytes = 0usize;
        let mut stopped = false;
        let mut start: Option<Item> = None;
        'pages: loop {
            let wanted = limit.saturating_sub(run.messages.len()).clamp(1, 1000);
            let query = self
                .messages_query(pk, generation, (from, to))
                .limit(wanted as i32);
            let out = query_page(query, start.take()).await?;
            for item in out.items.unwrap_or_default() {
                let Some((seq, message)) = assembly.push(item, generation) else {
                    continue;
                };
                if seq != run.next {
                    // A message is missing: the generation is being deleted under a replace.
                    run.whole = false;
                    break 'pages;
                }
                let size = message.wire_size();
                if !run.messages.is_empty() && bytes + size > max_bytes {
                    stopped = true;
                    break 'pages;
                }
                bytes += size;
                run.messages.push(message);
                run.next += 1;
                if run.messages.len() >= limit {
                    stopped = true;
                    break 'pages;
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        if !stopped && run.next < to {
            run.whole = false;
        }
        Ok(run)
    }

    /// A consistent query of the items of messages `from..to` of one generation, their continuations included.
    pub(super) fn messages_query(
        &self,
        pk: &str,
        generation: &str,
        (from, to): (u64, u64),
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.partition_query(pk, "#sk BETWEEN :first AND :last")
            .expression_attribute_values(":first", s(message_sk(generation, from)))
            .expression_attribute_values(":last", s(message_end_sk(generation, to - 1)))
            .consistent_read(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_cursor_is_the_same_text_as_before() {
        // As `json!({"chat", "generation", "next", "end"})` wrote it: pages a client holds keep working.
        let cursor = MessageCursor {
            chat: "c".into(),
            generation: "g".into(),
            next: 2,
            end: 5,
        }
        .encode();
        let value = serde_json::json!({"chat": "c", "generation": "g", "next": 2, "end": 5});
        assert_eq!(cursor, URL_SAFE_NO_PAD.encode(value.to_string()));
    }
}
