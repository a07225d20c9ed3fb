//! The reference servers beside their mcpbox plugins (#28): the original, installed from npm
//! (run on Node 22) or PyPI into `target/tools/` on first use, and the plugin under `mcpbox
//! serve`, both driven by rmcp's client through the same script, compared call by call.
//!
//! So far: `@modelcontextprotocol/server-sequential-thinking` against
//! `plugins/sequential-thinking`, `mcp-server-time` against `plugins/time` (also on the days
//! clocks change, both processes under Debian's libfaketime), and
//! `@modelcontextprotocol/server-memory` against `plugins/memory` (and its own file imported).

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

async fn call_tool(
    service: &RunningService<RoleClient, ()>,
    tool: &'static str,
    arguments: &Value,
) -> Value {
    let Value::Object(arguments) = arguments.clone() else {
        unreachable!()
    };
    let params = rmcp::model::CallToolRequestParams::new(tool).with_arguments(arguments);
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
    let script: Vec<(&'static str, Value, bool)> = script
        .into_iter()
        .map(|(arguments, same_text)| ("sequentialthinking", arguments, same_text))
        .collect();
    compare(&original, &plugin, &script).await;
    original.cancel().await.unwrap();
    plugin.cancel().await.unwrap();
}

/// The original time server, pinned to its current release.
const TIME: &str = "mcp-server-time==2026.10.19";

/// Run `command` as if the wall clock read `date` (libfaketime; monotonic time untouched).
fn at_date(command: &mut Command, date: Option<&str>) {
    let Some(date) = date else {
        return;
    };
    tools::debian("faketime", "faketime");
    let library = std::fs::read_dir("/usr/lib")
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists())
        .expect("libfaketime.so.1 under /usr/lib/*/faketime/");
    command
        .env("LD_PRELOAD", library)
        .env("FAKETIME", format!("@{date}"))
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// The original time server and the plugin, both with Europe/Paris as the local zone, and
/// both at `date` if given.
async fn time_pair(
    date: Option<&str>,
) -> (
    RunningService<RoleClient, ()>,
    RunningService<RoleClient, ()>,
    tempfile::TempDir,
) {
    let python = tokio::task::spawn_blocking(|| tools::python(&[TIME]))
        .await
        .unwrap();
    let mut original = Command::new(python.with_file_name("mcp-server-time"));
    original
        .args(["--local-timezone", "Europe/Paris"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    at_date(&mut original, date);
    let original = connect_command(original, ()).await.0;
    let dir = plugin_dir(&[("time", "time.wasm")]);
    std::fs::write(
        dir.path().join("time.toml"),
        "[config]\nlocal-timezone = \"Europe/Paris\"\n",
    )
    .unwrap();
    let mut plugin = mcpbox(dir.path(), &[]);
    at_date(&mut plugin, date);
    let plugin = connect_command(plugin, ()).await.0;
    (original, plugin, dir)
}

/// A result with what must differ between two runs taken out: the current time's seconds
/// (`datetime`, in the structured content and in the text's JSON).
fn without_now(result: &Value) -> Value {
    let mut result = result.clone();
    if let Some(structured) = result.get_mut("structuredContent") {
        structured["datetime"] = Value::Null;
    }
    if let Some(text) = result["content"][0]["text"].as_str()
        && let Ok(mut value) = serde_json::from_str::<Value>(text)
        && value.get("datetime").is_some()
    {
        value["datetime"] = Value::Null;
        result["content"][0]["text"] = Value::String(value.to_string());
    }
    result
}

/// Run `script` (tool, arguments, whether the text must match when it is an error) on both.
async fn compare(
    original: &RunningService<RoleClient, ()>,
    plugin: &RunningService<RoleClient, ()>,
    script: &[(&'static str, Value, bool)],
) {
    for (tool, arguments, same_text) in script {
        let theirs = without_now(&call_tool(original, tool, arguments).await);
        let ours = without_now(&call_tool(plugin, tool, arguments).await);
        let error = theirs["isError"] == json!(true);
        assert_eq!(
            ours["isError"] == json!(true),
            error,
            "{tool} {arguments}\noriginal: {theirs}\nmcpbox: {ours}"
        );
        if !error || *same_text {
            assert_eq!(
                ours["content"], theirs["content"],
                "{tool} {arguments}\noriginal: {theirs}\nmcpbox: {ours}"
            );
            assert_eq!(
                ours.get("structuredContent"),
                theirs.get("structuredContent"),
                "{tool} {arguments}"
            );
        }
    }
}

#[tokio::test]
async fn time_matches_the_original_call_for_call_and_across_clock_changes() {
    let (original, plugin, _dir) = time_pair(None).await;

    // The same surface: names, descriptions (naming the local zone), schemas, annotations.
    let theirs = to_json(&original.list_all_tools().await.unwrap());
    let ours = to_json(&plugin.list_all_tools().await.unwrap());
    assert_eq!(theirs.as_array().unwrap().len(), 2, "{theirs}");
    for (ours, theirs) in ours
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs.as_array().unwrap())
    {
        assert_eq!(surface(ours), surface(theirs));
    }

    let convert = |source: &str, time: &str, target: &str| json!({"source_timezone": source, "time": time, "target_timezone": target});
    let script = vec![
        ("get_current_time", json!({"timezone": "Asia/Tokyo"}), false),
        (
            "get_current_time",
            json!({"timezone": "America/St_Johns"}),
            false,
        ),
        (
            "get_current_time",
            json!({"timezone": "Europe/Paris"}),
            false,
        ),
        ("get_current_time", json!({"timezone": "UTC"}), false),
        // Links of the database, and a zone whose sign is the other way round.
        ("get_current_time", json!({"timezone": "US/Eastern"}), false),
        ("get_current_time", json!({"timezone": "Etc/GMT+5"}), false),
        // Refused by the plugin, in the original's words.
        ("get_current_time", json!({"timezone": "Foo/Bar"}), true),
        ("get_current_time", json!({"timezone": ""}), true),
        (
            "get_current_time",
            json!({"timezone": "europe/paris"}),
            true,
        ),
        (
            "get_current_time",
            json!({"timezone": "../etc/passwd"}),
            true,
        ),
        (
            "get_current_time",
            json!({"timezone": "/etc/localtime"}),
            true,
        ),
        (
            "get_current_time",
            json!({"timezone": "Europe/../Asia/Tokyo"}),
            true,
        ),
        (
            "get_current_time",
            json!({"timezone": "Europe//Paris"}),
            true,
        ),
        ("get_current_time", json!({"timezone": "a\u{0}b"}), true),
        // A directory of the database: the original's text names a file of its host.
        ("get_current_time", json!({"timezone": "America"}), false),
        // Refused by the schema (mcpbox's own words).
        ("get_current_time", json!({}), false),
        ("get_current_time", json!({"timezone": 5}), false),
        ("convert_time", convert("UTC", "2:30", "Asia/Tokyo"), false),
        (
            "convert_time",
            convert("UTC", "12:30", "Asia/Kathmandu"),
            false,
        ),
        (
            "convert_time",
            convert("America/New_York", "23:59", "Pacific/Kiritimati"),
            false,
        ),
        (
            "convert_time",
            convert("Australia/Adelaide", "0:00", "America/St_Johns"),
            false,
        ),
        (
            "convert_time",
            convert("Europe/Paris", "1:5", "Europe/Paris"),
            false,
        ),
        (
            "convert_time",
            convert("UTC", "09:07", "Asia/Kolkata"),
            false,
        ),
        ("convert_time", convert("UTC", "25:00", "UTC"), true),
        ("convert_time", convert("UTC", "24:00", "UTC"), true),
        ("convert_time", convert("UTC", "12:60", "UTC"), true),
        ("convert_time", convert("UTC", " 12:30", "UTC"), true),
        ("convert_time", convert("UTC", "12:30 ", "UTC"), true),
        ("convert_time", convert("UTC", "12:30:00", "UTC"), true),
        ("convert_time", convert("UTC", "ab:cd", "UTC"), true),
        ("convert_time", convert("UTC", "", "UTC"), true),
        ("convert_time", convert("", "12:30", "UTC"), true),
        ("convert_time", convert("UTC", "12:30", ""), true),
        (
            "convert_time",
            convert("Mars/Olympus", "12:30", "UTC"),
            true,
        ),
        (
            "convert_time",
            convert("UTC", "12:30", "Mars/Olympus"),
            true,
        ),
        (
            "convert_time",
            json!({"source_timezone": "UTC", "time": "12:30"}),
            false,
        ),
    ];
    compare(&original, &plugin, &script).await;
    original.cancel().await.unwrap();
    plugin.cancel().await.unwrap();

    // On the days clocks change: an hour skipped (spring forward) is refused, an hour repeated
    // (fall back) is read as the earlier one, in the original's words and numbers.
    for (date, script) in [
        (
            "2026-03-08 12:00:00",
            vec![
                (
                    "convert_time",
                    convert("America/New_York", "2:30", "UTC"),
                    true,
                ),
                (
                    "convert_time",
                    convert("America/New_York", "1:59", "UTC"),
                    false,
                ),
                (
                    "convert_time",
                    convert("America/New_York", "3:00", "Europe/London"),
                    false,
                ),
                (
                    "get_current_time",
                    json!({"timezone": "America/New_York"}),
                    false,
                ),
            ],
        ),
        (
            "2026-11-01 12:00:00",
            vec![
                (
                    "convert_time",
                    convert("America/New_York", "1:30", "UTC"),
                    false,
                ),
                (
                    "convert_time",
                    convert("America/New_York", "2:30", "Asia/Tokyo"),
                    false,
                ),
                (
                    "get_current_time",
                    json!({"timezone": "America/New_York"}),
                    false,
                ),
            ],
        ),
        (
            "2026-10-25 12:00:00",
            vec![
                (
                    "convert_time",
                    convert("Europe/Paris", "2:30", "America/New_York"),
                    false,
                ),
                (
                    "convert_time",
                    convert("Australia/Lord_Howe", "1:45", "UTC"),
                    false,
                ),
            ],
        ),
    ] {
        let (original, plugin, _dir) = time_pair(Some(date)).await;
        compare(&original, &plugin, &script).await;
        original.cancel().await.unwrap();
        plugin.cancel().await.unwrap();
    }
}

/// The original memory server, pinned to its current release.
const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";

#[tokio::test]
async fn memory_matches_the_original_call_for_call_and_imports_its_file() {
    let prefix = tokio::task::spawn_blocking(|| tools::npm(&[MEMORY]))
        .await
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let jsonl = files.path().join("memory.jsonl");
    let mut command = Command::new("node");
    command
        .arg(prefix.join("node_modules/@modelcontextprotocol/server-memory/dist/index.js"))
        .env("PATH", tools::node_path(&prefix))
        .env("MEMORY_FILE_PATH", &jsonl)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let original = connect_command(command, ()).await.0;
    let dir = plugin_dir(&[("memory", "memory.wasm")]);
    let manifest =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/memory/memory.toml");
    std::fs::copy(&manifest, dir.path().join("memory.toml")).unwrap();
    let plugin = connect_command(mcpbox(dir.path(), &[]), ()).await.0;

    // The same surface: tools and the resource.
    let theirs = to_json(&original.list_all_tools().await.unwrap());
    let ours = to_json(&plugin.list_all_tools().await.unwrap());
    assert_eq!(theirs.as_array().unwrap().len(), 9, "{theirs}");
    for (ours, theirs) in ours
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs.as_array().unwrap())
    {
        assert_eq!(surface(ours), surface(theirs));
    }
    assert_eq!(
        to_json(&plugin.list_all_resources().await.unwrap()),
        to_json(&original.list_all_resources().await.unwrap())
    );

    let entity = |name: &str, kind: &str, observations: &[&str]| json!({"name": name, "entityType": kind, "observations": observations});
    let relation =
        |from: &str, to: &str, kind: &str| json!({"from": from, "to": to, "relationType": kind});
    let script: Vec<(&'static str, Value, bool)> = vec![
        ("read_graph", json!({}), false),
        // A name already in the graph is left out, a repeat within one call is not.
        (
            "create_entities",
            json!({"entities": [entity("alice", "person", &["likes tea"]), entity("bob", "person", &[]),
                                entity("alice", "robot", &[])]}),
            false,
        ),
        (
            "create_entities",
            json!({"entities": [entity("alice", "cat", &[]), entity("carol", "person", &["Zoë ✓ 日本"])]}),
            false,
        ),
        (
            "create_relations",
            json!({"relations": [relation("alice", "bob", "knows"), relation("bob", "carol", "knows"),
                                 relation("alice", "bob", "knows")]}),
            false,
        ),
        (
            "create_relations",
            json!({"relations": [relation("alice", "bob", "knows")]}),
            false,
        ),
        (
            "add_observations",
            json!({"observations": [{"entityName": "alice", "contents": ["likes tea", "likes chess", "likes chess"]}]}),
            false,
        ),
        // An unknown entity fails the whole call: nothing is added, even to alice.
        (
            "add_observations",
            json!({"observations": [{"entityName": "alice", "contents": ["never"]},
                                    {"entityName": "nobody", "contents": ["x"]}]}),
            true,
        ),
        ("read_graph", json!({}), false),
        ("search_nodes", json!({"query": "TEA"}), false),
        ("search_nodes", json!({"query": "person"}), false),
        ("search_nodes", json!({"query": "zoë ✓"}), false),
        ("search_nodes", json!({"query": "zzz"}), false),
        ("search_nodes", json!({"query": ""}), false),
        ("open_nodes", json!({"names": ["alice", "nobody"]}), false),
        ("open_nodes", json!({"names": ["carol"]}), false),
        ("open_nodes", json!({"names": []}), false),
        (
            "delete_observations",
            json!({"deletions": [{"entityName": "alice", "observations": ["likes chess"]},
                                 {"entityName": "nobody", "observations": ["x"]}]}),
            false,
        ),
        (
            "delete_relations",
            json!({"relations": [relation("alice", "bob", "knows")]}),
            false,
        ),
        (
            "delete_entities",
            json!({"entityNames": ["bob", "nobody"]}),
            false,
        ),
        (
            "create_relations",
            json!({"relations": [relation("carol", "alice", "admires")]}),
            false,
        ),
        ("read_graph", json!({}), false),
        // Refused by the schema (mcpbox's own words).
        ("create_entities", json!({"entities": "x"}), false),
        ("create_relations", json!({}), false),
        ("open_nodes", json!({"names": [1]}), false),
    ];
    compare(&original, &plugin, &script).await;

    // The graph as a resource, the same text.
    assert_eq!(
        resource_text(&plugin, "memory://knowledge-graph").await,
        resource_text(&original, "memory://knowledge-graph").await
    );
    original.cancel().await.unwrap();
    plugin.cancel().await.unwrap();

    // The original's file, imported: a new user's first call starts from it.
    let dir = plugin_dir(&[("memory", "memory.wasm")]);
    let manifest = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        dir.path().join("memory.toml"),
        format!(
            "{manifest}\n[[dirs]]\nhost = {:?}\nguest = \"/import\"\n[config]\nimport-jsonl = \"/import/memory.jsonl\"\n",
            files.path()
        ),
    )
    .unwrap();
    let imported = connect_command(mcpbox(dir.path(), &[]), ()).await.0;
    let graph = call_tool(&imported, "read_graph", &json!({})).await;
    let expected = json!({
        "entities": [
            entity("alice", "person", &["likes tea"]),
            entity("alice", "robot", &[]),
            entity("carol", "person", &["Zoë ✓ 日本"]),
        ],
        "relations": [relation("carol", "alice", "admires")],
    });
    assert_eq!(graph["structuredContent"], expected, "{graph}");
    // And it is the caller's own from then on: a change is kept, the file is left alone.
    call_tool(
        &imported,
        "delete_entities",
        &json!({"entityNames": ["carol"]}),
    )
    .await;
    let graph = call_tool(&imported, "read_graph", &json!({})).await;
    assert_eq!(
        graph["structuredContent"]["entities"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{graph}"
    );
    assert!(std::fs::read_to_string(&jsonl).unwrap().contains("carol"));
    imported.cancel().await.unwrap();
}

/// The text of the resource at `uri`.
async fn resource_text(service: &RunningService<RoleClient, ()>, uri: &str) -> Value {
    let params = rmcp::model::ReadResourceRequestParams::new(uri);
    to_json(&service.read_resource(params).await.unwrap())["contents"][0]["text"].clone()
}
