//! What the session loop hands a revision, and what each revision implements: one
//! [`Handler`] per revision (`v2025`: the handshake era; `v2026`: every request stands alone),
//! each in its own file, so that a revision's behaviour reads in one place. The loop
//! (`session`) tells a request's [`Revision`](super::Revision) and gives it, as an
//! [`Incoming`], to that revision's handler with the session's [`Core`]: what every revision
//! shares of its session (the backend, the process's settings, which client session it is,
//! whether it is closing).
//!
//! Nothing here knows either revision; the revisions know this, and the loop knows them.

use std::sync::Arc;

use tokio::sync::watch;

use super::answer::Answer;
use super::audit::AuditSlot;
use super::context::{Cancellation, Outbound, SessionId};
use super::{Backend, Held, MethodOutput, MethodResult, SessionSettings};
use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::request::TypedRequest;
use crate::protocol::v2026::MirrorHeaders;

/// What a revision does with one request.
pub(super) trait Handler<B: Backend>: Send + Sync {
    /// Answer `incoming` (`None`: nothing is sent, as for a listen stream whose client went).
    fn handle(
        &self,
        core: &Core<B>,
        incoming: Incoming<B::Target>,
    ) -> impl Future<Output = Option<Answer>> + Send;
}

/// One request as the loop hands it to its revision: the request and everything that goes
/// with it, passed through once.
pub(super) struct Incoming<T> {
    /// The request, decoded.
    pub request: TypedRequest,
    /// What it resolved to in the backend ([`Backend::resolve`]), when it decoded: the loop's
    /// checks were made on it, and it runs on it.
    pub resolved: Option<T>,
    /// Its mirror headers (HTTP only).
    pub headers: Option<MirrorHeaders>,
    /// The id a trusted balancer gave it (`--call-id-header`).
    pub call_id: Option<Arc<str>>,
    /// Where what it sends the client while it runs goes.
    pub outbound: Outbound,
    /// Its cancellation.
    pub cancellation: Arc<Cancellation>,
    /// Who sent it.
    pub caller: Principal,
    /// Its audit record, filled in as it runs.
    pub audit: Arc<AuditSlot>,
    /// Its caller's place among its running calls (for a request that runs a plugin): held
    /// until it is answered, or handed to its call when that becomes a task.
    pub place: Option<Held>,
}

/// What every revision shares of one session: the backend it serves, the settings of the
/// process, which client session it is, and whether it is closing.
pub(super) struct Core<B> {
    backend: Arc<B>,
    /// The process's settings, shared by every session.
    pub settings: Arc<SessionSettings>,
    closing: watch::Sender<bool>,
    /// Which client session this is (none: the 2026-07-28 endpoint, which serves no
    /// session), and the backend told when it ends.
    ended: Option<SessionEnd>,
}

/// Tells the backend that a session ended, when the session is dropped.
struct SessionEnd {
    id: SessionId,
    tell: Box<dyn Fn(SessionId) + Send + Sync>,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        (self.tell)(self.id);
    }
}

impl<B: Backend> Core<B> {
    /// The core of a session serving `backend`: a client session (told to the backend when it
    /// ends) when `client_session`, else the 2026-07-28 endpoint's.
    pub fn new(backend: Arc<B>, settings: Arc<SessionSettings>, client_session: bool) -> Self {
        Self {
            ended: client_session.then(|| {
                let backend = Arc::clone(&backend);
                SessionEnd {
                    id: SessionId::next(),
                    tell: Box::new(move |id| backend.session_ended(id)),
                }
            }),
            backend,
            settings,
            closing: watch::channel(false).0,
        }
    }
}

impl<B> Core<B> {
    /// Which client session this is (none for the 2026-07-28 endpoint).
    pub fn id(&self) -> Option<SessionId> {
        self.ended.as_ref().map(|end| end.id)
    }

    /// The backend the session serves.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// The session is ending: see [`Session::close`](super::Session::close).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once the session is closing.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closing = self.closing.subscribe();
        async move {
            let _ = closing.wait_for(|c| *c).await;
        }
    }
}

/// `value` encoded as a result (failing to encode it is a host bug: -32603).
pub(super) fn to_raw(value: &impl serde::Serialize) -> MethodResult {
    serde_json::value::to_raw_value(value)
        .map(MethodOutput::from)
        .map_err(|e| ErrorObject::internal(format!("could not encode result: {e}")))
}
