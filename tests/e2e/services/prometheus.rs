//! Prometheus metrics as an operator sees them: Debian's real Prometheus server scrapes
//! `/metrics` (behind the bearer token) while calls of every outcome run, and its queries
//! must show the exact counts.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::external::Prometheus;
use crate::support::{HttpServer, RecordingClient, STEP, plugin_dir, tool_text};

const TOKEN: &str = "metrics-test-token";

const HOSTILE_LIMITS: &str =
    "[limits]\nfuel = 500_000_000\ntimeout-ms = 2000\nmemory-mib = 32\noutput-kib = 16\n";

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, RecordingClient>,
    tool: &'static str,
    arguments: Value,
) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    tool_text(&result)
}

/// Poll `query` until its one sample equals `expected` (Prometheus scrapes every second).
async fn eventually(prometheus: &Prometheus, query: &str, expected: f64) {
    let deadline = tokio::time::Instant::now() + STEP;
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        last = prometheus.query(query).await;
        if last.len() == 1 && last[0].1 == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("`{query}` never became {expected}; last: {last:?}");
}

#[tokio::test]
async fn prometheus_scrapes_every_call_outcome_with_exact_counts() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("hostile", "hostile.wasm"),
    ]);
    std::fs::write(dir.path().join("hostile.toml"), HOSTILE_LIMITS).unwrap();
    let server = HttpServer::start(dir.path(), &["--auth-token", TOKEN]).await;
    let metrics_url = format!("http://127.0.0.1:{}/metrics", server.port);

    // The same gate as /mcp: no token, no metrics.
    let http = reqwest::Client::new();
    let refused = http.get(&metrics_url).send().await.unwrap();
    assert_eq!(refused.status(), 401);

    let prometheus = Prometheus::start(
        &format!("127.0.0.1:{}", server.port),
        "/metrics",
        Some(TOKEN),
    );
    eventually(&prometheus, r#"up{job="mcpbox"}"#, 1.0).await;

    let client = server
        .connect(RecordingClient::new(&json!({})), Some(TOKEN))
        .await;
    eventually(&prometheus, r#"mcpbox_sessions{transport="http"}"#, 1.0).await;
    let echoes = 25;
    for i in 0..echoes {
        let (text, is_error) = call(&client, "echo", json!({"text": format!("hi {i}")})).await;
        assert_eq!((text, is_error), (format!("hi {i}"), false));
    }
    assert!(
        call(&client, "divide", json!({"dividend": 1, "divisor": 0}))
            .await
            .1
    );
    assert!(call(&client, "echo", json!({"wrong": 1})).await.1);
    assert!(call(&client, "spin", json!({})).await.1);
    assert!(call(&client, "alloc_bomb", json!({"mib": 64})).await.1);
    assert!(call(&client, "panic", json!({"name": "boom"})).await.1);
    assert!(call(&client, "sleep_forever", json!({})).await.1);
    let (denied, is_error) = call(
        &client,
        "http_get",
        json!({"url": "http://127.0.0.1:9/never-granted"}),
    )
    .await;
    assert!(is_error && denied.contains("denied"), "{denied}");
    assert_eq!(
        call(&client, "ok", json!({})).await,
        ("fine".to_owned(), false)
    );

    // A 2026-07-28 call whose client goes away: cancelled.
    let cancel = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sleep_forever","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let gone = cancel
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "sleep_forever")
        .body(body)
        .send()
        .await;
    assert!(gone.is_err(), "the call should still be running");

    let calls = |plugin: &str, name: &str, outcome: &str| {
        format!(
            r#"mcpbox_plugin_calls_total{{plugin="{plugin}",kind="tool",name="{name}",outcome="{outcome}"}}"#
        )
    };
    eventually(&prometheus, &calls("echo_tools", "echo", "ok"), 25.0).await;
    eventually(&prometheus, &calls("echo_tools", "divide", "is_error"), 1.0).await;
    eventually(
        &prometheus,
        &calls("echo_tools", "echo", "invalid_arguments"),
        1.0,
    )
    .await;
    eventually(&prometheus, &calls("hostile", "spin", "out_of_fuel"), 1.0).await;
    eventually(
        &prometheus,
        &calls("hostile", "alloc_bomb", "out_of_memory"),
        1.0,
    )
    .await;
    eventually(&prometheus, &calls("hostile", "panic", "trap"), 1.0).await;
    eventually(
        &prometheus,
        &calls("hostile", "sleep_forever", "timeout"),
        1.0,
    )
    .await;
    eventually(&prometheus, &calls("hostile", "http_get", "denied"), 1.0).await;
    eventually(&prometheus, &calls("hostile", "ok", "ok"), 1.0).await;
    eventually(
        &prometheus,
        &calls("hostile", "sleep_forever", "cancelled"),
        1.0,
    )
    .await;
    eventually(
        &prometheus,
        r#"mcpbox_plugin_grant_denials_total{plugin="hostile",grant="http"}"#,
        1.0,
    )
    .await;
    // Every call that ran is timed; the refused arguments never ran.
    eventually(
        &prometheus,
        r#"mcpbox_plugin_call_duration_seconds_count{plugin="echo_tools",kind="tool"}"#,
        26.0,
    )
    .await;
    // 25 echoes and 8 other calls answered over the session; the cancelled one never was.
    eventually(
        &prometheus,
        r#"mcpbox_requests_total{method="tools/call",outcome="ok"}"#,
        33.0,
    )
    .await;
    eventually(
        &prometheus,
        r#"mcpbox_requests_total{method="tools/call",outcome="cancelled"}"#,
        1.0,
    )
    .await;
    eventually(&prometheus, "mcpbox_plugins_loaded", 2.0).await;
    eventually(&prometheus, "mcpbox_instances_in_use", 0.0).await;
    eventually(&prometheus, "mcpbox_instances_waiting", 0.0).await;
    let fuel = prometheus
        .query(r#"mcpbox_plugin_fuel_consumed_total{plugin="hostile"}"#)
        .await;
    assert!(
        fuel.len() == 1 && fuel[0].1 >= 500_000_000.0,
        "the spin used its whole budget: {fuel:?}"
    );
    let version = prometheus.query("mcpbox_build_info").await;
    assert_eq!(version.len(), 1, "{version:?}");
    assert_eq!(version[0].0["version"], env!("CARGO_PKG_VERSION"));

    client.cancel().await.unwrap();
}
