//! Preparing one plugin's lists for the catalog, once per plugin version: names and URIs are
//! checked, items serialised, tool schemas compiled and URI templates parsed. A catalog
//! rebuild (every reload of any plugin) then only merges prepared pieces, sharing them, and an
//! invalid item is reported once, when its plugin loads.
//!
//! No plugin may serve a URI in a scheme the host serves itself (`skill://`, see
//! [`names::RESERVED_SCHEMES`]): such resources and templates are refused here, naming the
//! plugin and the URI, and its other items are served.
//!
//! The plugin's [`Naming`] applies here: items its allow- and deny-lists hide are left out
//! (neither listed nor callable), tool and prompt names get its prefix (each item remembers
//! its own name, the one the plugin is called with), and names in its lists that the plugin
//! does not offer are warned about.

use std::path::Path;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::convert;
use super::names;
use super::uri_template::UriTemplate;
use super::validate::ToolSchemas;
use crate::engine::PluginLists;
use crate::policy::{ItemFilter, Naming, TaskSupport, TaskTools};

/// A tool ready to serve.
pub struct PreparedTool {
    /// The name it is served as (with the plugin's prefix).
    pub name: String,
    /// Its name in the plugin.
    pub own: String,
    pub json: Arc<RawValue>,
    pub schemas: Arc<ToolSchemas>,
    /// Annotated read-only or idempotent: running it twice changes nothing more than once,
    /// so it is not recorded under a balancer's request id (see `serve`).
    pub repeatable: bool,
    /// Whether it may run as a task (the manifest's `[tasks]`).
    pub task: TaskSupport,
}

/// A prompt ready to serve.
pub struct PreparedPrompt {
    /// The name it is served as (with the plugin's prefix).
    pub name: String,
    /// Its name in the plugin.
    pub own: String,
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
    /// Names in the plugin's allow- and deny-lists that it does not offer, each said as
    /// `tools.allow: `x``.
    pub unknown: Vec<String>,
}

/// Check and prepare `lists` under `naming`; items that cannot be served are logged (naming
/// the plugin, its file and the reason) and left out, as are the items `naming` hides.
pub fn prepare(
    plugin: &str,
    file: &Path,
    lists: &PluginLists,
    naming: &Naming,
    tasks: &TaskTools,
) -> Prepared {
    let mut refused = Vec::new();
    let mut refuse = |what: &str, key: &str, why: &str| {
        tracing::warn!(plugin, file = %file.display(), "refused {what} `{key}`: {why}");
        refused.push((format!("{what} `{key}`"), why.to_owned()));
    };
    let mut prepared = Prepared::default();
    for tool in lists.tools.iter().filter(|t| naming.tools.shows(&t.name)) {
        let (own, served) = (tool.name.clone(), naming.served_name(&tool.name));
        let tool_own_name = own.clone();
        let renamed;
        let tool = if served == tool.name {
            tool
        } else {
            renamed = crate::engine::Tool {
                name: served.clone(),
                ..tool.clone()
            };
            &renamed
        };
        let ready = names::name_problem(&served)
            .map_or(Ok(()), Err)
            .and_then(|()| {
                Ok((
                    convert::tool_json(tool, tasks.support(&own))?,
                    ToolSchemas::compile(tool)?,
                ))
            });
        match ready {
            Ok((json, schemas)) => prepared.tools.push(PreparedTool {
                name: served,
                own,
                json: json.into(),
                schemas: Arc::new(schemas),
                repeatable: tool
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.read_only == Some(true) || a.idempotent == Some(true)),
                task: tasks.support(&tool_own_name),
            }),
            Err(problem) => refuse("tool", &served, &problem),
        }
    }
    for prompt in lists
        .prompts
        .iter()
        .filter(|p| naming.prompts.shows(&p.name))
    {
        let served = naming.served_name(&prompt.name);
        let renamed;
        let shown = if served == prompt.name {
            prompt
        } else {
            renamed = crate::engine::Prompt {
                name: served.clone(),
                ..prompt.clone()
            };
            &renamed
        };
        let ready = names::name_problem(&served)
            .map_or(Ok(()), Err)
            .and_then(|()| convert::prompt_json(shown));
        match ready {
            Ok(json) => prepared.prompts.push(PreparedPrompt {
                name: served,
                own: prompt.name.clone(),
                json: json.into(),
                description: prompt.description.clone(),
                required: prompt
                    .arguments
                    .iter()
                    .filter(|a| a.required)
                    .map(|a| a.name.clone())
                    .collect(),
            }),
            Err(problem) => refuse("prompt", &served, &problem),
        }
    }
    for resource in lists
        .resources
        .iter()
        .filter(|r| naming.resources.shows(&r.uri))
    {
        let ready = names::uri_problem(&resource.uri)
            .or_else(|| names::reserved_problem(&resource.uri))
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
    for template in lists
        .templates
        .iter()
        .filter(|t| naming.resources.shows(&t.uri_template))
    {
        let ready = UriTemplate::parse(&template.uri_template)
            .and_then(|matcher| {
                names::uri_problem(&template.uri_template)
                    .or_else(|| names::reserved_problem(&template.uri_template))
                    .map_or(Ok(matcher), Err)
            })
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
    prepared.unknown = unknown_names(lists, naming);
    prepared.unknown.extend(
        [("optional", &tasks.optional), ("required", &tasks.required)]
            .into_iter()
            .flat_map(|(list, names)| names.iter().map(move |name| (list, name)))
            .filter(|(_, name)| !lists.tools.iter().any(|t| &t.name == *name))
            .map(|(list, name)| {
                format!("tasks.{list} names `{name}`, which the plugin does not offer")
            }),
    );
    for unknown in &prepared.unknown {
        tracing::warn!(plugin, file = %file.display(), "{unknown}");
    }
    prepared
}

/// The names `naming`'s lists hold that the plugin does not offer, each said once.
pub fn unknown_names(lists: &PluginLists, naming: &Naming) -> Vec<String> {
    let tools: Vec<&str> = lists.tools.iter().map(|t| t.name.as_str()).collect();
    let prompts: Vec<&str> = lists.prompts.iter().map(|p| p.name.as_str()).collect();
    let resources: Vec<&str> = lists
        .resources
        .iter()
        .map(|r| r.uri.as_str())
        .chain(lists.templates.iter().map(|t| t.uri_template.as_str()))
        .collect();
    let check = |kind: &str, filter: &ItemFilter, offered: &[&str]| -> Vec<String> {
        filter
            .listed()
            .filter(|(_, name)| !offered.contains(name))
            .map(|(list, name)| {
                format!("{kind}.{list} names `{name}`, which the plugin does not offer")
            })
            .collect()
    };
    let mut unknown = check("tools", &naming.tools, &tools);
    unknown.extend(check("prompts", &naming.prompts, &prompts));
    unknown.extend(check("resources", &naming.resources, &resources));
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Prompt, ResourceInfo, Tool};

    fn tool(name: &str) -> Tool {
        Tool {
            name: name.into(),
            title: None,
            description: "d".into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            annotations: None,
        }
    }

    fn lists() -> PluginLists {
        PluginLists {
            tools: vec![tool("add"), tool("list"), tool("remove")],
            prompts: vec![Prompt {
                name: "review".into(),
                title: None,
                description: "d".into(),
                arguments: Vec::new(),
            }],
            resources: ["todo://items", "todo://done"]
                .into_iter()
                .map(|uri| ResourceInfo {
                    uri: uri.into(),
                    name: "n".into(),
                    title: None,
                    description: None,
                    mime_type: None,
                    size: None,
                })
                .collect(),
            templates: Vec::new(),
        }
    }

    #[test]
    fn naming_prefixes_and_hides_and_names_what_the_plugin_lacks() {
        let naming = Naming {
            prefix: Some("todo_".into()),
            tools: ItemFilter {
                allow: Some(vec!["add".into(), "list".into(), "nope".into()]),
                deny: vec!["list".into()],
                ..ItemFilter::default()
            },
            prompts: ItemFilter::default(),
            resources: ItemFilter {
                allow: None,
                deny: vec!["todo://done".into()],
                ..ItemFilter::default()
            },
        };
        let prepared = prepare(
            "todo",
            Path::new("todo.wasm"),
            &lists(),
            &naming,
            &TaskTools::default(),
        );
        let tools: Vec<(&str, &str)> = prepared
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.own.as_str()))
            .collect();
        assert_eq!(tools, [("todo_add", "add")]);
        assert!(
            prepared.tools[0]
                .json
                .get()
                .contains(r#""name":"todo_add""#)
        );
        assert_eq!(prepared.prompts[0].name, "todo_review");
        assert_eq!(prepared.prompts[0].own, "review");
        let uris: Vec<&str> = prepared.resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["todo://items"]);
        assert_eq!(
            prepared.unknown,
            ["tools.allow names `nope`, which the plugin does not offer"]
        );
    }

    #[test]
    fn a_prefix_that_makes_a_name_too_long_refuses_the_item() {
        let naming = Naming {
            prefix: Some("p".repeat(32)),
            ..Naming::default()
        };
        let mut lists = lists();
        lists.tools = vec![tool(&"t".repeat(40))];
        let prepared = prepare(
            "p",
            Path::new("p.wasm"),
            &lists,
            &naming,
            &TaskTools::default(),
        );
        assert!(prepared.tools.is_empty());
        assert!(prepared.refused[0].1.contains("the limit is 64"));
    }
}
