//! A tool's answer kept only as far as the model reads it: the start of a JSON-RPC message cut short is closed into
//! valid JSON, and the call's result rebuilt from what it holds, marked as cut (see [`crate::transport`]).

use rmcp::model::{ContentBlock, RequestId, ServerJsonRpcMessage};
use serde_json::{Map, Value, json};

/// The `_meta` key of a result rebuilt from an answer cut while it was read: the number of bytes read.
pub(crate) const CUT_META: &str = "chat-mcp/cut";

/// The deepest nesting closed (serde_json reads no deeper than 128).
const MAX_DEPTH: usize = 128;

/// `prefix`, the start of a JSON text, closed into a valid JSON text at the last point where that can be done
/// without inventing anything but closing quotes and brackets: inside a string value (at a character, not inside
/// an escape), after a complete value, or after an opening bracket. `None` when there is no such point.
pub(crate) fn close(prefix: &[u8]) -> Option<Vec<u8>> {
    // Each open container: `true` for an object.
    let mut stack: Vec<bool> = Vec::new();
    // Within an object: whether the next string is a key.
    let mut expect_key: Vec<bool> = Vec::new();
    let mut in_string = false;
    let mut string_is_key = false;
    // Where the escape under way began, and how many bytes of it are still to come.
    let mut escape: Option<(usize, usize)> = None;
    // The last `\uD800`..`\uDBFF` escape (the first half of a pair) and where it began and ended.
    let mut high_surrogate: Option<(usize, usize)> = None;
    let mut in_scalar = false;
    // The last point the text can be closed at, and the brackets that close it there.
    let mut safe: Option<(usize, Vec<bool>)> = None;

    for (at, &byte) in prefix.iter().enumerate() {
        if in_string {
            if let Some((start, left)) = escape {
                if left == 5 && byte == b'u' {
                    escape = Some((start, 4));
                } else if left == 5 || left == 1 {
                    escape = None;
                    if left == 1 {
                        let hex = std::str::from_utf8(&prefix[start + 2..=at]).ok();
                        let unit = hex.and_then(|h| u16::from_str_radix(h, 16).ok());
                        high_surrogate = unit
                            .filter(|u| (0xD800..0xDC00).contains(u))
                            .map(|_| (start, at + 1));
                    }
                } else {
                    escape = Some((start, left - 1));
                }
                continue;
            }
            match byte {
                b'\\' => escape = Some((at, 5)),
                b'"' => {
                    in_string = false;
                    if !string_is_key {
                        safe = Some((at + 1, stack.clone()));
                    }
                }
                _ => {}
            }
            continue;
        }
        let ends_scalar = matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b',' | b'}' | b']');
        if in_scalar && ends_scalar {
            in_scalar = false;
            safe = Some((at, stack.clone()));
        }
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'{' | b'[' => {
                if stack.len() >= MAX_DEPTH {
                    break;
                }
                stack.push(byte == b'{');
                expect_key.push(byte == b'{');
                safe = Some((at + 1, stack.clone()));
            }
            b'}' | b']' => {
                stack.pop();
                expect_key.pop();
                safe = Some((at + 1, stack.clone()));
            }
            b',' => {
                if let (Some(true), Some(key)) = (stack.last(), expect_key.last_mut()) {
                    *key = true;
                }
            }
            b':' => {
                if let Some(key) = expect_key.last_mut() {
                    *key = false;
                }
            }
            b'"' => {
                in_string = true;
                string_is_key = stack.last() == Some(&true) && expect_key.last() == Some(&true);
                high_surrogate = None;
            }
            _ => in_scalar = true,
        }
    }

    let (end, open, in_value_string) = if in_string && !string_is_key {
        // Inside a string value: closed at its last whole character, before an unfinished escape and before the
        // first half of a surrogate pair whose second half was not read.
        let mut end = match escape {
            Some((start, _)) => start,
            None => prefix.len(),
        };
        if let Some((start, stop)) = high_surrogate
            && stop == end
        {
            end = start;
        }
        (char_boundary(prefix, end), stack, true)
    } else {
        let (end, open) = safe?;
        (end, open, false)
    };
    let mut closed = Vec::with_capacity(end + open.len() + 1);
    closed.extend_from_slice(&prefix[..end]);
    if in_value_string {
        closed.push(b'"');
    }
    closed.extend(
        open.iter()
            .rev()
            .map(|&object| if object { b'}' } else { b']' }),
    );
    Some(closed)
}

/// The end of the last whole UTF-8 character of `bytes[..end]`.
fn char_boundary(bytes: &[u8], end: usize) -> usize {
    let mut start = end;
    while start > 0 && bytes[start - 1] & 0xC0 == 0x80 && end - start < 3 {
        start -= 1;
    }
    if start == 0 {
        return end;
    }
    let lead = bytes[start - 1];
    let width = match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return end,
    };
    if end - (start - 1) < width {
        start - 1
    } else {
        end
    }
}

/// The answer to the tool call `id`, made of the first `read` bytes of the server's message (`prefix`), which went
/// on past them: a result with the content blocks read whole or cut inside their text, marked with [`CUT_META`];
/// an error answer cut inside its message keeps its code. `None` when what was read is a message of another kind
/// (a request or notification from the server: it has a `method`).
pub(crate) fn cut_answer(
    id: &RequestId,
    prefix: &[u8],
    read: usize,
) -> Option<ServerJsonRpcMessage> {
    let value = close(prefix).and_then(|closed| serde_json::from_slice::<Value>(&closed).ok());
    let message = value.as_ref().and_then(Value::as_object);
    if message.is_some_and(|m| m.contains_key("method")) {
        return None;
    }
    let id = serde_json::to_value(id).ok()?;
    if let Some(error) = message
        .and_then(|m| m.get("error"))
        .and_then(Value::as_object)
    {
        let text = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message read)");
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        return serde_json::from_value(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": code,
                "message": format!("{text} [cut: the error was not read past {read} bytes]"),
            }
        }))
        .ok();
    }
    let result = message
        .and_then(|m| m.get("result"))
        .and_then(Value::as_object);
    let content: Vec<Value> = result
        .and_then(|r| r.get("content"))
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|block| serde_json::from_value::<ContentBlock>((*block).clone()).is_ok())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut rebuilt = Map::new();
    if content.is_empty()
        && let Some(structured) = result.and_then(|r| r.get("structuredContent"))
    {
        rebuilt.insert("structuredContent".into(), structured.clone());
    }
    rebuilt.insert("content".into(), Value::Array(content));
    if let Some(is_error) = result
        .and_then(|r| r.get("isError"))
        .and_then(Value::as_bool)
    {
        rebuilt.insert("isError".into(), Value::Bool(is_error));
    }
    rebuilt.insert("_meta".into(), json!({ CUT_META: read }));
    serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "result": rebuilt})).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(prefix: &str) -> Option<String> {
        close(prefix.as_bytes()).map(|c| String::from_utf8(c).unwrap())
    }

    #[test]
    fn a_cut_text_is_closed_at_the_last_point_it_can_be() {
        let whole = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a\"b\u00e9c"}],"isError":false}}"#;
        // Every prefix closes into valid JSON, or into nothing before the first bracket.
        for end in 0..=whole.len() {
            match closed(&whole[..end]) {
                Some(c) => {
                    serde_json::from_str::<Value>(&c).unwrap_or_else(|e| panic!("{end}: {c}: {e}"));
                }
                None => assert_eq!(end, 0),
            }
        }
        // Inside a string value: the string is closed, then its containers.
        assert_eq!(
            closed(r#"{"result":{"content":[{"type":"text","text":"hello wor"#).unwrap(),
            r#"{"result":{"content":[{"type":"text","text":"hello wor"}]}}"#
        );
        // Inside an escape: closed before it.
        assert_eq!(closed(r#"["a\u00"#).unwrap(), r#"["a"]"#);
        assert_eq!(closed(r#"["a\"#).unwrap(), r#"["a"]"#);
        // Inside a key, or after one: closed after the last whole value.
        assert_eq!(closed(r#"{"a":1,"b"#).unwrap(), r#"{"a":1}"#);
        assert_eq!(closed(r#"{"a":1,"b":"#).unwrap(), r#"{"a":1}"#);
        // Inside a number: closed before it.
        assert_eq!(closed(r#"[1,23"#).unwrap(), r#"[1]"#);
        assert_eq!(closed(r#"[true,fa"#).unwrap(), r#"[true]"#);
    }

    #[test]
    fn a_cut_never_splits_a_character_or_a_surrogate_pair() {
        let text = "{\"t\":\"ab\u{e9}\u{1F600}";
        for end in 6..=text.len() {
            let c = close(&text.as_bytes()[..end]).unwrap();
            let c = String::from_utf8(c).expect("whole characters");
            serde_json::from_str::<Value>(&c).unwrap();
        }
        assert_eq!(closed(r#"{"t":"x\ud83d"#).unwrap(), r#"{"t":"x"}"#);
        assert_eq!(
            closed(r#"{"t":"x\ud83d\ude00"#).unwrap(),
            r#"{"t":"x\ud83d\ude00"}"#
        );
        assert_eq!(closed(r#"{"t":"x\ud83d\ude"#).unwrap(), r#"{"t":"x"}"#);
    }

    #[test]
    fn a_cut_answer_keeps_what_was_read_and_says_it_was_cut() {
        let id = RequestId::Number(7);
        let prefix = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"first"},{"type":"text","text":"sec"#;
        let message = cut_answer(&id, prefix, 100).unwrap();
        let value = serde_json::to_value(&message).unwrap();
        assert_eq!(value["id"], 7);
        assert_eq!(value["result"]["content"][0]["text"], "first");
        assert_eq!(value["result"]["content"][1]["text"], "sec");
        assert_eq!(value["result"]["_meta"][CUT_META], 100);
        // A block cut before its type is whole is left out.
        let prefix =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"first"},{"ty"#;
        let value = serde_json::to_value(cut_answer(&id, prefix, 90).unwrap()).unwrap();
        assert_eq!(value["result"]["content"].as_array().unwrap().len(), 1);
        // An error answer keeps its code.
        let prefix = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"very lo"#;
        let value = serde_json::to_value(cut_answer(&id, prefix, 64).unwrap()).unwrap();
        assert_eq!(value["error"]["code"], -32000);
        assert!(
            value["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("very lo [cut"),
            "{value}"
        );
        // A notification is not an answer.
        let prefix = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xx"#;
        assert!(cut_answer(&id, prefix, 64).is_none());
        // Nothing readable: an empty result, still marked.
        let value = serde_json::to_value(cut_answer(&id, b"\xff\xfe", 2).unwrap()).unwrap();
        assert_eq!(value["result"]["_meta"][CUT_META], 2);
    }
}
