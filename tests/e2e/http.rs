//! The HTTP transports, end to end: rmcp's Streamable HTTP client for what clients do, raw
//! HTTP for the rules a well-behaved client never tests (headers, sessions, resumption).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    HttpServer, RecordingClient, STEP, SseReader, call, example_plugins, plugin_dir, tool_text,
};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(STEP).build().unwrap()
}

/// POST a JSON-RPC message the way clients do.
fn post(server: &HttpServer, body: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    post_as(server, body, session, "2025-11-25")
}

/// POST with this `MCP-Protocol-Version` (sent with the session id).
fn post_as(
    server: &HttpServer,
    body: &str,
    session: Option<&str>,
    version: &str,
) -> reqwest::RequestBuilder {
    let mut request = http()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", version);
    }
    request
}

/// Initialize a raw session; its id.
async fn raw_session(server: &HttpServer) -> String {
    let response = post(server, INIT, None).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let id = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        id.len() >= 32 && id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{id}"
    );
    let initialized = post(
        server,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        Some(&id),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(initialized.status(), 202);
    id
}

#[tokio::test]
async fn several_sessions_work_at_once_and_each_hears_of_plugin_changes() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("interactive", "interactive.wasm"),
    ]);
    let server = HttpServer::start(dir.path(), &[]).await;
    // Each session's call asks its client for a sample, and no client answers before all
    // three have been asked: the three calls are in flight together, or the test fails.
    let together = Arc::new(tokio::sync::Barrier::new(3));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let recorder =
            RecordingClient::new(&json!({"sampling": {}})).sampling_together(Arc::clone(&together));
        clients.push((server.connect(recorder.clone(), None).await, recorder));
    }
    let calls = clients
        .iter()
        .enumerate()
        .map(|(i, (service, _))| async move {
            let text = format!("session {i}");
            let result = service
                .call_tool(call("summarize", json!({ "text": text })))
                .await
                .unwrap();
            assert_eq!(
                tool_text(&result),
                ("Summary: a short summary".to_owned(), false)
            );
        });
    futures::future::join_all(calls).await;
    for (i, (_, recorder)) in clients.iter().enumerate() {
        let asked = recorder.events("sampling");
        assert_eq!(asked.len(), 1, "{asked:?}");
        let prompt = asked[0]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(prompt.ends_with(&format!("session {i}")), "{prompt}");
    }
    let result = clients[0]
        .0
        .call_tool(call("echo", json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("still here".to_owned(), false));

    std::fs::copy(
        example_plugins().join("quotes.wasm"),
        dir.path().join(".quotes.tmp"),
    )
    .unwrap();
    std::fs::rename(
        dir.path().join(".quotes.tmp"),
        dir.path().join("quotes.wasm"),
    )
    .unwrap();
    for (service, recorder) in &clients {
        recorder.wait_for("resources/list_changed", 1).await;
        assert_eq!(service.list_all_resources().await.unwrap().len(), 2);
        assert!(recorder.events("tools/list_changed").is_empty());
    }
}

#[tokio::test]
async fn progress_logs_and_sampling_travel_on_the_requests_own_stream() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let recorder = RecordingClient::new(&json!({"sampling": {}}));
    let service = server.connect(recorder.clone(), None).await;
    let result = service
        .call_tool(call("summarize", json!({"text": "over HTTP"})))
        .await
        .unwrap();
    assert_eq!(
        tool_text(&result),
        ("Summary: a short summary".to_owned(), false)
    );
    let result = service
        .call_tool(call("countdown", json!({"steps": 3})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "done after 3 steps");
    recorder.wait_for("progress", 3).await;
}

#[tokio::test]
async fn a_ready_answer_is_one_json_object_and_what_streams_gets_a_stream() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("interactive", "interactive.wasm"),
    ]);
    // No spare instances: a call that finds one being made waits for it, and on a loaded
    // machine a debug build's echo can instantiate slowly enough to get spares; its answer is
    // then not ready at once.
    let server = HttpServer::start(dir.path(), &["--spare-instances", "never"]).await;
    let id = raw_session(&server).await;
    let echo = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

    // Ready at once, nothing sent first, JSON accepted: one JSON object. Whether a call is
    // ready at once is the machine's to say (a debug build on a loaded machine can cross an
    // epoch tick and yield), and one that is not comes as a stream, which is right too; of a
    // few calls, at least one must be answered at once, as JSON.
    let mut as_json = 0;
    for n in 10..15 {
        let body = echo.replace(r#""id":2"#, &format!(r#""id":{n}"#));
        let response = post(&server, &body, Some(&id)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let kind = response.headers()["content-type"].clone();
        let reply = if kind == "application/json" {
            as_json += 1;
            response.json::<Value>().await.unwrap()
        } else {
            assert_eq!(kind, "text/event-stream");
            SseReader::new(response).next_json().await.unwrap().1
        };
        assert_eq!(reply["id"], n);
        let text = &reply["result"]["content"][0]["text"];
        assert_eq!(text, "hi", "{reply}\n{}", server.stderr.text());
        if as_json > 0 {
            break;
        }
    }
    assert_eq!(
        as_json, 1,
        "no echo call of five was answered as one JSON object"
    );

    // A client that takes only event streams gets one, with an event id to resume from.
    let response = http()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .body(echo.replace(r#""id":2"#, r#""id":3"#))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (event_id, reply) = SseReader::new(response).next_json().await.unwrap();
    assert!(event_id.is_some(), "{reply}");
    assert_eq!(reply["id"], 3);

    // A call that sends progress first: a stream, the notifications and then the answer.
    let countdown = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":2},"_meta":{"progressToken":"t"}}}"#;
    let response = post(&server, countdown, Some(&id)).send().await.unwrap();
    let kind = response.headers()["content-type"].clone();
    if kind != "text/event-stream" {
        panic!(
            "countdown answered as {kind:?}: {}\n{}",
            response.text().await.unwrap(),
            server.stderr.text()
        );
    }
    let mut events = SseReader::new(response);
    let mut seen = Vec::new();
    loop {
        let (_, message) = events.next_json().await.expect("the answer on the stream");
        let answer = message.get("method").is_none();
        seen.push(message);
        if answer {
            break;
        }
    }
    let progress = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    let answer = seen.last().map(ToString::to_string).unwrap_or_default();
    assert_eq!(
        progress,
        2,
        "the stream carried: {seen:?}\n{}",
        server.stderr.text()
    );
    assert!(
        answer.contains(r#""id":4"#) && answer.contains("done after 2 steps"),
        "{answer}"
    );
}

#[tokio::test]
async fn sessions_are_required_checked_and_can_be_ended() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let id = raw_session(&server).await;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    let response = post(&server, list, Some(&id)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = SseReader::new(response);
    let (_, reply) = events.next_json().await.unwrap();
    assert_eq!(reply["result"]["tools"].as_array().map(Vec::len), Some(4));

    // JSON instead of SSE for a client that accepts only JSON.
    let json_only = http()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", &id)
        .body(list)
        .send()
        .await
        .unwrap();
    assert_eq!(json_only.headers()["content-type"], "application/json");
    assert_eq!(
        json_only.json::<Value>().await.unwrap()["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(4)
    );

    assert_eq!(
        post(&server, list, None).send().await.unwrap().status(),
        400,
        "no session id"
    );
    assert_eq!(
        post(&server, list, Some("not-a-session"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let bad_version = post_as(&server, list, Some(&id), "1999-01-01")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_version.status(), 400);
    for version in ["2025-06-18", "2025-03-26", "2024-11-05"] {
        let ok = post_as(&server, list, Some(&id), version)
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200, "{version}");
    }
    let garbage = post(&server, "{not json", Some(&id)).send().await.unwrap();
    assert_eq!(garbage.status(), 400);
    assert_eq!(
        garbage.json::<Value>().await.unwrap()["error"]["code"],
        -32700
    );
    let huge = post(&server, &"x".repeat(5 << 20), Some(&id))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);

    let deleted = http()
        .delete(&server.url)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(
        post(&server, list, Some(&id))
            .send()
            .await
            .unwrap()
            .status(),
        404,
        "an ended session is gone"
    );
}

#[tokio::test]
async fn foreign_origins_and_hosts_are_refused() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let evil_origin = post(&server, INIT, None)
        .header("origin", "http://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(evil_origin.status(), 403);
    let evil_host = post(&server, INIT, None)
        .header("host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(evil_host.status(), 403);
    let wrong_port = post(&server, INIT, None)
        .header("origin", "http://localhost:1")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_port.status(), 403);
    let local = format!("localhost:{}", server.port);
    let ok = post(&server, INIT, None)
        .header("host", &local)
        .header("origin", format!("http://{local}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_bearer_token_is_required_when_configured() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &["--auth-token", "s3cret"]).await;
    let refused = post(&server, INIT, None).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        r#"Bearer realm="mcpbox""#
    );
    let wrong = post(&server, INIT, None)
        .header("authorization", "Bearer nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let service = server
        .connect(RecordingClient::new(&json!({})), Some("s3cret"))
        .await;
    let result = service
        .call_tool(call("echo", json!({"text": "authorized"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("authorized".to_owned(), false));
}

#[tokio::test]
async fn a_dropped_stream_is_resumed_with_last_event_id() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let id = raw_session(&server).await;
    let call = r#"{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"countdown","arguments":{"steps":10,"delay_ms":50},"_meta":{"progressToken":"r"}}}"#;
    let mut events = SseReader::new(post(&server, call, Some(&id)).send().await.unwrap());
    let (first_id, first) = events.next_json().await.unwrap();
    assert_eq!(first["method"], "notifications/progress");
    let (last_id, _) = events.next_json().await.unwrap();
    drop(events); // the connection drops mid-call; the call goes on

    let resumed = http()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .header("last-event-id", last_id.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let mut events = SseReader::new(resumed);
    let mut progress = Vec::new();
    let reply = loop {
        let (event_id, message) = events.next_json().await.expect("the rest of the stream");
        assert_ne!(event_id, first_id, "nothing seen before is replayed");
        if message["id"] == "long" {
            break message;
        }
        progress.push(message["params"]["progress"].as_f64().unwrap());
    };
    assert_eq!(reply["result"]["content"][0]["text"], "done after 10 steps");
    assert_eq!(
        progress,
        (3..=10).map(f64::from).collect::<Vec<_>>(),
        "exactly what was missed"
    );
}

#[tokio::test]
async fn sse_clients_are_served() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let stream = http()
        .get(format!("{base}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut events = SseReader::new(stream);
    let endpoint = events.next().await.unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    assert!(
        endpoint.data.starts_with("/messages?session_id="),
        "{}",
        endpoint.data
    );
    let messages = format!("{base}{}", endpoint.data);
    let send = |body: &'static str| {
        http()
            .post(&messages)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"sse-client","version":"1"}}}"#;
    assert_eq!(send(init).await.unwrap().status(), 202);
    let (_, reply) = events.next_json().await.unwrap();
    assert_eq!(reply["result"]["protocolVersion"], "2024-11-05");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .unwrap();
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"old school"}}}"#).await.unwrap();
    let (_, reply) = events.next_json().await.unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "old school");
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut server = HttpServer::start(dir.path(), &[]).await;
    let _session = raw_session(&server).await;
    // An open event stream must not hold the shutdown up.
    let id = raw_session(&server).await;
    let _stream = http()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    let pid = server.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), server.child.wait())
        .await
        .expect("exits in time")
        .unwrap();
    assert!(status.success(), "{status}");
    server.stderr.wait_for("shutting down").await;
}

#[tokio::test]
async fn idle_sessions_expire() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &["--session-idle-secs", "1"]).await;
    let id = raw_session(&server).await;
    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let status = post(&server, ping, Some(&id))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .status();
        if status == 404 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the idle session never expired"
        );
        // Keep it idle between checks: poll rarely (a ping counts as use).
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    server.stderr.wait_for("expired after being idle").await;
}

#[tokio::test]
async fn allowed_origins_pass_with_cors_and_refusals_name_the_flag() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let app = "http://localhost:6274";
    let server = HttpServer::start(dir.path(), &["--allowed-origin", app]).await;
    // A browser's preflight, answered by CORS for the allowed origin.
    let preflight = http()
        .request(reqwest::Method::OPTIONS, &server.url)
        .header("origin", app)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,mcp-protocol-version",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], app);
    let allowed = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(allowed.contains("mcp-protocol-version"), "{allowed}");
    // The request itself passes the Origin check, and the browser may read the session id.
    let response = post(&server, INIT, None)
        .header("origin", app)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["access-control-allow-origin"], app);
    let exposed = response.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(exposed.contains("mcp-session-id"), "{exposed}");
    // Another origin is refused, and the refusal says how to allow it.
    let refused = post(&server, INIT, None)
        .header("origin", "https://other.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("--allowed-origin https://other.example.com"),
        "{text}"
    );
}

#[tokio::test]
async fn http_accepts_host_names_and_binds_before_plugins_load() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut child = crate::support::mcpbox(dir.path(), &["--http", "localhost:0"])
        .spawn()
        .unwrap();
    let stderr = crate::support::Stderr::collect(child.stderr.take().unwrap());
    let log = stderr.wait_for("serving MCP over HTTP").await;
    let bound = log.find("--http port bound").expect("the bind is logged");
    let loaded = log.find("loaded plugin").expect("the plugin is logged");
    assert!(
        bound < loaded,
        "the port is bound before plugins load:\n{log}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("serving MCP over HTTP"))
        .unwrap();
    let address = line
        .split("bound=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    let response = http()
        .get(format!("http://{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = child.start_kill();

    // A port in use fails at once, before any plugin loads.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = crate::support::mcpbox(dir.path(), &["--http", &format!("127.0.0.1:{port}")])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!("cannot listen on --http 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(!stderr.contains("loaded plugin"), "{stderr}");
    let output = crate::support::mcpbox(dir.path(), &["--http", "nonsense"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid --http address `nonsense`"),
        "{stderr}"
    );
}

/// The server card (SEP-2127's draft) at `/.well-known/mcp/server-card`: public, JSON,
/// readable from any origin, naming the endpoint clients reach and never a Host a request
/// made up; its lists only while anyone may connect without a token.
#[tokio::test]
async fn the_server_card_describes_the_endpoint_and_lists_only_what_is_public() {
    let dir = crate::support::all_examples();
    let server = HttpServer::start(dir.path(), &[]).await;
    let http = reqwest::Client::new();
    let card_url = server.url.replace("/mcp", "/.well-known/mcp/server-card");
    let response = http.get(&card_url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("public, max-age=")
    );
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["name"], "localhost/mcpbox", "{card}");
    assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
    assert!(card["$schema"].as_str().unwrap().contains("server-card"));
    let remote = &card["remotes"][0];
    assert_eq!(remote["type"], "streamable-http");
    assert_eq!(remote["url"], server.url.as_str(), "{card}");
    let versions = remote["supportedProtocolVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")));
    assert_eq!(remote["authentication"]["required"], false);
    assert_eq!(card["remotes"][1]["type"], "sse");
    assert!(card["capabilities"]["tools"].is_object(), "{card}");
    let tools: Vec<&str> = card["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"echo"), "{tools:?}");
    assert!(!card["prompts"].as_array().unwrap().is_empty());

    // A made-up Host never names the endpoint; a preflight is answered for GET.
    let card: Value = http
        .get(&card_url)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!card.to_string().contains("evil.example"), "{card}");
    let preflight = http
        .request(reqwest::Method::OPTIONS, &card_url)
        .header("origin", "https://elsewhere.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    drop(server);

    // With tokens: public still, saying a token is needed, and listing nothing.
    let config_dir = tempfile::tempdir().unwrap();
    let config =
        crate::support::token_config(config_dir.path(), &[("ops", "a-token-0123456789", &[])], "");
    let server = HttpServer::start(dir.path(), &["--config", config.to_str().unwrap()]).await;
    let card: Value = http
        .get(server.url.replace("/mcp", "/.well-known/mcp/server-card"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["remotes"][0]["authentication"]["required"], true,
        "{card}"
    );
    assert_eq!(
        card["remotes"][0]["authentication"]["schemes"],
        json!(["bearer"])
    );
    for list in ["tools", "prompts", "resources"] {
        assert!(card.get(list).is_none(), "{list}: {card}");
    }
}

/// Issue #55, finding 14: a base URL pasted without `/mcp` (and a POST to any other unknown
/// path) is answered with a JSON-RPC error naming the MCP endpoint, not an empty 405 that
/// clients report as "could not determine transport". `GET /` is still the status page.
#[tokio::test]
async fn a_post_anywhere_but_the_endpoint_names_it() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let base = format!("http://127.0.0.1:{}", server.port);
    for path in ["/", "/v1/mcp", "/mcp/"] {
        let response = http()
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INIT)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "POST {path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "POST {path}"
        );
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["jsonrpc"], "2.0", "POST {path}: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "POST {path}: {answer}");
        assert_eq!(
            answer["error"]["message"],
            "not the MCP endpoint: the MCP endpoint is /mcp (Streamable HTTP; the 2024-11-05 \
             HTTP+SSE transport is at /sse)",
            "POST {path}: {answer}"
        );
    }
    let page = http().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let unknown = http().get(format!("{base}/nothing")).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.text().await.unwrap(), "");
    // The endpoint itself is unchanged.
    assert_eq!(
        post(&server, INIT, None).send().await.unwrap().status(),
        200
    );
}
