//! Where task records live: the [`TaskStore`] interface (one per process, or shared by replicas
//! through the host's state store) and [`MemoryTasks`], the store of a single process.
//!
//! A task is four things in a store, each kept for the task's lifetime after its last write:
//! its record (JSON written by whoever runs or changes it), the answers given in each input
//! round (merged atomically, so two `tasks/update`s at once lose nothing), a cancellation
//! flag (set by `tasks/cancel` wherever it arrives; the runner watches it), and a claim per
//! round (so exactly one `tasks/update` resumes the task when the last answer arrives).

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

/// Where task records are kept. Errors are sentences naming what failed.
pub trait TaskStore: Send + Sync {
    /// Write task `id`'s record, kept for `ttl`.
    fn save<'a>(
        &'a self,
        id: &'a str,
        record: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), String>>;

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
        record: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), String>> {
        let outcome = self.with(|entries| {
            if !entries.contains_key(id) && entries.len() >= MAX_TASKS_IN_MEMORY {
                return Err(format!(
                    "this process already keeps {MAX_TASKS_IN_MEMORY} tasks; try again when some have expired"
                ));
            }
            let kept: usize = entries
                .iter()
                .filter(|(key, _)| key.as_str() != id)
                .map(|(_, e)| e.record.len())
                .sum();
            if kept.saturating_add(record.len()) > MAX_TASK_BYTES_IN_MEMORY {
                return Err(format!(
                    "this process already keeps {kept} bytes of tasks, and this record of {} \
                     would pass the {MAX_TASK_BYTES_IN_MEMORY} it keeps in memory; try again when \
                     some have expired",
                    record.len()
                ));
            }
            let entry = entries.entry(id.to_owned()).or_default();
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

    #[tokio::test]
    async fn answers_merge_claims_are_once_and_records_expire() {
        let store = MemoryTasks::default();
        let ttl = Duration::from_secs(60);
        store.save("t", b"{}".to_vec(), ttl).await.unwrap();
        // Bytes are bounded: a record that would pass the bound is refused, replacing one
        // counts only the new one.
        let big = vec![b' '; MAX_TASK_BYTES_IN_MEMORY - 2];
        store.save("big", big.clone(), ttl).await.unwrap();
        assert!(store.save("more", b"{}".to_vec(), ttl).await.is_err());
        store.save("big", b"{}".to_vec(), ttl).await.unwrap();
        store.save("more", b"{}".to_vec(), ttl).await.unwrap();
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
            .save("short", b"{}".to_vec(), Duration::from_millis(1))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(store.load("short").await.unwrap(), None);
    }
}
