//! Loading the plugin directory: broken files are reported and skipped, name collisions are
//! refused naming both plugins, and everything else serves.

use crate::support::{Raw, connect, example_plugins, plugin_dir};

#[tokio::test]
async fn plugins_that_fail_to_load_are_reported_with_file_and_reason_and_skipped() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    std::fs::write(dir.path().join("garbage.wasm"), b"this is not wasm").unwrap();
    // A core module (not a component): the wasm magic, version 1, no sections.
    std::fs::write(dir.path().join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    // A valid component that exports none of the plugin interfaces.
    std::fs::write(dir.path().join("empty.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
    // Not a plugin file at all: ignored.
    std::fs::write(dir.path().join("README.md"), b"# notes").unwrap();

    let client = connect(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 4, "the good plugin still serves");

    let log = client.stderr.wait_for("empty.wasm").await;
    let line = |file: &str| {
        log.lines()
            .find(|l| l.contains(file))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("garbage.wasm").contains("not a WebAssembly file"),
        "{log}"
    );
    assert!(line("core.wasm").contains("not a component"), "{log}");
    assert!(
        line("empty.wasm").contains("exports none of the mcpbox:plugin@0.1.0 interfaces"),
        "{log}"
    );
    assert!(!log.contains("README.md"), "{log}");
}

#[tokio::test]
async fn name_collisions_are_refused_naming_both_plugins_and_the_rest_serves() {
    // The same plugin twice: every tool of the second collides with the first.
    let dir = plugin_dir(&[
        ("echo_tools", "first.wasm"),
        ("echo_tools", "second.wasm"),
        ("quotes", "quotes.wasm"),
    ]);
    let client = connect(dir.path(), &[]).await;
    assert_eq!(client.list_all_tools().await.expect("tools").len(), 4);
    assert_eq!(
        client.list_all_resources().await.expect("resources").len(),
        2
    );
    let log = client.stderr.wait_for("refused tool `echo`").await;
    let refusal = log
        .lines()
        .find(|l| l.contains("refused tool `echo`"))
        .unwrap();
    assert!(
        refusal.contains("of plugin `second`: the name is served by plugin `first`"),
        "{refusal}"
    );
    let summary = client
        .stderr
        .wait_for("3 loaded, 0 skipped, 4 names refused")
        .await;
    let second = summary
        .lines()
        .find(|l| l.contains("loaded plugin") && l.contains("plugin=\"second\""))
        .or_else(|| {
            summary
                .lines()
                .find(|l| l.contains("loaded plugin") && l.contains("plugin=second"))
        })
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(second.contains("serves=0 refused=4"), "{second}");
}

#[tokio::test]
async fn an_empty_plugin_directory_serves_nothing_but_serves() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    assert_eq!(reply["result"]["tools"], serde_json::json!([]));
    raw.stderr.wait_for("no plugins").await;
}

#[tokio::test]
async fn a_missing_plugin_directory_is_a_clear_startup_error() {
    let missing = example_plugins().join("does-not-exist");
    let output = crate::support::mcpbox(&missing, &[])
        .output()
        .await
        .expect("run mcpbox");
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "stdout must stay clean");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the plugin directory") && stderr.contains("does-not-exist"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_invalid_log_filter_is_a_clear_usage_error() {
    let output = crate::support::mcpbox(example_plugins(), &["--log", "lots=of=noise"])
        .output()
        .await
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid log level"));
}

#[tokio::test]
async fn compiled_plugins_are_cached_and_damaged_entries_are_rebuilt() {
    let dir = crate::support::plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let args = [
        "--cache-dir",
        cache_dir,
        "--log",
        "info,mcpbox::engine=debug",
    ];
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect()
    };
    let serves = |raw: Raw| async move {
        let mut raw = raw;
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
            .await;
        assert_eq!(reply["result"]["tools"].as_array().map(Vec::len), Some(4));
        // A call runs on an instance whose memory starts as the artifact's image.
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from the cache"}}}"#)
            .await;
        assert_eq!(
            reply["result"]["content"][0]["text"], "from the cache",
            "{reply}"
        );
        let (_, status) = raw.finish().await;
        assert!(status.success());
    };

    // Cold: compiled, then stored.
    let raw = Raw::initialized(dir.path(), &args).await;
    assert!(!raw.stderr.text().contains("from the cache"));
    serves(raw).await;
    assert_eq!(entries().len(), 1);

    // Warm: loaded from the cache.
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("loaded a compiled component from the cache")
        .await;
    serves(raw).await;

    // An entry is mapped while its plugin is loaded: removed meanwhile (by the size limit, or
    // by hand), the plugin keeps serving from the mapping.
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("loaded a compiled component from the cache")
        .await;
    let entry = entries()[0].clone();
    let kept = std::fs::read(&entry).unwrap();
    std::fs::remove_file(&entry).unwrap();
    serves(raw).await;
    std::fs::write(&entry, &kept).unwrap();

    // Damaged: discarded, rebuilt, and serving all the same.
    let entry = &entries()[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(entry, &bytes).unwrap();
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("discarded a damaged compiled-component cache entry")
        .await;
    serves(raw).await;
    let rebuilt = std::fs::read(&entries()[0]).unwrap();
    assert_ne!(rebuilt, bytes, "the entry was written again");

    // Not a cache entry at all: the same.
    std::fs::write(&entries()[0], b"not compiled code").unwrap();
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("discarded a damaged compiled-component cache entry")
        .await;
    serves(raw).await;
}

/// A start whose tools' schemas compiled in an earlier run compiles them at their first call
/// (BENCHMARKS.md, "Against wasmtime's own floor"), and checks arguments exactly as before.
#[tokio::test]
async fn schemas_proven_in_one_run_are_compiled_at_first_use_in_the_next() {
    let dir = crate::support::plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--log",
        "info,mcpbox::catalog=debug",
    ];
    let checks = |raw: Raw| async move {
        let mut raw = raw;
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#)
            .await;
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        assert_eq!(
            reply["result"]["content"][0]["text"],
            r#"invalid arguments for tool `echo`: "text" is a required property"#,
        );
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"checked"}}}"#)
            .await;
        assert_eq!(reply["result"]["content"][0]["text"], "checked", "{reply}");
        let (_, status) = raw.finish().await;
        assert!(status.success());
    };
    let proofs = cache.path().join("schemas-proven");

    // First run: compiled at load, each schema recorded once.
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("schemas proven usable before proofs=0")
        .await;
    checks(raw).await;
    let recorded = std::fs::read_to_string(&proofs).unwrap();
    let lines = recorded.lines().count();
    let distinct: std::collections::HashSet<&str> = recorded.lines().collect();
    assert!(
        lines >= 1 && distinct.len() == lines,
        "one proof for each distinct schema: {recorded}"
    );

    // Second run: read back, nothing recorded again, and arguments checked all the same.
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for(&format!("schemas proven usable before proofs={lines}"))
        .await;
    checks(raw).await;
    assert_eq!(std::fs::read_to_string(&proofs).unwrap(), recorded);

    // A damaged file is read as far as it is sound: the rest is proven again.
    std::fs::write(&proofs, format!("garbage\n{}", &recorded[..10])).unwrap();
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("schemas proven usable before proofs=0")
        .await;
    checks(raw).await;
}

/// `bytes` (a component) with a custom section appended that makes it `size` bytes long.
fn padded_to(mut bytes: Vec<u8>, size: usize) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(n & 0x7f).unwrap_or_default();
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let room = size.checked_sub(bytes.len()).expect("room for a section");
    // A section: its id (0, custom), its length, then its name's length, its name, the payload.
    for payload in (0..room).rev() {
        let mut content = vec![3];
        content.extend_from_slice(b"pad");
        content.resize(content.len() + payload, 0);
        let mut section = vec![0];
        leb(content.len(), &mut section);
        section.extend_from_slice(&content);
        if section.len() == room {
            bytes.extend_from_slice(&section);
            return bytes;
        }
    }
    panic!("no section of {room} bytes");
}

/// A start whose plugin files are unchanged neither reads nor hashes them: it knows them by
/// sight from an earlier run (BENCHMARKS.md, "Start-up with fifty plugins, their files known
/// by sight"). A file written in place, to the same size and with its modification time set
/// back, is read again; so is one whose compiled form has left the cache.
#[tokio::test]
async fn unchanged_plugin_files_are_known_by_sight_and_a_rewrite_is_not() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let file = dir.path().join("echo_tools.wasm");
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--log",
        "info,mcpbox::watch=debug",
    ];
    let known = cache.path().join("plugins-known");
    let tools = |raw: Raw| async move {
        let mut raw = raw;
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
            .await;
        let (_, status) = raw.finish().await;
        assert!(status.success());
        let mut names: Vec<String> = reply["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        names.sort();
        names
    };

    // Nothing known yet: read (and remembered only if its times had settled by then, which
    // the unit tests of `known_files` check).
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("plugin files known by sight files=0")
        .await;
    let echo = tools(raw).await;
    assert!(echo.contains(&"echo".to_owned()), "{echo:?}");

    // Settled: remembered, once.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let raw = Raw::initialized(dir.path(), &args).await;
    assert_eq!(tools(raw).await, echo);
    assert_eq!(std::fs::read_to_string(&known).unwrap().lines().count(), 1);

    // Known: not read.
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr
        .wait_for("plugin files known by sight files=1")
        .await;
    raw.stderr.wait_for("known by sight, not read").await;
    assert_eq!(tools(raw).await, echo);

    // Written in place with another plugin of the same size, its modification time set back:
    // its change time still tells, and the new plugin serves.
    let before = std::fs::metadata(&file).unwrap();
    let other =
        std::fs::read(crate::support::example_plugins().join("sequential_thinking.wasm")).unwrap();
    let other = padded_to(other, usize::try_from(before.len()).unwrap());
    std::fs::write(&file, &other).unwrap();
    std::fs::File::options()
        .append(true)
        .open(&file)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
    let raw = Raw::initialized(dir.path(), &args).await;
    assert_eq!(tools(raw).await, ["sequentialthinking"]);

    // Known, but its compiled form gone: read after all, and served.
    std::fs::write(
        &file,
        std::fs::read(crate::support::example_plugins().join("echo_tools.wasm")).unwrap(),
    )
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let raw = Raw::initialized(dir.path(), &args).await;
    assert_eq!(tools(raw).await, echo);
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let raw = Raw::initialized(dir.path(), &args).await;
    raw.stderr.wait_for("known by sight, not read").await;
    assert_eq!(tools(raw).await, echo);
}

/// stdin from a file and stdout to a file (not pipes): the thread-driven path serves too.
#[tokio::test]
async fn stdio_serves_from_a_file_and_to_a_file() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let io = tempfile::tempdir().unwrap();
    let requests = io.path().join("in.jsonl");
    std::fs::write(
        &requests,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from a file"}}}"#,
            "\n"
        ),
    )
    .unwrap();
    let replies = io.path().join("out.jsonl");
    let status = crate::support::mcpbox(dir.path(), &[])
        .stdin(std::fs::File::open(&requests).unwrap())
        .stdout(std::fs::File::create(&replies).unwrap())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let out = std::fs::read_to_string(&replies).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(
        lines[1]["result"]["content"][0]["text"], "from a file",
        "{out}"
    );
}

/// What went wrong at startup (a file skipped, a manifest with no plugin, a name refused)
/// reaches a client that asks for logs, once, as warnings; and an orphan manifest is warned
/// about in mcpbox's own log.
#[tokio::test]
async fn startup_problems_reach_clients_that_ask_for_logs() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("echo_tools", "twin.wasm"),
    ]);
    std::fs::write(dir.path().join("broken.wasm"), b"not wasm").unwrap();
    std::fs::write(
        dir.path().join("wether.toml"),
        "[http]\nallow = [\"x.com\"]\n",
    )
    .unwrap();
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.stderr
        .wait_for("a manifest with no plugin: there is no wether.wasm beside it")
        .await;
    raw.send(br#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}"#)
        .await;
    let mut messages = Vec::new();
    loop {
        let message = raw.recv().await;
        if message["id"] == 2 {
            break;
        }
        assert_eq!(message["method"], "notifications/message", "{message}");
        assert_eq!(message["params"]["level"], "warning");
        messages.push(message["params"]["data"].as_str().unwrap().to_owned());
    }
    let all = messages.join("\n");
    assert!(
        all.contains("broken.wasm") && all.contains("not a WebAssembly file"),
        "{all}"
    );
    assert!(all.contains("wether.toml has no plugin"), "{all}");
    assert!(
        all.contains("twin"),
        "the refused names are reported: {all}"
    );
    // Once: a second setLevel sends nothing more.
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}"#,
        )
        .await;
    assert_eq!(reply["id"], 3, "{reply}");
}

/// `--log-format json`: every stderr line is one JSON object (fields apart), stdout still
/// carries only the protocol, and each plugin call's outcome is logged at debug with its
/// plugin, name, duration and fuel.
#[tokio::test]
async fn json_logs_carry_each_calls_outcome() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let mut raw = Raw::initialized(
        dir.path(),
        &["--log-format", "json", "--log", "info,mcpbox::calls=debug"],
    )
    .await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#)
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    raw.stderr.wait_for("\"plugin call\"").await;
    let stderr = raw.stderr.clone();
    let (stdout, status) = raw.finish().await;
    assert!(status.success());
    assert!(
        stdout.is_empty(),
        "stdout carries only the protocol: {stdout:?}"
    );
    stderr.wait_for("stdio session over").await;
    let mut calls = Vec::new();
    for line in stderr.text().lines().filter(|l| !l.trim().is_empty()) {
        let record: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        if record["message"] == "plugin call" {
            calls.push(record);
        }
    }
    let call = calls
        .iter()
        .find(|c| c["kind"] == "tool" && c["name"] == "echo")
        .expect("the call is logged");
    assert_eq!(call["plugin"], "echo_tools");
    assert_eq!(call["outcome"], "returned");
    assert!(call["fuel"].as_u64().unwrap() > 0, "{call}");
    assert!(call["elapsed_us"].as_u64().is_some(), "{call}");
}

/// Once started, mcpbox gives back the pages of its executable that only starting up touched,
/// and once a plugin's lists are read, the pages of its compiled code that loading touched
/// (#30, BENCHMARKS.md "Idle memory, start-up's pages given back"): the log says so at debug
/// level, and what is served afterwards runs from pages faulted back from the files.
#[tokio::test]
async fn pages_only_loading_touched_are_given_back_and_serving_goes_on() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    // A cache of its own, filled by a first run: the second maps the plugin's compiled code
    // from the cache file (a component compiled in memory has no file pages to give back).
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = ["--cache-dir", cache.path().to_str().unwrap()];
    let (_, status) = Raw::initialized(dir.path(), &cache_arg)
        .await
        .finish()
        .await;
    assert!(status.success(), "{status}");

    let mut raw = Raw::initialized(
        dir.path(),
        &[
            cache_arg[0],
            cache_arg[1],
            "--log",
            "info,mcpbox::compose=debug",
        ],
    )
    .await;
    let said = "gave back the pages only starting up needed";
    let log = raw.stderr.wait_for(said).await;
    let line = log.lines().find(|line| line.contains(said)).unwrap();
    let field = |name: &str| -> u64 {
        line.split(&format!("{name}="))
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    // The executable's code and read-only data, and the code the plugin's lists ran.
    assert!(field("executable_kib") > 0, "{line}");
    assert_eq!(field("plugins"), 1, "{line}");
    assert!(field("plugins_kib") > 0, "{line}");
    let list = raw
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "echo"),
        "{list}"
    );
    for id in 3..6 {
        let call = raw
            .request(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"after {id}"}}}}}}"#
            ))
            .await;
        assert_eq!(
            call["result"]["content"][0]["text"],
            format!("after {id}"),
            "{call}"
        );
    }
    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert!(status.success(), "{status}");
}
