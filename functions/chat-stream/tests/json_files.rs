//! Files inside a JSON request to the streaming function (`messages[i].files: [{data, contentType}]`), as the
//! buffered one takes them: a PNG as a `Uint8Array`'s JSON reaches the model and is stored with its message;
//! `"files": "garbage"` is a 400 before any line.

use std::sync::Arc;

use chat_core::{AttachmentStore, SessionStore};
use chat_stream::App;
use chat_testing::bytes::{PNG, uint8array_json};
use chat_testing::harness::{self, Backend, OWNER, Streamed};
use serde_json::{Value, json};

#[tokio::test]
async fn a_png_in_the_json_is_streamed_about_and_stored_and_garbage_is_a_400() {
    let backend = Backend::start(&[]).await;
    let files = Arc::new(harness::fresh_attachments().await);
    let app = backend
        .app(App::new)
        .await
        .with_attachments(Some(files.clone() as Arc<dyn AttachmentStore>));
    let post = |body: Value| harness::json_request("POST", "/chat/stream", Some(&body));

    let data = uint8array_json(PNG);
    let reply = Streamed::read(
        app.handle(post(
            json!({"messages": [{"role": "user", "content": "What is this?", "files": [
                {"data": data, "contentType": "image/png", "filename": "shot.png"}
            ]}]}),
        ))
        .await,
    )
    .await;
    assert_eq!(reply.status, 200);
    let chat_id = reply.chat_id();
    let sent = backend.last_model_request();
    assert_eq!(
        sent["messages"][0]["content"][0]["text"],
        format!("[file: shot.png, image/png, {} bytes]", PNG.len())
    );
    assert!(
        sent["messages"][0]["content"][1]["image"].is_object(),
        "{sent}"
    );
    let (_, messages) = backend.store.load(OWNER, &chat_id).await.unwrap();
    assert_eq!(messages[0].files.len(), 1);
    let kept = files.get(OWNER, &messages[0].files[0].key).await.unwrap();
    assert_eq!(kept.as_ref(), PNG);

    let asked = backend.bedrock.requests().len();
    let garbage = Streamed::read(
        app.handle(post(
            json!({"messages": [{"role": "user", "content": "hi", "files": "garbage"}]}),
        ))
        .await,
    )
    .await;
    assert_eq!(garbage.status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&garbage.text()).unwrap()["error"],
        "messages[0].files: expected an array of files, not a string; a file is {\"data\": base64 text or a byte \
         array, \"contentType\": \"image/png\", \"filename\"?: \"shot.png\"}"
    );
    assert_eq!(
        backend.bedrock.requests().len(),
        asked,
        "no model was asked"
    );
}
