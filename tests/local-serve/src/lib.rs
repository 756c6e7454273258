//! What the local AWS servers of the tests share, so that each serves and is reached the same way: [`serve`] (every
//! frame leaves as it is written) and [`sdk_config`] (test credentials, quick retries).

use std::time::Duration;

use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Serves `app` on `listener` until the task is aborted, with `TCP_NODELAY` on every connection: with Nagle's
/// algorithm on, a frame written while the previous one is unacknowledged waits for the client's delayed ACK (about
/// 40 ms on Linux).
pub fn serve(listener: TcpListener, app: Router) -> JoinHandle<()> {
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

/// An SDK configuration whose clients talk to the server at `endpoint`: test credentials named after `provider`,
/// region `us-east-1`, and the SDK's standard retries with short back-offs so throttling tests stay quick.
pub async fn sdk_config(endpoint: String, provider: &'static str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, provider,
        ))
        .endpoint_url(endpoint)
        .retry_config(
            aws_config::retry::RetryConfig::standard()
                .with_initial_backoff(Duration::from_millis(5)),
        )
        .load()
        .await
}
