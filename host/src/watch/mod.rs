//! The plugin lifecycle: loading the plugin directory, watching it, putting each change into
//! effect, and telling what happened. It is the one room that reads plugin files.
//!
//! The startup load is the reloader's first pass ([`Reloader::first_pass`]): every `*.wasm`
//! file is read with its manifest, checked against the lock file and the signature policy,
//! compiled in parallel off the async executor, linked and listed (`load`); a plugin that
//! fails is reported and skipped, the others serve. If watching is on, the directory is
//! watched from before that pass ([`DirectoryWatch`], beside it), and then the same reloader
//! puts the changes into effect ([`Reloader::watch`]), those made during the pass among them.
//!
//! There may be several plugin directories (`--plugins A --plugins B`), each watched: a
//! plugin's name is the first directory's that holds `NAME.wasm`; a plugin of the same name in
//! a later one is skipped with an error naming both files, and takes the name when the
//! first's file goes.
//!
//! Lock entries and signatures are checked on every load (`registry::trust`); of the protocol
//! and the sessions it knows only the events it announces (`server::ServerEvent`, a log
//! level). A change to `name.wasm`, `name.toml` or `name.wasm.sig` reloads that plugin
//! only:
//!
//! 1. file events are debounced, so a file is read once its writer has gone quiet (writers
//!    should still write a temporary file and rename it into place: a rename is atomic, and a
//!    half-written component never validates, so it is never published either way);
//! 2. the component and manifest are read once and hashed (a component whose file is known by
//!    sight, from an earlier read in this run or another, is not read: `known_files`); an unchanged
//!    digest is skipped;
//! 3. the component is compiled on a blocking thread and linked, and its lists read, off the
//!    request path, on a task per plugin (a plugin slow to load holds up no other; reloads of
//!    one plugin never overlap);
//! 4. a new immutable catalog is built (refusing name collisions as at startup) and published
//!    with one atomic swap; calls in flight finish on the catalog they started with, and a
//!    retired plugin version is freed when its last call ends;
//! 5. each list kind whose content changed is announced to the sessions.
//!
//! Only changes count: events of opening, reading or closing a file unwritten (the host's own
//! reads among them) and metadata changes are ignored, and a plugin whose files' identities
//! (`files::Identity`, of the component, its manifest and its signature) are what they were
//! when it was last handled is not read again. So an idle directory costs nothing.
//!
//! A plugin that fails to reload leaves its previous version serving; the failure is logged
//! with the file and reason and announced to clients as an error message, once: the failed
//! file is not tried again until it changes. A plugin calling `notify-list-changed` has its
//! lists read again here, in the same order as file changes.
//!
//! The configuration file is watched too ([`watch_config`]): a changed `[plugin.NAME]` section
//! reloads that plugin; other changed options are reported as needing a restart.
//!
//! Every lifecycle event, here and in the startup load, is told through [`report`].
//!
//! Uses: `catalog`, `config`, `engine`, `files`, `metrics`, `policy`, `protocol`, `registry`,
//! `server`, `skills`.

mod config;
mod known_files;
mod load;
mod report;

pub use config::{ConfigWatcher, watch_config};
pub use known_files::keep_in as keep_known_files_in;
pub use load::{
    DirectoryError, FileError, LoadedDirectory, PluginSource, Prefetched, STARTUP_LISTING_WAIT,
    load_directory, load_prefetched, load_source, policy_of, prefetch, read_source, shadowed,
};
pub use report::{Arrival, Left, LifecycleEvent, report};

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify_debouncer_full::notify::RecursiveMode;
use notify_debouncer_full::notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

use crate::catalog::{LoadedPlugin, PluginSet, RelistRequests};
use crate::engine::Runtime;
use crate::files::Identity;
use crate::policy::{Limits, Sections};
use crate::registry::trust::{Trust, signature_file};

/// The pause after relisting, during which further requests gather (and are coalesced): a
/// plugin calling `notify-list-changed` in a loop costs at most one relist per pause.
const RELIST_PAUSE: Duration = Duration::from_millis(50);

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the directory {}: {source}", dir.display())]
pub struct WatchError {
    dir: PathBuf,
    #[source]
    source: notify_debouncer_full::notify::Error,
}

/// The plugin directory watched, its changes (debounced by `debounce`) queued until a reloader
/// takes them ([`Reloader::watch`]). The host starts it on a blocking thread beside the
/// startup load, so that making the watcher (a thread, an inotify instance) is not on the way
/// to serving and a change made while the directory loads is put into effect after.
pub struct DirectoryWatch {
    debouncer: notify_debouncer_full::Debouncer<
        notify_debouncer_full::notify::RecommendedWatcher,
        notify_debouncer_full::RecommendedCache,
    >,
    files: mpsc::UnboundedReceiver<DebounceEventResult>,
}

impl DirectoryWatch {
    /// Start watching each of `dirs` (not their subdirectories).
    pub fn start(dirs: &[PathBuf], debounce: Duration) -> Result<Self, WatchError> {
        let error = |dir: &Path| {
            let dir = dir.to_owned();
            move |source| WatchError { dir, source }
        };
        let first = dirs.first().map_or(Path::new("."), PathBuf::as_path);
        let (files_tx, files) = mpsc::unbounded_channel::<DebounceEventResult>();
        let mut debouncer = new_debouncer(debounce, None, move |result| {
            let _ = files_tx.send(result);
        })
        .map_err(error(first))?;
        for dir in dirs {
            debouncer
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(error(dir))?;
            tracing::info!(dir = %dir.display(), debounce_ms = debounce.as_millis(), "watching the plugin directory");
        }
        Ok(Self { debouncer, files })
    }
}

/// The running reloader; dropping it stops watching.
pub struct Watcher {
    _task: tokio::task::JoinHandle<()>,
    reloader: Arc<Reloader>,
}

impl Watcher {
    /// The policy (configuration sections) of the plugins `names` changed: reload each, even
    /// though its files did not change.
    pub fn policy_changed(&self, names: &[String]) {
        for name in names {
            self.reloader.seen().remove(name);
            self.reloader.schedule(name.clone());
        }
    }
}

/// What the reloader needs to load plugins.
pub struct Reloader {
    runtime: Runtime,
    /// The plugin directories, in order: a name is the first one's that has it.
    dirs: Vec<PathBuf>,
    limits: Limits,
    sections: Arc<Sections>,
    trust: Trust,
    plugins: Arc<PluginSet>,
    relists: RelistRequests,
    /// How long the first pass waits for plugins to list.
    startup_wait: std::time::Duration,
    /// Plugins being reloaded, and whether another change arrived meanwhile.
    busy: Mutex<HashMap<String, bool>>,
    /// What each plugin's files looked like when last handled (loaded or failed).
    seen: Mutex<HashMap<String, Fingerprint>>,
}

/// The identities (`files::Identity`) of a plugin's component, manifest and detached
/// signature: when they are what they were, the files are not read again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    wasm: Option<Identity>,
    manifest: Option<Identity>,
    signature: Option<Identity>,
}

impl Fingerprint {
    async fn of(wasm: &Path) -> Self {
        async fn stat(path: &Path) -> Option<Identity> {
            let meta = tokio::fs::metadata(path).await.ok()?;
            Some(Identity::of(&meta))
        }
        Self {
            wasm: stat(wasm).await,
            manifest: stat(&crate::policy::manifest_path(wasm)).await,
            signature: stat(&signature_file(wasm)).await,
        }
    }
}

/// Whether a file event is a change (not an open, a read, a close without writing, or a
/// metadata change such as an access time).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Other => false,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
    }
}

impl Reloader {
    /// A reloader for `dirs` (in order: a plugin's name is the first one's that holds it),
    /// loading with `runtime`, default `limits` and the configuration's
    /// plugin `sections`, checking each component with `trust`, into `plugins`, and reading a
    /// plugin's lists again when it asks (`relists`, from the plugins' event hub).
    /// Wait `wait` (not [`STARTUP_LISTING_WAIT`]) at startup for plugins to list.
    pub fn with_startup_wait(mut self, wait: std::time::Duration) -> Self {
        self.startup_wait = wait;
        self
    }

    /// A reloader of the plugins in `dirs` into `plugins`, loading with `runtime` under
    /// `limits`, `sections` and `trust`; asked to list again through `relists`.
    pub fn new(
        runtime: Runtime,
        dirs: Vec<PathBuf>,
        limits: Limits,
        sections: Arc<Sections>,
        trust: Trust,
        plugins: Arc<PluginSet>,
        relists: RelistRequests,
    ) -> Self {
        Self {
            runtime,
            dirs,
            limits,
            sections,
            trust,
            plugins,
            relists,
            startup_wait: STARTUP_LISTING_WAIT,
            busy: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Fingerprint>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The first pass: load every plugin in the directory into the (empty) plugin set, in
    /// parallel, and report each. Plugins still listing after [`STARTUP_LISTING_WAIT`] are
    /// added when they are done, by tasks of their own; each holds what `hold` gave it (the
    /// HTTP readiness check's guard) until its plugin is served and reported, or has failed,
    /// and drops it in the same task right after: ready never comes before served.
    /// `prefetched` is the directory's reading, started by [`prefetch`] with this reloader's
    /// directory, sections and trust.
    pub async fn first_pass<G: Send + 'static>(
        &self,
        prefetched: Prefetched,
        mut hold: impl FnMut() -> G,
    ) -> Result<(), DirectoryError> {
        let loaded =
            load_prefetched(&self.runtime, prefetched, self.limits, self.startup_wait).await?;
        let plugins = &self.plugins;
        plugins.add_startup(loaded.plugins);
        for problem in loaded.problems {
            plugins.note_startup_problem(problem);
        }
        let catalog = plugins.catalog();
        for plugin in plugins.plugins() {
            let names = catalog.names_of(&plugin.file);
            let (plugin, arrival) = (&plugin, Arrival::Startup);
            report(
                plugins,
                LifecycleEvent::Serving {
                    plugin,
                    arrival,
                    names,
                },
            );
        }
        report(
            plugins,
            LifecycleEvent::Started {
                loaded: catalog.plugin_count(),
                skipped: loaded.skipped,
                refused: catalog.refusals().len(),
            },
        );
        // Plugins that were still listing: served as soon as they are done.
        for late in loaded.late {
            let plugins = Arc::clone(plugins);
            let held = hold();
            tokio::spawn(async move {
                match late.await {
                    Ok((file, Ok(plugin))) => {
                        let plugin = Arc::new(plugin);
                        let names = plugins.update(&file, Some(Arc::clone(&plugin)));
                        let arrival = Arrival::Late;
                        report(
                            &plugins,
                            LifecycleEvent::Serving {
                                plugin: &plugin,
                                arrival,
                                names,
                            },
                        );
                    }
                    Ok((file, Err(error))) => {
                        let left = Left::SkippedAtStartup;
                        let (file, error) = (&file, &error);
                        report(&plugins, LifecycleEvent::Failed { file, error, left });
                    }
                    Err(e) => tracing::error!("a plugin load task failed: {e}"),
                }
                drop(held);
            });
        }
        Ok(())
    }

    /// Put the directory's changes into effect from now on, those `watch` saw since it was
    /// started among them.
    pub fn watch(mut self, watch: DirectoryWatch) -> Watcher {
        let DirectoryWatch {
            debouncer,
            mut files,
        } = watch;
        let mut relists = std::mem::replace(&mut self.relists, mpsc::unbounded_channel().1);
        let this = Arc::new(self);
        let reloader = Arc::clone(&this);

        let task = tokio::spawn(async move {
            // The debouncer lives as long as this task.
            let _debouncer = debouncer;
            loop {
                tokio::select! {
                    Some(result) = files.recv() => match result {
                        Ok(events) => {
                            let names: BTreeSet<String> = events
                                .iter()
                                .filter(|event| is_change(&event.kind))
                                .flat_map(|event| event.paths.iter())
                                .filter_map(|path| this.plugin_name(path))
                                .collect();
                            for name in names {
                                this.schedule(name);
                            }
                        }
                        Err(errors) => {
                            for error in errors {
                                tracing::error!(dirs = ?this.dirs, "watching a plugin directory failed: {error}");
                            }
                        }
                    },
                    Some(name) = relists.recv() => {
                        // Coalesce: a plugin asking many times while one relist runs is
                        // relisted once more, not once per request.
                        let mut names = BTreeSet::from([name]);
                        while let Ok(more) = relists.try_recv() {
                            names.insert(more);
                        }
                        for name in names {
                            this.plugins.hub().relist_taken(&name);
                            this.relist(&name).await;
                        }
                        tokio::time::sleep(RELIST_PAUSE).await;
                    }
                    else => break,
                }
            }
        });
        Watcher {
            _task: task,
            reloader,
        }
    }

    /// Reload `name` on a task of its own, so a plugin that is slow to load never holds up
    /// another's reload. Reloads of one plugin never overlap: a change that arrives while one
    /// runs is handled when it ends.
    fn schedule(self: &Arc<Self>, name: String) {
        {
            let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(again) = busy.get_mut(&name) {
                *again = true;
                return;
            }
            busy.insert(name.clone(), false);
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                this.reload(&name).await;
                let mut busy = this.busy.lock().unwrap_or_else(PoisonError::into_inner);
                if busy.get(&name) == Some(&true) {
                    busy.insert(name.clone(), false);
                    continue;
                }
                busy.remove(&name);
                return;
            }
        });
    }

    /// The plugin a changed path belongs to: `name` for `name.wasm`, `name.toml` or
    /// `name.wasm.sig` in one of the directories (hidden and temporary files are ignored; so
    /// is the lock file, which is read whenever a component is).
    fn plugin_name(&self, path: &Path) -> Option<String> {
        if !self
            .dirs
            .iter()
            .any(|dir| path.parent() == Some(dir.as_path()))
        {
            return None;
        }
        let file = path.file_name()?.to_str()?;
        let name = file
            .strip_suffix(".wasm.sig")
            .or_else(|| file.strip_suffix(".wasm"))
            .or_else(|| file.strip_suffix(".toml"))?;
        (!name.is_empty() && !name.starts_with('.')).then(|| name.to_owned())
    }

    /// The file of the plugin `name`: in the first directory that holds `name.wasm` (or, when
    /// none does, where the first directory would hold it). Those of later directories are
    /// warned about: not loaded.
    fn file_of(&self, name: &str) -> PathBuf {
        let mut files = self
            .dirs
            .iter()
            .map(|dir| dir.join(format!("{name}.wasm")))
            .filter(|file| file.is_file());
        let Some(first) = files.next() else {
            let dir = self.dirs.first().map_or(Path::new("."), PathBuf::as_path);
            return dir.join(format!("{name}.wasm"));
        };
        for later in files {
            tracing::warn!(file = %later.display(), "{}", shadowed(name, &later, &first));
        }
        first
    }

    /// Reload the plugin `name` from its files: add, replace, or remove it (its file may move
    /// to another directory: a later directory's takes the name when the earlier one's goes).
    async fn reload(&self, name: &str) {
        let file = self.file_of(name);
        let current = self.plugins.find(name);
        let fingerprint = Fingerprint::of(&file).await;
        if self.seen().get(name) == Some(&fingerprint) {
            tracing::trace!(
                plugin = name,
                "files unchanged since last handled; not read"
            );
            return;
        }
        self.seen().insert(name.to_owned(), fingerprint);
        let source = match read_source(&file, &self.sections, &self.trust).await {
            Ok(source) => source,
            Err(FileError::Read(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                self.seen().remove(name);
                if let Some(current) = current {
                    self.plugins.update(&current.file, None);
                    let file = &current.file;
                    report(&self.plugins, LifecycleEvent::Removed { name, file });
                }
                return;
            }
            Err(error) => return self.failed(&file, current.as_deref(), &error),
        };
        if current.as_ref().is_some_and(|p| p.digest == source.digest) {
            tracing::debug!(plugin = name, "unchanged; not reloaded");
            return;
        }
        match load_source(&self.runtime, source, self.limits).await {
            Ok(plugin) => {
                // What loading touched of its compiled code (reading the lists, type checks)
                // is given back ([`crate::pages`]); its calls fault back what they run. (The
                // startup load leaves that to `host`, which gives back every plugin's pages
                // with its own once ready, off the start's path.)
                if let Some(released) = plugin.code.give_back_pages() {
                    tracing::debug!(
                        plugin = %plugin.code.name(),
                        resident_kib = released.resident >> 10,
                        "gave back the compiled code's pages loading touched"
                    );
                }
                let arrival = if current.is_some() {
                    Arrival::Replaced
                } else {
                    Arrival::Added
                };
                let plugin = Arc::new(plugin);
                // From another directory than the version it replaces: that one's file goes.
                let moved = current.as_ref().map(|c| &c.file).filter(|f| **f != file);
                let names = match moved {
                    Some(old) => self.plugins.replace(old, &file, Arc::clone(&plugin)),
                    None => self.plugins.update(&file, Some(Arc::clone(&plugin))),
                };
                report(
                    &self.plugins,
                    LifecycleEvent::Serving {
                        plugin: &plugin,
                        arrival,
                        names,
                    },
                );
            }
            Err(error) => self.failed(&file, current.as_deref(), &error),
        }
    }

    /// Read the lists of the plugin `name` again, at its own request.
    async fn relist(&self, name: &str) {
        let Some(current) = self.plugins.find(name) else {
            return;
        };
        match current.code.read_lists().await {
            Ok(lists) => {
                let mut plugin = LoadedPlugin::new(
                    current.code.clone(),
                    current.file.clone(),
                    lists,
                    current.digest,
                );
                plugin.provenance = current.provenance.clone();
                // Same component, same skills.
                plugin.skills = Arc::clone(&current.skills);
                self.plugins.update(&current.file, Some(Arc::new(plugin)));
                tracing::debug!(plugin = name, "read the plugin's lists again");
            }
            Err(error) => report(
                &self.plugins,
                LifecycleEvent::ListingFailed {
                    name,
                    error: &error,
                },
            ),
        }
    }

    fn failed(&self, file: &Path, current: Option<&LoadedPlugin>, error: &FileError) {
        let left = if current.is_some() {
            Left::Previous
        } else {
            Left::Nothing
        };
        report(&self.plugins, LifecycleEvent::Failed { file, error, left });
    }
}
