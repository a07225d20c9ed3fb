//! Durable plugin state: the key-value store behind `wasi:keyvalue`, one namespace per plugin.
//!
//! Owns the [`StateStore`] trait and its implementations: an embedded SQLite database on disk
//! (`disk`, the default: it needs no server, and every mcpbox process of the user on one
//! machine may have it open at once), Redis (`redis`, for replicas on several machines that
//! share state), and maps in memory (`memory`, for plugins whose state need not outlive the
//! process: `in-memory = true`); the [`StateService`] that opens the configured one on first
//! use (`service`); and the
//! rules every backend obeys the same way: keys are addressed as (plugin, bucket, key), never
//! as one concatenated string, so nothing a plugin passes as a bucket or key can name another
//! plugin's data; a plugin's total bytes and keys are bounded by its [`Quota`], checked in the
//! same atomic step as the write; a write that returned `Ok` is durable (in memory: kept until
//! the process stops), and one that failed wrote nothing.
//!
//! Every backend lists a bucket's keys the same way: in byte order, at most [`LIST_PAGE_KEYS`]
//! a page (the batch cap too, so a page can always be fed to `delete-many`), and the cursor is
//! the last key of the previous page: the next page starts strictly after it. Deleting or
//! adding keys while paging therefore never makes a later page skip or repeat a key that
//! existed throughout. Any string is a valid position (it need not be a key that exists); one
//! longer than a key can be is refused. Every backend keeps counters the same way too: see
//! `parse_counter`.
//!
//! Also owns the stores of client sessions (`sessions`: `caller-scope = "session"`), and the
//! call ledger (`calls`): tool calls recorded by a balancer's request id in
//! Redis, so a retried request never runs its call twice (`--call-id-header`); the budgets
//! replicas share (`budgets`); and the task records replicas share (`tasks`).
//!
//! The engine links `wasi:keyvalue` to it (`engine/keyvalue/`) and the `mcpbox state` command
//! reads and clears it.
//!
//! Uses: nothing else in the crate.

pub mod budgets;
pub mod calls;
mod disk;
mod memory;
mod redis;
mod service;
mod sessions;
#[doc(hidden)]
pub mod suite;
pub mod tasks;

use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

pub use disk::DiskStore;
pub use memory::MemoryStore;
pub use redis::RedisStore;
pub use service::{StateConfig, StateService};
pub use sessions::{end_session, session_store, sessions_with_state};

/// A boxed future, so that [`StateStore`] is object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The longest key a plugin may use, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// The most keys one `list-keys` page returns (the batch cap of `wasi:keyvalue/batch` too).
pub const LIST_PAGE_KEYS: usize = 1000;

/// How much one namespace may store, all its buckets together: a plugin's own, or one
/// caller's in a plugin ([`caller_space`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Total bytes of its keys and values.
    pub max_bytes: u64,
    /// Number of keys.
    pub max_keys: u64,
    /// The largest single value, in bytes.
    pub max_value_bytes: u64,
    /// For a caller's namespace: what the plugin may hold in all, its own namespace and every
    /// caller's together. A write must fit both.
    pub total: Option<Total>,
}

/// A plugin's total over all its namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Total {
    /// Total bytes of keys and values.
    pub max_bytes: u64,
    /// Number of keys.
    pub max_keys: u64,
}

/// What separates a plugin's name from a caller's id in the caller's namespace. No plugin
/// name can hold it (a plugin's name is a file name), so no plugin's namespace can be another
/// plugin's caller namespace.
pub const CALLER_SEPARATOR: char = '/';

/// The namespace of one caller's own buckets in `plugin`: `plugin/ID`, `id` being the
/// caller's opaque id in that plugin. Backends count it against its [`Quota`] and against the
/// plugin's [`Total`], whose usage is the plugin's own row.
pub fn caller_space(plugin: &str, caller_id: &str) -> String {
    format!("{plugin}{CALLER_SEPARATOR}{caller_id}")
}

/// The plugin a caller's namespace belongs to (`None`: `space` is a plugin's own).
pub fn owner_of(space: &str) -> Option<&str> {
    space.split_once(CALLER_SEPARATOR).map(|(plugin, _)| plugin)
}

impl Quota {
    /// 16 MiB.
    pub const DEFAULT_MAX_BYTES: u64 = 16 << 20;
    /// 10,000 keys.
    pub const DEFAULT_MAX_KEYS: u64 = 10_000;
    /// 1 MiB.
    pub const DEFAULT_MAX_VALUE_BYTES: u64 = 1 << 20;
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_keys: Self::DEFAULT_MAX_KEYS,
            max_value_bytes: Self::DEFAULT_MAX_VALUE_BYTES,
            total: None,
        }
    }
}

/// Which quota a write would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKind {
    /// The plugin's total bytes (`quota-kib` in its manifest).
    Bytes,
    /// The plugin's number of keys (`max-keys`).
    Keys,
    /// The size of one value (`max-value-kib`).
    ValueBytes,
    /// One caller's bytes in a plugin (`caller-quota-kib`).
    CallerBytes,
    /// One caller's number of keys in a plugin (`caller-max-keys`).
    CallerKeys,
}

impl QuotaKind {
    /// The manifest key that sets this quota.
    pub fn manifest_key(self) -> &'static str {
        match self {
            Self::Bytes => "quota-kib",
            Self::Keys => "max-keys",
            Self::ValueBytes => "max-value-kib",
            Self::CallerBytes => "caller-quota-kib",
            Self::CallerKeys => "caller-max-keys",
        }
    }
}

/// What one plugin uses now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of keys and values.
    pub bytes: u64,
    /// Number of keys.
    pub keys: u64,
}

/// Why a key-value operation failed. Each is reported to the plugin as an error value (never a
/// trap), with this text.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KvError {
    /// A write would exceed one of the plugin's quotas; nothing was written.
    #[error(
        "quota exceeded: {whose} {what}, over its limit of {limit} ({key} in its manifest's [keyvalue] table); nothing was written",
        key = kind.manifest_key()
    )]
    Quota {
        /// Whose quota, in words: ``plugin `todo` `` or ``one caller of plugin `todo` ``.
        whose: String,
        /// Which quota.
        kind: QuotaKind,
        /// What the write would have made it use, in words.
        what: String,
        /// The limit, in words.
        limit: String,
    },
    /// The key is empty or too long.
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// `increment` on a value that is not a decimal integer, or past the range of one; nothing
    /// was written.
    #[error("{0}")]
    NotAnInteger(String),
    /// A `list-keys` cursor that cannot be a position in the key order.
    #[error("invalid cursor `{0}`: pass back the cursor a list-keys call returned, or none")]
    InvalidCursor(String),
    /// The store cannot be reached or opened now; the host keeps serving and retries later.
    #[error("the state store is unavailable: {0}")]
    Unavailable(String),
    /// The store failed in some other way.
    #[error("the state store failed: {0}")]
    Backend(String),
}

/// One page of keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPage {
    /// The keys, in byte order, at most [`LIST_PAGE_KEYS`].
    pub keys: Vec<String>,
    /// The last key of this page when there may be more: the next page starts after it.
    pub cursor: Option<String>,
}

/// 32 random bytes from the operating system (two version-4 UUIDs' worth of randomness,
/// 244 bits): the key of callers' ids, made once per store.
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

/// Check a `list-keys` cursor a plugin passed: any string up to [`MAX_KEY_BYTES`] is a
/// position in the key order (the next page starts strictly after it).
pub fn check_cursor(cursor: &str) -> Result<(), KvError> {
    if cursor.len() > MAX_KEY_BYTES {
        return Err(KvError::InvalidCursor(format!(
            "{}… ({} bytes, longer than any key)",
            cursor.chars().take(32).collect::<String>(),
            cursor.len()
        )));
    }
    Ok(())
}

/// One stored entry, for the operator's `mcpbox state ls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: String,
    /// The value's size in bytes.
    pub size: u64,
}

/// Where plugin state is stored. Every operation names the namespace (`plugin`: a plugin's
/// name, or a caller's namespace in it, [`caller_space`]), the bucket and the key as separate
/// values: implementations must keep them apart (no concatenation
/// that a crafted name could break out of), apply quotas atomically with the write, and make
/// an acknowledged write durable.
pub trait StateStore: Send + Sync + 'static {
    /// The value at `key`, if any.
    fn get<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, KvError>>;

    /// Store `value` at `key`, within `quota`.
    fn set<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<(), KvError>>;

    /// Remove `key`, if it exists.
    fn delete<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>>;

    /// Whether `key` exists.
    fn exists<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, KvError>>;

    /// A page of the bucket's keys in byte order: the first [`LIST_PAGE_KEYS`] after `after`
    /// (none: from the start), with the page's last key as the cursor when there are more.
    fn list_keys<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>>;

    /// Add `delta` to the decimal integer at `key` (absent counts as 0) and return the sum,
    /// atomically. With `unsigned`, a negative sum is refused (the earlier draft's counters
    /// are `u64`). A refused increment writes nothing.
    fn increment<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        delta: i64,
        unsigned: bool,
        quota: Quota,
    ) -> BoxFuture<'a, Result<i64, KvError>>;

    /// Store `value` at `key` only if its value is still `expected` (`None`: still absent),
    /// atomically. `Ok(false)`: it had changed, and nothing was written.
    fn swap<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<bool, KvError>>;

    /// Every entry of `plugin`, for operators.
    fn entries<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Vec<EntryInfo>, KvError>>;

    /// What `plugin` uses.
    fn usage<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Usage, KvError>>;

    /// Remove all of `plugin`'s data (a plugin's namespace: its callers' too; a caller's: the
    /// plugin's total goes down by it); how many keys were removed.
    fn clear<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<u64, KvError>>;

    /// The callers with a namespace in `plugin`: each one's id and what it uses.
    fn callers<'a>(
        &'a self,
        plugin: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Usage)>, KvError>>;

    /// The store's own secret key, made on first use and the same for every process sharing
    /// the store: callers' ids in plugins are keyed hashes under it, so they are stable across
    /// restarts and replicas, and unguessable without it.
    fn host_key(&self) -> BoxFuture<'_, Result<[u8; 32], KvError>>;

    /// Whether the store answers now (for readiness probes).
    fn ping(&self) -> BoxFuture<'_, Result<(), KvError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Check a key a plugin passed: non-empty and at most [`MAX_KEY_BYTES`]. Anything else is
/// allowed (`../`, NUL, any Unicode): keys are data inside the plugin's namespace, not paths.
pub fn check_key(key: &str) -> Result<(), KvError> {
    if key.is_empty() {
        return Err(KvError::InvalidKey("a key must not be empty".to_owned()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(KvError::InvalidKey(format!(
            "a key is at most {MAX_KEY_BYTES} bytes; this one is {}",
            key.len()
        )));
    }
    Ok(())
}

/// A value as the decimal integer `increment` keeps (absent: 0). The rule, the same on both
/// backends (it is Redis's `HINCRBY`'s): the value must be the canonical decimal text of a
/// signed 64-bit integer, as `increment` writes it: an optional `-`, then digits with no
/// leading zero (`0` alone for zero). `007`, `+5`, `-0`, ` 5` and `5.0` are not counters.
fn parse_counter(value: Option<&[u8]>) -> Result<i64, KvError> {
    let Some(bytes) = value else {
        return Ok(0);
    };
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| {
            let n = text.parse::<i64>().ok()?;
            (n.to_string() == text).then_some(n)
        })
        .ok_or_else(not_a_counter)
}

/// Why `increment` refuses a value that is not a counter.
fn not_a_counter() -> KvError {
    KvError::NotAnInteger(
        "cannot increment: the key holds a value that is not a decimal integer (the canonical \
         text of a signed 64-bit integer: an optional `-`, digits, no `+` or leading zeros); \
         nothing was written"
            .to_owned(),
    )
}

/// `counter + delta` (refusing a negative sum when `unsigned`), or the error saying why not.
fn add_counter(counter: i64, delta: i64, unsigned: bool) -> Result<i64, KvError> {
    let sum = counter.checked_add(delta).ok_or_else(|| {
        KvError::NotAnInteger(format!(
            "cannot increment: {counter} + {delta} is outside the range of a signed 64-bit \
             integer; nothing was written"
        ))
    })?;
    if unsigned && sum < 0 {
        return Err(negative_counter(sum));
    }
    Ok(sum)
}

/// Why an unsigned `increment` (the earlier draft's) refuses a negative sum.
fn negative_counter(sum: i64) -> KvError {
    KvError::NotAnInteger(format!(
        "cannot increment: the counter would be negative ({sum}), and this interface's counters \
         are unsigned; nothing was written"
    ))
}

/// Check one value's size against `quota`.
fn check_value(space: &str, len: u64, quota: Quota) -> Result<(), KvError> {
    if len > quota.max_value_bytes {
        return Err(KvError::Quota {
            whose: whose(space, false),
            kind: QuotaKind::ValueBytes,
            what: format!("would store a value of {}", bytes(len)),
            limit: bytes(quota.max_value_bytes),
        });
    }
    Ok(())
}

/// Check a write of `key` = `new_len` bytes (replacing `old_len` bytes, or a new key when
/// `None`) against `quota`, given the usage of the namespace `space` before it. Returns the
/// usage after. A caller's namespace is checked against its caller quotas here and against
/// the plugin's total with [`check_total`].
fn check_quota(
    space: &str,
    usage: Usage,
    key: &str,
    old_len: Option<u64>,
    new_len: u64,
    quota: Quota,
) -> Result<Usage, KvError> {
    let kinds = match owner_of(space) {
        Some(_) => (QuotaKind::CallerBytes, QuotaKind::CallerKeys),
        None => (QuotaKind::Bytes, QuotaKind::Keys),
    };
    check_value(space, new_len, quota)?;
    check_limits(
        whose(space, false),
        usage,
        key,
        old_len,
        new_len,
        (quota.max_bytes, quota.max_keys),
        kinds,
    )
}

/// Check the same write against the plugin's `total` (its usage `usage` over all its
/// namespaces).
fn check_total(
    space: &str,
    usage: Usage,
    key: &str,
    old_len: Option<u64>,
    new_len: u64,
    total: Total,
) -> Result<Usage, KvError> {
    check_limits(
        whose(space, true),
        usage,
        key,
        old_len,
        new_len,
        (total.max_bytes, total.max_keys),
        (QuotaKind::Bytes, QuotaKind::Keys),
    )
}

/// A caller's namespace's owner and the plugin's total usage after a write (`None`: the
/// write was to a plugin's own namespace).
type OwnerAfter<'s> = Option<(&'s str, Usage)>;

/// The usages after a write of `key` = `new_len` bytes (replacing `old_len`, or a new key
/// when `None`) to `space`, whose usage is `usage`, checked against `quota`: the namespace's,
/// and for a caller's namespace the plugin's total too (its owner's usage read with
/// `owner_usage`). The embedded and in-memory stores write both in the same step as the
/// entry (Redis does the same in its Lua script).
fn usages_after<'s>(
    space: &'s str,
    key: &str,
    (old_len, new_len): (Option<u64>, u64),
    quota: Quota,
    usage: Usage,
    owner_usage: impl FnOnce(&str) -> Result<Usage, KvError>,
) -> Result<(Usage, OwnerAfter<'s>), KvError> {
    let after = check_quota(space, usage, key, old_len, new_len, quota)?;
    let total = match (owner_of(space), quota.total) {
        (Some(owner), Some(total)) => {
            let usage = owner_usage(owner)?;
            Some((
                owner,
                check_total(space, usage, key, old_len, new_len, total)?,
            ))
        }
        _ => None,
    };
    Ok((after, total))
}

/// What is left of `held` once `freed` goes, or `None` when the row of `space` should go: a
/// caller's row that holds no key any more, so callers who hold nothing cost no row (however
/// many subjects come and go).
fn released(space: &str, held: Usage, freed: Usage) -> Option<Usage> {
    let left = Usage {
        bytes: held.bytes.saturating_sub(freed.bytes),
        keys: held.keys.saturating_sub(freed.keys),
    };
    (left.keys > 0 || owner_of(space).is_none()).then_some(left)
}

/// The namespaces of `plugin`'s callers: every name from `plugin/` up to (not including)
/// `plugin` followed by the separator's successor.
fn callers_range(plugin: &str) -> (String, String) {
    let from = format!("{plugin}{CALLER_SEPARATOR}");
    let next = char::from_u32(CALLER_SEPARATOR as u32 + 1).unwrap_or(char::MAX);
    (from, format!("{plugin}{next}"))
}

/// Whose quota a write to `space` breaks, in words (`total`: the plugin's total).
fn whose(space: &str, total: bool) -> String {
    match owner_of(space) {
        Some(plugin) if total => format!("plugin `{plugin}`, all its callers together,"),
        Some(plugin) => format!("one caller of plugin `{plugin}`"),
        None => format!("plugin `{space}`"),
    }
}

fn check_limits(
    who: String,
    usage: Usage,
    key: &str,
    old_len: Option<u64>,
    new_len: u64,
    (max_bytes, max_keys): (u64, u64),
    (bytes_kind, keys_kind): (QuotaKind, QuotaKind),
) -> Result<Usage, KvError> {
    let key_len = key.len() as u64;
    let (bytes_after, keys_after) = match old_len {
        Some(old) => (usage.bytes.saturating_sub(old) + new_len, usage.keys),
        None => (usage.bytes + key_len + new_len, usage.keys + 1),
    };
    if old_len.is_none() && keys_after > max_keys {
        return Err(KvError::Quota {
            whose: who,
            kind: keys_kind,
            what: format!("would hold {keys_after} keys"),
            limit: format!("{max_keys} keys"),
        });
    }
    if bytes_after > max_bytes && bytes_after > usage.bytes {
        return Err(KvError::Quota {
            whose: who,
            kind: bytes_kind,
            what: format!("would use {}", bytes(bytes_after)),
            limit: bytes(max_bytes),
        });
    }
    Ok(Usage {
        bytes: bytes_after,
        keys: keys_after,
    })
}

fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n < 1 << 20 {
        format!("{n} bytes ({:.1} KiB)", n as f64 / 1024.0)
    } else {
        format!("{n} bytes ({:.1} MiB)", n as f64 / f64::from(1 << 20))
    }
}

#[cfg(test)]
mod tests;
