//! Budgets across replicas: two mcpbox processes sharing a real `redis-server` (`--state
//! redis://…`) keep one request rate and one count of sessions per caller, so alice spreading
//! her requests over both replicas is refused where one replica alone would have let her
//! through, while bob keeps his own; with Redis gone, each replica keeps her budgets alone
//! and serves on.

use std::path::Path;

use crate::external::Redis;
use crate::support::{HttpServer, plugin_dir, post, token_config};

const ALICE: &str = "alice-shared-budget-token-0123";
const BOB: &str = "bob-shared-budget-token-012345";

fn config(dir: &Path) -> std::path::PathBuf {
    token_config(
        dir,
        &[("alice", ALICE, &[]), ("bob", BOB, &[])],
        "[budgets]\nsessions = 2\n\n[budgets.principal.\"token:alice\"]\nrate = 0.2\nburst = 4.0\n",
    )
}

const ECHO: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
use crate::support::INITIALIZE;

async fn echo(client: &reqwest::Client, url: &str, token: &str) -> u16 {
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    post(client, url, &headers, ECHO).await.status().as_u16()
}

async fn initialize(client: &reqwest::Client, url: &str, token: &str) -> reqwest::Response {
    let auth = format!("Bearer {token}");
    post(client, url, &[("authorization", &auth)], INITIALIZE).await
}

#[tokio::test]
async fn replicas_sharing_a_store_keep_one_rate_and_one_count_of_sessions_per_caller() {
    let mut redis = Redis::start();
    let state = redis.url();
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let args = ["--config", config.to_str().unwrap(), "--state", &state];
    let one = HttpServer::start(plugins.path(), &args).await;
    let two = HttpServer::start(plugins.path(), &args).await;
    let client = reqwest::Client::new();

    // Alice's burst of four is spent across both replicas: her fifth request is refused on
    // either (alone, each replica would still have had two).
    for url in [&one.url, &two.url, &one.url, &two.url] {
        assert_eq!(echo(&client, url, ALICE).await, 200);
    }
    assert_eq!(echo(&client, &one.url, ALICE).await, 429);
    assert_eq!(echo(&client, &two.url, ALICE).await, 429);
    // Bob's rate is his own.
    for url in [&one.url, &two.url, &one.url, &two.url, &one.url] {
        assert_eq!(echo(&client, url, BOB).await, 200);
    }

    // Sessions: one on each replica is bob's budget of two; the third on either is refused.
    let first = initialize(&client, &one.url, BOB).await;
    assert_eq!(first.status(), 200);
    let first_id = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(initialize(&client, &two.url, BOB).await.status(), 200);
    let refused = initialize(&client, &one.url, BOB).await;
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["data"]["limit"], "sessions", "{body}");
    assert_eq!(initialize(&client, &two.url, BOB).await.status(), 429);
    // Ending one gives its place back, on whichever replica asks next.
    let ended = client
        .delete(&one.url)
        .header("authorization", format!("Bearer {BOB}"))
        .header("mcp-session-id", &first_id)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let mut reopened = false;
    for _ in 0..50 {
        if initialize(&client, &two.url, BOB).await.status() == 200 {
            reopened = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(reopened, "the ended session's place was not given back");

    // Redis goes away: each replica keeps the budgets alone, and serves on.
    redis.stop();
    assert_eq!(echo(&client, &one.url, BOB).await, 200);
    assert!(
        one.stderr
            .wait_for("the shared store did not keep a caller's request rate")
            .await
            .contains("this replica keeps it alone meanwhile")
    );
}
