//! The status page at `/`, rendered by a real headless browser (Debian's `chromium`): it lists
//! the loaded plugins with their tools, grants, limits and call counts, and shows a plugin
//! added while serving.

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::external::debian;
use crate::support::{HttpServer, RecordingClient, STEP, all_examples, plugin_dir};

/// The page's DOM after chromium has loaded and rendered `url`.
async fn render(url: &str) -> String {
    let chromium = debian("chromium", "chromium");
    let profile = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(STEP, command.output())
        .await
        .expect("chromium renders the page in time")
        .expect("run chromium");
    assert!(output.status.success(), "chromium failed: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn a_real_browser_renders_the_plugins_and_sees_one_added_live() {
    let dir = all_examples();
    std::fs::write(
        dir.path().join("quotes.toml"),
        "title = \"Famous quotes\"\n[http]\nallow = [\"api.example.com\"]\n[limits]\nfuel = 123_000_000\n",
    )
    .unwrap();
    let server = HttpServer::start(dir.path(), &["--reload-debounce-ms", "50"]).await;
    let client = server.connect(RecordingClient::new(&json!({})), None).await;
    for _ in 0..3 {
        client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
    }
    client
        .call_tool(
            CallToolRequestParams::new("divide").with_arguments(
                json!({"dividend": 1, "divisor": 0})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();

    let url = format!("http://127.0.0.1:{}/", server.port);
    let dom = render(&url).await;
    assert!(dom.contains("<h1>mcpbox "), "{dom}");
    for plugin in ["echo_tools", "code_review", "quotes"] {
        assert!(
            dom.contains(&format!("id=\"plugin-{plugin}\"")),
            "{plugin} is listed: {dom}"
        );
    }
    assert!(dom.contains("Famous quotes"), "the title: {dom}");
    assert!(dom.contains("api.example.com"), "the grant: {dom}");
    assert!(dom.contains("123000000 fuel"), "the limit: {dom}");
    assert!(dom.contains("<code>echo</code>"), "a tool: {dom}");
    assert!(dom.contains("ok: 3"), "echo's calls: {dom}");
    assert!(dom.contains("is_error: 1"), "divide's error: {dom}");
    assert!(
        dom.contains("started: 3 plugins loaded"),
        "the history: {dom}"
    );
    assert!(!dom.contains("id=\"plugin-tools_only\""));

    // A plugin dropped into the directory shows on the next render.
    let added = plugin_dir(&[("tools_only", "tools_only.wasm")]);
    let staged = dir.path().join(".tools_only.wasm.tmp");
    std::fs::copy(added.path().join("tools_only.wasm"), &staged).unwrap();
    std::fs::rename(&staged, dir.path().join("tools_only.wasm")).unwrap();
    server.stderr.wait_for("added plugin").await;
    let dom = render(&url).await;
    assert!(dom.contains("id=\"plugin-tools_only\""), "{dom}");
    assert!(dom.contains("added plugin `tools_only`"), "{dom}");
    client.cancel().await.unwrap();
}
