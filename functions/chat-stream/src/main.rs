//! Cold start of the streaming chat function: the composition root builds it once and serves its routes under
//! Lambda's response-streaming runtime or as a plain HTTP server ([`chat_app::run`] says how).

fn main() -> Result<(), lambda_http::Error> {
    chat_app::run::<chat_stream::Function>(chat_runtime::Responses::Streamed)
}
