//! The call ledger: at-most-once tool calls behind a balancer that retries.
//!
//! A balancer that retries a request whose replica died after running it (HAProxy's
//! `retry-on empty-response`) would run the call twice. The balancer gives each request an id
//! it keeps across its retries (HAProxy's `unique-id-header`, after deleting any such header
//! the client sent); the host records that id in Redis before it runs a tool that may change
//! something, so a retry that lands on another replica finds the record instead of running the
//! call again. One Redis key per id, `mcpbox:call:<id>`, apart from plugin state
//! (`mcpbox:kv:…`), holds one of:
//!
//! - `running:<digest>`: a replica runs the call now. Set with `SET NX PX` (the claim), with a
//!   short lease ([`RUNNING_LEASE`]) that the running replica renews every
//!   [`LEASE_RENEWAL`]: if that replica dies, the record expires within the lease.
//! - `done:<digest>:<encoded result>`: the call ran; kept [`RESULT_LIFETIME`] (retries come
//!   within seconds) and at most [`MAX_STORED_RESULT_BYTES`] of result.
//! - `large:<digest>`: the call ran, but its result was too large to keep: a retry fails.
//! - `lost:<digest>`: a retry found the running record expired (its replica went away): it
//!   and every later retry fail, rather than run a call that may already have run.
//!
//! `<digest>` is a SHA-256 of the method, tool name and arguments, so an id reused with
//! other arguments (a collision, or an id the client managed to choose) is refused, never
//! answered with another call's result.
//!
//! `catalog::at_most_once` decides which calls go through it.

use std::time::Duration;

use redis::AsyncCommands as _;
use redis::aio::ConnectionManager;

use super::KvError;

/// How long a running record lives unless renewed: a replica that died leaves a record that
/// expires this soon.
pub const RUNNING_LEASE: Duration = Duration::from_secs(3);
/// How often the running replica renews its record's lease.
pub const LEASE_RENEWAL: Duration = Duration::from_secs(1);
/// How long a finished call's result is kept for retries.
pub const RESULT_LIFETIME: Duration = Duration::from_secs(300);
/// The largest result kept for a retry; a larger one is recorded only as finished.
pub const MAX_STORED_RESULT_BYTES: usize = 256 << 10;
/// The longest request id accepted, in bytes.
pub const MAX_CALL_ID_BYTES: usize = 128;
/// How often a retry looks whether the first run finished.
const POLL: Duration = Duration::from_millis(50);
/// The longest one Redis operation may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether a request id is acceptable: 1 to [`MAX_CALL_ID_BYTES`] visible ASCII characters.
pub fn check_call_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_CALL_ID_BYTES {
        return Err(format!(
            "the request id must be 1 to {MAX_CALL_ID_BYTES} bytes, not {}",
            id.len()
        ));
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the request id must be visible ASCII characters".to_owned());
    }
    Ok(())
}

/// The SHA-256 (hex) of what a call does: its method, tool name and arguments, each
/// length-prefixed so no two calls share a digest by moving bytes between fields.
pub fn call_digest(method: &str, tool: &str, arguments: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let mut hasher = Sha256::new();
    for part in [method, tool, arguments] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    format!("{:x}", hasher.finalize())
}

/// What claiming an id found.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The id was new: run the call, then [`CallLedger::finish`] it.
    Fresh,
    /// The id was recorded before: [`CallLedger::wait`] for the first run's outcome.
    Seen,
}

/// What a retry learns of the first run.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstRun {
    /// It finished: its encoded result.
    Finished(Vec<u8>),
    /// It finished, but its result was too large to keep.
    TooLarge,
    /// The id was recorded for a call with other arguments or another tool.
    OtherCall,
    /// Its replica went away while it ran (the record expired, or was marked lost): it may
    /// have run.
    Lost,
    /// It still runs after the retry waited as long as it may.
    StillRunning,
}

/// Records of tool calls by request id, in Redis.
pub struct CallLedger {
    connection: ConnectionManager,
    server: String,
}

impl std::fmt::Debug for CallLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CallLedger(redis at {})", self.server)
    }
}

fn key(id: &str) -> String {
    format!("mcpbox:call:{id}")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl CallLedger {
    /// A ledger in the Redis at `url`. Connects lazily, like the state backend.
    pub fn connect(url: &str) -> Result<Self, KvError> {
        let (connection, server) = super::redis::lazy_connection(url)?;
        Ok(Self { connection, server })
    }

    async fn run<T, F>(&self, work: impl FnOnce(ConnectionManager) -> F) -> Result<T, KvError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(OPERATION_TIMEOUT, work(self.connection.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(KvError::Unavailable(format!(
                "the call ledger in Redis at {}: {e}",
                self.server
            ))),
            Err(_) => Err(KvError::Unavailable(format!(
                "the call ledger in Redis at {} did not answer within {} s",
                self.server,
                OPERATION_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Record that the call `id` (doing `digest`) runs here, unless it was recorded before.
    pub async fn claim(&self, id: &str, digest: &str) -> Result<Claim, KvError> {
        let (key, value) = (key(id), format!("running:{digest}"));
        let options = redis::SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(redis::SetExpiry::PX(millis(RUNNING_LEASE)));
        let set: Option<String> = self
            .run(|mut c| async move { c.set_options(&key, value, options).await })
            .await?;
        Ok(if set.is_some() {
            Claim::Fresh
        } else {
            Claim::Seen
        })
    }

    /// Extend the running record's lease (while the call runs). Only a record still
    /// `running:<digest>` is extended.
    pub async fn renew(&self, id: &str, digest: &str) -> Result<(), KvError> {
        let key = key(id);
        let script = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
        );
        let running = format!("running:{digest}");
        let lease = millis(RUNNING_LEASE);
        self.run(|mut c| async move {
            script
                .key(&key)
                .arg(running)
                .arg(lease)
                .invoke_async::<i64>(&mut c)
                .await
        })
        .await
        .map(drop)
    }

    /// Record the call's encoded result (or, over [`MAX_STORED_RESULT_BYTES`], only that it
    /// finished) for [`RESULT_LIFETIME`].
    pub async fn finish(&self, id: &str, digest: &str, result: &[u8]) -> Result<(), KvError> {
        let key = key(id);
        let mut value = Vec::with_capacity(result.len() + digest.len() + 6);
        if result.len() <= MAX_STORED_RESULT_BYTES {
            value.extend_from_slice(b"done:");
            value.extend_from_slice(digest.as_bytes());
            value.push(b':');
            value.extend_from_slice(result);
        } else {
            value.extend_from_slice(b"large:");
            value.extend_from_slice(digest.as_bytes());
        }
        let lifetime = millis(RESULT_LIFETIME);
        self.run(|mut c| async move { c.pset_ex::<_, _, ()>(&key, value, lifetime).await })
            .await
    }

    /// Forget the call (it ended in a way that may be run again: it asked the client for
    /// input, which a 2026-07-28 retry runs again by design).
    pub async fn forget(&self, id: &str) -> Result<(), KvError> {
        let key = key(id);
        self.run(|mut c| async move { c.del::<_, ()>(&key).await })
            .await
    }

    /// Wait, up to `patience`, for the first run of the call `id` to finish, and say how it
    /// went.
    pub async fn wait(
        &self,
        id: &str,
        digest: &str,
        patience: Duration,
    ) -> Result<FirstRun, KvError> {
        let deadline = tokio::time::Instant::now() + patience;
        let key = key(id);
        loop {
            let k = key.clone();
            let value: Option<Vec<u8>> = self.run(|mut c| async move { c.get(&k).await }).await?;
            let Some(value) = value else {
                // Expired while running: its replica went away. Later retries must not run it
                // either.
                let k = key.clone();
                let lost = format!("lost:{digest}");
                let options = redis::SetOptions::default()
                    .conditional_set(redis::ExistenceCheck::NX)
                    .with_expiration(redis::SetExpiry::PX(millis(RESULT_LIFETIME)));
                self.run(|mut c| async move {
                    c.set_options::<_, _, Option<String>>(&k, lost, options)
                        .await
                })
                .await?;
                return Ok(FirstRun::Lost);
            };
            let (state, rest) = match value.iter().position(|b| *b == b':') {
                Some(at) => (&value[..at], &value[at + 1..]),
                None => (&value[..], &[][..]),
            };
            let (recorded, payload) = match rest.iter().position(|b| *b == b':') {
                Some(at) => (&rest[..at], &rest[at + 1..]),
                None => (rest, &[][..]),
            };
            if recorded != digest.as_bytes() {
                return Ok(FirstRun::OtherCall);
            }
            match state {
                b"done" => return Ok(FirstRun::Finished(payload.to_vec())),
                b"large" => return Ok(FirstRun::TooLarge),
                b"lost" => return Ok(FirstRun::Lost),
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(FirstRun::StillRunning);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_separate_fields() {
        assert_ne!(
            call_digest("tools/call", "ab", "c"),
            call_digest("tools/call", "a", "bc")
        );
        assert_eq!(call_digest("m", "t", "{}"), call_digest("m", "t", "{}"));
    }

    #[test]
    fn ids_are_bounded_visible_ascii() {
        assert!(check_call_id("7f00:1a2b_0001").is_ok());
        assert!(check_call_id("").is_err());
        assert!(check_call_id("a b").is_err());
        assert!(check_call_id(&"x".repeat(MAX_CALL_ID_BYTES + 1)).is_err());
    }
}
