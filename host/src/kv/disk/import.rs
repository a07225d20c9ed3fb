//! The state an earlier mcpbox kept: one redb database, `state.redb`, in the same directory,
//! which one process held at a time. Its entries, usage rows and host values (the key of
//! callers' ids, so every caller keeps their namespace) are copied into the SQLite database
//! once, inside the write transaction that makes its tables: a second process opening the
//! store at the same moment waits for that transaction, then finds the marker
//! ([`MARKER`]) and imports nothing. The old file is read, never changed or removed (unless
//! redb must repair it after a crash, as the earlier mcpbox would have on its next start).

use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use rusqlite::{OptionalExtension, Transaction, params};

use super::failed;
use crate::kv::KvError;

/// The earlier database's file name in the state directory.
pub const FILE_NAME: &str = "state.redb";

/// The row in `meta` that says the import was done (or that there was nothing to import).
const MARKER: &str = "redb-import";

/// (plugin, bucket, key) → value.
pub(super) const ENTRIES: TableDefinition<(&str, &str, &str), &[u8]> =
    TableDefinition::new("entries");
/// namespace → (bytes, keys).
pub(super) const USAGE: TableDefinition<&str, (u64, u64)> = TableDefinition::new("usage");
/// The host's own values.
pub(super) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// What was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Entries.
    pub entries: u64,
    /// Namespaces with a usage row.
    pub spaces: u64,
}

/// Import `old` into the tables of `txn` unless that was done (or found unneeded) before;
/// what was imported, if anything now. `path` is the new database, for errors.
pub fn once(txn: &Transaction<'_>, old: &Path, path: &Path) -> Result<Option<Imported>, KvError> {
    let sql = |e: rusqlite::Error| failed(path, &e);
    let marked = txn
        .query_row(
            "SELECT 1 FROM meta WHERE name = ?1",
            params![MARKER],
            |_| Ok(()),
        )
        .optional()
        .map_err(sql)?
        .is_some();
    if marked {
        return Ok(None);
    }
    let mark = |outcome: &str| {
        txn.execute(
            "INSERT INTO meta (name, value) VALUES (?1, ?2)",
            params![MARKER, outcome.as_bytes()],
        )
        .map_err(sql)
    };
    if !old.exists() {
        mark("no earlier state file")?;
        return Ok(None);
    }
    // Only into an empty store: one that holds anything was written by this version already.
    let empty = txn
        .query_row(
            "SELECT NOT EXISTS (SELECT 1 FROM entries) AND NOT EXISTS (SELECT 1 FROM usage)
             AND NOT EXISTS (SELECT 1 FROM meta)",
            [],
            |row| row.get::<_, bool>(0),
        )
        .map_err(sql)?;
    if !empty {
        tracing::warn!(
            old = %old.display(),
            new = %path.display(),
            "the earlier state file was not imported: the new store already holds state"
        );
        mark("not imported: the store already held state")?;
        return Ok(None);
    }
    let imported = match redb::ReadOnlyDatabase::open(old) {
        Ok(db) => copy(&db, txn, old, path)?,
        // Not closed cleanly (the earlier mcpbox was killed): opened for writing, redb repairs
        // it first, as the earlier version would have.
        Err(redb::DatabaseError::RepairAborted) => {
            let db = redb::Database::open(old).map_err(|e| unreadable(old, &e))?;
            copy(&db, txn, old, path)?
        }
        Err(e) => return Err(unreadable(old, &e)),
    };
    mark(&format!(
        "imported {} entries and {} usage rows from {}",
        imported.entries, imported.spaces, FILE_NAME
    ))?;
    Ok(Some(imported))
}

/// Why the earlier file cannot be read now. The import is retried on the next open.
fn unreadable(old: &Path, error: &redb::DatabaseError) -> KvError {
    match error {
        redb::DatabaseError::DatabaseAlreadyOpen => KvError::Unavailable(format!(
            "{} (the state an earlier mcpbox kept) is held by a process of that version: stop \
             it, and this one imports the state on its next state call",
            old.display()
        )),
        other => KvError::Unavailable(format!(
            "cannot read {} (the state an earlier mcpbox kept), to import it: {other}",
            old.display()
        )),
    }
}

/// Copy every row of the three tables of `db` into `txn`.
fn copy(
    db: &impl ReadableDatabase,
    txn: &Transaction<'_>,
    old: &Path,
    path: &Path,
) -> Result<Imported, KvError> {
    let bad = |e: redb::Error| {
        KvError::Unavailable(format!(
            "cannot read {} (the state an earlier mcpbox kept), to import it: {e}",
            old.display()
        ))
    };
    let sql = |e: rusqlite::Error| failed(path, &e);
    let read = db.begin_read().map_err(|e| bad(e.into()))?;
    let mut imported = Imported {
        entries: 0,
        spaces: 0,
    };
    // A table the earlier file never made holds nothing.
    match read.open_table(ENTRIES) {
        Ok(table) => {
            let mut insert = txn
                .prepare("INSERT INTO entries (plugin, bucket, key, value) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql)?;
            for row in table.iter().map_err(|e| bad(e.into()))? {
                let (k, v) = row.map_err(|e| bad(e.into()))?;
                let (plugin, bucket, key) = k.value();
                insert
                    .execute(params![
                        plugin.as_bytes(),
                        bucket.as_bytes(),
                        key.as_bytes(),
                        v.value()
                    ])
                    .map_err(sql)?;
                imported.entries += 1;
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(e.into())),
    }
    match read.open_table(USAGE) {
        Ok(table) => {
            let mut insert = txn
                .prepare("INSERT INTO usage (space, bytes, keys) VALUES (?1, ?2, ?3)")
                .map_err(sql)?;
            for row in table.iter().map_err(|e| bad(e.into()))? {
                let (k, v) = row.map_err(|e| bad(e.into()))?;
                let (bytes, keys) = v.value();
                let number = |n: u64| {
                    i64::try_from(n).map_err(|_| {
                        KvError::Backend(format!("{} holds a usage of {n}", old.display()))
                    })
                };
                insert
                    .execute(params![k.value().as_bytes(), number(bytes)?, number(keys)?])
                    .map_err(sql)?;
                imported.spaces += 1;
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(e.into())),
    }
    match read.open_table(META) {
        Ok(table) => {
            let mut insert = txn
                .prepare("INSERT INTO meta (name, value) VALUES (?1, ?2)")
                .map_err(sql)?;
            for row in table.iter().map_err(|e| bad(e.into()))? {
                let (k, v) = row.map_err(|e| bad(e.into()))?;
                insert.execute(params![k.value(), v.value()]).map_err(sql)?;
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(e.into())),
    }
    Ok(imported)
}
