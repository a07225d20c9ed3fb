//! The HTTP transports: Streamable HTTP at `/mcp` for both MCP 2026-07-28 (stateless) and
//! 2025-11-25 (sessions), and the legacy HTTP+SSE transport of 2024-11-05 clients at `/sse`
//! and `/messages`.
//!
//! Depends on `protocol` and `server`; knows nothing of plugins, and keeps no request ordering
//! of its own: every decoded body goes to [`Session::accept`]. Every request passes the same
//! gate first: the headers that decide the call appear once (400 with -32020), the `Host` and
//! `Origin` headers must name the bound address (DNS rebinding → 403), the bearer token must
//! match when one is configured (401 with `WWW-Authenticate`), and bodies are size-limited
//! (413). What one client can make the host hold is bounded globally (the process's
//! [`crate::server::HostLimits`]): a POST reserves its bytes before its body is read, sessions
//! and listen streams take a place each, and at a bound the answer is 503 with `Retry-After`;
//! a reserve of descriptors is kept from listen streams for calls ([`accept`]). Bodies of
//! 256 KiB or more are decoded on a blocking thread.
//!
//! A POST is 2026-07-28 when its `_meta` carries the protocol-version key or its
//! `MCP-Protocol-Version` header is not a handshake version ([`v2026::is_modern`]). Such a
//! request has no session: the mirror headers (`MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`) are checked against the body, errors carry their statuses (400, 404), and the
//! answer is JSON unless the request sends notifications first (then SSE, with
//! `X-Accel-Buffering: no`). Closing the response cancels the request. GET and DELETE from a
//! 2026-07-28 client get 405. Every other POST is 2025-11-25:
//!
//! - `POST` carries one JSON-RPC message (or a batch). `initialize` creates a session and
//!   answers with its `Mcp-Session-Id` (random, visible ASCII). Other messages need that header
//!   (missing → 400, unknown or deleted → 404). Notifications and responses get 202. Requests
//!   get `text/event-stream` when the client accepts it: the request's logs, progress and
//!   requests to the client travel on that stream, then its response; otherwise one JSON
//!   response (anything sent meanwhile goes to the session's GET stream).
//! - `GET` opens the session's standalone SSE stream (list changes, resource updates, host
//!   messages), or, with `Last-Event-ID`, replays what a dropped stream missed and carries on.
//! - `DELETE` ends the session.
//! - `MCP-Protocol-Version`, when present, must be one this server speaks (400 otherwise).
//!
//! `GET /healthz` (the process serves) and `GET /readyz` (every plugin found at startup has
//! loaded or failed) answer orchestrators from the moment the port is bound, outside the token
//! and `Origin` checks; MCP requests wait for the startup load, boundedly ([`ready`]). `GET
//! /metrics` is the Prometheus exposition and `GET /` the status page (rendered by the caller's
//! [`StatusPage`]), both behind the same gate as `/mcp`; [`serve_metrics`] serves the
//! metrics alone on a separate address.
//!
//! With `--call-id-header NAME` ([`HttpConfig::call_id_header`]), the id a trusted balancer
//! put in that header (1–128 visible ASCII bytes, once; 400 otherwise) is handed to the session
//! with a single message ([`Session::accept_call`]) and travels on the request's context to
//! where its tool call runs (`catalog::once` records it); this transport only carries it.
//! Unset, the header is not read at all.
//!
//! A slow or vanished client never blocks others: each stream has a bounded queue, and a
//! client that falls a whole queue behind is detached (a 2025-11-25 stream can resume; a
//! 2026-07-28 stream is dropped and its request cancelled). Idle sessions expire.

mod accept;
pub mod ready;
mod streams;

pub use self::accept::{listen_stream_budget, raise_descriptor_limit};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::handler::Handler as _;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument as _;

pub use self::ready::{Readiness, StillListing};
use self::streams::{LIVE_QUEUE, STANDALONE, Streams};
use crate::auth::{Access, AuthError};
use crate::protocol::error::{INTERNAL_ERROR, INVALID_REQUEST};
use crate::protocol::jsonrpc::{Decoded, decode, encode_error};
use crate::protocol::request::{Method, RequestMeta};
use crate::protocol::v2026::{self, MirrorHeaders};
use crate::protocol::{ErrorObject, Message, Reply, v2025};
use crate::server::{
    Answer, AtLimit, Backend, Cancellation, Mode, ModernSettings, Outbound, RETRY_AFTER_SECS,
    Session, Share, Status, forward_events,
};

/// Settings of the HTTP transports.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (besides the bound address and, on loopback, `localhost`, `127.0.0.1`
    /// and `[::1]`) that `Host` and `Origin` may name.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) of browser clients allowed besides this server's own:
    /// their requests pass the `Origin` check, and CORS answers them.
    pub allowed_origins: Vec<String>,
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub auth_token: Option<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// Sessions unused this long are ended.
    pub session_idle: Duration,
    /// Settings of 2026-07-28 requests.
    pub modern: Arc<ModernSettings>,
    /// Whether the plugins found at startup are loaded: `/readyz` is 503 and MCP requests wait
    /// until they are (see [`ready`]).
    pub readiness: Arc<Readiness>,
    /// Plugin state; `/readyz` names a shared store (Redis) that does not answer, but stays
    /// 200.
    pub state: Option<Arc<crate::kv::StateService>>,
    /// The status page served at `/` (none: 404).
    pub status_page: Option<StatusPage>,
    /// OAuth: tokens are JWTs checked by this verifier (instead of `auth_token`).
    pub oauth: Option<Arc<crate::auth::Verifier>>,
    /// The header in which a trusted balancer names each request (`--call-id-header`):
    /// carried with the request to where its tool call runs, never interpreted here.
    pub call_id_header: Option<axum::http::HeaderName>,
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
            auth_token: None,
            max_body_bytes: 4 << 20,
            session_idle: Duration::from_secs(30 * 60),
            modern: Arc::default(),
            readiness: Arc::default(),
            state: None,
            status_page: None,
            oauth: None,
            call_id_header: None,
        }
    }
}

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";

/// One client session over HTTP.
struct HttpSession<B> {
    session: Arc<Session<B>>,
    streams: Mutex<Streams>,
    last_used: Mutex<Instant>,
    /// Where messages not tied to a POST stream go: the standalone stream.
    standalone: Outbound,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Its place among the open sessions (`--max-sessions`), given back when it ends.
    _slot: Share,
}

impl<B> HttpSession<B> {
    fn streams(&self) -> std::sync::MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
}

impl<B> Drop for HttpSession<B> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Shared state of the HTTP server.
struct App<B> {
    backend: Arc<B>,
    /// Where 2026-07-28 requests go: one stateless session for all of them.
    stateless: Arc<Session<B>>,
    config: HttpConfig,
    bound: SocketAddr,
    sessions: Mutex<HashMap<String, Arc<HttpSession<B>>>>,
}

impl<B: Backend> App<B> {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession<B>>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start a session: its MCP state, its standalone stream, and the task forwarding backend
    /// events into that stream; refused at `--max-sessions`.
    fn create_session(self: &Arc<Self>) -> Result<(String, Arc<HttpSession<B>>), AtLimit> {
        let slot = self.config.modern.limits.sessions.take(1)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = Arc::new(Session::new(
            Arc::clone(&self.backend),
            Mode::Legacy,
            Arc::clone(&self.config.modern),
        ));
        let (standalone, mut queue) = mpsc::channel::<Reply>(LIVE_QUEUE);
        let http = Arc::new_cyclic(|weak: &std::sync::Weak<HttpSession<B>>| {
            let pump = {
                let weak = weak.clone();
                tokio::spawn(async move {
                    while let Some(reply) = queue.recv().await {
                        let Some(http) = weak.upgrade() else { return };
                        http.streams().push(STANDALONE, reply.0);
                    }
                })
            };
            let events = {
                let (session, standalone) = (Arc::clone(&session), standalone.clone());
                tokio::spawn(async move { forward_events(&session, standalone).await })
            };
            HttpSession {
                session,
                streams: Mutex::new(Streams::new()),
                last_used: Mutex::new(Instant::now()),
                standalone,
                tasks: vec![pump, events],
                _slot: slot,
            }
        });
        self.sessions().insert(id.clone(), Arc::clone(&http));
        tracing::debug!(session = id, "HTTP session created");
        Ok((id, http))
    }

    /// The session named by the request's `Mcp-Session-Id`: 400 if missing, 404 if unknown.
    fn session(&self, headers: &HeaderMap) -> Result<Arc<HttpSession<B>>, Refused> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "missing Mcp-Session-Id header",
            )));
        };
        match self.sessions().get(id) {
            Some(session) => {
                session.touch();
                Ok(Arc::clone(session))
            }
            None => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "unknown or ended session",
            ))),
        }
    }

    /// End sessions idle longer than the configured time.
    fn expire_idle(&self) {
        let idle = self.config.session_idle;
        self.sessions().retain(|id, session| {
            let keep = session.idle_for() < idle || session.streams().has_live();
            if !keep {
                tracing::info!(session = id, "HTTP session expired after being idle");
            }
            keep
        });
    }

    /// The gate every request passes: headers that decide the call appear once; Host, Origin,
    /// and the bearer token (a static one, or
    /// with OAuth a JWT whose access is returned).
    async fn check(&self, headers: &HeaderMap) -> Result<Option<Access>, Refused> {
        single_headers(headers)?;
        self.check_static(headers)?;
        let Some(verifier) = &self.config.oauth else {
            return Ok(None);
        };
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match verifier.verify(authorization).await {
            Ok(access) => Ok(Some(access)),
            Err(error) => Err(Box::new(oauth_refusal(verifier, &error))),
        }
    }

    /// With OAuth: that `access` carries the scopes of every plugin the requests in `decoded`
    /// would reach (403 `insufficient_scope` naming the missing ones).
    fn check_scopes(&self, access: Option<&Access>, decoded: &Decoded) -> Result<(), Refused> {
        let (Some(access), Some(verifier)) = (access, &self.config.oauth) else {
            return Ok(());
        };
        let requests: Vec<&crate::protocol::Request> = match decoded {
            Decoded::Single(Ok(Message::Request(request))) => vec![request],
            Decoded::Batch(items) => items
                .iter()
                .filter_map(|item| match item {
                    Ok(Message::Request(request)) => Some(request),
                    _ => None,
                })
                .collect(),
            Decoded::Single(_) => Vec::new(),
        };
        for request in requests {
            let method = Method::from_name(&request.method);
            let required = self.backend.scopes_for(&method, request.params.as_deref());
            let missing = access.missing(&required);
            if !missing.is_empty() {
                let missing: Vec<String> = missing.into_iter().map(str::to_owned).collect();
                tracing::info!(method = %request.method, scopes = %missing.join(" "), subject = access.subject.as_deref().unwrap_or(""), "refused: the token lacks a plugin's scopes");
                return Err(Box::new(oauth_refusal(
                    verifier,
                    &AuthError::InsufficientScope(missing),
                )));
            }
        }
        Ok(())
    }

    /// Host, Origin, and the static bearer token.
    fn check_static(&self, headers: &HeaderMap) -> Result<(), Refused> {
        if let Some(host) = headers.get(header::HOST) {
            let host = host.to_str().unwrap_or("");
            if !self.allowed_authority(host) {
                tracing::warn!(host, "refused a request for another host (DNS rebinding?)");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: Host does not name this server",
                )));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let authority = origin
                .split_once("://")
                .map(|(_, rest)| rest.trim_end_matches('/'));
            // `null` (sandboxed pages, file URLs) never names this server.
            let allowed = authority.is_some_and(|a| self.allowed_authority(a))
                || self
                    .config
                    .allowed_origins
                    .iter()
                    .any(|o| o.eq_ignore_ascii_case(origin.trim_end_matches('/')));
            if !allowed {
                tracing::warn!(
                    origin,
                    "refused a request from another origin (allow it with --allowed-origin)"
                );
                let shown: String = origin
                    .chars()
                    .take(200)
                    .filter(|c| !c.is_control())
                    .collect();
                return Err(Box::new(
                    (
                        StatusCode::FORBIDDEN,
                        format!(
                            "forbidden: Origin {shown} is not allowed; to allow a browser client \
                             from it, start mcpbox with --allowed-origin {shown}"
                        ),
                    )
                        .into_response(),
                ));
            }
        }
        if let Some(token) = &self.config.auth_token {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let matches = given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes()));
            if !matches {
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized: a valid bearer token is required",
                );
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="mcpbox""#),
                );
                return Err(Box::new(response));
            }
        }
        Ok(())
    }

    /// Whether `authority` (`host[:port]`) names this server: the bound address (or, on
    /// loopback, `localhost`) with the bound port, or an `--allowed-host` with any port (a
    /// load balancer in front listens on its own port).
    fn allowed_authority(&self, authority: &str) -> bool {
        let (host, port) = split_authority(authority);
        let host = host.to_ascii_lowercase();
        if self
            .config
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&host))
        {
            return true;
        }
        if port.is_some_and(|p| p != self.bound.port()) {
            return false;
        }
        let bound_ip = self.bound.ip();
        let loopback_names = ["localhost", "127.0.0.1", "::1"];
        (bound_ip.is_loopback() && loopback_names.contains(&host.as_str()))
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip == bound_ip)
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

fn split_authority(authority: &str) -> (&str, Option<u16>) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, rest) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, rest.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, port.parse().ok().or(Some(0))),
        _ => (authority, None),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A request turned away before it reaches a session.
type Refused = Box<Response>;

fn plain(status: StatusCode, message: &'static str) -> Response {
    (status, message).into_response()
}

fn rpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    json_response(
        status,
        &encode_error(None, &ErrorObject::new(code, message)),
    )
}

fn json_response(status: StatusCode, reply: &Reply) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.0.clone(),
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    response
}

/// Headers that must appear at most once: what they say decides which call runs, so two
/// values could let a proxy act on one while this server runs the other.
const SINGLE_HEADERS: [&str; 5] = [
    VERSION_HEADER,
    "mcp-method",
    "mcp-name",
    SESSION_HEADER,
    "authorization",
];

/// 400 (-32020) when a header of [`SINGLE_HEADERS`] appears more than once.
fn single_headers(headers: &HeaderMap) -> Result<(), Refused> {
    for name in SINGLE_HEADERS {
        let count = headers.get_all(name).iter().count();
        if count > 1 {
            tracing::debug!(header = name, count, "refused a request repeating a header");
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                v2026::HEADER_MISMATCH,
                &format!("the {name} header appears {count} times; send it once"),
            )));
        }
    }
    Ok(())
}

fn check_version(headers: &HeaderMap) -> Result<(), Refused> {
    match headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(version) if !v2025::is_handshake_version(version) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!(
                "unsupported MCP-Protocol-Version `{version}` for a session; supported: {}",
                v2025::VERSIONS.join(", ")
            ),
        ))),
        _ => Ok(()),
    }
}

/// 2026-07-28 has no sessions: GET and DELETE from a client of that revision (a modern
/// `MCP-Protocol-Version` and no session) get 405.
fn no_stateless_streams(headers: &HeaderMap) -> Result<(), Refused> {
    let version = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    let modern = version.is_some_and(|v| !v2025::is_handshake_version(v));
    if modern && headers.get(SESSION_HEADER).is_none() {
        return Err(Box::new(plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "2026-07-28 has no sessions: only POST is served",
        )));
    }
    Ok(())
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}

/// An SSE response fed by `rx`, holding `share` (a place among the listen streams) for as
/// long as the stream is open.
fn sse(rx: mpsc::Receiver<Event>, session_id: Option<&str>, share: Option<Share>) -> Response {
    let stream = ReceiverStream::new(rx).map(move |event| {
        let _held = &share;
        Ok::<_, Infallible>(event)
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

type Shared<B> = State<Arc<App<B>>>;

async fn post_mcp<B: Backend>(State(app): Shared<B>, headers: HeaderMap, body: Bytes) -> Response {
    let span = http_span(&headers, "/mcp");
    post_mcp_in(app, headers, body).instrument(span).await
}

/// The trace span of an HTTP request (exported only with `--otlp-endpoint`), parented on its
/// `traceparent` header.
fn http_span(headers: &HeaderMap, route: &'static str) -> tracing::Span {
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "mcp.http",
        otel.name = %format_args!("POST {route}"),
        http.request.method = "POST",
        http.route = route,
    );
    if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        let state = headers.get("tracestate").and_then(|v| v.to_str().ok());
        crate::telemetry::set_parent(&span, parent, state);
    }
    span
}

/// Bodies this large or larger are decoded on a blocking thread, not on a worker that every
/// request shares.
const OFF_THE_WORKERS_BYTES: usize = 256 << 10;

/// Decode a body, on a blocking thread when it is large.
async fn decode_body(body: Bytes) -> Decoded {
    if body.len() < OFF_THE_WORKERS_BYTES {
        return decode(&body);
    }
    match tokio::task::spawn_blocking(move || decode(&body)).await {
        Ok(decoded) => decoded,
        Err(e) => {
            tracing::error!("decoding a request body failed: {e}");
            Decoded::Single(Err(encode_error(
                None,
                &ErrorObject::internal("the request could not be decoded"),
            )))
        }
    }
}

/// Reserve a POST's bytes in the global budget (`--max-request-bytes-in-flight`) before its
/// body is read — its declared length, or the most a body may be when it declares none — and
/// hold them while it is served (to the end of its event stream, when it answers with one).
/// Past the budget: 503 with `Retry-After`.
async fn reserve_request_bytes<B: Backend>(
    State(app): Shared<B>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let most = app.config.max_body_bytes.max(1);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let amount = declared.unwrap_or(most).clamp(1, most);
    let share = match app.config.modern.limits.request_bytes.take(amount) {
        Ok(share) => share,
        Err(refused) => {
            discard_body(request.into_body(), amount);
            return at_limit(&refused);
        }
    };
    let response = next.run(request).await;
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streaming {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = axum::body::Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &share;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// How long the body of a refused request is read and thrown away.
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Read and throw away the body of a request refused before it was read, at most `most`
/// bytes for at most [`DISCARD_TIME`], holding nothing. A client still sending its body then
/// reads the refusal (and its `Retry-After`); closing on unread bytes would reset the
/// connection under it, and it would see a broken pipe instead.
fn discard_body(body: axum::body::Body, most: usize) {
    tokio::spawn(async move {
        let mut chunks = body.into_data_stream();
        let mut read = 0usize;
        let _ = tokio::time::timeout(DISCARD_TIME, async {
            while let Some(Ok(chunk)) = chunks.next().await {
                read = read.saturating_add(chunk.len());
                if read > most {
                    break;
                }
            }
        })
        .await;
    });
}

async fn post_mcp_in<B: Backend>(app: Arc<App<B>>, headers: HeaderMap, body: Bytes) -> Response {
    let access = match app.check(&headers).await {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let decoded = decode_body(body).await;
    if let Err(refused) = app.check_scopes(access.as_ref(), &decoded) {
        return *refused;
    }
    let call_id = match call_id(&app.config, &headers) {
        Ok(call_id) => call_id,
        Err(refused) => return *refused,
    };
    let mirror = mirror_headers(&headers);
    if is_modern(&decoded, mirror.protocol_version.as_deref()) {
        return post_stateless(&app, &headers, decoded, mirror, call_id).await;
    }
    post_session(&app, &headers, decoded, call_id).await
}

/// The id the balancer gave this request, when `--call-id-header` is set and it sent one
/// (absent: the request runs unrecorded); an unusable one is refused (400).
fn call_id(config: &HttpConfig, headers: &HeaderMap) -> Result<Option<Arc<str>>, Box<Response>> {
    let Some(name) = &config.call_id_header else {
        return Ok(None);
    };
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.get(name) {
            None => Ok(None),
            Some(_) => Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                &format!("the request carries more than one {name} header"),
            ))),
        };
    };
    let id = value.to_str().unwrap_or_default();
    match crate::kv::calls::check_call_id(id) {
        Ok(()) => Ok(Some(Arc::from(id))),
        Err(problem) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!("invalid {name} header: {problem}"),
        ))),
    }
}

/// Whether a POST belongs to 2026-07-28 (the routing rule of [`v2026::is_modern`]).
fn is_modern(decoded: &Decoded, header_version: Option<&str>) -> bool {
    match decoded {
        Decoded::Single(Ok(Message::Request(request))) => v2026::is_modern(
            &RequestMeta::read(request.params.as_deref()),
            header_version,
        ),
        Decoded::Single(_) => v2026::is_modern(&RequestMeta::default(), header_version),
        Decoded::Batch(_) => false,
    }
}

fn mirror_headers(headers: &HeaderMap) -> MirrorHeaders {
    let get = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    MirrorHeaders {
        protocol_version: get(VERSION_HEADER),
        method: get("mcp-method"),
        name: get("mcp-name"),
    }
}

fn status_of(status: Status) -> StatusCode {
    match status {
        Status::Ok => StatusCode::OK,
        Status::BadRequest => StatusCode::BAD_REQUEST,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The answer to a request refused at a global bound: 503 with `Retry-After` and the
/// JSON-RPC error naming the limit.
fn at_limit(refused: &AtLimit) -> Response {
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &encode_error(None, &refused.error()),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// Cancels a request when dropped (the client went away), unless disarmed (it was answered).
struct CancelOnDrop(Option<Arc<Cancellation>>);

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancellation) = self.0.take() {
            cancellation.cancel();
        }
    }
}

/// A 2026-07-28 POST: no session. The answer is one JSON object, unless the request sends
/// notifications first (progress, logs, a listen stream): then it is an SSE stream carrying
/// them and then the answer. Closing the response cancels the request.
async fn post_stateless<B: Backend>(
    app: &Arc<App<B>>,
    headers: &HeaderMap,
    decoded: Decoded,
    mirror: MirrorHeaders,
    call_id: Option<Arc<str>>,
) -> Response {
    let streams = accepts_sse(headers);
    if !streams
        && let Decoded::Single(Ok(Message::Request(request))) = &decoded
        && Method::from_name(&request.method) == Method::Listen
    {
        // A listen stream is a stream: without SSE it could only hang.
        return json_response(
            StatusCode::NOT_ACCEPTABLE,
            &encode_error(
                Some(&request.id),
                &ErrorObject::new(
                    INVALID_REQUEST,
                    "subscriptions/listen answers with an event stream: send Accept: text/event-stream",
                ),
            ),
        );
    }
    let (outbound, mut sent) = mpsc::channel::<Reply>(LIVE_QUEUE);
    let Some(pending) = app
        .stateless
        .accept_call(decoded, Some(mirror), call_id, &outbound)
        .await
    else {
        return StatusCode::ACCEPTED.into_response();
    };
    drop(outbound);
    let mut guard = CancelOnDrop(pending.cancellation);
    let mut work = tokio::spawn(pending.work);
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            message = sent.recv(), if open => match message {
                Some(first) if streams => return stateless_stream(first, sent, work, guard),
                // A client that takes JSON only gets the answer alone.
                Some(_) => {}
                None => open = false,
            },
            joined = &mut work => {
                guard.disarm();
                return match joined {
                    Ok(Some(answer)) => json_response(status_of(answer.status), &answer.reply),
                    Ok(None) => StatusCode::ACCEPTED.into_response(),
                    Err(e) => {
                        tracing::error!("a request task failed: {e}");
                        rpc_error(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR, "the request failed")
                    }
                };
            }
        }
    }
}

/// The SSE answer of a 2026-07-28 request: `first`, what else it sends, then its answer.
fn stateless_stream(
    first: Reply,
    mut sent: mpsc::Receiver<Reply>,
    mut work: tokio::task::JoinHandle<Option<Answer>>,
    mut guard: CancelOnDrop,
) -> Response {
    let (live, rx) = mpsc::channel::<Event>(LIVE_QUEUE);
    tokio::spawn(async move {
        if live.send(Event::default().data(first.0)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                biased;
                // The client closed the stream: that is the cancellation (the guard fires).
                () = live.closed() => return,
                message = sent.recv() => match message {
                    // A client a whole queue behind is not reading: the stream is dropped
                    // (which cancels the request) rather than backlogged without bound.
                    Some(reply) => {
                        if live.try_send(Event::default().data(reply.0)).is_err() {
                            tracing::debug!("dropped a stream whose client is not reading it");
                            return;
                        }
                    }
                    None => break,
                },
                joined = &mut work => {
                    while let Ok(reply) = sent.try_recv() {
                        let _ = live.send(Event::default().data(reply.0)).await;
                    }
                    guard.disarm();
                    if let Ok(Some(answer)) = joined {
                        let _ = live.send(Event::default().data(answer.reply.0)).await;
                    }
                    return;
                }
            }
        }
        let joined = tokio::select! {
            () = live.closed() => return,
            joined = &mut work => joined,
        };
        guard.disarm();
        if let Ok(Some(answer)) = joined {
            let _ = live.send(Event::default().data(answer.reply.0)).await;
        }
    });
    sse(rx, None, None)
}

/// A 2025-11-25 (or older) POST: `initialize` creates a session; everything else needs one.
async fn post_session<B: Backend>(
    app: &Arc<App<B>>,
    headers: &HeaderMap,
    decoded: Decoded,
    call_id: Option<Arc<str>>,
) -> Response {
    if let Err(refused) = check_version(headers) {
        return *refused;
    }
    let messages: Vec<&Result<Message, Reply>> = match &decoded {
        Decoded::Single(Err(reply)) => return json_response(StatusCode::BAD_REQUEST, reply),
        Decoded::Single(message) => vec![message],
        Decoded::Batch(items) => items.iter().collect(),
    };
    let initialize = messages.iter().any(|m| {
        matches!(m, Ok(Message::Request(r)) if Method::from_name(&r.method) == Method::Initialize)
    });
    let has_requests = messages
        .iter()
        .any(|m| matches!(m, Ok(Message::Request(_))));
    let (session_id, http) = if initialize {
        match app.create_session() {
            Ok(created) => created,
            Err(refused) => return at_limit(&refused),
        }
    } else {
        match app.session(headers) {
            Ok(http) => (
                headers
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned(),
                http,
            ),
            Err(response) => return *response,
        }
    };
    if !has_requests {
        // Notifications and responses: handled now, in order, and accepted.
        if let Some(pending) = http.session.accept(decoded, None, &http.standalone).await {
            pending.work.await;
        }
        return StatusCode::ACCEPTED.into_response();
    }
    if accepts_sse(headers) && !initialize {
        return stream_replies(&http, decoded, call_id).await;
    }
    // One JSON response; anything sent meanwhile goes to the session's standalone stream.
    let answer = match http
        .session
        .accept_call(decoded, None, call_id, &http.standalone)
        .await
    {
        Some(pending) => pending.work.await,
        None => None,
    };
    if initialize && !http.session.is_initialized() {
        app.sessions().remove(&session_id);
    }
    let reply = answer.map_or_else(|| Reply("{}".into()), |a| a.reply);
    let mut response = json_response(StatusCode::OK, &reply);
    if initialize
        && http.session.is_initialized()
        && let Ok(id) = HeaderValue::from_str(&session_id)
    {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
}

/// Answer requests on a new SSE stream: what they send while running, then their replies.
async fn stream_replies<B: Backend>(
    http: &Arc<HttpSession<B>>,
    decoded: Decoded,
    call_id: Option<Arc<str>>,
) -> Response {
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let stream = http.streams().open(live);
    let (outbound, mut queue) = mpsc::channel::<Reply>(LIVE_QUEUE);
    let pending = http
        .session
        .accept_call(decoded, None, call_id, &outbound)
        .await;
    let http = Arc::clone(http);
    tokio::spawn(async move {
        let pump = {
            let http = Arc::clone(&http);
            async move {
                while let Some(reply) = queue.recv().await {
                    http.streams().push(stream, reply.0);
                }
            }
        };
        let work = async move {
            if let Some(pending) = pending
                && let Some(answer) = pending.work.await
            {
                let _ = outbound.send(answer.reply).await;
            }
            drop(outbound);
        };
        tokio::join!(pump, work);
        http.streams().finish(stream);
    });
    sse(rx, None, None)
}

async fn get_mcp<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers).await {
        return *refused;
    }
    if let Err(refused) = no_stateless_streams(&headers).and_then(|()| check_version(&headers)) {
        return *refused;
    }
    if !accepts_sse(&headers) {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET needs Accept: text/event-stream",
        );
    }
    let http = match app.session(&headers) {
        Ok(http) => http,
        Err(response) => return *response,
    };
    let stream = match app.config.modern.limits.listen_streams.take(1) {
        Ok(share) => share,
        Err(refused) => return at_limit(&refused),
    };
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    match headers.get(LAST_EVENT_HEADER).and_then(|v| v.to_str().ok()) {
        Some(last) => {
            if !http.streams().resume(last, live) {
                return rpc_error(
                    StatusCode::NOT_FOUND,
                    INVALID_REQUEST,
                    "unknown Last-Event-ID: nothing to resume",
                );
            }
        }
        None => http.streams().attach_standalone(live),
    }
    sse(rx, None, Some(stream))
}

async fn delete_mcp<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app
        .check(&headers)
        .await
        .and_then(|_| no_stateless_streams(&headers))
    {
        return *refused;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "missing Mcp-Session-Id header",
        );
    };
    match app.sessions().remove(id) {
        Some(session) => {
            session.streams().close_all();
            tracing::debug!(session = id, "HTTP session ended by the client");
            StatusCode::OK.into_response()
        }
        None => rpc_error(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            "unknown or ended session",
        ),
    }
}

/// Legacy transport: `GET /sse` opens a session whose every message travels on this stream;
/// the first event names the endpoint to POST messages to.
async fn get_sse<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers).await {
        return *refused;
    }
    let stream = match app.config.modern.limits.listen_streams.take(1) {
        Ok(share) => share,
        Err(refused) => return at_limit(&refused),
    };
    let (id, http) = match app.create_session() {
        Ok(created) => created,
        Err(refused) => return at_limit(&refused),
    };
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/messages?session_id={id}"));
    let _ = live.try_send(endpoint);
    http.streams().attach_standalone(live);
    sse(rx, None, Some(stream))
}

#[derive(serde::Deserialize)]
struct LegacyQuery {
    session_id: String,
}

/// Legacy transport: a message for the session; its reply goes on the session's SSE stream.
async fn post_messages<B: Backend>(
    State(app): Shared<B>,
    Query(query): Query<LegacyQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let access = match app.check(&headers).await {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let Some(http) = app.sessions().get(&query.session_id).cloned() else {
        return plain(StatusCode::NOT_FOUND, "unknown session");
    };
    http.touch();
    let decoded = decode_body(body).await;
    if let Err(refused) = app.check_scopes(access.as_ref(), &decoded) {
        return *refused;
    }
    let pending = http.session.accept(decoded, None, &http.standalone).await;
    if let Some(pending) = pending {
        tokio::spawn(async move {
            if let Some(answer) = pending.work.await {
                let _ = http.standalone.send(answer.reply).await;
            }
        });
    }
    StatusCode::ACCEPTED.into_response()
}

/// The answer to a request OAuth refuses: 401 (no token, or an invalid one) or 403 (missing
/// scopes) with `WWW-Authenticate` pointing at the resource metadata (RFC 6750, RFC 9728), or
/// 503 when the issuer's keys cannot be fetched.
fn oauth_refusal(verifier: &crate::auth::Verifier, error: &AuthError) -> Response {
    let metadata = metadata_url(&verifier.config().resource);
    let quoted = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                    c
                } else {
                    '\''
                }
            })
            .take(300)
            .collect()
    };
    let (status, challenge) = match error {
        AuthError::Missing => {
            let scopes = &verifier.config().scopes;
            let scope = if scopes.is_empty() {
                String::new()
            } else {
                format!(", scope=\"{}\"", quoted(&scopes.join(" ")))
            };
            (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\"{scope}"),
            )
        }
        AuthError::Invalid(why) => (
            StatusCode::UNAUTHORIZED,
            format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(why)
            ),
        ),
        AuthError::InsufficientScope(scopes) => (
            StatusCode::FORBIDDEN,
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(&scopes.join(" "))
            ),
        ),
        AuthError::Unavailable(why) => {
            tracing::warn!("refused a request: {why}");
            return (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response();
        }
    };
    let mut response = (status, format!("{error}\n")).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Where the Protected Resource Metadata of `resource` is (RFC 9728 §3.1: the well-known
/// path inserted between the origin and the resource's path).
fn metadata_url(resource: &str) -> String {
    let resource = resource.trim_end_matches('/');
    let split = resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j));
    match split {
        Some(at) => format!(
            "{}/.well-known/oauth-protected-resource{}",
            &resource[..at],
            &resource[at..]
        ),
        None => format!("{resource}/.well-known/oauth-protected-resource"),
    }
}

/// The Protected Resource Metadata (RFC 9728), public (clients read it to find the
/// authorization server); 404 without OAuth.
async fn resource_metadata<B: Backend>(State(app): Shared<B>) -> Response {
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
async fn metrics_endpoint<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers).await {
        return *refused;
    }
    exposition()
}

/// The status page, behind the same gate as `/mcp`; 404 when it is off.
async fn status_page<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers).await {
        return *refused;
    }
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
    let max_body = config.max_body_bytes;
    let idle = config.session_idle;
    let stateless = Arc::new(Session::new(
        Arc::clone(&backend),
        Mode::Modern,
        Arc::clone(&config.modern),
    ));
    let app = Arc::new(App {
        backend,
        stateless,
        config,
        bound,
        sessions: Mutex::new(HashMap::new()),
    });
    let reserve =
        || axum::middleware::from_fn_with_state(Arc::clone(&app), reserve_request_bytes::<B>);
    let router = Router::new()
        .route(
            "/mcp",
            axum::routing::post(post_mcp::<B>.layer(reserve()))
                .get(get_mcp::<B>)
                .delete(delete_mcp::<B>),
        )
        .route("/sse", axum::routing::get(get_sse::<B>))
        .route("/healthz", axum::routing::get(ready::healthz))
        .route("/readyz", axum::routing::get(ready::readyz::<B>))
        .route("/metrics", axum::routing::get(metrics_endpoint::<B>))
        .route("/", axum::routing::get(status_page::<B>))
        .route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(resource_metadata::<B>),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            axum::routing::get(resource_metadata::<B>),
        )
        .route(
            "/messages",
            axum::routing::post(post_messages::<B>.layer(reserve())),
        )
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            ready::startup_gate::<B>,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(Arc::clone(&app));
    // Browser clients from the allowed origins: CORS answers their preflights and lets them
    // read the session and protocol headers. Without allowed origins, no CORS headers at all.
    let router = match cors(&app.config.allowed_origins) {
        Some(cors) => router.layer(cors),
        None => router,
    };

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
            app.stateless.close();
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
            tracing::info!(%bound, "serving MCP over HTTP at /mcp (and legacy SSE at /sse)");
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
