//! MCP 2026-07-28 details no SDK shows directly, on the wire: per-request log opt-in,
//! cancelling a listen stream on stdio, both revisions in one stdio process, and on HTTP the
//! mirror headers, statuses, no sessions, SSE only when a request streams, and cancellation by
//! closing the response.

use serde_json::{Value, json};

use crate::support::{HttpServer, Raw, SseReader, plugin_dir, post};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
const META_INFO: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}"#;

fn plugins() -> tempfile::TempDir {
    plugin_dir(&[
        ("conformance", "conformance.wasm"),
        ("interactive", "interactive.wasm"),
    ])
}

#[tokio::test]
async fn logs_reach_only_requests_that_opted_in() {
    let dir = plugins();
    let mut raw = Raw::start(dir.path(), &[]);
    let call = |id: u32, meta: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"test_tool_with_logging","arguments":{{}},{meta}}}}}"#
        )
    };
    let reply = raw.request(&call(1, META)).await;
    assert_eq!(reply["id"], 1, "no log before the result: {reply}");
    assert_eq!(reply["result"]["resultType"], "complete");
    raw.send(call(2, META_INFO).as_bytes()).await;
    let mut logs = 0;
    loop {
        let message = raw.recv().await;
        if message["method"] == "notifications/message" {
            assert_eq!(message["params"]["logger"], "conformance");
            logs += 1;
            continue;
        }
        assert_eq!(message["id"], 2, "{message}");
        break;
    }
    assert_eq!(logs, 3);
    let bad = raw
        .request(&call(3, r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}"#))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap().contains("loud"));
}

#[tokio::test]
async fn a_stdio_listen_ends_when_cancelled_and_both_revisions_share_the_process() {
    let dir = plugins();
    let mut raw = Raw::start(dir.path(), &[]);
    let ack = raw
        .request(&format!(
            r#"{{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"resourceSubscriptions":["test://static-text"]}},{META}}}}}"#
        ))
        .await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": "l1"}, "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://static-text"]}})
    );
    raw.send(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"l1"}}"#,
    )
    .await;
    // A 2025-11-25 client can still start its session in the same process.
    let init = raw
        .request(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#)
        .await;
    assert_eq!(
        init["id"], "init",
        "the cancelled listen sent nothing more: {init}"
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    raw.assert_alive(7).await;
    // A removed method in the new revision is not found; `initialize` stays a handshake.
    let ping = raw
        .request(&format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"ping","params":{{{META}}}}}"#
        ))
        .await;
    assert_eq!(ping["error"]["code"], -32601, "{ping}");
    let (rest, status) = raw.finish().await;
    assert!(
        rest.is_empty(),
        "nothing after the cancelled listen: {rest:?}"
    );
    assert!(status.success());
}

#[tokio::test]
async fn http_checks_the_mirror_headers_and_keeps_no_session() {
    let dir = plugins();
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"test_simple_text","arguments":{{}},{META}}}}}"#
    );
    let good = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "test_simple_text"),
    ];
    let response = post(&client, &server.url, &good, &call).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_none());
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "no notifications, so one JSON answer"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["resultType"], "complete");

    for (headers, what) in [
        (&good[..2], "missing Mcp-Name"),
        (&[good[0], good[1], ("mcp-name", "other")][..], "Mcp-Name"),
        (
            &[good[0], ("mcp-method", "tools/list"), good[2]][..],
            "Mcp-Method",
        ),
    ] {
        let response = post(&client, &server.url, headers, &call).await;
        assert_eq!(response.status(), 400, "{what}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32020, "{what}: {body}");
        assert_eq!(body["id"], 1);
    }
    let ping = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{{META}}}}}"#);
    let response = post(
        &client,
        &server.url,
        &[good[0], ("mcp-method", "ping")],
        &ping,
    )
    .await;
    assert_eq!(response.status(), 404);
    // A listen stream needs SSE.
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let response = client
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(listen)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 406);
    let get = client
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
}

#[tokio::test]
async fn closing_the_http_response_cancels_the_call() {
    let dir = plugins();
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":1000,"delay_ms":20},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let response = post(
        &client,
        &server.url,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "countdown"),
        ],
        body,
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut events = SseReader::new(response);
    let (_, first) = events.next_json().await.expect("a progress event");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    drop(events);
    let log = server.stderr.wait_for("cancelled at step").await;
    assert!(!log.contains("done after 1000 steps"));
}

/// rmcp's own client (3.11) in its 2026-07-28 mode over stdio: `server/discover`, lists, a
/// call, and an input request answered by its elicitation handler (MRTR).
#[tokio::test]
async fn rmcps_v2026_client_works_over_stdio() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    use rmcp::transport::TokioChildProcess;

    let dir = plugins();
    let handler = crate::support::RecordingClient::new(&json!({"elicitation": {}}));
    let (transport, stderr) = TokioChildProcess::builder(crate::support::mcpbox(dir.path(), &[]))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = crate::support::Stderr::collect(stderr.unwrap());
    let service = tokio::time::timeout(
        crate::support::STEP,
        handler.clone().serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    )
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("discover failed: {e}\n{}", stderr.text()));
    let tools = service.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "test_simple_text"));
    let result = service
        .call_tool(crate::support::call("test_simple_text", json!({})))
        .await
        .unwrap();
    assert_eq!(
        crate::support::tool_text(&result).0,
        "This is a simple text response for testing."
    );
    let asked = service
        .call_tool(crate::support::call(
            "test_input_required_result_request_state",
            json!({}),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", stderr.text()));
    assert_eq!(
        crate::support::tool_text(&asked),
        ("state-ok".to_owned(), false)
    );
    assert_eq!(handler.events("elicitation").len(), 1);
    drop(service);
}

/// POST a 2026-07-28 call of `test_custom_headers` with `arguments` and `headers` besides the
/// standard ones (appended in order, repeats kept): the status and the JSON answer.
async fn custom_headers_call(
    client: &reqwest::Client,
    url: &str,
    arguments: &str,
    headers: &[(String, reqwest::header::HeaderValue)],
) -> (u16, Value) {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (name, value) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "test_custom_headers"),
    ] {
        map.insert(name, HeaderValue::from_static(value));
    }
    for (name, value) in headers {
        map.append(HeaderName::try_from(name.as_str()).unwrap(), value.clone());
    }
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"test_custom_headers","arguments":{arguments},{META}}}}}"#
    );
    let response = client
        .post(url)
        .headers(map)
        .body(call)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Issue #55, findings 10 and 11: every `Mcp-Param-*` header is read (none pushed out of view
/// by junk ones), at most 64 of them, each once, and only UTF-8 values; the refusals are the
/// same 400 with -32020 as a repeated `Mcp-Method`.
#[tokio::test]
async fn every_mcp_param_header_is_read_once_and_as_utf8() {
    use reqwest::header::HeaderValue;
    let dir = plugins();
    let server = HttpServer::start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let text = |value: &'static str| HeaderValue::from_static(value);
    let junk = |n: usize| -> Vec<(String, HeaderValue)> {
        (0..n)
            .map(|i| (format!("mcp-param-junk{i}"), text("x")))
            .collect()
    };
    let region = |value: HeaderValue| ("mcp-param-region".to_owned(), value);
    let expect_refused = |(status, answer): (u16, Value), needle: &str| {
        assert_eq!(status, 400, "{needle}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{needle}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{needle}: {answer}");
    };

    // The body names no region; a proxy would route on the header's `us`. Behind 70 junk
    // headers it used to be out of view, and the call served against its body.
    let mut headers = junk(70);
    headers.push(region(text("us")));
    expect_refused(
        custom_headers_call(&client, &server.url, r#"{"query":"q"}"#, &headers).await,
        "71 Mcp-Param-* headers; at most 64",
    );
    // Within the limit, it is read, and the mismatch refused.
    let mut headers = junk(63);
    headers.push(region(text("us")));
    expect_refused(
        custom_headers_call(&client, &server.url, r#"{"query":"q"}"#, &headers).await,
        "Mcp-Param-Region",
    );
    // 64 in all, matching the body: served.
    let mut headers = junk(62);
    headers.push(region(text("eu")));
    headers.push(("mcp-param-priority".to_owned(), text("1")));
    let (status, answer) = custom_headers_call(
        &client,
        &server.url,
        r#"{"region":"eu","priority":1,"query":"q"}"#,
        &headers,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Custom headers test completed")
    );

    // Two values (`eu`, then `us`): refused, whichever the body names.
    let twice = [
        region(text("eu")),
        region(text("us")),
        ("mcp-param-priority".to_owned(), text("1")),
    ];
    expect_refused(
        custom_headers_call(
            &client,
            &server.url,
            r#"{"region":"eu","priority":1,"query":"q"}"#,
            &twice,
        )
        .await,
        "mcp-param-region header appears 2 times",
    );
    // A byte that is not UTF-8 never matches the body's U+FFFD.
    let invalid = [
        region(HeaderValue::from_bytes(b"\xff").unwrap()),
        ("mcp-param-priority".to_owned(), text("1")),
    ];
    expect_refused(
        custom_headers_call(
            &client,
            &server.url,
            r#"{"region":"\ufffd","priority":1,"query":"q"}"#,
            &invalid,
        )
        .await,
        "mcp-param-region header's value is not UTF-8",
    );
}
