//! The reference server `@modelcontextprotocol/server-sequential-thinking`, as an mcpbox
//! plugin: the one tool `sequentialthinking`, with the original's name, title, description,
//! input and output schemas and annotations (`src/*.json`, `src/description.txt`, taken from
//! its `tools/list`), and its results: the thought's number (raised to the total when it goes
//! past it), the branches seen so far and how many thoughts were recorded.
//!
//! The original keeps its thought history in memory, per process. A plugin instance lives for
//! one call, so the history is kept in plugin state instead: a caller bucket, so each user of a
//! shared mcpbox has their own history, as each user of the original has their own process.
//! Its manifest keeps the bucket in mcpbox's memory (`in-memory = true`), so the history lasts
//! as long as the mcpbox process, as the original's lasts as long as its own.

use mcpbox_sdk::serde_json::Value;
use mcpbox_sdk::state::Store;
use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, Serialize, Tool, ToolResult, Tools};

/// The original's tool description, verbatim.
const DESCRIPTION: &str = include_str!("description.txt");
/// The original's input schema, verbatim.
const INPUT_SCHEMA: &str = include_str!("input-schema.json");
/// The original's output schema, verbatim.
const OUTPUT_SCHEMA: &str = include_str!("output-schema.json");

/// The caller bucket holding the history (granted in `sequential_thinking.toml`).
const BUCKET: &str = "thinking";

/// The arguments, as the input schema admits them (the booleans may be strings). The schema
/// served is the original's (`input-schema.json`), not one derived from this struct.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Thought {
    #[expect(dead_code, reason = "the original only logs it")]
    thought: String,
    next_thought_needed: Value,
    thought_number: u64,
    total_thoughts: u64,
    #[serde(default)]
    is_revision: Option<Value>,
    #[serde(default)]
    branch_from_thought: Option<u64>,
    #[serde(default)]
    branch_id: Option<String>,
    #[serde(default)]
    needs_more_thoughts: Option<Value>,
}

/// What a thought returns, in the original's key order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Recorded {
    thought_number: u64,
    total_thoughts: u64,
    next_thought_needed: bool,
    branches: Vec<String>,
    thought_history_length: i64,
}

/// The original's error for an argument that fails its schema, verbatim.
fn invalid(message: &str, at: &str) -> String {
    format!(
        "MCP error -32602: Input validation error: Invalid arguments for tool sequentialthinking: {message} at {at}"
    )
}

/// A boolean, or the string `true`/`false` in any case, as the original coerces them.
fn coerced(value: &Value, at: &str) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        Value::String(s) => Err(invalid(
            &format!("Expected boolean or \"true\"/\"false\" string, received \"{s}\""),
            at,
        )),
        _ => Err(invalid("Expected boolean or string", at)),
    }
}

/// Branch ids in the order a JavaScript object lists its keys: array indices (canonical
/// decimal integers below 2³²−1) first, in numeric order, then the rest as inserted.
fn in_key_order(ids: &[String]) -> Vec<String> {
    let index = |id: &str| -> Option<u32> {
        let n: u32 = id.parse().ok()?;
        (n != u32::MAX && n.to_string() == id).then_some(n)
    };
    let mut numeric: Vec<(u32, &String)> = ids
        .iter()
        .filter_map(|id| index(id).map(|n| (n, id)))
        .collect();
    numeric.sort_by_key(|(n, _)| *n);
    numeric
        .into_iter()
        .map(|(_, id)| id.clone())
        .chain(ids.iter().filter(|id| index(id).is_none()).cloned())
        .collect()
}

fn process(input: &Thought) -> Result<ToolResult, String> {
    let next = coerced(&input.next_thought_needed, "nextThoughtNeeded")?;
    if let Some(value) = &input.is_revision {
        coerced(value, "isRevision")?;
    }
    if let Some(value) = &input.needs_more_thoughts {
        coerced(value, "needsMoreThoughts")?;
    }
    let total = input.total_thoughts.max(input.thought_number);
    let store = Store::open(BUCKET).map_err(|e| e.to_string())?;
    let length = store.increment("history", 1).map_err(|e| e.to_string())?;
    let mut branches: Vec<String> = store
        .get("branches")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    if let (Some(_), Some(id)) = (input.branch_from_thought, &input.branch_id)
        && !id.is_empty()
        && !branches.contains(id)
    {
        branches.push(id.clone());
        store
            .set("branches", &branches)
            .map_err(|e| e.to_string())?;
    }
    let recorded = Recorded {
        thought_number: input.thought_number,
        total_thoughts: total,
        next_thought_needed: next,
        branches: in_key_order(&branches),
        thought_history_length: length,
    };
    let structured = mcpbox_sdk::serde_json::to_string(&recorded).map_err(|e| e.to_string())?;
    let text = mcpbox_sdk::serde_json::to_string_pretty(&recorded).map_err(|e| e.to_string())?;
    Ok(ToolResult::text(text).with_structured(structured))
}

struct SequentialThinking;

impl Plugin for SequentialThinking {
    fn tools(tools: &mut Tools) {
        tools.add_with(
            "sequentialthinking",
            || {
                Tool::new("sequentialthinking", DESCRIPTION)
                    .title("Sequential Thinking")
                    .input_schema(INPUT_SCHEMA)
                    .output_schema(OUTPUT_SCHEMA)
                    .read_only(true)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false)
            },
            |input: Thought| match process(&input) {
                Ok(result) => result,
                Err(message) => ToolResult::error(message),
            },
        );
    }
}

mcpbox_sdk::export!(SequentialThinking);
