//! The SDK clients built from one configuration of `chat_aws::aws_config_loader` (what `load_aws_config` loads at a
//! cold start) share one HTTP client: one connection pool, whatever each client's timeouts, over plain http as the
//! local servers and moto speak it. Seen from the server: the connections it accepts. The SDK's default client
//! (each SDK client its own) is measured the same way, so that the count is seen to differ.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::SdkError;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::serve::ListenerExt;
use chat_aws::BedrockKnowledgeBase;
use chat_core::{Retriever, SearchMode, SearchRequest};

/// A server answering DynamoDB's `ListTables` and a knowledge base's `Retrieve` (with nothing), keeping connections
/// open between requests as AWS does, and counting the connections it accepts.
struct Server {
    url: String,
    connections: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Server {
        Self::start_with(router()).await
    }

    async fn start_with(app: Router) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let listener = listener.tap_io(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server {
            url,
            connections,
            _task: task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn router() -> Router {
    Router::new()
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
        .route(
            "/knowledgebases/{id}/retrieve",
            post(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    r#"{"retrievalResults":[]}"#,
                )
                    .into_response()
            }),
        )
}

fn credentials() -> aws_sdk_dynamodb::config::Credentials {
    aws_sdk_dynamodb::config::Credentials::new("local", "local", None, None, "test")
}

/// The configuration a cold start loads, pointed at `url`.
async fn shared_config(url: &str) -> aws_config::SdkConfig {
    chat_aws::aws_config_loader()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(credentials())
        .endpoint_url(url)
        .load()
        .await
}

/// The same, with the SDK's default HTTP client (what every client had before).
async fn default_config(url: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(credentials())
        .endpoint_url(url)
        .load()
        .await
}

/// A DynamoDB client with the store's kind of timeouts (a connect timeout of its own).
fn dynamodb(sdk: &aws_config::SdkConfig, attempt: Duration) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(sdk)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(1))
                    .operation_attempt_timeout(attempt)
                    .operation_timeout(attempt * 2)
                    .build(),
            )
            .build(),
    )
}

/// A table call and a knowledge base search, one after the other, each through its own client.
async fn calls(sdk: &aws_config::SdkConfig) {
    dynamodb(sdk, Duration::from_secs(2))
        .list_tables()
        .send()
        .await
        .unwrap();
    let kb = BedrockKnowledgeBase::new(sdk, "KB00000001".into(), Duration::from_secs(5));
    let passages = kb
        .retrieve(&SearchRequest {
            query: "anything".into(),
            top: 3,
            mode: SearchMode::Hybrid,
            filter: None,
        })
        .await
        .unwrap();
    assert!(passages.is_empty());
}

#[tokio::test]
async fn the_clients_of_one_configuration_share_one_connection_pool() {
    let server = Server::start().await;
    calls(&shared_config(&server.url).await).await;
    assert_eq!(
        server.connections(),
        1,
        "the search reused the table call's connection"
    );

    let before = Server::start().await;
    calls(&default_config(&before.url).await).await;
    assert_eq!(
        before.connections(),
        2,
        "with the SDK's default client, each client connects on its own"
    );
}

#[tokio::test]
async fn each_client_keeps_its_own_timeouts() {
    // Accepts, and never answers.
    let silent = Server::start_with(Router::new().route(
        "/",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            ""
        }),
    ))
    .await;
    let sdk = shared_config(&silent.url).await;
    let quick = dynamodb(&sdk, Duration::from_millis(200))
        .list_tables()
        .send()
        .await;
    assert!(matches!(quick, Err(SdkError::TimeoutError(_))), "{quick:?}");
}
