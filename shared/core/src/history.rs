//! The history API's shapes of what the store holds: a chat as a list item, a message as the Chat UI shows it.

use chat_protocol::chat_ui::{ChatSummary, HistoryMessage};
use serde_json::Map;

use crate::{ChatRecord, StoredMessage};

/// A chat as `GET /chat-history` lists it; `with_mode` adds its mode (as the replace answer shows it).
pub fn summary(record: &ChatRecord, with_mode: bool) -> ChatSummary {
    ChatSummary {
        id: record.id.clone(),
        title: record.title.clone(),
        last_message: record.last_message.clone(),
        last_updated: record.last_updated.clone(),
        message_count: record.message_count,
        mode: with_mode.then_some(record.mode),
        extra: Map::new(),
    }
}

pub fn history_message(m: &StoredMessage) -> HistoryMessage {
    HistoryMessage {
        id: m.id.clone(),
        content: m.content.clone(),
        role: m.role,
        timestamp: m.timestamp.clone(),
        agent_identifier: m.agent_identifier.clone(),
        agent_name: m.agent_name.clone(),
        extra: Map::new(),
    }
}

/// A message a client sends to replace a chat's messages; a missing id or time (`shown_at`, as the Chat UI shows
/// times) is filled in.
pub fn stored_message(m: HistoryMessage, shown_at: &str) -> StoredMessage {
    StoredMessage {
        id: if m.id.trim().is_empty() {
            uuid::Uuid::new_v4().simple().to_string()
        } else {
            m.id
        },
        role: m.role,
        content: m.content,
        timestamp: if m.timestamp.trim().is_empty() {
            shown_at.to_string()
        } else {
            m.timestamp
        },
        // The Chat UI saves an agent's message with its name only and reads `agentIdentifier` back; agents'
        // identifiers are their names here.
        agent_identifier: m.agent_identifier.or_else(|| m.agent_name.clone()),
        agent_name: m.agent_name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chat_protocol::Role;

    #[test]
    fn an_agent_message_saved_by_name_reads_back_with_its_identifier() {
        let saved: HistoryMessage = serde_json::from_value(serde_json::json!({
            "id": "b", "content": "Requirements", "role": "assistant", "agentName": "BusinessAnalyst"
        }))
        .unwrap();
        let stored = stored_message(saved, "2026-11-22T06:00:00.000Z");
        assert_eq!(stored.role, Role::Assistant);
        let back = history_message(&stored);
        assert_eq!(back.agent_identifier.as_deref(), Some("BusinessAnalyst"));
        assert_eq!(back.agent_name.as_deref(), Some("BusinessAnalyst"));
        assert_eq!(back.timestamp, "2026-11-22T06:00:00.000Z");
    }
}
