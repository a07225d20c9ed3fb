//! WASI 0.3 plugins (`mcpbox:plugin@0.3.0`, the `p3-probe` fixture) beside 0.2 ones in one
//! plugin directory: tools (a streamed result), prompts, resources and completions over stdio
//! and HTTP on both protocol revisions; every limit firing with its own message and the next
//! call working; hostile plugins (awaiting forever, spawning thousands of futures, holding
//! their stream open, dropping a write midway); HTTP fetched concurrently within the grant;
//! hot reload between a 0.2 and a 0.3 build of one plugin; cancellation; instances kept per
//! caller; durable state within the grant; a 0.3 tool run as a task; `mcpbox new --wasi 0.3`.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::support::{
    Client, HttpServer, Raw, RecordingClient, SseReader, connect, example_plugins, install,
    plugin_dir, post, test_plugins, tool_text, v2026_call_headers,
};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

const HOSTILE_LIMITS: &str = "[limits]\nfuel = 500_000_000\ntimeout-ms = 2000\nmemory-mib = 32\n";

fn manifest(dir: &Path, plugin: &str, text: &str) {
    std::fs::write(dir.join(format!("{plugin}.toml")), text).unwrap();
}

/// A 0.3 plugin beside a 0.2 one.
fn both() -> tempfile::TempDir {
    plugin_dir(&[
        ("p3_probe", "p3_probe.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ])
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}\n{}", client.stderr.text()));
    tool_text(&result)
}

/// A failing call's message, after which the same plugin still answers.
async fn contained(client: &Client, tool: &'static str, arguments: Value) -> String {
    let (text, is_error) = call(client, tool, arguments).await;
    assert!(is_error, "{tool} should fail: {text}");
    assert_eq!(
        call(client, "echo3", json!({"text": "still here"})).await,
        ("still here".to_owned(), false),
        "after {tool}"
    );
    text
}

fn texts(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {result}"))
        .iter()
        .map(|c| c["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_0_3_plugin_serves_beside_a_0_2_one_over_stdio_on_both_revisions() {
    let dir = both();
    let mut raw = Raw::initialized(dir.path(), &[]).await;

    let list = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo3") && names.contains(&"echo"),
        "{names:?}"
    );

    // A 0.2 tool and a 0.3 tool, one after the other.
    let echo = raw
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from 0.2"}}}"#)
        .await;
    assert_eq!(texts(&echo["result"]), ["from 0.2"]);
    let echo3 = raw
        .request(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo3","arguments":{"text":"from 0.3"}}}"#)
        .await;
    assert_eq!(texts(&echo3["result"]), ["from 0.3"]);

    // Streamed items reach the client before the result (as progress), and the result holds
    // them all, in order, before the tool's own content.
    raw.send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"count","arguments":{"n":3},"_meta":{"progressToken":"c"}}}"#).await;
    let mut progress = Vec::new();
    let result = loop {
        let message = raw.recv().await;
        if message["method"] == "notifications/progress" {
            progress.push(message["params"]["message"].as_str().unwrap().to_owned());
            continue;
        }
        break message;
    };
    assert_eq!(
        progress.first().map(String::as_str),
        Some("1"),
        "{progress:?}"
    );
    assert_eq!(texts(&result["result"]), ["1", "2", "3", "counted to 3"]);

    let prompt = raw
        .request(r#"{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"greet3","arguments":{"name":"Ada"}}}"#)
        .await;
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "Say hello to Ada."
    );
    let resource = raw
        .request(r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"probe3://hello"}}"#)
        .await;
    assert_eq!(resource["result"]["contents"][0]["text"], "hello from 0.3");
    let completion = raw
        .request(r#"{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet3"},"argument":{"name":"name","value":"A"}}}"#)
        .await;
    assert_eq!(
        completion["result"]["completion"]["values"],
        json!(["Ada", "Alan"])
    );
    // The caller, through the 0.3 world's own `caller`: the local user.
    let who = raw
        .request(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"who3","arguments":{}}}"#)
        .await;
    let who: Value = serde_json::from_str(&texts(&who["result"])[0]).unwrap();
    assert_eq!(who["all_scopes"], true, "{who}");
    assert_eq!(who["id"].as_str().map(str::len), Some(32), "{who}");

    // The 2026-07-28 revision in the same process.
    let modern = raw
        .request(&format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"count","arguments":{{"n":2}},{META}}}}}"#
        ))
        .await;
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(texts(&modern["result"]), ["1", "2", "counted to 2"]);
}

#[tokio::test]
async fn a_0_3_plugin_answers_over_http_on_both_revisions() {
    let dir = both();
    let server = HttpServer::start(dir.path(), &[]).await;

    // 2025: rmcp's Streamable HTTP client, in a session.
    let client = server.connect(RecordingClient::new(&json!({})), None).await;
    let result = client
        .call_tool(
            CallToolRequestParams::new("count")
                .with_arguments(json!({"n": 2}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(texts(&result), ["1", "2", "counted to 2"]);
    let prompt = client
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new("greet3")
                .with_arguments(json!({"name": "Grace"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&prompt.messages[0]).unwrap()["content"]["text"],
        "Say hello to Grace."
    );

    // 2026-07-28: stateless, the mirror headers.
    let http = reqwest::Client::new();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"count","arguments":{{"n":3}},{META}}}}}"#
    );
    let response = post(&http, &server.url, &v2026_call_headers("count"), &body).await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    let (_, reply) = reader.next_json().await.expect("a reply");
    assert_eq!(reply["result"]["resultType"], "complete", "{reply}");
    assert_eq!(texts(&reply["result"]), ["1", "2", "3", "counted to 3"]);
}

#[tokio::test]
async fn every_limit_fires_for_a_0_3_plugin_and_the_next_call_works() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(dir.path(), "p3_probe", HOSTILE_LIMITS);
    let client = connect(dir.path(), &[]).await;

    let fuel = contained(&client, "burn3", json!({})).await;
    assert_eq!(
        fuel,
        "plugin `p3_probe` ran out of fuel after 500000000 units"
    );
    let memory = contained(&client, "grow3", json!({"n": 64})).await;
    assert!(
        memory.starts_with("plugin `p3_probe` exceeded its 32 MiB memory limit (asked for "),
        "{memory}"
    );
    // Waiting is covered by the wall clock: no wasm runs for epochs or fuel to stop.
    let waiting = contained(&client, "wait_forever", json!({})).await;
    assert_eq!(waiting, "plugin `p3_probe` timed out after 2 s");
    let held = contained(&client, "hold_stream", json!({})).await;
    assert_eq!(held, "plugin `p3_probe` timed out after 2 s");
    let spawned = contained(&client, "spawn_many", json!({"n": 5000})).await;
    assert_eq!(
        spawned,
        "plugin `p3_probe` held more than 4096 handles (open files, streams, HTTP fields) at once, the limit of a call"
    );
    // Everything streamed stays in the result, so a stream carries no more than a result may
    // hold: the call ends at the bound, not after the host has copied it all.
    let flooded = contained(&client, "flood", json!({"kib": 1024, "n": 200})).await;
    assert_eq!(
        flooded,
        "plugin `p3_probe` streamed more than 4 MiB of content, its result limit"
    );
    let counted = contained(&client, "count", json!({"n": 10_001})).await;
    assert_eq!(
        counted,
        "plugin `p3_probe` streamed more than 10000 content items"
    );
    // A write dropped midway is the plugin's business: the call answers.
    assert_eq!(
        call(&client, "drop_mid_write", json!({})).await,
        ("answered after a dropped write".to_owned(), false)
    );
}

/// A 0.3 plugin's requests to the client are `async`: a call may have 16 waiting at once, and
/// the next fails at once, so questions started by the thousand (each keeping its parameters
/// until the client answers) cannot grow the host's memory.
#[tokio::test]
async fn a_0_3_call_has_at_most_sixteen_requests_to_the_client_waiting() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(dir.path(), "p3_probe", HOSTILE_LIMITS);
    let mut raw = Raw::start(dir.path(), &[]);
    let init = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"0"}}}"#)
        .await;
    assert!(init.get("result").is_some(), "{init}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    // The client never answers: the first 16 questions wait, the 17th is refused.
    raw.send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_many","arguments":{"n":40}}}"#)
        .await;
    let mut asked = 0;
    let result = loop {
        let message = raw.recv().await;
        if message["method"] == "elicitation/create" {
            asked += 1;
            continue;
        }
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(
        texts(&result["result"]),
        ["a call may have at most 16 requests to the client waiting at once"],
        "{result}"
    );
    assert!(asked <= 16, "{asked} questions reached the client");
    raw.assert_alive(3).await;
}

/// A loopback server whose every answer takes `delay`: `GET /N` answers `N`.
async fn slow_upstream(delay: Duration) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    use tokio::io::AsyncReadExt as _;
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text
                    .split(' ')
                    .nth(1)
                    .unwrap_or("/")
                    .trim_start_matches('/');
                let body = path.to_owned();
                tokio::time::sleep(delay).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    port
}

#[tokio::test]
async fn a_0_3_plugin_fetches_concurrently_within_its_grant() {
    const DELAY: Duration = Duration::from_millis(1000);
    let granted = slow_upstream(DELAY).await;
    let other = slow_upstream(Duration::ZERO).await;
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(
        dir.path(),
        "p3_probe",
        &format!("[http]\nallow = [\"127.0.0.1:{granted}\"]\n"),
    );
    let client = connect(dir.path(), &[]).await;
    let urls: Vec<String> = (1..=4)
        .map(|n| format!("http://127.0.0.1:{granted}/{n}"))
        .chain([format!("http://127.0.0.1:{other}/denied")])
        .collect();
    let started = Instant::now();
    let result = client
        .call_tool(
            CallToolRequestParams::new("fetch_all")
                .with_arguments(json!({"urls": urls}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let result = serde_json::to_value(&result).unwrap();
    let lines = texts(&result);
    // The denied one answers first (no upstream wait), the four granted ones after.
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(
        lines[0],
        format!(
            "http://127.0.0.1:{other}/denied: failed: the request was denied (the host is not granted)"
        )
    );
    let mut granted_lines = lines[1..5].to_vec();
    granted_lines.sort();
    assert_eq!(
        granted_lines,
        (1..=4)
            .map(|n| format!("http://127.0.0.1:{granted}/{n}: 200 {n}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(lines[5], "4 of 5 fetched");
    // Four upstreams of a second each, awaited at once: well under the four seconds one
    // after the other would take.
    assert!(elapsed < DELAY * 3, "took {elapsed:?}");
}

#[tokio::test]
async fn hot_reload_swaps_one_plugin_between_its_0_2_and_0_3_builds() {
    let read = |plugin: &str| {
        let examples = example_plugins().join(format!("{plugin}.wasm"));
        std::fs::read(if examples.exists() {
            examples
        } else {
            test_plugins().join(format!("{plugin}.wasm"))
        })
        .unwrap()
    };
    let dir = plugin_dir(&[("echo_tools", "swap.wasm")]);
    let client = connect(dir.path(), &[]).await;
    assert_eq!(
        call(&client, "echo", json!({"text": "0.2"})).await,
        ("0.2".to_owned(), false)
    );
    install(dir.path(), "swap.wasm", &read("p3_probe"));
    crate::support::eventually(
        || async {
            client
                .list_all_tools()
                .await
                .is_ok_and(|tools| tools.iter().any(|t| t.name == "echo3"))
        },
        "the 0.3 build is served",
    )
    .await;
    assert_eq!(
        call(&client, "echo3", json!({"text": "0.3"})).await,
        ("0.3".to_owned(), false)
    );
    install(dir.path(), "swap.wasm", &read("echo_tools"));
    crate::support::eventually(
        || async {
            client
                .list_all_tools()
                .await
                .is_ok_and(|tools| tools.iter().any(|t| t.name == "echo"))
        },
        "the 0.2 build is served again",
    )
    .await;
    assert_eq!(
        call(&client, "echo", json!({"text": "0.2 again"})).await,
        ("0.2 again".to_owned(), false)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcpbox_new_wasi_0_3_writes_a_rust_project_that_builds_and_streams() {
    use crate::languages::{root, run_in};
    tokio::task::block_in_place(|| {
        let parent = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .args(["new", "hello-p3", "--wasi", "0.3"])
            .current_dir(parent.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && said.contains("next:"), "{said}");
        let project = parent.path().join("hello-p3");
        let target = root().join("target/new-plugins");
        let target = target.to_str().unwrap();
        let said = run_in(&project, &["cargo", "test", "--target-dir", target], &[]);
        assert!(said.contains("test result: ok. 1 passed"), "{said}");
        run_in(
            &project,
            &[
                "cargo",
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--target-dir",
                target,
            ],
            &[],
        );
        let wasm = root().join("target/new-plugins/wasm32-wasip2/release/hello_p3.wasm");
        let said = run_in(
            &project,
            &[
                "mcpbox",
                "call",
                wasm.to_str().unwrap(),
                "hello",
                "--args",
                r#"{"names": ["Ada", "Grace"]}"#,
            ],
            &[],
        );
        for line in ["Hello, Ada!", "Hello, Grace!", "greeted 2"] {
            assert!(said.contains(line), "{line} in {said}");
        }
    });
}

#[tokio::test]
async fn a_cancelled_0_3_call_stops_and_frees_its_instance() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(dir.path(), "p3_probe", "[limits]\ntimeout-ms = 60000\n");
    // One instance slot: the next call can only run once the cancelled one is gone.
    let mut raw = Raw::initialized(
        dir.path(),
        &["--max-instances", "1", "--metrics-addr", "127.0.0.1:0"],
    )
    .await;
    raw.send(br#"{"jsonrpc":"2.0","id":"held","method":"tools/call","params":{"name":"hold_stream","arguments":{},"_meta":{"progressToken":"p"}}}"#).await;
    let first = raw.recv().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["message"], "first", "{first}");
    raw.send(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"held"}}"#,
    )
    .await;
    raw.send(br#"{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"echo3","arguments":{"text":"after"}}}"#).await;
    loop {
        let message = raw.recv().await;
        assert_ne!(
            message["id"], "held",
            "a cancelled request must get no response: {message}"
        );
        if message["id"] == "next" {
            assert_eq!(texts(&message["result"]), ["after"]);
            break;
        }
    }
    // Counted as cancelled, as a cancelled 0.2 call is: the client's doing, not the host's.
    let url = raw.stderr.metrics_url().await;
    let counted = r#"mcpbox_plugin_calls_total{plugin="p3_probe",kind="tool",name="hold_stream","#;
    let deadline = Instant::now() + crate::support::STEP;
    let line = loop {
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        if let Some(line) = text.lines().find(|l| l.starts_with(counted)) {
            break line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the call was never counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(line, format!(r#"{counted}outcome="cancelled"}} 1"#));
}

#[tokio::test]
async fn a_0_3_instance_is_kept_for_its_caller_unless_work_is_left_in_it() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(dir.path(), "p3_probe", "instances = \"per-caller\"\n");
    let client = connect(dir.path(), &[]).await;
    assert_eq!(call(&client, "calls3", json!({})).await.0, "1");
    // Kept for the same caller: its memory as the last call left it.
    assert_eq!(call(&client, "calls3", json!({})).await.0, "2");
    // A call that leaves a task running in its instance: that instance is not kept.
    assert_eq!(
        call(&client, "linger", json!({})).await,
        ("lingering".to_owned(), false)
    );
    assert_eq!(call(&client, "calls3", json!({})).await.0, "1");
}

#[tokio::test]
async fn a_0_3_plugin_keeps_state_within_its_grant() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    let client = connect(dir.path(), &[]).await;
    let (denied, is_error) = call(&client, "note3", json!({"text": "a"})).await;
    assert!(is_error, "{denied}");
    assert!(denied.contains("not granted"), "{denied}");
    drop(client);
    manifest(
        dir.path(),
        "p3_probe",
        "[keyvalue]\nbuckets = [\"default\"]\n",
    );
    let state = crate::support::fresh_state_dir();
    let state = state.to_str().unwrap();
    let client = connect(dir.path(), &["--state-dir", state]).await;
    assert_eq!(
        call(&client, "note3", json!({"text": "a"})).await,
        ("a".to_owned(), false)
    );
    assert_eq!(
        call(&client, "note3", json!({"text": "b"})).await,
        ("a,b".to_owned(), false)
    );
}

#[tokio::test]
async fn a_0_3_tool_runs_as_a_task() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    manifest(
        dir.path(),
        "p3_probe",
        "[tasks]\nrequired = [\"count\"]\ntimeout-ms = 20000\n",
    );
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = crate::tasks::V2026Client::new(&server.url, None);
    let id = client.start("count", json!({"n": 3})).await;
    let done = client.until(&id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(texts(&done["result"]), ["1", "2", "3", "counted to 3"]);
}

/// A 0.3 tool that reports its own progress and streams items: every report and every item
/// reaches the client, in a strictly increasing progress value; the plugin's reports keep
/// their own values (and total), each item takes the least value above the last one sent.
#[tokio::test]
async fn a_0_3_tools_own_progress_and_its_streamed_items_all_reach_the_client() {
    let dir = plugin_dir(&[("p3_probe", "p3_probe.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"steps","arguments":{},"_meta":{"progressToken":"s"}}}"#).await;
    let mut seen = Vec::new();
    let result = loop {
        let message = raw.recv().await;
        if message["method"] == "notifications/progress" {
            let params = &message["params"];
            seen.push((
                params["progress"].as_f64().unwrap(),
                params["total"].as_f64(),
                params["message"].as_str().unwrap().to_owned(),
            ));
            continue;
        }
        break message;
    };
    assert_eq!(
        texts(&result["result"]),
        ["item 1", "item 2", "item 3", "stepped"]
    );
    let mut messages: Vec<&str> = seen.iter().map(|(_, _, m)| m.as_str()).collect();
    messages.sort_unstable();
    assert_eq!(
        messages,
        ["item 1", "item 2", "item 3", "step 1", "step 2", "step 3"],
        "{seen:?}"
    );
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    for (progress, total, message) in &seen {
        if let Some(step) = message.strip_prefix("step ") {
            assert_eq!(*progress, step.parse::<f64>().unwrap() * 10.0, "{seen:?}");
        }
        assert_eq!(*total, Some(30.0), "{seen:?}");
    }
}
