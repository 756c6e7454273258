//! A fault proxy for tests: it sits on loopback between an SDK client and a DynamoDB-compatible server and, on
//! demand, goes silent, refuses connections, or lets a request through but loses its response, so that tests can
//! show what the store does when the network does those things (timeouts, 503s, writes read back, not repeated).
//!
//! It speaks just enough HTTP/1.1 to find where each request and response ends (`Content-Length`, chunked, or the
//! end of the connection), and is bounded: a few dozen connections at once, messages of at most
//! [`MAX_MESSAGE_BYTES`], and every task ends when the proxy is dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// The largest request or response the proxy carries (a DynamoDB request is at most 16 MB).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// The longest request or response head.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How many client connections the proxy serves at once; more are closed as they come.
const MAX_CONNECTIONS: usize = 64;

/// The `X-Amz-Target` of DynamoDB's transactional write, the call a turn's save makes.
pub const TRANSACT_WRITE_ITEMS: &str = "DynamoDB_20120810.TransactWriteItems";

/// What the proxy does to the traffic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Fault {
    /// Forwards everything.
    #[default]
    None,
    /// Accepts connections and reads requests, and never answers.
    Silent,
    /// Stops listening and closes the connections it has: connecting is refused.
    Refuse,
    /// Forwards every request, but for a request whose `X-Amz-Target` is `target` it waits for the server's whole
    /// response and then closes the client's connection without sending it: the server did the work, the client
    /// does not know. `times` such responses are lost (`None`: all of them), then the proxy forwards again.
    DropResponses { target: String, times: Option<u32> },
}

impl Fault {
    /// Drops the responses to `target` `times` times (`None`: every time).
    pub fn drop_responses(target: &str, times: Option<u32>) -> Self {
        Fault::DropResponses {
            target: target.to_string(),
            times,
        }
    }
}

/// What the connections share: the fault now in force and what was seen.
struct Shared {
    upstream: SocketAddr,
    /// Clients' connections outlive the server's ([`FaultProxy::start_keeping_alive`]).
    keep_alive: bool,
    fault: Mutex<Fault>,
    dropped: AtomicU32,
    forwarded: Mutex<Vec<String>>,
    /// Each answer passed back to the client: the request's `X-Amz-Target` and the answer's size in bytes.
    answered: Mutex<Vec<(String, usize)>>,
}

impl Shared {
    /// Whether the response to a request for `target` is to be lost; counts it down when it is.
    fn take_drop(&self, target: Option<&str>) -> bool {
        let mut fault = self.fault.lock().expect("the fault lock is never poisoned");
        let Fault::DropResponses {
            target: dropped,
            times,
        } = &mut *fault
        else {
            return false;
        };
        if target != Some(dropped.as_str()) {
            return false;
        }
        match times {
            None => {}
            Some(0) => return false,
            Some(n) => *n -= 1,
        }
        self.dropped.fetch_add(1, Ordering::SeqCst);
        true
    }

    fn fault(&self) -> Fault {
        self.fault
            .lock()
            .expect("the fault lock is never poisoned")
            .clone()
    }
}

/// A running proxy on a loopback port; everything it runs stops when it is dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Every task watches this: a new fault wakes them; its sender dropped ends them.
    changes: watch::Sender<Fault>,
}

impl FaultProxy {
    /// Starts a proxy to the HTTP server at `upstream` (`http://127.0.0.1:port`), forwarding everything.
    pub async fn start(upstream: &str) -> io::Result<Self> {
        Self::start_with(upstream, false).await
    }

    /// As [`FaultProxy::start`], but a client's connection stays open when the server closes its own: DynamoDB keeps
    /// an SDK client's connections alive, where moto's server closes each after one answer (`Connection: close`),
    /// so a client of moto would connect once per call. The proxy takes that header off the answer and connects to
    /// the server again for the next request: the client sees a server that keeps its connections, as DynamoDB.
    pub async fn start_keeping_alive(upstream: &str) -> io::Result<Self> {
        Self::start_with(upstream, true).await
    }

    async fn start_with(upstream: &str, keep_alive: bool) -> io::Result<Self> {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{upstream}: {e}")))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            keep_alive,
            fault: Mutex::new(Fault::None),
            dropped: AtomicU32::new(0),
            forwarded: Mutex::new(Vec::new()),
            answered: Mutex::new(Vec::new()),
        });
        let (changes, watcher) = watch::channel(Fault::None);
        tokio::spawn(accept_loop(listener, addr, shared.clone(), watcher));
        Ok(Self {
            addr,
            shared,
            changes,
        })
    }

    /// The URL to point a client at.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Puts `fault` in force for new requests and connections (and, for [`Fault::Refuse`], closes open ones).
    pub fn set(&self, fault: Fault) {
        *self
            .shared
            .fault
            .lock()
            .expect("the fault lock is never poisoned") = fault.clone();
        self.changes.send_replace(fault);
    }

    /// How many responses were lost so far.
    pub fn dropped(&self) -> u32 {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// How many requests whose `X-Amz-Target` is `target` reached the server so far.
    pub fn forwarded(&self, target: &str) -> usize {
        self.shared
            .forwarded
            .lock()
            .expect("the log lock is never poisoned")
            .iter()
            .filter(|t| *t == target)
            .count()
    }

    /// Every answer passed back so far: its operation (as [`FaultProxy::operations`] names them) and its size in
    /// bytes, head and body, as it came over the wire.
    pub fn answered(&self) -> Vec<(String, usize)> {
        self.shared
            .answered
            .lock()
            .expect("the log lock is never poisoned")
            .iter()
            .map(|(t, n)| (t.rsplit('.').next().unwrap_or(t).to_string(), *n))
            .collect()
    }

    /// The operations of every request that reached the server so far (their `X-Amz-Target` without the API's
    /// prefix: `GetItem`, `Query`, …), in order.
    pub fn operations(&self) -> Vec<String> {
        self.shared
            .forwarded
            .lock()
            .expect("the log lock is never poisoned")
            .iter()
            .map(|t| t.rsplit('.').next().unwrap_or(t).to_string())
            .collect()
    }
}

async fn accept_loop(
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut changes: watch::Receiver<Fault>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut listener = Some(listener);
    loop {
        if *changes.borrow_and_update() == Fault::Refuse {
            // Not listening: the port is closed and connecting to it is refused.
            listener = None;
            if changes.changed().await.is_err() {
                return;
            }
            continue;
        }
        let open = match &listener {
            Some(open) => open,
            None => match TcpListener::bind(addr).await {
                Ok(open) => listener.insert(open),
                Err(e) => {
                    // A test's output is where this rare complaint belongs.
                    eprintln!("fault proxy cannot listen on {addr} again: {e}");
                    return;
                }
            },
        };
        tokio::select! {
            accepted = open.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
                let shared = shared.clone();
                let changes = changes.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, shared, changes).await;
                    drop(permit);
                });
            }
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

/// Whether the proxy is gone or refusing: a connection's cue to close.
async fn closing(changes: &mut watch::Receiver<Fault>) {
    loop {
        if *changes.borrow_and_update() == Fault::Refuse || changes.changed().await.is_err() {
            return;
        }
    }
}

/// One client connection: its requests, one after another, each forwarded on one upstream connection.
async fn serve(
    socket: TcpStream,
    shared: Arc<Shared>,
    mut changes: watch::Receiver<Fault>,
) -> io::Result<()> {
    let _ = socket.set_nodelay(true);
    let (client_in, mut client_out) = socket.into_split();
    let mut client_in = BufReader::new(client_in);
    let mut upstream: Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf)> = None;
    loop {
        if shared.fault() == Fault::Silent {
            return swallow(&mut client_in, &mut changes).await;
        }
        let request = tokio::select! {
            read = read_message(&mut client_in, Side::Request) => read?,
            _ = closing(&mut changes) => return Ok(()),
        };
        let Some(request) = request else {
            return Ok(());
        };
        if shared.fault() == Fault::Silent {
            return swallow(&mut client_in, &mut changes).await;
        }
        let target = header(&request.head, "x-amz-target").map(str::to_string);
        if let Some(target) = &target {
            shared
                .forwarded
                .lock()
                .expect("the log lock is never poisoned")
                .push(target.clone());
        }
        let (up_in, up_out) = match &mut upstream {
            Some(open) => open,
            None => {
                let socket = TcpStream::connect(shared.upstream).await?;
                let _ = socket.set_nodelay(true);
                let (r, w) = socket.into_split();
                upstream.insert((BufReader::new(r), w))
            }
        };
        up_out.write_all(&request.bytes).await?;
        let response = tokio::select! {
            read = read_message(up_in, Side::Response) => read?,
            _ = closing(&mut changes) => return Ok(()),
        };
        let Some(mut response) = response else {
            return Ok(());
        };
        if header(&response.head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            // The server closes this connection: the next request goes on a new one.
            upstream = None;
            if shared.keep_alive && !response.until_close {
                response.keep_open();
            }
        }
        if shared.take_drop(target.as_deref()) {
            // The server answered; the client hears nothing but the connection closing.
            return Ok(());
        }
        if let Some(target) = &target {
            shared
                .answered
                .lock()
                .expect("the log lock is never poisoned")
                .push((target.clone(), response.bytes.len()));
        }
        client_out.write_all(&response.bytes).await?;
        if response.until_close {
            return Ok(());
        }
    }
}

/// Reads and discards what the client sends, answering nothing, until it leaves or the proxy stops.
async fn swallow(
    client_in: &mut BufReader<OwnedReadHalf>,
    changes: &mut watch::Receiver<Fault>,
) -> io::Result<()> {
    let mut sink = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            read = client_in.read(&mut sink) => if read? == 0 { return Ok(()) },
            _ = closing(changes) => return Ok(()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Request,
    Response,
}

/// One HTTP/1.1 message as it came, head and body.
struct Message {
    head: Vec<u8>,
    bytes: Vec<u8>,
    /// The body ran to the end of the connection (no length, not chunked).
    until_close: bool,
}

impl Message {
    /// Takes `Connection: close` off the head: the client may send its next request on this connection.
    fn keep_open(&mut self) {
        let body = self.bytes.split_off(self.head.len());
        let head: Vec<u8> = self
            .head
            .split_inclusive(|b| *b == b'\n')
            .filter(|line| {
                let line = String::from_utf8_lossy(line);
                !line.split_once(':').is_some_and(|(name, value)| {
                    name.trim().eq_ignore_ascii_case("connection")
                        && value.trim().eq_ignore_ascii_case("close")
                })
            })
            .flatten()
            .copied()
            .collect();
        self.head = head;
        self.bytes = self.head.clone();
        self.bytes.extend(body);
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// The value of the header `name` in `head` (case-insensitive), trimmed.
fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(head)
        .ok()?
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim().eq_ignore_ascii_case(name))
        .map(|(_, value)| value.trim())
}

/// Reads one message; `None` when the connection ended cleanly before one began.
async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    side: Side,
) -> io::Result<Option<Message>> {
    let mut head = Vec::new();
    loop {
        let n = reader.read_until(b'\n', &mut head).await?;
        if n == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(invalid("message head too long"));
        }
        if head.ends_with(b"\r\n\r\n") {
            break;
        }
    }
    let mut bytes = head.clone();
    let status = std::str::from_utf8(&head)
        .ok()
        .and_then(|h| h.split(' ').nth(1))
        .and_then(|code| code.parse::<u16>().ok());
    let chunked = header(&head, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = header(&head, "content-length")
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| invalid("bad content-length"))
        })
        .transpose()?;
    let no_body = side == Side::Response && matches!(status, Some(100..=199 | 204 | 304));
    let mut until_close = false;
    if no_body {
        // A status that never has a body.
    } else if chunked {
        read_chunked(reader, &mut bytes).await?;
    } else if let Some(length) = length {
        if length > MAX_MESSAGE_BYTES {
            return Err(invalid("message too large"));
        }
        let start = bytes.len();
        bytes.resize(start + length, 0);
        reader.read_exact(&mut bytes[start..]).await?;
    } else if side == Side::Response {
        // No length: the body is whatever comes until the server closes.
        until_close = true;
        let mut body = Vec::new();
        reader
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_to_end(&mut body)
            .await?;
        if body.len() > MAX_MESSAGE_BYTES {
            return Err(invalid("message too large"));
        }
        bytes.extend(body);
    }
    Ok(Some(Message {
        head,
        bytes,
        until_close,
    }))
}

/// Copies a chunked body, chunk by chunk, to its last chunk and trailers.
async fn read_chunked<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    loop {
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).await?;
        out.extend_from_slice(&line);
        let size = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| l.trim().split(';').next())
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .ok_or_else(|| invalid("bad chunk size"))?;
        if out.len() + size > MAX_MESSAGE_BYTES {
            return Err(invalid("message too large"));
        }
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                let mut trailer = Vec::new();
                if reader.read_until(b'\n', &mut trailer).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                out.extend_from_slice(&trailer);
                if trailer == b"\r\n" {
                    return Ok(());
                }
            }
        }
        let start = out.len();
        out.resize(start + size + 2, 0);
        reader.read_exact(&mut out[start..]).await?;
    }
}
