//! A Lambda Runtime API emulator on a loopback port, speaking HTTP/1.1 itself so that it sees each streamed line
//! the moment it arrives: `GET /2018-06-01/runtime/invocation/next` hands out the next queued event (a long poll,
//! as Lambda's), `POST …/invocation/{id}/response` receives a buffered or streamed response (streamed: the metadata
//! prelude, eight NUL bytes, then the body, chunked, with error trailers), `POST …/invocation/{id}/error` and
//! `POST …/init/error` receive errors.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// How the emulator behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmulatorOptions {
    /// Close the connection after answering each response, so that the function must reconnect for its next
    /// request (Lambda keeps it open; this checks what happens after a reconnect).
    pub close_after_response: bool,
}

/// One line of a streamed body and when it arrived.
#[derive(Debug, Clone)]
pub struct Line {
    /// The line without its `\n`.
    pub text: String,
    pub at: SystemTime,
    pub instant: Instant,
}

/// What became of one invocation.
#[derive(Debug)]
pub struct Invocation {
    pub request_id: String,
    /// When the event had been written to the function.
    pub handed_out_at: Instant,
    /// The connection (numbered from 1 in accept order) that carried the event, and the one that carried the
    /// response.
    pub event_connection: u64,
    pub response_connection: u64,
    /// TCP_NODELAY on the function's side of the response's connection, read when the response began; `None` when
    /// no process is watched (see [`Emulator::watch`]).
    pub function_nodelay: Option<bool>,
    /// The same, read once the response's body had arrived whole.
    pub function_nodelay_at_end: Option<bool>,
    /// A streamed response (`Lambda-Runtime-Function-Response-Mode: streaming`).
    pub streamed: bool,
    /// A streamed response's metadata prelude (`statusCode`, `headers`, `cookies`).
    pub prelude: Option<Value>,
    /// A buffered response's JSON (`statusCode`, `headers`, `body`, …).
    pub buffered: Option<Value>,
    /// A streamed response's body after the prelude.
    pub body: Vec<u8>,
    /// The streamed body's lines, each with its arrival time.
    pub lines: Vec<Line>,
    /// When the streamed body's first byte after the prelude arrived.
    pub first_body_byte_at: Option<Instant>,
    /// An error posted to `…/error`, or a streamed response's error trailer.
    pub error: Option<String>,
}

impl Invocation {
    /// The response's status code, buffered or streamed.
    pub fn status(&self) -> Option<u64> {
        self.prelude
            .as_ref()
            .or(self.buffered.as_ref())
            .and_then(|v| v["statusCode"].as_u64())
    }

    /// The streamed body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The streamed body's server-sent events (`text/event-stream`), read from its [`lines`](Self::lines): each as
    /// a [`Line`] whose text is the event's data (its `data:` fields joined by `\n`) and whose times are the
    /// arrival of the empty line that ended it, when the event had arrived whole. Other fields and comments are
    /// skipped, as a client skips them; an event without data is none.
    pub fn sse_events(&self) -> Vec<Line> {
        sse_events(&self.lines)
    }
}

/// The events of `lines` (see [`Invocation::sse_events`]).
fn sse_events(lines: &[Line]) -> Vec<Line> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in lines {
        let text = line.text.strip_suffix('\r').unwrap_or(&line.text);
        if text.is_empty() {
            if let Some(data) = data.take() {
                events.push(Line {
                    text: data,
                    at: line.at,
                    instant: line.instant,
                });
            }
        } else if let Some(value) = text.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
    events
}

struct Queued {
    event: Vec<u8>,
    done: oneshot::Sender<Invocation>,
}

struct Outstanding {
    done: oneshot::Sender<Invocation>,
    handed_out_at: Instant,
    event_connection: u64,
}

struct Inner {
    options: EmulatorOptions,
    watched: Mutex<Option<u32>>,
    queue: mpsc::UnboundedSender<Queued>,
    incoming: tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>,
    outstanding: Mutex<HashMap<String, Outstanding>>,
    requests: AtomicU64,
    connections: AtomicU64,
    most_in_flight: AtomicUsize,
    init_errors: Mutex<Vec<String>>,
    /// When the function first asked for an event: the end of its initialisation.
    first_next_at: Mutex<Option<Instant>>,
}

/// A running emulator; it stops when dropped.
pub struct Emulator {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Emulator {
    pub async fn start(options: EmulatorOptions) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (queue, incoming) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            options,
            watched: Mutex::new(None),
            queue,
            incoming: tokio::sync::Mutex::new(incoming),
            outstanding: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            most_in_flight: AtomicUsize::new(0),
            init_errors: Mutex::new(Vec::new()),
            first_next_at: Mutex::new(None),
        });
        let state = inner.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let id = state.connections.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(serve_connection(state.clone(), stream, id));
            }
        });
        Ok(Self { addr, inner, task })
    }

    /// `AWS_LAMBDA_RUNTIME_API` for a function: `host:port`.
    pub fn runtime_api(&self) -> String {
        self.addr.to_string()
    }

    /// Reads TCP_NODELAY on process `pid`'s side of each connection a response arrives on.
    pub fn watch(&self, pid: u32) {
        *self.inner.watched.lock().unwrap() = Some(pid);
    }

    /// Queues `event` for the next `…/invocation/next` and waits until its response (or error) has arrived.
    pub async fn invoke(&self, event: &Value) -> Invocation {
        let (done, result) = oneshot::channel();
        let event = serde_json::to_vec(event).expect("an event serializes");
        self.inner
            .queue
            .send(Queued { event, done })
            .unwrap_or_else(|_| panic!("the emulator has stopped"));
        result
            .await
            .expect("the emulator drops no invocation it handed out")
    }

    /// The most invocations handed out and not yet answered at any one time.
    pub fn most_in_flight(&self) -> usize {
        self.inner.most_in_flight.load(Ordering::SeqCst)
    }

    /// How many connections the function has opened so far.
    pub fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::SeqCst)
    }

    /// When the function's first `GET …/invocation/next` arrived, if it has: its initialisation is over then.
    pub fn first_next_at(&self) -> Option<Instant> {
        *self.inner.first_next_at.lock().unwrap()
    }

    /// Errors the function reported at initialisation (`…/init/error`).
    pub fn init_errors(&self) -> Vec<String> {
        self.inner.init_errors.lock().unwrap().clone()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A function URL event (payload format 2.0) for `method path` with `body`, shaped as the files of `events/`.
pub fn function_url_event(method: &str, path_and_query: &str, body: &str) -> Value {
    let mut event: Value =
        serde_json::from_str(include_str!("../../../events/chat-stream-2024-05-29.json"))
            .expect("the events file is JSON");
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    event["rawPath"] = path.into();
    event["rawQueryString"] = query.into();
    event["requestContext"]["http"]["method"] = method.into();
    event["requestContext"]["http"]["path"] = path.into();
    event["body"] = body.into();
    event
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One connection from the function: requests one after another (HTTP/1.1 keep-alive).
async fn serve_connection(inner: Arc<Inner>, stream: TcpStream, connection: u64) {
    let _ = stream.set_nodelay(true);
    let function_side = stream.peer_addr().ok();
    let mut conn = Conn {
        stream,
        buf: Vec::with_capacity(64 * 1024),
        last_read: (Instant::now(), SystemTime::now()),
    };
    while let Ok(Some(head)) = conn.read_head().await {
        let result = match (head.method.as_str(), head.path.as_str()) {
            ("GET", "/2018-06-01/runtime/invocation/next") => {
                next_event(&inner, &mut conn, connection).await
            }
            ("POST", path) if path.starts_with("/2018-06-01/runtime/invocation/") => {
                let function_nodelay = || match (*inner.watched.lock().unwrap(), function_side) {
                    (Some(pid), Some(addr)) => crate::tcp_nodelay_of(pid, addr).ok().flatten(),
                    _ => None,
                };
                response(&inner, &mut conn, &head, connection, function_nodelay).await
            }
            ("POST", "/2018-06-01/runtime/init/error") => {
                let mut sink = Sink::new(false);
                match conn.read_body(&head, &mut sink).await {
                    Ok(_) => {
                        inner
                            .init_errors
                            .lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&sink.raw).into_owned());
                        conn.accepted(false).await.map(|()| false)
                    }
                    Err(e) => Err(e),
                }
            }
            _ => {
                let mut sink = Sink::new(false);
                match conn.read_body(&head, &mut sink).await {
                    Ok(_) => conn
                        .write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .map(|()| false),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Ok(false) => continue,
            // The connection is closed after a response, or broke.
            Ok(true) | Err(_) => return,
        }
    }
}

/// `GET …/invocation/next`: waits for a queued event and hands it out.
async fn next_event(inner: &Inner, conn: &mut Conn, connection: u64) -> io::Result<bool> {
    inner
        .first_next_at
        .lock()
        .unwrap()
        .get_or_insert_with(Instant::now);
    let queued = { inner.incoming.lock().await.recv().await };
    let Some(Queued { event, done }) = queued else {
        return Ok(true);
    };
    let id = format!(
        "req-{:06}",
        inner.requests.fetch_add(1, Ordering::SeqCst) + 1
    );
    let deadline_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
        + 300_000;
    let mut message = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nlambda-runtime-aws-request-id: {id}\r\n\
         lambda-runtime-deadline-ms: {deadline_ms}\r\n\
         lambda-runtime-invoked-function-arn: arn:aws:lambda:us-east-1:123456789012:function:local\r\n\
         lambda-runtime-trace-id: Root=1-6740a000-0123456789abcdef01234567;Sampled=0\r\n\
         content-length: {}\r\n\r\n",
        event.len()
    )
    .into_bytes();
    message.extend_from_slice(&event);
    // Registered before it is sent: the response may come back on another connection at once.
    {
        let mut outstanding = inner.outstanding.lock().unwrap();
        outstanding.insert(
            id.clone(),
            Outstanding {
                done,
                handed_out_at: Instant::now(),
                event_connection: connection,
            },
        );
        inner
            .most_in_flight
            .fetch_max(outstanding.len(), Ordering::SeqCst);
    }
    conn.write(&message).await?;
    if let Some(o) = inner.outstanding.lock().unwrap().get_mut(&id) {
        o.handed_out_at = Instant::now();
    }
    Ok(false)
}

/// `POST …/invocation/{id}/response` or `…/error`: reads it whole, answers 202 and completes the invocation.
async fn response(
    inner: &Inner,
    conn: &mut Conn,
    head: &Head,
    connection: u64,
    function_nodelay: impl Fn() -> Option<bool>,
) -> io::Result<bool> {
    let nodelay_at_start = function_nodelay();
    let rest = head.path["/2018-06-01/runtime/invocation/".len()..].to_string();
    let (id, kind) = rest.split_once('/').unwrap_or((rest.as_str(), ""));
    let streamed = head
        .header("lambda-runtime-function-response-mode")
        .is_some_and(|m| m.eq_ignore_ascii_case("streaming"));
    let mut sink = Sink::new(streamed);
    let trailers = conn.read_body(head, &mut sink).await?;
    let nodelay_at_end = function_nodelay();
    let close = inner.options.close_after_response;
    conn.accepted(close).await?;
    let Some(outstanding) = inner.outstanding.lock().unwrap().remove(id) else {
        return Ok(close);
    };
    let raw_text = String::from_utf8_lossy(&sink.raw).into_owned();
    let trailer_error = trailers
        .iter()
        .filter(|(k, _)| k.starts_with("lambda-runtime-function-error"))
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>();
    let error = match kind {
        "error" => Some(raw_text.clone()),
        _ if !trailer_error.is_empty() => Some(trailer_error.join("; ")),
        _ => None,
    };
    let invocation = Invocation {
        request_id: id.to_string(),
        handed_out_at: outstanding.handed_out_at,
        event_connection: outstanding.event_connection,
        response_connection: connection,
        function_nodelay: nodelay_at_start,
        function_nodelay_at_end: nodelay_at_end,
        streamed,
        prelude: sink
            .prelude
            .as_ref()
            .and_then(|p| serde_json::from_slice(p).ok()),
        buffered: (kind == "response" && !streamed)
            .then(|| serde_json::from_slice(&sink.raw).ok())
            .flatten(),
        body: sink.body,
        lines: sink.lines,
        first_body_byte_at: sink.first_body_byte_at,
        error,
    };
    let _ = outstanding.done.send(invocation);
    Ok(close)
}

/// Where a request's body goes: kept whole, and for a streamed response split into prelude, body and lines.
struct Sink {
    streamed: bool,
    raw: Vec<u8>,
    prelude: Option<Vec<u8>>,
    body: Vec<u8>,
    line_start: usize,
    lines: Vec<Line>,
    first_body_byte_at: Option<Instant>,
}

impl Sink {
    fn new(streamed: bool) -> Self {
        Self {
            streamed,
            raw: Vec::new(),
            prelude: None,
            body: Vec::new(),
            line_start: 0,
            lines: Vec::new(),
            first_body_byte_at: None,
        }
    }

    fn push(&mut self, data: &[u8], (instant, at): (Instant, SystemTime)) {
        let from = self.raw.len();
        self.raw.extend_from_slice(data);
        if !self.streamed {
            return;
        }
        let new_body: Vec<u8> = if self.prelude.is_some() {
            data.to_vec()
        } else {
            // The prelude is JSON, which holds no NUL byte; eight of them end it.
            let search_from = from.saturating_sub(7);
            match self.raw[search_from..]
                .windows(8)
                .position(|w| w == [0u8; 8])
            {
                Some(i) => {
                    let end = search_from + i;
                    self.prelude = Some(self.raw[..end].to_vec());
                    self.raw[end + 8..].to_vec()
                }
                None => return,
            }
        };
        if new_body.is_empty() {
            return;
        }
        self.first_body_byte_at.get_or_insert(instant);
        self.body.extend_from_slice(&new_body);
        while let Some(i) = self.body[self.line_start..]
            .iter()
            .position(|&b| b == b'\n')
        {
            let end = self.line_start + i;
            self.lines.push(Line {
                text: String::from_utf8_lossy(&self.body[self.line_start..end]).into_owned(),
                at,
                instant,
            });
            self.line_start = end + 1;
        }
    }
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// When the last read returned: the arrival time of the bytes it brought.
    last_read: (Instant, SystemTime),
}

impl Conn {
    async fn read_more(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.last_read = (Instant::now(), SystemTime::now());
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Answers a response or error: 202, as Lambda's API does.
    async fn accepted(&mut self, close: bool) -> io::Result<()> {
        let connection = if close { "connection: close\r\n" } else { "" };
        let message = format!(
            "HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\n{connection}\
             content-length: 16\r\n\r\n{{\"status\":\"OK\"}}"
        );
        self.write(message.as_bytes()).await?;
        if close {
            self.stream.shutdown().await?;
        }
        Ok(())
    }

    /// A line ending in CRLF, without it.
    async fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            self.read_more().await?;
        }
    }

    /// Header (or trailer) fields up to the empty line that ends them: each name lowercased, with its value.
    async fn read_fields(&mut self) -> io::Result<Vec<(String, String)>> {
        let mut fields = Vec::new();
        loop {
            let line = self.read_line().await?;
            if line.is_empty() {
                return Ok(fields);
            }
            if let Some((name, value)) = line.split_once(':') {
                fields.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
    }

    /// Passes the body's next `remaining` bytes to `sink` as they arrive.
    async fn pass_on(&mut self, mut remaining: usize, sink: &mut Sink) -> io::Result<()> {
        while remaining > 0 {
            if self.buf.is_empty() {
                self.read_more().await?;
            }
            let take = remaining.min(self.buf.len());
            sink.push(&self.buf[..take], self.last_read);
            self.buf.drain(..take);
            remaining -= take;
        }
        Ok(())
    }

    /// The next request's head; `None` when the function closed the connection between requests.
    async fn read_head(&mut self) -> io::Result<Option<Head>> {
        while !self.buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match self.read_more().await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && self.buf.is_empty() => {
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        let request_line = self.read_line().await?;
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let headers = self.read_fields().await?;
        Ok(Some(Head {
            method,
            path,
            headers,
        }))
    }

    /// Reads the body (chunked or by length) into `sink`, as it arrives; returns the trailers.
    async fn read_body(
        &mut self,
        head: &Head,
        sink: &mut Sink,
    ) -> io::Result<Vec<(String, String)>> {
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if !chunked {
            let remaining: usize = head
                .header("content-length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            self.pass_on(remaining, sink).await?;
            return Ok(Vec::new());
        }
        loop {
            let size_line = self.read_line().await?;
            let size =
                usize::from_str_radix(size_line.split(';').next().unwrap_or_default().trim(), 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                return self.read_fields().await;
            }
            self.pass_on(size, sink).await?;
            while self.buf.len() < 2 {
                self.read_more().await?;
            }
            self.buf.drain(..2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Line, sse_events};
    use std::time::{Duration, Instant, SystemTime};

    #[test]
    fn server_sent_events_are_timed_by_the_line_that_ends_them() {
        let start = SystemTime::now();
        let lines: Vec<Line> = [
            ": a comment",
            "data: {\"a\":1}",
            "",
            "event: ignored",
            "data: two",
            "data:lines\r",
            "\r",
            "",
            "data: [DONE]",
            "",
            "data: unfinished",
        ]
        .iter()
        .enumerate()
        .map(|(i, text)| Line {
            text: text.to_string(),
            at: start + Duration::from_millis(i as u64),
            instant: Instant::now(),
        })
        .collect();
        let events = sse_events(&lines);
        let seen: Vec<(&str, SystemTime)> =
            events.iter().map(|e| (e.text.as_str(), e.at)).collect();
        assert_eq!(
            seen,
            [
                ("{\"a\":1}", start + Duration::from_millis(2)),
                ("two\nlines", start + Duration::from_millis(6)),
                ("[DONE]", start + Duration::from_millis(9)),
            ]
        );
    }
}
