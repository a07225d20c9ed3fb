//! Forwarding the backend's events to one 2025-11-25 session's client: list changes for the
//! lists the session advertised as changing, resource updates for the URIs it subscribed to
//! that its caller may hear of ([`Audience`](super::Audience)), and the host's own error
//! messages at the session's log level. (2026-07-28 clients hear of changes on
//! `subscriptions/listen` streams instead.)

use tokio::sync::broadcast::error::RecvError;

use super::{Backend, ChangedList, Outbound, ServerEvent, Session};
use crate::principal::Principal;
use crate::protocol::jsonrpc::encode_notification;
use crate::protocol::mcp::LogLevel;
use crate::protocol::result::{LOG_MESSAGE, LoggingMessage, RESOURCE_UPDATED, ResourceUpdated};

/// Forward `session`'s share of the backend's events to `outbound` until the backend stops
/// publishing or the client goes away. Run it beside the session, on its own task. `caller`
/// is whose session it is: it hears only of the resource updates that caller may. Once the
/// client has sent `notifications/initialized`, it is told what went wrong at startup
/// (plugins skipped, names refused) as warnings, unless it set a level above warning.
pub async fn forward_events<B: Backend>(
    session: &Session<B>,
    caller: &Principal,
    outbound: Outbound,
) {
    let initialized = session.v2025.until_initialized();
    tokio::pin!(initialized);
    let Some(mut events) = session.backend().events() else {
        initialized.await;
        send_startup_report(session, &outbound).await;
        return;
    };
    let mut reported = false;
    loop {
        let received = tokio::select! {
            () = &mut initialized, if !reported => {
                reported = true;
                if !send_startup_report(session, &outbound).await {
                    return;
                }
                continue;
            }
            received = events.recv() => received,
        };
        let event = match received {
            Ok(event) => event,
            Err(RecvError::Lagged(missed)) => {
                // Too far behind to know exactly what changed: say that everything did.
                tracing::warn!(
                    missed,
                    "a session fell behind on catalog events; announcing every list as changed"
                );
                for list in [
                    ChangedList::Tools,
                    ChangedList::Prompts,
                    ChangedList::Resources,
                ] {
                    if !send(session, caller, &outbound, &ServerEvent::ListChanged(list)).await {
                        return;
                    }
                }
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if !send(session, caller, &outbound, &event).await {
            return;
        }
    }
}

/// Send the startup problems as warnings, once per session, if the client takes them; false
/// once the client is gone.
async fn send_startup_report<B: Backend>(session: &Session<B>, outbound: &Outbound) -> bool {
    if !session.v2025.take_startup_report() {
        return true;
    }
    for problem in session.backend().startup_problems() {
        let params = LoggingMessage {
            level: LogLevel::Warning,
            logger: "mcpbox",
            data: &problem,
        };
        let params = serde_json::value::to_raw_value(&params).ok();
        if outbound
            .send(encode_notification(LOG_MESSAGE, params.as_deref()))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// Send what `event` means for this session; false once the client is gone.
async fn send<B: Backend>(
    session: &Session<B>,
    caller: &Principal,
    outbound: &Outbound,
    event: &ServerEvent,
) -> bool {
    if !session.is_initialized() {
        return true;
    }
    let v2025 = &session.v2025;
    let (method, params) = match event {
        ServerEvent::ListChanged(list) => {
            if !v2025.announces_changes_to(*list) {
                return true;
            }
            (list.notification(), None)
        }
        ServerEvent::ResourceUpdated { uri, audience } => {
            if !audience.includes(caller) || !v2025.is_subscribed(uri) {
                return true;
            }
            let params = serde_json::value::to_raw_value(&ResourceUpdated { uri }).ok();
            (RESOURCE_UPDATED, params)
        }
        ServerEvent::HostLog { level, message } => {
            if !v2025.peer().wants_host_log(*level) {
                return true;
            }
            let params = LoggingMessage {
                level: *level,
                logger: "mcpbox",
                data: message,
            };
            (LOG_MESSAGE, serde_json::value::to_raw_value(&params).ok())
        }
    };
    outbound
        .send(encode_notification(method, params.as_deref()))
        .await
        .is_ok()
}
