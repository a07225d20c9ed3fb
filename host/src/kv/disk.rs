//! The embedded backend: one `redb` database file in the state directory.
//!
//! Entries are keyed by the tuple (plugin, bucket, key), so a namespace is a key prefix the
//! database compares field by field: no string a plugin passes can reach into another
//! plugin's range. Each plugin's usage is a row beside its entries, updated in the same write
//! transaction, so quotas hold exactly. Transactions commit with `Durability::Immediate`
//! (fsync before `commit` returns): a write acknowledged to a plugin survives `kill -9`.
//!
//! redb is synchronous; writes (each with its `fsync`) run on tokio's blocking pool, reads on
//! the calling thread (they wait on no writer, and are served from redb's cache). redb admits
//! one writer at a time, which serialises read-modify-write operations (`increment`, `swap`)
//! for free. The file is locked while open: a second mcpbox on the same directory gets a clear
//! error (give it its own `--state-dir`, or share state through Redis).

use std::path::PathBuf;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{
    BoxFuture, EntryInfo, KeyPage, KvError, LIST_PAGE_KEYS, Quota, StateStore, Usage, add_counter,
    callers_range, owner_of, parse_counter, released, usages_after,
};

/// The database's file name in the state directory.
pub const FILE_NAME: &str = "state.redb";

/// (plugin, bucket, key) → value.
const ENTRIES: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("entries");
/// namespace → (bytes, keys). A plugin's own row counts its callers' namespaces too.
const USAGE: TableDefinition<&str, (u64, u64)> = TableDefinition::new("usage");
/// The host's own values (the key of callers' ids).
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The embedded database.
pub struct DiskStore {
    db: Arc<Database>,
    path: Arc<PathBuf>,
}

impl DiskStore {
    /// Open (or create) the database in `dir`, creating the directory (mode 0700) if needed.
    pub async fn open(dir: PathBuf) -> Result<Self, KvError> {
        let path = dir.join(FILE_NAME);
        let shown = path.clone();
        let db = tokio::task::spawn_blocking(move || {
            create_private_dir(&dir)?;
            let db = Database::create(&path).map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => KvError::Unavailable(format!(
                    "{} is in use by another mcpbox process; give each process its own \
                     --state-dir, or let them share state through --state redis://…",
                    path.display()
                )),
                other => KvError::Unavailable(format!("cannot open {}: {other}", path.display())),
            })?;
            // Both tables exist from the start, so readers never meet a missing table.
            let txn = db.begin_write().map_err(backend)?;
            txn.open_table(ENTRIES).map_err(backend)?;
            txn.open_table(USAGE).map_err(backend)?;
            txn.open_table(META).map_err(backend)?;
            txn.commit().map_err(backend)?;
            Ok::<_, KvError>(db)
        })
        .await
        .map_err(|e| KvError::Backend(format!("the open task failed: {e}")))??;
        Ok(Self {
            db: Arc::new(db),
            path: Arc::new(shown),
        })
    }

    /// Run `work` on the blocking pool with the database.
    fn blocking<'a, T: Send + 'static>(
        &'a self,
        work: impl FnOnce(&Database) -> Result<T, KvError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, KvError>> {
        let db = Arc::clone(&self.db);
        let path = Arc::clone(&self.path);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || work(&db))
                .await
                .map_err(|e| {
                    KvError::Backend(format!("a task on {} failed: {e}", path.display()))
                })?
        })
    }

    /// Run a read with the database on the calling thread. A read takes no lock a writer
    /// holds (redb's readers see the last commit) and is served from redb's page cache once
    /// warm, so a hand-off to the blocking pool (tens of µs) would cost more than the read;
    /// a read that misses the cache waits on one page from the local disk.
    fn read<'a, T: Send + 'static>(
        &'a self,
        work: impl FnOnce(&Database) -> Result<T, KvError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, KvError>> {
        Box::pin(std::future::ready(work(&self.db)))
    }

    /// A read-modify-write of one key in one write transaction: `change` gets the current
    /// value and returns the new one (or `None` to write nothing) and what to answer.
    fn update<T: Send + 'static>(
        &self,
        plugin: &str,
        bucket: &str,
        key: &str,
        quota: Quota,
        change: impl FnOnce(Option<&[u8]>) -> Result<(Option<Vec<u8>>, T), KvError> + Send + 'static,
    ) -> BoxFuture<'_, Result<T, KvError>> {
        let (plugin, bucket, key) = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            let answer = {
                let mut entries = txn.open_table(ENTRIES).map_err(backend)?;
                let mut usage_table = txn.open_table(USAGE).map_err(backend)?;
                let old = entries
                    .get((plugin.as_str(), bucket.as_str(), key.as_str()))
                    .map_err(backend)?
                    .map(|guard| guard.value().to_vec());
                let (new, answer) = change(old.as_deref())?;
                let Some(new) = new else {
                    return Ok(answer);
                };
                let lengths = (old.as_ref().map(|v| v.len() as u64), new.len() as u64);
                let usage = read_usage(&usage_table, &plugin)?;
                let (after, total) = usages_after(&plugin, &key, lengths, quota, usage, |owner| {
                    read_usage(&usage_table, owner)
                })?;
                entries
                    .insert(
                        (plugin.as_str(), bucket.as_str(), key.as_str()),
                        new.as_slice(),
                    )
                    .map_err(backend)?;
                usage_table
                    .insert(plugin.as_str(), (after.bytes, after.keys))
                    .map_err(backend)?;
                if let Some((owner, after)) = total {
                    usage_table
                        .insert(owner, (after.bytes, after.keys))
                        .map_err(backend)?;
                }
                answer
            };
            txn.commit().map_err(backend)?;
            Ok(answer)
        })
    }
}

impl StateStore for DiskStore {
    fn get<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, KvError>> {
        let (plugin, bucket, key) = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let entries = txn.open_table(ENTRIES).map_err(backend)?;
            Ok(entries
                .get((plugin.as_str(), bucket.as_str(), key.as_str()))
                .map_err(backend)?
                .map(|guard| guard.value().to_vec()))
        })
    }

    fn set<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
        value: Vec<u8>,
        quota: Quota,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        self.update(plugin, bucket, key, quota, move |_| Ok((Some(value), ())))
    }

    fn delete<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>> {
        let (plugin, bucket, key) = (plugin.to_owned(), bucket.to_owned(), key.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            {
                let mut entries = txn.open_table(ENTRIES).map_err(backend)?;
                let removed = entries
                    .remove((plugin.as_str(), bucket.as_str(), key.as_str()))
                    .map_err(backend)?
                    .map(|guard| guard.value().len() as u64);
                let Some(size) = removed else {
                    return Ok(());
                };
                let mut usage_table = txn.open_table(USAGE).map_err(backend)?;
                let freed = Usage {
                    bytes: size + key.len() as u64,
                    keys: 1,
                };
                release(&mut usage_table, &plugin, freed)?;
                if let Some(owner) = owner_of(&plugin) {
                    release(&mut usage_table, owner, freed)?;
                }
            }
            txn.commit().map_err(backend)?;
            Ok(())
        })
    }

    fn exists<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, KvError>> {
        let get = self.get(plugin, bucket, key);
        Box::pin(async move { Ok(get.await?.is_some()) })
    }

    fn list_keys<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>> {
        use std::ops::Bound;
        let (plugin, bucket) = (plugin.to_owned(), bucket.to_owned());
        let after = after.map(str::to_owned);
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let entries = txn.open_table(ENTRIES).map_err(backend)?;
            // Exactly this bucket's entries after the cursor (keys come in byte order):
            // whatever the cursor, nothing outside the bucket is visited.
            let end = successor(&bucket);
            let start = match &after {
                Some(after) => Bound::Excluded((plugin.as_str(), bucket.as_str(), after.as_str())),
                None => Bound::Included((plugin.as_str(), bucket.as_str(), "")),
            };
            let range = (start, Bound::Excluded((plugin.as_str(), end.as_str(), "")));
            let mut keys = Vec::new();
            let mut more = false;
            for entry in entries.range(range).map_err(backend)? {
                let (k, _) = entry.map_err(backend)?;
                let (p, b, key) = k.value();
                if p != plugin || b != bucket {
                    break;
                }
                if keys.len() == LIST_PAGE_KEYS {
                    more = true;
                    break;
                }
                keys.push(key.to_owned());
            }
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
        // A refusal returns before the write: the transaction is dropped, nothing is written.
        self.update(plugin, bucket, key, quota, move |old| {
            let sum = add_counter(parse_counter(old)?, delta, unsigned)?;
            Ok((Some(sum.to_string().into_bytes()), sum))
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
        self.update(plugin, bucket, key, quota, move |old| {
            if old != expected.as_deref() {
                return Ok((None, false));
            }
            Ok((Some(value), true))
        })
    }

    fn entries<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Vec<EntryInfo>, KvError>> {
        let plugin = plugin.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let entries = txn.open_table(ENTRIES).map_err(backend)?;
            let mut out = Vec::new();
            let end = successor(&plugin);
            for entry in entries
                .range((plugin.as_str(), "", "")..(end.as_str(), "", ""))
                .map_err(backend)?
            {
                let (k, v) = entry.map_err(backend)?;
                let (p, bucket, key) = k.value();
                if p != plugin {
                    break;
                }
                out.push(EntryInfo {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                    size: v.value().len() as u64,
                });
            }
            Ok(out)
        })
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Usage, KvError>> {
        let plugin = plugin.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let usage = txn.open_table(USAGE).map_err(backend)?;
            Ok(usage
                .get(plugin.as_str())
                .map_err(backend)?
                .map(|guard| {
                    let (bytes, keys) = guard.value();
                    Usage { bytes, keys }
                })
                .unwrap_or_default())
        })
    }

    fn clear<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<u64, KvError>> {
        let plugin = plugin.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            let mut removed = 0u64;
            {
                let mut entries = txn.open_table(ENTRIES).map_err(backend)?;
                let mut usage = txn.open_table(USAGE).map_err(backend)?;
                let end = successor(&plugin);
                entries
                    .retain_in(
                        (plugin.as_str(), "", "")..(end.as_str(), "", ""),
                        |(p, _, _), _| {
                            let mine = p == plugin;
                            removed += u64::from(mine);
                            !mine
                        },
                    )
                    .map_err(backend)?;
                let held = read_usage(&usage, &plugin)?;
                usage.remove(plugin.as_str()).map_err(backend)?;
                match owner_of(&plugin) {
                    // One caller's data: the plugin's total goes down by what it held.
                    Some(owner) => release(&mut usage, owner, held)?,
                    // A plugin's data: every caller's namespace in it goes too.
                    None => {
                        let (from, to) = callers_range(&plugin);
                        entries
                            .retain_in((from.as_str(), "", "")..(to.as_str(), "", ""), |_, _| {
                                removed += 1;
                                false
                            })
                            .map_err(backend)?;
                        usage
                            .retain_in(from.as_str()..to.as_str(), |_, _| false)
                            .map_err(backend)?;
                    }
                }
            }
            txn.commit().map_err(backend)?;
            Ok(removed)
        })
    }

    fn callers<'a>(
        &'a self,
        plugin: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Usage)>, KvError>> {
        let plugin = plugin.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let usage = txn.open_table(USAGE).map_err(backend)?;
            let (from, to) = callers_range(&plugin);
            let mut out = Vec::new();
            for row in usage.range(from.as_str()..to.as_str()).map_err(backend)? {
                let (space, value) = row.map_err(backend)?;
                let (bytes, keys) = value.value();
                if let Some(id) = space.value().strip_prefix(from.as_str()) {
                    out.push((id.to_owned(), Usage { bytes, keys }));
                }
            }
            Ok(out)
        })
    }

    fn host_key(&self) -> BoxFuture<'_, Result<[u8; 32], KvError>> {
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            let key = {
                let mut meta = txn.open_table(META).map_err(backend)?;
                let stored = meta
                    .get(HOST_KEY)
                    .map_err(backend)?
                    .and_then(|guard| <[u8; 32]>::try_from(guard.value()).ok());
                match stored {
                    Some(key) => key,
                    None => {
                        let key = super::random_key();
                        meta.insert(HOST_KEY, key.as_slice()).map_err(backend)?;
                        key
                    }
                }
            };
            txn.commit().map_err(backend)?;
            Ok(key)
        })
    }
}

/// The name of the host key's row in [`META`].
const HOST_KEY: &str = "caller-id-key";

/// The usage row of `space` (nothing stored: zero).
fn read_usage(
    table: &impl ReadableTable<&'static str, (u64, u64)>,
    space: &str,
) -> Result<Usage, KvError> {
    Ok(table
        .get(space)
        .map_err(backend)?
        .map(|guard| {
            let (bytes, keys) = guard.value();
            Usage { bytes, keys }
        })
        .unwrap_or_default())
}

/// Take `freed` off the usage row of `space` ([`released`]: a caller's empty row goes).
fn release(
    table: &mut redb::Table<&'static str, (u64, u64)>,
    space: &str,
    freed: Usage,
) -> Result<(), KvError> {
    match released(space, read_usage(table, space)?, freed) {
        Some(left) => table
            .insert(space, (left.bytes, left.keys))
            .map_err(backend)?,
        None => table.remove(space).map_err(backend)?,
    };
    Ok(())
}

/// The first string greater than `s`: `s` followed by NUL. Tuples compare field by field, so
/// `(…, s, k) < (…, successor(s), "")` for every `k`, and no other name falls in between: the
/// exclusive upper bound of the entries whose field is exactly `s`.
fn successor(s: &str) -> String {
    format!("{s}\0")
}

/// Any redb failure, as a backend error.
fn backend(error: impl Into<redb::Error>) -> KvError {
    KvError::Backend(error.into().to_string())
}

/// Create `dir` (and its parents) readable by this user only.
fn create_private_dir(dir: &std::path::Path) -> Result<(), KvError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| {
        KvError::Unavailable(format!(
            "cannot create the state directory {}: {e}",
            dir.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[tokio::test]
    async fn pages_and_listings_stay_inside_their_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
        super::super::suite::namespaces(&store).await;
    }

    #[tokio::test]
    async fn callers_spaces_count_against_their_quota_and_the_plugins_total() {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
        super::super::suite::caller_spaces(&store).await;
    }

    /// Single-process latency of `set`, `get` and `increment` on the debug build (a
    /// measurement for BENCHMARKS.md, not a check): `cargo test -p mcpbox --lib
    /// kv::disk::tests::latency -- --ignored --nocapture`. The database is under `target/`,
    /// on the disk the state directory would be on (not a tmpfs).
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a measurement, run by hand"]
    #[expect(clippy::print_stderr, reason = "the measurement's report")]
    async fn latency() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-state");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(base).unwrap();
        let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
        for (op, p50, p99) in super::super::suite::latency(&store, 2000).await {
            eprintln!("{FILE_NAME} {op}: p50 {p50:.1} µs, p99 {p99:.1} µs");
        }
    }
}
