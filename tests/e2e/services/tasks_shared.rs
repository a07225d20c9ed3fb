//! Tasks kept in the shared store: two `mcpbox serve --http` replicas on one real
//! `redis-server`, as behind a load balancer. A task started on one is seen, answered and
//! cancelled through the other; a replica killed while its task runs leaves the task `failed`
//! (its lease lapses), never `working` for ever. A caller's share of the store is counted in
//! Redis, so its tasks on both replicas together fill it.

use std::time::Duration;

use serde_json::json;

use crate::external::Redis;
use crate::support::{HttpServer, token_config};
use crate::tasks::{TASKS_MANIFEST, V2026Client, code, conformance_dir, over_share};

#[tokio::test]
async fn replicas_share_tasks_and_a_dead_replica_fails_its_own() {
    let redis = Redis::start();
    let url = redis.url();
    let dir = conformance_dir(TASKS_MANIFEST);
    let shared = [
        "--state",
        url.as_str(),
        "--state-key",
        "a-secret-every-replica-shares-0123",
    ];
    let mut one_args = shared.to_vec();
    one_args.extend(["--max-tasks-per-caller", "1"]);
    let mut one = HttpServer::start(dir.path(), &one_args).await;
    let two = HttpServer::start(dir.path(), &shared).await;
    let a = V2026Client::new(&one.url, None);
    let b = V2026Client::new(&two.url, None);

    // Started on one, seen on two; cancelled through two, and one stops running it (its one
    // slot for this caller is free again within a lease renewal).
    let id = a.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(b.get(&id).await["result"]["status"], "working");
    let ack = b.rpc("tasks/cancel", json!({ "taskId": id })).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(a.get(&id).await["result"]["status"], "cancelled");
    let mut freed = false;
    for _ in 0..50 {
        let response = a
            .rpc(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": 0.2}}),
            )
            .await;
        if response.get("result").is_some() {
            freed = true;
            break;
        }
        assert_eq!(response["error"]["code"], -32029, "{response}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        freed,
        "one never stopped running the task cancelled through two"
    );

    // Asked on one, answered on two: two runs it again, and one sees it completed.
    let id = a
        .start("confirm_delete", json!({"filename": "shared.txt"}))
        .await;
    let asked = b.until(&id, &["input_required"]).await;
    let keys: Vec<String> = asked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["confirm"], "{asked}");
    let answers = json!({ "confirm": { "action": "accept", "content": { "confirm": true } } });
    let ack = b
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": answers }),
        )
        .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = a.until(&id, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted shared.txt",
        "{done}"
    );

    // One dies mid-task: two reports the task failed once its lease lapses.
    let id = a.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(b.get(&id).await["result"]["status"], "working");
    one.child.kill().await.unwrap();
    let view = b.until(&id, &["failed", "completed", "cancelled"]).await;
    assert_eq!(view["status"], "failed", "{view}");
    assert!(
        view["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped before it finished"),
        "{view}"
    );
    drop(two);
}

/// Issue #55: each caller's share of the task store holds across replicas. Bob keeps one task
/// through each of two replicas sharing one Redis: his share of two is full on both, so each
/// serves his next call of a tool that may run as a task as a plain call, and refuses one
/// that only runs as a task; alice, on the same replicas, still gets tasks.
#[tokio::test]
async fn a_callers_share_of_the_task_store_is_counted_across_replicas() {
    const ALICE: &str = "alice-shared-tasks-token-0123";
    const BOB: &str = "bob-shared-tasks-token-012345";
    let redis = Redis::start();
    let url = redis.url();
    let dir = conformance_dir(TASKS_MANIFEST);
    let config_dir = tempfile::tempdir().unwrap();
    let config = token_config(
        config_dir.path(),
        &[("alice", ALICE, &[]), ("bob", BOB, &[])],
        "",
    );
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--state",
        url.as_str(),
        "--state-key",
        "a-secret-every-replica-shares-0123",
        "--max-task-records-per-caller",
        "2",
    ];
    let one = HttpServer::start(dir.path(), &args).await;
    let two = HttpServer::start(dir.path(), &args).await;
    let bob_one = V2026Client::new(&one.url, Some(BOB));
    let bob_two = V2026Client::new(&two.url, Some(BOB));

    // One task through each replica; the outcome two writes replaces its record, in the share.
    let first = bob_one.start("slow_compute", json!({"seconds": 60})).await;
    let second = bob_two
        .start("slow_compute", json!({"seconds": 1, "label": "kept"}))
        .await;
    let done = bob_one.until(&second, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "computed kept in 1 s",
        "{done}"
    );

    // Full on both replicas: a plain call on each, and a refusal naming his share.
    for bob in [&bob_one, &bob_two] {
        let plain = bob
            .call("slow_compute", json!({"seconds": 1, "label": "plain"}))
            .await;
        assert_eq!(plain["resultType"], "complete", "{plain}");
        assert_eq!(plain["content"][0]["text"], "computed plain in 1 s");
        let refused = bob
            .rpc(
                "tools/call",
                json!({"name": "failing_job", "arguments": {}}),
            )
            .await;
        assert_eq!(code(&refused), -32029, "{refused}");
        assert_eq!(
            refused["error"]["message"],
            over_share(2, 32 << 20),
            "{refused}"
        );
    }

    // Alice's share is hers, on either replica.
    let alice = V2026Client::new(&two.url, Some(ALICE));
    let hers = alice.start("slow_compute", json!({"seconds": 60})).await;
    assert_eq!(
        V2026Client::new(&one.url, Some(ALICE)).get(&hers).await["result"]["status"],
        "working"
    );
    alice.rpc("tasks/cancel", json!({ "taskId": hers })).await;
    bob_two
        .rpc("tasks/cancel", json!({ "taskId": first }))
        .await;
}
