//! The operator's command itself against moto's DynamoDB, its writes read back through the functions' adapter:
//! `revoke --all` revokes every key of an owner and drops the groups recorded at their last sign-in, and leaves
//! everyone else's keys alone.

use std::process::{Command, Output};

use chat_aws::DynamoStore;
use chat_core::{ApiKeyStore, Caller, MAX_KEYS_PER_OWNER, NewApiKey, api_key_hash};
use local_dynamodb::LocalDynamo;

/// `api-keys args…` against the local server, as an operator runs it.
fn api_keys(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_api-keys"))
        .args(args)
        .envs(LocalDynamo::shared().sdk_env())
        .env_remove("AWS_PROFILE")
        .output()
        .expect("the command runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[tokio::test]
async fn revoke_all_revokes_every_key_of_the_owner_and_drops_their_recorded_groups() {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let keys = DynamoStore::new(client, table.clone(), None).api_keys();
    let carol = Caller {
        owner: "jwt:https://issuer.test:carol".into(),
        oid: Some("carol".into()),
        groups: vec!["admins".into()],
    };
    let mut hers = Vec::new();
    for name in ["laptop", "ci", "notebook"] {
        let new = NewApiKey::generate(carol.clone(), name, now(), Some(30));
        keys.create(&new.record, MAX_KEYS_PER_OWNER, now())
            .await
            .unwrap()
            .unwrap();
        hers.push(new);
    }
    keys.record_owner(&carol).await.unwrap();
    // A service account's key, made by the command.
    let made = api_keys(&[
        "create", "--table", &table, "--owner", "ci-bot", "--name", "nightly",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let bots = text(&made.stdout).trim().to_string();
    assert!(bots.starts_with("cbk_"), "{bots}");

    // `revoke` of carol's keys, as the command takes them.
    let revoke = |more: &[&str]| {
        let owner: &[&str] = &["revoke", "--table", &table, "--owner-id", &carol.owner];
        api_keys(&[owner, more].concat())
    };
    // --id and --all together is a usage error, and revokes nothing.
    let both = revoke(&["--all", "--id", &hers[0].record.id]);
    assert!(!both.status.success());
    assert!(
        text(&both.stderr).contains("not both"),
        "{}",
        text(&both.stderr)
    );
    assert_eq!(keys.list(&carol.owner).await.unwrap().len(), 3);

    let revoked = revoke(&["--all"]);
    let said = text(&revoked.stderr);
    assert!(revoked.status.success(), "{said}");
    assert!(said.contains("revoked 3 key(s)"), "{said}");
    for key in &hers {
        assert!(said.contains(&key.record.id), "{said}");
        assert_eq!(keys.find(&key.record.hash).await.unwrap(), None);
    }
    assert!(keys.list(&carol.owner).await.unwrap().is_empty());
    assert_eq!(keys.recorded_owner(&carol.owner).await.unwrap(), None);
    // The service account's key is untouched.
    let bot = keys.find(&api_key_hash(&bots)).await.unwrap().unwrap();
    assert_eq!(bot.caller.owner, "service:ci-bot");

    // Again: nothing left, no failure. And a service account by name.
    let again = revoke(&["--all"]);
    assert!(again.status.success());
    assert!(text(&again.stderr).contains("revoked 0 key(s)"));
    let bot_gone = api_keys(&["revoke", "--table", &table, "--owner", "ci-bot", "--all"]);
    assert!(bot_gone.status.success(), "{}", text(&bot_gone.stderr));
    assert_eq!(keys.find(&api_key_hash(&bots)).await.unwrap(), None);
}
