//! OAuth 2.1 on HTTP against a real authorization server (npm's `oauth2-mock-server`, RS256,
//! started by the test on loopback): the 401 challenge and the Protected Resource Metadata;
//! real signed tokens that are valid, expired, not yet valid, for another audience, from
//! another issuer, signed by an unpublished key, signed by a rotated-in key, and short of a
//! server or plugin scope; an issuer that goes away; two users of one issuer, each bound to
//! their own sessions; and the official Python SDK's OAuth client discovering everything,
//! authorizing with PKCE and stepping up to a plugin's scope.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::external;
use crate::support::{STEP, Stderr, mcpbox, plugin_dir, post, v2026_call_headers};

pub(super) const MOCK: &str = "oauth2-mock-server@9.3.0";
pub(super) const SDK: &str = "mcp==2.3.0";

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The authorization server, killed when dropped. Also mcpbox's own OAuth in
/// [`super::credentials`].
pub(super) struct AuthorizationServer {
    pub(super) url: String,
    /// Killed when dropped.
    _child: Child,
}

impl AuthorizationServer {
    pub(super) async fn start(resource: &str) -> Self {
        let prefix = tokio::task::spawn_blocking(|| external::npm(&[MOCK]))
            .await
            .unwrap();
        // ESM resolves packages beside the script, so it runs from the prefix.
        let script = prefix.join("authorization_server.mjs");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/e2e/services/oauth/authorization_server.mjs"),
            &script,
        )
        .unwrap();
        let port = free_port();
        let mut child = Command::new("node")
            .arg(&script)
            .arg(port.to_string())
            .arg(resource)
            .env("PATH", external::node_path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the authorization server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(STEP, lines.next_line())
            .await
            .expect("the authorization server starts in time");
        assert_eq!(ready.ok().flatten().as_deref(), Some("ready"));
        Self {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
        }
    }

    /// A token from the test route, with `query` (`scope=mcp&expires_in=-3600`, …).
    pub(super) async fn token(&self, query: &str) -> String {
        reqwest::get(format!("{}/test/token?{query}", self.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// mcpbox over HTTP on a port chosen first (its canonical URI names the port), with OAuth.
async fn serve(dir: &Path, issuer: &str, port: u16) -> (tokio::process::Child, Stderr) {
    serve_with(dir, issuer, port, &[]).await
}

/// [`serve`] with `extra` arguments.
async fn serve_with(
    dir: &Path,
    issuer: &str,
    port: u16,
    extra: &[&str],
) -> (tokio::process::Child, Stderr) {
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let address = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--http",
        &address,
        "--oauth-issuer",
        issuer,
        "--oauth-resource",
        &resource,
        "--oauth-scope",
        "mcp",
    ];
    args.extend_from_slice(extra);
    let mut child = mcpbox(dir, &args).spawn().expect("start mcpbox");
    let stderr = Stderr::collect(child.stderr.take().unwrap());
    stderr.wait_for("serving MCP over HTTP").await;
    (child, stderr)
}

fn plugins() -> tempfile::TempDir {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("hostile", "hostile.wasm"),
    ]);
    std::fs::write(dir.path().join("hostile.toml"), "scopes = [\"admin\"]\n").unwrap();
    dir
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const ADMIN: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ok","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// POST a 2026-07-28 `tools/call` of `tool` with `token`: the status, `WWW-Authenticate`,
/// and the body.
async fn call(url: &str, tool: &str, body: &str, token: Option<&str>) -> (u16, String, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = v2026_call_headers(tool).to_vec();
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer));
    }
    let response = post(&reqwest::Client::new(), url, &headers, body).await;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge, response.text().await.unwrap())
}

#[tokio::test]
async fn tokens_are_checked_against_a_real_authorization_server() {
    let dir = plugins();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let (_mcpbox, stderr) = serve(dir.path(), &authorization.url, port).await;

    // No token: 401 pointing at the metadata, with the scope to ask for.
    let (status, challenge, _) = call(&url, "echo", INIT, None).await;
    assert_eq!(status, 401);
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\""))
            && challenge.contains("scope=\"mcp\""),
        "{challenge}"
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], url.as_str());
    assert_eq!(
        metadata["authorization_servers"][0],
        authorization.url.as_str()
    );
    let scopes: Vec<&str> = metadata["scopes_supported"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        scopes.contains(&"mcp") && scopes.contains(&"admin"),
        "{metadata}"
    );

    let valid = authorization.token("scope=mcp").await;
    let (status, _, body) = call(&url, "echo", INIT, Some(&valid)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"hi\""), "{body}");

    for (query, status_wanted, needle) in [
        ("scope=mcp&expires_in=-3600", 401, "expired"),
        ("scope=mcp&nbf_in=3600", 401, "not valid yet"),
        ("scope=mcp&aud=http://127.0.0.1:1/other", 401, "audience"),
        ("scope=mcp&iss=http://127.0.0.1:1", 401, "issuer"),
        ("scope=mcp&stranger=1", 401, "does not publish"),
        ("scope=other", 403, "insufficient_scope"),
    ] {
        let token = authorization.token(query).await;
        let (status, challenge, body) = call(&url, "echo", INIT, Some(&token)).await;
        assert_eq!(status, status_wanted, "{query}: {body}");
        assert!(
            challenge.contains(needle) || body.contains(needle),
            "{query}: `{needle}` in neither {challenge:?} nor {body:?}"
        );
        assert!(!body.contains(&token), "the token is never echoed");
    }
    let (_, challenge, _) = call(
        &url,
        "echo",
        INIT,
        Some(&authorization.token("scope=mcp&expires_in=-3600").await),
    )
    .await;
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");

    // A plugin's own scope: 403 naming it, until the token carries it.
    let (status, challenge, _) = call(&url, "ok", ADMIN, Some(&valid)).await;
    assert_eq!(status, 403);
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"admin\""),
        "{challenge}"
    );
    let admin = authorization.token("scope=mcp%20admin").await;
    let (status, _, body) = call(&url, "ok", ADMIN, Some(&admin)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fine"), "{body}");

    // The issuer rotates its keys: a token signed by the new key is accepted (fetched anew).
    let kid = reqwest::get(format!("{}/test/rotate", authorization.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rotated = authorization.token(&format!("scope=mcp&kid={kid}")).await;
    let (status, _, body) = call(&url, "echo", INIT, Some(&rotated)).await;
    assert_eq!(status, 200, "{body}");

    // The issuer goes away: tokens of keys held still pass; an unknown key cannot be checked.
    let stranger = authorization.token("scope=mcp&stranger=1").await;
    drop(authorization);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, _, body) = call(&url, "echo", INIT, Some(&rotated)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = call(&url, "echo", INIT, Some(&stranger)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("cannot check the token"), "{body}");
    assert!(!stderr.text().contains(&valid), "tokens are never logged");
}

#[tokio::test]
async fn two_users_of_one_issuer_cannot_use_each_others_sessions() {
    let dir = plugins();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let (_mcpbox, stderr) = serve(dir.path(), &authorization.url, port).await;
    let alice = format!(
        "Bearer {}",
        authorization.token("scope=mcp&sub=alice").await
    );
    let bob = format!("Bearer {}", authorization.token("scope=mcp&sub=bob").await);
    let client = reqwest::Client::new();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let echo = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hers"}}}"#;

    let response = post(&client, &url, &[("authorization", &alice)], initialize).await;
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let as_bob = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(&client, &url, &as_bob, echo).await;
    assert_eq!(
        response.status(),
        404,
        "bob calls a tool in alice's session"
    );
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = client
            .request(method.clone(), &url)
            .header("authorization", &bob)
            .header("mcp-session-id", &session)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "bob's {method} of alice's session");
    }
    let as_alice = [
        ("authorization", alice.as_str()),
        ("mcp-session-id", &session),
    ];
    let response = post(&client, &url, &as_alice, echo).await;
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("hers"));

    // The SSE transport (2024-11-05): bob's message to alice's stream is refused.
    let stream = client
        .get(format!("http://127.0.0.1:{port}/sse"))
        .header("authorization", &alice)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = crate::support::SseReader::new(stream);
    let endpoint = tokio::time::timeout(STEP, events.next())
        .await
        .unwrap()
        .unwrap();
    let messages = format!("http://127.0.0.1:{port}{}", endpoint.data.trim());
    let response = post(&client, &messages, &[("authorization", &bob)], initialize).await;
    assert_eq!(response.status(), 404, "bob posts to alice's SSE session");
    let response = post(&client, &messages, &[("authorization", &alice)], initialize).await;
    assert_eq!(response.status(), 202);
    assert!(
        stderr.text().contains("did not create it"),
        "the refusal is logged"
    );
}

#[tokio::test]
async fn each_user_of_one_issuer_has_budgets_of_their_own() {
    let dir = plugins();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        "[budgets]\nsessions = 1\n\n[budgets.scope.bulk]\nsessions = 3\n",
    )
    .unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let audit = config_dir.path().join("audit.jsonl");
    let (_mcpbox, _stderr) = serve_with(
        dir.path(),
        &authorization.url,
        port,
        &[
            "--config",
            config.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    )
    .await;
    let token = async |query: &str| format!("Bearer {}", authorization.token(query).await);
    let alice = token("scope=mcp&sub=alice").await;
    let bob = token("scope=mcp&sub=bob").await;
    let carol = token("scope=mcp%20bulk&sub=carol").await;
    let client = reqwest::Client::new();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let open = async |who: &str| post(&client, &url, &[("authorization", who)], initialize).await;

    assert_eq!(open(&alice).await.status(), 200);
    let refused = open(&alice).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "sessions", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("sub:alice"), "{message}");
    // Another subject of the same issuer has a budget of their own.
    assert_eq!(open(&bob).await.status(), 200);
    // A scope raises the budget of its holders.
    for _ in 0..3 {
        assert_eq!(open(&carol).await.status(), 200);
    }
    assert_eq!(open(&carol).await.status(), 429);

    // The audit log names each user by issuer and subject.
    let (status, _, body) = call(&url, "echo", INIT, alice.strip_prefix("Bearer ")).await;
    assert_eq!(status, 200, "{body}");
    let mut record = String::new();
    for _ in 0..100 {
        record = std::fs::read_to_string(&audit).unwrap_or_default();
        if !record.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let record: serde_json::Value = serde_json::from_str(record.trim()).unwrap();
    let principal = record["principal"].as_str().unwrap();
    assert!(
        principal.starts_with("oauth:") && principal.ends_with(" sub:alice"),
        "{record}"
    );
    assert_eq!(record["item"], "echo", "{record}");
}

#[tokio::test]
async fn each_user_of_one_issuer_lists_only_what_their_scopes_reach() {
    let dir = plugins();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let (_mcpbox, _stderr) = serve(dir.path(), &authorization.url, port).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let tools = async |query: &str| {
        let token = format!("Bearer {}", authorization.token(query).await);
        let headers = [
            ("authorization", token.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ];
        let response = post(&reqwest::Client::new(), &url, &headers, list).await;
        assert_eq!(response.status(), 200);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["result"]["cacheScope"], "private", "{body}");
        body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    // The hostile plugin requires `admin`: alice, who holds it, sees its tools; bob does not.
    let alice = tools("scope=mcp%20admin&sub=alice").await;
    let bob = tools("scope=mcp&sub=bob").await;
    assert!(alice.iter().any(|t| t == "ok"), "{alice:?}");
    assert!(!bob.iter().any(|t| t == "ok"), "{bob:?}");
    assert!(bob.iter().any(|t| t == "echo"), "{bob:?}");
}

#[tokio::test]
async fn the_python_sdk_discovers_authorizes_and_steps_up() {
    let dir = plugins();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let (_mcpbox, stderr) = serve(dir.path(), &authorization.url, port).await;
    let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
        .await
        .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/oauth_client.py");
    let output = tokio::time::timeout(
        STEP,
        Command::new(python)
            .arg(&script)
            .arg(&url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finishes in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.ends_with("done\n"),
        "the Python OAuth client failed:\n{stdout}\n{}\nmcpbox:\n{}",
        String::from_utf8_lossy(&output.stderr),
        stderr.text()
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"token scope=mcp"), "{stdout}");
    assert!(lines.contains(&"step-up ok"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("token scope=") && l.contains("admin")),
        "the second token carries the plugin's scope: {stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| **l == "authorizing").count(),
        2,
        "{stdout}"
    );
}

/// Plugins that serve many users, over OAuth and on Redis with two replicas: each user's id
/// is the same on both replicas, their to-do items and notes are their own whichever replica
/// serves them, their own secret reaches them alone, and the operator can list and remove one
/// user's data by issuer and subject.
#[tokio::test]
async fn each_user_keeps_their_own_data_and_secrets_across_two_replicas_on_redis() {
    let redis = crate::external::Redis::start();
    multi_user_over_oauth(&["--state", &redis.url()], true).await;
}

/// The same with one mcpbox on the embedded store (which one process holds at a time).
#[tokio::test]
async fn each_user_keeps_their_own_data_and_secrets_on_the_embedded_store() {
    let state = tempfile::tempdir().unwrap();
    multi_user_over_oauth(&["--state-dir", state.path().to_str().unwrap()], false).await;
}

/// Two OAuth users of the multi-user plugins, with `state` saying where state lives: through
/// two replicas sharing it (`replicas`), or through one mcpbox asked twice.
async fn multi_user_over_oauth(state: &[&str], replicas: bool) {
    use crate::multi_user::{json_of, tool};
    use crate::support::{HttpServer, RecordingClient};
    use serde_json::json;

    let dir = crate::multi_user::plugins();
    let (port_one, port_two) = (free_port(), free_port());
    // Behind a balancer both replicas answer for one resource.
    let resource = format!("http://127.0.0.1:{port_one}/mcp");
    let authorization = AuthorizationServer::start(&resource).await;
    let issuer = authorization.url.clone();
    let config_dir = tempfile::tempdir().unwrap();
    let secrets = config_dir.path().join("secrets.toml");
    std::fs::write(
        &secrets,
        format!(
            "service-token = \"everyones-SECRET\"\n[principal.\"oauth:{issuer} sub:alice\"]\nservice-token = \"alices-own-SECRET\"\n"
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let replica = async |port: u16| {
        let address = format!("127.0.0.1:{port}");
        let mut args = vec![
            "--http",
            &address,
            "--oauth-issuer",
            &issuer,
            "--oauth-resource",
            &resource,
            "--oauth-scope",
            "mcp",
            "--secrets",
            secrets.to_str().unwrap(),
        ];
        args.extend_from_slice(state);
        let mut child = mcpbox(dir.path(), &args).spawn().expect("start mcpbox");
        let stderr = Stderr::collect(child.stderr.take().unwrap());
        stderr.wait_for("serving MCP over HTTP").await;
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            stderr,
        }
    };
    let one = replica(port_one).await;
    let second = if replicas {
        Some(replica(port_two).await)
    } else {
        None
    };
    let two = second.as_ref().unwrap_or(&one);
    let alice_token = authorization
        .token("scope=mcp&sub=alice&name=Alice%20Liddell")
        .await;
    let bob_token = authorization.token("scope=mcp&sub=bob").await;
    let connect = async |server: &HttpServer, token: &str| {
        server
            .connect(RecordingClient::new(&json!({})), Some(token))
            .await
    };
    let alice_one = connect(&one, &alice_token).await;
    let alice_two = connect(two, &alice_token).await;
    let bob_two = connect(two, &bob_token).await;

    // One id per user, whichever replica asks (the key lives in the shared store).
    let a1 = json_of(&alice_one, "whoami", json!({})).await;
    let a2 = json_of(&alice_two, "whoami", json!({})).await;
    let b2 = json_of(&bob_two, "whoami", json!({})).await;
    assert_eq!(a1["id"], a2["id"]);
    assert_ne!(a1["id"], b2["id"]);
    assert_eq!(a1["kind"], "oauth");
    assert_eq!(a1["name"], "Alice Liddell");
    assert_eq!(a1["scopes"], json!(["mcp"]));
    assert!(!a1.to_string().contains("alice"), "{a1}");

    // Each user's items, whichever replica serves them.
    json_of(&alice_one, "add", json!({"text": "alice via one"})).await;
    json_of(&bob_two, "add", json!({"text": "bob via two"})).await;
    let texts = |list: serde_json::Value| crate::support::item_texts(&list);
    assert_eq!(
        texts(json_of(&alice_two, "list", json!({})).await),
        ["alice via one"]
    );
    assert_eq!(
        texts(json_of(&bob_two, "list", json!({})).await),
        ["bob via two"]
    );

    // A caller's quota holds on Redis too (a counter and three notes).
    for n in 1..=3 {
        json_of(
            &alice_one,
            "remember",
            json!({ "text": format!("note {n}") }),
        )
        .await;
    }
    let (text, error) = tool(&alice_two, "remember", json!({"text": "one too many"})).await;
    assert!(error && text.contains("caller-max-keys"), "{text}");

    // Her own secret, his the shared one.
    let key = json!({"key": "api-token"});
    let alices = json_of(&alice_two, "config_get", key.clone()).await;
    let bobs = json_of(&bob_two, "config_get", key).await;
    assert_eq!(alices["value"], "alices-own-SECRET");
    assert_eq!(bobs["value"], "everyones-SECRET");

    for server in [&one, two] {
        let log = server.stderr.text();
        for secret in ["alices-own-SECRET", "everyones-SECRET", &alice_token] {
            assert!(!log.contains(secret), "the log shows a secret:\n{log}");
        }
    }
    for client in [alice_one, alice_two, bob_two] {
        client.cancel().await.unwrap();
    }

    // The operator: one user's data, by issuer and subject; then bob leaves. The embedded
    // store has one user at a time, so there mcpbox stops first and starts again after.
    let mut one = one;
    if !replicas {
        one.child.kill().await.unwrap();
        one.child.wait().await.unwrap();
    }
    let state_cli = |more: &[&str]| crate::support::state_cli(more, state);
    let alice_key = format!("oauth:{issuer} sub:alice");
    let bob_key = format!("oauth:{issuer} sub:bob");
    let (listing, ok) = state_cli(&["ls", "todo", "--principal", &alice_key]);
    assert!(
        ok && listing.contains("default\titem:") && !listing.contains("bob"),
        "{listing}"
    );
    let (listing, ok) = state_cli(&["ls", "todo"]);
    assert!(
        ok && listing.contains("2 callers have buckets of their own"),
        "{listing}"
    );
    let (removed, ok) = state_cli(&["rm", "todo", "--principal", &bob_key]);
    assert!(
        ok && removed.contains("removed all state of caller"),
        "{removed}"
    );
    let one = if replicas {
        one
    } else {
        replica(port_one).await
    };
    let two = second.as_ref().unwrap_or(&one);
    let bob = connect(two, &bob_token).await;
    let alice = connect(&one, &alice_token).await;
    assert!(texts(json_of(&bob, "list", json!({})).await).is_empty());
    assert_eq!(
        texts(json_of(&alice, "list", json!({})).await),
        ["alice via one"]
    );
    for client in [alice, bob] {
        client.cancel().await.unwrap();
    }
}

/// A token's `sub` is the issuer's text, not mcpbox's: a newline in it reaches the scope
/// refusal's log line escaped, never as a line of its own.
#[tokio::test]
async fn a_subject_with_a_newline_cannot_forge_a_log_line() {
    let dir = plugins();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start(&url).await;
    let (_mcpbox, stderr) = serve(dir.path(), &authorization.url, port).await;
    let token = authorization
        .token("scope=mcp&sub=mallory%0AFORGED%20INFO%20mcpbox%3A%20admin%20granted%0D%00")
        .await;
    let (status, _, body) = call(&url, "ok", ADMIN, Some(&token)).await;
    assert_eq!(status, 403, "{body}");
    let log = stderr.wait_for("lacks a plugin's scopes").await;
    assert!(
        log.contains(r"mallory\nFORGED INFO mcpbox: admin granted\r\u0000"),
        "{log}"
    );
    for line in log.lines() {
        assert!(
            !line.starts_with("FORGED") && !line.contains('\r') && !line.contains('\0'),
            "the token's subject began or hid a line of the log: {line:?}"
        );
    }
}
