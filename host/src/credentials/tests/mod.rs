//! The broker against a fake provider on loopback (an axum token endpoint in the test): the
//! link flow, the callback's refusals, refresh (single flight across two brokers sharing a
//! store), refresh failures and unlinking. The fake provider and the setup are `fake`'s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod fake;

use self::fake::*;
pub(crate) use self::fake::{Recorder, setup};
use super::link::ticket_of;
use super::*;

#[tokio::test]
async fn a_link_is_made_once_and_its_token_served_to_that_caller_only() {
    let setup = setup().await;
    let events = Arc::new(Recorder::default());
    let broker = setup.broker(Arc::clone(&events));
    assert!(matches!(
        broker.access_token("token:alice", "fake").await,
        TokenLookup::LinkNeeded
    ));
    let prompt = broker
        .begin_link("token:alice", "fake", Some("github"))
        .await
        .expect("begin");
    assert!(
        prompt
            .url
            .starts_with("http://127.0.0.1:9/oauth/link/start?ticket="),
        "{}",
        prompt.url
    );
    assert!(prompt.message.contains("Fake"), "{}", prompt.message);
    // The same request while it is pending: the same URL and id.
    let again = broker
        .begin_link("token:alice", "fake", Some("github"))
        .await
        .expect("begin");
    assert_eq!(prompt, again);
    let redirect = broker.start(&ticket(&prompt)).await.expect("start");
    assert!(
        redirect
            .set_cookie
            .contains("HttpOnly; SameSite=Lax; Path=/oauth/link")
    );
    assert!(!redirect.set_cookie.contains("Secure"), "http public URL");
    let query = setup.authorize(&redirect.location, "code-1");
    let waiting = broker.wait_linked(
        "token:alice",
        "fake",
        &prompt,
        tokio::time::Instant::now() + Duration::from_secs(10),
    );
    let cookie = cookie_of(&redirect);
    let completing = broker.complete(query, Some(&cookie));
    let (outcome, linked) = tokio::join!(waiting, completing);
    assert_eq!(outcome, WaitOutcome::Linked);
    assert_eq!(
        linked.expect("linked"),
        Linked {
            display_name: "Fake".to_owned(),
            caller: "token:alice".to_owned()
        }
    );
    assert_eq!(
        token_of(broker.access_token("token:alice", "fake").await),
        "at-1"
    );
    assert!(matches!(
        broker.access_token("token:bob", "fake").await,
        TokenLookup::LinkNeeded
    ));
    assert_eq!(
        setup.fake.lock().expect("fake").secrets,
        vec!["client-s3cret".to_owned()]
    );
    let links = broker.links_of("token:alice").await.expect("links");
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].provider, "fake");
    assert_eq!(links[0].display_name, "Fake");
    assert_eq!(
        links[0].scopes,
        vec!["repo".to_owned(), "read:org".to_owned()]
    );
    assert!(links[0].refreshable);
    assert!(
        broker
            .links_of("token:bob")
            .await
            .expect("links")
            .is_empty()
    );
    // A new request after the link: a new ticket.
    let next = broker
        .begin_link("token:alice", "fake", None)
        .await
        .expect("begin");
    assert_ne!(next.url, prompt.url);
    assert_eq!(events.methods(), vec!["credentials/link"]);
    let recorded = events.0.lock().expect("events")[0].clone();
    assert_eq!(recorded.caller, "token:alice");
    assert_eq!(recorded.plugin.as_deref(), Some("github"));
    assert!(
        format!("{:?}", broker.access_token("token:alice", "fake").await)
            .contains("AccessToken(..)")
    );
}

#[tokio::test]
async fn forged_replayed_expired_and_cross_browser_callbacks_link_nothing() {
    let setup = setup().await;
    let events = Arc::new(Recorder::default());
    let broker = setup.broker(Arc::clone(&events));
    let alice = broker
        .begin_link("token:alice", "fake", None)
        .await
        .expect("begin");
    let bob = broker
        .begin_link("token:bob", "fake", None)
        .await
        .expect("begin");
    let alice_start = broker.start(&ticket(&alice)).await.expect("start");
    let bob_start = broker.start(&ticket(&bob)).await.expect("start");
    let alice_query = setup.authorize(&alice_start.location, "code-a");
    let bob_cookie = cookie_of(&bob_start);
    // A forged state, and one in an unknown format.
    let forged = CallbackQuery {
        code: Some("code-a".to_owned()),
        state: Some(store::expiring_key(now_ms() + 60_000, "forged")),
        error: None,
    };
    assert_eq!(
        broker.complete(forged, Some(&bob_cookie)).await.err(),
        Some(CallbackError::Invalid)
    );
    let junk = CallbackQuery {
        state: Some("junk".to_owned()),
        ..alice_query.clone()
    };
    assert_eq!(
        broker.complete(junk, Some(&bob_cookie)).await.err(),
        Some(CallbackError::Invalid)
    );
    // Alice's state in bob's browser, or in none: refused, and alice's flow is not spent.
    assert_eq!(
        broker
            .complete(alice_query.clone(), Some(&bob_cookie))
            .await
            .err(),
        Some(CallbackError::OtherBrowser)
    );
    assert_eq!(
        broker.complete(alice_query.clone(), None).await.err(),
        Some(CallbackError::OtherBrowser)
    );
    // An expired state.
    let expired = CallbackQuery {
        state: Some(store::expiring_key(now_ms() - 1, "old")),
        ..alice_query.clone()
    };
    assert_eq!(
        broker.complete(expired, Some(&bob_cookie)).await.err(),
        Some(CallbackError::Expired)
    );
    assert_eq!(
        broker
            .start(&store::expiring_key(now_ms() - 1, "old"))
            .await
            .err(),
        Some(CallbackError::Expired)
    );
    assert_eq!(
        broker.start("nonsense").await.err(),
        Some(CallbackError::Invalid)
    );
    assert_eq!(
        setup.fake.lock().expect("fake").issued,
        0,
        "no code was spent"
    );
    assert!(
        broker
            .links_of("token:bob")
            .await
            .expect("links")
            .is_empty()
    );
    assert!(
        broker
            .links_of("token:alice")
            .await
            .expect("links")
            .is_empty()
    );
    // Alice's own browser links alice; the same callback again links nothing more.
    let alice_cookie = cookie_of(&alice_start);
    broker
        .complete(alice_query.clone(), Some(&alice_cookie))
        .await
        .expect("linked");
    assert_eq!(
        broker
            .complete(alice_query, Some(&alice_cookie))
            .await
            .err(),
        Some(CallbackError::Used)
    );
    // The request is settled: starting it again is refused.
    assert_eq!(
        broker.start(&ticket(&alice)).await.err(),
        Some(CallbackError::Used)
    );
    assert_eq!(setup.fake.lock().expect("fake").issued, 1);
    assert!(
        broker
            .links_of("token:bob")
            .await
            .expect("links")
            .is_empty()
    );
    assert_eq!(
        events.methods(),
        vec![
            "credentials/link_failed",
            "credentials/link_failed",
            "credentials/link"
        ]
    );
}

#[tokio::test]
async fn declining_at_the_provider_links_nothing_and_ends_the_wait() {
    let setup = setup().await;
    let events = Arc::new(Recorder::default());
    let broker = setup.broker(Arc::clone(&events));
    let prompt = broker
        .begin_link("local", "fake", None)
        .await
        .expect("begin");
    let redirect = broker.start(&ticket(&prompt)).await.expect("start");
    let mut query = setup.authorize(&redirect.location, "unused");
    query.code = None;
    query.error = Some("access_denied".to_owned());
    assert_eq!(
        broker
            .complete(query, Some(&cookie_of(&redirect)))
            .await
            .err(),
        Some(CallbackError::Declined)
    );
    let outcome = broker
        .wait_linked(
            "local",
            "fake",
            &prompt,
            tokio::time::Instant::now() + Duration::from_secs(5),
        )
        .await;
    assert_eq!(
        outcome,
        WaitOutcome::Failed("declined at the provider".to_owned())
    );
    assert!(matches!(
        broker.access_token("local", "fake").await,
        TokenLookup::LinkNeeded
    ));
    assert_eq!(events.methods(), vec!["credentials/link_failed"]);
    // Waiting on a request still pending ends at the deadline.
    let pending = broker
        .begin_link("local", "fake", None)
        .await
        .expect("begin");
    assert_ne!(pending.url, prompt.url);
    let outcome = broker
        .wait_linked(
            "local",
            "fake",
            &pending,
            tokio::time::Instant::now() + Duration::from_millis(300),
        )
        .await;
    assert_eq!(outcome, WaitOutcome::Pending);
}

#[tokio::test]
async fn one_refresh_across_replicas_for_many_concurrent_lookups() {
    let setup = setup().await;
    setup.fake.lock().expect("fake").expires_in = 30; // under the 60 s margin: refresh at once
    setup.fake.lock().expect("fake").refresh_delay_ms = 300;
    let events = Arc::new(Recorder::default());
    let first = Arc::new(setup.broker(Arc::clone(&events)));
    let second = Arc::new(setup.broker(Arc::clone(&events)));
    link(&setup, &first, "token:alice", "code-1").await;
    let lookups: Vec<_> = (0..8)
        .map(|i| {
            let broker = Arc::clone(if i % 2 == 0 { &first } else { &second });
            tokio::spawn(async move { token_of(broker.access_token("token:alice", "fake").await) })
        })
        .collect();
    for lookup in lookups {
        assert_eq!(lookup.await.expect("task"), "at-2");
    }
    assert_eq!(setup.fake.lock().expect("fake").refreshes, 1);
    // The refreshed token is fresh: no further refresh; the refresh token was kept.
    assert_eq!(
        token_of(second.access_token("token:alice", "fake").await),
        "at-2"
    );
    assert_eq!(setup.fake.lock().expect("fake").refreshes, 1);
    assert!(second.links_of("token:alice").await.expect("links")[0].refreshable);
    assert_eq!(
        events.methods(),
        vec!["credentials/link", "credentials/refresh"]
    );
}

#[tokio::test]
async fn a_refused_refresh_unlinks_and_an_unreachable_provider_keeps_a_valid_token() {
    let setup = setup().await;
    setup.fake.lock().expect("fake").expires_in = 30;
    let events = Arc::new(Recorder::default());
    let broker = setup.broker(Arc::clone(&events));
    link(&setup, &broker, "token:alice", "code-1").await;
    // Unreachable (503): the token is still valid for 30 s, so it is used.
    setup.fake.lock().expect("fake").down = true;
    assert_eq!(
        token_of(broker.access_token("token:alice", "fake").await),
        "at-1"
    );
    // Refused: the link goes, and the caller must link again.
    {
        let mut fake = setup.fake.lock().expect("fake");
        fake.down = false;
        fake.refresh_invalid = true;
    }
    assert!(matches!(
        broker.access_token("token:alice", "fake").await,
        TokenLookup::LinkNeeded
    ));
    assert!(
        broker
            .links_of("token:alice")
            .await
            .expect("links")
            .is_empty()
    );
    assert_eq!(
        events.methods(),
        vec![
            "credentials/link",
            "credentials/refresh_failed",
            "credentials/refresh_failed"
        ]
    );
    // An expired token and an unreachable provider: unavailable, and the reason has no token.
    {
        let mut fake = setup.fake.lock().expect("fake");
        fake.refresh_invalid = false;
        fake.expires_in = 0;
    }
    link(&setup, &broker, "token:bob", "code-2").await;
    setup.fake.lock().expect("fake").down = true;
    match broker.access_token("token:bob", "fake").await {
        TokenLookup::Unavailable(why) => {
            assert!(why.contains("status 503"), "{why}");
            assert!(!why.contains("at-") && !why.contains("rt-"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unlinking_removes_the_link_everywhere_and_revokes_it() {
    let setup = setup().await;
    let events = Arc::new(Recorder::default());
    let first = setup.broker(Arc::clone(&events));
    let second = setup.broker(Arc::clone(&events));
    link(&setup, &first, "token:alice", "code-1").await;
    assert_eq!(
        token_of(second.access_token("token:alice", "fake").await),
        "at-1"
    );
    assert!(
        second
            .unlink("token:alice", "fake", UnlinkedBy::User)
            .await
            .expect("unlink")
    );
    assert!(
        !second
            .unlink("token:alice", "fake", UnlinkedBy::User)
            .await
            .expect("unlink")
    );
    assert!(matches!(
        first.access_token("token:alice", "fake").await,
        TokenLookup::LinkNeeded
    ));
    assert_eq!(
        setup.fake.lock().expect("fake").revoked,
        vec!["rt-1".to_owned()]
    );
    assert_eq!(
        events.methods(),
        vec!["credentials/link", "credentials/unlink"]
    );
    assert!(
        store::all_links(&setup.state)
            .await
            .expect("all")
            .is_empty()
    );
}

#[tokio::test]
async fn records_sealed_under_another_key_need_a_new_link() {
    let setup = setup().await;
    let broker = setup.broker(Arc::new(Recorder::default()));
    link(&setup, &broker, "local", "code-1").await;
    let other = Setup {
        key: Key::parse(&Key::generate().expect("key")).expect("key"),
        fake: Arc::clone(&setup.fake),
        state: Arc::clone(&setup.state),
        base: setup.base.clone(),
        secrets: Arc::clone(&setup.secrets),
        _dir: tempfile::tempdir().expect("dir"),
    };
    let rekeyed = other.broker(Arc::new(Recorder::default()));
    assert!(matches!(
        rekeyed.access_token("local", "fake").await,
        TokenLookup::LinkNeeded
    ));
}

#[test]
fn the_link_cookie_is_found_among_others() {
    assert_eq!(link_cookie("a=b; mcpbox_link=xyz; c=d"), Some("xyz"));
    assert_eq!(link_cookie("mcpbox_link=xyz"), Some("xyz"));
    assert_eq!(link_cookie("mcpbox_linked=xyz"), None);
}

#[tokio::test]
async fn an_issuers_endpoints_are_discovered_once_by_rfc_8414_then_oidc() {
    let hits = Arc::new(Mutex::new(Vec::<String>::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let router = {
        let hits = Arc::clone(&hits);
        let issuer = format!("{base}/realm");
        axum::Router::new().fallback(move |uri: http::Uri| {
            let hits = Arc::clone(&hits);
            let issuer = issuer.clone();
            async move {
                hits.lock().expect("hits").push(uri.path().to_owned());
                if uri.path() == "/realm/.well-known/openid-configuration" {
                    (
                        http::StatusCode::OK,
                        serde_json::json!({
                            "issuer": issuer,
                            "authorization_endpoint": format!("{issuer}/auth"),
                            "token_endpoint": format!("{issuer}/token"),
                        })
                        .to_string(),
                    )
                } else {
                    (http::StatusCode::NOT_FOUND, String::new())
                }
            }
        })
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let setup = setup().await;
    let text = format!("[providers.idp]\nissuer = \"{base}/realm\"\nclient-id = \"mcpbox\"\n");
    let table: toml::Table = toml::from_str(&text).expect("toml");
    let providers =
        Providers::from_toml(table.get("providers").cloned().expect("providers")).expect("parses");
    let broker = Broker::new(
        providers,
        Cipher::new(&setup.key, None).expect("cipher"),
        Arc::clone(&setup.state),
        Arc::clone(&setup.secrets),
        BrokerSettings {
            public_url: Url::parse("https://mcp.example.com/prefix").expect("url"),
            ticket_ttl: Duration::from_secs(600),
            link_wait: Duration::from_secs(5),
        },
        Arc::new(Recorder::default()),
    )
    .expect("broker");
    for _ in 0..2 {
        let prompt = broker
            .begin_link("local", "idp", None)
            .await
            .expect("begin");
        let redirect = broker.start(&ticket(&prompt)).await.expect("start");
        assert!(
            redirect.location.starts_with(&format!("{base}/realm/auth?response_type=code&client_id=mcpbox&redirect_uri=https%3A%2F%2Fmcp.example.com%2Fprefix%2Foauth%2Flink%2Fcallback&state=")),
            "{}",
            redirect.location
        );
        // A public client: no scope asked, and the cookie is Secure under the public path.
        assert!(
            !redirect.location.contains("scope="),
            "{}",
            redirect.location
        );
        assert!(
            redirect.set_cookie.contains("Path=/prefix/oauth/link;")
                && redirect.set_cookie.ends_with("; Secure"),
            "{}",
            redirect.set_cookie
        );
    }
    assert_eq!(
        *hits.lock().expect("hits"),
        vec![
            "/.well-known/oauth-authorization-server/realm".to_owned(),
            "/realm/.well-known/openid-configuration".to_owned()
        ],
        "looked up once, RFC 8414's place first"
    );
}

/// Each visit of a link request's start URL keeps a flow in the store until it expires: past
/// `MAX_STARTS_PER_TICKET` visits the URL is refused, and nothing more is kept.
#[tokio::test]
async fn a_start_url_opened_over_and_over_is_refused_past_its_bound() {
    let setup = setup().await;
    let broker = setup.broker(Arc::new(Recorder::default()));
    let prompt = broker
        .begin_link("token:alice", "fake", Some("github"))
        .await
        .expect("begin");
    for _ in 0..crate::credentials::MAX_STARTS_PER_TICKET {
        broker.start(&ticket(&prompt)).await.expect("start");
    }
    let refused = broker.start(&ticket(&prompt)).await.expect_err("refused");
    assert!(
        matches!(refused, CallbackError::TooManyStarts),
        "{refused:?}"
    );
}
