//! Durable plugin state (`wasi:keyvalue`) through a real client, on the embedded database.
//!
//! The suites every backend must pass run here on disk, and unchanged on a real
//! `redis-server` in `services::state_redis` (with Redis's own tests: replicas sharing it, it
//! going away mid-run and coming back): [`backend_suite`] (grants, namespaces that crafted
//! buckets and keys cannot escape, quotas with clear errors, and 64 concurrent increments that
//! lose no update), [`paging_suite`] (paging by key, counters, failed writes) and the to-do
//! example listing over a thousand items. Around them: state surviving a restart, a hot reload
//! and `kill -9`, and the operator's `mcpbox state` command. Several processes on one state
//! directory: `state_shared`.

use std::path::Path;

use futures::future::join_all;
use serde_json::{Value, json};

use crate::support::{Client, Raw, STEP, call, connect, example_plugins, plugin_dir, tool_text};

/// A plugin directory with the probe under `names`, each granted `default` and `shared` with
/// small quotas, plus one probe (`ungranted`) without a manifest.
pub(crate) fn probe_dir(names: &[&str]) -> tempfile::TempDir {
    let mut plugins: Vec<(&str, String)> = names
        .iter()
        .map(|name| ("kv_probe", format!("{name}.wasm")))
        .collect();
    plugins.push(("kv_probe", "ungranted.wasm".to_owned()));
    let borrowed: Vec<(&str, &str)> = plugins.iter().map(|(p, f)| (*p, f.as_str())).collect();
    let dir = plugin_dir(&borrowed);
    for name in names {
        std::fs::write(
            dir.path().join(format!("{name}.toml")),
            format!(
                "[env]\nKV_TOOL = \"{name}_kv\"\n\n[keyvalue]\nbuckets = [\"default\", \"shared\"]\nquota-kib = 64\nmax-keys = 100\nmax-value-kib = 8\n"
            ),
        )
        .unwrap();
    }
    dir
}

/// Call `tool` (a probe's `<plugin>_kv`, or the ungranted probe's `kv`). Returns (text,
/// isError).
pub(crate) async fn kv(client: &Client, tool: &str, arguments: Value) -> (String, bool) {
    let tool: &'static str = Box::leak(tool.to_owned().into_boxed_str());
    let result = tokio::time::timeout(STEP, client.call_tool(call(tool, arguments)))
        .await
        .expect("answered in time")
        .unwrap_or_else(|e| panic!("{tool} failed: {e}\n{}", client.stderr.text()));
    tool_text(&result)
}

/// The suite both backends must pass; `state` is how mcpbox is told where state lives.
pub(crate) async fn backend_suite(state: &[&str]) {
    // The same code under two names: two plugins, two namespaces.
    let dir = probe_dir(&["alpha", "beta"]);
    let client = connect(dir.path(), state).await;
    let (a, b, none) = ("alpha_kv", "beta_kv", "kv");

    // Grants: a plugin without one is refused, naming the grant it lacks.
    let (text, error) = kv(&client, none, json!({"op": "get", "key": "k"})).await;
    assert!(error && text.contains("not granted"), "{text}");
    let (text, error) = kv(
        &client,
        a,
        json!({"op": "get", "bucket": "other", "key": "k"}),
    )
    .await;
    assert!(
        error && text.contains("bucket `other` is not granted"),
        "{text}"
    );

    // Namespaces: the same bucket and key in two plugins are two entries.
    assert_eq!(
        kv(
            &client,
            a,
            json!({"op": "set", "key": "k", "value": "from-a"})
        )
        .await,
        ("\"ok\"".into(), false)
    );
    assert_eq!(
        kv(
            &client,
            a,
            json!({"op": "set", "bucket": "shared", "key": "k", "value": "shared-a"})
        )
        .await,
        ("\"ok\"".into(), false)
    );
    assert_eq!(
        kv(&client, b, json!({"op": "get", "key": "k"})).await,
        ("null".into(), false)
    );
    assert_eq!(
        kv(
            &client,
            b,
            json!({"op": "get", "bucket": "shared", "key": "k"})
        )
        .await,
        ("null".into(), false)
    );
    assert_eq!(
        kv(&client, a, json!({"op": "get", "key": "k"})).await,
        ("\"from-a\"".into(), false)
    );
    // Crafted keys are data in b's own namespace, never a way into a's.
    let crafted = [
        "../alpha/default/k",
        "alpha:default:k",
        "mcpbox:kv:5:alpha:default",
        "k\u{0}",
        "\u{0}",
        "ключ/🔑",
        "default/k",
        "/k",
        "k/..",
        "*",
        "%",
    ];
    for key in crafted {
        assert_eq!(
            kv(&client, b, json!({"op": "get", "key": key})).await,
            ("null".into(), false),
            "{key:?}"
        );
        assert_eq!(
            kv(
                &client,
                b,
                json!({"op": "set", "key": key, "value": "from-b"})
            )
            .await,
            ("\"ok\"".into(), false),
            "{key:?}"
        );
    }
    let (listed, _) = kv(&client, b, json!({"op": "keys", "key": ""})).await;
    let listed: Vec<String> = serde_json::from_str(&listed).unwrap();
    let mut expected: Vec<String> = crafted.iter().map(|k| (*k).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected, "b sees exactly its own keys");
    let (listed, _) = kv(&client, a, json!({"op": "keys", "key": ""})).await;
    assert_eq!(listed, "[\"k\"]", "a sees only its own key");
    assert_eq!(
        kv(&client, a, json!({"op": "get", "key": "k"})).await.0,
        "\"from-a\""
    );
    // Crafted buckets are refused unless granted, whatever they look like.
    for bucket in [
        "",
        "../alpha",
        "default\u{0}",
        "default/..",
        "DEFAULT",
        &"d".repeat(5000),
    ] {
        let (text, error) = kv(
            &client,
            b,
            json!({"op": "get", "bucket": bucket, "key": "k"}),
        )
        .await;
        assert!(error && text.contains("not granted"), "{bucket:?}: {text}");
    }
    // Empty and very long keys get a clear error.
    let (text, error) = kv(&client, b, json!({"op": "set", "key": "", "value": "v"})).await;
    assert!(error && text.contains("must not be empty"), "{text}");
    let (text, error) = kv(
        &client,
        b,
        json!({"op": "set", "key": "k".repeat(1025), "value": "v"}),
    )
    .await;
    assert!(error && text.contains("at most 1024 bytes"), "{text}");

    // Quotas: each names the plugin and the limit, and nothing is written.
    let (text, error) = kv(
        &client,
        a,
        json!({"op": "set", "key": "big", "size": 8 * 1024 + 1}),
    )
    .await;
    assert!(
        error && text.contains("plugin `alpha`") && text.contains("max-value-kib"),
        "{text}"
    );
    assert_eq!(
        kv(&client, a, json!({"op": "exists", "key": "big"}))
            .await
            .0,
        "false"
    );
    for i in 0..7 {
        let (text, error) = kv(
            &client,
            a,
            json!({"op": "set", "key": format!("fill{i}"), "size": 8 * 1024}),
        )
        .await;
        assert!(!error, "{text}");
    }
    let (text, error) = kv(
        &client,
        a,
        json!({"op": "set", "key": "fill7", "size": 8 * 1024}),
    )
    .await;
    assert!(
        error && text.contains("plugin `alpha`") && text.contains("quota-kib"),
        "{text}"
    );
    // Deleting frees the quota again.
    kv(&client, a, json!({"op": "delete", "key": "fill0"})).await;
    assert!(
        !kv(
            &client,
            a,
            json!({"op": "set", "key": "fill7", "size": 8 * 1024})
        )
        .await
        .1
    );
    // The key quota: 100 keys; b holds 11, so 89 more fit and the 90th fails.
    for i in 0..89 {
        assert!(
            !kv(
                &client,
                b,
                json!({"op": "set", "key": format!("n{i}"), "value": "v"})
            )
            .await
            .1
        );
    }
    let (text, error) = kv(&client, b, json!({"op": "set", "key": "n89", "value": "v"})).await;
    assert!(
        error && text.contains("plugin `beta`") && text.contains("max-keys"),
        "{text}"
    );
    // Replacing an existing key is no new key.
    assert!(
        !kv(&client, b, json!({"op": "set", "key": "n0", "value": "w"}))
            .await
            .1
    );
    // Increments on a non-integer fail clearly.
    let (text, error) = kv(&client, a, json!({"op": "increment", "key": "k"})).await;
    assert!(
        error && text.contains("not") && text.contains("integer"),
        "{text}"
    );

    // 64 increments in flight at once lose no update; compare-and-swap neither.
    let calls = (0..64).map(|_| kv(&client, a, json!({"op": "increment", "key": "counter"})));
    let results = join_all(calls).await;
    assert!(results.iter().all(|(_, error)| !error), "{results:?}");
    let mut sums: Vec<i64> = results.iter().map(|(t, _)| t.parse().unwrap()).collect();
    sums.sort_unstable();
    assert_eq!(
        sums,
        (1..=64).collect::<Vec<_>>(),
        "each increment saw its own sum"
    );
    assert_eq!(
        kv(&client, a, json!({"op": "get", "key": "counter"}))
            .await
            .0,
        "\"64\""
    );
    let updates = (0..16).map(|_| kv(&client, a, json!({"op": "update", "key": "cas"})));
    let results = join_all(updates).await;
    assert!(results.iter().all(|(_, error)| !error), "{results:?}");
    assert_eq!(
        kv(&client, a, json!({"op": "get", "key": "cas"})).await.0,
        format!("\"\\\"{}\\\"\"", "+".repeat(16))
    );

    // Host resources a plugin could hoard are bounded: handles per call, keys per batch.
    let (text, error) = kv(&client, a, json!({"op": "open_many", "delta": 10_000})).await;
    assert!(error && text.contains("handle"), "{text}");
    let keys: Vec<String> = (0..1001).map(|i| format!("k{i}")).collect();
    let (text, error) = kv(&client, a, json!({"op": "get_many", "keys": keys})).await;
    assert!(error && text.contains("at most 1000 keys"), "{text}");

    // And after all of that, the host still serves.
    client.list_all_tools().await.unwrap();
    client.service.cancel().await.unwrap();
}

#[tokio::test]
async fn the_disk_backend_passes_the_suite() {
    let dir = crate::support::fresh_state_dir();
    backend_suite(&["--state-dir", dir.to_str().unwrap()]).await;
}

pub(crate) use crate::support::eventually;

pub(crate) fn todo_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[("todo", "todo.wasm")]);
    std::fs::copy(
        example_plugins().join("todo.toml"),
        dir.path().join("todo.toml"),
    )
    .unwrap();
    dir
}

pub(crate) async fn todo_items(client: &Client) -> Vec<String> {
    let (text, error) = kv(client, "list", json!({"include_done": true})).await;
    assert!(!error, "{text}");
    crate::support::item_texts(&serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn state_survives_restart_reload_and_kill_9() {
    let plugins = todo_dir();
    let state = crate::support::fresh_state_dir();
    let args = ["--state-dir", state.to_str().unwrap()];

    let client = connect(plugins.path(), &args).await;
    assert!(!kv(&client, "add", json!({"text": "one"})).await.1);
    assert!(!kv(&client, "add", json!({"text": "two"})).await.1);
    // A hot reload: the plugin file replaced (new bytes, same code).
    let mut bytes = std::fs::read(plugins.path().join("todo.wasm")).unwrap();
    bytes.extend_from_slice(&[0, 4, 3, b'a', b'b', b'c']);
    let temporary = plugins.path().join(".todo.tmp");
    std::fs::write(&temporary, &bytes).unwrap();
    std::fs::rename(&temporary, plugins.path().join("todo.wasm")).unwrap();
    client.stderr.wait_for("reloaded").await;
    assert_eq!(todo_items(&client).await, ["one", "two"]);
    client.service.cancel().await.unwrap();

    // A restart.
    let client = connect(plugins.path(), &args).await;
    assert_eq!(todo_items(&client).await, ["one", "two"]);
    client.service.cancel().await.unwrap();

    // kill -9 right after a write was acknowledged.
    let mut raw = Raw::initialized(plugins.path(), &args).await;
    let reply = raw
        .request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"text":"three"}}}"#)
        .await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    raw.child.start_kill().unwrap();
    raw.child.wait().await.unwrap();
    let client = connect(plugins.path(), &args).await;
    assert_eq!(todo_items(&client).await, ["one", "two", "three"]);
    client.service.cancel().await.unwrap();

    // The operator's view.
    let store = ["--state-dir", state.to_str().unwrap()];
    let state_cli = |args: &[&str]| crate::support::state_cli(args, &store);
    // The example keeps each caller's items apart: the local user's are theirs.
    let (listing, ok) = state_cli(&["ls", "todo", "--principal", "local"]);
    assert!(
        ok && listing.contains("default\titem:000000000003") && listing.contains("4 keys"),
        "{listing}"
    );
    let (listing, ok) = state_cli(&["ls", "todo"]);
    assert!(
        ok && listing.contains("4 keys") && listing.contains("1 callers have buckets"),
        "{listing}"
    );
    let (value, ok) = state_cli(&["get", "todo", "item:000000000002", "--principal", "local"]);
    assert!(ok, "{value}");
    assert_eq!(
        serde_json::from_str::<Value>(&value).unwrap()["text"],
        "two"
    );
    let (missing, ok) = state_cli(&["get", "todo", "nope", "--principal", "local"]);
    assert!(!ok && missing.contains("no key `nope`"), "{missing}");
    assert!(state_cli(&["rm", "todo", "item:000000000001", "--principal", "local"]).1);
    let client = connect(plugins.path(), &args).await;
    assert_eq!(todo_items(&client).await, ["two", "three"]);
    client.service.cancel().await.unwrap();
    let (removed, ok) = state_cli(&["rm", "todo"]);
    assert!(ok && removed.contains("3 keys"), "{removed}");
    assert!(state_cli(&["ls", "todo"]).0.contains("0 keys"));
}

#[tokio::test]
async fn grants_are_logged_at_load() {
    let plugins = todo_dir();
    let client = connect(plugins.path(), &[]).await;
    client
        .stderr
        .wait_for(
            "keyvalue buckets [] (at most 4096 KiB, 10000 keys, 16 KiB per value); keyvalue \
             caller buckets [default] (each caller's own: at most 256 KiB, 500 keys)",
        )
        .await;
    client.service.cancel().await.unwrap();
}

/// The state directory is created on first use only.
#[tokio::test]
async fn no_state_is_created_until_a_plugin_uses_it() {
    let plugins = todo_dir();
    let state = crate::support::fresh_state_dir();
    let client = connect(plugins.path(), &["--state-dir", state.to_str().unwrap()]).await;
    client.list_all_tools().await.unwrap();
    assert!(!Path::new(&state).exists());
    assert!(!kv(&client, "add", json!({"text": "x"})).await.1);
    assert!(state.join("state.sqlite").exists());
    client.service.cancel().await.unwrap();
}

/// A component built against the earlier draft (`wasi:keyvalue@0.2.0-draft`) loads and works,
/// under the same grant and namespace rules.
#[tokio::test]
async fn the_earlier_draft_works_too() {
    let plugins = plugin_dir(&[("kv_draft", "counter.wasm")]);
    std::fs::write(
        plugins.path().join("counter.toml"),
        "[keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    let client = connect(plugins.path(), &[]).await;
    assert_eq!(
        kv(&client, "hits", json!({})).await,
        ("1 hits".into(), false)
    );
    assert_eq!(
        kv(&client, "hits", json!({})).await,
        ("2 hits".into(), false)
    );
    client.service.cancel().await.unwrap();

    let bare = plugin_dir(&[("kv_draft", "ungranted.wasm")]);
    let client = connect(bare.path(), &[]).await;
    assert_eq!(
        kv(&client, "hits", json!({})).await,
        ("access denied".into(), true)
    );
    client.service.cancel().await.unwrap();
}

/// The todo example announces its resource when the list changes: a subscribed client is told,
/// re-reads it, and sees the new item.
#[tokio::test]
async fn the_todo_example_announces_its_resource_when_it_changes() {
    use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, SubscribeRequestParams};
    let plugins = todo_dir();
    let recorder = crate::support::RecordingClient::new(&json!({}));
    let service = crate::support::connect_with(plugins.path(), &[], recorder.clone()).await;
    service
        .subscribe(SubscribeRequestParams::new("todo://items"))
        .await
        .unwrap();
    let Value::Object(arguments) = json!({"text": "water the plants"}) else {
        unreachable!()
    };
    let added = service
        .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(crate::support::json(&added)["structuredContent"]["id"], 1);
    let updates = recorder.wait_for("resources/updated", 1).await;
    assert_eq!(updates[0]["uri"], "todo://items");
    let read = service
        .read_resource(ReadResourceRequestParams::new("todo://items"))
        .await
        .unwrap();
    let text = crate::support::json(&read)["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let items: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(items[0]["text"], "water the plants");
    service.cancel().await.unwrap();
}

/// A plugin directory with the probe as `pager` (tool `pager_kv`) and the earlier draft's
/// fixture as `counter`, both granted `default` with room for thousands of keys.
fn paging_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[("kv_probe", "pager.wasm"), ("kv_draft", "counter.wasm")]);
    std::fs::write(
        dir.path().join("pager.toml"),
        "[env]\nKV_TOOL = \"pager_kv\"\n\n[limits]\ntimeout-ms = 55000\n\n[keyvalue]\nbuckets = [\"default\"]\nquota-kib = 4096\nmax-keys = 10000\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("counter.toml"),
        "[limits]\ntimeout-ms = 55000\n\n[keyvalue]\nbuckets = [\"default\"]\nquota-kib = 4096\nmax-keys = 10000\n",
    )
    .unwrap();
    dir
}

/// A JSON answer of the probe (`pager_kv`), insisting it succeeded.
async fn pager(client: &Client, arguments: Value) -> Value {
    let (text, error) = kv(client, "pager_kv", arguments).await;
    assert!(!error, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Paging, counters and failed writes, the same on both backends; `state` says where.
pub(crate) async fn paging_suite(state: &[&str]) {
    let dir = paging_dir();
    let client = connect(dir.path(), state).await;
    let fill = json!({"op": "fill", "key": "k", "delta": 2500});

    // 2,500 keys: three pages of at most 1,000 (the batch cap too), each key once.
    pager(&client, fill.clone()).await;
    assert_eq!(
        pager(&client, json!({"op": "walk"})).await,
        json!({"keys": 2500, "distinct": 2500, "pages": 3, "largest": 1000})
    );
    // A drain, page by page, each page fed to delete-many before the next is read: nothing
    // left (an offset cursor skipped a page's worth of keys after each deletion).
    assert_eq!(
        pager(&client, json!({"op": "drain"})).await,
        json!({"pages": 3, "largest": 1000, "deleted": 2500})
    );
    assert_eq!(
        pager(&client, json!({"op": "walk"})).await,
        json!({"keys": 0, "distinct": 0, "pages": 1, "largest": 0})
    );

    // Another caller deletes 200 keys of page 1 while this one pages: the later pages still
    // hold every key that existed throughout, once each.
    pager(&client, fill).await;
    let first = pager(&client, json!({"op": "page"})).await;
    let first_keys: Vec<String> = serde_json::from_value(first["keys"].clone()).unwrap();
    assert_eq!(first_keys.len(), 1000);
    assert_eq!(first["cursor"], "k00999");
    pager(
        &client,
        json!({"op": "delete_many", "keys": first_keys[..200]}),
    )
    .await;
    let mut rest = Vec::new();
    let mut cursor = first["cursor"].clone();
    while !cursor.is_null() {
        let page = pager(&client, json!({"op": "page", "cursor": cursor})).await;
        let keys: Vec<String> = serde_json::from_value(page["keys"].clone()).unwrap();
        assert!(keys.len() <= 1000, "a page of {}", keys.len());
        rest.extend(keys);
        cursor = page["cursor"].clone();
    }
    let expected: Vec<String> = (1000..2500).map(|i| format!("k{i:05}")).collect();
    assert_eq!(
        rest, expected,
        "the pages after the first, in order, none missed"
    );

    // Cursors are plugin input: any position is well defined, an impossible one refused.
    let past = pager(&client, json!({"op": "page", "cursor": "zzz"})).await;
    assert_eq!(past, json!({"keys": [], "cursor": null}));
    let between = pager(&client, json!({"op": "page", "cursor": "k024985"})).await;
    assert_eq!(between["keys"], json!(["k02499"]));
    let (text, error) = kv(
        &client,
        "pager_kv",
        json!({"op": "page", "cursor": "c".repeat(1025)}),
    )
    .await;
    assert!(error && text.starts_with("invalid cursor `ccc"), "{text}");

    // Counters: one rule on both backends, the canonical decimal text of an i64.
    let not_a_counter = "cannot increment: the key holds a value that is not a decimal integer (the canonical text of a signed 64-bit integer: an optional `-`, digits, no `+` or leading zeros); nothing was written";
    for stored in ["007", "+5", "-0", " 5", "5.0", "x"] {
        pager(&client, json!({"op": "set", "key": "n", "value": stored})).await;
        assert_eq!(
            kv(&client, "pager_kv", json!({"op": "increment", "key": "n"})).await,
            (not_a_counter.to_owned(), true),
            "{stored:?}"
        );
        assert_eq!(
            pager(&client, json!({"op": "get", "key": "n"})).await,
            stored,
            "a failed increment writes nothing"
        );
    }
    pager(&client, json!({"op": "set", "key": "n", "value": "-5"})).await;
    assert_eq!(
        pager(&client, json!({"op": "increment", "key": "n", "delta": 12})).await,
        7
    );
    pager(
        &client,
        json!({"op": "set", "key": "n", "value": i64::MAX.to_string()}),
    )
    .await;
    assert_eq!(
        kv(&client, "pager_kv", json!({"op": "increment", "key": "n"})).await,
        (
            "cannot increment: 9223372036854775807 + 1 is outside the range of a signed 64-bit integer; nothing was written".to_owned(),
            true
        )
    );
    assert_eq!(
        pager(&client, json!({"op": "get", "key": "n"})).await,
        i64::MAX.to_string()
    );

    // The earlier draft's unsigned counter: a negative sum is refused, and nothing written.
    assert_eq!(
        kv(&client, "hits", json!({"op": "set", "value": "-5"})).await,
        ("ok".into(), false)
    );
    assert_eq!(
        kv(&client, "hits", json!({})).await,
        (
            "cannot increment: the counter would be negative (-4), and this interface's counters are unsigned; nothing was written".to_owned(),
            true
        )
    );
    assert_eq!(
        kv(&client, "hits", json!({"op": "get"})).await,
        ("-5".into(), false)
    );
    // Its numeric cursors page by key too.
    assert_eq!(
        kv(&client, "hits", json!({"op": "fill", "n": 2100})).await,
        ("ok".into(), false)
    );
    assert_eq!(
        kv(&client, "hits", json!({"op": "count"})).await,
        ("2101 keys, 2101 distinct, 3 pages".into(), false)
    );
    client.service.cancel().await.unwrap();
}

#[tokio::test]
async fn the_disk_backend_pages_by_key_and_keeps_counters_strictly() {
    let dir = crate::support::fresh_state_dir();
    paging_suite(&["--state-dir", dir.to_str().unwrap()]).await;
}

/// The to-do example with over 1,000 items (more than one page, and more than one batch)
/// lists them all, in order.
pub(crate) async fn todo_lists_more_than_a_page(state: &[&str]) {
    let plugins = todo_dir();
    std::fs::write(
        plugins.path().join("todo.toml"),
        "[keyvalue]\nbuckets = [\"default\"]\nquota-kib = 1024\nmax-keys = 2000\n",
    )
    .unwrap();
    let client = connect(plugins.path(), state).await;
    for chunk in (1..=1100).collect::<Vec<_>>().chunks(50) {
        let adds = chunk
            .iter()
            .map(|i| kv(&client, "add", json!({"text": format!("item {i}")})));
        assert!(join_all(adds).await.iter().all(|(_, error)| !error));
    }
    let (text, error) = kv(&client, "list", json!({"include_done": true})).await;
    assert!(!error, "{text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    let ids: Vec<i64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (1..=1100).collect::<Vec<_>>());
    client.service.cancel().await.unwrap();
}

#[tokio::test]
async fn the_todo_example_lists_over_a_thousand_items_on_disk() {
    let dir = crate::support::fresh_state_dir();
    todo_lists_more_than_a_page(&["--state-dir", dir.to_str().unwrap()]).await;
}
