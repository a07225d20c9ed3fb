//! The shared backend: Redis, for replicas that must see each other's writes.
//!
//! Layout: each (plugin, bucket) is one hash, `mcpbox:kv:<len>:<plugin>:<bucket>`, whose
//! fields are the keys. The plugin name's length comes first, so no bucket name can make one
//! plugin's hash name equal another's (`mcpbox:kv:1:a:b:c` is plugin `a`, bucket `b:c`;
//! plugin `a:b` would be `mcpbox:kv:3:a:b:…`). Each plugin's usage (bytes, keys) is the hash
//! `mcpbox:usage:<len>:<plugin>`, and the set `mcpbox:buckets:<len>:<plugin>` names its
//! buckets for operators. Every write is one Lua script that checks the quota, writes and
//! updates the usage atomically, so replicas cannot race past a quota or lose an increment.
//!
//! Durability is Redis's own (configure `appendonly yes` with `appendfsync always` for the
//! embedded backend's guarantee). The connection is a `ConnectionManager`: when Redis goes
//! away, calls fail within [`OPERATION_TIMEOUT`] with an error naming the server, and the
//! manager reconnects when it returns.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};

use super::{
    Backend, BoxFuture, EntryInfo, KeyPage, KvError, LIST_PAGE_KEYS, Quota, QuotaKind, Usage,
    bytes, check_value,
};

/// The longest one operation may take, connecting included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(3);

/// Store a value, within the quota. KEYS: hash, usage, buckets. ARGV: field, value, max bytes,
/// max keys, mode (`set`, `absent`: only if absent, `equal`: only if the value is ARGV[7]),
/// bucket, expected. Returns {0, '', 0} written, {1, which, amount} over quota, {2, '', 0} not
/// swapped: always three elements.
const SET: &str = r"
local field, value = ARGV[1], ARGV[2]
local current = redis.call('HGET', KEYS[1], field)
if ARGV[5] == 'absent' and current then return {2, '', 0} end
if ARGV[5] == 'equal' and current ~= ARGV[7] then return {2, '', 0} end
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
local keys = tonumber(redis.call('HGET', KEYS[2], 'keys') or '0')
local dbytes, dkeys = #field + #value, 1
if current then dbytes, dkeys = #value - #current, 0 end
if dkeys > 0 and keys + 1 > tonumber(ARGV[4]) then return {1, 'keys', keys + 1} end
if dbytes > 0 and bytes + dbytes > tonumber(ARGV[3]) then return {1, 'bytes', bytes + dbytes} end
redis.call('HSET', KEYS[1], field, value)
redis.call('HINCRBY', KEYS[2], 'bytes', dbytes)
redis.call('HINCRBY', KEYS[2], 'keys', dkeys)
redis.call('SADD', KEYS[3], ARGV[6])
return {0, '', 0}
";

/// Add to a decimal integer. KEYS: hash, usage, buckets. ARGV: field, delta, max bytes, max
/// keys, bucket. Returns {0, sum, 0}, {1, which, amount} over quota, {3, why, 0} not an integer.
const INCREMENT: &str = r"
local field = ARGV[1]
local current = redis.call('HGET', KEYS[1], field)
local keys = tonumber(redis.call('HGET', KEYS[2], 'keys') or '0')
if not current and keys + 1 > tonumber(ARGV[4]) then return {1, 'keys', keys + 1} end
local ok, err = pcall(redis.call, 'HINCRBY', KEYS[1], field, ARGV[2])
if not ok then return {3, tostring(err.err or err), 0} end
local sum = redis.call('HGET', KEYS[1], field)
local dbytes, dkeys = #field + #sum, 1
if current then dbytes, dkeys = #sum - #current, 0 end
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
if dbytes > 0 and bytes + dbytes > tonumber(ARGV[3]) then
  if current then redis.call('HSET', KEYS[1], field, current) else redis.call('HDEL', KEYS[1], field) end
  return {1, 'bytes', bytes + dbytes}
end
redis.call('HINCRBY', KEYS[2], 'bytes', dbytes)
redis.call('HINCRBY', KEYS[2], 'keys', dkeys)
redis.call('SADD', KEYS[3], ARGV[5])
return {0, sum, 0}
";

/// Remove a key. KEYS: hash, usage. ARGV: field.
const DELETE: &str = r"
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'bytes', -(#ARGV[1] + #current))
redis.call('HINCRBY', KEYS[2], 'keys', -1)
return 1
";

/// Remove all of a plugin's data. KEYS: usage, buckets. ARGV: the hash name prefix.
const CLEAR: &str = r"
local removed = 0
for _, bucket in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local hash = ARGV[1] .. bucket
  removed = removed + redis.call('HLEN', hash)
  redis.call('DEL', hash)
end
redis.call('DEL', KEYS[1], KEYS[2])
return removed
";

/// A Redis server.
pub struct RedisBackend {
    connection: ConnectionManager,
    server: String,
    set: Script,
    increment: Script,
    delete: Script,
    clear: Script,
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

impl RedisBackend {
    /// A backend for `url`. Connects lazily: mcpbox starts whether or not Redis is up, and
    /// calls that need it fail clearly until it is.
    pub fn connect(url: &str) -> Result<Self, KvError> {
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
        Ok(Self {
            connection,
            server,
            set: Script::new(SET),
            increment: Script::new(INCREMENT),
            delete: Script::new(DELETE),
            clear: Script::new(CLEAR),
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

    /// Map a script's quota answer `{1, which, amount}` to the error.
    fn quota_error(plugin: &str, which: &str, amount: u64, quota: Quota) -> KvError {
        match which {
            "keys" => KvError::Quota {
                plugin: plugin.to_owned(),
                kind: QuotaKind::Keys,
                what: format!("would hold {amount} keys"),
                limit: format!("{} keys", quota.max_keys),
            },
            _ => KvError::Quota {
                plugin: plugin.to_owned(),
                kind: QuotaKind::Bytes,
                what: format!("would use {}", bytes(amount)),
                limit: bytes(quota.max_bytes),
            },
        }
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
                self.set
                    .key(hash(plugin, bucket))
                    .key(usage_key(plugin))
                    .key(buckets_key(plugin))
                    .arg(key)
                    .arg(value)
                    .arg(quota.max_bytes)
                    .arg(quota.max_keys)
                    .arg(mode)
                    .arg(bucket)
                    .arg(expected)
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

/// When the `SET` script writes.
enum Condition<'a> {
    Always,
    /// Only if the key is absent.
    Absent,
    /// Only if the key holds exactly this.
    Equal(&'a [u8]),
}

/// An `HSCAN` page: the next cursor, and (field, value) pairs.
type ScanPage = (u64, Vec<(Vec<u8>, Vec<u8>)>);

/// The hash of one plugin's bucket.
fn hash(plugin: &str, bucket: &str) -> String {
    format!("{}{bucket}", hash_prefix(plugin))
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

impl Backend for RedisBackend {
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
                    self.delete
                        .key(hash(plugin, bucket))
                        .key(usage_key(plugin))
                        .arg(key)
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
        cursor: Option<u64>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>> {
        Box::pin(async move {
            let (next, pairs): ScanPage = self
                .read(|mut c| async move {
                    redis::cmd("HSCAN")
                        .arg(hash(plugin, bucket))
                        .arg(cursor.unwrap_or(0))
                        .arg("COUNT")
                        .arg(LIST_PAGE_KEYS)
                        .query_async(&mut c)
                        .await
                })
                .await
                .map_err(|e| match (&e, cursor) {
                    (KvError::Backend(_), Some(cursor)) => {
                        KvError::InvalidCursor(cursor.to_string())
                    }
                    _ => e,
                })?;
            Ok(KeyPage {
                keys: pairs
                    .into_iter()
                    .map(|(key, _)| String::from_utf8_lossy(&key).into_owned())
                    .collect(),
                cursor: (next != 0).then_some(next),
            })
        })
    }

    fn increment<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        delta: i64,
        quota: Quota,
    ) -> BoxFuture<'a, Result<i64, KvError>> {
        Box::pin(async move {
            let answer: (u8, String, u64) = self
                .run(|mut c| async move {
                    self.increment
                        .key(hash(plugin, bucket))
                        .key(usage_key(plugin))
                        .key(buckets_key(plugin))
                        .arg(key)
                        .arg(delta)
                        .arg(quota.max_bytes)
                        .arg(quota.max_keys)
                        .arg(bucket)
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
                (3, why, _) => Err(KvError::NotAnInteger(format!(
                    "cannot increment: {}",
                    why.trim_start_matches("ERR ")
                ))),
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
        Box::pin(self.run(move |mut c| async move {
            self.clear
                .key(usage_key(plugin))
                .key(buckets_key(plugin))
                .arg(hash_prefix(plugin))
                .invoke_async(&mut c)
                .await
        }))
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
    }

    #[test]
    fn urls_are_described_without_credentials() {
        let shown = describe_url("redis://user:secret@127.0.0.1:6390/2");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("6390"), "{shown}");
        assert!(check_url("http://x").is_err());
    }
}
