//! 2025-11-25 (and older) Streamable HTTP: sessions named by `Mcp-Session-Id`.
//!
//! - `POST /mcp` ([`post_session`]): `initialize` creates a session and answers with its id;
//!   other messages need that header (missing → 400, unknown or ended → 404). A session
//!   belongs to the caller that created it: another caller presenting its id gets the same 404,
//!   for POST, GET and DELETE alike. Notifications
//!   and responses get 202; requests get an event stream when the client accepts one (what
//!   they send while running, then their replies), otherwise one JSON response. A request
//!   answered at once, having sent nothing meanwhile, is answered with one JSON object even
//!   when the client takes a stream too (the server chooses; clients must accept both).
//! - `GET /mcp` opens the session's standalone stream, or with `Last-Event-ID` resumes a
//!   dropped one; `DELETE /mcp` ends the session.
//! - Idle sessions expire ([`App::expire_idle`]).
//! - At `--max-sessions`, a newcomer does not wait out the idle window: the longest-idle
//!   sessions with nothing in flight — no request being handled, no stream open — are ended to
//!   make room ([`App::make_room`]); their clients get 404 on their next request and
//!   re-initialize, as after an expiry. Clients that never `DELETE` their sessions (the
//!   Inspector CLI, the TypeScript SDK) would otherwise lock everyone out once the table fills.
//!   Only when every session is busy is a newcomer refused (503).
//!
//! Also holds the session table the SSE transport shares. Handlers here sit behind the
//! gate ([`super::gate`]) and do not check it themselves.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::gate::Admitted;
use super::reply::{
    Refused, accepts_json, accepts_sse, at_limit, json_response, over_budget, plain, rpc_error, sse,
};
use super::streams::{LIVE_QUEUE, STANDALONE, Streams};
use super::{App, LAST_EVENT_HEADER, SESSION_HEADER, Shared, VERSION_HEADER};
use crate::principal::Principal;
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::jsonrpc::Decoded;
use crate::protocol::request::Method;
use crate::protocol::{Message, Reply, RequestId, v2025};
use crate::server::{
    Backend, Budgeted, Held, Mode, Outbound, Pending, Session, Share, SharedSession, forward_events,
};

/// One client session over HTTP.
pub(super) struct HttpSession<B> {
    pub(super) session: Arc<Session<B>>,
    /// The caller that created it: the only one it answers (another gets 404).
    pub(super) owner: Principal,
    streams: Mutex<Streams>,
    last_used: Mutex<Instant>,
    /// Requests being handled on it (each holds a [`Busy`]): while any is, it is never ended
    /// to make room, nor expired.
    busy: Arc<AtomicUsize>,
    /// Where messages not tied to a POST stream go: the standalone stream.
    pub(super) standalone: Outbound,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Its place among the open sessions (`--max-sessions`), and among its owner's own
    /// (`[budgets] sessions`), given back when it ends.
    _slot: (Share, Option<Held>, Option<SharedSession>),
}

impl<B> HttpSession<B> {
    pub(super) fn streams(&self) -> std::sync::MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn touch(&self) {
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

    /// Mark a request being handled on it, until the mark is dropped.
    pub(super) fn busy(&self) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(&self.busy))
    }

    /// Whether something is in flight on it: a request being handled, or an open stream (a
    /// request's, or the standalone one).
    fn in_flight(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0 || self.streams().has_live()
    }
}

/// A request being handled on a session (see [`HttpSession::busy`]).
#[must_use = "the session counts as busy only while this is held"]
pub(super) struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many sessions one newcomer may end to make room (each attempt ends one; more are
/// needed only when other newcomers take the room first).
const MAKE_ROOM_TRIES: usize = 4;

impl<B> Drop for HttpSession<B> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl<B: Backend> App<B> {
    /// Start a session for `owner`: its MCP state, its standalone stream, and the task
    /// forwarding backend events into that stream; at `--max-sessions` the longest-idle
    /// session with nothing in flight is ended to make room ([`App::make_room`]), and only
    /// when there is none is the newcomer refused (503); refused at the owner's budget of
    /// sessions (429, answering `request_id`, the request that asked). Returned busy: nothing
    /// ends it to make room before the request that made it is handled.
    pub(super) async fn create_session(
        self: &Arc<Self>,
        owner: &Principal,
        request_id: Option<&RequestId>,
    ) -> Result<(String, Arc<HttpSession<B>>, Busy), Refused> {
        let budgets = &self.config.session.budgets;
        let own = budgets
            .take(owner, Budgeted::Sessions, 1)
            .map_err(|over| Box::new(over_budget(request_id, &over)))?;
        self.make_room();
        let slot = self
            .config
            .session
            .limits
            .sessions
            .take(1)
            .map_err(|refused| Box::new(at_limit(&refused)))?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        // Behind a balancer, the caller's sessions on every replica count.
        let shared = budgets
            .open_session(owner, &id, self.config.session_idle)
            .await
            .map_err(|over| Box::new(over_budget(request_id, &over)))?;
        let slot = (slot, own, shared);
        let session = Arc::new(Session::new(
            Arc::clone(&self.backend),
            Mode::V2025,
            Arc::clone(&self.config.session),
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
                let owner = owner.clone();
                tokio::spawn(async move { forward_events(&session, &owner, standalone).await })
            };
            HttpSession {
                session,
                owner: owner.clone(),
                streams: Mutex::new(Streams::new()),
                last_used: Mutex::new(Instant::now()),
                busy: Arc::default(),
                standalone,
                tasks: vec![pump, events],
                _slot: slot,
            }
        });
        let busy = http.busy();
        self.sessions().insert(id.clone(), Arc::clone(&http));
        tracing::debug!(session = id, caller = %owner, "HTTP session created");
        Ok((id, http, busy))
    }

    /// At `--max-sessions`, end the longest-idle sessions with nothing in flight
    /// ([`HttpSession::in_flight`]) until there is room for one more, or none is left to end
    /// (then the newcomer is refused). An ended session's client gets 404 on its next
    /// request, as after an expiry, and re-initializes.
    pub(super) fn make_room(&self) {
        let capacity = &self.config.session.limits.sessions;
        for _ in 0..MAKE_ROOM_TRIES {
            if capacity.in_use() < capacity.max() {
                return;
            }
            let mut sessions = self.sessions();
            let longest_idle = sessions
                .iter()
                .filter(|(_, session)| !session.in_flight())
                .map(|(id, session)| (session.idle_for(), id))
                .max()
                .map(|(idle, id)| (idle, id.clone()));
            let Some((idle, id)) = longest_idle else {
                return;
            };
            let ended = sessions.remove(&id);
            drop(sessions);
            // Its place is given back when the last reference goes: here, nothing being in
            // flight on it.
            drop(ended);
            tracing::info!(
                session = id,
                idle_secs = idle.as_secs(),
                "HTTP session ended to make room for a new one (--max-sessions reached)"
            );
        }
    }

    /// The session named by the request's `Mcp-Session-Id`, marked busy while the request
    /// holds the mark: 400 if missing, 404 if unknown or another caller's.
    fn session(
        &self,
        headers: &HeaderMap,
        caller: &Principal,
    ) -> Result<(Arc<HttpSession<B>>, Busy), Refused> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "missing Mcp-Session-Id header",
            )));
        };
        match self.owned_session(id, caller) {
            Some((session, busy)) => {
                session.touch();
                Ok((session, busy))
            }
            None => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "unknown or ended session",
            ))),
        }
    }

    /// The session `id` if `caller` created it, marked busy (under the table's lock, so it is
    /// not ended to make room meanwhile) while the mark is held. Another caller's session is
    /// answered as one that does not exist: no oracle of which ids are live.
    pub(super) fn owned_session(
        &self,
        id: &str,
        caller: &Principal,
    ) -> Option<(Arc<HttpSession<B>>, Busy)> {
        let (session, busy) = {
            let sessions = self.sessions();
            let session = sessions.get(id).cloned()?;
            let busy = session.busy();
            (session, busy)
        };
        if session.owner.is(caller) {
            Some((session, busy))
        } else {
            tracing::warn!(%caller, owner = %session.owner, "refused a session id presented by a caller that did not create it (answered as unknown)");
            None
        }
    }

    /// End sessions idle longer than the configured time (and with nothing in flight).
    pub(super) fn expire_idle(&self) {
        let idle = self.config.session_idle;
        self.sessions().retain(|id, session| {
            let keep = session.idle_for() < idle || session.in_flight();
            if !keep {
                tracing::info!(session = id, "HTTP session expired after being idle");
            }
            keep
        });
    }
}

/// 400 when `MCP-Protocol-Version` names a version sessions do not speak.
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

/// 2026-07-28 has no sessions: GET and DELETE from a client of that revision (a 2026-07-28
/// `MCP-Protocol-Version` and no session) get 405.
fn no_v2026_streams(headers: &HeaderMap) -> Result<(), Refused> {
    let version = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    let v2026 = version.is_some_and(|v| !v2025::is_handshake_version(v));
    if v2026 && headers.get(SESSION_HEADER).is_none() {
        return Err(Box::new(plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "2026-07-28 has no sessions: only POST is served",
        )));
    }
    Ok(())
}

/// A 2025-11-25 (or older) POST: `initialize` creates a session; everything else needs one.
pub(super) async fn post_session<B: Backend>(
    app: &Arc<App<B>>,
    headers: &HeaderMap,
    decoded: Decoded,
    call_id: Option<Arc<str>>,
    caller: &Principal,
) -> Response {
    if let Err(refused) = check_version(headers) {
        return *refused;
    }
    let decoded = match decoded {
        Decoded::Single(Err(reply)) => return json_response(StatusCode::BAD_REQUEST, reply),
        decoded => decoded,
    };
    let messages: Vec<&Result<Message, Reply>> = match &decoded {
        Decoded::Single(message) => vec![message],
        Decoded::Batch(items) => items.iter().collect(),
    };
    let initialize = messages.iter().find_map(|m| match m {
        Ok(Message::Request(r)) if r.method == Method::Initialize => Some(r.id.clone()),
        _ => None,
    });
    let has_requests = messages
        .iter()
        .any(|m| matches!(m, Ok(Message::Request(_))));
    let (session_id, http, busy) = if let Some(id) = &initialize {
        match app.create_session(caller, Some(id)).await {
            Ok(created) => created,
            Err(refused) => return *refused,
        }
    } else {
        match app.session(headers, caller) {
            Ok((http, busy)) => (
                headers
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned(),
                http,
                busy,
            ),
            Err(response) => return *response,
        }
    };
    let initialize = initialize.is_some();
    if !has_requests {
        // Notifications and responses: handled now, in order, and accepted.
        if let Some(pending) = http
            .session
            .accept(decoded, None, &http.standalone, caller)
            .await
        {
            pending.work.await;
        }
        return StatusCode::ACCEPTED.into_response();
    }
    if accepts_sse(headers) && !initialize {
        let json_too = accepts_json(headers);
        return stream_replies(app, &http, busy, decoded, call_id, caller, json_too).await;
    }
    // One JSON response; anything sent meanwhile goes to the session's standalone stream.
    let answer = match http
        .session
        .accept_call(decoded, None, call_id, &http.standalone, caller)
        .await
    {
        Some(Pending {
            refusal: Some(refusal),
            ..
        }) => return app.refusal(refusal),
        Some(pending) => pending.work.await,
        None => None,
    };
    if initialize && !http.session.is_initialized() {
        app.sessions().remove(&session_id);
    }
    let reply = answer.map_or_else(|| Reply("{}".into()), |a| a.reply);
    let mut response = json_response(StatusCode::OK, reply);
    if initialize
        && http.session.is_initialized()
        && let Ok(id) = HeaderValue::from_str(&session_id)
    {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
}

/// Answer requests on a new SSE stream: what they send while running, then their replies.
/// Requests answered at once with nothing sent meanwhile get their answer as one JSON object
/// instead when the client takes JSON too (`json_too`).
async fn stream_replies<B: Backend>(
    app: &Arc<App<B>>,
    http: &Arc<HttpSession<B>>,
    busy: Busy,
    decoded: Decoded,
    call_id: Option<Arc<str>>,
    caller: &Principal,
    json_too: bool,
) -> Response {
    let (outbound, mut queue) = mpsc::channel::<Reply>(LIVE_QUEUE);
    let pending = http
        .session
        .accept_call(decoded, None, call_id, &outbound, caller)
        .await;
    if let Some(refusal) = pending.as_ref().and_then(|p| p.refusal.clone()) {
        return app.refusal(refusal);
    }
    let Some(mut pending) = pending else {
        return finished_stream(http, Vec::new());
    };
    // Polled here once first: work that finishes at once (a plugin call that neither waits on
    // the host nor reaches an epoch tick) is answered here, without a task of its own and a
    // hand-off to it. Its answer alone is one JSON object: no stream kept for resumption, no
    // chunked body (BENCHMARKS.md, HTTP); with what it sent, all of it on its stream.
    if let Poll::Ready(answer) = futures::poll!(&mut pending.work) {
        let mut sent = Vec::new();
        while let Ok(reply) = queue.try_recv() {
            sent.push(reply);
        }
        if sent.is_empty()
            && json_too
            && let Some(answer) = answer
        {
            return json_response(StatusCode::OK, answer.reply);
        }
        sent.extend(answer.map(|a| a.reply));
        return finished_stream(http, sent);
    }
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let stream = http.streams().open(live);
    let http = Arc::clone(http);
    tokio::spawn(async move {
        let _busy = busy;
        let pump = {
            let http = Arc::clone(&http);
            async move {
                while let Some(reply) = queue.recv().await {
                    http.streams().push(stream, reply.0);
                }
            }
        };
        let work = async move {
            if let Some(answer) = pending.work.await {
                let _ = outbound.send(answer.reply).await;
            }
            drop(outbound);
        };
        tokio::join!(pump, work);
        http.streams().finish(stream);
    });
    sse(rx, ())
}

/// A stream that is complete when it opens: `messages`, kept for resumption like any other.
fn finished_stream<B: Backend>(http: &HttpSession<B>, messages: Vec<Reply>) -> Response {
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let mut streams = http.streams();
    let stream = streams.open(live);
    for message in messages {
        streams.push(stream, message.0);
    }
    streams.finish(stream);
    sse(rx, ())
}

/// `GET /mcp`: the session's standalone stream, or with `Last-Event-ID` the resumption of a
/// dropped stream.
pub(super) async fn get_mcp<B: Backend>(
    State(app): Shared<B>,
    admitted: Admitted,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = no_v2026_streams(&headers).and_then(|()| check_version(&headers)) {
        return *refused;
    }
    if !accepts_sse(&headers) {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET needs Accept: text/event-stream",
        );
    }
    let (http, _busy) = match app.session(&headers, &admitted.caller) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let own = match app
        .config
        .session
        .budgets
        .take(&admitted.caller, Budgeted::ListenStreams, 1)
    {
        Ok(held) => held,
        Err(over) => return over_budget(None, &over),
    };
    let stream = match app.config.session.limits.listen_streams.take(1) {
        Ok(share) => (share, own),
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
    sse(rx, stream)
}

/// `DELETE /mcp`: the client ends its session.
pub(super) async fn delete_mcp<B: Backend>(
    State(app): Shared<B>,
    admitted: Admitted,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = no_v2026_streams(&headers) {
        return *refused;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "missing Mcp-Session-Id header",
        );
    };
    let owned = app.owned_session(id, &admitted.caller).is_some();
    match owned.then(|| app.sessions().remove(id)).flatten() {
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
