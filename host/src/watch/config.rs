//! Hot reload of the configuration file: when it changes, it is read and checked again; the
//! plugin sections that changed are put into effect (those plugins reload, under the same
//! rules as a changed file), and every other option that changed is reported as needing a
//! restart. An invalid file changes nothing: the error is logged and sent to clients, and
//! the previous configuration stays in force.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify_debouncer_full::notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

use super::{WatchError, Watcher, is_change};
use crate::catalog::PluginSet;
use crate::config::ConfigFile;
use crate::policy::Sections;
use crate::protocol::mcp::LogLevel;
use crate::server::ServerEvent;

/// The running configuration watcher; dropping it stops watching.
pub struct ConfigWatcher {
    _task: tokio::task::JoinHandle<()>,
}

/// Watch `config` (as loaded at startup): put its plugin sections into `sections`, reload the
/// plugins whose sections changed through `plugins_watcher` (none with `--no-watch`: then a
/// restart is needed), and tell what else needs a restart.
pub fn watch_config(
    config: Arc<ConfigFile>,
    sections: Arc<Sections>,
    plugins_watcher: Option<Arc<Watcher>>,
    plugins: Arc<PluginSet>,
    debounce: Duration,
) -> Result<ConfigWatcher, WatchError> {
    let file = std::fs::canonicalize(config.path()).unwrap_or_else(|_| config.path().to_owned());
    let dir = file
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let (events_tx, mut events) = mpsc::unbounded_channel::<DebounceEventResult>();
    let mut debouncer = new_debouncer(debounce, None, move |result| {
        let _ = events_tx.send(result);
    })
    .map_err(|source| WatchError {
        dir: dir.clone(),
        source,
    })?;
    debouncer
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|source| WatchError {
            dir: dir.clone(),
            source,
        })?;
    tracing::info!(config = %file.display(), "watching the configuration file");
    let current = Mutex::new(config);
    let task = tokio::spawn(async move {
        let _debouncer = debouncer;
        while let Some(result) = events.recv().await {
            let Ok(batch) = result else { continue };
            let touched = batch
                .iter()
                .filter(|event| is_change(&event.kind))
                .flat_map(|event| event.paths.iter())
                .any(|path| *path == file);
            if !touched {
                continue;
            }
            let previous = Arc::clone(&current.lock().unwrap_or_else(PoisonError::into_inner));
            if let Some(next) = reread(&previous, &sections, plugins_watcher.as_deref(), &plugins) {
                *current.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
            }
        }
    });
    Ok(ConfigWatcher { _task: task })
}

/// Read the file again and put what can change into effect; the new configuration, or `None`
/// (it is invalid or gone: the previous one stays).
fn reread(
    previous: &ConfigFile,
    sections: &Sections,
    plugins_watcher: Option<&Watcher>,
    plugins: &PluginSet,
) -> Option<ConfigFile> {
    let path = previous.path();
    let next = match previous.reload() {
        Ok(next) => next,
        Err(error) => {
            let message = format!(
                "the configuration file changed but is invalid: {error}; the previous configuration stays in force"
            );
            tracing::error!("{message}");
            plugins.hub().announce(ServerEvent::HostLog {
                level: LogLevel::Error,
                message,
            });
            return None;
        }
    };
    for key in previous.changed_options(&next) {
        tracing::warn!(
            config = %path.display(),
            key,
            "`{key}` changed in the configuration file: restart mcpbox to apply it (the running value stays)"
        );
    }
    if previous.tokens_differ(&next) {
        tracing::warn!(
            config = %path.display(),
            "[tokens] changed in the configuration file: restart mcpbox to apply it (the running tokens stay)"
        );
    }
    if previous.providers_differ(&next) {
        tracing::warn!(
            config = %path.display(),
            "[providers] changed in the configuration file: restart mcpbox to apply it (the running providers stay)"
        );
    }
    if previous.budgets_differ(&next) {
        tracing::warn!(
            config = %path.display(),
            "[budgets] changed in the configuration file: restart mcpbox to apply it (the running budgets stay)"
        );
    }
    if previous.signatures_differ(&next) {
        tracing::warn!(
            config = %path.display(),
            "[signatures] changed in the configuration file: restart mcpbox to apply it (the running policy stays)"
        );
    }
    #[cfg(feature = "registry")]
    if previous.manage_differs(&next) {
        tracing::warn!(
            config = %path.display(),
            "[manage] changed in the configuration file: restart mcpbox to apply it (the running settings stay)"
        );
    }
    let changed = sections.replace(next.sections().clone());
    if !changed.is_empty() {
        match plugins_watcher {
            Some(watcher) => {
                tracing::info!(
                    config = %path.display(),
                    plugins = %changed.join(", "),
                    "plugin sections changed in the configuration file; reloading those plugins"
                );
                watcher.policy_changed(&changed);
            }
            None => tracing::warn!(
                config = %path.display(),
                plugins = %changed.join(", "),
                "plugin sections changed in the configuration file, but the plugin directory is not watched (--no-watch): restart mcpbox to apply them"
            ),
        }
    }
    Some(next)
}
