//! Hot reload: watching the plugin directory and putting each change into effect.
//!
//! Depends on `catalog` (loading plugins, publishing catalogs), `engine` and `policy`; knows
//! nothing of the protocol. A change to `name.wasm` or `name.toml` reloads that plugin only:
//!
//! 1. file events are debounced, so a file is read once its writer has gone quiet (writers
//!    should still write a temporary file and rename it into place: a rename is atomic, and a
//!    half-written component never validates, so it is never published either way);
//! 2. the component and manifest are read once and hashed; an unchanged digest is skipped;
//! 3. the component is compiled on a blocking thread and linked, and its lists read, off the
//!    request path;
//! 4. a new immutable catalog is built (refusing name collisions as at startup) and published
//!    with one atomic swap; calls in flight finish on the catalog they started with, and a
//!    retired plugin version is freed when its last call ends;
//! 5. each list kind whose content changed is announced to the sessions.
//!
//! A plugin that fails to reload leaves its previous version serving; the failure is logged
//! with the file and reason and announced to clients as an error message. A plugin calling
//! `notify-list-changed` has its lists read again here, in the same order as file changes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_full::notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

use crate::catalog::{FileError, LoadedPlugin, PluginSet, load_source, read_source};
use crate::engine::Runtime;
use crate::policy::Limits;
use crate::protocol::mcp::LogLevel;
use crate::server::ServerEvent;

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the plugin directory {}: {source}", dir.display())]
pub struct WatchError {
    dir: PathBuf,
    #[source]
    source: notify_debouncer_full::notify::Error,
}

/// The running reloader; dropping it stops watching.
pub struct Watcher {
    _task: tokio::task::JoinHandle<()>,
}

/// What the reloader needs to load plugins.
pub struct Reloader {
    runtime: Runtime,
    dir: PathBuf,
    limits: Limits,
    plugins: Arc<PluginSet>,
}

impl Reloader {
    /// A reloader for `dir`, loading with `runtime` and default `limits` into `plugins`.
    pub fn new(runtime: Runtime, dir: PathBuf, limits: Limits, plugins: Arc<PluginSet>) -> Self {
        Self {
            runtime,
            dir,
            limits,
            plugins,
        }
    }

    /// Start watching, with `debounce` of quiet before a changed file is read.
    pub fn watch(self, debounce: Duration) -> Result<Watcher, WatchError> {
        let (files_tx, mut files) = mpsc::unbounded_channel::<DebounceEventResult>();
        let mut debouncer = new_debouncer(debounce, None, move |result| {
            let _ = files_tx.send(result);
        })
        .map_err(|source| WatchError {
            dir: self.dir.clone(),
            source,
        })?;
        debouncer
            .watch(&self.dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                dir: self.dir.clone(),
                source,
            })?;
        let (relist_tx, mut relists) = mpsc::unbounded_channel::<Arc<str>>();
        self.plugins.set_relist_channel(relist_tx);
        tracing::info!(dir = %self.dir.display(), debounce_ms = debounce.as_millis(), "watching the plugin directory");

        let task = tokio::spawn(async move {
            // The debouncer lives as long as this task.
            let _debouncer = debouncer;
            loop {
                tokio::select! {
                    Some(result) = files.recv() => match result {
                        Ok(events) => {
                            let names: BTreeSet<String> = events
                                .iter()
                                .flat_map(|event| event.paths.iter())
                                .filter_map(|path| self.plugin_name(path))
                                .collect();
                            for name in names {
                                self.reload(&name).await;
                            }
                        }
                        Err(errors) => {
                            for error in errors {
                                tracing::error!(dir = %self.dir.display(), "watching the plugin directory failed: {error}");
                            }
                        }
                    },
                    Some(name) = relists.recv() => self.relist(&name).await,
                    else => break,
                }
            }
        });
        Ok(Watcher { _task: task })
    }

    /// The plugin a changed path belongs to: `name` for `name.wasm` or `name.toml` in the
    /// directory (hidden and temporary files are ignored).
    fn plugin_name(&self, path: &Path) -> Option<String> {
        if path.parent() != Some(self.dir.as_path()) {
            return None;
        }
        let name = path.file_stem()?.to_str()?;
        let extension = path.extension()?.to_str()?;
        (!name.starts_with('.') && matches!(extension, "wasm" | "toml")).then(|| name.to_owned())
    }

    /// Reload the plugin `name` from its files: add, replace, or remove it.
    async fn reload(&self, name: &str) {
        let file = self.dir.join(format!("{name}.wasm"));
        let current = self.plugins.get(&file);
        let source = match read_source(&file).await {
            Ok(source) => source,
            Err(FileError::Read(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                if current.is_some() {
                    self.plugins.update(&file, None);
                    tracing::info!(plugin = name, file = %file.display(), "removed plugin");
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
                plugin.log_loaded(if current.is_some() {
                    "reloaded"
                } else {
                    "added"
                });
                self.plugins.update(&file, Some(plugin));
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
                let plugin = LoadedPlugin::new(
                    current.code.clone(),
                    current.file.clone(),
                    lists,
                    current.digest,
                );
                self.plugins.update(&current.file, Some(plugin));
                tracing::debug!(plugin = name, "read the plugin's lists again");
            }
            Err(error) => {
                let message = format!(
                    "plugin `{name}` failed while listing what it offers: {error}; its previous lists stay"
                );
                tracing::warn!(plugin = name, "{message}");
                self.plugins.notifier().announce(ServerEvent::HostLog {
                    level: LogLevel::Warning,
                    message,
                });
            }
        }
    }

    fn failed(&self, file: &Path, current: Option<&LoadedPlugin>, error: &FileError) {
        let outcome = if current.is_some() {
            "the previous version keeps serving"
        } else {
            "it is not loaded"
        };
        let message = format!(
            "could not load plugin {}: {error}; {outcome}",
            file.display()
        );
        tracing::error!(file = %file.display(), "{message}");
        self.plugins.notifier().announce(ServerEvent::HostLog {
            level: LogLevel::Error,
            message,
        });
    }
}
