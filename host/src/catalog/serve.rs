//! The catalog as the sessions' [`Backend`]: each request pins the current catalog, finds the
//! plugin that owns the name, checks that the caller holds the plugin's scopes and the
//! arguments, calls the plugin through the engine with a
//! bridge to its client, and turns the outcome into MCP (the conversion is `convert`'s).
//! A `tools/call` is resolved once ([`Pinned`]): the session's checks and the call read the
//! same version of the catalog.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio::sync::broadcast;
use tracing::Instrument;

use super::bridge::ClientBridge;
use super::convert;
use super::failure::{PluginFailure, Request};
use super::link::{LinkSlot, or_link_required, run_linking};
use super::live::PluginSet;
use super::merged::{Catalog, Gate, ToolEntry};
use crate::engine::{CompletionRef, PluginCode};
use crate::metrics::metrics;
use crate::policy::PluginName;
use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::mcp::{CompleteParams, CompletionReference};
use crate::protocol::request::ClientRequest;
use crate::server::{
    Backend, ListKind, MethodOutput, MethodResult, Offers, RequestContext, ServerEvent, Target,
    TaskUse,
};

/// A request resolved in one version of the catalog, which it holds: the plugin that would
/// serve it, the scopes a caller needs, and for a tool its mirrored headers and task use. The
/// session checks these and hands it back to [`Backend::call_tool`], which runs the call on
/// this version.
///
/// A plugin replaced or removed after the request was resolved still serves the call from the
/// version resolved, as a call already in flight when the plugin is replaced does: the
/// catalog keeps the plugin's code alive while a target holds it. (A 2026-07-28 retry
/// answering questions the replaced version asked is still refused, by its digest:
/// `RequestContext::bind_plugin`.)
pub struct Pinned {
    catalog: Arc<Catalog>,
    /// The plugin that would serve the request, and the scopes its item requires.
    owner: Option<(PluginName, Gate)>,
    /// For a `tools/call`, the tool's served name.
    tool: Option<String>,
}

impl Pinned {
    fn resolve(catalog: Arc<Catalog>, request: &ClientRequest) -> Self {
        let owner =
            owner(&catalog, request).map(|(plugin, gate)| (plugin.name().clone(), gate.clone()));
        let tool = match request {
            ClientRequest::CallTool(p) => Some(p.name.clone()),
            _ => None,
        };
        Self {
            catalog,
            owner,
            tool,
        }
    }

    /// The entry of the tool called, in the pinned version.
    fn tool(&self) -> Option<&ToolEntry> {
        self.catalog.tools.index.get(self.tool.as_deref()?)
    }
}

impl Target for Pinned {
    fn required_scopes(&self) -> &[String] {
        self.owner
            .as_ref()
            .and_then(|(_, gate)| gate.as_deref())
            .unwrap_or_default()
    }

    fn plugin(&self) -> Option<&str> {
        self.owner.as_ref().map(|(name, _)| name.as_str())
    }

    fn tool_headers(&self) -> &[crate::protocol::v2026::HeaderParam] {
        self.tool().map_or(&[], |entry| &entry.schemas.headers)
    }

    fn task_use(&self) -> TaskUse {
        use crate::policy::TaskSupport;
        match self.tool().map(|entry| entry.task) {
            Some(TaskSupport::Optional) => TaskUse::Optional,
            Some(TaskSupport::Required) => TaskUse::Required,
            Some(TaskSupport::Forbidden) | None => TaskUse::Never,
        }
    }
}

/// Whether the request's revision takes structured content of any JSON type (2026-07-28) or
/// only an object (2025-11-25).
fn ctx_accepts_any_structured(ctx: &RequestContext) -> bool {
    ctx.is_v2026()
}

/// The caller may use the item behind `gate`, served by `plugin`: it holds the plugin's scopes
/// and the item's own (the session refused it earlier otherwise; checked again here, where the
/// item is known, so no path reaches a plugin unchecked).
fn caller_may_use(
    ctx: &RequestContext,
    plugin: &PluginCode,
    gate: &Gate,
) -> Result<(), ErrorObject> {
    ctx.audit().plugin(plugin.name().as_str());
    let Some(required) = gate.as_deref() else {
        return Ok(());
    };
    let missing = ctx.caller().missing(required);
    if missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<String> = missing.into_iter().map(str::to_owned).collect();
    Err(crate::server::insufficient_scope(&missing))
}

/// The plugin that would serve `request`, and the item's gate (none for a request no plugin
/// serves).
fn owner<'a>(catalog: &'a Catalog, request: &ClientRequest) -> Option<(&'a PluginCode, &'a Gate)> {
    let (plugin, gate) = match request {
        ClientRequest::CallTool(p) => catalog
            .tools
            .index
            .get(&p.name)
            .map(|e| (e.plugin, &e.gate)),
        ClientRequest::GetPrompt(p) => catalog
            .prompts
            .index
            .get(&p.name)
            .map(|e| (e.plugin, &e.gate)),
        ClientRequest::Complete(p) => match &p.reference {
            CompletionReference::Prompt { name } => {
                catalog.prompts.index.get(name).map(|e| (e.plugin, &e.gate))
            }
            CompletionReference::Resource { uri } => catalog
                .templates
                .iter()
                .find(|t| t.uri_template == *uri)
                .map(|t| (t.plugin, &t.gate)),
        },
        ClientRequest::GetSkill(p) => {
            return catalog
                .skill(&p.uri)
                .map(|(plugin, gate, _)| (plugin, gate));
        }
        ClientRequest::ReadDirectory(p) => {
            return catalog.directory_owner(&p.uri);
        }
        ClientRequest::ReadResource(p) | ClientRequest::Subscribe(p) => {
            return catalog.resource_owner(&p.uri);
        }
        _ => None,
    }?;
    Some((catalog.plugins.get(plugin)?, gate))
}

impl Backend for PluginSet {
    fn offers(&self) -> Offers {
        if self.watching {
            return Offers {
                tools: true,
                prompts: true,
                resources: true,
                completions: true,
                // Declared while some plugin serves skills (each 2026-07-28 request sees
                // the catalog of the moment).
                skills: self.catalog().offers.skills,
                // Declared while some tool may run as a task, likewise.
                tasks: self.catalog().offers.tasks,
                list_changed: true,
            };
        }
        self.catalog().offers
    }

    fn events(&self) -> Option<broadcast::Receiver<ServerEvent>> {
        Some(self.hub.subscribe())
    }

    fn startup_problems(&self) -> Vec<String> {
        PluginSet::startup_problems(self)
    }

    fn session_ended(&self, session: crate::server::SessionId) {
        // Plugins' session-scoped state (`caller-scope = "session"`) goes with the session.
        crate::kv::end_session(session.get());
    }

    type Target = Pinned;

    fn resolve(&self, request: &ClientRequest) -> Pinned {
        let mut pinned = Pinned::resolve(self.catalog(), request);
        // The management tools are the host's, behind the operator's scope.
        if let ClientRequest::CallTool(p) = request
            && super::managing::MANAGE_TOOLS.contains(&p.name.as_str())
            && let Some(installer) = self.installer.get()
        {
            let scopes = installer.scopes();
            pinned.owner = Some((
                PluginName::from("mcpbox"),
                (!scopes.is_empty()).then(|| scopes.into()),
            ));
        }
        pinned
    }

    fn plugin_scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = self
            .plugins()
            .iter()
            .flat_map(|p| {
                let policy = p.code.policy();
                let naming = &policy.naming;
                let items = [&naming.tools, &naming.prompts, &naming.resources]
                    .into_iter()
                    .flat_map(|filter| filter.scopes.values().flatten().cloned());
                policy
                    .scopes
                    .iter()
                    .cloned()
                    .chain(items)
                    .collect::<Vec<_>>()
            })
            .collect();
        scopes.sort();
        scopes.dedup();
        scopes
    }

    fn list(&self, kind: ListKind, cursor: Option<&str>, caller: &Principal) -> MethodResult {
        self.catalog().page(kind, cursor, caller)
    }

    fn lists_vary_by_caller(&self) -> bool {
        self.catalog().gated()
    }

    async fn call_tool(
        &self,
        target: Pinned,
        name: &str,
        arguments: &RawValue,
        ctx: RequestContext,
    ) -> MethodResult {
        if super::managing::MANAGE_TOOLS.contains(&name)
            && let Some(installer) = self.installer.get()
        {
            let required = installer.scopes();
            let missing = ctx.caller().missing(&required);
            if !missing.is_empty() {
                let missing: Vec<String> = missing.into_iter().map(str::to_owned).collect();
                return Err(crate::server::insufficient_scope(&missing));
            }
            ctx.audit().plugin("mcpbox");
            return Box::pin(installer.call(name, arguments, &ctx)).await;
        }
        if let Some(linking) = self.linking.get()
            && super::host_tools::RESERVED.contains(&name)
            && let Some(result) = Box::pin(super::host_tools::call(
                &*linking.linker,
                name,
                arguments,
                &ctx,
            ))
            .await
        {
            return result;
        }
        // The version the request was resolved in: its checks were made on it, and the call
        // runs on it (see [`Pinned`]).
        let catalog = &target.catalog;
        let Some(entry) = catalog.tools.index.get(name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown tool `{name}`"
            )));
        };
        let plugin = &catalog.plugins[entry.plugin];
        caller_may_use(&ctx, plugin, &entry.gate)?;
        // The plugin knows the tool by its own name (the served one may carry a prefix).
        let own = entry.own.as_str();
        // Invalid arguments are the model's to fix: an `isError` result, not a protocol error.
        let schemas = Arc::clone(&entry.schemas);
        let checked = off_the_workers(arguments.get().len(), {
            let (schemas, name, arguments) =
                (Arc::clone(&schemas), name.to_owned(), arguments.to_owned());
            move || schemas.check_arguments(&name, &arguments)
        })
        .await;
        if let Err(problem) = checked {
            plugin.refuse_tool_call(own);
            return PluginFailure::InvalidArguments(problem).into_mcp(plugin.name(), Request::Tool);
        }
        ctx.bind_plugin(plugin.component_digest())?;
        // A request id from a trusted balancer: run the call at most once across its retries.
        if let (Some(id), Some(ledger), false) = (ctx.call_id(), self.calls.get(), entry.repeatable)
        {
            let id = id.to_owned();
            let watch = ctx.clone();
            // Both boxed: inline, this rare path's future (the call's, kept across the ledger's
            // awaits) would size every call's future, held while it runs (BENCHMARKS.md,
            // "A request's future").
            let run = Box::pin(self.run_tool(plugin, own, arguments, schemas, ctx));
            let limit = plugin.limits().timeout;
            return Box::pin(super::at_most_once::at_most_once(
                ledger, &id, name, arguments, limit, &watch, run,
            ))
            .await;
        }
        self.run_tool(plugin, own, arguments, schemas, ctx).await
    }

    async fn get_prompt(
        &self,
        target: Pinned,
        name: &str,
        arguments: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> MethodResult {
        let catalog = &target.catalog;
        let Some(entry) = catalog.prompts.index.get(name) else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown prompt `{name}`"
            )));
        };
        let plugin = &catalog.plugins[entry.plugin];
        caller_may_use(&ctx, plugin, &entry.gate)?;
        if let Some(missing) = entry.required.iter().find(|r| !arguments.contains_key(*r)) {
            return Err(ErrorObject::invalid_params(format!(
                "missing required argument `{missing}` for prompt `{name}`"
            )));
        }
        let arguments: Vec<(String, String)> = arguments.into_iter().collect();
        ctx.bind_plugin(plugin.component_digest())?;
        let links = LinkSlot::default();
        let reach = ClientBridge::linking(plugin, ctx.clone(), self.hub.clone(), links.clone());
        let request = Request::Prompt;
        let outcome = match plugin.get_prompt(&entry.own, &arguments, reach).await {
            Ok(Ok(messages)) => convert::prompt_result(&entry.description, &messages)
                .and_then(|result| within_limit(plugin, result, request)),
            Ok(Err(e)) => PluginFailure::Guest(e).into_mcp(plugin.name(), request),
            Err(e) => PluginFailure::Run(e).into_mcp(plugin.name(), request),
        };
        let linking = self.linking.get();
        Box::pin(or_link_required(
            linking,
            &links,
            &ctx,
            plugin.name(),
            request,
            outcome,
        ))
        .await
    }

    fn get_skill(&self, target: Pinned, uri: &str, ctx: &RequestContext) -> MethodResult {
        let catalog = &target.catalog;
        let Some((plugin, gate, entry)) = catalog.skill(uri) else {
            return Err(ErrorObject::invalid_params(format!(
                "no skill is served at `{uri}` (a skill is named by its SKILL.md's URI; skills/list lists them)"
            )));
        };
        caller_may_use(ctx, plugin, gate)?;
        convert::enclosed(r#"{"skill":"#, entry, "}")
    }

    fn read_directory(
        &self,
        target: Pinned,
        uri: &str,
        cursor: Option<&str>,
        ctx: &RequestContext,
    ) -> MethodResult {
        let catalog = &target.catalog;
        let Some((plugin, gate)) = catalog.directory_owner(uri) else {
            let why = if catalog.skill_file(uri).is_some() {
                "is a file, not a directory"
            } else {
                "names no directory served"
            };
            return Err(ErrorObject::invalid_params(format!("`{uri}` {why}")));
        };
        caller_may_use(ctx, plugin, gate)?;
        catalog.directory_page(uri, cursor, ctx.caller())
    }

    async fn read_resource(&self, target: Pinned, uri: &str, ctx: RequestContext) -> MethodResult {
        let catalog = &target.catalog;
        if let Some((plugin, gate, file)) = catalog.skill_file(uri) {
            caller_may_use(&ctx, plugin, gate)?;
            return convert::skill_file_result(file);
        }
        let Some((plugin, gate)) = catalog.resource_owner(uri) else {
            return Err(convert::resource_not_found(uri));
        };
        caller_may_use(&ctx, plugin, gate)?;
        ctx.bind_plugin(plugin.component_digest())?;
        let links = LinkSlot::default();
        let reach = ClientBridge::linking(plugin, ctx.clone(), self.hub.clone(), links.clone());
        let request = Request::Resource(uri);
        let outcome = match plugin.read_resource(uri, reach).await {
            Ok(Ok(contents)) => convert::read_result(&contents)
                .and_then(|result| within_limit(plugin, result, request)),
            Ok(Err(e)) => PluginFailure::Guest(e).into_mcp(plugin.name(), request),
            Err(e) => PluginFailure::Run(e).into_mcp(plugin.name(), request),
        };
        let linking = self.linking.get();
        Box::pin(or_link_required(
            linking,
            &links,
            &ctx,
            plugin.name(),
            request,
            outcome,
        ))
        .await
    }

    async fn complete(
        &self,
        target: Pinned,
        params: CompleteParams,
        ctx: RequestContext,
    ) -> MethodResult {
        let catalog = &target.catalog;
        let (plugin, gate, reference) = match &params.reference {
            CompletionReference::Prompt { name } => {
                let entry = catalog.prompts.index.get(name).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("unknown prompt `{name}`"))
                })?;
                (
                    entry.plugin,
                    &entry.gate,
                    CompletionRef::Prompt(entry.own.clone()),
                )
            }
            CompletionReference::Resource { uri } => {
                let entry = catalog
                    .templates
                    .iter()
                    .find(|t| t.uri_template == *uri)
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!("unknown resource template `{uri}`"))
                    })?;
                (
                    entry.plugin,
                    &entry.gate,
                    CompletionRef::ResourceTemplate(uri.clone()),
                )
            }
        };
        let plugin = &catalog.plugins[plugin];
        caller_may_use(&ctx, plugin, gate)?;
        if !plugin.exports().completion() {
            return convert::no_completions();
        }
        let context: Vec<(String, String)> = params
            .context
            .map(|c| c.arguments.into_iter().collect())
            .unwrap_or_default();
        let argument = &params.argument;
        let reach = ClientBridge::reach(plugin, ctx, self.hub.clone());
        match plugin
            .complete(&reference, &argument.name, &argument.value, &context, reach)
            .await
        {
            Ok(Ok(result)) => convert::completion_result(result),
            Ok(Err(e)) => PluginFailure::Guest(e).into_mcp(plugin.name(), Request::Completion),
            Err(e) => PluginFailure::Run(e).into_mcp(plugin.name(), Request::Completion),
        }
    }
}

impl PluginSet {
    /// Run a checked tool call in its plugin and turn the outcome into MCP; when it needs the
    /// caller to link an account, link it through the client and run it once more (`link`).
    async fn run_tool(
        &self,
        plugin: &PluginCode,
        own: &str,
        arguments: &RawValue,
        schemas: Arc<super::validate::ToolSchemas>,
        ctx: RequestContext,
    ) -> MethodResult {
        let request = if ctx.in_task() {
            Request::TaskTool
        } else {
            Request::Tool
        };
        run_linking(self.linking.get(), &ctx, plugin.name(), request, |slot| {
            self.run_tool_once(
                plugin,
                own,
                arguments,
                Arc::clone(&schemas),
                ctx.clone(),
                slot,
            )
        })
        .await
    }

    /// Run a checked tool call in its plugin once and turn the outcome into MCP; a link the
    /// caller must make first is recorded in `links`.
    async fn run_tool_once(
        &self,
        plugin: &PluginCode,
        own: &str,
        arguments: &RawValue,
        schemas: Arc<super::validate::ToolSchemas>,
        ctx: RequestContext,
        links: LinkSlot,
    ) -> MethodResult {
        let span = tracing::debug_span!("tools/call", plugin = &**plugin.name(), tool = own);
        let any_structured = ctx_accepts_any_structured(&ctx);
        let request = if ctx.in_task() {
            Request::TaskTool
        } else {
            Request::Tool
        };
        let reach = ClientBridge::linking(plugin, ctx, self.hub.clone(), links);
        let outcome = plugin
            .call_tool(own, arguments.get(), reach)
            .instrument(span)
            .await;
        let result = match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                return PluginFailure::Guest(error).into_mcp(plugin.name(), request);
            }
            Err(error) => return PluginFailure::Run(error).into_mcp(plugin.name(), request),
        };
        let limit = plugin.limits().result_bytes;
        if let Some(structured) = result.structured.as_deref() {
            // Too large to send anyway: refused below, without validating it.
            if structured.len() <= limit {
                let checked = match convert::check_structured(structured, any_structured) {
                    Ok(()) => {
                        let (structured, is_error) = (structured.to_owned(), result.is_error);
                        off_the_workers(structured.len(), move || {
                            schemas.check_output(Some(&structured), is_error)
                        })
                        .await
                    }
                    Err(problem) => Err(problem),
                };
                if let Err(problem) = checked {
                    metrics().invalid_result(plugin.name());
                    return PluginFailure::InvalidOutput(problem).into_mcp(plugin.name(), request);
                }
            }
        } else if let Err(problem) = schemas.check_output(None, result.is_error) {
            metrics().invalid_result(plugin.name());
            return PluginFailure::InvalidOutput(problem).into_mcp(plugin.name(), request);
        }
        let result = match convert::call_tool_result(&result) {
            Ok(result) => result,
            Err(problem) => {
                metrics().invalid_result(plugin.name());
                return PluginFailure::InvalidOutput(problem).into_mcp(plugin.name(), request);
            }
        };
        within_limit(plugin, result, request)
    }
}

/// JSON text this large or larger is validated on a blocking thread, so a heavy validation
/// never holds up the async workers (and with them every other request).
const INLINE_VALIDATION_BYTES: usize = 64 << 10;

/// Large validations running at once: each builds a tree several times its input's size, so
/// a flood of large calls waits its turn rather than multiplying the host's memory.
const LARGE_VALIDATIONS: usize = 2;

/// Run `check` here when the input is small, else on a blocking thread, at most
/// [`LARGE_VALIDATIONS`] at a time.
async fn off_the_workers(
    size: usize,
    check: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(LARGE_VALIDATIONS);
    if size < INLINE_VALIDATION_BYTES {
        return check();
    }
    let Ok(_turn) = TURNS.acquire().await else {
        return Err("validation failed: the host is shutting down".to_owned());
    };
    tokio::task::spawn_blocking(check)
        .await
        .unwrap_or_else(|e| Err(format!("validation failed: {e}")))
}

/// `output` if it is within the plugin's result limit, else the failure saying by how much.
fn within_limit(plugin: &PluginCode, output: MethodOutput, request: Request<'_>) -> MethodResult {
    let (size, limit) = (output.body.get().len(), plugin.limits().result_bytes);
    if size > limit {
        metrics().invalid_result(plugin.name());
        return PluginFailure::TooLarge { size, limit }.into_mcp(plugin.name(), request);
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::catalog::{EventHub, PluginSet};
    use crate::principal::Principal;
    use crate::protocol::jsonrpc::decode;
    use crate::server::{Mode, Session};

    /// A request's future is held whole for as long as the request runs, so every request in
    /// flight costs its size. Rare paths inline in it (an `async fn` holds the future it
    /// awaits; a wrapper, the future it was passed and the one it made of it) once made a
    /// tool call's 43 KB; with them boxed it is about 11 KB (BENCHMARKS.md, "A request's
    /// future").
    #[tokio::test]
    async fn a_tool_calls_future_stays_small() {
        let (hub, _relists) = EventHub::new();
        let plugins = Arc::new(PluginSet::new(Vec::new(), 100, false, hub));
        let session = Arc::new(Session::new(plugins, Mode::Dual, Arc::default()));
        let (replies, _queue) = tokio::sync::mpsc::channel(8);
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
        let pending = session
            .accept(decode(line), None, &replies, &Principal::local())
            .await
            .expect("a request is work to run");
        let size = std::mem::size_of_val(&*pending.work);
        assert!(size <= 16 << 10, "a tools/call's future is {size} bytes");
    }
}
