//! `GET /` through the history function's whole edge: the page, public (no identity needed), as HTML with its
//! security headers, its configuration injected from the environment (sign-in mode, the functions' URLs, the OpenID
//! Connect client) as JSON that no configured value can break out of, and `HEAD` answered too.

use chat_testing::InMemoryStore;
use chat_testing::harness::{self, Reply};
use history::{App, PageSettings};
use serde_json::{Value, json};

fn app(auth: chat_edge::Auth, page: &[(&str, &str)]) -> App<InMemoryStore> {
    let settings =
        PageSettings::from_lookup(chat_edge::settings_in(page)).expect("valid page settings");
    App::new(InMemoryStore::new(), auth, &harness::config(&[])).with_page(&settings)
}

async fn get(app: &App<InMemoryStore>, method: &str) -> Reply {
    let request = lambda_http::http::Request::builder()
        .method(method)
        .uri("/")
        .body(lambda_http::Body::Empty)
        .unwrap();
    Reply::buffered(app.handle(request).await)
}

/// The configuration the page carries, as the page's script reads it.
fn injected(html: &str) -> Value {
    let open = r#"<script id="page-config" type="application/json">"#;
    let start = html.find(open).expect("the configuration element") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).expect("the configuration is JSON")
}

/// The policy's directives by name, each with its sources as written.
fn directives(reply: &Reply) -> std::collections::BTreeMap<String, String> {
    let csp = reply.headers["content-security-policy"].to_str().unwrap();
    csp.split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            let (name, sources) = d.split_once(' ').unwrap_or((d, ""));
            (name.to_string(), sources.to_string())
        })
        .collect()
}

/// The app of a function in JWT mode with `issuer`, its page configured by `page`.
fn jwt_app(issuer: &str, page: &[(&str, &str)]) -> App<InMemoryStore> {
    let signer = harness::JwtSigner::new("page-kid");
    let jwks = signer.jwks_file();
    let env = [
        ("AUTH_MODE", "jwt"),
        ("JWT_ISSUER", issuer),
        ("JWT_AUDIENCE", "client-1"),
        ("JWKS_FILE", jwks.to_str().unwrap()),
    ];
    let auth = chat_edge::Auth::from_lookup(&chat_edge::settings_in(&env)).unwrap();
    app(auth, page)
}

#[tokio::test]
async fn the_page_is_served_with_its_configuration_and_policy() {
    let app = app(
        harness::auth(),
        &[
            ("PAGE_CHAT_URL", "https://chat.example.com/"),
            ("PAGE_STREAM_URL", "https://stream.example.com"),
        ],
    );
    let reply = get(&app, "GET").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "text/html; charset=utf-8");
    assert_eq!(reply.headers["cache-control"], "no-cache");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");
    let csp = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    assert!(
        csp.contains("connect-src 'self' https://chat.example.com https://stream.example.com"),
        "{csp}"
    );
    // Without sign-in: only the page's own origin and the functions', nothing framed, never framed.
    let policy = directives(&reply);
    let own = "'self' https://chat.example.com https://stream.example.com";
    assert_eq!(policy["connect-src"], own);
    assert_eq!(policy["img-src"], own);
    assert!(!policy.contains_key("frame-src"), "{csp}");
    assert_eq!(policy["frame-ancestors"], "'none'");
    let html = reply.body.clone();
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(
        injected(&html),
        json!({"auth": "none", "chatUrl": "https://chat.example.com", "streamUrl": "https://stream.example.com",
               "historyUrl": "", "oidc": null})
    );

    // HEAD: the headers, no body; other methods: the JSON 405.
    let head = get(&app, "HEAD").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        head.headers["content-length"],
        html.len().to_string().as_str()
    );
    let post = get(&app, "POST").await;
    assert_eq!(post.status, 405);
    assert_eq!(post.headers["allow"], "GET, HEAD");
}

#[tokio::test]
async fn the_script_hash_in_the_policy_is_the_script_s() {
    use base64::Engine;
    let reply = get(&app(harness::auth(), &[]), "GET").await;
    let html = reply.body.clone();
    let start = html.find("<script>").unwrap() + "<script>".len();
    let end = start + html[start..].find("</script>").unwrap();
    let digest =
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &html.as_bytes()[start..end]);
    let expected = format!(
        "script-src 'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    );
    let csp = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains(&expected), "{csp} lacks {expected}");
}

#[tokio::test]
async fn a_configured_value_cannot_end_the_script_element() {
    let hostile = "https://x.example.com/</script><script>alert(1)</script><!--";
    let app = app(harness::auth(), &[("PAGE_CHAT_URL", hostile)]);
    let html = get(&app, "GET").await.body;
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "only the page's own two elements end"
    );
    assert!(!html.contains("<script>alert"));
    // No `<` at all inside the element: neither an end tag nor `<!--` (which changes how the element's end is read).
    let open = r#"<script id="page-config" type="application/json">"#;
    let start = html.find(open).unwrap() + open.len();
    let raw = &html[start..start + html[start..].find("</script>").unwrap()];
    assert!(!raw.contains('<'), "{raw}");
    assert_eq!(injected(&html)["chatUrl"], hostile);
}

#[tokio::test]
async fn jwt_mode_names_the_issuer_and_client() {
    let app = jwt_app(
        "https://issuer.example.com/pool",
        &[
            ("JWT_ISSUER", "https://issuer.example.com/pool"),
            ("PAGE_OIDC_CLIENT_ID", "client-1"),
        ],
    );
    let reply = get(&app, "GET").await;
    // The page is public: no token needed for it.
    assert_eq!(reply.status, 200);
    let html = reply.body.clone();
    assert_eq!(
        injected(&html)["oidc"],
        json!({"issuer": "https://issuer.example.com/pool", "clientId": "client-1", "scope": "openid email",
               "token": "id", "origins": ["https://issuer.example.com"]})
    );
    let csp = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("https://issuer.example.com"), "{csp}");
    // The page's own origin and the issuer's, exactly: no `https:` wildcard, no `data:`. It frames the issuer (silent
    // renewal) and itself (the issuer's answer comes back to the page), and only the page may frame it.
    let policy = directives(&reply);
    assert_eq!(policy["connect-src"], "'self' https://issuer.example.com");
    assert_eq!(policy["img-src"], "'self' https://issuer.example.com");
    assert_eq!(policy["frame-src"], "'self' https://issuer.example.com");
    assert_eq!(policy["frame-ancestors"], "'self'");
    assert_eq!(policy["default-src"], "'none'");
    assert_eq!(policy["form-action"], "'none'");
}

#[tokio::test]
async fn with_cognito_the_policy_names_the_functions_the_issuer_and_the_hosted_domain() {
    // A deployment without the distribution: the functions on their own URLs, the issuer Cognito's, its token,
    // revocation and sign-in endpoints on the hosted domain (PAGE_OIDC_ORIGINS, given as a URL with a path).
    let issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC";
    let app = jwt_app(
        issuer,
        &[
            ("JWT_ISSUER", issuer),
            ("PAGE_OIDC_CLIENT_ID", "client-1"),
            ("PAGE_CHAT_URL", "https://chat.lambda-url.eu-west-1.on.aws"),
            (
                "PAGE_STREAM_URL",
                "https://stream.lambda-url.eu-west-1.on.aws/",
            ),
            (
                "PAGE_OIDC_ORIGINS",
                "https://chat-1.auth.eu-west-1.amazoncognito.com/oauth2, https://chat-1.auth.eu-west-1.amazoncognito.com",
            ),
        ],
    );
    let reply = get(&app, "GET").await;
    let policy = directives(&reply);
    let functions =
        "https://chat.lambda-url.eu-west-1.on.aws https://stream.lambda-url.eu-west-1.on.aws";
    let idp = "https://cognito-idp.eu-west-1.amazonaws.com";
    let hosted = "https://chat-1.auth.eu-west-1.amazoncognito.com";
    assert_eq!(
        policy["connect-src"],
        format!("'self' {functions} {idp} {hosted}")
    );
    assert_eq!(policy["img-src"], format!("'self' {functions} {idp}"));
    assert_eq!(policy["frame-src"], format!("'self' {idp} {hosted}"));
    assert_eq!(
        injected(&reply.body)["oidc"]["origins"],
        json!([idp, hosted])
    );
}

#[tokio::test]
async fn without_a_client_jwt_mode_offers_no_sign_in_and_allows_no_issuer() {
    let app = jwt_app(
        "https://issuer.example.com",
        &[("JWT_ISSUER", "https://issuer.example.com")],
    );
    let reply = get(&app, "GET").await;
    assert_eq!(injected(&reply.body)["oidc"], Value::Null);
    let policy = directives(&reply);
    assert_eq!(policy["connect-src"], "'self'");
    assert_eq!(policy["img-src"], "'self'");
    assert!(!policy.contains_key("frame-src"));
    assert_eq!(policy["frame-ancestors"], "'none'");
}

#[test]
fn page_settings_are_checked() {
    let with = |pairs: &[(&str, &str)]| PageSettings::from_lookup(chat_edge::settings_in(pairs));
    assert_eq!(
        with(&[("PAGE_OIDC_TOKEN", "refresh")]).unwrap_err().name,
        "PAGE_OIDC_TOKEN"
    );
    assert_eq!(
        with(&[("PAGE_STREAM_URL", "javascript:alert(1)")])
            .unwrap_err()
            .name,
        "PAGE_STREAM_URL"
    );
    let s = with(&[
        ("JWT_ISSUER", "https://a.example.com"),
        ("PAGE_OIDC_ISSUER", "https://b.example.com/"),
        ("PAGE_OIDC_TOKEN", "access"),
    ])
    .unwrap();
    assert_eq!(s.oidc_issuer.as_deref(), Some("https://b.example.com"));
    assert_eq!(s.oidc_token, "access");
    assert_eq!(s.oidc_scope, "openid email");
    assert!(s.oidc_origins.is_empty());
    for bad in [
        "auth.example.com",
        "javascript:alert(1)",
        "https://a.example.com,ftp://b.example.com",
    ] {
        assert_eq!(
            with(&[("PAGE_OIDC_ORIGINS", bad)]).unwrap_err().name,
            "PAGE_OIDC_ORIGINS",
            "{bad}"
        );
    }
    let s = with(&[(
        "PAGE_OIDC_ORIGINS",
        " https://a.example.com/oauth2/token,https://b.example.com:8443 https://a.example.com ",
    )])
    .unwrap();
    assert_eq!(
        s.oidc_origins,
        ["https://a.example.com", "https://b.example.com:8443"]
    );
}

#[tokio::test]
async fn the_page_declares_its_icon_which_is_served_beside_it() {
    let app = app(harness::auth(), &[]);
    let page = get(&app, "GET").await;
    assert!(
        page.body
            .contains(r#"<link rel="icon" type="image/svg+xml" href="favicon.svg">"#),
        "the page names its icon, so no browser asks for /favicon.ico"
    );
    for method in ["GET", "HEAD"] {
        let request = lambda_http::http::Request::builder()
            .method(method)
            .uri("/favicon.svg")
            .body(lambda_http::Body::Empty)
            .unwrap();
        let reply = Reply::buffered(app.handle(request).await);
        assert_eq!(reply.status, 200, "{method}");
        assert_eq!(reply.content_type(), "image/svg+xml");
        assert_eq!(reply.headers["x-content-type-options"], "nosniff");
        assert_eq!(
            reply.headers["content-security-policy"],
            "default-src 'none'"
        );
        if method == "GET" {
            assert!(reply.body.starts_with("<svg "), "{}", reply.body);
        } else {
            assert!(reply.body.is_empty());
        }
    }
}

#[tokio::test]
async fn the_revoke_dialog_says_a_key_stops_within_the_key_caches_life() {
    // Other instances keep a key they checked for API_KEY_CACHE_SECONDS: the page says so, and that its default is
    // a minute, rather than promising the key stops at once.
    let page = get(&app(harness::auth(), &[]), "GET").await;
    let start = page
        .body
        .find("Revoke the key “")
        .expect("the revoke dialog's text");
    let said = &page.body[start..start + page.body[start..].find('\n').unwrap()];
    assert!(
        said.contains("within the time the server keeps a key it has checked"),
        "{said}"
    );
    assert!(
        said.contains("a minute, unless the operator set API_KEY_CACHE_SECONDS otherwise"),
        "{said}"
    );
    assert_eq!(
        chat_edge::DEFAULT_CACHE_SECONDS,
        60,
        "the page says a minute"
    );
}
