//! The HTTP client under rmcp's streamable HTTP transport, so that a server cannot make the function hold more of
//! an answer than the model reads. rmcp's own reqwest client reads a JSON answer whole (up to 16 MiB) before
//! parsing it, and an SSE event likewise; a tool call's answer is read here instead, as it arrives, and kept only
//! up to a limit (the operator's `TOOL_RESULT_MAX_BYTES` and a margin for the JSON around the text): past it
//! nothing more is read, the connection is dropped, and the result is rebuilt from what was read, marked as cut
//! ([`crate::cut`]). Every other message (the handshake, the listing, a session's end) goes through rmcp's client
//! under its own limits, set lower here ([`OTHER_MESSAGES_MAX_BYTES`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue, StatusCode, header};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use crate::cut::cut_answer;

/// The bytes kept of any message but a tool call's answer (a JSON body, or one SSE event): rmcp's client refuses
/// one past them. A listing of many tools with long schemas fits easily.
pub(crate) const OTHER_MESSAGES_MAX_BYTES: usize = 4 * 1024 * 1024;

/// What a tool call's answer may hold beyond the text the model reads: the JSON-RPC envelope, escapes, other
/// fields.
pub(crate) const ANSWER_MARGIN_BYTES: usize = 64 * 1024;

/// The most a redirect chain is followed (same origin only, as rmcp's own client).
const MAX_REDIRECTS: usize = 10;

/// The most bytes of an SSE field other than `data` (`event`, `id`, `retry`) that are kept.
const MAX_FIELD_BYTES: usize = 1024;

type Error = StreamableHttpError<reqwest::Error>;

/// The rules of the HTTP client the MCP servers are reached through, as rmcp builds its own: a connection is made
/// within [`crate::LIST_TIMEOUT_CAP`] (each listing and call has its own bound as well: the listing timeout,
/// `TOOL_TIMEOUT_MS`), and only same-origin 307 and 308 redirects are followed, which keep the method and body and
/// do not hand the headers (secrets) to another host. rmcp also keeps no connection idle (one whose last answer was
/// not read to its end would stall the next request): every request here says `Connection: close` instead, so that
/// a client shared with other uses may keep theirs.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(crate::LIST_TIMEOUT_CAP)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        }))
}

/// A client with [`client_builder`]'s rules and reqwest's own TLS (the platform's roots, loaded for this client),
/// for a program that shares none.
pub fn http_client() -> reqwest::Client {
    client_builder()
        .build()
        // Only a TLS backend that cannot start fails here; the same build is rmcp's own, which panics too.
        .unwrap_or_default()
}

/// The client of every session of one MCP server: the HTTP client given (one connection pool for every server),
/// and the most bytes of a tool call's answer that are kept.
#[derive(Clone)]
pub(crate) struct BoundedClient {
    http: reqwest::Client,
    answer_limit: usize,
}

impl BoundedClient {
    /// A client keeping at most `answer_limit` bytes of a tool call's answer, through `http` (one with
    /// [`client_builder`]'s rules).
    pub(crate) fn new(http: reqwest::Client, answer_limit: usize) -> Self {
        Self { http, answer_limit }
    }

    /// The HTTP client under it.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends a tool call and reads its answer, keeping at most `answer_limit` bytes of it.
    async fn post_call(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        id: RequestId,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut request = self
            .http
            .post(uri.as_ref())
            .header(header::CONNECTION, "close")
            .header(header::ACCEPT, "text/event-stream, application/json");
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        let session_attached = session_id.is_some();
        if let Some(session) = session_id {
            request = request.header("mcp-session-id", session.as_ref());
        }
        let response = request.json(&message).send().await?;
        let status = response.status();
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match (status, challenge) {
            (StatusCode::UNAUTHORIZED, Some(challenge)) => {
                return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                    challenge,
                )));
            }
            (StatusCode::FORBIDDEN, Some(challenge)) => {
                return Err(StreamableHttpError::InsufficientScope(
                    InsufficientScopeError::new(challenge, None),
                ));
            }
            _ => {}
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let is = |expected: &str| {
            content_type.as_deref().is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
            })
        };
        if !status.is_success() {
            // A JSON-RPC error in a JSON body is the call's answer; anything else is the status alone.
            if is("application/json") {
                let (body, cut) = read_bounded(response, self.answer_limit).await?;
                if !cut
                    && let Ok(error @ JsonRpcMessage::Error(_)) =
                        serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(error, session));
                }
            }
            return Err(HttpStatusError::new(status.as_u16(), None).into());
        }
        if is("text/event-stream") {
            let events = answer_events(response.bytes_stream().boxed(), id, self.answer_limit);
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if is("application/json") {
            let (body, cut) = read_bounded(response, self.answer_limit).await?;
            let message = if cut {
                cut_answer(&id, &body, self.answer_limit)
            } else {
                serde_json::from_slice::<ServerJsonRpcMessage>(&body).ok()
            };
            return match message {
                Some(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                None => Err(StreamableHttpError::UnexpectedServerResponse(
                    "the answer is not a JSON-RPC message".into(),
                )),
            };
        }
        Err(StreamableHttpError::UnexpectedContentType(content_type))
    }
}

/// The id of a tool call (`tools/call`), whose answer is read under the bound; `None` for any other message.
fn tool_call_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request)
            if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
        {
            Some(request.id.clone())
        }
        _ => None,
    }
}

/// The body of `response`, read until it ends or `limit` bytes are kept; `true` when it went on past them (the
/// rest is not read: the connection is dropped).
async fn read_bounded(response: reqwest::Response, limit: usize) -> Result<(Vec<u8>, bool), Error> {
    let expected = response.content_length().unwrap_or(0) as usize;
    let mut body = Vec::with_capacity(expected.min(limit));
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

impl StreamableHttpClient for BoundedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        match tool_call_id(&message) {
            Some(id) => {
                self.post_call(uri, message, id, session_id, auth_header, custom_headers)
                    .await
            }
            None => {
                self.http
                    .post_message_with_response_limits(
                        uri,
                        message,
                        session_id,
                        auth_header,
                        closing(custom_headers),
                        limits,
                    )
                    .await
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.http
            .delete_session(uri, session_id, auth_header, closing(custom_headers))
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            OTHER_MESSAGES_MAX_BYTES,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                closing(custom_headers),
                max_sse_event_size,
            )
            .await
    }
}

/// The headers of a request rmcp's client sends, with `Connection: close` (see [`client_builder`]).
fn closing(mut headers: HashMap<HeaderName, HeaderValue>) -> HashMap<HeaderName, HeaderValue> {
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers
}

/// The SSE events of a tool call's answer, read as they arrive: an event's data is kept up to `limit` bytes. An
/// event that went past them and is the call's answer is rebuilt from what was read, marked as cut, and ends the
/// stream (nothing more is read); one that is not (a notification) is dropped.
fn answer_events(
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    id: RequestId,
    limit: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    struct State {
        body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
        parser: EventParser,
        ready: VecDeque<Sse>,
    }
    let state = State {
        body: Some(body),
        parser: EventParser::new(id, limit),
        ready: VecDeque::new(),
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            let body = state.body.as_mut()?;
            match body.next().await {
                Some(Ok(chunk)) => {
                    state.parser.feed(&chunk, &mut state.ready);
                    if state.parser.answered {
                        // The answer is in: the rest is not read.
                        state.body = None;
                    }
                }
                Some(Err(error)) => {
                    state.body = None;
                    return Some((Err(SseError::Body(Box::new(error))), state));
                }
                None => {
                    state.parser.finish(&mut state.ready);
                    state.body = None;
                }
            }
        }
    })
    .boxed()
}

/// Which field a line of an SSE event sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Its name is still being read (no colon yet).
    Name,
    Data,
    Event,
    Id,
    Retry,
    /// A comment, or a field SSE does not have.
    Ignored,
}

/// An SSE parser (as the HTML standard reads an event stream) that keeps at most `limit` bytes of an event's data
/// and [`MAX_FIELD_BYTES`] of its other fields.
struct EventParser {
    id: RequestId,
    limit: usize,
    // The line under way.
    line_bytes: usize,
    field: Field,
    name: Vec<u8>,
    /// Whether the next byte is the one space after the colon, which is not the value's.
    skip_space: bool,
    value: Vec<u8>,
    after_cr: bool,
    // The event under way.
    data: Vec<u8>,
    data_lines: usize,
    cut: bool,
    event: Option<String>,
    event_id: Option<String>,
    retry: Option<u64>,
    /// Whether the call's answer, cut, has been given: nothing more is read.
    answered: bool,
}

impl EventParser {
    fn new(id: RequestId, limit: usize) -> Self {
        Self {
            id,
            limit,
            line_bytes: 0,
            field: Field::Name,
            name: Vec::new(),
            skip_space: false,
            value: Vec::new(),
            after_cr: false,
            data: Vec::new(),
            data_lines: 0,
            cut: false,
            event: None,
            event_id: None,
            retry: None,
            answered: false,
        }
    }

    fn feed(&mut self, chunk: &[u8], out: &mut VecDeque<Sse>) {
        let mut rest = chunk;
        while !rest.is_empty() && !self.answered {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(at) => {
                    self.take(&rest[..at]);
                    self.after_cr = rest[at] == b'\r';
                    self.end_line(out);
                    rest = &rest[at + 1..];
                }
                None => {
                    self.take(rest);
                    rest = &[];
                }
            }
        }
    }

    /// The end of the stream: an event the server left unfinished is dropped, unless it is the call's answer cut.
    fn finish(&mut self, out: &mut VecDeque<Sse>) {
        if self.cut && !self.answered {
            self.dispatch(out);
        }
    }

    /// Part of a line (no line break in it).
    fn take(&mut self, mut piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        self.line_bytes += piece.len();
        if self.field == Field::Name {
            match piece.iter().position(|&b| b == b':') {
                Some(colon) => {
                    self.push_name(&piece[..colon]);
                    self.start_field();
                    self.skip_space = true;
                    piece = &piece[colon + 1..];
                }
                None => {
                    self.push_name(piece);
                    return;
                }
            }
        }
        if self.skip_space && !piece.is_empty() {
            self.skip_space = false;
            if piece[0] == b' ' {
                piece = &piece[1..];
            }
        }
        match self.field {
            Field::Data => {
                let room = self.limit.saturating_sub(self.data.len());
                if piece.len() > room {
                    self.cut = true;
                }
                self.data.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            Field::Event | Field::Id | Field::Retry => {
                let room = MAX_FIELD_BYTES.saturating_sub(self.value.len());
                self.value
                    .extend_from_slice(&piece[..piece.len().min(room)]);
            }
            Field::Name | Field::Ignored => {}
        }
    }

    fn push_name(&mut self, part: &[u8]) {
        // No field's name is longer than `retry`: a longer one is no field.
        if self.name.len() + part.len() <= 8 {
            self.name.extend_from_slice(part);
        } else {
            self.name.clear();
            self.name.extend_from_slice(b"-");
        }
    }

    /// The field's name is read: which field it is.
    fn start_field(&mut self) {
        self.field = match self.name.as_slice() {
            b"data" => Field::Data,
            b"event" => Field::Event,
            b"id" => Field::Id,
            b"retry" => Field::Retry,
            _ => Field::Ignored,
        };
        if self.field == Field::Data {
            if self.data_lines > 0 {
                // Data lines are joined by a line feed.
                if self.data.len() < self.limit {
                    self.data.push(b'\n');
                } else {
                    self.cut = true;
                }
            }
            self.data_lines += 1;
        }
    }

    fn end_line(&mut self, out: &mut VecDeque<Sse>) {
        if self.line_bytes == 0 {
            self.dispatch(out);
            return;
        }
        if self.field == Field::Name {
            // A line without a colon: the whole line is the field's name, its value empty.
            self.start_field();
        }
        let value = String::from_utf8_lossy(&self.value).into_owned();
        match self.field {
            Field::Event => self.event = Some(value),
            Field::Id => self.event_id = Some(value),
            Field::Retry => self.retry = value.trim().parse().ok(),
            _ => {}
        }
        self.line_bytes = 0;
        self.field = Field::Name;
        self.name.clear();
        self.value.clear();
        self.skip_space = false;
    }

    fn dispatch(&mut self, out: &mut VecDeque<Sse>) {
        let data = std::mem::take(&mut self.data);
        let lines = std::mem::take(&mut self.data_lines);
        let cut = std::mem::take(&mut self.cut);
        let event = self.event.take();
        let id = self.event_id.take();
        let retry = self.retry.take();
        if lines == 0 {
            return;
        }
        let data = if cut {
            match cut_answer(&self.id, &data, self.limit) {
                Some(answer) => {
                    self.answered = true;
                    serde_json::to_string(&answer).unwrap_or_default()
                }
                None => {
                    tracing::warn!(
                        limit = self.limit,
                        "a message of the MCP server longer than the limit, not the call's answer, is dropped"
                    );
                    return;
                }
            }
        } else {
            String::from_utf8_lossy(&data).into_owned()
        };
        out.push_back(Sse {
            event,
            data: Some(data),
            id,
            retry,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]], limit: usize) -> (Vec<Sse>, bool) {
        let mut parser = EventParser::new(RequestId::Number(1), limit);
        let mut out = VecDeque::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        parser.finish(&mut out);
        (out.into_iter().collect(), parser.answered)
    }

    #[test]
    fn events_are_read_as_sse_reads_them() {
        let (events, answered) = parse(
            &[
                b": a comment\r\nevent: mess",
                b"age\r",
                b"\nid: 7\ndata: {\"a\":\ndata:1}\n\nretry: 30\ndata: x\r\n\r\ndata: unfinished",
            ],
            1024,
        );
        assert!(!answered);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].event.as_deref(), Some("message"));
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].data.as_deref(), Some("{\"a\":\n1}"));
        assert_eq!(events[1].retry, Some(30));
        assert_eq!(events[1].data.as_deref(), Some("x"));
        assert_eq!(events[1].event, None);
    }

    #[test]
    fn an_answer_past_the_limit_is_cut_and_ends_the_stream() {
        let head = br#"data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#;
        let filler = vec![b'x'; 10_000];
        let mut parser = EventParser::new(RequestId::Number(1), 200);
        let mut out = VecDeque::new();
        parser.feed(
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            &mut out,
        );
        parser.feed(head, &mut out);
        for _ in 0..10 {
            parser.feed(&filler, &mut out);
        }
        assert!(out.len() == 1 && !parser.answered);
        parser.feed(b"\"}]}}\n\ndata: more\n\n", &mut out);
        assert!(parser.answered);
        assert_eq!(out.len(), 2);
        // The data kept was 200 bytes; the answer rebuilt from them.
        assert!(parser.data.capacity() <= 1024);
        let answer: Value = serde_json::from_str(out[1].data.as_deref().unwrap()).unwrap();
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.len() < 200 && text.bytes().all(|b| b == b'x'),
            "{text}"
        );
        assert_eq!(answer["result"]["_meta"][crate::cut::CUT_META], 200);
        // A notification past the limit is dropped, and the answer after it read.
        let (events, answered) = parse(
            &[
                b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"",
                &filler,
                b"\"}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n",
            ],
            100,
        );
        assert!(!answered);
        assert_eq!(events.len(), 1);
        assert!(events[0].data.as_deref().unwrap().contains("\"result\""));
    }

    use serde_json::Value;
}
