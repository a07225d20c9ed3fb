//! Plugins that serve many users, on the embedded store: who is calling (`caller`), each
//! caller's own buckets, and configuration and secrets through `wasi:config`, with two
//! principals (static tokens) over HTTP driven by rmcp's client, and the local user over
//! stdio. The same over OAuth and on Redis with two replicas is in `services::multi_user`.

use std::path::Path;

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::support::{
    HttpServer, RecordingClient, STEP, call, connect, example_plugins, plugin_dir, token_config,
    tool_text,
};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
/// The secrets' values: none may appear anywhere but in the plugin that reads them.
const SHARED_SECRET: &str = "shared-SECRET-f00d";
const ALICE_SECRET: &str = "alice-SECRET-beef";

/// The caller probe (a caller bucket `mine`, a shared one, configuration), the to-do example
/// with its own manifest, and a plugin built against the released WIT alone.
pub(crate) fn plugins() -> tempfile::TempDir {
    let dir = plugin_dir(&[
        ("caller_probe", "caller_probe.wasm"),
        ("todo", "todo.wasm"),
        ("tools_only", "tools_only.wasm"),
        ("caller_probe", "caller_raw.wasm"),
    ]);
    // The same code again, told callers' own keys (an operator's opt-in).
    std::fs::write(
        dir.path().join("caller_raw.toml"),
        "prefix = \"raw_\"\nreveal-caller = true\n",
    )
    .unwrap();
    std::fs::copy(
        example_plugins().join("todo.toml"),
        dir.path().join("todo.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("caller_probe.toml"),
        r#"
[keyvalue]
buckets = ["shared"]
caller-buckets = ["mine"]
caller-max-keys = 4
max-keys = 8

[config]
greeting = "hello"
api-token = { secret = "service-token" }
maybe = { secret = "nobody-has-this", optional = true }
"#,
    )
    .unwrap();
    dir
}

/// The secrets file (mode 0600): a value for everyone, and alice's own.
pub(crate) fn secrets(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("secrets.toml");
    std::fs::write(
        &path,
        format!(
            "service-token = \"{SHARED_SECRET}\"\n\n[principal.\"token:alice\"]\nservice-token = \"{ALICE_SECRET}\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

pub(crate) async fn tool(
    client: &RunningService<RoleClient, RecordingClient>,
    name: &'static str,
    arguments: Value,
) -> (String, bool) {
    let result = tokio::time::timeout(STEP, client.call_tool(call(name, arguments)))
        .await
        .expect("answered in time")
        .unwrap_or_else(|e| panic!("{name} failed: {e}"));
    tool_text(&result)
}

pub(crate) async fn json_of(
    client: &RunningService<RoleClient, RecordingClient>,
    name: &'static str,
    arguments: Value,
) -> Value {
    let (text, error) = tool(client, name, arguments).await;
    assert!(!error, "{name}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{name}: not JSON: {text}"))
}

/// The fixture plugins served over HTTP to two token principals, alice (with `alice_scopes`)
/// and bob, with the secrets file and `extra` flags, each connected with rmcp's client.
struct TwoCallers {
    server: HttpServer,
    alice: RunningService<RoleClient, RecordingClient>,
    bob: RunningService<RoleClient, RecordingClient>,
    /// The plugin and configuration directories, kept while the server runs.
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn two_callers(alice_scopes: &[&str], extra: &[&str]) -> TwoCallers {
    two_callers_of(plugins(), alice_scopes, extra).await
}

/// [`two_callers`], serving the plugin directory `dir`.
async fn two_callers_of(
    dir: tempfile::TempDir,
    alice_scopes: &[&str],
    extra: &[&str],
) -> TwoCallers {
    let config_dir = tempfile::tempdir().unwrap();
    let config = token_config(
        config_dir.path(),
        &[("alice", ALICE, alice_scopes), ("bob", BOB, &[])],
        "",
    );
    let secrets = secrets(config_dir.path());
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--secrets",
        secrets.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = HttpServer::start(dir.path(), &args).await;
    let alice = server
        .connect(RecordingClient::new(&json!({})), Some(ALICE))
        .await;
    let bob = server
        .connect(RecordingClient::new(&json!({})), Some(BOB))
        .await;
    TwoCallers {
        server,
        alice,
        bob,
        _dirs: (dir, config_dir),
    }
}

#[tokio::test]
async fn two_callers_each_have_an_id_state_and_secrets_of_their_own() {
    let TwoCallers {
        server,
        alice,
        bob,
        _dirs,
    } = two_callers(&["admin"], &[]).await;

    // Who is calling: an opaque id (not the token, not its name), stable across calls and
    // sessions, different per caller; the kind, the name and the scopes.
    let a = json_of(&alice, "whoami", json!({})).await;
    let b = json_of(&bob, "whoami", json!({})).await;
    let id = a["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32, "{a}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    assert!(
        !id.contains("alice") && !a.to_string().contains(ALICE),
        "{a}"
    );
    assert_ne!(a["id"], b["id"]);
    assert_eq!(a["kind"], "token");
    assert_eq!(a["name"], "alice");
    assert_eq!(a["scopes"], json!(["admin"]));
    assert_eq!(a["admin"], true);
    assert_eq!(b["admin"], false);
    let again = server
        .connect(RecordingClient::new(&json!({})), Some(ALICE))
        .await;
    assert_eq!(json_of(&again, "whoami", json!({})).await["id"], id);
    // Another plugin sees another id for the same caller; one the operator lets see callers'
    // keys sees the key.
    let raw = json_of(&alice, "raw_whoami", json!({})).await;
    assert_eq!(raw["id"], "token:alice");

    // Each caller's own bucket; the shared one counts everyone's.
    assert_eq!(
        json_of(&alice, "remember", json!({"text": "alice's first"})).await,
        json!({"mine": 1, "everyone": 1})
    );
    assert_eq!(
        json_of(&bob, "remember", json!({"text": "bob's first"})).await,
        json!({"mine": 1, "everyone": 2})
    );
    json_of(&alice, "remember", json!({"text": "alice's second"})).await;
    assert_eq!(
        json_of(&alice, "recall", json!({})).await,
        json!(["alice's first", "alice's second"])
    );
    assert_eq!(
        json_of(&bob, "recall", json!({})).await,
        json!(["bob's first"])
    );

    // The to-do example keeps each user's items apart.
    json_of(&alice, "add", json!({"text": "buy milk"})).await;
    json_of(&bob, "add", json!({"text": "fix the bike"})).await;
    let items = |list: Value| crate::support::item_texts(&list);
    assert_eq!(
        items(json_of(&alice, "list", json!({})).await),
        ["buy milk"]
    );
    assert_eq!(
        items(json_of(&bob, "list", json!({})).await),
        ["fix the bike"]
    );

    // Quotas per caller (4 keys: a counter and three notes), then the plugin's total (8
    // keys, the shared counter included): bob, under his own quota, still cannot pass it.
    json_of(&alice, "remember", json!({"text": "third"})).await;
    let (text, error) = tool(&alice, "remember", json!({"text": "one too many"})).await;
    assert!(
        error
            && text.contains("one caller of plugin `caller_probe`")
            && text.contains("caller-max-keys"),
        "{text}"
    );
    json_of(&bob, "remember", json!({"text": "bob's second"})).await;
    let (text, error) = tool(&bob, "remember", json!({"text": "over the total"})).await;
    assert_eq!(
        json_of(&bob, "recall", json!({})).await,
        json!(["bob's first", "bob's second"])
    );
    assert!(
        error && text.contains("all its callers together") && text.contains("max-keys"),
        "{text}"
    );

    // Configuration: the literal, and the secret: alice's own, bob the shared one. Keys the
    // manifest does not name do not exist; an optional secret nobody has is absent.
    let value = async |client: &RunningService<RoleClient, RecordingClient>, key: &str| {
        json_of(client, "config_get", json!({ "key": key })).await["value"].clone()
    };
    assert_eq!(value(&alice, "greeting").await, "hello");
    assert_eq!(value(&alice, "api-token").await, ALICE_SECRET);
    assert_eq!(value(&bob, "api-token").await, SHARED_SECRET);
    assert_eq!(value(&bob, "maybe").await, Value::Null);
    assert_eq!(value(&bob, "HOME").await, Value::Null);
    assert_eq!(
        json_of(&bob, "config_keys", json!({})).await,
        json!(["api-token", "greeting"])
    );

    // A plugin built against the released WIT alone loads and runs beside them.
    let (shout, error) = tool(&bob, "shout", json!({"text": "still here"})).await;
    assert!(!error && shout.contains("STILL HERE"), "{shout}");

    // No secret's value reaches the log, the status page or the metrics: the real page and
    // the real metrics, read as an admitted caller.
    let read = async |path: &str| {
        let response = reqwest::Client::new()
            .get(server.url.replace("/mcp", path))
            .bearer_auth(BOB)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{path}: {text}");
        text
    };
    let status = read("/").await;
    assert!(
        status.contains("caller_probe") && status.contains("config_get"),
        "not the status page:\n{status}"
    );
    let metrics = read("/metrics").await;
    assert!(
        metrics.contains(r#"mcpbox_plugin_calls_total{plugin="caller_probe""#),
        "not the metrics:\n{metrics}"
    );
    for (what, text) in [
        ("the log", server.stderr.text()),
        ("the status page", status),
        ("the metrics", metrics),
    ] {
        for secret in [SHARED_SECRET, ALICE_SECRET, ALICE, BOB] {
            assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
        }
    }
    for client in [alice, bob, again] {
        client.cancel().await.unwrap();
    }
}

/// The value of a counter in a metrics exposition (0 if absent).
/// The text of the metrics at `url`.
async fn metrics_at(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

fn counter(metrics: &str, series: &str) -> f64 {
    crate::support::metric_value(metrics, series).unwrap_or(0.0)
}

/// Calls in quick succession run on instances prepared ahead of them (spares,
/// `--spare-instances always`). Alternating
/// two callers, each answer is still its own caller's (id, secret, notes), every call finds
/// its instance fresh (a static counter at one), and spares no call takes are dropped after a
/// second, leaving no instance held.
#[tokio::test]
async fn instances_prepared_ahead_carry_nothing_from_one_caller_to_the_next() {
    let TwoCallers {
        server,
        alice,
        bob,
        _dirs,
    } = two_callers(
        &[],
        &[
            // The metrics on a listener of their own, without the MCP listener's tokens.
            "--metrics-addr",
            "127.0.0.1:0",
            // Every plugin, not only those slow to instantiate.
            "--spare-instances",
            "always",
        ],
    )
    .await;
    let metrics_url = server.stderr.metrics_url().await;
    let metrics = async || metrics_at(&metrics_url).await;
    let alice_id = json_of(&alice, "whoami", json!({})).await["id"].clone();
    let bob_id = json_of(&bob, "whoami", json!({})).await["id"].clone();
    assert_ne!(alice_id, bob_id);
    let used = "mcpbox_spare_instances_total{outcome=\"used\"}";
    let used_before = counter(&metrics().await, used);
    for round in 0..20 {
        for (client, id, name) in [(&alice, &alice_id, "alice"), (&bob, &bob_id, "bob")] {
            let who = json_of(client, "whoami", json!({})).await;
            assert_eq!(who["id"], *id, "round {round}: {who}");
            assert_eq!(who["name"], name, "round {round}: {who}");
            assert_eq!(who["calls_in_this_instance"], 1, "round {round}: {who}");
            let secret = if name == "alice" {
                ALICE_SECRET
            } else {
                SHARED_SECRET
            };
            assert_eq!(
                json_of(client, "config_get", json!({"key": "api-token"})).await["value"],
                secret,
                "round {round}"
            );
        }
        // Alice's notes stay hers (her quota keeps three of them).
        if round < 3 {
            json_of(
                &alice,
                "remember",
                json!({"text": format!("alice {round}")}),
            )
            .await;
        }
        assert_eq!(
            json_of(&bob, "recall", json!({})).await,
            json!([]),
            "round {round}"
        );
    }
    assert_eq!(
        json_of(&alice, "recall", json!({})).await,
        json!(["alice 0", "alice 1", "alice 2"])
    );
    let text = metrics().await;
    assert!(
        counter(&text, used) >= used_before + 5.0,
        "calls in quick succession ran on spare instances:\n{text}"
    );
    // Nothing calls now: the spare left over is dropped within about two seconds.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = metrics().await;
        let expired = counter(&text, "mcpbox_spare_instances_total{outcome=\"expired\"}");
        if expired >= 1.0 && counter(&text, "mcpbox_instances_in_use") == 0.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the unused spare was not dropped:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for client in [alice, bob] {
        client.cancel().await.unwrap();
    }
}

/// Over stdio the caller is the local user, with every scope; `mcpbox state` lists and
/// removes one caller's data by principal key.
#[tokio::test]
async fn the_local_user_is_the_caller_over_stdio_and_the_operator_can_forget_a_caller() {
    let dir = plugins();
    let config_dir = tempfile::tempdir().unwrap();
    let secrets = secrets(config_dir.path());
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let args = [
        "--secrets",
        secrets.to_str().unwrap(),
        "--state-dir",
        state_dir,
    ];
    let client = connect(dir.path(), &args).await;
    let who = async |client: &crate::support::Client| {
        let result = tokio::time::timeout(STEP, client.call_tool(call("whoami", json!({}))))
            .await
            .unwrap()
            .unwrap();
        serde_json::from_str::<Value>(&tool_text(&result).0).unwrap()
    };
    let local = who(&client).await;
    assert_eq!(local["kind"], "local");
    assert_eq!(local["all_scopes"], true);
    let result = client
        .call_tool(call("remember", json!({"text": "a local note"})))
        .await
        .unwrap();
    assert!(!tool_text(&result).1);
    let result = client
        .call_tool(call("config_get", json!({"key": "api-token"})))
        .await
        .unwrap();
    assert!(tool_text(&result).0.contains(SHARED_SECRET));
    client.service.cancel().await.unwrap();

    // The same id after a restart.
    let client = connect(dir.path(), &args).await;
    assert_eq!(who(&client).await["id"], local["id"]);
    client.service.cancel().await.unwrap();

    // The operator's view (the store is free once mcpbox stopped).
    let state_cli = |more: &[&str]| crate::support::state_cli(more, &["--state-dir", state_dir]);
    let (listing, ok) = state_cli(&["ls", "caller_probe"]);
    assert!(
        ok && listing.contains("1 callers have buckets of their own"),
        "{listing}"
    );
    let (own, ok) = state_cli(&["ls", "caller_probe", "--principal", "local"]);
    assert!(
        ok && own.contains("mine\tnote:000001") && own.contains("caller `local`"),
        "{own}"
    );
    let (removed, ok) = state_cli(&["rm", "caller_probe", "--principal", "local"]);
    assert!(ok && removed.contains("(2 keys)"), "{removed}");
    let (listing, _) = state_cli(&["ls", "caller_probe"]);
    // The shared bucket's counter stays; the plugin's total went down by what the caller held.
    assert!(
        listing.contains("shared\tnotes") && listing.contains("1 keys"),
        "{listing}"
    );

    let client = connect(dir.path(), &args).await;
    let result = client.call_tool(call("recall", json!({}))).await.unwrap();
    assert_eq!(tool_text(&result).0, "[]");
    client.service.cancel().await.unwrap();
}

/// A secret the manifest needs and nobody has refuses the plugin, naming the key and the
/// secret; `mcpbox check` says the same and fails; a secrets file others can read is refused.
#[tokio::test]
async fn a_missing_or_exposed_secret_is_reported_by_name() {
    let dir = plugins();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("mcpbox.toml");
    std::fs::write(&config, format!("plugins = \"{}\"\n", dir.path().display())).unwrap();
    let check = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .args(["check", "--config", config.to_str().unwrap()])
            .envs(extra.chunks(2).map(|kv| (kv[0], kv[1])))
            .envs(crate::support::test_cache())
            .output()
            .unwrap();
        (
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
            output.status.success(),
        )
    };
    let (report, ok) = check(&[]);
    assert!(!ok, "{report}");
    assert!(
        report.contains("plugin `caller_probe`")
            && report.contains("api-token (secret service-token)"),
        "{report}"
    );
    let secrets = secrets(config_dir.path());
    let (report, ok) = check(&["MCPBOX_SECRETS", secrets.to_str().unwrap()]);
    assert!(ok && !report.contains("skipped plugin"), "{report}");
    assert!(!report.contains(SHARED_SECRET), "{report}");
    // `inspect` shows where each key comes from, never a value.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["inspect", dir.path().to_str().unwrap(), "--secrets"])
        .arg(&secrets)
        .envs(crate::support::test_cache())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && shown.contains("config api-token (secret service-token)"),
        "{shown}"
    );
    assert!(
        !shown.contains(SHARED_SECRET) && !shown.contains(ALICE_SECRET),
        "{shown}"
    );

    // serve without the secret: the plugin is refused by name; the others serve.
    let mut child = crate::support::mcpbox(dir.path(), &[]).spawn().unwrap();
    let stderr = crate::support::Stderr::collect(child.stderr.take().unwrap());
    let line = stderr.wait_for("api-token (secret service-token)").await;
    assert!(line.contains("caller_probe"), "{line}");
    drop(child);

    // A secrets file others may read is refused, and its values not shown.
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    let (report, ok) = check(&["MCPBOX_SECRETS", secrets.to_str().unwrap()]);
    assert!(!ok && report.contains("chmod 600"), "{report}");
    assert!(!report.contains(SHARED_SECRET), "{report}");
}

/// The weather example reads its API base and key through `wasi:config`: the key, a secret,
/// goes to the API and nowhere else.
#[tokio::test]
async fn the_weather_example_reads_its_api_and_key_through_wasi_config() {
    let api =
        crate::support::http_stub(r#"{"current":{"temperature_2m":3.5,"wind_speed_10m":20.0}}"#)
            .await;
    let dir = plugin_dir(&[("weather", "weather.wasm")]);
    std::fs::write(
        dir.path().join("weather.toml"),
        format!(
            "[http]\nallow = [\"127.0.0.1:{0}\"]\n\n[config]\napi-base = \"http://127.0.0.1:{0}\"\napi-key = {{ secret = \"open-meteo-key\" }}\n",
            api.port
        ),
    )
    .unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let secrets = config_dir.path().join("secrets.toml");
    std::fs::write(&secrets, "open-meteo-key = \"meteoKEY4711\"\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let client = connect(dir.path(), &["--secrets", secrets.to_str().unwrap()]).await;
    let result = client
        .call_tool(call(
            "current_weather",
            json!({"latitude": 48.1, "longitude": 11.6}),
        ))
        .await
        .unwrap();
    let shown = crate::support::json(&result);
    assert_eq!(
        shown["structuredContent"],
        json!({"temperature_celsius": 3.5, "wind_speed_kmh": 20.0})
    );
    let lines = api.lines.lock().unwrap().clone();
    assert!(
        lines.len() == 1 && lines[0].contains("&apikey=meteoKEY4711 "),
        "{lines:?}"
    );
    assert!(!shown.to_string().contains("meteoKEY4711"));
    assert!(!client.stderr.text().contains("meteoKEY4711"));
    client.service.cancel().await.unwrap();
}

/// With the state store unreachable a plugin that asks who calls fails that call, naming the
/// store, rather than being told "nobody"; caller buckets fail to open, saying why; a call
/// that does not ask is served as before.
#[tokio::test]
async fn without_the_state_store_a_caller_cannot_be_named_and_the_call_says_so() {
    let dir = plugins();
    let config_dir = tempfile::tempdir().unwrap();
    let secrets = secrets(config_dir.path());
    // Nothing listens on port 1.
    let client = connect(
        dir.path(),
        &[
            "--secrets",
            secrets.to_str().unwrap(),
            "--state",
            "redis://127.0.0.1:1",
        ],
    )
    .await;
    let ask = async |name: &'static str, arguments: Value| match client
        .call_tool(call(name, arguments))
        .await
    {
        Ok(result) => tool_text(&result),
        Err(e) => (e.to_string(), true),
    };
    let (text, error) = ask("whoami", json!({})).await;
    assert!(
        error && text.contains("cannot tell the plugin who calls") && text.contains("Redis"),
        "{text}"
    );
    let (text, error) = ask("recall", json!({})).await;
    assert!(
        error && text.contains("cannot open the caller's own `mine`"),
        "{text}"
    );
    let (text, error) = ask("config_get", json!({"key": "greeting"})).await;
    assert!(!error && text.contains("hello"), "{text}");
    client.service.cancel().await.unwrap();
}

/// SIGHUP reads the secrets file again: the next call sees the new value. A file that no
/// longer passes its checks is refused, and the secrets in use stay.
#[tokio::test]
async fn sighup_reads_the_secrets_file_again() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = plugins();
    let config_dir = tempfile::tempdir().unwrap();
    let secrets = secrets(config_dir.path());
    let mut raw =
        crate::support::Raw::initialized(dir.path(), &["--secrets", secrets.to_str().unwrap()])
            .await;
    let mut id = 0;
    let mut token = async |raw: &mut crate::support::Raw| {
        id += 1;
        let reply = raw
            .request(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"config_get","arguments":{{"key":"api-token"}}}}}}"#
            ))
            .await;
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(token(&mut raw).await.contains(SHARED_SECRET));
    // Rotated: the new value from the next call on.
    std::fs::write(&secrets, "service-token = \"rotated-SECRET-1234\"\n").unwrap();
    crate::support::hangup(&raw.child);
    raw.stderr.wait_for("plugin secrets read again").await;
    assert!(token(&mut raw).await.contains("rotated-SECRET-1234"));
    // Made readable by others: refused, the rotated value stays.
    std::fs::write(&secrets, "service-token = \"exposed-SECRET-5678\"\n").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    crate::support::hangup(&raw.child);
    raw.stderr.wait_for("kept the secrets in use").await;
    assert!(token(&mut raw).await.contains("rotated-SECRET-1234"));
    let log = raw.stderr.text();
    assert!(
        !log.contains("rotated-SECRET") && !log.contains("exposed-SECRET"),
        "{log}"
    );
}

/// The memory plugin (the reference server `server-memory`): each caller has a knowledge
/// graph of their own, and a subscriber to `memory://knowledge-graph` hears of each change.
/// A directory with the reference plugin `name` (from `plugins/KRATE`) and the manifest it
/// ships, and a configuration file (in its own directory) naming alice's and bob's tokens.
fn reference_plugin(
    krate: &str,
    name: &str,
) -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
    let dir = plugin_dir(&[(name, &format!("{name}.wasm"))]);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../plugins/{krate}/{name}.toml")),
        dir.path().join(format!("{name}.toml")),
    )
    .unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = token_config(
        config_dir.path(),
        &[("alice", ALICE, &[]), ("bob", BOB, &[])],
        "",
    );
    (dir, config_dir, config)
}

#[tokio::test]
async fn each_caller_has_a_knowledge_graph_of_their_own() {
    let (dir, _config_dir, config) = reference_plugin("memory", "memory");
    let server = HttpServer::start(dir.path(), &["--config", config.to_str().unwrap()]).await;
    let recorder = RecordingClient::new(&json!({}));
    let alice = server.connect(recorder.clone(), Some(ALICE)).await;
    let bob = server
        .connect(RecordingClient::new(&json!({})), Some(BOB))
        .await;
    alice
        .subscribe(rmcp::model::SubscribeRequestParams::new(
            "memory://knowledge-graph",
        ))
        .await
        .unwrap();
    let entities = json!({"entities": [{"name": "secret", "entityType": "note", "observations": ["alice's"]}]});
    let (_, error) = tool_text(
        &alice
            .call_tool(call("create_entities", entities))
            .await
            .unwrap(),
    );
    assert!(!error);
    recorder.wait_for("resources/updated", 1).await;
    let graph = async |service: &RunningService<RoleClient, RecordingClient>| {
        let result = service
            .call_tool(call("read_graph", json!({})))
            .await
            .unwrap();
        crate::support::json(&result)["structuredContent"]["entities"].clone()
    };
    assert_eq!(graph(&alice).await.as_array().unwrap().len(), 1);
    assert_eq!(graph(&bob).await, json!([]));
    let search = bob
        .call_tool(call("search_nodes", json!({"query": "secret"})))
        .await
        .unwrap();
    assert!(!tool_text(&search).0.contains("alice's"), "{search:?}");
}

/// The sequential-thinking plugin keeps its history in memory (`in-memory = true`), as the
/// original keeps it in its process: each caller's own, nothing in the state store, and gone
/// after a restart on the same state directory.
#[tokio::test]
async fn each_caller_thinks_alone_and_in_memory_only() {
    let (dir, _config_dir, config) = reference_plugin("sequential-thinking", "sequential_thinking");
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let think = async |service: &RunningService<RoleClient, RecordingClient>, branch: &str| {
        let mut arguments = json!({"thought": "a step", "nextThoughtNeeded": true,
            "thoughtNumber": 1, "totalThoughts": 3});
        if !branch.is_empty() {
            arguments["branchFromThought"] = json!(1);
            arguments["branchId"] = json!(branch);
        }
        let result = service
            .call_tool(call("sequentialthinking", arguments))
            .await
            .unwrap();
        let recorded = crate::support::json(&result)["structuredContent"].clone();
        (
            recorded["thoughtHistoryLength"].clone(),
            recorded["branches"].clone(),
        )
    };
    let server = HttpServer::start(dir.path(), &args).await;
    assert!(
        server
            .stderr
            .text()
            .contains("kept in memory, gone when mcpbox stops"),
        "the grant is shown: {}",
        server.stderr.text()
    );
    let alice = server
        .connect(RecordingClient::new(&json!({})), Some(ALICE))
        .await;
    let bob = server
        .connect(RecordingClient::new(&json!({})), Some(BOB))
        .await;
    assert_eq!(think(&alice, "").await, (json!(1), json!([])));
    assert_eq!(think(&alice, "idea").await, (json!(2), json!(["idea"])));
    assert_eq!(think(&bob, "").await, (json!(1), json!([])));
    assert_eq!(think(&alice, "").await, (json!(3), json!(["idea"])));
    drop((alice, bob));
    // Gone for good before the store is opened (dropping only sends the signal).
    let mut server = server;
    server.child.kill().await.unwrap();

    // Nothing reached the state store.
    let (listed, ok) = crate::support::state_cli(
        &["ls", "sequential_thinking"],
        &["--state-dir", state.path().to_str().unwrap()],
    );
    assert!(
        ok && listed.contains("`sequential_thinking`: 0 keys, 0 bytes"),
        "{listed}"
    );

    let server = HttpServer::start(dir.path(), &args).await;
    let alice = server
        .connect(RecordingClient::new(&json!({})), Some(ALICE))
        .await;
    assert_eq!(think(&alice, "").await, (json!(1), json!([])));
}

/// `instances = "per-caller"`: an instance a call returned from serves the same caller's next
/// calls (a static counter climbs), never another caller's (each caller's counter climbs by
/// one from its own last value, and a caller's first call finds a fresh instance), each call
/// still bound to its own caller (id, secret); an instance left unused for a second is dropped,
/// and the next call finds a fresh one.
#[tokio::test]
async fn an_instance_kept_per_caller_serves_that_caller_alone() {
    let dir = plugin_dir(&[("caller_probe", "caller_probe.wasm")]);
    std::fs::write(
        dir.path().join("caller_probe.toml"),
        "instances = \"per-caller\"\n\n[config]\napi-token = { secret = \"service-token\" }\n",
    )
    .unwrap();
    let TwoCallers {
        server,
        alice,
        bob,
        _dirs,
    } = two_callers_of(dir, &[], &["--metrics-addr", "127.0.0.1:0"]).await;
    let metrics_url = server.stderr.metrics_url().await;
    let metrics = async || metrics_at(&metrics_url).await;
    let calls = |who: &Value| who["calls_in_this_instance"].as_u64().unwrap();

    // Alice alone: her calls in quick succession share an instance.
    let alice_id = json_of(&alice, "whoami", json!({})).await["id"].clone();
    let mut last = 1;
    let mut most = 1;
    for _ in 0..10 {
        let who = json_of(&alice, "whoami", json!({})).await;
        assert_eq!(who["id"], alice_id, "{who}");
        let n = calls(&who);
        assert!(
            n == 1 || n == last + 1,
            "alice's instance served someone else: {n} after {last}"
        );
        (last, most) = (n, most.max(n));
    }
    assert!(
        most >= 3,
        "calls in quick succession found no kept instance ({most})"
    );

    // Bob's first call finds a fresh instance, not alice's; then they alternate, each
    // counter climbing from its own caller's last value alone.
    let first = json_of(&bob, "whoami", json!({})).await;
    assert_eq!(calls(&first), 1, "bob was given alice's instance: {first}");
    let bob_id = first["id"].clone();
    assert_ne!(alice_id, bob_id);
    let mut lasts = [last, 1];
    for round in 0..10 {
        for (i, (client, id, secret)) in [
            (&alice, &alice_id, ALICE_SECRET),
            (&bob, &bob_id, SHARED_SECRET),
        ]
        .into_iter()
        .enumerate()
        {
            let who = json_of(client, "whoami", json!({})).await;
            assert_eq!(who["id"], *id, "round {round}: {who}");
            let n = calls(&who);
            assert!(
                n == 1 || n == lasts[i] + 1,
                "round {round}: an instance crossed callers ({n} after {})",
                lasts[i]
            );
            // Counted by whoami alone: config_get runs on the same instance or a fresh one.
            let value = json_of(client, "config_get", json!({"key": "api-token"})).await;
            assert_eq!(value["value"], secret, "round {round}");
            lasts[i] = n;
        }
    }
    let text = metrics().await;
    assert!(
        counter(&text, "mcpbox_kept_instances_total{outcome=\"used\"}") >= 10.0,
        "{text}"
    );

    // Unused for a second, the kept instances are dropped: the next call starts afresh.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let text = metrics().await;
        if counter(&text, "mcpbox_kept_instances_total{outcome=\"expired\"}") >= 2.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the unused kept instances were not dropped:\n{text}"
        );
    }
    let who = json_of(&alice, "whoami", json!({})).await;
    assert_eq!(calls(&who), 1, "{who}");
    for client in [alice, bob] {
        client.cancel().await.unwrap();
    }
}

/// An instance is kept for its caller only while it is healthy and small: not after a call
/// that panicked, nor once it holds more than a quarter of its memory limit or more than a
/// quarter of a call's handles; the next call then finds a fresh instance. Over stdio (the
/// local user).
#[tokio::test]
async fn an_instance_is_kept_only_while_healthy_and_small() {
    let dir = plugin_dir(&[("caller_probe", "caller_probe.wasm")]);
    std::fs::write(
        dir.path().join("caller_probe.toml"),
        "instances = \"per-caller\"\n\n[limits]\nmemory-mib = 64\n\n[keyvalue]\ncaller-buckets = [\"mine\"]\n",
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let client = connect(
        dir.path(),
        &[
            "--state-dir",
            state.path().to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    )
    .await;
    let metrics_url = client.stderr.metrics_url().await;
    // What the host decided about each instance, as it reports it: kept after a call (counted
    // before the call's answer goes), used by the next, or expired (too old to use).
    let outcomes = async || {
        let text = metrics_at(&metrics_url).await;
        ["kept", "used", "expired"].map(|o| {
            counter(
                &text,
                &format!("mcpbox_kept_instances_total{{outcome=\"{o}\"}}"),
            )
        })
    };
    let run = async |name: &'static str, arguments: Value| {
        let result = tokio::time::timeout(STEP, client.call_tool(call(name, arguments)))
            .await
            .expect("answered in time")
            .unwrap_or_else(|e| panic!("{name} failed: {e}"));
        tool_text(&result)
    };
    let calls = async || {
        let (text, error) = run("whoami", json!({})).await;
        assert!(!error, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["calls_in_this_instance"]
            .as_u64()
            .unwrap()
    };
    // `name` runs; the host keeps its instance or not, as `kept` says. Kept, the next call
    // runs on it (the count climbs from `after`), unless the host reports it too old to use
    // (expired: then that call starts afresh), so no check passes because time went by.
    let step = async |name: &'static str, arguments: Value, kept: bool, after: u64| {
        let [kept_before, ..] = outcomes().await;
        let (text, error) = run(name, arguments).await;
        let [kept_after, used_before, expired_before] = outcomes().await;
        assert_eq!(
            kept_after - kept_before,
            if kept { 1.0 } else { 0.0 },
            "{name} (kept: {kept}): {text}"
        );
        // `whoami` counts itself: where the next count climbs from.
        let after = if name == "whoami" {
            serde_json::from_str::<Value>(&text).unwrap()["calls_in_this_instance"]
                .as_u64()
                .unwrap()
        } else {
            after
        };
        let next = calls().await;
        let [_, used, expired] = outcomes().await;
        if kept && used > used_before {
            assert_eq!(
                next,
                after + 1,
                "{name}: the kept instance was not the one used"
            );
        } else {
            assert!(
                !kept || expired > expired_before,
                "{name}: kept but neither used nor expired"
            );
            assert_eq!(
                next, 1,
                "{name}: the next call did not find a fresh instance"
            );
        }
        (text, error, next)
    };

    calls().await;
    step("whoami", json!({}), true, 0).await;

    // A call that panicked: its instance is gone.
    let (text, error, _) = step("fail", json!({}), false, 0).await;
    assert!(error && text.contains("asked to fail"), "{text}");

    // 8 MiB held (under a quarter of 64 MiB): kept. 24 MiB more: not kept.
    let (text, error, _) = step("hold", json!({"count": 8}), true, 1).await;
    assert!(!error, "{text}");
    let (text, error, _) = step("hold", json!({"count": 24}), false, 0).await;
    assert!(!error, "{text}");

    // 10 handles leaked: kept. 70 (past a quarter of a call's 256): not kept.
    let (text, error, _) = step("leak_buckets", json!({"count": 10}), true, 1).await;
    assert!(!error, "{text}");
    let (text, error, _) = step("leak_buckets", json!({"count": 70}), false, 0).await;
    assert!(!error, "{text}");
    client.service.cancel().await.unwrap();
}
