//! The live plugin set: the loaded plugins by file, the current [`Catalog`] behind an atomic
//! pointer, and the swap that replaces it when a plugin is added, replaced or removed. Each
//! request pins the catalog it started with, so calls in flight finish on their version.
//!
//! A swap diffs the old and new catalogs: each list whose content changed is announced once,
//! and each name newly refused (a newcomer claiming a served name) is logged as a warning
//! naming both plugins and sent once to clients that asked for logs.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::hub::EventHub;
use super::link::{Linker, Linking};
use super::loaded::LoadedPlugin;
use super::merged::{Catalog, HostTools, Names, Refusal};
use crate::protocol::mcp::LogLevel;
use crate::server::{Audience, ChangedList, ServerEvent};

/// The live set of plugins: the current catalog, swapped atomically when plugins change.
pub struct PluginSet {
    current: ArcSwap<Catalog>,
    /// The loaded plugins by file (so in name order), from which catalogs are built.
    plugins: Mutex<BTreeMap<PathBuf, Arc<LoadedPlugin>>>,
    page_size: usize,
    pub(super) watching: bool,
    pub(super) hub: EventHub,
    /// What went wrong at startup, for clients that ask for logs.
    startup_problems: Mutex<Vec<String>>,
    /// What happened to the set lately (loads, reloads, removals, failures), oldest first.
    history: Mutex<std::collections::VecDeque<(std::time::SystemTime, String)>>,
    /// Where tool calls are recorded by a balancer's request id (`--call-id-header`); unset,
    /// calls are never recorded.
    pub(super) calls: std::sync::OnceLock<Arc<crate::kv::calls::CallLedger>>,
    /// How callers link accounts when a call needs one, and the host's own tools for their
    /// links; unset, neither (a call that needs a link returns the plugin's own answer).
    pub(super) linking: std::sync::OnceLock<Linking>,
    /// The management tools (`[manage]`); unset, none are served.
    pub(super) installer: std::sync::OnceLock<Arc<dyn super::managing::PluginInstaller>>,
}

/// How many events [`PluginSet::history`] keeps.
const HISTORY: usize = 50;

impl PluginSet {
    /// Serve `plugins`. `watching` says whether the set may change while sessions run, so
    /// sessions are offered every list kind with `listChanged`. Names are claimed in file-name
    /// order; refusals are logged.
    pub fn new(
        plugins: Vec<LoadedPlugin>,
        page_size: usize,
        watching: bool,
        hub: EventHub,
    ) -> Self {
        let plugins: BTreeMap<PathBuf, Arc<LoadedPlugin>> = plugins
            .into_iter()
            .map(|p| (p.file.clone(), Arc::new(p)))
            .collect();
        let loaded: Vec<_> = plugins.values().cloned().collect();
        let catalog = Catalog::build(
            &loaded,
            page_size,
            &Default::default(),
            HostTools::default(),
            None,
        );
        crate::metrics::metrics().set_plugins(catalog.plugin_count());
        let startup_problems = catalog.refusals().iter().map(ToString::to_string).collect();
        for refusal in catalog.refusals() {
            tracing::warn!("{refusal}");
        }
        Self {
            current: ArcSwap::from_pointee(catalog),
            plugins: Mutex::new(plugins),
            page_size,
            watching,
            hub,
            startup_problems: Mutex::new(startup_problems),
            history: Mutex::new(std::collections::VecDeque::with_capacity(HISTORY)),
            calls: std::sync::OnceLock::new(),
            linking: std::sync::OnceLock::new(),
            installer: std::sync::OnceLock::new(),
        }
    }

    /// Link callers' accounts through `linker` when a tool call needs one (waiting at most
    /// `link_wait` for a 2025-11-25 client's user; zero answers -32042 at once), and serve the
    /// host's own tools for their links (`mcpbox_linked_accounts`, `mcpbox_unlink_account`).
    /// Set once, at startup (a second call is ignored, with a warning).
    pub fn use_linker(&self, linker: Arc<dyn Linker>, link_wait: std::time::Duration) {
        if self.linking.set(Linking::new(linker, link_wait)).is_err() {
            tracing::warn!("the linker was set twice; the first is kept");
            return;
        }
        self.republish();
    }

    /// Build the catalog again from the same plugins (the host's tools changed), publish it
    /// and announce what changed.
    pub(super) fn republish(&self) {
        let (old, new) = self.publish(|_| {});
        self.announce_lists(&old, &new);
    }

    /// Record tool calls that carry a balancer's request id in `ledger`, so a retried request
    /// never runs its call twice (see `serve`). Set once, at startup.
    pub fn record_calls(&self, ledger: Arc<crate::kv::calls::CallLedger>) {
        let _ = self.calls.set(ledger);
    }

    /// Remember an event of the set (a plugin loaded, reloaded, removed, or failing to), for
    /// the status page; the last [`HISTORY`] are kept.
    pub fn record(&self, event: impl Into<String>) {
        let mut history = lock(&self.history);
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back((std::time::SystemTime::now(), event.into()));
    }

    /// The events remembered, oldest first.
    pub fn history(&self) -> Vec<(std::time::SystemTime, String)> {
        lock(&self.history).iter().cloned().collect()
    }

    /// Record a problem of startup (a plugin skipped, a manifest without a plugin) for clients
    /// that ask for logs.
    pub fn note_startup_problem(&self, problem: String) {
        self.record(problem.clone());
        self.startup_problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(problem);
    }

    /// What went wrong at startup.
    pub fn startup_problems(&self) -> Vec<String> {
        self.startup_problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// The plugin loaded from `file`, if any.
    pub fn get(&self, file: &Path) -> Option<Arc<LoadedPlugin>> {
        lock(&self.plugins).get(file).cloned()
    }

    /// The plugin named `name`, if any.
    pub fn find(&self, name: &str) -> Option<Arc<LoadedPlugin>> {
        lock(&self.plugins)
            .values()
            .find(|p| &**p.code.name() == name)
            .cloned()
    }

    /// The hub plugins and the reloader reach sessions through.
    pub fn hub(&self) -> &EventHub {
        &self.hub
    }

    /// Every loaded plugin, in file-name order.
    pub fn plugins(&self) -> Vec<Arc<LoadedPlugin>> {
        lock(&self.plugins).values().cloned().collect()
    }

    /// Put `plugin`, from `file`, in place of the plugin from `old` (the same plugin, moved to
    /// another plugin directory), in one swap, as [`PluginSet::update`] does: its names never
    /// go missing meanwhile.
    pub fn replace(&self, old: &Path, file: &Path, plugin: Arc<LoadedPlugin>) -> Names {
        self.change(file, |plugins| {
            plugins.remove(old);
            plugins.insert(file.to_owned(), plugin);
        })
    }

    /// Put `plugin` in place of whatever was loaded from its file (or remove what was loaded
    /// from `file`, for `None`), publish the new catalog, and announce the lists that changed
    /// and the names newly refused. Returns how many names the plugin from `file` now serves.
    /// Calls in flight keep the catalog they started with.
    pub fn update(&self, file: &Path, plugin: Option<Arc<LoadedPlugin>>) -> Names {
        self.change(file, |plugins| match plugin {
            Some(plugin) => {
                plugins.insert(file.to_owned(), plugin);
            }
            None => {
                plugins.remove(file);
            }
        })
    }

    /// Make `change`, publish, announce, and count the names of the plugin from `file`.
    fn change(
        &self,
        file: &Path,
        change: impl FnOnce(&mut BTreeMap<PathBuf, Arc<LoadedPlugin>>),
    ) -> Names {
        let (old, new) = self.publish(change);
        self.announce_lists(&old, &new);
        let known: HashSet<&Refusal> = old.refusals().iter().collect();
        for refusal in new.refusals().iter().filter(|r| !known.contains(r)) {
            tracing::warn!("{refusal}");
            self.hub.announce(ServerEvent::HostLog {
                level: LogLevel::Warning,
                message: refusal.to_string(),
            });
        }
        new.names_of(file)
    }

    /// Serve the plugins loaded at startup, added to the set at once (which `serve` creates
    /// empty, so that it answers health checks while they load): names go to plugins in
    /// file-name order, the managed directory's last (see `Catalog::build`), and each refusal is logged and kept for clients that ask for logs, as
    /// with [`PluginSet::new`].
    pub fn add_startup(&self, loaded: Vec<LoadedPlugin>) {
        let (old, new) = self.publish(|plugins| {
            for plugin in loaded {
                plugins.insert(plugin.file.clone(), Arc::new(plugin));
            }
        });
        self.announce_lists(&old, &new);
        let known: HashSet<&Refusal> = old.refusals().iter().collect();
        for refusal in new.refusals().iter().filter(|r| !known.contains(r)) {
            tracing::warn!("{refusal}");
            lock(&self.startup_problems).push(refusal.to_string());
        }
    }

    /// Change the plugins with `change`, build the catalog (names served before stay with
    /// their plugins) and publish it; returns the old and new catalogs.
    fn publish(
        &self,
        change: impl FnOnce(&mut BTreeMap<PathBuf, Arc<LoadedPlugin>>),
    ) -> (Arc<Catalog>, Arc<Catalog>) {
        let mut plugins = lock(&self.plugins);
        change(&mut plugins);
        let loaded: Vec<_> = plugins.values().cloned().collect();
        let previous = self.current.load();
        let managing = self.installer.get().map(|i| (i.items(), i.scopes()));
        let host_tools = HostTools {
            linking: self.linking.get().is_some(),
            managing: managing
                .as_ref()
                .map(|(items, scopes)| (items.as_slice(), scopes.as_slice())),
        };
        let new = Arc::new(Catalog::build(
            &loaded,
            self.page_size,
            previous.claims(),
            host_tools,
            self.installer.get().map(|i| i.directory()),
        ));
        crate::metrics::metrics().set_plugins(new.plugin_count());
        (self.current.swap(Arc::clone(&new)), new)
    }

    /// Announce each list whose content differs between `old` and `new`.
    fn announce_lists(&self, old: &Catalog, new: &Catalog) {
        for list in [
            ChangedList::Tools,
            ChangedList::Prompts,
            ChangedList::Resources,
        ] {
            if old.items(list) != new.items(list) {
                tracing::debug!(?list, "list changed");
                self.hub.announce(ServerEvent::ListChanged(list));
            }
        }
        // A skill file served before and after with other bytes: its subscribers are told.
        let before = old.skill_digests();
        for (uri, digest) in new.skill_digests() {
            if before.get(uri).is_some_and(|old| *old != digest) {
                self.hub.announce(ServerEvent::ResourceUpdated {
                    uri: uri.to_owned(),
                    audience: Audience::Everyone,
                });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
