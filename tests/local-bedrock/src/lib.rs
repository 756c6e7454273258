//! A local Bedrock-compatible server: `POST /model/{id}/converse` and `/converse-stream` in the real wire format
//! (JSON; AWS event-stream frames), so that tests and the local run exercise the real SDK client.
//!
//! Its answers are derived from the prompt so tests can assert them: the answer to a last user message `T` is
//! `Echo: T`, sent as one delta per word. When the system prompt asks for `<<question>>` lines, three follow
//! up questions end the answer. Directives in the last user message ask for faults and pacing:
//!
//! | directive | effect |
//! |---|---|
//! | `[[fault:throttle]]` | `ThrottlingException` (429) on every attempt |
//! | `[[fault:throttle-first:N]]` | `ThrottlingException` on the first N attempts of this same request, then an answer |
//! | `[[fault:too-long]]` | `ValidationException` "Input is too long for requested model." |
//! | `[[fault:validation]]` | another `ValidationException` |
//! | `[[fault:access-denied]]` | `AccessDeniedException` (403) |
//! | `[[fault:not-found]]` | `ResourceNotFoundException` (404) |
//! | `[[fault:model-error]]` | `ModelErrorException` (424) |
//! | `[[fault:model-timeout]]` | `ModelTimeoutException` (408) |
//! | `[[fault:unavailable]]` | `ServiceUnavailableException` (503) |
//! | `[[fault:internal]]` | `InternalServerException` (500) |
//! | `[[fault:guardrail]]` | an answer with `stopReason` `guardrail_intervened` |
//! | `[[fault:content-filter]]` | an answer with `stopReason` `content_filtered` |
//! | `[[stream-error-after:N]]` | (stream) N deltas, then a `modelStreamErrorException` frame |
//! | `[[stream-break-after:N]]` | (stream) N deltas, then the connection breaks (the body is aborted) |
//! | `[[deltas:N]]` | the answer is N words `w1 … wN` |
//! | `[[delay-ms:N]]` | wait N ms before each delta (stream) or before answering (converse); found in any message |
//! | `[[first-delay-ms:N]]` | silence before the first word of each attempt: N ms before a stream's first delta (its start is sent at once), before a buffered answer, and before a fault's answer (so each throttled attempt takes N ms) |
//! | `[[stall-after:N]]` | (stream) N deltas, then silence for ten minutes with the connection open (or until the client leaves); (converse) no answer for ten minutes |
//! | `[[say:TEXT]]` | the answer is TEXT |
//!
//! Without a `delay-ms` directive the server paces its words as a model does: it waits its pace (0 unless
//! started with [`LocalBedrock::start_paced`]; the local run's default is 30 ms) before each delta, and a buffered
//! answer takes as long as its words would.
//!
//! Directives are also read from the system prompt, so that a test can script one agent of a group through its
//! instructions.
//!
//! Grounded prompts get deterministic answers too, so tests can assert citations. The first row that applies
//! decides the answer (faults and pacing directives apply to all of them, as above):
//!
//! | the request | the answer |
//! |---|---|
//! | **query rewrite**: the system prompt contains `Generate a search query` | the search query: the last user message's text after its last `Generate search query for: ` (the whole text if absent), with the local model's directives removed but every `[[kb-…]]` directive kept (e.g. `[[kb-fault:throttle]]`, `[[kb-delay-ms:500]]`: they are for the local knowledge base that receives the query), runs of whitespace made one space, trimmed, one trailing `?` removed. Takes precedence over `say`/`deltas`, and no follow-up questions are added |
//! | `[[say:TEXT]]` / `[[deltas:N]]` | as above |
//! | **native citations**: the last user message holds `searchResult` content blocks | for each search result `i` (0-based, in order): its first sentence (below) as text deltas, then (when its `citations.enabled` is true) a `citation` delta `{title, source, sourceContent: [{text: sentence}], location: {searchResultLocation: {searchResultIndex: i, start: 0, end: 1}}}`, then a `" "` text delta before the next sentence. `converse` answers the same as content blocks: a `citationsContent` block `{content: [{text: sentence}], citations: [citation]}` per cited sentence, a `text` block for the rest (the `" "` between sentences, sentences of results without citations, follow-up questions). A result's passage is its `content` texts joined by a space; a result with an empty passage adds nothing. Citations are off unless `citations.enabled` is true. The results' texts count as input tokens |
//! | **prompted grounding**: the last user message's text has a `\n\nSources:\n` section (its last occurrence; a text ending in `\n\nSources:` is an empty section) | for each source line `{citation name}: {passage}` in order (the name is everything before the first `": "`; blank lines and lines without `": "` are skipped): the passage's first sentence, then ` [{citation name}]`, the pieces joined by a space, e.g. `Employees may choose between two plans. [Benefit_Options.md#page=2] Travel must be booked through the portal. [Travel_Policy.md]`. With no source lines: `The sources do not hold the answer to this question.` |
//! | anything else | `Echo: T` |
//!
//! When the last user message holds `image` or `document` blocks, the answer (echoed or grounded, not a query
//! rewrite, `say` or `deltas`) ends with ` Received: ` and one entry per block, in order, joined by `; `:
//! `NAME: image FORMAT SIZE bytes` or `NAME: document DOCNAME FORMAT SIZE bytes`, where SIZE counts the decoded
//! bytes, DOCNAME is the document block's own name, and NAME is the file's name from the text block just before it
//! when that block is `[file: NAME, …]` (the backend's label), else `unnamed`. So tests can assert the model got
//! each file whole, and by which name.
//!
//! A passage's *first sentence* runs up to and including the first `.`, `!` or `?` followed by whitespace or the
//! end of the passage (the whole passage if none); it is cut after 30 words, and its words are joined by single
//! spaces. The follow-up `<<…>>` lines end every answer but a query rewrite, as above.
//!
//! [`LocalBedrock::requests`] (and `GET /__local/requests`) keep each request's whole JSON body, so tests can
//! assert what reached the model: the system prompt, `searchResult` blocks, the Sources section.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request the server received, for tests to inspect.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub operation: Operation,
    pub model_id: String,
    pub body: Value,
    /// When each delta of a stream was handed to the connection (empty for `converse`).
    pub deltas_sent_at: Vec<SystemTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Converse,
    ConverseStream,
}

#[derive(Default)]
struct Shared {
    requests: Vec<RecordedRequest>,
    attempts: HashMap<String, u32>,
}

#[derive(Clone, Default)]
struct AppState {
    shared: Arc<Mutex<Shared>>,
    /// Print each streamed delta with its send time (the binary turns this on).
    log_deltas: bool,
    /// The wait before each word when no directive sets one.
    pace: Duration,
}

/// A running server; it stops when dropped.
pub struct LocalBedrock {
    addr: SocketAddr,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl LocalBedrock {
    /// Starts on `127.0.0.1` and a free port.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0".parse().unwrap(), false).await
    }

    /// Starts on `addr`; with `log_deltas`, prints each streamed delta and when it was sent.
    pub async fn start_on(addr: SocketAddr, log_deltas: bool) -> std::io::Result<Self> {
        Self::start_paced(addr, log_deltas, Duration::ZERO).await
    }

    /// Starts on `addr`, waiting `pace` before each word unless a directive says otherwise.
    pub async fn start_paced(
        addr: SocketAddr,
        log_deltas: bool,
        pace: Duration,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = AppState {
            log_deltas,
            pace,
            ..AppState::default()
        };
        let app = router(state.clone());
        // Every event frame leaves as it is written: with Nagle's algorithm on, a frame written while the previous
        // one is unacknowledged waits for the client's delayed ACK (about 40 ms on Linux).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// The endpoint URL to give the SDK (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// An SDK configuration whose clients talk to this server: test credentials, and the SDK's standard retries
    /// with short back-offs so throttling tests stay quick.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credentials())
            .endpoint_url(self.endpoint())
            .retry_config(
                aws_config::retry::RetryConfig::standard()
                    .with_initial_backoff(Duration::from_millis(5)),
            )
            .load()
            .await
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.shared.lock().unwrap().requests.clone()
    }

    /// Runs until the task ends (never, unless the listener fails).
    pub async fn wait(self) {
        let _ = (&mut { self }.task).await;
    }
}

fn aws_credentials() -> aws_credential_types::Credentials {
    aws_credential_types::Credentials::new("test", "test", None, None, "local-bedrock")
}

impl Drop for LocalBedrock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/model/{model_id}/converse", post(converse))
        .route("/model/{model_id}/converse-stream", post(converse_stream))
        .route("/__local/requests", axum::routing::get(inspect))
        .with_state(state)
}

/// `GET /__local/requests`: what the server received and when it sent each delta (Unix milliseconds), for tests
/// that run it in another process.
async fn inspect(State(state): State<AppState>) -> Response {
    let ms = |t: &SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    };
    let requests: Vec<Value> = state
        .shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .map(|r| {
            json!({
                "operation": match r.operation { Operation::Converse => "converse", Operation::ConverseStream => "converse-stream" },
                "modelId": r.model_id,
                "body": r.body,
                "deltasSentAtMs": r.deltas_sent_at.iter().map(ms).collect::<Vec<_>>(),
            })
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        Value::Array(requests).to_string(),
    )
        .into_response()
}

/// What the prompt asks of the model.
#[derive(Debug, Default)]
struct Plan {
    fault: Option<String>,
    stream_error_after: Option<usize>,
    stream_break_after: Option<usize>,
    /// The wait before each delta of a stream.
    delay: Duration,
    /// The wait before a buffered answer.
    converse_delay: Duration,
    /// The silence before an attempt's first word or fault.
    first_delay: Duration,
    /// Deltas sent before the model goes silent (a buffered call never answers).
    stall_after: Option<usize>,
    pieces: Vec<String>,
    /// Native citations of sentences among the pieces, in order.
    citations: Vec<Cite>,
    stop_reason: &'static str,
    input_tokens: u64,
}

fn directive<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("[[{name}:"))? + name.len() + 3;
    let end = start + text[start..].find("]]")?;
    Some(&text[start..end])
}

fn strip_directives(text: &str) -> String {
    strip_directives_but(text, |_| false)
}

/// The text without its `[[…]]` directives, except those `keep` accepts; runs of whitespace become one space.
fn strip_directives_but(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => {
                let directive = &rest[start..start + end + 2];
                if keep(directive) {
                    out.push_str(directive);
                }
                rest = &rest[start + end + 2..];
            }
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the `image` and `document` blocks of a message's content hold: `image png 67 bytes`,
/// `document report pdf 300 bytes`.
fn received_files(blocks: Option<&Value>) -> Vec<String> {
    let size = |block: &Value| {
        block
            .pointer("/source/bytes")
            .and_then(Value::as_str)
            .and_then(|b64| aws_smithy_types::base64::decode(b64).ok())
            .map_or(0, |bytes| bytes.len())
    };
    let format = |block: &Value| {
        block
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    // The file's name, from the label just before its block.
    let label = |before: Option<&Value>| {
        before
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("[file: "))
            .and_then(|t| t.split(", ").next())
            .unwrap_or("unnamed")
            .to_string()
    };
    let Some(blocks) = blocks.and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let name = label(i.checked_sub(1).and_then(|j| blocks.get(j)));
            if let Some(image) = b.get("image") {
                Some(format!(
                    "{name}: image {} {} bytes",
                    format(image),
                    size(image)
                ))
            } else {
                b.get("document").map(|doc| {
                    let doc_name = doc.get("name").and_then(Value::as_str).unwrap_or("");
                    format!(
                        "{name}: document {doc_name} {} {} bytes",
                        format(doc),
                        size(doc)
                    )
                })
            }
        })
        .collect()
}

fn texts(blocks: Option<&Value>) -> Vec<String> {
    blocks
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What the backend's query-rewrite system prompt says.
const QUERY_REWRITE: &str = "Generate a search query";
/// What precedes the question in a query-rewrite user message.
const QUERY_FOR: &str = "Generate search query for: ";
/// What the backend puts between the question and the passages it found.
const SOURCES: &str = "\n\nSources:\n";
/// The answer to a grounded prompt whose sources hold nothing.
const NO_ANSWER: &str = "The sources do not hold the answer to this question.";
/// The follow-up questions that end an answer when the system prompt asks for `<<question>>` lines.
const FOLLOW_UPS: &str =
    "\n\n<<What else should I know?>>\n<<Can you give an example?>>\n<<Where can I read more?>>";

/// The search query a query-rewrite prompt asks for: the question, without the local model's directives but with
/// the knowledge base's (`[[kb-…]]`), trimmed, without one trailing `?`.
fn search_query(last_user: &str) -> String {
    let question = last_user
        .rfind(QUERY_FOR)
        .map_or(last_user, |i| &last_user[i + QUERY_FOR.len()..]);
    let query = strip_directives_but(question, |d| d.starts_with("[[kb-"));
    match query.strip_suffix('?') {
        Some(query) => query.to_string(),
        None => query,
    }
}

/// A passage's first sentence: up to and including the first `.`, `!` or `?` followed by whitespace or the end, at
/// most 30 words, its words joined by single spaces.
fn first_sentence(passage: &str) -> String {
    let mut chars = passage.char_indices().peekable();
    let mut end = passage.len();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
        {
            end = i + c.len_utf8();
            break;
        }
    }
    passage[..end]
        .split_whitespace()
        .take(30)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `(citation name, passage)` lines of the text's Sources section, if it has one.
fn sources_section(text: &str) -> Option<Vec<(&str, &str)>> {
    let section = if text.trim_end().ends_with(SOURCES.trim_end()) {
        ""
    } else {
        &text[text.rfind(SOURCES)? + SOURCES.len()..]
    };
    Some(
        section
            .lines()
            .filter_map(|line| {
                let (name, passage) = line.split_once(": ")?;
                Some((name.trim(), passage.trim()))
            })
            .collect(),
    )
}

/// The answer to a prompt grounded in a Sources section: each source's first sentence and its name in brackets.
fn bracket_cited_answer(sources: &[(&str, &str)]) -> String {
    if sources.is_empty() {
        return NO_ANSWER.to_string();
    }
    sources
        .iter()
        .map(|(name, passage)| match first_sentence(passage) {
            sentence if sentence.is_empty() => format!("[{name}]"),
            sentence => format!("{sentence} [{name}]"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `searchResult` content block of a user message.
struct SearchResult {
    title: String,
    source: String,
    /// Its content texts joined by a space.
    passage: String,
    /// `citations.enabled`.
    cited: bool,
}

fn search_results(content: Option<&Value>) -> Vec<SearchResult> {
    let field = |block: &Value, name: &str| {
        block
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("searchResult"))
        .map(|block| SearchResult {
            title: field(block, "title"),
            source: field(block, "source"),
            passage: texts(block.get("content")).join(" "),
            cited: block.pointer("/citations/enabled").and_then(Value::as_bool) == Some(true),
        })
        .collect()
}

/// A native citation of the answer: pieces `start..end` are the cited sentence.
#[derive(Debug)]
struct Cite {
    start: usize,
    end: usize,
    /// The `Citation` (converse) / `CitationsDelta` (stream) JSON; both have the same shape.
    citation: Value,
}

/// The answer to search results: each one's first sentence, cited natively, with a `" "` piece between sentences.
fn natively_cited_answer(results: &[SearchResult]) -> (Vec<String>, Vec<Cite>) {
    let mut out: Vec<String> = Vec::new();
    let mut cites = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let sentence = first_sentence(&result.passage);
        if sentence.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(" ".to_string());
        }
        let start = out.len();
        out.extend(pieces(&sentence));
        if result.cited {
            cites.push(Cite {
                start,
                end: out.len(),
                citation: json!({
                    "title": result.title,
                    "source": result.source,
                    "sourceContent": [{"text": sentence}],
                    "location": {"searchResultLocation": {"searchResultIndex": index, "start": 0, "end": 1}},
                }),
            });
        }
    }
    if out.is_empty() {
        out = pieces(NO_ANSWER);
    }
    (out, cites)
}

/// Splits text into deltas the way a model streams words: each piece keeps its following space.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' || ch == '\n' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn plan(body: &Value, pace: Duration) -> Plan {
    let system = texts(body.get("system")).join("\n");
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let last_user_message = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    let last_user = last_user_message
        .map(|m| texts(m.get("content")).join("\n"))
        .unwrap_or_default();
    let results = last_user_message
        .map(|m| search_results(m.get("content")))
        .unwrap_or_default();
    let files = last_user_message
        .map(|m| received_files(m.get("content")))
        .unwrap_or_default();
    let all_text: Vec<String> = std::iter::once(system.clone())
        .chain(messages.iter().flat_map(|m| texts(m.get("content"))))
        .collect();
    let result_texts = messages
        .iter()
        .flat_map(|m| search_results(m.get("content")))
        .map(|r| r.passage);
    let input_tokens = all_text
        .iter()
        .cloned()
        .chain(result_texts)
        .map(|t| t.split_whitespace().count() as u64)
        .sum();

    // Directives of the last user message first, then of the system prompt.
    let directives = format!("{last_user}\n{system}");
    let follow_ups = system.contains("<<");
    let mut citations = Vec::new();
    let mut pieces = if system.contains(QUERY_REWRITE) {
        pieces(&search_query(&last_user))
    } else {
        let answer = match (
            directive(&directives, "say"),
            directive(&directives, "deltas").and_then(|n| n.parse::<usize>().ok()),
        ) {
            (Some(text), _) => Some(text.to_string()),
            (None, Some(n)) => Some(
                (1..=n)
                    .map(|i| format!("w{i}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            (None, None) if !results.is_empty() => None,
            (None, None) => {
                let mut answer = match sources_section(&last_user) {
                    Some(sources) => bracket_cited_answer(&sources),
                    None => format!("Echo: {}", strip_directives(&last_user)),
                };
                if !files.is_empty() {
                    answer.push_str(" Received: ");
                    answer.push_str(&files.join("; "));
                }
                Some(answer)
            }
        };
        match answer {
            Some(mut answer) => {
                if follow_ups {
                    answer.push_str(FOLLOW_UPS);
                }
                pieces(&answer)
            }
            None => {
                let (mut answer, cites) = natively_cited_answer(&results);
                citations = cites;
                if follow_ups {
                    answer.extend(pieces(FOLLOW_UPS));
                }
                answer
            }
        }
    };
    let mut stop_reason = "end_turn";
    let max_tokens = body
        .pointer("/inferenceConfig/maxTokens")
        .and_then(Value::as_u64);
    if let Some(max) = max_tokens.filter(|max| pieces.len() as u64 > *max) {
        pieces.truncate(max as usize);
        citations.retain(|c| c.end <= pieces.len());
        stop_reason = "max_tokens";
    }
    let fault = directive(&directives, "fault").map(str::to_string);
    match fault.as_deref() {
        Some("guardrail") => {
            pieces = vec!["Sorry, I cannot answer that.".into()];
            citations.clear();
            stop_reason = "guardrail_intervened";
        }
        Some("content-filter") => {
            pieces = vec!["Sorry.".into()];
            citations.clear();
            stop_reason = "content_filtered";
        }
        _ => {}
    }
    // Pacing holds for the whole conversation: later turns (another agent's) keep it.
    let directed = directive(
        &format!("{directives}\n{}", all_text.join("\n")),
        "delay-ms",
    )
    .and_then(|n| n.parse().ok())
    .map(Duration::from_millis);
    let (delay, converse_delay) = match directed {
        Some(delay) => (delay, delay),
        None => (pace, pace * pieces.len() as u32),
    };
    Plan {
        fault,
        stream_error_after: directive(&directives, "stream-error-after")
            .and_then(|n| n.parse().ok()),
        stream_break_after: directive(&directives, "stream-break-after")
            .and_then(|n| n.parse().ok()),
        delay,
        converse_delay,
        first_delay: directive(&directives, "first-delay-ms")
            .and_then(|n| n.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_default(),
        stall_after: directive(&directives, "stall-after").and_then(|n| n.parse().ok()),
        pieces,
        citations,
        stop_reason,
        input_tokens,
    }
}

/// The HTTP error Bedrock answers for a fault, if the fault is one.
fn fault_response(state: &AppState, plan: &Plan, body: &Value) -> Option<Response> {
    let (status, kind, message) = match plan.fault.as_deref()? {
        "throttle" => (
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        f if f.starts_with("throttle-first:") => {
            let limit: u32 = f["throttle-first:".len()..].parse().unwrap_or(1);
            let mut shared = state.shared.lock().unwrap();
            let seen = shared.attempts.entry(body.to_string()).or_insert(0);
            *seen += 1;
            if *seen > limit {
                return None;
            }
            (
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
            )
        }
        "too-long" => (
            400,
            "ValidationException",
            "Input is too long for requested model.",
        ),
        "validation" => (
            400,
            "ValidationException",
            "The provided request is not valid",
        ),
        "access-denied" => (
            403,
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        "not-found" => (
            404,
            "ResourceNotFoundException",
            "The provided model identifier is invalid.",
        ),
        "model-error" => (
            424,
            "ModelErrorException",
            "The model encountered an error processing the request.",
        ),
        "model-timeout" => (
            408,
            "ModelTimeoutException",
            "Model has timed out in processing the request.",
        ),
        "unavailable" => (
            503,
            "ServiceUnavailableException",
            "Service is unavailable. Try again later.",
        ),
        "internal" => (
            500,
            "InternalServerException",
            "The server encountered an internal error.",
        ),
        _ => return None,
    };
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-amzn-errortype"),
                format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            ),
        ],
        json!({ "message": message }).to_string(),
    )
        .into_response();
    response.headers_mut().insert(
        "x-amzn-requestid",
        header::HeaderValue::from_static("00000000-0000-0000-0000-000000000000"),
    );
    Some(response)
}

fn usage(plan: &Plan) -> Value {
    let output = plan.pieces.len() as u64;
    json!({
        "inputTokens": plan.input_tokens,
        "outputTokens": output,
        "totalTokens": plan.input_tokens + output,
    })
}

fn record(state: &AppState, operation: Operation, model_id: String, body: Value) -> usize {
    let mut shared = state.shared.lock().unwrap();
    shared.requests.push(RecordedRequest {
        operation,
        model_id,
        body,
        deltas_sent_at: Vec::new(),
    });
    shared.requests.len() - 1
}

fn parse_body(bytes: &Bytes) -> Result<Value, Box<Response>> {
    serde_json::from_slice(bytes).map_err(|_| {
        Box::new(
            (
                StatusCode::BAD_REQUEST,
                [(
                    header::HeaderName::from_static("x-amzn-errortype"),
                    "SerializationException",
                )],
                json!({"message": "body is not JSON"}).to_string(),
            )
                .into_response(),
        )
    })
}

async fn converse(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    _headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body = match parse_body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let plan = plan(&body, state.pace);
    record(&state, Operation::Converse, model_id, body.clone());
    tokio::time::sleep(plan.first_delay).await;
    if let Some(r) = fault_response(&state, &plan, &body) {
        return r;
    }
    if plan.stall_after.is_some() {
        tokio::time::sleep(STALL).await;
    }
    tokio::time::sleep(plan.converse_delay).await;
    let out = json!({
        "output": {"message": {"role": "assistant", "content": content_blocks(&plan)}},
        "stopReason": plan.stop_reason,
        "usage": usage(&plan),
        "metrics": {"latencyMs": 1},
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        out.to_string(),
    )
        .into_response()
}

/// A buffered answer's content blocks: one `text` block, or with native citations a `citationsContent` block per
/// cited sentence and `text` blocks for the rest.
fn content_blocks(plan: &Plan) -> Vec<Value> {
    let mut blocks = Vec::new();
    let mut next = 0;
    let text_block = |text: String, blocks: &mut Vec<Value>| {
        if !text.is_empty() {
            blocks.push(json!({ "text": text }));
        }
    };
    for cite in &plan.citations {
        text_block(plan.pieces[next..cite.start].concat(), &mut blocks);
        blocks.push(json!({"citationsContent": {
            "content": [{"text": plan.pieces[cite.start..cite.end].concat()}],
            "citations": [cite.citation],
        }}));
        next = cite.end;
    }
    text_block(plan.pieces[next..].concat(), &mut blocks);
    if blocks.is_empty() {
        blocks.push(json!({"text": ""}));
    }
    blocks
}

fn frame(headers: Vec<(&'static str, &str)>, payload: Value) -> Bytes {
    let headers = headers
        .into_iter()
        .map(|(name, value)| Header::new(name, HeaderValue::String(value.to_string().into())))
        .collect();
    let message = Message::new_from_parts(headers, payload.to_string().into_bytes());
    let mut buffer = Vec::new();
    write_message_to(&message, &mut buffer).expect("an event frame always encodes");
    Bytes::from(buffer)
}

fn event(kind: &str, payload: Value) -> Bytes {
    frame(
        vec![
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

fn exception(kind: &str, message: &str) -> Bytes {
    frame(
        vec![
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }),
    )
}

/// How long a stalled model stays silent: longer than any timeout a test or a client would wait.
const STALL: Duration = Duration::from_secs(600);

/// Waits `pause` without sending, the connection open; false when the client left meanwhile (stop producing).
async fn silence(tx: &mpsc::Sender<Result<Bytes, std::io::Error>>, pause: Duration) -> bool {
    if pause.is_zero() {
        return !tx.is_closed();
    }
    tokio::select! {
        _ = tokio::time::sleep(pause) => true,
        _ = tx.closed() => false,
    }
}

async fn converse_stream(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    bytes: Bytes,
) -> Response {
    let body = match parse_body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let plan = plan(&body, state.pace);
    let index = record(&state, Operation::ConverseStream, model_id, body.clone());
    if let Some(r) = fault_response(&state, &plan, &body) {
        tokio::time::sleep(plan.first_delay).await;
        return r;
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(b)).await.is_ok() }
        };
        if !send(event("messageStart", json!({"role": "assistant"}))).await {
            return;
        }
        if !silence(&tx, plan.first_delay).await {
            return;
        }
        for (i, piece) in plan.pieces.iter().enumerate() {
            if plan.stream_break_after == Some(i) {
                // An error item makes the server abort the connection mid-body.
                let _ = tx
                    .send(Err(std::io::Error::other("connection broken on purpose")))
                    .await;
                return;
            }
            if plan.stall_after == Some(i) {
                silence(&tx, STALL).await;
                return;
            }
            if plan.stream_error_after == Some(i) {
                send(exception(
                    "modelStreamErrorException",
                    "The model stream failed.",
                ))
                .await;
                return;
            }
            // No sleep at all when unpaced: tokio's timer rounds a zero sleep up to its next millisecond tick.
            if !plan.delay.is_zero() {
                tokio::time::sleep(plan.delay).await;
            }
            let delta = json!({"contentBlockIndex": 0, "delta": {"text": piece}});
            if !send(event("contentBlockDelta", delta)).await {
                return; // the client went away: stop producing
            }
            let now = SystemTime::now();
            if let Some(r) = state.shared.lock().unwrap().requests.get_mut(index) {
                r.deltas_sent_at.push(now);
            }
            if state.log_deltas {
                let ms = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                eprintln!("local-bedrock: sent delta {} at {ms} ms {piece:?}", i + 1);
            }
            for cite in plan.citations.iter().filter(|c| c.end == i + 1) {
                let delta = json!({"contentBlockIndex": 0, "delta": {"citation": cite.citation}});
                if !send(event("contentBlockDelta", delta)).await {
                    return;
                }
                if state.log_deltas {
                    eprintln!("local-bedrock: sent citation {}", cite.citation);
                }
            }
        }
        if plan.stall_after.is_some_and(|n| n >= plan.pieces.len()) {
            silence(&tx, STALL).await;
            return;
        }
        if plan
            .stream_error_after
            .is_some_and(|n| n >= plan.pieces.len())
        {
            send(exception(
                "modelStreamErrorException",
                "The model stream failed.",
            ))
            .await;
            return;
        }
        let _ = send(event("contentBlockStop", json!({"contentBlockIndex": 0}))).await
            && send(event(
                "messageStop",
                json!({"stopReason": plan.stop_reason}),
            ))
            .await
            && send(event(
                "metadata",
                json!({"usage": usage(&plan), "metrics": {"latencyMs": 1}}),
            ))
            .await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")
        .body(Body::from_stream(stream))
        .unwrap()
}
