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

use aws_sdk_cognitoidentityprovider::Client;
use aws_sdk_cognitoidentityprovider::config::timeout::TimeoutConfig;
use aws_sdk_cognitoidentityprovider::error::{DisplayErrorContext, ProvideErrorMetadata};
use chat_core::{AccountDirectory, ApiKeyFuture, StoreError};
use tracing::Instrument;

/// The people of one Cognito user pool.
#[derive(Clone)]
pub struct CognitoAccounts {
    client: Client,
    pool_id: String,
    /// `jwt:{issuer}:`: how the owner ids of the pool's people start.
    owners: String,
}

impl CognitoAccounts {
    /// The pool `pool_id` (`{region}_{id}`) through `client`.
    pub fn new(client: Client, pool_id: &str) -> Self {
        let region = pool_id.split('_').next().unwrap_or_default();
        Self {
            client,
            pool_id: pool_id.to_string(),
            owners: format!("jwt:https://cognito-idp.{region}.amazonaws.com/{pool_id}:"),
        }
    }

    /// From the shared AWS configuration (`AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER` points it at a local
    /// server), each call bounded by `timeout`.
    pub fn from_config(config: &aws_config::SdkConfig, pool_id: &str, timeout: Duration) -> Self {
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(timeout)
            .operation_timeout(timeout)
            .build();
        let conf = aws_sdk_cognitoidentityprovider::config::Builder::from(config)
            .timeout_config(timeouts)
            .build();
        Self::new(Client::from_conf(conf), pool_id)
    }

    async fn read(&self, owner: &str) -> Result<Option<bool>, StoreError> {
        let Some(sub) = owner.strip_prefix(&self.owners).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let answer = self
            .client
            .admin_get_user()
            .user_pool_id(&self.pool_id)
            .username(sub)
            .send()
            .instrument(tracing::info_span!("api_keys.account"))
            .await;
        match answer {
            Ok(user) => Ok(Some(user.enabled)),
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

impl AccountDirectory for CognitoAccounts {
    fn active<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<bool>> {
        Box::pin(self.read(owner))
    }
}
