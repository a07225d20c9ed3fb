//! Principals over HTTP with static tokens: the configuration file names each token (by its
//! SHA-256 digest, with its scopes), and each request is known by the token it carries. A
//! 2025-11-25 session and an SSE session (2024-11-05) answer only the caller that created them:
//! another caller's POST, GET and DELETE with the session's id get 404, exactly as for an
//! id that does not exist, and the owner's session carries on untouched. A token grants
//! only its scopes: a plugin requiring another gets 403 `insufficient_scope`. A 2026-07-28
//! `requestState` binds the caller it was issued to: another caller's retry with it is
//! -32602 and the plugin does not run for them.

use std::path::Path;

use serde_json::Value;

use crate::support::{HttpServer, STEP, SseReader, plugin_dir, post, token_config};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

/// A configuration file naming alice's token (with the `admin` scope) and bob's (none).
fn config(dir: &Path) -> std::path::PathBuf {
    token_config(dir, &[("alice", ALICE, &["admin"]), ("bob", BOB, &[])], "")
}

async fn start() -> (HttpServer, tempfile::TempDir, tempfile::TempDir) {
    let plugins = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("hostile", "hostile.wasm"),
        ("interactive", "interactive.wasm"),
    ]);
    std::fs::write(
        plugins.path().join("hostile.toml"),
        "scopes = [\"admin\"]\n",
    )
    .unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config(config_dir.path());
    let server = HttpServer::start(plugins.path(), &["--config", config.to_str().unwrap()]).await;
    (server, plugins, config_dir)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

use crate::support::INITIALIZE;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const ECHO: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mine"}}}"#;

/// Open a 2025-11-25 session as `token`; its id.
async fn open_session(client: &reqwest::Client, url: &str, token: &str) -> String {
    let auth = bearer(token);
    let response = post(client, url, &[("authorization", &auth)], INITIALIZE).await;
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let headers = [("authorization", auth.as_str()), ("mcp-session-id", &id)];
    let response = post(client, url, &headers, INITIALIZED).await;
    assert_eq!(response.status(), 202);
    id
}

/// The JSON-RPC message in a response body (plain JSON, or the last `data:` of an event
/// stream).
fn message(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(body);
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn a_session_answers_only_the_caller_that_created_it() {
    let (server, _plugins, _config) = start().await;
    let client = reqwest::Client::new();
    let url = &server.url;
    let session = open_session(&client, url, ALICE).await;
    let (alice, bob) = (bearer(ALICE), bearer(BOB));
    let as_alice = [
        ("authorization", alice.as_str()),
        ("mcp-session-id", &session),
    ];
    let as_bob = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", &session),
    ];

    // Bob holding alice's session id: everything is 404, as for an id that never existed.
    let response = post(&client, url, &as_bob, ECHO).await;
    assert_eq!(response.status(), 404, "bob's POST in alice's session");
    let unknown = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", "0123abcd"),
    ];
    let never = post(&client, url, &unknown, ECHO).await;
    assert_eq!(never.status(), 404);
    assert_eq!(
        response.text().await.unwrap(),
        never.text().await.unwrap(),
        "no oracle: another's session reads exactly as a missing one"
    );
    let get = client
        .get(url)
        .header("authorization", &bob)
        .header("mcp-session-id", &session)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 404, "bob's GET of alice's stream");
    let delete = client
        .delete(url)
        .header("authorization", &bob)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 404, "bob's DELETE of alice's session");

    // Alice's session is untouched.
    let response = post(&client, url, &as_alice, ECHO).await;
    assert_eq!(response.status(), 200);
    let reply = message(&response.text().await.unwrap());
    assert_eq!(reply["result"]["content"][0]["text"], "mine", "{reply}");
    let delete = client
        .delete(url)
        .header("authorization", &alice)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 200);
    assert!(
        !server.stderr.text().contains(ALICE) && !server.stderr.text().contains(BOB),
        "a token's value is never logged"
    );
}

#[tokio::test]
async fn an_sse_session_takes_messages_only_from_its_caller() {
    let (server, _plugins, _config) = start().await;
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", server.port);
    let (alice, bob) = (bearer(ALICE), bearer(BOB));
    let stream = client
        .get(format!("{base}/sse"))
        .header("authorization", &alice)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = SseReader::new(stream);
    let endpoint = tokio::time::timeout(STEP, events.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let messages = format!("{base}{}", endpoint.data.trim());

    let response = post(&client, &messages, &[("authorization", &bob)], INITIALIZE).await;
    assert_eq!(
        response.status(),
        404,
        "bob's message to alice's SSE session"
    );

    let response = post(&client, &messages, &[("authorization", &alice)], INITIALIZE).await;
    assert_eq!(response.status(), 202);
    let (_, reply) = tokio::time::timeout(STEP, events.next_json())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        reply["id"], 1,
        "only alice's initialize is answered: {reply}"
    );
    assert!(reply["result"]["protocolVersion"].is_string(), "{reply}");
}

#[tokio::test]
async fn a_token_grants_its_own_scopes_and_no_others() {
    let (server, _plugins, _config) = start().await;
    let client = reqwest::Client::new();
    let url = &server.url;
    let call_ok =
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ok","arguments":{}}}"#;

    // Bob's token grants no scope: the plugin requiring `admin` is refused before it runs.
    let session = open_session(&client, url, BOB).await;
    let bob = bearer(BOB);
    let headers = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(&client, url, &headers, call_ok).await;
    assert_eq!(response.status(), 403);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("insufficient_scope") && challenge.contains("scope=\"admin\""),
        "{challenge}"
    );
    // Fields the method ignores, malformed, do not hide which plugin it reaches.
    let junk = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ok","arguments":{},"ref":5,"uri":[1]}}"#;
    let response = post(&client, url, &headers, junk).await;
    assert_eq!(response.status(), 403);
    // A plugin that requires no scope serves him.
    let response = post(&client, url, &headers, ECHO).await;
    assert_eq!(response.status(), 200);

    // Alice's grants `admin`.
    let session = open_session(&client, url, ALICE).await;
    let alice = bearer(ALICE);
    let headers = [
        ("authorization", alice.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(&client, url, &headers, call_ok).await;
    assert_eq!(response.status(), 200);
    let reply = message(&response.text().await.unwrap());
    assert!(reply["result"].is_object(), "{reply}");

    // A token nobody configured: 401.
    let response = post(
        &client,
        url,
        &[("authorization", "Bearer nobody")],
        INITIALIZE,
    )
    .await;
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn a_bad_token_entry_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcpbox.toml");
    for (text, needle) in [
        ("[tokens.carol]\nsha256 = \"abc\"\n", "tokens.carol"),
        ("[tokens.carol]\nscopes = [\"a\"]\n", "missing `sha256`"),
        (
            "[tokens.carol]\nsha256 = \"00000000000000000000000000000000000000000000000000000000000000aa\"\ntoken = \"x\"\n",
            "unknown key `token`",
        ),
        (
            "[tokens.a]\nsha256 = \"00000000000000000000000000000000000000000000000000000000000000aa\"\n[tokens.b]\nsha256 = \"00000000000000000000000000000000000000000000000000000000000000aa\"\n",
            "same digest",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .args(["check", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.status.success(), "{text} was accepted");
        assert!(said.contains(needle), "`{needle}` not in: {said}");
    }
}

/// A 2026-07-28 `confirm` call of the interactive example as `token`, with `retry` fields;
/// the status and the JSON-RPC answer.
async fn confirm(client: &reqwest::Client, url: &str, token: &str, retry: &str) -> (u16, Value) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"confirm","arguments":{{"question":"delete everything"}}{retry},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}}}}}}}}}}"#
    );
    let auth = bearer(token);
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "confirm"),
    ];
    let response = post(client, url, &headers, &body).await;
    let status = response.status().as_u16();
    (status, message(&response.text().await.unwrap()))
}

#[tokio::test]
async fn a_request_state_answers_only_the_caller_it_was_issued_to() {
    let (server, _plugins, _config) = start().await;
    let client = reqwest::Client::new();
    let (_, first) = confirm(&client, &server.url, ALICE, "").await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let answer = format!(
        r#","requestState":"{state}","inputResponses":{{"elicitation-1":{{"action":"accept","content":{{"confirm":true}}}}}}"#
    );

    // Bob completes alice's input request with her state: refused, the plugin does not run.
    let (_, refused) = confirm(&client, &server.url, BOB, &answer).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another caller"),
        "{refused}"
    );
    assert!(!refused.to_string().contains("action=accept"), "{refused}");

    // Alice's own retry completes.
    let (_, done) = confirm(&client, &server.url, ALICE, &answer).await;
    assert!(done["result"]["content"].is_array(), "{done}");
    assert!(done.to_string().contains("action=accept"), "{done}");
}

/// The names in a list result's `key` array.
fn names(result: &Value, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {result}"))
        .iter()
        .map(|item| item["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_caller_sees_in_lists_only_what_its_scopes_reach() {
    let plugins = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("hostile", "hostile.wasm"),
        ("code_review", "code_review.wasm"),
        ("quotes", "quotes.wasm"),
    ]);
    std::fs::write(
        plugins.path().join("hostile.toml"),
        "scopes = [\"admin\"]\n",
    )
    .unwrap();
    std::fs::write(
        plugins.path().join("quotes.toml"),
        "[resources]\nscopes = { \"quote://all\" = [\"admin\"] }\n",
    )
    .unwrap();
    // One tool of echo_tools, and the prompt of code_review, need a scope of their own.
    std::fs::write(
        plugins.path().join("echo_tools.toml"),
        "[tools]\nscopes = { divide = [\"admin\"] }\n",
    )
    .unwrap();
    std::fs::write(
        plugins.path().join("code_review.toml"),
        "[prompts]\nscopes = { code_review = [\"admin\"] }\n",
    )
    .unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config(config_dir.path());
    let server = HttpServer::start(plugins.path(), &["--config", config.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    let url = &server.url;
    let list = |method: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        )
    };
    let v2026_list = async |token: &str, method: &str| {
        let auth = bearer(token);
        let headers = [
            ("authorization", auth.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        let response = post(&client, url, &headers, &list(method)).await;
        assert_eq!(response.status(), 200);
        message(&response.text().await.unwrap())["result"].clone()
    };

    // Alice holds `admin`: everything.
    let tools = v2026_list(ALICE, "tools/list").await;
    let alice_tools = names(&tools, "tools");
    for tool in ["echo", "divide", "ok"] {
        assert!(alice_tools.iter().any(|t| t == tool), "{alice_tools:?}");
    }
    // Lists differ by caller: no shared cache may keep them.
    assert_eq!(tools["cacheScope"], "private", "{tools}");
    let prompts = names(&v2026_list(ALICE, "prompts/list").await, "prompts");
    assert!(prompts.iter().any(|p| p == "code_review"), "{prompts:?}");

    // Bob holds none: neither the gated tool, nor the gated plugin's tools, nor the prompt.
    let bob_tools = names(&v2026_list(BOB, "tools/list").await, "tools");
    assert!(bob_tools.iter().any(|t| t == "echo"), "{bob_tools:?}");
    for hidden in ["divide", "ok"] {
        assert!(!bob_tools.iter().any(|t| t == hidden), "{bob_tools:?}");
    }
    assert!(alice_tools.len() > bob_tools.len());
    assert_eq!(
        names(&v2026_list(BOB, "prompts/list").await, "prompts"),
        Vec::<String>::new()
    );
    // The same in a 2025-11-25 session.
    let session = open_session(&client, url, BOB).await;
    let auth = bearer(BOB);
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(
        &client,
        url,
        &headers,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    )
    .await;
    let listed = names(&message(&response.text().await.unwrap())["result"], "tools");
    assert_eq!(listed, bob_tools);
    // What he does not see he cannot use: 403 naming the scope, and the plugin does not run.
    let divide = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"divide","arguments":{"dividend":1,"divisor":1}}}"#;
    let response = post(&client, url, &headers, divide).await;
    assert_eq!(response.status(), 403);
    let get = r#"{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"code_review","arguments":{}}}"#;
    let response = post(&client, url, &headers, get).await;
    assert_eq!(response.status(), 403);
    // Nor hear of updates to a resource he may not read: a listen stream leaves it out.
    let listen = r#"{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["quote://all"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    for (token, honoured) in [
        (BOB, serde_json::Value::Null),
        (ALICE, serde_json::json!(["quote://all"])),
    ] {
        let auth = bearer(token);
        let response = client
            .post(url)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(listen)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut events = SseReader::new(response);
        let (_, ack) = tokio::time::timeout(STEP, events.next_json())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            ack["params"]["notifications"]["resourceSubscriptions"], honoured,
            "{ack}"
        );
    }
    // Alice's call of the gated tool runs.
    let session = open_session(&client, url, ALICE).await;
    let auth = bearer(ALICE);
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(&client, url, &headers, divide).await;
    assert_eq!(response.status(), 200);
    let reply = message(&response.text().await.unwrap());
    assert_eq!(reply["result"]["isError"], false, "{reply}");
}
