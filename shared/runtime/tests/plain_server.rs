//! The plain server (what a container runs, and the local run) answers a body over its limit with a 413 the client
//! can read: a client that writes its whole body before it reads (as most do) gets the JSON error, not a broken
//! pipe. Raw TCP, so that nothing between the test and the server reads the answer early or retries.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::http::StatusCode;
use axum::routing::post;
use chat_edge::{Cors, json_response, only, read_json_body};
use chat_runtime::function_service;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: usize = 1024 * 1024;
const MIB: usize = 1024 * 1024;

/// A plain server whose one route reads a JSON body of at most [`LIMIT`] bytes and answers its length.
async fn server() -> SocketAddr {
    let routes = Router::new().route(
        "/read",
        only(
            "POST",
            post(|request: Request| async move {
                let (parts, body) = request.into_parts();
                match read_json_body(&parts.headers, body, LIMIT).await {
                    Ok(bytes) => json_response(StatusCode::OK, &json!({"read": bytes.len()})),
                    Err(e) => chat_edge::error_response(&e),
                }
            }),
        ),
    );
    let service = function_service(routes, &Cors::default(), &[Method::POST]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(chat_runtime::serve_plain(
        listener,
        service,
        std::future::pending(),
    ));
    address
}

/// A connection to a server of its own.
async fn connected() -> TcpStream {
    TcpStream::connect(server().await).await.unwrap()
}

/// One response read off `stream`: its status and its JSON body (by its `Content-Length`).
async fn response(stream: &mut TcpStream) -> (u16, Value) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = stream
            .read(&mut byte)
            .await
            .expect("the answer is readable");
        assert_eq!(n, 1, "the connection closed before an answer: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no Content-Length: {head}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    (status, serde_json::from_slice(&body).unwrap())
}

/// A JSON body of `size` bytes.
fn body_of(size: usize) -> Vec<u8> {
    let mut body = br#"{"text":""#.to_vec();
    body.resize(size - 2, b'x');
    body.extend_from_slice(br#""}"#);
    body
}

fn head(extra: &str) -> String {
    format!("POST /read HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n{extra}\r\n")
}

async fn small_request_is_read(stream: &mut TcpStream) {
    let body = body_of(100);
    let request = head(&format!("Content-Length: {}\r\n", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    assert_eq!(response(stream).await, (200, json!({"read": 100})));
}

fn is_too_large(answer: &(u16, Value)) {
    assert_eq!(answer.0, 413, "{answer:?}");
    assert_eq!(
        answer.1["error"],
        format!("The request body is larger than the limit of {LIMIT} bytes.")
    );
}

#[tokio::test]
async fn a_client_that_writes_8_mib_whole_reads_its_413() {
    let mut stream = connected().await;
    small_request_is_read(&mut stream).await;

    let body = body_of(8 * MIB);
    let request = head(&format!("Content-Length: {}\r\n", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    // Whole, before reading anything: the write fails if the server stops reading and closes.
    stream
        .write_all(&body)
        .await
        .expect("the server reads the whole body");
    is_too_large(&response(&mut stream).await);
    // All of it was read: the connection is still good for the next request.
    small_request_is_read(&mut stream).await;
}

#[tokio::test]
async fn a_chunked_body_of_8_mib_gets_its_413_too() {
    let mut stream = connected().await;
    let request = head("Transfer-Encoding: chunked\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let body = body_of(8 * MIB);
    for chunk in body.chunks(64 * 1024) {
        stream
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await
            .unwrap();
        stream.write_all(chunk).await.expect("the server reads on");
        stream.write_all(b"\r\n").await.unwrap();
    }
    stream.write_all(b"0\r\n\r\n").await.unwrap();
    is_too_large(&response(&mut stream).await);
    small_request_is_read(&mut stream).await;
}

#[tokio::test]
async fn a_body_said_to_be_too_large_is_refused_before_it_is_sent() {
    let address = server().await;
    // A client that waits for `100 Continue` is told at once, and sends nothing.
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = head(&format!(
        "Content-Length: {}\r\nExpect: 100-continue\r\n",
        8 * MIB
    ));
    stream.write_all(request.as_bytes()).await.unwrap();
    is_too_large(&response(&mut stream).await);
    // A body longer than the server would read through is refused as soon as its length is known.
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = head(&format!(
        "Content-Length: {}\r\n",
        chat_edge::DRAIN_LIMIT_BYTES + 1
    ));
    stream.write_all(request.as_bytes()).await.unwrap();
    is_too_large(&response(&mut stream).await);
}

#[tokio::test]
async fn a_body_at_its_limit_is_read_whole() {
    let mut stream = connected().await;
    let body = body_of(LIMIT);
    let request = head(&format!("Content-Length: {}\r\n", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    assert_eq!(response(&mut stream).await, (200, json!({"read": LIMIT})));
    let body = body_of(LIMIT + 1);
    let request = head(&format!("Content-Length: {}\r\n", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    is_too_large(&response(&mut stream).await);
}

#[tokio::test]
async fn a_body_trickled_past_its_limit_is_not_waited_for_past_the_drain_time() {
    let mut stream = connected().await;
    // Says 8 MiB, sends a little past the limit, then nothing more: the server answers when its drain time is up,
    // instead of holding the connection for as long as the client likes.
    let request = head(&format!("Content-Length: {}\r\n", 8 * MIB));
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(&body_of(LIMIT + MIB)).await.unwrap();
    let answer = tokio::time::timeout(chat_edge::DRAIN_FOR * 6, response(&mut stream))
        .await
        .expect("the 413 comes once the drain time is up");
    is_too_large(&answer);
}
