//! Health and readiness as an orchestrator and a load balancer see them (issue 24, point 4):
//! `/healthz` and `/readyz` answer from the moment the port is bound, MCP requests wait until
//! the startup load is done, and a shared state store going away
//! keeps replicas ready (stateless tools serve on, stateful calls fail clearly, the metric
//! and the status page show the store down).

use std::time::Duration;

use serde_json::json;

use crate::support::{
    HttpServer, STEP, Stderr, call, example_plugins, mcpbox, plugin_dir, tool_text,
};
use crate::tools::Redis;

/// The address `--http 127.0.0.1:0` bound, read from the log as soon as it is bound.
async fn bound_address(stderr: &Stderr) -> String {
    let log = stderr.wait_for("--http port bound").await;
    let line = log
        .lines()
        .find(|l| l.contains("--http port bound"))
        .unwrap();
    line.split("bound=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line}"))
        .to_owned()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#;

#[tokio::test]
async fn health_and_readiness_answer_while_plugins_load() {
    // The slow plugin takes 8 s to list: startup waits its bounded 2 s for it, then serves
    // the others and adds it when it is done.
    let dir = plugin_dir(&[
        ("slow_list", "slow_list.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let mut child = mcpbox(
        dir.path(),
        &["--http", "127.0.0.1:0", "--auth-token", "secret"],
    )
    .spawn()
    .unwrap();
    let stderr = Stderr::collect(child.stderr.take().unwrap());
    let base = format!("http://{}", bound_address(&stderr).await);
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    let initialize = || {
        client
            .post(format!("{base}/mcp"))
            .header("authorization", "Bearer secret")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE)
            .send()
    };

    // While plugins load: alive, not ready, and an MCP request waits for the load.
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    let not_ready = get("/readyz").await.unwrap();
    assert_eq!(not_ready.status(), 503);
    assert!(
        !stderr.text().contains("serving MCP over HTTP"),
        "the probes were answered only once MCP was served:\n{}",
        stderr.text()
    );
    let held = initialize().await.unwrap();
    assert_eq!(held.status(), 200, "{:?}", held.text().await);
    assert!(held.headers().contains_key("mcp-session-id"));
    stderr.wait_for("serving MCP over HTTP").await;

    // Once the startup load is done, MCP is served; the slow plugin still lists.
    assert_eq!(initialize().await.unwrap().status(), 200);
    let still = get("/readyz").await.unwrap();
    assert_eq!(still.status(), 503);
    assert!(
        still
            .text()
            .await
            .unwrap()
            .contains("1 plugins still loading")
    );

    stderr.wait_for("loaded (late) plugin").await;
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    let _ = child.start_kill();
}

/// Read `mcpbox_state_store_up` from `/metrics`.
async fn store_up(client: &reqwest::Client, base: &str) -> Option<String> {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("mcpbox_state_store_up "))
        .map(str::to_owned)
}

/// Wait until `check` holds, retrying every 100 ms for at most one step.
async fn eventually<F: Future<Output = bool>>(mut check: impl FnMut() -> F, what: &str) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_state_store_outage_keeps_replicas_ready() {
    let mut redis = Redis::start();
    let dir = plugin_dir(&[("todo", "todo.wasm"), ("echo_tools", "echo_tools.wasm")]);
    std::fs::copy(
        example_plugins().join("todo.toml"),
        dir.path().join("todo.toml"),
    )
    .unwrap();
    let server = HttpServer::start(dir.path(), &["--state", &redis.url()]).await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let client = server
        .connect(crate::support::RecordingClient::new(&json!({})), None)
        .await;
    let tool = |name: &'static str, arguments| {
        let client = &client;
        async move {
            let result = client.call_tool(call(name, arguments)).await.unwrap();
            tool_text(&result)
        }
    };
    assert!(!tool("list", json!({})).await.1);
    assert_eq!(store_up(&http, &base).await.as_deref(), Some("1"));

    redis.stop();
    eventually(
        || async { store_up(&http, &base).await.as_deref() == Some("0") },
        "the metric shows the store down",
    )
    .await;
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(
        ready.status(),
        200,
        "a store outage keeps the replica ready"
    );
    assert!(ready.text().await.unwrap().contains("unavailable"));
    let (echoed, failed) = tool("echo", json!({"text": "still here"})).await;
    assert!(!failed && echoed == "still here", "{echoed}");
    let (text, failed) = tool("list", json!({})).await;
    assert!(
        failed && text.contains("state store is unavailable"),
        "{text}"
    );
    let page = http
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"class="down">down</strong>"#) && page.contains("Redis at 127.0.0.1"),
        "{page}"
    );

    redis.resume();
    eventually(
        || async { store_up(&http, &base).await.as_deref() == Some("1") },
        "the metric shows the store back",
    )
    .await;
    eventually(
        || async { !tool("list", json!({})).await.1 },
        "stateful calls work again",
    )
    .await;
    assert_eq!(
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ready\n"
    );
}
