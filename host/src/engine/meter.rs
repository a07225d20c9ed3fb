//! Counting plugin calls: [`CallMeter`] is the one place where a plugin call's outcome reaches
//! the metrics, whether the call ran (to a result, to its own error, to a limit), was dropped
//! before it finished (`cancelled`), or was refused before it ran (`invalid_arguments`).
//!
//! Uses: `metrics`, `policy`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::plugin::CallError;
use crate::metrics::{CallKind, CallOutcome, metrics};
use crate::policy::PluginName;

/// Counts one plugin call in the metrics: its outcome and duration when it ends, or
/// `cancelled` if it is dropped first.
pub(super) struct CallMeter {
    pub(super) plugin: PluginName,
    pub(super) kind: CallKind,
    pub(super) name: Arc<str>,
    started: Instant,
    /// Set by the host when the call is refused a grant.
    pub(super) denied: Arc<AtomicBool>,
    ended: bool,
}

impl CallMeter {
    pub(super) fn start(plugin: &PluginName, kind: CallKind, name: &str) -> Self {
        Self {
            plugin: plugin.clone(),
            kind,
            name: Arc::from(name),
            started: Instant::now(),
            denied: Arc::default(),
            ended: false,
        }
    }

    /// End a call that ran to `result` (`is_error`: whether a value is the plugin's own
    /// error, counted as `denied` when the host refused it a grant during the call).
    pub(super) fn ran<T>(self, result: &Result<T, CallError>, is_error: impl FnOnce(&T) -> bool) {
        let outcome = match result {
            Ok(value) if is_error(value) => {
                if self.denied.load(Ordering::Relaxed) {
                    CallOutcome::Denied
                } else {
                    CallOutcome::IsError
                }
            }
            Ok(_) => CallOutcome::Ok,
            Err(error) => error.outcome(),
        };
        self.end(outcome);
    }

    /// End a call refused before it ran.
    pub(super) fn refused(self, outcome: CallOutcome) {
        self.end(outcome);
    }

    fn end(mut self, outcome: CallOutcome) {
        self.ended = true;
        self.record(outcome);
    }

    fn record(&self, outcome: CallOutcome) {
        metrics().call(
            &self.plugin,
            self.kind,
            &self.name,
            outcome,
            self.started.elapsed(),
        );
    }
}

impl Drop for CallMeter {
    fn drop(&mut self) {
        if !self.ended {
            self.record(CallOutcome::Cancelled);
        }
    }
}
