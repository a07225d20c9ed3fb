//! `mcpbox new` end to end: the Rust project it writes builds outside this repository and
//! passes its own test, and bad names and occupied directories are refused. Plugins in Python
//! and JavaScript (built by componentize-py and componentize-js, installed from PyPI and npm),
//! and `mcpbox new` in those languages, are in `services::componentize`.

use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `dirs` before the inherited `PATH`.
pub(crate) fn path_with(dirs: &[PathBuf]) -> std::ffi::OsString {
    let mut path = std::env::join_paths(dirs).unwrap();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

/// Run `command` in `dir` with `path_dirs` and mcpbox first on `PATH`; its output.
pub(crate) fn run_in(dir: &Path, command: &[&str], path_dirs: &[PathBuf]) -> String {
    let mcpbox = PathBuf::from(env!("CARGO_BIN_EXE_mcpbox"));
    let mut dirs = path_dirs.to_vec();
    dirs.push(mcpbox.parent().unwrap().to_owned());
    let output = Command::new(command[0])
        .args(&command[1..])
        .current_dir(dir)
        .env("PATH", path_with(&dirs))
        .env("MCPBOX_STATE_DIR", crate::support::fresh_state_dir())
        .envs(crate::support::test_cache())
        .envs(crate::support::THROWAWAY_BUILD)
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{command:?} in {} failed:\n{text}",
        dir.display()
    );
    text
}

/// `mcpbox new NAME --lang LANG` into a fresh directory outside the repository.
pub(crate) fn scaffold(name: &str, lang: &str) -> tempfile::TempDir {
    let parent = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["new", name, "--lang", lang])
        .current_dir(parent.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && said.contains("next:"), "{said}");
    parent
}

#[tokio::test(flavor = "multi_thread")]
async fn mcpbox_new_writes_a_rust_project_that_builds_and_passes_its_test() {
    tokio::task::block_in_place(|| {
        let parent = scaffold("hello-rs", "rust");
        let project = parent.path().join("hello-rs");
        // A target directory of its own under target/, kept between runs for speed.
        let target = root().join("target/new-plugins");
        let target = target.to_str().unwrap();
        let said = run_in(&project, &["cargo", "test", "--target-dir", target], &[]);
        assert!(said.contains("test result: ok. 1 passed"), "{said}");
        run_in(
            &project,
            &[
                "cargo",
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--target-dir",
                target,
            ],
            &[],
        );
        let wasm = root().join("target/new-plugins/wasm32-wasip2/release/hello_rs.wasm");
        let said = run_in(
            &project,
            &[
                "mcpbox",
                "call",
                wasm.to_str().unwrap(),
                "hello",
                "--args",
                r#"{"name": "Ada"}"#,
            ],
            &[],
        );
        assert!(said.contains("Hello, Ada!"), "{said}");
        // Its skill went into the component with it.
        let said = run_in(
            &project,
            &["mcpbox", "inspect", wasm.to_str().unwrap()],
            &[],
        );
        assert!(
            said.contains("skill://hello_rs/hello-rs/SKILL.md"),
            "{said}"
        );
    });
}

#[test]
fn mcpbox_new_refuses_bad_names_and_existing_directories() {
    let parent = tempfile::tempdir().unwrap();
    let new = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .arg("new")
            .args(args)
            .current_dir(parent.path())
            .output()
            .unwrap()
    };
    let output = new(&["Bad Name"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid plugin name `Bad Name`"));
    std::fs::create_dir(parent.path().join("taken")).unwrap();
    std::fs::write(parent.path().join("taken/file"), "x").unwrap();
    let output = new(&["taken"]);
    assert!(!output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists and is not empty"));
}
