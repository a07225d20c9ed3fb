//! Durable state: a key-value store that outlives the call, through the standard
//! `wasi:keyvalue` interface (0.2.0-draft2).
//!
//! Every call runs in a fresh instance, so memory is gone when it returns; what a plugin must
//! remember goes here. The operator grants it in the plugin's manifest, with quotas:
//!
//! ```toml
//! [keyvalue]
//! buckets = ["default"]
//! ```
//!
//! Without that grant, [`Store::open`] fails with [`StateError::NotGranted`]. The data is the
//! plugin's own (keyed by its name: no other plugin can read or change it), survives restarts
//! and reloads, and with Redis is shared by every replica.
//!
//! ```no_run
//! use mcpbox_sdk::state::Store;
//!
//! let store = Store::open_default()?;
//! let visits = store.increment("visits", 1)?;
//! store.set("last-visitor", &"ada")?;
//! let name: Option<String> = store.get("last-visitor")?;
//! let notes = store.keys("note:")?;
//! # Ok::<(), mcpbox_sdk::state::StateError>(())
//! ```
//!
//! Values set with [`Store::set`] are JSON; [`Store::increment`] keeps a decimal integer, which
//! reads back with `get::<i64>`. A call may run more than once (a retried input request does),
//! so prefer idempotent writes, or [`Store::update`] for read-modify-write.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::wasi::keyvalue::{atomics, batch, store};

/// Why a state operation failed. Its text is written for the model and the operator: a tool
/// that returns it as its error gives a clear `isError` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// The operator did not grant this bucket (`[keyvalue] buckets` in the manifest).
    NotGranted(String),
    /// The host has no such store.
    NoSuchStore(String),
    /// The store refused or failed: a quota, an invalid key, the store unavailable. The text
    /// says which (quota errors name the plugin and the limit).
    Store(String),
    /// A value was not the JSON the caller expected, or could not be encoded.
    Json(String),
    /// [`Store::update`] kept losing races with concurrent writers.
    Contended(String),
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotGranted(bucket) => write!(
                f,
                "state is not available: bucket `{bucket}` is not granted to this plugin \
                 (the operator grants it in the plugin's manifest: [keyvalue] buckets = [\"{bucket}\"])"
            ),
            Self::NoSuchStore(bucket) => write!(f, "the host has no key-value store `{bucket}`"),
            Self::Store(message) | Self::Json(message) | Self::Contended(message) => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for StateError {}

impl From<store::Error> for StateError {
    fn from(error: store::Error) -> Self {
        match error {
            store::Error::NoSuchStore => Self::NoSuchStore(String::new()),
            store::Error::AccessDenied => Self::NotGranted(String::new()),
            store::Error::Other(message) => Self::Store(message),
        }
    }
}

/// One page of a bucket's keys: see [`Store::keys_page`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPage {
    /// The keys, in byte order: at most 1,000, which is also the most one batch call takes,
    /// so a page can always be passed to [`Store::get_many`] or [`Store::delete_many`].
    pub keys: Vec<String>,
    /// The last key of this page when there may be more: pass it to get the next page.
    pub cursor: Option<String>,
}

/// How many times [`Store::update`] retries after losing a race.
const UPDATE_ATTEMPTS: usize = 32;

/// An open bucket of the plugin's state.
pub struct Store {
    bucket: store::Bucket,
    name: String,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("bucket", &self.name).finish()
    }
}

impl Store {
    /// Open the bucket `name` (one the manifest grants).
    pub fn open(name: &str) -> Result<Self, StateError> {
        let bucket = store::open(name).map_err(|e| match e {
            store::Error::AccessDenied => StateError::NotGranted(name.to_owned()),
            store::Error::NoSuchStore => StateError::NoSuchStore(name.to_owned()),
            store::Error::Other(message) => StateError::Store(message),
        })?;
        Ok(Self {
            bucket,
            name: name.to_owned(),
        })
    }

    /// Open the bucket named `default`.
    pub fn open_default() -> Result<Self, StateError> {
        Self::open("default")
    }

    /// The bucket's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON value at `key`, if any.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StateError> {
        self.get_bytes(key)?
            .map(|bytes| {
                serde_json::from_slice(&bytes).map_err(|e| {
                    StateError::Json(format!(
                        "the value at `{key}` is not the expected JSON: {e}"
                    ))
                })
            })
            .transpose()
    }

    /// Store `value` as JSON at `key`.
    pub fn set<T: Serialize + ?Sized>(&self, key: &str, value: &T) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| StateError::Json(format!("cannot encode the value for `{key}`: {e}")))?;
        self.set_bytes(key, &bytes)
    }

    /// The raw bytes at `key`, if any.
    pub fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.bucket.get(key)?)
    }

    /// Store raw bytes at `key`.
    pub fn set_bytes(&self, key: &str, value: &[u8]) -> Result<(), StateError> {
        Ok(self.bucket.set(key, value)?)
    }

    /// Remove `key` (nothing happens if it is absent).
    pub fn delete(&self, key: &str) -> Result<(), StateError> {
        Ok(self.bucket.delete(key)?)
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &str) -> Result<bool, StateError> {
        Ok(self.bucket.exists(key)?)
    }

    /// Add `delta` to the integer at `key` (absent counts as 0) and return the sum,
    /// atomically: concurrent calls (and replicas sharing Redis) lose no update.
    pub fn increment(&self, key: &str, delta: i64) -> Result<i64, StateError> {
        Ok(atomics::increment(&self.bucket, key, delta)?)
    }

    /// One page of the bucket's keys, in byte order: the first keys after `cursor` (`None`:
    /// from the start). The cursor is a key (the last one of the previous page), so keys
    /// added or deleted meanwhile, even by another call, never make a later page skip a key
    /// that existed throughout; a cursor that is no longer a key is still a position.
    pub fn keys_page(&self, cursor: Option<&str>) -> Result<KeyPage, StateError> {
        let page = self.bucket.list_keys(cursor)?;
        Ok(KeyPage {
            keys: page.keys,
            cursor: page.cursor,
        })
    }

    /// Remove `keys` (at most 1,000, a page of [`Store::keys_page`]) in one host call.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), StateError> {
        Ok(batch::delete_many(&self.bucket, keys)?)
    }

    /// Every key that starts with `prefix` (`""`: all), sorted. It reads every page: for many
    /// keys, prefer [`Store::keys_page`] and handle a page at a time.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>, StateError> {
        let mut keys = Vec::new();
        let mut cursor = None;
        loop {
            let page = self.bucket.list_keys(cursor.as_deref())?;
            keys.extend(page.keys.into_iter().filter(|k| k.starts_with(prefix)));
            match page.cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The JSON values at `keys` (at most 1,000, a page of [`Store::keys_page`]), in order
    /// (`None` where absent), in one host call.
    pub fn get_many<T: DeserializeOwned>(
        &self,
        keys: &[String],
    ) -> Result<Vec<Option<T>>, StateError> {
        batch::get_many(&self.bucket, keys)?
            .into_iter()
            .map(|entry| {
                entry
                    .map(|(key, bytes)| {
                        serde_json::from_slice(&bytes).map_err(|e| {
                            StateError::Json(format!(
                                "the value at `{key}` is not the expected JSON: {e}"
                            ))
                        })
                    })
                    .transpose()
            })
            .collect()
    }

    /// Read-modify-write of the JSON value at `key`, atomically: `change` gets the current
    /// value (`None`: absent) and returns the new one (or `None` to leave the key as it is),
    /// which is stored only if nobody wrote `key` in between; otherwise `change` runs again
    /// on the newer value. Returns what was stored.
    pub fn update<T, F>(&self, key: &str, mut change: F) -> Result<Option<T>, StateError>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> Option<T>,
    {
        let mut cas = atomics::Cas::new(&self.bucket, key)?;
        for _ in 0..UPDATE_ATTEMPTS {
            let current = cas
                .current()?
                .map(|bytes| {
                    serde_json::from_slice(&bytes).map_err(|e| {
                        StateError::Json(format!(
                            "the value at `{key}` is not the expected JSON: {e}"
                        ))
                    })
                })
                .transpose()?;
            let Some(next) = change(current) else {
                return Ok(None);
            };
            let bytes = serde_json::to_vec(&next).map_err(|e| {
                StateError::Json(format!("cannot encode the value for `{key}`: {e}"))
            })?;
            match atomics::swap(cas, &bytes) {
                Ok(()) => return Ok(Some(next)),
                Err(atomics::CasError::CasFailed(newer)) => cas = newer,
                Err(atomics::CasError::StoreError(e)) => return Err(e.into()),
            }
        }
        Err(StateError::Contended(format!(
            "could not update `{key}`: it kept changing under {UPDATE_ATTEMPTS} attempts"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SECURITY.md quotes this text for a bucket that is not granted.
    #[test]
    fn a_refusal_says_what_to_grant() {
        assert_eq!(
            StateError::NotGranted("x".to_owned()).to_string(),
            "state is not available: bucket `x` is not granted to this plugin (the operator grants it in the plugin's manifest: [keyvalue] buckets = [\"x\"])"
        );
        assert_eq!(
            StateError::NoSuchStore("y".to_owned()).to_string(),
            "the host has no key-value store `y`"
        );
        for message in ["quota exceeded: …", "bad json", "lost 32 races"] {
            for error in [
                StateError::Store(message.to_owned()),
                StateError::Json(message.to_owned()),
                StateError::Contended(message.to_owned()),
            ] {
                assert_eq!(error.to_string(), message);
            }
        }
    }

    #[test]
    fn the_host_s_errors_map_to_their_kinds() {
        assert_eq!(
            StateError::from(store::Error::AccessDenied),
            StateError::NotGranted(String::new())
        );
        assert_eq!(
            StateError::from(store::Error::NoSuchStore),
            StateError::NoSuchStore(String::new())
        );
        assert_eq!(
            StateError::from(store::Error::Other("Redis is down".to_owned())),
            StateError::Store("Redis is down".to_owned())
        );
    }
}
