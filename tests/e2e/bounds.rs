//! What one client can make the host hold: input-request state that binds what the
//! request carries, the plugin and the questions; at most N rounds; headers that must appear
//! once; memory per request and bytes in flight; sessions, listen streams and descriptors.
//! Each test drives the real binary with the attack, then checks the refusal, a neighbour
//! client, and (where memory is the point) RSS before, at its peak and after.

use serde_json::{Value, json};

use crate::support::{HttpServer, STEP, plugin_dir, post};

const VERSION: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
const CAPS: &str = r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}"#;

/// The body of a 2026-07-28 request: `fields` of params, then `_meta` with `meta` added.
fn body(id: u64, method: &str, fields: &str, meta: &str) -> String {
    let comma = if fields.is_empty() { "" } else { "," };
    let meta_comma = if meta.is_empty() { "" } else { "," };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{fields}{comma}"_meta":{{{VERSION},{CAPS}{meta_comma}{meta}}}}}}}"#
    )
}

/// POST a 2026-07-28 request; the status and the JSON-RPC answer.
async fn send(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: String,
) -> (u16, Value) {
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    let response = post(client, url, &headers, &body).await;
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text)
        .or_else(|_| {
            // An SSE answer: its last data line.
            text.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .map(serde_json::from_str)
                .unwrap_or(Ok(Value::Null))
        })
        .unwrap_or(Value::Null);
    (status, value)
}

/// `confirm {question}` of the interactive example, with retry fields.
async fn confirm(
    client: &reqwest::Client,
    url: &str,
    question: &str,
    retry: &str,
    meta: &str,
) -> (u16, Value) {
    let fields = format!(r#""name":"confirm","arguments":{{"question":"{question}"}}{retry}"#);
    send(
        client,
        url,
        "tools/call",
        Some("confirm"),
        body(1, "tools/call", &fields, meta),
    )
    .await
}

fn accept_all(state: &str) -> String {
    format!(
        r#","requestState":"{state}","inputResponses":{{"elicitation-1":{{"action":"accept","content":{{"confirm":true}}}}}}"#
    )
}

#[tokio::test]
async fn request_state_binds_what_the_request_carries() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();

    let (_, first) = confirm(&client, &server.url, "a", "", "").await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();

    // The same state for another target, with a value in `_meta` that does not parse as a
    // JSON tree: before, the params bound as `{}` and the plugin acted on B-OTHER.
    let deep = format!(r#""x":{}1{}"#, "[".repeat(200), "]".repeat(200));
    for meta in [deep.as_str(), r#""x":1e400"#] {
        let (status, answer) =
            confirm(&client, &server.url, "B-OTHER", &accept_all(&state), meta).await;
        assert!(answer["result"].is_null(), "{status} {answer}");
        assert!(!answer.to_string().contains("action=accept"), "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    // Such a value in a first request: no state is issued for params that cannot be bound.
    let (_, refused) = confirm(&client, &server.url, "a", "", r#""x":1e400"#).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be bound"),
        "{refused}"
    );

    // The honest retry completes.
    let (_, done) = confirm(&client, &server.url, "a", &accept_all(&state), "").await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("action=accept"), "{done}");
}

#[tokio::test]
async fn a_reload_refuses_answers_to_the_old_plugins_questions() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();

    let (_, first) = confirm(&client, &server.url, "may I read /srv/data?", "", "").await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();

    // Another build of the plugin: the same component with a custom section appended.
    let file = dir.path().join("interactive.wasm");
    let wasm =
        crate::support::with_custom_section(std::fs::read(&file).unwrap(), "mcpbox-test", &[]);
    let staged = dir.path().join(".interactive.tmp");
    std::fs::write(&staged, &wasm).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    server.stderr.wait_for("reloaded plugin").await;

    let (status, answer) = confirm(
        &client,
        &server.url,
        "may I read /srv/data?",
        &accept_all(&state),
        "",
    )
    .await;
    assert_eq!(answer["error"]["code"], -32602, "{status} {answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("replaced"), "{message}");
    // Asked anew, the client gets the new plugin's question.
    let (_, again) = confirm(&client, &server.url, "may I read /srv/data?", "", "").await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
}

/// Drive `ask_forever` round after round; the answer of the round that did not ask.
async fn ask_until_done(client: &reqwest::Client, url: &str) -> (usize, Value) {
    let mut retry = String::new();
    for round in 1..=20 {
        let fields = format!(r#""name":"ask_forever","arguments":{{}}{retry}"#);
        let (_, answer) = send(
            client,
            url,
            "tools/call",
            Some("ask_forever"),
            body(round, "tools/call", &fields, ""),
        )
        .await;
        let result = &answer["result"];
        if result["resultType"] != "input_required" {
            return (usize::try_from(round).unwrap() - 1, answer);
        }
        let answers: serde_json::Map<String, Value> = result["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (k.clone(), json!({"action": "accept", "content": {}})))
            .collect();
        retry = format!(
            r#","requestState":{},"inputResponses":{}"#,
            result["requestState"],
            Value::Object(answers)
        );
    }
    panic!("ask_forever was still asking after 20 rounds");
}

#[tokio::test]
async fn a_request_asks_the_client_in_a_bounded_number_of_rounds() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let (rounds, last) = ask_until_done(&client, &server.url).await;
    assert_eq!(rounds, 8, "{last}");
    assert_eq!(last["result"]["isError"], true, "{last}");
    assert!(last.to_string().contains("no more input"), "{last}");

    let server = HttpServer::start(dir.path(), &["--max-input-rounds", "2"]).await;
    let (rounds, last) = ask_until_done(&client, &server.url).await;
    assert_eq!(rounds, 2, "{last}");
}

#[tokio::test]
async fn headers_that_decide_the_call_must_appear_once() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let call = body(
        7,
        "tools/call",
        r#""name":"echo","arguments":{"text":"hi"}"#,
        "",
    );
    let base = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    for (i, repeated) in [
        ("mcp-name", "add"),
        ("mcp-method", "tools/list"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-session-id", "x"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut headers = base.to_vec();
        if i == 3 {
            headers.push(repeated);
        }
        headers.push(repeated);
        let response = post(&client, &server.url, &headers, &call).await;
        assert_eq!(response.status(), 400, "{repeated:?}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(repeated.0),
            "{answer}"
        );
    }
    let (status, answer) = send(&client, &server.url, "tools/call", Some("echo"), call).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
}

/// Resident and peak resident memory of `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A 3.1 MiB request: 100,000 small entries.
fn big_object() -> String {
    let entries: Vec<String> = (0..100_000)
        .map(|i| format!(r#""key{i:06}":{{"action":"accept"}}"#))
        .collect();
    format!("{{{}}}", entries.join(","))
}

#[tokio::test]
async fn memory_per_request_stays_a_small_multiple_of_its_size() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let pid = server.child.id().unwrap();
    let client = reqwest::Client::new();
    let object = big_object();
    let as_answers = body(
        1,
        "tools/call",
        &format!(r#""name":"echo","arguments":{{"text":"x"}},"inputResponses":{object}"#),
        "",
    );
    let as_arguments = body(
        2,
        "tools/call",
        &format!(r#""name":"echo","arguments":{object}"#),
        "",
    );
    let size = as_arguments.len() as u64;
    assert!(size > 3 << 20, "{size}");
    // Warm up: the allocator's arenas and the plugin's first instance.
    let (_, warm) = send(
        &client,
        &server.url,
        "tools/call",
        Some("echo"),
        as_arguments.clone(),
    )
    .await;
    assert!(
        warm.get("result").is_some() || warm.get("error").is_some(),
        "{warm}"
    );
    let (before, _) = memory(pid);

    let mut attacks = Vec::new();
    for i in 0..8 {
        let (client, url) = (client.clone(), server.url.clone());
        let body = if i % 2 == 0 {
            as_answers.clone()
        } else {
            as_arguments.clone()
        };
        attacks.push(tokio::spawn(async move {
            send(&client, &url, "tools/call", Some("echo"), body).await
        }));
    }
    // A neighbour's call meanwhile is answered.
    let neighbour = body(
        3,
        "tools/call",
        r#""name":"echo","arguments":{"text":"hi"}"#,
        "",
    );
    let (_, answer) = tokio::time::timeout(
        STEP,
        send(&client, &server.url, "tools/call", Some("echo"), neighbour),
    )
    .await
    .expect("the neighbour is answered");
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    for attack in attacks {
        let (status, answer) = attack.await.unwrap();
        // Refused: too many answers (-32602) or arguments the tool's schema refuses.
        assert!(
            answer["error"]["code"] == -32602 || answer["result"]["isError"] == true,
            "{status} {answer}"
        );
    }
    let (after, peak) = memory(pid);
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let report = format!(
        "RSS before {:.1} MiB, peak {:.1} MiB, after {:.1} MiB; 8 requests of {:.1} MiB",
        mib(before),
        mib(peak),
        mib(after),
        mib(size)
    );
    // Eight requests at once may cost at most a small multiple of their size (2.4 times,
    // measured on the development machine, 2026-11-29; with each large body copied four more
    // times while it is decoded, the peak was 204 MiB against this bound's 99)...
    assert!(peak.saturating_sub(before) < 4 * 8 * size, "{report}");
    // ...and memory goes back near where it was.
    assert!(after.saturating_sub(before) < 4 * size, "{report}");
}

#[tokio::test]
async fn request_bytes_in_flight_are_bounded() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &["--max-request-bytes-in-flight", "5000000"]).await;
    let client = reqwest::Client::new();
    let object = big_object();
    let big = body(
        1,
        "tools/call",
        &format!(r#""name":"echo","arguments":{object}"#),
        "",
    );
    // A client that declares a 4 MB body and sends it slowly holds its reservation while it
    // is being read.
    let stalled = {
        use tokio::io::AsyncWriteExt as _;
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
            .await
            .unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: echo\r\ncontent-length: 4000000\r\n\r\n{{",
            server.port
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream
    };
    let in_use = r#"mcpbox_limit_in_use{limit="request_bytes"}"#;
    let deadline = tokio::time::Instant::now() + STEP;
    while metric(&client, server.port, in_use).await < 4_000_000.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slow body was never reserved"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Another 3.1 MB request would pass the budget: refused before its body is read.
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let response = post(&client, &server.url, &headers, &big).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let text = response.text().await.unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        answer["error"]["data"]["limit"], "request_bytes",
        "{answer}"
    );
    assert!(text.contains("--max-request-bytes-in-flight"), "{text}");
    // The slow client goes away: its reservation is given back, and the same request passes.
    drop(stalled);
    let deadline = tokio::time::Instant::now() + STEP;
    while metric(&client, server.port, in_use).await > 0.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reservation was never given back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let response = post(&client, &server.url, &headers, &big).await;
    assert_eq!(response.status(), 200);
    // Small requests still pass once the big ones are done.
    let small = body(
        2,
        "tools/call",
        r#""name":"echo","arguments":{"text":"hi"}"#,
        "",
    );
    let (status, answer) = send(&client, &server.url, "tools/call", Some("echo"), small).await;
    assert_eq!(status, 200, "{answer}");
}

use crate::support::INITIALIZE;

async fn metric(client: &reqwest::Client, port: u16, name: &str) -> f64 {
    let text = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    crate::support::metric_value(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Open the standalone stream of session `id`: while it is open, something is in flight on
/// the session.
async fn standalone_stream(client: &reqwest::Client, url: &str, id: &str) -> reqwest::Response {
    let response = client
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn sessions_are_capped_and_freed() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &["--max-sessions", "20"]).await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    // Each session keeps its standalone stream open, so none can be ended to make room.
    let mut streams = Vec::new();
    let mut refused = 0;
    for _ in 0..30 {
        let response = post(&client, &server.url, &[], INITIALIZE).await;
        match response.status().as_u16() {
            200 => {
                let id = response.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                streams.push(standalone_stream(&client, &server.url, &id).await);
                ids.push(id);
            }
            503 => {
                refused += 1;
                assert_eq!(response.headers()["retry-after"], "1");
                let answer: Value = response.json().await.unwrap();
                assert_eq!(answer["error"]["data"]["limit"], "sessions", "{answer}");
                assert!(
                    answer["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("--max-sessions")
                );
            }
            other => panic!("initialize answered {other}"),
        }
    }
    assert_eq!((ids.len(), refused), (20, 10));
    // SSE sessions (2024-11-05) count too.
    let sse = client
        .get(format!("http://127.0.0.1:{}/sse", server.port))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 503);
    assert_eq!(
        metric(
            &client,
            server.port,
            r#"mcpbox_limit_in_use{limit="sessions"}"#
        )
        .await,
        20.0
    );
    assert!(
        metric(
            &client,
            server.port,
            r#"mcpbox_limit_refusals_total{limit="sessions"}"#
        )
        .await
            >= 11.0
    );
    // A 2026-07-28 neighbour needs no session.
    let call = body(
        5,
        "tools/call",
        r#""name":"echo","arguments":{"text":"hi"}"#,
        "",
    );
    let (status, _) = send(&client, &server.url, "tools/call", Some("echo"), call).await;
    assert_eq!(status, 200);
    // Ending one makes room for one.
    drop(streams);
    let deleted = client
        .delete(&server.url)
        .header("mcp-session-id", &ids[0])
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let response = post(&client, &server.url, &[], INITIALIZE).await;
    assert_eq!(response.status(), 200);
    assert!(
        server
            .stderr
            .text()
            .contains("refused a request: the server is at its limit of 20 open sessions")
    );
}

/// POST `body` on session `id` (2025-11-25, JSON answers only): the status and the answer.
async fn on_session(client: &reqwest::Client, url: &str, id: &str, body: &str) -> (u16, Value) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Initialize a session: its id.
async fn new_session(client: &reqwest::Client, url: &str) -> String {
    let response = post(client, url, &[], INITIALIZE).await;
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(on_session(client, url, &id, initialized).await.0, 202);
    id
}

/// Issue #55, finding 13: with the session table full, a newcomer is not locked out for the
/// idle window: the longest-idle session with nothing in flight is ended for it (its client
/// gets 404, as after an expiry, and re-initializes); a session with a call in flight is never
/// ended, however long idle.
#[tokio::test]
async fn a_full_session_table_ends_the_longest_idle_session_for_a_newcomer() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let server = HttpServer::start(dir.path(), &["--max-sessions", "3"]).await;
    let client = reqwest::Client::new();
    let url = &server.url;

    // The oldest session has a long call in flight (answered as JSON: no stream open).
    let busy = new_session(&client, url).await;
    let long = {
        let (client, url, busy) = (client.clone(), url.clone(), busy.clone());
        tokio::spawn(async move {
            let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":4,"delay_ms":1000}}}"#;
            on_session(&client, &url, &busy, call).await
        })
    };
    let deadline = tokio::time::Instant::now() + STEP;
    while metric(&client, server.port, "mcpbox_instances_in_use").await < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long call never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let idle = new_session(&client, url).await;
    let recent = new_session(&client, url).await;

    // The table is full: a newcomer ends the longest-idle session with nothing in flight.
    let newcomer = post(&client, url, &[], INITIALIZE).await;
    assert_eq!(newcomer.status(), 200, "the newcomer was refused");
    let newcomer = newcomer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    let (status, answer) = on_session(&client, url, &idle, ping).await;
    assert_eq!(
        status, 404,
        "the longest-idle session was not ended: {answer}"
    );
    assert_eq!(answer["error"]["message"], "unknown or ended session");
    for id in [&recent, &newcomer] {
        assert_eq!(on_session(&client, url, id, ping).await.0, 200);
    }
    server
        .stderr
        .wait_for("HTTP session ended to make room for a new one")
        .await;
    // The busy one is never ended: its call is answered, and it answers after.
    let (status, answer) = long.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "done after 4 steps",
        "{answer}"
    );
    assert_eq!(on_session(&client, url, &busy, ping).await.0, 200);
}

fn listen_body(id: u64) -> String {
    body(
        id,
        "subscriptions/listen",
        r#""notifications":{"toolsListChanged":true}"#,
        "",
    )
}

#[tokio::test]
async fn listen_streams_keep_a_reserve_of_descriptors_for_calls() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    // A process limited to 256 descriptors, as an operator's `ulimit -n 256` does.
    let command = crate::support::mcpbox(dir.path(), &["--http", "127.0.0.1:0"]);
    let program = command.as_std().get_program().to_owned();
    let args: Vec<_> = command.as_std().get_args().map(ToOwned::to_owned).collect();
    let mut limited = tokio::process::Command::new("prlimit");
    limited
        .arg("--nofile=256:256")
        .arg(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in command.as_std().get_envs() {
        match value {
            Some(value) => limited.env(key, value),
            None => limited.env_remove(key),
        };
    }
    let mut child = limited.spawn().expect("prlimit (util-linux)");
    let stderr = crate::support::Stderr::collect(child.stderr.take().unwrap());
    let log = stderr.wait_for("serving MCP over HTTP").await;
    let port: u16 = log
        .split("bound=127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");

    let streams = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut open = Vec::new();
    let mut refused = 0;
    for id in 0..260 {
        let response = post(
            &streams,
            &url,
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "subscriptions/listen"),
            ],
            &listen_body(id),
        )
        .await;
        match response.status().as_u16() {
            200 => open.push(response),
            503 => {
                refused += 1;
                let answer: Value = response.json().await.unwrap();
                assert_eq!(
                    answer["error"]["data"]["limit"], "listen_streams",
                    "{answer}"
                );
            }
            other => panic!("listen answered {other}"),
        }
    }
    assert_eq!(open.len(), 192, "256 descriptors less a reserve of 64");
    assert_eq!(refused, 260 - 192);
    // With every stream taken, a neighbour's calls are still answered.
    let neighbour = reqwest::Client::new();
    for id in 0..20 {
        let call = body(
            id,
            "tools/call",
            r#""name":"echo","arguments":{"text":"hi"}"#,
            "",
        );
        let (status, answer) = tokio::time::timeout(
            STEP,
            send(&neighbour, &url, "tools/call", Some("echo"), call),
        )
        .await
        .expect("a neighbour's call is answered");
        assert_eq!(status, 200, "{answer}");
    }
    // Connections that never send a request exhaust the descriptors: said at warn, and the
    // host serves again once they close.
    let mut idle = Vec::new();
    for _ in 0..80 {
        idle.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
    }
    stderr.wait_for("out of file descriptors").await;
    drop(idle);
    drop(open);
    // The host sees the connections close as it gets to them (and the busy machine of a
    // parallel test run may take a moment): it must serve again, within a step.
    let deadline = std::time::Instant::now() + STEP;
    loop {
        let call = body(
            99,
            "tools/call",
            r#""name":"echo","arguments":{"text":"hi"}"#,
            "",
        );
        let (status, answer) = tokio::time::timeout(
            STEP,
            send(
                &reqwest::Client::new(),
                &url,
                "tools/call",
                Some("echo"),
                call,
            ),
        )
        .await
        .expect("served again");
        if status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not served again: {status} {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill().await;
}
