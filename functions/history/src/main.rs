//! Cold start of the history function: the composition root builds it once and serves its routes under Lambda's
//! runtime (buffered responses) or as a plain HTTP server ([`chat_app::run`] says how).

fn main() -> Result<(), lambda_http::Error> {
    chat_app::run::<history::Function>(chat_runtime::Responses::Buffered)
}
