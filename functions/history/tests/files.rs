//! Files in messages across the three functions, through their whole edge, the real SDK clients, the local Bedrock
//! server and moto's DynamoDB and S3: a multipart request's files reach the model and are kept, a continued chat
//! sends them again from S3, the history lists them with URLs that read them back, deleting the chat removes them,
//! another user reaches none of them, and a refused request stores nothing.

use std::sync::Arc;

use chat_aws::{BedrockModel, DynamoStore, S3Attachments};
use chat_core::{AttachmentStore, ChatMode};
use chat_edge::Auth;
use chat_testing::bytes::PNG;
use chat_testing::harness::{self, Backend, OWNER, Reply, Streamed};
use lambda_http::Request;
use serde_json::{Value, json};

mod support;

const BOUNDARY: &str = "---Part-files-test";
/// A minimal PDF.
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n";

struct World {
    bedrock: local_bedrock::LocalBedrock,
    store: DynamoStore,
    files: Arc<S3Attachments>,
    chat: chat::App<BedrockModel, DynamoStore>,
    stream: chat_stream::App<BedrockModel, DynamoStore>,
    history: history::App<DynamoStore>,
    /// The history as another user sees it.
    mallory: history::App<DynamoStore>,
}

async fn world() -> World {
    world_with(&[]).await
}

async fn world_with(env: &[(&str, &str)]) -> World {
    let backend = Backend::start(env).await;
    let files = Arc::new(harness::fresh_attachments().await);
    let ports = Some(files.clone() as Arc<dyn AttachmentStore>);
    let (model, store, config) = (backend.model().await, &backend.store, &backend.config);
    let chat = chat::App::new(
        model.clone(),
        store.clone(),
        harness::auth(),
        config.clone(),
    )
    .with_attachments(ports.clone());
    let stream = chat_stream::App::new(model, store.clone(), harness::auth(), config.clone())
        .with_attachments(ports.clone());
    let history = history::App::new(backend.store.clone(), harness::auth(), &backend.config)
        .with_attachments(ports.clone());
    let mallory = history::App::new(
        backend.store.clone(),
        Auth::None {
            user: "mallory".into(),
        },
        &backend.config,
    )
    .with_attachments(ports);
    World {
        bedrock: backend.bedrock,
        store: backend.store,
        files,
        chat,
        stream,
        history,
        mallory,
    }
}

/// A multipart body: the `json` part as the official client writes it, then each file part.
fn multipart(request: &Value, files: &[(&str, Option<&str>, &str, &[u8])]) -> Vec<u8> {
    let json = request.to_string();
    let json_part = (
        "Content-Disposition: form-data; name=json\r\nContent-Type: application/json".to_string(),
        json.as_bytes(),
    );
    let file_parts = files.iter().map(|(name, filename, content_type, bytes)| {
        let filename = filename.map_or(String::new(), |f| format!("; filename=\"{f}\""));
        let headers = format!(
            "Content-Disposition: form-data; name=\"{name}\"{filename}\r\nContent-Type: {content_type}"
        );
        (headers, *bytes)
    });
    support::multipart_body(BOUNDARY, std::iter::once(json_part).chain(file_parts))
}

fn multipart_request(path: &str, body: Vec<u8>) -> Request {
    support::multipart_request(path, BOUNDARY, None, body)
}

fn both_files() -> Vec<(
    &'static str,
    Option<&'static str>,
    &'static str,
    &'static [u8],
)> {
    vec![
        ("messages[0].files[0]", Some("shot.png"), "image/png", PNG),
        (
            "messages[0].files[1]",
            Some("report.pdf"),
            "application/pdf",
            PDF,
        ),
    ]
}

/// What the local Bedrock server says it received of the two files.
fn received_both() -> String {
    format!(
        "Received: shot.png: image png {} bytes; report.pdf: document report pdf {} bytes",
        PNG.len(),
        PDF.len()
    )
}

/// The image and document blocks of a Converse message, as (kind, name, decoded size).
fn file_blocks(message: &Value) -> Vec<(String, String, usize)> {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| {
            let (kind, inner) = if let Some(i) = block.get("image") {
                ("image", i)
            } else {
                ("document", block.get("document")?)
            };
            let bytes =
                aws_smithy_types::base64::decode(inner["source"]["bytes"].as_str()?).ok()?;
            Some((
                kind.to_string(),
                inner["name"].as_str().unwrap_or("").to_string(),
                bytes.len(),
            ))
        })
        .collect()
}

/// The status of `DELETE /chat-history/{id}` through `app`.
async fn delete(app: &history::App<DynamoStore>, id: &str) -> u16 {
    app.handle(harness::json_request(
        "DELETE",
        &format!("/chat-history/{id}"),
        None,
    ))
    .await
    .status()
    .as_u16()
}

impl World {
    async fn get(&self, app: &history::App<DynamoStore>, path: &str) -> Reply {
        Reply::buffered(app.handle(harness::json_request("GET", path, None)).await)
    }

    /// The messages of the chat `id` as `app` lists them.
    async fn messages_of(&self, app: &history::App<DynamoStore>, id: &str) -> Reply {
        self.get(app, &format!("/chat-history/{id}/messages")).await
    }

    /// `request` with `files` as multipart, to the buffered chat function.
    async fn ask_with(
        &self,
        request: &Value,
        files: &[(&str, Option<&str>, &str, &[u8])],
    ) -> Reply {
        let body = multipart(request, files);
        Reply::buffered(self.chat.handle(multipart_request("/chat", body)).await)
    }

    /// How many objects the bucket holds for the tests' user.
    async fn kept(&self) -> usize {
        self.files.count_owned(OWNER).await.unwrap()
    }
}

#[tokio::test]
async fn files_sent_with_a_question_reach_the_model_are_kept_and_are_listed_with_their_urls() {
    let w = world().await;
    let request = json!({"messages": [{"role": "user", "content": "What are these?"}]});
    let reply = w.ask_with(&request, &both_files()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer = reply.json();
    let content = answer["message"]["content"].as_str().unwrap();
    assert!(content.ends_with(&received_both()), "{content}");
    // The model got an image and a document, each after a line naming it, then the question.
    let sent = w.bedrock.requests().last().unwrap().body.clone();
    let question = &sent["messages"][0];
    assert_eq!(
        file_blocks(question),
        [
            ("image".into(), String::new(), PNG.len()),
            ("document".into(), "report".into(), PDF.len())
        ]
    );
    assert_eq!(
        question["content"][0]["text"],
        format!("[file: shot.png, image/png, {} bytes]", PNG.len())
    );
    assert_eq!(question["content"][4]["text"], "What are these?");
    // The thought lists them, without their bytes.
    let thoughts = answer["context"]["thoughts"].as_array().unwrap();
    let listed = thoughts
        .iter()
        .find(|t| t["title"] == "Files sent to the model")
        .expect("a thought lists the files");
    assert_eq!(
        listed["props"]["files"],
        json!([
            {"name": "shot.png", "contentType": "image/png", "size": PNG.len()},
            {"name": "report.pdf", "contentType": "application/pdf", "size": PDF.len()}
        ])
    );
    assert!(!answer.to_string().contains("PDF-1.4"));

    // Kept in S3 and listed by the history, each URL reading the same bytes.
    assert_eq!(w.kept().await, 2);
    let id = answer["sessionState"].as_str().unwrap();
    let messages = w.messages_of(&w.history, id).await;
    assert_eq!(messages.status, 200, "{}", messages.body);
    let messages = messages.json();
    let files = messages[0]["files"]
        .as_array()
        .expect("the question lists its files");
    assert_eq!(files.len(), 2);
    for (listed, (name, content_type, bytes)) in files.iter().zip([
        ("shot.png", "image/png", PNG),
        ("report.pdf", "application/pdf", PDF),
    ]) {
        assert_eq!(listed["name"], name);
        assert_eq!(listed["contentType"], content_type);
        assert_eq!(listed["size"], bytes.len());
        let url = listed["url"].as_str().unwrap();
        let fetched = reqwest::get(url).await.unwrap();
        assert_eq!(fetched.status(), 200, "{url}");
        assert_eq!(fetched.bytes().await.unwrap(), bytes);
    }
    // The answer lists none.
    assert!(messages[1].get("files").is_none());
}

#[tokio::test]
async fn a_streamed_chat_continued_with_its_latest_message_sends_the_earlier_files_again() {
    let w = world().await;
    // The files come with a streamed 2024-05-29 request.
    let request = json!({"messages": [{"role": "user", "content": "Look at these"}]});
    let first = Streamed::read(
        w.stream
            .handle(multipart_request(
                "/chat/stream",
                multipart(&request, &both_files()),
            ))
            .await,
    )
    .await;
    assert_eq!(first.status, 200);
    let id = first.chat_id();
    let lines = first.lines();
    let text: String = lines
        .iter()
        .filter_map(|l| l["delta"]["content"].as_str())
        .collect();
    assert!(text.ends_with(&received_both()), "{text}");

    // The next turn sends only its own message, in the 2024-01-28 dialect, buffered.
    let next = w
        .chat
        .handle(harness::json_request(
            "POST",
            "/chat",
            Some(&json!({"stream": false, "messages": [{"role": "user", "content": "And now?"}], "session_state": id})),
        ))
        .await;
    let next = Reply::buffered(next);
    assert_eq!(next.status, 200, "{}", next.body);
    let sent = w.bedrock.requests().last().unwrap().body.clone();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    // The first message's files, read back from S3, whole.
    assert_eq!(
        file_blocks(&messages[0]),
        [
            ("image".into(), String::new(), PNG.len()),
            ("document".into(), "report".into(), PDF.len())
        ]
    );
    assert!(file_blocks(&messages[2]).is_empty());
    // Stored once each.
    assert_eq!(w.kept().await, 2);
    assert_eq!(
        harness::history(&w.store, &id).await.len(),
        4,
        "two turns, each stored once"
    );
}

#[tokio::test]
async fn deleting_a_chat_removes_its_files_and_another_user_reaches_none_of_them() {
    let w = world().await;
    let request = json!({"messages": [{"role": "user", "content": "Keep these"}]});
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = w.ask_with(&request, &both_files()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        ids.push(reply.json()["sessionState"].as_str().unwrap().to_string());
    }
    assert_eq!(w.kept().await, 4);
    let listed = w.messages_of(&w.history, &ids[0]).await.json();
    let url = listed[0]["files"][0]["url"].as_str().unwrap().to_string();
    // The URL works while the file is kept: what follows sees it refused because the file is gone, not because the
    // URL never worked.
    let kept = reqwest::get(&url).await.unwrap();
    assert_eq!(kept.status(), 200);
    assert!(kept.bytes().await.unwrap().starts_with(PNG));

    // Another user: neither the listing nor the delete reaches the chat or its files.
    let theirs = w.messages_of(&w.mallory, &ids[0]).await;
    assert_eq!(theirs.status, 404);
    assert_eq!(delete(&w.mallory, &ids[0]).await, 404);
    assert_eq!(w.kept().await, 4);

    // The owner's delete removes that chat's files, and only them.
    assert_eq!(delete(&w.history, &ids[0]).await, 200);
    assert_eq!(w.kept().await, 2);
    // Gone: S3 answers 404 (403 to a role that may not list the bucket); moto answers a URL that pins the
    // response's headers, as every listed URL does, with 403.
    let gone = reqwest::get(&url).await.unwrap();
    assert!(
        matches!(gone.status().as_u16(), 403 | 404),
        "{}",
        gone.status()
    );
    assert!(!gone.bytes().await.unwrap().starts_with(PNG));
    let other = w.messages_of(&w.history, &ids[1]).await.json();
    let other_url = other[0]["files"][1]["url"].as_str().unwrap();
    assert_eq!(
        reqwest::get(other_url)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        PDF
    );
}

#[tokio::test]
async fn a_refused_request_with_files_stores_nothing_and_asks_no_model() {
    let w = world_with(&[("MAX_IMAGES", "1"), ("MAX_DOCUMENT_BYTES", "40")]).await;
    let one = json!({"messages": [{"role": "user", "content": "q"}]});
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        // A `.png` that is a PDF.
        (
            multipart(
                &one,
                &[("messages[0].files[0]", Some("shot.png"), "image/png", PDF)],
            ),
            400,
            "messages[0].files[0]: declared image/png (by its content type), but its bytes are a PDF document",
        ),
        // Two images where one is allowed.
        (
            multipart(
                &one,
                &[
                    ("messages[0].files[0]", Some("a.png"), "image/png", PNG),
                    ("messages[0].files[1]", Some("b.png"), "image/png", PNG),
                ],
            ),
            400,
            "messages: carry 2 images, more than the limit of 1 per request",
        ),
        // A document over its size.
        (
            multipart(
                &one,
                &[(
                    "messages[0].files[0]",
                    Some("r.pdf"),
                    "application/pdf",
                    PDF,
                )],
            ),
            413,
            "messages[0].files[0]: is 69 bytes, more than the 40 bytes a document may be",
        ),
        // A gap, an unknown part, no json part, a broken body.
        (
            multipart(
                &one,
                &[("messages[0].files[1]", Some("a.png"), "image/png", PNG)],
            ),
            400,
            "messages[0].files[1]: the files of messages[0] must come numbered from 0",
        ),
        (
            multipart(&one, &[("upload", Some("a.png"), "image/png", PNG)]),
            400,
            "upload: is not a part of a chat request",
        ),
        (
            b"--x\r\nContent-Disposition: form-data; name=json\r\n\r\n{}".to_vec(),
            400,
            "the multipart body is malformed",
        ),
    ];
    for (body, status, message) in cases {
        for (path, reply) in [
            (
                "/chat",
                Reply::buffered(
                    w.chat
                        .handle(multipart_request("/chat", body.clone()))
                        .await,
                ),
            ),
            (
                "/chat/stream",
                Reply::collected(
                    w.stream
                        .handle(multipart_request("/chat/stream", body.clone()))
                        .await,
                )
                .await,
            ),
        ] {
            assert_eq!(reply.status, status, "{path}: {}", reply.body);
            let error = reply.json()["error"].as_str().unwrap().to_string();
            assert!(
                error.starts_with(message),
                "{path}: {error:?} should start with {message:?}"
            );
        }
    }
    assert_eq!(PDF.len(), 69, "the 413's message counts this PDF");
    assert!(w.bedrock.requests().is_empty(), "no model was asked");
    assert_eq!(harness::chat_count(&w.store, ChatMode::Standard).await, 0);
    assert_eq!(w.kept().await, 0);

    // Past MAX_UPLOAD_BYTES: the 413 says what to do.
    let w = world_with(&[("MAX_UPLOAD_BYTES", "2000")]).await;
    let big = vec![b'a'; 3000];
    let reply = Reply::buffered(
        w.chat
            .handle(multipart_request(
                "/chat",
                multipart(
                    &one,
                    &[("messages[0].files[0]", Some("a.txt"), "text/plain", &big)],
                ),
            ))
            .await,
    );
    assert_eq!(reply.status, 413);
    let error = reply.json()["error"].as_str().unwrap().to_string();
    assert!(error.contains("fewer or smaller files"), "{error}");
    assert_eq!(w.kept().await, 0);
}

#[tokio::test]
async fn a_save_keeps_the_files_of_the_messages_it_keeps_and_removes_the_others() {
    let w = world().await;
    let first = json!({"messages": [{"role": "user", "content": "one"}]});
    let reply = w.ask_with(&first, &both_files()).await;
    let id = reply.json()["sessionState"].as_str().unwrap().to_string();
    let second = json!({"messages": [{"role": "user", "content": "two"}], "sessionState": id});
    let reply = w.ask_with(&second, &both_files()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(w.kept().await, 4);
    let listed = w.messages_of(&w.history, &id).await.json();
    // The Chat UI saves the first turn again, as it shows it: without files (and with the URLs' field echoed).
    let save = json!({"messages": listed.as_array().unwrap()[..2]});
    let saved = Reply::buffered(
        w.history
            .handle(harness::json_request(
                "PUT",
                &format!("/chat-history/{id}"),
                Some(&save),
            ))
            .await,
    );
    assert_eq!(saved.status, 200, "{}", saved.body);
    let after = w.messages_of(&w.history, &id).await.json();
    assert_eq!(after.as_array().unwrap().len(), 2);
    assert_eq!(after[0]["files"][1]["name"], "report.pdf");
    let url = after[0]["files"][1]["url"].as_str().unwrap();
    assert_eq!(reqwest::get(url).await.unwrap().bytes().await.unwrap(), PDF);
    // The second turn's files went with its messages.
    assert_eq!(w.kept().await, 2);
}

#[tokio::test]
async fn a_listed_page_is_downloaded_and_a_listed_image_is_shown() {
    let w = world().await;
    let page: &[u8] = b"<!DOCTYPE html><html><body><script>fetch('/steal')</script></body></html>";
    let request = json!({"messages": [{"role": "user", "content": "What are these?"}]});
    let files = [
        ("messages[0].files[0]", Some("shot.png"), "image/png", PNG),
        (
            "messages[0].files[1]",
            Some("inbox.html"),
            "text/html",
            page,
        ),
    ];
    let reply = w.ask_with(&request, &files).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.json()["sessionState"].as_str().unwrap().to_string();
    let messages = w.messages_of(&w.history, &id).await.json();
    let listed = messages[0]["files"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for (file, (content_type, disposition)) in listed.iter().zip([
        ("image/png", None),
        (
            "text/html",
            Some("attachment; filename=\"inbox.html\"; filename*=UTF-8''inbox.html"),
        ),
    ]) {
        let fetched = reqwest::get(file["url"].as_str().unwrap()).await.unwrap();
        assert_eq!(fetched.status(), 200);
        let header = |name| {
            fetched
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            header(reqwest::header::CONTENT_TYPE).as_deref(),
            Some(content_type)
        );
        assert_eq!(
            header(reqwest::header::CONTENT_DISPOSITION).as_deref(),
            disposition,
            "{file}"
        );
    }
}
