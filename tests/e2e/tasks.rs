//! The tasks extension (SEP-2663) on the wire, against `mcpbox serve --http` with the
//! conformance plugin's task fixtures under a manifest's `[tasks]`: what the official suite
//! checks for one well-behaved client (`services::conformance` runs its ten scenarios), this
//! checks for several and for unlucky ones: tasks are their caller's alone, each caller's
//! running tasks are bounded, a task's time limit holds, finished tasks expire, clients that
//! do not declare the extension (and 2025-11-25 sessions) still get plain calls. The shared
//! store and a replica killed mid-task are in `services::tasks_shared`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{HttpServer, RecordingClient, plugin_dir, token_config};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The manifest that lets the conformance fixtures run as tasks.
pub const TASKS_MANIFEST: &str = "[tasks]\noptional = [\"slow_compute\", \"protocol_error_job\", \"confirm_delete\", \"multi_input\"]\nrequired = [\"failing_job\", \"test_tool_with_task\"]\ntimeout-ms = 120000\n";

/// A plugin directory with the conformance plugin under `manifest`.
pub fn conformance_dir(manifest: &str) -> tempfile::TempDir {
    let dir = plugin_dir(&[("conformance", "conformance.wasm")]);
    std::fs::write(dir.path().join("conformance.toml"), manifest).unwrap();
    dir
}

/// A 2026-07-28 client over plain HTTP: each request stands alone.
pub struct V2026Client {
    http: reqwest::Client,
    url: String,
    token: Option<&'static str>,
    /// Whether requests declare the tasks extension.
    pub declares: bool,
}

impl V2026Client {
    pub fn new(url: &str, token: Option<&'static str>) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token,
            declares: true,
        }
    }

    /// Send `method` with `params`; the JSON-RPC response (from JSON or SSE).
    pub async fn rpc(&self, method: &str, mut params: Value) -> Value {
        let capabilities = if self.declares {
            json!({ "elicitation": {}, "extensions": { EXTENSION: {} } })
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let name = params
            .get("name")
            .or_else(|| params.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .timeout(Duration::from_secs(20))
            .body(body.to_string());
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        if let Some(token) = self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("POST");
        let text = response.text().await.expect("body");
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .chain(std::iter::once(text.trim()))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("id").is_some());
        json.unwrap_or_else(|| panic!("no response to {method}: {text}"))
    }

    /// `tools/call`'s result.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        let response = self
            .rpc(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
            )
            .await;
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: {response}"))
    }

    /// Start a task of `tool`: its id.
    pub async fn start(&self, tool: &str, arguments: Value) -> String {
        let created = self.call(tool, arguments).await;
        assert_eq!(created["resultType"], "task", "{created}");
        created["taskId"].as_str().unwrap().to_owned()
    }

    /// `tasks/get`'s response.
    pub async fn get(&self, id: &str) -> Value {
        self.rpc("tasks/get", json!({ "taskId": id })).await
    }

    /// Poll until the task's status is one of `statuses` (within 20 s): its view.
    pub async fn until(&self, id: &str, statuses: &[&str]) -> Value {
        for _ in 0..200 {
            let view = self.get(id).await;
            let status = view["result"]["status"].as_str().unwrap_or_default();
            if statuses.contains(&status) {
                return view["result"].clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "task {id} never reached {statuses:?}: {}",
            self.get(id).await
        )
    }
}

pub fn code(response: &Value) -> i64 {
    response["error"]["code"].as_i64().unwrap_or(0)
}

async fn server(dir: &Path, extra: &[&str]) -> (HttpServer, tempfile::TempDir) {
    server_with(dir, "", extra).await
}

/// A server whose configuration file has alice's and bob's tokens, then `rest`.
async fn server_with(dir: &Path, rest: &str, extra: &[&str]) -> (HttpServer, tempfile::TempDir) {
    let config_dir = tempfile::tempdir().unwrap();
    let config = token_config(
        config_dir.path(),
        &[("alice", ALICE, &[]), ("bob", BOB, &[])],
        rest,
    );
    let mut args = vec!["--config", config.to_str().unwrap()];
    args.extend_from_slice(extra);
    (HttpServer::start(dir, &args).await, config_dir)
}

#[tokio::test]
async fn tasks_are_their_callers_alone_and_bounded_per_caller() {
    let dir = conformance_dir(TASKS_MANIFEST);
    let (server, _config) = server(dir.path(), &["--max-tasks-per-caller", "2"]).await;
    let alice = V2026Client::new(&server.url, Some(ALICE));
    let bob = V2026Client::new(&server.url, Some(BOB));

    // Declared, and listed per tool.
    let discovered = alice.rpc("server/discover", json!({})).await;
    assert_eq!(
        discovered["result"]["capabilities"]["extensions"][EXTENSION],
        json!({}),
        "{discovered}"
    );
    assert!(discovered["result"]["capabilities"].get("tasks").is_none());
    let listed = alice.rpc("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let support = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["execution"]["taskSupport"].clone()
    };
    assert_eq!(support("slow_compute"), "optional");
    assert_eq!(support("failing_job"), "required");
    assert_eq!(support("greet"), Value::Null);

    // Another caller learns nothing of alice's task, and cannot touch it.
    let first = alice.start("slow_compute", json!({"seconds": 60})).await;
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = bob.rpc(method, json!({ "taskId": first })).await;
        assert_eq!(code(&refused), -32602, "{method}: {refused}");
    }
    let refused = bob
        .rpc(
            "tasks/update",
            json!({ "taskId": first, "inputResponses": {} }),
        )
        .await;
    assert_eq!(code(&refused), -32602, "{refused}");
    assert_eq!(alice.get(&first).await["result"]["status"], "working");

    // A working task's status message is its latest progress message.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let view = alice.get(&first).await;
    let message = view["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("computed ") && message.ends_with(" of 60 s"),
        "{view}"
    );

    // Two running tasks per caller: the third waits its turn; bob has his own.
    let second = alice.start("slow_compute", json!({"seconds": 60})).await;
    let third = alice
        .rpc(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
        )
        .await;
    assert_eq!(code(&third), -32029, "{third}");
    assert!(
        third["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-tasks-per-caller"),
        "{third}"
    );
    let bobs = bob.start("slow_compute", json!({"seconds": 60})).await;

    // Cancelled: the status says so at once, and the slot is free again.
    let ack = alice.rpc("tasks/cancel", json!({ "taskId": first })).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let view = alice.until(&first, &["cancelled"]).await;
    assert!(
        view.get("result").is_none() && view.get("error").is_none(),
        "{view}"
    );
    let mut again = None;
    for _ in 0..50 {
        let response = alice
            .rpc(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
            )
            .await;
        if response["result"]["resultType"] == "task" {
            again = response["result"]["taskId"].as_str().map(str::to_owned);
            break;
        }
        assert_eq!(code(&response), -32029, "{response}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = again.expect("a slot freed by the cancellation");
    // A cancelled task stays cancelled: cancelling again is acknowledged, changes nothing.
    let ack = alice.rpc("tasks/cancel", json!({ "taskId": first })).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    for id in [&second, &again] {
        alice.rpc("tasks/cancel", json!({ "taskId": id })).await;
    }
    bob.rpc("tasks/cancel", json!({ "taskId": bobs })).await;

    // Ids that were never issued, and the methods the extension removed.
    for id in ["", "no-such-task", "../../etc/passwd", &"f".repeat(10_000)] {
        let unknown = alice.get(id).await;
        assert_eq!(code(&unknown), -32602, "{unknown}");
    }
    for method in ["tasks/result", "tasks/list"] {
        let gone = alice.rpc(method, json!({})).await;
        assert_eq!(code(&gone), -32601, "{method}: {gone}");
    }
    server.stderr.text();
}

#[tokio::test]
async fn without_the_extension_calls_are_plain_and_required_tools_are_refused() {
    let dir = conformance_dir(TASKS_MANIFEST);
    let (server, _config) = server(dir.path(), &[]).await;
    let mut plain = V2026Client::new(&server.url, Some(ALICE));
    plain.declares = false;

    let result = plain
        .call("slow_compute", json!({"seconds": 1, "label": "plain"}))
        .await;
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "computed plain in 1 s");
    for (method, params) in [
        (
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        ),
        ("tasks/get", json!({"taskId": "x"})),
        ("tasks/cancel", json!({"taskId": "x"})),
        ("tasks/update", json!({"taskId": "x", "inputResponses": {}})),
    ] {
        let refused = plain.rpc(method, params).await;
        assert_eq!(code(&refused), -32021, "{method}: {refused}");
        assert_eq!(
            refused["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION],
            json!({}),
            "{refused}"
        );
    }

    // A 2025-11-25 session has no tasks: every tool is a plain call, as before.
    let session = server
        .connect(RecordingClient::new(&json!({})), Some(ALICE))
        .await;
    let result = session
        .call_tool(crate::support::call("failing_job", json!({})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let listed = session.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "slow_compute"));
    session.cancel().await.unwrap();
}

#[tokio::test]
async fn a_task_has_its_own_time_limit_and_expires_after_its_ttl() {
    let manifest =
        "[tasks]\noptional = [\"slow_compute\", \"protocol_error_job\"]\ntimeout-ms = 2000\n";
    let dir = conformance_dir(manifest);
    let (server, _config) = server(dir.path(), &["--task-ttl-ms", "2000"]).await;
    let alice = V2026Client::new(&server.url, Some(ALICE));

    // Over the task's own limit: the task failed, naming the limit.
    let id = alice.start("slow_compute", json!({"seconds": 10})).await;
    let view = alice
        .until(&id, &["completed", "failed", "cancelled"])
        .await;
    assert_eq!(view["status"], "failed", "{view}");
    let message = view["error"]["message"].as_str().unwrap();
    assert!(message.contains("timed out after 2 s"), "{message}");
    assert_eq!(view["ttlMs"], 2000);

    // A crash is a failed task with the plugin's message; a result, a completed one.
    let crashed = alice.start("protocol_error_job", json!({})).await;
    let view = alice.until(&crashed, &["completed", "failed"]).await;
    assert_eq!(view["status"], "failed", "{view}");
    assert_eq!(view["error"]["code"], -32603);
    assert!(
        view["error"]["message"]
            .as_str()
            .unwrap()
            .contains("crashed on purpose")
    );
    let done = alice
        .start("slow_compute", json!({"seconds": 1, "label": "quick"}))
        .await;
    let view = alice.until(&done, &["completed"]).await;
    assert_eq!(
        view["result"]["content"][0]["text"],
        "computed quick in 1 s"
    );
    assert_eq!(view["result"]["resultType"], "complete");

    // Counted: the runs that ended here, by how.
    let metrics = reqwest::Client::new()
        .get(server.url.replace("/mcp", "/metrics"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "mcpbox_tasks_total{outcome=\"completed\"} 1",
        "mcpbox_tasks_total{outcome=\"failed\"} 2",
        "mcpbox_tasks_running 0",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }

    // Kept for its ttl after its last change, then gone.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(code(&alice.get(&done).await), -32602);
}

#[tokio::test]
async fn a_task_over_the_operators_time_limit_is_refused_at_load() {
    let dir = conformance_dir("[tasks]\noptional = [\"slow_compute\"]\ntimeout-ms = 7200000\n");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["inspect"])
        .arg(dir.path().join("conformance.wasm"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("tasks.timeout-ms") && stderr.contains("--task-timeout-ms"),
        "{stderr}"
    );
}

#[tokio::test]
async fn answers_are_checked_kept_one_by_one_and_never_reach_a_replaced_plugin() {
    let dir = conformance_dir(TASKS_MANIFEST);
    let (server, _config) = server(dir.path(), &[]).await;
    let alice = V2026Client::new(&server.url, Some(ALICE));

    // Two questions at once; a malformed answer is refused and the task keeps waiting.
    let id = alice.start("multi_input", json!({})).await;
    let asked = alice.until(&id, &["input_required"]).await;
    let open = |view: &Value| -> Vec<String> {
        view["inputRequests"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(open(&asked), ["first", "second"], "{asked}");
    let refused = alice
        .rpc(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"first": "yes"}}),
        )
        .await;
    assert_eq!(code(&refused), -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inputResponses.first"),
        "{refused}"
    );
    let accept = json!({"action": "accept", "content": {"confirm": true}});
    let ack = alice
        .rpc(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"first": accept, "planted": accept}}),
        )
        .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let view = alice.get(&id).await["result"].clone();
    assert_eq!(view["status"], "input_required");
    assert_eq!(open(&view), ["second"], "{view}");
    alice
        .rpc(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"second": accept}}),
        )
        .await;
    let done = alice.until(&id, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "both confirmed",
        "{done}"
    );
    // Answers to a task that no longer waits are acknowledged and change nothing.
    let ack = alice
        .rpc(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"second": accept}}),
        )
        .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}));

    // The plugin is replaced while a task waits: the answers fail the task, naming why,
    // instead of reaching the new version's questions.
    let id = alice
        .start("confirm_delete", json!({"filename": "old.txt"}))
        .await;
    alice.until(&id, &["input_required"]).await;
    // Another build: the same code with one more custom section (a new digest).
    let wasm = dir.path().join("conformance.wasm");
    let bytes = crate::support::with_custom_section(std::fs::read(&wasm).unwrap(), "next", &[1]);
    let staged = dir.path().join("conformance.wasm.new");
    std::fs::write(&staged, bytes).unwrap();
    std::fs::rename(&staged, &wasm).unwrap();
    server.stderr.wait_for("reloaded plugin").await;
    alice
        .rpc(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"confirm": accept}}),
        )
        .await;
    let failed = alice.until(&id, &["completed", "failed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("replaced"),
        "{failed}"
    );
}

#[tokio::test]
async fn a_request_cancelled_before_its_task_was_created_leaves_nothing_running() {
    let dir = conformance_dir(TASKS_MANIFEST);
    // Over stdio at 2026-07-28: the request is cancelled 100 ms into the grace, before the call
    // became a task. The call is stopped and the caller's one slot is free again, each time.
    let mut raw = crate::support::Raw::start(dir.path(), &["--max-tasks-per-caller", "1"]);
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow_compute","arguments":{{"seconds":30}},{meta}}}}}"#
        )
    };
    for id in 1..=3 {
        raw.send(call(id).as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        raw.send(
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
            )
            .as_bytes(),
        )
        .await;
    }
    // Whatever the cancelled requests answered (if anything), a new one becomes a task once
    // the last cancellation has been handled (it races with the next line on a busy machine).
    let mut created = false;
    for id in 9..40 {
        raw.send(call(id).as_bytes()).await;
        loop {
            let reply = raw.recv().await;
            if reply["id"] == id {
                created = reply["result"]["resultType"] == "task";
                if !created {
                    assert_eq!(reply["error"]["code"], -32029, "{reply}");
                }
                break;
            }
            assert_ne!(
                reply["result"]["resultType"], "task",
                "a cancelled call became a task: {reply}"
            );
        }
        if created {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(created, "the cancelled calls never freed the caller's slot");
}

/// The refusal of a task of a tool that only runs as a task, when its caller keeps its share
/// of the task store already (the caller's own share, nothing of the store's free room).
pub fn over_share(records: u64, bytes: u64) -> String {
    format!(
        "cannot keep the task: this caller already keeps its share of the task store: at most \
         {records} tasks and {bytes} bytes of their records, each kept for its ttlMs after its \
         last change (--max-task-records-per-caller, --max-task-bytes-per-caller); try again \
         when one has expired"
    )
}

/// Issue #55: a caller who fills the task store leaves the others room. Each caller keeps at
/// most its share (records and bytes); past it, a call of a tool that may run as a task is
/// served as a plain call, and one of a tool that only runs as a task is refused naming the
/// caller's share, never the store's free room. Another caller's tasks are kept as before.
#[tokio::test]
async fn a_caller_past_its_share_of_the_task_store_gets_plain_calls_and_others_keep_tasks() {
    let dir = conformance_dir(TASKS_MANIFEST);
    let (server, _config) = server(
        dir.path(),
        &[
            "--max-task-records-per-caller",
            "2",
            "--max-task-bytes-per-caller",
            "100000",
        ],
    )
    .await;
    let alice = V2026Client::new(&server.url, Some(ALICE));
    let bob = V2026Client::new(&server.url, Some(BOB));

    // Bob keeps two tasks: his share of records.
    let first = bob.start("slow_compute", json!({"seconds": 60})).await;
    let second = bob
        .start("slow_compute", json!({"seconds": 1, "label": "kept"}))
        .await;
    // A task's outcome replaces its record: within the share, it is kept.
    let done = bob.until(&second, &["completed", "failed"]).await;
    assert_eq!(done["result"]["content"][0]["text"], "computed kept in 1 s");

    // Past it, a tool that may run as a task runs as a plain call, to its end.
    let plain = bob
        .call("slow_compute", json!({"seconds": 1, "label": "plain"}))
        .await;
    assert_eq!(plain["resultType"], "complete", "{plain}");
    assert_eq!(plain["content"][0]["text"], "computed plain in 1 s");
    // One that only runs as a task is refused, naming his share and no more.
    let refused = bob
        .rpc(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    assert_eq!(code(&refused), -32029, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        over_share(2, 100_000),
        "{refused}"
    );

    // Alice's share is her own: her calls still become tasks.
    let hers = alice.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(alice.get(&hers).await["result"]["status"], "working");

    // Bytes count too: with one record kept, alice cannot keep one that would pass hers.
    let label = "x".repeat(120_000);
    let plain = alice
        .call("slow_compute", json!({"seconds": 1, "label": label}))
        .await;
    assert_eq!(plain["resultType"], "complete", "{plain}");
    assert_eq!(
        plain["content"][0]["text"],
        format!("computed {label} in 1 s")
    );
    alice.rpc("tasks/cancel", json!({ "taskId": hers })).await;
    bob.rpc("tasks/cancel", json!({ "taskId": first })).await;
}

/// The value of `mcpbox_budget_in_use{limit="calls"}`: budgeted callers' calls running now.
async fn calls_in_use(server: &HttpServer) -> f64 {
    let text = reqwest::Client::new()
        .get(server.url.replace("/mcp", "/metrics"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(r#"mcpbox_budget_in_use{limit="calls"} "#))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no calls in use in the metrics:\n{text}"))
}

/// Wait (a step at most) until budgeted callers run exactly `calls` calls.
async fn until_calls_in_use(server: &HttpServer, calls: u32) {
    let deadline = std::time::Instant::now() + crate::support::STEP;
    while calls_in_use(server).await != f64::from(calls) {
        assert!(
            std::time::Instant::now() < deadline,
            "calls in use never became {calls}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue #55: a running task is a running plugin call. It holds a place in its caller's
/// `calls` budget from when its call starts until it ends (however it ends), as a plain call
/// does: a caller whose tasks hold the budget is refused more calls, plain or task, at once,
/// and a task resumed by an answer needs a place too.
#[tokio::test]
async fn running_tasks_hold_places_in_their_callers_calls_budget() {
    let dir = conformance_dir(TASKS_MANIFEST);
    let (server, _config) = server_with(dir.path(), "[budgets]\ncalls = 2\n", &[]).await;
    let alice = V2026Client::new(&server.url, Some(ALICE));
    let mut plain = V2026Client::new(&server.url, Some(ALICE));
    plain.declares = false;
    let bob = V2026Client::new(&server.url, Some(BOB));

    // A task waiting for an answer runs nothing: it holds no place.
    let asking = alice
        .start("confirm_delete", json!({"filename": "a.txt"}))
        .await;
    alice.until(&asking, &["input_required"]).await;
    until_calls_in_use(&server, 0).await;

    // Two running tasks hold both of alice's places, once each.
    let first = alice.start("slow_compute", json!({"seconds": 60})).await;
    let second = alice.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(calls_in_use(&server).await, 2.0);
    let refused_calls = |response: &Value| {
        assert_eq!(code(response), -32029, "{response}");
        assert_eq!(response["error"]["data"]["limit"], "calls", "{response}");
        assert_eq!(response["error"]["data"]["budget"], 2, "{response}");
    };
    for client in [&alice, &plain] {
        let refused = client
            .rpc(
                "tools/call",
                json!({"name": "greet", "arguments": {"name": "alice"}}),
            )
            .await;
        refused_calls(&refused);
    }
    // The answer that would run the waiting task again is refused too, and it keeps waiting.
    let accept = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let refused = alice
        .rpc(
            "tasks/update",
            json!({"taskId": asking, "inputResponses": accept}),
        )
        .await;
    refused_calls(&refused);
    assert_eq!(
        alice.get(&asking).await["result"]["status"],
        "input_required"
    );
    // Bob's budget is his own.
    let hello = bob.call("greet", json!({"name": "bob"})).await;
    assert_eq!(hello["content"][0]["text"], "Hello, bob!");

    // A cancelled task gives its place back, once: one more call fits, not two.
    alice.rpc("tasks/cancel", json!({ "taskId": first })).await;
    until_calls_in_use(&server, 1).await;
    let ack = alice
        .rpc(
            "tasks/update",
            json!({"taskId": asking, "inputResponses": accept}),
        )
        .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = alice.until(&asking, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted a.txt",
        "{done}"
    );
    until_calls_in_use(&server, 1).await;
    let third = alice.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(calls_in_use(&server).await, 2.0);
    let refused = plain
        .rpc(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "alice"}}),
        )
        .await;
    refused_calls(&refused);
    for id in [&second, &third] {
        alice.rpc("tasks/cancel", json!({ "taskId": id })).await;
    }
    until_calls_in_use(&server, 0).await;

    // A task whose call crashes gives its place back as well.
    let crashing = alice.start("protocol_error_job", json!({})).await;
    let failed = alice.until(&crashing, &["completed", "failed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(calls_in_use(&server).await, 0.0);
}
