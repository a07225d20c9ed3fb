//! The reference server `@modelcontextprotocol/server-memory`, as an mcpbox plugin: a knowledge
//! graph of entities (a name, a type, observations) and relations between them, with the
//! original's nine tools (names, titles, descriptions, input and output schemas and
//! annotations verbatim, in `src/tools.json`, taken from its `tools/list`), the same results
//! and error texts, and its resource `memory://knowledge-graph` (subscribers are told when a
//! tool changed the graph: the host tells only the caller's own, as the bucket is a caller's).
//!
//! The original keeps one graph in a JSONL file beside it. The plugin keeps it in durable state
//! (the embedded store, or Redis shared by replicas), one graph per caller (a caller bucket): each
//! user of a shared mcpbox has their own. Every change is one atomic read-modify-write of the
//! caller's graph, so two calls at once never lose each other's changes. A user whose graph
//! is still empty can start from the original's file (`import-jsonl`, read only).

use mcpbox_sdk::serde_json::{self, Value};
use mcpbox_sdk::state::Store;
use mcpbox_sdk::{
    Deserialize, JsonSchema, Plugin, ResourceInfo, Resources, Serialize, ToolResult, Tools, config,
    host,
};

/// The original's tools, verbatim: name, title, description, schemas, annotations.
const TOOLS: &str = include_str!("tools.json");
/// The caller bucket (granted in `memory.toml`) and the key of the graph in it.
const BUCKET: &str = "memory";
const KEY: &str = "graph";
/// The resource the whole graph is read from.
const RESOURCE_URI: &str = "memory://knowledge-graph";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Entity {
    name: String,
    #[serde(rename = "entityType")]
    entity_type: String,
    observations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Relation {
    from: String,
    to: String,
    #[serde(rename = "relationType")]
    relation_type: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Graph {
    entities: Vec<Entity>,
    relations: Vec<Relation>,
}

#[derive(Deserialize, JsonSchema)]
struct CreateEntities {
    entities: Vec<Entity>,
}

#[derive(Deserialize, JsonSchema)]
struct Relations {
    relations: Vec<Relation>,
}

#[derive(Deserialize, JsonSchema)]
struct AddObservations {
    observations: Vec<NewObservations>,
}

#[derive(Deserialize, JsonSchema)]
struct NewObservations {
    #[serde(rename = "entityName")]
    entity_name: String,
    contents: Vec<String>,
}

#[derive(Serialize)]
struct Added {
    #[serde(rename = "entityName")]
    entity_name: String,
    #[serde(rename = "addedObservations")]
    added_observations: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
struct DeleteEntities {
    #[serde(rename = "entityNames")]
    entity_names: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
struct DeleteObservations {
    deletions: Vec<Deletion>,
}

#[derive(Deserialize, JsonSchema)]
struct Deletion {
    #[serde(rename = "entityName")]
    entity_name: String,
    observations: Vec<String>,
}

/// `read_graph` takes no arguments (and ignores any, as the original's schema allows them).
#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Deserialize, JsonSchema)]
struct Search {
    query: String,
}

#[derive(Deserialize, JsonSchema)]
struct Open {
    names: Vec<String>,
}

/// The graph of the original's JSONL file, read as it reads it: one JSON object a line (blank
/// lines skipped), `type` saying whether it is an entity or a relation.
fn parse_jsonl(text: &str) -> Result<Graph, String> {
    let mut graph = Graph::default();
    for (n, line) in text.split('\n').enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let field = |key: &str| item[key].clone();
        let strings = |key: &str| -> Vec<String> {
            item[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let text = |key: &str| field(key).as_str().unwrap_or_default().to_owned();
        match item["type"].as_str() {
            Some("entity") => graph.entities.push(Entity {
                name: text("name"),
                entity_type: text("entityType"),
                observations: strings("observations"),
            }),
            Some("relation") => graph.relations.push(Relation {
                from: text("from"),
                to: text("to"),
                relation_type: text("relationType"),
            }),
            _ => {}
        }
    }
    Ok(graph)
}

/// The graph a caller starts from: the original's file when the operator names one
/// (`import-jsonl`, in a granted directory), else an empty one.
fn seed() -> Result<Graph, String> {
    let Some(path) = config::get("import-jsonl").map_err(|e| e.to_string())? else {
        return Ok(Graph::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Graph::default()),
        Err(e) => return Err(format!("cannot read the graph to import, {path}: {e}")),
    };
    parse_jsonl(&text).map_err(|e| format!("the graph to import, {path}, is not JSONL: {e}"))
}

fn store() -> Result<Store, String> {
    Store::open(BUCKET).map_err(|e| e.to_string())
}

/// The caller's graph as it is now.
fn load() -> Result<Graph, String> {
    match store()?.get::<Graph>(KEY).map_err(|e| e.to_string())? {
        Some(graph) => Ok(graph),
        None => seed(),
    }
}

/// Change the caller's graph atomically: `change` gets the graph and returns what the call
/// answers, or an error (then nothing is written). The caller's subscribers hear of every
/// change (and nobody else: the host keeps a caller-bucket plugin's updates to the caller).
fn change<T>(mut change: impl FnMut(&mut Graph) -> Result<T, String>) -> Result<T, String> {
    let store = store()?;
    let start = seed_if_absent(&store)?;
    let mut outcome = None;
    store
        .update::<Graph, _>(KEY, |current| {
            let mut graph = current.unwrap_or_else(|| start.clone());
            match change(&mut graph) {
                Ok(answer) => {
                    outcome = Some(Ok(answer));
                    Some(graph)
                }
                Err(why) => {
                    outcome = Some(Err(why));
                    None
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let answer = outcome.unwrap_or_else(|| Err("the graph was not changed".to_owned()))?;
    host::notify_resource_updated(RESOURCE_URI);
    Ok(answer)
}

/// The seed, read only when the caller has no graph yet.
fn seed_if_absent(store: &Store) -> Result<Graph, String> {
    if store.exists(KEY).map_err(|e| e.to_string())? {
        Ok(Graph::default())
    } else {
        seed()
    }
}

/// A result as the original gives it: `value` as JSON indented by two for the text, and
/// `structured` as the structured content.
fn answer(text: &impl Serialize, structured: &impl Serialize) -> Result<ToolResult, String> {
    let text = serde_json::to_string_pretty(text).map_err(|e| e.to_string())?;
    let structured = serde_json::to_string(structured).map_err(|e| e.to_string())?;
    Ok(ToolResult::text(text).with_structured(structured))
}

/// The original's answer to a deletion.
fn deleted(message: &str) -> Result<ToolResult, String> {
    let structured = serde_json::json!({ "success": true, "message": message }).to_string();
    Ok(ToolResult::text(message).with_structured(structured))
}

fn create_entities(CreateEntities { entities }: CreateEntities) -> Result<ToolResult, String> {
    let created = change(|graph| {
        // Only names already in the graph are left out (not repeats within the call).
        let new: Vec<Entity> = entities
            .iter()
            .filter(|e| !graph.entities.iter().any(|x| x.name == e.name))
            .cloned()
            .collect();
        graph.entities.extend(new.iter().cloned());
        Ok(new)
    })?;
    answer(&created, &serde_json::json!({ "entities": created }))
}

fn create_relations(Relations { relations }: Relations) -> Result<ToolResult, String> {
    let created = change(|graph| {
        let new: Vec<Relation> = relations
            .iter()
            .filter(|r| !graph.relations.contains(r))
            .cloned()
            .collect();
        graph.relations.extend(new.iter().cloned());
        Ok(new)
    })?;
    answer(&created, &serde_json::json!({ "relations": created }))
}

fn add_observations(
    AddObservations { observations }: AddObservations,
) -> Result<ToolResult, String> {
    let results = change(|graph| {
        let mut results = Vec::new();
        for o in &observations {
            let entity = graph
                .entities
                .iter_mut()
                .find(|e| e.name == o.entity_name)
                .ok_or_else(|| format!("Entity with name {} not found", o.entity_name))?;
            let new: Vec<String> = o
                .contents
                .iter()
                .filter(|c| !entity.observations.contains(c))
                .cloned()
                .collect();
            entity.observations.extend(new.iter().cloned());
            results.push(Added {
                entity_name: o.entity_name.clone(),
                added_observations: new,
            });
        }
        Ok(results)
    })?;
    answer(&results, &serde_json::json!({ "results": results }))
}

fn delete_entities(DeleteEntities { entity_names }: DeleteEntities) -> Result<ToolResult, String> {
    change(|graph| {
        graph.entities.retain(|e| !entity_names.contains(&e.name));
        graph
            .relations
            .retain(|r| !entity_names.contains(&r.from) && !entity_names.contains(&r.to));
        Ok(())
    })?;
    deleted("Entities deleted successfully")
}

fn delete_observations(
    DeleteObservations { deletions }: DeleteObservations,
) -> Result<ToolResult, String> {
    change(|graph| {
        for d in &deletions {
            if let Some(entity) = graph.entities.iter_mut().find(|e| e.name == d.entity_name) {
                entity.observations.retain(|o| !d.observations.contains(o));
            }
        }
        Ok(())
    })?;
    deleted("Observations deleted successfully")
}

fn delete_relations(Relations { relations }: Relations) -> Result<ToolResult, String> {
    change(|graph| {
        graph.relations.retain(|r| !relations.contains(r));
        Ok(())
    })?;
    deleted("Relations deleted successfully")
}

/// The entities `keep` selects and every relation with an end among them.
fn subgraph(graph: Graph, keep: impl Fn(&Entity) -> bool) -> Graph {
    let entities: Vec<Entity> = graph.entities.into_iter().filter(|e| keep(e)).collect();
    let names: std::collections::HashSet<&str> = entities.iter().map(|e| e.name.as_str()).collect();
    let relations = graph
        .relations
        .into_iter()
        .filter(|r| names.contains(r.from.as_str()) || names.contains(r.to.as_str()))
        .collect();
    Graph {
        entities,
        relations,
    }
}

fn read_graph() -> Result<ToolResult, String> {
    let graph = load()?;
    answer(&graph, &graph)
}

fn search_nodes(Search { query }: Search) -> Result<ToolResult, String> {
    let query = query.to_lowercase();
    let found = subgraph(load()?, |e| {
        e.name.to_lowercase().contains(&query)
            || e.entity_type.to_lowercase().contains(&query)
            || e.observations
                .iter()
                .any(|o| o.to_lowercase().contains(&query))
    });
    answer(&found, &found)
}

fn open_nodes(Open { names }: Open) -> Result<ToolResult, String> {
    let found = subgraph(load()?, |e| names.contains(&e.name));
    answer(&found, &found)
}

/// Failures read as the original's: the message alone.
fn respond(outcome: Result<ToolResult, String>) -> ToolResult {
    outcome.unwrap_or_else(ToolResult::error)
}

struct Memory;

impl Plugin for Memory {
    fn tools(tools: &mut Tools) {
        tools
            .add_listed(TOOLS, "create_entities", |a: CreateEntities| {
                respond(create_entities(a))
            })
            .add_listed(TOOLS, "create_relations", |a: Relations| {
                respond(create_relations(a))
            })
            .add_listed(TOOLS, "add_observations", |a: AddObservations| {
                respond(add_observations(a))
            })
            .add_listed(TOOLS, "delete_entities", |a: DeleteEntities| {
                respond(delete_entities(a))
            })
            .add_listed(TOOLS, "delete_observations", |a: DeleteObservations| {
                respond(delete_observations(a))
            })
            .add_listed(TOOLS, "delete_relations", |a: Relations| {
                respond(delete_relations(a))
            })
            .add_listed(TOOLS, "read_graph", |_: Nothing| respond(read_graph()))
            .add_listed(TOOLS, "search_nodes", |a: Search| respond(search_nodes(a)))
            .add_listed(TOOLS, "open_nodes", |a: Open| respond(open_nodes(a)));
    }

    fn resources(resources: &mut Resources) {
        resources.add(
            ResourceInfo::new(RESOURCE_URI, "knowledge-graph")
                .title("Knowledge Graph")
                .description("The full knowledge graph with all entities and relations")
                .mime_type("application/json"),
            || load().and_then(|g| serde_json::to_string_pretty(&g).map_err(|e| e.to_string())),
        );
    }
}

mcpbox_sdk::export!(Memory);
