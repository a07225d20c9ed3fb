//! The plugin contract as the host implements it: every host import is linked and answers
//! (features that land later answer with an error value, never a trap), subsets of the
//! exported interfaces load, and plugin output goes to the log, never to the protocol stream.

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{Raw, connect, json, plugin_dir};

#[tokio::test]
async fn every_host_import_is_linked_and_answers_without_trapping() {
    let dir = plugin_dir(&[("host_probe", "host_probe.wasm")]);
    let client = connect(dir.path(), &["--log", "info,plugin=debug"]).await;
    let result = json(
        &client
            .call_tool(CallToolRequestParams::new("probe_host"))
            .await
            .expect("probe_host"),
    );
    assert_ne!(result["isError"], true, "{result}");
    let answers: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answers["cancelled"], false);
    for feature in ["sample", "elicit", "roots"] {
        let error = answers[feature]
            .as_str()
            .unwrap_or_else(|| panic!("{feature} should fail: {answers}"));
        assert!(error.contains("not available"), "{feature}: {error}");
    }
    // The log import reaches the host's log, tagged with the plugin.
    let log = client
        .stderr
        .wait_for("probe: logging through the host")
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("probe: logging through the host"))
        .unwrap();
    assert!(line.contains("host_probe"), "{line}");
}

#[tokio::test]
async fn a_component_exporting_only_tools_loads_and_serves() {
    let dir = plugin_dir(&[("tools_only", "tools_only.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    assert_eq!(reply["result"]["tools"][0]["name"], "shout");
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shout","arguments":{"text":"quiet"}}}"#)
        .await;
    assert_eq!(
        reply["result"]["content"],
        json!([{"type": "text", "text": "QUIET"}])
    );
    // It exports no prompts: the list is empty, and nothing is advertised.
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":3,"method":"prompts/list"}"#)
        .await;
    assert_eq!(reply["result"]["prompts"], json!([]));
}

#[tokio::test]
async fn plugin_stdout_and_stderr_go_to_the_log_and_never_to_stdout() {
    let dir = plugin_dir(&[("host_probe", "host_probe.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatter"}}"#)
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "said something");
    let log = raw.stderr.wait_for("probe stderr line").await;
    assert!(log.contains("probe stdout line"), "{log}");
    let tagged = log
        .lines()
        .filter(|l| l.contains("probe std"))
        .all(|l| l.contains("host_probe"));
    assert!(tagged, "{log}");
    // `finish` fails the test if stdout carried anything but JSON.
    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty() && status.success(), "{rest:?} {status}");
}
