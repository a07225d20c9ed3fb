//! The `[limits]` table of a manifest: each key overrides the command line's default for
//! that plugin, within the host's maxima, validated into [`Limits`].
//!
//! Depends on its parent (the manifest's errors) and the policy types only; nothing else in
//! the crate.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{PolicyError, bounded};
use crate::policy::Limits;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct LimitsTable {
    fuel: Option<u64>,
    timeout_ms: Option<u64>,
    memory_mib: Option<u64>,
    output_kib: Option<u64>,
    result_kib: Option<u64>,
}

pub(super) fn limits(
    file: &Path,
    table: &LimitsTable,
    defaults: Limits,
) -> Result<Limits, PolicyError> {
    let positive =
        |key: &str, value: Option<u64>| bounded(file, &format!("limits.{key}"), value, u64::MAX);
    let bytes = |key: &str,
                 value: Option<u64>,
                 unit: u64,
                 max: u64,
                 default: usize|
     -> Result<usize, PolicyError> {
        match bounded(file, &format!("limits.{key}"), value, max)? {
            None => Ok(default),
            Some(v) => usize::try_from(v * unit)
                .map_err(|_| PolicyError::at(file, format!("limits.{key}"), "too large")),
        }
    };
    Ok(Limits {
        fuel: positive("fuel", table.fuel)?.unwrap_or(defaults.fuel),
        timeout: positive("timeout-ms", table.timeout_ms)?
            .map_or(defaults.timeout, Duration::from_millis),
        memory_bytes: bytes(
            "memory-mib",
            table.memory_mib,
            1 << 20,
            4096,
            defaults.memory_bytes,
        )?,
        output_bytes: bytes(
            "output-kib",
            table.output_kib,
            1 << 10,
            64 << 10,
            defaults.output_bytes,
        )?,
        result_bytes: bytes(
            "result-kib",
            table.result_kib,
            1 << 10,
            1 << 20,
            defaults.result_bytes,
        )?,
    })
}
