//! Golden files pin the wire: a scripted conversation with the real `mcpbox` over stdio, every
//! message it sends compared with `tests/golden/<revision>/<name>.jsonl`.
//!
//! Each golden file is a transcript, one JSON object per line: `{"send": …}` for what the
//! script wrote, `{"recv": …}` for what mcpbox answered. Requests are sent one at a time and
//! everything up to the reply is recorded, so the order is deterministic. Requests mcpbox sends
//! the client (sampling, elicitation, roots) are answered with canned results.
//!
//! To accept a deliberate wire change, run with `MCPBOX_BLESS=1` (as for `CLI.md`, see
//! `docs`; the older name `MCPBOX_UPDATE_GOLDEN=1` still works) and review the diff: a golden
//! file changes only where the spec for that revision says so.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Raw, plugin_dir};

fn golden_path(revision: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden")
        .join(revision)
        .join(format!("{name}.jsonl"))
}

/// A conversation being recorded.
struct Transcript {
    raw: Raw,
    lines: Vec<Value>,
}

impl Transcript {
    fn new(raw: Raw) -> Self {
        Self {
            raw,
            lines: Vec::new(),
        }
    }

    /// A finished transcript, to check.
    fn from_lines(lines: Vec<Value>) -> Finished {
        Finished { lines }
    }

    /// Send one line; if it is a request (or a batch holding one), record everything up to its
    /// reply, answering mcpbox's own requests on the way.
    async fn step(&mut self, line: &str) {
        let sent: Value = serde_json::from_str(line).unwrap_or(Value::String(line.to_owned()));
        self.lines.push(json!({ "send": sent }));
        self.raw.send(line.as_bytes()).await;
        let expects_reply = match &sent {
            Value::Object(m) => m.contains_key("id") || !m.contains_key("method"),
            Value::Array(items) => items.iter().any(|i| i.get("id").is_some()) || items.is_empty(),
            _ => true,
        };
        if !expects_reply {
            return;
        }
        loop {
            let message = self.raw.recv().await;
            self.lines.push(json!({ "recv": message }));
            if message.is_array() {
                return;
            }
            let is_request = message.get("method").is_some() && message.get("id").is_some();
            if is_request {
                let answer = canned_answer(&message);
                self.raw.send(answer.to_string().as_bytes()).await;
                self.lines.push(json!({ "send": answer }));
                continue;
            }
            let is_reply = message.get("id").is_some() && message.get("method").is_none();
            if is_reply {
                return;
            }
        }
    }

    /// Compare with the golden file (or rewrite it when asked to).
    fn check(self, revision: &str, name: &str) {
        Finished { lines: self.lines }.check(revision, name);
    }
}

/// A transcript whose session has ended.
struct Finished {
    lines: Vec<Value>,
}

impl Finished {
    /// Compare with the golden file (or rewrite it when asked to). Values that differ by
    /// design from run to run (a signed `requestState` carries an expiry) are replaced by a
    /// placeholder.
    fn check(self, revision: &str, name: &str) {
        let path = golden_path(revision, name);
        let actual: String = self
            .lines
            .iter()
            .map(|l| {
                let mut l = l.clone();
                normalise(&mut l);
                format!("{l}\n")
            })
            .collect::<String>();
        if blessing() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "read {}: {e} (run with MCPBOX_BLESS=1 to create it)",
                path.display()
            )
        });
        for (i, (want, got)) in expected.lines().zip(actual.lines()).enumerate() {
            let (want_v, got_v): (Value, Value) = (
                serde_json::from_str(want).unwrap(),
                serde_json::from_str(got).unwrap(),
            );
            assert_eq!(
                want_v,
                got_v,
                "{} line {}: the wire changed\n want: {want}\n  got: {got}",
                path.display(),
                i + 1
            );
        }
        assert_eq!(
            expected.lines().count(),
            actual.lines().count(),
            "{}: a different number of messages",
            path.display()
        );
    }
}

fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "requestState" && value.is_string() {
                    *value = Value::String("<signed state>".to_owned());
                } else {
                    normalise(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// What the script answers to a request mcpbox sends the client.
fn canned_answer(request: &Value) -> Value {
    let result = match request["method"].as_str() {
        Some("sampling/createMessage") => json!({
            "role": "assistant",
            "content": {"type": "text", "text": "a canned completion"},
            "model": "golden-model",
            "stopReason": "endTurn"
        }),
        Some("elicitation/create") => json!({
            "action": "accept",
            "content": {"username": "golden", "email": "golden@example.com", "name": "Golden"}
        }),
        Some("roots/list") => json!({"roots": [{"uri": "file:///golden", "name": "golden"}]}),
        _ => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
}

/// Every 2025-11-25 method, result, error and notification mcpbox produces over stdio.
#[tokio::test]
async fn the_2025_11_25_wire_matches_the_golden_file() {
    let dir = plugin_dir(&[
        ("conformance", "conformance.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let mut t = Transcript::new(Raw::start(dir.path(), &[]));
    for line in [
        // Before initialize.
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{}}"#,
        // The handshake.
        r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{},"roots":{"listChanged":true}},"clientInfo":{"name":"golden","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        // Lists.
        r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":11,"method":"prompts/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":12,"method":"resources/list"}"#,
        r#"{"jsonrpc":"2.0","id":13,"method":"resources/templates/list"}"#,
        r#"{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"cursor":"bogus"}}"#,
        // Skills (SEP-2640).
        r#"{"jsonrpc":"2.0","id":15,"method":"skills/list"}"#,
        r#"{"jsonrpc":"2.0","id":16,"method":"skills/get","params":{"uri":"skill://conformance/test-skill/SKILL.md"}}"#,
        r#"{"jsonrpc":"2.0","id":17,"method":"resources/directory/read","params":{"uri":"skill://conformance/test-skill/references"}}"#,
        r#"{"jsonrpc":"2.0","id":18,"method":"resources/directory/read","params":{"uri":"skill://conformance/nowhere"}}"#,
        // Tools.
        r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"test_simple_text"}}"#,
        r#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"test_image_content","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"test_audio_content","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"test_embedded_resource","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"test_multiple_content_types","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"test_error_handling","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p-1"}}}"#,
        r#"{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":28,"method":"logging/setLevel","params":{"level":"info"}}"#,
        r#"{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"hello"}}}"#,
        r#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}"#,
        r#"{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"test_simple_text","arguments":[1]}}"#,
        r#"{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{}}"#,
        // Prompts.
        r#"{"jsonrpc":"2.0","id":40,"method":"prompts/get","params":{"name":"test_simple_prompt"}}"#,
        r#"{"jsonrpc":"2.0","id":41,"method":"prompts/get","params":{"name":"test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":42,"method":"prompts/get","params":{"name":"test_prompt_with_embedded_resource","arguments":{"resourceUri":"test://x"}}}"#,
        r#"{"jsonrpc":"2.0","id":43,"method":"prompts/get","params":{"name":"test_prompt_with_image"}}"#,
        r#"{"jsonrpc":"2.0","id":44,"method":"prompts/get","params":{"name":"test_prompt_with_arguments"}}"#,
        r#"{"jsonrpc":"2.0","id":45,"method":"prompts/get","params":{"name":"nope"}}"#,
        r#"{"jsonrpc":"2.0","id":46,"method":"prompts/get","params":{"name":"test_simple_prompt","arguments":{"a":1}}}"#,
        // Resources.
        r#"{"jsonrpc":"2.0","id":50,"method":"resources/read","params":{"uri":"test://static-text"}}"#,
        r#"{"jsonrpc":"2.0","id":51,"method":"resources/read","params":{"uri":"test://static-binary"}}"#,
        r#"{"jsonrpc":"2.0","id":52,"method":"resources/read","params":{"uri":"test://template/7/data"}}"#,
        r#"{"jsonrpc":"2.0","id":53,"method":"resources/read","params":{"uri":"test://nowhere"}}"#,
        r#"{"jsonrpc":"2.0","id":54,"method":"resources/subscribe","params":{"uri":"test://static-text"}}"#,
        r#"{"jsonrpc":"2.0","id":55,"method":"resources/unsubscribe","params":{"uri":"test://static-text"}}"#,
        r#"{"jsonrpc":"2.0","id":56,"method":"resources/read","params":{}}"#,
        // Completion.
        r#"{"jsonrpc":"2.0","id":60,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"te"}}}"#,
        r#"{"jsonrpc":"2.0","id":61,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"nope"},"argument":{"name":"a","value":""}}}"#,
        r#"{"jsonrpc":"2.0","id":62,"method":"completion/complete","params":{"ref":{"type":"ref/nope"}}}"#,
        // JSON-RPC errors.
        r#"{"jsonrpc":"2.0","id":70,"method":"tools/explode"}"#,
        r#"{"jsonrpc":"2.0","id":71,"method":"server/discover","params":{}}"#,
        r#"not json"#,
        r#"{"jsonrpc":"1.0","id":72,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        r#"[]"#,
        r#"[{"jsonrpc":"2.0","id":73,"method":"ping"},5,{"jsonrpc":"2.0","method":"notifications/x"}]"#,
        r#"{"jsonrpc":"2.0","id":74,"method":"logging/setLevel","params":{"level":"loud"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}"#,
        r#"{"jsonrpc":"2.0","id":75,"method":"ping"}"#,
    ] {
        t.step(line).await;
    }
    t.check("2025-11-25", "stdio");
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"golden","version":"1"}}"#;

/// The 2026-07-28 wire over stdio: discover, every method with its envelope, the errors of the
/// validation ladder, an input request and its retry, and a listen stream.
#[tokio::test]
async fn the_2026_07_28_wire_matches_the_golden_file() {
    let dir = plugin_dir(&[
        ("conformance", "conformance.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let mut t = Transcript::new(Raw::start(dir.path(), &[]));
    let lines = [
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#),
        r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_owned(),
        format!(r#"{{"jsonrpc":"2.0","id":4,"method":"ping","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":6,"method":"prompts/list","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":8,"method":"resources/templates/list","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},{META}}}}}"#),
        r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_owned(),
        format!(r#"{{"jsonrpc":"2.0","id":11,"method":"resources/read","params":{{"uri":"test://static-text",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":12,"method":"resources/read","params":{{"uri":"test://nowhere",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{{"name":"test_simple_prompt",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":14,"method":"completion/complete","params":{{"ref":{{"type":"ref/prompt","name":"test_prompt_with_arguments"}},"argument":{{"name":"arg1","value":"te"}},{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{{"name":"test_input_required_result_elicitation","arguments":{{}},{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{{"name":"test_input_required_result_elicitation","arguments":{{}},"inputResponses":{{"user_name":{{"action":"accept","content":{{"name":"Ada"}}}}}},{META}}}}}"#),
        r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"test_missing_capability","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_owned(),
        format!(r#"{{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{{"name":"test_input_required_result_tampered_state","arguments":{{}},"requestState":"e30.AAAA",{META}}}}}"#),
        // Skills (SEP-2640).
        format!(r#"{{"jsonrpc":"2.0","id":19,"method":"skills/list","params":{{{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":20,"method":"skills/get","params":{{"uri":"skill://conformance/test-skill/SKILL.md",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":21,"method":"skills/get","params":{{"uri":"skill://conformance/none/SKILL.md",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":22,"method":"resources/directory/read","params":{{"uri":"skill://conformance/test-skill",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":23,"method":"resources/directory/read","params":{{"uri":"skill://conformance/test-skill/SKILL.md",{META}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":24,"method":"resources/read","params":{{"uri":"skill://conformance/test-skill/references/GUIDE.md",{META}}}}}"#),
    ];
    for line in &lines {
        t.step(line).await;
    }
    // A listen stream: its acknowledgement, then (when stdin closes) the result that ends it.
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true}},{META}}}}}"#
    );
    t.lines
        .push(json!({ "send": serde_json::from_str::<Value>(&listen).unwrap() }));
    t.raw.send(listen.as_bytes()).await;
    let ack = t.raw.recv().await;
    t.lines.push(json!({ "recv": ack }));
    let Transcript { raw, mut lines } = t;
    let (rest, status) = raw.finish().await;
    assert!(status.success());
    lines.extend(rest.into_iter().map(|m| json!({ "recv": m })));
    Transcript::from_lines(lines).check("2026-07-28", "stdio");
}

/// Whether this run rewrites the golden files: `MCPBOX_BLESS=1`, the name TESTING.md gives
/// (or the older `MCPBOX_UPDATE_GOLDEN`, set to anything).
fn blessing() -> bool {
    std::env::var_os("MCPBOX_BLESS").is_some_and(|value| value == "1")
        || std::env::var_os("MCPBOX_UPDATE_GOLDEN").is_some()
}
