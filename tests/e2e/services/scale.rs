//! Scale-out, end to end: three mcpbox replicas sharing a plugin directory, a Redis server
//! (plugin state) and a state key, behind Debian's HAProxy running `host/deploy/haproxy.cfg`
//! unchanged. 2026-07-28 clients go round-robin; 2025-11-25 sessions stick to their replica.
//!
//! Checked: 10,000 calls at 64 in flight from both kinds of clients with zero failures; a
//! counter incremented through every replica ends exact; an input request answered on another
//! replica than asked; a list cursor from one replica accepted by another; a plugin added to
//! the shared directory announced on listen streams held by every replica; a replica stopped
//! with SIGTERM losing no call; a replica killed with SIGKILL costing only what was in flight
//! on it (retries succeed; its sessions get 404 and start again).
//!
//! At most once: HAProxy keeps a request's `X-Request-Id` across its retries and replaces
//! the client's; with `--call-id-header`, a replica killed during 1,000 `add` calls of the
//! to-do example leaves no item stored twice (without it: 1–4 in 3 of 3 runs), and every call
//! that failed was in flight on the killed replica and failed clearly (-32030, or the
//! balancer's 5xx); a retry whose first run died with its replica mid-call is refused with
//! -32030 and not run again; an id names one call, read-only tools are not recorded, and
//! without the option the header means nothing.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::external::{self, Redis};
use crate::support::{HttpServer, STEP, SseReader, plugin_dir, test_plugins};

const KEY: &str = "scale-test-shared-state-key-0123456789";
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}"#;

/// HAProxy running the repository's configuration, stopped when dropped.
struct Haproxy {
    child: std::process::Child,
    url: String,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn haproxy(replicas: &[u16; 3]) -> Haproxy {
    let program = external::debian("haproxy", "haproxy");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/haproxy.cfg");
    let port = free_port();
    let mut command = std::process::Command::new(program);
    command
        .arg("-db")
        .arg("-f")
        .arg(&config)
        .env("MCPBOX_LB_ADDR", format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (i, replica) in replicas.iter().enumerate() {
        command.env(
            format!("MCPBOX_REPLICA{}", i + 1),
            format!("127.0.0.1:{replica}"),
        );
    }
    let child = command.spawn().expect("start haproxy");
    let lb = Haproxy {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    // Ready once every replica passed its health check: three calls land on three replicas.
    let deadline = tokio::time::Instant::now() + STEP;
    let client = reqwest::Client::new();
    loop {
        let ok = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ok {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "haproxy never became ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    lb
}

/// A 2026-07-28 request to `url`; the JSON-RPC response.
async fn v2026(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    params: &str,
) -> Result<Value, String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{params}{}{META}}}}}"#,
        if params.is_empty() { "" } else { "," }
    );
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.body(body).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {text}"));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    if value.get("error").is_some() {
        return Err(value.to_string());
    }
    Ok(value)
}

async fn v2026_echo(client: &reqwest::Client, url: &str, text: &str) -> Result<(), String> {
    let params = format!(r#""name":"echo","arguments":{{"text":"{text}"}}"#);
    let value = v2026(client, url, "tools/call", Some("echo"), &params).await?;
    let got = &value["result"]["content"][0]["text"];
    if got == text {
        Ok(())
    } else {
        Err(format!("echo answered {value}"))
    }
}

/// A 2025-11-25 session through `url`.
struct V2025Session {
    client: reqwest::Client,
    url: String,
    session: String,
    next_id: u64,
    /// Sent as `X-Request-Id` (as a balancer would), when set.
    request_id: Option<String>,
}

impl V2025Session {
    async fn start(client: &reqwest::Client, url: &str) -> Result<Self, String> {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"scale","version":"1"}}}"#;
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            return Err(format!("initialize: {status}: {body}"));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("no session id")?
            .to_owned();
        let _ = response.bytes().await;
        let mut started = Self {
            client: client.clone(),
            url: url.to_owned(),
            session,
            next_id: 1,
            request_id: None,
        };
        started
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await?;
        Ok(started)
    }

    /// POST one message; the JSON-RPC response (from JSON or SSE), or `Err` with the status.
    async fn post(&mut self, body: &str) -> Result<Option<Value>, String> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = &self.request_id {
            request = request.header("x-request-id", id);
        }
        let response = request
            .body(body.to_owned())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(format!("{}", status.as_u16()));
        }
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
        if sse {
            let mut reader = SseReader::new(response);
            while let Some(event) = reader.next().await {
                let value: Value = serde_json::from_str(&event.data).map_err(|e| e.to_string())?;
                if value.get("id").is_some() {
                    return Ok(Some(value));
                }
            }
            return Err("the stream ended without a response".to_owned());
        }
        let text = response.text().await.map_err(|e| e.to_string())?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{e}: {text}"))
    }

    async fn echo(&mut self, text: &str) -> Result<(), String> {
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#,
            self.next_id
        );
        let value = self.post(&body).await?.ok_or("no response")?;
        if value["result"]["content"][0]["text"] == text {
            Ok(())
        } else {
            Err(format!("echo answered {value}"))
        }
    }
}

/// One round of the conformance fixture's two-round input request, sent to `url`: the first
/// (no `previous`), or the answer `content` to the question the previous round asked, with that
/// round's `requestState`.
async fn multi_round(
    client: &reqwest::Client,
    url: &str,
    previous: Option<(&Value, Value)>,
) -> Value {
    const TOOL: &str = "test_input_required_result_multi_round";
    let mut params = json!({"name": TOOL, "arguments": {}});
    if let Some((round, content)) = previous {
        let key = round["result"]["inputRequests"]
            .as_object()
            .and_then(|asked| asked.keys().next())
            .expect("the previous round asked something")
            .clone();
        params["requestState"] = round["result"]["requestState"].clone();
        params["inputResponses"] = json!({ key: {"action": "accept", "content": content} });
    }
    // `v2026` adds the `_meta` envelope after these fields.
    let fields = params.to_string();
    let fields = &fields[1..fields.len() - 1];
    v2026(client, url, "tools/call", Some(TOOL), fields)
        .await
        .unwrap()
}

/// The shared plugin directory: the examples' echo, the state probe (granted), and the
/// conformance fixture (for input requests).
fn shared_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("kv_probe", "alpha.wasm"),
        ("conformance", "conformance.wasm"),
    ]);
    std::fs::write(
        dir.path().join("alpha.toml"),
        "[env]\nKV_TOOL = \"alpha_kv\"\n[keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    dir
}

async fn replica(dir: &Path, redis: &str) -> HttpServer {
    HttpServer::start(
        dir,
        &[
            "--state",
            redis,
            "--state-key",
            KEY,
            "--page-size",
            "3",
            // Clients name the balancer: 127.0.0.1, on its own port.
            "--allowed-host",
            "127.0.0.1",
        ],
    )
    .await
}

fn pid(server: &HttpServer) -> i32 {
    i32::try_from(server.child.id().expect("running")).unwrap()
}

/// A new session, retried (as a client would) while the balancer has no replica to offer:
/// only the balancer's own 502/503 (no replica to take it) is retried; anything else fails.
async fn start_with_retries(client: &reqwest::Client, url: &str) -> V2025Session {
    let mut attempt = 0;
    loop {
        match V2025Session::start(client, url).await {
            Ok(session) => return session,
            Err(e) if attempt < 10 && balancer_failure(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("no new session after {attempt} attempts: {e}"),
        }
    }
}

/// Whether `error` (as `v2026` and `V2025Session` report them) is how a call in flight on a killed
/// replica fails through HAProxy: the balancer's 502/503/504, or the connection (or a
/// session's event stream) cut.
fn balancer_failure(error: &str) -> bool {
    let status = error.strip_prefix("initialize: ").unwrap_or(error);
    ["502", "503", "504"]
        .iter()
        .any(|code| status.starts_with(code))
        || error.contains("error sending request")
        || error.contains("connection closed")
        || error.contains("error decoding response body")
        || error == "the stream ended without a response"
}

/// What a load run lets clients retry.
#[derive(Clone, Copy, PartialEq)]
enum Retry {
    /// Nothing: any failure fails the test.
    Never,
    /// Only a 2025-11-25 session answered 404 (its replica is gone) starts again, as the transport
    /// says clients must; any other failure fails the test.
    Sessions,
    /// Any failed call is retried (up to 5 times).
    All,
}

/// What a load run saw: how many 2025-11-25 sessions had to start again, and every failed attempt
/// that was retried (what failed, and how).
struct Loaded {
    restarts: usize,
    failed: Vec<(String, String)>,
}

/// `calls` echo calls from `tasks` clients at once, half 2026-07-28, half 2025-11-25 sessions,
/// retrying what `retry` allows; `during` runs beside them and may wait on `done`, the count
/// of calls answered so far.
async fn load<F: Future<Output = ()>>(
    url: &str,
    tasks: usize,
    calls: usize,
    retry: Retry,
    during: impl FnOnce(Arc<AtomicUsize>) -> F,
) -> Loaded {
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let restarts = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(std::sync::Mutex::new(Vec::new()));
    // The sessions start one after another, before any call: the balancer deals new sessions
    // round robin, so they spread over every replica. Started by their tasks, each beside a
    // 2026-07-28 call, the two kinds of request arrived alternately, and a round robin of two
    // replicas could put every session on one of them and every call on the other: then no
    // session was on the replica killed below, about one run in twelve.
    let mut sessions = Vec::new();
    for _ in (1..tasks).step_by(2) {
        let session = V2025Session::start(&client, url)
            .await
            .expect("a session starts");
        sessions.push(session);
    }
    let mut sessions = sessions.into_iter();
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let (client, url, restarts) = (client.clone(), url.to_owned(), Arc::clone(&restarts));
        let (done, failed) = (Arc::clone(&done), Arc::clone(&failed));
        let per_task = calls / tasks;
        let session = if task % 2 == 0 { None } else { sessions.next() };
        set.spawn(async move {
            if task % 2 == 0 {
                for i in 0..per_task {
                    let text = format!("m{task}-{i}");
                    let mut attempt = 0;
                    loop {
                        match v2026_echo(&client, &url, &text).await {
                            Ok(()) => break,
                            Err(e) if retry == Retry::All && attempt < 5 => {
                                attempt += 1;
                                failed.lock().unwrap().push((text.clone(), e));
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Err(e) => panic!("2026-07-28 call {text} failed: {e}"),
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                let mut session = session.expect("a session for each odd task");
                for i in 0..per_task {
                    let text = format!("l{task}-{i}");
                    let mut attempt = 0;
                    loop {
                        match session.echo(&text).await {
                            Ok(()) => break,
                            Err(e)
                                if attempt < 5
                                    && (retry == Retry::All
                                        || (retry == Retry::Sessions && e == "404")) =>
                            {
                                attempt += 1;
                                if e == "404" {
                                    restarts.fetch_add(1, Ordering::Relaxed);
                                    session = start_with_retries(&client, &url).await;
                                } else {
                                    failed.lock().unwrap().push((text.clone(), e));
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                            }
                            Err(e) => panic!("2025-11-25 call {text} failed: {e}"),
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    let waiting = async {
        while let Some(done) = set.join_next().await {
            done.expect("a client task");
        }
    };
    tokio::join!(waiting, during(done));
    let failed = std::mem::take(&mut *failed.lock().unwrap());
    Loaded {
        restarts: restarts.load(Ordering::Relaxed),
        failed,
    }
}

/// Wait (a step at most) until `done` calls of a load run are answered.
async fn answered(done: &AtomicUsize, calls: usize) {
    let deadline = tokio::time::Instant::now() + STEP;
    while done.load(Ordering::Relaxed) < calls {
        assert!(tokio::time::Instant::now() < deadline, "the calls stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_haproxy_serve_everything_and_survive_losing_one() {
    let redis = Redis::start();
    let dir = shared_dir();
    let r1 = replica(dir.path(), &redis.url()).await;
    let r2 = replica(dir.path(), &redis.url()).await;
    let r3 = replica(dir.path(), &redis.url()).await;
    let lb = haproxy(&[r1.port, r2.port, r3.port]).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();

    // A cursor issued by one replica is accepted by another.
    let first = v2026(&client, &r1.url, "tools/list", None, "")
        .await
        .unwrap();
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .expect("more than one page")
        .to_owned();
    let second = v2026(
        &client,
        &r2.url,
        "tools/list",
        None,
        &format!(r#""cursor":"{cursor}""#),
    )
    .await
    .unwrap();
    let third = v2026(
        &client,
        &r1.url,
        "tools/list",
        None,
        &format!(r#""cursor":"{cursor}""#),
    )
    .await
    .unwrap();
    assert_eq!(second["result"]["tools"], third["result"]["tools"]);

    // An input request answered on other replicas than the one that asked (shared key).
    let round1 = multi_round(&client, &r1.url, None).await;
    assert_eq!(round1["result"]["resultType"], "input_required", "{round1}");
    let round2 = multi_round(&client, &r2.url, Some((&round1, json!({"name": "Ada"})))).await;
    assert_eq!(round2["result"]["resultType"], "input_required", "{round2}");
    let done = multi_round(&client, &r3.url, Some((&round2, json!({"color": "blue"})))).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Ada likes blue",
        "{done}"
    );

    // Listen streams on every replica hear of a plugin replaced in the shared directory.
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let mut streams = Vec::new();
    for server in [&r1, &r2, &r3] {
        let response = client
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(listen.clone())
            .send()
            .await
            .unwrap();
        let mut reader = SseReader::new(response);
        let (_, ack) = reader.next_json().await.unwrap();
        assert!(
            ack.get("method").is_some() || ack.get("result").is_some(),
            "{ack}"
        );
        streams.push(reader);
    }
    // A plugin is replaced in the shared directory (written aside and renamed into place): the
    // conformance fixture becomes a plugin with one tool, `shout`, so the tool list changes.
    let bytes = std::fs::read(test_plugins().join("tools_only.wasm")).unwrap();
    std::fs::write(dir.path().join(".conformance.tmp"), bytes).unwrap();
    std::fs::rename(
        dir.path().join(".conformance.tmp"),
        dir.path().join("conformance.wasm"),
    )
    .unwrap();
    for (i, stream) in streams.iter_mut().enumerate() {
        loop {
            let (_, message) = stream
                .next_json()
                .await
                .unwrap_or_else(|| panic!("replica {} closed its stream", i + 1));
            if message["method"] == "notifications/tools/list_changed" {
                break;
            }
        }
    }
    drop(streams);

    // 10,000 calls at 64 in flight, 2026-07-28 and 2025-11-25, no failure and no retry.
    let run = load(&lb.url, 64, 10_000, Retry::Never, async |_| {}).await;
    assert_eq!((run.restarts, run.failed.len()), (0, 0));

    // A counter incremented through every replica ends exact.
    let increments = (0..512).map(|_| {
        let (client, url) = (client.clone(), lb.url.clone());
        async move {
            v2026(
                &client,
                &url,
                "tools/call",
                Some("alpha_kv"),
                r#""name":"alpha_kv","arguments":{"op":"increment","key":"hits"}"#,
            )
            .await
        }
    });
    for result in futures::future::join_all(increments).await {
        result.expect("an increment");
    }
    for server in [&r1, &r2, &r3] {
        let value = v2026(
            &client,
            &server.url,
            "tools/call",
            Some("alpha_kv"),
            r#""name":"alpha_kv","arguments":{"op":"get","key":"hits"}"#,
        )
        .await
        .unwrap();
        assert_eq!(value["result"]["content"][0]["text"], "\"512\"", "{value}");
    }

    // SIGTERM on replica 3 in the middle of a run: no call fails (its 2025-11-25 sessions start
    // again elsewhere, as the transport says they must).
    let r3_pid = pid(&r3);
    let run = load(&lb.url, 32, 2_000, Retry::Sessions, async move |done| {
        answered(&done, 500).await;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(r3_pid).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
    })
    .await;
    assert!(run.failed.is_empty(), "{:?}", run.failed);
    let mut r3 = r3;
    let status = tokio::time::timeout(STEP, r3.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "replica 3 stopped cleanly: {status}");

    // SIGKILL on replica 2 mid-run: only what was in flight on it fails, as the balancer's
    // 502/503/504 or a cut connection (at most one call per client, each client having one
    // in flight); retries succeed, and its 2025-11-25 sessions get 404 and start again.
    let r2_pid = pid(&r2);
    let run = load(&lb.url, 32, 3_000, Retry::All, async move |done| {
        answered(&done, 750).await;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(r2_pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    })
    .await;
    assert!(
        run.restarts > 0,
        "sessions on the killed replica had to start again"
    );
    assert!(
        run.failed.iter().all(|(_, e)| balancer_failure(e)),
        "failures other than the killed replica's: {:?}",
        run.failed
    );
    let calls: std::collections::HashSet<&str> =
        run.failed.iter().map(|(call, _)| call.as_str()).collect();
    assert!(
        calls.len() <= 32,
        "more calls failed than were in flight: {:?}",
        run.failed
    );
    // The survivor still serves, through the balancer.
    v2026_echo(&client, &lb.url, "after").await.unwrap();
    drop(lb);
    drop(r1);
    drop(r2);
}

/// The shared directory of the at-most-once tests: the to-do example (granted state, with room
/// for a few thousand items) and the echo tools.
fn todo_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[("todo", "todo.wasm"), ("echo_tools", "echo_tools.wasm")]);
    std::fs::write(
        dir.path().join("todo.toml"),
        "[keyvalue]\nbuckets = [\"default\"]\nquota-kib = 8192\nmax-keys = 10000\nmax-value-kib = 16\n",
    )
    .unwrap();
    dir
}

/// The options of a replica that records tool calls by the balancer's request id.
const CALL_ID: [&str; 2] = ["--call-id-header", "X-Request-Id"];

async fn once_replica(dir: &Path, redis: &str, extra: &[&str]) -> HttpServer {
    let mut args = vec![
        "--state",
        redis,
        "--state-key",
        KEY,
        "--allowed-host",
        "127.0.0.1",
    ];
    args.extend_from_slice(extra);
    HttpServer::start(dir, &args).await
}

/// How one `add` through the balancer ended.
enum Added {
    Ok,
    /// A clear error: a JSON-RPC error or an `isError` result, with its message.
    Failed(String),
}

async fn add_item(client: &reqwest::Client, url: &str, text: &str) -> Added {
    let params = format!(r#""name":"add","arguments":{{"text":"{text}"}}"#);
    match v2026(client, url, "tools/call", Some("add"), &params).await {
        Ok(value) if value["result"]["isError"] == true => {
            Added::Failed(value["result"]["content"][0]["text"].to_string())
        }
        Ok(_) => Added::Ok,
        Err(e) => {
            assert!(
                !e.contains("timed out") && !e.contains("operation timed out"),
                "a call hung: {e}"
            );
            Added::Failed(e)
        }
    }
}

/// Every item's text in the to-do list, read through `url`.
async fn todo_texts(client: &reqwest::Client, url: &str) -> Vec<String> {
    let value = v2026(
        client,
        url,
        "tools/call",
        Some("list"),
        r#""name":"list","arguments":{"include_done":true}"#,
    )
    .await
    .expect("the list");
    value["result"]["structuredContent"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {value}"))
        .iter()
        .map(|item| item["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Regression test for #24 (point 3): HAProxy retries a request whose replica died after it
/// had run the call (`retry-on empty-response`); the retry must not run it again. 1,000 `add`
/// calls of the to-do example from 20 clients, one replica killed (SIGKILL) mid-run: no item is
/// stored twice, and every failed call failed with a clear error (none hung).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_retried_by_the_balancer_after_a_replica_died_runs_at_most_once() {
    const CLIENTS: usize = 20;
    const CALLS: usize = 1000;
    let redis = Redis::start();
    let dir = todo_dir();
    let r1 = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let r2 = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let r3 = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let lb = haproxy(&[r1.port, r2.port, r3.port]).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (client, url, done) = (client.clone(), lb.url.clone(), Arc::clone(&done));
        set.spawn(async move {
            let mut failures = Vec::new();
            for i in 0..CALLS / CLIENTS {
                let text = format!("c{c}-{i}");
                if let Added::Failed(why) = add_item(&client, &url, &text).await {
                    failures.push((text, why));
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            failures
        });
    }
    // Kill replica 2 once a third of the calls are done.
    let deadline = tokio::time::Instant::now() + STEP;
    while done.load(Ordering::Relaxed) < CALLS / 3 {
        assert!(tokio::time::Instant::now() < deadline, "the calls stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid(&r2)).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let mut failures = Vec::new();
    while let Some(joined) = set.join_next().await {
        failures.extend(joined.expect("a client"));
    }
    let texts = todo_texts(&client, &lb.url).await;
    let mut counts = std::collections::HashMap::<&str, usize>::new();
    for text in &texts {
        *counts.entry(text).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    let failed: std::collections::HashSet<&str> =
        failures.iter().map(|(t, _)| t.as_str()).collect();
    let summary = format!(
        "{} items, {} stored more than once ({twice:?}), {} calls failed: {failures:?}",
        texts.len(),
        twice.len(),
        failures.len()
    );
    assert!(twice.is_empty(), "{summary}");
    // Every call that succeeded is stored; one that failed is stored at most once.
    for c in 0..CLIENTS {
        for i in 0..CALLS / CLIENTS {
            let text = format!("c{c}-{i}");
            if !failed.contains(text.as_str()) {
                assert_eq!(counts.get(text.as_str()), Some(&1), "{text}: {summary}");
            }
        }
    }
    // Only calls in flight on the killed replica fail (at most one per client), and each
    // clearly: its retry refused with -32030 (it may have run; it is not run again), or the
    // balancer's 502/503/504 or a cut connection. Never a hang (add_item refuses timeouts).
    assert!(failures.len() <= CLIENTS, "{summary}");
    for (text, why) in &failures {
        assert!(
            not_run_again(why) || balancer_failure(why),
            "{text} failed unclearly: {why}\n{summary}"
        );
    }
    // The numbers, for the issue (visible with --nocapture).
    #[expect(clippy::print_stderr, reason = "the measured numbers, for the issue")]
    {
        eprintln!("at-most-once under SIGKILL: {summary}");
    }
    drop(lb);
    drop(r1);
    drop(r3);
}

/// Whether `why` (a failed `add`, as `add_item` reports it) is the refusal of a retry whose
/// first run may have happened: -32030, naming the request, ending in the promise.
fn not_run_again(why: &str) -> bool {
    let Ok(answer) = serde_json::from_str::<Value>(why) else {
        return false;
    };
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    answer["error"]["code"] == -32030
        && message.starts_with("request ")
        && message.ends_with("; it was not run again")
}

/// A 2026-07-28 `tools/call` straight to a replica, naming `id` in `X-Request-Id` (as the
/// balancer would); the status and the JSON-RPC response.
async fn call_with_id(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    tool: &str,
    arguments: &str,
) -> (u16, Value) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},{META}}}}}"#
    );
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("x-request-id", id)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

/// #24 (point 3), the rules: a request id names one call (the same id with other arguments is
/// refused); a retry of a recorded call returns the first run's result, on either revision;
/// read-only and idempotent tools are not recorded; without `--call-id-header` the header means
/// nothing; the option needs Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_ids_name_one_call_and_only_with_the_option() {
    let redis = Redis::start();
    let dir = todo_dir();
    let on = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let off = once_replica(dir.path(), &redis.url(), &[]).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();

    // A retry returns the first run's result: the item is added once.
    let (status, first) = call_with_id(&client, &on.url, "id-1", "add", r#"{"text":"one"}"#).await;
    assert_eq!(status, 200, "{first}");
    let (_, again) = call_with_id(&client, &on.url, "id-1", "add", r#"{"text":"one"}"#).await;
    assert_eq!(first["result"], again["result"]);
    // The same id with other arguments is refused, and nothing runs.
    let (_, forged) = call_with_id(&client, &on.url, "id-1", "add", r#"{"text":"two"}"#).await;
    assert_eq!(forged["error"]["code"], -32600, "{forged}");
    let message = forged["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("already used for another call"),
        "{message}"
    );

    // A read-only tool is not recorded: its id stays free for a later call.
    for _ in 0..2 {
        let (status, listed) =
            call_with_id(&client, &on.url, "id-2", "list", r#"{"include_done":true}"#).await;
        assert_eq!(status, 200, "{listed}");
        assert!(
            listed["result"]["structuredContent"]["items"].is_array(),
            "{listed}"
        );
    }
    let (_, three) = call_with_id(&client, &on.url, "id-2", "add", r#"{"text":"three"}"#).await;
    assert_eq!(
        three["result"]["structuredContent"]["text"], "three",
        "{three}"
    );

    // A 2025-11-25 session's calls carry the id too.
    let mut session = V2025Session::start(&client, &on.url).await.unwrap();
    session.request_id = Some("id-3".to_owned());
    for _ in 0..2 {
        let four = session
            .post(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add","arguments":{"text":"four"}}}"#)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            four["result"]["structuredContent"]["text"], "four",
            "{four}"
        );
    }

    // Without the option the header means nothing: the same request runs each time.
    for _ in 0..2 {
        let (status, five) =
            call_with_id(&client, &off.url, "id-4", "add", r#"{"text":"five"}"#).await;
        assert_eq!(status, 200, "{five}");
        assert_eq!(
            five["result"]["structuredContent"]["text"], "five",
            "{five}"
        );
    }

    let texts = todo_texts(&client, &on.url).await;
    let count = |t: &str| texts.iter().filter(|x| *x == t).count();
    assert_eq!(
        (
            count("one"),
            count("two"),
            count("three"),
            count("four"),
            count("five")
        ),
        (1, 0, 1, 1, 2),
        "{texts:?}"
    );

    // An unusable id is refused before anything runs.
    let (status, bad) = call_with_id(
        &client,
        &on.url,
        &"x".repeat(200),
        "add",
        r#"{"text":"six"}"#,
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-request-id"),
        "{bad}"
    );

    // Without Redis the option is refused at startup, naming what it needs.
    let output = tokio::time::timeout(
        STEP,
        crate::support::mcpbox(
            dir.path(),
            &["--http", "127.0.0.1:0", "--call-id-header", "X-Request-Id"],
        )
        .stdin(std::process::Stdio::null())
        .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs a shared state store"), "{stderr}");
    drop(on);
    drop(off);
}

/// The assumption the shipped configuration rests on: HAProxy's retries of one request keep
/// its `X-Request-Id`, and the client cannot choose it. Three fake replicas pass health checks
/// and drop every MCP request unanswered (as a killed replica would).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_keeps_the_request_id_across_its_retries() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut ports = [0u16; 3];
    for port in &mut ports {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        *port = listener.local_addr().unwrap().port();
        let seen = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    if head.starts_with("GET /readyz") {
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        return;
                    }
                    let id = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("x-request-id")
                                .then(|| value.trim().to_owned())
                        })
                        .unwrap_or_default();
                    seen.lock().unwrap().push(id);
                    // Dropped unanswered: an empty response.
                });
            }
        });
    }
    let lb = haproxy(&ports).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let response = client
        .post(&lb.url)
        .header("content-type", "application/json")
        .header("x-request-id", "chosen-by-the-client")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_server_error(), "{}", response.status());
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "HAProxy retried the request: {seen:?}");
    assert!(
        !seen[0].is_empty() && seen[0] != "chosen-by-the-client",
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|id| *id == seen[0]),
        "one id across retries: {seen:?}"
    );
    drop(lb);
}

/// #24 (point 3), the failure a balancer's retry meets when the replica that ran the first
/// attempt died mid-call: -32030, once the dead replica's lease on the record has lapsed, and
/// the call is not run again (a run would wait in the plugin for the tool's time limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_first_run_died_with_its_replica_fails_with_32030() {
    let redis = Redis::start();
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        "[limits]\ntimeout-ms = 60000\n",
    )
    .unwrap();
    let first = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let second = once_replica(dir.path(), &redis.url(), &CALL_ID).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();

    // The first attempt waits in a host call for ever on the first replica (its connection
    // is cut when the replica dies).
    let running = {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep_forever","arguments":{{}},{META}}}}}"#
        );
        let request = client
            .post(&first.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "sleep_forever")
            .header("x-request-id", "lost-1")
            .body(body);
        tokio::spawn(async move { request.send().await.map(|r| r.status()) })
    };
    // It runs once its record is in the ledger (the claim comes before the plugin runs).
    let deadline = tokio::time::Instant::now() + STEP;
    while redis.keys("mcpbox:call:lost-1").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first attempt was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid(&first)).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();

    // The balancer's retry, on the other replica: refused, not run.
    let (status, retry) = tokio::time::timeout(
        STEP,
        call_with_id(&client, &second.url, "lost-1", "sleep_forever", "{}"),
    )
    .await
    .expect("the retry was answered, not run");
    assert_eq!(retry["error"]["code"], -32030, "{status} {retry}");
    assert_eq!(
        retry["error"]["message"],
        "request lost-1: this call may already have run on a replica that went away; it was not run again",
        "{retry}"
    );
    assert!(
        running.await.unwrap().is_err(),
        "the first attempt was answered"
    );
    drop(second);
}
