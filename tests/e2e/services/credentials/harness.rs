//! The harness of the brokered-credentials tests ([`super`]): the downstream provider, the
//! setup every test shares (mcpbox's configuration, secrets and key, its own OAuth, the fake
//! APIs), the clients (raw 2026-07-28 calls, the Python SDK's link client, an rmcp client over
//! stdio) and a browser that keeps its cookies.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::super::fake_api::FakeApi;
use super::super::oauth::{AuthorizationServer, MOCK, SDK, free_port};
use crate::external;
use crate::support::{HttpServer, STEP, Stderr, mcpbox, plugin_dir, post, v2026_call_headers};

const CLIENT_ID: &str = "mcpbox-test-github";
const CLIENT_SECRET: &str = "github-client-SECRET-7f3a";
/// What the GitHub plugin (and so the client) says when the caller has not linked.
pub(super) const LINK_REQUIRED: &str = "Link your GitHub account to use this tool.";
/// A token's life in the refresh tests, and how long before expiry mcpbox refreshes.
pub(super) const SHORT_LIFE_SECS: u64 = 3;

/// The downstream provider (GitHub's OAuth, in the tests), killed when dropped.
pub(super) struct Provider {
    url: String,
    _child: Child,
}

impl Provider {
    pub(super) async fn start() -> Self {
        let prefix = tokio::task::spawn_blocking(|| external::npm(&[MOCK]))
            .await
            .unwrap();
        // ESM resolves packages beside the script, so it runs from the prefix.
        let script = prefix.join("provider.mjs");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/services/oauth/provider.mjs"),
            &script,
        )
        .unwrap();
        let port = free_port();
        let mut child = Command::new("node")
            .arg(&script)
            .arg(port.to_string())
            .arg(CLIENT_ID)
            .arg(CLIENT_SECRET)
            .env("PATH", external::node_path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the provider");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(STEP, lines.next_line())
            .await
            .expect("the provider starts in time");
        assert_eq!(ready.ok().flatten().as_deref(), Some("ready"));
        Self {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
        }
    }

    /// A test route's JSON answer.
    pub(super) async fn get(&self, route: &str) -> Value {
        reqwest::get(format!("{}{route}", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub(super) async fn stats(&self) -> Value {
        self.get("/test/stats").await
    }

    /// Every access and refresh token issued so far.
    pub(super) async fn issued(&self) -> Vec<String> {
        let stats = self.stats().await;
        ["access_tokens", "refresh_tokens"]
            .iter()
            .flat_map(|list| stats[list].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect()
    }

    /// The access tokens issued so far, in order.
    pub(super) async fn access_tokens(&self) -> Vec<String> {
        self.stats().await["access_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    }
}

/// What every test needs: the provider, mcpbox's own OAuth, the fake API (brokered) and a
/// second one (not brokered), the plugins, and mcpbox's configuration, secrets and key.
pub(super) struct Setup {
    pub(super) provider: Provider,
    pub(super) identity: AuthorizationServer,
    pub(super) api: FakeApi,
    pub(super) other: FakeApi,
    pub(super) plugins: tempfile::TempDir,
    pub(super) files: tempfile::TempDir,
}

/// One mcpbox serving over HTTP with OAuth, on a port of its own.
pub(super) struct Mcpbox {
    pub(super) http: HttpServer,
    /// Its OAuth resource (tokens are minted for it).
    pub(super) resource: String,
    /// Where browsers reach it.
    pub(super) origin: String,
}

pub(super) fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

impl Setup {
    /// With `provider_keys` added to `[providers.github]` (say `refresh-before-secs = 1`).
    pub(super) async fn new(provider_keys: &str) -> Self {
        let provider = Provider::start().await;
        // mcpbox's own issuer: tokens name their audience per request (`aud=`).
        let identity = AuthorizationServer::start("http://127.0.0.1:1/unused").await;
        let api = FakeApi::start().await;
        let other = FakeApi::start().await;
        let plugins = plugin_dir(&[("github", "github.wasm"), ("hostile", "hostile.wasm")]);
        let files = tempfile::tempdir().unwrap();
        let p = &provider.url;
        let (a, b) = (api.port, other.port);
        std::fs::write(
            files.path().join("mcpbox.toml"),
            format!(
                r#"[providers.github]
display-name = "GitHub"
authorization-endpoint = "{p}/authorize"
token-endpoint = "{p}/token"
revocation-endpoint = "{p}/revoke"
client-id = "{CLIENT_ID}"
client-secret = {{ secret = "github-client-secret" }}
scopes = ["repo"]
{provider_keys}

[plugin.github]
instances = "per-caller"
[plugin.github.http]
allow = ["127.0.0.1:{a}"]
[plugin.github.http.credentials]
"127.0.0.1:{a}" = "github"
[plugin.github.config]
api-url = "{api_url}"

[plugin.hostile]
[plugin.hostile.http]
allow = ["127.0.0.1:{a}", "127.0.0.1:{b}"]
[plugin.hostile.http.credentials]
"127.0.0.1:{a}" = "github"
"#,
                api_url = api.url,
            ),
        )
        .unwrap();
        private_file(
            &files.path().join("secrets.toml"),
            &format!("github-client-secret = \"{CLIENT_SECRET}\"\n"),
        );
        let mut key = [0u8; 32];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut key)
            .unwrap();
        let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
        private_file(&files.path().join("credentials.key"), &format!("{key}\n"));
        Self {
            provider,
            identity,
            api,
            other,
            plugins,
            files,
        }
    }

    pub(super) fn config(&self) -> PathBuf {
        self.files.path().join("mcpbox.toml")
    }

    pub(super) fn key_file(&self) -> PathBuf {
        self.files.path().join("credentials.key")
    }

    pub(super) fn audit_log(&self) -> PathBuf {
        self.files.path().join("audit.jsonl")
    }

    /// mcpbox on a fresh port, with `extra` arguments.
    pub(super) async fn serve(&self, extra: &[&str]) -> Mcpbox {
        self.serve_on(free_port(), extra).await
    }

    /// mcpbox on `port`, with `extra` arguments (a state store, link settings, …).
    pub(super) async fn serve_on(&self, port: u16, extra: &[&str]) -> Mcpbox {
        let resource = format!("http://127.0.0.1:{port}/mcp");
        let address = format!("127.0.0.1:{port}");
        let config = self.config();
        let secrets = self.files.path().join("secrets.toml");
        let key = self.key_file();
        let audit = self.audit_log();
        let mut args = vec![
            "--http",
            &address,
            "--oauth-issuer",
            &self.identity.url,
            "--oauth-resource",
            &resource,
            "--oauth-scope",
            "mcp",
            "--config",
            config.to_str().unwrap(),
            "--secrets",
            secrets.to_str().unwrap(),
            "--credentials-key-file",
            key.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut child = mcpbox(self.plugins.path(), &args)
            .spawn()
            .expect("start mcpbox");
        let stderr = Stderr::collect(child.stderr.take().unwrap());
        stderr.wait_for("serving MCP over HTTP").await;
        Mcpbox {
            http: HttpServer {
                child,
                url: resource.clone(),
                port,
                stderr,
            },
            resource,
            origin: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A token of mcpbox's own OAuth for `user`, for `server`.
    pub(super) async fn token(&self, user: &str, server: &Mcpbox) -> String {
        self.identity
            .token(&format!("scope=mcp&sub={user}&aud={}", server.resource))
            .await
    }

    /// `user`'s key, as mcpbox names callers.
    pub(super) fn principal(&self, user: &str) -> String {
        format!("oauth:{} sub:{user}", self.identity.url)
    }
}

/// The JSON-RPC response in a POST's answer (JSON, or the last message of an SSE stream).
pub(super) fn rpc_body(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str(text) {
        return value;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC response in {text:?}"))
}

/// A 2026-07-28 `tools/call` of `tool` by the holder of `token`, declaring `capabilities`,
/// with `more` params (`requestState`, `inputResponses`): the JSON-RPC response.
pub(super) async fn call_with(
    server: &Mcpbox,
    token: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    more: Value,
) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
    });
    if let (Value::Object(params), Value::Object(more)) = (&mut params, more) {
        params.extend(more);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let bearer = format!("Bearer {token}");
    let mut headers = v2026_call_headers(tool).to_vec();
    headers.push(("authorization", &bearer));
    let response = post(
        &reqwest::Client::new(),
        &server.http.url,
        &headers,
        &body.to_string(),
    )
    .await;
    rpc_body(&response.text().await.unwrap())
}

/// [`call_with`] for a client that cannot open URLs (no elicitation).
pub(super) async fn call(server: &Mcpbox, token: &str, tool: &str, arguments: Value) -> Value {
    call_with(server, token, tool, arguments, json!({}), json!({})).await
}

/// A tool result's text (its text blocks joined) and whether it is an error.
pub(super) fn result_text(response: &Value) -> (String, bool) {
    let result = &response["result"];
    assert!(result.is_object(), "not a result: {response}");
    let text = result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (text, result["isError"] == true)
}

/// A successful tool call's text.
pub(super) async fn ok_text(server: &Mcpbox, token: &str, tool: &str, arguments: Value) -> String {
    let response = call(server, token, tool, arguments).await;
    let (text, error) = result_text(&response);
    assert!(!error, "{tool} failed: {response}");
    text
}

/// The link URL (`…/oauth/link/start?ticket=…`) in a text.
pub(super) fn link_url(text: &str) -> String {
    let at = text
        .find("/oauth/link/start?ticket=")
        .unwrap_or_else(|| panic!("no link URL in {text:?}"));
    let start = text[..at].rfind("http").expect("the URL's scheme");
    let end = text[at..]
        .find(|c: char| c.is_whitespace() || "\"'<>)]".contains(c))
        .map_or(text.len(), |n| at + n);
    text[start..end].trim_end_matches(['.', ',']).to_owned()
}

/// Whether `server` lists `provider` as linked for the holder of `token`
/// (`mcpbox_linked_accounts`).
pub(super) async fn is_linked(server: &Mcpbox, token: &str, provider: &str) -> bool {
    let response = call(server, token, "mcpbox_linked_accounts", json!({})).await;
    let (text, error) = result_text(&response);
    assert!(!error, "{response}");
    let listing = match &response["result"]["structuredContent"] {
        Value::Null => serde_json::from_str(&text).unwrap_or(Value::Null),
        structured => structured.clone(),
    };
    assert!(
        !listing.is_null(),
        "mcpbox_linked_accounts answers JSON: {response}"
    );
    let mut entries = Vec::new();
    collect_provider_entries(&listing, provider, &mut entries);
    entries
        .iter()
        .any(|e| e.get("linked").is_none_or(|l| l != false))
}

fn collect_provider_entries(value: &Value, provider: &str, out: &mut Vec<Value>) {
    match value {
        Value::Object(map) => {
            if map.get("provider").and_then(Value::as_str) == Some(provider) {
                out.push(value.clone());
            }
            map.values()
                .for_each(|v| collect_provider_entries(v, provider, out));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_provider_entries(v, provider, out)),
        _ => {}
    }
}

pub(super) async fn unlink(server: &Mcpbox, token: &str, provider: &str) {
    let response = call(
        server,
        token,
        "mcpbox_unlink_account",
        json!({ "provider": provider }),
    )
    .await;
    assert!(!result_text(&response).1, "{response}");
}

/// The official Python SDK's client (`tests/python/link_client.py`) as `user`, answering a
/// link request per `mode`, calling each `[tool, arguments]` of `calls`: its events.
pub(super) async fn python_client(
    server: &Mcpbox,
    token: &str,
    user: &str,
    mode: &str,
    calls: Value,
) -> Vec<Value> {
    let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
        .await
        .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/link_client.py");
    let output = tokio::time::timeout(
        STEP * 3,
        Command::new(python)
            .arg(&script)
            .args([
                server.http.url.as_str(),
                token,
                user,
                mode,
                &calls.to_string(),
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finishes in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        output.status.success() && events.last().is_some_and(|e| e["event"] == "done"),
        "the Python client failed:\n{stdout}\n{}\nmcpbox:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.http.stderr.text()
    );
    events
}

pub(super) fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// `user` links GitHub through the Python client while calling `tool`; the call's result.
pub(super) async fn link_through_client(
    server: &Mcpbox,
    token: &str,
    user: &str,
    tool: &str,
    arguments: Value,
) -> Value {
    let events = python_client(server, token, user, "accept", json!([[tool, arguments]])).await;
    let asked = events_of(&events, "elicitation");
    assert_eq!(asked.len(), 1, "asked once: {events:?}");
    assert_eq!(asked[0]["mode"], "url", "{events:?}");
    let browser = events_of(&events, "browser");
    assert_eq!(browser[0]["status"], 200, "{events:?}");
    assert!(
        browser[0]["url"]
            .as_str()
            .unwrap()
            .contains("/oauth/link/callback?"),
        "{events:?}"
    );
    let result = events_of(&events, "result");
    assert_eq!(result.len(), 1, "{events:?}");
    result[0].clone()
}

/// A browser of one user: its own cookies, `X-Test-User` on every request (the provider
/// signs that user in), redirects taken one at a time.
pub(super) struct Browser {
    user: String,
    cookies: Vec<(String, String)>,
    http: reqwest::Client,
}

impl Browser {
    pub(super) fn new(user: &str) -> Self {
        Self {
            user: user.to_owned(),
            cookies: Vec::new(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// `GET url`: the status, the `Location` and the body; cookies set are kept.
    pub(super) async fn get(&mut self, url: &str) -> (u16, Option<String>, String) {
        let mut request = self.http.get(url).header("x-test-user", &self.user);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            request = request.header("cookie", jar.join("; "));
        }
        let response = request.send().await.unwrap();
        for value in response.headers().get_all("set-cookie") {
            let pair = value
                .to_str()
                .unwrap()
                .split(';')
                .next()
                .unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies.retain(|(n, _)| n != name.trim());
                self.cookies
                    .push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned());
        (status, location, response.text().await.unwrap())
    }

    /// Open a link URL and authorize at the provider: the callback URL the provider sends
    /// the browser back to (not yet followed).
    pub(super) async fn authorize(&mut self, start: &str) -> String {
        let (status, location, body) = self.get(start).await;
        assert_eq!(status, 302, "start: {body}");
        let at_provider = location.expect("start redirects to the provider");
        assert!(
            at_provider.contains("code_challenge=")
                && at_provider.contains("code_challenge_method=S256"),
            "PKCE S256: {at_provider}"
        );
        assert!(
            self.cookies.iter().any(|(n, _)| n == "mcpbox_link"),
            "start sets the flow's cookie: {:?}",
            self.cookies
        );
        let (status, location, body) = self.get(&at_provider).await;
        assert_eq!(status, 302, "authorize: {body}");
        let callback = location.expect("the provider redirects back");
        assert!(callback.contains("/oauth/link/callback?"), "{callback}");
        callback
    }

    /// Open `url` and follow every redirect: the last status and body.
    pub(super) async fn open(&mut self, url: &str) -> (u16, String) {
        let mut current = url.to_owned();
        for _ in 0..10 {
            let (status, location, body) = self.get(&current).await;
            match location {
                Some(next) if (300..400).contains(&status) => current = next,
                _ => return (status, body),
            }
        }
        panic!("too many redirects from {url}");
    }
}

/// `url` with its query parameter `name` set to `value`.
pub(super) fn with_param(url: &str, name: &str, value: &str) -> String {
    let mut parsed = url::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(n, _)| n != name)
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    parsed
        .query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair(name, value);
    parsed.to_string()
}

/// Nothing in `haystack` holds any of `tokens`.
/// Each request the fake API saw for alice's or bob's repository names that user (`sub`) and
/// carries that user's own token: `tokens[0]` alice's, `tokens[1]` bob's.
pub(super) fn assert_each_user_sent_their_own(
    seen: &[super::super::fake_api::Seen],
    tokens: &[String],
) {
    for request in seen {
        let user = if request.path.contains("alice-repo") {
            "alice"
        } else {
            "bob"
        };
        assert_eq!(request.sub.as_deref(), Some(user), "{request:?}");
        let own = &tokens[usize::from(user == "bob")];
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {own}").as_str()),
            "{request:?}"
        );
    }
}

pub(super) fn assert_holds_none(what: &str, haystack: &[u8], tokens: &[String]) {
    assert!(!tokens.is_empty(), "no tokens to look for");
    for token in tokens {
        assert!(
            !haystack.windows(token.len()).any(|w| w == token.as_bytes()),
            "{what} holds an issued token"
        );
    }
}

pub(super) fn issues_of(user: &str) -> Value {
    json!({"owner": format!("{user}-org"), "repo": format!("{user}-repo")})
}

/// Every token ever issued is absent from the mcpbox logs.
pub(super) async fn assert_logs_clean(setup: &Setup, servers: &[&Mcpbox]) {
    let issued = setup.provider.issued().await;
    for server in servers {
        assert_holds_none(
            "mcpbox's log",
            server.http.stderr.text().as_bytes(),
            &issued,
        );
    }
    if let Ok(audit) = std::fs::read(setup.audit_log()) {
        assert_holds_none("the audit log", &audit, &issued);
    }
}

pub(super) fn audit_lines(setup: &Setup) -> Vec<Value> {
    std::fs::read_to_string(setup.audit_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Link alice and refresh her token once, so that the store has held two of each.
pub(super) async fn link_and_refresh(setup: &Setup, server: &Mcpbox) {
    let alice = setup.token("alice", server).await;
    let result =
        link_through_client(server, &alice, "alice", "list_issues", issues_of("alice")).await;
    assert_eq!(result["isError"], false, "{result}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ok_text(server, &alice, "list_issues", issues_of("alice")).await;
    assert_eq!(setup.provider.stats().await["refreshes"], 1);
}

/// An rmcp client (over stdio) that supports URL elicitation: it opens the link URL in a
/// [`Browser`] of `user`, then accepts.
#[derive(Clone)]
pub(super) struct LinkingClient {
    pub(super) user: String,
    pub(super) asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl rmcp::ClientHandler for LinkingClient {
    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let asked = crate::support::json(&params);
        self.asked.lock().unwrap().push(asked.clone());
        if let Some(url) = asked["url"].as_str() {
            let (status, page) = Browser::new(&self.user).open(url).await;
            assert_eq!(status, 200, "{page}");
        }
        Ok(serde_json::from_value(json!({"action": "accept"})).unwrap())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "mcpbox-e2e-linking", "version": "1.0.0"},
        }))
        .unwrap()
    }
}
