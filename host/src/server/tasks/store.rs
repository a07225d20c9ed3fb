//! Where task records live: the [`TaskStore`] interface (one per process, or shared by replicas
//! through the host's state store) and [`MemoryTasks`], the store of a single process.
//!
//! A task is four things in a store, each kept for the task's lifetime after its last write:
//! its record (JSON written by whoever runs or changes it), the answers given in each input
//! round (merged atomically, so two `tasks/update`s at once lose nothing), a cancellation
//! flag (set by `tasks/cancel` wherever it arrives; the runner watches it), and a claim per
//! round (so exactly one `tasks/update` resumes the task when the last answer arrives).
//!
//! Each caller (its task's owner) keeps at most its [`TaskShare`] of a store: so many records
//! and so many bytes of them, counted where the records are (per process in memory, across
//! replicas in the shared store) in the same step that writes a record, so that one caller
//! filling the store never leaves the others without room for a task. A refusal says which
//! bound was met (the caller's share, or the whole store's), never how much room is left.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::super::BoxFuture;

/// A task's record and whether it was cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The record, as written.
    pub record: Vec<u8>,
    /// `tasks/cancel` reached it.
    pub cancelled: bool,
}

/// How much of a task store one caller may keep (its records, whatever their status, until
/// they expire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskShare {
    /// Records.
    pub records: usize,
    /// Bytes of records (a caller keeping none may keep one record however large, up to the
    /// largest a task keeps).
    pub bytes: usize,
}

/// Why a record was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaveError {
    /// Its owner keeps its share already (counted without the record it replaces).
    #[error(
        "this caller already keeps its share of the task store: at most {} tasks and {} bytes \
         of their records, each kept for its ttlMs after its last change \
         (--max-task-records-per-caller, --max-task-bytes-per-caller); try again when one has \
         expired",
        .0.records,
        .0.bytes
    )]
    Share(TaskShare),
    /// The store keeps all it may, whoever's.
    #[error("the task store is full; try again when some tasks have expired")]
    Full,
    /// The store failed (a sentence naming what failed).
    #[error("{0}")]
    Failed(String),
}

/// Where task records are kept. Errors are sentences naming what failed.
pub trait TaskStore: Send + Sync {
    /// Write task `id`'s record, `owner`'s, kept for `ttl`: refused when `owner` would keep
    /// more than `share`, or the store more than it may.
    fn save<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        record: Vec<u8>,
        ttl: Duration,
        share: TaskShare,
    ) -> BoxFuture<'a, Result<(), SaveError>>;

    /// Task `id`'s record, if it exists.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>, String>>;

    /// Add `answers` to those of `id`'s input round `round` (a key answered again keeps its
    /// latest answer) and return them all, in one atomic step.
    fn answer<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        answers: Vec<(String, Vec<u8>)>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<BTreeMap<String, Vec<u8>>, String>>;

    /// Mark `id` cancelled.
    fn cancel<'a>(&'a self, id: &'a str, ttl: Duration) -> BoxFuture<'a, Result<(), String>>;

    /// Claim the resumption of `id` after round `round`: `true` for the first caller only.
    fn claim<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// The most tasks one process keeps in memory (running or finished, until they expire).
pub const MAX_TASKS_IN_MEMORY: usize = 10_000;
/// The most bytes of records (results included) one process keeps in memory.
pub const MAX_TASK_BYTES_IN_MEMORY: usize = 256 << 20;

#[derive(Default)]
struct Entry {
    owner: String,
    record: Vec<u8>,
    expires: Option<Instant>,
    cancelled: bool,
    answers: BTreeMap<u32, BTreeMap<String, Vec<u8>>>,
    claims: HashSet<u32>,
}

/// The tasks of one process, in memory: lost when it stops (a single process has no one to
/// share them with; replicas use the shared store).
#[derive(Default)]
pub struct MemoryTasks {
    entries: Mutex<HashMap<String, Entry>>,
}

impl MemoryTasks {
    fn with<T>(&self, work: impl FnOnce(&mut HashMap<String, Entry>) -> T) -> T {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        entries.retain(|_, e| e.expires.is_none_or(|at| at > now));
        work(&mut entries)
    }
}

impl TaskStore for MemoryTasks {
    fn save<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        record: Vec<u8>,
        ttl: Duration,
        share: TaskShare,
    ) -> BoxFuture<'a, Result<(), SaveError>> {
        let outcome = self.with(|entries| {
            let new = !entries.contains_key(id);
            let (mut kept, mut mine, mut my_bytes) = (0usize, 0usize, 0usize);
            let others = entries
                .iter()
                .filter(|(key, _)| key.as_str() != id)
                .map(|(_, entry)| entry);
            for entry in others {
                kept = kept.saturating_add(entry.record.len());
                if entry.owner == owner {
                    mine += 1;
                    my_bytes = my_bytes.saturating_add(entry.record.len());
                }
            }
            if (new && mine >= share.records)
                || (mine > 0 && my_bytes.saturating_add(record.len()) > share.bytes)
            {
                return Err(SaveError::Share(share));
            }
            if (new && entries.len() >= MAX_TASKS_IN_MEMORY)
                || kept.saturating_add(record.len()) > MAX_TASK_BYTES_IN_MEMORY
            {
                return Err(SaveError::Full);
            }
            let entry = entries.entry(id.to_owned()).or_default();
            owner.clone_into(&mut entry.owner);
            entry.record = record;
            entry.expires = Instant::now().checked_add(ttl);
            Ok(())
        });
        Box::pin(async move { outcome })
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>, String>> {
        let found = self.with(|entries| {
            entries.get(id).map(|e| Stored {
                record: e.record.clone(),
                cancelled: e.cancelled,
            })
        });
        Box::pin(async move { Ok(found) })
    }

    fn answer<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        answers: Vec<(String, Vec<u8>)>,
        _ttl: Duration,
    ) -> BoxFuture<'a, Result<BTreeMap<String, Vec<u8>>, String>> {
        let all = self.with(|entries| {
            let Some(entry) = entries.get_mut(id) else {
                return BTreeMap::new();
            };
            let given = entry.answers.entry(round).or_default();
            given.extend(answers);
            given.clone()
        });
        Box::pin(async move { Ok(all) })
    }

    fn cancel<'a>(&'a self, id: &'a str, _ttl: Duration) -> BoxFuture<'a, Result<(), String>> {
        self.with(|entries| {
            if let Some(entry) = entries.get_mut(id) {
                entry.cancelled = true;
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        _ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        let first = self.with(|entries| {
            entries
                .get_mut(id)
                .is_some_and(|entry| entry.claims.insert(round))
        });
        Box::pin(async move { Ok(first) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANYONE: TaskShare = TaskShare {
        records: usize::MAX,
        bytes: usize::MAX,
    };

    #[tokio::test]
    async fn answers_merge_claims_are_once_and_records_expire() {
        let store = MemoryTasks::default();
        let ttl = Duration::from_secs(60);
        let save = |id: &'static str, record: Vec<u8>| store.save(id, "o", record, ttl, ANYONE);
        save("t", b"{}".to_vec()).await.unwrap();
        // Bytes are bounded: a record that would pass the bound is refused, replacing one
        // counts only the new one.
        let big = vec![b' '; MAX_TASK_BYTES_IN_MEMORY - 2];
        save("big", big.clone()).await.unwrap();
        assert_eq!(save("more", b"{}".to_vec()).await, Err(SaveError::Full));
        save("big", b"{}".to_vec()).await.unwrap();
        save("more", b"{}".to_vec()).await.unwrap();
        let first = store
            .answer("t", 1, vec![("a".into(), b"1".to_vec())], ttl)
            .await
            .unwrap();
        assert_eq!(first.len(), 1);
        let both = store
            .answer("t", 1, vec![("b".into(), b"2".to_vec())], ttl)
            .await
            .unwrap();
        assert_eq!(both.keys().collect::<Vec<_>>(), ["a", "b"]);
        // Another round starts empty.
        assert!(store.answer("t", 2, vec![], ttl).await.unwrap().is_empty());
        assert!(store.claim("t", 1, ttl).await.unwrap());
        assert!(!store.claim("t", 1, ttl).await.unwrap());
        assert!(!store.claim("nope", 1, ttl).await.unwrap());
        store.cancel("t", ttl).await.unwrap();
        assert!(store.load("t").await.unwrap().unwrap().cancelled);

        store
            .save(
                "short",
                "o",
                b"{}".to_vec(),
                Duration::from_millis(1),
                ANYONE,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(store.load("short").await.unwrap(), None);
    }

    #[tokio::test]
    async fn each_caller_keeps_its_share_and_a_refusal_tells_no_free_bytes() {
        let store = MemoryTasks::default();
        let ttl = Duration::from_secs(60);
        let share = TaskShare {
            records: 2,
            bytes: 100,
        };
        let save = |id: &'static str, owner: &'static str, len: usize| {
            store.save(id, owner, vec![b' '; len], ttl, share)
        };
        save("a1", "a", 40).await.unwrap();
        save("a2", "a", 40).await.unwrap();
        // A third record of a's is refused; a record replaced is not a new one.
        assert_eq!(save("a3", "a", 1).await, Err(SaveError::Share(share)));
        save("a2", "a", 60).await.unwrap();
        // Bytes: replacing a record counts the new one against the rest of a's.
        assert_eq!(save("a2", "a", 61).await, Err(SaveError::Share(share)));
        // Another caller has a share of its own; one record alone may pass the bytes.
        save("b1", "b", 500).await.unwrap();
        assert_eq!(save("b2", "b", 1).await, Err(SaveError::Share(share)));
        // The messages: the caller's own share, never what the store has left.
        assert_eq!(
            SaveError::Share(share).to_string(),
            "this caller already keeps its share of the task store: at most 2 tasks and 100 \
             bytes of their records, each kept for its ttlMs after its last change \
             (--max-task-records-per-caller, --max-task-bytes-per-caller); try again when one \
             has expired"
        );
        let big = vec![b' '; MAX_TASK_BYTES_IN_MEMORY];
        let full = store.save("c1", "c", big, ttl, ANYONE).await.unwrap_err();
        assert_eq!(full, SaveError::Full);
        assert_eq!(
            full.to_string(),
            "the task store is full; try again when some tasks have expired"
        );
    }
}
