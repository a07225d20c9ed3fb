//! OpenTelemetry traces end to end: mcpbox exports over OTLP/HTTP (JSON) to a receiver this
//! test runs, and one tool call that makes an HTTP request must arrive as a tree: the MCP
//! request parented on the client's `traceparent` (from `_meta`, or from the HTTP header
//! through the HTTP span), the plugin call beneath it, and the plugin's HTTP request beneath
//! that.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::support::{HttpServer, STEP, http_stub, plugin_dir, post, v2026_call_headers};

/// Every span received, flattened from the OTLP JSON bodies.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Value>>>);

impl Receiver {
    /// Listen on loopback; the base URL.
    async fn start(&self) -> String {
        let spans = self.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(async move |body: axum::body::Bytes| {
                if let Ok(value) = serde_json::from_slice::<Value>(&body) {
                    let mut all = spans.0.lock().unwrap();
                    for resource in value["resourceSpans"].as_array().into_iter().flatten() {
                        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                            all.extend(scope["spans"].as_array().into_iter().flatten().cloned());
                        }
                    }
                }
                "{}"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    /// Wait until a span named `name` with trace id `trace` arrived.
    async fn span(&self, name: &str, trace: &str) -> Value {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            if let Some(span) = self
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name && s["traceId"].as_str() == Some(trace))
            {
                return span.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no span `{name}` in trace {trace}; got {:#?}",
                self.0.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

async fn call(url: &str, body: String, traceparent_header: Option<&str>) -> Value {
    let mut headers = v2026_call_headers("http_get").to_vec();
    if let Some(parent) = traceparent_header {
        headers.push(("traceparent", parent));
    }
    let response = post(&reqwest::Client::new(), url, &headers, &body).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_tool_calls_spans_arrive_as_a_tree_under_the_clients_trace() {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let stub = http_stub("{\"ok\":true}").await;
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!("[http]\nallow = [\"127.0.0.1:{}\"]\n", stub.port),
    )
    .unwrap();
    let server = HttpServer::start(dir.path(), &["--otlp-endpoint", &endpoint]).await;
    let target = format!("http://127.0.0.1:{}/data", stub.port);

    // The trace context in `_meta` (2026-07-28).
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"http_get","arguments":{{"url":"{target}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"traceparent":"00-{trace}-{client_span}-01"}}}}}}"#
    );
    let answer = call(&server.url, body, None).await;
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("ok")),
        "{answer}"
    );
    let request = receiver.span("tools/call", trace).await;
    assert_eq!(request["parentSpanId"], client_span, "{request}");
    assert_eq!(
        attribute(&request, "mcp.method").and_then(|v| v["stringValue"].as_str()),
        Some("tools/call")
    );
    let plugin = receiver.span("tool hostile", trace).await;
    assert_eq!(plugin["parentSpanId"], request["spanId"], "{plugin}");
    assert_eq!(
        attribute(&plugin, "mcpbox.call.name").and_then(|v| v["stringValue"].as_str()),
        Some("http_get")
    );
    let egress = receiver.span("GET 127.0.0.1", trace).await;
    assert_eq!(egress["parentSpanId"], plugin["spanId"], "{egress}");

    // The trace context in the HTTP header: the HTTP span carries it, the request is beneath.
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"http_get","arguments":{{"url":"{target}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    call(
        &server.url,
        body,
        Some(&format!("00-{trace}-{client_span}-01")),
    )
    .await;
    let http = receiver.span("POST /mcp", trace).await;
    assert_eq!(http["parentSpanId"], client_span, "{http}");
    let request = receiver.span("tools/call", trace).await;
    assert_eq!(request["parentSpanId"], http["spanId"], "{request}");
    let plugin = receiver.span("tool hostile", trace).await;
    assert_eq!(plugin["parentSpanId"], request["spanId"]);
    let service = server.stderr.text();
    assert!(service.contains("exporting traces over OTLP"), "{service}");
}
