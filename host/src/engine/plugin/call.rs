//! One call's store and instance ([`ActiveCall`]): loading an export, finishing the call
//! (counting its fuel, keeping or dropping the instance), and deciding why a call failed
//! (fuel, deadline, memory, a trap, a plugin's panic, the host) from what the store recorded.

use super::*;

/// A store and instance for one call, holding its pool slot until dropped.
pub(super) struct ActiveCall {
    pub(super) store: Store<StoreData>,
    pub(super) instance: Instance,
    pub(super) limits: Limits,
    pub(super) started: Instant,
    /// When the instance was made (a kept one serves several calls).
    pub(super) made: Instant,
    /// The caller it may be kept for ([`Principal::key`]), if the plugin's instances may
    /// serve one caller's calls in turn.
    pub(super) keep_for: Option<Arc<str>>,
    /// The fuel the call used, once counted.
    pub(super) fuel_used: Option<u64>,
    /// The pool slot.
    pub(super) _slot: OwnedSemaphorePermit,
    /// Counted in the metrics while a call runs in it.
    pub(super) in_use: Option<GaugeGuard>,
    /// The `tools` export, once looked up and type-checked in this instance (a kept instance
    /// does it once, not at every call).
    pub(super) tools: Option<tools::Guest>,
}

impl Drop for ActiveCall {
    /// Count the fuel the call used, however it ended.
    fn drop(&mut self) {
        self.count_fuel();
    }
}

impl ActiveCall {
    /// A call in `instance`, made at `made`, starting now.
    pub(super) fn new(
        store: Store<StoreData>,
        instance: Instance,
        limits: Limits,
        made: Instant,
        keep_for: Option<Arc<str>>,
        slot: OwnedSemaphorePermit,
        in_use: GaugeGuard,
    ) -> Self {
        Self {
            store,
            instance,
            limits,
            started: Instant::now(),
            made,
            keep_for,
            fuel_used: None,
            _slot: slot,
            in_use: Some(in_use),
            tools: None,
        }
    }

    /// Look up an exported interface in the instance, type-checking it against the contract.
    pub(super) fn load<G>(
        &mut self,
        load: impl FnOnce(&mut Store<StoreData>, &Instance) -> wasmtime::Result<G>,
    ) -> Result<G, CallError> {
        load(&mut self.store, &self.instance).map_err(|e| {
            CallError::Host(format!(
                "its exports do not match the mcpbox:plugin@0.1.0 contract: {e:#}"
            ))
        })
    }

    /// Log what the call printed, and turn a failure into a [`CallError`].
    /// [`Self::check`], and the call's outcome logged at debug (target `mcpbox::calls`): the
    /// plugin, what was called, how long it ran and the fuel it used.
    pub(super) fn finish<T>(
        &mut self,
        kind: &'static str,
        name: &str,
        outcome: wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let result = self.check(outcome);
        let fuel = self.count_fuel();
        if tracing::enabled!(target: "mcpbox::calls", tracing::Level::DEBUG) {
            let outcome = match &result {
                Ok(_) => "returned".to_owned(),
                Err(e) => e.to_string(),
            };
            tracing::debug!(
                target: "mcpbox::calls",
                plugin = self.store.data().plugin(),
                kind,
                name = %log_line(name, 256),
                elapsed_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
                fuel,
                outcome,
                "plugin call"
            );
        }
        result
    }

    /// Count the fuel the call used (once: in the metrics and the caller's budget), before
    /// its answer goes out.
    pub(super) fn count_fuel(&mut self) -> u64 {
        if let Some(used) = self.fuel_used {
            return used;
        }
        let left = self.store.get_fuel().unwrap_or(0);
        let used = self.limits.fuel.saturating_sub(left);
        metrics().fuel(&self.store.data().plugin, used);
        self.store.data().reach().used_fuel(used);
        self.fuel_used = Some(used);
        used
    }

    /// End the call whose outcome is `result`. A call that failed (trapped, ran out of fuel
    /// or memory) is dropped here, so that what it held (a memory bomb's pages) is gone
    /// before its answer goes. One that returned is retired off the answer's path: its host
    /// is let go here; then, in one task of its own (which the runtime runs after the task
    /// the answer wakes: the writer takes the worker's next slot), the store is dropped
    /// (freeing the instance and resetting its pool slot, zeroing the pages the call
    /// dirtied) and `code`'s next spare instance is made, if it wants one. Without a
    /// runtime, the store is dropped here.
    pub(super) fn end<T>(mut self, result: &Result<T, CallError>, code: &PluginCode) {
        if result.is_err() {
            return;
        }
        // Nothing of the request may outlive its answer (the session checks that nothing
        // holds its input round once the call returned).
        self.store.data_mut().detach_reach();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Kept for the caller's next call (then no spare is made: that call takes this).
        let Some(this) = code.keep(self) else {
            return;
        };
        let next = code.claim_spare().then(|| code.clone());
        drop(runtime.spawn(async move {
            drop(this);
            if let Some(code) = next {
                code.fill_spare().await;
            }
        }));
    }

    pub(super) fn check<T>(&mut self, outcome: wasmtime::Result<T>) -> Result<T, CallError> {
        let result = outcome.map_err(|e| classify(&mut self.store, &e, &self.limits));
        log_output(&mut self.store);
        result
    }
}

/// Decide why a call failed, from the error and what the store recorded.
pub(super) fn classify(
    store: &mut Store<StoreData>,
    error: &wasmtime::Error,
    limits: &Limits,
) -> CallError {
    let state = store.data();
    if let Some(requested) = state.limiter.refused {
        return CallError::MemoryLimit {
            limit: state.limiter.max_bytes(),
            requested,
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => CallError::OutOfFuel {
            budget: limits.fuel,
        },
        Some(Trap::Interrupt) => CallError::Timeout {
            after: limits.timeout,
        },
        Some(Trap::StackOverflow) => CallError::StackOverflow,
        trap => {
            let (stderr, _) = state.stderr.peek();
            if let Some(message) = panic_message(&String::from_utf8_lossy(&stderr)) {
                return CallError::Panic { message };
            }
            match trap {
                // Rust keeps its stack in linear memory below the data; running off its end
                // is an out-of-bounds access, and deep recursion is its usual cause.
                Some(Trap::MemoryOutOfBounds) => CallError::Trap(
                    "out of bounds memory access (often a stack overflow from too-deep recursion)"
                        .to_owned(),
                ),
                Some(trap) => CallError::Trap(
                    trap.to_string()
                        .trim_start_matches("wasm trap: ")
                        .to_owned(),
                ),
                None => host_failure(error),
            }
        }
    }
}

/// A failure outside the guest's code: one of wasmtime's own caps, named, or else the error in
/// one line (no wasm backtrace).
pub(super) fn host_failure(error: &wasmtime::Error) -> CallError {
    let causes: Vec<String> = error
        .chain()
        .map(|cause| cause.to_string().lines().next().unwrap_or("").to_owned())
        .filter(|line| {
            !line.is_empty() && !line.starts_with("error while executing at wasm backtrace")
        })
        .collect();
    let said = |needle: &str| causes.iter().any(|c| c.contains(needle));
    if said("resource table has no free keys") {
        return CallError::HandleLimit {
            limit: super::super::state::MAX_HANDLES_PER_CALL,
        };
    }
    if said("fuel allocated for hostcalls has been exhausted") {
        return CallError::HostCallData {
            limit: HOSTCALL_DATA_BYTES,
        };
    }
    let mut message = causes.join(": ");
    if message.len() > 1024 {
        let mut end = 1024;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    CallError::Host(message)
}

/// The message of a Rust panic, from what the guest wrote to stderr.
pub(super) fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let report = &stderr[start..];
    let body = report.split_once(":\n").map_or(report, |(_, body)| body);
    let body = body.split("\nnote: ").next().unwrap_or(body).trim();
    Some(if body.is_empty() {
        "(no message)".to_owned()
    } else {
        body.to_owned()
    })
}

/// Send what the plugin wrote to stdout and stderr to the host's log, tagged with its name.
pub(super) fn log_output(store: &mut Store<StoreData>) {
    let state = store.data();
    let plugin = state.plugin();
    for (stream, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (bytes, dropped) = pipe.take();
        for line in String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            let line = log_line(line, MAX_LOG_MESSAGE_BYTES);
            tracing::info!(target: "plugin", plugin, stream, "{line}");
        }
        if dropped > 0 {
            tracing::warn!(target: "plugin", plugin, stream, dropped, "output over the limit was dropped");
        }
    }
}
