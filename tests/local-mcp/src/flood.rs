//! A hostile MCP server, for the tests that bound what a client holds: its one tool, `flood` (`{bytes, sse?}`),
//! answers with a text of `bytes` bytes (digits), as a JSON body or as one SSE event. The answer is made as it is
//! sent, from one block of about 64 KiB, so the server holds next to nothing whatever it sends, and a test measuring its
//! client's memory in the same process measures the client's. It speaks just enough of MCP's streamable HTTP for
//! a client: `initialize`, notifications (202), `tools/list` (the tool marked `readOnlyHint: true`), `tools/call`;
//! a GET (a stream for the server's own messages) is 405.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The size of the block the answer is sent in (a multiple of 10, so that each block goes on with the digits).
const BLOCK: usize = 65_530;

/// The text `flood` answers with, of `bytes` bytes: the digits 0 to 9 over and over.
pub fn text_of(bytes: usize) -> String {
    (0..bytes)
        .map(|i| char::from(b'0' + (i % 10) as u8))
        .collect()
}

/// Starts the server on `addr` (port 0 for any free port): its address and its task, which serves until aborted.
/// It answers MCP at [`crate::PATH`].
pub async fn start(addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(
        crate::PATH,
        post(answer)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::OK }),
    );
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("local-mcp flood: the server stopped: {e}");
        }
    });
    Ok((addr, task))
}

async fn answer(body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification.
        return StatusCode::ACCEPTED.into_response();
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match message.get("method").and_then(Value::as_str) {
        Some("initialize") => json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "local-mcp-flood", "version": env!("CARGO_PKG_VERSION")}
        }),
        Some("tools/list") => json!({"tools": [{
            "name": "flood",
            "description": "Answers with a text of the given number of bytes.",
            "inputSchema": {
                "type": "object",
                "properties": {"bytes": {"type": "integer"}, "sse": {"type": "boolean"}},
                "required": ["bytes"]
            },
            "annotations": {"readOnlyHint": true}
        }]}),
        Some("tools/call") => {
            let arguments = &params["arguments"];
            let bytes = arguments["bytes"].as_u64().unwrap_or(0) as usize;
            let sse = arguments["sse"].as_bool().unwrap_or(false);
            return flood(&id, bytes, sse);
        }
        _ => {
            return json_response(json!({
                "jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}
            }));
        }
    };
    let mut response = json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    response.headers_mut().insert(
        "mcp-session-id",
        header::HeaderValue::from_static("flood-session"),
    );
    response
}

fn json_response(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The answer to a call: `bytes` bytes of text in a JSON-RPC result, sent block by block.
fn flood(id: &Value, bytes: usize, sse: bool) -> Response {
    let mut head =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#);
    let mut tail = r#""}]}}"#.to_string();
    if sse {
        head.insert_str(0, "event: message\ndata: ");
        tail.push_str("\n\n");
    }
    let block = Bytes::from(text_of(BLOCK));
    let blocks = (0..bytes.div_ceil(BLOCK)).map(move |i| {
        let size = BLOCK.min(bytes - i * BLOCK);
        Ok::<_, Infallible>(block.slice(..size))
    });
    let body = std::iter::once(Ok(Bytes::from(head)))
        .chain(blocks)
        .chain(std::iter::once(Ok(Bytes::from(tail))));
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    (
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(futures_util::stream::iter(body)),
    )
        .into_response()
}
