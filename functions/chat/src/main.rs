//! Cold start of the chat function: configuration and the Bedrock client are built once, then every request is
//! handed to [`chat::App`].

use chat::App;
use chat_aws::{BedrockModel, DynamoStore};
use chat_http::{Auth, Config};
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
    chat_http::keep_running(|| {
        lambda_http::run(service_fn(move |request: Request| async move {
            Ok::<_, Error>(app.handle(request).await)
        }))
    })
    .await
}
