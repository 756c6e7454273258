//! Document access on every route of the streaming function (`/chat/stream` in both protocol versions,
//! `/multi-agent-chat/stream`): whatever the overrides say, a restricted sample document reaches only those its
//! metadata names, and the documents for everyone reach everyone.

use std::future::Future;
use std::pin::Pin;

use chat_aws::{BedrockModel, DynamoStore};
use chat_stream::App;
use chat_testing::access::{self, Route};
use chat_testing::harness::Streamed;
use lambda_http::Request;

/// The function twice over one fixture: for callers with tokens, and for the local run's one user.
type World = access::World<App<BedrockModel, DynamoStore>>;

async fn world() -> World {
    let make = |model, store, auth, config, retriever| {
        App::new(model, store, auth, config).with_retriever(Some(retriever))
    };
    World::start(&[], make, streamed).await
}

/// The streamed answer, read whole.
fn streamed(
    app: &App<BedrockModel, DynamoStore>,
    request: Request,
) -> Pin<Box<dyn Future<Output = (u16, String)> + '_>> {
    Box::pin(async move {
        let streamed = Streamed::read(app.handle(request).await).await;
        (streamed.status.as_u16(), streamed.text())
    })
}

const ROUTES: [Route; 3] = [
    Route::to("/chat/stream"),
    Route::first_version("/chat/stream", true),
    Route::events("/multi-agent-chat/stream"),
];

#[tokio::test]
async fn every_streamed_route_gives_each_caller_only_the_documents_they_may_read() {
    world().await.check_every_route(&ROUTES).await;
}

#[tokio::test]
async fn no_combination_of_the_security_overrides_streams_the_local_user_alices_review() {
    let w = world().await;
    w.check_no_override_gives_the_local_user_alices_review(&ROUTES)
        .await;
}
