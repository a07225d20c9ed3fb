//! One embedded state directory, several mcpbox processes at once (as two desktop clients that
//! each start mcpbox over stdio): adds split across two processes all land, exactly once; a
//! process killed with SIGKILL mid-writes loses no write it acknowledged; quotas hold exactly
//! when two processes write at once; the store's files are the user's own; and the state an
//! earlier mcpbox kept in `state.redb` is imported once, by one process, and the old file is
//! left in place.

use std::path::Path;

use futures::future::join_all;
use serde_json::{Value, json};

use crate::state::{kv, probe_dir, todo_items};
use crate::support::{Client, Raw, connect, example_plugins, fresh_state_dir, plugin_dir};

/// The to-do example with room for well over a thousand items per caller.
fn roomy_todo_dir() -> tempfile::TempDir {
    let dir = plugin_dir(&[("todo", "todo.wasm")]);
    std::fs::write(
        dir.path().join("todo.toml"),
        "[keyvalue]\ncaller-buckets = [\"default\"]\ncaller-quota-kib = 2048\ncaller-max-keys = \
         5000\nquota-kib = 4096\nmax-keys = 10000\n",
    )
    .unwrap();
    dir
}

/// `count` adds on `client` at once, texts `"{label} {i}"`; each answer's (id, error text).
async fn adds(client: &Client, label: &str, count: usize) -> Vec<Result<i64, String>> {
    let calls = (0..count).map(|i| kv(client, "add", json!({"text": format!("{label} {i}")})));
    join_all(calls)
        .await
        .into_iter()
        .map(|(text, error)| {
            if error {
                return Err(text);
            }
            let item: Value = serde_json::from_str(&text).unwrap();
            Ok(item["id"].as_i64().unwrap())
        })
        .collect()
}

/// The listing `mcpbox state ls` prints for the local user's to-dos, run beside the servers.
fn local_listing(state: &Path) -> String {
    let store = ["--state-dir", state.to_str().unwrap()];
    let (listing, ok) = crate::support::state_cli(&["ls", "todo", "--principal", "local"], &store);
    assert!(ok, "{listing}");
    listing
}

#[tokio::test]
async fn two_processes_on_one_state_dir_lose_no_add() {
    let plugins = roomy_todo_dir();
    let state = fresh_state_dir();
    let args = ["--state-dir", state.to_str().unwrap()];
    let (first, second) = tokio::join!(
        connect(plugins.path(), &args),
        connect(plugins.path(), &args)
    );

    // 1,000 adds at once, half on each process.
    let (a, b) = tokio::join!(adds(&first, "first", 500), adds(&second, "second", 500));
    let failed: Vec<&String> = a
        .iter()
        .chain(&b)
        .filter_map(|r| r.as_ref().err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed, e.g. {}",
        failed.len(),
        failed[0]
    );
    // Each add got its own id: the counter both processes increment lost no update.
    let mut ids: Vec<i64> = a.iter().chain(&b).map(|r| *r.as_ref().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=1000).collect::<Vec<_>>());

    // Both see every item exactly once: the same caller's namespace (the two agreed on one
    // host key) and nothing lost or doubled.
    let mut expected: Vec<String> = (0..500)
        .flat_map(|i| [format!("first {i}"), format!("second {i}")])
        .collect();
    expected.sort();
    for client in [&first, &second] {
        let mut texts = todo_items(client).await;
        texts.sort();
        assert_eq!(texts, expected);
    }
    // The usage row counts exactly the items and the id counter.
    assert!(
        local_listing(&state).contains("caller `local` of plugin `todo`: 1001 keys"),
        "{}",
        local_listing(&state)
    );

    // The directory and the database are the user's own.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join("state.sqlite")), 0o600);
        for name in ["state.sqlite-wal", "state.sqlite-shm"] {
            let path = state.join(name);
            if path.exists() {
                assert_eq!(mode(&path), 0o600, "{name}");
            }
        }
    }
    first.service.cancel().await.unwrap();
    second.service.cancel().await.unwrap();
}

#[tokio::test]
async fn a_process_killed_mid_writes_loses_no_acknowledged_write() {
    let plugins = roomy_todo_dir();
    let state = fresh_state_dir();
    let args = ["--state-dir", state.to_str().unwrap()];
    let second = connect(plugins.path(), &args).await;
    let mut first = Raw::initialized(plugins.path(), &args).await;
    // 300 adds in flight on the first process; it is killed once 60 are acknowledged, while
    // the second process adds at the same time.
    for i in 0..300 {
        first
            .send(
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"text": format!("first {i}")}}})
                .to_string()
                .as_bytes(),
            )
            .await;
    }
    let killed = async {
        let mut acknowledged = Vec::new();
        while acknowledged.len() < 60 {
            let reply = first.recv().await;
            if reply.get("id").is_none() {
                continue;
            }
            assert_eq!(reply["result"]["isError"], false, "{reply}");
            acknowledged.push(
                reply["result"]["structuredContent"]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        first.child.start_kill().unwrap();
        first.child.wait().await.unwrap();
        acknowledged
    };
    let (acknowledged, theirs) = tokio::join!(killed, adds(&second, "second", 200));
    let failed: Vec<&String> = theirs.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, e.g. {}",
        failed.len(),
        failed[0]
    );

    // The survivor sees every write either process acknowledged, each once.
    let items = todo_items(&second).await;
    let mut distinct = items.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), items.len(), "an item twice: {items:?}");
    for text in acknowledged
        .iter()
        .cloned()
        .chain((0..200).map(|i| format!("second {i}")))
    {
        assert!(items.contains(&text), "{text} was acknowledged and is gone");
    }
    // The usage row moved with each write: the items and the id counter, exactly.
    let listing = local_listing(&state);
    assert!(
        listing.contains(&format!(
            "caller `local` of plugin `todo`: {} keys",
            items.len() + 1
        )),
        "{listing}"
    );
    // A process started afterwards sees the same.
    let third = connect(plugins.path(), &args).await;
    assert_eq!(todo_items(&third).await, items);
    second.service.cancel().await.unwrap();
    third.service.cancel().await.unwrap();
}

#[tokio::test]
async fn quotas_hold_exactly_across_two_processes() {
    let plugins = probe_dir(&["alpha"]);
    let state = fresh_state_dir();
    let args = ["--state-dir", state.to_str().unwrap()];
    let (first, second) = tokio::join!(
        connect(plugins.path(), &args),
        connect(plugins.path(), &args)
    );
    // Sets on both processes at once; `(successes, failures)`.
    let sets = |prefix: &'static str, size: Option<usize>| {
        let (first, second) = (&first, &second);
        async move {
            let one = |client: &'static str, i: usize| {
                let arguments = match size {
                    Some(size) => {
                        json!({"op": "set", "key": format!("{prefix}{client}{i}"), "size": size})
                    }
                    None => {
                        json!({"op": "set", "key": format!("{prefix}{client}{i}"), "value": "v"})
                    }
                };
                let on = if client == "a" { first } else { second };
                kv(on, "alpha_kv", arguments)
            };
            let count = if size.is_some() { 10 } else { 60 };
            let (a, b) = tokio::join!(
                join_all((0..count).map(|i| one("a", i))),
                join_all((0..count).map(|i| one("b", i)))
            );
            let (failures, successes): (Vec<_>, Vec<_>) =
                a.into_iter().chain(b).partition(|(_, error)| *error);
            (
                successes.len(),
                failures
                    .into_iter()
                    .map(|(text, _)| text)
                    .collect::<Vec<_>>(),
            )
        }
    };
    // 64 KiB: seven values of 8 KiB (and their keys) fit, an eighth does not, whichever
    // process writes it.
    let (fitted, refused) = sets("big", Some(8 * 1024)).await;
    assert_eq!(fitted, 7, "{refused:?}");
    assert_eq!(refused.len(), 13);
    for text in &refused {
        assert!(
            text.starts_with("quota exceeded: plugin `alpha` would use")
                && text.contains("(quota-kib in its manifest's [keyvalue] table)"),
            "{text}"
        );
    }
    // 100 keys: 93 more fit.
    let (fitted, refused) = sets("small", None).await;
    assert_eq!(fitted, 93, "{refused:?}");
    for text in &refused {
        assert!(
            text.starts_with("quota exceeded: plugin `alpha` would hold 101 keys, over its limit of 100 keys (max-keys"),
            "{text}"
        );
    }
    let store = ["--state-dir", state.to_str().unwrap()];
    let (listing, ok) = crate::support::state_cli(&["ls", "alpha"], &store);
    assert!(
        ok && listing.contains("plugin `alpha`: 100 keys"),
        "{listing}"
    );
    assert_eq!(listing.lines().count(), 101, "{listing}");
    first.service.cancel().await.unwrap();
    second.service.cancel().await.unwrap();
}

/// A state directory an earlier mcpbox (0.1, redb) wrote: the to-do example's local user added
/// "written by redb one" and "written by redb two" and marked the first done.
fn redb_state() -> std::path::PathBuf {
    let state = fresh_state_dir();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/fixtures/state-0.1.redb"),
        state.join("state.redb"),
    )
    .unwrap();
    state
}

#[tokio::test]
async fn the_state_an_earlier_mcpbox_kept_in_redb_is_imported_once() {
    let plugins = plugin_dir(&[("todo", "todo.wasm")]);
    std::fs::copy(
        example_plugins().join("todo.toml"),
        plugins.path().join("todo.toml"),
    )
    .unwrap();
    let state = redb_state();
    let before = std::fs::read(state.join("state.redb")).unwrap();
    let args = ["--state-dir", state.to_str().unwrap()];
    // Two processes open the store at the same moment: one imports, the other waits for it.
    let (first, second) = tokio::join!(
        connect(plugins.path(), &args),
        connect(plugins.path(), &args)
    );
    let (one, two) = tokio::join!(todo_items(&first), todo_items(&second));
    let expected = ["written by redb one", "written by redb two"];
    assert_eq!(one, expected);
    assert_eq!(two, expected);
    // The id counter came along too (and the host key: the same caller's namespace).
    let (text, error) = kv(&second, "add", json!({"text": "three"})).await;
    assert!(!error && text.contains("\"id\":3"), "{text}");
    let (text, error) = kv(&first, "list", json!({"include_done": true})).await;
    assert!(!error, "{text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["items"][0]["done"], true, "{list}");
    let imported = "imported the plugin state of the earlier state file";
    let logs = [first.stderr.text(), second.stderr.text()];
    assert_eq!(
        logs.iter()
            .map(|log| log.matches(imported).count())
            .sum::<usize>(),
        1,
        "{logs:?}"
    );
    first.service.cancel().await.unwrap();
    second.service.cancel().await.unwrap();
    // The old file is left as it was, and a later start imports nothing.
    assert!(state.join("state.sqlite").exists());
    assert_eq!(std::fs::read(state.join("state.redb")).unwrap(), before);
    let again = connect(plugins.path(), &args).await;
    assert_eq!(
        todo_items(&again).await,
        ["written by redb one", "written by redb two", "three"]
    );
    assert!(!again.stderr.text().contains(imported));
    again.service.cancel().await.unwrap();
}
