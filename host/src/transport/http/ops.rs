//! What operators and OAuth clients read besides MCP: the Prometheus exposition at `/metrics`
//! and the status page at `/` (both behind the gate: they name every plugin and tool), the
//! public OAuth Protected Resource Metadata (RFC 9728) under `/.well-known/`, and
//! [`serve_metrics`], the metrics alone on a separate address. (`/healthz` and `/readyz` are
//! in [`super::ready`].)
//!
//! Depends on `metrics`, `auth` (the metadata) and the [`super::StatusPage`] the caller
//! renders; knows nothing of sessions.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::gate::Admitted;
use super::reply::plain;
use crate::server::Backend;

/// The Protected Resource Metadata (RFC 9728), public (clients read it to find the
/// authorization server); 404 without OAuth.
pub(super) async fn resource_metadata<B: Backend>(State(app): Shared<B>) -> Response {
    let Some(verifier) = &app.config.oauth else {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: OAuth is not configured\n",
        );
    };
    let mut metadata = verifier.metadata();
    let plugin_scopes = app.backend.plugin_scopes();
    if let Some(scopes) = metadata["scopes_supported"].as_array_mut() {
        for scope in plugin_scopes {
            if !scopes.iter().any(|s| s.as_str() == Some(scope.as_str())) {
                scopes.push(scope.into());
            }
        }
    }
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        metadata.to_string(),
    )
        .into_response()
}

/// Prometheus metrics ([`crate::metrics`]), behind the same gate as `/mcp` (Host, Origin,
/// token): they name every plugin and tool.
pub(super) async fn metrics_endpoint(_admitted: Admitted) -> Response {
    exposition()
}

/// The status page, behind the same gate as `/mcp`; 404 when it is off.
pub(super) async fn status_page<B: Backend>(
    State(app): Shared<B>,
    _admitted: Admitted,
) -> Response {
    let Some(page) = app.config.status_page.clone() else {
        return plain(StatusCode::NOT_FOUND, "not found: the status page is off\n");
    };
    match tokio::task::spawn_blocking(move || (page.0)()).await {
        Ok(html) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            html,
        )
            .into_response(),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the status page failed to render\n",
        ),
    }
}

fn exposition() -> Response {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        crate::metrics::metrics().render(),
    )
        .into_response()
}

/// Serve only `GET /metrics` on `listener` (`--metrics-addr`: a scrape address apart from
/// MCP, for stdio mode or a separate network), until `shutdown` resolves. Like `/healthz`,
/// it is not behind the token: bind it where only the scraper reaches.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    let router = Router::new().route("/metrics", axum::routing::get(async || exposition()));
    tracing::info!(%bound, "serving Prometheus metrics at /metrics");
    axum::serve(listener, router.into_make_service())
        .with_graceful_shutdown(shutdown)
        .await
}
