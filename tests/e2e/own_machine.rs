//! mcpbox on a person's own machine (#57): grants from the command line and the environment
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
