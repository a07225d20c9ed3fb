//! What the host offers a 0.3 plugin while it handles a call: logging and progress (as in
//! 0.2), and requests to the client as `async fn`s, so several may be in flight. There is no
//! `cancelled()`: a cancelled 0.3 call learns it from its [`Output`](super::Output) (a write
//! fails with [`Cancelled`](super::Cancelled)) or its awaits are dropped with it.

use serde_json::Value;

use super::bindings::mcpbox::plugin::host as imports;
use crate::{ListKind, LogLevel};

/// Log `message` at `level` (see [`crate::host::log`]).
pub fn log(level: LogLevel, message: &str) {
    imports::log(level, message);
}

/// Log at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Report progress of the current call (see [`crate::host::progress`]).
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    imports::progress(progress, total, message);
}

/// Ask the client's model for a completion: `request` holds the params of MCP's
/// `sampling/createMessage`.
pub async fn sample(request: &Value) -> Result<Value, String> {
    let answer = imports::sample(request.to_string()).await?;
    serde_json::from_str(&answer).map_err(|e| e.to_string())
}

/// Ask the client's user for input: `request` holds the params of MCP's
/// `elicitation/create`.
pub async fn elicit(request: &Value) -> Result<Value, String> {
    let answer = imports::elicit(request.to_string()).await?;
    serde_json::from_str(&answer).map_err(|e| e.to_string())
}

/// The client's roots (the answer to `roots/list`).
pub async fn list_roots() -> Result<Value, String> {
    let answer = imports::list_roots().await?;
    serde_json::from_str(&answer).map_err(|e| e.to_string())
}

/// Tell the host one of the plugin's lists changed.
pub fn notify_list_changed(kind: ListKind) {
    imports::notify_list_changed(kind);
}
