//! The HTTP transports: Streamable HTTP at `/mcp` for both MCP 2026-07-28 (stateless) and
//! 2025-11-25 (sessions), and the HTTP+SSE transport of 2024-11-05 clients at `/sse`
//! and `/messages`. This module holds their settings ([`HttpConfig`]), the shared state, the
//! router and [`serve`]; each job lives in its own file:
//!
//! - [`gate`]: the checks in front of every MCP route, `/metrics` and `/`, applied as a layer
//!   over the router of those routes, so a handler placed there cannot be reached without
//!   passing them: the headers that decide the call appear once, and the `Mcp-Param-*`
//!   headers number at most [`crate::protocol::v2026::MAX_PARAM_HEADERS`], each once, with
//!   UTF-8 values like the other mirror headers (400 with -32020), `Host`
//!   and `Origin` name the bound address (DNS rebinding → 403), the bearer token matches
//!   when one is configured (401 with `WWW-Authenticate`), or with OAuth the JWT; the caller it
//!   admits goes to the handler (the session checks the plugin's scopes per request).
//! - [`budget`]: what one client can make the host hold is bounded per caller (its
//!   `[budgets]`, 429) and globally (the process's [`crate::server::ProcessLimits`], 503 with
//!   `Retry-After`): a POST's bytes are charged to its caller, then globally, before they are
//!   held — its declared length before its body is read, else each chunk as it arrives (a
//!   layer inside the gate) — and bodies are size-limited (413); sessions and listen streams
//!   take a place each; a reserve of descriptors is kept from listen streams for calls
//!   ([`accept`]).
//! - [`post`]: `POST /mcp` decoded (bodies of 256 KiB or more on a blocking thread) and
//!   routed: a POST is 2026-07-28 when its `_meta` carries the protocol-version key or its
//!   `MCP-Protocol-Version` header is not a handshake version
//!   ([`crate::protocol::v2026::is_v2026`]).
//! - [`v2026`]: 2026-07-28 requests: no session; the mirror headers
//!   (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) are checked against the body, errors
//!   carry their statuses (400, 404), and the answer is JSON unless the request sends
//!   notifications first (then SSE, with `X-Accel-Buffering: no`). Closing the response
//!   cancels the request. GET and DELETE from a 2026-07-28 client get 405.
//! - [`v2025`]: 2025-11-25 sessions (`Mcp-Session-Id`): `POST` (`initialize` creates one),
//!   `GET` (the standalone stream, or with `Last-Event-ID` a resumption), `DELETE`; an
//!   `MCP-Protocol-Version` this server does not speak is 400.
//! - [`sse`]: the 2024-11-05 HTTP+SSE transport: `GET /sse` and `POST /messages`.
//! - [`ops`]: `GET /metrics` (Prometheus) and `GET /` (the status page rendered by the
//!   caller's [`StatusPage`]), both behind the gate; the OAuth Protected Resource Metadata
//!   (public); a POST to `/` or to any unknown path gets 404 with a JSON-RPC error naming
//!   `/mcp` (public); [`serve_metrics`], the metrics alone on a separate address.
//! - [`link`]: `GET /oauth/link/start` and `GET /oauth/link/callback`, the browser's side of
//!   linking an account at a downstream provider (public, served when a credentials broker is
//!   configured; for stdio, [`serve_link_routes`] serves them on a loopback listener).
//! - [`ready`]: `GET /healthz` (the process serves) and `GET /readyz` (every plugin found at
//!   startup has loaded or failed) answer orchestrators from the moment the port is bound,
//!   outside the gate; MCP requests wait for the startup load, boundedly.
//! - [`reply`], [`streams`], [`accept`]: answers, resumable stream buffers, the accept loop.
//!
//! It knows nothing of plugins, and keeps no request ordering of its own: every decoded body
//! goes to [`Session::accept`].
//!
//! With `--call-id-header NAME` ([`HttpConfig::call_id_header`]), the id a trusted balancer
//! put in that header (1–128 visible ASCII bytes, once; 400 otherwise) is handed to the session
//! with a single message ([`Session::accept_call`]) and travels on the request's context to
//! where its tool call runs (`catalog::at_most_once` records it); this transport only carries it.
//! Unset, the header is not read at all.
//!
//! A slow or vanished client never blocks others: each stream has a bounded queue, and a
//! client that falls a whole queue behind is detached (a 2025-11-25 stream can resume; a
//! 2026-07-28 stream is dropped and its request cancelled). Idle sessions expire.

mod accept;
mod budget;
mod gate;
pub mod link;
mod ops;
mod post;
pub mod ready;
mod reply;
mod sse;
mod streams;
#[cfg(test)]
mod tests;
mod v2025;
mod v2026;

pub use self::accept::{listen_stream_budget, raise_descriptor_limit};
pub use self::link::serve_link_routes;
pub use self::ops::serve_metrics;
pub use self::ready::{Readiness, StillListing};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, header};
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use self::v2025::HttpSession;
use crate::server::{Backend, Mode, Session, SessionSettings};

/// Settings of the HTTP transports.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (besides the bound address and, on loopback, `localhost`, `127.0.0.1`
    /// and `[::1]`) that `Host` and `Origin` may name.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) of browser clients allowed besides this server's own:
    /// their requests pass the `Origin` check, and CORS answers them.
    pub allowed_origins: Vec<String>,
    /// The static bearer tokens accepted: if any, every request needs `Authorization: Bearer
    /// <token>` with one of them, which names its caller.
    pub tokens: Arc<crate::principal::Tokens>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// Sessions unused this long are ended.
    pub session_idle: Duration,
    /// What every session shares (see [`SessionSettings`]).
    pub session: Arc<SessionSettings>,
    /// Whether the plugins found at startup are loaded: `/readyz` is 503 and MCP requests wait
    /// until they are (see [`ready`]).
    pub readiness: Arc<Readiness>,
    /// Plugin state; `/readyz` names a shared store (Redis) that does not answer, but stays
    /// 200.
    pub state: Option<Arc<crate::kv::StateService>>,
    /// The status page served at `/` (none: 404).
    pub status_page: Option<StatusPage>,
    /// OAuth: tokens are JWTs checked by this verifier (instead of static `tokens`).
    pub oauth: Option<Arc<crate::auth::Verifier>>,
    /// The header in which a trusted balancer names each request (`--call-id-header`):
    /// carried with the request to where its tool call runs, never interpreted here.
    pub call_id_header: Option<axum::http::HeaderName>,
    /// Per-user credentials: the broker whose link routes (`/oauth/link/…`) are served, when
    /// providers are configured.
    pub credentials: Option<Arc<crate::credentials::Broker>>,
}

/// Renders the status page (HTML); the transport only serves it, behind the gate.
#[derive(Clone)]
pub struct StatusPage(pub Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for StatusPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusPage")
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tokens: Arc::default(),
            max_body_bytes: 4 << 20,
            session_idle: Duration::from_secs(30 * 60),
            session: Arc::default(),
            readiness: Arc::default(),
            state: None,
            status_page: None,
            oauth: None,
            call_id_header: None,
            credentials: None,
        }
    }
}

/// Where MCP is served (Streamable HTTP, both revisions).
const MCP_PATH: &str = "/mcp";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";

/// Shared state of the HTTP server.
struct App<B> {
    backend: Arc<B>,
    /// Where 2026-07-28 requests go: one session for all of them.
    v2026: Arc<Session<B>>,
    config: HttpConfig,
    bound: SocketAddr,
    sessions: Mutex<HashMap<String, Arc<HttpSession<B>>>>,
}

impl<B: Backend> App<B> {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession<B>>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Shared<B> = State<Arc<App<B>>>;

/// The routes. Those of MCP, `/metrics` and `/` are on one router under the gate
/// ([`gate::admit`]) and, inside it, the request bytes charged to the caller and the process
/// ([`budget::reserve_request_bytes`]): a handler added there cannot be reached without
/// passing both. Health, readiness, the OAuth metadata and the answer to a POST anywhere but
/// the endpoints are public. The startup hold ([`ready::startup_gate`]) and the body limit
/// cover everything.
fn router<B: Backend>(app: &Arc<App<B>>) -> Router {
    // Layers run from the last added: the gate, then the bytes (POSTs), then the handler.
    let gated = Router::new()
        .route(
            MCP_PATH,
            post(post::post_mcp::<B>)
                .get(v2025::get_mcp::<B>)
                .delete(v2025::delete_mcp::<B>),
        )
        .route("/sse", get(sse::get_sse::<B>))
        .route("/messages", post(sse::post_messages::<B>))
        .route("/metrics", get(ops::metrics_endpoint))
        .route("/", get(ops::status_page::<B>))
        .route_layer(from_fn_with_state(
            Arc::clone(app),
            budget::reserve_request_bytes::<B>,
        ))
        .route_layer(from_fn_with_state(Arc::clone(app), gate::admit::<B>));
    let public = Router::new()
        .route("/healthz", get(ready::healthz))
        .route("/readyz", get(ready::readyz::<B>))
        .route(
            "/.well-known/oauth-protected-resource",
            get(ops::resource_metadata::<B>),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            get(ops::resource_metadata::<B>),
        )
        .route(
            "/.well-known/mcp/server-card",
            get(ops::server_card::<B>).options(ops::server_card_preflight),
        )
        .route(
            "/.well-known/mcp/server-card.json",
            get(ops::server_card::<B>).options(ops::server_card_preflight),
        )
        .route(
            "/mcp/server-card",
            get(ops::hosted_server_card::<B>).options(ops::server_card_preflight),
        )
        .route(
            "/.well-known/ai-catalog.json",
            get(ops::ai_catalog::<B>).options(ops::server_card_preflight),
        )
        .route(
            "/.well-known/mcp/catalog.json",
            get(ops::mcp_catalog::<B>).options(ops::server_card_preflight),
        )
        .route("/", post(ops::not_the_endpoint));
    let public = match &app.config.credentials {
        Some(broker) => public.merge(link::routes().with_state(Arc::clone(broker))),
        None => public,
    };
    let router = gated
        .merge(public)
        .fallback(ops::not_the_endpoint)
        .layer(from_fn_with_state(
            Arc::clone(app),
            ready::startup_gate::<B>,
        ))
        .layer(DefaultBodyLimit::max(app.config.max_body_bytes))
        .with_state(Arc::clone(app));
    // Browser clients from the allowed origins: CORS answers their preflights and lets them
    // read the session and protocol headers. Without allowed origins, no CORS headers at all.
    match cors(&app.config.allowed_origins) {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

/// CORS for the allowed origins (none: no CORS).
fn cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    let name = |n: &'static str| header::HeaderName::from_static(n);
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([http::Method::GET, http::Method::POST, http::Method::DELETE])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                header::ACCEPT,
                name("last-event-id"),
                name("mcp-session-id"),
                name("mcp-protocol-version"),
                name("mcp-method"),
                name("mcp-name"),
            ])
            .expose_headers([
                name("mcp-session-id"),
                name("mcp-protocol-version"),
                header::WWW_AUTHENTICATE,
            ])
            .max_age(Duration::from_secs(3600)),
    )
}

/// Serve MCP over HTTP on `listener` until `shutdown` resolves; then stop accepting, close
/// event streams, and give requests in flight `grace` to finish.
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    listener: tokio::net::TcpListener,
    config: HttpConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    let idle = config.session_idle;
    let v2026 = Arc::new(Session::new(
        Arc::clone(&backend),
        Mode::V2026,
        Arc::clone(&config.session),
    ));
    let app = Arc::new(App {
        backend,
        v2026,
        config,
        bound,
        sessions: Mutex::new(HashMap::new()),
    });
    let router = router(&app);

    let sweeper = {
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let period = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
            loop {
                tokio::time::sleep(period).await;
                app.expire_idle();
            }
        })
    };
    let (stopping_tx, mut stopping) = tokio::sync::watch::channel(false);
    let closer = {
        let app = Arc::clone(&app);
        async move {
            shutdown.await;
            tracing::info!("shutting down: no new connections; closing event streams");
            let _ = stopping_tx.send(true);
            app.v2026.close();
            // Event streams close now; a request in flight keeps its own stream until its
            // response is written (within the grace period).
            for session in app.sessions().values() {
                session.session.close();
                session.streams().close_standalone();
            }
        }
    };
    let server = axum::serve(accept::Acceptor::new(listener), router.into_make_service())
        .with_graceful_shutdown(closer);
    if !app.config.readiness.is_started() {
        tracing::info!(
            %bound,
            "answering /healthz, and /readyz 503 while plugins load; MCP requests wait until they have"
        );
    }
    // Logged when MCP is served, which is what a client waits for.
    let announcer = {
        let readiness = Arc::clone(&app.config.readiness);
        tokio::spawn(async move {
            readiness.wait_started().await;
            tracing::info!(%bound, "serving MCP over HTTP at /mcp (and the SSE transport at /sse)");
        })
    };
    let result = tokio::select! {
        result = server.into_future() => result,
        () = async {
            let _ = stopping.wait_for(|s| *s).await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!("requests still in flight after the shutdown grace period; exiting anyway");
            Ok(())
        }
    };
    sweeper.abort();
    announcer.abort();
    result
}
