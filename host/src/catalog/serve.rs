//! The catalog as the sessions' [`Backend`]: each request pins the current catalog, finds the
//! plugin that owns the name, checks arguments, calls the plugin through the engine with a
//! bridge to its client, and turns the outcome into MCP (the conversion is `convert`'s).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::broadcast;
use tracing::Instrument;

use super::bridge::ClientBridge;
use super::convert;
use super::live::PluginSet;
use super::merged::{over_limit, within_limit};
use crate::engine::CompletionRef;
use crate::protocol::ErrorObject;
use crate::protocol::mcp::{CompleteParams, CompletionReference};
use crate::server::{Backend, ListKind, MethodResult, Offers, RequestContext, ServerEvent};

/// Whether the request's revision takes structured content of any JSON type (2026-07-28) or
/// only an object (2025-11-25).
fn ctx_accepts_any_structured(ctx: &RequestContext) -> bool {
    ctx.is_stateless()
}

/// The most completion values sent to a client.
const MAX_COMPLETION_VALUES: usize = 100;

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
        self.catalog().offers
    }

    fn events(&self) -> Option<broadcast::Receiver<ServerEvent>> {
        Some(self.hub.subscribe())
    }

    fn list(&self, kind: ListKind, cursor: Option<&str>) -> MethodResult {
        self.catalog().page(kind, cursor)
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
        let any_structured = ctx_accepts_any_structured(&ctx);
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.hub.clone());
        let outcome = plugin
            .call_tool(name, arguments.get(), host)
            .instrument(span)
            .await;
        if let Ok(Ok(result)) = &outcome {
            let checked = match result.structured.as_deref() {
                Some(structured) if structured.len() > plugin.limits().result_bytes => Ok(()),
                Some(structured) => convert::check_structured(structured, any_structured),
                None => Ok(()),
            };
            let checked = checked.and_then(|()| {
                entry
                    .schemas
                    .check_output(result.structured.as_deref(), result.is_error)
            });
            if let Err(problem) = checked {
                tracing::warn!(plugin = &**plugin.name(), tool = name, "{problem}");
                return convert::error_result(&format!("plugin `{}` {problem}", plugin.name()));
            }
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
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.hub.clone());
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
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.hub.clone());
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
        let host = ClientBridge::host(Arc::clone(plugin.name()), ctx, self.hub.clone());
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
