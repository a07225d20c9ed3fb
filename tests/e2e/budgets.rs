//! Budgets per caller (`[budgets]`), over HTTP with two static tokens: alice at each of her
//! budgets — running calls, sessions, listen streams, bytes of requests in flight, request
//! rate — is refused at once with 429, `Retry-After` and the JSON-RPC error naming the limit
//! and her budget, while bob is served as before; what she gave back she can use again. The
//! refusals are counted by limit in the metrics, with no caller as a label unless asked. Over
//! stdio the local user has no budget unless `[budgets.principal.local]` names one, and then
//! gets the JSON-RPC error. (Budgets of OAuth users of one issuer: `services::oauth`.)

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{HttpServer, Raw, STEP, plugin_dir, post, token_config};

const ALICE: &str = "alice-budget-token-0123456789";
const BOB: &str = "bob-budget-token-0123456789";

/// A configuration file naming alice's and bob's tokens, and `budgets` (TOML lines).
fn config(dir: &Path, budgets: &str) -> std::path::PathBuf {
    token_config(dir, &[("alice", ALICE, &[]), ("bob", BOB, &[])], budgets)
}

async fn start(budgets: &str) -> (HttpServer, tempfile::TempDir, tempfile::TempDir) {
    let plugins = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("interactive", "interactive.wasm"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), budgets);
    let server = HttpServer::start(plugins.path(), &["--config", config.to_str().unwrap()]).await;
    (server, plugins, dir)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A 2026-07-28 `tools/call` of `tool` with `arguments`.
fn call(id: u32, tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

/// POST a 2026-07-28 call of `tool` as `token`.
async fn v2026_call(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    id: u32,
    tool: &str,
    arguments: &str,
) -> reqwest::Response {
    let auth = bearer(token);
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    post(client, url, &headers, &call(id, tool, arguments)).await
}

/// The JSON-RPC message of a response (JSON, or the last `data:` of an event stream).
async fn message(response: reqwest::Response) -> Value {
    let body = response.text().await.unwrap();
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .map_or(body.as_str(), str::trim);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Expect a 429 naming `limit`: `Retry-After`, the JSON-RPC error, and the caller's budget.
async fn expect_over_budget(response: reqwest::Response, limit: &str) -> Value {
    assert_eq!(response.status(), 429, "expected 429 at {limit}");
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1, "Retry-After: {retry}");
    let error = message(response).await["error"].clone();
    assert_eq!(error["code"], -32029, "{error}");
    assert_eq!(error["data"]["limit"], limit, "{error}");
    let text = error["message"].as_str().unwrap();
    assert!(text.contains("token:alice"), "{text}");
    assert!(text.contains("[budgets]"), "{text}");
    error
}

/// GET `path` of the server on `port` as bob: the body.
async fn page(client: &reqwest::Client, port: u16, path: &str) -> String {
    client
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("authorization", bearer(BOB))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the metric line starting with `name` (labels included).
async fn metric(client: &reqwest::Client, port: u16, name: &str) -> f64 {
    let text = page(client, port, "/metrics").await;
    crate::support::metric_value(&text, name).unwrap_or_else(|| panic!("no {name} in the metrics"))
}

/// Wait (a step at most) until `calls` plugin calls of budgeted callers are running.
async fn running_calls(client: &reqwest::Client, port: u16, calls: u32) {
    let deadline = Instant::now() + STEP;
    while metric(client, port, r#"mcpbox_budget_in_use{limit="calls"}"#).await < f64::from(calls) {
        assert!(Instant::now() < deadline, "{calls} calls did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

use crate::support::INITIALIZE;

/// Open a 2025-11-25 session as `token`: the response.
async fn initialize(client: &reqwest::Client, url: &str, token: &str) -> reqwest::Response {
    post(
        client,
        url,
        &[("authorization", &bearer(token))],
        INITIALIZE,
    )
    .await
}

/// Open the standalone stream of session `id` as `token`: the response.
async fn listen(client: &reqwest::Client, url: &str, token: &str, id: &str) -> reqwest::Response {
    client
        .get(url)
        .header("authorization", bearer(token))
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_caller_at_its_budgets_is_refused_and_another_is_served() {
    let (server, _plugins, _dir) =
        start("[budgets]\ncalls = 2\nsessions = 2\nlisten_streams = 1\n").await;
    let client = reqwest::Client::new();
    let url = server.url.clone();

    // Alice's two long calls hold her whole budget of calls.
    let long = |id| {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let response = v2026_call(
                &client,
                &url,
                ALICE,
                id,
                "countdown",
                r#"{"steps":4,"delay_ms":1000}"#,
            )
            .await;
            assert_eq!(response.status(), 200);
            message(response).await
        })
    };
    let running = [long(1), long(2)];
    running_calls(&client, server.port, 2).await;

    // Her next calls are refused at once, not queued.
    let refusals: Vec<_> = (10..30)
        .map(|id| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                v2026_call(&client, &url, ALICE, id, "echo", r#"{"text":"more"}"#).await
            })
        })
        .collect();
    // Not queued: each is answered while both long calls still run (a queued one would be
    // answered only once one of them had finished).
    for refusal in refusals {
        let response = refusal.await.unwrap();
        assert!(
            running.iter().all(|call| !call.is_finished()),
            "a refusal was answered only after a long call ended"
        );
        let error = expect_over_budget(response, "calls").await;
        assert_eq!(error["data"]["budget"], 2);
    }

    // Bob is served meanwhile, while her two calls still run.
    let response = v2026_call(&client, &url, BOB, 40, "echo", r#"{"text":"bob"}"#).await;
    assert!(
        running.iter().all(|call| !call.is_finished()),
        "bob was served only after a long call of alice's ended"
    );
    assert_eq!(response.status(), 200);
    let reply = message(response).await;
    assert_eq!(reply["result"]["content"][0]["text"], "bob", "{reply}");

    // Sessions: two for alice, the third refused; bob opens his.
    let mut alice_sessions = Vec::new();
    for _ in 0..2 {
        let response = initialize(&client, &url, ALICE).await;
        assert_eq!(response.status(), 200);
        alice_sessions.push(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
    }
    let response = initialize(&client, &url, ALICE).await;
    assert_eq!(response.status(), 429);
    let refusal = message(response).await;
    assert_eq!(refusal["error"]["data"]["limit"], "sessions", "{refusal}");
    assert_eq!(
        refusal["id"], 1,
        "the refusal answers initialize's id: {refusal}"
    );
    let response = initialize(&client, &url, BOB).await;
    assert_eq!(response.status(), 200);
    let bob_session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();

    // Listen streams: one for alice, her second refused; bob opens his.
    let open = listen(&client, &url, ALICE, &alice_sessions[0]).await;
    assert_eq!(open.status(), 200);
    expect_over_budget(
        listen(&client, &url, ALICE, &alice_sessions[1]).await,
        "listen_streams",
    )
    .await;
    let bobs = listen(&client, &url, BOB, &bob_session).await;
    assert_eq!(bobs.status(), 200);
    // Closing her stream gives it back.
    drop(open);
    let deadline = Instant::now() + STEP;
    loop {
        let again = listen(&client, &url, ALICE, &alice_sessions[1]).await;
        if again.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed stream was not given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Her long calls finish, and her budget of calls is hers again.
    for call in running {
        let reply = call.await.unwrap();
        assert_eq!(
            reply["result"]["content"][0]["text"], "done after 4 steps",
            "{reply}"
        );
    }
    let response = v2026_call(&client, &url, ALICE, 50, "echo", r#"{"text":"again"}"#).await;
    assert_eq!(response.status(), 200);

    // Callers are neither metric labels nor on the status page unless the operator asks.
    assert!(
        !page(&client, server.port, "/metrics")
            .await
            .contains("principal=")
    );
    let status = page(&client, server.port, "/").await;
    assert!(status.contains("Budgets per caller"), "{status}");
    assert!(!status.contains("token:alice"), "{status}");
    for (limit, at_least) in [("calls", 20.0), ("sessions", 1.0), ("listen_streams", 1.0)] {
        let refused = metric(
            &client,
            server.port,
            &format!("mcpbox_budget_refusals_total{{limit=\"{limit}\"}}"),
        )
        .await;
        assert!(refused >= at_least, "{limit}: {refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_request_rate_and_bytes_in_flight_are_its_own() {
    let (server, _plugins, _dir) = start(
        "[budgets]\nrequest_bytes = 300\nlabel_principals = true\n\n[budgets.principal.\"token:alice\"]\nrate = 1.0\nburst = 3.0\n",
    )
    .await;
    let client = reqwest::Client::new();
    let url = &server.url;

    // Three at once, then one a second: her fourth is refused with when to come back.
    for id in 1..=3 {
        let response = v2026_call(&client, url, ALICE, id, "echo", r#"{"text":"a"}"#).await;
        assert_eq!(response.status(), 200);
    }
    let error = expect_over_budget(
        v2026_call(&client, url, ALICE, 4, "echo", r#"{"text":"a"}"#).await,
        "rate",
    )
    .await;
    assert_eq!(error["data"]["budget"]["rate"], 1.0, "{error}");
    // Bob's rate is his own (the default).
    for id in 10..30 {
        let response = v2026_call(&client, url, BOB, id, "echo", r#"{"text":"b"}"#).await;
        assert_eq!(response.status(), 200);
    }
    // Back when the refusal said: her next call then passes.
    let wait = error["data"]["retryAfterSeconds"]
        .as_u64()
        .expect("retryAfterSeconds");
    assert_eq!(wait, 1, "{error}");
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let response = v2026_call(&client, url, ALICE, 5, "echo", r#"{"text":"a"}"#).await;
    assert_eq!(response.status(), 200);

    // Bytes in flight: one long call's request (about 200 bytes) holds most of bob's 300;
    // his next request while it runs is refused, alice's is not.
    let long = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            v2026_call(
                &client,
                &url,
                BOB,
                40,
                "countdown",
                r#"{"steps":2,"delay_ms":1000}"#,
            )
            .await
            .status()
        })
    };
    running_calls(&client, server.port, 1).await;
    let response = v2026_call(&client, url, BOB, 41, "echo", r#"{"text":"b"}"#).await;
    assert_eq!(response.status(), 429);
    let retry = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .to_owned();
    let refusal = message(response).await;
    // The id was readable: the refusal answers it (#55).
    assert_eq!(refusal["id"], 41, "{refusal}");
    let error = refusal["error"].clone();
    assert_eq!(error["data"]["limit"], "request_bytes", "{error}");
    assert_eq!(error["data"]["budget"], 300, "{error}");
    assert_eq!(retry, "1");
    // Asked for, callers are labels, and the status page lists each active one's use.
    let metrics = page(&client, server.port, "/metrics").await;
    assert!(
        metrics.contains(r#"limit="request_bytes",principal="token:bob""#),
        "{metrics}"
    );
    assert!(page(&client, server.port, "/").await.contains("token:bob"));
    // Alice's bytes were never held by bob's call: once her rate gives her a token, she is
    // served while it runs (refusals meanwhile are her rate's, and take nothing).
    let deadline = Instant::now() + STEP;
    let mut id = 6;
    loop {
        let response = v2026_call(&client, url, ALICE, id, "echo", r#"{"text":"a"}"#).await;
        if response.status() == 200 {
            break;
        }
        let error = expect_over_budget(response, "rate").await;
        assert!(Instant::now() < deadline, "{error}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        id += 1;
    }
    assert_eq!(long.await.unwrap(), 200);
    let response = v2026_call(&client, url, BOB, 42, "echo", r#"{"text":"b"}"#).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn the_local_user_has_a_budget_only_when_named() {
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcpbox.toml");
    let echo = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}}}}}}"#
        )
    };

    // Budgets for named callers only: stdio's local user is held by the global bounds alone.
    std::fs::write(&path, "[budgets]\nrate = 1.0\nburst = 1.0\n").unwrap();
    let mut raw = Raw::initialized(plugins.path(), &["--config", path.to_str().unwrap()]).await;
    for id in 2..12 {
        assert!(raw.request(&echo(id)).await["result"].is_object());
    }
    drop(raw);

    // Named: initialize and two calls pass, the next is refused with the error naming it.
    std::fs::write(
        &path,
        "[budgets.principal.local]\nrate = 0.5\nburst = 3.0\n",
    )
    .unwrap();
    let started = Instant::now();
    let mut raw = Raw::initialized(plugins.path(), &["--config", path.to_str().unwrap()]).await;
    for id in 2..4 {
        assert!(raw.request(&echo(id)).await["result"].is_object());
    }
    let reply = raw.request(&echo(4)).await;
    assert_eq!(reply["error"]["code"], -32029, "{reply}");
    assert_eq!(reply["error"]["data"]["limit"], "rate", "{reply}");
    // The bucket is empty after three: one token takes 2 s at 0.5 a second, less what refilled
    // since the first request (at most half a token a second of `took`).
    let took = started.elapsed().as_secs_f64();
    let least = (2.0 - took).ceil().max(1.0);
    let retry = reply["error"]["data"]["retryAfterSeconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("no retryAfterSeconds: {reply}"));
    assert!(
        (least..=2.0).contains(&retry),
        "retry after {retry} s, {took:.2} s after the first request: {reply}"
    );
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local"),
        "{reply}"
    );
}

/// The value of the metric line starting with `name`, or 0 when there is none yet.
async fn metric_or_zero(client: &reqwest::Client, port: u16, name: &str) -> f64 {
    let text = page(client, port, "/metrics").await;
    crate::support::metric_value(&text, name).unwrap_or(0.0)
}

/// Wait (a step at most) until `done` holds of the metrics.
async fn wait_for_metrics<F: AsyncFn() -> bool>(what: &str, done: F) {
    let deadline = Instant::now() + STEP;
    while !done().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status and JSON body of the HTTP/1.1 response read from `stream`.
async fn read_response(stream: &mut tokio::net::TcpStream) -> (u16, Value) {
    use tokio::io::AsyncReadExt as _;
    let mut buffer = Vec::new();
    let read = async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before a whole response: {buffer:?}");
            buffer.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buffer);
            let Some((head, body)) = text.split_once("\r\n\r\n") else {
                continue;
            };
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .expect("a content-length");
            if body.len() >= length {
                let status = head[9..12].parse().unwrap();
                return (status, serde_json::from_str(&body[..length]).unwrap());
            }
        }
    };
    tokio::time::timeout(STEP, read)
        .await
        .expect("a response in time")
}

/// Issue #55, finding 9: request bytes are charged to their caller as they arrive (the
/// declared length before the body is read, a chunked body chunk by chunk), before the global
/// bound: alice's half-sent uploads hold no more of the global room than her budget, so bob's
/// call is served, and her uploads past her budget are refused with 429 answering their id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_uploads_take_no_more_global_room_than_their_callers_budget() {
    use tokio::io::AsyncWriteExt as _;
    const MIB: usize = 1 << 20;
    const UPLOAD: usize = 3 * MIB / 2;
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "[budgets]\nrequest_bytes = 4194304\n");
    let server = HttpServer::start(
        plugins.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--max-request-bytes-in-flight",
            "8388608",
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let port = server.port;
    let global = r#"mcpbox_limit_in_use{limit="request_bytes"}"#;
    let own = r#"mcpbox_budget_in_use{limit="request_bytes"}"#;
    let refusals = r#"mcpbox_budget_refusals_total{limit="request_bytes"}"#;
    let head = |length: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: echo\r\n{length}\r\n"
        )
    };

    // Five uploads of 1.5 MiB, each sent half-way and left there: 7.5 MiB, were they all held.
    let mut uploads = Vec::new();
    for id in 1..=5u32 {
        let padding = UPLOAD - call(id, "echo", r#"{"text":""}"#).len();
        let mut full = call(
            id,
            "echo",
            &format!(r#"{{"text":"{}"}}"#, "x".repeat(padding)),
        );
        assert_eq!(full.len(), UPLOAD);
        full.truncate(UPLOAD / 2);
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream
            .write_all(head(&format!("content-length: {UPLOAD}\r\n")).as_bytes())
            .await
            .unwrap();
        stream.write_all(full.as_bytes()).await.unwrap();
        uploads.push(stream);
        // Each is either held (globally) or refused (at her budget) before the next.
        let settled = f64::from(id) * UPLOAD as f64;
        wait_for_metrics(
            &format!("upload {id} was neither held nor refused"),
            async || {
                metric_or_zero(&client, port, global).await
                    + metric_or_zero(&client, port, refusals).await * UPLOAD as f64
                    >= settled
            },
        )
        .await;
    }

    // Bob's 1 MiB call is served: alice holds her budget's worth at most.
    let text = "b".repeat(MIB);
    let response = v2026_call(
        &client,
        &server.url,
        BOB,
        40,
        "echo",
        &format!(r#"{{"text":"{text}"}}"#),
    )
    .await;
    assert_eq!(response.status(), 200, "bob's call was refused");
    let reply = message(response).await;
    assert_eq!(reply["result"]["content"][0]["text"], text.as_str());
    assert_eq!(metric(&client, port, own).await, (2 * UPLOAD) as f64);
    assert_eq!(metric(&client, port, global).await, (2 * UPLOAD) as f64);

    // Her two first uploads hold 3 MiB; the three others were refused, each answering its id.
    for (id, upload) in (3..=5).zip(uploads.iter_mut().skip(2)) {
        let (status, refusal) = read_response(upload).await;
        assert_eq!(status, 429, "{refusal}");
        assert_eq!(refusal["id"], id, "{refusal}");
        assert_eq!(refusal["error"]["code"], -32029, "{refusal}");
        assert_eq!(
            refusal["error"]["data"]["limit"], "request_bytes",
            "{refusal}"
        );
    }

    // A chunked upload (no declared length) is charged as its chunks arrive: past her budget
    // (its first 1 MiB fits beside her 3), refused with the id its first bytes hold, and what
    // it held given back.
    let mut chunked = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut chunk = call(
        77,
        "echo",
        &format!(r#"{{"text":"{}"}}"#, "c".repeat(UPLOAD)),
    );
    chunk.truncate(UPLOAD);
    chunked
        .write_all(head("transfer-encoding: chunked\r\n").as_bytes())
        .await
        .unwrap();
    chunked
        .write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
        .await
        .unwrap();
    let (status, refusal) = read_response(&mut chunked).await;
    assert_eq!(status, 429, "{refusal}");
    assert_eq!(refusal["id"], 77, "{refusal}");
    assert_eq!(
        refusal["error"]["data"]["limit"], "request_bytes",
        "{refusal}"
    );
    assert_eq!(metric(&client, port, global).await, (2 * UPLOAD) as f64);

    // Her uploads go away: everything they held is given back, once.
    drop(uploads);
    drop(chunked);
    wait_for_metrics("the uploads' bytes were not given back", async || {
        metric_or_zero(&client, port, global).await == 0.0
            && metric_or_zero(&client, port, own).await == 0.0
    })
    .await;
    let response = v2026_call(
        &client,
        &server.url,
        ALICE,
        50,
        "echo",
        r#"{"text":"again"}"#,
    )
    .await;
    assert_eq!(response.status(), 200);
}
