//! Files as the tests send them: a real image's first bytes, and bytes in the JSON form a browser's
//! `JSON.stringify(new Uint8Array(…))` writes.

use serde_json::{Value, json};

/// A PNG's signature and header: enough for the content to be sniffed as an image.
pub const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde";

/// What `JSON.stringify(new Uint8Array(bytes))` writes: `{"0": 137, "1": 80, …}`.
pub fn uint8array_json(bytes: &[u8]) -> Value {
    bytes
        .iter()
        .enumerate()
        .map(|(i, b)| (i.to_string(), json!(b)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
