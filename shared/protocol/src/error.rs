//! Why a request body is not acceptable, said as the client can act on it: a body that is not a JSON object, and
//! the field at fault, named in the body as it was sent.

use chat_core::InvalidRequest;

/// Names `messages[i]` by its position in the body as sent, when messages were taken out before checking:
/// `kept[i]` is where the `i`-th message checked stood.
pub(crate) fn at_original_message(mut err: InvalidRequest, kept: &[usize]) -> InvalidRequest {
    if let Some(rest) = err.path.strip_prefix("messages[")
        && let Some((index, tail)) = rest.split_once(']')
        && let Some(original) = index.parse::<usize>().ok().and_then(|i| kept.get(i))
    {
        err.path = format!("messages[{original}]{tail}");
    }
    err
}

/// Turns a serde error at a path into an [`InvalidRequest`] whose message a person can act on.
pub(crate) fn from_path_error(
    err: serde_path_to_error::Error<serde_json::Error>,
) -> InvalidRequest {
    let path = err.path().to_string();
    let inner = err.into_inner().to_string();
    // serde says "missing field `x`" at the parent; name the field itself instead.
    if let Some(rest) = inner.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        let full = if path == "." || path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        };
        return InvalidRequest::new(full, "is required");
    }
    let path = if path == "." { String::new() } else { path };
    InvalidRequest::new(path, inner)
}

/// JSON is UTF-8 (RFC 8259); bytes that are not are named as such rather than as a JSON syntax error.
pub(crate) fn utf8(body: &[u8]) -> Result<(), InvalidRequest> {
    match std::str::from_utf8(body) {
        Ok(_) => Ok(()),
        Err(_) => Err(InvalidRequest::body("the body is not valid UTF-8")),
    }
}

pub(crate) fn not_json(e: serde_json::Error) -> InvalidRequest {
    InvalidRequest::body(format!("body is not valid JSON: {e}"))
}

pub(crate) fn not_an_object() -> InvalidRequest {
    InvalidRequest::body("body must be a JSON object")
}
