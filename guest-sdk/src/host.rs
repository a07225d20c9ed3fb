//! What the host offers a plugin while it handles a call: logging, progress, cancellation,
//! and requests to the client (sampling, elicitation, roots).
//!
//! These functions only make sense during a call. Requests to the client fail with a message
//! when the client did not declare the capability, or when this host does not offer it.

use serde_json::Value;

use crate::bindings::mcpbox::plugin::host as imports;
use crate::{ListKind, LogLevel};

/// Log `message` at `level`. It appears in the host's log, tagged with the plugin's name, and
/// reaches clients that asked for log messages at that level.
pub fn log(level: LogLevel, message: &str) {
    imports::log(level, message);
}

/// Log at debug level.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Log at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Log at warning level.
pub fn warn(message: &str) {
    log(LogLevel::Warning, message);
}

/// Log at error level.
pub fn error(message: &str) {
    log(LogLevel::Error, message);
}

/// Report progress of the current call: `progress` must grow with each report; `total`, if
/// known, is the value at which the work is done.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    imports::progress(progress, total, message);
}

/// Whether the client has cancelled the current call. Long work should check it and stop.
pub fn cancelled() -> bool {
    imports::cancelled()
}

/// The `_meta` key that names a question for a 2026-07-28 client's input request.
///
/// With 2026-07-28 clients the host does not send the client a request while a call runs: it
/// ends the call with `input_required`, and runs it again, in a fresh instance, once the client
/// answered. Each question travels under a key; put `"_meta": {INPUT_KEY_META: "user_name"}`
/// in a request to choose it (the host removes it before asking). Without it the key is the
/// kind and the question's position (`elicitation-1`), so ask in the same order each run.
pub const INPUT_KEY_META: &str = "mcpbox/inputKey";

/// Ask the client's model for a completion. `request` holds the params of MCP's
/// `sampling/createMessage`; the answer is the client's result.
pub fn sample(request: &Value) -> Result<Value, String> {
    round_trip(request, imports::sample)
}

/// Ask the client's user for input. `request` holds the params of MCP's
/// `elicitation/create`; the answer is the client's result.
pub fn elicit(request: &Value) -> Result<Value, String> {
    round_trip(request, imports::elicit)
}

/// Ask the client for its roots (the result of MCP's `roots/list`).
pub fn list_roots() -> Result<Value, String> {
    let answer = imports::list_roots()?;
    serde_json::from_str(&answer).map_err(|e| format!("the host sent invalid JSON: {e}"))
}

/// Tell the host that this plugin's list of `kind` changed, so it reads it again.
pub fn notify_list_changed(kind: ListKind) {
    imports::notify_list_changed(kind);
}

/// Tell the host that the resource at `uri` changed, so subscribed clients hear of it. In a
/// plugin granted caller buckets, only the subscriptions of the caller this call serves hear
/// of it (in any of that caller's sessions): the change is taken to be to that caller's own
/// state, which no other caller reads.
pub fn notify_resource_updated(uri: &str) {
    imports::notify_resource_updated(uri);
}

fn round_trip(request: &Value, call: fn(&str) -> Result<String, String>) -> Result<Value, String> {
    let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let answer = call(&request)?;
    serde_json::from_str(&answer).map_err(|e| format!("the host sent invalid JSON: {e}"))
}
