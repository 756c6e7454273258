//! An in-memory [`AttachmentStore`]: the files of messages per owner, with every call counted, so that the core's
//! handling of files is tested without S3 (the S3 adapter runs its own suite against moto).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chat_core::{Attachment, AttachmentError, AttachmentFuture, AttachmentStore, StoredFile};

/// Files keyed `{owner}/{chat}/{n}`; a key is found only by its owner.
#[derive(Clone, Default)]
pub struct InMemoryAttachments {
    files: Arc<Mutex<BTreeMap<String, Bytes>>>,
    next: Arc<Mutex<u64>>,
    /// When set, every `put` fails as S3 out of reach.
    failing_puts: Arc<Mutex<bool>>,
}

impl InMemoryAttachments {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every stored key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.files.lock().unwrap().keys().cloned().collect()
    }

    /// Makes every later `put` fail (or succeed again).
    pub fn fail_puts(&self, fail: bool) {
        *self.failing_puts.lock().unwrap() = fail;
    }

    fn owns(owner: &str, key: &str) -> bool {
        key.strip_prefix(owner)
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl AttachmentStore for InMemoryAttachments {
    fn put<'a>(
        &'a self,
        owner: &'a str,
        chat_id: &'a str,
        file: &'a Attachment,
    ) -> AttachmentFuture<'a, String> {
        Box::pin(async move {
            if *self.failing_puts.lock().unwrap() {
                return Err(AttachmentError::Unavailable("puts fail".into()));
            }
            let n = {
                let mut next = self.next.lock().unwrap();
                *next += 1;
                *next
            };
            let key = format!("{owner}/{chat_id}/{n:08}");
            let bytes = file.bytes.clone().unwrap_or_default();
            self.files.lock().unwrap().insert(key.clone(), bytes);
            Ok(key)
        })
    }

    fn get<'a>(&'a self, owner: &'a str, key: &'a str) -> AttachmentFuture<'a, Bytes> {
        Box::pin(async move {
            if !Self::owns(owner, key) {
                return Err(AttachmentError::NotFound);
            }
            self.files
                .lock()
                .unwrap()
                .get(key)
                .cloned()
                .ok_or(AttachmentError::NotFound)
        })
    }

    fn delete<'a>(&'a self, owner: &'a str, keys: &'a [String]) -> AttachmentFuture<'a, ()> {
        Box::pin(async move {
            let mut files = self.files.lock().unwrap();
            for key in keys.iter().filter(|k| Self::owns(owner, k)) {
                files.remove(key);
            }
            Ok(())
        })
    }

    fn delete_chat<'a>(&'a self, owner: &'a str, chat_id: &'a str) -> AttachmentFuture<'a, ()> {
        Box::pin(async move {
            let prefix = format!("{owner}/{chat_id}/");
            self.files
                .lock()
                .unwrap()
                .retain(|key, _| !key.starts_with(&prefix));
            Ok(())
        })
    }

    fn url<'a>(&'a self, owner: &'a str, file: &'a StoredFile) -> AttachmentFuture<'a, String> {
        Box::pin(async move {
            let key = file.key.as_str();
            if !Self::owns(owner, key) || !self.files.lock().unwrap().contains_key(key) {
                return Err(AttachmentError::NotFound);
            }
            Ok(format!("memory://{key}"))
        })
    }
}
