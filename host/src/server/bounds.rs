//! Global bounds on what clients can make the host hold at once: HTTP sessions, listen
//! streams, and bytes of requests being read or served. Each is a [`Capacity`]: a count with a
//! maximum. Taking from one gives a [`Share`] that is given back when dropped, or, at the
//! maximum, [`AtLimit`], which names the limit and the option that raises it. Transports
//! answer `AtLimit` as HTTP 503 with `Retry-After`, or as the JSON-RPC error of
//! [`AtLimit::error`]. Each bound's maximum, use and refusals are exported as metrics by
//! limit.
//!
//! These bounds are global: they keep the process within its memory and descriptors whoever
//! asks. Budgets per caller sit beside them once callers are told apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::rate::WarnEvery;
use crate::metrics::{Bound, metrics};
use crate::protocol::ErrorObject;

/// The JSON-RPC error code of a request refused at a global bound (a server error of the
/// implementation-defined range).
pub const AT_LIMIT: i32 = -32000;

/// How long a client refused at a bound is told to wait before trying again, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Open HTTP sessions, by default.
pub const DEFAULT_MAX_SESSIONS: usize = 4096;
/// Open listen streams, by default (fewer when descriptors are short: see the HTTP transport).
pub const DEFAULT_MAX_LISTEN_STREAMS: usize = 1024;
/// Bytes of requests in flight, by default.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 64 << 20;

/// One bound: how much is in use, and the most there may be.
#[derive(Debug)]
pub struct Capacity {
    limit: Bound,
    max: usize,
    used: AtomicUsize,
    /// Refusals logged at warn at most every [`WARN_EVERY_SECS`].
    warn: WarnEvery,
    /// `mcpbox_limit_in_use` for this bound, kept to set without a lookup.
    gauge: crate::metrics::BoundGauge,
}

/// Refusals at one bound are logged at warn at most this often (the rest at debug).
const WARN_EVERY_SECS: u64 = 10;

/// Part of a [`Capacity`], given back when dropped.
#[derive(Debug)]
#[must_use = "a share is given back when dropped"]
pub struct Share {
    capacity: Arc<Capacity>,
    amount: usize,
}

/// A request refused at a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server is at its limit of {max} {what} ({option}); try again later",
    what = describe(*limit).0,
    option = describe(*limit).1
)]
pub struct AtLimit {
    /// Which bound.
    pub limit: Bound,
    /// Its maximum.
    pub max: usize,
}

/// What a bound counts, and the option that sets it.
fn describe(limit: Bound) -> (&'static str, &'static str) {
    match limit {
        Bound::Sessions => ("open sessions", "--max-sessions"),
        Bound::ListenStreams => ("open listen streams", "--max-listen-streams"),
        Bound::RequestBytes => (
            "bytes of requests in flight",
            "--max-request-bytes-in-flight",
        ),
    }
}

impl AtLimit {
    /// The JSON-RPC error naming the limit: [`AT_LIMIT`], with the limit, its maximum and when
    /// to try again in `data`.
    pub fn error(&self) -> ErrorObject {
        ErrorObject::new(AT_LIMIT, self.to_string()).with_data(json!({
            "limit": self.limit.as_str(),
            "max": self.max,
            "retryAfterSeconds": RETRY_AFTER_SECS,
        }))
    }
}

impl Capacity {
    /// A bound of `max` on `limit`.
    pub fn new(limit: Bound, max: usize) -> Arc<Self> {
        metrics().set_bound(limit, max);
        let gauge = metrics().bound_gauge(limit);
        gauge.set(0);
        Arc::new(Self {
            limit,
            max,
            used: AtomicUsize::new(0),
            warn: WarnEvery::new(WARN_EVERY_SECS),
            gauge,
        })
    }

    /// Take `amount`, or refuse if that would pass the maximum (counted as a refusal).
    pub fn take(self: &Arc<Self>, amount: usize) -> Result<Share, AtLimit> {
        self.reserve(amount)?;
        Ok(Share {
            capacity: Arc::clone(self),
            amount,
        })
    }

    /// Count `amount` as used, or refuse if that would pass the maximum (counted as a
    /// refusal).
    fn reserve(&self, amount: usize) -> Result<(), AtLimit> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = used.checked_add(amount).filter(|n| *n <= self.max) else {
                let refused = AtLimit {
                    limit: self.limit,
                    max: self.max,
                };
                self.refused(&refused);
                return Err(refused);
            };
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.gauge.set(next);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    /// Count a refusal, and log it: at warn at most every [`WARN_EVERY_SECS`] per bound.
    fn refused(&self, refused: &AtLimit) {
        metrics().bound_refused(self.limit);
        if self.warn.now() {
            tracing::warn!(limit = self.limit.as_str(), "refused a request: {refused}");
        } else {
            tracing::debug!(limit = self.limit.as_str(), "refused a request: {refused}");
        }
    }

    /// How much is in use now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The maximum.
    pub fn max(&self) -> usize {
        self.max
    }
}

impl Share {
    /// Take `amount` more into this share (a request's bytes as they arrive), or refuse if
    /// that would pass the maximum; what it already holds stays held.
    pub fn grow(&mut self, amount: usize) -> Result<(), AtLimit> {
        self.capacity.reserve(amount)?;
        self.amount = self.amount.saturating_add(amount);
        Ok(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let capacity = &self.capacity;
        let left = capacity.used.fetch_sub(self.amount, Ordering::AcqRel) - self.amount;
        capacity.gauge.set(left);
    }
}

/// The global bounds of one process, shared by every session and transport.
#[derive(Debug)]
pub struct ProcessLimits {
    /// Open HTTP sessions (2025-11-25 and SSE).
    pub sessions: Arc<Capacity>,
    /// Open listen streams.
    pub listen_streams: Arc<Capacity>,
    /// Bytes of requests being read or served.
    pub request_bytes: Arc<Capacity>,
}

impl ProcessLimits {
    /// Bounds with these maxima.
    pub fn new(sessions: usize, listen_streams: usize, request_bytes: usize) -> Self {
        Self {
            sessions: Capacity::new(Bound::Sessions, sessions),
            listen_streams: Capacity::new(Bound::ListenStreams, listen_streams),
            request_bytes: Capacity::new(Bound::RequestBytes, request_bytes),
        }
    }
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self::new(
            DEFAULT_MAX_SESSIONS,
            DEFAULT_MAX_LISTEN_STREAMS,
            DEFAULT_MAX_REQUEST_BYTES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_given_back_and_the_maximum_holds() {
        let capacity = Capacity::new(Bound::ListenStreams, 2);
        let a = capacity.take(1).unwrap();
        let b = capacity.take(1).unwrap();
        let refused = capacity.take(1).unwrap_err();
        assert_eq!(refused.max, 2);
        assert!(
            refused.to_string().contains("--max-listen-streams"),
            "{refused}"
        );
        assert_eq!(refused.error().code, AT_LIMIT);
        assert_eq!(refused.error().data.unwrap()["limit"], "listen_streams");
        drop(a);
        let c = capacity.take(1).unwrap();
        assert_eq!(capacity.in_use(), 2);
        drop((b, c));
        assert_eq!(capacity.in_use(), 0);
        assert!(capacity.take(3).is_err());
        assert!(capacity.take(usize::MAX).is_err());
    }

    #[test]
    fn a_share_grows_to_the_maximum_and_gives_all_of_it_back() {
        let capacity = Capacity::new(Bound::RequestBytes, 100);
        let mut share = capacity.take(10).unwrap();
        share.grow(80).unwrap();
        let other = capacity.take(10).unwrap();
        let refused = share.grow(1).unwrap_err();
        assert_eq!(refused.max, 100);
        assert_eq!(capacity.in_use(), 100);
        drop(share);
        assert_eq!(capacity.in_use(), 10);
        drop(other);
        assert_eq!(capacity.in_use(), 0);
    }
}
