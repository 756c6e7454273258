//! The functions' TLS clients verify servers against the roots of one bundle file: the one `SSL_CERT_FILE` names, or
//! the system's when nothing names one (`chat_aws::https::read_bundle_only`, as a function starts). A server whose
//! certificate a root of that file issued (here a test authority's, `tests/tls/`) is trusted by the AWS SDK's
//! clients (the shared HTTPS client of `chat_aws::load_aws_config`) and by the process's reqwest client (the JWKS,
//! the OTLP exporter, the MCP servers: a server's tools are listed); when the system's bundle is the file, the same server is refused by both.
//! The JWKS fetch goes through that one reqwest client (its connection reused), and the roots are loaded once.
//!
//! The roots are loaded once per process, from the environment it starts with: each case runs in a process of its
//! own (this test binary again, running one ignored test).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use chat_core::{Caller, ToolSource};
use chat_edge::Auth;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

const TEST_CA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls/ca.pem");
const SERVER_CERT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls/server.pem");
const SERVER_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls/server.key");
const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "chat-backend";

/// Runs the ignored test `case` in a process of its own, `SSL_CERT_FILE` set to `cert_file` (or unset), with no
/// `SSL_CERT_DIR`; it must pass.
fn run_alone(case: &str, cert_file: Option<&str>) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            case,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    if let Some(file) = cert_file {
        command.env("SSL_CERT_FILE", file);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{case}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_server_a_root_of_the_bundle_vouches_for_is_trusted() {
    run_alone("trusted_through_the_bundle", Some(TEST_CA));
}

#[test]
fn a_server_the_systems_bundle_does_not_vouch_for_is_refused() {
    run_alone("refused_by_the_systems_bundle", None);
}

#[test]
#[ignore = "run in a process of its own by a_server_a_root_of_the_bundle_vouches_for_is_trusted"]
fn trusted_through_the_bundle() {
    runtime().block_on(async {
        let signer = Signer::new();
        let server = TlsServer::start(&signer.jwks()).await;

        dynamodb(&server).await.list_tables().send().await.unwrap();
        assert_eq!(server.handshakes(), 1);

        let hello = chat_app::http_client()
            .get(format!("{}/hello", server.url))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(hello, "hello");
        assert_eq!(server.handshakes(), 2);

        let auth = Auth::from_lookup_with(
            &|name: &str| {
                [
                    ("AUTH_MODE", "jwt".to_string()),
                    ("JWT_ISSUER", ISSUER.to_string()),
                    ("JWT_AUDIENCE", AUDIENCE.to_string()),
                    ("JWKS_URL", format!("{}/jwks", server.url)),
                ]
                .into_iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
            },
            chat_app::http_client,
        )
        .unwrap();
        assert_eq!(
            auth.caller(&signer.request("alice")).await.unwrap(),
            format!("jwt:{ISSUER}:alice")
        );
        assert_eq!(
            server.handshakes(),
            2,
            "the JWKS was fetched over the reqwest client's open connection"
        );

        // As the function's adapters build them (chat_app's backends): through the process's one client.
        let source = chat_mcp::McpServers::from_json(
            &format!(r#"[{{"name":"tls","url":"{}/mcp"}}]"#, server.url),
            std::time::Duration::from_secs(10),
            chat_app::http_client(),
        )
        .unwrap();
        let listing = source.list(&Caller::owner("u")).await;
        assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
        let tools: Vec<_> = listing
            .tools
            .iter()
            .map(|t| t.spec().name.clone())
            .collect();
        assert!(tools.iter().any(|name| name.ends_with("echo")), "{tools:?}");
        assert_eq!(server.handshake_failures(), 0);
        assert_eq!(chat_aws::https::system_roots_loads(), 1);
    });
}

#[test]
#[ignore = "run in a process of its own by a_server_the_systems_bundle_does_not_vouch_for_is_refused"]
fn refused_by_the_systems_bundle() {
    // SAFETY: this test runs alone in its process, and no thread of its own has started yet.
    let bundle = unsafe { chat_aws::https::read_bundle_only() }
        .expect("this system has a bundle of roots where openssl-probe looks");
    assert!(bundle.is_file(), "{}", bundle.display());
    assert_eq!(
        std::env::var_os("SSL_CERT_FILE"),
        Some(bundle.into_os_string())
    );
    runtime().block_on(async {
        let server = TlsServer::start(&Signer::new().jwks()).await;

        let refused = dynamodb(&server).await.list_tables().send().await;
        let error = format!("{refused:?}");
        assert!(error.contains("UnknownIssuer"), "{error}");
        eventually(|| server.handshake_failures() >= 1).await;

        let failures = server.handshake_failures();
        let refused = chat_app::http_client()
            .get(format!("{}/hello", server.url))
            .send()
            .await;
        let error = format!("{refused:?}");
        assert!(error.contains("UnknownIssuer"), "{error}");
        eventually(|| server.handshake_failures() > failures).await;
        assert_eq!(server.handshakes(), 0);
    });
}

/// Waits (at most 5 s) for the server to see what the client saw: a refused handshake ends on the client's side
/// first.
async fn eventually(condition: impl Fn() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the server never saw it");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A DynamoDB client of the configuration a cold start loads, pointed at `server`, giving up after one attempt.
async fn dynamodb(server: &TlsServer) -> aws_sdk_dynamodb::Client {
    let sdk = chat_aws::aws_config_loader()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "local", "local", None, None, "test",
        ))
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .endpoint_url(&server.url)
        .load()
        .await;
    aws_sdk_dynamodb::Client::new(&sdk)
}

/// An ES256 key of this test's issuer, and its tokens.
struct Signer {
    key: EncodingKey,
    jwk: Jwk,
}

impl Signer {
    fn new() -> Signer {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let key = EncodingKey::from_ec_der(pkcs8.as_ref());
        let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
        Signer { key, jwk }
    }

    fn jwks(&self) -> String {
        serde_json::to_string(&JwkSet {
            keys: vec![self.jwk.clone()],
        })
        .unwrap()
    }

    /// A request bearing a token of `sub`'s.
    fn request(&self, sub: &str) -> lambda_http::http::Request<()> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let claims = serde_json::json!({
            "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 3600,
        });
        let token =
            jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.key).unwrap();
        lambda_http::http::Request::builder()
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .unwrap()
    }
}

/// An HTTPS server on `localhost` with the test authority's certificate (HTTP/1.1, connections kept open),
/// answering DynamoDB's `ListTables`, `GET /hello`, `GET /jwks` and MCP at `/mcp` (the local MCP server); it counts the TLS handshakes that succeeded and
/// those that failed.
struct TlsServer {
    url: String,
    handshakes: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl TlsServer {
    async fn start(jwks: &str) -> TlsServer {
        let certs = CertificateDer::pem_file_iter(SERVER_CERT)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(SERVER_KEY).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://localhost:{}", tcp.local_addr().unwrap().port());
        let listener = TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(Arc::new(config)),
            handshakes: Arc::new(AtomicUsize::new(0)),
            failures: Arc::new(AtomicUsize::new(0)),
        };
        let (handshakes, failures) = (listener.handshakes.clone(), listener.failures.clone());
        let jwks = jwks.to_string();
        let app = Router::new()
            .route(
                "/",
                post(|| async {
                    (
                        [(header::CONTENT_TYPE, "application/x-amz-json-1.0")],
                        r#"{"TableNames":[]}"#,
                    )
                        .into_response()
                }),
            )
            .route("/hello", get(|| async { "hello" }))
            .merge(local_mcp::router(local_mcp::Options::default()))
            .route(
                "/jwks",
                get(move || async move {
                    ([(header::CONTENT_TYPE, "application/json")], jwks).into_response()
                }),
            );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TlsServer {
            url,
            handshakes,
            failures,
            _task: task,
        }
    }

    fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }

    fn handshake_failures(&self) -> usize {
        self.failures.load(Ordering::SeqCst)
    }
}

struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(tcp).await {
                Ok(tls) => {
                    self.handshakes.fetch_add(1, Ordering::SeqCst);
                    return (tls, addr);
                }
                Err(_) => {
                    self.failures.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
