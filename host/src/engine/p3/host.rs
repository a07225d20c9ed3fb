//! `mcpbox:plugin/host@0.3.0`, the 0.3 world's own imports, on the same per-call
//! [`HostInterfaceCtx`] as 0.1's: log, progress and notices are the same functions; requests to
//! the client are `async func`s, so a plugin may have several in flight (each borrows the
//! call's [`CallReach`](super::super::CallReach) only to start, and awaits outside the store).
//! There is no `cancelled`: a 0.3 call learns of cancellation from the component model (the
//! host drops its ends of the call's stream and future). A call may have
//! [`MAX_REQUESTS_IN_FLIGHT`] requests waiting on the client, each of at most
//! [`MAX_REQUEST_BYTES`]. `caller` is 0.1's
//! `mcpbox:multi-user/caller` under the 0.3 package's name, answered by the same
//! [`CallerCtx`].

use std::sync::Arc;

use wasmtime::component::{Accessor, HasSelf};

use super::super::HostRequest;
use super::super::bindings::mcpbox::plugin::host as v1;
use super::super::caller::CallerCtx;
use super::super::caller::bindings::mcpbox::multi_user::caller as v1_caller;
use super::super::host_interface::{HostInterfaceCtx, MAX_REQUEST_BYTES, MAX_REQUESTS_IN_FLIGHT};
use super::super::plugin::human_bytes;
use super::bindings::mcpbox::plugin::{caller, host};
use crate::engine::bindings::mcpbox::plugin::types::{ListKind, LogLevel};

impl host::Host for HostInterfaceCtx {
    async fn log(&mut self, level: LogLevel, message: String) {
        v1::Host::log(self, level, message).await;
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        v1::Host::progress(self, progress, total, message).await;
    }

    async fn notify_list_changed(&mut self, kind: ListKind) {
        v1::Host::notify_list_changed(self, kind).await;
    }

    async fn notify_resource_updated(&mut self, uri: String) {
        v1::Host::notify_resource_updated(self, uri).await;
    }
}

/// A request to the client: the call's host is borrowed from the store only to start it. A
/// call may have [`MAX_REQUESTS_IN_FLIGHT`] waiting at once, each of at most
/// [`MAX_REQUEST_BYTES`]; past either, the request fails at once (the plugin's `Err`), so a
/// plugin starting requests by the thousand, each with a large parameter, holds no more of
/// the host than one 0.2 call could.
async fn request<T: Send>(
    accessor: &Accessor<T, HasSelf<HostInterfaceCtx>>,
    kind: HostRequest,
    params: String,
) -> Result<String, String> {
    if params.len() > MAX_REQUEST_BYTES {
        return Err(format!(
            "a request to the client may carry at most {} (this one: {})",
            human_bytes(MAX_REQUEST_BYTES),
            human_bytes(params.len())
        ));
    }
    let (host, place) = accessor.with(|mut access| {
        let ctx = access.get();
        (Arc::clone(ctx.reach()), ctx.request_place())
    });
    let Some(_place) = place else {
        return Err(format!(
            "a call may have at most {MAX_REQUESTS_IN_FLIGHT} requests to the client waiting at once"
        ));
    };
    host.request(kind, params).await
}

impl<T: Send> host::HostWithStore<T> for HasSelf<HostInterfaceCtx> {
    async fn sample(accessor: &Accessor<T, Self>, request_: String) -> Result<String, String> {
        request(accessor, HostRequest::Sample, request_).await
    }

    async fn elicit(accessor: &Accessor<T, Self>, request_: String) -> Result<String, String> {
        request(accessor, HostRequest::Elicit, request_).await
    }

    async fn list_roots(accessor: &Accessor<T, Self>) -> Result<String, String> {
        request(accessor, HostRequest::ListRoots, "{}".to_owned()).await
    }
}

impl caller::Host for CallerCtx {
    async fn current(&mut self) -> wasmtime::Result<Option<caller::Principal>> {
        let principal = v1_caller::Host::current(self).await?;
        Ok(principal.map(|p| caller::Principal {
            id: p.id,
            kind: match p.kind {
                v1_caller::CallerKind::Local => caller::CallerKind::Local,
                v1_caller::CallerKind::Token => caller::CallerKind::Token,
                v1_caller::CallerKind::Oauth => caller::CallerKind::Oauth,
            },
            name: p.name,
            scopes: p.scopes,
            all_scopes: p.all_scopes,
        }))
    }
}
