//! Managed installs (`[manage]`): plugins found by the model, approved by the user, never
//! granted more than approved. Off by default. When the operator enables it, mcpbox serves four
//! tools of its own (names reserved by the catalog, gated by the operator's scope over HTTP):
//! search, install, remove and list plugins ([`Installs`], a [`PluginInstaller`]).
//!
//! An install resolves the reference (which must be in the operator's sources) to a digest,
//! checks the signature policy, reads the grants the author attached to the artifact (`push
//! --manifest`), caps them by the ceiling (`grants`), narrows them by the arguments (never
//! widens), and asks the user with form elicitation (`consent`): the flow is `install`. Only an
//! explicit accept installs; the reference is resolved again first, and if the digest or the grant set differ
//! from what the user saw, nothing is installed and the user is asked again. The plugin lands
//! in the managed directory with its lock entry and the manifest of exactly the grants
//! approved; the directory is one of the host's plugin directories, watched, so the plugin
//! loads live and every client hears `list_changed`. Removal asks the same way, always
//! (`pre-approve` covers installs only), and only a caller who may see the plugin removes or
//! replaces it. Each step is an audit record (`manage/…`). A folder is approved as its own
//! path (one a link leads elsewhere is removed from the offer); should a link replace it
//! later, the loader refuses the plugin (`watch::load`, which knows the managed directory
//! through `Trust`), and while it is loaded each call does (`engine::state`, for every
//! plugin's granted folders). A ceiling folder a plugin may write never holds a plugin
//! directory nor lies inside one (`settings`, and `serve` once links are resolved).
//!
//! Replicas share installs through the managed directory on shared storage: each replica
//! watches it and loads what any of them wrote (the lock entry and signature are checked
//! again by each; writers take the directory's lock). The storage must deliver file events to
//! every replica (a volume shared on one node does; NFS and SMB do not report another
//! machine's writes, so a replica there sees an install at its next restart).
//!
//! Uses: `catalog`, `policy`, `protocol`, `registry`, `scaffold`, `server`.

mod consent;
pub mod grants;
mod install;
mod search;
pub mod settings;
mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use self::consent::Answer;
use self::grants::Offer;
pub use self::settings::{Ceiling, ManageSettings, PreApprove};
use crate::catalog::{
    INSTALL_PLUGIN, LIST_PLUGINS, PluginInstaller, PluginSet, REMOVE_PLUGIN, SEARCH_PLUGINS,
};
use crate::registry::trust::TrustPolicy;
use crate::registry::{Registry, RegistryError};
use crate::server::{AuditRecord, AuditSink, MethodOutput, MethodResult, RequestContext};

/// How many times one install asks before giving up on an artifact that keeps changing.
const MAX_ASKS: usize = 3;
/// How long an install or removal waits for the host to load or unload the plugin.
const LOAD_WAIT: Duration = Duration::from_secs(30);

type Fut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The management tools: the settings, a registry client, the signature policy, the live
/// plugin set and the audit log.
pub struct Installs {
    settings: ManageSettings,
    registry: Registry,
    trust: Option<TrustPolicy>,
    plugins: Arc<PluginSet>,
    /// The configuration's `[plugin.NAME]` sections and the command line's grants: a plugin
    /// they name would be governed by them, not by what the user approved.
    sections: Arc<crate::policy::Sections>,
    audit: Option<Arc<dyn AuditSink>>,
    /// One install or removal at a time.
    writing: tokio::sync::Mutex<()>,
    /// The longest one search takes ([`search::MAX_SEARCH_TIME`]).
    search_time: Duration,
}

impl std::fmt::Debug for Installs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installs")
            .field("directory", &self.settings.directory)
            .field("sources", &self.settings.sources)
            .finish_non_exhaustive()
    }
}

/// Why the management tools could not start.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    /// The managed directory could not be made.
    #[error("[manage] directory {}: {error}", path.display())]
    Directory {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The registry client could not be set up.
    #[error("[manage]: {0}")]
    Registry(#[from] RegistryError),
}

impl Installs {
    /// The management tools for `settings`, checking signatures by `trust`, installing into
    /// `plugins`' managed directory (made if missing) no plugin that `sections` govern,
    /// recording to `audit`.
    pub fn new(
        settings: ManageSettings,
        trust: Option<TrustPolicy>,
        plugins: Arc<PluginSet>,
        sections: Arc<crate::policy::Sections>,
        audit: Option<Arc<dyn AuditSink>>,
        timeout: Duration,
    ) -> Result<Self, ManageError> {
        std::fs::create_dir_all(&settings.directory).map_err(|error| ManageError::Directory {
            path: settings.directory.clone(),
            error,
        })?;
        let registry = Registry::new(&settings.insecure_registries, timeout)?;
        Ok(Self {
            settings,
            registry,
            trust,
            plugins,
            sections,
            audit,
            writing: tokio::sync::Mutex::new(()),
            search_time: search::MAX_SEARCH_TIME,
        })
    }

    /// Record `method` (`manage/…`) for the caller of `ctx`.
    fn record(&self, ctx: &RequestContext, method: &str, plugin: &str, item: &str, ok: bool) {
        tracing::info!(caller = ctx.caller().key(), plugin, item, ok, "{method}");
        if let Some(audit) = &self.audit {
            audit.record(AuditRecord {
                time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                principal: ctx.caller().key().to_owned(),
                client: None,
                method: method.to_owned(),
                plugin: Some(plugin.to_owned()),
                item: Some(item.to_owned()),
                outcome: if ok { "ok" } else { "error" },
                code: None,
                duration_ms: 0.0,
                fuel: None,
                request_id: Value::Null,
                trace_id: None,
                cut: std::collections::BTreeMap::new(),
            });
        }
    }

    /// Whether the caller of `ctx` may see the loaded plugin `name` (it may remove or replace
    /// it only then).
    fn visible(&self, name: &str, ctx: &RequestContext) -> bool {
        self.plugins
            .visible_to(ctx.caller())
            .iter()
            .any(|p| p.name == name)
    }

    /// Wait (polling the live set) until `done` holds, at most [`LOAD_WAIT`].
    async fn wait_for(&self, done: impl Fn(&PluginSet) -> bool) -> bool {
        let deadline = Instant::now() + LOAD_WAIT;
        loop {
            if done(&self.plugins) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn remove(&self, arguments: &RawValue, ctx: &RequestContext) -> MethodResult {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Arguments {
            name: String,
        }
        let name = match serde_json::from_str::<Arguments>(arguments.get()) {
            Ok(args) => args.name,
            Err(e) => return failed(&format!("invalid arguments for `{REMOVE_PLUGIN}`: {e}")),
        };
        let dir = &self.settings.directory;
        let installed = match crate::registry::install::installed(dir) {
            Ok(installed) => installed,
            Err(e) => return failed(&format!("could not read the managed directory: {e}")),
        };
        let visible = self.visible(&name, ctx);
        let Some(entry) = installed.get(&name).filter(|_| visible) else {
            return failed(&format!(
                "no plugin `{}` was installed by mcpbox (only those can be removed here)",
                consent::shown(&name)
            ));
        };
        let item = format!("{}@{}", entry.reference, entry.digest);
        if ctx.can_fill_forms() {
            let key = format!(
                "mcpbox-remove-{name}-{}",
                entry.digest.get(7..23).unwrap_or_default()
            );
            let (message, schema) =
                consent::remove_question(&name, &entry.reference, &entry.digest);
            self.record(ctx, "manage/ask", &name, &item, true);
            match consent::ask(ctx, &key, message, schema, &[]).await {
                Answer::Asked => return asked(),
                Answer::Accept(_) => self.record(ctx, "manage/accepted", &name, &item, true),
                Answer::Decline | Answer::Cancel => {
                    self.record(ctx, "manage/declined", &name, &item, true);
                    return done(
                        &format!("The user did not confirm: {name} was not removed."),
                        &json!({"removed": false}),
                    );
                }
                Answer::Failed(why) => {
                    return failed(&format!(
                        "could not ask the user ({why}): nothing was removed"
                    ));
                }
            }
        } else {
            // `pre-approve` is for installs of signed artifacts: a removal is always asked.
            return failed(
                "this client cannot show the user a form (it declared no form-mode elicitation), and mcpbox removes a plugin only with the user's consent: nothing was removed",
            );
        }
        let _writing = self.writing.lock().await;
        if let Err(e) = crate::registry::install::uninstall(dir, &name) {
            self.record(ctx, "manage/remove", &name, &item, false);
            return failed(&format!("could not remove {name}: {e}"));
        }
        let gone = self.wait_for(|plugins| plugins.find(&name).is_none()).await;
        self.record(ctx, "manage/remove", &name, &item, gone);
        done(
            &format!("Removed {name}: its tools are no longer served."),
            &json!({"removed": true, "name": name}),
        )
    }

    fn list(&self, ctx: &RequestContext) -> MethodResult {
        let installed =
            crate::registry::install::installed(&self.settings.directory).unwrap_or_default();
        let plugins: Vec<Value> = self
            .plugins
            .visible_to(ctx.caller())
            .into_iter()
            .map(|p| {
                let managed = installed
                    .get(&p.name)
                    .filter(|_| p.file.parent() == Some(self.settings.directory.as_path()));
                let tools: Vec<&str> = p.tools.iter().map(|(t, _)| t.as_str()).collect();
                let mut entry =
                    json!({"name": p.name, "tools": tools, "managed": managed.is_some()});
                if let Some(title) = &p.title {
                    entry["title"] = json!(title);
                }
                if let Some(managed) = managed {
                    entry["reference"] = json!(managed.reference);
                    entry["digest"] = json!(managed.digest);
                    entry["signer"] = json!(managed.signed.as_ref().map(|s| &s.signer));
                }
                entry
            })
            .collect();
        let lines: Vec<String> = plugins
            .iter()
            .map(|p| {
                format!(
                    "- {}{}: {}",
                    p["name"].as_str().unwrap_or_default(),
                    p["reference"]
                        .as_str()
                        .map(|r| format!(" (installed from {r})"))
                        .unwrap_or_default(),
                    p["tools"]
                        .as_array()
                        .map(|t| t
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                )
            })
            .collect();
        done(
            &format!("Plugins served:\n{}", lines.join("\n")),
            &json!({"plugins": plugins}),
        )
    }
}

/// `reference@digest`, for records.
fn at(offer: &Offer) -> String {
    format!("{}@{}", offer.reference, offer.digest)
}

/// A result with `text` and `structured` content.
fn done(text: &str, structured: &Value) -> MethodResult {
    serde_json::value::to_raw_value(&json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    }))
    .map(MethodOutput::from)
    .map_err(|e| {
        crate::protocol::ErrorObject::internal(format!("could not encode the result: {e}"))
    })
}

/// A result with `isError: true`.
fn failed(text: &str) -> MethodResult {
    serde_json::value::to_raw_value(&json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    }))
    .map(MethodOutput::tool_error)
    .map_err(|e| {
        crate::protocol::ErrorObject::internal(format!("could not encode the result: {e}"))
    })
}

/// The result of a 2026-07-28 round that asked the client (replaced by `input_required`).
fn asked() -> MethodResult {
    failed("the user is being asked")
}

impl PluginInstaller for Installs {
    fn items(&self) -> Vec<Arc<RawValue>> {
        tools::items()
    }

    fn scopes(&self) -> Vec<String> {
        self.settings.scope.iter().cloned().collect()
    }

    fn directory(&self) -> &std::path::Path {
        &self.settings.directory
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a RawValue,
        ctx: &'a RequestContext,
    ) -> Fut<'a, MethodResult> {
        Box::pin(async move {
            match name {
                SEARCH_PLUGINS => search::search(self, arguments, ctx).await,
                INSTALL_PLUGIN => self.install(arguments, ctx).await,
                REMOVE_PLUGIN => self.remove(arguments, ctx).await,
                LIST_PLUGINS => self.list(ctx),
                _ => failed(&format!("unknown tool `{name}`")),
            }
        })
    }
}

#[cfg(test)]
mod tests;
