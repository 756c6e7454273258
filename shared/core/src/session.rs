//! Which chat a request continues, what the model sees, and what the turn will store.

use serde_json::Value;

use crate::{
    ChatError, ChatMode, InvalidRequest, Message, ReadMark, Role, StoreError, StoredMessage,
    TurnInput,
};

/// The chat a turn belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub chat_id: String,
    /// The chat does not exist yet: the turn creates it.
    pub is_new: bool,
    /// Whether the turn is stored. A Chat UI request that names no chat is not: the Chat UI keeps its own history
    /// through `/chat-history`, and a chat of ours beside it would list the conversation twice.
    pub kept: bool,
    pub mode: ChatMode,
    /// The whole conversation the model answers.
    pub conversation: Vec<Message>,
    /// Who said each message of `conversation`: the agent of a multi-agent chat; `None` for the user and for a
    /// standard answer.
    pub authors: Vec<Option<String>>,
    /// The request's messages that are not stored yet; the answer is stored after them.
    pub new_messages: Vec<Message>,
    /// What the chat held when the turn began (empty for a new chat), with who said what.
    pub history: Vec<StoredMessage>,
    /// The store's mark of that read, handed back when the turn is stored (`None` for a new chat).
    pub read_mark: Option<ReadMark>,
    /// How many of the chat's older messages the conversation leaves out (not read, or not sent for the budget).
    pub left_out: usize,
    /// How many items the store read for the turn.
    pub items_read: u64,
}

impl Session {
    /// The session state an answer carries: the chat's id, when the turn is stored.
    pub fn state(&self) -> Option<Value> {
        self.kept.then(|| Value::String(self.chat_id.clone()))
    }

    /// Leaves out the oldest messages of the conversation (and their authors) until the rest and `fixed` fit
    /// `budget` ([`crate::fit_conversation`]); returns the estimate of what is kept.
    pub(crate) fn fit(&mut self, fixed: u64, budget: u64) -> u64 {
        let (left_out, estimated) = crate::fit_conversation(&mut self.conversation, fixed, budget);
        self.authors.drain(..left_out.min(self.authors.len()));
        self.left_out += left_out;
        estimated
    }
}

/// The chat id a request's session state names, if any.
pub(crate) fn requested_chat(input: &TurnInput) -> Result<Option<String>, ChatError> {
    match &input.session_state {
        None => Ok(None),
        Some(Value::String(id)) if !id.is_empty() => Ok(Some(id.clone())),
        Some(_) => Err(InvalidRequest::new(
            input.session_field,
            "expected the chat id this backend returned (a string), or null for a new chat",
        )
        .into()),
    }
}

/// A new chat: the request is the whole conversation.
pub(crate) fn new_session(chat_id: String, mode: ChatMode, messages: &[Message]) -> Session {
    Session {
        chat_id,
        is_new: true,
        kept: true,
        mode,
        conversation: messages.to_vec(),
        authors: vec![None; messages.len()],
        new_messages: messages.to_vec(),
        history: Vec::new(),
        read_mark: None,
        left_out: 0,
        items_read: 0,
    }
}

/// A stored chat continued, of which the newest `stored` messages were read (`total` in all): if they are the
/// request's messages at the same place (the request holding at least `total`), the request is the whole
/// conversation and only what follows them is new; otherwise the request follows the stored history.
/// A request message that repeats a stored one without its files (clients often keep only the text) still
/// matches it, and the conversation keeps the stored files, to be read back for the model.
pub(crate) fn continued_session(
    chat_id: String,
    mode: ChatMode,
    stored: &[StoredMessage],
    total: usize,
    messages: &[Message],
) -> Session {
    // An agent's message is heard as its text (its tool calls were its own); the others' with their files and
    // tool calls, to be read back and replayed.
    let history: Vec<Message> = stored
        .iter()
        .map(|m| match m.agent_identifier {
            Some(_) => Message::new(m.role, m.content.clone()),
            None => m.message(),
        })
        .collect();
    let speakers = stored.iter().map(|m| m.agent_identifier.clone());
    // Where the messages read begin among all the chat's; the request's messages before that are the older ones.
    let offset = total.saturating_sub(history.len());
    let is_prefix = (!history.is_empty() || total == 0)
        && total <= messages.len()
        && history
            .iter()
            .zip(&messages[offset..])
            .all(|(kept, sent)| repeats(sent, kept));
    let (conversation, authors, new_messages) = if is_prefix {
        let earlier = history.iter().zip(&messages[offset..]).map(|(kept, sent)| {
            // What the request sent, when it holds the files' bytes; the stored message otherwise.
            if sent == kept {
                sent.clone()
            } else {
                kept.clone()
            }
        });
        (
            messages[..offset]
                .iter()
                .cloned()
                .chain(earlier)
                .chain(messages[total..].iter().cloned())
                .collect(),
            std::iter::repeat_n(None, offset)
                .chain(speakers)
                .chain(std::iter::repeat_n(None, messages.len() - total))
                .collect(),
            messages[total..].to_vec(),
        )
    } else {
        (
            [history, messages.to_vec()].concat(),
            speakers
                .chain(std::iter::repeat_n(None, messages.len()))
                .collect(),
            messages.to_vec(),
        )
    };
    Session {
        chat_id,
        is_new: false,
        kept: true,
        mode,
        conversation,
        authors,
        new_messages,
        history: stored.to_vec(),
        read_mark: None,
        // A request that holds the whole conversation brings the older messages itself (the budget leaves out
        // what does not fit, and counts it); one that follows the history leaves the unread ones out.
        left_out: if is_prefix { 0 } else { offset },
        items_read: 0,
    }
}

/// Whether `sent` is the stored message `kept` again: the same role and text, and its files or none.
fn repeats(sent: &Message, kept: &Message) -> bool {
    sent == kept
        || (sent.role == kept.role && sent.files().next().is_none() && sent.text() == kept.text())
}

impl StoredMessage {
    /// The message as the conversation knows it, its files to be read back.
    pub fn message(&self) -> Message {
        let mut message = Message::with_files(
            self.role,
            self.content.clone(),
            self.files.iter().filter_map(|f| f.attachment()).collect(),
        );
        // The tools go before the answer's text, as the model called them before it answered.
        if !self.tools.is_empty() {
            let text = message.content.remove(0);
            message.content = self
                .tools
                .iter()
                .cloned()
                .map(crate::ContentPart::Tool)
                .chain([text])
                .chain(message.content)
                .collect();
        }
        message
    }
}

/// A chat's title: its first user message, on one line, cut to a readable length.
pub fn title_of(messages: &[Message]) -> String {
    const MAX: usize = 80;
    let first = messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.text().split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    if first.chars().count() <= MAX {
        first
    } else {
        let cut: String = first.chars().take(MAX - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

impl From<StoreError> for ChatError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ChatError::ChatNotFound,
            other => ChatError::Store(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stored;

    fn msg(role: Role, text: &str) -> Message {
        Message::new(role, text)
    }

    /// The session `request` makes of a standard chat of `total` messages, of which `stored` (the newest) were read.
    fn continuing(stored: &[StoredMessage], total: usize, request: &[Message]) -> Session {
        continued_session("id".into(), ChatMode::Standard, stored, total, request)
    }

    /// A user message `a`, the assistant's `b`: a chat as stored.
    fn a_and_b() -> [StoredMessage; 2] {
        [stored(Role::User, "a"), stored(Role::Assistant, "b")]
    }

    /// The chat `a`, `b` and a new question `c`, as a request holding the whole history sends it.
    fn a_b_then_c() -> [Message; 3] {
        [
            msg(Role::User, "a"),
            msg(Role::Assistant, "b"),
            msg(Role::User, "c"),
        ]
    }

    #[test]
    fn a_request_holding_the_whole_history_stores_only_what_is_new() {
        let stored = a_and_b();
        let request = a_b_then_c();
        let s = continuing(&stored, stored.len(), &request);
        assert_eq!(s.conversation, request);
        assert_eq!(s.new_messages, [msg(Role::User, "c")]);
    }

    #[test]
    fn a_request_holding_only_the_latest_message_follows_the_history() {
        let stored = a_and_b();
        let request = [msg(Role::User, "c")];
        let s = continuing(&stored, stored.len(), &request);
        assert_eq!(s.conversation, a_b_then_c());
        assert_eq!(s.new_messages, [msg(Role::User, "c")]);
    }

    #[test]
    fn a_request_that_differs_from_the_history_is_put_after_it() {
        let stored = a_and_b();
        let request = [
            msg(Role::User, "a"),
            msg(Role::Assistant, "edited"),
            msg(Role::User, "c"),
        ];
        let s = continuing(&stored, stored.len(), &request);
        assert_eq!(s.conversation.len(), 5);
        assert_eq!(s.new_messages, request);
    }

    #[test]
    fn a_request_that_repeats_a_message_without_its_files_keeps_the_stored_files() {
        let file = crate::StoredFile {
            name: "a.png".into(),
            content_type: "image/png".into(),
            size: 3,
            key: "k".into(),
        };
        let mut with_file = stored(Role::User, "a");
        with_file.files.push(file.clone());
        let stored = [with_file, stored(Role::Assistant, "b")];
        let request = a_b_then_c();
        let s = continuing(&stored, stored.len(), &request);
        assert_eq!(s.new_messages, [msg(Role::User, "c")]);
        let files: Vec<_> = s.conversation[0].files().collect();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].key.as_deref(), Some("k"));
        assert!(files[0].bytes.is_none(), "read back later");
    }

    #[test]
    fn a_request_repeating_the_newest_messages_read_at_their_place_stores_only_what_is_new() {
        // Six stored, the newest two read; the request repeats all six and asks a seventh.
        let stored = [stored(Role::User, "e"), stored(Role::Assistant, "f")];
        let request: Vec<Message> = ["a", "b", "c", "d", "e", "f", "g"]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                msg(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    t,
                )
            })
            .collect();
        let s = continuing(&stored, 6, &request);
        assert_eq!(s.new_messages, [msg(Role::User, "g")]);
        assert_eq!(s.conversation, request);
        assert_eq!(
            s.left_out, 0,
            "the request brought the four older ones itself"
        );
        // Only the latest message: it follows the two read.
        let s = continuing(&stored, 6, &request[6..]);
        assert_eq!(s.new_messages, [msg(Role::User, "g")]);
        assert_eq!(s.conversation.len(), 3);
        assert_eq!(s.left_out, 4);
        // A request as long as the chat but different where the read messages are: all of it is new.
        let mut edited = request.clone();
        edited[5] = msg(Role::Assistant, "edited");
        let s = continuing(&stored, 6, &edited);
        assert_eq!(s.new_messages, edited);
        // Nothing read of a chat that has messages never matches: the request follows them.
        let s = continuing(&[], 6, &request);
        assert_eq!(s.new_messages, request);
    }

    #[test]
    fn titles_come_from_the_first_user_message() {
        assert_eq!(
            title_of(&[msg(Role::User, "  Hello\n  there ")]),
            "Hello there"
        );
        let long = "x".repeat(200);
        let t = title_of(&[msg(Role::User, &long)]);
        assert_eq!(t.chars().count(), 80);
        assert!(t.ends_with('…'));
    }
}
