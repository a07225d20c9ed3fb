//! A WASI 0.3 plugin in Python (`tests/plugins/python-p3`), built by componentize-py (PyPI,
//! pinned as `services::languages` pins it): its async tool streams its content and the host
//! serves it like a Rust 0.3 plugin.

use std::process::Command;

use serde_json::json;

use crate::languages::root;
use crate::support::{connect, json as to_json};
use crate::tools;

#[tokio::test(flavor = "multi_thread")]
async fn a_python_0_3_plugin_streams_its_tool_result() {
    let python = tools::python(&["componentize-py==0.25.1"]);
    let componentize = python.with_file_name("componentize-py");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("count_py.wasm");
    let output = tokio::task::block_in_place(|| {
        Command::new(&componentize)
            .arg("-d")
            .arg(root().join("wit/0.3"))
            .args(["-w", "mcpbox:plugin/plugin@0.3.0", "componentize", "-p"])
            .arg(root().join("tests/plugins/python-p3"))
            .arg("app")
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    });
    assert!(
        output.status.success(),
        "componentize-py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let client = connect(dir.path(), &[]).await;
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("count_py")
                .with_arguments(json!({"n": 3}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let texts: Vec<String> = to_json(&result)["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["1", "2", "3", "counted to 3"]);
}
