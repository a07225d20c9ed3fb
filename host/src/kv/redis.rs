//! The shared backend: Redis, for replicas that must see each other's writes.
//!
//! Layout: each (plugin, bucket) is one hash, `mcpbox:kv:<len>:<plugin>:<bucket>`, whose
//! fields are the keys. The plugin name's length comes first, so no bucket name can make one
//! plugin's hash name equal another's (`mcpbox:kv:1:a:b:c` is plugin `a`, bucket `b:c`;
//! plugin `a:b` would be `mcpbox:kv:3:a:b:…`). Each plugin's usage (bytes, keys) is the hash
//! `mcpbox:usage:<len>:<plugin>`, and the set `mcpbox:buckets:<len>:<plugin>` names its
//! buckets for operators. Every write is one Lua script that checks the quota, writes and
//! updates the usage atomically, so replicas cannot race past a quota or lose an increment;
//! a script that refuses (quota, not a counter, a negative unsigned counter) writes nothing.
//!
//! Listing: beside each bucket's hash, a sorted set `mcpbox:index:<len>:<plugin>:<bucket>`
//! holds its keys, all with score 0, so they sort by their bytes (as on disk); the same
//! scripts that add or remove a hash field add or remove its member. A page is
//! `ZRANGEBYLEX index (CURSOR + LIMIT 0 1001`: ordered, at most [`LIST_PAGE_KEYS`] keys, and
//! resumed strictly after the last key returned, so keys deleted or added meanwhile never make
//! a later page skip a key that existed throughout (`HSCAN`, used before, returned pages over
//! its `COUNT` hint and cursors that skip under deletes). A bucket written before the index
//! existed (its size differs from the hash's) has its index rebuilt by the listing script.
//!
//! Durability is Redis's own (configure `appendonly yes` with `appendfsync always` for the
//! embedded backend's guarantee). The connection is a `ConnectionManager`: when Redis goes
//! away, calls fail within [`OPERATION_TIMEOUT`] with an error naming the server, and the
//! manager reconnects when it returns.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};

mod scripts;

use self::scripts::{CLEAR, DELETE, INCREMENT, LIST, SET};
use super::{
    BoxFuture, CALLER_SEPARATOR, EntryInfo, KeyPage, KvError, LIST_PAGE_KEYS, Quota, QuotaKind,
    StateStore, Usage, add_counter, bytes, check_value, negative_counter, not_a_counter, owner_of,
    whose,
};

/// The longest one operation may take, connecting included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(3);

/// The key of callers' ids ([`StateStore::host_key`]).
const HOST_KEY: &str = "mcpbox:meta:caller-id-key";

/// A Redis server.
pub struct RedisStore {
    connection: ConnectionManager,
    server: String,
    set: Script,
    increment: Script,
    delete: Script,
    clear: Script,
    list: Script,
}

/// Check that `url` is a Redis URL the client accepts.
pub fn check_url(url: &str) -> Result<(), KvError> {
    redis::Client::open(url).map(drop).map_err(|e| {
        KvError::Unavailable(format!(
            "invalid Redis URL (expected redis://[user:password@]host[:port][/db]): {e}"
        ))
    })
}

/// The server a URL names, without credentials.
pub fn describe_url(url: &str) -> String {
    redis::Client::open(url)
        .map(|client| client.get_connection_info().addr().to_string())
        .unwrap_or_else(|_| "an invalid URL".to_owned())
}

/// A lazily connecting, reconnecting connection to the Redis at `url`, with mcpbox's timeouts
/// (1 s to connect, 2 s per command), and the server's address for messages.
pub(super) fn lazy_connection(url: &str) -> Result<(ConnectionManager, String), KvError> {
    let client = redis::Client::open(url)
        .map_err(|e| KvError::Unavailable(format!("invalid Redis URL: {e}")))?;
    let server = client.get_connection_info().addr().to_string();
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    let connection = ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| KvError::Unavailable(format!("Redis at {server}: {e}")))?;
    Ok((connection, server))
}

/// `work` (a Redis operation on the server at `server`) within `limit`; a failure or a
/// timeout is [`KvError::Unavailable`] naming the server.
pub(super) async fn within<T>(
    server: &str,
    limit: Duration,
    work: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, KvError> {
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(KvError::Unavailable(format!("Redis at {server}: {e}"))),
        Err(_) => Err(KvError::Unavailable(format!(
            "Redis at {server} did not answer within {} ms",
            limit.as_millis()
        ))),
    }
}

impl RedisStore {
    /// A backend for `url`. Connects lazily: mcpbox starts whether or not Redis is up, and
    /// calls that need it fail clearly until it is.
    pub fn connect(url: &str) -> Result<Self, KvError> {
        let (connection, server) = lazy_connection(url)?;
        Ok(Self {
            connection,
            server,
            set: Script::new(SET),
            increment: Script::new(INCREMENT),
            delete: Script::new(DELETE),
            clear: Script::new(CLEAR),
            list: Script::new(LIST),
        })
    }

    /// Run one operation with a fresh handle on the shared connection, bounded in time.
    async fn run<T, F>(&self, work: impl FnOnce(ConnectionManager) -> F) -> Result<T, KvError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(OPERATION_TIMEOUT, work(self.connection.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.error(&e)),
            Err(_) => Err(KvError::Unavailable(format!(
                "Redis at {} did not answer within {} s",
                self.server,
                OPERATION_TIMEOUT.as_secs()
            ))),
        }
    }

    /// [`Self::run`] for a read, tried once more if the connection had dropped (Redis came
    /// back since the last call): reads are safe to repeat, writes are not.
    async fn read<T, F>(&self, work: impl Fn(ConnectionManager) -> F) -> Result<T, KvError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(OPERATION_TIMEOUT, work(self.connection.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_connection_dropped() || e.is_io_error() => {
                tracing::debug!(server = %self.server, "retrying a read after: {e}");
                self.run(work).await
            }
            Ok(Err(e)) => Err(self.error(&e)),
            Err(_) => Err(KvError::Unavailable(format!(
                "Redis at {} did not answer within {} s",
                self.server,
                OPERATION_TIMEOUT.as_secs()
            ))),
        }
    }

    fn error(&self, e: &redis::RedisError) -> KvError {
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
        {
            KvError::Unavailable(format!("cannot reach Redis at {}: {e}", self.server))
        } else {
            KvError::Backend(format!("Redis at {}: {e}", self.server))
        }
    }

    /// Map a script's quota answer `{1, which, amount}` for the namespace `space` to the
    /// error (the same words as the embedded store's).
    fn quota_error(space: &str, which: &str, amount: u64, quota: Quota) -> KvError {
        let caller = owner_of(space).is_some();
        let total = quota.total.unwrap_or(super::Total {
            max_bytes: quota.max_bytes,
            max_keys: quota.max_keys,
        });
        let keys = |kind, max: u64, total| KvError::Quota {
            whose: whose(space, total),
            kind,
            what: format!("would hold {amount} keys"),
            limit: format!("{max} keys"),
        };
        let size = |kind, max: u64, total| KvError::Quota {
            whose: whose(space, total),
            kind,
            what: format!("would use {}", bytes(amount)),
            limit: bytes(max),
        };
        match (which, caller) {
            ("keys", true) => keys(QuotaKind::CallerKeys, quota.max_keys, false),
            ("keys", false) => keys(QuotaKind::Keys, quota.max_keys, false),
            ("total-keys", _) => keys(QuotaKind::Keys, total.max_keys, true),
            ("total-bytes", _) => size(QuotaKind::Bytes, total.max_bytes, true),
            (_, true) => size(QuotaKind::CallerBytes, quota.max_bytes, false),
            (_, false) => size(QuotaKind::Bytes, quota.max_bytes, false),
        }
    }

    /// Remove one namespace's data with the `CLEAR` script; how many keys went.
    async fn clear_space(&self, space: &str) -> Result<u64, KvError> {
        let (owner, id) = space.split_once(CALLER_SEPARATOR).unwrap_or((space, ""));
        self.run(move |mut c| async move {
            self.clear
                .key(usage_key(space))
                .key(buckets_key(space))
                .key(usage_key(owner))
                .key(callers_key(owner))
                .arg(hash_prefix(space))
                .arg(index_prefix(space))
                .arg(id)
                .invoke_async(&mut c)
                .await
        })
        .await
    }

    /// Run the `SET` script; `Ok(false)` when its condition did not hold.
    async fn write(
        &self,
        (plugin, bucket, key): (&str, &str, &str),
        value: Vec<u8>,
        quota: Quota,
        condition: Condition<'_>,
    ) -> Result<bool, KvError> {
        let (mode, expected) = match condition {
            Condition::Always => ("set", &b""[..]),
            Condition::Absent => ("absent", &b""[..]),
            Condition::Equal(old) => ("equal", old),
        };
        // The value's own limit needs no server state: checked here, as on disk.
        check_value(plugin, value.len() as u64, quota)?;
        let answer: (u8, String, u64) = self
            .run(|mut c| async move {
                let total = Totalled::of(plugin, quota);
                self.set
                    .key(hash(plugin, bucket))
                    .key(usage_key(plugin))
                    .key(buckets_key(plugin))
                    .key(index(plugin, bucket))
                    .key(usage_key(total.owner))
                    .key(callers_key(total.owner))
                    .arg(key)
                    .arg(value)
                    .arg(quota.max_bytes)
                    .arg(quota.max_keys)
                    .arg(mode)
                    .arg(bucket)
                    .arg(expected)
                    .arg(total.max_bytes)
                    .arg(total.max_keys)
                    .arg(total.id)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        match answer {
            (0, ..) => Ok(true),
            (1, which, amount) => Err(Self::quota_error(plugin, &which, amount, quota)),
            (2, ..) => Ok(false),
            other => Err(KvError::Backend(format!(
                "Redis at {}: unexpected answer {other:?}",
                self.server
            ))),
        }
    }
}

/// What the scripts need to count a write in a caller's namespace against the plugin's total:
/// the plugin, the limits and the caller's id as script arguments (empty strings for a
/// plugin's own namespace, which the scripts read as "no total").
struct Totalled<'a> {
    owner: &'a str,
    max_bytes: String,
    max_keys: String,
    id: &'a str,
}

impl<'a> Totalled<'a> {
    fn of(space: &'a str, quota: Quota) -> Self {
        match (space.split_once(CALLER_SEPARATOR), quota.total) {
            (Some((owner, id)), Some(total)) => Self {
                owner,
                max_bytes: total.max_bytes.to_string(),
                max_keys: total.max_keys.to_string(),
                id,
            },
            _ => Self {
                owner: owner_of(space).unwrap_or(space),
                max_bytes: String::new(),
                max_keys: String::new(),
                id: "",
            },
        }
    }
}

/// When the `SET` script writes.
enum Condition<'a> {
    Always,
    /// Only if the key is absent.
    Absent,
    /// Only if the key holds exactly this.
    Equal(&'a [u8]),
}

/// The hash of one plugin's bucket.
fn hash(plugin: &str, bucket: &str) -> String {
    format!("{}{bucket}", hash_prefix(plugin))
}

/// The sorted set of one plugin's bucket's keys.
fn index(plugin: &str, bucket: &str) -> String {
    format!("{}{bucket}", index_prefix(plugin))
}

/// What every key index of `plugin` starts with.
fn index_prefix(plugin: &str) -> String {
    format!("mcpbox:index:{}:{plugin}:", plugin.len())
}

/// What every hash of `plugin` starts with.
fn hash_prefix(plugin: &str) -> String {
    format!("mcpbox:kv:{}:{plugin}:", plugin.len())
}

fn usage_key(plugin: &str) -> String {
    format!("mcpbox:usage:{}:{plugin}", plugin.len())
}

fn buckets_key(plugin: &str) -> String {
    format!("mcpbox:buckets:{}:{plugin}", plugin.len())
}

/// The set of the ids of `plugin`'s callers that have a namespace in it.
fn callers_key(plugin: &str) -> String {
    format!("mcpbox:callers:{}:{plugin}", plugin.len())
}

impl StateStore for RedisStore {
    fn get<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, KvError>> {
        Box::pin(self.read(move |mut c| async move { c.hget(hash(plugin, bucket), key).await }))
    }

    fn set<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        Box::pin(async move {
            self.write((plugin, bucket, key), value, quota, Condition::Always)
                .await
                .map(drop)
        })
    }

    fn delete<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        Box::pin(async move {
            let _removed: u8 = self
                .run(|mut c| async move {
                    let (owner, id) = plugin
                        .split_once(CALLER_SEPARATOR)
                        .map_or((plugin, None), |(owner, id)| (owner, Some(id)));
                    self.delete
                        .key(hash(plugin, bucket))
                        .key(usage_key(plugin))
                        .key(index(plugin, bucket))
                        .key(usage_key(owner))
                        .key(buckets_key(plugin))
                        .key(callers_key(owner))
                        .arg(key)
                        .arg(if id.is_some() { "1" } else { "0" })
                        .arg(id.unwrap_or(""))
                        .invoke_async(&mut c)
                        .await
                })
                .await?;
            Ok(())
        })
    }

    fn exists<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, KvError>> {
        Box::pin(self.read(move |mut c| async move { c.hexists(hash(plugin, bucket), key).await }))
    }

    fn list_keys<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>> {
        Box::pin(async move {
            let start = match after {
                Some(after) => {
                    let mut start = b"(".to_vec();
                    start.extend_from_slice(after.as_bytes());
                    start
                }
                None => b"-".to_vec(),
            };
            // One more than a page, to know whether there is another.
            let mut keys: Vec<Vec<u8>> = self
                .read(|mut c| {
                    let start = start.clone();
                    async move {
                        self.list
                            .key(hash(plugin, bucket))
                            .key(index(plugin, bucket))
                            .arg(start)
                            .arg(LIST_PAGE_KEYS + 1)
                            .invoke_async(&mut c)
                            .await
                    }
                })
                .await?;
            let more = keys.len() > LIST_PAGE_KEYS;
            keys.truncate(LIST_PAGE_KEYS);
            let keys: Vec<String> = keys
                .into_iter()
                .map(|key| String::from_utf8_lossy(&key).into_owned())
                .collect();
            let cursor = if more { keys.last().cloned() } else { None };
            Ok(KeyPage { keys, cursor })
        })
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
        Box::pin(async move {
            let answer: (u8, String, u64) = self
                .run(|mut c| async move {
                    let total = Totalled::of(plugin, quota);
                    self.increment
                        .key(hash(plugin, bucket))
                        .key(usage_key(plugin))
                        .key(buckets_key(plugin))
                        .key(index(plugin, bucket))
                        .key(usage_key(total.owner))
                        .key(callers_key(total.owner))
                        .arg(key)
                        .arg(delta)
                        .arg(quota.max_bytes)
                        .arg(quota.max_keys)
                        .arg(bucket)
                        .arg(if unsigned { "1" } else { "0" })
                        .arg(total.max_bytes)
                        .arg(total.max_keys)
                        .arg(total.id)
                        .invoke_async(&mut c)
                        .await
                })
                .await?;
            match answer {
                (0, sum, _) => sum.parse().map_err(|_| {
                    KvError::Backend(format!(
                        "Redis at {} returned a non-integer sum",
                        self.server
                    ))
                }),
                (1, which, amount) => Err(Self::quota_error(plugin, &which, amount, quota)),
                // The same errors, in the same words, as the embedded store's.
                (3, ..) => Err(not_a_counter()),
                (4, current, _) => Err(current
                    .parse::<i64>()
                    .map_err(|_| not_a_counter())
                    .and_then(|current| add_counter(current, delta, unsigned))
                    .err()
                    .unwrap_or_else(not_a_counter)),
                (5, sum, _) => Err(sum
                    .parse::<i64>()
                    .map_or_else(|_| not_a_counter(), negative_counter)),
                other => Err(KvError::Backend(format!(
                    "Redis at {}: unexpected answer {other:?}",
                    self.server
                ))),
            }
        })
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
        Box::pin(async move {
            match expected {
                None => {
                    self.write((plugin, bucket, key), value, quota, Condition::Absent)
                        .await
                }
                Some(old) => {
                    self.write((plugin, bucket, key), value, quota, Condition::Equal(&old))
                        .await
                }
            }
        })
    }

    fn entries<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Vec<EntryInfo>, KvError>> {
        Box::pin(async move {
            let mut buckets: Vec<String> = self
                .run(|mut c| async move { c.smembers(buckets_key(plugin)).await })
                .await?;
            buckets.sort();
            let mut out = Vec::new();
            for bucket in buckets {
                let name = hash(plugin, &bucket);
                let mut keys: Vec<String> = self
                    .run(|mut c| {
                        let name = name.clone();
                        async move { c.hkeys(name).await }
                    })
                    .await?;
                keys.sort();
                if keys.is_empty() {
                    // A bucket whose keys were all deleted: an empty pipeline is an error.
                    continue;
                }
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("HSTRLEN").arg(&name).arg(key);
                }
                let sizes: Vec<u64> = self
                    .run(|mut c| async move { pipe.query_async(&mut c).await })
                    .await?;
                out.extend(keys.into_iter().zip(sizes).map(|(key, size)| EntryInfo {
                    bucket: bucket.clone(),
                    key,
                    size,
                }));
            }
            Ok(out)
        })
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Usage, KvError>> {
        Box::pin(async move {
            let (bytes, keys): (Option<u64>, Option<u64>) = self
                .run(|mut c| async move {
                    redis::cmd("HMGET")
                        .arg(usage_key(plugin))
                        .arg("bytes")
                        .arg("keys")
                        .query_async(&mut c)
                        .await
                })
                .await?;
            Ok(Usage {
                bytes: bytes.unwrap_or(0),
                keys: keys.unwrap_or(0),
            })
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), KvError>> {
        Box::pin(async move {
            let _: String = self
                .read(|mut c| async move { redis::cmd("PING").query_async(&mut c).await })
                .await?;
            Ok(())
        })
    }

    fn clear<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<u64, KvError>> {
        Box::pin(async move {
            let mut removed = 0;
            // A plugin's namespace: its callers' namespaces go first, each taking its share
            // off the plugin's total.
            if owner_of(plugin).is_none() {
                let ids: Vec<String> = self
                    .run(|mut c| async move { c.smembers(callers_key(plugin)).await })
                    .await?;
                for id in ids {
                    removed += self.clear_space(&super::caller_space(plugin, &id)).await?;
                }
                let _: u64 = self
                    .run(|mut c| async move { c.del(callers_key(plugin)).await })
                    .await?;
            }
            Ok(removed + self.clear_space(plugin).await?)
        })
    }

    fn callers<'a>(
        &'a self,
        plugin: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Usage)>, KvError>> {
        Box::pin(async move {
            let mut ids: Vec<String> = self
                .run(|mut c| async move { c.smembers(callers_key(plugin)).await })
                .await?;
            ids.sort();
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let usage = self.usage(&super::caller_space(plugin, &id)).await?;
                out.push((id, usage));
            }
            Ok(out)
        })
    }

    fn host_key(&self) -> BoxFuture<'_, Result<[u8; 32], KvError>> {
        Box::pin(async move {
            let candidate = super::random_key();
            // The first process to ask sets it; every later one reads the same.
            let _: Option<String> = self
                .run(|mut c| async move {
                    redis::cmd("SET")
                        .arg(HOST_KEY)
                        .arg(candidate.as_slice())
                        .arg("NX")
                        .query_async(&mut c)
                        .await
                })
                .await?;
            let stored: Vec<u8> = self
                .read(|mut c| async move { c.get(HOST_KEY).await })
                .await?;
            <[u8; 32]>::try_from(stored.as_slice()).map_err(|_| {
                KvError::Backend(format!(
                    "Redis at {}: {HOST_KEY} holds {} bytes, not 32; delete it to make a new \
                     key (every plugin's callers then get new ids)",
                    self.server,
                    stored.len()
                ))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_collide_across_plugins() {
        // Plugin `a`, bucket `b:c` against plugin `a:b`, bucket `c`.
        assert_ne!(hash("a", "b:c"), hash("a:b", "c"));
        assert_ne!(hash("a", ":1:a:x"), hash("a:1:a", "x"));
        assert_eq!(hash("todo", "default"), "mcpbox:kv:4:todo:default");
        assert_eq!(index("todo", "default"), "mcpbox:index:4:todo:default");
        assert_ne!(index("a", "b:c"), index("a:b", "c"));
    }

    #[test]
    fn urls_are_described_without_credentials() {
        let shown = describe_url("redis://user:secret@127.0.0.1:6390/2");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("6390"), "{shown}");
        assert!(check_url("http://x").is_err());
    }
}
