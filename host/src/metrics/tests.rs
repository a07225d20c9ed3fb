//! Tests of the metrics registry: the Grafana dashboard queries only metrics that exist, and
//! the gauges stay true.

use super::*;

#[test]
fn the_grafana_dashboard_queries_only_metrics_that_exist() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../deploy/grafana-dashboard.json"))
            .expect("the dashboard is JSON");
    let m = metrics();
    let plugin = PluginName::from("dashboard-test");
    let name: Arc<str> = Arc::from("t");
    m.request(&Method::CallTool, "ok", Duration::ZERO);
    m.call(
        &plugin,
        CallKind::Tool,
        &name,
        CallOutcome::Ok,
        Duration::ZERO,
    );
    m.fuel(&plugin, 1);
    m.denial(&plugin, Grant::Http);
    m.invalid_result(&plugin);
    let text = m.render();
    let mut queried = 0;
    let panels = dashboard["panels"].as_array().expect("panels");
    for target in panels
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
    {
        let expr = target["expr"].as_str().expect("expr");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !word.starts_with("mcpbox_") {
                continue;
            }
            let family = ["_bucket", "_count", "_sum", "_total", "_info"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .unwrap_or(word);
            queried += 1;
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "the dashboard queries {word}, which mcpbox does not export"
            );
        }
    }
    assert!(queried >= 15, "only {queried} metric references");
}

#[test]
fn the_exposition_names_every_family_and_counts() {
    let m = metrics();
    let plugin = PluginName::from("unit-test-plugin");
    let tool: Arc<str> = Arc::from("echo");
    m.call(
        &plugin,
        CallKind::Tool,
        &tool,
        CallOutcome::Ok,
        Duration::from_millis(1),
    );
    m.request(&Method::CallTool, "ok", Duration::from_millis(1));
    m.request(
        &Method::from_name("no/such\"method"),
        "error",
        Duration::from_millis(1),
    );
    let text = m.render();
    assert!(text.contains(
            "mcpbox_plugin_calls_total{plugin=\"unit-test-plugin\",kind=\"tool\",name=\"echo\",outcome=\"ok\"}"
        ));
    assert!(text.contains("mcpbox_requests_total{method=\"other\",outcome=\"error\"}"));
    assert!(!text.contains("no/such"));
    assert!(text.contains("mcpbox_request_duration_seconds_bucket{"));
    assert!(text.ends_with("# EOF\n"));
}
