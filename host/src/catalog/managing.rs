//! The host's plugin-management tools, as the catalog serves them (`[manage]` in the
//! configuration): search, install, remove and list plugins ([`MANAGE_TOOLS`]). Their names are
//! reserved whether or not they are served, as the other host tools' are: no plugin can claim
//! them. They are served beside the plugins' tools, gated by the operator's scope (a caller
//! without it neither lists nor calls them), and answered by a [`PluginInstaller`] (the
//! `manage` room), which the catalog knows only through this trait.
//!
//! What a caller may see of the loaded plugins ([`PluginSet::visible_to`]) is read here, from
//! the catalog's own lists and gates: a tool hidden from a caller by their scopes is never
//! named to them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::live::PluginSet;
use crate::principal::Principal;
use crate::server::{MethodResult, RequestContext};

/// Finds plugins in the operator's sources and among the tools the caller may see.
pub const SEARCH_PLUGINS: &str = "mcpbox_search_plugins";
/// Installs a plugin from the operator's sources, with the user's consent.
pub const INSTALL_PLUGIN: &str = "mcpbox_install_plugin";
/// Removes a plugin installed that way, with the user's consent.
pub const REMOVE_PLUGIN: &str = "mcpbox_remove_plugin";
/// Lists the plugins served, as the caller may see them.
pub const LIST_PLUGINS: &str = "mcpbox_list_plugins";
/// The management tools' names, which no plugin may claim.
pub const MANAGE_TOOLS: [&str; 4] = [SEARCH_PLUGINS, INSTALL_PLUGIN, REMOVE_PLUGIN, LIST_PLUGINS];

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The management tools' implementation (the `manage` room).
pub trait PluginInstaller: Send + Sync + std::fmt::Debug + 'static {
    /// The tools as `tools/list` shows them.
    fn items(&self) -> Vec<Arc<RawValue>>;
    /// The scopes a caller must hold to see and use them (empty: any caller, as over stdio).
    fn scopes(&self) -> Vec<String>;
    /// The directory it installs plugins into: a name nobody served goes to a plugin there
    /// only if no plugin elsewhere offers it.
    fn directory(&self) -> &Path;
    /// Call the tool `name` (one of [`MANAGE_TOOLS`]) for the caller of `ctx`.
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a RawValue,
        ctx: &'a RequestContext,
    ) -> Fut<'a, MethodResult>;
}

/// A loaded plugin as one caller may see it.
#[derive(Debug, Clone)]
pub struct VisiblePlugin {
    /// Its name.
    pub name: String,
    /// The file it was loaded from.
    pub file: PathBuf,
    /// Its title, if its manifest gives one.
    pub title: Option<String>,
    /// The tools the caller may see: (served name, description).
    pub tools: Vec<(String, String)>,
}

impl PluginSet {
    /// Serve the management tools of `installer` beside the plugins' (set once, at startup; a
    /// second call is ignored, with a warning).
    pub fn use_installer(&self, installer: Arc<dyn PluginInstaller>) {
        if self.installer.set(installer).is_err() {
            tracing::warn!("the plugin installer was set twice; the first is kept");
            return;
        }
        self.republish();
    }

    /// The loaded plugins the caller may see (a plugin whose scopes the caller lacks is left
    /// out), each with the tools the caller may see, in file-name order.
    pub fn visible_to(&self, caller: &Principal) -> Vec<VisiblePlugin> {
        let catalog = self.catalog();
        let mut plugins: Vec<VisiblePlugin> = catalog
            .plugins
            .iter()
            .filter(|code| caller.missing(&code.policy().scopes).is_empty())
            .map(|code| VisiblePlugin {
                name: code.name().to_string(),
                file: PathBuf::new(),
                title: code.policy().title.clone(),
                tools: Vec::new(),
            })
            .collect();
        for (file, plugin) in self.plugins().iter().map(|p| (p.file.clone(), p)) {
            if let Some(visible) = plugins
                .iter_mut()
                .find(|v| v.name == plugin.code.name().as_str())
            {
                visible.file = file;
            }
        }
        for (item, gate) in catalog.tools.items.iter().zip(&catalog.tools.gates) {
            if gate
                .as_deref()
                .is_some_and(|required| !caller.missing(required).is_empty())
            {
                continue;
            }
            #[derive(serde::Deserialize)]
            struct Tool {
                name: String,
                #[serde(default)]
                description: String,
            }
            let Ok(tool) = serde_json::from_str::<Tool>(item.get()) else {
                continue;
            };
            let Some(entry) = catalog.tools.index.get(&tool.name) else {
                continue; // one of the host's own
            };
            let Some(code) = catalog.plugins.get(entry.plugin) else {
                continue;
            };
            if let Some(visible) = plugins.iter_mut().find(|v| v.name == code.name().as_str()) {
                visible.tools.push((tool.name, tool.description));
            }
        }
        plugins
    }
}
