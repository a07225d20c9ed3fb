//! What operators and OAuth clients read besides MCP: the Prometheus exposition at `/metrics`
//! and the status page at `/` (both behind the gate: they name every plugin and tool), the
//! public OAuth Protected Resource Metadata (RFC 9728) and server card (SEP-2127) under
//! `/.well-known/`, the JSON-RPC 404 naming `/mcp` to a POST anywhere else
//! ([`not_the_endpoint`]), and [`serve_metrics`], the metrics alone on a separate address.
//! (`/healthz` and `/readyz` are in [`super::ready`].)
//!
//! It renders the [`super::StatusPage`] the caller hands it and knows nothing of sessions.

use axum::Router;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::gate::Admitted;
use super::reply::{plain, rpc_error};
use super::{App, MCP_PATH, Shared};
use crate::protocol::error::INVALID_REQUEST;
use crate::server::{Backend, ListKind};

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

/// A POST to any path but `/mcp` and `/messages` (most often a base URL pasted without
/// `/mcp`): 404 with a JSON-RPC error naming the MCP endpoint, so the client shows where to
/// go rather than "could not determine transport". Public, like a 404 for an unknown path:
/// it reads no body and tells nothing that `/mcp` itself does not. Other methods on unknown
/// paths get an empty 404, as before.
pub(super) async fn not_the_endpoint(method: Method) -> Response {
    if method != Method::POST {
        return StatusCode::NOT_FOUND.into_response();
    }
    rpc_error(
        StatusCode::NOT_FOUND,
        INVALID_REQUEST,
        &format!(
            "not the MCP endpoint: the MCP endpoint is {MCP_PATH} (Streamable HTTP; the 2024-11-05 \
             HTTP+SSE transport is at /sse)"
        ),
    )
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

/// Where the server card's schema is (SEP-2127's draft).
const CARD_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";

/// The most pages of one list the server card reads.
const CARD_MAX_PAGES: usize = 100;

/// The media type of a server card (the discovery draft's).
const CARD_TYPE: &str = "application/mcp-server-card+json";

/// The MCP server card (SEP-2127's draft): who this server is, where and how to connect (both
/// transports, the protocol revisions, whether a token is needed), its capabilities, and, when
/// anyone may connect without a token, its tools, prompts and resources (with authentication
/// they are left out: what a caller sees depends on who it is, and the card says nothing about
/// any caller). Returns the card and the MCP endpoint's URL.
fn card<B: Backend>(app: &App<B>, headers: &axum::http::HeaderMap) -> (serde_json::Value, String) {
    let authority = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|host| app.allowed_authority(host))
        .map_or_else(|| app.bound.to_string(), str::to_owned);
    let resource = app
        .config
        .oauth
        .as_ref()
        .and_then(|v| v.metadata()["resource"].as_str().map(str::to_owned));
    let endpoint = resource.unwrap_or_else(|| format!("http://{authority}/mcp"));
    let base = endpoint
        .strip_suffix("/mcp")
        .unwrap_or(&endpoint)
        .to_owned();
    let host = url::Url::parse(&endpoint)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let mut schemes = Vec::new();
    if !app.config.tokens.is_empty() {
        schemes.push("bearer");
    }
    if app.config.oauth.is_some() {
        schemes.push("oauth2");
    }
    let required = !schemes.is_empty();
    let authentication = serde_json::json!({ "required": required, "schemes": schemes });
    let versions = crate::protocol::v2026::supported_versions();
    let v2025_versions = crate::protocol::v2025::VERSIONS;
    let mut card = serde_json::json!({
        "$schema": CARD_SCHEMA,
        "name": card_name(&host),
        "version": env!("CARGO_PKG_VERSION"),
        "title": "mcpbox",
        "description": "Tools, prompts, resources and skills from sandboxed WebAssembly plugins",
        "websiteUrl": base,
        "remotes": [
            {
                "type": "streamable-http",
                "url": endpoint,
                "supportedProtocolVersions": versions,
                "authentication": authentication,
            },
            {
                "type": "sse",
                "url": format!("{base}/sse"),
                "supportedProtocolVersions": v2025_versions,
                "authentication": authentication,
            },
        ],
        "capabilities": app.backend.offers().v2026_capabilities(),
    });
    if !required {
        let caller = crate::principal::Principal::local();
        for (key, kind, field) in [
            ("tools", ListKind::Tools, "tools"),
            ("prompts", ListKind::Prompts, "prompts"),
            ("resources", ListKind::Resources, "resources"),
        ] {
            card[key] = serde_json::Value::Array(all_items(&*app.backend, kind, field, &caller));
        }
    }
    (card, endpoint)
}

/// A discovery document as the draft asks it served: readable from any origin (`GET` only),
/// cacheable for the lists' `ttlMs`, with an `ETag` (its SHA-256) that a matching
/// `If-None-Match` turns into 304.
fn discovery<B: Backend>(
    app: &App<B>,
    headers: &axum::http::HeaderMap,
    media_type: &str,
    body: String,
) -> Response {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body.as_bytes());
    let etag = format!("\"{}\"", hex::encode(&digest[..16]));
    let max_age = app.config.session.list_ttl_ms / 1000;
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    let common = [
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*".to_owned()),
        (header::ACCESS_CONTROL_ALLOW_METHODS, "GET".to_owned()),
        (
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            "Content-Type, If-None-Match".to_owned(),
        ),
        (header::ACCESS_CONTROL_EXPOSE_HEADERS, "ETag".to_owned()),
        (header::CACHE_CONTROL, format!("public, max-age={max_age}")),
        (header::ETAG, etag),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(header::CONTENT_TYPE, media_type.to_owned())],
        body,
    )
        .into_response()
}

/// The server card where the discovery draft now puts it, `<endpoint>/server-card`
/// (`/mcp/server-card`), as `application/mcp-server-card+json`.
pub(super) async fn hosted_server_card<B: Backend>(
    State(app): Shared<B>,
    headers: axum::http::HeaderMap,
) -> Response {
    let (card, _) = card(&app, &headers);
    discovery(&app, &headers, CARD_TYPE, card.to_string())
}

/// The server card at its earlier paths, `/.well-known/mcp/server-card` (and `.json`), as
/// `application/json`: kept for clients that read it there.
pub(super) async fn server_card<B: Backend>(
    State(app): Shared<B>,
    headers: axum::http::HeaderMap,
) -> Response {
    let (card, _) = card(&app, &headers);
    discovery(&app, &headers, "application/json", card.to_string())
}

/// The one catalog entry: this server's card, by its URL.
fn catalog_entry(name: &str, endpoint: &str) -> serde_json::Value {
    let (publisher, server) = name.split_once('/').unwrap_or(("localhost", name));
    // `com.example.mcp` → `mcp.example.com`, the publisher's domain.
    let domain: Vec<&str> = publisher.split('.').rev().collect();
    serde_json::json!({
        "identifier": format!("urn:air:{}:mcp:{server}", domain.join(".")),
        "type": CARD_TYPE,
        "url": format!("{endpoint}/server-card"),
    })
}

/// A catalog of one entry, this server's card: `spec_version`, served as `media_type`.
fn catalog<B: Backend>(
    app: &App<B>,
    headers: &axum::http::HeaderMap,
    spec_version: &str,
    media_type: &str,
) -> Response {
    let (card, endpoint) = card(app, headers);
    let name = card["name"].as_str().unwrap_or("localhost/mcpbox");
    let catalog = serde_json::json!({
        "specVersion": spec_version,
        "entries": [catalog_entry(name, &endpoint)],
    });
    discovery(app, headers, media_type, catalog.to_string())
}

/// The AI Catalog the discovery draft reads at `/.well-known/ai-catalog.json`
/// (`application/ai-catalog+json`).
pub(super) async fn ai_catalog<B: Backend>(
    State(app): Shared<B>,
    headers: axum::http::HeaderMap,
) -> Response {
    catalog(&app, &headers, "1.0", "application/ai-catalog+json")
}

/// The MCP Catalog of the draft before the AI Catalog replaced it, at
/// `/.well-known/mcp/catalog.json` (`specVersion` `draft`): the same entry.
pub(super) async fn mcp_catalog<B: Backend>(
    State(app): Shared<B>,
    headers: axum::http::HeaderMap,
) -> Response {
    catalog(&app, &headers, "draft", "application/json")
}

/// The discovery documents' answer to a browser's preflight: `GET` from anywhere.
pub(super) async fn server_card_preflight() -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (header::ACCESS_CONTROL_ALLOW_METHODS, "GET"),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                "Content-Type, If-None-Match",
            ),
        ],
    )
        .into_response()
}

/// The card's `name`: reverse-DNS of the host clients reach (`mcp.example.com` →
/// `com.example.mcp/mcpbox`), or `localhost/mcpbox` for an address.
fn card_name(host: &str) -> String {
    let dns =
        host.contains('.') && host.parse::<std::net::IpAddr>().is_err() && !host.starts_with('[');
    if !dns {
        return "localhost/mcpbox".to_owned();
    }
    let reversed: Vec<&str> = host.split('.').rev().collect();
    format!("{}/mcpbox", reversed.join("."))
}

/// Every item of a list as `caller` sees it, page after page (at most [`CARD_MAX_PAGES`]).
fn all_items<B: Backend>(
    backend: &B,
    kind: ListKind,
    field: &str,
    caller: &crate::principal::Principal,
) -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..CARD_MAX_PAGES {
        let Ok(page) = backend.list(kind, cursor.as_deref(), caller) else {
            break;
        };
        let Ok(mut page) = serde_json::from_str::<serde_json::Value>(page.body.get()) else {
            break;
        };
        if let Some(serde_json::Value::Array(more)) =
            page.get_mut(field).map(serde_json::Value::take)
        {
            items.extend(more);
        }
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::{card_name, catalog_entry};

    #[test]
    fn a_catalog_entry_names_the_publisher_by_domain_and_points_at_the_card() {
        let entry = catalog_entry("com.example.mcp/mcpbox", "https://mcp.example.com/mcp");
        assert_eq!(entry["identifier"], "urn:air:mcp.example.com:mcp:mcpbox");
        assert_eq!(entry["type"], "application/mcp-server-card+json");
        assert_eq!(entry["url"], "https://mcp.example.com/mcp/server-card");
    }

    #[test]
    fn the_card_is_named_in_reverse_dns() {
        assert_eq!(card_name("mcp.example.com"), "com.example.mcp/mcpbox");
        assert_eq!(card_name("127.0.0.1"), "localhost/mcpbox");
        assert_eq!(card_name("localhost"), "localhost/mcpbox");
        assert_eq!(card_name(""), "localhost/mcpbox");
    }
}
