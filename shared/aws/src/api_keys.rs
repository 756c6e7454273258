//! The API-key port on DynamoDB, in the chats' table: two items per key, written and removed together in one
//! transaction, so that a key is checked with one `GetItem` by its hash and an owner's keys are listed with one
//! strongly consistent query of their own partition.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | a key, as it is checked | `APIKEY#{sha256 of the key}` | `APIKEY` | `id`, `owner`, `oid`, `groups`, `name`, `hint`, `created`, `expiresAt` |
//! | a key, as its owner lists it | `APIKEYS#{owner}` | `KEY#{id}` | the same, `hash`, and `lastUsed` |
//! | the owner as they signed in last | `APIKEYS#{owner}` | `OWNER` | `owner`, `oid`, `groups`, `recorded` |
//!
//! A key's check reads its checked item and its owner's `OWNER` item (what the key acts with, when there is one):
//! two `GetItem`s at once when the checking instance knows the key's owner from an earlier read, else one after the
//! other (see `chat_edge`'s key checks).
//!
//! The key itself is never stored (see [`chat_core::api_key_hash`]). `expiresAt` is the table's TTL attribute
//! ([`crate::table::EXPIRES_AT`]): DynamoDB removes an expired key's items in its own time; until it does, a key past
//! its expiry is refused by whoever finds it. Last use is recorded on the listing item only (the checked item is
//! read, never written, by a request).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::TransactWriteItem;
use chat_core::{ApiKeyFuture, ApiKeyRecord, ApiKeyRefusal, ApiKeyStore, Caller, StoreError};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::dynamo::{Expression, Item, failed, get_item, n, transact};
use crate::table::{PARTITION_KEY, item_key, with_sort_key_prefix};

/// The sort key of a key's checked item.
const CHECKED_SK: &str = "APIKEY";

/// The sort key of an owner's item, as they signed in last (in their listing partition: no key's `KEY#` sort key).
const OWNER_SK: &str = "OWNER";

fn checked_pk(hash: &str) -> String {
    format!("APIKEY#{hash}")
}

fn listing_pk(owner: &str) -> String {
    format!("APIKEYS#{owner}")
}

fn listing_sk(id: &str) -> String {
    format!("KEY#{id}")
}

/// Either item of a key, as stored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyItem {
    pk: String,
    sk: String,
    id: String,
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oid: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    name: String,
    hint: String,
    created: i64,
    /// On the listing item only (the checked item is found by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_used: Option<i64>,
    #[serde(rename = "expiresAt", default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

impl KeyItem {
    fn new(key: &ApiKeyRecord, pk: String, sk: String, hash: Option<String>) -> Self {
        Self {
            pk,
            sk,
            id: key.id.clone(),
            owner: key.caller.owner.clone(),
            oid: key.caller.oid.clone(),
            groups: key.caller.groups.clone(),
            name: key.name.clone(),
            hint: key.hint.clone(),
            created: key.created,
            hash,
            last_used: None,
            expires_at: key.expires,
        }
    }

    fn record(self, hash: String) -> ApiKeyRecord {
        ApiKeyRecord {
            id: self.id,
            hash,
            caller: Caller {
                owner: self.owner,
                oid: self.oid,
                groups: self.groups,
            },
            name: self.name,
            hint: self.hint,
            created: self.created,
            last_used: self.last_used,
            expires: self.expires_at,
        }
    }
}

/// An owner as they signed in last.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerItem {
    pk: String,
    sk: String,
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oid: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    /// Unix seconds of the write.
    recorded: i64,
}

fn to_item(item: &KeyItem) -> Result<Item, StoreError> {
    serde_dynamo::to_item(item).map_err(|e| StoreError::Failed(format!("an API key item: {e}")))
}

fn from_item(item: Item) -> Result<KeyItem, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Failed(format!("an API key item does not read: {e}")))
}

/// `item` put where no item of its key is yet.
fn put(table: &str, item: Item) -> TransactWriteItem {
    Expression::new().if_absent(PARTITION_KEY).put(table, item)
}

fn delete(table: &str, key: Item) -> TransactWriteItem {
    Expression::new().delete(table, key)
}

/// The API keys in one DynamoDB table, through the store's client (and so within its timeouts).
#[derive(Clone)]
pub struct DynamoApiKeys {
    client: Client,
    table: String,
}

impl DynamoApiKeys {
    pub(crate) fn new(client: Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
        }
    }

    /// `owner`'s listing items, in the order of their ids.
    async fn listing(&self, owner: &str) -> Result<Vec<KeyItem>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let query = self.client.query().table_name(&self.table);
            let page = with_sort_key_prefix(query, listing_pk(owner), "KEY#")
                .set_exclusive_start_key(start)
                .send()
                .instrument(tracing::info_span!("api_keys.list"))
                .await
                .map_err(failed)?;
            for item in page.items.unwrap_or_default() {
                items.push(from_item(item)?);
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    async fn create_key(
        &self,
        key: &ApiKeyRecord,
        max: usize,
        now: i64,
    ) -> Result<Result<(), ApiKeyRefusal>, StoreError> {
        // Counted by one consistent read before the write: concurrent creates by one owner (one signed-in person)
        // may pass the bound together by the few they are, which is all the bound needs (it keeps an owner's keys
        // few, it is not a quota).
        let held = self
            .listing(&key.caller.owner)
            .await?
            .iter()
            .filter(|k| k.expires_at.is_none_or(|at| at > now))
            .count();
        if held >= max {
            return Ok(Err(ApiKeyRefusal::TooMany { max }));
        }
        let checked = KeyItem::new(key, checked_pk(&key.hash), CHECKED_SK.into(), None);
        let listed = KeyItem::new(
            key,
            listing_pk(&key.caller.owner),
            listing_sk(&key.id),
            Some(key.hash.clone()),
        );
        transact(
            &self.client,
            vec![
                put(&self.table, to_item(&checked)?),
                put(&self.table, to_item(&listed)?),
            ],
            tracing::info_span!("api_keys.create"),
        )
        .await
        .map_err(failed)?;
        Ok(Ok(()))
    }

    async fn find_key(&self, hash: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        let key = item_key(checked_pk(hash), CHECKED_SK);
        let span = tracing::info_span!("api_keys.find");
        get_item(&self.client, &self.table, key, false, span)
            .await?
            .map(|item| from_item(item).map(|k| k.record(hash.to_string())))
            .transpose()
    }

    async fn list_keys(&self, owner: &str) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let mut keys: Vec<_> = self
            .listing(owner)
            .await?
            .into_iter()
            .filter_map(|item| {
                let hash = item.hash.clone()?;
                Some(item.record(hash))
            })
            .collect();
        keys.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        Ok(keys)
    }

    async fn revoke_key(&self, owner: &str, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        let key = item_key(listing_pk(owner), listing_sk(id));
        let span = tracing::info_span!("api_keys.find_listed");
        let Some(item) = get_item(&self.client, &self.table, key, true, span).await? else {
            return Ok(None);
        };
        let item = from_item(item)?;
        let Some(hash) = item.hash.clone() else {
            return Err(StoreError::Failed(
                "an API key's listing item has no hash".into(),
            ));
        };
        // Both items at once, unconditionally: a transaction sent again after its answer was lost deletes nothing
        // more, and a key is never left checkable without its listing (which would leave it unrevocable).
        transact(
            &self.client,
            vec![
                delete(&self.table, item_key(checked_pk(&hash), CHECKED_SK)),
                delete(&self.table, item_key(listing_pk(owner), listing_sk(id))),
            ],
            tracing::info_span!("api_keys.revoke"),
        )
        .await
        .map_err(failed)?;
        Ok(Some(item.record(hash)))
    }

    async fn record(&self, caller: &Caller) -> Result<(), StoreError> {
        let item = OwnerItem {
            pk: listing_pk(&caller.owner),
            sk: OWNER_SK.into(),
            owner: caller.owner.clone(),
            oid: caller.oid.clone(),
            groups: caller.groups.clone(),
            recorded: time::OffsetDateTime::now_utc().unix_timestamp(),
        };
        let item = serde_dynamo::to_item(&item)
            .map_err(|e| StoreError::Failed(format!("an API key owner's item: {e}")))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .instrument(tracing::info_span!("api_keys.record_owner"))
            .await
            .map_err(failed)?;
        Ok(())
    }

    fn owner_of(item: Item) -> Result<Caller, StoreError> {
        let item: OwnerItem = serde_dynamo::from_item(item).map_err(|e| {
            StoreError::Failed(format!("an API key owner's item does not read: {e}"))
        })?;
        Ok(Caller {
            owner: item.owner,
            oid: item.oid,
            groups: item.groups,
        })
    }

    async fn recorded(&self, owner: &str) -> Result<Option<Caller>, StoreError> {
        let key = item_key(listing_pk(owner), OWNER_SK);
        let span = tracing::info_span!("api_keys.recorded_owner");
        get_item(&self.client, &self.table, key, false, span)
            .await?
            .map(Self::owner_of)
            .transpose()
    }

    async fn forget(&self, owner: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item_key(listing_pk(owner), OWNER_SK)))
            .send()
            .instrument(tracing::info_span!("api_keys.forget_owner"))
            .await
            .map_err(failed)?;
        Ok(())
    }

    async fn touch_key(&self, key: &ApiKeyRecord, at: i64) -> Result<(), StoreError> {
        let updated = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_key(
                listing_pk(&key.caller.owner),
                listing_sk(&key.id),
            )))
            // Only while the key is listed: a revoked key's item is not made again.
            .condition_expression("attribute_exists(#pk)")
            .update_expression("SET #lastUsed = :at")
            .expression_attribute_names("#pk", PARTITION_KEY)
            .expression_attribute_names("#lastUsed", "lastUsed")
            .expression_attribute_values(":at", n(at))
            .send()
            .instrument(tracing::info_span!("api_keys.touch"))
            .await;
        match updated {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error().and_then(|e| e.code())
                    == Some("ConditionalCheckFailedException") =>
            {
                Ok(())
            }
            Err(e) => Err(failed(e)),
        }
    }
}

impl ApiKeyStore for DynamoApiKeys {
    fn create<'a>(
        &'a self,
        key: &'a ApiKeyRecord,
        max: usize,
        now: i64,
    ) -> ApiKeyFuture<'a, Result<(), ApiKeyRefusal>> {
        Box::pin(self.create_key(key, max, now))
    }

    fn find<'a>(&'a self, hash: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
        Box::pin(self.find_key(hash))
    }

    fn list<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Vec<ApiKeyRecord>> {
        Box::pin(self.list_keys(owner))
    }

    fn revoke<'a>(&'a self, owner: &'a str, id: &'a str) -> ApiKeyFuture<'a, Option<ApiKeyRecord>> {
        Box::pin(self.revoke_key(owner, id))
    }

    fn touch<'a>(&'a self, key: &'a ApiKeyRecord, at: i64) -> ApiKeyFuture<'a, ()> {
        Box::pin(self.touch_key(key, at))
    }

    fn record_owner<'a>(&'a self, caller: &'a Caller) -> ApiKeyFuture<'a, ()> {
        Box::pin(self.record(caller))
    }

    fn recorded_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, Option<Caller>> {
        Box::pin(self.recorded(owner))
    }

    fn forget_owner<'a>(&'a self, owner: &'a str) -> ApiKeyFuture<'a, ()> {
        Box::pin(self.forget(owner))
    }
}
