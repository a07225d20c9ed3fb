//! Health and readiness as an orchestrator and a load balancer see them:
//! `/healthz` and `/readyz` answer from the moment the port is bound, and MCP requests wait
//! until the startup load is done. A shared state store going away is in
//! `services::redis_down` (it needs Redis).

use crate::support::{STEP, Stderr, mcpbox, plugin_dir};

/// The address `--http 127.0.0.1:0` bound, read from the log as soon as it is bound.
async fn bound_address(stderr: &Stderr) -> String {
    let log = stderr.wait_for("--http port bound").await;
    let line = log
        .lines()
        .find(|l| l.contains("--http port bound"))
        .unwrap();
    line.split("bound=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line}"))
        .to_owned()
}

use crate::support::INITIALIZE;

/// mcpbox over HTTP (with a token) on the gated slow plugin and the echo tools, with
/// `--startup-wait-ms WAIT`, and a client for its probes and `initialize`.
struct Gated {
    child: tokio::process::Child,
    stderr: Stderr,
    gate: tempfile::TempDir,
    base: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Gated {
    async fn start(wait_ms: &str) -> Self {
        let dir = plugin_dir(&[
            ("slow_list", "slow_list.wasm"),
            ("echo_tools", "echo_tools.wasm"),
        ]);
        // It lists only once the test opens the gate: until then it is still loading.
        let gate = crate::support::slow_list_gate(dir.path());
        let mut child = mcpbox(
            dir.path(),
            &[
                "--http",
                "127.0.0.1:0",
                "--auth-token",
                "secret",
                "--startup-wait-ms",
                wait_ms,
            ],
        )
        .spawn()
        .unwrap();
        let stderr = Stderr::collect(child.stderr.take().unwrap());
        let base = format!("http://{}", bound_address(&stderr).await);
        let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
        Self {
            child,
            stderr,
            gate,
            base,
            client,
            _dir: dir,
        }
    }

    fn get(
        &self,
        path: &str,
    ) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<> {
        self.client.get(format!("{}{path}", self.base)).send()
    }

    fn initialize(
        &self,
    ) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<> {
        self.client
            .post(format!("{}/mcp", self.base))
            .header("authorization", "Bearer secret")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE)
            .send()
    }
}

#[tokio::test]
async fn health_and_readiness_answer_while_plugins_load() {
    // The slow plugin lists only once the test opens its gate; startup waits for it (a long
    // --startup-wait-ms), answering the probes meanwhile and holding MCP requests.
    let mut server = Gated::start("600000").await;
    let (stderr, gate) = (server.stderr.clone(), server.gate.path().to_owned());
    let get = |path: &str| server.get(path);
    let initialize = || server.initialize();

    // While plugins load: alive, not ready, and an MCP request waits for the load. (Startup
    // waits --startup-wait-ms for the slow plugin, far longer than this step takes however
    // loaded the machine: nothing is served before the test opens the gate below.)
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    let not_ready = get("/readyz").await.unwrap();
    assert_eq!(not_ready.status(), 503);
    assert!(
        !stderr.text().contains("serving MCP over HTTP"),
        "the probes were answered only once MCP was served:\n{}",
        stderr.text()
    );
    let held = tokio::spawn(initialize());
    // The plugin says it is listing; the held request has not been answered.
    crate::support::eventually(
        || async { gate.join("listing").exists() },
        "slow_list started listing",
    )
    .await;
    assert!(
        !held.is_finished(),
        "an MCP request was answered during the load"
    );
    std::fs::write(gate.join("open"), b"").unwrap();
    let held = held.await.unwrap().unwrap();
    assert_eq!(held.status(), 200, "{:?}", held.text().await);
    assert!(held.headers().contains_key("mcp-session-id"));
    stderr.wait_for("serving MCP over HTTP").await;
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    let _ = server.child.start_kill();
}

/// A plugin still listing when the startup wait ends is served later: MCP is served at once,
/// and `/readyz` says 503 until that plugin is in.
#[tokio::test]
async fn a_plugin_still_listing_after_the_startup_wait_is_added_later() {
    let mut server = Gated::start("0").await;
    let (stderr, gate) = (server.stderr.clone(), server.gate.path().to_owned());
    let get = |path: &str| server.get(path);
    let initialize = || server.initialize();
    stderr.wait_for("serving MCP over HTTP").await;

    // MCP is served; the slow plugin still lists (the echo tools, late too with no wait at
    // all, come in first).
    assert_eq!(initialize().await.unwrap().status(), 200);
    crate::support::eventually(
        || async {
            let still = get("/readyz").await.unwrap();
            still.status() == 503
                && still
                    .text()
                    .await
                    .unwrap()
                    .contains("1 plugins still loading")
        },
        "/readyz says the slow plugin alone is still loading",
    )
    .await;

    std::fs::write(gate.join("open"), b"").unwrap();
    stderr.wait_for("loaded (late) plugin").await;
    // The log line and the probe see the same event from two tasks: the probe may trail the
    // line by a moment, never by long.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let status = get("/readyz").await.unwrap().status();
        if status == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz still {status} 5 s after the late plugin loaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let _ = server.child.start_kill();
}
