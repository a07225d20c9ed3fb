//! `mcpbox:multi-user/caller`: who is calling, for plugins built against the multi-user
//! world: the caller's id in this plugin (a keyed hash, [`Principal::id_in`], unless the
//! plugin's policy reveals callers' keys), how it was recognised, a name to show and its
//! scopes. Never a token: a principal holds none.
//!
//! The id needs the state store's key, so it is made on first use in a call
//! ([`CallerIdentity`], shared with the call's caller buckets) and never for a call that
//! does not ask: a component that imports the interface but never calls it (every Python
//! plugin does) costs nothing. When the key cannot be had the call fails (a trap naming the
//! store), rather than tell the plugin "nobody", which it could mistake for a shared identity.
//!
//! The capability owns its per-call state ([`CallerCtx`]); the store's state lends it to the
//! linker through one accessor.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::kv::StateService;
use crate::policy::PluginName;
use crate::principal::{Kind, Principal, Scopes};

/// Host-side bindings of the one interface, generated from `wit/deps/multi-user`.
#[allow(
    missing_docs,
    reason = "generated from the WIT contract, which carries the docs"
)]
pub(super) mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package mcpbox:host-imports;
            world caller-imports { import mcpbox:multi-user/caller@0.1.0; }
        ",
        path: "../wit",
        world: "mcpbox:host-imports/caller-imports",
        imports: { default: async | trappable },
    });
}

use bindings::mcpbox::multi_user::caller;

/// The caller of one call into one plugin, and its id there once made.
pub struct CallerIdentity {
    principal: Principal,
    plugin: PluginName,
    state: Arc<StateService>,
    id: tokio::sync::OnceCell<String>,
}

impl CallerIdentity {
    /// `principal` calling `plugin`; ids keyed by `state`'s key.
    pub fn new(principal: Principal, plugin: PluginName, state: Arc<StateService>) -> Arc<Self> {
        Arc::new(Self {
            principal,
            plugin,
            state,
            id: tokio::sync::OnceCell::new(),
        })
    }

    /// The caller's opaque id in the plugin, or why it cannot be made.
    pub async fn id(&self) -> Result<&str, String> {
        self.id
            .get_or_try_init(|| async {
                let key = self.state.host_key().await.map_err(|e| {
                    format!("callers' ids are keyed by the state store, which failed: {e}")
                })?;
                Ok::<_, String>(self.principal.id_in(&self.plugin, &key))
            })
            .await
            .map(String::as_str)
    }

    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }
}

/// What one call's `caller` import answers.
#[derive(Default)]
pub struct CallerCtx {
    identity: Option<Arc<CallerIdentity>>,
    /// Give the caller's key as its id.
    reveal: bool,
}

impl CallerCtx {
    /// `identity` (none: no caller, the host reads the plugin's lists); with `reveal`, the
    /// plugin is told the caller's key instead of an opaque id.
    pub fn new(identity: Option<Arc<CallerIdentity>>, reveal: bool) -> Self {
        Self { identity, reveal }
    }
}

/// `principal` as a plugin sees it.
pub fn describe(principal: &Principal, id: String) -> caller::Principal {
    let kind = match principal.kind() {
        Kind::Local => caller::CallerKind::Local,
        Kind::Token { .. } => caller::CallerKind::Token,
        Kind::OAuth { .. } => caller::CallerKind::Oauth,
    };
    let (scopes, all_scopes) = match principal.scopes() {
        Scopes::All => (Vec::new(), true),
        Scopes::Granted(held) => (held.iter().cloned().collect(), false),
    };
    caller::Principal {
        id,
        kind,
        name: principal.name().map(str::to_owned),
        scopes,
        all_scopes,
    }
}

impl caller::Host for CallerCtx {
    async fn current(&mut self) -> wasmtime::Result<Option<caller::Principal>> {
        let Some(identity) = self.identity.clone() else {
            return Ok(None);
        };
        let id = if self.reveal {
            identity.principal().key().to_owned()
        } else {
            identity
                .id()
                .await
                .map_err(|why| {
                    wasmtime::Error::msg(format!("mcpbox cannot tell the plugin who calls: {why}"))
                })?
                .to_owned()
        };
        Ok(Some(describe(identity.principal(), id)))
    }
}

/// The [`HasData`] marker under which the interface is linked.
pub(super) struct Caller;

impl HasData for Caller {
    type Data<'a> = &'a mut CallerCtx;
}

/// Link `mcpbox:multi-user/caller` for every plugin; `view` reaches the capability from the
/// store's state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> &mut CallerCtx,
) -> wasmtime::Result<()> {
    caller::add_to_linker::<T, Caller>(linker, view)
}
