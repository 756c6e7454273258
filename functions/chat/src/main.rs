//! Cold start of the chat function: configuration and the Bedrock client are built once, then every request is
//! handed to [`chat::App`].

use chat::App;
use chat_aws::{BedrockKnowledgeBase, BedrockModel, DynamoStore};
use chat_http::{Auth, Config};
use lambda_http::{Error, Request, service_fn};

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
    // Each request first makes sure the Runtime API connection has TCP_NODELAY, so that no response waits for a
    // delayed ACK; `run_concurrent` polls AWS_LAMBDA_MAX_CONCURRENCY requests at once (one when unset).
    let handler = chat_http::with_runtime_api_nodelay(move |request: Request| async move {
        Ok::<_, Error>(app.handle(request).await)
    });
    chat_http::keep_running(|| lambda_http::run_concurrent(service_fn(handler.clone()))).await
}
