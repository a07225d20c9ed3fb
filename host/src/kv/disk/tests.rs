//! Tests of the embedded (SQLite) backend: the shared suite, plus what only a file on disk can
//! show.

#![allow(clippy::unwrap_used, reason = "test code")]

use super::*;
use crate::kv::suite;

#[tokio::test]
async fn pages_and_listings_stay_inside_their_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
    suite::namespaces(&store).await;
}

#[tokio::test]
async fn callers_spaces_count_against_their_quota_and_the_plugins_total() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
    suite::caller_spaces(&store).await;
}

/// Stores opened at once on one fresh directory stand for processes (SQLite locks each
/// connection apart, in one process as across several): all open, agree on one host key,
/// lose no increment, and hold one quota exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_stores_on_one_directory_share_it_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<DiskStore> =
        futures::future::join_all((0..4).map(|_| DiskStore::open(dir.path().join("state"))))
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
    let keys = futures::future::join_all(stores.iter().map(StateStore::host_key)).await;
    let first = *keys[0].as_ref().unwrap();
    assert!(keys.iter().all(|key| key.as_ref().unwrap() == &first));

    let quota = Quota::default();
    let increments = stores
        .iter()
        .flat_map(|store| (0..50).map(move |_| store.increment("p", "b", "n", 1, false, quota)));
    let mut sums: Vec<i64> = futures::future::join_all(increments)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    sums.sort_unstable();
    assert_eq!(sums, (1..=200).collect::<Vec<_>>());

    let tight = Quota {
        max_keys: 30,
        ..Quota::default()
    };
    let names: Vec<(usize, String)> = (0..80).map(|n| (n % 4, format!("k{n}"))).collect();
    let sets = names
        .iter()
        .map(|(s, key)| stores[*s].set("q", "b", key, b"v".to_vec(), tight));
    let results: Vec<_> = futures::future::join_all(sets).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 30);
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| {
        e.to_string()
            .starts_with("quota exceeded: plugin `q` would hold 31 keys")
    }));
    for store in &stores {
        assert_eq!(store.usage("q").await.unwrap().keys, 30);
        assert_eq!(store.entries("q").await.unwrap().len(), 30);
    }
}

/// The directory is the user's own, and so are the database and its log.
#[cfg(unix)]
#[tokio::test]
async fn the_files_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let store = DiskStore::open(state.clone()).await.unwrap();
    store
        .set("p", "b", "k", b"v".to_vec(), Quota::default())
        .await
        .unwrap();
    let mode = |name: &str| {
        std::fs::metadata(state.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(""), 0o700);
    for name in [FILE_NAME, "state.sqlite-wal", "state.sqlite-shm"] {
        assert_eq!(mode(name), 0o600, "{name}");
    }
}

/// Write `dir/state.redb` as the earlier mcpbox did: an entry of a plugin, one of a
/// caller, their usage rows and the host key.
fn earlier_state(dir: &Path, value: &[u8]) {
    use import::{ENTRIES, META, USAGE};
    let db = redb::Database::create(dir.join(import::FILE_NAME)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut entries = txn.open_table(ENTRIES).unwrap();
        entries.insert(("todo", "default", "k"), value).unwrap();
        entries
            .insert(("todo/c1", "default", "item:1"), b"one".as_slice())
            .unwrap();
        let mut usage = txn.open_table(USAGE).unwrap();
        usage
            .insert("todo", (2 + value.len() as u64 + 9, 2))
            .unwrap();
        usage.insert("todo/c1", (9, 1)).unwrap();
        let mut meta = txn.open_table(META).unwrap();
        meta.insert(HOST_KEY, [7u8; 32].as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn the_earlier_state_file_is_imported_once_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    earlier_state(dir.path(), b"v");
    let before = std::fs::read(dir.path().join(import::FILE_NAME)).unwrap();
    // Two stores opening at once: one imports, the other finds it done.
    let (one, two) = tokio::join!(
        DiskStore::open(dir.path().to_owned()),
        DiskStore::open(dir.path().to_owned())
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    for store in [&one, &two] {
        assert_eq!(
            store.get("todo", "default", "k").await.unwrap(),
            Some(b"v".to_vec())
        );
        assert_eq!(
            store.get("todo/c1", "default", "item:1").await.unwrap(),
            Some(b"one".to_vec())
        );
        assert_eq!(
            store.usage("todo").await.unwrap(),
            Usage { bytes: 12, keys: 2 }
        );
        assert_eq!(
            store.callers("todo").await.unwrap(),
            [("c1".to_owned(), Usage { bytes: 9, keys: 1 })]
        );
        assert_eq!(store.host_key().await.unwrap(), [7u8; 32]);
    }
    let marker = one
        .with_reader(|c| meta_value(c, "redb-import"))
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8(marker).unwrap(),
        "imported 2 entries and 2 usage rows from state.redb"
    );
    assert_eq!(
        std::fs::read(dir.path().join(import::FILE_NAME)).unwrap(),
        before,
        "the earlier file is left as it was"
    );
    // Quotas go on from the imported usage.
    one.delete("todo/c1", "default", "item:1").await.unwrap();
    assert_eq!(
        one.usage("todo").await.unwrap(),
        Usage { bytes: 3, keys: 1 }
    );
    assert!(one.callers("todo").await.unwrap().is_empty());
    drop((one, two));

    // Opened again, even with the old file changed since, nothing is imported twice.
    std::fs::remove_file(dir.path().join(import::FILE_NAME)).unwrap();
    earlier_state(dir.path(), b"changed");
    let again = DiskStore::open(dir.path().to_owned()).await.unwrap();
    assert_eq!(
        again.get("todo", "default", "k").await.unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(
        again.get("todo/c1", "default", "item:1").await.unwrap(),
        None
    );
}

/// An earlier file that another process still holds is not skipped: the open fails,
/// saying why, and the import happens on the next open once it is let go.
#[tokio::test]
async fn an_earlier_state_file_in_use_is_imported_once_let_go() {
    let dir = tempfile::tempdir().unwrap();
    earlier_state(dir.path(), b"v");
    let held = redb::Database::open(dir.path().join(import::FILE_NAME)).unwrap();
    let error = DiskStore::open(dir.path().to_owned())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        error.contains("(the state an earlier mcpbox kept) is held by a process of that version"),
        "{error}"
    );
    drop(held);
    let store = DiskStore::open(dir.path().to_owned()).await.unwrap();
    assert_eq!(
        store.get("todo", "default", "k").await.unwrap(),
        Some(b"v".to_vec())
    );
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
    for (op, p50, p99) in suite::latency(&store, 2000).await {
        eprintln!("{FILE_NAME} {op}: p50 {p50:.1} µs, p99 {p99:.1} µs");
    }
}
