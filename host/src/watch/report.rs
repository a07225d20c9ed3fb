//! One place that tells what happened to a plugin: [`report`] takes a [`LifecycleEvent`] (from
//! the startup load, a late load or a reload) and does each of the four things such an event
//! may need — the log line (`tracing`), the status page's record, the reload metrics, and the
//! message to clients that asked for logs — so the four never drift apart between the places
//! that load plugins.

use std::fmt::Display;
use std::path::Path;

use crate::catalog::{LoadedPlugin, Names, PluginSet};
use crate::protocol::mcp::LogLevel;
use crate::server::ServerEvent;

/// How a plugin came to serve.
#[derive(Debug, Clone, Copy)]
pub enum Arrival {
    /// Loaded by the startup load.
    Startup,
    /// Loaded at startup, once it finished listing after the rest.
    Late,
    /// A new file in the watched directory.
    Added,
    /// A changed file replaced the version that served.
    Replaced,
}

/// What is left when a plugin could not be loaded.
#[derive(Debug, Clone, Copy)]
pub enum Left {
    /// The previous version keeps serving (a failed reload).
    Previous,
    /// Nothing: the plugin is not loaded (until its file changes).
    Nothing,
    /// Nothing, and the startup load noted it (a late load that failed).
    SkippedAtStartup,
}

/// What happened to a plugin, or to the plugin set.
#[derive(Clone, Copy)]
pub enum LifecycleEvent<'a> {
    /// A plugin serves, with `names` of its names served and refused.
    Serving {
        /// The plugin.
        plugin: &'a LoadedPlugin,
        /// How it came.
        arrival: Arrival,
        /// Its names served and refused.
        names: Names,
    },
    /// The startup load is done.
    Started {
        /// Plugins loaded.
        loaded: usize,
        /// Files skipped.
        skipped: usize,
        /// Names refused.
        refused: usize,
    },
    /// A plugin's file is gone: it no longer serves.
    Removed {
        /// The plugin's name.
        name: &'a str,
        /// Its file.
        file: &'a Path,
    },
    /// A plugin's file could not be loaded.
    Failed {
        /// The file.
        file: &'a Path,
        /// Why.
        error: &'a dyn Display,
        /// What serves instead.
        left: Left,
    },
    /// A plugin that asked to be listed again failed to list what it offers.
    ListingFailed {
        /// The plugin's name.
        name: &'a str,
        /// Why.
        error: &'a dyn Display,
    },
}

/// Tell what happened, in each of the ways the event needs.
pub fn report(plugins: &PluginSet, event: LifecycleEvent<'_>) {
    let metrics = crate::metrics::metrics();
    match event {
        LifecycleEvent::Serving {
            plugin,
            arrival,
            names,
        } => {
            let name = plugin.code.name();
            let verb = match arrival {
                Arrival::Startup => "loaded",
                Arrival::Late => {
                    plugins.record(format!("loaded plugin `{name}` (late)"));
                    "loaded (late)"
                }
                Arrival::Added | Arrival::Replaced => {
                    let (metric, verb) = match arrival {
                        Arrival::Added => ("added", "added"),
                        _ => ("replaced", "reloaded"),
                    };
                    metrics.reload(metric);
                    plugins.record(format!(
                        "{verb} plugin `{name}` ({} names served, {} refused)",
                        names.served, names.refused
                    ));
                    verb
                }
            };
            plugin.log_loaded(verb, names);
        }
        LifecycleEvent::Started {
            loaded,
            skipped,
            refused,
        } => {
            plugins.record(format!(
                "started: {loaded} plugins loaded, {skipped} skipped, {refused} names refused"
            ));
            tracing::info!(
                loaded,
                skipped,
                refused_names = refused,
                "{loaded} loaded, {skipped} skipped, {refused} names refused"
            );
        }
        LifecycleEvent::Removed { name, file } => {
            metrics.reload("removed");
            plugins.record(format!("removed plugin `{name}`"));
            tracing::info!(plugin = name, file = %file.display(), "removed plugin");
        }
        LifecycleEvent::Failed { file, error, left } => {
            let message = match left {
                Left::Previous => format!(
                    "could not load plugin {}: {error}; the previous version keeps serving (it is tried again when the file changes)",
                    file.display()
                ),
                Left::Nothing => format!(
                    "could not load plugin {}: {error}; it is not loaded (it is tried again when the file changes)",
                    file.display()
                ),
                Left::SkippedAtStartup => format!(
                    "could not load plugin {}: {error}; it is not loaded",
                    file.display()
                ),
            };
            if let Left::SkippedAtStartup = left {
                tracing::error!(file = %file.display(), "skipped plugin: {error}");
                plugins.note_startup_problem(message.clone());
            } else {
                metrics.reload("failed");
                plugins.record(message.clone());
                tracing::error!(file = %file.display(), "{message}");
            }
            plugins.hub().announce(ServerEvent::HostLog {
                level: LogLevel::Error,
                message,
            });
        }
        LifecycleEvent::ListingFailed { name, error } => {
            let message = format!(
                "plugin `{name}` failed while listing what it offers: {error}; its previous lists stay"
            );
            tracing::warn!(plugin = name, "{message}");
            plugins.hub().announce(ServerEvent::HostLog {
                level: LogLevel::Warning,
                message,
            });
        }
    }
}
