//! Resource updates of plugins that keep each caller's state apart (caller buckets): an update
//! a plugin announces while serving one caller reaches that caller's subscriptions only — in
//! each of its sessions, 2025-11-25 `resources/subscribe` and 2026-07-28 `subscriptions/listen`
//! alike — and never another caller's, who would otherwise learn when the first was active.
//! Updates of a plugin without caller buckets still reach every subscriber.
//!
//! Absence is never waited out: each stream reads its events in order, and a later update every
//! subscriber hears (from a plugin without caller buckets) shows what came before it.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{HttpServer, STEP, SseReader, plugin_dir, post, token_config};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
/// The memory plugin's resource: each caller's own knowledge graph.
const GRAPH: &str = "memory://knowledge-graph";
/// Resources the host probe (no caller buckets) says changed, to mark a point in each stream.
const MARKS: [&str; 2] = ["probe://mark-1", "probe://mark-2"];
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// One caller with two subscriptions to [`GRAPH`] and the [`MARKS`]: a 2025-11-25 session's
/// standalone stream, and a 2026-07-28 listen stream.
struct Subscriber {
    name: &'static str,
    token: &'static str,
    session: String,
    streams: [SseReader; 2],
}

impl Subscriber {
    async fn new(
        client: &reqwest::Client,
        url: &str,
        name: &'static str,
        token: &'static str,
    ) -> Self {
        let auth = format!("Bearer {token}");
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let response = post(client, url, &[("authorization", &auth)], initialize).await;
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let headers = [
            ("authorization", auth.as_str()),
            ("mcp-session-id", &session),
        ];
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(post(client, url, &headers, initialized).await.status(), 202);
        for (id, uri) in [GRAPH, MARKS[0], MARKS[1]].into_iter().enumerate() {
            let subscribe = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"resources/subscribe","params":{{"uri":"{uri}"}}}}"#,
                id + 2
            );
            let reply = message(
                &post(client, url, &headers, &subscribe)
                    .await
                    .text()
                    .await
                    .unwrap(),
            );
            assert_eq!(reply["result"], json!({}), "{reply}");
        }
        let standalone = client
            .get(url)
            .header("authorization", &auth)
            .header("mcp-session-id", &session)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(standalone.status(), 200);

        let listen = format!(
            r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["{GRAPH}","{}","{}"]}},{META}}}}}"#,
            MARKS[0], MARKS[1]
        );
        let response = client
            .post(url)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(listen)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut listen = SseReader::new(response);
        let (_, ack) = listen.next_json().await.expect("the acknowledgement");
        assert_eq!(
            ack["params"]["notifications"]["resourceSubscriptions"],
            json!([GRAPH, MARKS[0], MARKS[1]]),
            "{ack}"
        );
        Self {
            name,
            token,
            session,
            streams: [SseReader::new(standalone), listen],
        }
    }

    /// Call `tool` in this caller's 2025-11-25 session; its result.
    async fn call(
        &self,
        client: &reqwest::Client,
        url: &str,
        tool: &str,
        arguments: Value,
    ) -> Value {
        let auth = format!("Bearer {}", self.token);
        let headers = [
            ("authorization", auth.as_str()),
            ("mcp-session-id", &self.session),
        ];
        let call = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        let response = post(client, url, &headers, &call.to_string()).await;
        let reply = message(&response.text().await.unwrap());
        assert_eq!(reply["result"]["isError"], false, "{tool}: {reply}");
        reply["result"].clone()
    }

    /// The URI of the next update on each of this caller's streams, which must be `expected`.
    async fn hears(&mut self, expected: &str, what: &str) {
        for (stream, kind) in self
            .streams
            .iter_mut()
            .zip(["resources/subscribe", "subscriptions/listen"])
        {
            let (_, update) = tokio::time::timeout(STEP, stream.next_json())
                .await
                .expect("an update in time")
                .expect("the stream is open");
            assert_eq!(
                update["method"], "notifications/resources/updated",
                "{update}"
            );
            assert_eq!(
                update["params"]["uri"], expected,
                "{} ({kind}) was to hear {what} next: {update}",
                self.name
            );
        }
    }
}

/// The JSON-RPC message in a response body (plain JSON, or the last `data:` of an event
/// stream).
fn message(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(body);
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn entity(name: &str) -> Value {
    json!({"entities": [{"name": name, "entityType": "note", "observations": []}]})
}

#[tokio::test]
async fn a_callers_resource_updates_reach_only_that_callers_subscriptions() {
    let dir = plugin_dir(&[("memory", "memory.wasm"), ("host_probe", "host_probe.wasm")]);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/memory/memory.toml"),
        dir.path().join("memory.toml"),
    )
    .unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = token_config(
        config_dir.path(),
        &[("alice", ALICE, &[]), ("bob", BOB, &[])],
        "",
    );
    let server = HttpServer::start(dir.path(), &["--config", config.to_str().unwrap()]).await;
    let (client, url) = (reqwest::Client::new(), server.url.as_str());
    let mut alice = Subscriber::new(&client, url, "alice", ALICE).await;
    let mut bob = Subscriber::new(&client, url, "bob", BOB).await;

    // Alice changes her graph: both of her sessions hear of it.
    alice
        .call(&client, url, "create_entities", entity("alice's"))
        .await;
    alice.hears(GRAPH, "her own change").await;
    // An update of a plugin without caller buckets reaches everyone, after anything before it:
    // bob hears the mark, and nothing of alice's change before it.
    alice
        .call(&client, url, "touch", json!({"uri": MARKS[0]}))
        .await;
    alice.hears(MARKS[0], "the first mark").await;
    bob.hears(MARKS[0], "the first mark, and nothing of alice's change")
        .await;

    // Bob's own change reaches bob, and alice hears nothing of it.
    bob.call(&client, url, "create_entities", entity("bob's"))
        .await;
    bob.hears(GRAPH, "his own change").await;
    bob.call(&client, url, "touch", json!({"uri": MARKS[1]}))
        .await;
    bob.hears(MARKS[1], "the second mark").await;
    alice
        .hears(MARKS[1], "the second mark, and nothing of bob's change")
        .await;
}
