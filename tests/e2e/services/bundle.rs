//! mcpbox as an MCP Bundle (`.mcpb`) a desktop client installs: `mcpbox bundle`
//! writes the bundle's directory, npm's official `@anthropic-ai/mcpb` CLI validates it, packs
//! it into one file and unpacks that as a client installs it, and the client's own resolver
//! (`getMcpConfigForManifest`, from the same package) turns the manifest and the user's choices
//! (a folder they picked) into the command a client starts. That command, started twice at
//! once as two clients on one machine would, serves the filesystem plugin on the picked folder
//! only, and memory and time, the two sharing one state.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::external;
use crate::support::{Raw, example_plugins, fresh_state_dir, plugin_dir};

const MCPB: &str = "@anthropic-ai/mcpb@2.1.2";

fn mcpb(prefix: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new(prefix.join("node_modules/.bin/mcpb"))
        .args(args)
        .env("PATH", external::node_path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "mcpb {args:?}: {text}");
    text
}

/// The command, arguments and environment the client's resolver makes of the installed
/// bundle at `installed` for `user_config`.
fn resolve(prefix: &Path, installed: &Path, user_config: &Value) -> Value {
    let script = prefix.join("resolve.mjs");
    std::fs::write(
        &script,
        "import { readFileSync } from 'node:fs';\n\
         import { getMcpConfigForManifest } from '@anthropic-ai/mcpb';\n\
         const [dir, config] = process.argv.slice(2);\n\
         const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, 'utf8'));\n\
         const resolved = await getMcpConfigForManifest({\n\
           manifest, extensionPath: dir, systemDirs: { HOME: process.env.HOME ?? '/' },\n\
           userConfig: JSON.parse(config), pathSeparator: '/',\n\
         });\n\
         console.log(JSON.stringify(resolved ?? null));\n",
    )
    .unwrap();
    let output = std::process::Command::new("node")
        .arg(&script)
        .arg(installed)
        .arg(user_config.to_string())
        .current_dir(prefix)
        .env("PATH", external::node_path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A client starting the resolved configuration, with the given state directory.
async fn start(resolved: &Value, state: &Path) -> Raw {
    let mut command = tokio::process::Command::new(resolved["command"].as_str().unwrap());
    command.args(
        resolved["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    for (name, value) in resolved["env"].as_object().into_iter().flatten() {
        command.env(name, value.as_str().unwrap());
    }
    command
        .env("MCPBOX_STATE_DIR", state)
        .env(
            "MCPBOX_CACHE_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache"),
        )
        .env_remove("MCPBOX_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    Raw::initialized_command(command).await
}

fn text_of(reply: &Value) -> String {
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn call(raw: &mut Raw, id: u64, tool: &str, arguments: Value) -> Value {
    raw.request(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}})
        .to_string(),
    )
    .await
}

#[tokio::test]
async fn the_bundle_installs_and_serves_the_picked_folder_to_two_clients_at_once() {
    let prefix = tokio::task::spawn_blocking(|| external::npm(&[MCPB]))
        .await
        .unwrap();
    let plugins = plugin_dir(&[
        ("filesystem", "filesystem.wasm"),
        ("memory", "memory.wasm"),
        ("time", "time.wasm"),
    ]);
    // With their manifests, as the quick start's directory has them: memory's grants its
    // state, filesystem's a sample folder of this machine (which the bundle must leave out).
    for name in ["filesystem", "memory", "time"] {
        std::fs::copy(
            example_plugins().join(format!("{name}.toml")),
            plugins.path().join(format!("{name}.toml")),
        )
        .unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bundle");
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["bundle", "--plugins"])
        .arg(plugins.path())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    assert!(
        made.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(said.contains("plugins filesystem, memory, time"), "{said}");
    assert!(
        said.contains(
            "left out the folders the plugins' manifests grant on this machine: filesystem (1)"
        ),
        "{said}"
    );

    let validated = mcpb(
        &prefix,
        &["validate", out.join("manifest.json").to_str().unwrap()],
    );
    assert!(validated.contains("validation passes"), "{validated}");
    let file = work.path().join("mcpbox.mcpb");
    mcpb(
        &prefix,
        &["pack", out.to_str().unwrap(), file.to_str().unwrap()],
    );
    let installed: PathBuf = work.path().join("installed");
    mcpb(
        &prefix,
        &[
            "unpack",
            file.to_str().unwrap(),
            installed.to_str().unwrap(),
        ],
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(installed.join("server/mcpbox"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "the executable bit survives: {mode:o}");
    }

    // The user picks one folder; nothing else on the disk is theirs to see.
    let notes = tempfile::tempdir().unwrap();
    std::fs::write(
        notes.path().join("hello.txt"),
        "hello from the picked folder\n",
    )
    .unwrap();
    let resolved = resolve(
        &prefix,
        &installed,
        &json!({ "folders": [notes.path().to_str().unwrap()] }),
    );
    assert_eq!(
        resolved["command"],
        installed.join("server/mcpbox").to_str().unwrap(),
        "{resolved}"
    );
    // A user who sets nothing gets a command with nothing left unexpanded, which serves.
    let bare = resolve(&prefix, &installed, &json!({}));
    assert!(!bare.to_string().contains("${"), "{bare}");
    let mut unset = start(&bare, &fresh_state_dir()).await;
    text_of(
        &call(
            &mut unset,
            1,
            "get_current_time",
            json!({ "timezone": "UTC" }),
        )
        .await,
    );
    drop(unset);

    let state = fresh_state_dir();
    let mut first = start(&resolved, &state).await;
    let mut second = start(&resolved, &state).await;

    let listed = first
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "read_text_file",
        "list_allowed_directories",
        "create_entities",
        "get_current_time",
    ] {
        assert!(names.contains(&tool), "{tool} in {names:?}");
    }
    let allowed = text_of(&call(&mut first, 2, "list_allowed_directories", json!({})).await);
    assert!(
        allowed.contains(notes.path().to_str().unwrap()),
        "{allowed}"
    );
    assert!(!allowed.contains("sample-data"), "{allowed}");
    let read = text_of(
        &call(
            &mut second,
            2,
            "read_text_file",
            json!({ "path": notes.path().join("hello.txt") }),
        )
        .await,
    );
    assert_eq!(read.trim(), "hello from the picked folder");
    let outside = call(
        &mut first,
        3,
        "read_text_file",
        json!({ "path": "/etc/hostname" }),
    )
    .await;
    assert_eq!(outside["result"]["isError"], true, "{outside}");
    text_of(
        &call(
            &mut first,
            4,
            "get_current_time",
            json!({ "timezone": "UTC" }),
        )
        .await,
    );

    // Two clients at once, one state: each adds an entity; both see both.
    let (a, b) = tokio::join!(
        call(
            &mut first,
            5,
            "create_entities",
            json!({"entities": [{"name": "from-first", "entityType": "note", "observations": []}]})
        ),
        call(
            &mut second,
            5,
            "create_entities",
            json!({"entities": [{"name": "from-second", "entityType": "note", "observations": []}]})
        ),
    );
    text_of(&a);
    text_of(&b);
    for raw in [&mut first, &mut second] {
        let graph = text_of(&call(raw, 6, "read_graph", json!({})).await);
        assert!(
            graph.contains("from-first") && graph.contains("from-second"),
            "{graph}"
        );
    }
}
