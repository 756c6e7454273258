//! Cold start of the streaming chat function: configuration and the Bedrock client are built once, then every
//! request is handed to [`chat_stream::App`] under the response-streaming runtime.

use chat_aws::{BedrockKnowledgeBase, BedrockModel, DynamoStore};
use chat_http::{Auth, Config};
use chat_stream::App;
use http_body::{Body, Frame, SizeHint};
use lambda_http::{Error, Request, service_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

// The tokio runtime is chosen at start: one thread unless the environment hands out several requests at once
// (chat_http::run_function says why).
fn main() -> Result<(), Error> {
    chat_http::run_function(run())
}

async fn run() -> Result<(), Error> {
    chat_http::init_logging();
    let config = Config::from_env()?;
    let auth = Auth::from_env()?;
    let aws = chat_aws::load_aws_config().await;
    let model = BedrockModel::new(&aws, config.model_timeout);
    // With a knowledge base configured, every standard turn searches it first.
    let knowledge_base = BedrockKnowledgeBase::configured(
        &aws,
        config.knowledge_base_id.clone(),
        config.knowledge_base_timeout,
    );
    let store = DynamoStore::from_config(
        &aws,
        &config.table_name,
        config.history_ttl_days,
        config.store_timeouts,
    );
    let app: &'static App<BedrockModel, DynamoStore> = Box::leak(Box::new(
        App::new(model, store, auth, config).with_retriever(knowledge_base),
    ));
    // Each request first makes sure the Runtime API connection has TCP_NODELAY, so streamed lines are not held
    // for a delayed ACK; the `_concurrent` runner polls AWS_LAMBDA_MAX_CONCURRENCY requests at once (one when
    // unset). Boxed: the handler's future is deep enough to overflow the compiler's layout query depth when
    // inlined into the runtime's own futures.
    let handler = chat_http::with_runtime_api_nodelay(move |request: Request| {
        Box::pin(async move { Ok::<_, Error>(app.handle(request).await.map(FirstRead::new)) })
    });
    chat_http::keep_running(|| {
        lambda_http::run_with_streaming_response_concurrent(service_fn(handler.clone()))
    })
    .await
}

/// A response body that, when the runtime first reads it, makes sure the response's own connection has
/// TCP_NODELAY: with several requests at once, it may be one opened after the request's check
/// ([`chat_http::on_streamed_body_start`]).
struct FirstRead<B> {
    body: B,
    read: bool,
}

impl<B> FirstRead<B> {
    fn new(body: B) -> Self {
        Self { body, read: false }
    }
}

impl<B: Body + Unpin> Body for FirstRead<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if !self.read {
            self.read = true;
            chat_http::on_streamed_body_start();
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
