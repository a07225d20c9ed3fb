//! The sandbox, through a real client: every hostile plugin is contained with a clear message
//! and the host serves on; grants give exactly what they say and nothing more.

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{Client, connect, http_stub, json, plugin_dir, tool_text};

const HOSTILE_LIMITS: &str =
    "[limits]\nfuel = 500_000_000\ntimeout-ms = 2000\nmemory-mib = 32\noutput-kib = 16\n";

fn manifest(dir: &Path, plugin: &str, text: &str) {
    std::fs::write(dir.join(format!("{plugin}.toml")), text).unwrap();
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
        call(client, "ok", json!({})).await,
        ("fine".to_owned(), false),
        "after {tool}"
    );
    text
}

#[tokio::test]
async fn every_limit_fires_with_a_clear_message_and_the_next_call_works() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    manifest(dir.path(), "hostile", HOSTILE_LIMITS);
    let client = connect(dir.path(), &[]).await;

    let spin = contained(&client, "spin", json!({})).await;
    assert_eq!(
        spin,
        "plugin `hostile` ran out of fuel after 500000000 units"
    );

    let recursion = contained(&client, "recurse", json!({})).await;
    assert_eq!(
        recursion,
        "plugin `hostile` crashed: out of bounds memory access (often a stack overflow from too-deep recursion)"
    );
    let recursion = contained(&client, "recurse_native", json!({})).await;
    assert_eq!(
        recursion,
        "plugin `hostile` overflowed its stack (recursion too deep)"
    );

    let memory = contained(&client, "alloc_bomb", json!({"mib": 64})).await;
    assert!(
        memory.starts_with("plugin `hostile` exceeded its 32 MiB memory limit (asked for "),
        "{memory}"
    );

    let panic = contained(&client, "panic", json!({"name": "the plugin gave up"})).await;
    assert_eq!(panic, "plugin `hostile` panicked: the plugin gave up");

    let waiting = contained(&client, "sleep_forever", json!({})).await;
    assert_eq!(waiting, "plugin `hostile` timed out after 2 s");

    // Huge output is truncated, never fatal, and never reaches stdout (the client would
    // have failed to parse it).
    assert_eq!(
        call(&client, "flood", json!({"mib": 4})).await,
        ("flooded".to_owned(), false)
    );
    client
        .stderr
        .wait_for("output over the limit was dropped")
        .await;
}

#[tokio::test]
async fn a_wall_clock_timeout_stops_a_plugin_with_fuel_to_spare() {
    let dir = plugin_dir(&[("hostile", "slow.wasm")]);
    manifest(
        dir.path(),
        "slow",
        "[limits]\nfuel = 1_000_000_000_000_000\ntimeout-ms = 1000\n",
    );
    let client = connect(dir.path(), &[]).await;
    let text = contained(&client, "spin", json!({})).await;
    assert_eq!(text, "plugin `slow` timed out after 1 s");
}

#[tokio::test]
async fn a_spinning_plugin_does_not_stall_other_calls() {
    let dir = plugin_dir(&[("hostile", "slow.wasm"), ("echo_tools", "echo_tools.wasm")]);
    manifest(
        dir.path(),
        "slow",
        // Long enough that 20 echo calls finish first even on a loaded 2-core machine.
        "[limits]\nfuel = 1_000_000_000_000_000\ntimeout-ms = 15000\n",
    );
    let client = std::sync::Arc::new(connect(dir.path(), &[]).await);
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            let client = std::sync::Arc::clone(&client);
            tokio::spawn(async move { call(&client, "spin", json!({})).await })
        })
        .collect();
    for i in 0..20 {
        let text = format!("call {i}");
        assert_eq!(
            call(&client, "echo", json!({"text": text})).await,
            (text, false)
        );
    }
    assert!(
        spinners.iter().all(|s| !s.is_finished()),
        "the spinners should still be running"
    );
    for spinner in spinners {
        let (text, is_error) = spinner.await.unwrap();
        assert!(
            is_error && text == "plugin `slow` timed out after 15 s",
            "{text}"
        );
    }
}

#[tokio::test]
async fn nothing_is_reachable_without_a_grant() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    manifest(dir.path(), "hostile", HOSTILE_LIMITS);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let stub = http_stub(r#"{"secret": true}"#).await;
    let client = connect(dir.path(), &[]).await;

    let (text, _) = call(&client, "read_file", json!({"path": "/etc/passwd"})).await;
    assert!(text.starts_with("cannot read /etc/passwd: "), "{text}");
    let (text, _) = call(
        &client,
        "read_file",
        json!({"path": "../../../../etc/passwd"}),
    )
    .await;
    assert!(
        text.starts_with("cannot read ../../../../etc/passwd: "),
        "{text}"
    );
    let (text, _) = call(&client, "write_file", json!({"path": "/tmp/mcpbox-pwned"})).await;
    assert!(
        text.starts_with("cannot write /tmp/mcpbox-pwned: "),
        "{text}"
    );
    assert!(!Path::new("/tmp/mcpbox-pwned").exists());

    // The host's environment is not inherited.
    let (text, _) = call(&client, "read_env", json!({"name": "PATH"})).await;
    assert_eq!(text, "cannot read $PATH: environment variable not found");

    let (text, _) = call(&client, "tcp_connect", json!({"address": address})).await;
    assert!(
        text.starts_with(&format!("cannot connect to {address}: ")),
        "{text}"
    );

    let url = format!("http://127.0.0.1:{}/", stub.port);
    let (text, _) = call(&client, "http_get", json!({"url": url})).await;
    assert!(
        text.contains(
            "not granted: the request was denied because this host is not granted to the plugin"
        ),
        "{text}"
    );
    assert_eq!(
        stub.hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing reached the server"
    );
    client.stderr.wait_for("denied HTTP request").await;
}

#[tokio::test]
async fn grants_give_exactly_what_they_say() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("data")).unwrap();
    std::fs::write(outside.path().join("data/hello.txt"), "granted").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not granted").unwrap();
    let granted = http_stub(r#"{"ok": 1}"#).await;
    let other = http_stub(r#"{"ok": 2}"#).await;
    manifest(
        dir.path(),
        "hostile",
        &format!(
            "{HOSTILE_LIMITS}\n[[dirs]]\nhost = \"{}\"\nguest = \"/data\"\n\n[env]\nGREETING = \"hi\"\n\n[http]\nallow = [\"127.0.0.1:{}\"]\n",
            outside.path().join("data").display(),
            granted.port
        ),
    );
    let client = connect(dir.path(), &[]).await;

    assert_eq!(
        call(&client, "read_file", json!({"path": "/data/hello.txt"})).await,
        ("granted".to_owned(), false)
    );
    let (text, is_error) = call(&client, "read_file", json!({"path": "/data/../secret.txt"})).await;
    assert!(
        is_error && text.starts_with("cannot read /data/../secret.txt: "),
        "{text}"
    );
    let (text, is_error) = call(&client, "write_file", json!({"path": "/data/new.txt"})).await;
    assert!(
        is_error && text.starts_with("cannot write /data/new.txt: "),
        "read-only: {text}"
    );
    assert!(!outside.path().join("data/new.txt").exists());

    assert_eq!(
        call(&client, "read_env", json!({"name": "GREETING"})).await,
        ("hi".to_owned(), false)
    );
    let (text, _) = call(&client, "read_env", json!({"name": "HOME"})).await;
    assert_eq!(text, "cannot read $HOME: environment variable not found");

    let url = format!("http://127.0.0.1:{}/x", granted.port);
    assert_eq!(
        call(&client, "http_get", json!({"url": url})).await,
        (r#"{"ok": 1}"#.to_owned(), false)
    );
    let url = format!("http://127.0.0.1:{}/x", other.port);
    let (text, is_error) = call(&client, "http_get", json!({"url": url})).await;
    assert!(is_error && text.contains("not granted"), "{text}");
    assert_eq!(other.hits.load(std::sync::atomic::Ordering::SeqCst), 0);

    let log = client.stderr.wait_for("loaded plugin").await;
    let line = log.lines().find(|l| l.contains("loaded plugin")).unwrap();
    assert!(
        line.contains("dir ") && line.contains("as /data (read-only)"),
        "{line}"
    );
    assert!(
        line.contains("env GREETING") && line.contains(&format!("http 127.0.0.1:{}", granted.port)),
        "{line}"
    );
}

#[tokio::test]
async fn read_write_grants_allow_writing() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let data = tempfile::tempdir().unwrap();
    manifest(
        dir.path(),
        "hostile",
        &format!(
            "[[dirs]]\nhost = \"{}\"\nguest = \"/data\"\nmode = \"read-write\"\n",
            data.path().display()
        ),
    );
    let client = connect(dir.path(), &[]).await;
    assert_eq!(
        call(&client, "write_file", json!({"path": "/data/out.txt"})).await,
        ("written".to_owned(), false)
    );
    assert_eq!(
        std::fs::read_to_string(data.path().join("out.txt")).unwrap(),
        "pwned"
    );
}

#[tokio::test]
async fn the_weather_example_fetches_from_its_granted_host() {
    let api = http_stub(r#"{"current":{"temperature_2m":21.5,"wind_speed_10m":12.0}}"#).await;
    let dir = plugin_dir(&[("weather", "weather.wasm")]);
    manifest(
        dir.path(),
        "weather",
        &format!(
            "[env]\nWEATHER_API = \"http://127.0.0.1:{0}\"\n\n[http]\nallow = [\"127.0.0.1:{0}\"]\n",
            api.port
        ),
    );
    let client = connect(dir.path(), &[]).await;
    let arguments = json!({"latitude": 52.52, "longitude": 13.41});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = json(
        &client
            .call_tool(CallToolRequestParams::new("current_weather").with_arguments(arguments))
            .await
            .unwrap(),
    );
    assert_eq!(
        result["structuredContent"],
        json!({"temperature_celsius": 21.5, "wind_speed_kmh": 12.0})
    );
    assert_eq!(api.hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_invalid_manifest_is_reported_and_its_plugin_skipped() {
    let dir = plugin_dir(&[
        ("hostile", "hostile.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    manifest(dir.path(), "hostile", "[limits]\nfule = 5\n");
    let client = connect(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 4, "only echo_tools loaded");
    let log = client.stderr.wait_for("skipped plugin").await;
    let line = log.lines().find(|l| l.contains("skipped plugin")).unwrap();
    assert!(
        line.contains("hostile.toml: line 2") && line.contains("unknown field `fule`"),
        "{line}"
    );
}

#[tokio::test]
async fn results_over_the_size_limit_are_refused() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("hostile", "hostile.wasm"),
    ]);
    manifest(dir.path(), "echo_tools", "[limits]\nresult-kib = 1\n");
    manifest(dir.path(), "hostile", "[limits]\nresult-kib = 1\n");
    let client = connect(dir.path(), &[]).await;
    assert_eq!(
        call(&client, "echo", json!({"text": "small"})).await,
        ("small".to_owned(), false)
    );
    let (text, is_error) = call(&client, "echo", json!({"text": "x".repeat(2000)})).await;
    assert!(is_error, "{text}");
    assert!(
        text.starts_with("plugin `echo_tools` returned a result of ")
            && text.ends_with("over its limit of 1024 bytes"),
        "{text}"
    );

    let read = rmcp::model::ReadResourceRequestParams::new("hostile://big");
    let (code, message) =
        crate::support::error_code(&client.read_resource(read).await.expect_err("too big"));
    assert_eq!(code, -32603);
    assert!(
        message.contains("over its limit of 1024 bytes"),
        "{message}"
    );
}

/// An HTTP failure says which kind it is: not granted, granted but unresolvable, granted but
/// nobody listening.
#[tokio::test]
async fn http_egress_failures_say_which_kind_they_are() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    // A port nobody listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    manifest(
        dir.path(),
        "hostile",
        &format!(
            "{HOSTILE_LIMITS}\n[http]\nallow = [\"no-such-host.invalid\", \"127.0.0.1:{closed}\"]\n"
        ),
    );
    let client = connect(dir.path(), &[]).await;
    let (text, is_error) = call(&client, "http_get", json!({"url": "http://example.com/"})).await;
    assert!(is_error && text.contains("not granted"), "{text}");
    let (text, is_error) = call(
        &client,
        "http_get",
        json!({"url": "http://no-such-host.invalid/"}),
    )
    .await;
    assert!(
        is_error && text.contains("could not resolve the host name"),
        "{text}"
    );
    let url = format!("http://127.0.0.1:{closed}/");
    let (text, is_error) = call(&client, "http_get", json!({"url": url})).await;
    assert!(is_error && text.contains("could not connect"), "{text}");
}

/// HTTPS from a plugin sets up TLS without panicking (the process links two rustls providers,
/// so the host names one): a granted address that hangs up instead of answering TLS is a
/// failed request, and the host goes on serving.
#[tokio::test]
async fn https_to_a_server_without_tls_fails_cleanly() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let plain = http_stub(r#"{"ok": 1}"#).await;
    // Accepts a connection and closes it at once.
    let rude = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rude_port = rude.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = rude.accept().await {
            drop(socket);
        }
    });
    manifest(
        dir.path(),
        "hostile",
        &format!(
            "{HOSTILE_LIMITS}\n[http]\nallow = [\"127.0.0.1:{}\", \"127.0.0.1:{rude_port}\"]\n",
            plain.port
        ),
    );
    let client = connect(dir.path(), &[]).await;
    let url = format!("https://127.0.0.1:{rude_port}/x");
    let (text, is_error) = call(&client, "http_get", json!({"url": url})).await;
    assert!(is_error && text.starts_with("GET https://"), "{text}");
    let url = format!("http://127.0.0.1:{}/x", plain.port);
    assert_eq!(
        call(&client, "http_get", json!({"url": url})).await,
        (r#"{"ok": 1}"#.to_owned(), false)
    );
    assert!(
        !client.stderr.text().contains("panicked"),
        "{}",
        client.stderr.text()
    );
}
