//! Installing a plugin: the install tool's arguments checked (the reference among the
//! operator's sources, the name free of the operator's configuration and of any plugin mcpbox
//! installed that the caller may not see), the artifact resolved
//! and its requested grants capped and narrowed ([`Prepared`]), the user asked until the
//! reference still resolves to what they approved, and the approved plugin written to the
//! managed directory and waited for.

use std::time::Instant;

use serde_json::json;
use serde_json::value::RawValue;

use super::consent::{self, Answer};
use super::grants::{self, Capped, Offer};
use super::{Installs, LOAD_WAIT, MAX_ASKS, PreApprove, asked, at, done, failed, tools};
use crate::catalog::INSTALL_PLUGIN;
use crate::registry::install::Resolved;
use crate::registry::lock::Signed;
use crate::server::{MethodResult, RequestContext};

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

    pub(super) async fn install(&self, arguments: &RawValue, ctx: &RequestContext) -> MethodResult {
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
        if let Err(why) = self.replaceable(&name, ctx) {
            return failed(&why);
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

    /// `Ok` unless mcpbox installed a plugin `name` that the caller of `ctx` may not see (its
    /// scopes hide it, or it is not loaded): as for a removal, only a plugin the caller may
    /// see can be replaced.
    fn replaceable(&self, name: &str, ctx: &RequestContext) -> Result<(), String> {
        let installed = crate::registry::install::installed(&self.settings.directory)
            .map_err(|e| format!("could not read the managed directory: {e}"))?;
        if installed.contains_key(name) && !self.visible(name, ctx) {
            return Err(format!(
                "the name `{}` is taken by a plugin mcpbox installed that this caller may not see (only those they may see can be replaced here): install under another name; nothing was installed",
                consent::shown(name)
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
        // The configuration may have been reloaded, or another caller may have installed
        // under that name, while the user was asked.
        if let Err(why) = self.ungoverned(name) {
            self.record(ctx, "manage/refused", name, &at(&prepared.offer), false);
            return failed(&format!("{why}; nothing was installed"));
        }
        if let Err(why) = self.replaceable(name, ctx) {
            self.record(ctx, "manage/refused", name, &at(&prepared.offer), false);
            return failed(&why);
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
}

/// Remove the folders of `capped` that are not there or are reached through a symbolic link:
/// the ceiling is checked on paths as written, so a link inside an allowed folder must not
/// lead out of it.
pub(super) fn without_links(capped: &mut Capped) {
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
