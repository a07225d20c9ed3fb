//! `wasi:keyvalue@0.2.0-draft2` (store, atomics, batch), and the earlier `0.2.0-draft`, for
//! plugins, on the host's [`StateService`]: deny by default, one namespace per plugin, quotas
//! from its manifest.
//!
//! The interface is linked for every plugin, so any component that imports it loads; what a
//! call may do is decided here. `open` succeeds only for a bucket the plugin's manifest grants
//! (`[keyvalue] buckets`), and every operation addresses the backend as (this plugin, that
//! bucket, key): the plugin name comes from the host, never from the guest. A grant's caller
//! buckets are the caller's own namespace, or with `caller-scope = "session"` that namespace
//! in the store of the client session the call came in (`kv::session_store`, dropped when
//! the session ends; a call outside any session gets its caller's). Every failure is
//! an `error` value the guest sees, never a trap, and a refusal is also logged once per call
//! so the operator learns which grant is missing.
//!
//! `list-keys` cursors are keys (see `kv`): draft2's string cursor is the last key of the
//! previous page, passed through as it is. The earlier draft's cursors are `u64`, which
//! cannot hold a key: the host hands out numbers standing for the keys
//! ([`v0_2_0_draft::DraftCursors`]), valid within the call that received them (every call runs in a
//! fresh instance, so a plugin pages within one call anyway).
//!
//! Shaped like wasmtime's own WASI capabilities: the capability owns its per-call state
//! ([`KeyValueCtx`]); the host traits are implemented on a borrowed view of it and of the
//! call's handle table ([`KeyValueView`]), which the store's state hands out through one
//! accessor given to [`add_to_linker`]. Each interface version is its own module ([`v0_2_0_draft2`],
//! [`v0_2_0_draft`]) over the shared logic here; the generated code is in [`bindings`].
//!
//! It never names the store's state type: the store reaches it through the view.

mod bindings;
mod v0_2_0_draft;
mod v0_2_0_draft2;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use self::bindings::v0_2_0_draft2::wasi::keyvalue::store;
use super::caller::CallerIdentity;
use crate::kv::{self, KvError, Quota, StateService, check_cursor, check_key};
use crate::policy::KvGrant;
use crate::policy::PluginName;

/// The most keys one batch operation may name.
pub const MAX_BATCH_KEYS: usize = 1000;
/// The most value bytes one `get-many` returns: host memory the plugin's own limit does not
/// count until the values reach it.
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// An open bucket.
pub struct Bucket {
    target: BucketRef,
}

/// Where an open bucket's operations go: the namespace (the plugin's, or the caller's own in
/// it for a caller bucket) and the bucket's name, which the plugin's grant names.
#[derive(Clone)]
pub struct BucketRef {
    space: Arc<str>,
    name: Arc<str>,
    /// A caller bucket: its writes count against the caller's quotas and the plugin's total.
    caller: bool,
    /// A session-scoped caller bucket: in that session's own store (`kv::session_store`).
    session: Option<u64>,
}

/// A compare-and-swap in progress: the key, and its value when the handle was made.
pub struct Cas {
    bucket: BucketRef,
    key: String,
    snapshot: Option<Vec<u8>>,
}

/// What one call into one plugin may do with state, and what the call has done so far: the
/// service, the plugin's grant (if any), and the earlier draft's cursors it was handed.
pub struct KeyValueCtx {
    plugin: PluginName,
    /// Whose its caller buckets are (none: no caller, the host reads the plugin's lists).
    caller: Option<Arc<CallerIdentity>>,
    service: Arc<StateService>,
    grant: Option<Arc<KvGrant>>,
    /// Set when the call is refused a grant (shared with the call's other capabilities).
    denied: Arc<AtomicBool>,
    /// Whether a refused `open` was logged in this call already.
    denial_logged: bool,
    /// The earlier draft's numeric `list-keys` cursors this call was handed.
    draft_cursors: v0_2_0_draft::DraftCursors,
    /// The client session the call came in (none: outside any session).
    session: Option<u64>,
}

impl KeyValueCtx {
    /// State access for one call into `plugin`, which holds `grant` (none: every `open` is
    /// refused). `denied` is set when an `open` is refused.
    pub fn new(
        plugin: PluginName,
        service: Arc<StateService>,
        grant: Option<Arc<KvGrant>>,
        caller: Option<Arc<CallerIdentity>>,
        denied: Arc<AtomicBool>,
    ) -> Self {
        Self {
            plugin,
            caller,
            service,
            grant,
            denied,
            denial_logged: false,
            draft_cursors: v0_2_0_draft::DraftCursors::default(),
            session: None,
        }
    }

    /// This state access, for a call that came in client session `session`: a grant's
    /// session-scoped caller buckets are that session's own.
    #[must_use]
    pub fn in_session(mut self, session: Option<u64>) -> Self {
        self.session = session;
        self
    }

    /// The quota of the plugin's shared buckets, and of one caller's own.
    fn quotas(&self) -> (Quota, Quota) {
        let Some(grant) = &self.grant else {
            let none = Quota {
                max_bytes: 0,
                max_keys: 0,
                max_value_bytes: 0,
                total: None,
            };
            return (none, none);
        };
        let shared = Quota {
            max_bytes: grant.max_bytes,
            max_keys: grant.max_keys,
            max_value_bytes: grant.max_value_bytes,
            total: None,
        };
        let caller = Quota {
            max_bytes: grant.caller_max_bytes,
            max_keys: grant.caller_max_keys,
            max_value_bytes: grant.max_value_bytes,
            total: Some(kv::Total {
                max_bytes: grant.max_bytes,
                max_keys: grant.max_keys,
            }),
        };
        (shared, caller)
    }
}

/// The `wasi:keyvalue` host traits' view of one call: its [`KeyValueCtx`] and the table its
/// handles live in.
pub struct KeyValueView<'a> {
    /// The call's key-value state.
    pub ctx: &'a mut KeyValueCtx,
    /// The call's handles (bucket and CAS handles among them).
    pub table: &'a mut ResourceTable,
}

/// The [`HasData`] marker under which `wasi:keyvalue` is linked: its host data is a
/// [`KeyValueView`].
pub struct KeyValue;

impl HasData for KeyValue {
    type Data<'a> = KeyValueView<'a>;
}

/// Link `wasi:keyvalue` (both versions) for every plugin; `view` reaches the capability from
/// the store's state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KeyValueView<'_>,
) -> wasmtime::Result<()> {
    use self::bindings::{v0_2_0_draft, v0_2_0_draft2};
    v0_2_0_draft2::wasi::keyvalue::store::add_to_linker::<T, KeyValue>(linker, view)?;
    v0_2_0_draft2::wasi::keyvalue::atomics::add_to_linker::<T, KeyValue>(linker, view)?;
    v0_2_0_draft2::wasi::keyvalue::batch::add_to_linker::<T, KeyValue>(linker, view)?;
    v0_2_0_draft::wasi::keyvalue::store::add_to_linker::<T, KeyValue>(linker, view)?;
    v0_2_0_draft::wasi::keyvalue::atomics::add_to_linker::<T, KeyValue>(linker, view)?;
    v0_2_0_draft::wasi::keyvalue::batch::add_to_linker::<T, KeyValue>(linker, view)?;
    Ok(())
}

impl From<KvError> for store::Error {
    fn from(error: KvError) -> Self {
        Self::Other(error.to_string())
    }
}

/// The operations both versions share, in draft2's terms (its error type); the earlier draft
/// maps the errors to its own.
impl KeyValueView<'_> {
    /// What an operation needs, owned: the view borrows the store's state, which is not
    /// `Sync`, so nothing of it may be held across an `await`.
    fn call(&self) -> KvCall {
        let (quota, caller_quota) = self.ctx.quotas();
        KvCall {
            plugin: self.ctx.plugin.clone(),
            service: Arc::clone(&self.ctx.service),
            in_memory: self.ctx.grant.as_ref().is_some_and(|grant| grant.in_memory),
            quota,
            caller_quota,
        }
    }

    /// The bucket behind a handle.
    fn bucket_name(&mut self, bucket: &Resource<Bucket>) -> Result<BucketRef, store::Error> {
        self.table
            .get(bucket)
            .map(|b| b.target.clone())
            .map_err(|e| store::Error::Other(format!("invalid bucket handle: {e}")))
    }

    /// `open`: a handle to `identifier` if the plugin's grant names it; otherwise the call is
    /// marked denied and the refusal logged (once per call).
    async fn open_bucket(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        // A caller bucket's namespace needs the caller's id (made on first use in the call);
        // nothing of the view is held across the wait.
        let own = self
            .ctx
            .grant
            .as_ref()
            .is_some_and(|grant| grant.caller_buckets.contains(&identifier));
        let caller_space = match (own, self.ctx.caller.clone()) {
            (false, _) => None,
            (true, None) => {
                return Err(store::Error::Other(format!(
                    "`{identifier}` is a caller bucket (each caller's own), and this call has \
                     no caller: the host is reading the plugin's lists"
                )));
            }
            (true, Some(identity)) => {
                let id = identity.id().await.map_err(|why| {
                    store::Error::Other(format!(
                        "cannot open the caller's own `{identifier}`: {why}"
                    ))
                })?;
                Some(Arc::<str>::from(kv::caller_space(&self.ctx.plugin, id)))
            }
        };
        let ctx = &mut *self.ctx;
        let shared = ctx
            .grant
            .as_ref()
            .is_some_and(|grant| grant.buckets.contains(&identifier));
        let space = caller_space.unwrap_or_else(|| Arc::from(&*ctx.plugin));
        if !(shared || own) {
            ctx.denied.store(true, Ordering::Relaxed);
            crate::metrics::metrics().denial(&ctx.plugin, crate::metrics::Grant::Keyvalue);
            if !ctx.denial_logged {
                ctx.denial_logged = true;
                tracing::warn!(
                    plugin = &*ctx.plugin,
                    bucket = %crate::engine::log_line(&identifier, 256),
                    "refused: the plugin opened a key-value bucket its manifest does not grant \
                     (grant it with [keyvalue] buckets = [\"…\"], or caller-buckets for each \
                     caller's own)"
                );
            }
            return Err(store::Error::AccessDenied);
        }
        // Outside any session (a 2026-07-28 request over HTTP), the caller's own.
        let session = ctx
            .grant
            .as_ref()
            .filter(|grant| own && grant.per_session)
            .and(ctx.session);
        self.table
            .push(Bucket {
                target: BucketRef {
                    space,
                    name: identifier.into(),
                    caller: own,
                    session,
                },
            })
            .map_err(|e| store::Error::Other(format!("cannot open another bucket handle: {e}")))
    }

    /// `get-many`: at most [`MAX_BATCH_KEYS`] keys and [`MAX_BATCH_BYTES`] of values.
    async fn get_many_values(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(keys.len())?;
        let call = self.call();
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

    /// `set-many`: at most [`MAX_BATCH_KEYS`] keys.
    async fn set_many_values(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(key_values.len())?;
        let call = self.call();
        for (key, value) in key_values {
            call.set(&name, &key, value).await?;
        }
        Ok(())
    }

    /// `delete-many`: at most [`MAX_BATCH_KEYS`] keys.
    async fn delete_many_keys(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        check_batch(keys.len())?;
        let call = self.call();
        for key in keys {
            call.delete(&name, &key).await?;
        }
        Ok(())
    }
}

/// One operation's plugin, service and quotas.
struct KvCall {
    plugin: PluginName,
    service: Arc<StateService>,
    /// Whether the plugin's state is kept in this process's memory.
    in_memory: bool,
    /// For the plugin's shared buckets.
    quota: Quota,
    /// For a caller's own.
    caller_quota: Quota,
}

impl KvCall {
    /// The backend of `bucket`, as a WIT error when it cannot be opened.
    async fn backend(&self, bucket: &BucketRef) -> Result<Arc<dyn kv::StateStore>, store::Error> {
        if let Some(session) = bucket.session {
            return Ok(kv::session_store(session));
        }
        self.service
            .store(self.in_memory)
            .await
            .map(Arc::clone)
            .map_err(|e| self.report(e))
    }

    /// The quota a write to `bucket` counts against.
    fn quota_of(&self, bucket: &BucketRef) -> Quota {
        if bucket.caller {
            self.caller_quota
        } else {
            self.quota
        }
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

    async fn get(&self, bucket: &BucketRef, key: &str) -> Result<Option<Vec<u8>>, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        backend
            .get(&bucket.space, &bucket.name, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn set(&self, bucket: &BucketRef, key: &str, value: Vec<u8>) -> Result<(), store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        backend
            .set(
                &bucket.space,
                &bucket.name,
                key,
                value,
                self.quota_of(bucket),
            )
            .await
            .map_err(|e| self.report(e))
    }

    async fn delete(&self, bucket: &BucketRef, key: &str) -> Result<(), store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        backend
            .delete(&bucket.space, &bucket.name, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn exists(&self, bucket: &BucketRef, key: &str) -> Result<bool, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        backend
            .exists(&bucket.space, &bucket.name, key)
            .await
            .map_err(|e| self.report(e))
    }

    async fn list_keys(
        &self,
        bucket: &BucketRef,
        after: Option<&str>,
    ) -> Result<kv::KeyPage, store::Error> {
        if let Some(after) = after {
            check_cursor(after).map_err(store::Error::from)?;
        }
        let backend = self.backend(bucket).await?;
        backend
            .list_keys(&bucket.space, &bucket.name, after)
            .await
            .map_err(|e| self.report(e))
    }

    /// `unsigned`: the earlier draft's `u64` counters, which refuse a negative sum.
    async fn increment(
        &self,
        bucket: &BucketRef,
        key: &str,
        delta: i64,
        unsigned: bool,
    ) -> Result<i64, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        backend
            .increment(
                &bucket.space,
                &bucket.name,
                key,
                delta,
                unsigned,
                self.quota_of(bucket),
            )
            .await
            .map_err(|e| self.report(e))
    }

    /// `Ok(None)`: swapped; `Ok(Some(latest))`: the value had changed to `latest`.
    async fn swap(
        &self,
        bucket: &BucketRef,
        key: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<Option<Option<Vec<u8>>>, store::Error> {
        check_key(key).map_err(store::Error::from)?;
        let backend = self.backend(bucket).await?;
        let swapped = backend
            .swap(
                &bucket.space,
                &bucket.name,
                key,
                expected,
                value,
                self.quota_of(bucket),
            )
            .await
            .map_err(|e| self.report(e))?;
        if swapped {
            return Ok(None);
        }
        let latest = backend
            .get(&bucket.space, &bucket.name, key)
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
