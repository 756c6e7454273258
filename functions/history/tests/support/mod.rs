//! The history function alone on a fresh moto table, as its tests that need no model drive it: requests through its
//! whole edge, and the JSON error a refused one answers.

// Each test file that includes it uses only some of it.
#![allow(dead_code)]

use chat_aws::DynamoStore;
use chat_testing::harness::{self, Reply};
use serde_json::{Value, json};

pub struct World {
    pub history: history::App<DynamoStore>,
}

/// The history function on a fresh table, its configuration holding `env` as well.
pub async fn world(env: &[(&str, &str)]) -> World {
    let config = harness::config(env);
    World {
        history: history::App::new(harness::fresh_store().await, harness::auth(), &config),
    }
}

impl World {
    /// `method path` with `headers` and `body`, as sent.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut request = lambda_http::http::Request::builder()
            .method(method)
            .uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(lambda_http::Body::from(body.to_vec()))
            .unwrap();
        Reply::buffered(self.history.handle(request).await)
    }

    /// `method path` with a JSON `body`.
    pub async fn send(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.send_raw(method, path, &[("content-type", "application/json")], body)
            .await
    }
}

/// Asserts that `reply` refused its request with `status` and the JSON `error`.
pub fn refused(reply: &Reply, status: u16, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.json(), json!({ "error": error }));
}

/// The JSON of a reply that must be `status`.
pub fn json_of(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    reply.json()
}

/// A multipart body with `boundary`: each part its header lines (as written, `\r\n` between them) and its bytes.
pub fn multipart_body<'a>(
    boundary: &str,
    parts: impl IntoIterator<Item = (String, &'a [u8])>,
) -> Vec<u8> {
    let mut body = Vec::new();
    for (headers, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// The header lines of a part of the field `files` holding the file `filename` of `content_type`.
pub fn file_headers(filename: &str, content_type: &str) -> String {
    format!(
        "content-disposition: form-data; name=\"files\"; filename=\"{filename}\"\r\ncontent-type: {content_type}"
    )
}

/// `POST path` with the multipart `body` written with `boundary`, and `authorization` when given.
pub fn multipart_request(
    path: &str,
    boundary: &str,
    authorization: Option<String>,
    body: Vec<u8>,
) -> lambda_http::Request {
    let mut request = lambda_http::http::Request::builder()
        .method("POST")
        .uri(path)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        );
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    request.body(lambda_http::Body::from(body)).unwrap()
}
