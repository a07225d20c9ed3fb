//! One plugin that loaded ([`LoadedPlugin`]): its compiled code, the file it came from, its
//! lists as read and as checked for the catalog, its provenance and skills, the names it
//! claims, and what `inspect` and the load log show of it.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::merged::{Claim, Names};
use super::prepare::{Prepared, prepare};
use crate::engine::{PluginCode, PluginLists};
use crate::policy::{GrantSummary, NamingSummary};
use crate::skills::{Skill, Skills};

/// A plugin that loaded: its code, where it came from, and what it offers.
pub struct LoadedPlugin {
    /// Its compiled code.
    pub code: PluginCode,
    /// The file it was loaded from.
    pub file: PathBuf,
    /// Its lists, as read at load.
    pub lists: PluginLists,
    /// The digest of its component and manifest.
    pub digest: [u8; 32],
    /// Where it was pulled from and who signed it (empty for a plugin placed by hand under no
    /// signature policy).
    pub provenance: crate::registry::trust::Provenance,
    /// The skills its component carries (none unless set after it is made).
    pub skills: Arc<Skills>,
    /// Its lists, checked and ready for the catalog.
    pub(super) prepared: Prepared,
}

impl LoadedPlugin {
    /// A loaded plugin, its lists checked and prepared (invalid items are logged once, here).
    pub fn new(code: PluginCode, file: PathBuf, lists: PluginLists, digest: [u8; 32]) -> Self {
        let prepared = prepare(
            code.name(),
            &file,
            &lists,
            &code.policy().naming,
            &code.policy().tasks,
        );
        Self {
            code,
            file,
            lists,
            digest,
            provenance: Default::default(),
            skills: Arc::default(),
            prepared,
        }
    }

    /// Log that the plugin loaded: what it offers, how many of its names it serves and how
    /// many were refused, and what it was granted.
    pub fn log_loaded(&self, verb: &str, names: Names) {
        let lists = &self.lists;
        tracing::info!(
            plugin = &**self.code.name(),
            title = self.code.policy().title.as_deref().unwrap_or(""),
            file = %self.file.display(),
            tools = lists.tools.len(),
            prompts = lists.prompts.len(),
            resources = lists.resources.len(),
            templates = lists.templates.len(),
            skills = self.skills.skills.len(),
            skills_served = !self.code.policy().hide_skills,
            serves = names.served,
            refused = names.refused,
            grants = %GrantSummary(self.code.policy()),
            instances = %self.code.policy().instances.as_str(),
            naming = %NamingSummary(&self.code.policy().naming),
            "{verb} plugin"
        );
    }

    /// What the plugin offers and asks for, as `mcpbox inspect` shows it: its interfaces, its
    /// lists as clients see them, what was refused and why, and its grants and limits.
    pub fn describe(&self) -> serde_json::Value {
        let items = |jsons: Vec<&RawValue>| -> Vec<serde_json::Value> {
            jsons
                .into_iter()
                .filter_map(|j| serde_json::from_str(j.get()).ok())
                .collect()
        };
        let p = &self.prepared;
        let (imports, exports) = self.code.interfaces();
        let asks: std::collections::BTreeSet<&str> = imports
            .iter()
            .filter_map(|i| i.split_once('/').map(|(package, _)| package))
            .filter(|package| !package.starts_with("mcpbox:"))
            .collect();
        let limits = self.code.limits();
        serde_json::json!({
            "plugin": self.code.name().to_string(),
            "title": self.code.policy().title,
            "file": self.file.display().to_string(),
            "exports": exports,
            "imports": imports,
            "wasiPackagesImported": asks,
            "tools": items(p.tools.iter().map(|t| &*t.json).collect()),
            "prompts": items(p.prompts.iter().map(|t| &*t.json).collect()),
            "resources": items(p.resources.iter().map(|t| &*t.json).collect()),
            "resourceTemplates": items(p.templates.iter().map(|t| &*t.json).collect()),
            "refused": p.refused.iter().map(|(item, why)| serde_json::json!({"item": item, "reason": why})).collect::<Vec<_>>(),
            "naming": naming_json(&self.code.policy().naming),
            "unknownNames": p.unknown,
            "skills": self.skills.skills.iter().filter_map(|s| serde_json::from_str::<serde_json::Value>(s.entry.get()).ok()).collect::<Vec<_>>(),
            "skillsServed": !self.code.policy().hide_skills,
            "refusedSkills": self.skills.refused.iter().map(|(item, why)| serde_json::json!({"item": item, "reason": why})).collect::<Vec<_>>(),
            "grants": GrantSummary(self.code.policy()).to_string(),
            "instances": self.code.policy().instances.as_str(),
            "limits": {
                "fuel": limits.fuel,
                "timeoutMs": u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
                "memoryBytes": limits.memory_bytes,
                "resultBytes": limits.result_bytes,
                "taskTimeoutMs": u64::try_from(limits.task_timeout.as_millis()).unwrap_or(u64::MAX),
            },
        })
    }

    /// Items of this plugin that cannot be served, and why (invalid names or schemas).
    pub fn refused_items(&self) -> &[(String, String)] {
        &self.prepared.refused
    }

    /// Names in its allow- and deny-lists that it does not offer, said for people.
    pub fn unknown_names(&self) -> &[String] {
        &self.prepared.unknown
    }

    /// The names its tools and prompts are served as (with its prefix; hidden ones left out).
    pub fn served_names(&self) -> (Vec<&str>, Vec<&str>) {
        let p = &self.prepared;
        (
            p.tools.iter().map(|t| t.name.as_str()).collect(),
            p.prompts.iter().map(|x| x.name.as_str()).collect(),
        )
    }

    /// Every name the plugin offers (valid ones; invalid items were refused when prepared).
    pub(super) fn claims(&self) -> impl Iterator<Item = Claim> + '_ {
        let p = &self.prepared;
        p.tools
            .iter()
            .map(|t| Claim::Tool(t.name.clone()))
            .chain(p.prompts.iter().map(|x| Claim::Prompt(x.name.clone())))
            .chain(p.resources.iter().map(|r| Claim::Resource(r.uri.clone())))
            .chain(
                p.templates
                    .iter()
                    .map(|t| Claim::Template(t.uri_template.clone())),
            )
            .chain(
                self.served_skills()
                    .iter()
                    .flat_map(|s| &s.files)
                    .map(|f| Claim::Resource(f.uri.clone())),
            )
    }

    /// The skills it serves: those its component carries, unless its policy says `skills =
    /// false`.
    pub(super) fn served_skills(&self) -> &[Skill] {
        if self.code.policy().hide_skills {
            &[]
        } else {
            &self.skills.skills
        }
    }
}

/// A plugin's [`Naming`](crate::policy::Naming) as `inspect` shows it.
fn naming_json(naming: &crate::policy::Naming) -> serde_json::Value {
    let filter =
        |f: &crate::policy::ItemFilter| serde_json::json!({"allow": f.allow, "deny": f.deny});
    serde_json::json!({
        "prefix": naming.prefix,
        "tools": filter(&naming.tools),
        "prompts": filter(&naming.prompts),
        "resources": filter(&naming.resources),
    })
}
