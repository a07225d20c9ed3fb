//! Preparing one plugin's lists for the catalog, once per plugin version: names and URIs are
//! checked, items serialised, tool schemas compiled and URI templates parsed. A catalog
//! rebuild (every reload of any plugin) then only merges prepared pieces, sharing them, and an
//! invalid item is reported once, when its plugin loads.

use std::path::Path;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::convert;
use super::names;
use super::uri_template::UriTemplate;
use super::validate::ToolSchemas;
use crate::engine::PluginLists;

/// A tool ready to serve.
pub struct PreparedTool {
    pub name: String,
    pub json: Arc<RawValue>,
    pub schemas: Arc<ToolSchemas>,
}

/// A prompt ready to serve.
pub struct PreparedPrompt {
    pub name: String,
    pub json: Arc<RawValue>,
    pub description: String,
    pub required: Vec<String>,
}

/// A resource ready to serve.
pub struct PreparedResource {
    pub uri: String,
    pub json: Arc<RawValue>,
}

/// A resource template ready to serve.
pub struct PreparedTemplate {
    pub uri_template: String,
    pub json: Arc<RawValue>,
    pub matcher: UriTemplate,
}

/// Everything valid a plugin offers, in its own order, and what was refused and why.
#[derive(Default)]
pub struct Prepared {
    pub tools: Vec<PreparedTool>,
    pub prompts: Vec<PreparedPrompt>,
    pub resources: Vec<PreparedResource>,
    pub templates: Vec<PreparedTemplate>,
    /// Items that cannot be served: what (`tool `x``) and why.
    pub refused: Vec<(String, String)>,
}

/// Check and prepare `lists`; items that cannot be served are logged (naming the plugin, its
/// file and the reason) and left out.
pub fn prepare(plugin: &str, file: &Path, lists: &PluginLists) -> Prepared {
    let mut refused = Vec::new();
    let mut refuse = |what: &str, key: &str, why: &str| {
        tracing::warn!(plugin, file = %file.display(), "refused {what} `{key}`: {why}");
        refused.push((format!("{what} `{key}`"), why.to_owned()));
    };
    let mut prepared = Prepared::default();
    for tool in &lists.tools {
        let ready = names::name_problem(&tool.name)
            .map_or(Ok(()), Err)
            .and_then(|()| Ok((convert::tool_json(tool)?, ToolSchemas::compile(tool)?)));
        match ready {
            Ok((json, schemas)) => prepared.tools.push(PreparedTool {
                name: tool.name.clone(),
                json: json.into(),
                schemas: Arc::new(schemas),
            }),
            Err(problem) => refuse("tool", &tool.name, &problem),
        }
    }
    for prompt in &lists.prompts {
        let ready = names::name_problem(&prompt.name)
            .map_or(Ok(()), Err)
            .and_then(|()| convert::prompt_json(prompt));
        match ready {
            Ok(json) => prepared.prompts.push(PreparedPrompt {
                name: prompt.name.clone(),
                json: json.into(),
                description: prompt.description.clone(),
                required: prompt
                    .arguments
                    .iter()
                    .filter(|a| a.required)
                    .map(|a| a.name.clone())
                    .collect(),
            }),
            Err(problem) => refuse("prompt", &prompt.name, &problem),
        }
    }
    for resource in &lists.resources {
        let ready = names::uri_problem(&resource.uri)
            .map_or(Ok(()), Err)
            .and_then(|()| {
                convert::to_raw(&convert::resource_value(resource)).map_err(|e| e.message)
            });
        match ready {
            Ok(json) => prepared.resources.push(PreparedResource {
                uri: resource.uri.clone(),
                json: json.into(),
            }),
            Err(problem) => refuse("resource", &resource.uri, &problem),
        }
    }
    for template in &lists.templates {
        let ready = UriTemplate::parse(&template.uri_template)
            .and_then(|matcher| names::uri_problem(&template.uri_template).map_or(Ok(matcher), Err))
            .and_then(|matcher| Ok((matcher, convert::template_json(template)?)));
        match ready {
            Ok((matcher, json)) => prepared.templates.push(PreparedTemplate {
                uri_template: template.uri_template.clone(),
                json: json.into(),
                matcher,
            }),
            Err(problem) => refuse("resource template", &template.uri_template, &problem),
        }
    }
    prepared.refused = refused;
    prepared
}
