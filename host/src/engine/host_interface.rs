//! `mcpbox:plugin/host`, the plugin world's own imports: log, progress, cancellation, requests
//! to the client (sampling, elicitation, roots) and list-change notices, each forwarded to the
//! call's [`CallReach`]. A plugin's log messages are cut to [`MAX_LOG_MESSAGE_BYTES`], written
//! to the host's log as single escaped lines ([`log_line`]), at most
//! [`MAX_LOG_BYTES_PER_CALL`] per call.
//!
//! The capability owns its per-call state ([`HostInterfaceCtx`]), on which the host traits are
//! implemented; the store's state lends it to the linker through one accessor.

use std::sync::Arc;

use super::bindings::mcpbox::plugin::{host, types};
use super::{CallReach, HostRequest};
use crate::policy::PluginName;

/// The longest log message a plugin may send; longer ones are cut (and say so).
pub const MAX_LOG_MESSAGE_BYTES: usize = 16 << 10;
/// How much log text one call may write to the host's log; beyond it, its messages still
/// reach clients (rate-limited) but not the host's log.
pub const MAX_LOG_BYTES_PER_CALL: usize = 1 << 20;

/// `text` as one line for the host's log: control characters (newlines included) escaped, so a
/// plugin can never start a line that reads as the host's own, and at most `max` bytes kept.
pub fn log_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for (i, c) in text.char_indices() {
        if out.len() >= max {
            out.push_str(&format!("… ({} more bytes)", text.len() - i));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `message` cut to at most `max` bytes on a character boundary, saying how much was cut.
pub fn cut_message(message: String, max: usize) -> String {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes cut by mcpbox)",
        &message[..end],
        message.len() - end
    )
}

/// What one call's `host` imports reach: the client behind [`CallReach`], and how much the
/// call has logged so far.
pub struct HostInterfaceCtx {
    plugin: PluginName,
    /// Log text this call wrote to the host's log so far.
    logged_bytes: usize,
    reach: Arc<dyn CallReach>,
    /// Places for the call's requests to the client that are waiting on an answer: a 0.3
    /// plugin may have several in flight ([`MAX_REQUESTS_IN_FLIGHT`]).
    requests: Arc<tokio::sync::Semaphore>,
}

/// Requests to the client (sampling, elicitation, roots) one call may have waiting at once.
/// A 0.2 call has one at most (its imports are synchronous); a 0.3 call's are `async`, and each
/// keeps its parameters until the client answers, so past this many the next fails at once.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 16;
/// The parameters of one request to the client from a 0.3 call, at most: with
/// [`MAX_REQUESTS_IN_FLIGHT`], a call keeps no more waiting than one 0.2 host call may pass
/// (`HOSTCALL_DATA_BYTES`, 64 MiB).
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

impl HostInterfaceCtx {
    /// The `host` imports of one call into `plugin`, forwarded to `host`.
    pub fn new(plugin: PluginName, reach: Arc<dyn CallReach>) -> Self {
        Self {
            plugin,
            logged_bytes: 0,
            reach,
            requests: Arc::new(tokio::sync::Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
        }
    }

    /// Let go of the call's host (its client, its input round) once the call has returned:
    /// the store may outlive the answer, and nothing of the request may outlive that.
    pub fn detach(&mut self) {
        self.reach = Arc::new(super::Detached);
    }
}

impl HostInterfaceCtx {
    /// Where the call's `host` imports go.
    pub(crate) fn reach(&self) -> &Arc<dyn CallReach> {
        &self.reach
    }

    /// A place for one request to the client, if the call has one free.
    pub(crate) fn request_place(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.requests).try_acquire_owned().ok()
    }
}

impl types::Host for HostInterfaceCtx {}

impl host::Host for HostInterfaceCtx {
    async fn log(&mut self, level: types::LogLevel, message: String) {
        use types::LogLevel as L;
        let message = cut_message(message, MAX_LOG_MESSAGE_BYTES);
        let plugin = &*self.plugin;
        if self.logged_bytes < MAX_LOG_BYTES_PER_CALL {
            self.logged_bytes += message.len();
            let line = log_line(&message, MAX_LOG_MESSAGE_BYTES);
            match level {
                L::Debug => tracing::debug!(target: "plugin", plugin, "{line}"),
                L::Info | L::Notice => tracing::info!(target: "plugin", plugin, "{line}"),
                L::Warning => tracing::warn!(target: "plugin", plugin, "{line}"),
                L::Error | L::Critical | L::Alert | L::Emergency => {
                    tracing::error!(target: "plugin", plugin, "{line}");
                }
            }
            if self.logged_bytes >= MAX_LOG_BYTES_PER_CALL {
                tracing::warn!(
                    plugin,
                    limit = MAX_LOG_BYTES_PER_CALL,
                    "the call logged over its limit; its further messages are not written to the host's log"
                );
            }
        }
        Arc::clone(&self.reach).log(level, message).await;
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        Arc::clone(&self.reach)
            .progress(progress, total, message)
            .await;
    }

    async fn cancelled(&mut self) -> bool {
        self.reach.cancelled()
    }

    async fn sample(&mut self, request: String) -> Result<String, String> {
        Arc::clone(&self.reach)
            .request(HostRequest::Sample, request)
            .await
    }

    async fn elicit(&mut self, request: String) -> Result<String, String> {
        Arc::clone(&self.reach)
            .request(HostRequest::Elicit, request)
            .await
    }

    async fn list_roots(&mut self) -> Result<String, String> {
        Arc::clone(&self.reach)
            .request(HostRequest::ListRoots, "{}".to_owned())
            .await
    }

    async fn notify_list_changed(&mut self, kind: types::ListKind) {
        self.reach.list_changed(kind);
    }

    async fn notify_resource_updated(&mut self, uri: String) {
        self.reach.resource_updated(uri);
    }
}
