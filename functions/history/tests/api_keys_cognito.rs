//! A key of a person of the template's Cognito user pool stops working once they are disabled or deleted there:
//! moto's cognito-idp, asked as a deployed function asks (`AdminGetUser`, signed, through the SDK's pipeline), and the keys
//! in moto's DynamoDB, checked as a function checks them with a cache life of one second.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_cognitoidentityprovider::Client;
use chat_aws::{CognitoAccounts, DynamoApiKeys, DynamoStore};
use chat_core::{ApiKeyStore, Caller, MAX_KEYS_PER_OWNER, NewApiKey};
use chat_edge::{ApiKeySettings, ApiKeys, Auth};
use chat_testing::setup;
use local_dynamodb::LocalDynamo;

const CACHE: Duration = Duration::from_secs(1);

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The status of a request carrying `key`: 200 when the key is taken, else the refusal's.
async fn status(auth: &Auth, key: &str) -> u16 {
    let req = setup::bearer_request("GET", "/usage", Some(key), None);
    match auth.identify(&req).await {
        Ok(_) => 200,
        Err(e) => e.status().as_u16(),
    }
}

/// Auth taking the keys of `store`, each of a person checked against `accounts` (cached for [`CACHE`]).
fn keys_auth(store: &DynamoApiKeys, accounts: CognitoAccounts) -> Auth {
    let keys = ApiKeys::new(
        Arc::new(store.clone()),
        ApiKeySettings {
            cache_life: CACHE,
            ..ApiKeySettings::default()
        },
        Duration::from_secs(5),
    )
    .with_accounts(Arc::new(accounts));
    Auth::from_lookup(&|name: &str| (name == "AUTH_MODE").then(|| "none".to_string()))
        .unwrap()
        .with_api_keys(keys)
}

#[tokio::test]
async fn a_disabled_or_deleted_users_keys_are_refused_within_the_cache_life() {
    let moto = LocalDynamo::shared();
    let sdk = moto.sdk_config().await;
    let cognito = Client::new(&sdk);
    let pool = cognito
        .create_user_pool()
        .pool_name("keys-test")
        .send()
        .await
        .unwrap()
        .user_pool
        .unwrap()
        .id
        .unwrap();
    assert!(pool.starts_with("us-east-1_"), "{pool}");
    // The template's pool signs in by email, and its user names are the users' sub.
    let sub = uuid::Uuid::new_v4().to_string();
    let other = uuid::Uuid::new_v4().to_string();
    for name in [&sub, &other] {
        cognito
            .admin_create_user()
            .user_pool_id(&pool)
            .username(name)
            .send()
            .await
            .unwrap();
    }
    let issuer = format!("https://cognito-idp.us-east-1.amazonaws.com/{pool}");

    let (client, table) = moto.fresh_table().await;
    let store = DynamoStore::new(client, table, None).api_keys();
    let make = async |owner: String| {
        let new = NewApiKey::generate(Caller::owner(owner), "k", now(), Some(30));
        store
            .create(&new.record, MAX_KEYS_PER_OWNER, now())
            .await
            .unwrap()
            .unwrap();
        new.key
    };
    let hers = make(format!("jwt:{issuer}:{sub}")).await;
    let theirs = make(format!("jwt:{issuer}:{other}")).await;
    let service = make("service:ci-bot".into()).await;

    let auth = keys_auth(
        &store,
        CognitoAccounts::from_config(&sdk, &pool, Duration::from_secs(5)),
    );
    for key in [&hers, &theirs, &service] {
        assert_eq!(status(&auth, key).await, 200);
    }

    // Disabled: refused once the cache's life has passed; the other user's and the service account's keys work.
    cognito
        .admin_disable_user()
        .user_pool_id(&pool)
        .username(&sub)
        .send()
        .await
        .unwrap();
    tokio::time::sleep(CACHE + Duration::from_millis(200)).await;
    assert_eq!(status(&auth, &hers).await, 401);
    assert_eq!(status(&auth, &theirs).await, 200);
    assert_eq!(status(&auth, &service).await, 200);
    // Enabled again: the key works again.
    cognito
        .admin_enable_user()
        .user_pool_id(&pool)
        .username(&sub)
        .send()
        .await
        .unwrap();
    tokio::time::sleep(CACHE + Duration::from_millis(200)).await;
    assert_eq!(status(&auth, &hers).await, 200);
    // Deleted: refused likewise.
    cognito
        .admin_delete_user()
        .user_pool_id(&pool)
        .username(&sub)
        .send()
        .await
        .unwrap();
    tokio::time::sleep(CACHE + Duration::from_millis(200)).await;
    assert_eq!(status(&auth, &hers).await, 401);
    assert_eq!(status(&auth, &theirs).await, 200);

    // A pool that does not answer (no such pool here: Cognito's own failure) is a 503, not a pass.
    let lost_auth = keys_auth(
        &store,
        CognitoAccounts::from_config(&sdk, "us-east-1_missing", Duration::from_secs(5)),
    );
    let pools_person = make(format!(
        "jwt:https://cognito-idp.us-east-1.amazonaws.com/us-east-1_missing:{other}"
    ))
    .await;
    assert_eq!(status(&lost_auth, &pools_person).await, 503);
    // ...and the keys it does not judge are not asked about.
    assert_eq!(status(&lost_auth, &service).await, 200);
}
