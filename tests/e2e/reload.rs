//! Hot reload through a real client: plugins added, replaced and removed while it is
//! connected; exactly the notifications it should get; old versions serving when a
//! replacement is broken or half written; no call failing across reloads; plugin-initiated
//! list changes and resource updates.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmcp::model::{CallToolRequestParams, SubscribeRequestParams, UnsubscribeRequestParams};
use serde_json::{Value, json};

use crate::support::{
    RecordingClient, connect_logged, connect_with, eventually, example_plugins, install,
    plugin_dir, test_plugins, tool_text,
};

fn wasm(plugin: &str) -> Vec<u8> {
    let examples = example_plugins().join(format!("{plugin}.wasm"));
    let path = if examples.exists() {
        examples
    } else {
        test_plugins().join(format!("{plugin}.wasm"))
    };
    std::fs::read(path).unwrap()
}

/// The same component with a custom section appended: new bytes, identical behaviour (a
/// rebuild that changed nothing a client can see).
fn rebuilt(bytes: &[u8], tag: u8) -> Vec<u8> {
    crate::support::with_custom_section(bytes.to_vec(), "mcpbox-test", &[tag; 8])
}

/// Put a plugin in place the way operators should: write a temporary file, then rename it.
fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn add_replace_and_remove_send_exactly_the_right_notifications() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(
        dir.path(),
        &["--log", "info,mcpbox::watch=debug"],
        client.clone(),
    )
    .await;
    assert_eq!(service.list_all_resources().await.unwrap().len(), 0);

    // Added: resources appear; only the resources list is announced.
    install(dir.path(), "quotes.wasm", &wasm("quotes"));
    client.wait_for("resources/list_changed", 1).await;
    assert_eq!(service.list_all_resources().await.unwrap().len(), 2);

    // Rewritten with the same bytes, then rebuilt with the same tools: nothing to announce.
    // Then a prompt plugin arrives, whose announcement shows the earlier changes were handled.
    install(dir.path(), "echo_tools.wasm", &wasm("echo_tools"));
    log.wait_for("unchanged; not reloaded").await;
    install(
        dir.path(),
        "echo_tools.wasm",
        &rebuilt(&wasm("echo_tools"), 1),
    );
    log.wait_for("reloaded plugin").await;
    // (code_review ships a skill, whose files are resources: that list is announced too.)
    install(dir.path(), "code_review.wasm", &wasm("code_review"));
    client.wait_for("prompts/list_changed", 1).await;
    client.wait_for("resources/list_changed", 2).await;
    assert!(
        client.events("tools/list_changed").is_empty(),
        "same tools, no announcement"
    );

    // Replaced by a plugin with other tools (and a prompt): tools and prompts announced.
    install(dir.path(), "echo_tools.wasm", &wasm("host_probe"));
    client.wait_for("tools/list_changed", 1).await;
    client.wait_for("prompts/list_changed", 2).await;
    let tools = names(&service.list_all_tools().await.unwrap());
    assert!(
        tools.contains(&"probe_host".to_owned()) && !tools.contains(&"echo".to_owned()),
        "{tools:?}"
    );

    // Removed: its resources disappear (the skill's files stay).
    std::fs::remove_file(dir.path().join("quotes.wasm")).unwrap();
    client.wait_for("resources/list_changed", 3).await;
    let left = service.list_all_resources().await.unwrap();
    assert!(
        left.iter()
            .all(|r| r.uri.starts_with("skill://code_review/"))
            && left.len() == 2,
        "{left:?}"
    );
    let templates = service.list_all_resource_templates().await.unwrap();
    assert!(templates.is_empty());

    // Exactly these, and nothing else.
    assert_eq!(client.events("tools/list_changed").len(), 1);
    assert_eq!(client.events("prompts/list_changed").len(), 2);
    assert_eq!(client.events("resources/list_changed").len(), 3);
}

#[tokio::test]
async fn a_broken_replacement_keeps_the_old_version_serving_and_clients_hear_of_it() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client.clone()).await;
    install(
        dir.path(),
        "echo_tools.wasm",
        b"\0asm\x0d\0\x01\0 definitely not a component",
    );
    let messages = client.wait_for("log", 1).await;
    assert_eq!(messages[0]["level"], "error");
    assert_eq!(messages[0]["logger"], "mcpbox");
    let text = messages[0]["data"].as_str().unwrap();
    assert!(
        text.contains("echo_tools.wasm") && text.contains("the previous version keeps serving"),
        "{text}"
    );
    log.wait_for("could not load plugin").await;

    let arguments = json!({"text": "still here"});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = service
        .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("still here".to_owned(), false));
    assert!(client.events("tools/list_changed").is_empty());
}

#[tokio::test]
async fn a_partial_write_is_never_published() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let service = connect_with(dir.path(), &[], client.clone()).await;
    let quotes = wasm("quotes");
    // A writer that stops half way (no rename), long enough for the host to look.
    std::fs::write(dir.path().join("quotes.wasm"), &quotes[..quotes.len() / 2]).unwrap();
    let messages = client.wait_for("log", 1).await;
    let text = messages[0]["data"].as_str().unwrap();
    assert!(
        text.contains("quotes.wasm") && text.contains("it is not loaded"),
        "{text}"
    );
    assert_eq!(service.list_all_resources().await.unwrap().len(), 0);
    assert!(client.events("resources/list_changed").is_empty());

    // The writer finishes: now it is published.
    std::fs::write(dir.path().join("quotes.wasm"), &quotes).unwrap();
    client.wait_for("resources/list_changed", 1).await;
    assert_eq!(service.list_all_resources().await.unwrap().len(), 2);
}

#[tokio::test]
async fn no_call_fails_while_the_plugin_is_replaced_ten_times() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &[], client).await;
    let service = Arc::new(service);
    let done = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (service, done, calls) =
                (Arc::clone(&service), Arc::clone(&done), Arc::clone(&calls));
            tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut mine = 0;
                while !done.load(Ordering::SeqCst) || mine < 250 {
                    let text = format!("worker {worker} call {mine}");
                    let arguments = json!({ "text": text });
                    let Value::Object(arguments) = arguments else {
                        unreachable!()
                    };
                    match service
                        .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
                        .await
                    {
                        Ok(result) if tool_text(&result) == (text.clone(), false) => {}
                        other => failures.push(format!("{other:?}")),
                    }
                    mine += 1;
                    calls.fetch_add(1, Ordering::SeqCst);
                }
                failures
            })
        })
        .collect();
    let original = wasm("echo_tools");
    for round in 1..=10 {
        // Every replacement lands among running calls: 20 more answered since the last one.
        let before = calls.load(Ordering::SeqCst);
        eventually(
            || async { calls.load(Ordering::SeqCst) >= before + 20 },
            "calls answered between two replacements",
        )
        .await;
        install(dir.path(), "echo_tools.wasm", &rebuilt(&original, round));
        log.wait_for_count("reloaded plugin", usize::from(round))
            .await;
    }
    done.store(true, Ordering::SeqCst);
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.unwrap());
    }
    assert!(
        failures.is_empty(),
        "{} failed calls: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}

#[tokio::test]
async fn plugins_can_announce_their_own_list_changes_and_resource_updates() {
    let dir = plugin_dir(&[("host_probe", "host_probe.wasm")]);
    let state = tempfile::tempdir().unwrap();
    let manifest = format!(
        "[[dirs]]\nhost = \"{}\"\nguest = \"/state\"\nmode = \"read-write\"\n",
        state.path().display()
    );
    std::fs::write(dir.path().join("host_probe.toml"), manifest).unwrap();
    let client = RecordingClient::new(&json!({}));
    let service = connect_with(dir.path(), &[], client.clone()).await;
    assert!(!names(&service.list_all_tools().await.unwrap()).contains(&"extra".to_owned()));

    let result = service
        .call_tool(CallToolRequestParams::new("create_extra"))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("created".to_owned(), false));
    client.wait_for("tools/list_changed", 1).await;
    assert!(names(&service.list_all_tools().await.unwrap()).contains(&"extra".to_owned()));

    let touch = |uri: &str| {
        let Value::Object(arguments) = json!({ "uri": uri }) else {
            unreachable!()
        };
        CallToolRequestParams::new("touch").with_arguments(arguments)
    };
    service
        .subscribe(SubscribeRequestParams::new("probe://a"))
        .await
        .unwrap();
    service.call_tool(touch("probe://a")).await.unwrap();
    service
        .call_tool(touch("probe://not-subscribed"))
        .await
        .unwrap();
    service
        .unsubscribe(UnsubscribeRequestParams::new("probe://a"))
        .await
        .unwrap();
    service.call_tool(touch("probe://a")).await.unwrap();
    service
        .subscribe(SubscribeRequestParams::new("probe://b"))
        .await
        .unwrap();
    service.call_tool(touch("probe://b")).await.unwrap();
    let updates = client.wait_for("resources/updated", 2).await;
    let mut uris: Vec<&str> = updates.iter().map(|u| u["uri"].as_str().unwrap()).collect();
    uris.sort_unstable();
    assert_eq!(
        uris,
        ["probe://a", "probe://b"],
        "only subscribed URIs, only while subscribed"
    );
}

/// Reload latency: a plugin renamed into place → `notifications/tools/list_changed` read by
/// the client. A measurement, not a test (no timing is asserted): run it with
/// `cargo test --release -p mcpbox --test e2e measure_reload_latency -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a benchmark: run on demand, see BENCHMARKS.md"]
#[expect(
    clippy::print_stdout,
    reason = "the measurement is this benchmark's output"
)]
async fn measure_reload_latency() {
    use crate::support::Raw;
    const ROUNDS: usize = 20;
    let dir = plugin_dir(&[("quotes", "quotes.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let (tools, probe) = (wasm("echo_tools"), wasm("host_probe"));
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // Alternate two different tool sets, so every round changes the tool list.
        let bytes = if round % 2 == 0 { &tools } else { &probe };
        let start = std::time::Instant::now();
        install(dir.path(), "changing.wasm", bytes);
        loop {
            let message = raw.recv().await;
            if message["method"] == "notifications/tools/list_changed" {
                break;
            }
        }
        samples.push(start.elapsed());
    }
    samples.sort();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    println!(
        "reload latency over {ROUNDS} renames (200 ms debounce included): min {:.0} ms, median {:.0} ms, p90 {:.0} ms, max {:.0} ms",
        ms(samples[0]),
        ms(samples[ROUNDS / 2]),
        ms(samples[ROUNDS * 9 / 10]),
        ms(samples[ROUNDS - 1])
    );
}
