//! Why a request cannot be taken, naming the field and the reason: every dialect's validation and the core's own
//! checks speak it, and the HTTP edge answers it with a 400.

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
