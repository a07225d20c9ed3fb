//! `mcpbox call`: one request against a plugin, from the command line, with the sandbox and
//! limits of `serve`; the MCP result on stdout, exit status 1 when it is an error.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{example_plugins, plugin_dir};

async fn call(args: &[&str]) -> (Value, Output) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .arg("call")
        .args(args)
        .envs(crate::support::test_cache())
        .env_remove("MCPBOX_LOG")
        .output()
        .await
        .unwrap();
    let value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (value, output)
}

#[tokio::test]
async fn call_runs_one_request_and_prints_the_mcp_result() {
    let echo = example_plugins().join("echo_tools.wasm");
    let echo = echo.to_str().unwrap();
    let (result, output) = call(&[echo, "echo", "--args", r#"{"text":"hello"}"#]).await;
    assert!(output.status.success());
    assert_eq!(result["content"][0]["text"], "hello");

    let (result, output) = call(&[echo, "divide", "--args", r#"{"dividend":1,"divisor":0}"#]).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(result["isError"], true);

    let (result, output) = call(&[echo, "nope"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(result["code"], -32602);

    // A directory, a prompt and a resource; the same limits as `serve`.
    let dir = plugin_dir(&[
        ("code_review", "code_review.wasm"),
        ("quotes", "quotes.wasm"),
        ("hostile", "hostile.wasm"),
    ]);
    let dir_arg = dir.path().to_str().unwrap();
    let (result, output) = call(&[dir_arg, "--resource", "quote://1"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(result["contents"][0]["text"].is_string(), "{result}");
    let (result, output) = call(&[dir_arg, "spin", "--fuel", "1000000"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        result["content"][0]["text"],
        "plugin `hostile` ran out of fuel after 1000000 units"
    );

    let (_, output) = call(&[echo, "echo", "--args", "[1]"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--args must be a JSON object"));
    assert!(output.stdout.is_empty());
}

async fn inspect(path: &Path) -> Value {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .arg("inspect")
        .arg(path)
        .envs(crate::support::test_cache())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn inspect_says_what_a_plugin_offers_asks_for_and_was_refused() {
    let report = inspect(&crate::support::test_plugins().join("hostile.wasm")).await;
    let plugin = &report["plugins"][0];
    assert_eq!(plugin["plugin"], "hostile");
    assert!(
        plugin["exports"]
            .as_array()
            .unwrap()
            .contains(&Value::from("mcpbox:plugin/tools@0.1.0"))
    );
    assert!(
        plugin["wasiPackagesImported"]
            .as_array()
            .unwrap()
            .contains(&Value::from("wasi:http"))
    );
    let refused = &plugin["refused"][0];
    assert_eq!(refused["item"], "tool `schema_bomb`");
    assert!(refused["reason"].as_str().unwrap().contains("too complex"));
    assert!(
        plugin["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "spin" && t["inputSchema"].is_object())
    );
    assert_eq!(
        plugin["grants"],
        "nothing (no files, network or environment)"
    );

    let dir = plugin_dir(&[("echo_tools", "a.wasm"), ("echo_tools", "b.wasm")]);
    let report = inspect(dir.path()).await;
    let refused = report["namesRefused"].as_array().unwrap();
    assert_eq!(refused.len(), 4);
    assert!(
        refused[0]
            .as_str()
            .unwrap()
            .contains("of plugin `b`: the name is served by plugin `a`")
    );
}

/// `cargo package -p mcpbox-sdk` passes: the crate builds from its package alone.
#[test]
fn the_sdk_packages_on_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = std::process::Command::new("cargo")
        .args([
            "package",
            // The SDK and its macros, packaged together (the macros are not yet published).
            "-p",
            "mcpbox-sdk-macros",
            "-p",
            "mcpbox-sdk",
            "--allow-dirty",
            "--target-dir",
        ])
        .arg(root.join("target/package-check"))
        .envs(crate::support::THROWAWAY_BUILD)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo package -p mcpbox-sdk failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
