//! The 2025-11-25 revision (the handshake era), whole: its [`Handler`], [`V2025`], which keeps
//! the session's handshake state: `initialize` and its negotiation, the session-wide log level
//! and resource subscriptions, `ping`, and which request gets which error before and after
//! the handshake. Requests run with the session's [`Peer`], so a plugin's questions to the
//! client become real server-to-client requests. Forwarding the backend's events to such a
//! session is `events`'.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;
use serde_json::value::RawValue;

use super::answer::{Answer, answer};
use super::audit::AuditOutcome;
use super::context::{Client, Peer, RequestContext};
use super::dispatch::dispatch;
use super::handler::{Core, Handler, Incoming, to_raw};
use super::{Backend, MethodOutput, MethodResult, Offers, Revision};
use crate::protocol::ErrorObject;
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::mcp::InitializeParams;
use crate::protocol::mcp::LogLevel;
use crate::protocol::request::{ClientRequest, Method};
use crate::protocol::result::{ChangedList, LOG_MESSAGE, LoggingMessage};
use crate::protocol::v2025::{InitializeResult, negotiate_version};

/// What `initialize` settled.
#[derive(Debug)]
struct Negotiated {
    version: &'static str,
    /// What the server advertised to this client.
    offers: Offers,
}

/// The 2025-11-25 handler, with the state of its session's handshake.
#[derive(Default)]
pub struct V2025 {
    peer: Arc<Peer>,
    negotiated: OnceLock<Negotiated>,
    initialized: AtomicBool,
    subscriptions: Mutex<HashSet<String>>,
    /// Whether the host's startup problems were sent (once: after `notifications/initialized`,
    /// or at a `logging/setLevel` asking for warnings, whichever comes first).
    startup_reported: AtomicBool,
    /// Woken when the client sends `notifications/initialized`.
    initialized_signal: tokio::sync::Notify,
    /// The client's name, from `clientInfo` at `initialize` (for audit records).
    client: OnceLock<String>,
}

impl V2025 {
    pub(super) fn peer(&self) -> &Arc<Peer> {
        &self.peer
    }

    /// Whether `initialize` has been answered.
    pub fn is_initialized(&self) -> bool {
        self.negotiated.get().is_some()
    }

    /// The version agreed at `initialize`.
    pub fn protocol_version(&self) -> Option<&'static str> {
        self.negotiated.get().map(|n| n.version)
    }

    /// The client's name, when it gave one at `initialize`.
    pub(super) fn client_name(&self) -> Option<String> {
        self.client.get().cloned()
    }

    pub(super) fn initialized(&self) {
        if self.negotiated.get().is_none() {
            tracing::warn!("client sent notifications/initialized before initialize");
        }
        self.initialized.store(true, Ordering::Release);
        self.initialized_signal.notify_waiters();
    }

    /// Resolves once the client has sent `notifications/initialized`.
    pub(super) async fn until_initialized(&self) {
        loop {
            // Made before the check: a notification between the two still wakes it.
            let notified = self.initialized_signal.notified();
            if self.initialized.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    /// Whether the startup problems are to be sent now: the client takes warnings, and they
    /// were not sent before (then they count as sent).
    pub(super) fn take_startup_report(&self) -> bool {
        self.peer.wants_startup_warnings() && !self.startup_reported.swap(true, Ordering::AcqRel)
    }

    /// Whether this session was told that `list` may change (so it expects notifications).
    pub(super) fn announces_changes_to(&self, list: ChangedList) -> bool {
        self.negotiated.get().is_some_and(|n| {
            n.offers.list_changed
                && match list {
                    ChangedList::Tools => n.offers.tools,
                    ChangedList::Prompts => n.offers.prompts,
                    ChangedList::Resources => n.offers.resources,
                }
        })
    }

    /// Whether the client subscribed to the resource at `uri`.
    pub(super) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions().contains(uri)
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<B: Backend> Handler<B> for V2025 {
    /// Answer one 2025-11-25 request.
    async fn handle(&self, core: &Core<B>, incoming: Incoming<B::Target>) -> Option<Answer> {
        let Incoming {
            request,
            resolved,
            call_id,
            outbound,
            cancellation,
            caller,
            audit,
            place,
            headers: _,
        } = incoming;
        // The caller's place among its running calls is held until the request is answered.
        let _place = place;
        let ctx = RequestContext::new(
            Client::V2025(Arc::clone(self.peer())),
            outbound,
            request.meta.progress_token.clone(),
            cancellation,
            caller,
        )
        .with_call_id(call_id)
        .with_audit(audit)
        .with_session(core.id());
        let outcome = self
            .outcome(core, request.body, resolved, &request.method, &ctx)
            .await;
        ctx.finish();
        ctx.audit().outcome(AuditOutcome::of(&outcome));
        Some(answer(&request.id, outcome, Revision::V2025))
    }
}

impl V2025 {
    async fn outcome<B: Backend>(
        &self,
        core: &Core<B>,
        body: Result<ClientRequest, ErrorObject>,
        resolved: Option<B::Target>,
        method: &Method,
        ctx: &RequestContext,
    ) -> MethodResult {
        match method {
            Method::Initialize => return self.initialize(core, body),
            Method::Ping => return Ok(empty()),
            // `server/discover` is how 2026-07-28 clients probe: -32601 tells a dual-era
            // client that this conversation is in the handshake era.
            // The tasks extension is served to 2026-07-28 clients only.
            Method::Discover
            | Method::Listen
            | Method::GetTask
            | Method::UpdateTask
            | Method::CancelTask
            | Method::Unknown(_) => {
                return Err(ErrorObject::method_not_found(method.as_str()));
            }
            _ => {}
        }
        if !self.is_initialized() {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                format!(
                    "`{}` before `initialize`: the session must start with an `initialize` request",
                    method.as_str()
                ),
            ));
        }
        match body? {
            ClientRequest::SetLevel(p) => {
                self.peer().set_log_level(p.level);
                // A client that asks for logs learns what went wrong before it connected
                // (plugins skipped, names refused, manifests without a plugin), once.
                if self.take_startup_report() {
                    for problem in core.backend().startup_problems() {
                        let message = LoggingMessage {
                            level: LogLevel::Warning,
                            logger: "mcpbox",
                            data: &problem,
                        };
                        ctx.notify(LOG_MESSAGE, &message).await;
                    }
                }
                Ok(empty())
            }
            ClientRequest::Subscribe(p) => {
                self.subscriptions().insert(p.uri);
                Ok(empty())
            }
            ClientRequest::Unsubscribe(p) => {
                self.subscriptions().remove(&p.uri);
                Ok(empty())
            }
            other => dispatch(&**core.backend(), other, resolved, ctx.clone()).await,
        }
    }

    fn initialize<B: Backend>(
        &self,
        core: &Core<B>,
        body: Result<ClientRequest, ErrorObject>,
    ) -> MethodResult {
        let ClientRequest::Initialize(p) = body? else {
            return Err(ErrorObject::internal(
                "initialize decoded as another method",
            ));
        };
        let InitializeParams {
            protocol_version,
            capabilities,
            client_info,
        } = p;
        let version = negotiate_version(&protocol_version);
        let offers = core.backend().offers();
        if self.negotiated.set(Negotiated { version, offers }).is_err() {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                "the session is already initialized",
            ));
        }
        let capabilities = capabilities
            .as_deref()
            .and_then(|c| serde_json::from_str(c.get()).ok());
        self.peer()
            .set_capabilities(capabilities.unwrap_or(Value::Null));
        if let Some(info) = &client_info {
            let _ = self.client.set(info.name.clone());
        }
        let client = client_info
            .as_ref()
            .map_or("unknown client", |c| c.name.as_str());
        tracing::info!(
            client,
            requested = protocol_version,
            version,
            "session initialized"
        );
        to_raw(&InitializeResult::new(version, offers.capabilities()))
    }
}

/// `{}`.
fn empty() -> MethodOutput {
    RawValue::from_string("{}".to_owned())
        .unwrap_or_default()
        .into()
}
