//! The reference servers beside their mcpbox plugins (#28): the original, installed from npm
//! into `target/tools/` on first use and run on Node 22, and the plugin under `mcpbox serve`,
//! both driven by rmcp's client through the same script, compared call by call.
//!
//! So far: `@modelcontextprotocol/server-sequential-thinking` against
//! `plugins/sequential-thinking`.

use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::{STEP, connect_command, json as to_json, mcpbox, plugin_dir};
use crate::tools;

/// The original, pinned to its current release.
const SEQUENTIAL_THINKING: &str = "@modelcontextprotocol/server-sequential-thinking@2026.8.31";

/// The original sequential-thinking server, started on Node 22 and connected.
async fn original_sequential_thinking() -> RunningService<RoleClient, ()> {
    let prefix = tokio::task::spawn_blocking(|| tools::npm(&[SEQUENTIAL_THINKING]))
        .await
        .unwrap();
    let mut command = Command::new("node");
    command
        .arg(
            prefix.join(
                "node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js",
            ),
        )
        .env("PATH", tools::node_path(&prefix))
        // Its thoughts, drawn in boxes on stderr, are for a person watching.
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    connect_command(command, ()).await.0
}

/// The plugin under `mcpbox serve`, with its manifest, connected.
async fn plugin_sequential_thinking(dir: &std::path::Path) -> RunningService<RoleClient, ()> {
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plugins/sequential-thinking/sequential_thinking.toml"),
        dir.join("sequential_thinking.toml"),
    )
    .unwrap();
    connect_command(mcpbox(dir, &[]), ()).await.0
}

/// A tool as `tools/list` shows it, with what may be left implicit made explicit: an absent
/// `execution.taskSupport` is `forbidden`.
fn surface(tool: &Value) -> Value {
    let mut tool = tool.clone();
    if tool.get("execution").is_none() {
        tool["execution"] = json!({"taskSupport": "forbidden"});
    }
    tool
}

async fn call(service: &RunningService<RoleClient, ()>, arguments: &Value) -> Value {
    let Value::Object(arguments) = arguments.clone() else {
        unreachable!()
    };
    let params =
        rmcp::model::CallToolRequestParams::new("sequentialthinking").with_arguments(arguments);
    let result = tokio::time::timeout(STEP, service.call_tool(params))
        .await
        .expect("answered in time")
        .expect("a result");
    to_json(&result)
}

#[tokio::test]
async fn sequential_thinking_matches_the_original_call_for_call() {
    let original = original_sequential_thinking().await;
    let dir = plugin_dir(&[("sequential_thinking", "sequential_thinking.wasm")]);
    let plugin = plugin_sequential_thinking(dir.path()).await;

    // The same surface: name, title, description, schemas, annotations.
    let theirs = tokio::time::timeout(STEP, original.list_all_tools()).await;
    let ours = tokio::time::timeout(STEP, plugin.list_all_tools()).await;
    let theirs = to_json(&theirs.expect("answered in time").unwrap());
    let ours = to_json(&ours.expect("answered in time").unwrap());
    assert_eq!(theirs.as_array().unwrap().len(), 1, "{theirs}");
    assert_eq!(surface(&ours[0]), surface(&theirs[0]));

    // The same script, call for call. `true` marks a refusal the plugin makes itself (its
    // text must match); other bad input is refused by mcpbox's schema check before the plugin
    // runs, with its own text (the outcome must match).
    let script: Vec<(Value, bool)> = vec![
        (
            json!({"thought": "Start", "nextThoughtNeeded": true, "thoughtNumber": 1, "totalThoughts": 3}),
            false,
        ),
        // Past the total: the total follows; a string boolean; a branch.
        (
            json!({"thought": "Jump", "nextThoughtNeeded": "false", "thoughtNumber": 5, "totalThoughts": 3,
                   "branchFromThought": 1, "branchId": "x"}),
            false,
        ),
        // Branch ids that look like array indices are listed first, in numeric order.
        (
            json!({"thought": "Two", "nextThoughtNeeded": "TRUE", "thoughtNumber": 2, "totalThoughts": 5,
                   "branchFromThought": 1, "branchId": "2"}),
            false,
        ),
        (
            json!({"thought": "One", "nextThoughtNeeded": true, "thoughtNumber": 3, "totalThoughts": 5,
                   "branchFromThought": 2, "branchId": "1"}),
            false,
        ),
        // The same branch again; an empty branch id is no branch.
        (
            json!({"thought": "Again", "nextThoughtNeeded": true, "thoughtNumber": 4, "totalThoughts": 5,
                   "branchFromThought": 1, "branchId": "x"}),
            false,
        ),
        (
            json!({"thought": "Empty", "nextThoughtNeeded": true, "thoughtNumber": 4, "totalThoughts": 5,
                   "branchFromThought": 1, "branchId": ""}),
            false,
        ),
        (
            json!({"thought": "Rethink ✓ 日本", "nextThoughtNeeded": false, "thoughtNumber": 2,
                   "totalThoughts": 2, "isRevision": "True", "revisesThought": 1, "needsMoreThoughts": false}),
            false,
        ),
        // Refused by the plugin, with the original's words.
        (
            json!({"thought": "Maybe", "nextThoughtNeeded": "maybe", "thoughtNumber": 1, "totalThoughts": 3}),
            true,
        ),
        (
            json!({"thought": "Nope", "nextThoughtNeeded": true, "thoughtNumber": 1, "totalThoughts": 3,
                   "isRevision": "nope"}),
            true,
        ),
        // Refused by the schema.
        (
            json!({"nextThoughtNeeded": true, "thoughtNumber": 1, "totalThoughts": 3}),
            false,
        ),
        (
            json!({"thought": "Zero", "nextThoughtNeeded": true, "thoughtNumber": 0, "totalThoughts": 3}),
            false,
        ),
        (
            json!({"thought": "Float", "nextThoughtNeeded": true, "thoughtNumber": 1.5, "totalThoughts": 3}),
            false,
        ),
        // And on: the history counts only the thoughts recorded.
        (
            json!({"thought": "End", "nextThoughtNeeded": false, "thoughtNumber": 6, "totalThoughts": 6}),
            false,
        ),
    ];
    for (arguments, same_text) in &script {
        let (theirs, ours) = (
            call(&original, arguments).await,
            call(&plugin, arguments).await,
        );
        let error = theirs["isError"] == json!(true);
        assert_eq!(
            ours["isError"] == json!(true),
            error,
            "{arguments}\noriginal: {theirs}\nmcpbox: {ours}"
        );
        if !error || *same_text {
            assert_eq!(
                ours["content"], theirs["content"],
                "{arguments}\noriginal: {theirs}\nmcpbox: {ours}"
            );
            assert_eq!(
                ours.get("structuredContent"),
                theirs.get("structuredContent"),
                "{arguments}"
            );
        }
    }
    original.cancel().await.unwrap();
    plugin.cancel().await.unwrap();
}
