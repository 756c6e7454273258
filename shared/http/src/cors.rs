//! Cross-origin access for browsers when no function URL does it: the local run, or a function behind another
//! front door.
//!
//! On AWS the template configures CORS on each function URL, which answers preflights itself and adds the headers
//! to every response; `CORS_ALLOWED_ORIGINS` is then left unset so the function adds nothing. Here the function
//! plays that part with the same rules, so a browser front end (the Chat UI, whose `Content-Type` on GET causes a
//! preflight) works against `make run` as it will against the deployment.

use lambda_http::http::header::{self, HeaderMap, HeaderValue};
use lambda_http::http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

/// Request headers a browser may send: JSON bodies, JWTs, and the SigV4 headers of a signed request.
pub const ALLOWED_HEADERS: &str =
    "content-type, accept, authorization, x-amz-date, x-amz-security-token, x-amz-content-sha256";
/// Response headers a browser may read besides the simple ones: the history list's next page.
pub const EXPOSED_HEADERS: &str = "x-next-cursor";
/// How long a browser may reuse a preflight answer, in seconds.
pub const MAX_AGE_SECONDS: u32 = 300;

/// Which origins may call from a browser; none when `CORS_ALLOWED_ORIGINS` is unset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    /// From a comma-separated list of origins (`https://chat.example.com,http://localhost:5173`), or `*` for any.
    pub fn from_list(list: &str) -> Self {
        Self {
            origins: list
                .split(',')
                .map(|o| o.trim().trim_end_matches('/').to_string())
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.origins.is_empty()
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, if it may call.
    fn allow_origin(&self, origin: &str) -> Option<HeaderValue> {
        if self.origins.iter().any(|o| o == "*") {
            Some(HeaderValue::from_static("*"))
        } else if self.origins.iter().any(|o| o == origin) {
            HeaderValue::from_str(origin).ok()
        } else {
            None
        }
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`), which
    /// the caller returns without routing; `None` for every other request. `methods` are the function's own.
    pub fn preflight(&self, request: &Request, methods: &str) -> Option<Response<Body>> {
        let headers = request.headers();
        if !self.is_enabled()
            || request.method() != Method::OPTIONS
            || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return None;
        }
        let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
        let mut response = Response::builder().status(StatusCode::NO_CONTENT);
        let out = response.headers_mut().expect("a fresh builder has headers");
        out.insert(header::VARY, HeaderValue::from_static("Origin"));
        // An origin that may not call gets no CORS headers: the browser then refuses the real request.
        if let Some(allow) = self.allow_origin(origin) {
            out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            out.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_str(methods).expect("methods are a header value"),
            );
            out.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOWED_HEADERS),
            );
            out.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from(MAX_AGE_SECONDS),
            );
        }
        Some(response.body(Body::Empty).expect("a valid response"))
    }

    /// Adds the CORS headers of an actual (non-preflight) response for a request from an allowed origin.
    pub fn decorate(&self, request: &Request, response: &mut HeaderMap) {
        if !self.is_enabled() {
            return;
        }
        let Some(origin) = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
        else {
            return;
        };
        response.append(header::VARY, HeaderValue::from_static("Origin"));
        if let Some(allow) = self.allow_origin(origin) {
            response.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            response.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSED_HEADERS),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request {
        let mut builder = lambda_http::http::Request::builder()
            .method(method)
            .uri("/chat-history");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(Body::Empty).unwrap()
    }

    const PREFLIGHT: [(&str, &str); 3] = [
        ("origin", "http://localhost:5173"),
        ("access-control-request-method", "GET"),
        ("access-control-request-headers", "content-type"),
    ];

    #[test]
    fn a_preflight_from_an_allowed_origin_is_answered() {
        let cors = Cors::from_list("https://chat.example.com, http://localhost:5173/");
        let answer = cors
            .preflight(&request(Method::OPTIONS, &PREFLIGHT), "GET, POST")
            .expect("a preflight");
        assert_eq!(answer.status(), 204);
        let h = answer.headers();
        assert_eq!(h["access-control-allow-origin"], "http://localhost:5173");
        assert_eq!(h["access-control-allow-methods"], "GET, POST");
        assert!(
            h["access-control-allow-headers"]
                .to_str()
                .unwrap()
                .contains("content-type")
        );
    }

    #[test]
    fn other_origins_and_other_requests_get_nothing() {
        let cors = Cors::from_list("https://chat.example.com");
        let answer = cors
            .preflight(&request(Method::OPTIONS, &PREFLIGHT), "GET")
            .expect("still answered, so it is not routed");
        assert!(!answer.headers().contains_key("access-control-allow-origin"));
        // Not a preflight: routed as usual (and answered 405 there).
        assert!(
            cors.preflight(&request(Method::OPTIONS, &[]), "GET")
                .is_none()
        );
        assert!(
            Cors::default()
                .preflight(&request(Method::OPTIONS, &PREFLIGHT), "GET")
                .is_none()
        );
    }

    #[test]
    fn responses_expose_the_next_cursor_to_allowed_origins() {
        let any = Cors::from_list("*");
        let mut headers = HeaderMap::new();
        any.decorate(
            &request(Method::GET, &[("origin", "http://localhost:5173")]),
            &mut headers,
        );
        assert_eq!(headers["access-control-allow-origin"], "*");
        assert_eq!(headers["access-control-expose-headers"], "x-next-cursor");

        let mut headers = HeaderMap::new();
        any.decorate(&request(Method::GET, &[]), &mut headers);
        assert!(headers.is_empty(), "no Origin, not a browser call");
    }
}
