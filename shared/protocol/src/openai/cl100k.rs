//! OpenAI's `cl100k_base` tokenizer, decoding only: the bytes each token id stands for (what `/v1/embeddings`
//! turns a list of token ids into). The table is made at build time from `tiktoken-rs` (build.rs says how), as
//! three arrays in id order, about 0.8 MB in all: each id's length, every token's bytes one after another, and
//! where each run of [`BLOCK`] ids starts. An id's bytes are found by adding at most `BLOCK - 1` lengths to its
//! run's start: no hash map is built, nothing is parsed at start.

/// Ids per entry of [`BLOCKS`] (build.rs writes with the same).
const BLOCK: usize = 64;

/// The length of each id's bytes, in id order; 0: no token has that id.
static LENGTHS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_lengths"));

/// Every token's bytes, one after another, in id order.
static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_bytes"));

/// Where each run of [`BLOCK`] ids starts in [`BYTES`] (`u32`, little-endian).
static BLOCKS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_blocks"));

/// A token id `cl100k_base` does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownToken(pub u32);

/// The bytes token `id` stands for (a special token's are its name, as `<|endoftext|>`); `None` if there is no
/// such token.
pub fn token_bytes(id: u32) -> Option<&'static [u8]> {
    let id = usize::try_from(id).ok()?;
    let length = usize::from(*LENGTHS.get(id)?);
    if length == 0 {
        return None;
    }
    let run = id / BLOCK;
    let run_start = BLOCKS.get(run * 4..run * 4 + 4)?;
    let run_start = u32::from_le_bytes(run_start.try_into().ok()?) as usize;
    let before: usize = LENGTHS[run * BLOCK..id]
        .iter()
        .map(|l| usize::from(*l))
        .sum();
    let start = run_start + before;
    BYTES.get(start..start + length)
}

/// The bytes the token ids `ids` spell, one after another (as `tiktoken`'s `decode_bytes`), or the first id that
/// is no token.
pub fn decode_bytes(ids: &[u32]) -> Result<Vec<u8>, UnknownToken> {
    let mut bytes = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        bytes.extend_from_slice(token_bytes(id).ok_or(UnknownToken(id))?);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_bytes_they_stand_for() {
        assert_eq!(token_bytes(15339), Some(&b"hello"[..]));
        assert_eq!(token_bytes(1917), Some(&b" world"[..]));
        assert_eq!(token_bytes(0), Some(&b"!"[..]));
        assert_eq!(token_bytes(100257), Some(&b"<|endoftext|>"[..]));
        assert_eq!(token_bytes(100276), Some(&b"<|endofprompt|>"[..]));
        assert_eq!(decode_bytes(&[15339, 1917]).unwrap(), b"hello world");
        assert_eq!(decode_bytes(&[]).unwrap(), b"");
    }

    #[test]
    fn ids_no_token_has_are_refused() {
        // 100256 is between the last ordinary token and the first special one; 100277 is past the last.
        for id in [100256, 100261, 100275, 100277, 4_000_000, u32::MAX] {
            assert_eq!(token_bytes(id), None, "{id}");
        }
        assert_eq!(
            decode_bytes(&[15339, 100256, 4_000_000]),
            Err(UnknownToken(100256))
        );
    }
}
