//! OpenAI's `cl100k_base` table for `/v1/embeddings`' token ids (src/openai/cl100k.rs), made here from
//! `tiktoken-rs` (a build dependency only: its 1.7 MB of base64 text, its hash maps and its regex engine are not
//! linked into the functions, which only decode). Every token id from 0 to the last the tokenizer knows (its special
//! tokens included) is decoded by `tiktoken-rs` itself, and written in id order as:
//!
//! - `cl100k_lengths`: one byte per id, the length of its bytes (0: no token has that id);
//! - `cl100k_bytes`: every token's bytes, one after another, in id order;
//! - `cl100k_blocks`: where each run of [`BLOCK`] ids starts in `cl100k_bytes` (`u32`, little-endian).

use std::path::Path;

/// Ids per entry of `cl100k_blocks` (src/openai/cl100k.rs reads with the same).
const BLOCK: usize = 64;

/// Past the last id of `cl100k_base` (100276, `<|endofprompt|>`): the ids tried.
const IDS_TRIED: u32 = 200_000;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let bpe = tiktoken_rs::cl100k_base().expect("tiktoken-rs's cl100k_base table");
    let mut lengths = Vec::new();
    let mut bytes = Vec::new();
    for id in 0..IDS_TRIED {
        match bpe.decode_bytes(&[id]) {
            Ok(token) => {
                let length = u8::try_from(token.len())
                    .ok()
                    .filter(|l| *l > 0)
                    .unwrap_or_else(|| panic!("token {id} is {} bytes", token.len()));
                lengths.push(length);
                bytes.extend_from_slice(&token);
            }
            Err(_) => lengths.push(0),
        }
    }
    let known = lengths.iter().rposition(|l| *l > 0).expect("a token") + 1;
    lengths.truncate(known);
    let mut blocks = Vec::new();
    let mut at = 0u32;
    for run in lengths.chunks(BLOCK) {
        blocks.extend_from_slice(&at.to_le_bytes());
        at += run.iter().map(|l| u32::from(*l)).sum::<u32>();
    }
    assert_eq!(at as usize, bytes.len());
    let out = std::env::var_os("OUT_DIR").expect("OUT_DIR");
    let out = Path::new(&out);
    for (name, contents) in [
        ("cl100k_lengths", &lengths),
        ("cl100k_bytes", &bytes),
        ("cl100k_blocks", &blocks),
    ] {
        std::fs::write(out.join(name), contents).expect("OUT_DIR is writable");
    }
}
