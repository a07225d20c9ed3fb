//! The reference servers beside their mcpbox plugins: the original, installed from npm
//! (run on Node 22) or PyPI into `target/tools/` on first use, and the plugin under `mcpbox
//! serve`, both driven by rmcp's client through the same script, compared call by call.
//!
//! So far: `@modelcontextprotocol/server-sequential-thinking` against
//! `plugins/sequential-thinking`, `mcp-server-time` against `plugins/time` (also on the days
//! clocks change, both processes under Debian's libfaketime), and
//! `@modelcontextprotocol/server-memory` against `plugins/memory` (and its own file imported),
//! and `@modelcontextprotocol/server-filesystem` against `plugins/filesystem` (answers, and the
//! tree they leave).

use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::external;
use crate::support::{STEP, connect_command, json as to_json, mcpbox, plugin_dir};

/// The original, pinned to its current release.
const SEQUENTIAL_THINKING: &str = "@modelcontextprotocol/server-sequential-thinking@2026.8.31";

/// The original sequential-thinking server, started on Node 22 and connected.
async fn original_sequential_thinking() -> RunningService<RoleClient, ()> {
    let prefix = tokio::task::spawn_blocking(|| external::npm(&[SEQUENTIAL_THINKING]))
        .await
        .unwrap();
    let mut command = Command::new("node");
    command
        .arg(
            prefix.join(
                "node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js",
            ),
        )
        .env("PATH", external::node_path())
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
    external::debian("faketime", "faketime");
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
    let python = tokio::task::spawn_blocking(|| external::python(&[TIME]))
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

    let negative_dst: Vec<(&'static str, Value, bool)> = [
        "Europe/Dublin",
        "Eire",
        "Europe/London",
        "Africa/Casablanca",
        "Africa/El_Aaiun",
    ]
    .into_iter()
    .map(|zone| ("get_current_time", json!({"timezone": zone}), false))
    .chain([(
        "convert_time",
        convert("Europe/Dublin", "9:00", "Africa/Casablanca"),
        false,
    )])
    .collect();
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
        // Negative daylight saving time in the original's data (issue #55, 17): Ireland's
        // winter, Morocco's Ramadan.
        ("2026-01-15 12:00:00", negative_dst.clone()),
        ("2026-03-01 12:00:00", negative_dst.clone()),
        ("2026-07-15 12:00:00", negative_dst.clone()),
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
    let prefix = tokio::task::spawn_blocking(|| external::npm(&[MEMORY]))
        .await
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let jsonl = files.path().join("memory.jsonl");
    let mut command = Command::new("node");
    command
        .arg(prefix.join("node_modules/@modelcontextprotocol/server-memory/dist/index.js"))
        .env("PATH", external::node_path())
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

/// The original filesystem server, pinned to its current release.
const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The scenario's starting tree under `root` (made afresh): text with and without a final
/// newline, CRLF, a subdirectory, an empty one, bytes that are an image, a symlink inside and
/// one out.
fn filesystem_tree(root: &std::path::Path) {
    if root.exists() {
        std::fs::remove_dir_all(root).unwrap();
    }
    for dir in ["sub/deep", "empty"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for (file, bytes) in [
        ("a.txt", &b"line1\nline2\nline3\n"[..]),
        ("b.txt", b"no newline"),
        ("crlf.txt", "h\u{e9}llo\r\nworld\r\n".as_bytes()),
        ("sub/c.json", b"{}\n"),
        ("sub/deep/z.md", b"x\n"),
        ("p.png", b"\x89PNG"),
        ("bad.txt", b"ok\xff\xfe\nnext\n"),
    ] {
        std::fs::write(root.join(file), bytes).unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", root.join("out")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("in")).unwrap();
}

/// Every path under `root` with what it is: a directory, a file's bytes, a symlink's target.
fn filesystem_snapshot(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let what = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else {
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
            };
            out.push((name, what));
        }
    }
    out.sort();
    out
}

/// The scenario: every tool, good input and bad, then edits of generated files (a fixed
/// pseudo-random sequence) so that the diffs cover insertions, deletions, replacements, files
/// with and without a final newline and edits whose text matches only by its whitespace.
fn filesystem_script(root: &str) -> Vec<(&'static str, Value)> {
    let at = |p: &str| format!("{root}/{p}");
    let mut script = vec![
        ("read_text_file", json!({"path": at("a.txt")})),
        ("read_file", json!({"path": at("a.txt")})),
        ("read_text_file", json!({"path": "a.txt"})),
        ("read_text_file", json!({"path": "../root/sub/c.json"})),
        ("read_text_file", json!({"path": at("bad.txt")})),
        ("read_text_file", json!({"path": at("crlf.txt"), "tail": 1})),
        ("read_text_file", json!({"path": at("missing.txt")})),
        ("read_text_file", json!({"path": at("nodir/missing.txt")})),
        ("read_text_file", json!({"path": "/etc/passwd"})),
        ("read_text_file", json!({"path": at("../etc/passwd")})),
        ("read_text_file", json!({"path": at("out")})),
        ("read_text_file", json!({"path": at("in")})),
        ("read_text_file", json!({"path": at("sub")})),
        ("read_text_file", json!({"path": at("a.txt/x")})),
        (
            "read_text_file",
            json!({"path": at("a.txt"), "head": 2, "tail": 1}),
        ),
        ("read_text_file", json!({"path": at("a.txt"), "head": 0})),
        ("read_text_file", json!({"path": at("a.txt"), "tail": -1})),
        ("read_text_file", json!({"path": "C:\\x"})),
        ("read_text_file", json!({"path": "~/surely-not-granted"})),
        ("read_text_file", json!({"path": ""})),
        ("read_text_file", json!({"path": at("a\u{0}.txt")})),
        // Refused by the schema (mcpbox's own words).
        ("read_text_file", json!({})),
        ("read_text_file", json!({"path": at("a.txt"), "head": "x"})),
        ("read_multiple_files", json!({"paths": []})),
        ("list_directory", json!({"path": root})),
        ("list_directory", json!({"path": at("a.txt")})),
        ("list_directory_with_sizes", json!({"path": at("sub")})),
        ("directory_tree", json!({"path": root})),
        (
            "directory_tree",
            json!({"path": root, "excludePatterns": ["sub"]}),
        ),
        (
            "directory_tree",
            json!({"path": at("sub"), "excludePatterns": ["*.json"]}),
        ),
        ("search_files", json!({"path": root, "pattern": "**/*.md"})),
        ("search_files", json!({"path": root, "pattern": "*.txt"})),
        (
            "search_files",
            json!({"path": root, "pattern": "{a,b}*.{txt,json}"}),
        ),
        (
            "search_files",
            json!({"path": root, "pattern": "**", "excludePatterns": ["sub/**"]}),
        ),
        ("search_files", json!({"path": root, "pattern": "nothing"})),
        ("get_file_info", json!({"path": at("a.txt")})),
        ("get_file_info", json!({"path": at("sub")})),
        ("list_allowed_directories", json!({})),
        ("read_media_file", json!({"path": at("p.png")})),
        ("read_media_file", json!({"path": at("b.txt")})),
        (
            "read_multiple_files",
            json!({"paths": [at("a.txt"), "a.txt", at("missing"), "/etc/passwd"]}),
        ),
        (
            "edit_file",
            json!({"path": at("a.txt"), "edits": [{"oldText": "line2", "newText": "LINE2"}], "dryRun": true}),
        ),
        (
            "edit_file",
            json!({"path": at("a.txt"), "edits": [{"oldText": "nope", "newText": "x"}]}),
        ),
        (
            "edit_file",
            json!({"path": at("crlf.txt"), "edits": [{"oldText": "world\r\n", "newText": "there\n"}]}),
        ),
        ("create_directory", json!({"path": at("new/deeper")})),
        ("create_directory", json!({"path": at("a.txt")})),
        (
            "write_file",
            json!({"path": at("new/w.txt"), "content": "hi"}),
        ),
        (
            "write_file",
            json!({"path": at("nodir2/w.txt"), "content": "hi"}),
        ),
        ("write_file", json!({"path": at("sub"), "content": "hi"})),
        (
            "write_file",
            json!({"path": at("in"), "content": "through the link"}),
        ),
        (
            "move_file",
            json!({"source": at("new/w.txt"), "destination": at("a.txt")}),
        ),
        (
            "move_file",
            json!({"source": at("missing"), "destination": at("m2")}),
        ),
        (
            "move_file",
            json!({"source": at("b.txt"), "destination": at("sub/b2.txt")}),
        ),
        (
            "move_file",
            json!({"source": at("new/w.txt"), "destination": at("nodir3/w.txt")}),
        ),
        (
            "write_file",
            json!({"path": at("code.py"), "content": "def f():\n    if x:\n        return 1\n    return 2\n"}),
        ),
        (
            "edit_file",
            json!({"path": at("code.py"), "edits": [{"oldText": "if x:\n    return 1", "newText": "if y:\n      return 3\n  pass"}]}),
        ),
        (
            "write_file",
            json!({"path": at("tick.md"), "content": "a\n```\nb\n````\n"}),
        ),
        (
            "edit_file",
            json!({"path": at("tick.md"), "edits": [{"oldText": "b", "newText": "c"}]}),
        ),
        (
            "write_file",
            json!({"path": at("name with space#?.txt"), "content": "s"}),
        ),
        (
            "read_media_file",
            json!({"path": at("name with space#?.txt")}),
        ),
    ];
    // Sizes and the collation of names (case, punctuation, digits).
    script.push((
        "read_text_file",
        json!({"path": at("Zeta/B.txt"), "tail": 1}),
    ));
    script.push(("create_directory", json!({"path": at("Zeta")})));
    for (name, size) in [
        ("Zeta/big.bin", 5000),
        ("Zeta/mid.bin", 1152),
        ("Zeta/B.txt", 700),
        ("Zeta/a-b.txt", 0),
        ("Zeta/a_b.txt", 0),
        ("Zeta/a.b.txt", 0),
        ("Zeta/10.txt", 0),
        ("Zeta/9.txt", 0),
        ("Zeta/_u.txt", 1),
    ] {
        script.push((
            "write_file",
            json!({"path": at(name), "content": "\u{e9}".repeat(size / 2) + &"x".repeat(size % 2)}),
        ));
    }
    script.push(("list_directory_with_sizes", json!({"path": at("Zeta")})));
    script.push((
        "list_directory_with_sizes",
        json!({"path": at("Zeta"), "sortBy": "size"}),
    ));
    script.push((
        "read_text_file",
        json!({"path": at("Zeta/B.txt"), "tail": 1}),
    ));
    // Generated edits (xorshift, fixed seed): the diffs must be byte for byte the original's.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % n as u64).unwrap()
    };
    let words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "x",
        "y",
        "",
        "  indented",
        "\tTab",
        "}",
        "{",
        "return 0;",
    ];
    for n in 0..40 {
        let mut lines: Vec<String> = (0..next(30))
            .map(|_| words[next(words.len())].to_owned())
            .collect();
        let mut content = lines.join("\n");
        if next(10) < 7 {
            content.push('\n');
        }
        let path = at(&format!("f{n}.txt"));
        script.push(("write_file", json!({"path": path, "content": content})));
        let mut edits = Vec::new();
        for _ in 0..=next(3) {
            if lines.is_empty() {
                break;
            }
            let i = next(lines.len());
            let j = (i + 1 + next(4)).min(lines.len());
            let old = lines[i..j].join("\n");
            if old.is_empty() {
                continue;
            }
            let new: Vec<String> = (0..next(5))
                .map(|_| words[next(words.len())].to_owned())
                .collect();
            edits.push(json!({"oldText": old, "newText": new.join("\n")}));
            lines.splice(i..j, new);
        }
        script.push((
            "edit_file",
            json!({"path": path, "edits": edits, "dryRun": next(10) < 3}),
        ));
        script.push(("read_text_file", json!({"path": path})));
        script.push(("read_text_file", json!({"path": path, "head": next(8)})));
        script.push(("read_text_file", json!({"path": path, "tail": next(8)})));
    }
    script
}

/// A filesystem result with what must differ taken out: the times `get_file_info` reads
/// (the runs happen at different moments), and a temporary file's random name.
fn without_times(result: &Value) -> Value {
    let mut result = result.clone();
    if let Some(text) = result["content"][0]["text"].as_str() {
        let mut text: String = text
            .lines()
            .map(|line| match line.split_once(": ") {
                Some((key @ ("created" | "modified" | "accessed"), _)) => format!("{key}: TIME"),
                _ => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        // `NAME.<32 hex>.tmp'`: the random part out.
        let mut cleaned = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(".tmp'") {
            let start = at.saturating_sub(32);
            let random = rest
                .get(start..at)
                .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            let keep = if random { start } else { at };
            cleaned.push_str(&rest[..keep]);
            cleaned.push_str("RANDOM.tmp'");
            rest = &rest[at + 5..];
        }
        cleaned.push_str(rest);
        text = cleaned;
        result["content"][0]["text"] = Value::String(text);
        if result.get("structuredContent").is_some() {
            result["structuredContent"] = json!({"content": result["content"][0]["text"]});
        }
    }
    result
}

#[tokio::test]
async fn filesystem_matches_the_original_call_for_call_and_leaves_the_same_tree() {
    let prefix = tokio::task::spawn_blocking(|| external::npm(&[FILESYSTEM]))
        .await
        .unwrap();
    let base = tempfile::tempdir().unwrap();
    let root = base.path().canonicalize().unwrap().join("root");
    let root_text = root.display().to_string();
    let script = filesystem_script(&root_text);

    // The original first, on the tree; then the plugin, on the same tree made again at the
    // same path (the answers name absolute paths).
    filesystem_tree(&root);
    let mut command = Command::new("node");
    command
        .arg(prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"))
        .arg(&root)
        .env("PATH", external::node_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let original = connect_command(command, ()).await.0;
    let theirs_tools = to_json(&original.list_all_tools().await.unwrap());
    let mut theirs = Vec::new();
    for (tool, arguments) in &script {
        theirs.push(call_tool(&original, tool, arguments).await);
    }
    original.cancel().await.unwrap();
    let their_tree = filesystem_snapshot(&root);

    filesystem_tree(&root);
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    std::fs::write(
        dir.path().join("filesystem.toml"),
        format!("[[dirs]]\nhost = \"{root_text}\"\nmode = \"read-write\"\n[env]\nHOME = {{ from-host = \"HOME\" }}\n"),
    )
    .unwrap();
    let plugin = connect_command(mcpbox(dir.path(), &[]), ()).await.0;

    // The same surface: names, titles, descriptions, schemas, annotations.
    let ours_tools = to_json(&plugin.list_all_tools().await.unwrap());
    assert_eq!(theirs_tools.as_array().unwrap().len(), 14, "{theirs_tools}");
    let ours_tools: Vec<Value> = ours_tools.as_array().unwrap().iter().map(surface).collect();
    let theirs_tools: Vec<Value> = theirs_tools
        .as_array()
        .unwrap()
        .iter()
        .map(surface)
        .collect();
    assert_eq!(ours_tools, theirs_tools);

    for ((tool, arguments), theirs) in script.iter().zip(&theirs) {
        let ours = without_times(&call_tool(&plugin, tool, arguments).await);
        let theirs = without_times(theirs);
        let context = format!("{tool} {arguments}\noriginal: {theirs}\nmcpbox: {ours}");
        assert_eq!(
            ours["isError"] == json!(true),
            theirs["isError"] == json!(true),
            "{context}"
        );
        let text = theirs["content"][0]["text"].as_str().unwrap_or_default();
        if text.starts_with("MCP error -32602: Input validation error") {
            // Refused by the schema: mcpbox's words, the same outcome.
            continue;
        }
        if let Some(prefix) = text.strip_suffix(&format!(" not in {root_text}"))
            && prefix.starts_with("Access denied - symlink target outside allowed directories: ")
        {
            // The sandbox does not show a target outside it: the refusal names the link.
            let ours = ours["content"][0]["text"].as_str().unwrap_or_default();
            assert!(
                ours.starts_with("Access denied - symlink target outside allowed directories: "),
                "{context}"
            );
            continue;
        }
        assert_eq!(ours["content"], theirs["content"], "{context}");
        assert_eq!(
            ours.get("structuredContent"),
            theirs.get("structuredContent"),
            "{context}"
        );
    }
    plugin.cancel().await.unwrap();
    // The same effects: every path, every byte.
    assert_eq!(filesystem_snapshot(&root), their_tree);
}

/// The original fetch server, pinned to its current release.
const FETCH: &str = "mcp-server-fetch==2026.10.24";

#[tokio::test]
async fn fetch_matches_the_original_call_for_call() {
    use crate::support::{Route, web};
    let typed = |path: &str, status: u16, kind: &str, body: &str| -> Route {
        let headers = if kind.is_empty() {
            Vec::new()
        } else {
            vec![("content-type".to_owned(), kind.to_owned())]
        };
        (path.to_owned(), status, headers, body.as_bytes().to_vec())
    };
    let html = "<html><head><title>T</title><script>var x = 1;</script></head><body><h1>Heading</h1><p>Some <b>bold</b> text and a <a href=\"/x\">link</a>.</p></body></html>";
    let long: String = (0..400)
        .map(|i| format!("line {i} \u{e9}\u{4e2d}\n"))
        .collect();
    let site = web(vec![
        typed("/robots.txt", 200, "text/plain", "# comment\nUser-agent: *\nDisallow: /private\nAllow: /private/open\n\nUser-agent: OtherBot\nDisallow: /\n"),
        typed("/long.txt", 200, "text/plain; charset=utf-8", &long),
        typed("/data.json", 200, "application/json", "{\"a\": [1, 2, 3]}"),
        typed("/page.html", 200, "text/html; charset=utf-8", html),
        typed("/untyped", 200, "", "plain words, no type"),
        typed("/html-in-text", 200, "text/plain", "<html><body><p>looks like html</p></body></html>"),
        typed("/private/page", 200, "text/plain", "secret"),
        typed("/private/open", 200, "text/plain", "open"),
        typed("/gone", 404, "text/plain", "nope"),
        typed("/broken", 500, "text/plain", "oops"),
        typed("/empty.txt", 200, "text/plain", ""),
        (
            "/moved".to_owned(),
            302,
            vec![("location".to_owned(), "/long.txt".to_owned())],
            Vec::new(),
        ),
        (
            "/loop".to_owned(),
            302,
            vec![("location".to_owned(), "/loop".to_owned())],
            Vec::new(),
        ),
    ])
    .await;
    // A site whose robots.txt is forbidden: autonomous fetching is assumed not allowed.
    let closed = web(vec![typed("/robots.txt", 403, "text/plain", "no")]).await;
    let base = format!("http://127.0.0.1:{}", site.port);
    let at = |p: &str| format!("{base}{p}");

    let python = tokio::task::spawn_blocking(|| external::python(&[FETCH]))
        .await
        .unwrap();
    let mut command = Command::new(python.with_file_name("mcp-server-fetch"));
    command
        .arg("--allow-private-ips")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let original = connect_command(command, ()).await.0;
    let dir = plugin_dir(&[("fetch", "fetch.wasm")]);
    std::fs::write(
        dir.path().join("fetch.toml"),
        format!(
            "[http]\npublic = true\nallow = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n",
            site.port, closed.port
        ),
    )
    .unwrap();
    let plugin = connect_command(mcpbox(dir.path(), &[]), ()).await.0;

    // The same surface: the tool and the prompt.
    let theirs = to_json(&original.list_all_tools().await.unwrap());
    let ours = to_json(&plugin.list_all_tools().await.unwrap());
    assert_eq!(theirs.as_array().unwrap().len(), 1, "{theirs}");
    assert_eq!(surface(&ours[0]), surface(&theirs[0]));
    let theirs = to_json(&original.list_all_prompts().await.unwrap());
    let ours = to_json(&plugin.list_all_prompts().await.unwrap());
    assert_eq!(ours, theirs);

    // `true`: the text must match too (else only whether it failed: HTML is reduced to
    // Markdown by a different converter, and a schema refusal is worded by mcpbox).
    let script = vec![
        (json!({"url": at("/long.txt")}), true),
        (
            json!({"url": at("/long.txt"), "start_index": 5000, "max_length": 3000}),
            true,
        ),
        (json!({"url": at("/long.txt"), "start_index": 8000}), true),
        (
            json!({"url": at("/long.txt"), "start_index": 1_000_000}),
            true,
        ),
        (json!({"url": at("/long.txt"), "max_length": 1}), true),
        (json!({"url": at("/data.json")}), true),
        (json!({"url": at("/data.json"), "raw": true}), true),
        (json!({"url": at("/page.html"), "raw": true}), true),
        (json!({"url": at("/page.html")}), false),
        (json!({"url": at("/untyped")}), false),
        (json!({"url": at("/html-in-text")}), false),
        (json!({"url": at("/empty.txt")}), true),
        (json!({"url": at("/private/page")}), true),
        (json!({"url": at("/private/open")}), true),
        (json!({"url": at("/gone")}), true),
        (json!({"url": at("/broken")}), true),
        (json!({"url": at("/moved")}), true),
        (json!({"url": at("/loop")}), false),
        (
            json!({"url": format!("http://127.0.0.1:{}/x", closed.port)}),
            true,
        ),
        (json!({"url": base.clone()}), true),
        // Refused by the schema.
        (json!({"url": at("/long.txt"), "max_length": 0}), false),
        (json!({"url": at("/long.txt"), "start_index": -1}), false),
        (json!({}), false),
    ];
    for (arguments, same_text) in &script {
        let theirs = call_tool(&original, "fetch", arguments).await;
        let ours = call_tool(&plugin, "fetch", arguments).await;
        let context = format!("{arguments}\noriginal: {theirs}\nmcpbox: {ours}");
        assert_eq!(
            ours["isError"] == json!(true),
            theirs["isError"] == json!(true),
            "{context}"
        );
        if *same_text {
            assert_eq!(ours["content"], theirs["content"], "{context}");
        }
    }
    // The page's words survive either converter.
    let ours = call_tool(&plugin, "fetch", &json!({"url": at("/page.html")})).await;
    let text = ours["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("Heading") && text.contains("bold") && !text.contains("var x"),
        "{text}"
    );

    // The prompt: the user asked, so robots.txt is not consulted.
    for url in [at("/private/page"), at("/long.txt"), at("/gone")] {
        assert_eq!(
            prompt_messages(&plugin, &url).await,
            prompt_messages(&original, &url).await,
            "prompt {url}"
        );
    }
    original.cancel().await.unwrap();
    plugin.cancel().await.unwrap();
}

/// The messages of the `fetch` prompt for `url`.
async fn prompt_messages(service: &RunningService<RoleClient, ()>, url: &str) -> Value {
    let mut arguments = serde_json::Map::new();
    arguments.insert("url".to_owned(), Value::String(url.to_owned()));
    let params = rmcp::model::GetPromptRequestParams::new("fetch").with_arguments(arguments);
    let result = tokio::time::timeout(STEP, service.get_prompt(params))
        .await
        .expect("answered in time")
        .expect("a prompt");
    to_json(&result)["messages"].clone()
}
