//! Health and readiness of the HTTP listener, from the moment its port is bound.
//!
//! `serve` binds the port and starts answering before the plugins found at startup have
//! compiled, so an orchestrator can tell a replica that is starting from one that is dead:
//!
//! - `GET /healthz` is 200 as soon as the port is bound, while the process serves.
//! - `GET /readyz` is 503 while the startup load runs and while plugins found at startup are
//!   still listing what they offer (late plugins), 200 after. A shared state store (Redis)
//!   that does not answer does *not* make a replica unready: every replica shares the store,
//!   so a balancer would take them all out and stateless tools would go down with it. The
//!   body says when the store is down; stateful calls get their own clear error.
//! - MCP (`/mcp`, `/sse`, `/messages`) requests that arrive during the startup load wait for
//!   it (every plugin compiled, listings given their bounded wait), for at most
//!   [`STARTUP_HOLD`], so no client sees an empty or partial catalog that fills in behind it
//!   and a client that connects as soon as the port opens is simply answered a little later;
//!   past the hold, 503 with `Retry-After`. From then on MCP is served, and a plugin still
//!   listing is added when it is done (with `list_changed`).
//!
//! Knows nothing of plugins: the caller counts loads through [`Readiness`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::reply::rpc_error;
use super::{App, Shared};
use crate::protocol::error::INTERNAL_ERROR;
use crate::server::Backend;

/// Where the plugins found at startup are: loading, or served (some perhaps still listing).
/// [`Default`] is already started (nothing to wait for).
#[derive(Debug)]
pub struct Readiness {
    started: tokio::sync::watch::Sender<bool>,
    late: AtomicUsize,
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            started: tokio::sync::watch::Sender::new(true),
            late: AtomicUsize::new(0),
        }
    }
}

impl Readiness {
    /// Seconds a client is told to wait (`Retry-After`) while the startup load runs.
    pub const RETRY_AFTER_SECS: u32 = 1;

    /// Not started: MCP is answered 503 until [`Readiness::start`].
    pub fn starting() -> Self {
        Self {
            started: tokio::sync::watch::Sender::new(false),
            late: AtomicUsize::new(0),
        }
    }

    /// The startup load is done: serve MCP.
    pub fn start(&self) {
        self.started.send_replace(true);
    }

    /// Whether MCP is served.
    pub fn is_started(&self) -> bool {
        *self.started.borrow()
    }

    /// Resolves once MCP is served.
    pub async fn wait_started(&self) {
        let mut started = self.started.subscribe();
        // The sender lives as long as `self`, so this cannot fail while borrowed.
        let _ = started.wait_for(|s| *s).await;
    }

    /// A plugin found at startup is still listing: `/readyz` is 503 until the guard drops.
    pub fn late_load(self: &Arc<Self>) -> StillListing {
        self.late.fetch_add(1, Ordering::AcqRel);
        StillListing(Arc::clone(self))
    }

    /// How many plugins found at startup are still listing.
    pub fn late(&self) -> usize {
        self.late.load(Ordering::Acquire)
    }
}

/// Counts a late plugin load as finished when dropped (loaded, failed or aborted).
#[must_use = "the load counts as finished when the guard is dropped"]
pub struct StillListing(Arc<Readiness>);

impl Drop for StillListing {
    fn drop(&mut self) {
        self.0.late.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Liveness: the process serves. Not behind the token or `Origin` checks.
pub(super) async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// Readiness for orchestrators: 503 while the plugins found at startup load, 200 after. A
/// shared state store that does not answer is named in the body but keeps the replica ready.
/// Not behind the token or `Origin` checks.
pub(super) async fn readyz<B: Backend>(State(app): Shared<B>) -> Response {
    let readiness = &app.config.readiness;
    if !readiness.is_started() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: loading plugins\n",
        )
            .into_response();
    }
    let late = readiness.late();
    if late != 0 {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {late} plugins still loading\n"),
        )
            .into_response();
    }
    match app.config.state.as_ref().and_then(|s| s.last_problem()) {
        Some(problem) => (
            StatusCode::OK,
            format!("ready (stateful tools fail meanwhile: {problem})\n"),
        )
            .into_response(),
        None => (StatusCode::OK, "ready\n").into_response(),
    }
}

/// How long an MCP request that arrives during the startup load waits for it before it is
/// answered 503 with `Retry-After`.
pub const STARTUP_HOLD: std::time::Duration = std::time::Duration::from_secs(30);

/// Holds MCP requests until the startup load is done (at most [`STARTUP_HOLD`], then 503 and
/// `Retry-After`); health, readiness, metrics and the status page pass.
pub(super) async fn startup_gate<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
    next: Next,
) -> Response {
    let mcp = matches!(request.uri().path(), "/mcp" | "/sse" | "/messages");
    if mcp
        && !app.config.readiness.is_started()
        && tokio::time::timeout(STARTUP_HOLD, app.config.readiness.wait_started())
            .await
            .is_err()
    {
        let mut response = rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            INTERNAL_ERROR,
            "mcpbox is loading its plugins; retry shortly",
        );
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(Readiness::RETRY_AFTER_SECS),
        );
        return response;
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn starting_then_started_and_late_loads_counted() {
        let readiness = Arc::new(Readiness::starting());
        assert!(!readiness.is_started());
        let late = readiness.late_load();
        assert_eq!(readiness.late(), 1);
        readiness.start();
        readiness.wait_started().await;
        assert!(readiness.is_started());
        drop(late);
        assert_eq!(readiness.late(), 0);
        assert!(Readiness::default().is_started());
    }
}
