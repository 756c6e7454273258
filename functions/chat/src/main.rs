//! Cold start of the chat function: the composition root builds it once and serves its routes under Lambda's
//! runtime (buffered responses) or as a plain HTTP server ([`chat_app::run`] says how).

fn main() -> Result<(), lambda_http::Error> {
    chat_app::run::<chat::Function>(chat_runtime::Responses::Buffered)
}
