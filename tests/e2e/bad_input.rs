//! Malformed and unusual JSON-RPC input, sent as raw lines: each gets its error, and the
//! session keeps serving.

use serde_json::{Value, json};

use crate::support::{Raw, all_examples, plugin_dir};

#[tokio::test]
async fn garbage_invalid_utf8_and_huge_lines_get_errors_and_the_session_goes_on() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &["--max-message-bytes", "2000000"]).await;

    let reply = raw.request("this is not json").await;
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], Value::Null);
    raw.assert_alive(1).await;

    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"p\xffing\"}")
        .await;
    let reply = raw.recv().await;
    assert_eq!(reply["error"]["code"], -32700);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("UTF-8"),
        "{reply}"
    );
    raw.assert_alive(2).await;

    // A 1 MiB line of garbage, under the limit: a parse error.
    let reply = raw.request(&"x".repeat(1 << 20)).await;
    assert_eq!(reply["error"]["code"], -32700);
    raw.assert_alive(3).await;

    // Over the limit: refused without being read into memory, naming the size.
    let reply = raw
        .request(&format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"ping","pad":"{}"}}"#,
            "y".repeat(3 << 20)
        ))
        .await;
    assert_eq!(reply["error"]["code"], -32600);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum message size"),
        "{reply}"
    );
    raw.assert_alive(4).await;

    // A large valid request just under the limit is served.
    let text = "z".repeat(1_500_000);
    let call = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}});
    let reply = raw.request(&call.to_string()).await;
    assert_eq!(
        reply["result"]["content"][0]["text"].as_str().map(str::len),
        Some(1_500_000)
    );

    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty(), "unexpected output: {rest:?}");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn invalid_requests_are_refused_with_the_id_when_it_can_be_read() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let cases = [
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, json!(1)),
        (r#"{"id":"two","method":"ping"}"#, json!("two")),
        (r#"{"jsonrpc":"2.0","id":3,"method":7}"#, json!(3)),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":"nope"}"#,
            json!(4),
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Value::Null,
        ),
        (r#"42"#, Value::Null),
    ];
    for (line, id) in cases {
        let reply = raw.request(line).await;
        assert_eq!(reply["error"]["code"], -32600, "{line} → {reply}");
        assert_eq!(reply["id"], id, "{line} → {reply}");
    }
    raw.assert_alive(100).await;
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    for id in [
        json!(0),
        json!(-7),
        json!(9_007_199_254_740_993_u64),
        json!("abc"),
        json!(""),
        json!("1"),
    ] {
        let reply = raw
            .request(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string())
            .await;
        assert_eq!(reply, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    }
}

#[tokio::test]
async fn batches_answer_requests_in_an_array_and_skip_notifications() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let batch = r#"[
        {"jsonrpc":"2.0","id":1,"method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        {"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"in a batch"}}},
        {"foo":"bar"},
        {"jsonrpc":"2.0","id":3,"method":"no/such/method"}
    ]"#
    .replace('\n', "");
    let reply = raw.request(&batch).await;
    let replies = reply.as_array().expect("an array");
    assert_eq!(replies.len(), 4, "{reply}");
    assert_eq!(replies[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(replies[1]["result"]["content"][0]["text"], "in a batch");
    assert_eq!(replies[2]["error"]["code"], -32600);
    assert_eq!(replies[3]["error"]["code"], -32601);

    let reply = raw.request("[]").await;
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(reply["id"], Value::Null);

    // A batch of notifications only gets no reply at all: the next line answers the ping.
    raw.send(br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#)
        .await;
    raw.assert_alive(7).await;
}

#[tokio::test]
async fn lifecycle_rules_are_enforced() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::start(dir.path(), &[]);

    // Probes and pings are fine before initialize; real work is not.
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#)
        .await;
    assert_eq!(reply["error"]["code"], -32601);
    raw.assert_alive(2).await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)
        .await;
    assert_eq!(reply["error"]["code"], -32600);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize"),
        "{reply}"
    );

    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"capabilities":{}}}"#)
        .await;
    assert_eq!(
        reply["error"]["code"], -32602,
        "initialize without a protocol version: {reply}"
    );

    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{}}}"#)
        .await;
    assert_eq!(reply["result"]["protocolVersion"], "2024-11-05");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#)
        .await;
    assert_eq!(
        reply["error"]["code"], -32600,
        "a second initialize: {reply}"
    );

    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
        .await;
    assert_eq!(reply["result"]["tools"].as_array().map(Vec::len), Some(4));
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":8,"method":"logging/setLevelX"}"#)
        .await;
    assert_eq!(reply["error"]["code"], -32601);
}

#[tokio::test]
async fn every_supported_version_is_negotiated_and_others_get_the_newest() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    for (requested, expected) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut raw = Raw::start(dir.path(), &[]);
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": requested, "capabilities": {"extensions": {"x": {}}}, "clientInfo": {"name": "v", "version": "1"}}});
        let reply = raw.request(&init.to_string()).await;
        assert_eq!(reply["result"]["protocolVersion"], expected, "{requested}");
        let (_, status) = raw.finish().await;
        assert!(status.success());
    }
}

#[tokio::test]
async fn bad_params_are_invalid_params() {
    let dir = all_examples();
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":"text"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"code_review","arguments":{"language":5}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":7}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{"cursor":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"nope"},"argument":{"name":"a","value":""}}}"#,
    ] {
        let reply = raw.request(line).await;
        assert_eq!(reply["error"]["code"], -32602, "{line} → {reply}");
    }
    raw.assert_alive(99).await;
}

#[tokio::test]
async fn notifications_are_never_answered() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    for line in [
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#,
        r#"{"jsonrpc":"2.0","method":"unknown/notification"}"#,
        r#"{"jsonrpc":"2.0","id":77,"result":{}}"#,
    ] {
        raw.send(line.as_bytes()).await;
    }
    raw.assert_alive(1).await;
}

#[tokio::test]
async fn stdin_eof_exits_zero_after_answering_calls_in_flight_and_stdout_is_only_protocol() {
    let dir = all_examples();
    // Everything mcpbox itself logs, at every level, must stay off stdout.
    let mut raw = Raw::initialized(dir.path(), &["--log", "info,mcpbox=trace,plugin=trace"]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"echo","arguments":{"text":"bye"}}}"#).await;
    let (rest, status) = raw.finish().await;
    assert!(status.success(), "{status}");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], "last");
    assert_eq!(rest[0]["result"]["content"][0]["text"], "bye");
}

#[tokio::test]
async fn sigterm_ends_a_stdio_session_cleanly() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let raw = Raw::initialized(dir.path(), &[]).await;
    let pid = raw.child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    raw.stderr.wait_for("shutting down").await;
    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert!(status.success(), "{status}");
}

/// `initialize`, `initialized` and then `lists` `tools/list` requests, as the lines of a file.
fn scripted_input(lists: usize) -> tempfile::NamedTempFile {
    use std::io::Write as _;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        r#"{{"jsonrpc":"2.0","id":"init","method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"raw","version":"0"}}}}}}"#
    )
    .unwrap();
    writeln!(
        file,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    for id in 0..lists {
        writeln!(
            file,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#
        )
        .unwrap();
    }
    file
}

/// The replies in `output`, checked: JSON lines, `initialize` first, then each list once (in
/// any order: requests are handled concurrently).
fn check_replies(output: &str, lists: usize, stderr: &str) {
    let replies: Vec<Value> = output
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    assert_eq!(replies.len(), lists + 1, "stderr:\n{stderr}");
    assert_eq!(replies[0]["id"], "init");
    let mut ids: Vec<u64> = replies[1..]
        .iter()
        .map(|reply| {
            assert!(reply["result"]["tools"].is_array(), "{reply}");
            reply["id"].as_u64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..lists as u64).collect::<Vec<_>>());
}

/// Run mcpbox on `stdin` and `stdout` (whatever kinds of file they are) until it exits.
async fn serve_on(stdin: std::process::Stdio, stdout: std::process::Stdio) -> String {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let child = crate::support::mcpbox(dir.path(), &[])
        .stdin(stdin)
        .stdout(stdout)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("mcpbox exits at end of input")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{}\nstderr:\n{stderr}",
        output.status
    );
    stderr
}

/// A pipe's reading end with `O_NONBLOCK` set, as some parents hand stdin over, and its
/// writing end.
fn non_blocking_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    let (reader, writer) = std::io::pipe().unwrap();
    let flags = rustix::fs::fcntl_getfl(&reader).unwrap();
    rustix::fs::fcntl_setfl(&reader, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    (reader, writer)
}

/// Not every client gives mcpbox two pipes: stdin a pipe (blocking, or non-blocking as the
/// parent left it) and stdout a file, or stdin a file and stdout a non-blocking pipe that
/// fills up. Each is served to the end. (The first failed with `EAGAIN` when the pipe was
/// made non-blocking for the runtime before stdout was found to be a file.)
#[tokio::test]
async fn stdin_and_stdout_of_different_kinds_are_served() {
    const LISTS: usize = 3;
    let input = scripted_input(LISTS);
    for non_blocking in [false, true] {
        let (reader, mut writer) = if non_blocking {
            non_blocking_pipe()
        } else {
            std::io::pipe().unwrap()
        };
        let out = tempfile::NamedTempFile::new().unwrap();
        let feeder = {
            let bytes = std::fs::read(input.path()).unwrap();
            std::thread::spawn(move || {
                use std::io::Write as _;
                // Written slowly, so that the server meets an empty pipe between lines.
                for line in bytes.split_inclusive(|b| *b == b'\n') {
                    writer.write_all(line).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            })
        };
        let stderr = serve_on(reader.into(), out.reopen().unwrap().into()).await;
        feeder.join().unwrap();
        check_replies(
            &std::fs::read_to_string(out.path()).unwrap(),
            LISTS,
            &stderr,
        );
    }

    // Enough replies to fill the pipe (64 KiB) before the reader starts reading.
    const MANY: usize = 300;
    let input = scripted_input(MANY);
    let (reader, writer) = std::io::pipe().unwrap();
    // The writing end is mcpbox's stdout, handed over non-blocking.
    let flags = rustix::fs::fcntl_getfl(&writer).unwrap();
    rustix::fs::fcntl_setfl(&writer, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let collector = std::thread::spawn(move || {
        use std::io::Read as _;
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let mut text = String::new();
        let mut reader = reader;
        reader.read_to_string(&mut text).unwrap();
        text
    });
    let stderr = serve_on(input.reopen().unwrap().into(), writer.into()).await;
    let text = collector.join().unwrap();
    check_replies(&text, MANY, &stderr);
}
