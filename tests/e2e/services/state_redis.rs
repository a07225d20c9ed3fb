//! Durable plugin state on a real `redis-server` (Debian's, started on loopback by each test):
//! the suites every backend must pass, unchanged from `state` (grants, namespaces, quotas,
//! concurrent increments; paging by key and strict counters; the to-do example listing over a
//! thousand items), and what only Redis can do: two mcpbox processes sharing it, and it going
//! away mid-run and coming back.

use std::time::Duration;

use serde_json::json;

use crate::external::Redis;
use crate::state::{
    backend_suite, eventually, kv, paging_suite, todo_dir, todo_items, todo_lists_more_than_a_page,
};
use crate::support::{connect, test_plugins};

#[tokio::test]
async fn the_redis_backend_passes_the_suite() {
    let redis = Redis::start();
    backend_suite(&["--state", &redis.url()]).await;
}

#[tokio::test]
async fn replicas_share_redis_and_survive_it_going_away() {
    let mut redis = Redis::start();
    let url = redis.url();
    let plugins = todo_dir();
    std::fs::copy(
        test_plugins().join("kv_probe.wasm"),
        plugins.path().join("alpha.wasm"),
    )
    .unwrap();
    std::fs::write(
        plugins.path().join("alpha.toml"),
        "[env]\nKV_TOOL = \"alpha_kv\"\n[keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    let one = connect(plugins.path(), &["--state", &url]).await;
    let two = connect(plugins.path(), &["--state", &url]).await;
    assert!(!kv(&one, "add", json!({"text": "written by one"})).await.1);
    assert_eq!(todo_items(&two).await, ["written by one"]);
    assert!(!kv(&two, "add", json!({"text": "written by two"})).await.1);
    assert_eq!(todo_items(&one).await, ["written by one", "written by two"]);

    // The operator's view while both serve.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["state", "ls", "todo", "--state", &url])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && listing.contains("3 keys"),
        "{listing}"
    );

    // Redis goes away in the middle of a call (once the call's increments show in Redis): the
    // call fails clearly, naming Redis, after some increments and before the last.
    let (interrupted, ()) = tokio::join!(
        kv(
            &one,
            "alpha_kv",
            json!({"op": "increments", "key": "n", "delta": 100_000_000})
        ),
        async {
            eventually(
                || async { !redis.keys("mcpbox:kv:5:alpha:*").is_empty() },
                "the call's increments reached Redis",
            )
            .await;
            redis.stop();
        }
    );
    let (text, error) = interrupted;
    assert!(error && text.contains("Redis at 127.0.0.1"), "{text}");
    let done: u64 = text
        .split("after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not 'after N increments: …': {text}"));
    assert!(
        (1..100_000_000).contains(&done) && text.contains(" increments: "),
        "{text}"
    );
    // And between calls: they fail clearly and quickly; the host keeps serving.
    let started = std::time::Instant::now();
    let (text, error) = kv(&one, "add", json!({"text": "lost"})).await;
    assert!(error && text.contains("Redis at 127.0.0.1"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the failure took {:?}",
        started.elapsed()
    );
    one.list_all_tools().await.unwrap();

    // It comes back (empty: it kept nothing on disk): both recover.
    redis.resume();
    eventually(
        || async { !kv(&one, "add", json!({"text": "after"})).await.1 },
        "calls succeed again once Redis is back",
    )
    .await;
    // Replica two's connection had dropped too: its reads reconnect by themselves.
    assert_eq!(todo_items(&two).await, ["after"]);
    one.service.cancel().await.unwrap();
    two.service.cancel().await.unwrap();
}

#[tokio::test]
async fn the_redis_backend_pages_by_key_and_keeps_counters_strictly() {
    let redis = Redis::start();
    paging_suite(&["--state", &redis.url()]).await;
}

#[tokio::test]
async fn the_todo_example_lists_over_a_thousand_items_on_redis() {
    let redis = Redis::start();
    todo_lists_more_than_a_page(&["--state", &redis.url()]).await;
}

/// Callers' namespaces on Redis: the same rules as on disk (each caller's quota and the
/// plugin's total in one script, listing callers, clearing one caller or the plugin, one
/// host key), checked by the backends' shared suite.
#[tokio::test]
async fn callers_namespaces_keep_their_quotas_and_the_plugins_total_on_redis() {
    let redis = crate::external::Redis::start();
    let store = mcpbox::kv::RedisStore::connect(&redis.url()).unwrap();
    mcpbox::kv::suite::caller_spaces(&store).await;
}
