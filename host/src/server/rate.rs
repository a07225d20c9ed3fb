//! A token bucket: how mcpbox bounds what a plugin (or a client's request) may trigger per
//! second — log messages, progress reports, resource updates — with bursts allowed; and
//! [`WarnEvery`], how a repeated refusal is logged at warn at most every few seconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One bucket: `rate` tokens a second, up to `burst`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
    dropped: u64,
}

/// What [`RateLimit::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Passed; this many were dropped since the last one that passed.
    Passed {
        /// Dropped since the last one that passed.
        dropped: u64,
    },
    /// Over the rate: the first drop of a run (worth one log line).
    FirstDropped,
    /// Over the rate, again.
    Dropped,
}

impl RateLimit {
    /// A full bucket of `burst` tokens, refilled at `rate` a second.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            updated: Instant::now(),
            dropped: 0,
        }
    }

    /// Whether it is full (no token taken in the time the rate refills the burst): then it is
    /// as good as a new one, and forgetting it changes nothing.
    pub fn is_full(&self) -> bool {
        self.tokens + self.updated.elapsed().as_secs_f64() * self.rate >= self.burst
    }

    /// Take one token, if there is one.
    pub fn admit(&mut self) -> Admission {
        let now = Instant::now();
        let elapsed = now.duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.updated = now;
        if self.tokens < 1.0 {
            self.dropped += 1;
            return if self.dropped == 1 {
                Admission::FirstDropped
            } else {
                Admission::Dropped
            };
        }
        self.tokens -= 1.0;
        Admission::Passed {
            dropped: std::mem::take(&mut self.dropped),
        }
    }
}

/// Whether a repeated event is logged at warn now: at most once every `every` seconds (the
/// rest at debug), shared by threads without a lock.
#[derive(Debug)]
pub struct WarnEvery {
    every: u64,
    made: Instant,
    /// When it last said yes, in seconds since `made`, plus `every` (0: never).
    last: AtomicU64,
}

impl WarnEvery {
    /// At most once every `every` seconds.
    pub fn new(every: u64) -> Self {
        Self {
            every,
            made: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Whether to warn now (yes for the first event, then once per period).
    pub fn now(&self) -> bool {
        let now = self.made.elapsed().as_secs() + self.every;
        let last = self.last.load(Ordering::Relaxed);
        now >= last + self.every
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let mut limit = RateLimit::new(10.0, 5.0);
        let passed = (0..100)
            .filter(|_| matches!(limit.admit(), Admission::Passed { .. }))
            .count();
        assert!((5..=6).contains(&passed), "{passed}");
        let mut limit = RateLimit::new(10.0, 1.0);
        assert_eq!(limit.admit(), Admission::Passed { dropped: 0 });
        assert_eq!(limit.admit(), Admission::FirstDropped);
        assert_eq!(limit.admit(), Admission::Dropped);
    }

    #[test]
    fn only_an_untouched_bucket_is_full() {
        let mut limit = RateLimit::new(0.001, 2.0);
        assert!(limit.is_full());
        assert_eq!(limit.admit(), Admission::Passed { dropped: 0 });
        assert!(!limit.is_full());
    }
}
