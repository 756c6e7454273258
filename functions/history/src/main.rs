//! Cold start of the history function: configuration, identity and the DynamoDB client are built once, then
//! [`history::App`]'s routes are served, under Lambda's runtime or as a plain HTTP server (chat_http::serve says
//! which).

use chat_http::Responses;
use lambda_http::Error;

// The tokio runtime is chosen at start: one thread unless the environment hands out several requests at once
// (chat_http::run_function says why).
fn main() -> Result<(), Error> {
    chat_http::run_function(run())
}

async fn run() -> Result<(), Error> {
    chat_http::init_logging();
    // A configuration error is reported, not returned (chat_http::start says how).
    let service = async { history::App::from_env().await.map(|app| app.service()) };
    chat_http::start(service, Responses::Buffered).await
}
