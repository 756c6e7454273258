//! Cold start of the history function: configuration, identity and the DynamoDB client are built once.

use chat_aws::DynamoStore;
use chat_http::{Auth, Config};
use history::App;
use lambda_http::{Error, Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    chat_http::init_logging();
    let config = Config::from_env()?;
    let auth = Auth::from_env()?;
    let aws = chat_aws::load_aws_config().await;
    let store = DynamoStore::from_config(&aws, &config.table_name, config.history_ttl_days);
    let app: &'static App<DynamoStore> = Box::leak(Box::new(App::new(store, auth, &config)));
    chat_http::keep_running(|| {
        lambda_http::run(service_fn(move |request: Request| async move {
            Ok::<_, Error>(app.handle(request).await)
        }))
    })
    .await
}
