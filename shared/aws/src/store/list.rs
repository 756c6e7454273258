//! An owner's chats of one mode, most recently updated first, from the list index, in pages whose next position
//! is an opaque cursor (the index key of the page's last chat) that only that list takes back.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chat_core::{ChatRecord, ListRequest, Page, StoreError};
use serde::{Deserialize, Serialize};

use super::chat::ChatItem;
use super::keys::list_pk;
use super::{DynamoStore, query_page};
use crate::dynamo::{Item, s};
use crate::table::{LIST_INDEX, LIST_PARTITION_KEY};

/// Where a page of the list ends: the table's and the index's key of its last chat, the query's start key of the
/// next page. Its fields are in the order the cursor's JSON has always had them.
#[derive(Serialize, Deserialize)]
struct ListKey {
    pk: String,
    sk: String,
    gsi1pk: String,
    gsi1sk: String,
}

impl ListKey {
    fn of(chat: &ChatItem) -> Self {
        ListKey {
            pk: chat.pk.clone(),
            sk: chat.sk.clone(),
            gsi1pk: chat.gsi1pk.clone(),
            gsi1sk: chat.gsi1sk.clone(),
        }
    }

    /// The position after this chat, as an opaque string.
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_string(self).expect("a cursor always serializes"))
    }

    /// Reads a cursor back, as the query's start key; one from another list (or made up) is refused.
    fn decode(cursor: &str, partition: &str) -> Result<Item, StoreError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| StoreError::InvalidCursor)?;
        let key: ListKey = serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)?;
        if key.gsi1pk != partition {
            return Err(StoreError::InvalidCursor);
        }
        Ok(serde_dynamo::to_item(key).expect("a key always serializes"))
    }
}

impl DynamoStore {
    /// A page of the owner's chats of `mode` (expired chats skipped), newest first.
    pub(super) async fn list_chats(
        &self,
        owner: &str,
        page: ListRequest<'_>,
    ) -> Result<Page<ChatRecord>, StoreError> {
        let limit = page.limit;
        let partition = list_pk(owner, page.mode);
        let start = page
            .cursor
            .map(|c| ListKey::decode(c, &partition))
            .transpose()?;
        let mut chats: Vec<ChatItem> = Vec::new();
        let mut from = start;
        // One more than asked tells whether there is a next page; expired chats are skipped.
        while chats.len() <= limit {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(LIST_INDEX)
                .key_condition_expression("#p = :p")
                .expression_attribute_names("#p", LIST_PARTITION_KEY)
                .expression_attribute_values(":p", s(&partition))
                .scan_index_forward(false)
                .limit((limit + 1 - chats.len()) as i32);
            let out = query_page(query, from.take()).await?;
            for item in out.items.unwrap_or_default() {
                let chat = ChatItem::read(item)?;
                if !chat.expired() {
                    chats.push(chat);
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => from = Some(key),
                _ => break,
            }
        }
        let next_cursor = if chats.len() > limit {
            chats.truncate(limit);
            chats.last().map(|chat| ListKey::of(chat).encode())
        } else {
            None
        };
        let records = chats
            .into_iter()
            .map(|chat| chat.meta().map(|m| m.record))
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items: records,
            next_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{LIST_SORT_KEY, PARTITION_KEY, SORT_KEY};

    #[test]
    fn a_list_cursor_is_the_same_text_as_before_and_reads_back_as_the_start_key() {
        // As the cursor was written from the item's key attributes, in this order: pages a client holds keep
        // working.
        let names = [PARTITION_KEY, SORT_KEY, LIST_PARTITION_KEY, LIST_SORT_KEY];
        let values = ["CHAT#c#alice", "META", "LIST#standard#alice", "2026#c"];
        let key = ListKey {
            pk: values[0].into(),
            sk: values[1].into(),
            gsi1pk: values[2].into(),
            gsi1sk: values[3].into(),
        };
        let json: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .zip(values)
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.into())))
            .collect();
        let cursor = key.encode();
        assert_eq!(
            cursor,
            URL_SAFE_NO_PAD.encode(serde_json::Value::Object(json).to_string())
        );
        let start = ListKey::decode(&cursor, "LIST#standard#alice").unwrap();
        for (name, value) in names.iter().zip(values) {
            assert_eq!(start[*name], s(value), "{name}");
        }
        assert_eq!(start.len(), 4);
        assert_eq!(
            ListKey::decode(&cursor, "LIST#multiAgent#alice").unwrap_err(),
            StoreError::InvalidCursor
        );
        assert_eq!(
            ListKey::decode("bm90IGpzb24", "LIST#standard#alice").unwrap_err(),
            StoreError::InvalidCursor
        );
    }
}
