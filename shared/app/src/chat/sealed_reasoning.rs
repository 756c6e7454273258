//! A Responses client that keeps nothing on the server (`store: false` with
//! `include: ["reasoning.encrypted_content"]`, what Codex sends) carries the model's signed reasoning itself: sealed
//! here (AES-256-GCM under a key derived from `RESPONSES_REASONING_KEY`, bound to its owner) so that only this
//! deployment can read it, and only for the same owner, when it comes back with the tool calls it led to.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chat_core::ReasoningBlock;

/// The first byte of a sealed text: the format (a new one gets a new number).
const VERSION: u8 = 1;
/// What the key is derived for, so that the secret serves nothing else.
const KEY_LABEL: &[u8] = b"chat-backend/responses/reasoning/v1\0";
/// What the sealed text is bound to besides its owner.
const AAD_LABEL: &[u8] = b"responses.reasoning.encrypted_content\0";

/// Seals and opens reasoning with the deployment's key.
pub(crate) struct ReasoningSeal {
    key: LessSafeKey,
    random: SystemRandom,
}

impl ReasoningSeal {
    /// The seal of the operator's secret (at least 32 characters, checked by the configuration).
    pub(crate) fn new(secret: &str) -> Self {
        let material = [KEY_LABEL, secret.as_bytes()].concat();
        let key = digest(&SHA256, &material);
        let key =
            UnboundKey::new(&AES_256_GCM, key.as_ref()).expect("a SHA-256 digest is 32 bytes");
        Self {
            key: LessSafeKey::new(key),
            random: SystemRandom::new(),
        }
    }

    fn aad(owner: &str) -> Vec<u8> {
        [AAD_LABEL, owner.as_bytes()].concat()
    }

    /// `blocks` as an opaque text only [`Self::open`] of the same deployment and `owner` reads.
    pub(crate) fn seal(&self, owner: &str, blocks: &[ReasoningBlock]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source answers");
        let mut data = serde_json::to_vec(blocks).expect("reasoning blocks serialize");
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(Self::aad(owner)),
                &mut data,
            )
            .expect("sealing in memory does not fail");
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + data.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&data);
        STANDARD.encode(sealed)
    }

    /// The blocks `sealed` holds, when this deployment sealed it for `owner` and nothing of it changed; `None`
    /// otherwise (another deployment's or owner's, changed, or not a sealed text at all).
    pub(crate) fn open(&self, owner: &str, sealed: &str) -> Option<Vec<ReasoningBlock>> {
        let bytes = STANDARD.decode(sealed).ok()?;
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, data) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(Self::aad(owner)), &mut data)
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks() -> Vec<ReasoningBlock> {
        vec![
            ReasoningBlock::signed("Let me think.", "c2lnbmF0dXJl"),
            ReasoningBlock::redacted(vec![1, 2, 3]),
        ]
    }

    #[test]
    fn what_is_sealed_opens_for_its_owner_only_and_unchanged_only() {
        let seal = ReasoningSeal::new(&"s".repeat(32));
        let sealed = seal.seal("alice", &blocks());
        assert_eq!(seal.open("alice", &sealed), Some(blocks()));
        assert_eq!(seal.open("bob", &sealed), None, "another owner's");
        // Another deployment's key.
        assert_eq!(
            ReasoningSeal::new(&"t".repeat(32)).open("alice", &sealed),
            None
        );
        // One bit changed anywhere: refused.
        let bytes = STANDARD.decode(&sealed).unwrap();
        for at in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            assert_eq!(seal.open("alice", &STANDARD.encode(changed)), None, "{at}");
        }
        for junk in ["", "not base64!", "AQ==", &STANDARD.encode([1u8; 12])] {
            assert_eq!(seal.open("alice", junk), None, "{junk:?}");
        }
        // The text says nothing of what it holds, and two seals of the same differ (a fresh nonce each).
        assert!(!String::from_utf8_lossy(&bytes).contains("think"));
        assert_ne!(seal.seal("alice", &blocks()), sealed);
    }
}
