//! `mcpbox:multi-user/caller`: who is calling, for plugins built against the multi-user
//! world. The call's answer is made before the plugin runs ([`describe`]): the caller's id in
//! this plugin (a keyed hash, [`Principal::id_in`], unless the plugin's policy reveals callers'
//! keys), how it was recognised, a name to show and its scopes. Never a token: a principal
//! holds none.
//!
//! The capability owns its per-call state ([`CallerCtx`]); the store's state lends it to the
//! linker through one accessor. Depends on `principal` and the generated bindings only.

use wasmtime::component::{HasData, Linker};

use crate::principal::{Kind, Principal, Scopes};

/// Host-side bindings of the one interface, generated from `wit/deps/multi-user`.
#[allow(
    missing_docs,
    reason = "generated from the WIT contract, which carries the docs"
)]
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package mcpbox:host-imports;
            world caller-imports { import mcpbox:multi-user/caller@0.1.0; }
        ",
        path: "../wit",
        world: "mcpbox:host-imports/caller-imports",
    });
}

use bindings::mcpbox::multi_user::caller;

/// The import's name prefix, for telling whether a component imports it.
pub const INTERFACE: &str = "mcpbox:multi-user/caller@";

/// What one call's `caller` import answers.
#[derive(Default)]
pub struct CallerCtx {
    current: Option<caller::Principal>,
}

impl CallerCtx {
    /// No caller: the host reads the plugin's lists.
    pub fn none() -> Self {
        Self::default()
    }

    /// `principal`, known to the plugin as `id`.
    pub fn of(principal: &Principal, id: String) -> Self {
        Self {
            current: Some(describe(principal, id)),
        }
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
    fn current(&mut self) -> Option<caller::Principal> {
        self.current.clone()
    }
}

/// The [`HasData`] marker under which the interface is linked.
struct Caller;

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
