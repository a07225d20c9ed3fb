//! The embedded backend: one SQLite database in the state directory, in WAL mode, which every
//! mcpbox process of the user may have open at once (two desktop clients that each start
//! mcpbox over stdio share one state, with nothing lost).
//!
//! Entries are rows keyed by (plugin, bucket, key): three BLOB columns, compared byte by byte
//! (the order `list-keys` pages in). A namespace and a bucket are found by equality on their
//! own columns, never by a prefix of one concatenated string, so no string a plugin passes can
//! reach into another plugin's range. Each namespace's usage is a row beside its entries,
//! updated in the same transaction, so quotas hold exactly.
//!
//! Every write is one `BEGIN IMMEDIATE` transaction: it takes the database's one write lock
//! before it reads, so a read-modify-write (`increment`, `swap`, a quota check, the host key
//! made once) reads the last commit of every process, and no other writer, in this process
//! or another, comes between its read and its write. A writer that finds the lock held waits
//! for it ([`BUSY_TIMEOUT`]). Commits are `synchronous = FULL`: the write-ahead log is fsynced
//! before `COMMIT` returns, so a write acknowledged to a plugin survives `kill -9` and power
//! loss. A write that fails rolls back whole.
//!
//! Writes run on tokio's blocking pool, one at a time in a process (its one writer
//! connection, behind an async lock). Reads run on the calling thread, each on a connection of
//! its own from a small pool: in WAL mode a reader sees the last commit and waits on no
//! writer (only, rarely, on a process recovering the log after a crash), and it is served from
//! the page cache once warm, so a hand-off to the blocking pool would cost more than the read.
//! The operator's `mcpbox state` reads and clears the same way while servers run.
//!
//! WAL needs memory shared by the processes, so the state directory must be on a local file
//! system (a database that cannot enter WAL mode is refused at open, saying so). The
//! directory is created mode 0700 and the database 0600 (SQLite gives the log and its index
//! the database's mode). The file an earlier mcpbox kept (`state.redb`, which one
//! process held at a time) is imported once, when the database is first opened ([`import`]).

mod import;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, params};

use super::{
    BoxFuture, EntryInfo, KeyPage, KvError, LIST_PAGE_KEYS, Quota, StateStore, Usage, add_counter,
    callers_range, owner_of, parse_counter, released, usages_after,
};

/// The database's file name in the state directory.
pub const FILE_NAME: &str = "state.sqlite";

/// How long a statement waits for a lock another connection holds (another process's write
/// transaction, or a checkpoint) before it fails as unavailable. A write transaction holds the
/// lock for one read-modify-write and its fsync: milliseconds.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle read connections kept for the next reads; more are opened while more reads run at
/// once, and closed after.
const IDLE_READERS: usize = 4;

/// The tables, made once. Names are BLOBs, compared with `memcmp` (byte order, a shorter name
/// before its extensions), and `STRICT` refuses a name bound as text by mistake.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    plugin BLOB NOT NULL,
    bucket BLOB NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (plugin, bucket, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (
    space BLOB NOT NULL PRIMARY KEY,
    bytes INTEGER NOT NULL,
    keys INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name TEXT NOT NULL PRIMARY KEY,
    value BLOB NOT NULL
) STRICT, WITHOUT ROWID;
";

/// The name of the host key's row in `meta` (the key of callers' ids).
const HOST_KEY: &str = "caller-id-key";

/// The embedded database.
pub struct DiskStore {
    /// The one connection this process writes with.
    writer: Arc<tokio::sync::Mutex<Connection>>,
    /// Idle connections to read with.
    readers: std::sync::Mutex<Vec<Connection>>,
    path: Arc<PathBuf>,
}

impl DiskStore {
    /// Open (or create) the database in `dir`, creating the directory (mode 0700) if needed,
    /// and import the state an earlier mcpbox kept there, if not done yet.
    pub async fn open(dir: PathBuf) -> Result<Self, KvError> {
        let path = dir.join(FILE_NAME);
        let shown = path.clone();
        let writer = tokio::task::spawn_blocking(move || {
            create_private_dir(&dir)?;
            let mut writer = connect(&path, true)?;
            // Switching a new database to WAL takes an exclusive lock without SQLite's busy
            // handler: another process opening it at the same moment gets SQLITE_BUSY at once
            // (seen with two desktop clients starting together), so it is tried again here,
            // for as long as a lock is waited for elsewhere.
            let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
            let mode: String = loop {
                match writer.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
                    Ok(mode) => break mode,
                    Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    Err(e) => return Err(failed(&path, &e)),
                }
            };
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(KvError::Unavailable(format!(
                    "cannot open {} in WAL mode (it stays in `{mode}` mode): the state \
                     directory must be on a local file system",
                    path.display()
                )));
            }
            let imported = initialise(&mut writer, &dir, &path)?;
            if let Some(imported) = imported {
                tracing::info!(
                    from = %dir.join(import::FILE_NAME).display(),
                    into = %path.display(),
                    entries = imported.entries,
                    namespaces = imported.spaces,
                    "imported the plugin state of the earlier state file; it is left in place, \
                     unused (delete it once this version is kept)"
                );
            }
            Ok::<_, KvError>(writer)
        })
        .await
        .map_err(|e| KvError::Backend(format!("the open task failed: {e}")))??;
        Ok(Self {
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            readers: std::sync::Mutex::new(Vec::new()),
            path: Arc::new(shown),
        })
    }

    /// Run `work` in one write transaction (`BEGIN IMMEDIATE`) on the blocking pool, and
    /// commit it if it returns `Ok`; an `Err` rolls it back.
    fn write<'a, T: Send + 'static>(
        &'a self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, KvError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, KvError>> {
        let writer = Arc::clone(&self.writer);
        let path = Arc::clone(&self.path);
        Box::pin(async move {
            let mut connection = writer.lock_owned().await;
            tokio::task::spawn_blocking(move || {
                let txn = connection
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| failed(&path, &e))?;
                let answer = work(&txn)?;
                txn.commit().map_err(|e| failed(&path, &e))?;
                Ok(answer)
            })
            .await
            .map_err(|e| {
                KvError::Backend(format!("a task on {} failed: {e}", self.path.display()))
            })?
        })
    }

    /// Run a read on the calling thread, with an idle read connection or a new one.
    fn read<'a, T: Send + 'static>(
        &'a self,
        work: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> BoxFuture<'a, Result<T, KvError>> {
        Box::pin(std::future::ready(self.with_reader(work)))
    }

    fn with_reader<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, KvError> {
        let idle = self
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let connection = match idle {
            Some(connection) => connection,
            None => connect(&self.path, false)?,
        };
        let answer = work(&connection).map_err(|e| failed(&self.path, &e));
        let mut readers = self
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if readers.len() < IDLE_READERS {
            readers.push(connection);
        }
        answer
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
        let path = Arc::clone(&self.path);
        self.write(move |txn| {
            let sql = |e: rusqlite::Error| failed(&path, &e);
            let old = value_of(txn, &plugin, &bucket, &key).map_err(sql)?;
            let (new, answer) = change(old.as_deref())?;
            let Some(new) = new else {
                return Ok(answer);
            };
            let lengths = (old.as_ref().map(|v| v.len() as u64), new.len() as u64);
            let usage = read_usage(txn, &plugin, &path)?;
            let (after, total) = usages_after(&plugin, &key, lengths, quota, usage, |owner| {
                read_usage(txn, owner, &path)
            })?;
            txn.prepare_cached(
                "INSERT INTO entries (plugin, bucket, key, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (plugin, bucket, key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    plugin.as_bytes(),
                    bucket.as_bytes(),
                    key.as_bytes(),
                    new
                ])
            })
            .map_err(sql)?;
            write_usage(txn, &plugin, Some(after), &path)?;
            if let Some((owner, after)) = total {
                write_usage(txn, owner, Some(after), &path)?;
            }
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
        self.read(move |connection| value_of(connection, plugin, bucket, key))
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
        let path = Arc::clone(&self.path);
        self.write(move |txn| {
            let sql = |e: rusqlite::Error| failed(&path, &e);
            let size: Option<i64> = txn
                .prepare_cached(
                    "SELECT length(value) FROM entries WHERE plugin = ?1 AND bucket = ?2 AND key = ?3",
                )
                .and_then(|mut statement| {
                    statement
                        .query_row(
                            params![plugin.as_bytes(), bucket.as_bytes(), key.as_bytes()],
                            |row| row.get(0),
                        )
                        .optional()
                })
                .map_err(sql)?;
            let Some(size) = size else {
                return Ok(());
            };
            txn.prepare_cached(
                "DELETE FROM entries WHERE plugin = ?1 AND bucket = ?2 AND key = ?3",
            )
            .and_then(|mut statement| {
                statement.execute(params![plugin.as_bytes(), bucket.as_bytes(), key.as_bytes()])
            })
            .map_err(sql)?;
            let freed = Usage {
                bytes: size.unsigned_abs() + key.len() as u64,
                keys: 1,
            };
            release(txn, &plugin, freed, &path)?;
            if let Some(owner) = owner_of(&plugin) {
                release(txn, owner, freed, &path)?;
            }
            Ok(())
        })
    }

    fn exists<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, KvError>> {
        self.read(move |connection| {
            connection
                .prepare_cached(
                    "SELECT 1 FROM entries WHERE plugin = ?1 AND bucket = ?2 AND key = ?3",
                )?
                .exists(params![
                    plugin.as_bytes(),
                    bucket.as_bytes(),
                    key.as_bytes()
                ])
        })
    }

    fn list_keys<'a>(
        &'a self,
        plugin: &'a str,
        bucket: &'a str,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<KeyPage, KvError>> {
        // One more than a page, to know whether there are more.
        let limit = i64::try_from(LIST_PAGE_KEYS + 1).unwrap_or(i64::MAX);
        let path = Arc::clone(&self.path);
        let listed = self.read(move |connection| {
            // Exactly this bucket's keys after the cursor, in byte order: whatever the cursor,
            // nothing outside the bucket is visited.
            let mut keys: Vec<Vec<u8>> = Vec::new();
            match after {
                Some(after) => {
                    let mut statement = connection.prepare_cached(
                        "SELECT key FROM entries WHERE plugin = ?1 AND bucket = ?2 AND key > ?3
                         ORDER BY key LIMIT ?4",
                    )?;
                    let rows = statement.query_map(
                        params![
                            plugin.as_bytes(),
                            bucket.as_bytes(),
                            after.as_bytes(),
                            limit
                        ],
                        |row| row.get(0),
                    )?;
                    for row in rows {
                        keys.push(row?);
                    }
                }
                None => {
                    let mut statement = connection.prepare_cached(
                        "SELECT key FROM entries WHERE plugin = ?1 AND bucket = ?2
                         ORDER BY key LIMIT ?3",
                    )?;
                    let rows = statement.query_map(
                        params![plugin.as_bytes(), bucket.as_bytes(), limit],
                        |row| row.get(0),
                    )?;
                    for row in rows {
                        keys.push(row?);
                    }
                }
            }
            Ok(keys)
        });
        Box::pin(async move {
            let mut keys = listed
                .await?
                .into_iter()
                .map(|key| text(key, &path))
                .collect::<Result<Vec<_>, _>>()?;
            let more = keys.len() > LIST_PAGE_KEYS;
            keys.truncate(LIST_PAGE_KEYS);
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
        // A refusal returns before the write: the transaction rolls back, nothing is written.
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
        let path = Arc::clone(&self.path);
        let listed = self.read(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT bucket, key, length(value) FROM entries WHERE plugin = ?1
                 ORDER BY bucket, key",
            )?;
            let rows = statement.query_map(params![plugin.as_bytes()], |row| {
                Ok((
                    row.get::<_, Vec<u8>>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })?;
            rows.collect::<Result<Vec<_>, _>>()
        });
        Box::pin(async move {
            listed
                .await?
                .into_iter()
                .map(|(bucket, key, size)| {
                    Ok(EntryInfo {
                        bucket: text(bucket, &path)?,
                        key: text(key, &path)?,
                        size: size.unsigned_abs(),
                    })
                })
                .collect()
        })
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<Usage, KvError>> {
        let path = Arc::clone(&self.path);
        let row = self.read(move |connection| usage_row(connection, plugin));
        Box::pin(async move {
            row.await?
                .map_or(Ok(Usage::default()), |row| to_usage(row, &path))
        })
    }

    fn clear<'a>(&'a self, plugin: &'a str) -> BoxFuture<'a, Result<u64, KvError>> {
        let plugin = plugin.to_owned();
        let path = Arc::clone(&self.path);
        self.write(move |txn| {
            let sql = |e: rusqlite::Error| failed(&path, &e);
            let mut removed = txn
                .prepare_cached("DELETE FROM entries WHERE plugin = ?1")
                .and_then(|mut statement| statement.execute(params![plugin.as_bytes()]))
                .map_err(sql)? as u64;
            let held = read_usage(txn, &plugin, &path)?;
            write_usage(txn, &plugin, None, &path)?;
            match owner_of(&plugin) {
                // One caller's data: the plugin's total goes down by what it held.
                Some(owner) => release(txn, owner, held, &path)?,
                // A plugin's data: every caller's namespace in it goes too.
                None => {
                    let (from, to) = callers_range(&plugin);
                    let range = params![from.as_bytes(), to.as_bytes()];
                    removed += txn
                        .prepare_cached("DELETE FROM entries WHERE plugin >= ?1 AND plugin < ?2")
                        .and_then(|mut statement| statement.execute(range))
                        .map_err(sql)? as u64;
                    txn.prepare_cached("DELETE FROM usage WHERE space >= ?1 AND space < ?2")
                        .and_then(|mut statement| statement.execute(range))
                        .map_err(sql)?;
                }
            }
            Ok(removed)
        })
    }

    fn callers<'a>(
        &'a self,
        plugin: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Usage)>, KvError>> {
        let (from, to) = callers_range(plugin);
        let path = Arc::clone(&self.path);
        let rows = self.read(|connection| {
            let mut statement = connection.prepare_cached(
                "SELECT space, bytes, keys FROM usage WHERE space >= ?1 AND space < ?2
                 ORDER BY space",
            )?;
            let rows = statement.query_map(params![from.as_bytes(), to.as_bytes()], |row| {
                Ok((row.get::<_, Vec<u8>>(0)?, (row.get(1)?, row.get(2)?)))
            })?;
            rows.collect::<Result<Vec<_>, _>>()
        });
        Box::pin(async move {
            let mut out = Vec::new();
            for (space, row) in rows.await? {
                let space = text(space, &path)?;
                if let Some(id) = space.strip_prefix(from.as_str()) {
                    out.push((id.to_owned(), to_usage(row, &path)?));
                }
            }
            Ok(out)
        })
    }

    fn host_key(&self) -> BoxFuture<'_, Result<[u8; 32], KvError>> {
        // Made once, by whichever process asks first: the check and the insert are one write
        // transaction, so two processes asking at once agree on one key.
        let stored = self.with_reader(|connection| meta_value(connection, HOST_KEY));
        if let Ok(Some(key)) = stored.as_ref().map(|v| v.as_deref().and_then(as_key)) {
            return Box::pin(std::future::ready(Ok(key)));
        }
        let path = Arc::clone(&self.path);
        self.write(move |txn| {
            let stored = meta_value(txn, HOST_KEY).map_err(|e| failed(&path, &e))?;
            if let Some(key) = stored.as_deref().and_then(as_key) {
                return Ok(key);
            }
            let key = super::random_key();
            txn.execute(
                "INSERT INTO meta (name, value) VALUES (?1, ?2)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                params![HOST_KEY, key.as_slice()],
            )
            .map_err(|e| failed(&path, &e))?;
            Ok(key)
        })
    }
}

/// The host key as stored, if it is one.
fn as_key(value: &[u8]) -> Option<[u8; 32]> {
    <[u8; 32]>::try_from(value).ok()
}

/// Open a connection to `path` (creating the file with `create`), waiting up to
/// [`BUSY_TIMEOUT`] for locks, every commit fsynced.
fn connect(path: &Path, create: bool) -> Result<Connection, KvError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let connection = Connection::open_with_flags(path, flags)
        .map_err(|e| KvError::Unavailable(format!("cannot open {}: {e}", path.display())))?;
    make_private(path)?;
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .and_then(|()| connection.pragma_update(None, "synchronous", "FULL"))
        // After a checkpoint, the log is cut back to this size (it is reused, not regrown).
        .and_then(|()| connection.pragma_update(None, "journal_size_limit", 8 << 20))
        .map_err(|e| failed(path, &e))?;
    Ok(connection)
}

/// Make the tables, and import the earlier state file's content if that was never done, in
/// one write transaction: a second process opening the store at the same time waits for it,
/// then finds the import done.
fn initialise(
    connection: &mut Connection,
    dir: &Path,
    path: &Path,
) -> Result<Option<import::Imported>, KvError> {
    let sql = |e: rusqlite::Error| failed(path, &e);
    let txn = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql)?;
    txn.execute_batch(SCHEMA).map_err(sql)?;
    let imported = import::once(&txn, &dir.join(import::FILE_NAME), path)?;
    txn.commit().map_err(sql)?;
    Ok(imported)
}

/// The value at (plugin, bucket, key).
fn value_of(
    connection: &Connection,
    plugin: &str,
    bucket: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, rusqlite::Error> {
    connection
        .prepare_cached("SELECT value FROM entries WHERE plugin = ?1 AND bucket = ?2 AND key = ?3")?
        .query_row(
            params![plugin.as_bytes(), bucket.as_bytes(), key.as_bytes()],
            |row| row.get(0),
        )
        .optional()
}

/// A row of `meta`.
fn meta_value(connection: &Connection, name: &str) -> Result<Option<Vec<u8>>, rusqlite::Error> {
    connection
        .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
        .query_row(params![name], |row| row.get(0))
        .optional()
}

/// The usage row of `space` as stored: (bytes, keys).
fn usage_row(connection: &Connection, space: &str) -> Result<Option<(i64, i64)>, rusqlite::Error> {
    connection
        .prepare_cached("SELECT bytes, keys FROM usage WHERE space = ?1")?
        .query_row(params![space.as_bytes()], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()
}

/// The usage row of `space` (nothing stored: zero).
fn read_usage(connection: &Connection, space: &str, path: &Path) -> Result<Usage, KvError> {
    usage_row(connection, space)
        .map_err(|e| failed(path, &e))?
        .map_or(Ok(Usage::default()), |row| to_usage(row, path))
}

/// Store the usage row of `space` (`None`: remove it).
fn write_usage(
    connection: &Connection,
    space: &str,
    usage: Option<Usage>,
    path: &Path,
) -> Result<(), KvError> {
    let done = match usage {
        Some(usage) => {
            let number = |n: u64| {
                i64::try_from(n).map_err(|_| {
                    KvError::Backend(format!("a usage of {n} does not fit in {}", path.display()))
                })
            };
            let (bytes, keys) = (number(usage.bytes)?, number(usage.keys)?);
            connection
                .prepare_cached(
                    "INSERT INTO usage (space, bytes, keys) VALUES (?1, ?2, ?3)
                     ON CONFLICT (space) DO UPDATE SET bytes = excluded.bytes, keys = excluded.keys",
                )
                .and_then(|mut statement| statement.execute(params![space.as_bytes(), bytes, keys]))
        }
        None => connection
            .prepare_cached("DELETE FROM usage WHERE space = ?1")
            .and_then(|mut statement| statement.execute(params![space.as_bytes()])),
    };
    done.map(drop).map_err(|e| failed(path, &e))
}

/// Take `freed` off the usage row of `space` ([`released`]: a caller's empty row goes).
fn release(connection: &Connection, space: &str, freed: Usage, path: &Path) -> Result<(), KvError> {
    let held = read_usage(connection, space, path)?;
    write_usage(connection, space, released(space, held, freed), path)
}

/// A usage row as stored, as a [`Usage`]: never negative.
fn to_usage((bytes, keys): (i64, i64), path: &Path) -> Result<Usage, KvError> {
    match (u64::try_from(bytes), u64::try_from(keys)) {
        (Ok(bytes), Ok(keys)) => Ok(Usage { bytes, keys }),
        _ => Err(KvError::Backend(format!(
            "{} holds a negative usage ({bytes} bytes, {keys} keys)",
            path.display()
        ))),
    }
}

/// A name as stored (always written from a `&str`) back as text.
fn text(bytes: Vec<u8>, path: &Path) -> Result<String, KvError> {
    String::from_utf8(bytes)
        .map_err(|_| KvError::Backend(format!("{} holds a name that is not UTF-8", path.display())))
}

/// Whether `error` is a lock another connection holds.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// A SQLite failure on `path`, as a [`KvError`]: a lock another process held for longer than
/// [`BUSY_TIMEOUT`] makes the store unavailable for now; anything else is a backend failure.
fn failed(path: &Path, error: &rusqlite::Error) -> KvError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => KvError::Unavailable(format!(
            "{} was locked by another connection for over {} s ({error}); try again",
            path.display(),
            BUSY_TIMEOUT.as_secs()
        )),
        _ => KvError::Backend(format!("{}: {error}", path.display())),
    }
}

/// Make the database, its log and the log's index readable by this user only. SQLite creates
/// the database as the umask allows and gives the other two the database's mode; the mode is
/// set by path (`chmod`), never through a descriptor of our own, whose closing would drop the
/// locks SQLite holds on the file.
fn make_private(path: &Path) -> Result<(), KvError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mut names = vec![path.to_owned()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            names.push(PathBuf::from(name));
        }
        for name in names {
            let Ok(metadata) = std::fs::metadata(&name) else {
                continue;
            };
            if metadata.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)).map_err(
                    |e| {
                        KvError::Unavailable(format!("cannot make {} private: {e}", name.display()))
                    },
                )?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Create `dir` (and its parents) readable by this user only.
fn create_private_dir(dir: &Path) -> Result<(), KvError> {
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
mod tests;
