//! The Chat UI's API: Semantic-Kernel-style `ChatMessageContent` answers and the `/chat-history` shapes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use chat_core::{AgentMessage, AgentRound, ChatMode, ChatRecord, StoredMessage, display_time};

use crate::{Answer, Field, Role, WireMessage, semantic_kernel_finish_reason};

/// A chat request from the Chat UI: the whole conversation, newest last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<WireMessage>,
    #[serde(flatten)]
    pub session_state: crate::SessionState,
    /// The protocol's `context` (its `overrides`): read as the protocol's routes read it, so that an override is
    /// applied or refused here too, never ignored.
    #[serde(default, skip_serializing_if = "Field::is_missing")]
    pub context: Field<crate::RequestContext>,
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
    /// Of `InputTokenCount`, those read from the model's prompt cache.
    #[serde(default, skip_serializing_if = "crate::field::is_zero")]
    pub cache_read_input_token_count: u64,
    /// Of `InputTokenCount`, those written to it.
    #[serde(default, skip_serializing_if = "crate::field::is_zero")]
    pub cache_write_input_token_count: u64,
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
        // `ChatMessageContent` has no context: what the answer cites travels in its metadata.
        if answer.data_points.is_some() {
            extra.insert("Citations".into(), answer.citations.clone().into());
        }
        // Nor thoughts: the model's reasoning, and what the turn cost, travel there too.
        if let Some(reasoning) = &answer.reasoning {
            extra.insert("Reasoning".into(), reasoning.clone().into());
        }
        if let Some(cost) = answer.cost_usd {
            extra.insert("CostUsd".into(), cost.into());
        }
        // And the tools the model called on the way.
        if !answer.tools.is_empty() {
            extra.insert("ToolCalls".into(), tool_calls(&answer.tools));
        }
        let reply = AgentReply {
            agent: "",
            text: &answer.content,
            model: &answer.model,
            id: &answer.id,
            created_at: &answer.created_at,
            usage: answer.usage,
            finish_reason: answer.finish_reason,
            session_state: None,
        };
        Self::assistant(None, &reply, extra)
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
    pub usage: chat_core::TokenUsage,
    pub finish_reason: chat_core::FinishReason,
    pub session_state: Option<&'a Value>,
}

impl ChatMessageContent {
    /// One agent's message of a multi-agent round.
    pub fn agent(reply: &AgentReply<'_>) -> Self {
        let mut extra = Map::new();
        if let Some(state) = reply.session_state {
            extra.insert("SessionState".into(), state.clone());
        }
        Self::assistant(Some(reply.agent.to_string()), reply, extra)
    }

    /// An assistant's message of `reply`'s text, model, id, time, usage and finish reason (not its agent or session
    /// state: the caller's `author_name` and metadata `extra` carry what it shows of them).
    fn assistant(
        author_name: Option<String>,
        reply: &AgentReply<'_>,
        extra: Map<String, Value>,
    ) -> Self {
        Self {
            author_name,
            role: RoleLabel {
                label: "Assistant".to_string(),
            },
            items: vec![ContentItem::text(reply.text)],
            model_id: Some(reply.model.to_string()),
            metadata: Some(MessageMetadata {
                id: Some(reply.id.to_string()),
                created_at: Some(reply.created_at.to_string()),
                usage: Some(reply.usage.into()),
                finish_reason: Field::Value(
                    semantic_kernel_finish_reason(reply.finish_reason).to_string(),
                ),
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
                files: None,
                extra: match answer.data_points {
                    Some(_) => {
                        Map::from_iter([("citations".into(), answer.citations.clone().into())])
                    }
                    None => Map::new(),
                },
            }],
        }
    }
}

/// One server-sent event carrying `value` as its data: `data: {…}\n\n`.
pub use crate::encode::sse_data as sse_event;

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
    /// Every turn's tokens and cost so far (not part of a create or replace request).
    #[serde(default, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub usage: Option<ChatUsage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A chat's running totals, as its history list item shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub total_tokens: u64,
    /// In US dollars; absent when no price was configured or known for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl From<&chat_core::UsageTotals> for ChatUsage {
    fn from(u: &chat_core::UsageTotals) -> Self {
        Self {
            input_tokens: u.tokens.input_tokens,
            output_tokens: u.tokens.output_tokens,
            cache_read_input_tokens: u.tokens.cache_read_input_tokens,
            cache_write_input_tokens: u.tokens.cache_write_input_tokens,
            total_tokens: u.tokens.total_tokens,
            cost_usd: u.cost_usd,
        }
    }
}

impl From<chat_core::TokenUsage> for UiUsage {
    fn from(u: chat_core::TokenUsage) -> Self {
        Self {
            output_token_count: u.output_tokens,
            // Every prompt token, those of the cache included, as Semantic Kernel's usage (OpenAI's) counts them.
            input_token_count: u.input_tokens
                + u.cache_read_input_tokens
                + u.cache_write_input_tokens,
            total_token_count: u.total_tokens,
            cache_read_input_token_count: u.cache_read_input_tokens,
            cache_write_input_token_count: u.cache_write_input_tokens,
            extra: Map::new(),
        }
    }
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
    /// The files the message carried, each with a URL to read it for a few minutes; absent when it had none.
    /// (A save's `files`, whatever they hold, are not read: files come only with a chat turn.)
    #[serde(default, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub files: Option<Vec<ListedFile>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A file of a listed message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedFile {
    pub name: String,
    pub content_type: String,
    pub size: u64,
    pub url: String,
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

/// One agent's message as the Chat UI shows it, with the session state (the chat's id, when the round is stored)
/// as `Metadata.SessionState`.
pub fn agent_event(message: &AgentMessage, state: Option<&Value>) -> ChatMessageContent {
    let mut event = ChatMessageContent::agent(&AgentReply {
        agent: &message.agent,
        text: &message.text,
        model: &message.header.model,
        id: &message.header.id,
        created_at: &message.header.created_at,
        usage: message.usage,
        finish_reason: message.finish_reason,
        session_state: state,
    });
    // As for a standard answer: what a grounded round's message cites travels in its metadata, and its tool calls.
    if let (Some(cited), Some(metadata)) = (&message.citations, event.metadata.as_mut()) {
        metadata
            .extra
            .insert("Citations".into(), cited.clone().into());
    }
    if let (false, Some(metadata)) = (message.tools.is_empty(), event.metadata.as_mut()) {
        metadata
            .extra
            .insert("ToolCalls".into(), tool_calls(&message.tools));
    }
    // A round that ended early (its time limit) says so with the message it ended at.
    if let (Some(ended), Some(metadata)) = (&message.round_ended, event.metadata.as_mut()) {
        metadata
            .extra
            .insert("Thoughts".into(), serde_json::json!([thought_json(ended)]));
    }
    event
}

/// The tools an answer called, as its `Metadata.ToolCalls`: each call's tool, input, status and result.
fn tool_calls(tools: &[chat_core::ToolExchange]) -> Value {
    tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "Name": t.name,
                "Input": t.input,
                "Status": t.status.as_str(),
                "Result": t.output,
            })
        })
        .collect::<Vec<_>>()
        .into()
}

/// One agent's message as the Chat UI's current revision shows and saves it.
pub fn agent_ui_message(message: &AgentMessage) -> HistoryMessage {
    HistoryMessage {
        id: message.header.id.clone(),
        content: message.text.clone(),
        role: Role::Assistant,
        timestamp: message.finished_at.clone(),
        agent_identifier: Some(message.agent.clone()),
        agent_name: Some(message.agent.clone()),
        files: None,
        extra: {
            let mut extra = Map::new();
            if let Some(cited) = &message.citations {
                extra.insert("citations".into(), cited.clone().into());
            }
            if let Some(ended) = &message.round_ended {
                extra.insert("thoughts".into(), serde_json::json!([thought_json(ended)]));
            }
            extra
        },
    }
}

/// A thought as JSON, as `context.thoughts` holds them.
fn thought_json(thought: &chat_core::Thought) -> Value {
    serde_json::json!({
        "title": thought.title,
        "description": thought.description,
        "props": thought.props,
    })
}

/// The agents' messages of a round as the Chat UI's events carry them, with the session state.
pub fn round_events(round: &AgentRound) -> Vec<ChatMessageContent> {
    let state = round.session().state();
    round
        .messages()
        .iter()
        .map(|m| agent_event(m, state.as_ref()))
        .collect()
}

/// A round answered whole: in the spec's shape, the user's message echoed and then each agent's message; in the
/// page's current shape, the agents' messages only (the page has shown the user's already).
pub fn round_reply(round: &AgentRound, shape: ReplyShape) -> UiReply {
    match shape {
        ReplyShape::Spec => {
            let user = &round.user_message;
            let mut all = vec![ChatMessageContent::user(
                &user.content,
                &user.id,
                &round.started_at,
            )];
            all.extend(round_events(round));
            UiReply::Spec(all)
        }
        ReplyShape::Messages => UiReply::Messages(MessagesReply {
            messages: round.messages().iter().map(agent_ui_message).collect(),
        }),
    }
}

/// A chat as `GET /chat-history` lists it (and create answers it), with its running totals of tokens and cost;
/// `with_mode` adds its mode (as the replace answer shows it).
pub fn summary(record: &ChatRecord, with_mode: bool) -> ChatSummary {
    ChatSummary {
        id: record.id.clone(),
        title: record.title.clone(),
        last_message: record.last_message.clone(),
        last_updated: record.last_updated.clone(),
        message_count: record.message_count,
        mode: with_mode.then_some(record.mode),
        usage: Some((&record.usage).into()),
        extra: Map::new(),
    }
}

/// A stored message as the history API shows it.
pub fn history_message(m: &StoredMessage) -> HistoryMessage {
    HistoryMessage {
        id: m.id.clone(),
        content: m.content.clone(),
        role: m.role,
        timestamp: m.timestamp.clone(),
        agent_identifier: m.agent_identifier.clone(),
        agent_name: m.agent_name.clone(),
        files: None,
        extra: Map::new(),
    }
}

/// A message a client sends to replace a chat's messages; a missing id or time (`shown_at`, as the Chat UI shows
/// times) is filled in.
pub fn stored_message(m: HistoryMessage, shown_at: &str) -> StoredMessage {
    let id = if m.id.trim().is_empty() {
        chat_core::new_message_id()
    } else {
        m.id
    };
    let timestamp = if m.timestamp.trim().is_empty() {
        shown_at.to_string()
    } else {
        m.timestamp
    };
    StoredMessage::new(id, m.role, m.content, timestamp)
        // The Chat UI saves an agent's message with its name only and reads `agentIdentifier` back; agents'
        // identifiers are their names here.
        .with_agent_identifier(m.agent_identifier.or_else(|| m.agent_name.clone()))
        .with_agent_name(m.agent_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_shape_is_spec_or_messages() {
        assert_eq!("spec".parse(), Ok(ReplyShape::Spec));
        assert_eq!(" messages ".parse(), Ok(ReplyShape::Messages));
        assert!("Messages".parse::<ReplyShape>().is_err());
    }

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
