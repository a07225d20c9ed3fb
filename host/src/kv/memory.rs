//! The in-memory store: plugin state kept in this process's memory, for plugins whose manifest
//! says `in-memory = true` (state a native server would keep in a variable). The same
//! namespaces, quotas and rules as the other backends (it passes the same checks), no disk and
//! no `fsync`; everything is gone when the process stops, and no other process sees it.
//!
//! Uses: nothing else in the crate.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{
    BoxFuture, EntryInfo, KeyPage, KvError, LIST_PAGE_KEYS, Quota, StateStore, Usage, add_counter,
    callers_range, owner_of, parse_counter, random_key, released, usages_after,
};

/// (namespace, bucket, key): ordered as the other backends order them.
type Address = (String, String, String);

/// The store: entries and each namespace's usage under one lock. Every operation is a few
/// map lookups, so it runs on the calling thread.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    host_key: [u8; 32],
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<Address, Vec<u8>>,
    usage: BTreeMap<String, Usage>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store, with a host key of its own.
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            host_key: random_key(),
        }
    }

    /// The maps. No operation panics while holding them, and every write checks before it
    /// changes anything, so a poisoned lock still guards consistent data.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A read-modify-write of one key, as the embedded store's: `change` gets the current
    /// value and returns the new one (or `None` to write nothing) and what to answer.
    fn update<T>(
        &self,
        space: &str,
        bucket: &str,
        key: &str,
        quota: Quota,
        change: impl FnOnce(Option<&[u8]>) -> Result<(Option<Vec<u8>>, T), KvError>,
    ) -> Result<T, KvError> {
        let mut inner = self.lock();
        let address = (space.to_owned(), bucket.to_owned(), key.to_owned());
        let old = inner.entries.get(&address);
        let old_len = old.map(|v| v.len() as u64);
        let (new, answer) = change(old.map(Vec::as_slice))?;
        let Some(new) = new else {
            return Ok(answer);
        };
        let held = |space: &str| inner.usage.get(space).copied().unwrap_or_default();
        let (after, total) = usages_after(
            space,
            key,
            (old_len, new.len() as u64),
            quota,
            held(space),
            |owner| Ok(held(owner)),
        )?;
        inner.entries.insert(address, new);
        inner.usage.insert(space.to_owned(), after);
        if let Some((owner, after)) = total {
            inner.usage.insert(owner.to_owned(), after);
        }
        Ok(answer)
    }
}

/// Take `freed` off the usage of `space` ([`released`]: a caller's empty row goes).
fn release(usage: &mut BTreeMap<String, Usage>, space: &str, freed: Usage) {
    let held = usage.get(space).copied().unwrap_or_default();
    match released(space, held, freed) {
        Some(left) => usage.insert(space.to_owned(), left),
        None => usage.remove(space),
    };
}

/// The entries of exactly the namespace `space`.
fn in_space<'a>(
    entries: &'a BTreeMap<Address, Vec<u8>>,
    space: &'a str,
) -> impl Iterator<Item = (&'a Address, &'a Vec<u8>)> + 'a {
    let start = (space.to_owned(), String::new(), String::new());
    entries
        .range((Bound::Included(start), Bound::Unbounded))
        .take_while(move |((s, _, _), _)| s == space)
}

impl StateStore for MemoryStore {
    fn get<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, KvError>> {
        let address = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        let value = self.lock().entries.get(&address).cloned();
        Box::pin(std::future::ready(Ok(value)))
    }

    fn set<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        let done = self.update(plugin, bucket, key, quota, move |_| Ok((Some(value), ())));
        Box::pin(std::future::ready(done))
    }

    fn delete<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        let mut inner = self.lock();
        let address = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        if let Some(value) = inner.entries.remove(&address) {
            let freed = Usage {
                bytes: (value.len() + key.len()) as u64,
                keys: 1,
            };
            release(&mut inner.usage, plugin, freed);
            if let Some(owner) = owner_of(plugin) {
                release(&mut inner.usage, owner, freed);
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn exists<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, KvError>> {
        let address = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        let found = self.lock().entries.contains_key(&address);
        Box::pin(std::future::ready(Ok(found)))
    }

    fn list_keys<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>> {
        let inner = self.lock();
        let start = match after {
            Some(after) => {
                Bound::Excluded((plugin.to_owned(), bucket.to_owned(), after.to_owned()))
            }
            None => Bound::Included((plugin.to_owned(), bucket.to_owned(), String::new())),
        };
        // Exactly this bucket's entries after the cursor: nothing outside it is visited.
        let mut keys = Vec::new();
        let mut more = false;
        for ((p, b, key), _) in inner.entries.range((start, Bound::Unbounded)) {
            if p != plugin || b != bucket {
                break;
            }
            if keys.len() == LIST_PAGE_KEYS {
                more = true;
                break;
            }
            keys.push(key.clone());
        }
        let cursor = if more { keys.last().cloned() } else { None };
        Box::pin(std::future::ready(Ok(KeyPage { keys, cursor })))
    }

    fn increment<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        delta: i64,
        unsigned: bool,
        quota: Quota,
    ) -> BoxFuture<'a, Result<i64, KvError>> {
        // A refusal returns before the write: nothing is written.
        let done = self.update(plugin, bucket, key, quota, move |old| {
            let sum = add_counter(parse_counter(old)?, delta, unsigned)?;
            Ok((Some(sum.to_string().into_bytes()), sum))
        });
        Box::pin(std::future::ready(done))
    }

    fn swap<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<bool, KvError>> {
        let done = self.update(plugin, bucket, key, quota, move |old| {
            if old != expected.as_deref() {
                return Ok((None, false));
            }
            Ok((Some(value), true))
        });
        Box::pin(std::future::ready(done))
    }

    fn entries<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Vec<EntryInfo>, KvError>> {
        let inner = self.lock();
        let out = in_space(&inner.entries, plugin)
            .map(|((_, bucket, key), value)| EntryInfo {
                bucket: bucket.clone(),
                key: key.clone(),
                size: value.len() as u64,
            })
            .collect();
        Box::pin(std::future::ready(Ok(out)))
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Usage, KvError>> {
        let usage = self.lock().usage.get(plugin).copied().unwrap_or_default();
        Box::pin(std::future::ready(Ok(usage)))
    }

    fn clear<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<u64, KvError>> {
        let mut inner = self.lock();
        let Inner { entries, usage } = &mut *inner;
        let mine: Vec<Address> = in_space(entries, plugin).map(|(a, _)| a.clone()).collect();
        let mut removed = mine.len() as u64;
        for address in &mine {
            entries.remove(address);
        }
        let held = usage.remove(plugin).unwrap_or_default();
        match owner_of(plugin) {
            // One caller's data: the plugin's total goes down by what it held.
            Some(owner) => release(usage, owner, held),
            // A plugin's data: every caller's namespace in it goes too.
            None => {
                let (from, to) = callers_range(plugin);
                let start = (from.clone(), String::new(), String::new());
                let end = (to.clone(), String::new(), String::new());
                let theirs: Vec<Address> =
                    entries.range(start..end).map(|(a, _)| a.clone()).collect();
                removed += theirs.len() as u64;
                for address in &theirs {
                    entries.remove(address);
                }
                usage.retain(|space, _| !(from.as_str()..to.as_str()).contains(&space.as_str()));
            }
        }
        Box::pin(std::future::ready(Ok(removed)))
    }

    fn callers<'a>(
        &'a self,
        plugin: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Usage)>, KvError>> {
        let inner = self.lock();
        let (from, to) = callers_range(plugin);
        let out = inner
            .usage
            .range(from.clone()..to)
            .filter_map(|(space, usage)| {
                space
                    .strip_prefix(from.as_str())
                    .map(|id| (id.to_owned(), *usage))
            })
            .collect();
        Box::pin(std::future::ready(Ok(out)))
    }

    fn host_key(&self) -> BoxFuture<'_, Result<[u8; 32], KvError>> {
        Box::pin(std::future::ready(Ok(self.host_key)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[tokio::test]
    async fn it_keeps_every_backends_rules() {
        super::super::suite::namespaces(&MemoryStore::new()).await;
        super::super::suite::caller_spaces(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn quotas_counters_and_swaps_hold_and_each_store_has_its_own_data() {
        let one = MemoryStore::new();
        let two = MemoryStore::new();
        let quota = Quota {
            max_bytes: 64,
            max_keys: 2,
            max_value_bytes: 32,
            total: None,
        };
        assert_eq!(
            one.increment("p", "b", "n", 2, false, quota).await.unwrap(),
            2
        );
        assert_eq!(
            one.increment("p", "b", "n", 3, false, quota).await.unwrap(),
            5
        );
        let negative = one.increment("p", "b", "n", -9, true, quota).await;
        assert!(negative.is_err());
        assert_eq!(one.get("p", "b", "n").await.unwrap(), Some(b"5".to_vec()));
        assert_eq!(two.get("p", "b", "n").await.unwrap(), None);
        let over = one.set("p", "b", "big", vec![0; 33], quota).await;
        assert!(over.is_err_and(|e| e.to_string().contains("max-value-kib")));
        one.set("p", "b", "k", b"v".to_vec(), quota).await.unwrap();
        let third = one.set("p", "b", "k3", b"v".to_vec(), quota).await;
        assert!(third.is_err_and(|e| e.to_string().contains("max-keys")));
        assert_eq!(one.get("p", "b", "k3").await.unwrap(), None);
        let stale = one.swap("p", "b", "k", Some(b"x".to_vec()), b"w".to_vec(), quota);
        assert!(!stale.await.unwrap());
        assert!(
            one.swap("p", "b", "k", Some(b"v".to_vec()), b"w".to_vec(), quota)
                .await
                .unwrap()
        );
        assert_eq!(one.get("p", "b", "k").await.unwrap(), Some(b"w".to_vec()));
        assert_eq!(one.usage("p").await.unwrap(), Usage { bytes: 4, keys: 2 });
        one.delete("p", "b", "k").await.unwrap();
        assert_eq!(one.usage("p").await.unwrap(), Usage { bytes: 2, keys: 1 });
        assert!(!one.exists("p", "b", "k").await.unwrap());
        assert_ne!(one.host_key().await.unwrap(), two.host_key().await.unwrap());
        assert_eq!(one.host_key().await.unwrap(), one.host_key().await.unwrap());
    }
}
