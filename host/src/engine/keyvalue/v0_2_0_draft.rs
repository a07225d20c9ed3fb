//! `wasi:keyvalue@0.2.0-draft`, the earlier draft (wasmtime's own and wasmCloud's): the same
//! store, with `u64` cursors and counters and no compare-and-swap. Linked beside draft2 so
//! components built against either load; both reach the same data. Implemented on
//! [`KeyValueView`] over the shared logic of the parent module, with draft2's errors mapped to
//! this version's.

use std::collections::VecDeque;

use wasmtime::component::Resource;

use super::bindings::v0_2_0_draft::wasi::keyvalue::{atomics, batch, store};
use super::bindings::v0_2_0_draft2::wasi::keyvalue::store as draft2;
use super::{Bucket, KeyValueView};
use crate::kv::KvError;

/// How many of the earlier draft's numeric cursors one call keeps: a plugin paging forwards
/// needs one; older ones are forgotten (and refused as unknown if passed back).
const DRAFT_CURSORS: usize = 16;

/// The earlier draft's numeric cursors handed out in one call: number → the key it stands
/// for (the last key of the page it was returned with).
#[derive(Default)]
pub struct DraftCursors {
    next: u64,
    recent: VecDeque<(u64, String)>,
}

impl DraftCursors {
    /// A new number for `key`.
    fn hand_out(&mut self, key: String) -> u64 {
        self.next += 1;
        if self.recent.len() == DRAFT_CURSORS {
            self.recent.pop_front();
        }
        self.recent.push_back((self.next, key));
        self.next
    }

    /// The key `number` stands for, if this call was handed it (and still remembers it).
    fn key(&self, number: u64) -> Result<String, KvError> {
        self.recent
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, key)| key.clone())
            .ok_or_else(|| KvError::InvalidCursor(number.to_string()))
    }
}

fn error(e: draft2::Error) -> store::Error {
    match e {
        draft2::Error::NoSuchStore => store::Error::NoSuchStore,
        draft2::Error::AccessDenied => store::Error::AccessDenied,
        draft2::Error::Other(message) => store::Error::Other(message),
    }
}

impl store::Host for KeyValueView<'_> {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        self.open_bucket(identifier).await.map_err(error)
    }
}

impl store::HostBucket for KeyValueView<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Option<Vec<u8>>, store::Error> {
        let name = self.bucket_name(&bucket).map_err(error)?;
        self.call().get(&name, &key).await.map_err(error)
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket).map_err(error)?;
        self.call().set(&name, &key, value).await.map_err(error)
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket).map_err(error)?;
        self.call().delete(&name, &key).await.map_err(error)
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<bool, store::Error> {
        let name = self.bucket_name(&bucket).map_err(error)?;
        self.call().exists(&name, &key).await.map_err(error)
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> Result<store::KeyResponse, store::Error> {
        let name = self.bucket_name(&bucket).map_err(error)?;
        let after = match cursor {
            Some(number) => Some(
                self.ctx
                    .draft_cursors
                    .key(number)
                    .map_err(|e| error(e.into()))?,
            ),
            None => None,
        };
        let page = self
            .call()
            .list_keys(&name, after.as_deref())
            .await
            .map_err(error)?;
        Ok(store::KeyResponse {
            keys: page.keys,
            cursor: page.cursor.map(|key| self.ctx.draft_cursors.hand_out(key)),
        })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KeyValueView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> Result<u64, store::Error> {
        let delta = i64::try_from(delta).map_err(|_| {
            store::Error::Other(format!("cannot increment by {delta}: over 2^63 - 1"))
        })?;
        let name = self.bucket_name(&bucket).map_err(error)?;
        // Unsigned: a negative sum is refused by the backend, before anything is written.
        let sum = self
            .call()
            .increment(&name, &key, delta, true)
            .await
            .map_err(error)?;
        u64::try_from(sum)
            .map_err(|_| store::Error::Other(format!("the counter is negative ({sum})")))
    }
}

impl batch::Host for KeyValueView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>, store::Error> {
        self.get_many_values(bucket, keys).await.map_err(error)
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<(), store::Error> {
        self.set_many_values(bucket, key_values)
            .await
            .map_err(error)
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<(), store::Error> {
        self.delete_many_keys(bucket, keys).await.map_err(error)
    }
}
