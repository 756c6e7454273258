//! Document access on every route of the chat function (`/chat` in both protocol versions, `/chat-ui/chat`,
//! `/multi-agent-chat/batch`): whatever the overrides say, a restricted sample document reaches only those its
//! metadata names, and the documents for everyone reach everyone.

use std::future::Future;
use std::pin::Pin;

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_testing::access::{self, AIMS, Person, Route};
use chat_testing::harness::Reply;
use lambda_http::Request;
use serde_json::{Value, json};

/// The chat function twice over one fixture: for callers with tokens, and for the local run's one user.
type World = access::World<App<BedrockModel, DynamoStore>>;

async fn world(extra: &[(&str, &str)]) -> World {
    let make = |model, store, auth, config, retriever| {
        App::new(model, store, auth, config).with_retriever(Some(retriever))
    };
    World::start(extra, make, buffered).await
}

/// The buffered answer.
fn buffered(
    app: &App<BedrockModel, DynamoStore>,
    request: Request,
) -> Pin<Box<dyn Future<Output = (u16, String)> + '_>> {
    Box::pin(async move {
        let reply = Reply::buffered(app.handle(request).await);
        (reply.status.as_u16(), reply.body)
    })
}

/// The buffered route every other test asks on.
const CHAT: Route = Route::to("/chat");

const ROUTES: [Route; 4] = [
    CHAT,
    Route::first_version("/chat", false),
    Route::to("/chat-ui/chat"),
    Route::to("/multi-agent-chat/batch"),
];

#[tokio::test]
async fn every_route_gives_each_caller_only_the_documents_they_may_read_whatever_the_overrides() {
    world(&[]).await.check_every_route(&ROUTES).await;
}

#[tokio::test]
async fn no_combination_of_the_security_overrides_gives_the_local_user_alices_review() {
    let w = world(&[]).await;
    w.check_no_override_gives_the_local_user_alices_review(&ROUTES)
        .await;
}

#[tokio::test]
async fn each_security_override_alone_narrows_what_the_caller_may_read() {
    let w = world(&[]).await;
    let [review, minutes, handbook] = &AIMS;
    let oid_only = json!({"use_oid_security_filter": true, "top": 20});
    let groups_only = json!({"use_groups_security_filter": true, "top": 20});
    let on_chat =
        async |person, question, overrides| w.ask(person, CHAT, question, Some(overrides)).await;
    // By id alone: Alice's review, and not the handbook, which names no one.
    let seen = on_chat(Person::Alice, review.question, &oid_only).await;
    seen.check(Person::Alice, review, "oid only");
    let seen = on_chat(Person::Alice, handbook.question, &oid_only).await;
    assert!(!seen.model.contains("Parental_Leave"), "{}", seen.model);
    // By groups alone: the board minutes and the handbook for Dana; not Alice's review for Alice.
    let seen = on_chat(Person::Dana, minutes.question, &groups_only).await;
    seen.check(Person::Dana, minutes, "groups only");
    let seen = on_chat(Person::Dana, handbook.question, &groups_only).await;
    seen.check(Person::Dana, handbook, "groups only");
    let seen = on_chat(Person::Alice, review.question, &groups_only).await;
    assert!(
        !seen.model.contains("Salary_Review_Alice"),
        "{}",
        seen.model
    );
}

#[tokio::test]
async fn the_search_thought_shows_the_filter_the_server_built() {
    let w = world(&[]).await;
    let seen = w.ask(Person::Dana, CHAT, AIMS[2].question, None).await;
    let body: Value = serde_json::from_str(&seen.response).unwrap();
    let search = body["context"]["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"].as_str().unwrap().starts_with("Search using"))
        .unwrap()
        .clone();
    assert_eq!(search["props"]["document_access"], "enforced", "{search}");
    assert_eq!(
        search["props"]["filters"],
        json!({"orAll": [
            {"listContains": {"key": "oids", "value": "dana"}},
            {"listContains": {"key": "groups", "value": "leadership"}},
            {"listContains": {"key": "groups", "value": "everyone"}},
        ]}),
        "{search}"
    );
}

#[tokio::test]
async fn an_open_collection_is_the_operators_choice_and_says_so() {
    let w = world(&[("DOCUMENT_ACCESS", "open")]).await;
    let review = &AIMS[0];
    // Opened, the collection's restricted documents reach anyone who asks: this is what the setting is for.
    let seen = w.ask(Person::Local, CHAT, review.question, None).await;
    assert!(seen.model.contains(review.marker), "{}", seen.model);
    let body: Value = serde_json::from_str(&seen.response).unwrap();
    let thoughts = body["context"]["thoughts"].to_string();
    assert!(thoughts.contains("DOCUMENT_ACCESS=open"), "{thoughts}");
    assert!(
        thoughts.contains(r#""document_access":"open""#),
        "{thoughts}"
    );
}
