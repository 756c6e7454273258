//! The Chat UI's API: Semantic-Kernel-style `ChatMessageContent` answers and the `/chat-history` shapes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Answer, Field, Role, WireMessage};

/// A chat request from the Chat UI: the whole conversation, newest last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<WireMessage>,
    #[serde(
        rename = "sessionState",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_camel: Field<Value>,
    #[serde(
        rename = "session_state",
        default,
        skip_serializing_if = "Field::is_missing"
    )]
    pub session_state_snake: Field<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message of the Chat UI's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChatMessageContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_name: Option<String>,
    pub role: RoleLabel,
    pub items: Vec<ContentItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MessageMetadata>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleLabel {
    #[serde(rename = "Label")]
    pub label: String,
}

/// A content item; the Chat UI shows `TextContent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentItem {
    #[serde(rename = "$type")]
    pub kind: String,
    #[serde(rename = "Text")]
    pub text: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ContentItem {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            kind: "TextContent".to_string(),
            text: text.into(),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MessageMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UiUsage>,
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub finish_reason: Field<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UiUsage {
    pub output_token_count: u64,
    pub input_token_count: u64,
    pub total_token_count: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatMessageContent {
    /// The assistant's answer as the Chat UI shows it; the chat's session state travels in
    /// `Metadata.SessionState`, for a client that wants to continue the chat.
    pub fn from_answer(answer: &Answer) -> Self {
        let mut extra = Map::new();
        if let Some(state) = &answer.session_state {
            extra.insert("SessionState".into(), state.clone());
        }
        Self {
            author_name: None,
            role: RoleLabel {
                label: "Assistant".to_string(),
            },
            items: vec![ContentItem::text(answer.content.clone())],
            model_id: Some(answer.model.clone()),
            metadata: Some(MessageMetadata {
                id: Some(answer.id.clone()),
                created_at: Some(answer.created_at.clone()),
                usage: Some(UiUsage {
                    output_token_count: answer.usage.output_tokens,
                    input_token_count: answer.usage.input_tokens,
                    total_token_count: answer.usage.total_tokens,
                    extra: Map::new(),
                }),
                finish_reason: Field::Value(answer.finish_reason.semantic_kernel().to_string()),
                extra,
            }),
            extra: Map::new(),
        }
    }
}

/// What an agent's message carries, for [`ChatMessageContent::agent`].
#[derive(Debug, Clone, PartialEq)]
pub struct AgentReply<'a> {
    pub agent: &'a str,
    pub text: &'a str,
    pub model: &'a str,
    pub id: &'a str,
    pub created_at: &'a str,
    pub usage: crate::TokenUsage,
    pub finish_reason: crate::FinishReason,
    pub session_state: Option<&'a Value>,
}

impl ChatMessageContent {
    /// One agent's message of a multi-agent round.
    pub fn agent(reply: &AgentReply<'_>) -> Self {
        let mut extra = Map::new();
        if let Some(state) = reply.session_state {
            extra.insert("SessionState".into(), state.clone());
        }
        Self {
            author_name: Some(reply.agent.to_string()),
            role: RoleLabel {
                label: "Assistant".to_string(),
            },
            items: vec![ContentItem::text(reply.text)],
            model_id: Some(reply.model.to_string()),
            metadata: Some(MessageMetadata {
                id: Some(reply.id.to_string()),
                created_at: Some(reply.created_at.to_string()),
                usage: Some(UiUsage {
                    output_token_count: reply.usage.output_tokens,
                    input_token_count: reply.usage.input_tokens,
                    total_token_count: reply.usage.total_tokens,
                    extra: Map::new(),
                }),
                finish_reason: Field::Value(reply.finish_reason.semantic_kernel().to_string()),
                extra,
            }),
            extra: Map::new(),
        }
    }

    /// The user's message, echoed first in a batch answer.
    pub fn user(text: &str, id: &str, created_at: &str) -> Self {
        Self {
            author_name: None,
            role: RoleLabel {
                label: "user".to_string(),
            },
            items: vec![ContentItem::text(text)],
            model_id: None,
            metadata: Some(MessageMetadata {
                id: Some(id.to_string()),
                created_at: Some(created_at.to_string()),
                usage: None,
                finish_reason: Field::Missing,
                extra: Map::new(),
            }),
            extra: Map::new(),
        }
    }
}

/// Which shape the Chat UI's chat answers take (`CHAT_UI_REPLY`). The page's documented revision reads the spec's
/// arrays of [`ChatMessageContent`]; its current revision reads `{"messages": [...]}` of its own message objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyShape {
    #[default]
    Spec,
    Messages,
}

impl std::str::FromStr for ReplyShape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "spec" => Ok(ReplyShape::Spec),
            "messages" => Ok(ReplyShape::Messages),
            other => Err(format!(r#"expected "spec" or "messages", got {other:?}"#)),
        }
    }
}

/// A Chat UI chat answer in either shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum UiReply {
    Spec(Vec<ChatMessageContent>),
    Messages(MessagesReply),
}

impl UiReply {
    /// The answer of the standard chat.
    pub fn from_answer(answer: &Answer, shape: ReplyShape) -> Self {
        match shape {
            ReplyShape::Spec => UiReply::Spec(vec![ChatMessageContent::from_answer(answer)]),
            ReplyShape::Messages => UiReply::Messages(MessagesReply::from_answer(answer)),
        }
    }
}

/// The current revision's answer: the new messages, as the page shows and saves them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesReply {
    pub messages: Vec<HistoryMessage>,
}

impl MessagesReply {
    /// The assistant's answer as the page's own message object.
    pub fn from_answer(answer: &Answer) -> Self {
        Self {
            messages: vec![HistoryMessage {
                id: answer.id.clone(),
                content: answer.content.clone(),
                role: Role::Assistant,
                timestamp: display_time(answer.created),
                agent_identifier: None,
                agent_name: None,
                extra: Map::new(),
            }],
        }
    }
}

/// A time as the Chat UI shows a message's: `10:15 AM` (two-digit hour, UTC: the backend does not know the
/// reader's zone). The page stamps its own messages this way and shows a message's `timestamp` as it is.
pub fn display_time(unix_seconds: i64) -> String {
    let minutes = unix_seconds.rem_euclid(86_400) / 60;
    let (hour, minute) = (minutes / 60, minutes % 60);
    let half = if hour < 12 { "AM" } else { "PM" };
    let hour12 = match hour % 12 {
        0 => 12,
        h => h,
    };
    format!("{hour12:02}:{minute:02} {half}")
}

/// One server-sent event carrying `value` as its data: `data: {…}\n\n`.
pub fn sse_event<T: Serialize>(value: &T) -> Vec<u8> {
    let mut event = b"data: ".to_vec();
    event.extend(serde_json::to_vec(value).expect("wire types always serialize"));
    event.extend_from_slice(b"\n\n");
    event
}

/// A chat's mode in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatMode {
    #[serde(rename = "standard")]
    Standard,
    #[serde(rename = "multiAgent")]
    MultiAgent,
}

/// One item of `GET /chat-history`, and the answer of create and replace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    pub id: String,
    pub title: String,
    pub last_message: String,
    pub last_updated: String,
    pub message_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ChatMode>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message of `GET /chat-history/{id}/messages` and of a replace request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryMessage {
    #[serde(default)]
    pub id: String,
    pub content: String,
    pub role: Role,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `POST /chat-history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateChatRequest {
    pub mode: ChatMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Finds the Chat UI's own notes in a request's `messages`: the UI shows an error it met as a `system` message and
/// sends it back with every later chat and save, but it is no part of the conversation. Each note is relabelled a
/// user message, so that it is checked with the same types as any message (one schema for every message) before
/// [`drop_ui_notes`] takes it out. Returns the notes' positions.
pub(crate) fn mark_ui_notes(body: &mut Value) -> Vec<usize> {
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (position, message) in messages.iter_mut().enumerate() {
        if let Some(role) = message.get_mut("role")
            && role.as_str() == Some("system")
        {
            *role = Value::String("user".into());
            notes.push(position);
        }
    }
    notes
}

/// Takes the notes [`mark_ui_notes`] found out of the parsed messages. Returns the messages kept and the original
/// position of each, so that a later error can name the field as the client sent it.
pub(crate) fn drop_ui_notes<T>(messages: Vec<T>, notes: &[usize]) -> (Vec<T>, Vec<usize>) {
    let (kept, messages) = messages
        .into_iter()
        .enumerate()
        .filter(|(i, _)| notes.binary_search(i).is_err())
        .unzip();
    (messages, kept)
}

/// `PUT /chat-history/{id}`: the chat's messages, replaced whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaceMessagesRequest {
    pub messages: Vec<HistoryMessage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_times_are_the_pages_twelve_hour_form() {
        // 2025-04-03T00:05:00Z, 09:45, 12:00 and 23:59.
        assert_eq!(display_time(1_743_638_700), "12:05 AM");
        assert_eq!(display_time(1_743_638_400 + 9 * 3600 + 45 * 60), "09:45 AM");
        assert_eq!(display_time(1_743_638_400 + 12 * 3600), "12:00 PM");
        assert_eq!(
            display_time(1_743_638_400 + 23 * 3600 + 59 * 60 + 59),
            "11:59 PM"
        );
    }

    #[test]
    fn the_reply_shape_is_spec_or_messages() {
        assert_eq!("spec".parse(), Ok(ReplyShape::Spec));
        assert_eq!(" messages ".parse(), Ok(ReplyShape::Messages));
        assert!("Messages".parse::<ReplyShape>().is_err());
    }
}
