//! The `[limits]` table of a manifest: each key overrides the command line's default for
//! that plugin, within the host's maxima, validated into [`Limits`].

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
        // Set by `[tasks] timeout-ms` (see `tasks`); until then, the operator's maximum.
        task_timeout: defaults.task_timeout,
    })
}

/// `[tasks]`: which tools may run as tasks, and how long a task may take.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct TasksTable {
    #[serde(default)]
    optional: Vec<String>,
    #[serde(default)]
    required: Vec<String>,
    timeout_ms: Option<u64>,
}

/// Validate `[tasks]` into the tools it names and the task time limit it sets in `limits`:
/// names once each, in one list only; `timeout-ms` at most the operator's maximum (what
/// `limits.task_timeout` holds on entry). Without `timeout-ms`, a task gets the plugin's
/// `timeout`.
pub(super) fn tasks(
    file: &Path,
    table: TasksTable,
    limits: &mut Limits,
) -> Result<crate::policy::TaskTools, PolicyError> {
    let max = limits.task_timeout;
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    limits.task_timeout = match table.timeout_ms {
        None => limits.timeout,
        Some(0) => {
            return Err(PolicyError::at(
                file,
                "tasks.timeout-ms",
                "must be greater than 0",
            ));
        }
        Some(ms) if ms > max_ms => {
            return Err(PolicyError::at(
                file,
                "tasks.timeout-ms",
                format!("{ms} is over the operator's maximum of {max_ms} (--task-timeout-ms)"),
            ));
        }
        Some(ms) => Duration::from_millis(ms),
    };
    let mut seen = std::collections::HashSet::new();
    for (list, names) in [("optional", &table.optional), ("required", &table.required)] {
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(PolicyError::at(
                    file,
                    format!("tasks.{list}[{i}]"),
                    "a tool name must not be empty",
                ));
            }
            if !seen.insert(name.as_str()) {
                return Err(PolicyError::at(
                    file,
                    format!("tasks.{list}[{i}]"),
                    format!("`{name}` is listed twice"),
                ));
            }
        }
    }
    Ok(crate::policy::TaskTools {
        optional: table.optional,
        required: table.required,
    })
}
