//! So that no write lands twice: every write carries a random token that the chat item keeps among its latest
//! writes', and a writer whose answer was lost (or whose commit's race may have been with its own earlier attempt)
//! reads the chat item back to tell whether its write landed.

use aws_sdk_dynamodb::types::AttributeValue;
use chat_core::StoreError;

use super::DynamoStore;
use super::chat::Meta;
use super::keys::s;

/// How many of the latest writes' tokens the chat item keeps, so that a writer whose answer was lost can tell
/// whether its write landed (far more writes than can land on one chat while a writer reads back).
pub(super) const WRITES_KEPT: usize = 64;

/// A random token: a write's, or a generation's (see [`super::keys::new_generation`]).
pub(super) fn new_token() -> String {
    format!("{:016x}", fastrand::u64(..))
}

/// The chat's latest write tokens after the write `token`.
pub(super) fn writes_after(meta: &Meta, token: &str) -> AttributeValue {
    let keep = meta.writes.len().min(WRITES_KEPT - 1);
    AttributeValue::L(
        meta.writes[meta.writes.len() - keep..]
            .iter()
            .map(|t| s(t.as_str()))
            .chain([s(token)])
            .collect(),
    )
}

impl DynamoStore {
    /// After a write whose outcome is unknown: the chat as it is now if the write `token` landed.
    pub(super) async fn landed(
        &self,
        owner: &str,
        chat_id: &str,
        token: &str,
    ) -> Result<Option<Meta>, StoreError> {
        match self.read_meta(owner, chat_id).await {
            Ok(meta) => Ok(meta.writes.iter().any(|t| t == token).then_some(meta)),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chat_core::{ChatMode, ChatRecord};

    #[test]
    fn the_chat_keeps_its_latest_write_tokens() {
        let mut meta = Meta {
            record: ChatRecord {
                id: "c".into(),
                mode: ChatMode::Standard,
                title: String::new(),
                created_at: String::new(),
                last_updated: String::new(),
                last_message: String::new(),
                message_count: 0,
                usage: Default::default(),
            },
            generation: "g".into(),
            version: 0,
            expires_at: None,
            writes: Vec::new(),
            history_tokens: None,
        };
        for i in 0..100 {
            let token = format!("t{i}");
            let AttributeValue::L(list) = writes_after(&meta, &token) else {
                panic!("a list")
            };
            meta.writes = list.iter().map(|v| v.as_s().unwrap().clone()).collect();
        }
        assert_eq!(meta.writes.len(), WRITES_KEPT);
        assert_eq!(meta.writes.last().unwrap(), "t99");
        assert_eq!(meta.writes[0], format!("t{}", 100 - WRITES_KEPT));
    }
}
