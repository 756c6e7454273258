//! So that no write lands twice: every write carries a random token that the chat item keeps among its latest
//! writes', and a writer whose answer was lost (or whose commit's race may have been with its own earlier attempt)
//! reads the chat item back to tell whether its write landed (see [`super::DynamoStore::landed`]).

/// How many of the latest writes' tokens the chat item keeps, so that a writer whose answer was lost can tell
/// whether its write landed (far more writes than can land on one chat while a writer reads back).
pub(super) const WRITES_KEPT: usize = 64;

/// A random token: a write's, or a generation's (see [`super::keys::new_generation`]).
pub(super) fn new_token() -> String {
    format!("{:016x}", fastrand::u64(..))
}

/// The latest write tokens after the write `token`, when `kept` were the latest before it (oldest first).
pub(super) fn writes_after<'a>(kept: &'a [String], token: &'a str) -> Vec<&'a str> {
    let keep = kept.len().min(WRITES_KEPT - 1);
    kept[kept.len() - keep..]
        .iter()
        .map(String::as_str)
        .chain([token])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chat_keeps_its_latest_write_tokens() {
        let mut writes: Vec<String> = Vec::new();
        for i in 0..100 {
            let token = format!("t{i}");
            writes = writes_after(&writes, &token)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
        assert_eq!(writes.len(), WRITES_KEPT);
        assert_eq!(writes.last().unwrap(), "t99");
        assert_eq!(writes[0], format!("t{}", 100 - WRITES_KEPT));
    }
}
