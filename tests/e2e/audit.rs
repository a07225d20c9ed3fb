//! The audit log (`--audit-log`): a known sequence of requests from two callers over HTTP (and
//! one over stdio) leaves exactly one JSON line per `tools/call`, `prompts/get`,
//! `resources/read`, `completion/complete` and refusal, in order, naming the caller, the
//! method, the plugin, the item and the outcome, and never an argument or a token. SIGHUP
//! reopens the file, as logrotate needs.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{HttpServer, Raw, plugin_dir, post, token_config};

const ALICE: &str = "alice-audit-token-0123456789";
const BOB: &str = "bob-audit-token-0123456789";
/// Argument text that must never reach the audit log.
const SECRET: &str = "SECRET-ARGUMENT-TEXT";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The audit log's records, once it holds `count` lines (or after a while, whatever it holds).
async fn records(path: &Path, count: usize) -> Vec<Value> {
    let mut text = String::new();
    for _ in 0..300 {
        text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= count {
            // Anything written after the last expected record would show up now.
            tokio::time::sleep(Duration::from_millis(200)).await;
            text = std::fs::read_to_string(path).unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Each record as (principal, method, plugin, item, outcome, code), the fields the sequence
/// fixes.
fn summary(record: &Value) -> (String, String, String, String, String, Option<i64>) {
    let field = |name: &str| record[name].as_str().unwrap_or("-").to_owned();
    (
        field("principal"),
        field("method"),
        field("plugin"),
        field("item"),
        field("outcome"),
        record["code"].as_i64(),
    )
}

fn row(
    principal: &str,
    method: &str,
    plugin: &str,
    item: &str,
    outcome: &str,
    code: Option<i64>,
) -> (String, String, String, String, String, Option<i64>) {
    (
        principal.to_owned(),
        method.to_owned(),
        plugin.to_owned(),
        item.to_owned(),
        outcome.to_owned(),
        code,
    )
}

fn initialize(client: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{client}","version":"1"}}}}}}"#
    )
}

/// Open a 2025-11-25 session as `token`; the headers of its requests.
async fn session(client: &reqwest::Client, url: &str, auth: &str, name: &str) -> String {
    let response = post(client, url, &[("authorization", auth)], &initialize(name)).await;
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let headers = [("authorization", auth), ("mcp-session-id", id.as_str())];
    assert_eq!(post(client, url, &headers, initialized).await.status(), 202);
    id
}

#[tokio::test]
async fn every_call_and_refusal_leaves_one_record_in_order() {
    let plugins = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("code_review", "code_review.wasm"),
        ("quotes", "quotes.wasm"),
        ("hostile", "hostile.wasm"),
    ]);
    std::fs::write(
        plugins.path().join("hostile.toml"),
        "scopes = [\"admin\"]\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = token_config(
        dir.path(),
        &[("alice", ALICE, &["admin"]), ("bob", BOB, &[])],
        "",
    );
    let audit = dir.path().join("audit.jsonl");
    let server = HttpServer::start(
        plugins.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let url = &server.url;
    let (alice, bob) = (format!("Bearer {ALICE}"), format!("Bearer {BOB}"));

    let id = session(&client, url, &alice, "alice-client").await;
    let as_alice = [("authorization", alice.as_str()), ("mcp-session-id", &id)];
    let sequence = [
        // Not audited: lists.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{SECRET}"}}}}}}"#
        ),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"divide","arguments":{"dividend":7,"divisor":0}}}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"no_such_tool","arguments":{{"text":"{SECRET}"}}}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{{"name":"code_review","arguments":{{"language":"rust","focus":"{SECRET}"}}}}}}"#
        ),
        r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"quote://all"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"code_review"},"argument":{"name":"language","value":"ru"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ok","arguments":{}}}"#.to_owned(),
    ];
    for body in &sequence {
        let response = post(&client, url, &as_alice, body).await;
        assert_eq!(response.status(), 200, "{body}");
        // Read the whole reply (it may stream), so the requests run one after another.
        let reply = response.text().await.unwrap();
        assert!(
            reply.contains("\"result\"") || reply.contains("\"error\""),
            "{reply}"
        );
    }

    let id = session(&client, url, &bob, "bob-client").await;
    let as_bob = [("authorization", bob.as_str()), ("mcp-session-id", &id)];
    let refused = r#"{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"ok","arguments":{}}}"#;
    let response = post(&client, url, &as_bob, refused).await;
    assert_eq!(response.status(), 403);
    response.text().await.unwrap();
    let echo = format!(
        r#"{{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{SECRET}"}}}}}}"#
    );
    let response = post(&client, url, &as_bob, &echo).await;
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains(SECRET));

    // A 2026-07-28 request names its client and its trace in `_meta`.
    let v2026 = format!(
        r#"{{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{SECRET}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"v2026-client","version":"1"}},"traceparent":"00-{TRACE_ID}-00f067aa0ba902b7-01"}}}}}}"#
    );
    let headers = [
        ("authorization", bob.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let response = post(&client, url, &headers, &v2026).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());

    let records = records(&audit, 10).await;
    let rows: Vec<_> = records.iter().map(summary).collect();
    let (a, b) = ("token:alice", "token:bob");
    assert_eq!(
        rows,
        [
            row(a, "tools/call", "echo_tools", "echo", "ok", None),
            row(a, "tools/call", "echo_tools", "divide", "is_error", None),
            row(a, "tools/call", "-", "no_such_tool", "error", Some(-32602)),
            row(a, "prompts/get", "code_review", "code_review", "ok", None),
            row(a, "resources/read", "quotes", "quote://all", "ok", None),
            row(
                a,
                "completion/complete",
                "code_review",
                "prompt:code_review",
                "ok",
                None
            ),
            row(a, "tools/call", "hostile", "ok", "ok", None),
            row(b, "tools/call", "hostile", "ok", "refused_scope", None),
            row(b, "tools/call", "echo_tools", "echo", "ok", None),
            row(b, "tools/call", "echo_tools", "echo", "ok", None),
        ],
        "{records:#?}"
    );
    let ids: Vec<&Value> = records.iter().map(|r| &r["request_id"]).collect();
    assert_eq!(
        ids,
        [2, 3, 4, 5, 6, 7, 8]
            .iter()
            .map(|n| Value::from(*n))
            .chain(["b1", "b2", "m1"].map(Value::from))
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
    let clients: Vec<&str> = records
        .iter()
        .map(|r| r["client"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(&clients[..7], ["alice-client"; 7]);
    assert_eq!(&clients[7..], ["bob-client", "bob-client", "v2026-client"]);
    assert_eq!(records[9]["trace_id"], TRACE_ID);
    for record in &records {
        assert!(
            record["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{record}"
        );
        assert!(record["duration_ms"].as_f64().is_some(), "{record}");
    }
    // A plugin ran: its fuel is there. None ran: none.
    assert!(
        records[0]["fuel"].as_u64().is_some_and(|f| f > 0),
        "{}",
        records[0]
    );
    assert!(records[2]["fuel"].is_null(), "{}", records[2]);
    assert!(records[7]["fuel"].is_null(), "{}", records[7]);

    let text = std::fs::read_to_string(&audit).unwrap();
    for secret in [SECRET, ALICE, BOB] {
        assert!(
            !text.contains(secret),
            "`{secret}` is in the audit log:\n{text}"
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&audit).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[tokio::test]
async fn stdio_calls_are_recorded_as_the_local_user_and_stdout_is_refused() {
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut raw = Raw::initialized(plugins.path(), &["--audit-log", audit.to_str().unwrap()]).await;
    let reply = raw
        .request(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{SECRET}"}}}}}}"#
        ))
        .await;
    assert!(reply["result"].is_object(), "{reply}");
    let records = records(&audit, 1).await;
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(
        summary(&records[0]),
        row("local", "tools/call", "echo_tools", "echo", "ok", None)
    );
    assert_eq!(records[0]["client"], "raw");
    drop(raw);

    let output = crate::support::mcpbox(plugins.path(), &["--audit-log", "-"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--audit-log - is standard output"), "{said}");
}

#[tokio::test]
async fn sighup_reopens_the_audit_log_for_logrotate() {
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let rotated = dir.path().join("audit.jsonl.1");
    let mut raw = Raw::initialized(plugins.path(), &["--audit-log", audit.to_str().unwrap()]).await;
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}}}}}}"#
        )
    };
    assert!(raw.request(&call(1)).await["result"].is_object());
    assert_eq!(records(&audit, 1).await.len(), 1);

    // What logrotate does: move the file away, then signal.
    std::fs::rename(&audit, &rotated).unwrap();
    crate::support::hangup(&raw.child);
    raw.stderr.wait_for("reopened the audit log").await;
    assert!(raw.request(&call(2)).await["result"].is_object());

    let new = records(&audit, 1).await;
    assert_eq!(new.len(), 1, "{new:#?}");
    assert_eq!(new[0]["request_id"], 2);
    let old = records(&rotated, 1).await;
    assert_eq!(old.len(), 1, "{old:#?}");
    assert_eq!(old[0]["request_id"], 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&audit).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the reopened file is the owner's alone");
    }
}

/// A caller's huge names cost the audit log a bounded record each: eight unknown tools with
/// 1 MiB names leave eight short lines, each saying its item was cut and how long it was.
#[tokio::test]
async fn long_names_are_cut_in_the_record_and_the_record_says_so() {
    const NAME_BYTES: usize = 1 << 20;
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut raw = Raw::initialized(plugins.path(), &["--audit-log", audit.to_str().unwrap()]).await;
    for id in 1..=8u8 {
        let name = char::from(b'a' + id).to_string().repeat(NAME_BYTES);
        let reply = raw
            .request(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
            ))
            .await;
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
    }
    let records = records(&audit, 8).await;
    assert_eq!(records.len(), 8);
    for (i, record) in records.iter().enumerate() {
        let item = record["item"].as_str().unwrap();
        assert_eq!(item.len(), 512, "record {i}");
        assert_eq!(
            record["cut"],
            serde_json::json!({"item": NAME_BYTES}),
            "record {i}"
        );
        assert_eq!(record["outcome"], "error");
    }
    let size = std::fs::metadata(&audit).unwrap().len();
    assert!(size < 8 * 2048, "the audit log grew by {size} bytes");
    raw.assert_alive(9).await;
}
