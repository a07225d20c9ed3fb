//! `wasi:keyvalue@0.2.0-draft2` (store, atomics, batch), and the earlier `0.2.0-draft`, for
//! plugins, on the host's [`StateService`]: deny by default, one namespace per plugin, quotas
//! from its manifest.
//!
//! The interface is linked for every plugin, so any component that imports it loads; what a
//! call may do is decided here. `open` succeeds only for a bucket the plugin's manifest grants
//! (`[keyvalue] buckets`), and every operation addresses the backend as (this plugin, that
//! bucket, key): the plugin name comes from the host, never from the guest. Every failure is
//! an `error` value the guest sees, never a trap, and a refusal is also logged once per call
//! so the operator learns which grant is missing.
//!
//! `list-keys` cursors are keys (see `kv`): draft2's string cursor is the last key of the
//! previous page, passed through as it is. The earlier draft's cursors are `u64`, which
//! cannot hold a key: the host hands out numbers standing for the keys ([`DraftCursors`]),
//! valid within the call that received them (every call runs in a fresh instance, so a plugin
//! pages within one call anyway).

#![allow(
    missing_docs,
    reason = "generated from the wasi:keyvalue WIT, which carries the docs"
)]

use std::sync::Arc;

use wasmtime::component::Resource;

use super::state::HostState;
use crate::kv::{self, KvError, Quota, StateService, check_cursor, check_key};
use crate::policy::KvGrant;

mod generated {
    wasmtime::component::bindgen!({
        world: "wasi:keyvalue/imports@0.2.0-draft2",
        path: "../wit/deps/keyvalue",
        imports: { default: async },
        with: {
            "wasi:keyvalue/store.bucket": super::Bucket,
            "wasi:keyvalue/atomics.cas": super::Cas,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store};

/// The most keys one batch operation may name.
pub const MAX_BATCH_KEYS: usize = 1000;
/// The most value bytes one `get-many` returns: host memory the plugin's own limit does not
/// count until the values reach it.
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// How many of the earlier draft's numeric cursors one call keeps: a plugin paging forwards
/// needs one; older ones are forgotten (and refused as unknown if passed back).
const DRAFT_CURSORS: usize = 16;

/// The earlier draft's numeric cursors handed out in one call: number → the key it stands
/// for (the last key of the page it was returned with).
#[derive(Default)]
pub struct DraftCursors {
    next: u64,
    recent: std::collections::VecDeque<(u64, String)>,
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

/// An open bucket: its name, which the plugin's grant names.
pub struct Bucket {
    name: Arc<str>,
}

/// A compare-and-swap in progress: the key, and its value when the handle was made.
pub struct Cas {
    bucket: Arc<str>,
    key: String,
    snapshot: Option<Vec<u8>>,
}

/// What one call may do with state: the service, and the plugin's grant (if any).
#[derive(Clone)]
pub struct KvAccess {
    service: Arc<StateService>,
    grant: Option<Arc<KvGrant>>,
}

impl KvAccess {
    /// Access for a plugin with `grant` (none: every `open` is refused).
    pub fn new(service: Arc<StateService>, grant: Option<Arc<KvGrant>>) -> Self {
        Self { service, grant }
    }

    fn quota(&self) -> Quota {
        self.grant.as_ref().map_or(
            Quota {
                max_bytes: 0,
                max_keys: 0,
                max_value_bytes: 0,
            },
            |grant| Quota {
                max_bytes: grant.max_bytes,
                max_keys: grant.max_keys,
                max_value_bytes: grant.max_value_bytes,
            },
        )
    }
}

/// Link `wasi:keyvalue` for every plugin.
pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    store::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    atomics::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    batch::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    draft::store::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    draft::atomics::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    draft::batch::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    Ok(())
}

impl From<KvError> for store::Error {
    fn from(error: KvError) -> Self {
        Self::Other(error.to_string())
    }
}

impl HostState {
    /// What an operation needs, owned: the host state itself is not `Sync`, so nothing of it
    /// may be held across an `await`.
    fn kv_call(&self) -> KvCall {
        KvCall {
            plugin: Arc::clone(&self.plugin),
            access: self.kv.clone(),
        }
    }

    /// The bucket behind a handle.
    fn bucket_name(&mut self, bucket: &Resource<Bucket>) -> Result<Arc<str>, store::Error> {
        self.table()
            .get(bucket)
            .map(|b| Arc::clone(&b.name))
            .map_err(|e| store::Error::Other(format!("invalid bucket handle: {e}")))
    }
}

/// One operation's plugin and access.
struct KvCall {
    plugin: Arc<str>,
    access: KvAccess,
}

impl KvCall {
    /// The backend, as a WIT error when it cannot be opened.
    async fn backend(&self) -> Result<Arc<dyn kv::Backend>, store::Error> {
        self.access
            .service
            .backend()
            .await
            .map(Arc::clone)
            .map_err(|e| self.report(e))
    }

    /// Log an operation's failure for the operator (quota and availability), and hand it to
    /// the guest.
    fn report(&self, error: KvError) -> store::Error {
        match &error {
            KvError::Quota { .. } | KvError::Unavailable(_) | KvError::Backend(_) => {
                tracing::warn!(plugin = &*self.plugin, "plugin state: {error}");
            }
            _ => {}
        }
        store::Error::from(error)
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        backend
            .get(&self.plugin, bucket, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn set(&self, bucket: &str, key: &str, value: Vec<u8>) -> Result<(), store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        backend
            .set(&self.plugin, bucket, key, value, self.access.quota())
            .await
            .map_err(|e| self.report(e))
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<(), store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        backend
            .delete(&self.plugin, bucket, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn exists(&self, bucket: &str, key: &str) -> Result<bool, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        backend
            .exists(&self.plugin, bucket, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn list_keys(
        &self,
        bucket: &str,
        after: Option<&str>,
    ) -> Result<kv::KeyPage, store::Error> {
        if let Some(after) = after {
            check_cursor(after).map_err(store::Error::from)?;
        }
        let backend = self.backend().await?;
        backend
            .list_keys(&self.plugin, bucket, after)
            .await
            .map_err(|e| self.report(e))
    }

    /// `unsigned`: the earlier draft's `u64` counters, which refuse a negative sum.
    async fn increment(
        &self,
        bucket: &str,
        key: &str,
        delta: i64,
        unsigned: bool,
    ) -> Result<i64, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        backend
            .increment(
                &self.plugin,
                bucket,
                key,
                delta,
                unsigned,
                self.access.quota(),
            )
            .await
            .map_err(|e| self.report(e))
    }

    /// `Ok(None)`: swapped; `Ok(Some(latest))`: the value had changed to `latest`.
    async fn swap(
        &self,
        bucket: &str,
        key: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<Option<Option<Vec<u8>>>, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend().await?;
        let swapped = backend
            .swap(
                &self.plugin,
                bucket,
                key,
                expected,
                value,
                self.access.quota(),
            )
            .await
            .map_err(|e| self.report(e))?;
        if swapped {
            return Ok(None);
        }
        let latest = backend
            .get(&self.plugin, bucket, key)
            .await
            .map_err(|e| self.report(e))?;
        Ok(Some(latest))
    }
}

fn check_batch(keys: usize) -> Result<(), store::Error> {
    if keys > MAX_BATCH_KEYS {
        return Err(store::Error::Other(format!(
            "a batch names at most {MAX_BATCH_KEYS} keys; this one names {keys}"
        )));
    }
    Ok(())
}

impl store::Host for HostState {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        let granted = self
            .kv
            .grant
            .as_ref()
            .is_some_and(|grant| grant.buckets.contains(&identifier));
        if !granted {
            self.denied
                .store(true, std::sync::atomic::Ordering::Relaxed);
            crate::metrics::metrics().denial(&self.plugin, crate::metrics::Grant::Keyvalue);
            if !self.kv_denial_logged {
                self.kv_denial_logged = true;
                tracing::warn!(
                    plugin = self.plugin(),
                    bucket = %crate::engine::log_line(&identifier, 256),
                    "refused: the plugin opened a key-value bucket its manifest does not grant \
                     (grant it with [keyvalue] buckets = [\"…\"])"
                );
            }
            return Err(store::Error::AccessDenied);
        }
        self.table()
            .push(Bucket {
                name: identifier.into(),
            })
            .map_err(|e| store::Error::Other(format!("cannot open another bucket handle: {e}")))
    }
}

impl store::HostBucket for HostState {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Option<Vec<u8>>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.kv_call().get(&name, &key).await
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.kv_call().set(&name, &key, value).await
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.kv_call().delete(&name, &key).await
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<bool, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.kv_call().exists(&name, &key).await
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> Result<store::KeyResponse, store::Error> {
        let name = self.bucket_name(&bucket)?;
        let page = self.kv_call().list_keys(&name, cursor.as_deref()).await?;
        Ok(store::KeyResponse {
            keys: page.keys,
            cursor: page.cursor,
        })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table().delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for HostState {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> Result<i64, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.kv_call().increment(&name, &key, delta, false).await
    }

    async fn swap(&mut self, cas: Resource<Cas>, value: Vec<u8>) -> Result<(), atomics::CasError> {
        let Cas {
            bucket,
            key,
            snapshot,
        } = self.table().delete(cas).map_err(|e| {
            atomics::CasError::StoreError(store::Error::Other(format!("invalid CAS handle: {e}")))
        })?;
        let latest = match self
            .kv_call()
            .swap(&bucket, &key, snapshot, value)
            .await
            .map_err(atomics::CasError::StoreError)?
        {
            None => return Ok(()),
            // Changed since the handle was made: a fresh handle at the latest value, to retry.
            Some(latest) => latest,
        };
        let handle = self
            .table()
            .push(Cas {
                bucket,
                key,
                snapshot: latest,
            })
            .map_err(|e| {
                atomics::CasError::StoreError(store::Error::Other(format!(
                    "cannot make another CAS handle: {e}"
                )))
            })?;
        Err(atomics::CasError::CasFailed(handle))
    }
}

impl atomics::HostCas for HostState {
    async fn new(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Resource<Cas>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        let snapshot = self.kv_call().get(&name, &key).await?;
        self.table()
            .push(Cas {
                bucket: name,
                key,
                snapshot,
            })
            .map_err(|e| store::Error::Other(format!("cannot make another CAS handle: {e}")))
    }

    async fn current(&mut self, cas: Resource<Cas>) -> Result<Option<Vec<u8>>, store::Error> {
        self.table()
            .get(&cas)
            .map(|cas| cas.snapshot.clone())
            .map_err(|e| store::Error::Other(format!("invalid CAS handle: {e}")))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.table().delete(cas)?;
        Ok(())
    }
}

impl batch::Host for HostState {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(keys.len())?;
        let call = self.kv_call();
        let mut out = Vec::with_capacity(keys.len());
        let mut total = 0usize;
        for key in keys {
            let value = call.get(&name, &key).await?;
            total += value.as_ref().map_or(0, Vec::len);
            if total > MAX_BATCH_BYTES {
                return Err(store::Error::Other(format!(
                    "a get-many returns at most {} MiB of values; ask for fewer keys at once",
                    MAX_BATCH_BYTES >> 20
                )));
            }
            out.push(value.map(|value| (key, value)));
        }
        Ok(out)
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(key_values.len())?;
        let call = self.kv_call();
        for (key, value) in key_values {
            call.set(&name, &key, value).await?;
        }
        Ok(())
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(keys.len())?;
        let call = self.kv_call();
        for key in keys {
            call.delete(&name, &key).await?;
        }
        Ok(())
    }
}

/// `wasi:keyvalue@0.2.0-draft`, the earlier draft (wasmtime's own and wasmCloud's): the same
/// store, with `u64` cursors and counters and no compare-and-swap. Linked beside draft2 so
/// components built against either load; both reach the same data.
mod draft {
    use wasmtime::component::Resource;

    use super::{Bucket, generated::wasi::keyvalue::store as draft2};
    use crate::engine::state::HostState;

    mod generated {
        wasmtime::component::bindgen!({
            world: "wasi:keyvalue/imports@0.2.0-draft",
            path: "wit/keyvalue-draft",
            imports: { default: async },
            with: {
                "wasi:keyvalue/store.bucket": crate::engine::keyvalue::Bucket,
            },
        });
    }

    pub use generated::wasi::keyvalue::{atomics, batch, store};

    fn error(e: draft2::Error) -> store::Error {
        match e {
            draft2::Error::NoSuchStore => store::Error::NoSuchStore,
            draft2::Error::AccessDenied => store::Error::AccessDenied,
            draft2::Error::Other(message) => store::Error::Other(message),
        }
    }

    impl store::Host for HostState {
        async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
            draft2::Host::open(self, identifier).await.map_err(error)
        }
    }

    impl store::HostBucket for HostState {
        async fn get(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> Result<Option<Vec<u8>>, store::Error> {
            draft2::HostBucket::get(self, bucket, key)
                .await
                .map_err(error)
        }

        async fn set(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
            value: Vec<u8>,
        ) -> Result<(), store::Error> {
            draft2::HostBucket::set(self, bucket, key, value)
                .await
                .map_err(error)
        }

        async fn delete(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> Result<(), store::Error> {
            draft2::HostBucket::delete(self, bucket, key)
                .await
                .map_err(error)
        }

        async fn exists(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> Result<bool, store::Error> {
            draft2::HostBucket::exists(self, bucket, key)
                .await
                .map_err(error)
        }

        async fn list_keys(
            &mut self,
            bucket: Resource<Bucket>,
            cursor: Option<u64>,
        ) -> Result<store::KeyResponse, store::Error> {
            let name = self.bucket_name(&bucket).map_err(error)?;
            let after = match cursor {
                Some(number) => Some(self.kv_cursors.key(number).map_err(|e| error(e.into()))?),
                None => None,
            };
            let page = self
                .kv_call()
                .list_keys(&name, after.as_deref())
                .await
                .map_err(error)?;
            Ok(store::KeyResponse {
                keys: page.keys,
                cursor: page.cursor.map(|key| self.kv_cursors.hand_out(key)),
            })
        }

        async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
            draft2::HostBucket::drop(self, bucket).await
        }
    }

    impl atomics::Host for HostState {
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
                .kv_call()
                .increment(&name, &key, delta, true)
                .await
                .map_err(error)?;
            u64::try_from(sum)
                .map_err(|_| store::Error::Other(format!("the counter is negative ({sum})")))
        }
    }

    impl batch::Host for HostState {
        async fn get_many(
            &mut self,
            bucket: Resource<Bucket>,
            keys: Vec<String>,
        ) -> Result<Vec<Option<(String, Vec<u8>)>>, store::Error> {
            super::batch::Host::get_many(self, bucket, keys)
                .await
                .map_err(error)
        }

        async fn set_many(
            &mut self,
            bucket: Resource<Bucket>,
            key_values: Vec<(String, Vec<u8>)>,
        ) -> Result<(), store::Error> {
            super::batch::Host::set_many(self, bucket, key_values)
                .await
                .map_err(error)
        }

        async fn delete_many(
            &mut self,
            bucket: Resource<Bucket>,
            keys: Vec<String>,
        ) -> Result<(), store::Error> {
            super::batch::Host::delete_many(self, bucket, keys)
                .await
                .map_err(error)
        }
    }
}
