//! The backend's own web page at `GET /` (web/index.html), so that a deployment (or `make run`) has something to
//! open in a browser: the file is compiled in, and its configuration (sign-in mode, the other functions' URLs, the
//! OpenID Connect client) is injected once per cold start, with a Content-Security-Policy that allows only the page's
//! own script and style and the addresses it calls: itself, the functions and, when it signs in, the issuer (and the
//! other origins of the issuer's endpoints, `PAGE_OIDC_ORIGINS`).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use base64::Engine;
use bytes::Bytes;
use chat_edge::{ApiError, Auth, ConfigError};
use serde_json::json;

/// The page as written; the server fills in its configuration.
const TEMPLATE: &str = include_str!("../../../../web/index.html");
/// The element whose content is replaced by the configuration (JSON, never run as script).
const CONFIG_ELEMENT: &str = r#"<script id="page-config" type="application/json">{}</script>"#;

/// What the page is told about its deployment (`PAGE_*`, and `JWT_ISSUER` as the default issuer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageSettings {
    /// `PAGE_CHAT_URL`: the chat function's base URL; empty is the page's own origin.
    pub chat_url: String,
    /// `PAGE_STREAM_URL`: the chat-stream function's base URL; empty is the page's own origin.
    pub stream_url: String,
    /// `PAGE_OIDC_CLIENT_ID`: the public client the page signs in as (JWT mode); `None`: no sign-in offered.
    pub oidc_client_id: Option<String>,
    /// `PAGE_OIDC_ISSUER`, else `JWT_ISSUER`.
    pub oidc_issuer: Option<String>,
    /// `PAGE_OIDC_SCOPE` (default `openid email`).
    pub oidc_scope: String,
    /// `PAGE_OIDC_TOKEN`: `id` (default) or `access`, the token sent as `Bearer`.
    pub oidc_token: String,
    /// `PAGE_OIDC_ORIGINS`: the origins of the issuer's endpoints that are not the issuer's own (Cognito's hosted
    /// sign-in domain), which the page calls (token, revocation) and frames (silent renewal).
    pub oidc_origins: Vec<String>,
    /// Whether the documents routes are on (not read from the environment: the history app says so), so that the
    /// page offers its Documents panel without asking first.
    pub documents: bool,
}

impl PageSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup` (the environment in production, a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let url = |name: &'static str| -> Result<String, ConfigError> {
            let value = get(name).unwrap_or_default();
            if !(value.is_empty() || value.starts_with("https://") || value.starts_with("http://"))
            {
                return Err(ConfigError {
                    name,
                    reason: format!("expected an http(s) URL, got {value:?}"),
                });
            }
            Ok(value.trim_end_matches('/').to_string())
        };
        let oidc_token = get("PAGE_OIDC_TOKEN").unwrap_or_else(|| "id".into());
        if oidc_token != "id" && oidc_token != "access" {
            return Err(ConfigError {
                name: "PAGE_OIDC_TOKEN",
                reason: format!("expected id or access, got {oidc_token:?}"),
            });
        }
        // Origins of the issuer's endpoints, separated by commas or spaces; a URL counts as its origin.
        let mut oidc_origins = Vec::new();
        for value in get("PAGE_OIDC_ORIGINS")
            .unwrap_or_default()
            .split([',', ' '])
        {
            if value.is_empty() {
                continue;
            }
            let found = (value.starts_with("https://") || value.starts_with("http://"))
                .then(|| origin(value))
                .flatten()
                .ok_or_else(|| ConfigError {
                    name: "PAGE_OIDC_ORIGINS",
                    reason: format!("expected http(s) URLs separated by commas, got {value:?}"),
                })?;
            push_new(&mut oidc_origins, [found]);
        }
        Ok(Self {
            chat_url: url("PAGE_CHAT_URL")?,
            stream_url: url("PAGE_STREAM_URL")?,
            oidc_client_id: get("PAGE_OIDC_CLIENT_ID"),
            oidc_issuer: get("PAGE_OIDC_ISSUER")
                .or_else(|| get("JWT_ISSUER"))
                .map(|i| i.trim_end_matches('/').to_string()),
            oidc_scope: get("PAGE_OIDC_SCOPE").unwrap_or_else(|| "openid email".into()),
            oidc_token,
            oidc_origins,
            documents: false,
        })
    }
}

/// The page as served: built once, shared by every request.
#[derive(Clone)]
pub struct Page {
    /// Shared by every response without a copy.
    html: Bytes,
    csp: HeaderValue,
}

impl Page {
    /// The page for a function that identifies callers by `auth`, configured by `settings`.
    pub fn new(auth: &Auth, settings: &PageSettings) -> Self {
        let mode = auth.mode_name();
        // The sign-in service, when the page signs in: the issuer's origin (its discovery document) first, then the
        // other origins of its endpoints.
        let sign_in = match (mode, &settings.oidc_client_id, &settings.oidc_issuer) {
            ("jwt", Some(client), Some(issuer)) => {
                let mut origins: Vec<String> = origin(issuer).into_iter().collect();
                push_new(&mut origins, settings.oidc_origins.iter().cloned());
                Some((client, issuer, origins))
            }
            _ => None,
        };
        let oidc = match &sign_in {
            Some((client, issuer, origins)) => json!({
                "issuer": issuer,
                "clientId": client,
                "scope": settings.oidc_scope,
                "token": settings.oidc_token,
                "origins": origins,
            }),
            None => serde_json::Value::Null,
        };
        let mut config = json!({
            "auth": mode,
            "chatUrl": settings.chat_url,
            "streamUrl": settings.stream_url,
            "historyUrl": "",
            "oidc": oidc,
        });
        if settings.documents {
            config["documents"] = json!(true);
        }
        let html = TEMPLATE.replacen(
            CONFIG_ELEMENT,
            &format!(
                r#"<script id="page-config" type="application/json">{}</script>"#,
                json_for_html(&config)
            ),
            1,
        );
        let csp = policy(
            &html,
            settings,
            sign_in
                .as_ref()
                .map(|(_, issuer, origins)| (origin(issuer), origins.as_slice())),
        );
        Self {
            html: Bytes::from(html),
            csp: HeaderValue::from_str(&csp).expect("the policy is built from header-safe text"),
        }
    }

    /// `GET /` and `HEAD /` (any other method is the JSON 405).
    pub fn route<S: Clone + Send + Sync + 'static>(&self) -> MethodRouter<S> {
        let page = self.clone();
        let head = self.clone();
        get(move || async move { page.response(true) })
            .head(move || async move { head.response(false) })
            .fallback(|| async {
                ApiError::MethodNotAllowed { allow: "GET, HEAD" }.into_response()
            })
    }

    /// `GET /favicon.svg`: the page's icon (a speech bubble), which the page declares, so that a browser asks for it
    /// rather than for a `/favicon.ico` that is not there (a 404 in the console of every load). Public, as the page is.
    pub fn icon_route<S: Clone + Send + Sync + 'static>() -> MethodRouter<S> {
        get(|| async { icon(true) })
            .head(|| async { icon(false) })
            .fallback(|| async {
                ApiError::MethodNotAllowed { allow: "GET, HEAD" }.into_response()
            })
    }

    fn response(&self, with_body: bool) -> Response {
        let body = if with_body {
            Body::from(self.html.clone())
        } else {
            Body::empty()
        };
        let mut response = Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            .header(header::CACHE_CONTROL, "no-cache")
            .header("x-content-type-options", "nosniff")
            .header("referrer-policy", "no-referrer")
            .body(body)
            .expect("a response built from valid parts");
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, self.csp.clone());
        if !with_body {
            response.headers_mut().insert(
                header::CONTENT_LENGTH,
                HeaderValue::from(self.html.len() as u64),
            );
        }
        response
    }
}

/// The page's icon: a speech bubble in the page's accent colour, drawn in the document itself (no script, no fetch).
const ICON: &str = concat!(
    r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">"##,
    r##"<path fill="#1f5fbf" d="M6 4h20a4 4 0 0 1 4 4v12a4 4 0 0 1-4 4H14l-7 6v-6H6a4 4 0 0 1-4-4V8a4 4 0 0 1 4-4z"/>"##,
    r##"<path fill="#fff" d="M9 11h14v2H9zm0 5h10v2H9z"/></svg>"##,
);

/// The icon as an answer (`with_body` false for `HEAD`): SVG that may be cached for a day and sniffed as nothing else,
/// with a policy that lets it run nothing.
fn icon(with_body: bool) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "image/svg+xml")
        .header(header::CACHE_CONTROL, "public, max-age=86400")
        .header("x-content-type-options", "nosniff")
        .header(header::CONTENT_SECURITY_POLICY, "default-src 'none'")
        .header(header::CONTENT_LENGTH, HeaderValue::from(ICON.len() as u64))
        .body(if with_body {
            Body::from(ICON)
        } else {
            Body::empty()
        })
        .expect("a response built from valid parts")
}

/// The page's Content-Security-Policy. What it may reach: itself and the functions it calls and, when it signs in
/// (`sign_in`: the issuer's origin, and every origin of the sign-in service), the sign-in service: connections to
/// its endpoints (discovery, token, revocation), a hidden frame for silent renewal (`prompt=none`, whose answer
/// comes back to the page itself, so the page may frame itself) and images from the issuer. No other host, no
/// `https:` wildcard, no `data:`.
fn policy(
    html: &str,
    settings: &PageSettings,
    sign_in: Option<(Option<String>, &[String])>,
) -> String {
    let mut own = vec!["'self'".to_string()];
    push_new(
        &mut own,
        [&settings.chat_url, &settings.stream_url]
            .into_iter()
            .filter_map(|u| origin(u)),
    );
    let mut connect = own.clone();
    let mut img = own;
    let mut frames = String::new();
    let mut ancestors = "'none'";
    if let Some((issuer, service)) = sign_in {
        push_new(&mut img, issuer);
        push_new(&mut connect, service.iter().cloned());
        let mut frame = vec!["'self'".to_string()];
        push_new(&mut frame, service.iter().cloned());
        frames = format!("frame-src {}; ", frame.join(" "));
        ancestors = "'self'";
    }
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src {}; img-src {}; {frames}\
         base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}",
        hash_of(html, "<script>"),
        hash_of(html, "<style>"),
        connect.join(" "),
        img.join(" "),
    )
}

/// Adds to `list` each of `items` it does not hold yet, in order.
fn push_new(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for item in items {
        if !list.contains(&item) {
            list.push(item);
        }
    }
}

/// JSON that cannot end the element it is in, nor start a comment or markup: `<`, `>` and `&` as `\u` escapes.
fn json_for_html(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The origin (`scheme://host[:port]`) of an http(s) URL, for the policy; `None` when empty.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?;
    let clean = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:[]_".contains(c))
    };
    (clean(host) && !host.is_empty()).then(|| format!("{scheme}://{host}"))
}

/// The CSP source for the one element `open` starts (`<script>` or `<style>`, written without attributes): the
/// SHA-256 of its content. A page without it allows none.
fn hash_of(html: &str, open: &str) -> String {
    let close = format!("</{}", &open[1..]);
    let Some(start) = html.find(open).map(|at| at + open.len()) else {
        return "'none'".into();
    };
    let end = start + html[start..].find(&close).expect("the element is closed");
    let digest =
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &html.as_bytes()[start..end]);
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}
