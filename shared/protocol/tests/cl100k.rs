//! The compact `cl100k_base` table the functions link (`chat_protocol::openai::cl100k`, made by build.rs) decodes
//! every token id exactly as `tiktoken-rs` does: the same bytes for each id it has, special tokens included, and a
//! refusal for each id it has not (up to well past the last).

use chat_protocol::openai::cl100k;

#[test]
fn every_id_decodes_as_tiktoken_decodes_it() {
    let tiktoken = tiktoken_rs::cl100k_base_singleton();
    let mut known = 0;
    for id in 0..=200_000u32 {
        let theirs = tiktoken.decode_bytes(&[id]).ok();
        let ours = cl100k::token_bytes(id);
        assert_eq!(ours, theirs.as_deref(), "token id {id}");
        known += usize::from(theirs.is_some());
    }
    // 100256 ordinary tokens and 5 special ones.
    assert_eq!(known, 100_261);
    assert_eq!(cl100k::token_bytes(u32::MAX), None);
}

#[test]
fn a_list_of_ids_decodes_as_tiktoken_decodes_it() {
    let tiktoken = tiktoken_rs::cl100k_base_singleton();
    let ids: Vec<u32> = (0..100_256).step_by(97).chain([100257, 100276]).collect();
    assert_eq!(
        cl100k::decode_bytes(&ids).unwrap(),
        tiktoken.decode_bytes(&ids).unwrap()
    );
    let text = "hello world, ünïcödé 🦀 and\nlines\t<|endoftext|>";
    let encoded = tiktoken.encode_with_special_tokens(text);
    assert_eq!(cl100k::decode_bytes(&encoded).unwrap(), text.as_bytes());
    assert_eq!(
        cl100k::decode_bytes(&[15339, 1917, 100256]),
        Err(cl100k::UnknownToken(100256))
    );
    assert!(tiktoken.decode_bytes(&[15339, 1917, 100256]).is_err());
}
