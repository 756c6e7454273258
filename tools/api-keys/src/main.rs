//! The operator's command for API keys, so that a service account (a CI job, a batch process, an integration) gets a
//! key without a person signing in: it writes through the adapter the functions use (`chat_aws::DynamoApiKeys`), so
//! there is one item format, and prints a new key once.
//!
//! ```text
//! api-keys create --table TABLE --owner NAME --name KEY_NAME [--groups a,b] [--oid OID] [--expires-in-days N]
//! api-keys list   --table TABLE (--owner NAME | --owner-id OWNER_ID)
//! api-keys revoke --table TABLE (--owner NAME | --owner-id OWNER_ID) (--id KEY_ID | --all)
//! ```
//!
//! `--owner NAME` is the service account `service:NAME` (its own history, quotas and usage); `--owner-id` names any
//! owner as the table keeps it (`jwt:{issuer}:{sub}`, `local:{user}`), to list or revoke a person's keys.
//! `revoke --all` revokes every key of the owner and drops the groups recorded at their last sign-in: off-boarding,
//! none of their keys works once the functions' `API_KEY_CACHE_SECONDS` has passed. Credentials and Region come from
//! the usual AWS environment or profile.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use chat_aws::DynamoStore;
use chat_core::{
    ApiKeyRefusal, ApiKeyStore, Caller, MAX_KEY_DAYS, MAX_KEY_NAME_CHARS, MAX_KEYS_PER_OWNER,
    NewApiKey, StoreError, StoreTimeouts, rfc3339_millis,
};

const USAGE: &str = "usage:
  api-keys create --table TABLE --owner NAME --name KEY_NAME [--groups a,b] [--oid OID] [--expires-in-days N]
  api-keys list   --table TABLE (--owner NAME | --owner-id OWNER_ID)
  api-keys revoke --table TABLE (--owner NAME | --owner-id OWNER_ID) (--id KEY_ID | --all)
--owner NAME is the service account service:NAME; --all revokes every key of the owner and drops their recorded
groups.";

/// Why the command did nothing.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("{0}\n{USAGE}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Refused(#[from] ApiKeyRefusal),
    #[error("{0} holds no key {1}")]
    NoSuchKey(String, String),
}

/// The options after the command, `--name value` each.
struct Options(HashMap<String, String>);

impl Options {
    fn parse(args: &[String], known: &[&str]) -> Result<Self, Failure> {
        let mut options = HashMap::new();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let name = flag
                .strip_prefix("--")
                .filter(|n| known.contains(n))
                .ok_or_else(|| Failure::Usage(format!("unknown option {flag:?}")))?;
            let value = args
                .next()
                .ok_or_else(|| Failure::Usage(format!("{flag} needs a value")))?;
            if options.insert(name.to_string(), value.clone()).is_some() {
                return Err(Failure::Usage(format!("{flag} given twice")));
            }
        }
        Ok(Self(options))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn required(&self, name: &str) -> Result<&str, Failure> {
        self.get(name)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| Failure::Usage(format!("--{name} is required")))
    }

    /// The owner id: `service:{--owner}`, or `--owner-id` as it is.
    fn owner(&self) -> Result<String, Failure> {
        match (self.get("owner"), self.get("owner-id")) {
            (Some(name), None) => service_owner(name),
            (None, Some(id)) if usable(id) => Ok(id.to_string()),
            (None, Some(_)) => Err(Failure::Usage(
                "--owner-id is empty or holds control characters".into(),
            )),
            _ => Err(Failure::Usage(
                "give --owner or --owner-id (one of them)".into(),
            )),
        }
    }
}

fn usable(text: &str) -> bool {
    !text.trim().is_empty() && !text.chars().any(char::is_control)
}

/// A service account's owner id.
fn service_owner(name: &str) -> Result<String, Failure> {
    if !usable(name) || name.len() > 200 {
        return Err(Failure::Usage(
            "--owner must be 1 to 200 bytes without control characters".into(),
        ));
    }
    Ok(format!("service:{}", name.trim()))
}

fn time_of(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .map(rfc3339_millis)
        .unwrap_or_default()
}

/// Every call of the table bounded, as the functions' are.
async fn keys(table: &str) -> chat_aws::DynamoApiKeys {
    let sdk = chat_aws::load_aws_config().await;
    DynamoStore::from_config(&sdk, table, None, StoreTimeouts::default()).api_keys()
}

async fn run(args: &[String]) -> Result<(), Failure> {
    let Some((command, rest)) = args.split_first() else {
        return Err(Failure::Usage("no command".into()));
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    match command.as_str() {
        "create" => {
            let o = Options::parse(
                rest,
                &["table", "owner", "name", "groups", "oid", "expires-in-days"],
            )?;
            let owner = match o.get("owner") {
                Some(name) => service_owner(name)?,
                None => return Err(Failure::Usage("--owner is required".into())),
            };
            let name = o.required("name")?.trim();
            if !usable(name) || name.chars().count() > MAX_KEY_NAME_CHARS {
                return Err(Failure::Usage(format!(
                    "--name must be 1 to {MAX_KEY_NAME_CHARS} characters without control characters"
                )));
            }
            let days = match o.get("expires-in-days") {
                None => None,
                Some(v) => Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|d| (1..=MAX_KEY_DAYS).contains(d))
                        .ok_or_else(|| {
                            Failure::Usage(format!("--expires-in-days: 1 to {MAX_KEY_DAYS}"))
                        })?,
                ),
            };
            let groups: Vec<String> = o
                .get("groups")
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|g| usable(g))
                .map(str::to_string)
                .collect();
            let caller = Caller {
                owner,
                oid: o.get("oid").filter(|v| usable(v)).map(str::to_string),
                groups,
            };
            let new = NewApiKey::generate(caller, name, now, days);
            let store = keys(o.required("table")?).await;
            store.create(&new.record, MAX_KEYS_PER_OWNER, now).await??;
            eprintln!(
                "made key {} ({}) for {}, expires {}; it is shown this once:",
                new.record.id,
                new.record.name,
                new.record.caller.owner,
                new.record.expires.map(time_of).unwrap_or("never".into())
            );
            println!("{}", new.key);
        }
        "list" => {
            let o = Options::parse(rest, &["table", "owner", "owner-id"])?;
            let owner = o.owner()?;
            let store = keys(o.required("table")?).await;
            for k in store.list(&owner).await? {
                println!(
                    "{}\t{}\t{}\tcreated {}\tlast used {}\texpires {}{}",
                    k.id,
                    k.hint,
                    k.name,
                    time_of(k.created),
                    k.last_used.map(time_of).unwrap_or("never".into()),
                    k.expires.map(time_of).unwrap_or("never".into()),
                    if k.expired(now) { " (expired)" } else { "" }
                );
            }
        }
        "revoke" => {
            // `--all` is the one option without a value.
            let all = rest.iter().any(|a| a == "--all");
            let rest: Vec<String> = rest.iter().filter(|a| *a != "--all").cloned().collect();
            let o = Options::parse(&rest, &["table", "owner", "owner-id", "id"])?;
            let owner = o.owner()?;
            if all {
                if o.get("id").is_some() {
                    return Err(Failure::Usage("give --id or --all, not both".into()));
                }
                let store = keys(o.required("table")?).await;
                let revoked = chat_core::revoke_owner(&store, &owner).await?;
                for k in &revoked {
                    eprintln!("revoked key {} ({})", k.id, k.name);
                }
                eprintln!(
                    "revoked {} key(s) of {owner} and dropped the groups recorded at their last sign-in: none \
                     of their keys works once the functions' API_KEY_CACHE_SECONDS has passed",
                    revoked.len()
                );
                return Ok(());
            }
            let id = o.required("id")?;
            let store = keys(o.required("table")?).await;
            let revoked = store
                .revoke(&owner, id)
                .await?
                .ok_or_else(|| Failure::NoSuchKey(owner.clone(), id.to_string()))?;
            eprintln!(
                "revoked key {} ({}) of {}: it stops working within the functions' API_KEY_CACHE_SECONDS",
                revoked.id, revoked.name, owner
            );
        }
        other => return Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // A table that does not answer ends the command, as it ends a function's call.
    let answer = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), run(&args))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Store(StoreError::Unavailable(
                    "no answer within 60 s".into(),
                )))
            })
    });
    match answer {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("api-keys: {e}");
            ExitCode::FAILURE
        }
    }
}
