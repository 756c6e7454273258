//! [`CognitoAccounts`]: the template's Cognito user pool as the key checks' [`AccountDirectory`], so that a person
//! disabled or deleted in the pool loses their API keys within the key cache's life.
//!
//! A key's owner is one of the pool's people when their owner id is `jwt:{the pool's issuer}:{sub}` (the issuer is
//! `https://cognito-idp.{region}.amazonaws.com/{pool id}`, the Region the pool id's prefix). Their account is read
//! with one `AdminGetUser`, whose `Username` takes the `sub` (and in the template's pool, whose users sign in by
//! email, the user name is the `sub`): `Enabled` false, or `UserNotFoundException`, and the key is refused. Any
//! other failure (no answer in time, throttling, a permission missing) is [`StoreError::Unavailable`]: the key's
//! check answers 503, as for a table out of reach, and is tried again by the next request.

use std::time::Duration;

use aws_runtime::auth::SigV4OperationSigningConfig;
use aws_runtime::auth::sigv4::{SCHEME_ID as SIGV4, SigV4AuthScheme};
use aws_runtime::retries::classifiers::AwsErrorCodeClassifier;
use aws_smithy_runtime::client::identity::IdentityCache;
use aws_smithy_runtime::client::orchestrator::operation::Operation;
use aws_smithy_runtime::client::retries::classifiers::{
    HttpStatusCodeClassifier, TransientErrorClassifier,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::auth::static_resolver::StaticAuthSchemeOptionResolver;
use aws_smithy_runtime_api::client::auth::{AuthSchemeOptionResolverParams, SharedAuthScheme};
use aws_smithy_runtime_api::client::identity::SharedIdentityResolver;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, OrchestratorError};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
use aws_smithy_runtime_api::client::runtime_plugin::StaticRuntimePlugin;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::Layer;
use aws_smithy_types::error::ErrorMetadata;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use aws_types::SigningName;
use aws_types::region::SigningRegion;
use chat_core::{AccountDirectory, ApiKeyFuture, StoreError};
use tracing::Instrument;

/// The service-specific variable naming the user pool's endpoint (as the SDK's own client reads it).
const ENDPOINT_VAR: &str = "AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER";

/// The people of one Cognito user pool.
///
/// `AdminGetUser` is sent as the SDK's Cognito client sends it (Cognito's JSON protocol, `awsJson1.1`, SigV4-signed
/// with the configuration's credentials, the SDK's retries of throttling, 5xx and connection failures), through the
/// SDK's own request pipeline and the configuration's HTTPS client, without the generated client: that client
/// (all of Cognito's operations, their types and serializers) cost each function about half a megabyte for one call.
#[derive(Clone)]
pub struct CognitoAccounts {
    operation: Operation<String, bool, ErrorMetadata>,
    /// `jwt:{issuer}:`: how the owner ids of the pool's people start.
    owners: String,
}

impl CognitoAccounts {
    /// The pool `pool_id` (`{region}_{id}`) from the shared AWS configuration (its credentials, Region, HTTPS client
    /// and retry settings; its endpoint, or `AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER`'s, points it at a local
    /// server), each call bounded by `timeout`.
    pub fn from_config(config: &aws_config::SdkConfig, pool_id: &str, timeout: Duration) -> Self {
        let pool_region = pool_id.split('_').next().unwrap_or_default().to_string();
        let region = config
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| pool_region.clone());
        let endpoint = std::env::var(ENDPOINT_VAR)
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| config.endpoint_url().map(str::to_string))
            .unwrap_or_else(|| format!("https://cognito-idp.{region}.amazonaws.com"));
        Self {
            operation: admin_get_user(config, &region, &endpoint, pool_id, timeout),
            owners: format!("jwt:https://cognito-idp.{pool_region}.amazonaws.com/{pool_id}:"),
        }
    }

    async fn read(&self, owner: &str) -> Result<Option<bool>, StoreError> {
        let Some(sub) = owner.strip_prefix(&self.owners).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let answer = self
            .operation
            .invoke(sub.to_string())
            .instrument(tracing::info_span!("api_keys.account"))
            .await;
        match answer {
            Ok(enabled) => Ok(Some(enabled)),
            Err(e)
                if e.as_service_error().and_then(|e| e.code()) == Some("UserNotFoundException") =>
            {
                Ok(Some(false))
            }
            Err(e) => Err(StoreError::Unavailable(format!(
                "the user pool: {}",
                DisplayErrorContext(&e)
            ))),
        }
    }
}

/// `AdminGetUser` of the pool `pool_id` at `endpoint`, taking a user name and answering whether that user is
/// enabled; Cognito's error (its code, as `UserNotFoundException`) is the service error.
fn admin_get_user(
    config: &aws_config::SdkConfig,
    region: &str,
    endpoint: &str,
    pool_id: &str,
    timeout: Duration,
) -> Operation<String, bool, ErrorMetadata> {
    let mut signing = Layer::new("cognito-idp");
    signing.store_put(AuthSchemeOptionResolverParams::new(()));
    signing.store_put(SigV4OperationSigningConfig {
        region: Some(SigningRegion::from(aws_types::region::Region::new(
            region.to_string(),
        ))),
        name: Some(SigningName::from_static("cognito-idp")),
        ..SigV4OperationSigningConfig::default()
    });
    let mut components = RuntimeComponentsBuilder::new("cognito-idp")
        .with_auth_scheme_option_resolver(Some(StaticAuthSchemeOptionResolver::new(vec![SIGV4])))
        .with_auth_scheme(SharedAuthScheme::new(SigV4AuthScheme::new()))
        .with_identity_cache(Some(
            config
                .identity_cache()
                .unwrap_or_else(|| IdentityCache::lazy().build()),
        ));
    if let Some(credentials) = config.credentials_provider() {
        components =
            components.with_identity_resolver(SIGV4, SharedIdentityResolver::new(credentials));
    }
    let pool = pool_id.to_string();
    let mut builder = Operation::builder()
        .service_name("Cognito Identity Provider")
        .operation_name("AdminGetUser")
        .with_connection_poisoning()
        .endpoint_url(endpoint)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(timeout)
                .operation_timeout(timeout)
                .build(),
        )
        .standard_retry(
            &config
                .retry_config()
                .cloned()
                .unwrap_or_else(RetryConfig::standard),
        )
        .retry_classifier(AwsErrorCodeClassifier::<ErrorMetadata>::new())
        .retry_classifier(TransientErrorClassifier::<ErrorMetadata>::new())
        .retry_classifier(HttpStatusCodeClassifier::default())
        .runtime_plugin(
            StaticRuntimePlugin::new()
                .with_config(signing.freeze())
                .with_runtime_components(components),
        );
    if let Some(client) = config.http_client() {
        builder = builder.http_client(client);
    }
    if let Some(sleep) = config.sleep_impl() {
        builder = builder.sleep_impl(sleep);
    }
    if let Some(time) = config.time_source() {
        builder = builder.time_source(time);
    }
    builder
        .serializer(move |username: String| request(&pool, &username))
        .deserializer(|response: &HttpResponse| answer(response))
        .build()
}

/// `AdminGetUser`'s request: a JSON POST to the endpoint's root, the operation named in `X-Amz-Target`.
fn request(pool: &str, username: &str) -> Result<HttpRequest, BoxError> {
    let body = serde_json::to_vec(&serde_json::json!({"UserPoolId": pool, "Username": username}))?;
    let request = http::Request::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/x-amz-json-1.1")
        .header(
            "x-amz-target",
            "AWSCognitoIdentityProviderService.AdminGetUser",
        )
        .body(SdkBody::from(body))?;
    Ok(HttpRequest::try_from(request)?)
}

/// Whether the user `AdminGetUser` answered with is enabled (`Enabled` absent: not, as the SDK reads it), or
/// Cognito's error: its code from `X-Amzn-ErrorType` or the body's `__type` (`UserNotFoundException`), as the SDK's
/// JSON protocol reads them.
fn answer(response: &HttpResponse) -> Result<bool, OrchestratorError<ErrorMetadata>> {
    let body: serde_json::Value = response
        .body()
        .bytes()
        .filter(|b| !b.is_empty())
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    if response.status().is_success() {
        return Ok(body
            .get("Enabled")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false));
    }
    let code = response
        .headers()
        .get("x-amzn-errortype")
        .or_else(|| body.get("__type").and_then(serde_json::Value::as_str))
        .or_else(|| body.get("code").and_then(serde_json::Value::as_str))
        .map(error_code);
    let message = body
        .get("message")
        .or_else(|| body.get("Message"))
        .and_then(serde_json::Value::as_str);
    let mut meta = ErrorMetadata::builder();
    if let Some(code) = code {
        meta = meta.code(code);
    }
    if let Some(message) = message {
        meta = meta.message(message);
    }
    Err(OrchestratorError::operation(meta.build()))
}

/// The code of a JSON protocol's error type: `aws.protocoltests#FooError:http://…` is `FooError`.
fn error_code(kind: &str) -> &str {
    let kind = kind.split(':').next().unwrap_or(kind);
    kind.rsplit('#').next().unwrap_or(kind)
}

impl AccountDirectory for CognitoAccounts {
    fn active<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<bool>> {
        Box::pin(self.read(owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::StatusCode;

    fn response(status: u16, error_type: Option<&str>, body: &str) -> HttpResponse {
        let mut response = HttpResponse::new(
            StatusCode::try_from(status).unwrap(),
            SdkBody::from(body.to_string()),
        );
        if let Some(kind) = error_type {
            response
                .headers_mut()
                .insert("x-amzn-errortype", kind.to_string());
        }
        response
    }

    fn code(response: &HttpResponse) -> Option<String> {
        answer(response).err().and_then(|e| {
            e.as_operation_error()
                .and_then(|e| e.code().map(String::from))
        })
    }

    #[test]
    fn a_users_answer_says_whether_they_are_enabled() {
        assert!(answer(&response(200, None, r#"{"Username":"u","Enabled":true}"#)).unwrap());
        assert!(!answer(&response(200, None, r#"{"Username":"u","Enabled":false}"#)).unwrap());
        // No `Enabled`: not enabled, as the SDK's client reads it.
        assert!(!answer(&response(200, None, r#"{"Username":"u"}"#)).unwrap());
    }

    #[test]
    fn cognitos_error_code_is_read_from_the_header_or_the_body() {
        let body = r#"{"__type":"UserNotFoundException","message":"User does not exist."}"#;
        assert_eq!(
            code(&response(400, None, body)).as_deref(),
            Some("UserNotFoundException")
        );
        assert_eq!(
            code(&response(
                400,
                Some(
                    "UserNotFoundException:http://internal.amazon.com/coral/com.amazonaws.cognito/"
                ),
                "{}"
            ))
            .as_deref(),
            Some("UserNotFoundException")
        );
        let namespaced = r#"{"__type":"com.amazonaws.cognito#TooManyRequestsException"}"#;
        assert_eq!(
            code(&response(400, None, namespaced)).as_deref(),
            Some("TooManyRequestsException")
        );
        // A body that is not JSON (a proxy's page): an error without a code, so not a missing user.
        assert_eq!(code(&response(502, None, "<html>bad gateway</html>")), None);
        assert!(answer(&response(502, None, "<html>bad gateway</html>")).is_err());
    }
}
