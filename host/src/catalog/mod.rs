//! The catalog: everything the loaded plugins offer, served to sessions. Three parts:
//!
//! - [`Catalog`] (`merged`): the immutable, merged view of one set of plugins, with each name
//!   owned by one plugin (a served name stays with its plugin), lists pre-serialised;
//! - [`PluginSet`] (`live`): the live set — the loaded plugins, the current catalog behind an
//!   atomic pointer, the swap, the diff of what changed, and the names refused;
//! - the [`crate::server::Backend`] implementation (`serve`): requests pinned to a catalog,
//!   dispatched to plugins.
//!
//! Around them: a loaded plugin and the names it claims ([`LoadedPlugin`], `loaded`),
//! preparing and checking plugins' lists once per version (`prepare`, `names`,
//! `validate`, with the schemas proven usable in earlier runs: `proofs`), the one place where WIT types become MCP
//! types (`convert`), a call's bridge to its client (`bridge`), the [`EventHub`] through
//! which plugins and the live set reach sessions and the reloader, the HTML status page
//! ([`status`]), and, when callers' credentials are brokered, linking an account when a call
//! needs one (`link`, through a [`Linker`]) and the host's own tools for the caller's links
//! (`host_tools`), and, when the operator enables them, the plugin-management tools (`managing`,
//! answered through a [`PluginInstaller`]).
//!
//! Uses: `credentials` (the link's plain data), `engine`, `kv`, `metrics`, `policy`, `principal`, `protocol`, `registry`, `server`,
//! `skills`.

mod at_most_once;
mod bridge;
mod convert;
mod cursor;
mod failure;
mod host_tools;
mod hub;
mod link;
mod live;
mod loaded;
mod managing;
mod merged;
mod names;
mod prepare;
mod proofs;
mod serve;
pub mod status;
mod uri_template;
mod validate;

pub use failure::{PluginFailure, Request};
pub use host_tools::{LINKED_ACCOUNTS, UNLINK_ACCOUNT};
pub use hub::{EventHub, RelistRequests};
pub use link::{LinkPrompt, LinkSummary, Linker, Linking, WaitOutcome};
pub use live::PluginSet;
pub use loaded::LoadedPlugin;
pub use managing::{
    INSTALL_PLUGIN, LIST_PLUGINS, MANAGE_TOOLS, PluginInstaller, REMOVE_PLUGIN, SEARCH_PLUGINS,
    VisiblePlugin,
};
pub use merged::{Catalog, Claim, Names, Refusal};
pub use proofs::keep_in as keep_schema_proofs_in;
pub use serve::Pinned;
pub use validate::warm_up as warm_up_validation;
