//! Per-plugin limits: how much CPU, wall-clock time, memory and output one call may use.
//!
//! Depends on nothing else in the crate. Everything here is deny-by-default: a plugin gets
//! these limits and no capabilities (no files, network, environment) unless granted.

use std::time::Duration;

/// The limits applied to every call into one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel budget per call: a deterministic measure of executed instructions
    /// (about 1.4 billion units per second of CPU on a current x86-64 core).
    pub fuel: u64,
    /// Wall-clock time one call may take, including time spent waiting in host functions.
    pub timeout: Duration,
    /// The most linear memory one instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// How much of a call's stdout and of its stderr is kept (and logged); the rest is
    /// dropped, never trapping the plugin.
    pub output_bytes: usize,
}

impl Limits {
    /// 5 × 10⁹ units of fuel (a few seconds of CPU).
    pub const DEFAULT_FUEL: u64 = 5_000_000_000;
    /// 30 seconds.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// 128 MiB.
    pub const DEFAULT_MEMORY_BYTES: usize = 128 << 20;
    /// 64 KiB for each of stdout and stderr.
    pub const DEFAULT_OUTPUT_BYTES: usize = 64 << 10;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: Self::DEFAULT_FUEL,
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            output_bytes: Self::DEFAULT_OUTPUT_BYTES,
        }
    }
}
