//! A block of a model's reasoning as its provider signed it: what the model port returns and wants back, and what
//! an answer hands a client that keeps its reasoning. A module of its own, depending on nothing of the core's, so
//! that the conversation's answer and the model port can both name it.

/// One block of a model's reasoning, as the model provider signed it (its signature proves the text unchanged when
/// it is given back), or as it sent it encrypted (`redacted`, then no text); a block with neither a signature nor
/// redacted bytes is never given back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReasoningBlock {
    pub text: String,
    pub signature: Option<String>,
    /// The encrypted reasoning of a redacted block, given back as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<Vec<u8>>,
}

impl ReasoningBlock {
    /// A block of reasoning text and the signature its provider gave it.
    pub fn signed(text: impl Into<String>, signature: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            signature: Some(signature.into()),
            redacted: None,
        }
    }

    /// A redacted block: the provider's encrypted bytes.
    pub fn redacted(bytes: Vec<u8>) -> Self {
        Self {
            text: String::new(),
            signature: None,
            redacted: Some(bytes),
        }
    }

    /// Whether the block may be given back to the model (signed, or redacted).
    pub fn kept(&self) -> bool {
        self.signature.is_some() || self.redacted.is_some()
    }
}
