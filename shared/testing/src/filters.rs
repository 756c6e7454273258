//! The access filter a search applies for a caller, as the tests of the document index and the bulk load build it.

use chat_core::{Caller, MetadataFilter};
use serde_json::json;

/// The caller's access filter, as search builds it: their oid, their groups, everyone.
pub fn access_filter(caller: &Caller) -> MetadataFilter {
    let mut any = vec![MetadataFilter::ListContains {
        key: "oids".into(),
        value: json!(caller.oid.clone().unwrap()),
    }];
    for g in caller.groups.iter().map(String::as_str).chain(["everyone"]) {
        any.push(MetadataFilter::ListContains {
            key: "groups".into(),
            value: json!(g),
        });
    }
    MetadataFilter::OrAll(any)
}
