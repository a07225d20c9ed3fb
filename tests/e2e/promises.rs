//! Promises of SECURITY.md and OPERATING.md that no other module checked, each through
//! the real binary: each test's comment quotes the document and section that make it. The ones
//! that need Redis are in `services::promises_redis`; what is checked below the binary (no
//! second DNS lookup, the rules for keeping an instance) is in the modules that own it.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{
    Client, HttpServer, Raw, STEP, SseReader, connect, connect_command, mcpbox, plugin_dir,
    tool_text,
};

const HOSTILE_LIMITS: &str =
    "[limits]\nfuel = 500_000_000\ntimeout-ms = 5000\nmemory-mib = 32\noutput-kib = 16\n";

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

/// The value of the metric series `series` (name and labels, as exposed) at `url`.
async fn metric(url: &str, series: &str) -> Option<u64> {
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// SECURITY.md, "read or write files": granted directories are capabilities, with no symlink
/// escape. A granted directory holding links out (to a file beside it, to an absolute path, to
/// its parent, to `/etc`) gives the plugin nothing outside, to read or to write, while a link
/// that stays inside still works. The plugin sees the directory at its real path (no `guest`),
/// so a host that granted by path prefix rather than by capability would follow the links.
#[tokio::test]
async fn a_symlink_in_a_granted_directory_leads_nowhere_outside() {
    use std::os::unix::fs::symlink;
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    let data = outside.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hello.txt"), "granted").unwrap();
    std::fs::write(outside.join("secret.txt"), "not granted").unwrap();
    symlink("hello.txt", data.join("inside")).unwrap();
    symlink("../secret.txt", data.join("relative")).unwrap();
    symlink(outside.join("secret.txt"), data.join("absolute")).unwrap();
    symlink("..", data.join("up")).unwrap();
    symlink("/etc", data.join("etc")).unwrap();
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!(
            "{HOSTILE_LIMITS}[[dirs]]\nhost = \"{}\"\nmode = \"read-write\"\n",
            data.display()
        ),
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    let at = |name: &str| data.join(name).to_str().unwrap().to_owned();

    assert_eq!(
        call(&client, "read_file", json!({"path": at("inside")})).await,
        ("granted".to_owned(), false),
        "a link that stays inside the grant is followed"
    );
    for path in [
        at("relative"),
        at("absolute"),
        at("up/secret.txt"),
        at("etc/passwd"),
    ] {
        let (text, is_error) = call(&client, "read_file", json!({ "path": path })).await;
        assert!(
            is_error && text.starts_with(&format!("cannot read {path}: ")),
            "{path} was read: {text}"
        );
    }
    for path in [at("up/written.txt"), at("relative")] {
        let (text, is_error) = call(&client, "write_file", json!({ "path": path })).await;
        assert!(
            is_error && text.starts_with(&format!("cannot write {path}: ")),
            "{path} was written: {text}"
        );
    }
    assert!(!outside.join("written.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "not granted"
    );
    client.service.cancel().await.unwrap();
}

/// SECURITY.md, "open sockets (TCP, UDP, DNS)": UDP is denied as TCP is
/// (`sandbox::nothing_is_reachable_without_a_grant` probes TCP), through `wasi:sockets` itself,
/// and no datagram arrives.
#[tokio::test]
async fn udp_is_denied() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(dir.path().join("hostile.toml"), HOSTILE_LIMITS).unwrap();
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = connect(dir.path(), &[]).await;

    let sent = call(&client, "udp_send", json!({ "port": port })).await;
    // The call returned: a datagram it sent on loopback would be waiting now.
    let mut buffer = [0u8; 64];
    assert_eq!(
        listener.recv(&mut buffer).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "a datagram arrived ({sent:?})"
    );
    assert_eq!(
        sent,
        ("cannot create a UDP socket: access-denied".to_owned(), true)
    );
    assert_eq!(
        call(&client, "ok", json!({})).await,
        ("fine".to_owned(), false)
    );
    client.service.cancel().await.unwrap();
}

/// SECURITY.md, "open sockets (TCP, UDP, DNS)": name lookups are denied, for a name the host
/// itself resolves (`localhost`) as for any other.
#[tokio::test]
async fn name_lookups_are_denied() {
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(dir.path().join("hostile.toml"), HOSTILE_LIMITS).unwrap();
    let client = connect(dir.path(), &[]).await;
    for name in ["localhost", "example.com"] {
        assert_eq!(
            call(&client, "resolve", json!({ "name": name })).await,
            (
                format!("cannot resolve {name}: permanent-resolver-failure"),
                true
            )
        );
    }
    client.service.cancel().await.unwrap();
}

/// SECURITY.md, "The HTTP transport": anything but this server's own origin, `Origin: null`
/// included (sandboxed pages, file URLs), gets 403, before a session exists.
#[tokio::test]
async fn an_origin_of_null_is_refused_with_403() {
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::builder().timeout(STEP).build().unwrap();
    let send = |origin: Option<&str>| {
        let mut request = client
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INIT);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let refused = send(Some("null")).await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.headers().get("mcp-session-id").is_none());
    assert_eq!(
        refused.text().await.unwrap(),
        "forbidden: Origin null is not allowed; to allow a browser client from it, start mcpbox with --allowed-origin null"
    );
    server
        .stderr
        .wait_for("refused a request from another origin")
        .await;
    // The same request with the server's own origin, or none, is served.
    let own = format!("http://127.0.0.1:{}", server.port);
    assert_eq!(send(Some(&own)).await.unwrap().status(), 200);
    assert_eq!(send(None).await.unwrap().status(), 200);
}

/// SECURITY.md, "Slow consumers": a stream whose client falls a whole queue (256 events)
/// behind is dropped, instead of the host holding an ever-growing backlog, and a 2025-11-25
/// stream can resume with `Last-Event-ID`. A tool logs 16 KiB messages at the rate a session
/// may get them (50 a second) on its request's stream, which the client does not read. Once
/// the host says it dropped the connection, the client reads: what was queued, in order, and
/// then the end, while the call still runs; the host serves the session meanwhile. Resuming
/// from the last event it got gets the rest, the answer with it.
#[tokio::test]
async fn a_stream_a_whole_queue_behind_is_dropped_and_can_resume() {
    const COUNT: u32 = 1500;
    let dir = plugin_dir(&[
        ("hostile", "hostile.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        "[limits]\ntimeout-ms = 120000\n",
    )
    .unwrap();
    let server = HttpServer::start(
        dir.path(),
        &["--log", "info,mcpbox::transport::http::streams=debug"],
    )
    .await;
    let client = reqwest::Client::builder()
        .timeout(3 * STEP)
        .build()
        .unwrap();
    let send = |session: Option<&str>, body: &str| {
        let mut request = client
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_owned());
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let init = send(
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"slow","version":"1"}}}"#,
    )
    .await
    .unwrap();
    let id = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let session = Some(id.as_str());
    send(
        session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await
    .unwrap();
    let level = send(
        session,
        r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(level.status(), 200);

    // The call's stream: its headers are read, its body not yet.
    let slow = send(
        session,
        &format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"log_steadily","arguments":{{"count":{COUNT},"kib":16,"every_ms":20}}}}}}"#
        ),
    )
    .await
    .unwrap();
    assert_eq!(slow.status(), 200);
    server
        .stderr
        .wait_for("dropped the connection of a stream whose client is not reading it")
        .await;
    // The host serves the same session meanwhile.
    let echo = send(
        session,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"served"}}}"#,
    )
    .await
    .unwrap();
    let (_, echoed) = SseReader::new(echo).next_json().await.unwrap();
    assert_eq!(echoed["result"]["content"][0]["text"], "served", "{echoed}");

    // Now read: what was queued, in order, and then the end, while the call still runs.
    let mut stream = SseReader::new(slow);
    let (mut logs, mut last) = (0, None::<String>);
    while let Some(event) = stream.next().await {
        let message: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(message["method"], "notifications/message", "{message}");
        let id = event.id.unwrap();
        if let Some(before) = &last {
            let seq = |id: &str| id.rsplit_once('-').unwrap().1.parse::<u64>().unwrap();
            assert_eq!(
                seq(&id),
                seq(before) + 1,
                "a gap in the stream after {before}"
            );
        }
        logs += 1;
        last = Some(id);
    }
    assert!((256..COUNT).contains(&logs), "{logs} logs");
    let metrics = format!("http://127.0.0.1:{}/metrics", server.port);
    let done = r#"mcpbox_plugin_calls_total{plugin="hostile",kind="tool",name="log_steadily",outcome="ok"}"#;
    assert_eq!(
        metric(&metrics, done).await,
        None,
        "the stream ended only when the call did"
    );

    // Resuming from its last event gets the rest, the answer with it: each resumption is one
    // queue's worth (a client resumes again from the last event it got, as EventSource does).
    let mut last = last.unwrap();
    for _ in 0..COUNT / 256 + 2 {
        let resumed = client
            .get(&server.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-11-25")
            .header("last-event-id", &last)
            .send()
            .await
            .unwrap();
        assert_eq!(resumed.status(), 200, "resuming from {last}");
        let mut resumed = SseReader::new(resumed);
        while let Some(event) = resumed.next().await {
            let message: Value = serde_json::from_str(&event.data).unwrap();
            if message["id"] == 3 {
                assert_eq!(
                    message["result"]["content"][0]["text"],
                    format!("logged {COUNT}"),
                    "{message}"
                );
                return;
            }
            last = event.id.unwrap();
        }
    }
    panic!("resuming never reached the answer (last event {last})");
}

/// OPERATING.md, "Instances kept per caller": a kept instance serves its caller's calls for at
/// most ten seconds after it was made, and an instance whose call trapped is never used again.
/// The plugin's `count` tool answers how many calls its instance served, so reuse is seen in
/// the answers themselves: 1 for a fresh instance, more for a kept one.
#[tokio::test]
async fn a_kept_instance_serves_at_most_ten_seconds_and_never_after_a_trap() {
    const MAX_LIFE: Duration = Duration::from_secs(10);
    let dir = plugin_dir(&[("hostile", "hostile.wasm")]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!("instances = \"per-caller\"\n{HOSTILE_LIMITS}"),
    )
    .unwrap();
    let client = connect(dir.path(), &["--metrics-addr", "127.0.0.1:0"]).await;
    let count = async || -> u64 {
        let (text, is_error) = call(&client, "count", json!({})).await;
        assert!(!is_error, "{text}");
        text.parse().unwrap()
    };

    // Calls one after another, each well within a second of the last: the instance is kept
    // and serves the next, until it is ten seconds old. An instance is made at the latest
    // when its first call returns, so a call it serves must start within ten seconds of that.
    let deadline = Instant::now() + 6 * MAX_LIFE;
    let (mut made_by, mut longest) = (Instant::now(), Duration::ZERO);
    let mut first = true;
    loop {
        assert!(
            Instant::now() < deadline,
            "no instance was kept for close to ten seconds (the longest served calls for {longest:?}); too slow a machine, or no instance is kept"
        );
        let started = Instant::now();
        let served = count().await;
        if served == 1 {
            if !first && longest >= MAX_LIFE - Duration::from_secs(2) {
                // Replaced once it was old: what the promise is about.
                break;
            }
            (made_by, longest, first) = (Instant::now(), Duration::ZERO, false);
            continue;
        }
        let age = started.duration_since(made_by);
        assert!(
            age < MAX_LIFE,
            "an instance served call {served} starting {age:?} after its first call returned"
        );
        longest = longest.max(age);
    }

    // A call that traps ends its instance: the next call gets a fresh one.
    assert!(count().await >= 2, "the new instance is kept too");
    let (text, is_error) = call(&client, "panic", json!({"name": "trapped"})).await;
    assert_eq!(
        (text.as_str(), is_error),
        ("plugin `hostile` panicked: trapped", true)
    );
    assert_eq!(count().await, 1, "the instance that trapped served again");
    let url = client.stderr.metrics_url().await;
    assert!(
        metric(&url, r#"mcpbox_kept_instances_total{outcome="used"}"#)
            .await
            .is_some_and(|used| used >= 2)
    );
    client.service.cancel().await.unwrap();
}

/// OPERATING.md, "Tracing": an unreachable collector loses spans, never requests. The collector
/// here accepts connections and never answers (the worst case: a refused connection fails at
/// once); once the exporter is stuck on it, calls are still answered, as many as before.
#[cfg(feature = "otel")]
#[tokio::test]
async fn an_unreachable_collector_loses_spans_never_requests() {
    let collector = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", collector.local_addr().unwrap());
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut command = mcpbox(dir.path(), &["--otlp-endpoint", &endpoint]);
    // Export each batch at once rather than every 5 s, and give up on one only after a minute.
    command
        .env("OTEL_BSP_SCHEDULE_DELAY", "10")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
        .env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "60000");
    let (client, stderr) = connect_command(command, ()).await;
    let echo = async |text: &str| {
        let result = tokio::time::timeout(
            STEP,
            client.call_tool(crate::support::call("echo", json!({ "text": text }))),
        )
        .await
        .unwrap_or_else(|_| panic!("a call was held up by the collector:\n{}", stderr.text()))
        .unwrap();
        assert_eq!(tool_text(&result), (text.to_owned(), false));
    };
    // The plugin may be served late (startup waits 2 s for listings): wait until it is.
    let listed = Instant::now() + STEP;
    while !client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "echo")
    {
        assert!(
            Instant::now() < listed,
            "echo was never listed:\n{}",
            stderr.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    echo("before").await;
    // The exporter connects and waits for an answer that never comes.
    let (_held, _) = tokio::time::timeout(STEP, collector.accept())
        .await
        .expect("the exporter never tried the collector")
        .unwrap();
    let started = Instant::now();
    for i in 0..20 {
        echo(&format!("while stuck {i}")).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "20 calls took {:?} with the collector stuck",
        started.elapsed()
    );
    client.cancel().await.unwrap();
}

/// OPERATING.md, "Audit log": writing never holds a request up; records the writer cannot take
/// (at most 4,096 records and 4 MiB wait) are dropped, counted in
/// `mcpbox_audit_records_dropped_total` and warned of. The log here is a FIFO nobody reads
/// until the flood is over; then exactly the records not counted as dropped come out of it,
/// and the next call's record after them (a count too low never completes; one too high finds
/// a flood record where the next call's should be).
#[tokio::test]
async fn audit_records_the_writer_cannot_take_are_dropped_and_counted() {
    const CALLS: usize = 5000;
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let logs = tempfile::tempdir().unwrap();
    let fifo = logs.path().join("audit.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Read-write: opening never waits for a writer, and nothing is read until the flood ends.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let mut raw = Raw::initialized(
        dir.path(),
        &[
            "--audit-log",
            fifo.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    )
    .await;
    // Unknown tools, with long names and ids: about 1.2 KiB a record, so that the queue's
    // 4 MiB fill after some 3,500 records. Every request is answered all the same.
    let long = "n".repeat(500);
    for batch in 0..CALLS / 50 {
        for i in 0..50 {
            raw.send(
                format!(
                    r#"{{"jsonrpc":"2.0","id":"{long}-{batch}-{i}","method":"tools/call","params":{{"name":"{long}","arguments":{{}}}}}}"#
                )
                .as_bytes(),
            )
            .await;
        }
        for _ in 0..50 {
            let reply = raw.recv().await;
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
        }
    }
    raw.stderr
        .wait_for("the audit log writer fell behind (or stopped): audit records were dropped")
        .await;
    let url = raw.stderr.metrics_url().await;
    let series = "mcpbox_audit_records_dropped_total";
    let dropped = metric(&url, series)
        .await
        .unwrap_or_else(|| panic!("no {series} at {url}"));
    assert!(dropped >= 1, "nothing was dropped");

    // Now read: the records not dropped come out, each one of the flood's.
    let (lines, mut records) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(reader).lines() {
            if lines.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut next = async || {
        let line = tokio::time::timeout(STEP, records.recv()).await.ok()??;
        Some(serde_json::from_str::<Value>(&line).unwrap())
    };
    let written = CALLS - usize::try_from(dropped).unwrap();
    for n in 0..written {
        let record = next()
            .await
            .unwrap_or_else(|| panic!("only {n} of {written} records came ({dropped} dropped)"));
        assert_eq!(record["item"], long.as_str(), "record {n}: {record}");
    }
    // The host serves on, and its next record is the one after them.
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}"#)
        .await;
    assert_eq!(
        reply["result"]["content"][0]["text"], "still here",
        "{reply}"
    );
    let record = next().await.expect("the echo call's record");
    assert_eq!(
        record["item"], "echo",
        "a record counted as dropped was written: {record}"
    );
    assert_eq!(metric(&url, series).await, Some(dropped));
}

/// SECURITY.md, "Durable state": the embedded store's directory is created mode 0700 on first
/// use (with its parents), whatever the process's umask lets through.
#[tokio::test]
async fn the_state_directory_is_created_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let plugins = plugin_dir(&[("kv_probe", "kv_probe.wasm")]);
    std::fs::write(
        plugins.path().join("kv_probe.toml"),
        "[keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("parent/state");
    let client = connect(plugins.path(), &["--state-dir", state.to_str().unwrap()]).await;
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name.starts_with("kv"))
        .unwrap_or_else(|| panic!("no kv tool in {tools:?}"))
        .name
        .to_string();
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.clone()).with_arguments(
                json!({"op": "set", "key": "k", "value": "v"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let (text, is_error) = tool_text(&result);
    assert!(!is_error, "{tool}: {text}");
    for dir in [&state, &home.path().join("parent")] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is mode {mode:o}", dir.display());
    }
    client.service.cancel().await.unwrap();
}
