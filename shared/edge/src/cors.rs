//! Cross-origin access for browsers when no function URL does it: the local run, or a function behind another
//! front door.
//!
//! On AWS the template configures CORS on each function URL, which answers preflights itself and adds the headers
//! to every response; `CORS_ALLOWED_ORIGINS` is then left unset so the function adds nothing. Here the function
//! plays that part with the same rules, so a browser front end (the Chat UI, whose `Content-Type` on GET causes a
//! preflight) works against `make run` as it will against the deployment.
//!
//! An origin may name any port of its host, `http://localhost:*`: a developer's front end runs on whatever port its
//! dev server picked. The local run allows only such loopback origins ([`LOOPBACK_ORIGINS`]) unless told otherwise:
//! with no sign-in there, an origin allowed is a web page that can read the developer's chats.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Request headers a browser may send: JSON bodies, JWTs, and the SigV4 headers of a signed request.
pub const ALLOWED_HEADERS: &str =
    "content-type, accept, authorization, x-amz-date, x-amz-security-token, x-amz-content-sha256";
/// Response headers a browser may read besides the simple ones: the history list's next page, and what of a Chat
/// Completions request was not applied as sent.
pub const EXPOSED_HEADERS: &str = "x-next-cursor, x-ignored-parameters";
/// How long a browser may reuse a preflight answer, in seconds.
pub const MAX_AGE_SECONDS: u32 = 300;
/// Pages served from this machine, on any port: what the local run allows when `CORS_ALLOWED_ORIGINS` is unset.
pub const LOOPBACK_ORIGINS: &str = "http://localhost:*,http://127.0.0.1:*";

/// Which origins may call from a browser; none when `CORS_ALLOWED_ORIGINS` is unset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    /// From a comma-separated list of origins (`https://chat.example.com,http://localhost:5173`), each exact or
    /// with `:*` for any port of its host (`http://localhost:*`), or `*` for any origin.
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

    /// tower-http's CORS for these origins and a function's `methods`, as a function URL configures it: preflights
    /// answered with the methods, [`ALLOWED_HEADERS`] and [`MAX_AGE_SECONDS`]; actual responses to an allowed
    /// origin carry `Access-Control-Allow-Origin` and expose [`EXPOSED_HEADERS`]; an origin that may not call gets
    /// no CORS headers, so the browser refuses it. `None` when no origin may call.
    pub fn layer(&self, methods: &[Method]) -> Option<CorsLayer> {
        if !self.is_enabled() {
            return None;
        }
        let origin = if self.origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            let origins = self.origins.clone();
            AllowOrigin::predicate(move |origin: &HeaderValue, _| {
                origin
                    .to_str()
                    .is_ok_and(|origin| origins.iter().any(|o| matches(o, origin)))
            })
        };
        let names = |list: &str| -> Vec<HeaderName> {
            list.split(',')
                .map(|h| HeaderName::from_bytes(h.trim().as_bytes()).expect("a header name"))
                .collect()
        };
        Some(
            CorsLayer::new()
                .allow_origin(origin)
                .allow_methods(methods.to_vec())
                .allow_headers(names(ALLOWED_HEADERS))
                .expose_headers(names(EXPOSED_HEADERS))
                .max_age(Duration::from_secs(u64::from(MAX_AGE_SECONDS))),
        )
    }
}

/// Whether `origin` (as a browser sends it: scheme, host and a port unless it is the scheme's default) is the
/// `allowed` one, or one of its host's ports when `allowed` ends with `:*`.
fn matches(allowed: &str, origin: &str) -> bool {
    match allowed.strip_suffix(":*") {
        None => allowed == origin,
        Some(host) => origin.strip_prefix(host).is_some_and(|rest| {
            rest.is_empty()
                || rest.strip_prefix(':').is_some_and(|port| {
                    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
                })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, Response};
    use axum::routing::get;
    use tower::ServiceExt;

    async fn send(cors: &Cors, method: Method, headers: &[(&str, &str)]) -> Response<Body> {
        let mut router = Router::new().route(
            "/chat-history",
            get(|| async { "listed" }).post(|| async { "made" }),
        );
        if let Some(layer) = cors.layer(&[Method::GET, Method::POST]) {
            router = router.layer(layer);
        }
        let mut builder = Request::builder().method(method).uri("/chat-history");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        router
            .oneshot(builder.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    const PREFLIGHT: [(&str, &str); 3] = [
        ("origin", "http://localhost:5173"),
        ("access-control-request-method", "GET"),
        ("access-control-request-headers", "content-type"),
    ];

    #[tokio::test]
    async fn a_preflight_from_an_allowed_origin_is_answered() {
        let cors = Cors::from_list("https://chat.example.com, http://localhost:5173/");
        let answer = send(&cors, Method::OPTIONS, &PREFLIGHT).await;
        assert!(answer.status().is_success());
        let h = answer.headers();
        assert_eq!(h["access-control-allow-origin"], "http://localhost:5173");
        assert_eq!(h["access-control-allow-methods"], "GET,POST");
        assert!(
            h["access-control-allow-headers"]
                .to_str()
                .unwrap()
                .contains("content-type")
        );
        assert_eq!(h["access-control-max-age"], "300");
    }

    #[tokio::test]
    async fn other_origins_get_nothing() {
        let cors = Cors::from_list("https://chat.example.com");
        let answer = send(&cors, Method::OPTIONS, &PREFLIGHT).await;
        assert!(!answer.headers().contains_key("access-control-allow-origin"));
        let answer = send(&cors, Method::GET, &[("origin", "http://localhost:5173")]).await;
        assert!(!answer.headers().contains_key("access-control-allow-origin"));
        assert!(Cors::default().layer(&[Method::GET]).is_none());
    }

    #[tokio::test]
    async fn the_local_runs_default_lets_in_pages_of_this_machine_only() {
        let cors = Cors::from_list(LOOPBACK_ORIGINS);
        for origin in [
            "http://localhost:5173",
            "http://127.0.0.1:41873",
            "http://localhost",
        ] {
            let answer = send(&cors, Method::GET, &[("origin", origin)]).await;
            assert_eq!(answer.headers()["access-control-allow-origin"], origin);
            assert_eq!(
                answer.headers()["access-control-expose-headers"],
                "x-next-cursor,x-ignored-parameters"
            );
            let mut preflight = PREFLIGHT;
            preflight[0].1 = origin;
            let answer = send(&cors, Method::OPTIONS, &preflight).await;
            assert_eq!(answer.headers()["access-control-allow-origin"], origin);
        }
        for origin in [
            "https://evil.example",
            "https://localhost:5173",
            "http://localhost.evil.example",
            "http://localhost:5173.evil.example",
            "http://127.0.0.1.nip.io:80",
            "http://localhost:",
            "http://localhost:5173/",
            "null",
        ] {
            let answer = send(&cors, Method::GET, &[("origin", origin)]).await;
            assert!(
                !answer.headers().contains_key("access-control-allow-origin"),
                "{origin}"
            );
            let mut preflight = PREFLIGHT;
            preflight[0].1 = origin;
            let answer = send(&cors, Method::OPTIONS, &preflight).await;
            assert!(
                !answer.headers().contains_key("access-control-allow-origin"),
                "{origin}"
            );
        }
        // A port wildcard is for any host an operator names.
        let cors = Cors::from_list("https://chat.example.com:*");
        let answer = send(
            &cors,
            Method::GET,
            &[("origin", "https://chat.example.com:8443")],
        )
        .await;
        assert_eq!(
            answer.headers()["access-control-allow-origin"],
            "https://chat.example.com:8443"
        );
    }

    #[tokio::test]
    async fn responses_expose_the_next_cursor_to_allowed_origins() {
        let any = Cors::from_list("*");
        let answer = send(&any, Method::GET, &[("origin", "http://localhost:5173")]).await;
        let headers = answer.headers();
        assert_eq!(headers["access-control-allow-origin"], "*");
        assert_eq!(
            headers["access-control-expose-headers"],
            "x-next-cursor,x-ignored-parameters"
        );
        let answer = send(&any, Method::POST, &[]).await;
        assert_eq!(answer.status(), 200);
    }
}
