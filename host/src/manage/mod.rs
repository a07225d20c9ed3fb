//! Managed installs (`[manage]`): plugins found by the model, approved by the user, never
//! granted more than approved. Off by default. When the operator enables it, mcpbox serves four
//! tools of its own (names reserved by the catalog, gated by the operator's scope over HTTP):
//! search, install, remove and list plugins ([`Installs`], a [`PluginInstaller`]).
//!
//! An install resolves the reference (which must be in the operator's sources) to a digest,
//! checks the signature policy, reads the grants the author attached to the artifact (`push
//! --manifest`), caps them by the ceiling (`grants`), narrows them by the arguments (never
//! widens), and asks the user with form elicitation (`consent`). Only an explicit accept
//! installs; the reference is resolved again first, and if the digest or the grant set differ
//! from what the user saw, nothing is installed and the user is asked again. The plugin lands
//! in the managed directory with its lock entry and the manifest of exactly the grants
//! approved; the directory is one of the host's plugin directories, watched, so the plugin
//! loads live and every client hears `list_changed`. Removal asks the same way. Each step is
//! an audit record (`manage/…`). A folder is approved as its own path (one a link leads
//! elsewhere is removed from the offer); should a link replace it later, the loader refuses
//! the plugin (`watch::load`, which knows the managed directory through `Trust`).
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
mod search;
pub mod settings;
mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use self::consent::Answer;
use self::grants::{Capped, Offer};
pub use self::settings::{Ceiling, ManageSettings, PreApprove};
use crate::catalog::{
    INSTALL_PLUGIN, LIST_PLUGINS, PluginInstaller, PluginSet, REMOVE_PLUGIN, SEARCH_PLUGINS,
};
use crate::registry::install::Resolved;
use crate::registry::lock::Signed;
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

/// What the caller's arguments to an install are.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallArguments {
    reference: String,
    name: Option<String>,
    grants: Option<Vec<String>>,
}

/// An offer and what it was made from.
struct Prepared {
    offer: Offer,
    resolved: Resolved,
    signed: Option<Signed>,
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

    /// Resolve `reference`, check its signature, cap what it asks for, narrow by `keep`.
    async fn prepare(
        &self,
        reference: &str,
        name: &str,
        keep: Option<&[String]>,
    ) -> Result<Prepared, String> {
        let resolved = self
            .registry
            .resolve(reference)
            .await
            .map_err(|e| e.to_string())?;
        let signed = self
            .registry
            .check_signature(self.trust.as_ref(), name, &resolved)
            .await
            .map_err(|e| e.to_string())?;
        let mut capped = grants::cap(
            resolved.plugin_manifest.as_deref().unwrap_or_default(),
            &self.settings.ceiling,
        )
        .map_err(|e| e.to_string())?;
        without_links(&mut capped);
        // What would be written must be a manifest the host loads.
        let file = self.settings.directory.join(format!("{name}.toml"));
        crate::policy::parse_manifest(
            &file,
            &grants::manifest_text(&capped),
            crate::policy::Limits::default(),
        )
        .map_err(|e| format!("its grants do not make a manifest mcpbox can load: {e}"))?;
        let offer = Offer {
            name: name.to_owned(),
            reference: reference.to_owned(),
            digest: resolved.digest.clone(),
            signer: signed.as_ref().map(|s| (s.signer.clone(), s.key.clone())),
            capped,
            ignored: Vec::new(),
            left_out: Vec::new(),
            replaces: crate::registry::install::installed(&self.settings.directory)
                .ok()
                .and_then(|installed| installed.get(name).map(|e| e.digest.clone())),
        }
        .narrow(keep);
        Ok(Prepared {
            offer,
            resolved,
            signed,
        })
    }

    async fn install(&self, arguments: &RawValue, ctx: &RequestContext) -> MethodResult {
        let args: InstallArguments = match serde_json::from_str(arguments.get()) {
            Ok(args) => args,
            Err(e) => return failed(&format!("invalid arguments for `{INSTALL_PLUGIN}`: {e}")),
        };
        let (reference, name) = match self.check_reference(&args) {
            Ok(checked) => checked,
            Err(why) => return failed(&why),
        };
        if let Some(grants) = &args.grants
            && grants.len() > tools::MAX_GRANT_IDS
        {
            return failed(&format!("at most {} grant ids", tools::MAX_GRANT_IDS));
        }
        if let Some(served) = self.plugins.find(&name)
            && served.file.parent() != Some(self.settings.directory.as_path())
        {
            return failed(&format!(
                "a plugin named `{name}` is already served (placed by the operator, not installed by mcpbox): install under another name"
            ));
        }
        let keep = args.grants.as_deref();
        let prepared = match self.prepare(&reference, &name, keep).await {
            Ok(prepared) => prepared,
            Err(why) => {
                self.record(ctx, "manage/refused", &name, &reference, false);
                return failed(&format!(
                    "refused {reference} before asking the user: {why}; nothing was installed"
                ));
            }
        };
        self.record(ctx, "manage/resolved", &name, &at(&prepared.offer), true);
        if !ctx.can_fill_forms() {
            if self.settings.pre_approve == PreApprove::Signed && prepared.signed.is_some() {
                self.record(
                    ctx,
                    "manage/pre-approved",
                    &name,
                    &at(&prepared.offer),
                    true,
                );
                let approved = prepared.offer.capped.clone();
                return self.write(ctx, &prepared, approved).await;
            }
            self.record(ctx, "manage/refused", &name, &at(&prepared.offer), false);
            return failed(
                "this client cannot show the user a form (it declared no form-mode elicitation), and mcpbox installs a plugin only with the user's consent: nothing was installed. Use a client that supports elicitation, or ask the operator to install it",
            );
        }
        self.with_consent(ctx, &reference, keep, prepared).await
    }

    /// Ask the user about `prepared` and install what they approve, once the reference still
    /// resolves to what they saw; asked again (at most [`MAX_ASKS`] times) while it does not.
    async fn with_consent(
        &self,
        ctx: &RequestContext,
        reference: &str,
        keep: Option<&[String]>,
        mut prepared: Prepared,
    ) -> MethodResult {
        let name = prepared.offer.name.clone();
        let mut changed = false;
        for _ in 0..MAX_ASKS {
            let offer = &prepared.offer;
            let key = format!("mcpbox-install-{}", &offer.consent_id()[..16]);
            let (message, schema) = consent::install_question(offer, changed);
            self.record(ctx, "manage/ask", &name, &at(offer), true);
            match consent::ask(ctx, &key, message, schema, &offer.capped.grants).await {
                Answer::Asked => return asked(),
                Answer::Decline => return self.not_done(ctx, &name, offer, "decline"),
                Answer::Cancel => return self.not_done(ctx, &name, offer, "cancel"),
                Answer::Failed(why) => {
                    self.record(ctx, "manage/refused", &name, &at(offer), false);
                    return failed(&format!(
                        "could not ask the user ({why}): nothing was installed"
                    ));
                }
                Answer::Accept(approved) => {
                    self.record(ctx, "manage/accepted", &name, &at(offer), true);
                    // The consent is for this digest and these grants: resolve again.
                    let again = match self.prepare(reference, &name, keep).await {
                        Ok(again) => again,
                        Err(why) => {
                            self.record(ctx, "manage/refused", &name, reference, false);
                            return failed(&format!(
                                "refused {reference} after the user accepted: {why}; nothing was installed"
                            ));
                        }
                    };
                    if again.offer.consent_id() != offer.consent_id() {
                        self.record(ctx, "manage/changed", &name, &at(&again.offer), false);
                        prepared = again;
                        changed = true;
                        continue;
                    }
                    let approved = offer.approve(&approved);
                    return self.write(ctx, &prepared, approved).await;
                }
            }
        }
        failed(&format!(
            "{reference} kept changing while the user was asked: nothing was installed"
        ))
    }

    /// The reference (checked against the sources) and the plugin's name.
    fn check_reference(&self, args: &InstallArguments) -> Result<(String, String), String> {
        let reference = args.reference.trim();
        if reference.chars().count() > tools::MAX_REFERENCE_CHARS
            || reference
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(format!(
                "a reference is at most {} characters, without spaces",
                tools::MAX_REFERENCE_CHARS
            ));
        }
        let parsed = crate::registry::parse_reference(reference).map_err(|e| e.to_string())?;
        let repository = format!("{}/{}", parsed.registry(), parsed.repository());
        if !self.settings.allows(&repository) || !self.settings.allows(reference) {
            return Err(format!(
                "{} is not in the operator's sources ({}): nothing was installed",
                consent::shown(reference),
                self.settings.sources.join(", ")
            ));
        }
        let name = match &args.name {
            Some(name) => name.clone(),
            None => parsed
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        if !crate::scaffold::valid_name(&name) {
            return Err(format!(
                "`{}` is not a plugin name (lower-case letters, digits, `_` and `-`, starting with a letter): give `name`",
                consent::shown(&name)
            ));
        }
        self.ungoverned(&name)?;
        Ok((reference.to_owned(), name))
    }

    /// `Ok` unless the operator's configuration governs plugin `name` (a `[plugin.NAME]`
    /// section, or `--grant NAME:…`): its grants, not the user's approval, would apply.
    fn ungoverned(&self, name: &str) -> Result<(), String> {
        if self.sections.get(name).is_some() || !self.sections.grants().of(name).is_empty() {
            return Err(format!(
                "the operator's configuration governs a plugin named `{name}` ([plugin.{name}] or --grant {name}:…), so it would not run with what the user approves: install under another name"
            ));
        }
        Ok(())
    }

    fn not_done(
        &self,
        ctx: &RequestContext,
        name: &str,
        offer: &Offer,
        action: &str,
    ) -> MethodResult {
        self.record(ctx, &format!("manage/{action}"), name, &at(offer), true);
        let did = if action == "cancel" {
            "cancelled"
        } else {
            "declined"
        };
        done(
            &format!("The user {did}: nothing was installed."),
            &json!({"installed": false, "action": action}),
        )
    }

    /// Install `prepared` with `approved`, and wait until the host serves it.
    async fn write(
        &self,
        ctx: &RequestContext,
        prepared: &Prepared,
        approved: Capped,
    ) -> MethodResult {
        let name = &prepared.offer.name;
        let text = grants::manifest_text(&approved);
        let _writing = self.writing.lock().await;
        // The configuration may have been reloaded while the user was asked.
        if let Err(why) = self.ungoverned(name) {
            self.record(ctx, "manage/refused", name, &at(&prepared.offer), false);
            return failed(&format!("{why}; nothing was installed"));
        }
        let started = Instant::now();
        if let Err(e) = self
            .registry
            .install(
                &prepared.resolved,
                prepared.signed.clone(),
                &self.settings.directory,
                name,
                &text,
            )
            .await
        {
            self.record(ctx, "manage/install", name, &at(&prepared.offer), false);
            return failed(&format!("could not install {name}: {e}"));
        }
        let component = prepared.resolved.layer.digest.clone();
        let loaded = self
            .wait_for(|plugins| {
                plugins
                    .find(name)
                    .is_some_and(|p| format!("sha256:{}", p.code.component_digest()) == component)
            })
            .await;
        let took = started.elapsed();
        self.record(ctx, "manage/install", name, &at(&prepared.offer), loaded);
        let granted: Vec<String> = approved
            .grants
            .iter()
            .map(grants::Grant::describe)
            .collect();
        let tools: Vec<String> = self
            .plugins
            .visible_to(ctx.caller())
            .into_iter()
            .filter(|p| p.name == *name)
            .flat_map(|p| p.tools.into_iter().map(|(tool, _)| tool))
            .collect();
        tracing::info!(plugin = %name, digest = %prepared.offer.digest, ms = took.as_millis(), "installed a plugin with the user's consent");
        if !loaded {
            return failed(&format!(
                "installed {name} ({}), but the host has not loaded it within {}s: see the server's log",
                prepared.offer.digest,
                LOAD_WAIT.as_secs()
            ));
        }
        done(
            &format!(
                "Installed {name} ({}) with {}. Its tools: {}.",
                prepared.offer.digest,
                if granted.is_empty() {
                    "no grants".to_owned()
                } else {
                    granted.join("; ")
                },
                if tools.is_empty() {
                    "none you may see".to_owned()
                } else {
                    tools.join(", ")
                }
            ),
            &json!({
                "installed": true,
                "name": name,
                "digest": prepared.offer.digest,
                "grants": approved.grants.iter().map(grants::Grant::id).collect::<Vec<_>>(),
                "tools": tools,
            }),
        )
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
        let visible = self
            .plugins
            .visible_to(ctx.caller())
            .iter()
            .any(|p| p.name == name);
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
        } else if self.settings.pre_approve == PreApprove::None {
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

/// Remove the folders of `capped` that are not there or are reached through a symbolic link:
/// the ceiling is checked on paths as written, so a link inside an allowed folder must not
/// lead out of it.
fn without_links(capped: &mut Capped) {
    let mut removed = Vec::new();
    capped.grants.retain(|grant| {
        let grants::Grant::Folder { path, .. } = grant else {
            return true;
        };
        match std::fs::canonicalize(path) {
            Ok(real) if real == std::path::Path::new(path) => true,
            Ok(real) => {
                removed.push(format!(
                    "the folder {path}: a symbolic link leads it elsewhere ({})",
                    real.display()
                ));
                false
            }
            Err(e) => {
                removed.push(format!("the folder {path}: {e}"));
                false
            }
        }
    });
    capped.removed.extend(removed);
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
