//! Document access on every route of the streaming function (`/chat/stream` in both protocol versions,
//! `/multi-agent-chat/stream`): whatever the overrides say, a restricted sample document reaches only those its
//! metadata names, and the documents for everyone reach everyone.

use chat_aws::{BedrockModel, DynamoStore};
use chat_stream::App;
use chat_testing::access::{
    AIMS, Apps, Fixture, Person, Seen, every_override_combination, override_cases,
};
use chat_testing::harness::Streamed;
use serde_json::{Value, json};

/// The function twice over one fixture: for callers with tokens, and for the local run's one user.
struct World {
    fixture: Fixture,
    apps: Apps<App<BedrockModel, DynamoStore>>,
}

async fn world() -> World {
    let fixture = Fixture::start(&[]).await;
    let apps = fixture
        .apps(|model, store, auth, config, retriever| {
            App::new(model, store, auth, config).with_retriever(Some(retriever))
        })
        .await;
    World { fixture, apps }
}

#[derive(Debug, Clone, Copy)]
enum Route {
    Stream,
    StreamFirstVersion,
    MultiAgent,
}

impl World {
    async fn ask(
        &self,
        person: Person,
        route: Route,
        question: &str,
        overrides: Option<&Value>,
    ) -> Seen {
        let mut body = json!({"messages": [{"role": "user", "content": question}]});
        if let Some(overrides) = overrides {
            body["context"] = json!({"overrides": overrides});
        }
        let path = match route {
            Route::Stream => "/chat/stream",
            Route::StreamFirstVersion => {
                body["stream"] = json!(true);
                "/chat/stream"
            }
            Route::MultiAgent => "/multi-agent-chat/stream",
        };
        let mut request = self.fixture.request(person, path, &body);
        if matches!(route, Route::MultiAgent) {
            request
                .headers_mut()
                .insert("accept", "text/event-stream".parse().unwrap());
        }
        let app = self.apps.of(person);
        let before = self.fixture.model_calls();
        let streamed = Streamed::read(app.handle(request).await).await;
        assert_eq!(streamed.status, 200, "{route:?}: {}", streamed.text());
        self.fixture.seen(person, before, streamed.text()).await
    }
}

#[tokio::test]
async fn every_streamed_route_gives_each_caller_only_the_documents_they_may_read() {
    let w = world().await;
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

const ROUTES: [Route; 3] = [Route::Stream, Route::StreamFirstVersion, Route::MultiAgent];

#[tokio::test]
async fn no_combination_of_the_security_overrides_streams_the_local_user_alices_review() {
    let w = world().await;
    let review = &AIMS[0];
    for overrides in every_override_combination() {
        for route in ROUTES {
            let seen = w
                .ask(Person::Local, route, review.question, Some(&overrides))
                .await;
            seen.check(Person::Local, review, &format!("{route:?} {overrides}"));
        }
    }
}
