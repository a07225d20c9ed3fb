//! Promises of SECURITY.md that need a real `redis-server`: a call that cannot be recorded
//! (Redis down, with `--call-id-header`) is refused with -32030 without running; the Redis
//! password in `--state` is never logged, nor shown in any answer.

use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::external::{Redis, debian};
use crate::support::{HttpServer, STEP, Stderr, http_stub, plugin_dir, post, v2026_call_headers};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A 2026-07-28 `tools/call` of `tool` with `arguments` (JSON text), carrying the balancer's
/// request id `id` if any: the HTTP status and the JSON-RPC answer.
async fn call(url: &str, id: Option<&str>, tool: &str, arguments: &str) -> (u16, Value) {
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},{META}}}}}"#
    );
    let mut headers = v2026_call_headers(tool).to_vec();
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

/// A `redis-server` of its own that requires `password`, killed when dropped.
struct PrivateRedis {
    port: u16,
    child: std::process::Child,
}

impl PrivateRedis {
    fn start(password: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let child = std::process::Command::new(debian("redis-server", "redis-server"))
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                password,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + STEP;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self { port, child }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `mcpbox state ls kv_probe --state URL`: stdout and stderr together.
fn state_ls(url: &str) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["state", "ls", "kv_probe", "--state", url, "--log", "debug"])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// SECURITY.md, "Durable state": the Redis password, if the URL has one, is never logged. At
/// debug level, through a working session, Redis going away (state calls and the call ledger
/// failing) and a wrong password: no log line and no answer carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_password_is_never_logged() {
    const PASSWORD: &str = "hunter2-never-logged-6f1c";
    const WRONG: &str = "wrong-password-never-logged-93ab";
    let mut redis = PrivateRedis::start(PASSWORD);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port);
    let dir = plugin_dir(&[("kv_probe", "kv_probe.wasm")]);
    std::fs::write(
        dir.path().join("kv_probe.toml"),
        "[keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    let mut answers = Vec::new();
    let set = r#"{"op":"set","key":"k","value":"v"}"#;

    let mut server = HttpServer::start(
        dir.path(),
        &[
            "--state",
            &url,
            "--call-id-header",
            "X-Request-Id",
            "--log",
            "debug",
        ],
    )
    .await;
    let (_, stored) = call(&server.url, Some("id-1"), "kv", set).await;
    assert_eq!(stored["result"]["content"][0]["text"], "\"ok\"", "{stored}");
    answers.push(stored.to_string());
    answers.push(state_ls(&url));
    assert!(answers[1].contains("1 key"), "{}", answers[1]);

    redis.stop();
    let (_, failed) = call(&server.url, None, "kv", set).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    answers.push(failed.to_string());
    let (_, refused) = call(&server.url, Some("id-2"), "kv", set).await;
    assert_eq!(refused["error"]["code"], -32030, "{refused}");
    answers.push(refused.to_string());
    answers.push(state_ls(&url));
    server.stderr.wait_for("cannot record the call").await;
    let _ = server.child.kill().await;

    // A wrong password: refused by the server, and not shown either.
    let mut redis = PrivateRedis::start(PASSWORD);
    let wrong = format!("redis://:{WRONG}@127.0.0.1:{}", redis.port);
    let mut other = HttpServer::start(dir.path(), &["--state", &wrong, "--log", "debug"]).await;
    let (_, denied) = call(&other.url, None, "kv", set).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    answers.push(denied.to_string());
    answers.push(state_ls(&wrong));
    let _ = other.child.kill().await;
    redis.stop();

    let logs: [(&str, &Stderr); 2] = [("first", &server.stderr), ("second", &other.stderr)];
    for (which, log) in logs {
        let text = log.text();
        assert!(
            text.lines().count() > 5,
            "the {which} server logged little:\n{text}"
        );
        for line in text.lines() {
            assert!(
                !line.contains(PASSWORD) && !line.contains(WRONG),
                "the {which} server logged a Redis password: {line}"
            );
        }
    }
    for answer in &answers {
        assert!(
            !answer.contains(PASSWORD) && !answer.contains(WRONG),
            "an answer carried a Redis password: {answer}"
        );
    }
}
