//! Files inside a JSON chat request (`messages[i].files: [{data, contentType, filename?}]`), through the chat
//! function's whole edge, the real SDK clients, the local Bedrock server and moto's DynamoDB and S3: a PNG sent as
//! base64 and as what `JSON.stringify` makes of a `Uint8Array` reaches the model and is stored with its message, in
//! both protocol versions; files of another shape are a 400 that stores nothing; a JSON body with files may be as
//! large as a multipart one, and one without may not.

use std::sync::Arc;

use base64::Engine;

use chat::App;
use chat_aws::{BedrockModel, DynamoStore, S3Attachments};
use chat_core::{AttachmentStore, ChatMode, SessionStore};
use chat_testing::bytes::{PNG, uint8array_json};
use chat_testing::harness::{self, Backend, OWNER, Reply};
use serde_json::{Value, json};

struct World {
    backend: Backend,
    files: Arc<S3Attachments>,
    app: App<BedrockModel, DynamoStore>,
}

async fn world_with(env: &[(&str, &str)]) -> World {
    let backend = Backend::start(env).await;
    let files = Arc::new(harness::fresh_attachments().await);
    let app = backend
        .app(App::new)
        .await
        .with_attachments(Some(files.clone() as Arc<dyn AttachmentStore>));
    World {
        backend,
        files,
        app,
    }
}

impl World {
    async fn post(&self, path: &str, body: &Value) -> Reply {
        let request = harness::request("POST", path, Some("application/json"), &body.to_string());
        Reply::buffered(self.app.handle(request).await)
    }
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The image blocks of a Converse message, decoded.
fn images(message: &Value) -> Vec<Vec<u8>> {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["image"]["source"]["bytes"].as_str())
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b).unwrap())
        .collect()
}

#[tokio::test]
async fn a_png_sent_in_the_json_as_base64_or_as_a_uint8array_reaches_the_model_and_is_stored() {
    let w = world_with(&[]).await;
    let cases = [
        ("base64", json!(base64(PNG)), None),
        ("Uint8Array", uint8array_json(PNG), None),
        ("base64, 2024-01-28", json!(base64(PNG)), Some(false)),
        (
            "Uint8Array, 2024-01-28 streamed",
            uint8array_json(PNG),
            Some(true),
        ),
    ];
    for (i, (form, data, stream)) in cases.into_iter().enumerate() {
        let name = format!("shot{i}.png");
        let mut request = json!({"messages": [{"role": "user", "content": "What is this?", "files": [
            {"data": data, "contentType": "image/png", "filename": name}
        ]}]});
        if let Some(stream) = stream {
            request["stream"] = json!(stream);
        }
        let reply = w.post("/chat", &request).await;
        assert_eq!(reply.status, 200, "{form}: {}", reply.body);

        // The model got the image, after a line naming it, then the question.
        let sent = w.backend.last_model_request();
        let question = &sent["messages"][0];
        assert_eq!(images(question), [PNG.to_vec()], "{form}");
        assert_eq!(
            question["content"][0]["text"],
            format!("[file: {name}, image/png, {} bytes]", PNG.len()),
            "{form}"
        );

        // Stored with the question, its bytes kept in S3.
        let chat_id = match stream {
            None => reply.json()["sessionState"].clone(),
            Some(false) => reply.json()["choices"][0]["session_state"].clone(),
            Some(true) => {
                let first: Value =
                    serde_json::from_str(reply.body.lines().next().unwrap()).unwrap();
                first["choices"][0]["session_state"].clone()
            }
        };
        let chat_id = chat_id.as_str().expect("the answer names the chat");
        let (_, messages) = w.backend.store.load(OWNER, chat_id).await.unwrap();
        let stored = &messages[0].files;
        assert_eq!(stored.len(), 1, "{form}");
        assert_eq!(
            (
                stored[0].name.as_str(),
                stored[0].content_type.as_str(),
                stored[0].size
            ),
            (name.as_str(), "image/png", PNG.len() as u64),
            "{form}"
        );
        let kept = w.files.get(OWNER, &stored[0].key).await.unwrap();
        assert_eq!(kept.as_ref(), PNG, "{form}");
    }
    assert_eq!(w.files.count_owned(OWNER).await.unwrap(), 4);
}

#[tokio::test]
async fn files_of_another_shape_are_a_400_naming_the_field_and_nothing_is_stored() {
    let w = world_with(&[]).await;
    let png = base64(PNG);
    let cases = [
        (
            "/chat",
            json!("garbage"),
            "messages[0].files: expected an array of files, not a string",
        ),
        (
            "/chat",
            json!([{"data": png, "contentType": "image/png"}, {"data": png}]),
            "messages[0].files[1].contentType: is required",
        ),
        (
            "/chat",
            json!([{"data": "%%%", "contentType": "image/png"}]),
            "messages[0].files[0].data: is not base64",
        ),
        (
            "/chat",
            json!([{"data": png, "contentType": "application/pdf"}]),
            "messages[0].files[0]: declared application/pdf (by its content type), but its bytes are a PNG image",
        ),
        (
            "/chat-ui/chat",
            json!([{"data": png, "contentType": "image/png"}]),
            "messages[0].files: this route takes no files; send them to /chat or /chat/stream",
        ),
    ];
    for (path, files, expected) in cases {
        let request =
            json!({"messages": [{"role": "user", "content": "What is this?", "files": files}]});
        let reply = w.post(path, &request).await;
        assert_eq!(reply.status, 400, "{files}: {}", reply.body);
        let error = reply.json()["error"].as_str().unwrap().to_string();
        assert!(
            error.starts_with(expected),
            "{error:?} should start with {expected:?}"
        );
    }
    assert!(
        w.backend.bedrock.requests().is_empty(),
        "no model was asked"
    );
    assert_eq!(
        harness::chat_count(&w.backend.store, ChatMode::Standard).await,
        0
    );
    assert_eq!(w.files.count_owned(OWNER).await.unwrap(), 0);
}

#[tokio::test]
async fn a_json_body_with_files_may_be_as_large_as_an_upload_and_one_without_may_not() {
    let w = world_with(&[("MAX_BODY_BYTES", "1000"), ("MAX_UPLOAD_BYTES", "20000")]).await;
    // A text file of 3,000 bytes, in base64: past the JSON limit, within the upload limit.
    let text = "a".repeat(3000);
    let with_file = json!({"messages": [{"role": "user", "content": "Summarize", "files": [
        {"data": base64(text.as_bytes()), "contentType": "text/plain", "filename": "notes.txt"}
    ]}]});
    let reply = w.post("/chat", &with_file).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The same size without a file is a 413 at the JSON limit.
    let without = json!({"messages": [{"role": "user", "content": "a".repeat(4000)}]});
    let reply = w.post("/chat", &without).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.json()["error"],
        "The request body is larger than the limit of 1000 bytes."
    );
    // A small file does not let the rest of the body pass the JSON limit: only the files may take it past.
    let mut padded = json!({"messages": [{"role": "user", "content": "Summarize", "files": [
        {"data": base64(b"hello"), "contentType": "text/plain", "filename": "hi.txt"}
    ]}]});
    padded["context"] = json!({"padding": vec![0; 3000]});
    let reply = w.post("/chat", &padded).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.json()["error"],
        "The request body is larger than the limit of 1000 bytes."
    );
    // Past the upload limit, even with files.
    let huge = json!({"messages": [{"role": "user", "content": "Summarize", "files": [
        {"data": base64(&vec![b'a'; 20000]), "contentType": "text/plain"}
    ]}]});
    let reply = w.post("/chat", &huge).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    // The Chat UI takes no files: its limit stays the JSON one.
    let reply = w.post("/chat-ui/chat", &with_file).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
}
