//! What every route answers for a method it does not take: the JSON 405 with `Allow`, declared once.

use axum::response::IntoResponse;
use axum::routing::MethodRouter;

use crate::ApiError;

/// `methods` answering a route, and for every other method (`HEAD` too, which axum would otherwise send to a
/// `GET` handler) the JSON 405 with `Allow: allow`.
pub fn only<S: Clone + Send + Sync + 'static>(
    allow: &'static str,
    methods: MethodRouter<S>,
) -> MethodRouter<S> {
    let refuse = move || async move { ApiError::MethodNotAllowed { allow }.into_response() };
    // An explicit HEAD handler comes first; without one axum hands HEAD to the GET handler.
    methods.head(refuse).fallback(refuse)
}

/// [`only`] for OpenAI's routes (`/v1/…`): the 405 in OpenAI's error shape.
pub fn only_openai<S: Clone + Send + Sync + 'static>(
    allow: &'static str,
    methods: MethodRouter<S>,
) -> MethodRouter<S> {
    let refuse =
        move || async move { crate::openai_error_response(&ApiError::MethodNotAllowed { allow }) };
    methods.head(refuse).fallback(refuse)
}
