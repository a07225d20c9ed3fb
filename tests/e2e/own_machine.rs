//! mcpbox on a person's own machine: grants from the command line and the environment
//! (the filesystem plugin's template manifest made usable by `--grant`), several plugin
//! directories, sequential-thinking's history per client session, and a skipped plugin told
//! to the clients that connect.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{
    RecordingClient, connect_command, connect_with, mcpbox, plugin_dir, tool_text,
};

/// A tool's text and whether it failed.
async fn call<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &'static str,
    arguments: Value,
) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    tool_text(&result)
}

/// The filesystem plugin beside its template manifest (`plugins/filesystem/filesystem.toml`,
/// naming `/home/me/notes` and `/home/me/projects`, which do not exist here).
fn filesystem_with_template() -> tempfile::TempDir {
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    let template =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/filesystem/filesystem.toml");
    std::fs::copy(&template, dir.path().join("filesystem.toml")).unwrap();
    dir
}

/// Two folders a person picked: `notes` (granted read-write) and `archive` (read-only).
fn picked() -> (tempfile::TempDir, String, String) {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    for sub in ["notes", "archive"] {
        std::fs::create_dir(base.join(sub)).unwrap();
    }
    std::fs::write(base.join("archive/old.txt"), "old\n").unwrap();
    let notes = base.join("notes").display().to_string();
    let archive = base.join("archive").display().to_string();
    (root, notes, archive)
}

/// The template manifest names directories that do not exist here: without a grant the
/// plugin is skipped with the reason; with `--grant` (or `MCPBOX_GRANT`) the command line's
/// folders stand in for the template's, in the modes given, and are logged as grants.
#[tokio::test]
async fn command_line_grants_stand_in_for_the_template_manifests_folders() {
    let dir = filesystem_with_template();
    let (_root, notes, archive) = picked();
    for by_environment in [false, true] {
        let mut command = if by_environment {
            let mut command = mcpbox(dir.path(), &[]);
            command.env(
                "MCPBOX_GRANT",
                format!("filesystem:dir={notes}\nfilesystem:dir={archive}:ro"),
            );
            command
        } else {
            mcpbox(
                dir.path(),
                &[
                    "--grant",
                    &format!("filesystem:dir={notes}"),
                    "--grant",
                    &format!("filesystem:dir={archive}:ro"),
                ],
            )
        };
        command.env("MCPBOX_LOG", "info");
        let (client, stderr) = connect_command(command, RecordingClient::new(&json!({}))).await;
        assert_eq!(
            call(&client, "list_allowed_directories", json!({})).await,
            (format!("Allowed directories:\n{notes}\n{archive}"), false),
            "{}",
            stderr.text()
        );
        let (text, failed) = call(
            &client,
            "write_file",
            json!({"path": format!("{notes}/new.txt"), "content": "hello"}),
        )
        .await;
        assert!(!failed, "{text}");
        assert_eq!(
            std::fs::read_to_string(format!("{notes}/new.txt")).unwrap(),
            "hello"
        );
        let (text, failed) = call(
            &client,
            "write_file",
            json!({"path": format!("{archive}/new.txt"), "content": "no"}),
        )
        .await;
        assert!(failed, "read-only: {text}");
        assert!(!Path::new(&format!("{archive}/new.txt")).exists());
        let log = stderr
            .wait_for(&format!("dir {archive} as {archive} (read-only)"))
            .await;
        assert!(
            log.contains(&format!("dir {notes} as {notes} (read-write)")),
            "{log}"
        );
        client.cancel().await.unwrap();
        std::fs::remove_file(format!("{notes}/new.txt")).unwrap();
    }

    // Without a grant: skipped, the reason naming the template's folder and the way out.
    let (client, stderr) =
        connect_command(mcpbox(dir.path(), &[]), RecordingClient::new(&json!({}))).await;
    assert!(client.list_all_tools().await.unwrap().is_empty());
    let log = stderr.wait_for("skipped plugin").await;
    assert!(
        log.contains("dirs[0].host: cannot use directory /home/me/notes")
            && log.contains("grant one with --grant PLUGIN:dir=PATH"),
        "{log}"
    );
    client.cancel().await.unwrap();
}

/// A manifest whose folders exist bounds the command line: a folder inside one is granted
/// (narrowed to read-only if asked), one outside is refused naming the flag, and the plugin
/// is not loaded.
#[tokio::test]
async fn command_line_grants_never_widen_the_manifests() {
    let (_root, notes, archive) = picked();
    let inner = format!("{notes}/inner");
    std::fs::create_dir(&inner).unwrap();
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    std::fs::write(
        dir.path().join("filesystem.toml"),
        format!("[[dirs]]\nhost = \"{notes}\"\nmode = \"read-write\"\n"),
    )
    .unwrap();
    let client = connect_with(
        dir.path(),
        &["--grant", &format!("filesystem:dir={inner}:ro")],
        RecordingClient::new(&json!({})),
    )
    .await;
    assert_eq!(
        call(&client, "list_allowed_directories", json!({})).await,
        (format!("Allowed directories:\n{inner}"), false)
    );
    let (text, failed) = call(
        &client,
        "write_file",
        json!({"path": format!("{inner}/x.txt"), "content": "no"}),
    )
    .await;
    assert!(failed, "narrowed to read-only: {text}");
    client.cancel().await.unwrap();

    let (client, stderr) = connect_command(
        mcpbox(
            dir.path(),
            &["--grant", &format!("filesystem:dir={archive}")],
        ),
        RecordingClient::new(&json!({})),
    )
    .await;
    assert!(client.list_all_tools().await.unwrap().is_empty());
    let log = stderr.wait_for("skipped plugin").await;
    assert!(
        log.contains(&format!(
            "--grant filesystem:dir={archive}: {archive} is outside the directories the \
             plugin's manifest grants ({notes}): the command line may only narrow them"
        )),
        "{log}"
    );
    client.cancel().await.unwrap();
}

/// A grant that is not one is refused before anything serves, naming the flag.
#[tokio::test]
async fn a_malformed_grant_is_refused_at_start() {
    let dir = plugin_dir(&[]);
    let output = mcpbox(dir.path(), &["--grant", "filesystem:host=example.com"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "invalid value 'filesystem:host=example.com' for '--grant <PLUGIN:dir=PATH[:ro]>'"
        ) && stderr.contains("`host` is not a grant the command line gives"),
        "{stderr}"
    );
}

/// A plugin that does not load, beside one that does.
fn with_a_broken_plugin() -> tempfile::TempDir {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    std::fs::write(dir.path().join("broken.wasm"), b"not wasm").unwrap();
    dir
}

/// The warning a client gets about `broken.wasm` in `dir`: its name, its file and why.
fn assert_names_the_broken_plugin(data: &str, dir: &Path) {
    let file = dir.canonicalize().unwrap().join("broken.wasm");
    assert!(
        data.starts_with(&format!("skipped plugin `broken` ({}): ", file.display()))
            && data.contains("not a WebAssembly file")
            && data.ends_with("; it is not loaded"),
        "{data}"
    );
}

/// A client that connects hears of a plugin skipped at startup: a `notifications/message` at
/// warning after `initialized`, without asking for logs (over stdio, and over HTTP with a
/// 2025-11-25 session); a 2026-07-28 client on `server/discover` when its `logLevel` takes
/// warnings.
#[tokio::test]
async fn clients_that_connect_hear_of_a_skipped_plugin() {
    let dir = with_a_broken_plugin();
    let client = connect_with(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let logs = client.service().wait_for("log", 1).await;
    assert_eq!(logs[0]["level"], "warning", "{logs:?}");
    assert_eq!(logs[0]["logger"], "mcpbox");
    assert_names_the_broken_plugin(logs[0]["data"].as_str().unwrap(), dir.path());
    assert_eq!(client.list_all_tools().await.unwrap().len(), 4);
    client.cancel().await.unwrap();

    let server = crate::support::HttpServer::start(dir.path(), &[]).await;
    let client = server.connect(RecordingClient::new(&json!({})), None).await;
    let logs = client.service().wait_for("log", 1).await;
    assert_eq!(logs[0]["level"], "warning", "{logs:?}");
    assert_names_the_broken_plugin(logs[0]["data"].as_str().unwrap(), dir.path());
    client.cancel().await.unwrap();

    let http = reqwest::Client::new();
    let discover = |level: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/logLevel":"{level}"}}}}}}"#
        )
    };
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
    ];
    let response = crate::support::post(&http, &server.url, &headers, &discover("warning")).await;
    let mut events = crate::support::SseReader::new(response);
    let (_, log) = events.next_json().await.expect("a log message first");
    assert_eq!(log["method"], "notifications/message", "{log}");
    assert_eq!(log["params"]["level"], "warning");
    assert_names_the_broken_plugin(log["params"]["data"].as_str().unwrap(), dir.path());
    let (_, result) = events.next_json().await.expect("then the result");
    assert_eq!(result["id"], 1, "{result}");
    // A level above warning: the result alone, as plain JSON.
    let response = crate::support::post(&http, &server.url, &headers, &discover("error")).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["id"], 1, "{body}");
}

/// A 2025-11-25 client that set a level above warning before `initialized` hears nothing of
/// it; the report is sent once.
#[tokio::test]
async fn a_client_that_asked_for_errors_only_is_not_told() {
    let dir = with_a_broken_plugin();
    let mut raw = crate::support::Raw::start(dir.path(), &[]);
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}"#,
        )
        .await;
    assert_eq!(reply["id"], 1, "{reply}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    assert_eq!(reply["id"], 2, "no warning before the answer: {reply}");
    // Asking for warnings later tells it then, once.
    raw.send(
        br#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"warning"}}"#,
    )
    .await;
    let log = raw.recv().await;
    assert_eq!(log["method"], "notifications/message", "{log}");
    assert_names_the_broken_plugin(log["params"]["data"].as_str().unwrap(), dir.path());
    assert_eq!(raw.recv().await["id"], 3);
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}"#,
        )
        .await;
    assert_eq!(reply["id"], 4, "once: {reply}");
}

/// One thought in `service`'s session: the history's length and branches it reports.
async fn think<H: rmcp::ClientHandler>(
    service: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    branch: &str,
) -> (Value, Value) {
    let mut arguments = json!({"thought": "a step", "nextThoughtNeeded": true,
        "thoughtNumber": 1, "totalThoughts": 3});
    if !branch.is_empty() {
        arguments["branchFromThought"] = json!(1);
        arguments["branchId"] = json!(branch);
    }
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = service
        .call_tool(
            rmcp::model::CallToolRequestParams::new("sequentialthinking").with_arguments(arguments),
        )
        .await
        .unwrap();
    let recorded = crate::support::json(&result)["structuredContent"].clone();
    (
        recorded["thoughtHistoryLength"].clone(),
        recorded["branches"].clone(),
    )
}

/// The sequential-thinking plugin beside its own manifest (`caller-scope = "session"`).
fn sequential_thinking() -> tempfile::TempDir {
    let dir = plugin_dir(&[("sequential_thinking", "sequential_thinking.wasm")]);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plugins/sequential-thinking/sequential_thinking.toml"),
        dir.path().join("sequential_thinking.toml"),
    )
    .unwrap();
    dir
}

/// Sequential-thinking's history is each client session's own (`caller-scope = "session"`),
/// as the original's is each process's: two HTTP clients without tokens (the one local
/// caller) each see only their own thoughts, a session's state is dropped when it ends, and
/// over stdio one client keeps its history as before.
#[tokio::test]
async fn each_client_session_thinks_alone() {
    let dir = sequential_thinking();
    let server =
        crate::support::HttpServer::start(dir.path(), &["--log", "info,mcpbox::kv=debug"]).await;
    assert!(
        server
            .stderr
            .text()
            .contains("(each client session's own: at most 64 KiB, 2 keys)"),
        "the grant is shown: {}",
        server.stderr.text()
    );
    let first = server.connect(RecordingClient::new(&json!({})), None).await;
    let second = server.connect(RecordingClient::new(&json!({})), None).await;
    assert_eq!(think(&first, "").await, (json!(1), json!([])));
    assert_eq!(think(&first, "idea").await, (json!(2), json!(["idea"])));
    assert_eq!(think(&second, "").await, (json!(1), json!([])));
    assert_eq!(think(&first, "").await, (json!(3), json!(["idea"])));
    assert_eq!(think(&second, "").await, (json!(2), json!([])));
    // Ending a session drops its state (the client deletes its session as it closes).
    first.cancel().await.unwrap();
    server
        .stderr
        .wait_for_count("dropped the session's own state", 1)
        .await;
    second.cancel().await.unwrap();
    server
        .stderr
        .wait_for_count("dropped the session's own state", 2)
        .await;
    let third = server.connect(RecordingClient::new(&json!({})), None).await;
    assert_eq!(think(&third, "").await, (json!(1), json!([])));
    third.cancel().await.unwrap();

    // Over stdio: one client, one history, as before.
    let client = connect_with(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    assert_eq!(think(&client, "").await, (json!(1), json!([])));
    assert_eq!(think(&client, "b").await, (json!(2), json!(["b"])));
    assert_eq!(think(&client, "").await, (json!(3), json!(["b"])));
    client.cancel().await.unwrap();
}

/// `mcpbox serve` with no `--plugins` (the environment or a configuration file names them).
fn serve_without_plugin_flags() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"));
    command
        .arg("serve")
        .env("MCPBOX_STATE_DIR", crate::support::fresh_state_dir())
        .env_remove("MCPBOX_LOG")
        .env_remove("MCPBOX_PLUGINS")
        .env(
            "MCPBOX_CACHE_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache"),
        )
        .env("MCPBOX_CACHE_MAX_MIB", crate::support::TEST_CACHE_MAX_MIB)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The names of the tools `client` lists, sorted.
async fn tool_names<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

/// Several plugin directories (`--plugins A --plugins B`): every plugin of both is served and
/// each directory is watched; a name is the first directory's (a plugin of the same name in a
/// later one is skipped, with an error naming both files, told to clients too), and when the
/// first's file goes, the later one's takes the name.
#[tokio::test]
async fn several_plugin_directories_are_served_and_watched_and_the_first_claims_a_name() {
    let first = plugin_dir(&[("echo_tools", "echo_tools.wasm"), ("quotes", "quotes.wasm")]);
    let second = plugin_dir(&[("echo_tools", "echo_tools.wasm"), ("time", "time.wasm")]);
    let a = first.path().canonicalize().unwrap().display().to_string();
    let b = second.path().canonicalize().unwrap().display().to_string();
    let (client, stderr) = connect_command(
        mcpbox(first.path(), &["--plugins", &b]),
        RecordingClient::new(&json!({})),
    )
    .await;
    let clash = format!(
        "skipped plugin `echo_tools` ({b}/echo_tools.wasm): the name is taken by \
         {a}/echo_tools.wasm, in an earlier plugin directory (the first directory given wins); \
         rename one of them"
    );
    let logs = client.service().wait_for("log", 1).await;
    assert_eq!(logs[0]["data"], clash.as_str(), "{logs:?}");
    assert!(stderr.text().contains(&clash), "{}", stderr.text());
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"echo".to_owned()) && names.contains(&"get_current_time".to_owned()),
        "{names:?}"
    );
    assert!(
        stderr.text().contains(&format!("file={a}/echo_tools.wasm")),
        "{}",
        stderr.text()
    );

    // The second directory is watched: a plugin put there is served.
    let before = names.len();
    std::fs::copy(
        crate::support::example_plugins().join("memory.wasm"),
        second.path().join("memory.wasm"),
    )
    .unwrap();
    client.service().wait_for("tools/list_changed", 1).await;
    let names = tool_names(&client).await;
    assert!(
        names.len() > before && names.contains(&"create_entities".to_owned()),
        "{names:?}"
    );
    // The first's echo_tools goes: the second's takes the name, and its tools stay.
    std::fs::remove_file(first.path().join("echo_tools.wasm")).unwrap();
    stderr.wait_for(&format!("file={b}/echo_tools.wasm")).await;
    assert!(tool_names(&client).await.contains(&"echo".to_owned()));
    client.cancel().await.unwrap();
}

/// `MCPBOX_PLUGINS` holds several directories separated as PATH is, and a configuration
/// file's `plugins` may be a list (relative to the file).
#[tokio::test]
async fn several_plugin_directories_from_the_environment_and_the_configuration_file() {
    let first = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let second = plugin_dir(&[("time", "time.wasm")]);
    let mut command = serve_without_plugin_flags();
    command.env(
        "MCPBOX_PLUGINS",
        format!("{}:{}", first.path().display(), second.path().display()),
    );
    let (client, _stderr) = connect_command(command, RecordingClient::new(&json!({}))).await;
    let from_environment = tool_names(&client).await;
    assert!(
        from_environment.contains(&"echo".to_owned()),
        "{from_environment:?}"
    );
    client.cancel().await.unwrap();

    let config_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        config_dir.path().join("mcpbox.toml"),
        format!(
            "plugins = [\"{}\", \"{}\"]\n",
            first.path().display(),
            second.path().display()
        ),
    )
    .unwrap();
    let mut command = serve_without_plugin_flags();
    command
        .arg("--config")
        .arg(config_dir.path().join("mcpbox.toml"));
    let (client, _stderr) = connect_command(command, RecordingClient::new(&json!({}))).await;
    assert_eq!(tool_names(&client).await, from_environment);
    client.cancel().await.unwrap();
}

/// `--grant-dirs PLUGIN DIR…`: a list of folders passed as arguments of their own (as an MCP
/// bundle passes a `multiple` directory setting), in the command line or the configuration
/// file; an empty list grants nothing (and the template's missing folders skip the plugin).
#[tokio::test]
async fn a_list_of_folders_is_granted_by_one_flag() {
    let dir = filesystem_with_template();
    let (_root, notes, archive) = picked();
    let archive_ro = format!("{archive}:ro");
    let client = connect_with(
        dir.path(),
        &[
            "--grant-dirs",
            "filesystem",
            &notes,
            &archive_ro,
            "--no-watch",
        ],
        RecordingClient::new(&json!({})),
    )
    .await;
    assert_eq!(
        call(&client, "list_allowed_directories", json!({})).await,
        (format!("Allowed directories:\n{notes}\n{archive}"), false)
    );
    let (text, failed) = call(
        &client,
        "write_file",
        json!({"path": format!("{archive}/x.txt"), "content": "no"}),
    )
    .await;
    assert!(failed, "read-only: {text}");
    client.cancel().await.unwrap();

    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        format!("grant-dirs = [\"filesystem\", \"{notes}\"]\n"),
    )
    .unwrap();
    let client = connect_with(
        dir.path(),
        &["--config", config.to_str().unwrap()],
        RecordingClient::new(&json!({})),
    )
    .await;
    assert_eq!(
        call(&client, "list_allowed_directories", json!({})).await,
        (format!("Allowed directories:\n{notes}"), false)
    );
    client.cancel().await.unwrap();

    let (client, stderr) = connect_command(
        mcpbox(dir.path(), &["--grant-dirs", "filesystem", "--no-watch"]),
        RecordingClient::new(&json!({})),
    )
    .await;
    assert!(client.list_all_tools().await.unwrap().is_empty());
    stderr
        .wait_for("dirs[0].host: cannot use directory /home/me/notes")
        .await;
    client.cancel().await.unwrap();
}
