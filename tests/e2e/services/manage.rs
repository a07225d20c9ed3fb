//! Managed installs (`[manage]`) against real services on loopback: Debian's
//! `docker-registry` holding signed and unsigned artifacts (pushed with the grants their
//! author asks for), mcpbox over HTTP with its own OAuth (`oauth2-mock-server`: alice holds the
//! management scope, bob does not, admin also holds a plugin's scope), and the official Python
//! SDK as the client whose elicitation callback stands in for the user
//! (`tests/python/manage_client.py`), on 2025-11-25 and 2026-07-28.
//!
//! Shown: accept installs exactly the grants approved (the manifest written, and what the
//! plugin can reach), and every client is told and served at once, and removal the same way;
//! decline, cancel and a client that cannot be asked install nothing; arguments naming grants
//! not on offer add nothing; a tag moved between the consent and the install installs nothing
//! and the user is asked again; an unsigned artifact under the signature policy is refused
//! before the user is asked; a caller without the scope sees no management tool, and a search
//! never names a tool the caller's scopes hide; `pull` shows what an artifact asks for and
//! applies nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::oauth::{AuthorizationServer, SDK, free_port};
use crate::external::{self, DistributionRegistry, RegistrySetup};
use crate::registry::{component, keygen, ok};
use crate::support::{STEP, Stderr, mcpbox, plugin_dir, post};

/// What every test starts: the registry with its artifacts, the keys, the folders the
/// ceiling allows or not, the authorization server and mcpbox.
struct Setup {
    registry: DistributionRegistry,
    files: tempfile::TempDir,
    _plugins: tempfile::TempDir,
    identity: AuthorizationServer,
    url: String,
    _mcpbox: Child,
    stderr: Stderr,
    /// The acme private key (password `correct horse`).
    key: String,
}

impl Setup {
    async fn new() -> Self {
        Self::with("").await
    }

    /// With `manage` added to the `[manage]` table.
    async fn with(manage: &str) -> Self {
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
sources = ["{host}/plugins/files", "{host}/plugins/echo", "{host}/plugins/unsigned", "{host}/plugins/moving", "{host}/plugins/free"]
insecure-registries = ["{host}"]
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

        let port = free_port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let identity = AuthorizationServer::start(&url).await;
        let address = format!("127.0.0.1:{port}");
        let audit = root.join("audit.jsonl");
        let mut child = mcpbox(
            plugins.path(),
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
        Self {
            registry,
            files,
            _plugins: plugins,
            identity,
            url,
            _mcpbox: child,
            stderr,
            key,
        }
    }

    fn root(&self) -> PathBuf {
        self.files.path().canonicalize().unwrap()
    }

    fn reference(&self, repo_tag: &str) -> String {
        format!("{}/plugins/{repo_tag}", self.registry.host())
    }

    async fn token(&self, user: &str, scopes: &str) -> String {
        self.identity
            .token(&format!("scope={}&sub={user}", scopes.replace(' ', "%20")))
            .await
    }

    fn managed(&self) -> PathBuf {
        self.root().join("managed")
    }

    /// The plugins the lock file of the managed directory holds.
    fn installed(&self) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(self.managed().join("mcpbox.lock")) else {
            return Vec::new();
        };
        let lock: toml::Table = toml::from_str(&text).unwrap();
        lock.get("plugin")
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.root().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The Python client started (see its docs for MODE, ANSWERS and CALLS).
    async fn client(&self, token: &str, mode: &str, answers: Value, calls: Value) -> Child {
        let python = tokio::task::spawn_blocking(|| external::python(&[SDK]))
            .await
            .unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/manage_client.py");
        let docker_config = self.root().join("docker");
        std::fs::create_dir_all(&docker_config).unwrap();
        Command::new(python)
            .arg(&script)
            .args([
                self.url.as_str(),
                token,
                mode,
                &answers.to_string(),
                &calls.to_string(),
            ])
            .env("COSIGN_PASSWORD", "correct horse")
            .env("DOCKER_CONFIG", docker_config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run python")
    }

    /// Run the Python client to its end: its events.
    async fn run(&self, token: &str, mode: &str, answers: Value, calls: Value) -> Vec<Value> {
        let child = self.client(token, mode, answers, calls).await;
        self.finish(child).await
    }

    async fn finish(&self, child: Child) -> Vec<Value> {
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
    async fn rpc(&self, token: &str, method: &str, params: Value) -> (u16, Value) {
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

    async fn tool_names(&self, token: &str) -> Vec<String> {
        let (_, listed) = self.rpc(token, "tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// The one result of `tool` among `events`.
fn result_of<'a>(events: &'a [Value], tool: &str) -> &'a Value {
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "result" && e["tool"] == tool)
        .collect();
    assert_eq!(results.len(), 1, "one result of {tool}: {events:#?}");
    results[0]
}

/// Wait for the next line of a running client's stdout that is `kind`.
async fn next_event(
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

#[tokio::test]
async fn accept_installs_exactly_the_approved_grants_served_to_every_client_and_removed_the_same_way()
 {
    let setup = Setup::new().await;
    let root = setup.root();
    let (data, docs, secret) = (root.join("data"), root.join("docs"), root.join("secret"));
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let bob = setup.token("bob", "mcp").await;

    // Bob holds a listen stream (2026-07-28) before anything is installed.
    let mut listener = setup
        .client(
            &bob,
            "listen",
            json!([]),
            json!([["list_allowed_directories", {}]]),
        )
        .await;
    let mut lines = BufReader::new(listener.stdout.take().unwrap()).lines();
    next_event(&mut lines, "listening").await;

    // Alice (2025-11-25) installs, with arguments naming grants not on offer, and unticks the
    // second grant (the docs folder) in the form.
    let files = setup.reference("files:1");
    let hostile = json!([
        format!("folder:{}/notes:read-write", data.display()),
        format!("folder:{}:read-write", docs.display()),
        format!("folder:{}:read-only", docs.display()),
        format!("folder:{}:read-write", secret.display()),
        "host:127.0.0.1:9",
        "host:evil.example",
        "public-http",
    ]);
    let events = setup
        .run(
            &alice,
            "legacy",
            json!([{"untick": [2]}]),
            json!([
                ["mcpbox_install_plugin", {"reference": files, "grants": hostile}],
                ["list_allowed_directories", {}],
            ]),
        )
        .await;
    let asked = events_of(&events, "elicitation");
    assert_eq!(asked.len(), 1, "{events:#?}");
    let message = asked[0]["message"].as_str().unwrap();
    let digest = result_of(&events, "mcpbox_install_plugin")["structured"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    for shown in [
        format!("Install the plugin `files` from {files}?"),
        format!("Digest: {digest}"),
        "Signed by `acme` (key sha256:".to_owned(),
        format!("  1. read and write the folder {}/notes", data.display()),
        format!("  2. read the folder {}", docs.display()),
        "  3. send HTTP requests to 127.0.0.1:9".to_owned(),
        "Limits: memory-mib 128".to_owned(),
        format!(
            "  - write access to the folder {} (the operator allows reading it only)",
            docs.display()
        ),
        format!(
            "  - the folder {}: not inside a folder the operator allows",
            secret.display()
        ),
        "  - HTTP requests to evil.example: not a host the operator allows".to_owned(),
        "  - memory-mib 256 (lowered to the operator's 128)".to_owned(),
        "The request named grants the plugin is not offered (ignored):".to_owned(),
        "  - host:evil.example".to_owned(),
        format!("  - folder:{}:read-write", secret.display()),
        "  - public-http".to_owned(),
    ] {
        assert!(message.contains(&shown), "{shown}\nin:\n{message}");
    }
    assert_eq!(asked[0]["mode"], "form");
    assert_eq!(asked[0]["requestedSchema"]["required"], json!(["confirm"]));

    let installed = result_of(&events, "mcpbox_install_plugin");
    assert_eq!(installed["isError"], false, "{installed}");
    assert_eq!(
        installed["structured"]["grants"],
        json!([
            format!("folder:{}/notes:read-write", data.display()),
            "host:127.0.0.1:9"
        ])
    );
    assert!(digest.starts_with("sha256:"));
    // The manifest written holds exactly what was approved.
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(setup.managed().join("files.toml")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["dirs"].as_array().unwrap(),
        &vec![toml::Value::Table(
            toml::from_str(&format!(
                "host = \"{}/notes\"\nmode = \"read-write\"",
                data.display()
            ))
            .unwrap()
        )]
    );
    assert_eq!(manifest["http"]["allow"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["http"]["allow"][0].as_str(), Some("127.0.0.1:9"));
    assert_eq!(manifest["limits"]["memory-mib"].as_integer(), Some(128));
    assert_eq!(setup.installed(), ["files"]);
    // And the plugin reaches exactly that: the next call, served at once.
    let reach = result_of(&events, "list_allowed_directories");
    let text = reach["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("{}/notes", data.display())),
        "{text}"
    );
    assert!(!text.contains(&docs.display().to_string()), "{text}");
    assert!(!text.contains(&secret.display().to_string()), "{text}");
    let took = installed["ms"].as_u64().unwrap();

    // Bob, who cannot manage, was told and is served the new tool.
    let called = next_event(&mut lines, "result").await;
    assert_eq!(called["isError"], false, "{called}");
    assert!(
        called["text"].as_str().unwrap().contains("notes"),
        "{called}"
    );

    // Alice lists it, then removes it (2026-07-28 this time); Bob hears it go.
    let events = setup
        .run(
            &alice,
            "2026-07-28",
            json!(["accept"]),
            json!([
                ["mcpbox_list_plugins", {}],
                ["mcpbox_remove_plugin", {"name": "files"}],
            ]),
        )
        .await;
    let listed = &result_of(&events, "mcpbox_list_plugins")["structured"]["plugins"];
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "files")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(entry["managed"], true);
    assert_eq!(entry["digest"].as_str(), Some(digest.as_str()));
    assert_eq!(entry["signer"], "acme");
    let asked = events_of(&events, "elicitation");
    assert_eq!(asked.len(), 1, "{events:#?}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Remove the plugin `files` ({files}, {digest})?")),
        "{asked:?}"
    );
    assert_eq!(
        result_of(&events, "mcpbox_remove_plugin")["structured"]["removed"],
        true
    );
    next_event(&mut lines, "gone").await;
    assert!(setup.installed().is_empty());
    assert!(!setup.managed().join("files.wasm").exists());
    let _ = listener.kill().await;

    // Each step is in the audit log, as alice.
    let steps: Vec<String> = setup
        .audit()
        .iter()
        .filter(|r| {
            r["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("manage/"))
        })
        .map(|r| {
            assert!(
                r["principal"].as_str().unwrap().ends_with("sub:alice"),
                "{r}"
            );
            r["method"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        steps,
        [
            "manage/resolved",
            "manage/ask",
            "manage/accepted",
            "manage/install",
            // 2026-07-28: asked in the first round, answered in the retry.
            "manage/ask",
            "manage/ask",
            "manage/accepted",
            "manage/remove"
        ]
    );
    // From the call to the plugin serving, the user's answer included (a few hundred ms here).
    assert!(took < 20_000, "installing took {took} ms");
    #[expect(clippy::print_stderr, reason = "the measured latency, for the issue")]
    {
        eprintln!("install latency, from the call to the plugin serving: {took} ms");
    }
}

#[tokio::test]
async fn decline_cancel_a_client_that_cannot_be_asked_and_an_unsigned_artifact_install_nothing() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let echo = setup.reference("echo:1");
    let install = json!(["mcpbox_install_plugin", {"reference": echo}]);
    for mode in ["legacy", "2026-07-28"] {
        let events = setup
            .run(
                &alice,
                mode,
                json!(["decline", "cancel"]),
                json!([install, install]),
            )
            .await;
        assert_eq!(
            events_of(&events, "elicitation").len(),
            2,
            "{mode}: {events:#?}"
        );
        let results = events_of(&events, "result");
        assert_eq!(
            results[0]["structured"],
            json!({"installed": false, "action": "decline"})
        );
        assert_eq!(
            results[0]["text"],
            "The user declined: nothing was installed."
        );
        assert_eq!(
            results[1]["structured"],
            json!({"installed": false, "action": "cancel"})
        );
        assert!(setup.installed().is_empty(), "{mode}");
    }
    // A client that declares no elicitation is refused, with the reason.
    for mode in ["legacy", "2026-07-28"] {
        let events = setup
            .run(&alice, mode, json!(["none"]), json!([install]))
            .await;
        let result = result_of(&events, "mcpbox_install_plugin");
        assert_eq!(result["isError"], true);
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .starts_with("this client cannot show the user a form"),
            "{result}"
        );
    }
    // An unsigned artifact the policy requires signed: refused before anyone is asked.
    let unsigned = setup.reference("unsigned:1");
    let events = setup
        .run(
            &alice,
            "legacy",
            json!(["accept"]),
            json!([["mcpbox_install_plugin", {"reference": unsigned}]]),
        )
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let result = result_of(&events, "mcpbox_install_plugin");
    assert_eq!(result["isError"], true);
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("refused {unsigned} before asking the user: "))
            && text.contains("requires `unsigned` to be signed by the key `acme`")
            && text.ends_with("; nothing was installed"),
        "{text}"
    );
    // A reference outside the sources, a hostile one, a name that is a path, an argument the
    // tool does not take: refused before anything is fetched.
    let host = setup.registry.host();
    let refusals = [
        (
            json!({"reference": format!("{host}/plugins/elsewhere:1")}),
            "is not in the operator's sources",
        ),
        (
            json!({"reference": format!("{host}/plugins/echo/../unsigned:1")}),
            "",
        ),
        (
            json!({"reference": "evil.example/plugins/echo:1"}),
            "is not in the operator's sources",
        ),
        (
            json!({"reference": echo, "name": "../../managed/evil"}),
            "is not a plugin name",
        ),
        (
            json!({"reference": echo, "name": "governed"}),
            "the operator's configuration governs a plugin named `governed`",
        ),
        (
            json!({"reference": echo, "grants": [], "ceiling": {"hosts": ["*"]}}),
            "unknown field `ceiling`",
        ),
    ];
    let calls: Vec<Value> = refusals
        .iter()
        .map(|(arguments, _)| json!(["mcpbox_install_plugin", arguments]))
        .collect();
    let events = setup
        .run(&alice, "legacy", json!(["accept"]), json!(calls))
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let results = events_of(&events, "result");
    assert_eq!(results.len(), refusals.len(), "{events:#?}");
    for (result, (arguments, why)) in results.iter().zip(&refusals) {
        assert_eq!(result["isError"], true, "{arguments}: {result}");
        assert!(
            result["text"].as_str().unwrap().contains(why),
            "{arguments}: {result}"
        );
    }
    assert!(setup.installed().is_empty());
    assert!(!setup.managed().join("echo.wasm").exists());
}

#[tokio::test]
async fn a_tag_moved_between_consent_and_install_installs_nothing_and_asks_again() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let moving = setup.reference("moving:1");
    let host = setup.registry.host();
    let mcpbox = env!("CARGO_BIN_EXE_mcpbox");
    for (mode, plugin) in [("legacy", "time"), ("2026-07-28", "quotes")] {
        // While the user reads the question, someone pushes another component (signed) under
        // the tag; then the user accepts.
        let move_tag = format!(
            "{mcpbox} push {file} {moving} --insecure-registry {host} --no-tools && {mcpbox} sign {moving} --key {key} --insecure-registry {host}",
            file = component(plugin).display(),
            key = setup.key,
        );
        let events = setup
            .run(
                &alice,
                mode,
                json!([{"run": ["sh", "-c", move_tag], "then": "accept"}, "decline"]),
                json!([["mcpbox_install_plugin", {"reference": moving}]]),
            )
            .await;
        let asked = events_of(&events, "elicitation");
        assert_eq!(asked.len(), 2, "{mode}: asked again: {events:#?}");
        let digest_of = |message: &str| {
            message
                .lines()
                .find_map(|l| l.strip_prefix("Digest: "))
                .unwrap()
                .to_owned()
        };
        let first = digest_of(asked[0]["message"].as_str().unwrap());
        let second = asked[1]["message"].as_str().unwrap();
        assert_ne!(first, digest_of(second), "{mode}");
        if mode == "legacy" {
            // In the same call: the user is told why they are asked again.
            assert!(
                second.starts_with("The artifact or its grants changed since you were asked: nothing was installed."),
                "{second}"
            );
        }
        let result = result_of(&events, "mcpbox_install_plugin");
        assert_eq!(result["structured"]["installed"], false, "{mode}: {result}");
        assert!(setup.installed().is_empty(), "{mode}");
    }
}

#[tokio::test]
async fn a_caller_without_the_scope_sees_no_management_tool_and_search_hides_what_scopes_hide() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let bob = setup.token("bob", "mcp").await;
    let admin = setup.token("admin", "mcp mcpbox:manage secret").await;

    let manage_tools = |names: &[String]| names.iter().filter(|n| n.starts_with("mcpbox_")).count();
    assert_eq!(manage_tools(&setup.tool_names(&bob).await), 0);
    assert_eq!(manage_tools(&setup.tool_names(&alice).await), 4);
    let (status, refused) = setup
        .rpc(
            &bob,
            "tools/call",
            json!({"name": "mcpbox_search_plugins", "arguments": {"query": "echo"}}),
        )
        .await;
    assert_eq!(status, 403, "{refused}");

    let search = |token: String, query: &'static str| {
        let setup = &setup;
        async move {
            let (_, found) = setup
                .rpc(
                    &token,
                    "tools/call",
                    json!({"name": "mcpbox_search_plugins", "arguments": {"query": query}}),
                )
                .await;
            assert_eq!(found["result"]["isError"], Value::Null, "{found}");
            found["result"]["structuredContent"]["results"].clone()
        }
    };
    // The sources' artifacts by their tools (listed at push) and description.
    let found = search(alice.clone(), "directories").await;
    assert_eq!(found[0]["reference"], setup.reference("files:1"), "{found}");
    assert!(
        found[0]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("list_allowed_directories"))
    );
    assert_eq!(found[0]["asksForGrants"], true);
    // The hidden plugin's tools: never named to alice, named to admin.
    let names = |found: &Value| -> Vec<String> {
        found
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["tool"].as_str().map(str::to_owned))
            .collect()
    };
    let for_alice = search(alice.clone(), "echo").await;
    assert!(names(&for_alice).is_empty(), "{for_alice}");
    assert!(
        for_alice
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reference"] == setup.reference("echo:1")),
        "{for_alice}"
    );
    let for_admin = search(admin.clone(), "echo").await;
    assert!(
        names(&for_admin).contains(&"hidden_echo".to_owned()),
        "{for_admin}"
    );
    let (_, listed) = setup
        .rpc(
            &alice,
            "tools/call",
            json!({"name": "mcpbox_list_plugins", "arguments": {}}),
        )
        .await;
    assert_eq!(
        listed["result"]["structuredContent"]["plugins"],
        json!([]),
        "{listed}"
    );

    // `pull` shows what the artifact asks for, and applies none of it.
    let to = tempfile::tempdir().unwrap();
    let out = ok(
        &[
            "pull",
            &setup.reference("files:1"),
            "--to",
            to.path().to_str().unwrap(),
            "--insecure-registry",
            &setup.registry.host(),
        ],
        &[],
    )
    .await;
    assert!(
        out.contains("it asks for these grants and limits (not applied"),
        "{out}"
    );
    assert!(
        out.contains("  allow = [\"127.0.0.1:9\", \"evil.example\"]"),
        "{out}"
    );
    assert!(to.path().join("files.wasm").exists());
    assert!(!to.path().join("files.toml").exists());
}

#[tokio::test]
async fn a_pre_approval_policy_installs_signed_artifacts_for_clients_that_cannot_be_asked() {
    let setup = Setup::with("pre-approve = \"signed\"").await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let events = setup
        .run(
            &alice,
            "2026-07-28",
            json!(["none"]),
            json!([
                ["mcpbox_install_plugin", {"reference": setup.reference("free:1")}],
                ["mcpbox_install_plugin", {"reference": setup.reference("echo:1")}],
                ["echo", {"text": "pre-approved"}],
                ["mcpbox_remove_plugin", {"name": "echo"}],
            ]),
        )
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let results = events_of(&events, "result");
    // Not signed: nothing vouches for it, and nobody can be asked.
    assert_eq!(results[0]["isError"], true, "{events:#?}");
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("this client cannot show the user a form"),
        "{events:#?}"
    );
    assert_eq!(results[1]["structured"]["installed"], true, "{events:#?}");
    assert_eq!(results[2]["text"], "pre-approved");
    assert_eq!(results[3]["structured"]["removed"], true, "{events:#?}");
    assert!(setup.installed().is_empty());
    let steps: Vec<String> = setup
        .audit()
        .iter()
        .filter_map(|r| {
            r["method"]
                .as_str()
                .filter(|m| m.starts_with("manage/"))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        steps,
        [
            "manage/resolved",
            "manage/refused",
            "manage/resolved",
            "manage/pre-approved",
            "manage/install",
            "manage/remove"
        ]
    );
}
