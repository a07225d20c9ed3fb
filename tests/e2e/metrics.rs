//! Prometheus metrics in stdio mode: `--metrics-addr` serves the exposition (OpenMetrics) that
//! HTTP mode serves at `/metrics`. A real Prometheus server scraping every call outcome is in
//! `services::prometheus`.

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::support::{plugin_dir, tool_text};

#[tokio::test]
async fn stdio_mode_serves_metrics_on_metrics_addr() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = crate::support::connect(dir.path(), &["--metrics-addr", "127.0.0.1:0"]).await;
    let stderr = client.stderr.clone();
    for _ in 0..3 {
        let result = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(json!({"text": "x"}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(tool_text(&result).0, "x");
    }
    let response = reqwest::get(stderr.metrics_url().await).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = response.text().await.unwrap();
    assert!(
        text.contains(
            "mcpbox_plugin_calls_total{plugin=\"echo_tools\",kind=\"tool\",name=\"echo\",outcome=\"ok\"} 3\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("mcpbox_sessions{transport=\"stdio\"} 1\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
    client.service.cancel().await.unwrap();
}
