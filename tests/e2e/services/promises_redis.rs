//! Promises of SECURITY.md that need a real `redis-server` (#61): a call that cannot be recorded
//! (Redis down, with `--call-id-header`) is refused with -32030 without running.

use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::support::{HttpServer, STEP, http_stub, modern_call_headers, plugin_dir, post};
use crate::tools::Redis;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A 2026-07-28 `tools/call` of `tool` with `arguments` (JSON text), carrying the balancer's
/// request id `id` if any: the HTTP status and the JSON-RPC answer.
async fn call(url: &str, id: Option<&str>, tool: &str, arguments: &str) -> (u16, Value) {
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},{META}}}}}"#
    );
    let mut headers = modern_call_headers(tool).to_vec();
    if let Some(id) = id {
        headers.push(("x-request-id", id));
    }
    let response = post(&client, url, &headers, &body).await;
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, value)
}

/// SECURITY.md, "The HTTP transport": with `--call-id-header`, a call that cannot be recorded
/// (Redis went away) is refused without running, with -32030; the host serves on, and a call
/// without an id (nothing to record) still runs. The tool fetches from a stub server, so a run
/// is seen there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_be_recorded_is_refused_without_running() {
    let mut redis = Redis::start();
    let stub = http_stub("fetched").await;
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!(
            "[limits]\ntimeout-ms = 20000\n[http]\nallow = [\"127.0.0.1:{}\"]\n",
            stub.port
        ),
    )
    .unwrap();
    let server = HttpServer::start(
        dir.path(),
        &["--state", &redis.url(), "--call-id-header", "X-Request-Id"],
    )
    .await;
    let fetch = format!(r#"{{"url":"http://127.0.0.1:{}/"}}"#, stub.port);

    // Recorded and run.
    let (status, first) = call(&server.url, Some("id-1"), "http_get", &fetch).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["result"]["content"][0]["text"], "fetched", "{first}");
    assert_eq!(stub.hits.load(Ordering::SeqCst), 1);

    redis.stop();
    let (status, refused) = call(&server.url, Some("id-2"), "http_get", &fetch).await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["error"]["code"], -32030, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "request id-2: the call could not be recorded, so a retry could run it twice; it was not run ("
        ) && message.contains(&format!("Redis at 127.0.0.1:{}", redis.port)),
        "{message}"
    );
    assert_eq!(
        stub.hits.load(Ordering::SeqCst),
        1,
        "the refused call ran: {}",
        server.stderr.text()
    );
    server.stderr.wait_for("cannot record the call").await;

    // Without an id there is nothing to record: the call runs.
    let (status, plain) = call(&server.url, None, "http_get", &fetch).await;
    assert_eq!(status, 200, "{plain}");
    assert_eq!(plain["result"]["content"][0]["text"], "fetched", "{plain}");
    assert_eq!(stub.hits.load(Ordering::SeqCst), 2);
}
