//! The catalog: the merged, immutable view of everything the loaded plugins offer, and the
//! live [`PluginSet`] that serves it to sessions.
//!
//! Depends on `engine`, `policy` and `protocol`. Lists are read from each plugin once, when it
//! loads, validated, and stored pre-serialised, so `*/list` requests never run plugin code and
//! a page is a concatenation of JSON snippets. Names must satisfy what clients accept; the
//! first plugin (in file-name order) to claim a name keeps it, and a later claim is refused
//! with an error naming both plugins while everything else keeps serving.
//!
//! The live set holds the current catalog behind an atomic pointer: each request pins the
//! catalog it started with, so a later reload can swap in a new one without disturbing calls
//! in flight.

mod bridge;
mod convert;
mod cursor;
mod load;
mod names;
mod prepare;
mod uri_template;
mod validate;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::ArcSwap;
use serde_json::json;
use serde_json::value::RawValue;
use tracing::Instrument;

use crate::engine::{CompletionRef, PluginCode, PluginLists};
use crate::policy::GrantSummary;
use crate::protocol::ErrorObject;
use crate::protocol::mcp::{CompleteParams, CompletionReference};
use crate::server::{
    Backend, ChangedList, ListKind, MethodResult, Offers, RequestContext, ServerEvent,
};
use tokio::sync::{broadcast, mpsc};

use bridge::ClientBridge;
pub use load::{DirectoryError, FileError, PluginSource, load_directory, load_source, read_source};
use prepare::{Prepared, prepare};
use uri_template::UriTemplate;
use validate::ToolSchemas;

/// The most completion values sent to a client.
const MAX_COMPLETION_VALUES: usize = 100;

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
    /// Its lists, checked and ready for the catalog.
    prepared: Prepared,
}

impl LoadedPlugin {
    /// A loaded plugin, its lists checked and prepared (invalid items are logged once, here).
    pub fn new(code: PluginCode, file: PathBuf, lists: PluginLists, digest: [u8; 32]) -> Self {
        let prepared = prepare(code.name(), &file, &lists);
        Self {
            code,
            file,
            lists,
            digest,
            prepared,
        }
    }

    /// Log that the plugin loaded: what it offers and what it was granted.
    pub fn log_loaded(&self, verb: &str) {
        let lists = &self.lists;
        tracing::info!(
            plugin = &**self.code.name(),
            file = %self.file.display(),
            tools = lists.tools.len(),
            prompts = lists.prompts.len(),
            resources = lists.resources.len(),
            templates = lists.templates.len(),
            grants = %GrantSummary(self.code.policy()),
            "{verb} plugin"
        );
    }
}

/// One list: its items pre-serialised in order, and an index by key.
struct Listing<E> {
    items: Vec<Arc<RawValue>>,
    index: HashMap<String, E>,
}

impl<E> Default for Listing<E> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }
}

/// Where a name points.
struct Owner {
    plugin: usize,
}

struct ToolEntry {
    plugin: usize,
    schemas: Arc<ToolSchemas>,
}

struct PromptEntry {
    plugin: usize,
    description: String,
    required: Vec<String>,
}

struct TemplateEntry {
    plugin: usize,
    uri_template: String,
    matcher: UriTemplate,
}

/// The merged view of all loaded plugins. Immutable once built.
pub struct Catalog {
    plugins: Vec<PluginCode>,
    offers: Offers,
    page_size: usize,
    tools: Listing<ToolEntry>,
    prompts: Listing<PromptEntry>,
    resources: Listing<Owner>,
    templates: Vec<TemplateEntry>,
    template_items: Vec<Arc<RawValue>>,
}

impl Catalog {
    /// Merge `plugins`, in order. Items whose name another plugin claimed first are refused
    /// and logged; everything else is served.
    pub fn build(plugins: &[Arc<LoadedPlugin>], page_size: usize) -> Self {
        let mut catalog = Self {
            plugins: Vec::with_capacity(plugins.len()),
            offers: Offers::default(),
            page_size: page_size.max(1),
            tools: Listing::default(),
            prompts: Listing::default(),
            resources: Listing::default(),
            templates: Vec::new(),
            template_items: Vec::new(),
        };
        for plugin in plugins {
            catalog.add(plugin);
        }
        catalog
    }

    fn add(&mut self, loaded: &LoadedPlugin) {
        let index = self.plugins.len();
        let refuse = |what: &str, key: &str, owner: usize| {
            let owner = self.plugins[owner].name();
            tracing::warn!(
                plugin = &**loaded.code.name(),
                file = %loaded.file.display(),
                "refused {what} `{key}`: the name is already taken by plugin `{owner}`"
            );
        };
        let prepared = &loaded.prepared;
        for tool in &prepared.tools {
            if let Some(owner) = self.tools.index.get(&tool.name) {
                refuse("tool", &tool.name, owner.plugin);
                continue;
            }
            self.tools.items.push(Arc::clone(&tool.json));
            let entry = ToolEntry {
                plugin: index,
                schemas: Arc::clone(&tool.schemas),
            };
            self.tools.index.insert(tool.name.clone(), entry);
        }
        for prompt in &prepared.prompts {
            if let Some(owner) = self.prompts.index.get(&prompt.name) {
                refuse("prompt", &prompt.name, owner.plugin);
                continue;
            }
            self.prompts.items.push(Arc::clone(&prompt.json));
            let entry = PromptEntry {
                plugin: index,
                description: prompt.description.clone(),
                required: prompt.required.clone(),
            };
            self.prompts.index.insert(prompt.name.clone(), entry);
        }
        for resource in &prepared.resources {
            if let Some(owner) = self.resources.index.get(&resource.uri) {
                refuse("resource", &resource.uri, owner.plugin);
                continue;
            }
            self.resources.items.push(Arc::clone(&resource.json));
            self.resources
                .index
                .insert(resource.uri.clone(), Owner { plugin: index });
        }
        for template in &prepared.templates {
            if let Some(owner) = self
                .templates
                .iter()
                .find(|t| t.uri_template == template.uri_template)
            {
                refuse("resource template", &template.uri_template, owner.plugin);
                continue;
            }
            self.template_items.push(Arc::clone(&template.json));
            self.templates.push(TemplateEntry {
                plugin: index,
                uri_template: template.uri_template.clone(),
                matcher: template.matcher.clone(),
            });
        }
        let lists = &loaded.lists;
        // Advertise what is served, not what is exported: the Rust SDK exports every
        // interface, with empty lists for what a plugin does not provide.
        self.offers = Offers {
            tools: !self.tools.items.is_empty(),
            prompts: !self.prompts.items.is_empty(),
            resources: !self.resources.items.is_empty() || !self.templates.is_empty(),
            completions: self.offers.completions
                || (loaded.code.exports().completion()
                    && !(lists.prompts.is_empty() && lists.templates.is_empty())),
            list_changed: false,
        };
        self.plugins.push(loaded.code.clone());
    }

    /// The serialised items of a list, to tell whether it changed.
    fn items(&self, list: ChangedList) -> Vec<&str> {
        let items: Box<dyn Iterator<Item = &Arc<RawValue>>> = match list {
            ChangedList::Tools => Box::new(self.tools.items.iter()),
            ChangedList::Prompts => Box::new(self.prompts.items.iter()),
            ChangedList::Resources => {
                Box::new(self.resources.items.iter().chain(&self.template_items))
            }
        };
        items.map(|item| item.get()).collect()
    }

    /// How many plugins are loaded.
    pub fn plugin_count(&self) -> usize {
        self.plugins.len()
    }

    /// One page of a list.
    fn page(&self, kind: ListKind, cursor: Option<&str>) -> MethodResult {
        let (key, items) = match kind {
            ListKind::Tools => ("tools", &self.tools.items),
            ListKind::Prompts => ("prompts", &self.prompts.items),
            ListKind::Resources => ("resources", &self.resources.items),
            ListKind::ResourceTemplates => ("resourceTemplates", &self.template_items),
        };
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
            .map_err(|e| ErrorObject::internal(format!("could not build the page: {e}")))
    }

    /// The plugin serving `uri`: the one listing it, else the first whose template matches.
    fn resource_owner(&self, uri: &str) -> Option<&PluginCode> {
        let plugin = match self.resources.index.get(uri) {
            Some(owner) => owner.plugin,
            None => {
                self.templates
                    .iter()
                    .find(|t| t.matcher.matches(uri))?
                    .plugin
            }
        };
        self.plugins.get(plugin)
    }
}

/// Why `result` is over the plugin's result limit, if it is.
fn over_limit(plugin: &PluginCode, result: &RawValue) -> Option<String> {
    let (size, limit) = (result.get().len(), plugin.limits().result_bytes);
    (size > limit).then(|| {
        tracing::warn!(
            plugin = &**plugin.name(),
            size,
            limit,
            "result over the limit"
        );
        format!(
            "plugin `{}` returned a result of {size} bytes, over its limit of {limit} bytes",
            plugin.name()
        )
    })
}

/// `result` if it is within the plugin's result limit, else -32603 saying by how much.
fn within_limit(plugin: &PluginCode, result: Box<RawValue>) -> MethodResult {
    match over_limit(plugin, &result) {
        Some(problem) => Err(ErrorObject::internal(problem)),
        None => Ok(result),
    }
}

/// The live set of plugins: the current catalog, swapped atomically when plugins change.
pub struct PluginSet {
    current: ArcSwap<Catalog>,
    /// The loaded plugins by file (so in name order), from which catalogs are built.
    plugins: Mutex<BTreeMap<PathBuf, Arc<LoadedPlugin>>>,
    page_size: usize,
    watching: bool,
    notifier: Notifier,
}

/// How calls and the reloader reach the sessions and the reloader.
#[derive(Clone)]
pub struct Notifier {
    events: broadcast::Sender<ServerEvent>,
    relist: Arc<OnceLock<mpsc::UnboundedSender<Arc<str>>>>,
}

/// How many events a slow session may fall behind before it is told that everything changed.
const EVENT_BACKLOG: usize = 256;

impl Notifier {
    /// Tell every session.
    pub fn announce(&self, event: ServerEvent) {
        // No receivers just means no session is connected.
        let _ = self.events.send(event);
    }

    /// Ask the reloader to read `plugin`'s lists again.
    pub fn relist(&self, plugin: Arc<str>) {
        match self.relist.get() {
            Some(sender) => {
                let _ = sender.send(plugin);
            }
            None => tracing::warn!(
                plugin = &*plugin,
                "ignored notify-list-changed: the plugin directory is not watched"
            ),
        }
    }
}

impl PluginSet {
    /// Serve `plugins`. `watching` says whether the set may change while sessions run, so
    /// sessions are offered every list kind with `listChanged`.
    pub fn new(plugins: Vec<LoadedPlugin>, page_size: usize, watching: bool) -> Self {
        let plugins: BTreeMap<PathBuf, Arc<LoadedPlugin>> = plugins
            .into_iter()
            .map(|p| (p.file.clone(), Arc::new(p)))
            .collect();
        let loaded: Vec<_> = plugins.values().cloned().collect();
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        Self {
            current: ArcSwap::from_pointee(Catalog::build(&loaded, page_size)),
            plugins: Mutex::new(plugins),
            page_size,
            watching,
            notifier: Notifier {
                events,
                relist: Arc::new(OnceLock::new()),
            },
        }
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

    /// The way to reach sessions and the reloader.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Connect plugin-initiated list changes to the reloader.
    pub fn set_relist_channel(&self, sender: mpsc::UnboundedSender<Arc<str>>) {
        let _ = self.notifier.relist.set(sender);
    }

    /// Put `plugin` in place of whatever was loaded from its file (or remove what was loaded
    /// from `file`, for `None`), publish the new catalog, and announce the lists that changed.
    /// Calls in flight keep the catalog they started with.
    pub fn update(&self, file: &Path, plugin: Option<LoadedPlugin>) {
        let (old, new) = {
            let mut plugins = lock(&self.plugins);
            match plugin {
                Some(plugin) => plugins.insert(file.to_owned(), Arc::new(plugin)),
                None => plugins.remove(file),
            };
            let loaded: Vec<_> = plugins.values().cloned().collect();
            let new = Arc::new(Catalog::build(&loaded, self.page_size));
            (self.current.swap(Arc::clone(&new)), new)
        };
        for list in [
            ChangedList::Tools,
            ChangedList::Prompts,
            ChangedList::Resources,
        ] {
            if old.items(list) != new.items(list) {
                tracing::debug!(?list, "list changed");
                self.notifier.announce(ServerEvent::ListChanged(list));
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Backend for PluginSet {
    fn offers(&self) -> Offers {
        if self.watching {
            return Offers {
                tools: true,
                prompts: true,
                resources: true,
                completions: true,
                list_changed: true,
            };
        }
        self.current.load().offers
    }

    fn events(&self) -> Option<broadcast::Receiver<ServerEvent>> {
        Some(self.notifier.events.subscribe())
    }

    fn list(&self, kind: ListKind, cursor: Option<&str>) -> MethodResult {
        self.current.load().page(kind, cursor)
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: &RawValue,
        ctx: RequestContext,
    ) -> MethodResult {
        let catalog = self.catalog();
        let Some(entry) = catalog.tools.index.get(name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown tool `{name}`"
            )));
        };
        // Invalid arguments are the model's to fix: an `isError` result, not a protocol error.
        if let Err(problem) = entry.schemas.check_arguments(name, arguments) {
            return convert::error_result(&problem);
        }
        let plugin = &catalog.plugins[entry.plugin];
        let span = tracing::debug_span!("tools/call", plugin = &**plugin.name(), tool = name);
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.notifier.clone());
        let outcome = plugin
            .call_tool(name, arguments.get(), host)
            .instrument(span)
            .await;
        if let Ok(Ok(result)) = &outcome
            && let Err(problem) = entry
                .schemas
                .check_output(result.structured.as_deref(), result.is_error)
        {
            tracing::warn!(plugin = &**plugin.name(), tool = name, "{problem}");
            return convert::error_result(&format!("plugin `{}` {problem}", plugin.name()));
        }
        let result = convert::call_tool_result(plugin.name(), outcome)?;
        match over_limit(plugin, &result) {
            Some(problem) => convert::error_result(&problem),
            None => Ok(result),
        }
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> MethodResult {
        let catalog = self.catalog();
        let Some(entry) = catalog.prompts.index.get(name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown prompt `{name}`"
            )));
        };
        if let Some(missing) = entry.required.iter().find(|r| !arguments.contains_key(*r)) {
            return Err(ErrorObject::invalid_params(format!(
                "missing required argument `{missing}` for prompt `{name}`"
            )));
        }
        let plugin = &catalog.plugins[entry.plugin];
        let arguments: Vec<(String, String)> = arguments.into_iter().collect();
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.notifier.clone());
        match plugin.get_prompt(name, &arguments, host).await {
            Ok(Ok(messages)) => within_limit(
                plugin,
                convert::prompt_result(&entry.description, &messages)?,
            ),
            Ok(Err(e)) => Err(convert::request_error(plugin.name(), None, Ok(e))),
            Err(e) => Err(convert::request_error(plugin.name(), None, Err(e))),
        }
    }

    async fn read_resource(&self, uri: &str, ctx: RequestContext) -> MethodResult {
        let catalog = self.catalog();
        let Some(plugin) = catalog.resource_owner(uri) else {
            return Err(convert::resource_not_found(uri));
        };
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.notifier.clone());
        match plugin.read_resource(uri, host).await {
            Ok(Ok(contents)) => within_limit(plugin, convert::read_result(&contents)?),
            Ok(Err(e)) => Err(convert::request_error(plugin.name(), Some(uri), Ok(e))),
            Err(e) => Err(convert::request_error(plugin.name(), Some(uri), Err(e))),
        }
    }

    async fn complete(&self, params: CompleteParams, ctx: RequestContext) -> MethodResult {
        let catalog = self.catalog();
        let (plugin, reference) = match &params.reference {
            CompletionReference::Prompt { name } => {
                let entry = catalog.prompts.index.get(name).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("unknown prompt `{name}`"))
                })?;
                (entry.plugin, CompletionRef::Prompt(name.clone()))
            }
            CompletionReference::Resource { uri } => {
                let entry = catalog
                    .templates
                    .iter()
                    .find(|t| t.uri_template == *uri)
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!("unknown resource template `{uri}`"))
                    })?;
                (entry.plugin, CompletionRef::ResourceTemplate(uri.clone()))
            }
        };
        let plugin = &catalog.plugins[plugin];
        if !plugin.exports().completion() {
            return convert::to_raw(&json!({ "completion": { "values": [], "hasMore": false } }));
        }
        let context: Vec<(String, String)> = params
            .context
            .map(|c| c.arguments.into_iter().collect())
            .unwrap_or_default();
        let argument = &params.argument;
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.notifier.clone());
        match plugin
            .complete(&reference, &argument.name, &argument.value, &context, host)
            .await
        {
            Ok(Ok(mut result)) => {
                let has_more = result.has_more || result.values.len() > MAX_COMPLETION_VALUES;
                let total = result.total.map_or(result.values.len(), |t| t as usize);
                result.values.truncate(MAX_COMPLETION_VALUES);
                convert::to_raw(&json!({
                    "completion": { "values": result.values, "total": total, "hasMore": has_more }
                }))
            }
            Ok(Err(e)) => Err(convert::request_error(plugin.name(), None, Ok(e))),
            Err(e) => Err(convert::request_error(plugin.name(), None, Err(e))),
        }
    }
}
