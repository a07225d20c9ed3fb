//! Readiness when a shared state store (a real `redis-server`) goes away: replicas stay ready
//! (stateless tools serve on, stateful calls fail clearly, the metric and the status page show
//! the store down), and all is well again once it is back.

use serde_json::json;

use crate::external::Redis;
use crate::support::{HttpServer, STEP, call, example_plugins, plugin_dir, tool_text};

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

use crate::support::eventually;

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
