//! Cold start of the streaming chat function: the composition root builds it once ([`chat_app::App::build`]), then
//! its routes are served, under Lambda's response-streaming runtime or as a plain HTTP server (chat_runtime::serve
//! says which).

use chat_runtime::Responses;
use lambda_http::Error;

// The tokio runtime is chosen at start: one thread unless the environment hands out several requests at once
// (chat_runtime::run_function says why).
fn main() -> Result<(), Error> {
    chat_runtime::run_function(run())
}

async fn run() -> Result<(), Error> {
    chat_runtime::init_logging();
    // A configuration error is reported, not returned (chat_runtime::start says how).
    let service = async {
        chat_app::App::build::<chat_stream::Function>()
            .await
            .map(chat_app::App::service)
    };
    chat_runtime::start(service, Responses::Streamed).await
}
