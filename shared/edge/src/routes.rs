//! What every route answers for a method it does not take: the 405 with `Allow`, in the shape of the route's dialect,
//! declared once.

use axum::routing::MethodRouter;
use chat_protocol::{ErrorShape, PlainErrors};

use crate::{ApiError, error_response_in};

/// `methods` answering a route, and for every other method (`HEAD` too, which axum would otherwise send to a
/// `GET` handler) the JSON 405 with `Allow: allow`.
pub fn only<S: Clone + Send + Sync + 'static>(
    allow: &'static str,
    methods: MethodRouter<S>,
) -> MethodRouter<S> {
    only_in::<PlainErrors, S>(allow, methods)
}

/// [`only`] for the routes of a dialect whose errors have the shape `E` (OpenAI's routes, `/v1/…`, answer its 405 in
/// OpenAI's shape).
pub fn only_in<E: ErrorShape, S: Clone + Send + Sync + 'static>(
    allow: &'static str,
    methods: MethodRouter<S>,
) -> MethodRouter<S> {
    let refuse =
        move || async move { error_response_in::<E>(&ApiError::MethodNotAllowed { allow }) };
    // An explicit HEAD handler comes first; without one axum hands HEAD to the GET handler.
    methods.head(refuse).fallback(refuse)
}
