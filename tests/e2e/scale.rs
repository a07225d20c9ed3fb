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

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{HttpServer, STEP, SseReader, plugin_dir, test_plugins};
use crate::tools::{self, Redis};

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
    let program = tools::debian("haproxy", "haproxy");
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
async fn modern(
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

async fn modern_echo(client: &reqwest::Client, url: &str, text: &str) -> Result<(), String> {
    let params = format!(r#""name":"echo","arguments":{{"text":"{text}"}}"#);
    let value = modern(client, url, "tools/call", Some("echo"), &params).await?;
    let got = &value["result"]["content"][0]["text"];
    if got == text {
        Ok(())
    } else {
        Err(format!("echo answered {value}"))
    }
}

/// A 2025-11-25 session through `url`.
struct Legacy {
    client: reqwest::Client,
    url: String,
    session: String,
    next_id: u64,
}

impl Legacy {
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
        let mut legacy = Self {
            client: client.clone(),
            url: url.to_owned(),
            session,
            next_id: 1,
        };
        legacy
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await?;
        Ok(legacy)
    }

    /// POST one message; the JSON-RPC response (from JSON or SSE), or `Err` with the status.
    async fn post(&mut self, body: &str) -> Result<Option<Value>, String> {
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25")
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
    // `modern` adds the `_meta` envelope after these fields.
    let fields = params.to_string();
    let fields = &fields[1..fields.len() - 1];
    modern(client, url, "tools/call", Some(TOOL), fields)
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

/// A new session, retried (as a client would) while the balancer has no replica to offer.
async fn start_with_retries(client: &reqwest::Client, url: &str) -> Legacy {
    let mut attempt = 0;
    loop {
        match Legacy::start(client, url).await {
            Ok(session) => return session,
            Err(e) if attempt < 10 => {
                attempt += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("no new session after {attempt} attempts: {e}"),
        }
    }
}

/// What a load run lets clients retry.
#[derive(Clone, Copy, PartialEq)]
enum Retry {
    /// Nothing: any failure fails the test.
    Never,
    /// Only a legacy session answered 404 (its replica is gone) starts again, as the transport
    /// says clients must; any other failure fails the test.
    Sessions,
    /// Any failed call is retried (up to 5 times).
    All,
}

/// `calls` echo calls from `tasks` clients at once, half 2026-07-28, half legacy sessions,
/// retrying what `retry` allows. Returns how many legacy sessions had to start again.
async fn load(
    url: &str,
    tasks: usize,
    calls: usize,
    retry: Retry,
    during: impl Future<Output = ()>,
) -> usize {
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let restarts = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let (client, url, restarts) = (client.clone(), url.to_owned(), Arc::clone(&restarts));
        let per_task = calls / tasks;
        set.spawn(async move {
            if task % 2 == 0 {
                for i in 0..per_task {
                    let text = format!("m{task}-{i}");
                    let mut attempt = 0;
                    loop {
                        match modern_echo(&client, &url, &text).await {
                            Ok(()) => break,
                            Err(e) if retry == Retry::All && attempt < 5 => {
                                attempt += 1;
                                let _ = e;
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Err(e) => panic!("2026-07-28 call {text} failed: {e}"),
                        }
                    }
                }
            } else {
                let mut session = Legacy::start(&client, &url)
                    .await
                    .expect("a session starts");
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
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                            }
                            Err(e) => panic!("legacy call {text} failed: {e}"),
                        }
                    }
                }
            }
        });
    }
    let waiting = async {
        while let Some(done) = set.join_next().await {
            done.expect("a client task");
        }
    };
    tokio::join!(waiting, during);
    restarts.load(Ordering::Relaxed)
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
    let first = modern(&client, &r1.url, "tools/list", None, "")
        .await
        .unwrap();
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .expect("more than one page")
        .to_owned();
    let second = modern(
        &client,
        &r2.url,
        "tools/list",
        None,
        &format!(r#""cursor":"{cursor}""#),
    )
    .await
    .unwrap();
    let third = modern(
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

    // 10,000 calls at 64 in flight, 2026-07-28 and legacy, no failure and no retry.
    let restarts = load(&lb.url, 64, 10_000, Retry::Never, async {}).await;
    assert_eq!(restarts, 0);

    // A counter incremented through every replica ends exact.
    let increments = (0..512).map(|_| {
        let (client, url) = (client.clone(), lb.url.clone());
        async move {
            modern(
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
        let value = modern(
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

    // SIGTERM on replica 3 in the middle of a run: no call fails (its legacy sessions start
    // again elsewhere, as the transport says they must).
    let r3_pid = pid(&r3);
    load(&lb.url, 32, 2_000, Retry::Sessions, async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(r3_pid).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
    })
    .await;
    let mut r3 = r3;
    let status = tokio::time::timeout(STEP, r3.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "replica 3 stopped cleanly: {status}");

    // SIGKILL on replica 2 mid-run: only what was in flight on it fails; retries succeed, and
    // its legacy sessions get 404 and start again.
    let r2_pid = pid(&r2);
    let restarts = load(&lb.url, 32, 3_000, Retry::All, async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(r2_pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    })
    .await;
    assert!(
        restarts > 0,
        "sessions on the killed replica had to start again"
    );
    // The survivor still serves, through the balancer.
    modern_echo(&client, &lb.url, "after").await.unwrap();
    drop(lb);
    drop(r1);
    drop(r2);
}
