//! The HTTP transports: Streamable HTTP (MCP 2025-11-25) at `/mcp`, and the legacy HTTP+SSE
//! transport of 2024-11-05 clients at `/sse` and `/messages`.
//!
//! Depends on `protocol` and `server`; knows nothing of plugins. Every request passes the same
//! gate first: the `Host` and `Origin` headers must name the bound address (DNS rebinding →
//! 403), the bearer token must match when one is configured (401 with `WWW-Authenticate`), and
//! bodies are size-limited (413). On `/mcp`:
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
//! A slow or vanished client never blocks others: each stream has a bounded queue, and a
//! client that falls behind is detached (it can resume). Idle sessions expire.

mod streams;

use axum::serve::ListenerExt as _;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;

use self::streams::{LIVE_QUEUE, STANDALONE, Streams};
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::jsonrpc::{Decoded, decode, encode_batch, encode_error};
use crate::protocol::mcp::SUPPORTED_VERSIONS;
use crate::protocol::{ErrorObject, Message, Reply};
use crate::server::{Backend, Outbound, Session, forward_events};

/// Settings of the HTTP transports.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (besides the bound address and, on loopback, `localhost`, `127.0.0.1`
    /// and `[::1]`) that `Host` and `Origin` may name.
    pub allowed_hosts: Vec<String>,
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub auth_token: Option<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// Sessions unused this long are ended.
    pub session_idle: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            auth_token: None,
            max_body_bytes: 4 << 20,
            session_idle: Duration::from_secs(30 * 60),
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
    config: HttpConfig,
    bound: SocketAddr,
    sessions: Mutex<HashMap<String, Arc<HttpSession<B>>>>,
}

impl<B: Backend> App<B> {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession<B>>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start a session: its MCP state, its standalone stream, and the task forwarding backend
    /// events into that stream.
    fn create_session(self: &Arc<Self>) -> (String, Arc<HttpSession<B>>) {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = Arc::new(Session::new(Arc::clone(&self.backend)));
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
            }
        });
        self.sessions().insert(id.clone(), Arc::clone(&http));
        tracing::debug!(session = id, "HTTP session created");
        (id, http)
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

    /// The gate every request passes: Host, Origin, and the bearer token.
    fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
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
            if !authority.is_some_and(|a| self.allowed_authority(a)) {
                tracing::warn!(origin, "refused a request from another origin");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: Origin is not allowed",
                )));
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

    /// Whether `authority` (`host[:port]`) names this server.
    fn allowed_authority(&self, authority: &str) -> bool {
        let (host, port) = split_authority(authority);
        if port.is_some_and(|p| p != self.bound.port()) {
            return false;
        }
        let host = host.to_ascii_lowercase();
        let bound_ip = self.bound.ip();
        let loopback_names = ["localhost", "127.0.0.1", "::1"];
        (bound_ip.is_loopback() && loopback_names.contains(&host.as_str()))
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip == bound_ip)
            || self
                .config
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&host))
    }
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
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.0.clone(),
    )
        .into_response()
}

fn check_version(headers: &HeaderMap) -> Result<(), Refused> {
    match headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(version) if !SUPPORTED_VERSIONS.contains(&version) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!(
                "unsupported MCP-Protocol-Version `{version}`; supported: {}",
                SUPPORTED_VERSIONS.join(", ")
            ),
        ))),
        _ => Ok(()),
    }
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}

/// An SSE response fed by `rx`.
fn sse(rx: mpsc::Receiver<Event>, session_id: Option<&str>) -> Response {
    let stream = ReceiverStream::new(rx).map(Ok::<_, Infallible>);
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
    if let Err(refused) = app.check(&headers).and_then(|()| check_version(&headers)) {
        return *refused;
    }
    let messages = match decode(&body) {
        Decoded::Single(Ok(message)) => vec![Ok(message)],
        Decoded::Single(Err(reply)) => return json_response(StatusCode::BAD_REQUEST, &reply),
        Decoded::Batch(items) => items,
    };
    let batch = messages.len() > 1;
    let initialize = messages
        .iter()
        .any(|m| matches!(m, Ok(Message::Request(r)) if r.method == "initialize"));
    let (session_id, http) = if initialize {
        let (id, http) = app.create_session();
        (id, http)
    } else {
        match app.session(&headers) {
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
    let has_requests = messages
        .iter()
        .any(|m| matches!(m, Ok(Message::Request(_))));
    if !has_requests {
        // Notifications and responses: handled here, in order, and accepted.
        for message in messages.into_iter().flatten() {
            http.session.handle(message, &http.standalone).await;
        }
        return StatusCode::ACCEPTED.into_response();
    }
    for message in messages.iter().flatten() {
        http.session.track(message);
    }
    let sid = initialize.then_some(session_id.as_str());
    if accepts_sse(&headers) && !initialize {
        return stream_replies(&http, messages, batch, sid);
    }
    // One JSON response; anything sent meanwhile goes to the session's standalone stream.
    let mut replies = Vec::new();
    for message in messages {
        match message {
            Ok(message) => replies.extend(http.session.handle(message, &http.standalone).await),
            Err(reply) => replies.push(reply),
        }
    }
    if initialize && !http.session.is_initialized() {
        app.sessions().remove(&session_id);
    }
    let reply = if batch {
        encode_batch(&replies)
    } else {
        replies
            .into_iter()
            .next()
            .unwrap_or_else(|| Reply("{}".into()))
    };
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
fn stream_replies<B: Backend>(
    http: &Arc<HttpSession<B>>,
    messages: Vec<Result<Message, Reply>>,
    batch: bool,
    session_id: Option<&str>,
) -> Response {
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let stream = http.streams().open(live);
    let (outbound, mut queue) = mpsc::channel::<Reply>(LIVE_QUEUE);
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
        let work = async {
            let mut replies = Vec::new();
            for message in messages {
                match message {
                    Ok(message) => replies.extend(http.session.handle(message, &outbound).await),
                    Err(reply) => replies.push(reply),
                }
            }
            if batch {
                let _ = outbound.send(encode_batch(&replies)).await;
            } else {
                for reply in replies {
                    let _ = outbound.send(reply).await;
                }
            }
            drop(outbound);
        };
        tokio::join!(pump, work);
        http.streams().finish(stream);
    });
    sse(rx, session_id)
}

async fn get_mcp<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers).and_then(|()| check_version(&headers)) {
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
    sse(rx, None)
}

async fn delete_mcp<B: Backend>(State(app): Shared<B>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers) {
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
    if let Err(refused) = app.check(&headers) {
        return *refused;
    }
    let (id, http) = app.create_session();
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/messages?session_id={id}"));
    let _ = live.try_send(endpoint);
    http.streams().attach_standalone(live);
    sse(rx, None)
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
    if let Err(refused) = app.check(&headers) {
        return *refused;
    }
    let Some(http) = app.sessions().get(&query.session_id).cloned() else {
        return plain(StatusCode::NOT_FOUND, "unknown session");
    };
    http.touch();
    let messages = match decode(&body) {
        Decoded::Single(message) => vec![message],
        Decoded::Batch(items) => items,
    };
    for message in messages.iter().flatten() {
        if !Session::<B>::is_lifecycle(message) {
            http.session.track(message);
        }
    }
    tokio::spawn(async move {
        for message in messages {
            let reply = match message {
                Ok(message) => http.session.handle(message, &http.standalone).await,
                Err(reply) => Some(reply),
            };
            if let Some(reply) = reply {
                let _ = http.standalone.send(reply).await;
            }
        }
    });
    StatusCode::ACCEPTED.into_response()
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
    let app = Arc::new(App {
        backend,
        config,
        bound,
        sessions: Mutex::new(HashMap::new()),
    });
    let router = Router::new()
        .route(
            "/mcp",
            axum::routing::post(post_mcp::<B>)
                .get(get_mcp::<B>)
                .delete(delete_mcp::<B>),
        )
        .route("/sse", axum::routing::get(get_sse::<B>))
        .route("/messages", axum::routing::post(post_messages::<B>))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(Arc::clone(&app));

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
            for session in app.sessions().values() {
                session.streams().close_all();
            }
        }
    };
    // Replies are small and written in pieces (headers, then events): without TCP_NODELAY,
    // Nagle's algorithm holds each later piece for the client's delayed ACK, 40 ms a request.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
    });
    let server = axum::serve(listener, router.into_make_service()).with_graceful_shutdown(closer);
    tracing::info!(%bound, "serving MCP over HTTP at /mcp (and legacy SSE at /sse)");
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
    result
}
