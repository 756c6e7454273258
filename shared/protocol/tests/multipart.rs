//! Requests with files, as the protocol's client sends them (`multipart/form-data`: `json`, then
//! `messages[i].files[j]`): parsed into messages with file parts, and every malformed or oversized request refused
//! with the 400 or 413 that names its part.

use bytes::Bytes;
use chat_core::{
    ChatError, DocumentFormat, FileKind, FileLimits, ImageFormat, RequestLimits, Role,
};
use chat_protocol::{ChatInput, Dialect, Endpoint, is_multipart, parse_multipart_chat_request};

const BOUNDARY: &str = "---Part-test";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj<<>>endobj\n%%EOF\n";

/// One part: its Content-Disposition parameters, its content type and its bytes.
struct Part<'a> {
    disposition: String,
    content_type: Option<&'a str>,
    body: &'a [u8],
}

/// The `json` part as the official client writes it (name unquoted).
fn json(body: &str) -> Part<'_> {
    Part {
        disposition: "form-data; name=json".into(),
        content_type: Some("application/json"),
        body: body.as_bytes(),
    }
}

fn file<'a>(name: &str, filename: Option<&str>, content_type: &'a str, body: &'a [u8]) -> Part<'a> {
    let mut disposition = format!("form-data; name=\"{name}\"");
    if let Some(filename) = filename {
        disposition.push_str(&format!("; filename=\"{filename}\""));
    }
    Part {
        disposition,
        content_type: Some(content_type),
        body,
    }
}

fn body(parts: &[Part]) -> Bytes {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        out.extend_from_slice(format!("Content-Disposition: {}\r\n", part.disposition).as_bytes());
        if let Some(ct) = part.content_type {
            out.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(part.body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    Bytes::from(out)
}

fn content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

async fn parse_with(parts: &[Part<'_>], limits: &RequestLimits) -> Result<ChatInput, ChatError> {
    parse_multipart_chat_request(&content_type(), body(parts), Endpoint::Protocol, limits).await
}

async fn parse(parts: &[Part<'_>]) -> Result<ChatInput, ChatError> {
    parse_with(parts, &RequestLimits::default()).await
}

/// The 400's message, as the client reads it.
async fn refused(parts: &[Part<'_>]) -> String {
    match parse(parts).await {
        Err(ChatError::Invalid(e)) => e.to_string(),
        other => panic!("expected a 400, got {other:?}"),
    }
}

const ONE_QUESTION: &str = r#"{"messages":[{"role":"user","content":"What are these?"}]}"#;

#[tokio::test]
async fn files_become_parts_of_their_messages_in_both_protocol_versions() {
    assert!(is_multipart("multipart/form-data; boundary=x"));
    assert!(is_multipart("Multipart/Form-Data;boundary=x"));
    assert!(!is_multipart("application/json"));
    let input = parse(&[
        json(ONE_QUESTION),
        file("messages[0].files[0]", Some("shot.png"), "image/png", PNG),
        file(
            "messages[0].files[1]",
            Some("report.pdf"),
            "application/pdf",
            PDF,
        ),
    ])
    .await
    .unwrap();
    assert_eq!(input.dialect, Dialect::V20240529);
    let message = &input.turn.messages[0];
    assert_eq!(message.text(), "What are these?");
    let files: Vec<_> = message
        .files()
        .map(|f| (f.name.as_str(), f.kind, f.size, f.bytes.clone().unwrap()))
        .collect();
    assert_eq!(
        files,
        [
            (
                "shot.png",
                FileKind::Image(ImageFormat::Png),
                PNG.len() as u64,
                Bytes::from_static(PNG)
            ),
            (
                "report.pdf",
                FileKind::Document(DocumentFormat::Pdf),
                PDF.len() as u64,
                Bytes::from_static(PDF)
            ),
        ]
    );
    // 2024-01-28, the files on the second user message, which may then have no text; no file name: the part's.
    let old = parse(&[
        json(
            r#"{"stream":true,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":""}]}"#,
        ),
        file("messages[2].files[0]", None, "application/octet-stream", PDF),
    ])
    .await
    .unwrap();
    assert_eq!(old.dialect, Dialect::V20240128 { stream: true });
    assert_eq!(old.turn.messages[0].files().count(), 0);
    let f: Vec<_> = old.turn.messages[2].files().collect();
    assert_eq!(f[0].name, "messages[2].files[0]");
    assert_eq!(f[0].kind, FileKind::Document(DocumentFormat::Pdf));
    assert_eq!(old.turn.messages[2].role, Role::User);
}

#[tokio::test]
async fn every_malformed_request_is_a_400_naming_its_part() {
    let png = |name: &'static str| file(name, Some("a.png"), "image/png", PNG);
    let long_name = format!("{}.png", "n".repeat(252));
    let cases: Vec<(Vec<Part>, &str)> = vec![
        (vec![png("messages[0].files[0]")], "json: is required"),
        (
            vec![json(ONE_QUESTION), json(ONE_QUESTION)],
            "json: the request has two json parts",
        ),
        (
            vec![json(ONE_QUESTION), png("attachment")],
            "attachment: is not a part of a chat request",
        ),
        (
            vec![json(ONE_QUESTION), png("messages[0].files[1]")],
            "messages[0].files[1]: the files of messages[0] must come numbered from 0",
        ),
        (
            vec![
                json(ONE_QUESTION),
                png("messages[0].files[0]"),
                png("messages[0].files[0]"),
            ],
            "messages[0].files[0]: the files of messages[0] must come numbered from 0 without gaps or repeats",
        ),
        (
            vec![json(ONE_QUESTION), png("messages[1].files[0]")],
            "messages[1].files[0]: there is no messages[1]",
        ),
        (vec![json("not json")], "json: body is not valid JSON"),
        (
            vec![json(r#"{"messages":[{"role":"user","content":""}]}"#)],
            "messages[0].content: must not be empty",
        ),
        (
            vec![
                json(
                    r#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}"#,
                ),
                png("messages[1].files[0]"),
            ],
            "messages[1].files[0]: files may only be sent on user messages",
        ),
        // A `.png` that is a PDF, by its content type and by its name.
        (
            vec![
                json(ONE_QUESTION),
                file("messages[0].files[0]", Some("shot.png"), "image/png", PDF),
            ],
            "messages[0].files[0]: declared image/png (by its content type), but its bytes are a PDF document",
        ),
        (
            vec![
                json(ONE_QUESTION),
                file(
                    "messages[0].files[0]",
                    Some("shot.png"),
                    "application/octet-stream",
                    PDF,
                ),
            ],
            "messages[0].files[0]: declared image/png (by its name), but its bytes are a PDF document",
        ),
        (
            vec![
                json(ONE_QUESTION),
                file(
                    "messages[0].files[0]",
                    Some("a.zip"),
                    "application/zip",
                    b"PK\x03\x04",
                ),
            ],
            "messages[0].files[0]: \"application/zip\" is not a kind this backend takes",
        ),
        (
            vec![
                json(ONE_QUESTION),
                file(
                    "messages[0].files[0]",
                    Some("a.bin"),
                    "application/octet-stream",
                    b"\0\x01\x02",
                ),
            ],
            "messages[0].files[0]: its bytes are of no kind this backend takes",
        ),
        (
            vec![
                json(ONE_QUESTION),
                file("messages[0].files[0]", Some("a.txt"), "text/plain", b""),
            ],
            "messages[0].files[0]: the file is empty",
        ),
        (
            vec![
                json(ONE_QUESTION),
                file("messages[0].files[0]", Some(&long_name), "image/png", PNG),
            ],
            "messages[0].files[0]: the file name is longer than 255 characters",
        ),
    ];
    for (parts, expected) in cases {
        let message = refused(&parts).await;
        assert!(
            message.starts_with(expected),
            "{message:?} should start with {expected:?}"
        );
    }
    // Bytes that are no multipart at all, and a content type without a boundary.
    let garbage = parse_multipart_chat_request(
        &content_type(),
        Bytes::from_static(b"garbage"),
        Endpoint::Protocol,
        &RequestLimits::default(),
    )
    .await;
    assert!(matches!(garbage, Err(ChatError::Invalid(e)) if e.reason.contains("malformed")));
    let no_boundary = parse_multipart_chat_request(
        "multipart/form-data",
        body(&[json(ONE_QUESTION)]),
        Endpoint::Protocol,
        &RequestLimits::default(),
    )
    .await;
    assert!(matches!(no_boundary, Err(ChatError::Invalid(e)) if e.reason.contains("boundary")));
    // The Chat UI's routes stay JSON.
    let ui = parse_multipart_chat_request(
        &content_type(),
        body(&[json(ONE_QUESTION)]),
        Endpoint::ChatUi,
        &RequestLimits::default(),
    )
    .await;
    assert!(matches!(ui, Err(ChatError::Invalid(e)) if e.reason.contains("JSON only")));
}

#[tokio::test]
async fn every_limit_is_held() {
    let limits = RequestLimits {
        files: FileLimits {
            max_images: 2,
            max_image_bytes: PNG.len() as u64,
            max_documents: 1,
            max_document_bytes: PDF.len() as u64,
        },
        ..RequestLimits::default()
    };
    let png = |j: usize| file_owned(format!("messages[0].files[{j}]"), "image/png", PNG);
    let pdf = |j: usize| file_owned(format!("messages[0].files[{j}]"), "application/pdf", PDF);
    // At the limits: taken.
    assert!(
        parse_with(&[json(ONE_QUESTION), png(0), png(1), pdf(2)], &limits)
            .await
            .is_ok()
    );
    // One image too many, one document too many: 400.
    let too_many = parse_with(&[json(ONE_QUESTION), png(0), png(1), png(2)], &limits).await;
    assert!(
        matches!(&too_many, Err(ChatError::Invalid(e)) if e.to_string() == "messages: carry 3 images, more than the limit of 2 per request"),
        "{too_many:?}"
    );
    let too_many = parse_with(&[json(ONE_QUESTION), pdf(0), pdf(1)], &limits).await;
    assert!(
        matches!(&too_many, Err(ChatError::Invalid(e)) if e.reason.contains("2 documents")),
        "{too_many:?}"
    );
    // One byte over an image's or a document's size: 413, naming the file.
    let big_png = [PNG, b"x"].concat();
    let big = parse_with(
        &[
            json(ONE_QUESTION),
            file("messages[0].files[0]", Some("a.png"), "image/png", &big_png),
        ],
        &limits,
    )
    .await;
    assert!(
        matches!(&big, Err(ChatError::TooLarge(e)) if e.path == "messages[0].files[0]" && e.reason.contains("an image")),
        "{big:?}"
    );
    let big_pdf = [PDF, b"x"].concat();
    let big = parse_with(
        &[
            json(ONE_QUESTION),
            file(
                "messages[0].files[0]",
                Some("a.pdf"),
                "application/pdf",
                &big_pdf,
            ),
        ],
        &limits,
    )
    .await;
    assert!(
        matches!(&big, Err(ChatError::TooLarge(e)) if e.reason.contains("a document")),
        "{big:?}"
    );
    // Converse's own limits by default: 20 images of 3.75 MB, 5 documents of 4.5 MB.
    assert_eq!(
        RequestLimits::default().files,
        FileLimits {
            max_images: 20,
            max_image_bytes: 3_932_160,
            max_documents: 5,
            max_document_bytes: 4_718_592,
        }
    );
}

fn file_owned(name: String, content_type: &'static str, body: &'static [u8]) -> Part<'static> {
    Part {
        disposition: format!("form-data; name=\"{name}\"; filename=\"f\""),
        content_type: Some(content_type),
        body,
    }
}

#[test]
fn a_saves_files_are_not_read() {
    // A client that saves messages as it listed them sends their files back; whatever they hold, they are neither
    // refused nor taken (a save cannot point a message at a file).
    let body = serde_json::json!({"messages": [
        {"id": "m1", "role": "user", "content": "q", "timestamp": "t", "files": "anything"},
        {"id": "m2", "role": "assistant", "content": "a", "timestamp": "t",
         "files": [{"name": "x.png", "contentType": "image/png", "size": 1, "url": "http://x", "key": "bob/c/f"}]}
    ]});
    let request = chat_protocol::parse_replace_request(
        body.to_string().as_bytes(),
        &chat_core::RequestLimits::default(),
    )
    .unwrap();
    for message in request.messages {
        assert!(message.files.is_none());
        assert!(
            chat_protocol::chat_ui::stored_message(message, "t")
                .files
                .is_empty()
        );
    }
}

#[tokio::test]
async fn a_messages_files_come_as_parts_or_in_its_json_not_both() {
    // In the json part, a message's files in JSON are taken as in a JSON body…
    let in_json = r#"{"messages":[{"role":"user","content":"a","files":[{"data":"JVBERi0xLjQK","contentType":"application/pdf"}]},
        {"role":"assistant","content":"b"},{"role":"user","content":"c"}]}"#;
    let input = parse(&[
        json(in_json),
        file("messages[2].files[0]", Some("shot.png"), "image/png", PNG),
    ])
    .await
    .unwrap();
    let names: Vec<Vec<String>> = input
        .turn
        .messages
        .iter()
        .map(|m| m.files().map(|f| f.name.clone()).collect())
        .collect();
    assert_eq!(
        names,
        [
            vec!["messages[0].files[0]".to_string()],
            vec![],
            vec!["shot.png".to_string()]
        ]
    );
    // …but one message's files come one way.
    assert_eq!(
        refused(&[
            json(in_json),
            file("messages[0].files[0]", Some("shot.png"), "image/png", PNG),
        ])
        .await,
        "messages[0].files: this message's files came both as multipart parts and in the JSON; send each file once"
    );
}
