//! Why a request body is not acceptable, naming the field and the reason.

use std::fmt;

/// A body that cannot be taken: which field (a path such as `messages[2].role`, empty for the whole body) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidRequest {
    pub path: String,
    pub reason: String,
}

impl InvalidRequest {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// A fault of the body as a whole (not JSON, not an object).
    pub fn body(reason: impl Into<String>) -> Self {
        Self::new("", reason)
    }

    /// Refuses `text`, the field at `path`, when it holds more than `limit` characters.
    pub fn check_length(path: &str, text: &str, limit: usize) -> Result<(), Self> {
        // A text is never more characters than bytes: most texts pass without being counted.
        if text.len() <= limit {
            return Ok(());
        }
        let chars = text.chars().count();
        if chars > limit {
            return Err(Self::new(
                path,
                format!("is {chars} characters long, more than the limit of {limit}"),
            ));
        }
        Ok(())
    }

    /// Names `messages[i]` by its position in the body as sent, when messages were taken out before checking:
    /// `kept[i]` is where the `i`-th message checked stood.
    pub(crate) fn at_original_message(mut self, kept: &[usize]) -> Self {
        if let Some(rest) = self.path.strip_prefix("messages[")
            && let Some((index, tail)) = rest.split_once(']')
            && let Some(original) = index.parse::<usize>().ok().and_then(|i| kept.get(i))
        {
            self.path = format!("messages[{original}]{tail}");
        }
        self
    }
}

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
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
