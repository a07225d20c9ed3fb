//! Budgets shared by replicas: each caller's request rate and open sessions kept in Redis, so
//! that a caller spreading its requests over N replicas still has one budget, not N.
//!
//! Keys, apart from plugin state and the call ledger: `mcpbox:budget:rate:<caller>` (a hash:
//! `tokens`, `at`) is the caller's token bucket, refilled by Redis's own clock, so replicas
//! whose clocks differ agree; `mcpbox:budget:sessions:<caller>` (a sorted set: session ids
//! scored by when they lapse) holds the caller's open sessions. `<caller>` is a digest of the
//! caller's key chosen by the server, never text a client chose. Each operation is one Lua
//! script, atomic across replicas; every key expires by itself once unused, so a replica that
//! dies leaves nothing behind for longer than a bucket's refill or a session's idle time.
//!
//! The server decides when to ask (`server::budget`).

use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;

use super::KvError;

/// The longest a budget operation may take: it is on the request path.
pub const BUDGET_TIMEOUT: Duration = Duration::from_millis(250);

/// Take a token. KEYS: bucket. ARGV: rate a second, burst. Returns the seconds to wait for
/// the next token (as text), `0` when one was taken.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
";

/// Open a session. KEYS: the caller's sessions. ARGV: session id, most sessions, lifetime in
/// ms. Returns 1 when opened (or already open), 0 at the budget.
const OPEN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) + 1000)
return 1
";

/// The shared budgets' store.
pub struct RedisBudgets {
    connection: ConnectionManager,
    server: String,
    take: Script,
    open: Script,
}

impl RedisBudgets {
    /// Budgets kept in the Redis at `url` (connected lazily).
    pub fn connect(url: &str) -> Result<Self, KvError> {
        let (connection, server) = super::redis::lazy_connection(url)?;
        Ok(Self {
            connection,
            server,
            take: Script::new(TAKE),
            open: Script::new(OPEN),
        })
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, KvError> {
        let mut connection = self.connection.clone();
        super::redis::within(
            &self.server,
            BUDGET_TIMEOUT,
            invocation.invoke_async(&mut connection),
        )
        .await
    }

    /// Take one token of `caller`'s bucket (`rate` a second, `burst` at most): `None` when
    /// taken, else the seconds until the next one.
    pub async fn take_token(
        &self,
        caller: &str,
        rate: f64,
        burst: f64,
    ) -> Result<Option<f64>, KvError> {
        let mut invocation = self.take.prepare_invoke();
        invocation
            .key(format!("mcpbox:budget:rate:{caller}"))
            .arg(rate)
            .arg(burst);
        let wait: String = self.run(invocation).await?;
        let wait: f64 = wait.parse().map_err(|_| {
            KvError::Unavailable(format!("Redis at {} answered `{wait}`", self.server))
        })?;
        Ok((wait > 0.0).then_some(wait))
    }

    /// Count session `id` among `caller`'s, for `lifetime` unless closed first: `false` when
    /// `caller` already has `max`.
    pub async fn open_session(
        &self,
        caller: &str,
        id: &str,
        max: usize,
        lifetime: Duration,
    ) -> Result<bool, KvError> {
        let mut invocation = self.open.prepare_invoke();
        invocation
            .key(format!("mcpbox:budget:sessions:{caller}"))
            .arg(id)
            .arg(max)
            .arg(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        let opened: i64 = self.run(invocation).await?;
        Ok(opened == 1)
    }

    /// Stop counting session `id` among `caller`'s.
    pub async fn close_session(&self, caller: &str, id: &str) -> Result<(), KvError> {
        let mut connection = self.connection.clone();
        let key = format!("mcpbox:budget:sessions:{caller}");
        let mut command = redis::cmd("ZREM");
        command.arg(key).arg(id);
        let work = command.query_async::<i64>(&mut connection);
        super::redis::within(&self.server, BUDGET_TIMEOUT, work)
            .await
            .map(drop)
    }
}
