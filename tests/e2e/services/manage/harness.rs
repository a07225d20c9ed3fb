//! The harness of the managed-install tests ([`super`]): the registry and its artifacts (signed,
//! unsigned, with the grants their author asks for), the folders the ceiling allows or not,
//! mcpbox's configuration, its own OAuth and the server (and a replica sharing its managed
//! directory), the Python SDK's client, and raw 2026-07-28 requests.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::process::{Child, Command};

use super::super::oauth::{AuthorizationServer, SDK, free_port};
use crate::external::{self, DistributionRegistry, RegistrySetup};
use crate::registry::{component, keygen, ok};
use crate::support::{STEP, Stderr, mcpbox, plugin_dir, post};

/// What every test starts: the registry with its artifacts, the keys, the folders the
/// ceiling allows or not, the authorization server and mcpbox.
pub(super) struct Setup {
    pub(super) registry: DistributionRegistry,
    pub(super) files: tempfile::TempDir,
    pub(super) plugins: tempfile::TempDir,
    pub(super) identity: AuthorizationServer,
    pub(super) url: String,
    pub(super) _mcpbox: Child,
    pub(super) stderr: Stderr,
    /// The acme private key (password `correct horse`).
    pub(super) key: String,
}

/// mcpbox over HTTP on a port of its own, with `config`, its own OAuth from `identity`, and its
/// audit log at `audit`: its URL, the process and its log.
async fn serve(
    plugins: &Path,
    config: &Path,
    identity: &AuthorizationServer,
    audit: &Path,
) -> (String, Child, Stderr) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let address = format!("127.0.0.1:{port}");
    let mut child = mcpbox(
        plugins,
        &[
            "--http",
            &address,
            "--oauth-issuer",
            &identity.url,
            "--oauth-resource",
            &url,
            "--oauth-scope",
            "mcp",
            "--config",
            config.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    )
    .spawn()
    .expect("start mcpbox");
    let stderr = Stderr::collect(child.stderr.take().unwrap());
    stderr.wait_for("serving MCP over HTTP").await;
    (url, child, stderr)
}

impl Setup {
    pub(super) async fn new() -> Self {
        Self::with("").await
    }

    /// With `manage` added to the `[manage]` table.
    pub(super) async fn with(manage: &str) -> Self {
        Self::with_sources(manage, &[], &[]).await
    }

    /// With `manage` added to the `[manage]` table, `sources` added to its sources and
    /// `insecure` to its plain-HTTP registries (`REGISTRY` in them is the registry's host).
    pub(super) async fn with_sources(manage: &str, sources: &[&str], insecure: &[&str]) -> Self {
        let registry = DistributionRegistry::start(RegistrySetup::default());
        let host = registry.host();
        let files = tempfile::tempdir().unwrap();
        let root = files.path().canonicalize().unwrap();
        for dir in ["data/notes", "docs", "secret"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("data/notes/today.txt"), "buy milk").unwrap();
        let (key, _) = keygen(&root, "acme").await;

        // The filesystem server, asking for more than the operator allows.
        let requested = root.join("files.toml");
        std::fs::write(
            &requested,
            format!(
                r#"title = "Files"
instances = "per-caller"
[limits]
memory-mib = 256
[[dirs]]
host = "{data}/notes"
mode = "read-write"
[[dirs]]
host = "{docs}"
mode = "read-write"
[[dirs]]
host = "{secret}"
[http]
allow = ["127.0.0.1:9", "evil.example"]
"#,
                data = root.join("data").display(),
                docs = root.join("docs").display(),
                secret = root.join("secret").display(),
            ),
        )
        .unwrap();
        let setup_push = |file: PathBuf, repo_tag: &str, extra: Vec<String>| {
            let reference = format!("{host}/plugins/{repo_tag}");
            let host = host.clone();
            async move {
                let mut args = vec![
                    "push".to_owned(),
                    file.to_str().unwrap().to_owned(),
                    reference.clone(),
                    "--insecure-registry".to_owned(),
                    host,
                ];
                args.extend(extra);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ok(&args, &[]).await;
                reference
            }
        };
        let sign = |reference: String| {
            let (key, host) = (key.clone(), host.clone());
            async move {
                ok(
                    &[
                        "sign",
                        &reference,
                        "--key",
                        &key,
                        "--insecure-registry",
                        &host,
                    ],
                    &[("COSIGN_PASSWORD", "correct horse")],
                )
                .await;
            }
        };
        let files_ref = setup_push(
            component("filesystem"),
            "files:1",
            vec![
                "--manifest".to_owned(),
                requested.to_str().unwrap().to_owned(),
                "--description".to_owned(),
                "Read and write files in folders you grant".to_owned(),
            ],
        )
        .await;
        sign(files_ref).await;
        let echo_ref = setup_push(
            component("echo_tools"),
            "echo:1",
            vec![
                "--description".to_owned(),
                "Says back what it is given".to_owned(),
            ],
        )
        .await;
        sign(echo_ref).await;
        setup_push(component("echo_tools"), "unsigned:1", Vec::new()).await;
        // Unsigned, and the policy does not ask it to be.
        setup_push(component("echo_tools"), "free:1", Vec::new()).await;
        let moving = setup_push(component("echo_tools"), "moving:1", Vec::new()).await;
        sign(moving).await;

        // The operator's own plugin, for callers holding `secret` only.
        let plugins = plugin_dir(&[("echo_tools", "hidden.wasm")]);
        std::fs::write(
            plugins.path().join("hidden.toml"),
            "scopes = [\"secret\"]\nprefix = \"hidden_\"\n",
        )
        .unwrap();

        let quoted = |items: &[&str]| -> String {
            items
                .iter()
                .map(|item| format!(", \"{}\"", item.replace("REGISTRY", &host)))
                .collect()
        };
        let (more_sources, more_insecure) = (quoted(sources), quoted(insecure));
        let config = root.join("mcpbox.toml");
        std::fs::write(
            &config,
            format!(
                r#"[signatures.keys]
acme = "acme.pub"
[signatures.require]
files = ["acme"]
echo = ["acme"]
unsigned = ["acme"]
moving = ["acme"]

[plugin.governed.http]
allow = ["evil.example"]

[manage]
enabled = true
scope = "mcpbox:manage"
directory = "managed"
sources = ["{host}/plugins/files", "{host}/plugins/echo", "{host}/plugins/unsigned", "{host}/plugins/moving", "{host}/plugins/free"{more_sources}]
insecure-registries = ["{host}"{more_insecure}]
{manage}

[manage.ceiling]
dirs = [{{ path = "{data}", mode = "read-write" }}, {{ path = "{docs}", mode = "read-only" }}]
hosts = ["127.0.0.1:9"]
[manage.ceiling.limits]
memory-mib = 128
"#,
                data = root.join("data").display(),
                docs = root.join("docs").display(),
            ),
        )
        .unwrap();

        let identity = AuthorizationServer::start("http://127.0.0.1:1/unused").await;
        let (url, child, stderr) = serve(
            plugins.path(),
            &config,
            &identity,
            &root.join("audit.jsonl"),
        )
        .await;
        Self {
            registry,
            files,
            plugins,
            identity,
            url,
            _mcpbox: child,
            stderr,
            key,
        }
    }

    pub(super) fn root(&self) -> PathBuf {
        self.files.path().canonicalize().unwrap()
    }

    pub(super) fn reference(&self, repo_tag: &str) -> String {
        format!("{}/plugins/{repo_tag}", self.registry.host())
    }

    /// A token for `user` with `scopes`, for this mcpbox.
    pub(super) async fn token(&self, user: &str, scopes: &str) -> String {
        self.token_for(&self.url, user, scopes).await
    }

    /// A token for `user` with `scopes`, for the mcpbox at `url`.
    pub(super) async fn token_for(&self, url: &str, user: &str, scopes: &str) -> String {
        self.identity
            .token(&format!(
                "scope={}&sub={user}&aud={url}",
                scopes.replace(' ', "%20")
            ))
            .await
    }

    /// Another mcpbox with the same configuration (so the same managed directory), as a
    /// replica behind a balancer would be: its URL and process.
    pub(super) async fn replica(&self) -> (String, Child) {
        let (url, child, _) = self.replica_logged().await;
        (url, child)
    }

    /// [`Setup::replica`], and its log.
    pub(super) async fn replica_logged(&self) -> (String, Child, Stderr) {
        let root = self.root();
        serve(
            self.plugins.path(),
            &root.join("mcpbox.toml"),
            &self.identity,
            &root.join("replica-audit.jsonl"),
        )
        .await
    }

    pub(super) fn managed(&self) -> PathBuf {
        self.root().join("managed")
    }

    /// The plugins the lock file of the managed directory holds.
    pub(super) fn installed(&self) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(self.managed().join("mcpbox.lock")) else {
            return Vec::new();
        };
        let lock: toml::Table = toml::from_str(&text).unwrap();
        lock.get("plugin")
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.root().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The Python client started (see its docs for MODE, ANSWERS and CALLS).
    pub(super) async fn client(
        &self,
        token: &str,
        mode: &str,
        answers: Value,
        calls: Value,
    ) -> Child {
        self.client_of(&self.url, token, mode, answers, calls).await
    }

    /// The Python client of the mcpbox at `url`, started.
    pub(super) async fn client_of(
        &self,
        url: &str,
        token: &str,
        mode: &str,
        answers: Value,
        calls: Value,
    ) -> Child {
        let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
            .await
            .unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/manage_client.py");
        let docker_config = self.root().join("docker");
        std::fs::create_dir_all(&docker_config).unwrap();
        Command::new(python)
            .arg(&script)
            .args([url, token, mode, &answers.to_string(), &calls.to_string()])
            .env("COSIGN_PASSWORD", "correct horse")
            .env("DOCKER_CONFIG", docker_config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run python")
    }

    /// Run the Python client to its end: its events.
    pub(super) async fn run(
        &self,
        token: &str,
        mode: &str,
        answers: Value,
        calls: Value,
    ) -> Vec<Value> {
        let child = self.client(token, mode, answers, calls).await;
        self.finish(child).await
    }

    pub(super) async fn finish(&self, child: Child) -> Vec<Value> {
        let output = tokio::time::timeout(STEP * 3, child.wait_with_output())
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
            self.stderr.text()
        );
        events
    }

    /// A 2026-07-28 request of `method` by the holder of `token`: the JSON-RPC response and
    /// the HTTP status.
    pub(super) async fn rpc(&self, token: &str, method: &str, params: Value) -> (u16, Value) {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let bearer = format!("Bearer {token}");
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
            ("authorization", bearer.as_str()),
        ];
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        if method == "tools/call" {
            headers.push(("mcp-name", &name));
        }
        let response = post(
            &reqwest::Client::new(),
            &self.url,
            &headers,
            &body.to_string(),
        )
        .await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or_else(|_| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .rfind(|v| v.get("id").is_some())
                .unwrap_or(Value::Null)
        });
        (status, value)
    }

    pub(super) async fn tool_names(&self, token: &str) -> Vec<String> {
        let (_, listed) = self.rpc(token, "tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

pub(super) fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// The one result of `tool` among `events`.
pub(super) fn result_of<'a>(events: &'a [Value], tool: &str) -> &'a Value {
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "result" && e["tool"] == tool)
        .collect();
    assert_eq!(results.len(), 1, "one result of {tool}: {events:#?}");
    results[0]
}

/// Wait for the next line of a running client's stdout that is `kind`.
pub(super) async fn next_event(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    kind: &str,
) -> Value {
    loop {
        let line = tokio::time::timeout(STEP, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no `{kind}` in time"))
            .unwrap()
            .unwrap_or_else(|| panic!("the client ended before `{kind}`"));
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["event"] == kind {
            return event;
        }
    }
}
