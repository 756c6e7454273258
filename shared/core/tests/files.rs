//! Files in a turn, against the fakes of the ports (in-memory store, files and scripted model): what the model gets,
//! what is kept and where, what a continued chat sends again, and that a turn that fails keeps no file.

use std::sync::Arc;

use chat_core::{
    AttachmentStore, Caller, ChatError, ChatService, Message, ModelError, Role, SessionStore,
    StoreError, TurnInput,
};
use chat_testing::{
    InMemoryAttachments, InMemoryStore, Script, ScriptedModel, input, pdf, png, settings,
};

const ALICE: &str = "alice";

type Service = ChatService<ScriptedModel, InMemoryStore>;

fn fakes(
    scripts: impl IntoIterator<Item = Script>,
) -> (Service, ScriptedModel, InMemoryStore, InMemoryAttachments) {
    let model = ScriptedModel::with(scripts);
    let store = InMemoryStore::new();
    let files = InMemoryAttachments::new();
    let service = ChatService::new(model.clone(), store.clone(), settings())
        .with_attachments(Some(Arc::new(files.clone()) as Arc<dyn AttachmentStore>));
    (service, model, store, files)
}

/// A new chat's question "q" with an image.
fn png_question() -> TurnInput {
    input(
        vec![Message::with_files(Role::User, "q", vec![png()])],
        None,
    )
}

fn alice() -> Caller {
    Caller::owner(ALICE)
}

#[tokio::test]
async fn the_model_gets_the_files_and_the_turn_keeps_them_under_the_owner() {
    let (service, model, store, files) = fakes([Script::text("Two files.")]);
    let question = Message::with_files(Role::User, "What are these?", vec![png(), pdf()]);
    let answer = service
        .answer(&alice(), &input(vec![question], None))
        .await
        .unwrap();
    // The model got both files, bytes and all, in the question's message.
    let request = model.last_request().unwrap();
    let sent: Vec<_> = request.messages[0]
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.bytes.clone().unwrap()))
        .collect();
    assert_eq!(
        sent,
        [
            ("shot.png", png().bytes.unwrap()),
            ("report.pdf", pdf().bytes.unwrap())
        ]
    );
    // The thought lists them by name, type and size, never their bytes.
    let thought = answer
        .thoughts()
        .into_iter()
        .find(|t| t.title == "Files sent to the model")
        .expect("a thought lists the files");
    let props = thought.props.unwrap();
    assert_eq!(props["files"][0]["name"], "shot.png");
    assert_eq!(props["files"][0]["contentType"], "image/png");
    assert_eq!(props["files"][1]["size"], 17);
    assert!(!props.to_string().contains("PDF-1.4"));
    // Both kept, under alice's chat, and referenced by the stored question.
    let chat_id = answer.session_state.unwrap().as_str().unwrap().to_string();
    let keys = files.keys();
    assert_eq!(keys.len(), 2);
    assert!(
        keys.iter()
            .all(|k| k.starts_with(&format!("{ALICE}/{chat_id}/")))
    );
    let stored = store.load(ALICE, &chat_id).await.unwrap().1;
    assert_eq!(stored[0].files.len(), 2);
    assert_eq!(stored[0].files[1].name, "report.pdf");
    assert_eq!(stored[0].files[1].content_type, "application/pdf");
    assert_eq!(
        files.get(ALICE, &stored[0].files[0].key).await.unwrap(),
        png().bytes.unwrap()
    );
    // The answer carries none.
    assert!(stored[1].files.is_empty());
}

#[tokio::test]
async fn a_chat_continued_with_its_latest_message_sends_the_earlier_files_again() {
    let (service, model, _, _) = fakes([Script::text("Seen."), Script::text("Still seen.")]);
    let first = service
        .answer(
            &alice(),
            &input(
                vec![Message::with_files(Role::User, "Look", vec![png(), pdf()])],
                None,
            ),
        )
        .await
        .unwrap();
    let chat_id = first.session_state.unwrap().as_str().unwrap().to_string();
    let second = service
        .answer(
            &alice(),
            &input(vec![Message::new(Role::User, "And now?")], Some(&chat_id)),
        )
        .await
        .unwrap();
    let request = model.last_request().unwrap();
    assert_eq!(request.messages.len(), 3);
    // Read back from the files, whole.
    let again: Vec<_> = request.messages[0]
        .files
        .iter()
        .map(|f| (f.name.clone(), f.bytes.clone()))
        .collect();
    assert_eq!(
        again,
        [
            ("shot.png".to_string(), png().bytes),
            ("report.pdf".to_string(), pdf().bytes)
        ]
    );
    assert!(request.messages[2].files.is_empty());
    assert!(
        second
            .thoughts()
            .iter()
            .any(|t| t.title == "Files sent to the model")
    );
    // The same when the client sends the whole conversation again, the earlier message without its files.
    let third = input(
        vec![
            Message::new(Role::User, "Look"),
            Message::new(Role::Assistant, "Seen."),
            Message::new(Role::User, "And now?"),
            Message::new(Role::Assistant, "Still seen."),
            Message::new(Role::User, "Last"),
        ],
        Some(&chat_id),
    );
    service.answer(&alice(), &third).await.unwrap();
    let request = model.last_request().unwrap();
    assert_eq!(request.messages.len(), 5, "the history is not repeated");
    assert_eq!(request.messages[0].files.len(), 2);
}

#[tokio::test]
async fn a_turn_that_fails_keeps_no_file() {
    // The model fails: nothing is kept, nothing stored.
    let (service, _, store, files) = fakes([Script::error(ModelError::Throttled)]);
    let question = png_question;
    assert!(service.answer(&alice(), &question()).await.is_err());
    assert!(files.keys().is_empty());
    assert_eq!(store.chat_count(), 0);

    // The store refuses the turn: the files it kept are removed again.
    let (service, _, store, files) = fakes([Script::text("a")]);
    store.fail_next_write(StoreError::Unavailable("down".into()));
    assert_eq!(
        service.answer(&alice(), &question()).await.unwrap_err(),
        ChatError::Store(StoreError::Unavailable("down".into()))
    );
    assert!(files.keys().is_empty());

    // The files cannot be kept: the turn fails before it is stored.
    let (service, _, store, files) = fakes([Script::text("a")]);
    files.fail_puts(true);
    assert!(matches!(
        service.answer(&alice(), &question()).await.unwrap_err(),
        ChatError::Files(_)
    ));
    assert_eq!(store.chat_count(), 0);

    // A streamed turn whose save fails removes its files too.
    let (service, _, store, files) = fakes([Script::text("streamed")]);
    let mut streaming = service.stream(&alice(), &question()).await.unwrap();
    while streaming.next().await.unwrap().is_some() {}
    store.fail_next_write(StoreError::Failed("refused".into()));
    assert!(service.save_streamed(&alice(), streaming).await.is_err());
    assert!(files.keys().is_empty());
}

#[tokio::test]
async fn files_are_refused_without_a_place_to_keep_them_and_past_the_limits() {
    let model = ScriptedModel::with([Script::text("never")]);
    let store = InMemoryStore::new();
    let service = ChatService::new(model.clone(), store.clone(), settings());
    let err = service.answer(&alice(), &png_question()).await.unwrap_err();
    assert!(
        matches!(&err, ChatError::Invalid(e) if e.reason.contains("ATTACHMENTS_BUCKET")),
        "{err:?}"
    );
    assert!(model.requests().is_empty());

    let (service, model, store, files) = fakes([Script::text("never")]);
    let six_pdfs = Message::with_files(Role::User, "q", (0..6).map(|_| pdf()).collect());
    let err = service
        .answer(&alice(), &input(vec![six_pdfs], None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ChatError::Invalid(e) if e.reason.contains("6 documents")),
        "{err:?}"
    );
    let on_answer = vec![
        Message::new(Role::User, "q"),
        Message::with_files(Role::Assistant, "a", vec![png()]),
        Message::new(Role::User, "q2"),
    ];
    assert!(matches!(
        service.answer(&alice(), &input(on_answer, None)).await.unwrap_err(),
        ChatError::Invalid(e) if e.path == "messages[1].files[0]"
    ));
    assert!(model.requests().is_empty());
    assert_eq!(store.chat_count(), 0);
    assert!(files.keys().is_empty());
}

#[tokio::test]
async fn another_owners_file_is_never_read() {
    let (service, _, store, files) = fakes([Script::text("a")]);
    let answer = service.answer(&alice(), &png_question()).await.unwrap();
    let chat_id = answer.session_state.unwrap().as_str().unwrap().to_string();
    let stored = store.load(ALICE, &chat_id).await.unwrap().1[0].files[0].clone();
    let key = stored.key.clone();
    assert!(files.get("mallory", &key).await.is_err());
    assert!(files.url("mallory", &stored).await.is_err());
    let keys = [key.clone()];
    files.delete("mallory", &keys).await.unwrap();
    files.delete_chat("mallory", &chat_id).await.unwrap();
    assert_eq!(files.keys(), [key]);
}
