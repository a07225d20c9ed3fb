//! Hardening: names stay with the plugin that serves them under hot reload, the
//! watcher reacts to changes only, and what hostile plugins still got through around the
//! sandbox is contained — each case with the exact message a client sees, and a normal call
//! served afterwards.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::install;
use crate::support::{
    Raw, RecordingClient, call, connect_logged, example_plugins, plugin_dir, test_plugins,
    tool_text,
};

/// Replace `file_name` in `dir` atomically (write a hidden file, rename it into place).
fn wasm(dir: &Path, plugin: &str) -> Vec<u8> {
    std::fs::read(dir.join(format!("{plugin}.wasm"))).unwrap()
}

/// A raw `tools/call` line.
fn tool_call(id: u64, name: &str, arguments: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
}

/// Call a tool over a raw session; its text and whether it is an error.
async fn raw_call(raw: &mut Raw, id: u64, name: &str, arguments: Value) -> (String, bool) {
    raw.send(tool_call(id, name, &arguments).as_bytes()).await;
    loop {
        let reply = raw.recv().await;
        if reply["id"] == id {
            let result = &reply["result"];
            return (
                result["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                result["isError"] == true,
            );
        }
    }
}

/// The hostile fixture beside `echo_tools`, with `limits` (manifest text) and a read-only
/// directory granted at `/data` holding `f.txt`.
fn hostile_with_data(limits: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = plugin_dir(&[
        ("hostile", "hostile.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("f.txt"), "x").unwrap();
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!(
            "{limits}[[dirs]]\nhost = {:?}\nguest = \"/data\"\nmode = \"read-only\"\n",
            data.path()
        ),
    )
    .unwrap();
    (dir, data)
}

const HOSTILE_LIMITS: &str =
    "[limits]\nfuel = 500_000_000\ntimeout-ms = 5000\nmemory-mib = 96\noutput-kib = 16\n";

#[tokio::test]
async fn a_newcomer_never_takes_a_served_name_whatever_its_file_name() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    service
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Warning,
        ))
        .await
        .unwrap();
    // `a_impostor` sorts first and offers the same tools.
    install(
        dir.path(),
        "a_impostor.wasm",
        &wasm(example_plugins(), "echo_tools"),
    );
    // One warning per refused tool, each naming the tool, the newcomer and the holder.
    let warnings = client.wait_for("log", 4).await;
    let mut texts: Vec<&str> = warnings
        .iter()
        .map(|w| w["data"].as_str().unwrap_or_default())
        .collect();
    texts.sort_unstable();
    let expected: Vec<String> = ["divide", "echo", "show_content", "sum"]
        .iter()
        .map(|tool| {
            format!(
                "refused tool `{tool}` of plugin `a_impostor`: the name is served by plugin `echo_tools`"
            )
        })
        .collect();
    assert_eq!(texts, expected, "{warnings:?}");
    log.wait_for("added plugin").await;
    let added = log
        .text()
        .lines()
        .find(|l| l.contains("added plugin"))
        .unwrap()
        .to_owned();
    assert!(added.contains("serves=0 refused=4"), "{added}");
    let tools = service.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 4, "no duplicates: {tools:?}");
    let result = service
        .call_tool(call("echo", json!({"text": "mine"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("mine".to_owned(), false));
    // Nothing the client can see changed, so nothing was announced.
    assert!(client.events("tools/list_changed").is_empty());
    // Each refusal is reported once, not on every rebuild.
    install(
        dir.path(),
        "quotes.wasm",
        &wasm(example_plugins(), "quotes"),
    );
    client.wait_for("resources/list_changed", 1).await;
    assert_eq!(log.text().matches("refused tool `echo`").count(), 1);
    // When the owner goes, the name is free for the next plugin that offers it.
    std::fs::remove_file(dir.path().join("echo_tools.wasm")).unwrap();
    log.wait_for("removed plugin").await;
    let result = service
        .call_tool(call("echo", json!({"text": "still served"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("still served".to_owned(), false));
}

#[tokio::test]
async fn a_broken_file_is_reported_once_and_loads_when_fixed() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    install(dir.path(), "bad.wasm", b"random bytes, not a component");
    client.wait_for("log", 1).await;
    log.wait_for("could not load plugin").await;
    // The watcher's own reads of the file are not changes: watch a while.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        log.text().matches("could not load plugin").count(),
        1,
        "{}",
        log.text()
    );
    assert_eq!(client.events("log").len(), 1);
    // Fixed in place: it loads.
    install(dir.path(), "bad.wasm", &wasm(example_plugins(), "quotes"));
    client.wait_for("resources/list_changed", 1).await;
    assert_eq!(service.list_all_resources().await.unwrap().len(), 2);
}

#[tokio::test]
async fn an_idle_watched_directory_is_idle() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &["--log", "info,mcpbox::watch=trace"]).await;
    raw.stderr.wait_for("watching the plugin directory").await;
    // Reading the files (as a backup tool would) is not a change.
    for _ in 0..3 {
        let _ = std::fs::read(dir.path().join("echo_tools.wasm")).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    raw.assert_alive(1).await;
    let log = raw.stderr.text();
    assert!(
        !log.contains("not reloaded") && !log.contains("unchanged since last handled"),
        "{log}"
    );
}

#[tokio::test]
async fn hostile_schemas_handles_and_floods_are_contained() {
    let (dir, _data) = hostile_with_data(HOSTILE_LIMITS);
    let mut raw = Raw::initialized(dir.path(), &[]).await;

    // A schema bomb is refused at load, naming why; the rest of the plugin serves.
    let log = raw.stderr.wait_for("refused tool `schema_bomb`").await;
    let line = log.lines().find(|l| l.contains("schema_bomb")).unwrap();
    assert!(line.contains("output schema is too complex"), "{line}");
    assert_eq!(
        raw_call(&mut raw, 2, "ok", json!({})).await,
        ("fine".to_owned(), false)
    );

    // Host-side handles: files and HTTP header sets, bounded per call.
    let (text, is_error) = raw_call(
        &mut raw,
        3,
        "open_files",
        json!({"path": "/data/f.txt", "count": 20000}),
    )
    .await;
    assert!(is_error, "{text}");
    assert_eq!(
        text,
        "plugin `hostile` held more than 256 handles (open files, streams, HTTP fields) at once, the limit of a call"
    );
    let (text, is_error) = raw_call(&mut raw, 4, "http_fields", json!({"count": 10000})).await;
    assert!(is_error, "{text}");
    assert!(text.contains("more than 256 handles"), "{text}");
    // Other plugins never noticed.
    let (text, _) = raw_call(&mut raw, 5, "echo", json!({"text": "unharmed"})).await;
    assert_eq!(text, "unharmed");

    // Structured content: depth is bounded; a 2025-11-25 client only gets objects.
    let (text, is_error) = raw_call(&mut raw, 6, "deep_structure", json!({"count": 10000})).await;
    assert!(is_error);
    assert_eq!(
        text,
        "plugin `hostile` returned structured content nested 10000 levels deep, over the limit of 64"
    );
    let (text, is_error) = raw_call(&mut raw, 7, "array_structure", json!({})).await;
    assert!(is_error);
    assert_eq!(
        text,
        "plugin `hostile` returned structured content that is not a JSON object, which MCP 2025-11-25 requires"
    );
    let v2026 = raw
        .request(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"array_structure","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#)
        .await;
    assert_eq!(v2026["result"]["structuredContent"], json!([]), "{v2026}");

    // Errors of prompts and resources are cut like results are.
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"huge_error"}}"#,
        )
        .await;
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.len() < 20_000 && message.ends_with("more bytes cut by mcpbox)"),
        "{}",
        message.get(..200).unwrap_or(message)
    );
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"hostile://fail/16"}}"#)
        .await;
    assert!(
        reply.to_string().len() < 40_000,
        "{}",
        reply.to_string().len()
    );

    // A log line cannot pass for the host's own.
    assert_eq!(
        raw_call(&mut raw, 11, "log_inject", json!({})).await.0,
        "logged"
    );
    raw.assert_alive(12).await;
    let log = raw.stderr.text();
    assert!(
        !log.lines().any(|l| l
            .trim_start()
            .starts_with("INFO mcpbox::catalog::load: loaded plugin FORGED")),
        "{log}"
    );
    assert!(
        log.contains(r"innocent\nINFO mcpbox::catalog::load: loaded plugin FORGED\r\u{1b}[2K"),
        "{log}"
    );

    // One call's logging is bounded in the host's log.
    let before = raw.stderr.text().len();
    assert_eq!(
        raw_call(
            &mut raw,
            13,
            "log_flood",
            json!({"path": "2", "count": 100})
        )
        .await
        .0,
        "flooded"
    );
    raw.assert_alive(14).await;
    let grown = raw.stderr.text().len() - before;
    assert!(grown < 2 << 20, "the host log grew by {grown} bytes");
    assert!(raw.stderr.text().contains("logged over its limit"));

    // Nothing but protocol messages reached stdout, and the host exits cleanly.
    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty() && status.success());
}

#[tokio::test]
async fn floods_of_notifications_are_rate_limited_and_coalesced() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    service
        .peer()
        .subscribe(rmcp::model::SubscribeRequestParams::new("hostile://big"))
        .await
        .unwrap();
    service
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Info,
        ))
        .await
        .unwrap();

    let result = service
        .call_tool(call("update_flood", json!({"count": 100000})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "flooded");
    let relisting = std::time::Instant::now();
    let result = service
        .call_tool(call("relist_flood", json!({"count": 10000})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "flooded");
    // `changing` describes itself anew on every listing: each re-read is a real change, so at
    // least one is announced, and at most one per 50 ms while the flood lasts.
    client.wait_for("tools/list_changed", 1).await;
    let result = service
        .call_tool(call("log_flood", json!({"path": "2", "count": 100})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "flooded");
    let result = service.call_tool(call("ok", json!({}))).await.unwrap();
    assert_eq!(tool_text(&result), ("fine".to_owned(), false));

    let updates = client.events("resources/updated").len();
    assert!((1..=120).contains(&updates), "{updates} resource updates");
    let changes = client.events("tools/list_changed").len();
    let most = relisting.elapsed().as_secs_f64() / 0.05 + 2.0;
    assert!(
        changes >= 1 && changes as f64 <= most,
        "{changes} list changes for 10,000 requests (at most {most:.0})"
    );
    let logs = client.events("log");
    let bytes: usize = logs.iter().map(|l| l.to_string().len()).sum();
    assert!(logs.len() <= 110, "{} log messages", logs.len());
    assert!(
        bytes < 4 << 20,
        "{bytes} bytes of log messages reached the client"
    );
    assert!(log.text().len() < 8 << 20);
}

#[tokio::test]
async fn progress_floods_are_rate_limited() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let started = std::time::Instant::now();
    raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress_flood","arguments":{"count":100000},"_meta":{"progressToken":"p"}}}"#)
        .await;
    let mut progress = 0;
    loop {
        let message = raw.recv().await;
        if message["id"] == 1 {
            assert_eq!(message["result"]["content"][0]["text"], "flooded");
            break;
        }
        assert_eq!(message["method"], "notifications/progress");
        progress += 1;
    }
    // The burst of 50, then at most 20 a second over the call's time (and the latest value
    // once the flood ends), however long the call took.
    let most = 50.0 + 20.0 * started.elapsed().as_secs_f64() + 2.0;
    assert!(
        progress >= 50 && f64::from(progress) <= most,
        "{progress} progress notifications (at most {most:.0} in {:?})",
        started.elapsed()
    );
}

/// glibc's heaps besides the main one in process `pid`: each is a read-write mapping at a
/// 64 MiB boundary followed by the inaccessible rest of those 64 MiB (how glibc reserves a
/// heap for threads that met a locked one).
fn glibc_thread_heaps(pid: u32) -> usize {
    const HEAP: u64 = 64 << 20;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let regions: Vec<(u64, u64, &str, usize)> = maps
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (start, end) = fields[0].split_once('-').unwrap();
            (
                u64::from_str_radix(start, 16).unwrap(),
                u64::from_str_radix(end, 16).unwrap(),
                fields[1],
                fields.len(),
            )
        })
        .collect();
    regions
        .windows(2)
        .filter(|pair| {
            let ((start, end, perms, fields), (next, next_end, next_perms, next_fields)) =
                (pair[0], pair[1]);
            start % HEAP == 0
                && end == next
                && next_end - start == HEAP
                && perms == "rw-p"
                && next_perms == "---p"
                && fields == 5
                && next_fields == 5
        })
        .count()
}

/// Serve `dir` over stdio with `arena_max` as `MALLOC_ARENA_MAX` (or none set), answer 256
/// echo calls sent at once, and count glibc's thread heaps.
async fn thread_heaps_after_calls(dir: &Path, arena_max: Option<&str>) -> usize {
    let mut command = crate::support::mcpbox(dir, &[]);
    command
        .env_remove("MALLOC_ARENA_MAX")
        .env_remove("GLIBC_TUNABLES");
    if let Some(max) = arena_max {
        command.env("MALLOC_ARENA_MAX", max);
    }
    let mut raw = Raw::initialized_command(command).await;
    for id in 0..256 {
        raw.send(tool_call(id, "echo", &json!({"text": "hi"})).as_bytes())
            .await;
    }
    for _ in 0..256 {
        let reply = raw.recv().await;
        assert!(reply["result"]["content"].is_array(), "{reply}");
    }
    glibc_thread_heaps(raw.child.id().unwrap())
}

#[tokio::test]
async fn over_stdio_every_thread_allocates_from_one_heap() {
    // One client: one heap for all threads, which holds 1.2–1.7 MiB less at the peak under
    // load than a heap per thread (BENCHMARKS.md, "The peak under load").
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    assert_eq!(thread_heaps_after_calls(dir.path(), None).await, 0);
    // The operator's choice wins; and the count sees heaps where glibc makes them (on one CPU
    // threads rarely meet a locked heap, so only two or more are checked).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chosen = thread_heaps_after_calls(dir.path(), Some("8")).await;
    if cpus > 1 {
        assert!(chosen >= 1, "no thread heap with MALLOC_ARENA_MAX=8");
    }
}

#[tokio::test]
async fn memory_bombs_leave_no_memory_behind() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        "[limits]\nmemory-mib = 128\n",
    )
    .unwrap();
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    assert_eq!(raw_call(&mut raw, 1, "ok", json!({})).await.0, "fine");
    let rss = |raw: &Raw| -> u64 {
        let pid = raw.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    // One bomb first, so that what a first bomb makes once (the limiter's report, lazily
    // made host state) is in `before`: a clean clone's cold run grew 18 MiB without it.
    let (_, warm) = raw_call(&mut raw, 9, "alloc_bomb", json!({"mib": 200})).await;
    assert!(warm, "the warm-up bomb was refused");
    let before = rss(&raw);
    for i in 0..8 {
        let (text, is_error) = raw_call(&mut raw, 10 + i, "alloc_bomb", json!({"mib": 200})).await;
        assert!(
            is_error && text.contains("exceeded its 128 MiB memory limit"),
            "{text}"
        );
    }
    // A slot keeps at most 1 MiB resident after its call (SECURITY.md): eight bombs of 128
    // MiB, each perhaps in a slot of its own, may leave the host 8 MiB larger, plus a few for
    // the rest of the process (0.5 to 5 MiB measured, 2026-11-29), never 128. With each slot
    // keeping 32 MiB, this failed at 26 MiB.
    let after = rss(&raw);
    assert!(
        after < before + (12 << 20),
        "eight memory bombs left the host {} KiB larger",
        after.saturating_sub(before) >> 10
    );
}

#[tokio::test]
async fn a_slow_listing_does_not_hold_up_the_others() {
    let dir = plugin_dir(&[
        ("slow_list", "slow_list.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    let tools = service.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert!(
        names.contains(&"echo") && !names.contains(&"slow_tool"),
        "{names:?}"
    );
    client.wait_for("tools/list_changed", 1).await;
    let tools = service.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "slow_tool"));
    assert!(log.text().contains("still listing"));
    assert!(log.text().contains("loaded (late) plugin"));
}

#[tokio::test]
async fn an_over_long_request_line_is_answered_with_its_id() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &["--max-message-bytes", "1000"]).await;
    let text = "x".repeat(5000);
    let reply = raw
        .request(&tool_call(42, "echo", &json!({"text": text})))
        .await;
    assert_eq!(reply["id"], 42, "{reply}");
    assert_eq!(reply["error"]["code"], -32600);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-message-bytes")
    );
    raw.assert_alive(43).await;
}

#[tokio::test]
async fn wasmtime_caps_are_named_in_one_line() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    // One log message of 70 MiB: more data than a host call may take.
    let (text, is_error) =
        raw_call(&mut raw, 1, "log_flood", json!({"path": "70", "count": 1})).await;
    assert!(is_error, "{text}");
    assert_eq!(
        text,
        "plugin `hostile` passed more data to a host call than allowed (64 MiB)"
    );
    assert_eq!(raw_call(&mut raw, 2, "ok", json!({})).await.0, "fine");
}

#[tokio::test]
async fn descriptor_hogs_do_not_starve_other_plugins() {
    let (dir, _data) = hostile_with_data("");
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    // Thirteen hogs and thirteen ordinary calls, all in flight at once.
    for i in 0..13u64 {
        raw.send(
            tool_call(
                100 + i,
                "open_files",
                &json!({"path": "/data/f.txt", "count": 20000}),
            )
            .as_bytes(),
        )
        .await;
        raw.send(tool_call(200 + i, "echo", &json!({"text": format!("call {i}")})).as_bytes())
            .await;
    }
    let mut answered = 0;
    while answered < 26 {
        let reply = raw.recv().await;
        let id = reply["id"].as_u64().unwrap();
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        if id >= 200 {
            assert_eq!(text, format!("call {}", id - 200), "{reply}");
            assert_ne!(reply["result"]["isError"], true);
        } else {
            assert!(text.contains("more than 256 handles"), "{text}");
        }
        answered += 1;
    }
    raw.assert_alive(1).await;
}

#[tokio::test]
async fn a_slow_reload_does_not_hold_up_another() {
    let dir = tempfile::tempdir().unwrap();
    let gate = crate::support::slow_list_gate(dir.path());
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    log.wait_for("watching the plugin directory").await;
    install(
        dir.path(),
        "slow_list.wasm",
        &wasm(&test_plugins(), "slow_list"),
    );
    crate::support::slow_list_listing(gate.path()).await;
    install(
        dir.path(),
        "echo_tools.wasm",
        &wasm(example_plugins(), "echo_tools"),
    );
    // The echo tools arrive while the slow plugin is still listing.
    client.wait_for("tools/list_changed", 1).await;
    let names: Vec<String> = service
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"slow_tool".to_owned()), "{names:?}");
    std::fs::write(gate.path().join("open"), b"").unwrap();
    client.wait_for("tools/list_changed", 2).await;
    let tools = service.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "slow_tool"));
}

#[tokio::test]
async fn a_plugin_added_while_the_directory_loads_is_served() {
    // The slow plugin holds the startup load for two seconds (the listing wait); a plugin
    // installed meanwhile, after the directory was read, arrives through the watcher, which
    // is made beside the load (made after it, it missed such a change for good).
    // (It says when the load lists it: the directory was read by then.)
    let dir = plugin_dir(&[("slow_list", "slow_list.wasm")]);
    let gate = crate::support::slow_list_gate(dir.path());
    let client = RecordingClient::new(&json!({}));
    let path = dir.path().to_owned();
    let connecting = tokio::spawn(async move { connect_logged(&path, &[], client).await });
    crate::support::slow_list_listing(gate.path()).await;
    install(
        dir.path(),
        "echo_tools.wasm",
        &wasm(example_plugins(), "echo_tools"),
    );
    let (service, log) = connecting.await.unwrap();
    until_served(
        &service,
        "echo",
        &log,
        "the plugin added during the startup load never arrived",
    )
    .await;
}

#[tokio::test]
async fn readiness_waits_for_late_plugins_and_health_does_not() {
    let dir = plugin_dir(&[
        ("slow_list", "slow_list.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let gate = crate::support::slow_list_gate(dir.path());
    let server = crate::support::HttpServer::start(dir.path(), &["--auth-token", "secret"]).await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    let not_ready = get("/readyz").await.unwrap();
    assert_eq!(not_ready.status(), 503);
    assert!(
        not_ready
            .text()
            .await
            .unwrap()
            .contains("1 plugins still loading")
    );
    std::fs::write(gate.path().join("open"), b"").unwrap();
    server.stderr.wait_for("loaded (late) plugin").await;
    // The plugin is logged as it is published; its load drops its readiness guard right
    // after, a moment later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut status = get("/readyz").await.unwrap().status();
    while status != 200 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = get("/readyz").await.unwrap().status();
    }
    assert_eq!(status, 200);
}

/// Wait (30 s at most) until the server lists the tool `name`; `never` and the server's log
/// otherwise.
async fn until_served(
    service: &rmcp::service::RunningService<rmcp::RoleClient, RecordingClient>,
    name: &str,
    log: &crate::support::Stderr,
    never: &str,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tools = service.list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name == name) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{never}:\n{}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Make a FIFO at `path`.
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

#[tokio::test]
async fn fifos_under_plugin_names_are_refused_and_loading_goes_on() {
    // Opening a FIFO for reading blocks until a writer comes: a FIFO manifest once held the
    // startup load, and with it the process (SIGTERM included), for good.
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm"), ("quotes", "quotes.wasm")]);
    mkfifo(&dir.path().join("echo_tools.toml"));
    let (service, log) = connect_logged(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let tools = service.list_all_tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name != "echo"), "{tools:?}");
    assert!(
        !service.list_all_resources().await.unwrap().is_empty(),
        "the other plugin is served"
    );
    let line = log.wait_for("cannot read its manifest").await;
    assert!(
        line.contains("echo_tools.toml: not a regular file"),
        "the manifest and the reason are named:\n{line}"
    );

    // While serving: more FIFOs as components than the loader has threads, then a plugin.
    for name in ["a", "b", "c"] {
        mkfifo(&dir.path().join(format!("{name}.wasm")));
    }
    install(
        dir.path(),
        "echo2.wasm",
        &wasm(example_plugins(), "echo_tools"),
    );
    until_served(
        &service,
        "echo",
        &log,
        "a plugin added after the FIFOs never arrived",
    )
    .await;
    let result = service
        .call_tool(call("echo", json!({"text": "through"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "through");
    log.wait_for("a.wasm").await;
    assert!(
        log.text().matches("not a regular file").count() >= 2,
        "{}",
        log.text()
    );
}

/// Append a `mcpbox-skills` custom section holding `payload` to a component.
fn with_skills_section(wasm: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    crate::support::with_custom_section(wasm, "mcpbox-skills", payload)
}

/// A plugin's skill path and front matter reach the log escaped: a newline (or NUL, or
/// carriage return) in them cannot start a line that reads as mcpbox's own.
#[tokio::test]
async fn values_a_plugin_supplies_cannot_forge_log_lines() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let path_payload = json!({"version": 1, "files": [
        {"path": "x\nFORGED-PATH mcpbox: all plugins verified\u{0}\r", "text": "t"},
    ]});
    let name_payload = json!({"version": 1, "files": [
        {"path": "named/SKILL.md",
         "text": "---\nname: \"named\\nFORGED-NAME mcpbox: ok\"\ndescription: d\n---\n"},
    ]});
    let mut bytes = wasm(dir.path(), "echo_tools");
    for payload in [&path_payload, &name_payload] {
        bytes = with_skills_section(bytes, payload.to_string().as_bytes());
    }
    install(dir.path(), "echo_tools.wasm", &bytes);

    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.stderr.wait_for("FORGED-NAME").await;
    let log = raw.stderr.wait_for("FORGED-PATH").await;
    for line in log.lines() {
        assert!(
            !line.starts_with("FORGED") && !line.contains('\r') && !line.contains('\0'),
            "a plugin's text began or hid a line of the log: {line:?}\n{log}"
        );
    }
    assert!(log.contains(r"x\nFORGED-PATH"), "{log}");
    assert!(log.contains(r"\u0000\r"), "{log}");
    assert!(log.contains(r"named\nFORGED-NAME"), "{log}");
    raw.assert_alive(1).await;
}
