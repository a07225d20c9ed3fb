//! Checks every [`StateStore`] must pass, shared by the embedded and in-memory stores' unit
//! tests and the Redis tests (which need a server, so they run from the end-to-end suite). Test code: it
//! panics on the first broken rule.

#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    reason = "test code, reached only from tests"
)]

use super::{Quota, StateStore, Usage};

/// Namespaces and buckets kept apart: a page of keys, a listing of entries and a clear reach
/// exactly one namespace and bucket, whatever bytes the names hold, and cursors are positions.
#[doc(hidden)]
pub async fn namespaces(store: &dyn StateStore) {
    let quota = Quota::default();
    for (plugin, bucket, key) in [
        ("a", "b", "k1"),
        ("a", "b", "k2"),
        ("a", "b\0", "x"),
        ("a", "bb", "y"),
        ("ab", "b", "z"),
        ("a\0", "b", "w"),
    ] {
        store
            .set(plugin, bucket, key, b"v".to_vec(), quota)
            .await
            .unwrap();
    }
    let page = store.list_keys("a", "b", None).await.unwrap();
    assert_eq!(page.keys, ["k1", "k2"]);
    assert_eq!(page.cursor, None);
    // Cursors are positions: after `k1`, after a key that does not exist, past the end
    // (an empty page, not a walk into other namespaces).
    let page = store.list_keys("a", "b", Some("k1")).await.unwrap();
    assert_eq!(page.keys, ["k2"]);
    let page = store.list_keys("a", "b", Some("k15")).await.unwrap();
    assert_eq!(page.keys, ["k2"]);
    for past in ["k2", "\u{10ffff}", "zzz"] {
        let page = store.list_keys("a", "b", Some(past)).await.unwrap();
        assert!(page.keys.is_empty() && page.cursor.is_none(), "{past:?}");
    }
    let listed: Vec<(String, String)> = store
        .entries("a")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.bucket, e.key))
        .collect();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert!(listed.iter().all(|(_, k)| k != "z" && k != "w"));
    assert_eq!(store.clear("a").await.unwrap(), 4);
    assert_eq!(
        store.get("ab", "b", "z").await.unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(
        store.get("a\0", "b", "w").await.unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(store.usage("a").await.unwrap(), Usage::default());
}

/// Callers' namespaces: each caller's quota, the plugin's total over all of them, listing,
/// clearing one caller and the whole plugin, and the host key.
#[doc(hidden)]
pub async fn caller_spaces(store: &dyn StateStore) {
    let shared = Quota {
        max_keys: 3,
        ..Quota::default()
    };
    let caller = Quota {
        max_keys: 2,
        total: Some(super::Total {
            max_bytes: Quota::DEFAULT_MAX_BYTES,
            max_keys: 3,
        }),
        ..Quota::default()
    };
    let (alice, bob) = (
        super::caller_space("p", "a1"),
        super::caller_space("p", "b2"),
    );
    store
        .set(&alice, "d", "k1", b"v".to_vec(), caller)
        .await
        .unwrap();
    store
        .set(&alice, "d", "k2", b"v".to_vec(), caller)
        .await
        .unwrap();
    let over = store.set(&alice, "d", "k3", b"v".to_vec(), caller).await;
    assert!(over.is_err_and(|e| e.to_string().contains("caller-max-keys")));
    store
        .set(&bob, "d", "k1", b"v".to_vec(), caller)
        .await
        .unwrap();
    // The plugin's total (its own keys and every caller's) is full now.
    let total = store.set(&bob, "d", "k2", b"v".to_vec(), caller).await;
    assert!(total.is_err_and(|e| e.to_string().contains("all its callers together")));
    assert!(
        store
            .set("p", "d", "own", b"v".to_vec(), shared)
            .await
            .is_err()
    );
    assert_eq!(store.usage("p").await.unwrap().keys, 3);
    // Each sees only their own.
    assert_eq!(store.get(&bob, "d", "k2").await.unwrap(), None);
    assert_eq!(
        store.list_keys(&alice, "d", None).await.unwrap().keys,
        ["k1", "k2"]
    );
    let callers = store.callers("p").await.unwrap();
    assert_eq!(
        callers
            .iter()
            .map(|(id, u)| (id.as_str(), u.keys))
            .collect::<Vec<_>>(),
        [("a1", 2), ("b2", 1)]
    );
    // One caller leaves: the total goes down by what they held.
    assert_eq!(store.clear(&alice).await.unwrap(), 2);
    assert_eq!(store.usage("p").await.unwrap().keys, 1);
    store.delete(&bob, "d", "k1").await.unwrap();
    // A caller left with nothing costs nothing.
    assert!(store.callers("p").await.unwrap().is_empty());
    assert_eq!(store.usage("p").await.unwrap(), Usage::default());
    // Clearing the plugin clears every caller's space too.
    store
        .set(&bob, "d", "k9", b"v".to_vec(), caller)
        .await
        .unwrap();
    store
        .set("p", "d", "own", b"v".to_vec(), shared)
        .await
        .unwrap();
    assert_eq!(store.clear("p").await.unwrap(), 2);
    assert!(store.callers("p").await.unwrap().is_empty());
    assert_eq!(store.get(&bob, "d", "k9").await.unwrap(), None);
    // The host key is made once and kept.
    let key = store.host_key().await.unwrap();
    assert_eq!(store.host_key().await.unwrap(), key);
}

/// The latency of `set`, `get` and `increment`, one call at a time on one key each, `rounds`
/// times after as many warm-up calls: each operation's (name, p50, p99), in µs. A measurement
/// (`disk::tests::latency`), not a check.
#[doc(hidden)]
pub async fn latency(store: &dyn StateStore, rounds: usize) -> Vec<(&'static str, f64, f64)> {
    use std::time::Instant;
    let quota = Quota::default();
    let mut out = Vec::new();
    for op in ["set", "get", "increment"] {
        let mut times = Vec::with_capacity(rounds);
        for round in 0..2 * rounds {
            let start = Instant::now();
            match op {
                "set" => store
                    .set("bench", "b", "k", round.to_string().into_bytes(), quota)
                    .await
                    .map(drop),
                "get" => store.get("bench", "b", "k").await.map(drop),
                _ => store
                    .increment("bench", "b", "n", 1, false, quota)
                    .await
                    .map(drop),
            }
            .unwrap();
            if round >= rounds {
                times.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
        times.sort_by(f64::total_cmp);
        let at = |percent: usize| times[(times.len() - 1) * percent / 100];
        out.push((op, at(50), at(99)));
    }
    out
}
