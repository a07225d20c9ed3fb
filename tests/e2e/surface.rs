//! The MCP surface plugins reach through the host, through a real client: logging, progress,
//! cancellation, completion, sampling, elicitation, roots, structured output and argument
//! validation.

use rmcp::model::{
    ArgumentInfo, ClientRequest, CompleteRequestParams, ProgressToken, Reference,
    RequestMetaObject, SetLevelRequestParams,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::support::{
    Raw, RecordingClient, STEP, call, connect_with, error_code, json, plugin_dir, tool_text,
};

const ALL_CAPABILITIES: &str = r#"{"sampling": {}, "elicitation": {}, "roots": {}}"#;

fn client(capabilities: &str) -> RecordingClient {
    RecordingClient::new(&serde_json::from_str(capabilities).unwrap())
}

#[tokio::test]
async fn logs_reach_the_client_at_its_level_with_the_plugin_as_logger() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let handler = client("{}");
    let service = connect_with(dir.path(), &[], handler.clone()).await;

    // Nothing is sent before the client asks for a level.
    let result = service
        .call_tool(call("countdown", json!({"steps": 2})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("done after 2 steps".to_owned(), false));

    // The logs that follow come after any the call above could have sent late: the first to
    // arrive must be the next call's first.
    let level = serde_json::from_value::<SetLevelRequestParams>(json!({"level": "info"})).unwrap();
    service.set_level(level).await.unwrap();
    service
        .call_tool(call("countdown", json!({"steps": 3})))
        .await
        .unwrap();
    // (rmcp hands each notification to a task of its own, so they are compared as sets.)
    let logs = handler.wait_for("log", 3).await;
    assert_eq!(
        log_texts(&logs),
        ["step 1 of 3", "step 2 of 3", "step 3 of 3"],
        "{logs:?}"
    );
    assert!(
        logs.contains(&json!({"level": "info", "logger": "interactive", "data": "step 1 of 3"})),
        "{logs:?}"
    );

    // Above the level, nothing: the next log at info is the one after the quiet call's.
    let level = serde_json::from_value::<SetLevelRequestParams>(json!({"level": "error"})).unwrap();
    service.set_level(level).await.unwrap();
    service
        .call_tool(call("countdown", json!({"steps": 2})))
        .await
        .unwrap();
    let level = serde_json::from_value::<SetLevelRequestParams>(json!({"level": "info"})).unwrap();
    service.set_level(level).await.unwrap();
    service
        .call_tool(call("countdown", json!({"steps": 1})))
        .await
        .unwrap();
    let logs = handler.wait_for("log", 4).await;
    assert_eq!(
        log_texts(&logs),
        ["step 1 of 1", "step 1 of 3", "step 2 of 3", "step 3 of 3"]
    );
}

/// The texts of log notifications, sorted.
fn log_texts(logs: &[Value]) -> Vec<&str> {
    let mut texts: Vec<&str> = logs
        .iter()
        .map(|l| l["data"].as_str().unwrap_or_default())
        .collect();
    texts.sort_unstable();
    texts
}

#[tokio::test]
async fn log_floods_are_rate_limited_per_plugin() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.request(
        r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}"#,
    )
    .await;
    let started = std::time::Instant::now();
    raw.send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":1000}}}"#).await;
    let mut logs = 0;
    loop {
        let message = raw.recv().await;
        if message["id"] == 2 {
            assert_eq!(
                message["result"]["content"][0]["text"],
                "done after 1000 steps"
            );
            break;
        }
        assert_eq!(message["method"], "notifications/message");
        logs += 1;
    }
    // The limiter dropped some (it says so), so the flood outran it; what passed is the burst
    // of 100 and at most 50 a second over the call's time, however long the call took.
    raw.stderr
        .wait_for("over the rate limit are not sent")
        .await;
    let most = 100.0 + 50.0 * started.elapsed().as_secs_f64() + 1.0;
    assert!(
        logs >= 100 && f64::from(logs) <= most,
        "{logs} messages passed the limiter (at most {most:.0} in {:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_invalid_log_level_is_invalid_params() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}"#,
        )
        .await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = raw
        .request(
            r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"notice"}}"#,
        )
        .await;
    assert_eq!(reply["result"], json!({}));
}

#[tokio::test]
async fn progress_follows_the_token_increases_and_precedes_the_response() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let handler = client("{}");
    let service = connect_with(dir.path(), &[], handler.clone()).await;
    let mut params = call("countdown", json!({"steps": 5}));
    params.meta = Some(RequestMetaObject::with_progress_token(
        serde_json::from_value::<ProgressToken>(json!("tok-1")).unwrap(),
    ));
    let result = service.call_tool(params).await.unwrap();
    assert_eq!(tool_text(&result).0, "done after 5 steps");
    let progress = handler.wait_for("progress", 5).await;
    // The client may handle notifications concurrently; the order on the wire is checked below.
    let mut values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0]);
    // rmcp sends a token of its own choosing; every notification must carry that one token.
    assert!(
        progress
            .iter()
            .all(|p| p["progressToken"] == progress[0]["progressToken"] && p["total"] == 5.0),
        "{progress:?}"
    );
    assert!(progress.iter().any(|p| p["message"] == "step 5 of 5"));
    // (rmcp puts a progress token on every request; the raw test below covers requests
    // without one.)
}

#[tokio::test]
async fn progress_notifications_come_before_the_response_on_the_wire() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":3},"_meta":{"progressToken":42}}}"#).await;
    let mut seen = Vec::new();
    loop {
        let message = raw.recv().await;
        if message["id"] == 9 {
            break;
        }
        assert_eq!(message["method"], "notifications/progress");
        assert_eq!(message["params"]["progressToken"], 42);
        seen.push(message["params"]["progress"].as_f64().unwrap());
    }
    assert_eq!(seen, [1.0, 2.0, 3.0]);
    // Without a token, the reply is the next message: no progress at all.
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":3}}}"#)
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "done after 3 steps");
}

#[tokio::test]
async fn a_cancelled_call_stops_sends_no_response_and_frees_its_instance() {
    let dir = plugin_dir(&[
        ("interactive", "interactive.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    // One instance slot: the next call can only run once the cancelled one is gone.
    let mut raw = Raw::initialized(dir.path(), &["--max-instances", "1"]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"countdown","arguments":{"steps":1000,"delay_ms":50},"_meta":{"progressToken":"p"}}}"#).await;
    let first = raw.recv().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"user gave up"}}"#).await;
    raw.send(br#"{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}"#).await;
    loop {
        let message = raw.recv().await;
        assert_ne!(
            message["id"], "long",
            "a cancelled request must get no response: {message}"
        );
        if message["id"] == "next" {
            assert_eq!(message["result"]["content"][0]["text"], "after");
            break;
        }
    }
    // Cancelling something unknown or finished is ignored.
    raw.send(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}"#,
    )
    .await;
    raw.send(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}"#,
    )
    .await;
    raw.assert_alive(1).await;
}

/// Also for a plugin granted a directory, whose calls run on a thread of their own: the
/// cancellation reaches that thread, which drops the call and frees its instance.
#[tokio::test]
async fn a_call_that_ignores_cancellation_is_interrupted_after_a_grace_period() {
    let data = tempfile::tempdir().unwrap();
    let grants = [
        String::new(),
        format!("[[dirs]]\nhost = {:?}\nguest = \"/data\"\n", data.path()),
    ];
    for grant in grants {
        let dir = plugin_dir(&[
            ("hostile", "hostile.wasm"),
            ("echo_tools", "echo_tools.wasm"),
        ]);
        std::fs::write(
            dir.path().join("hostile.toml"),
            format!("[limits]\nfuel = 1_000_000_000_000_000\ntimeout-ms = 60000\n\n{grant}"),
        )
        .unwrap();
        let mut raw = Raw::initialized(dir.path(), &["--max-instances", "1"]).await;
        // Cancelled once its progress report says it spins (cancelled before it starts, it
        // would never run).
        raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spin_reported","_meta":{"progressToken":"p"}}}"#)
            .await;
        let first = raw.recv().await;
        assert_eq!(first["method"], "notifications/progress", "{first}");
        raw.send(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        )
        .await;
        let reply = raw.request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"free"}}}"#).await;
        assert_eq!(
            reply["id"], 2,
            "no response for the cancelled spin ({grant:?}): {reply}"
        );
        assert_eq!(reply["result"]["content"][0]["text"], "free", "{grant:?}");
    }
}

#[tokio::test]
async fn the_rust_client_can_cancel_a_call() {
    let dir = plugin_dir(&[
        ("interactive", "interactive.wasm"),
        ("echo_tools", "echo_tools.wasm"),
    ]);
    let handler = client("{}");
    // One instance slot: the echo below runs only once the cancelled call has let go of it,
    // which it would otherwise hold for 100 s (its time limit raised to let it), past the
    // step the echo is given.
    let service = connect_with(
        dir.path(),
        &["--max-instances", "1", "--timeout-ms", "120000"],
        handler.clone(),
    )
    .await;
    let mut params = call("countdown", json!({"steps": 1000, "delay_ms": 100}));
    params.meta = Some(RequestMetaObject::with_progress_token(
        serde_json::from_value::<ProgressToken>(json!("c")).unwrap(),
    ));
    let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(params));
    let handle = service
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    handler.wait_for("progress", 1).await;
    handle
        .cancel(Some("changed my mind".to_owned()))
        .await
        .unwrap();
    // The call stopped and freed its instance: the next call runs, well before the cancelled
    // one could have finished.
    let result = tokio::time::timeout(
        STEP,
        service.call_tool(call("echo", json!({"text": "after"}))),
    )
    .await
    .expect("the cancelled call still holds the only instance")
    .unwrap();
    assert_eq!(tool_text(&result), ("after".to_owned(), false));
    // The session goes on.
    let result = service
        .call_tool(call("countdown", json!({"steps": 1})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result).0, "done after 1 steps");
}

#[tokio::test]
async fn sampling_elicitation_and_roots_reach_a_capable_client() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let handler = client(ALL_CAPABILITIES);
    let service = connect_with(dir.path(), &[], handler.clone()).await;

    let result = service
        .call_tool(call("summarize", json!({"text": "A long story."})))
        .await
        .unwrap();
    assert_eq!(
        tool_text(&result),
        ("Summary: a short summary".to_owned(), false)
    );
    let request = &handler.events("sampling")[0];
    assert_eq!(request["maxTokens"], 200);
    assert!(
        request["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .ends_with("A long story.")
    );

    let result = service
        .call_tool(call("confirm", json!({"question": "Proceed?"})))
        .await
        .unwrap();
    assert_eq!(
        tool_text(&result),
        (
            r#"action=accept, content={"confirm":true}"#.to_owned(),
            false
        )
    );
    assert_eq!(handler.events("elicitation")[0]["message"], "Proceed?");

    let result = service.call_tool(call("roots", json!({}))).await.unwrap();
    assert_eq!(
        tool_text(&result),
        ("1 root(s): file:///work".to_owned(), false)
    );
}

#[tokio::test]
async fn sampling_is_refused_when_the_client_lacks_the_capability() {
    let dir = plugin_dir(&[("interactive", "interactive.wasm")]);
    let handler = client("{}");
    let service = connect_with(dir.path(), &[], handler.clone()).await;
    for (tool, args, capability, method) in [
        (
            "summarize",
            json!({"text": "x"}),
            "sampling",
            "sampling/createMessage",
        ),
        (
            "confirm",
            json!({"question": "x"}),
            "elicitation",
            "elicitation/create",
        ),
        ("roots", json!({}), "roots", "roots/list"),
    ] {
        let (text, is_error) = tool_text(&service.call_tool(call(tool, args)).await.unwrap());
        assert!(is_error, "{tool}");
        assert_eq!(
            text,
            format!(
                "the client did not declare the `{capability}` capability, so {method} is not available"
            )
        );
    }
    assert!(handler.events("sampling").is_empty() && handler.events("elicitation").is_empty());
}

#[tokio::test]
async fn completion_routes_to_the_owner_and_caps_values_at_100() {
    let dir = plugin_dir(&[
        ("interactive", "interactive.wasm"),
        ("host_probe", "host_probe.wasm"),
    ]);
    let handler = client("{}");
    let service = connect_with(dir.path(), &[], handler).await;
    let capabilities = json(&*service.peer_info().unwrap())["capabilities"].clone();
    assert!(
        capabilities.get("completions").is_some() && capabilities.get("logging").is_some(),
        "{capabilities}"
    );

    let complete = |prompt: &str, argument: &str, value: &str| {
        CompleteRequestParams::new(
            Reference::for_prompt(prompt),
            ArgumentInfo::new(argument, value),
        )
    };
    let result = json(
        &service
            .complete(complete("translate", "language", "g"))
            .await
            .unwrap(),
    );
    assert_eq!(result["completion"]["values"], json!(["German", "Greek"]));

    let result = json(&service.complete(complete("pick", "n", "")).await.unwrap());
    assert_eq!(
        result["completion"]["values"].as_array().unwrap().len(),
        100
    );
    assert_eq!(result["completion"]["total"], 500);
    assert_eq!(result["completion"]["hasMore"], true);

    let (code, _) = error_code(
        &service
            .complete(complete("nope", "x", ""))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, -32602);
}

#[tokio::test]
async fn schemas_pass_through_byte_for_byte_and_arguments_are_validated_against_them() {
    let dir = plugin_dir(&[("host_probe", "host_probe.wasm")]);
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    // Read the raw line: the schema must appear exactly as the plugin wrote it.
    let reply = raw.recv().await;
    let tools = reply["result"]["tools"].as_array().unwrap();
    let tool = tools
        .iter()
        .find(|t| t["name"] == "schema_2020_12")
        .unwrap();
    let schema = tool["inputSchema"].to_string();
    let source = include_str!("../plugins/host-probe/src/lib.rs");
    let written = source
        .split("r##\"")
        .nth(1)
        .unwrap()
        .split("\"##")
        .next()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(written).unwrap().to_string(),
        schema
    );
    for keyword in [
        "$schema",
        "$defs",
        "$anchor",
        "allOf",
        "anyOf",
        "if",
        "then",
        "else",
        "additionalProperties",
    ] {
        assert!(
            schema.contains(&format!("\"{keyword}\"")),
            "{keyword} lost: {schema}"
        );
    }

    let call = |id: u32, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "schema_2020_12", "arguments": args}}).to_string()
    };
    let ok = raw
        .request(&call(
            2,
            json!({"contactMethod": "email", "email": "a@b.c"}),
        ))
        .await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    for bad in [
        json!({"contactMethod": "phone", "email": "a@b.c"}),
        json!({"name": "x", "extra": 1}),
        json!({"email": 5}),
    ] {
        let reply = raw.request(&call(3, bad.clone())).await;
        assert_eq!(reply["result"]["isError"], true, "{bad} → {reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("invalid arguments for tool `schema_2020_12`: "),
            "{text}"
        );
    }

    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bad_output"}}"#)
        .await;
    assert_eq!(reply["result"]["isError"], true);
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("plugin `host_probe` returned structured content that does not match its output schema: "), "{text}");
}
