//! A message's files however they come (multipart parts, or `files` inside the JSON body as older protocol clients
//! send them), held to one set of checks, so that no way of sending a file is dropped or checked less.
//!
//! In JSON a file is `{data, contentType, filename?}`; `data` is base64 text, or the JSON form of a byte array: what
//! `JSON.stringify` makes of a `Uint8Array` (`{"0":137,"1":80,…}`) or of a Node `Buffer`
//! (`{"type":"Buffer","data":[137,80,…]}`), or a plain array of numbers.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use bytes::Bytes;
use chat_core::{Attachment, ChatError, InvalidRequest, RequestLimits, identify};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::request::{Endpoint, Files};

/// The longest file name taken (what file systems allow); it is stored and shown with the message.
const MAX_FILE_NAME_CHARS: usize = 255;

/// What a JSON file is, for the errors that refuse another shape.
const SHAPE: &str = "a file is {\"data\": base64 text or a byte array, \"contentType\": \"image/png\", \"filename\"?: \"shot.png\"}";

fn invalid(path: impl Into<String>, reason: impl Into<String>) -> ChatError {
    InvalidRequest::new(path, reason).into()
}

/// One file of a message, at `path` (`messages[i].files[j]`), as sent: refused (naming `path`) when its name is too
/// long, its kind is not taken or its bytes contradict what it declares, it is larger than its kind may be (a 413),
/// or it is empty. Its name is `name` when given and not blank, else `path`.
pub(crate) fn take(
    path: &str,
    name: Option<String>,
    declared: Option<&str>,
    bytes: Bytes,
    limits: &RequestLimits,
) -> Result<Attachment, ChatError> {
    let name = name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| path.to_string());
    if name.chars().count() > MAX_FILE_NAME_CHARS {
        return Err(invalid(
            path,
            format!("the file name is longer than {MAX_FILE_NAME_CHARS} characters"),
        ));
    }
    let kind = identify(&name, declared, &bytes).map_err(|reason| invalid(path, reason))?;
    limits
        .files
        .check_size(path, kind, bytes.len() as u64)
        .map_err(ChatError::from)?;
    if bytes.is_empty() {
        return Err(invalid(path, "the file is empty"));
    }
    Ok(Attachment::new(name, kind, bytes))
}

/// Takes each message's `files` out of a JSON request body (so nothing else reads them as an unknown field) and
/// returns them, checked as [`take`] checks a part. `null` or `[]` is no files. Any other shape is a 400 naming the
/// field; on `/chat-ui/chat`, which takes no files, any file is. Messages that are not objects are left for the
/// typed parse to refuse.
pub(crate) fn from_json(
    body: &mut Value,
    endpoint: Endpoint,
    limits: &RequestLimits,
) -> Result<Files, ChatError> {
    let mut files = Files::new();
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return Ok(files);
    };
    for (i, message) in messages.iter_mut().enumerate() {
        let Some(sent) = message.as_object_mut().and_then(|m| m.remove("files")) else {
            continue;
        };
        let path = format!("messages[{i}].files");
        let list = match sent {
            Value::Null => continue,
            Value::Array(list) if list.is_empty() => continue,
            Value::Array(list) => list,
            other => {
                return Err(invalid(
                    path,
                    format!(
                        "expected an array of files, not {}; {SHAPE}",
                        kind_of(&other)
                    ),
                ));
            }
        };
        if endpoint != Endpoint::Protocol {
            return Err(invalid(
                path,
                "this route takes no files; send them to /chat or /chat/stream",
            ));
        }
        let taken = list
            .into_iter()
            .enumerate()
            .map(|(j, file)| one(&format!("{path}[{j}]"), file, limits))
            .collect::<Result<Vec<_>, _>>()?;
        files.insert(i, taken);
    }
    Ok(files)
}

/// One JSON file at `path`.
fn one(path: &str, file: Value, limits: &RequestLimits) -> Result<Attachment, ChatError> {
    let Value::Object(mut file) = file else {
        return Err(invalid(
            path,
            format!("expected a file, not {}; {SHAPE}", kind_of(&file)),
        ));
    };
    let declared = match file.remove("contentType") {
        Some(Value::String(t)) if !t.trim().is_empty() => t,
        None | Some(Value::Null | Value::String(_)) => {
            return Err(invalid(
                format!("{path}.contentType"),
                "is required: the file's media type, such as image/png or application/pdf",
            ));
        }
        Some(other) => {
            return Err(invalid(
                format!("{path}.contentType"),
                format!(
                    "expected a media type such as image/png, not {}",
                    kind_of(&other)
                ),
            ));
        }
    };
    let name = match file.remove("filename") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name),
        Some(other) => {
            return Err(invalid(
                format!("{path}.filename"),
                format!("expected a string, not {}", kind_of(&other)),
            ));
        }
    };
    let data = file.remove("data");
    // A file's other fields would be dropped: say so rather than keep a name or a size that means nothing here.
    if let Some(field) = file.keys().next() {
        return Err(invalid(
            // The name is the client's text: quoted, so the log line of the refusal leaves it out.
            format!("{path}[{field:?}]"),
            format!("is not a field of a file; {SHAPE}"),
        ));
    }
    let bytes = bytes_of(&format!("{path}.data"), data)?;
    take(path, name, Some(&declared), Bytes::from(bytes), limits)
}

/// A file's `data`, at `path`.
fn bytes_of(path: &str, data: Option<Value>) -> Result<Vec<u8>, ChatError> {
    match data {
        None | Some(Value::Null) => Err(invalid(
            path,
            "is required: the file's bytes, as base64 text or a byte array (a file listed by the history is not \
             read back from its url: send earlier messages without their files, and their files are read from the \
             chat)",
        )),
        Some(Value::String(text)) => base64(path, &text),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(k, item)| byte(&format!("{path}[{k}]"), item))
            .collect(),
        Some(Value::Object(map)) => byte_object(path, map),
        Some(other) => Err(invalid(
            path,
            format!(
                "expected base64 text or a byte array, not {}",
                kind_of(&other)
            ),
        )),
    }
}

/// Base64 as encoders write it: the standard or the URL-safe alphabet, padded or not, in lines or not.
fn base64(path: &str, text: &str) -> Result<Vec<u8>, ChatError> {
    if text.starts_with("data:") {
        return Err(invalid(
            path,
            "is a data: URL; send only its base64 text (after the comma), and its media type as contentType",
        ));
    }
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    let compact: String;
    let text = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        compact = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        &compact
    } else {
        text
    };
    let engine = if text.contains(['-', '_']) {
        URL_SAFE
    } else {
        STANDARD
    };
    engine
        .decode(text)
        .map_err(|e| invalid(path, format!("is not base64: {e}")))
}

/// One byte of an array: an integer from 0 to 255.
fn byte(path: &str, item: &Value) -> Result<u8, ChatError> {
    item.as_u64()
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| {
            invalid(
                path,
                format!(
                    "expected a byte (an integer from 0 to 255), not {}",
                    describe(item)
                ),
            )
        })
}

/// A byte array as an object: a `Uint8Array`'s (`{"0": 137, "1": 80, …}`, every index from 0 once) or a Node
/// `Buffer`'s (`{"type": "Buffer", "data": [137, 80, …]}`).
fn byte_object(path: &str, map: Map<String, Value>) -> Result<Vec<u8>, ChatError> {
    if map.get("type").and_then(Value::as_str) == Some("Buffer") && map.len() == 2 {
        return match map.get("data") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(k, item)| byte(&format!("{path}.data[{k}]"), item))
                .collect(),
            _ => Err(invalid(
                format!("{path}.data"),
                "expected the Buffer's bytes, an array of numbers",
            )),
        };
    }
    let len = map.len();
    let mut bytes = vec![0u8; len];
    for (key, item) in &map {
        // Keys are distinct, so `len` indexes each below `len` are every index once.
        let index = canonical_index(key).filter(|&k| k < len).ok_or_else(|| {
            invalid(
                path,
                format!(
                    "expected base64 text or a byte array; as an object, its keys are the indexes 0 to {} (what \
                     JSON.stringify makes of a Uint8Array), not {key:?}",
                    len.saturating_sub(1)
                ),
            )
        })?;
        bytes[index] = byte(&format!("{path}[\"{key}\"]"), item)?;
    }
    Ok(bytes)
}

/// A decimal index as JavaScript writes it: no sign, no leading zero.
fn canonical_index(key: &str) -> Option<usize> {
    let canonical = !key.is_empty()
        && key.len() <= 10
        && key.bytes().all(|b| b.is_ascii_digit())
        && (key == "0" || !key.starts_with('0'));
    canonical.then(|| key.parse().ok()).flatten()
}

/// What kind of JSON value this is, for an error.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short value for an error: a number as it is, anything else by its kind.
fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        other => kind_of(other).to_string(),
    }
}

/// Whether a JSON body's messages carry files (any `files` array that is not empty), read without holding the
/// rest: a body larger than the JSON limit is taken only if it does.
pub fn carries_files(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        messages: Vec<ProbeMessage>,
    }
    #[derive(Deserialize)]
    struct ProbeMessage {
        #[serde(default)]
        files: Option<Vec<IgnoredAny>>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|probe| {
        probe
            .messages
            .iter()
            .any(|m| m.files.as_ref().is_some_and(|f| !f.is_empty()))
    })
}
