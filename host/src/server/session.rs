//! The session loop every transport shares: it accepts decoded input in arrival order, tells
//! each request's revision, keeps the requests in flight (for cancellation), and orders work:
//! messages that change a 2025-11-25 session's state (and every notification and response)
//! are handled before the next message is accepted; every other request runs concurrently.
//!
//! Transports only frame bytes and carry headers and streams: they hand each decoded input to
//! [`Session::accept`] in the order it arrived and run (or await) the [`Pending`] work it
//! returns.
//!
//! What the loop does for every request, whatever its revision, is here: the caller's scopes
//! and budgets checked before it runs, its audit record, span and metrics, cancellation, a
//! panic answered. What each revision does with it is that revision's [`Handler`]: `v2025`
//! and `v2026`, given the request as an [`Incoming`] with the session's [`Core`]. What an
//! answer is, and the status it earns, is `answer`'s.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::Instrument as _;

use super::answer::{Answer, Status};
use super::audit::{AuditOutcome, AuditStart};
use super::context::{Cancellation, Outbound};
use super::handler::{Core, Handler as _, Incoming};
use super::v2025::V2025;
use super::v2026::V2026;
use super::{Backend, Revision, SessionSettings, Target};
use crate::principal::Principal;
use crate::protocol::jsonrpc::encode_batch;
use crate::protocol::request::{ClientNotification, ClientRequest, Method, TypedRequest};
use crate::protocol::v2026::{self, MirrorHeaders};
use crate::protocol::{Decoded, Message, Reply, RequestId};

/// How long a cancelled call may run on (to notice `cancelled()` and stop cleanly) before it
/// is interrupted and its instance dropped.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// Which revisions a session serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Both, chosen per message (stdio: one process, any client).
    Dual,
    /// Only the 2025-11-25 handshake era (an HTTP session created by `initialize`).
    V2025,
    /// Only 2026-07-28 (the stateless HTTP endpoint).
    V2026,
}

/// The trace span of one request (exported only with `--otlp-endpoint`), parented on the trace
/// context in its `_meta`, else on the span it arrived in (an HTTP request's).
fn request_span(request: &TypedRequest) -> tracing::Span {
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "mcp.request",
        otel.name = %request.method.label(),
        mcp.method = %request.method.label(),
        jsonrpc.id = %request.id,
    );
    if let Some((parent, state)) = &request.meta.trace {
        crate::telemetry::set_parent(&span, parent, state.as_deref());
    }
    span
}

/// Counts one request in the metrics: its answer's outcome, or `cancelled` if it is dropped
/// (or cancelled) unanswered.
struct RequestMeter {
    method: Method,
    started: Instant,
    counted: bool,
}

impl RequestMeter {
    fn start(method: &Method) -> Self {
        Self {
            method: method.clone(),
            started: Instant::now(),
            counted: false,
        }
    }

    fn answered(mut self, answer: Option<&Answer>) {
        self.counted = true;
        let outcome = match answer {
            None => "cancelled",
            Some(answer) if answer.failed => "error",
            Some(_) => "ok",
        };
        crate::metrics::metrics().request(&self.method, outcome, self.started.elapsed());
    }
}

impl Drop for RequestMeter {
    fn drop(&mut self) {
        if !self.counted {
            crate::metrics::metrics().request(&self.method, "cancelled", self.started.elapsed());
        }
    }
}

/// Work a transport runs for one accepted input: it ends with the reply to send, if any.
pub struct Pending {
    /// The work.
    pub work: Pin<Box<dyn Future<Output = Option<Answer>> + Send>>,
    /// Cancels the work (for a transport that sees the client go away).
    pub cancellation: Option<Arc<Cancellation>>,
    /// The work is already done (a message handled in arrival order): its answer should go
    /// out before anything accepted later.
    pub settled: bool,
    /// Refused before it ran, for a reason a transport with statuses answers in kind (the
    /// work's answer carries the JSON-RPC error either way).
    pub refusal: Option<Refusal>,
}

/// Why a request was refused before it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The caller lacks these scopes: over HTTP, 403 `insufficient_scope` naming them, so the
    /// client can step up.
    Forbidden(Vec<String>),
    /// The caller is over one of its budgets: over HTTP, 429 with `Retry-After` and this
    /// JSON-RPC error as the body.
    OverBudget {
        /// The JSON-RPC error naming the limit and the caller's budget.
        reply: Reply,
        /// When to try again, in seconds.
        retry_after: u64,
    },
}

impl Pending {
    /// A request refused before it ran: its answer is ready, and `refusal` says why.
    fn refused(answer: Answer) -> Self {
        let refusal = match answer.status {
            Status::TooMany => Refusal::OverBudget {
                reply: answer.reply.clone(),
                retry_after: answer.retry_after,
            },
            _ => Refusal::Forbidden(answer.missing_scopes.clone()),
        };
        Self {
            refusal: Some(refusal),
            ..Self::ready(Some(answer))
        }
    }

    fn ready(answer: Option<Answer>) -> Self {
        Self {
            work: Box::pin(std::future::ready(answer)),
            cancellation: None,
            settled: true,
            refusal: None,
        }
    }
}

/// One conversation with a client: a stdio process, an HTTP session, or the stateless HTTP
/// endpoint.
pub struct Session<B> {
    /// What both revisions share of the session.
    core: Core<B>,
    mode: Mode,
    /// The 2025-11-25 handler, and the state of the handshake it keeps.
    pub(super) v2025: V2025,
    in_flight: Mutex<HashMap<RequestId, Arc<Cancellation>>>,
    /// Held while accepting: a message that changes session state holds it until handled.
    order: tokio::sync::Mutex<()>,
    /// Counts the session in the metrics while it lives (not the 2026-07-28 endpoint's).
    _open: Option<crate::metrics::GaugeGuard>,
}

impl<B> Session<B> {
    /// The process's global bounds, which this session shares.
    pub fn limits(&self) -> &super::ProcessLimits {
        &self.core.settings.limits
    }
}

impl<B: Backend> Session<B> {
    /// A new session serving `backend`.
    pub fn new(backend: Arc<B>, mode: Mode, settings: Arc<SessionSettings>) -> Self {
        Self {
            core: Core::new(backend, settings, mode != Mode::V2026),
            mode,
            v2025: V2025::default(),
            in_flight: Mutex::new(HashMap::new()),
            order: tokio::sync::Mutex::new(()),
            _open: match mode {
                Mode::Dual => Some(crate::metrics::metrics().session("stdio")),
                Mode::V2025 => Some(crate::metrics::metrics().session("http")),
                Mode::V2026 => None,
            },
        }
    }

    pub(super) fn backend(&self) -> &Arc<B> {
        self.core.backend()
    }

    /// Whether a 2025-11-25 client completed `initialize` on this session.
    pub fn is_initialized(&self) -> bool {
        self.v2025.is_initialized()
    }

    /// The protocol version agreed at `initialize`, once it has been answered.
    pub fn protocol_version(&self) -> Option<&'static str> {
        self.v2025.protocol_version()
    }

    /// The session is ending (end of input, shutdown): listen streams close with their
    /// final result, so the transport can drain what is in flight.
    pub fn close(&self) {
        self.core.close();
    }

    /// The revision of a request with this `_meta`, given this session's mode.
    fn revision(&self, request: &TypedRequest, headers: Option<&MirrorHeaders>) -> Revision {
        match self.mode {
            Mode::V2025 => Revision::V2025,
            Mode::V2026 => Revision::V2026,
            Mode::Dual => {
                let header = headers.and_then(|h| h.protocol_version.as_deref());
                if v2026::is_v2026(&request.meta, header) {
                    Revision::V2026
                } else {
                    Revision::V2025
                }
            }
        }
    }

    /// Accept one decoded input, in arrival order. Messages that change session state,
    /// notifications and responses are handled before this returns; requests are tracked (so
    /// a cancellation read next finds them) and returned as work to run. `outbound` carries
    /// what the work sends the client while it runs.
    pub async fn accept(
        self: &Arc<Self>,
        input: Decoded,
        headers: Option<MirrorHeaders>,
        outbound: &Outbound,
        caller: &Principal,
    ) -> Option<Pending> {
        self.accept_call(input, headers, None, outbound, caller)
            .await
    }

    /// [`Session::accept`] for an input a trusted balancer gave an id (`call_id`, see
    /// `kv::calls`): a single request's tool call is recorded under it. A batch's requests are
    /// not (one id cannot name several calls).
    ///
    /// A request that would reach a plugin whose scopes `caller` does not hold is refused
    /// here, before it runs, with [`Status::Forbidden`] and the missing scopes (HTTP answers
    /// 403 `insufficient_scope`, so the client can step up); in a batch, one such request
    /// refuses the whole batch.
    pub async fn accept_call(
        self: &Arc<Self>,
        input: Decoded,
        headers: Option<MirrorHeaders>,
        call_id: Option<Arc<str>>,
        outbound: &Outbound,
        caller: &Principal,
    ) -> Option<Pending> {
        match input {
            Decoded::Single(Err(reply)) => Some(Pending::ready(Some(Answer::refused(
                reply,
                Status::BadRequest,
            )))),
            Decoded::Single(Ok(message)) => {
                let _order = self.order.lock().await;
                self.accept_message(message, headers, call_id, outbound, caller)
                    .await
            }
            Decoded::Batch(items) => {
                let _order = self.order.lock().await;
                let mut steps = Vec::with_capacity(items.len());
                for item in items {
                    let step = match item {
                        Err(reply) => Err(reply),
                        Ok(message) => {
                            let pending = self
                                .accept_message(message, None, None, outbound, caller)
                                .await;
                            if pending.as_ref().is_some_and(|p| p.refusal.is_some()) {
                                // Nothing of the batch runs: the others' work is dropped unrun.
                                return pending;
                            }
                            Ok(pending)
                        }
                    };
                    steps.push(step);
                }
                Some(Pending {
                    work: Box::pin(async move {
                        let mut replies = Vec::new();
                        for step in steps {
                            match step {
                                Err(reply) => replies.push(reply),
                                Ok(Some(pending)) => {
                                    replies.extend(pending.work.await.map(|a| a.reply));
                                }
                                Ok(None) => {}
                            }
                        }
                        (!replies.is_empty()).then(|| Answer::ok(encode_batch(&replies)))
                    }),
                    cancellation: None,
                    settled: false,
                    refusal: None,
                })
            }
        }
    }

    async fn accept_message(
        self: &Arc<Self>,
        message: Message,
        headers: Option<MirrorHeaders>,
        call_id: Option<Arc<str>>,
        outbound: &Outbound,
        caller: &Principal,
    ) -> Option<Pending> {
        match message {
            Message::Notification(notification) => {
                self.notification(&ClientNotification::decode(&notification));
                None
            }
            Message::Response(response) => {
                if !self.v2025.peer().deliver(&response.id, response.outcome) {
                    tracing::debug!(id = %response.id, "ignored a response to no request of ours in flight");
                }
                None
            }
            Message::Request(request) => {
                let request = *request;
                let span = request_span(&request);
                let audit = AuditStart::begin(
                    self.core.settings.audit.as_ref(),
                    &request,
                    caller,
                    self.client_name(&request),
                    &span,
                );
                // Resolved once: the checks here and the run read one version of what the
                // backend serves.
                let resolved = request
                    .body
                    .as_ref()
                    .ok()
                    .map(|body| self.backend().resolve(body));
                if let Some(forbidden) = self.refuse_unscoped(&request, resolved.as_ref(), caller) {
                    return Some(self.refuse(
                        &request,
                        resolved.as_ref(),
                        forbidden,
                        audit,
                        AuditOutcome::RefusedScope,
                    ));
                }
                let held = match self.charge(&request, caller).await {
                    Ok(held) => held,
                    Err(over) => {
                        let answer = Answer::over_budget(&request.id, &over);
                        return Some(self.refuse(
                            &request,
                            resolved.as_ref(),
                            answer,
                            audit,
                            AuditOutcome::RefusedBudget,
                        ));
                    }
                };
                let revision = self.revision(&request, headers.as_ref());
                if revision == Revision::V2025 && request.method.changes_session() {
                    let meter = RequestMeter::start(&request.method);
                    // Boxed: inline, this once-a-session path would size every message's
                    // future.
                    let incoming = Incoming {
                        request,
                        resolved,
                        headers,
                        call_id: None,
                        outbound: outbound.clone(),
                        cancellation: Arc::default(),
                        caller: caller.clone(),
                        audit: Arc::default(),
                        place: held,
                    };
                    let answer =
                        Box::pin(self.v2025.handle(&self.core, incoming).instrument(span)).await;
                    meter.answered(answer.as_ref());
                    if let Some(audit) = audit {
                        audit.end(AuditOutcome::Ok);
                    }
                    return Some(Pending::ready(answer));
                }
                let cancellation: Arc<Cancellation> =
                    Arc::clone(self.in_flight().entry(request.id.clone()).or_default());
                let session = Arc::clone(self);
                let (outbound, cancel) = (outbound.clone(), Arc::clone(&cancellation));
                let caller = caller.clone();
                Some(Pending {
                    work: Box::pin(
                        async move {
                            // The caller's place among its running calls goes with the request
                            // (to its call, should that become a task), until it ends.
                            session
                                .run(
                                    request, resolved, revision, headers, call_id, outbound,
                                    cancel, caller, audit, held,
                                )
                                .await
                        }
                        .instrument(span),
                    ),
                    cancellation: Some(cancellation),
                    settled: false,
                    refusal: None,
                })
            }
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Arc<Cancellation>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The client's name: from the request's `_meta` (2026-07-28), else from `initialize`.
    fn client_name(&self, request: &TypedRequest) -> Option<String> {
        request
            .meta
            .client_info
            .as_deref()
            .and_then(super::audit::client_name)
            .or_else(|| self.v2025.client_name())
    }

    /// A request refused before it ran with `answer`: counted, audited as `outcome` (naming
    /// the plugin it would have reached), and its answer ready.
    fn refuse(
        &self,
        request: &TypedRequest,
        resolved: Option<&B::Target>,
        answer: Answer,
        audit: Option<AuditStart>,
        outcome: AuditOutcome,
    ) -> Pending {
        RequestMeter::start(&request.method).answered(Some(&answer));
        if let Some(audit) = audit {
            if let Some(plugin) = resolved.and_then(Target::plugin) {
                audit.slot.plugin(plugin);
            }
            audit.end(outcome);
        }
        Pending::refused(answer)
    }

    /// Charge `request` to `caller`'s budgets: one token of its request rate, and for a
    /// request that runs a plugin a place among its running calls (held until it ends).
    async fn charge(
        &self,
        request: &TypedRequest,
        caller: &Principal,
    ) -> Result<Option<super::Held>, super::OverBudget> {
        let budgets = &self.core.settings.budgets;
        budgets.admit(caller).await?;
        let runs_plugin = matches!(
            request.body,
            Ok(ClientRequest::CallTool(_)
                | ClientRequest::GetPrompt(_)
                | ClientRequest::ReadResource(_)
                | ClientRequest::Complete(_))
        );
        if !runs_plugin {
            return Ok(None);
        }
        budgets.take(caller, super::Budgeted::Calls, 1)
    }

    /// The refusal of a request that would reach a plugin whose scopes `caller` lacks.
    fn refuse_unscoped(
        &self,
        request: &TypedRequest,
        resolved: Option<&B::Target>,
        caller: &Principal,
    ) -> Option<Answer> {
        let missing = caller.missing(resolved?.required_scopes());
        if missing.is_empty() {
            return None;
        }
        let missing: Vec<String> = missing.into_iter().map(str::to_owned).collect();
        tracing::info!(id = %request.id, method = %request.method.as_str(), scopes = %missing.join(" "), %caller, "refused: the caller lacks a plugin's scopes");
        Some(Answer::forbidden(&request.id, missing))
    }

    /// Run one request to its reply, unless the client cancels it first. `place`, its
    /// caller's place among its running calls (for a request that runs a plugin), is given
    /// back when it ends, or by the call it started when that call outlives it as a task.
    #[allow(
        clippy::too_many_arguments,
        reason = "one request's parts, passed through once"
    )]
    async fn run(
        self: Arc<Self>,
        request: TypedRequest,
        resolved: Option<B::Target>,
        revision: Revision,
        headers: Option<MirrorHeaders>,
        call_id: Option<Arc<str>>,
        outbound: Outbound,
        cancellation: Arc<Cancellation>,
        caller: Principal,
        audit: Option<AuditStart>,
        place: Option<super::Held>,
    ) -> Option<Answer> {
        let meter = RequestMeter::start(&request.method);
        let slot = audit
            .as_ref()
            .map_or_else(Arc::default, |a| Arc::clone(&a.slot));
        let started = meter.started;
        let id = request.id.clone();
        let method = request.method.clone();
        let incoming = Incoming {
            request,
            resolved,
            headers,
            call_id,
            outbound,
            cancellation: Arc::clone(&cancellation),
            caller,
            audit: slot,
            place,
        };
        let handling = async {
            match revision {
                Revision::V2025 => self.v2025.handle(&self.core, incoming).await,
                Revision::V2026 => V2026.handle(&self.core, incoming).await,
            }
        };
        // A panic while handling one request (a host defect some input reached, in mcpbox or
        // a library under it) fails that request with an internal error, instead of ending
        // the task that would answer it and leaving the client waiting; the host serves on.
        // A combinator, not an `async` block: a block would hold `handling` twice, moved in
        // and wrapped, doubling the future every request keeps while it runs.
        let work = {
            use futures::FutureExt as _;
            std::panic::AssertUnwindSafe(handling)
                .catch_unwind()
                .map(|caught| match caught {
                    Ok(outcome) => outcome,
                    Err(panic) => Some(Answer::panicked(&id, method.as_str(), panic.as_ref())),
                })
        };
        tokio::pin!(work);
        let outcome = tokio::select! {
            outcome = &mut work => Some(outcome),
            () = cancellation.cancelled() => {
                // Let the call notice `cancelled()` and finish, then drop it, instance and all.
                let _ = tokio::time::timeout(CANCEL_GRACE, &mut work).await;
                None
            }
        };
        self.in_flight().remove(&id);
        if cancellation.is_cancelled() {
            tracing::debug!(%id, method = method.as_str(), "cancelled; no reply sent");
            meter.answered(None);
            if let Some(audit) = audit {
                audit.end(AuditOutcome::Cancelled);
            }
            return None;
        }
        let outcome = outcome.flatten();
        meter.answered(outcome.as_ref());
        if let Some(audit) = audit {
            // Every path that answers sets the outcome; this covers one that does not.
            audit.end(match &outcome {
                None => AuditOutcome::Cancelled,
                Some(answer) if answer.failed => AuditOutcome::Error(0),
                Some(_) => AuditOutcome::Ok,
            });
        }
        // The time a request spends inside mcpbox, from parsed to encoded (the benchmark
        // harness reads it with `--log mcpbox::timing=debug`).
        tracing::debug!(
            target: "mcpbox::timing",
            %id,
            method = %method.as_str(),
            elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "handled"
        );
        outcome
    }

    fn notification(&self, notification: &ClientNotification) {
        match notification {
            ClientNotification::Initialized => self.v2025.initialized(),
            ClientNotification::Cancelled(None) => {
                tracing::debug!("ignored a malformed notifications/cancelled");
            }
            ClientNotification::Cancelled(Some(p)) => {
                let id = match &p.request_id {
                    Value::String(s) => RequestId::String(s.clone()),
                    Value::Number(n) => RequestId::Number(n.clone()),
                    _ => return,
                };
                match self.in_flight().get(&id) {
                    Some(cancellation) => {
                        tracing::debug!(%id, reason = p.reason.as_deref().unwrap_or(""), "client cancelled a request");
                        cancellation.cancel();
                    }
                    None => tracing::debug!(%id, "ignored cancellation of a request not in flight"),
                }
            }
            ClientNotification::RootsListChanged => {
                tracing::debug!("the client's roots changed");
                self.v2025.peer().forget_roots();
            }
            ClientNotification::Other(method) => {
                tracing::debug!(method, "notification not acted on");
            }
        }
    }
}

#[cfg(test)]
mod tests;
