//! The conversation model every dialect maps to and from: messages of content parts, the turn's input, the
//! answer and its thoughts. It is the core's own language; no dialect's wire type appears here.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::{Attachment, FileRefusal, InvalidRequest, TokenUsage};

/// Who wrote a message. The protocols know only these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A hand-written message, because it is what a client developer reads in the 400.
        match Value::deserialize(deserializer)? {
            Value::String(s) if s == "user" => Ok(Role::User),
            Value::String(s) if s == "assistant" => Ok(Role::Assistant),
            _ => Err(serde::de::Error::custom(
                r#"expected "user" or "assistant""#,
            )),
        }
    }
}

/// One part of a message's content. Text is what every dialect carries today; images, documents, citations and
/// reasoning join as parts of their own, so that a capability adds a variant rather than a parallel field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentPart {
    Text(String),
    /// An image or a document the user attached.
    File(Attachment),
    /// A tool the model called while answering, with its result: an assistant message's, before its text.
    Tool(crate::ToolExchange),
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentPart>,
}

impl Message {
    /// A message of one text part.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: vec![ContentPart::Text(text.into())],
        }
    }

    /// A message of one text part and `files`.
    pub fn with_files(role: Role, text: impl Into<String>, files: Vec<Attachment>) -> Self {
        let mut message = Self::new(role, text);
        message
            .content
            .extend(files.into_iter().map(ContentPart::File));
        message
    }

    /// The message's files, in order.
    pub fn files(&self) -> impl Iterator<Item = &Attachment> {
        self.content.iter().filter_map(|part| match part {
            ContentPart::File(file) => Some(file),
            ContentPart::Text(_) | ContentPart::Tool(_) => None,
        })
    }

    /// The tools the message's answer called, in order.
    pub fn tools(&self) -> impl Iterator<Item = &crate::ToolExchange> {
        self.content.iter().filter_map(|part| match part {
            ContentPart::Tool(exchange) => Some(exchange),
            _ => None,
        })
    }

    /// The message's text: its text parts, in order, joined.
    pub fn text(&self) -> String {
        let mut texts = self.content.iter().filter_map(|part| match part {
            ContentPart::Text(text) => Some(text.as_str()),
            ContentPart::File(_) | ContentPart::Tool(_) => None,
        });
        match (texts.next(), texts.next()) {
            (None, _) => String::new(),
            (Some(one), None) => one.to_string(),
            (Some(first), Some(second)) => {
                let mut all = format!("{first}\n\n{second}");
                for more in texts {
                    all.push_str("\n\n");
                    all.push_str(more);
                }
                all
            }
        }
    }
}

/// A chat's mode: the Chat UI keeps standard and multi-agent chats apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChatMode {
    #[serde(rename = "standard")]
    Standard,
    #[serde(rename = "multiAgent")]
    MultiAgent,
}

/// The settings a request may override (`context.overrides`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub suggest_followup_questions: bool,
    pub prompt_template: Option<String>,
    /// How many passages the search returns (the configured default when `None`).
    pub top: Option<usize>,
    pub retrieval_mode: Option<RetrievalMode>,
    /// Passages scoring lower are not used.
    pub minimum_search_score: Option<f64>,
    /// Passages whose `category` is this are not used.
    pub exclude_category: Option<String>,
    /// Only passages whose `oids` name the caller are used.
    pub use_oid_security_filter: bool,
    /// Only passages whose `groups` name one of the caller's groups are used.
    pub use_groups_security_filter: bool,
    /// How hard the model reasons before it answers; `None` takes the configured default (off unless set).
    pub reasoning_effort: Option<crate::ReasoningEffort>,
    /// Converse's latency setting, when the configuration allows the one asked for.
    pub latency: Option<crate::Latency>,
    /// Converse's service tier, when the configuration allows the one asked for.
    pub service_tier: Option<crate::ServiceTier>,
    /// The names of overrides this backend does not define (other backends' settings, such as `semantic_ranker`):
    /// they change nothing, and the prompt thought names them so that nobody takes them for applied.
    pub not_used: Vec<String>,
}

impl Overrides {
    /// The overrides this request uses, by their names in `context.overrides`: those that change a setting (a
    /// `false` flag, or a blank template or category, asks for nothing).
    pub fn used(&self) -> Vec<&'static str> {
        [
            ("temperature", self.temperature.is_some()),
            ("top_p", self.top_p.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
            (
                "suggest_followup_questions",
                self.suggest_followup_questions,
            ),
            ("prompt_template", self.prompt_template.is_some()),
            ("top", self.top.is_some()),
            ("retrieval_mode", self.retrieval_mode.is_some()),
            ("minimum_search_score", self.minimum_search_score.is_some()),
            ("exclude_category", self.exclude_category.is_some()),
            ("use_oid_security_filter", self.use_oid_security_filter),
            (
                "use_groups_security_filter",
                self.use_groups_security_filter,
            ),
            ("reasoning_effort", self.reasoning_effort.is_some()),
            ("latency", self.latency.is_some()),
            ("service_tier", self.service_tier.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, used)| used.then_some(name))
        .collect()
    }
}

/// How a request asks the knowledge base to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetrievalMode {
    /// Vectors and text.
    Hybrid,
    /// Vectors only.
    Vectors,
    /// Text only: a knowledge base offers no text-only search, so this searches as hybrid does, and says so.
    Text,
}

impl RetrievalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Vectors => "vectors",
            RetrievalMode::Text => "text",
        }
    }
}

impl std::str::FromStr for RetrievalMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hybrid" => Ok(RetrievalMode::Hybrid),
            "vectors" => Ok(RetrievalMode::Vectors),
            "text" => Ok(RetrievalMode::Text),
            _ => Err(r#"must be "hybrid", "vectors" or "text""#.into()),
        }
    }
}

/// What the answer was grounded in, as `context.data_points` carries it: each passage as
/// `"<citation>: <text>"`, and the citation names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataPoints {
    pub text: Vec<String>,
    pub citations: Vec<String>,
}

/// A validated turn request, whatever dialect it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInput {
    pub messages: Vec<Message>,
    pub overrides: Overrides,
    /// The session state the request carried; `None` when absent or `null`.
    pub session_state: Option<Value>,
    /// How the request named its session state (`sessionState` or `session_state`), for the 400 that rejects it.
    pub session_field: &'static str,
    /// Whether a turn that starts a new chat is stored. The Chat UI keeps its own history through
    /// `/chat-history`, so its turns are stored only when they name a chat.
    pub store_new_chat: bool,
}

/// Why the model stopped, in the backend's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    /// The model asks for the client's tools ([`Answer::tool_calls`]): the client runs them and sends their results
    /// back (a stateless completion's answer only).
    ToolCalls,
}

/// Refuses messages that carry `count` files of a kind (`what`), more than the `limit` per request.
fn at_most(count: usize, limit: usize, what: &str) -> Result<(), FileRefusal> {
    if count > limit {
        return Err(FileRefusal::Invalid(InvalidRequest::new(
            "messages",
            format!("carry {count} {what}, more than the limit of {limit} per request"),
        )));
    }
    Ok(())
}

/// The files of a request's messages, held to the limits.
impl crate::FileLimits {
    /// Refuses a request whose messages carry more images or documents than allowed, or files on assistant
    /// messages.
    pub fn check_messages(&self, messages: &[Message]) -> Result<(), FileRefusal> {
        let (mut images, mut documents) = (0, 0);
        for (i, m) in messages.iter().enumerate() {
            for (j, file) in m.files().enumerate() {
                if m.role != Role::User {
                    return Err(FileRefusal::Invalid(InvalidRequest::new(
                        format!("messages[{i}].files[{j}]"),
                        "files may only be sent on user messages",
                    )));
                }
                self.check_size(&format!("messages[{i}].files[{j}]"), file.kind, file.size)?;
                if file.kind.is_image() {
                    images += 1;
                } else {
                    documents += 1;
                }
            }
        }
        at_most(images, self.max_images, "images")?;
        at_most(documents, self.max_documents, "documents")
    }
}

/// One step of what the backend did, for `context.thoughts`: a title, a string or list describing it, and
/// optional properties.
#[derive(Debug, Clone, PartialEq)]
pub struct Thought {
    pub title: String,
    pub description: Value,
    pub props: Option<Value>,
}

/// A complete answer to a chat request, before it is shaped for a dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Unique id of this completion.
    pub id: String,
    /// Unix time in seconds when it was made.
    pub created: i64,
    /// The same instant as RFC 3339, for the Chat UI.
    pub created_at: String,
    pub model: String,
    pub content: String,
    pub finish_reason: FinishReason,
    pub usage: TokenUsage,
    /// What the backend did before the model answered (the prompt, the model and its settings).
    pub prompt_thoughts: Vec<Thought>,
    /// What it learned once the model had answered (token usage).
    pub result_thoughts: Vec<Thought>,
    pub followup_questions: Option<Vec<String>>,
    pub session_state: Option<Value>,
    /// What the answer was grounded in; `None` when no search ran.
    pub data_points: Option<DataPoints>,
    /// The passages the answer cites, by citation name, in the order first cited.
    pub citations: Vec<String>,
    /// What the turn cost, when prices are known.
    pub cost_usd: Option<f64>,
    /// Every model call of the turn, counted (the answer's `usage` and `cost_usd` are its last call's).
    pub spent: crate::TurnSpent,
    /// What the model reasoned before it answered, whole (`None` when it did not), and whether part of it came
    /// redacted (encrypted by the model provider, said so in the text).
    pub reasoning: Option<String>,
    pub reasoning_redacted: bool,
    /// The tools the model called while answering, with their results, in order.
    pub tools: Vec<crate::ToolExchange>,
    /// The client's tools the model asks for, in order, with [`FinishReason::ToolCalls`] (a stateless completion's
    /// answer only; empty otherwise).
    pub tool_calls: Vec<crate::ToolCall>,
    /// The last round's reasoning as the model provider signed it (or sent it redacted), block by block: what a
    /// client that keeps the reasoning gives back with the tool calls (empty when none was signed).
    pub reasoning_blocks: Vec<crate::ReasoningBlock>,
    /// Whether the model stopped at one of the request's stop sequences ([`FinishReason::Stop`]).
    pub stop_sequence: bool,
}

impl Answer {
    /// Every thought, in the order the steps happened.
    pub fn thoughts(&self) -> Vec<Thought> {
        self.prompt_thoughts
            .iter()
            .chain(&self.result_thoughts)
            .cloned()
            .collect()
    }
}

/// A time as the Chat UI shows a message's: `10:15 AM` (two-digit hour, UTC: the backend does not know the
/// reader's zone). Messages the backend writes are stamped this way.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_text_joins_its_text_parts() {
        let m = Message {
            role: Role::User,
            content: vec![ContentPart::Text("a".into()), ContentPart::Text("b".into())],
        };
        assert_eq!(m.text(), "a\n\nb");
        assert_eq!(Message::new(Role::User, "x").text(), "x");
    }

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
}
