//! `subscriptions/listen` (2026-07-28): a long-lived request whose stream carries the list
//! changes and resource updates it asked for (of those, the ones its caller may hear of:
//! [`Audience`](super::Audience)), each tagged with its subscription id (the listen request's
//! id). The acknowledgement, echoing what the server honours, comes first.
//! The stream ends when the client cancels it (closing the HTTP stream, or
//! `notifications/cancelled` on stdio) — then nothing more is sent — or when the session
//! closes, with the result that ends the subscription.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;

use super::answer::{Answer, Status, answer};
use super::context::{Cancellation, Outbound};
use super::handler::{Core, to_raw};
use super::{Backend, Budgeted, Revision, ServerEvent, Target as _};
use crate::principal::Principal;
use crate::protocol::RequestId;
use crate::protocol::jsonrpc::{encode_error, encode_notification};
use crate::protocol::mcp::{ListenFilter, ReadResourceParams};
use crate::protocol::request::ClientRequest;
use crate::protocol::result::ChangedList;
use crate::protocol::v2026::{self, ACKNOWLEDGED, subscription_meta};

/// The params of a tagged `notifications/resources/updated`.
#[derive(Serialize)]
struct TaggedUpdate<'a> {
    uri: &'a str,
    #[serde(rename = "_meta")]
    meta: serde_json::Value,
}

/// The params of a tagged list change.
#[derive(Serialize)]
struct Tagged {
    #[serde(rename = "_meta")]
    meta: serde_json::Value,
}

/// Serve one listen request until it is cancelled or the session closes.
pub(super) async fn listen<B: Backend>(
    core: &Core<B>,
    id: RequestId,
    asked: ListenFilter,
    outbound: Outbound,
    cancellation: Arc<Cancellation>,
    caller: &Principal,
) -> Option<Answer> {
    let _own = match core
        .settings
        .budgets
        .take(caller, Budgeted::ListenStreams, 1)
    {
        Ok(held) => held,
        Err(over) => {
            tracing::debug!(%id, "refused a listen stream: {over}");
            return Some(Answer::over_budget(&id, &over));
        }
    };
    let _stream = match core.settings.limits.listen_streams.take(1) {
        Ok(share) => share,
        Err(at_limit) => {
            tracing::debug!(%id, "refused a listen stream: {at_limit}");
            return Some(Answer::refused(
                encode_error(Some(&id), &at_limit.error()),
                Status::Unavailable,
            ));
        }
    };
    let offers = core.backend().offers();
    let honoured = ListenFilter {
        tools_list_changed: asked.tools_list_changed && offers.list_changed && offers.tools,
        prompts_list_changed: asked.prompts_list_changed && offers.list_changed && offers.prompts,
        resources_list_changed: asked.resources_list_changed
            && offers.list_changed
            && offers.resources,
        // Updates of a resource the caller may not read are not its to hear of.
        resource_subscriptions: if offers.list_changed && offers.resources {
            asked
                .resource_subscriptions
                .into_iter()
                .filter(|uri| {
                    let read = ClientRequest::ReadResource(ReadResourceParams { uri: uri.clone() });
                    caller
                        .missing(core.backend().resolve(&read).required_scopes())
                        .is_empty()
                })
                .collect()
        } else {
            Vec::new()
        },
    };
    // Subscribe before acknowledging, so nothing after the acknowledgement is missed.
    let mut events = core.backend().events();
    let ack = v2026::acknowledgement(&id, &honoured);
    let ack = serde_json::value::to_raw_value(&ack).ok();
    if outbound
        .send(encode_notification(ACKNOWLEDGED, ack.as_deref()))
        .await
        .is_err()
    {
        return None;
    }
    tracing::debug!(%id, filter = ?honoured, "listen stream open");
    let _open = crate::metrics::metrics().listen_stream();
    let closed = core.closed();
    tokio::pin!(closed);
    loop {
        let event = tokio::select! {
            () = cancellation.cancelled() => return None,
            () = &mut closed => {
                return Some(answer(&id, to_raw(&v2026::listen_closed(&id)), Revision::V2026));
            }
            event = next_event(&mut events) => event,
        };
        let sent = match event {
            Some(Ok(event)) => send(&id, &honoured, caller, &event, &outbound).await,
            // Too far behind to know exactly what changed: say that every list did.
            Some(Err(missed)) => {
                tracing::warn!(%id, missed, "a listen stream fell behind; announcing every list it follows as changed");
                let mut ok = true;
                for list in [
                    ChangedList::Tools,
                    ChangedList::Prompts,
                    ChangedList::Resources,
                ] {
                    let event = ServerEvent::ListChanged(list);
                    ok &= send(&id, &honoured, caller, &event, &outbound).await;
                }
                ok
            }
            // The backend publishes nothing (more): wait for the end.
            None => {
                tokio::select! {
                    () = cancellation.cancelled() => return None,
                    () = &mut closed => {
                        return Some(answer(&id, to_raw(&v2026::listen_closed(&id)), Revision::V2026));
                    }
                }
            }
        };
        if !sent {
            return None;
        }
    }
}

/// The next event, `Err(missed)` when the stream lagged, `None` when there are no more.
async fn next_event(
    events: &mut Option<tokio::sync::broadcast::Receiver<ServerEvent>>,
) -> Option<Result<ServerEvent, u64>> {
    let receiver = events.as_mut()?;
    match receiver.recv().await {
        Ok(event) => Some(Ok(event)),
        Err(RecvError::Lagged(missed)) => Some(Err(missed)),
        Err(RecvError::Closed) => {
            *events = None;
            None
        }
    }
}

/// Send `event` if the subscription asked for it and its `caller` may hear of it; false once
/// the client is gone or has fallen a whole queue behind.
async fn send(
    id: &RequestId,
    filter: &ListenFilter,
    caller: &Principal,
    event: &ServerEvent,
    outbound: &Outbound,
) -> bool {
    let meta = subscription_meta(id);
    let message = match event {
        ServerEvent::ListChanged(list) => {
            let wanted = match list {
                ChangedList::Tools => filter.tools_list_changed,
                ChangedList::Prompts => filter.prompts_list_changed,
                ChangedList::Resources => filter.resources_list_changed,
            };
            if !wanted {
                return true;
            }
            let params = serde_json::value::to_raw_value(&Tagged { meta }).ok();
            encode_notification(list.notification(), params.as_deref())
        }
        ServerEvent::ResourceUpdated { uri, audience } => {
            if !audience.includes(caller) || !filter.resource_subscriptions.iter().any(|u| u == uri)
            {
                return true;
            }
            let params = serde_json::value::to_raw_value(&TaggedUpdate { uri, meta }).ok();
            encode_notification(crate::protocol::result::RESOURCE_UPDATED, params.as_deref())
        }
        // Host messages and logs never travel on a listen stream.
        ServerEvent::HostLog { .. } => return true,
    };
    // A client that does not read its stream is dropped once its queue is full, rather than
    // have the host hold an ever-growing backlog for it (it can listen again).
    match outbound.try_send(message) {
        Ok(()) => true,
        Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
            tracing::info!(%id, "dropped a listen stream whose client is not reading it");
            false
        }
        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_a_whole_queue_behind_is_dropped() {
        let (outbound, mut queue) = tokio::sync::mpsc::channel(2);
        let id = RequestId::Number(1.into());
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let event = ServerEvent::ListChanged(ChangedList::Tools);
        let caller = Principal::local();
        assert!(send(&id, &filter, &caller, &event, &outbound).await);
        assert!(send(&id, &filter, &caller, &event, &outbound).await);
        // Full: the stream is given up rather than waited on.
        assert!(!send(&id, &filter, &caller, &event, &outbound).await);
        // Read again, it would pass.
        let _ = queue.recv().await;
        assert!(send(&id, &filter, &caller, &event, &outbound).await);
    }

    #[tokio::test]
    async fn a_callers_update_reaches_that_callers_streams_alone() {
        use super::super::Audience;
        use crate::principal::Scopes;
        let (outbound, mut queue) = tokio::sync::mpsc::channel(4);
        let id = RequestId::Number(1.into());
        let filter = ListenFilter {
            resource_subscriptions: vec!["memory://graph".to_owned()],
            ..ListenFilter::default()
        };
        let (alice, bob) = (
            Principal::token("alice", Scopes::All),
            Principal::token("bob", Scopes::All),
        );
        let update = |audience| ServerEvent::ResourceUpdated {
            uri: "memory://graph".to_owned(),
            audience,
        };
        let alices = update(Audience::caller(&alice));
        assert!(send(&id, &filter, &bob, &alices, &outbound).await);
        assert!(queue.try_recv().is_err(), "bob heard of alice's update");
        assert!(send(&id, &filter, &alice, &alices, &outbound).await);
        assert!(queue.try_recv().is_ok());
        let everyones = update(Audience::Everyone);
        assert!(send(&id, &filter, &bob, &everyones, &outbound).await);
        assert!(queue.try_recv().is_ok());
    }
}
