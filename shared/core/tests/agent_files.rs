//! Multi-agent rounds prepared as standard turns are: the user's files reach every agent, are kept with the round
//! and read back for the next one, and each agent's view of a long chat is fitted to the prompt budget.

use std::sync::Arc;

use bytes::Bytes;
use chat_core::{
    AgentGroup, AttachmentStore, Caller, ChatService, ChatSettings, Message, Role, SessionStore,
};
use chat_testing::{InMemoryAttachments, InMemoryStore, Script, ScriptedModel, agents, input, png};

const ALICE: &str = "alice";

fn settings(max_prompt_tokens: Option<u64>) -> ChatSettings {
    let mut settings = chat_testing::settings();
    if let Some(max) = max_prompt_tokens {
        settings.model.max_prompt_tokens = max;
    }
    settings
}

fn group() -> AgentGroup {
    agents(2)
}

#[tokio::test]
async fn every_agent_gets_the_users_files_and_the_next_round_reads_them_back() {
    let model = ScriptedModel::with([
        Script::text("A picture."),
        Script::text("Of a screen."),
        Script::text("Still a picture."),
        Script::text("Still a screen."),
    ]);
    let store = InMemoryStore::new();
    let files = InMemoryAttachments::new();
    let service = ChatService::new(model.clone(), store.clone(), settings(None))
        .with_attachments(Some(Arc::new(files.clone()) as Arc<dyn AttachmentStore>));
    let caller = Caller::owner(ALICE);
    let question = Message::with_files(Role::User, "What is this?", vec![png()]);
    let round = service
        .whole_round(&caller, &group(), &input(vec![question], None))
        .await
        .unwrap();
    // Both agents got the file, bytes and all, with the user's message.
    let sent = |request: &chat_core::ModelRequest| -> Vec<(String, Option<Bytes>)> {
        request.messages[0]
            .files
            .iter()
            .map(|f| (f.name.clone(), f.bytes.clone()))
            .collect()
    };
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(sent(request), [("shot.png".into(), png().bytes)]);
    }
    // The round says which files the agents were sent.
    assert!(
        round
            .thoughts()
            .iter()
            .any(|t| t.title == "Files sent to the model"),
        "{:?}",
        round.thoughts()
    );
    // The round kept the file under alice's chat, referenced by the stored question.
    let chat_id = round.session().chat_id.clone();
    let stored = store.load(ALICE, &chat_id).await.unwrap().1;
    assert_eq!(stored[0].files.len(), 1);
    assert_eq!(files.keys().len(), 1);
    // The next round, which sends only its new question, reads the file back for its agents.
    service
        .whole_round(
            &caller,
            &group(),
            &input(vec![Message::new(Role::User, "And now?")], Some(&chat_id)),
        )
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(sent(&requests[2]), [("shot.png".into(), png().bytes)]);
}

#[tokio::test]
async fn an_agents_view_of_a_long_chat_is_fitted_to_the_prompt_budget() {
    let model = ScriptedModel::with([Script::text("Short."), Script::text("Shorter.")]);
    let service = ChatService::new(model.clone(), InMemoryStore::new(), settings(Some(1100)));
    // Twenty long exchanges, far over the budget, then the question.
    let mut messages = Vec::new();
    for i in 0..20 {
        messages.push(Message::new(
            Role::User,
            format!("question {i} {}", "word ".repeat(200)),
        ));
        messages.push(Message::new(
            Role::Assistant,
            format!("answer {i} {}", "word ".repeat(200)),
        ));
    }
    messages.push(Message::new(Role::User, "The last question"));
    service
        .whole_round(&Caller::owner(ALICE), &group(), &input(messages, None))
        .await
        .unwrap();
    for request in model.requests() {
        let texts: Vec<String> = request
            .messages
            .iter()
            .flat_map(|m| m.texts.clone())
            .collect();
        assert!(
            texts.len() < 41,
            "some history left out: {} texts",
            texts.len()
        );
        assert!(
            !texts.iter().any(|t| t.starts_with("question 0 ")),
            "the oldest left out"
        );
        assert!(texts.iter().any(|t| t.contains("The last question")));
        assert_eq!(request.messages[0].role, Role::User);
    }
}
