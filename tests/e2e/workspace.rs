//! The edit–test loop's own promise (TESTING.md): the quick start's build (`cargo build -p
//! mcpbox`, in `plugins/run.sh`) and the test command (`cargo test --workspace`) resolve every
//! dependency with the same features, so whichever runs second compiles nothing of the
//! dependency tree again. A dev-dependency that turns on a feature the host's own dependencies
//! do not (serde's `rc`, tokio's `process`, rand's `default`…) breaks that silently and costs a
//! fresh clone minutes; host/Cargo.toml asks for those features too.
//!
//! The test runs after `cargo test` has built everything, so `cargo build -p mcpbox` must find
//! every unit fresh. It stops at the first unit cargo compiles and names it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn quick_start_and_tests_share_one_build() {
    // Only when the tests were built with the dev profile: under `--release` or another
    // profile there is no dev build to share.
    let binary = Path::new(env!("CARGO_BIN_EXE_mcpbox"));
    if binary.parent().and_then(Path::file_name) != Some("debug".as_ref()) {
        eprintln!("skipped: the tests were not built with the dev profile");
        return;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut build = Command::new(cargo)
        .args([
            "build",
            "-p",
            "mcpbox",
            "--offline",
            "--message-format=json",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = build.stdout.take().unwrap();
    let mut compiled = None;
    let mut artifacts = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        artifacts += 1;
        if message["fresh"] == false {
            compiled = Some(message["package_id"].as_str().unwrap_or("?").to_owned());
            let _ = build.kill();
            break;
        }
    }
    let status = build.wait().unwrap();
    if let Some(package) = compiled {
        panic!(
            "`cargo build -p mcpbox` compiled {package} again after `cargo test --workspace`: \
             a dev-dependency turns on a feature the host's own dependencies do not; ask for it \
             in host/Cargo.toml too (see the comment there)"
        );
    }
    assert!(status.success(), "cargo build -p mcpbox failed: {status}");
    assert!(artifacts > 100, "cargo reported only {artifacts} artifacts");
}
