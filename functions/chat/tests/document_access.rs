//! Document access on every route of the chat function (`/chat` in both protocol versions, `/chat-ui/chat`,
//! `/multi-agent-chat/batch`): whatever the overrides say, a restricted sample document reaches only those its
//! metadata names, and the documents for everyone reach everyone.

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_testing::access::{
    AIMS, Aim, Apps, Fixture, Person, Seen, every_override_combination, override_cases,
};
use chat_testing::harness::Reply;
use lambda_http::http::StatusCode;
use serde_json::{Value, json};

/// The chat function twice over one fixture: for callers with tokens, and for the local run's one user.
/// The function twice over one fixture: for callers with tokens, and for the local run's one user.
struct World {
    fixture: Fixture,
    apps: Apps<App<BedrockModel, DynamoStore>>,
}

async fn world(extra: &[(&str, &str)]) -> World {
    let fixture = Fixture::start(extra).await;
    let apps = fixture
        .apps(|model, store, auth, config, retriever| {
            App::new(model, store, auth, config).with_retriever(Some(retriever))
        })
        .await;
    World { fixture, apps }
}

#[derive(Debug, Clone, Copy)]
enum Route {
    Chat,
    ChatFirstVersion,
    ChatUi,
    MultiAgent,
}

impl World {
    /// `person` asks `question` on `route`, with `overrides`; what it left behind.
    async fn ask(
        &self,
        person: Person,
        route: Route,
        question: &str,
        overrides: Option<&Value>,
    ) -> Seen {
        let messages = json!([{"role": "user", "content": question}]);
        let mut body = json!({"messages": messages});
        if let Some(overrides) = overrides {
            body["context"] = json!({"overrides": overrides});
        }
        let path = match route {
            Route::Chat => "/chat",
            Route::ChatFirstVersion => {
                body["stream"] = json!(false);
                "/chat"
            }
            Route::ChatUi => "/chat-ui/chat",
            Route::MultiAgent => "/multi-agent-chat/batch",
        };
        let app = self.apps.of(person);
        let before = self.fixture.model_calls();
        let reply = Reply::buffered(app.handle(self.fixture.request(person, path, &body)).await);
        assert_eq!(reply.status, StatusCode::OK, "{route:?}: {}", reply.body);
        self.fixture.seen(person, before, reply.body).await
    }
}

#[tokio::test]
async fn every_route_gives_each_caller_only_the_documents_they_may_read_whatever_the_overrides() {
    let w = world(&[]).await;
    for route in ROUTES {
        for (case, overrides) in override_cases() {
            for aim in &AIMS {
                for person in Person::ALL {
                    let seen = w.ask(person, route, aim.question, overrides.as_ref()).await;
                    seen.check(person, aim, &format!("{route:?}, {case}"));
                }
            }
        }
    }
}

const ROUTES: [Route; 4] = [
    Route::Chat,
    Route::ChatFirstVersion,
    Route::ChatUi,
    Route::MultiAgent,
];

#[tokio::test]
async fn no_combination_of_the_security_overrides_gives_the_local_user_alices_review() {
    let w = world(&[]).await;
    let review: &Aim = &AIMS[0];
    for overrides in every_override_combination() {
        for route in ROUTES {
            let seen = w
                .ask(Person::Local, route, review.question, Some(&overrides))
                .await;
            seen.check(Person::Local, review, &format!("{route:?} {overrides}"));
        }
    }
}

#[tokio::test]
async fn each_security_override_alone_narrows_what_the_caller_may_read() {
    let w = world(&[]).await;
    let [review, minutes, handbook] = &AIMS;
    let oid_only = json!({"use_oid_security_filter": true, "top": 20});
    let groups_only = json!({"use_groups_security_filter": true, "top": 20});
    // By id alone: Alice's review, and not the handbook, which names no one.
    let seen = w
        .ask(Person::Alice, Route::Chat, review.question, Some(&oid_only))
        .await;
    seen.check(Person::Alice, review, "oid only");
    let seen = w
        .ask(
            Person::Alice,
            Route::Chat,
            handbook.question,
            Some(&oid_only),
        )
        .await;
    assert!(!seen.model.contains("Parental_Leave"), "{}", seen.model);
    // By groups alone: the board minutes and the handbook for Dana; not Alice's review for Alice.
    let seen = w
        .ask(
            Person::Dana,
            Route::Chat,
            minutes.question,
            Some(&groups_only),
        )
        .await;
    seen.check(Person::Dana, minutes, "groups only");
    let seen = w
        .ask(
            Person::Dana,
            Route::Chat,
            handbook.question,
            Some(&groups_only),
        )
        .await;
    seen.check(Person::Dana, handbook, "groups only");
    let seen = w
        .ask(
            Person::Alice,
            Route::Chat,
            review.question,
            Some(&groups_only),
        )
        .await;
    assert!(
        !seen.model.contains("Salary_Review_Alice"),
        "{}",
        seen.model
    );
}

#[tokio::test]
async fn the_search_thought_shows_the_filter_the_server_built() {
    let w = world(&[]).await;
    let seen = w
        .ask(Person::Dana, Route::Chat, AIMS[2].question, None)
        .await;
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
    let seen = w
        .ask(Person::Local, Route::Chat, review.question, None)
        .await;
    assert!(seen.model.contains(review.marker), "{}", seen.model);
    let body: Value = serde_json::from_str(&seen.response).unwrap();
    let thoughts = body["context"]["thoughts"].to_string();
    assert!(thoughts.contains("DOCUMENT_ACCESS=open"), "{thoughts}");
    assert!(
        thoughts.contains(r#""document_access":"open""#),
        "{thoughts}"
    );
}
