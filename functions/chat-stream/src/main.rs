//! Cold start of the streaming chat function: configuration and the Bedrock client are built once, then every
//! request is handed to [`chat_stream::App`] under the response-streaming runtime.

use chat_aws::{BedrockModel, DynamoStore};
use chat_http::{Auth, Config};
use chat_stream::App;
use lambda_http::{Error, Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    chat_http::init_logging();
    let config = Config::from_env()?;
    let auth = Auth::from_env()?;
    let aws = chat_aws::load_aws_config().await;
    let model = BedrockModel::new(&aws, config.model_timeout);
    let store = DynamoStore::from_config(&aws, &config.table_name, config.history_ttl_days);
    let app: &'static App<BedrockModel, DynamoStore> =
        Box::leak(Box::new(App::new(model, store, auth, config)));
    // Boxed: the handler's future is deep enough to overflow the compiler's layout query depth when inlined
    // into the runtime's own futures.
    chat_http::keep_running(|| {
        lambda_http::run_with_streaming_response(service_fn(move |request: Request| {
            Box::pin(async move { Ok::<_, Error>(app.handle(request).await) })
        }))
    })
    .await
}
