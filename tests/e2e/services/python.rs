//! MCP 2026-07-28 end to end with a client nobody here wrote: the official Python SDK (`mcp`
//! 2.3 from PyPI), pinned to 2026-07-28 and in its `auto` mode (which probes with
//! `server/discover`), over stdio and over HTTP. The client script
//! (`tests/python/v2026_client.py`) lists, calls, reads, gets a prompt, completes, answers an
//! elicitation through its callback (an input request: MRTR), sends a tampered
//! `requestState`, and holds a `subscriptions/listen` stream while this test changes the
//! plugin directory (hot reload).

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::external;
use crate::support::{HttpServer, STEP, example_plugins, plugin_dir};

const SDK: &str = "mcp==2.3.0";

/// Run the client script with `target` arguments; once it listens, toggle `code_review.wasm`
/// in `dir`; it must report the change and finish cleanly.
async fn drive(python: &Path, mode: &str, target: &[&str], dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/v2026_client.py");
    let mut child = Command::new(python)
        .arg(&script)
        .args(["--mode", mode])
        .args(target)
        .envs(crate::support::test_cache())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run python");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while let Ok(Ok(Some(line))) = tokio::time::timeout(STEP, lines.next_line()).await {
        if line == "listening" {
            let plugin = dir.join("code_review.wasm");
            if plugin.exists() {
                std::fs::remove_file(&plugin).unwrap();
            } else {
                std::fs::copy(example_plugins().join("code_review.wasm"), &plugin).unwrap();
            }
        }
        seen.push(line);
    }
    let output = tokio::time::timeout(STEP, child.wait_with_output())
        .await
        .expect("the client finishes in time")
        .unwrap();
    assert!(
        output.status.success() && seen.last().is_some_and(|l| l == "done"),
        "the Python client ({mode}, {target:?}) failed after {seen:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        seen.iter().any(|l| l.starts_with("changed ")),
        "no list change reached the listen stream: {seen:?}"
    );
}

fn plugins() -> tempfile::TempDir {
    plugin_dir(&[
        ("conformance", "conformance.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ])
}

#[tokio::test]
async fn the_python_sdk_speaks_2026_07_28_over_stdio() {
    let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
        .await
        .unwrap();
    let dir = plugins();
    let mcpbox = env!("CARGO_BIN_EXE_mcpbox");
    let dir_arg = dir.path().to_str().unwrap();
    for mode in ["2026-07-28", "auto"] {
        drive(&python, mode, &["--stdio", mcpbox, dir_arg], dir.path()).await;
    }
}

#[tokio::test]
async fn the_python_sdk_speaks_2026_07_28_over_http() {
    let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
        .await
        .unwrap();
    let dir = plugins();
    let server = HttpServer::start(dir.path(), &[]).await;
    for mode in ["2026-07-28", "auto"] {
        drive(&python, mode, &["--url", &server.url], dir.path()).await;
    }
    assert!(
        !server.stderr.text().contains("ERROR"),
        "{}",
        server.stderr.text()
    );
}
