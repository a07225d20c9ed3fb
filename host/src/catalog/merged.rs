//! The immutable catalog: the merged view of everything the loaded plugins offer, built in one
//! pass from their prepared lists, with each name (tool, prompt, resource URI, template) owned
//! by exactly one plugin. Lists are stored pre-serialised, so a page is a concatenation of
//! JSON snippets and `*/list` never runs plugin code.
//!
//! **Who owns a name.** A name the previous catalog served stays with its plugin as long as
//! that plugin still offers it, whatever the file names sort as: a plugin dropped into the
//! directory can never take a live name. Names nobody served go to the first plugin in
//! file-name order that offers them (so startup is deterministic), the plugins outside the
//! managed directory (`[manage]`) before those in it: an installed plugin never takes, at a
//! restart, a name an operator's plugin offers. Other claims are refused and reported by the
//! live set ([`super::PluginSet`]).
//!
//! The host's own tools ([`super::host_tools`], [`super::managing`]) come first in the tool
//! list when they are served, and their names are never a plugin's, served or not; nor is any
//! tool name in the host's namespace (beginning `mcpbox_`, in any case), whatever a plugin's
//! prefix, so no plugin's tool passes for one of the host's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::value::RawValue;

use super::cursor;
use super::loaded::LoadedPlugin;
use super::uri_template::UriTemplate;
use super::validate::ToolSchemas;
use crate::engine::PluginCode;
use crate::policy::PluginName;
use crate::principal::{Principal, Scopes};
use crate::protocol::ErrorObject;
use crate::server::{ChangedList, ListKind, MethodOutput, MethodResult, Offers};
use crate::skills::{Directory, SkillFile, Skills};

/// A name in one of the catalog's namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Claim {
    /// A tool's name.
    Tool(String),
    /// A prompt's name.
    Prompt(String),
    /// A resource's URI.
    Resource(String),
    /// A resource template's URI template.
    Template(String),
}

impl std::fmt::Display for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tool(name) => write!(f, "tool `{name}`"),
            Self::Prompt(name) => write!(f, "prompt `{name}`"),
            Self::Resource(uri) => write!(f, "resource `{uri}`"),
            Self::Template(uri) => write!(f, "resource template `{uri}`"),
        }
    }
}

/// A name a plugin offers that another plugin serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// The name.
    pub claim: Claim,
    /// The plugin refused.
    pub plugin: PluginName,
    /// The plugin that serves it.
    pub owner: PluginName,
}

/// The owner a refusal names for a name reserved for the host's own tools.
const HOST: &str = "mcpbox";

/// Whether `claim` is the name of one of the host's own tools.
fn host_tool(claim: &Claim) -> bool {
    matches!(claim, Claim::Tool(name) if super::host_tools::RESERVED.contains(&name.as_str())
        || super::managing::MANAGE_TOOLS.contains(&name.as_str()))
}

/// Whether `claim` is a name reserved for the host's own tools: one of theirs, or any tool
/// name in the host's namespace (`host_tools::RESERVED_PREFIX`).
fn reserved(claim: &Claim) -> bool {
    host_tool(claim)
        || matches!(claim, Claim::Tool(name) if super::host_tools::in_host_namespace(name))
}

/// Who owns each name `offered` (each plugin's file and names, in file-name order): the
/// plugin that served it in `previous`, as long as it still offers it; else the first
/// plugin that offers it, those outside the `managed` directory before those in it (so
/// after a restart an installed plugin never takes a name an operator's plugin offers).
fn owners(
    offered: &[(&Path, Vec<Claim>)],
    previous: &HashMap<Claim, PathBuf>,
    managed: Option<&Path>,
) -> HashMap<Claim, usize> {
    let mut owners: HashMap<Claim, usize> = HashMap::new();
    for (i, (file, claims)) in offered.iter().enumerate() {
        for claim in claims {
            if previous.get(claim).map(PathBuf::as_path) == Some(*file) {
                owners.insert(claim.clone(), i);
            }
        }
    }
    let installed = |file: &Path| managed.is_some() && file.parent() == managed;
    let operators = offered
        .iter()
        .enumerate()
        .filter(|(_, (f, _))| !installed(f));
    let then_installed = offered
        .iter()
        .enumerate()
        .filter(|(_, (f, _))| installed(f));
    for (i, (_, claims)) in operators.chain(then_installed) {
        for claim in claims {
            owners.entry(claim.clone()).or_insert(i);
        }
    }
    owners
}

/// The host's own tools a catalog serves first: those for linked accounts, and the
/// management tools (with the scopes a caller needs to see and use them).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostTools<'a> {
    /// The linked-account tools.
    pub linking: bool,
    /// The management tools and their scopes.
    pub managing: Option<(&'a [Arc<RawValue>], &'a [String])>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if &*self.owner == HOST && host_tool(&self.claim) {
            write!(
                f,
                "refused {} of plugin `{}`: the name is reserved for mcpbox's own tools",
                self.claim, self.plugin
            )
        } else if &*self.owner == HOST && reserved(&self.claim) {
            write!(
                f,
                "refused {} of plugin `{}`: names beginning `{}` are mcpbox's own, reserved for its tools",
                self.claim,
                self.plugin,
                super::host_tools::RESERVED_PREFIX
            )
        } else if self.plugin == self.owner {
            write!(
                f,
                "plugin `{}` offers {} twice; the first is served",
                self.plugin, self.claim
            )
        } else {
            write!(
                f,
                "refused {} of plugin `{}`: the name is served by plugin `{}`",
                self.claim, self.plugin, self.owner
            )
        }
    }
}

/// How many of a plugin's names are served, and how many were refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Names {
    /// Served.
    pub served: usize,
    /// Refused (taken by another plugin).
    pub refused: usize,
}

/// The scopes a caller must hold to see and use an item: its plugin's and its own (`None`
/// when it needs none, as most do).
pub(super) type Gate = Option<Arc<[String]>>;

/// The gate of an item whose plugin requires `plugin` and which requires `own` besides.
fn gate(plugin: &[String], own: &[String]) -> Gate {
    if plugin.is_empty() && own.is_empty() {
        return None;
    }
    let mut all: Vec<String> = plugin.iter().chain(own).cloned().collect();
    all.sort();
    all.dedup();
    Some(all.into())
}

/// Whether `caller` holds what `gate` requires.
pub(super) fn passes(caller: &Principal, gate: &Gate) -> bool {
    gate.as_ref().is_none_or(|g| caller.missing(g).is_empty())
}

/// One list: its items pre-serialised in order, each item's gate beside it, and an index by
/// key.
pub(super) struct Listing<E> {
    pub(super) items: Vec<Arc<RawValue>>,
    pub(super) gates: Vec<Gate>,
    pub(super) index: HashMap<String, E>,
}

impl<E> Default for Listing<E> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            gates: Vec::new(),
            index: HashMap::new(),
        }
    }
}

/// Where a name points.
pub(super) struct Owner {
    pub(super) plugin: usize,
    pub(super) gate: Gate,
}

pub(super) struct ToolEntry {
    pub(super) plugin: usize,
    /// Its name in the plugin (the served name may carry a prefix).
    pub(super) own: String,
    pub(super) schemas: Arc<ToolSchemas>,
    /// Annotated read-only or idempotent (never recorded under a request id).
    pub(super) repeatable: bool,
    /// Whether it may run as a task.
    pub(super) task: crate::policy::TaskSupport,
    pub(super) gate: Gate,
}

pub(super) struct PromptEntry {
    pub(super) plugin: usize,
    /// Its name in the plugin (the served name may carry a prefix).
    pub(super) own: String,
    pub(super) description: String,
    pub(super) required: Vec<String>,
    pub(super) gate: Gate,
}

pub(super) struct TemplateEntry {
    pub(super) plugin: usize,
    pub(super) uri_template: String,
    pub(super) matcher: UriTemplate,
    pub(super) gate: Gate,
}

/// The merged view of all loaded plugins. Immutable once built.
pub struct Catalog {
    pub(super) plugins: Vec<PluginCode>,
    /// Who serves each name (a plugin's file): what the next catalog honours.
    claims: HashMap<Claim, PathBuf>,
    /// Names refused because another plugin serves them.
    refusals: Vec<Refusal>,
    /// How many names each plugin (by file) serves and had refused.
    names: HashMap<PathBuf, Names>,
    pub(super) offers: Offers,
    page_size: usize,
    pub(super) tools: Listing<ToolEntry>,
    pub(super) prompts: Listing<PromptEntry>,
    resources: Listing<Owner>,
    pub(super) templates: Vec<TemplateEntry>,
    template_items: Vec<Arc<RawValue>>,
    template_gates: Vec<Gate>,
    /// Skill entries (`skills/list`), by their `SKILL.md` URI (with the entry's place).
    skills: Listing<(Owner, usize)>,
    /// Skill files (also listed among the resources), by URI.
    skill_files: HashMap<String, (Owner, Arc<SkillFile>)>,
    /// Skill trees, by their root's URI (`skill://PLUGIN`): their plugin and its skills.
    skill_trees: HashMap<String, (Owner, Arc<Skills>)>,
    /// Some item needs a scope: lists differ by caller.
    gated: bool,
}

impl Catalog {
    /// Merge `plugins` (in file-name order), after the host's own tools if `host_tools`. A
    /// name served by the `previous` catalog stays with its plugin as long as that plugin
    /// still offers it; every other name goes to the first plugin in file-name order that
    /// offers it, those outside the `managed` directory first. Other claims, and names reserved for the host's tools, are refused (see
    /// [`Catalog::refusals`]).
    pub fn build(
        plugins: &[Arc<LoadedPlugin>],
        page_size: usize,
        previous: &HashMap<Claim, PathBuf>,
        host_tools: HostTools<'_>,
        managed: Option<&Path>,
    ) -> Self {
        let offered: Vec<(&Path, Vec<Claim>)> = plugins
            .iter()
            .map(|p| (p.file.as_path(), p.claims().collect()))
            .collect();
        let owners = owners(&offered, previous, managed);
        let mut catalog = Self {
            claims: HashMap::with_capacity(owners.len()),
            refusals: Vec::new(),
            names: HashMap::with_capacity(plugins.len()),
            plugins: Vec::with_capacity(plugins.len()),
            offers: Offers::default(),
            page_size: page_size.max(1),
            tools: Listing::default(),
            prompts: Listing::default(),
            resources: Listing::default(),
            templates: Vec::new(),
            template_items: Vec::new(),
            template_gates: Vec::new(),
            skills: Listing::default(),
            skill_files: HashMap::new(),
            skill_trees: HashMap::new(),
            gated: false,
        };
        if host_tools.linking {
            for item in super::host_tools::items() {
                catalog.tools.items.push(Arc::clone(item));
                catalog.tools.gates.push(None);
            }
            catalog.offers.tools = true;
        }
        if let Some((items, scopes)) = host_tools.managing {
            let gate = gate(scopes, &[]);
            catalog.gated |= gate.is_some();
            for item in items {
                catalog.tools.items.push(Arc::clone(item));
                catalog.tools.gates.push(gate.clone());
            }
            catalog.offers.tools = true;
        }
        for plugin in plugins {
            catalog.add(plugin, plugins, &owners);
        }
        catalog
    }

    /// Whether the plugin at `index` may serve `claim`; a refusal is recorded when not.
    fn owns(
        &mut self,
        index: usize,
        claim: Claim,
        plugins: &[Arc<LoadedPlugin>],
        owners: &HashMap<Claim, usize>,
    ) -> bool {
        let names = self.names.entry(plugins[index].file.clone()).or_default();
        if reserved(&claim) {
            names.refused += 1;
            self.refusals.push(Refusal {
                claim,
                plugin: plugins[index].code.name().clone(),
                owner: PluginName::from(HOST),
            });
            return false;
        }
        let owner = owners.get(&claim).copied().unwrap_or(index);
        let taken = owner != index || self.claims.contains_key(&claim);
        if taken {
            names.refused += 1;
            self.refusals.push(Refusal {
                claim,
                plugin: plugins[index].code.name().clone(),
                owner: plugins[owner].code.name().clone(),
            });
            return false;
        }
        names.served += 1;
        self.claims.insert(claim, plugins[index].file.clone());
        true
    }

    fn add(
        &mut self,
        loaded: &LoadedPlugin,
        plugins: &[Arc<LoadedPlugin>],
        owners: &HashMap<Claim, usize>,
    ) {
        let index = self.plugins.len();
        self.names.entry(loaded.file.clone()).or_default();
        let prepared = &loaded.prepared;
        let policy = loaded.code.policy();
        let naming = &policy.naming;
        let scopes = &policy.scopes;
        for tool in &prepared.tools {
            if !self.owns(index, Claim::Tool(tool.name.clone()), plugins, owners) {
                continue;
            }
            let gate = gate(scopes, naming.tools.scopes_of(&tool.own));
            self.tools.items.push(Arc::clone(&tool.json));
            self.tools.gates.push(gate.clone());
            let entry = ToolEntry {
                plugin: index,
                own: tool.own.clone(),
                schemas: Arc::clone(&tool.schemas),
                repeatable: tool.repeatable,
                task: tool.task,
                gate,
            };
            self.tools.index.insert(tool.name.clone(), entry);
        }
        for prompt in &prepared.prompts {
            if !self.owns(index, Claim::Prompt(prompt.name.clone()), plugins, owners) {
                continue;
            }
            let gate = gate(scopes, naming.prompts.scopes_of(&prompt.own));
            self.prompts.items.push(Arc::clone(&prompt.json));
            self.prompts.gates.push(gate.clone());
            let entry = PromptEntry {
                plugin: index,
                own: prompt.own.clone(),
                description: prompt.description.clone(),
                required: prompt.required.clone(),
                gate,
            };
            self.prompts.index.insert(prompt.name.clone(), entry);
        }
        for resource in &prepared.resources {
            if !self.owns(
                index,
                Claim::Resource(resource.uri.clone()),
                plugins,
                owners,
            ) {
                continue;
            }
            let gate = gate(scopes, naming.resources.scopes_of(&resource.uri));
            self.resources.items.push(Arc::clone(&resource.json));
            self.resources.gates.push(gate.clone());
            self.resources.index.insert(
                resource.uri.clone(),
                Owner {
                    plugin: index,
                    gate,
                },
            );
        }
        for template in &prepared.templates {
            let claim = Claim::Template(template.uri_template.clone());
            if !self.owns(index, claim, plugins, owners) {
                continue;
            }
            let gate = gate(scopes, naming.resources.scopes_of(&template.uri_template));
            self.template_items.push(Arc::clone(&template.json));
            self.template_gates.push(gate.clone());
            self.templates.push(TemplateEntry {
                plugin: index,
                uri_template: template.uri_template.clone(),
                matcher: template.matcher.clone(),
                gate,
            });
        }
        self.add_skills(index, loaded, plugins, owners);
        self.gated = self.gated
            || [
                &self.tools.gates,
                &self.prompts.gates,
                &self.resources.gates,
                &self.template_gates,
                &self.skills.gates,
            ]
            .iter()
            .any(|gates| gates.iter().any(Option::is_some));
        let lists = &loaded.lists;
        // Advertise what is served, not what is exported: the Rust SDK exports every
        // interface, with empty lists for what a plugin does not provide.
        self.offers = Offers {
            tools: !self.tools.items.is_empty(),
            prompts: !self.prompts.items.is_empty(),
            resources: !self.resources.items.is_empty() || !self.templates.is_empty(),
            skills: !self.skills.items.is_empty(),
            tasks: self.offers.tasks
                || loaded.prepared.tools.iter().any(|t| {
                    t.task != crate::policy::TaskSupport::Forbidden
                        && self.tools.index.contains_key(&t.name)
                }),
            completions: self.offers.completions
                || (loaded.code.exports().completion()
                    && !(lists.prompts.is_empty() && lists.templates.is_empty())),
            list_changed: false,
        };
        self.plugins.push(loaded.code.clone());
    }

    /// Serve the skills of the plugin at `index`: each skill whose files are all its to serve
    /// (a file URI another plugin serves refuses the whole skill), its files among the
    /// resources, and the directories of its tree.
    fn add_skills(
        &mut self,
        index: usize,
        loaded: &LoadedPlugin,
        plugins: &[Arc<LoadedPlugin>],
        owners: &HashMap<Claim, usize>,
    ) {
        if loaded.served_skills().is_empty() {
            return;
        }
        let skills = &loaded.skills;
        let policy = loaded.code.policy();
        let scopes = &policy.scopes;
        let resource_gate = |uri: &str| gate(scopes, policy.naming.resources.scopes_of(uri));
        for skill in loaded.served_skills() {
            // A file URI another plugin serves refuses the whole skill (each such file's
            // refusal recorded).
            let taken: Vec<Claim> = skill
                .files
                .iter()
                .map(|f| Claim::Resource(f.uri.clone()))
                .filter(|claim| {
                    owners.get(claim).is_some_and(|&o| o != index)
                        || self.claims.contains_key(claim)
                })
                .collect();
            if !taken.is_empty() {
                for claim in taken {
                    self.owns(index, claim, plugins, owners);
                }
                continue;
            }
            for file in &skill.files {
                self.owns(index, Claim::Resource(file.uri.clone()), plugins, owners);
                let gate = resource_gate(&file.uri);
                self.resources.items.push(Arc::clone(&file.resource));
                self.resources.gates.push(gate.clone());
                self.skill_files.insert(
                    file.uri.clone(),
                    (
                        Owner {
                            plugin: index,
                            gate,
                        },
                        Arc::clone(file),
                    ),
                );
            }
            let gate = resource_gate(&skill.uri);
            let position = self.skills.items.len();
            self.skills.items.push(Arc::clone(&skill.entry));
            self.skills.gates.push(gate.clone());
            self.skills.index.insert(
                skill.uri.clone(),
                (
                    Owner {
                        plugin: index,
                        gate,
                    },
                    position,
                ),
            );
        }
        let owner = Owner {
            plugin: index,
            gate: gate(scopes, &[]),
        };
        self.skill_trees
            .insert(skills.base().to_owned(), (owner, Arc::clone(skills)));
    }

    /// Names refused because another plugin serves them.
    pub fn refusals(&self) -> &[Refusal] {
        &self.refusals
    }

    /// Who serves each name.
    pub fn claims(&self) -> &HashMap<Claim, PathBuf> {
        &self.claims
    }

    /// How many names the plugin loaded from `file` serves, and how many were refused.
    pub fn names_of(&self, file: &Path) -> Names {
        self.names.get(file).copied().unwrap_or_default()
    }

    /// The serialised items of a list, to tell whether it changed.
    pub(super) fn items(&self, list: ChangedList) -> Vec<&str> {
        let items: Box<dyn Iterator<Item = &Arc<RawValue>>> = match list {
            ChangedList::Tools => Box::new(self.tools.items.iter()),
            ChangedList::Prompts => Box::new(self.prompts.items.iter()),
            ChangedList::Resources => Box::new(
                self.resources
                    .items
                    .iter()
                    .chain(&self.template_items)
                    .chain(&self.skills.items),
            ),
        };
        items.map(|item| item.get()).collect()
    }

    /// How many plugins are loaded.
    pub fn plugin_count(&self) -> usize {
        self.plugins.len()
    }

    /// Whether lists differ by caller (some item needs a scope).
    pub(super) fn gated(&self) -> bool {
        self.gated
    }

    /// One page of a list, as `caller` sees it: without the items whose scopes it lacks.
    pub(super) fn page(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        caller: &Principal,
    ) -> MethodResult {
        let (key, items, gates) = match kind {
            ListKind::Tools => ("tools", &self.tools.items, &self.tools.gates),
            ListKind::Prompts => ("prompts", &self.prompts.items, &self.prompts.gates),
            ListKind::Resources => ("resources", &self.resources.items, &self.resources.gates),
            ListKind::ResourceTemplates => (
                "resourceTemplates",
                &self.template_items,
                &self.template_gates,
            ),
            ListKind::Skills => ("skills", &self.skills.items, &self.skills.gates),
        };
        let visible: Vec<Arc<RawValue>>;
        let items: &[Arc<RawValue>] = if self.gated && matches!(caller.scopes(), Scopes::Granted(_))
        {
            visible = items
                .iter()
                .zip(gates)
                .filter(|(_, gate)| passes(caller, gate))
                .map(|(item, _)| Arc::clone(item))
                .collect();
            &visible
        } else {
            items
        };
        self.page_of(key, items, cursor)
    }

    /// One page of `items` under `key`, from `cursor` (an offset this catalog gave out).
    fn page_of(&self, key: &str, items: &[Arc<RawValue>], cursor: Option<&str>) -> MethodResult {
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor::decode(cursor)
                .ok_or_else(|| ErrorObject::invalid_params(format!("invalid cursor `{cursor}`")))?
                .min(items.len()),
        };
        let end = start.saturating_add(self.page_size).min(items.len());
        let mut out = String::with_capacity(
            64 + items[start..end]
                .iter()
                .map(|i| i.get().len() + 1)
                .sum::<usize>(),
        );
        out.push_str("{\"");
        out.push_str(key);
        out.push_str("\":[");
        for (i, item) in items[start..end].iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(item.get());
        }
        out.push(']');
        if end < items.len() {
            out.push_str(",\"nextCursor\":\"");
            out.push_str(&cursor::encode(end));
            out.push('"');
        }
        out.push('}');
        RawValue::from_string(out)
            .map(MethodOutput::from)
            .map_err(|e| ErrorObject::internal(format!("could not build the page: {e}")))
    }

    /// The skill file at `uri`, if one is served there: its plugin, gate and content.
    pub(super) fn skill_file(&self, uri: &str) -> Option<(&PluginCode, &Gate, &Arc<SkillFile>)> {
        let (owner, file) = self.skill_files.get(uri)?;
        Some((self.plugins.get(owner.plugin)?, &owner.gate, file))
    }

    /// The skill whose `SKILL.md` is at `uri`: its plugin, gate and entry.
    pub(super) fn skill(&self, uri: &str) -> Option<(&PluginCode, &Gate, &Arc<RawValue>)> {
        let (owner, position) = self.skills.index.get(uri)?;
        Some((
            self.plugins.get(owner.plugin)?,
            &owner.gate,
            self.skills.items.get(*position)?,
        ))
    }

    /// Each skill file's URI and digest.
    pub(super) fn skill_digests(&self) -> HashMap<&str, &str> {
        self.skill_files
            .iter()
            .map(|(uri, (_, file))| (uri.as_str(), file.digest.as_str()))
            .collect()
    }

    /// The directory at `uri`, if one is served: its plugin, its gate and the directory.
    fn directory(&self, uri: &str) -> Option<(&PluginCode, &Gate, Directory<'_>)> {
        let (owner, skills) = self.skill_trees.get(crate::skills::tree_of(uri))?;
        Some((
            self.plugins.get(owner.plugin)?,
            &owner.gate,
            skills.directory(uri)?,
        ))
    }

    /// The plugin serving the directory at `uri`, and its gate.
    pub(super) fn directory_owner(&self, uri: &str) -> Option<(&PluginCode, &Gate)> {
        self.directory(uri).map(|(plugin, gate, _)| (plugin, gate))
    }

    /// One page of the directory at `uri` as `caller` sees it (files whose gate it does not
    /// pass left out); -32602 for no such directory.
    pub(super) fn directory_page(
        &self,
        uri: &str,
        cursor: Option<&str>,
        caller: &Principal,
    ) -> MethodResult {
        let (_, _, directory) = self.directory(uri).ok_or_else(|| {
            ErrorObject::invalid_params(format!("`{uri}` names no directory served"))
        })?;
        let items: Vec<Arc<RawValue>> = directory
            .children(uri)
            // A file shows only while it is served (a skill refused for a URI another plugin
            // serves is not) and the caller passes its gate.
            .filter(|(_, file)| {
                file.is_none_or(|f| {
                    self.skill_files
                        .get(f)
                        .is_some_and(|(o, _)| passes(caller, &o.gate))
                })
            })
            .map(|(resource, _)| resource)
            .collect();
        self.page_of("resources", &items, cursor)
    }

    /// The plugin serving `uri` (the one listing it, else the first whose template matches),
    /// and the resource's gate; none for a URI in a namespace the host serves itself but for
    /// its skill files.
    pub(super) fn resource_owner(&self, uri: &str) -> Option<(&PluginCode, &Gate)> {
        if let Some((owner, _)) = self.skill_files.get(uri) {
            return Some((self.plugins.get(owner.plugin)?, &owner.gate));
        }
        // The host's own namespaces: nothing else there is served, and no plugin's template
        // answers for them (none is served, but a read must not reach a plugin either way).
        if super::names::reserved_problem(uri).is_some() {
            return None;
        }
        let (plugin, gate) = match self.resources.index.get(uri) {
            Some(owner) => (owner.plugin, &owner.gate),
            None => {
                let template = self.templates.iter().find(|t| t.matcher.matches(uri))?;
                (template.plugin, &template.gate)
            }
        };
        Some((self.plugins.get(plugin)?, gate))
    }
}

#[cfg(test)]
mod tests;
