//! Tests of the credential records store: sealing, reading back and removing records in the
//! state store.

use super::*;
use crate::credentials::cipher::Key;

pub(crate) fn memory_state() -> (tempfile::TempDir, Arc<StateService>) {
    let dir = tempfile::tempdir().expect("dir");
    let state =
        StateService::new(crate::kv::StateConfig::Disk(dir.path().to_owned())).expect("state");
    (dir, Arc::new(state))
}

fn store(state: &Arc<StateService>) -> CredentialStore {
    let key = Key::parse(&Key::generate().expect("key")).expect("key");
    CredentialStore::new(
        Arc::clone(state),
        Arc::new(Cipher::new(&key, None).expect("cipher")),
    )
}

fn record(token: &str) -> LinkRecord {
    LinkRecord {
        access_token: token.to_owned(),
        refresh_token: Some(format!("{token}-refresh")),
        token_type: Some("bearer".to_owned()),
        scopes: vec!["repo".to_owned()],
        expires_at_ms: Some(10_000),
        linked_at_ms: 1,
        refreshed_at_ms: None,
        plugin: Some("github".to_owned()),
    }
}

#[tokio::test]
async fn links_are_kept_per_caller_and_provider_and_sealed_on_disk() {
    let (dir, state) = memory_state();
    let store = store(&state);
    store
        .put_link("token:alice", "github", &record("gho_alice_token"))
        .await
        .expect("put");
    store
        .put_link("token:bob", "github", &record("gho_bob_token"))
        .await
        .expect("put");
    store
        .put_link("token:alice", "gitlab", &record("glpat_alice"))
        .await
        .expect("put");
    let (_, alice) = store
        .get_link("token:alice", "github")
        .await
        .expect("get")
        .expect("some");
    assert_eq!(alice.access_token, "gho_alice_token");
    assert!(
        store
            .get_link("token:carol", "github")
            .await
            .expect("get")
            .is_none()
    );
    let providers: Vec<String> = store
        .links_of("token:alice")
        .await
        .expect("links")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(providers, vec!["github".to_owned(), "gitlab".to_owned()]);
    assert_eq!(
        all_links(&state).await.expect("all"),
        vec![
            ("token:alice".to_owned(), "github".to_owned()),
            ("token:alice".to_owned(), "gitlab".to_owned()),
            ("token:bob".to_owned(), "github".to_owned()),
        ]
    );
    // Moving bob's record to alice does not give alice bob's token.
    let backend = state.backend().await.expect("backend");
    let bobs = backend
        .get(CREDENTIALS_SPACE, "token:bob", "link:github")
        .await
        .expect("get")
        .expect("some");
    backend
        .set(CREDENTIALS_SPACE, "token:alice", "link:github", bobs, QUOTA)
        .await
        .expect("set");
    assert!(matches!(
        store.get_link("token:alice", "github").await,
        Err(CredentialError::Sealed(_))
    ));
    // The database's files (its write-ahead log too) hold no token.
    drop(store);
    let mut bytes = Vec::new();
    for file in std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
    {
        bytes.extend(std::fs::read(file.path()).expect("read"));
    }
    assert!(bytes.len() > 4096, "the database was written");
    for token in [
        "gho_alice_token",
        "gho_bob_token",
        "glpat_alice",
        "-refresh",
    ] {
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "{token} is in the file"
        );
    }
}

#[tokio::test]
async fn unlink_is_conditional_on_the_bytes_read_or_unconditional() {
    let (_dir, state) = memory_state();
    let store = store(&state);
    store
        .put_link("local", "github", &record("one"))
        .await
        .expect("put");
    let (raw, _) = store
        .get_link("local", "github")
        .await
        .expect("get")
        .expect("some");
    store
        .put_link("local", "github", &record("two"))
        .await
        .expect("put");
    assert!(
        !store
            .delete_link_if("local", "github", &raw)
            .await
            .expect("swap")
    );
    let (raw, _) = store
        .get_link("local", "github")
        .await
        .expect("get")
        .expect("some");
    assert!(
        store
            .delete_link_if("local", "github", &raw)
            .await
            .expect("swap")
    );
    assert!(
        store
            .get_link("local", "github")
            .await
            .expect("get")
            .is_none()
    );
    assert!(store.links_of("local").await.expect("links").is_empty());
    assert!(all_links(&state).await.expect("all").is_empty());
    store
        .put_link("local", "github", &record("three"))
        .await
        .expect("put");
    assert!(store.delete_link("local", "github").await.expect("delete"));
    assert!(!store.delete_link("local", "github").await.expect("delete"));
}

#[tokio::test]
async fn a_lease_is_held_by_one_until_released_or_run_out() {
    let (_dir, state) = memory_state();
    let store = store(&state);
    let lease = store
        .take_lease("local", "github", 1_000, 30_000)
        .await
        .expect("take");
    let lease = lease.expect("taken");
    assert!(
        store
            .take_lease("local", "github", 2_000, 30_000)
            .await
            .expect("take")
            .is_none()
    );
    // Run out: another takes it, and the first one's release leaves the second's alone.
    let second = store
        .take_lease("local", "github", 31_001, 30_000)
        .await
        .expect("take")
        .expect("taken");
    store
        .release_lease("local", "github", lease)
        .await
        .expect("release");
    assert!(
        store
            .take_lease("local", "github", 32_000, 30_000)
            .await
            .expect("take")
            .is_none()
    );
    store
        .release_lease("local", "github", second)
        .await
        .expect("release");
    assert!(
        store
            .take_lease("local", "github", 32_000, 30_000)
            .await
            .expect("take")
            .is_some()
    );
}

#[tokio::test]
async fn flows_are_consumed_once_and_expire() {
    let (_dir, state) = memory_state();
    let store = store(&state);
    let flow = Flow {
        ticket: "t".to_owned(),
        caller: "local".to_owned(),
        provider: "github".to_owned(),
        verifier: "v".to_owned(),
        cookie_hash: "h".to_owned(),
        redirect_uri: "http://127.0.0.1/cb".to_owned(),
    };
    let key = expiring_key(5_000, "abc");
    store.put_flow(&key, &flow).await.expect("put");
    let FlowLookup::Found(raw, _) = store.get_flow(&key, 1_000).await.expect("get") else {
        panic!("not found");
    };
    assert!(matches!(
        store.get_flow(&key, 5_000).await.expect("get"),
        FlowLookup::Expired
    ));
    assert!(matches!(
        store
            .get_flow(&expiring_key(5_000, "forged"), 1_000)
            .await
            .expect("get"),
        FlowLookup::Missing
    ));
    assert!(
        store
            .consume_flow(&key, raw.clone())
            .await
            .expect("consume")
    );
    assert!(!store.consume_flow(&key, raw).await.expect("consume"));
    assert!(matches!(
        store.get_flow(&key, 1_000).await.expect("get"),
        FlowLookup::Used
    ));
    // The sweep removes what expired, and only that.
    let later = expiring_key(9_000, "later");
    store.put_flow(&later, &flow).await.expect("put");
    assert_eq!(store.sweep(6_000).await.expect("sweep"), 1);
    assert!(matches!(
        store.get_flow(&key, 1_000).await.expect("get"),
        FlowLookup::Missing
    ));
    assert!(matches!(
        store.get_flow(&later, 1_000).await.expect("get"),
        FlowLookup::Found(..)
    ));
}

#[tokio::test]
async fn tickets_point_from_the_caller_and_change_by_swap() {
    let (_dir, state) = memory_state();
    let store = store(&state);
    let id = expiring_key(5_000, "ticket");
    let ticket = Ticket {
        caller: "local".to_owned(),
        provider: "github".to_owned(),
        plugin: None,
        elicitation_id: "e".to_owned(),
        status: TicketStatus::Pending,
    };
    store.put_ticket(&id, &ticket).await.expect("put");
    assert_eq!(
        store.pending("local", "github").await.expect("pending"),
        Some(id.clone())
    );
    let (raw, _) = store
        .get_ticket(&id, 1_000)
        .await
        .expect("get")
        .expect("some");
    let linked = Ticket {
        status: TicketStatus::Linked,
        ..ticket
    };
    assert!(
        store
            .swap_ticket(&id, raw.clone(), &linked)
            .await
            .expect("swap")
    );
    assert!(!store.swap_ticket(&id, raw, &linked).await.expect("swap"));
    let (_, now) = store
        .get_ticket(&id, 1_000)
        .await
        .expect("get")
        .expect("some");
    assert_eq!(now.status, TicketStatus::Linked);
    assert!(store.get_ticket(&id, 5_000).await.expect("get").is_none());
}
