//! The status page at `/` keeps the gate of `/mcp` (token, `Origin`), and `--no-status-page`
//! turns it off. What it shows, rendered by a real browser, is in `services::chromium`.

use std::time::Duration;

use crate::support::{HttpServer, plugin_dir};

#[tokio::test]
async fn the_status_page_keeps_the_gate_and_can_be_turned_off() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &["--auth-token", "sekrit"]).await;
    let url = format!("http://127.0.0.1:{}/", server.port);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401);
    let page = http.get(&url).bearer_auth("sekrit").send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let foreign = http
        .get(&url)
        .bearer_auth("sekrit")
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);

    let off = HttpServer::start(dir.path(), &["--no-status-page"]).await;
    let response = http
        .get(format!("http://127.0.0.1:{}/", off.port))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
