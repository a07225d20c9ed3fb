//! The management tools as `tools/list` shows them: their names (reserved by the catalog),
//! descriptions and input schemas. Every input is bounded here and again where it is read.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::catalog::{INSTALL_PLUGIN, LIST_PLUGINS, REMOVE_PLUGIN, SEARCH_PLUGINS};

/// The most characters of a search query.
pub const MAX_QUERY_CHARS: usize = 200;
/// The most characters of a reference.
pub const MAX_REFERENCE_CHARS: usize = 512;
/// The most grants an install's arguments may name.
pub const MAX_GRANT_IDS: usize = 64;
/// The most results a search returns.
pub const MAX_RESULTS: usize = 20;

/// The tools, in the order they are listed.
pub fn items() -> Vec<Arc<RawValue>> {
    [search(), install(), remove(), list()]
        .iter()
        .filter_map(|tool| serde_json::value::to_raw_value(tool).ok())
        .map(Arc::from)
        .collect()
}

fn search() -> Value {
    json!({
        "name": SEARCH_PLUGINS,
        "title": "Search plugins",
        "description": "Find plugins that offer a capability: matches the words of `query` against the plugins the operator's sources offer (their names, descriptions and tools) and the tools already installed that you may use. Install one with mcpbox_install_plugin (the user is asked to approve it).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS, "description": "Words describing the capability, such as `weather forecast`."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "The most results (default 10)."}
            },
            "required": ["query"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": true}
    })
}

fn install() -> Value {
    json!({
        "name": INSTALL_PLUGIN,
        "title": "Install a plugin",
        "description": "Install a plugin from the operator's sources (a reference mcpbox_search_plugins found, such as `registry.example/mcp/weather:1.2`). The user is shown exactly what it would be granted (folders, hosts, variables, state, limits), capped by the operator, and only their accept installs it; its tools are then served to every client. `grants` may name grant ids to keep (the rest are left out); it can never add one.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "reference": {"type": "string", "maxLength": MAX_REFERENCE_CHARS, "description": "REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST."},
                "name": {"type": "string", "maxLength": 64, "description": "The plugin's name (default: the repository's last segment)."},
                "grants": {"type": "array", "maxItems": MAX_GRANT_IDS, "items": {"type": "string", "maxLength": MAX_REFERENCE_CHARS}, "description": "Only these of the grants on offer (ids such as `host:api.example.com`, `folder:/srv/data:read-only`, `env:TZ`, `bucket:notes`); absent: all on offer."}
            },
            "required": ["reference"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true}
    })
}

fn remove() -> Value {
    json!({
        "name": REMOVE_PLUGIN,
        "title": "Remove a plugin",
        "description": "Remove a plugin that mcpbox installed (by its name, as mcpbox_list_plugins shows it). The user is asked to confirm; its tools then stop being served to every client.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 64}
            },
            "required": ["name"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

fn list() -> Value {
    json!({
        "name": LIST_PLUGINS,
        "title": "List plugins",
        "description": "The plugins served that you may use, each with its tools; for those mcpbox installed, where they came from (reference, digest, signer).",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}
