//! Task records shared by replicas (the tasks extension), kept in Redis so that any replica
//! answers `tasks/get`, `tasks/update` and `tasks/cancel` for a task another one runs.
//!
//! Keys, apart from plugin state, the call ledger and budgets, all under
//! `mcpbox:task:<id>` (`<id>` is a UUID the server made; ids a client sends that are not of
//! that form never reach Redis): the record itself (JSON, written by whoever changes the
//! task), `…:cancel` (set by `tasks/cancel`; the running replica looks at each lease
//! renewal), `…:answers:<round>` (a hash of the answers given to an input round, merged and
//! read back in one script, so two updates at once lose nothing) and `…:claim:<round>` (`SET
//! NX`: exactly one update resumes the task). Each key expires with the task.
//!
//! Each caller's share of the store is kept beside: `mcpbox:tasks-of:<owner>` (a sorted set:
//! the caller's task ids scored by when their records lapse) and `…:bytes` (a hash: each
//! id's record size). A record is written by one script that drops the lapsed ids, counts the
//! caller's others and writes the record only within its share, so replicas writing at once
//! cannot together pass it. `<owner>` is a digest the server made of the caller's key.
//!
//! The server decides what to keep (`server::tasks`).

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;

use super::KvError;

/// The longest one task operation may take.
pub const TASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Merge answers and read them all back. KEYS: the round's hash. ARGV: ttl in ms, then
/// key/value pairs. Returns the hash as a flat list.
const ANSWER: &str = r"
if #ARGV > 1 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
end
return redis.call('HGETALL', KEYS[1])
";

/// Write a record within its owner's share. KEYS: the record, the owner's ids by expiry, the
/// owner's sizes by id. ARGV: id, record, ttl in ms, most records, most bytes. Returns 1 when
/// written, 0 when the owner keeps its share already (a record it replaces not counted; one
/// record alone may pass the bytes).
const SAVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for i = 1, #lapsed, 500 do
  local part = {unpack(lapsed, i, math.min(i + 499, #lapsed))}
  redis.call('ZREM', KEYS[2], unpack(part))
  redis.call('HDEL', KEYS[3], unpack(part))
end
local size = string.len(ARGV[2])
local count = redis.call('ZCARD', KEYS[2])
local bytes = 0
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do bytes = bytes + tonumber(v) end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  count = count - 1
  bytes = bytes - (tonumber(redis.call('HGET', KEYS[3], ARGV[1])) or 0)
elseif count >= tonumber(ARGV[4]) then
  return 0
end
if count > 0 and bytes + size > tonumber(ARGV[5]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], size)
for i = 2, 3 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
";

/// Whether a task id can be one this server made (a hyphenated UUID): anything else is no
/// task, and never reaches Redis as part of a key.
pub fn is_task_id(id: &str) -> bool {
    id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The shared task store.
pub struct RedisTasks {
    connection: ConnectionManager,
    server: String,
    answer: Script,
    save: Script,
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisTasks {
    /// Tasks kept in the Redis at `url` (connected lazily).
    pub fn connect(url: &str) -> Result<Self, KvError> {
        let (connection, server) = super::redis::lazy_connection(url)?;
        Ok(Self {
            connection,
            server,
            answer: Script::new(ANSWER),
            save: Script::new(SAVE),
        })
    }

    fn key(id: &str) -> Result<String, KvError> {
        if !is_task_id(id) {
            return Err(KvError::InvalidKey(format!("`{id}` is not a task id")));
        }
        Ok(format!("mcpbox:task:{id}"))
    }

    async fn within<T>(
        &self,
        work: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, KvError> {
        super::redis::within(&self.server, TASK_TIMEOUT, work).await
    }

    /// Write task `id`'s record, `owner`'s, kept `ttl`, if `owner` keeps fewer than
    /// `max_records` records and `max_bytes` bytes of them with it (the record it replaces
    /// not counted): `false` when it does not.
    pub async fn save(
        &self,
        id: &str,
        owner: &str,
        record: Vec<u8>,
        ttl: Duration,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<bool, KvError> {
        let key = Self::key(id)?;
        if owner.is_empty() || !owner.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(KvError::InvalidKey(format!(
                "`{owner}` is not a digest of a caller"
            )));
        }
        let owned = format!("mcpbox:tasks-of:{owner}");
        let mut invocation = self.save.prepare_invoke();
        invocation
            .key(key)
            .key(&owned)
            .key(format!("{owned}:bytes"))
            .arg(id)
            .arg(record)
            .arg(millis(ttl))
            .arg(max_records)
            .arg(max_bytes);
        let mut connection = self.connection.clone();
        let written: u8 = self
            .within(invocation.invoke_async(&mut connection))
            .await?;
        Ok(written == 1)
    }

    /// Task `id`'s record and whether it was cancelled (`None`: no such task).
    pub async fn load(&self, id: &str) -> Result<Option<(Vec<u8>, bool)>, KvError> {
        if !is_task_id(id) {
            return Ok(None);
        }
        let key = Self::key(id)?;
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("MGET");
        command.arg(&key).arg(format!("{key}:cancel"));
        let (record, cancelled): (Option<Vec<u8>>, Option<Vec<u8>>) =
            self.within(command.query_async(&mut connection)).await?;
        Ok(record.map(|record| (record, cancelled.is_some())))
    }

    /// Add `answers` to round `round`'s and return them all.
    pub async fn answer(
        &self,
        id: &str,
        round: u32,
        answers: Vec<(String, Vec<u8>)>,
        ttl: Duration,
    ) -> Result<BTreeMap<String, Vec<u8>>, KvError> {
        let key = format!("{}:answers:{round}", Self::key(id)?);
        let mut invocation = self.answer.prepare_invoke();
        invocation.key(key).arg(millis(ttl));
        for (k, v) in answers {
            invocation.arg(k).arg(v);
        }
        let mut connection = self.connection.clone();
        let flat: Vec<Vec<u8>> = self
            .within(invocation.invoke_async(&mut connection))
            .await?;
        let mut all = BTreeMap::new();
        let mut pairs = flat.into_iter();
        while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
            all.insert(String::from_utf8_lossy(&k).into_owned(), v);
        }
        Ok(all)
    }

    /// Mark task `id` cancelled.
    pub async fn cancel(&self, id: &str, ttl: Duration) -> Result<(), KvError> {
        let key = format!("{}:cancel", Self::key(id)?);
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("SET");
        command.arg(key).arg(1).arg("PX").arg(millis(ttl));
        self.within(command.query_async::<()>(&mut connection))
            .await
    }

    /// Claim the resumption of `id` after round `round`: `true` for the first claim only.
    pub async fn claim(&self, id: &str, round: u32, ttl: Duration) -> Result<bool, KvError> {
        let key = format!("{}:claim:{round}", Self::key(id)?);
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("SET");
        command.arg(key).arg(1).arg("NX").arg("PX").arg(millis(ttl));
        let set: Option<String> = self.within(command.query_async(&mut connection)).await?;
        Ok(set.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_the_server_makes_name_keys() {
        assert!(is_task_id(&uuid::Uuid::new_v4().to_string()));
        for id in [
            "",
            "gate-test",
            "../x",
            &"a".repeat(36),
            "tasks-conformance-nonexistent-12345",
        ] {
            assert!(!is_task_id(id) || id.len() == 36, "{id}");
        }
        assert!(!is_task_id("gate-test"));
        assert!(RedisTasks::key("x:y").is_err());
    }
}
