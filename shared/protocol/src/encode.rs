//! What a dialect is, to the one writer of answers: an [`Encoder`] that turns an answer's steps into that dialect's
//! bytes (its content type, its opening, each event as it comes, its end once the answer is settled, a fault after
//! the first byte, and the whole answer for buffered delivery), and an [`ErrorShape`] that writes a fault before
//! any byte of an answer (a refused request, a 405, a 404 of an unknown route). Pure: which step comes when, what is
//! stored and settled, and what happens when the client goes away are the writer's (`chat_app`'s `write_turn`).

use serde::Serialize;

use crate::ErrorBody;

/// A fault as a client is told it, whatever the dialect: the status, the sentence for a person, what kind of fault
/// it is (where a dialect names kinds, as OpenAI's `type` and `code` and Anthropic's `error.type` do), the field of
/// the request at fault, and when to try again. The edge makes it from its error (`chat_edge::ApiError::fault`),
/// which logs the details; nothing here is an internal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub message: String,
    pub kind: FaultKind,
    /// The request's field at fault, when one is (`messages[2].content`).
    pub param: Option<String>,
    /// Seconds to wait before trying again (`Retry-After`), for faults that pass.
    pub retry_after: Option<u32>,
}

/// What kind of fault, where the status alone does not say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// No or bad credentials (401).
    Unauthorized,
    /// The caller may not do this (403).
    Forbidden,
    /// No route at this path (404).
    UnknownRoute,
    /// The model named is not one this deployment serves (404).
    ModelNotFound,
    /// The route does not take this method (405); the methods it takes.
    MethodNotAllowed { allow: &'static str },
    /// Over one of the user's quotas (429).
    OverQuota,
    /// Over the user's rate limit (429).
    OverRate,
    /// The model is throttled past the retries (429).
    ModelThrottled,
    /// The model refused the request as invalid (Bedrock's `ValidationException`): a 400 in every dialect, which
    /// the SDKs do not retry; a dialect whose client sends the conversation as the model gets it (a thinking block
    /// given back changed, a tool result for no call) may say so in its own words.
    ModelRejected,
    /// A guardrail or content filter stopped the answer (400).
    ContentFiltered,
    /// The request is not valid (400, 413, 415); `Fault::param` names the field when one is.
    Invalid,
    /// Anything else: the status says it (a 5xx is ours or a service's).
    Other,
}

impl Fault {
    /// Whether the backend (or a service behind it) is at fault rather than the request.
    pub fn is_server_error(&self) -> bool {
        self.status >= 500
    }
}

/// How a dialect writes a fault before any byte of an answer: the JSON body of an error response (its status and
/// headers are the same in every dialect: `Allow` on a 405, `Retry-After` when given; its status the fault's, unless
/// the dialect names another, [`ErrorShape::status`]).
pub trait ErrorShape: Send + Sync + 'static {
    fn error_body(fault: &Fault) -> Vec<u8>;

    /// The status the dialect answers `fault` with: the fault's own, unless the dialect has one of its own for it
    /// (Anthropic's 529 for a model throttled past the retries).
    fn status(fault: &Fault) -> u16 {
        fault.status
    }
}

/// The AI Chat Protocol's and the Chat UI's errors, and every route's but another dialect's: `{"error": "…"}`.
pub struct PlainErrors;

impl ErrorShape for PlainErrors {
    fn error_body(fault: &Fault) -> Vec<u8> {
        json(&ErrorBody::new(fault.message.clone()))
    }
}

/// A whole answer, for buffered delivery: its content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Whole {
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Whole {
    /// `value` as a JSON body.
    pub fn json<T: Serialize>(value: &T) -> Self {
        Self {
            content_type: "application/json",
            body: json(value),
        }
    }
}

/// How one dialect writes one kind of answer (a turn's, a multi-agent round's, a documents' watch) as it streams:
/// pure bytes from each of its steps. The writer calls [`Self::opening`] first, then [`Self::event`] for each event
/// as it comes, then, once the answer is complete and settled, [`Self::done`]; or [`Self::fault`] in place of the
/// rest when the answer fails after its first byte. An empty `Vec` writes nothing (an event the dialect has no place
/// for).
pub trait Encoder: Send + 'static {
    /// What is known before the first event (the thoughts, what the search found, the session state, the ids).
    type Opening;
    /// What the answer is made of, as it comes.
    type Event;
    /// What is known once the answer is complete and settled (why it finished, its usage).
    type Done;

    /// The content type of a streamed answer: server-sent events, unless the dialect streams another way.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }

    fn opening(&mut self, opening: &Self::Opening) -> Vec<u8>;

    fn event(&mut self, event: Self::Event) -> Vec<u8>;

    fn done(&mut self, done: Self::Done) -> Vec<u8>;

    /// The last bytes of an answer that failed after its first byte: the dialect's error line or event, and what
    /// ends its stream.
    fn fault(&mut self, fault: &Fault) -> Vec<u8>;

    /// How long the answer may be silent (the model thinking, a tool running) before [`Self::idle`] is written, for
    /// a dialect whose clients and proxies expect a sign of life (Anthropic's `ping`); `None`: never.
    fn idle_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// What is written after [`Self::idle_every`] of silence.
    fn idle(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

/// An [`Encoder`] whose answer can also be delivered whole (buffered): the same answer, read to its end and
/// settled by the same writer, then written at once.
pub trait WholeEncoder: Encoder {
    /// The whole answer, as the core hands it over once settled.
    type Answer;

    fn whole(&mut self, answer: &Self::Answer) -> Whole;
}

/// A value as JSON.
pub(crate) fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain data types cannot fail: no maps with non-string keys, no failing Serialize impls.
    serde_json::to_vec(value).expect("wire types always serialize")
}

/// One server-sent event carrying `value` as JSON: `data: {json}\n\n`.
pub fn sse_data<T: Serialize>(value: &T) -> Vec<u8> {
    let mut event = b"data: ".to_vec();
    serde_json::to_writer(&mut event, value).expect("wire types always serialize");
    event.extend_from_slice(b"\n\n");
    event
}

/// One named server-sent event carrying `value` as JSON: `event: {name}\ndata: {json}\n\n`.
pub fn sse_named<T: Serialize>(name: &str, value: &T) -> Vec<u8> {
    let mut event = format!("event: {name}\ndata: ").into_bytes();
    serde_json::to_writer(&mut event, value).expect("wire types always serialize");
    event.extend_from_slice(b"\n\n");
    event
}
