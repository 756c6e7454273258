//! Files inside a JSON chat request (`messages[i].files: [{data, contentType, filename?}]`), as protocol clients sent
//! them before multipart: `data` as base64 or as the JSON form of a byte array. They are taken as multipart parts
//! are, in both protocol versions, and any other shape is a 400 naming the field. The fields a protocol message
//! defines besides are read or refused.

use bytes::Bytes;
use chat_core::{ChatError, FileKind, FileLimits, ImageFormat, RequestLimits, Role};
use chat_protocol::{ChatInput, Dialect, Endpoint, parse_chat_request, text_outside_files};
use chat_testing::bytes::uint8array_json;
use serde_json::{Value, json};

/// A PNG's signature and header start: what the sniffing looks at.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

/// Standard base64, padded.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn question_with(files: Value) -> Value {
    json!({"messages": [{"role": "user", "content": "What is this?", "files": files}]})
}

fn parse_at(
    body: &Value,
    endpoint: Endpoint,
    limits: &RequestLimits,
) -> Result<ChatInput, ChatError> {
    parse_chat_request(body.to_string().as_bytes(), endpoint, limits)
}

fn parse(body: &Value) -> Result<ChatInput, ChatError> {
    parse_at(body, Endpoint::Protocol, &RequestLimits::default())
}

/// The 400's message, as the client reads it.
fn refused(body: &Value) -> String {
    match parse(body) {
        Err(ChatError::Invalid(e)) => e.to_string(),
        other => panic!("expected a 400, got {other:?}"),
    }
}

/// Asserts that `error`, what `files` were refused with, starts with `expected`.
fn starts_with(error: &str, expected: &str, files: &dyn std::fmt::Display) {
    assert!(
        error.starts_with(expected),
        "{files}: {error:?} should start with {expected:?}"
    );
}

/// The one file of the request's first message: its name, kind and bytes.
fn only_file(input: &ChatInput) -> (String, FileKind, Bytes) {
    let files: Vec<_> = input.turn.messages[0].files().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    (
        files[0].name.clone(),
        files[0].kind,
        files[0].bytes.clone().unwrap(),
    )
}

#[test]
fn every_form_of_data_is_the_same_png_in_both_protocol_versions() {
    let padded = base64(PNG);
    let forms = [
        json!(padded),
        // Unpadded, URL-safe, and in MIME lines: what other encoders write.
        json!(padded.trim_end_matches('=')),
        json!(padded.replace('+', "-").replace('/', "_")),
        json!(format!("{}\r\n{}", &padded[..8], &padded[8..])),
        uint8array_json(PNG),
        json!(PNG),
        json!({"type": "Buffer", "data": PNG}),
    ];
    for data in forms {
        for (extra, dialect) in [
            (None, Dialect::V20240529),
            (Some(false), Dialect::V20240128 { stream: false }),
            (Some(true), Dialect::V20240128 { stream: true }),
        ] {
            let mut body = question_with(
                json!([{"data": data, "contentType": "image/png", "filename": "shot.png"}]),
            );
            if let Some(stream) = extra {
                body["stream"] = json!(stream);
            }
            let input = parse(&body).unwrap_or_else(|e| panic!("{data}: {e}"));
            assert_eq!(input.dialect, dialect);
            assert_eq!(input.turn.messages[0].text(), "What is this?");
            assert_eq!(
                only_file(&input),
                (
                    "shot.png".to_string(),
                    FileKind::Image(ImageFormat::Png),
                    Bytes::from_static(PNG)
                ),
                "{data}"
            );
        }
    }
}

#[test]
fn a_file_without_a_name_is_named_by_its_place_and_its_message_may_have_no_text() {
    let body = json!({"messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "", "files": [{"data": base64(PNG), "contentType": "image/png"}]}
    ]});
    let input = parse(&body).unwrap();
    let file = input.turn.messages[2].files().next().unwrap();
    assert_eq!(file.name, "messages[2].files[0]");
    assert_eq!(input.turn.messages[2].text(), "");
    assert_eq!(input.turn.messages[0].files().count(), 0);
}

#[test]
fn no_files_is_null_or_an_empty_list() {
    for none in [json!(null), json!([])] {
        let input = parse(&question_with(none)).unwrap();
        assert_eq!(input.turn.messages[0].files().count(), 0);
    }
    // Without files, a message needs its text.
    assert_eq!(
        refused(&json!({"messages": [{"role": "user", "content": " ", "files": []}]})),
        "messages[0].content: must not be empty"
    );
}

#[test]
fn files_of_another_shape_are_a_400_naming_the_field() {
    let png = base64(PNG);
    let cases = [
        (
            json!("garbage"),
            "messages[0].files: expected an array of files, not a string",
        ),
        (
            json!({"data": png, "contentType": "image/png"}),
            "messages[0].files: expected an array of files, not an object",
        ),
        (
            json!(["shot.png"]),
            "messages[0].files[0]: expected a file, not a string",
        ),
        (
            json!([{"data": png, "contentType": "image/png"}, {"data": png}]),
            "messages[0].files[1].contentType: is required",
        ),
        (
            json!([{"data": png, "contentType": " "}]),
            "messages[0].files[0].contentType: is required",
        ),
        (
            json!([{"data": png, "contentType": 7}]),
            "messages[0].files[0].contentType: expected a media type such as image/png, not a number",
        ),
        (
            json!([{"contentType": "image/png"}]),
            "messages[0].files[0].data: is required",
        ),
        (
            json!([{"data": "not base64!", "contentType": "image/png"}]),
            "messages[0].files[0].data: is not base64",
        ),
        (
            json!([{"data": format!("data:image/png;base64,{png}"), "contentType": "image/png"}]),
            "messages[0].files[0].data: is a data: URL",
        ),
        (
            json!([{"data": true, "contentType": "image/png"}]),
            "messages[0].files[0].data: expected base64 text or a byte array, not a boolean",
        ),
        (
            json!([{"data": [137, 256], "contentType": "image/png"}]),
            "messages[0].files[0].data[1]: expected a byte (an integer from 0 to 255), not 256",
        ),
        (
            json!([{"data": {"0": 137, "1": -1}, "contentType": "image/png"}]),
            "messages[0].files[0].data[\"1\"]: expected a byte (an integer from 0 to 255), not -1",
        ),
        // An index missing (two keys, one of them past the end), or a key that is no index.
        (
            json!([{"data": {"0": 137, "2": 80}, "contentType": "image/png"}]),
            "messages[0].files[0].data: expected base64 text or a byte array; as an object, its keys are the \
             indexes 0 to 1 (what JSON.stringify makes of a Uint8Array), not \"2\"",
        ),
        (
            json!([{"data": {"0": 137, "01": 80}, "contentType": "image/png"}]),
            "messages[0].files[0].data: expected base64 text or a byte array; as an object, its keys are the \
             indexes 0 to 1 (what JSON.stringify makes of a Uint8Array), not \"01\"",
        ),
        (
            json!([{"data": {"type": "Buffer", "data": "x"}, "contentType": "image/png"}]),
            "messages[0].files[0].data.data: expected the Buffer's bytes, an array of numbers",
        ),
        (
            json!([{"data": png, "contentType": "image/png", "filename": 1}]),
            "messages[0].files[0].filename: expected a string, not a number",
        ),
        (
            json!([{"data": png, "contentType": "image/png", "name": "shot.png"}]),
            "messages[0].files[0][\"name\"]: is not a field of a file",
        ),
        // The checks of a multipart part: the kind, the bytes against it, the name, emptiness.
        (
            json!([{"data": png, "contentType": "application/zip"}]),
            "messages[0].files[0]: \"application/zip\" is not a kind this backend takes",
        ),
        (
            json!([{"data": png, "contentType": "application/pdf"}]),
            "messages[0].files[0]: declared application/pdf (by its content type), but its bytes are a PNG image",
        ),
        (
            json!([{"data": png, "contentType": "image/png", "filename": "x".repeat(256)}]),
            "messages[0].files[0]: the file name is longer than 255 characters",
        ),
        (
            json!([{"data": "", "contentType": "text/plain"}]),
            "messages[0].files[0]: the file is empty",
        ),
    ];
    for (files, expected) in cases {
        starts_with(&refused(&question_with(files.clone())), expected, &files);
    }
}

#[test]
fn files_are_held_to_the_limits_of_a_request() {
    let limits = RequestLimits {
        files: FileLimits {
            max_images: 1,
            max_image_bytes: PNG.len() as u64 - 1,
            ..FileLimits::default()
        },
        ..RequestLimits::default()
    };
    let png = json!({"data": base64(PNG), "contentType": "image/png"});
    // Larger than an image may be: a 413 naming the file.
    match parse_at(&question_with(json!([png])), Endpoint::Protocol, &limits) {
        Err(ChatError::TooLarge(e)) => assert_eq!(
            e.to_string(),
            format!(
                "messages[0].files[0]: is {} bytes, more than the {} bytes an image may be",
                PNG.len(),
                PNG.len() - 1
            )
        ),
        other => panic!("expected a 413, got {other:?}"),
    }
    // More images than allowed.
    let limits = RequestLimits {
        files: FileLimits {
            max_images: 1,
            ..FileLimits::default()
        },
        ..RequestLimits::default()
    };
    match parse_at(
        &question_with(json!([png, png])),
        Endpoint::Protocol,
        &limits,
    ) {
        Err(ChatError::Invalid(e)) => assert_eq!(
            e.to_string(),
            "messages: carry 2 images, more than the limit of 1 per request"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
    // Files on an assistant's message.
    assert_eq!(
        refused(&json!({"messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b", "files": [png]},
            {"role": "user", "content": "c"}
        ]})),
        "messages[1].files[0]: files may only be sent on user messages"
    );
}

#[test]
fn the_chat_ui_route_takes_no_files() {
    let body = question_with(json!([{"data": base64(PNG), "contentType": "image/png"}]));
    match parse_at(&body, Endpoint::ChatUi, &RequestLimits::default()) {
        Err(ChatError::Invalid(e)) => assert_eq!(
            e.to_string(),
            "messages[0].files: this route takes no files; send them to /chat or /chat/stream"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
    let none = question_with(json!([]));
    let input = parse_at(&none, Endpoint::ChatUi, &RequestLimits::default()).unwrap();
    assert_eq!(input.turn.messages[0].role, Role::User);
}

#[test]
fn a_messages_other_defined_fields_are_read_or_refused() {
    let with = |field: &str, value: Value| {
        let mut body = json!({"messages": [{"role": "user", "content": "hi"}]});
        body["messages"][0][field] = value;
        body
    };
    // `context` is the application's own (AIChatMessage.context): an object, kept and not read.
    assert!(parse(&with("context", json!({"note": 1}))).is_ok());
    assert!(parse(&with("context", json!(null))).is_ok());
    assert_eq!(
        refused(&with("context", json!("x"))),
        "messages[0].context: expected an object"
    );
    // Tool calls, as an answer's message shows them in the protocol's examples: none is fine, any is refused.
    for calls in ["function_call", "tool_calls"] {
        assert!(parse(&with(calls, json!(null))).is_ok());
        assert_eq!(
            refused(&with(calls, json!([{"id": "1"}]))),
            format!(
                "messages[0].{calls}: this backend takes no tool calls in messages: send null or leave it out"
            )
        );
    }
    assert!(parse(&with("tool_calls", json!([]))).is_ok());
    assert!(parse(&with("function_call", json!([]))).is_err());
    // A role the backend does not take (the official client's AIChatRole has "system").
    assert_eq!(
        refused(&with("role", json!("system"))),
        r#"messages[0].role: expected "user" or "assistant""#
    );
}

#[test]
fn only_the_files_are_left_out_of_what_the_json_limit_counts() {
    let files = json!([{"data": "aGVsbG8=", "contentType": "text/plain"}]);
    let body = question_with(files.clone()).to_string();
    assert_eq!(
        text_outside_files(body.as_bytes()),
        body.len() - files.to_string().len()
    );
    // Files of no use, or of another shape, count with the rest; so does a body that is no chat request.
    for none in [json!(null), json!([]), json!("garbage")] {
        let body = question_with(none).to_string();
        assert_eq!(text_outside_files(body.as_bytes()), body.len());
    }
    assert_eq!(text_outside_files(b"not json"), 8);
}

/// A byte array's object is read as a JSON value's map would hold it: in any order, a repeated key with its last
/// value in the place of its first, its number of keys counting each once.
#[test]
fn a_byte_objects_keys_are_read_as_a_json_map_holds_them() {
    // The body as text: `json!` would hold a repeated key once.
    let parse_data = |data: &str| {
        let body = format!(
            r#"{{"messages": [{{"role": "user", "content": "What is this?", "files": [{{"data": {data}, "contentType": "text/plain"}}]}}]}}"#
        );
        parse_chat_request(
            body.as_bytes(),
            Endpoint::Protocol,
            &RequestLimits::default(),
        )
    };
    for data in [
        r#"{"1": 105, "0": 104}"#,
        r#"{"0": 999, "1": 105, "0": 104}"#,
        r#"{"0": 104, "1": -1, "1": 105}"#,
        r#"{"1": 105, "0": 104, "1": 105}"#,
        r#"{"type": "Buffer", "data": [104, 105], "type": "Buffer"}"#,
        r#"{"data": [104, 105], "type": "Buffer"}"#,
        r#"{"t\u0079pe": "Buf\u0066er", "data": [104, 105]}"#,
    ] {
        let input = parse_data(data).unwrap_or_else(|e| panic!("{data}: {e}"));
        assert_eq!(only_file(&input).2, Bytes::from_static(b"hi"), "{data}");
    }
    let indexes = |last: usize, key: &str| {
        format!(
            "messages[0].files[0].data: expected base64 text or a byte array; as an object, its keys are the \
             indexes 0 to {last} (what JSON.stringify makes of a Uint8Array), not {key:?}"
        )
    };
    for (data, expected) in [
        (r#"{"0": 104, "x": 1, "x": 2}"#, indexes(1, "x")),
        (r#"{"5": 1, "0": 104}"#, indexes(1, "5")),
        (r#"{"0": 104, "1": 300, "5": 1}"#, "messages[0].files[0].data[\"1\"]: expected a byte (an integer from 0 to 255), not 300".into()),
        (r#"{"0": 104, "5": 1, "1": 300}"#, indexes(2, "5")),
        (r#"{"1": 300, "0": 104, "1": 301, "2": 1}"#, "messages[0].files[0].data[\"1\"]: expected a byte (an integer from 0 to 255), not 301".into()),
        (r#"{"0": 104, "1": [1, 2]}"#, "messages[0].files[0].data[\"1\"]: expected a byte (an integer from 0 to 255), not an array".into()),
        (r#"{"0": 104, "1": 1.5}"#, "messages[0].files[0].data[\"1\"]: expected a byte (an integer from 0 to 255), not 1.5".into()),
        (r#"{"type": "Buffer", "x": [104, 105]}"#, "messages[0].files[0].data.data: expected the Buffer's bytes, an array of numbers".into()),
        (r#"{"type": "Buffer", "data": [104, "i"]}"#, "messages[0].files[0].data.data[1]: expected a byte (an integer from 0 to 255), not a string".into()),
        (r#"{"type": "Buffer", "data": [104, 105], "x": 1}"#, indexes(2, "type")),
        (r#"[104, {"a": 1}]"#, "messages[0].files[0].data[1]: expected a byte (an integer from 0 to 255), not an object".into()),
        (r#"[104, null]"#, "messages[0].files[0].data[1]: expected a byte (an integer from 0 to 255), not null".into()),
    ] {
        match parse_data(data) {
            Err(ChatError::Invalid(e)) => assert_eq!(e.to_string(), expected, "{data}"),
            other => panic!("{data}: expected a 400, got {other:?}"),
        }
    }
}

/// A file's fields are read from its text: a repeated one has its last value, and of several fields a file does
/// not have, the first sent is named.
#[test]
fn a_files_fields_are_read_in_the_order_sent() {
    let parse_file = |file: &str| {
        let body = format!(
            r#"{{"messages": [{{"role": "user", "content": "What is this?", "files": [{file}]}}]}}"#
        );
        parse_chat_request(
            body.as_bytes(),
            Endpoint::Protocol,
            &RequestLimits::default(),
        )
    };
    let input = parse_file(
        r#"{"contentType": 7, "data": [1], "filename": "a.txt", "contentType": "text/plain", "data": "aGk=", "filename": null}"#,
    )
    .unwrap();
    let (name, kind, bytes) = only_file(&input);
    assert_eq!(
        (name.as_str(), kind.content_type(), &bytes[..]),
        ("messages[0].files[0]", "text/plain", &b"hi"[..])
    );
    match parse_file(r#"{"contentType": "text/plain", "x": 1, "data": "aGk=", "y": {"z": [1]}}"#) {
        Err(ChatError::Invalid(e)) => assert!(
            e.to_string()
                .starts_with("messages[0].files[0][\"x\"]: is not a field of a file"),
            "{e}"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
}

/// A body is refused as a JSON value refuses it, whatever its files hold: its syntax, its numbers, its depth.
#[test]
fn files_are_held_to_the_json_a_body_is_held_to() {
    let refused = |files: &str| {
        let body =
            format!(r#"{{"messages": [{{"role": "user", "content": "hi", "files": {files}}}]}}"#);
        match parse_chat_request(
            body.as_bytes(),
            Endpoint::Protocol,
            &RequestLimits::default(),
        ) {
            Err(ChatError::Invalid(e)) => e.to_string(),
            other => panic!("{files}: expected a 400, got {other:?}"),
        }
    };
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for (files, expected) in [
        (
            deep.as_str(),
            "body is not valid JSON: recursion limit exceeded",
        ),
        (
            r#"[{"data": [1e400], "contentType": "text/plain"}]"#,
            "body is not valid JSON: number out of range",
        ),
        (
            r#"[{"data": [01], "contentType": "text/plain"}]"#,
            "body is not valid JSON: invalid number",
        ),
        (
            r#"[{"data": "\x", "contentType": "text/plain"}]"#,
            "body is not valid JSON: invalid escape",
        ),
    ] {
        starts_with(&refused(files), expected, &files);
    }
}

/// Files are counted before any is decoded: more than a request may carry of both kinds is refused without reading
/// them; within that, each is read in order and the first fault is the one named.
#[test]
fn files_are_counted_before_they_are_read() {
    let limits = RequestLimits {
        files: FileLimits {
            max_images: 2,
            max_documents: 1,
            ..FileLimits::default()
        },
        ..RequestLimits::default()
    };
    let broken = json!({"data": "not base64!", "contentType": "image/png"});
    let png = json!({"data": base64(PNG), "contentType": "image/png"});
    let body = json!({"messages": [
        {"role": "user", "content": "a", "files": [broken, png]},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c", "files": [png, png]}
    ]});
    match parse_at(&body, Endpoint::Protocol, &limits) {
        Err(ChatError::Invalid(e)) => assert_eq!(
            e.to_string(),
            "messages: carry 4 files, more than the limit of 2 images and 1 documents per request"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
    let body = json!({"messages": [
        {"role": "user", "content": "a", "files": [png, broken]},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c", "files": "garbage"}
    ]});
    match parse_at(&body, Endpoint::Protocol, &limits) {
        Err(ChatError::Invalid(e)) => assert!(
            e.to_string()
                .starts_with("messages[0].files[1].data: is not base64"),
            "{e}"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
}
