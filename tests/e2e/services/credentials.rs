//! Brokered per-user credentials, end to end, on loopback: a real downstream OAuth
//! provider (npm's `oauth2-mock-server` with `oauth/provider.mjs`: PKCE, single-use codes,
//! rotating refresh tokens, users chosen by the simulated browser), a fake of the GitHub API
//! that records the `Authorization` of every request ([`super::fake_api`]), two users under
//! mcpbox's own OAuth ([`super::oauth::AuthorizationServer`]), and the official Python SDK as
//! the client, whose elicitation callback opens the link URL in an HTTP client that follows
//! redirects (`tests/python/link_client.py`). mcpbox serves the GitHub plugin and the hostile
//! fixture, both granted the fake API as a host called as the caller (`[http.credentials]`).
//!
//! Each test is named for a row of SECURITY.md's threat model: each user's calls carry their
//! own token; declining or cancelling links nothing; a hostile plugin cannot read, echo,
//! replace or resend the token, and a redirect drops it; forged, replayed, cross-caller and
//! expired callbacks link nothing; tokens are refreshed before expiry (and a failed refresh
//! asks to link again); replicas share links and refresh once; the store's bytes hold no
//! token; unlinking (by the user or the operator) removes the link everywhere; and the link
//! request takes each revision's form (URL elicitation, -32042, the 2026 input request, or a
//! clear error carrying the URL), over HTTP and over stdio (a loopback callback listener).

mod exchange;
mod harness;

use std::time::Duration;

use serde_json::{Value, json};

use super::oauth::free_port;
use crate::external;
use crate::support::{STEP, mcpbox, plugin_dir, post};
use harness::{
    Browser, LINK_REQUIRED, LinkingClient, SHORT_LIFE_SECS, Setup, assert_each_user_sent_their_own,
    assert_holds_none, assert_logs_clean, audit_lines, call, call_with, events_of, is_linked,
    issues_of, link_and_refresh, link_through_client, link_url, ok_text, python_client,
    result_text, rpc_body, unlink, with_param,
};

/// Alice and bob each link their own account; their calls, interleaved, each carry their own
/// token and never the other's.
#[tokio::test]
async fn each_user_gets_their_own_token() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let bob = setup.token("bob", &server).await;

    for (user, token) in [("alice", &alice), ("bob", &bob)] {
        let events = python_client(
            &server,
            token,
            user,
            "accept",
            json!([["list_issues", issues_of(user)]]),
        )
        .await;
        let asked = events_of(&events, "elicitation");
        assert_eq!(asked.len(), 1, "{events:?}");
        let url = asked[0]["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("{}/oauth/link/start?ticket=", server.origin)),
            "{url}"
        );
        let result = &events_of(&events, "result")[0];
        assert_eq!(result["isError"], false, "{events:?}");
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .contains(&format!("Issue 1 of {user}-org/{user}-repo")),
            "{result}"
        );
        // mcpbox says the link is complete, for the elicitation it asked.
        let complete = events_of(&events, "notification");
        assert_eq!(complete.len(), 1, "{events:?}");
        assert_eq!(
            complete[0]["params"]["elicitationId"], asked[0]["elicitationId"],
            "{events:?}"
        );
    }
    for _ in 0..3 {
        ok_text(&server, &alice, "list_issues", issues_of("alice")).await;
        ok_text(&server, &bob, "list_issues", issues_of("bob")).await;
    }

    let stats = setup.provider.stats().await;
    assert_eq!(stats["users"], json!(["alice", "bob"]), "{stats}");
    let seen = setup.api.seen_at("/repos/");
    assert_eq!(seen.len(), 8, "two linked calls and six more: {seen:?}");
    let tokens = setup.provider.access_tokens().await;
    assert_each_user_sent_their_own(&seen, &tokens);
    assert!(is_linked(&server, &alice, "github").await);
    assert!(is_linked(&server, &bob, "github").await);
    assert_logs_clean(&setup, &[&server]).await;
}

/// A user who declines (or dismisses) the link request links nothing: the provider issues no
/// token, the API is never called, and the tool answers as the plugin answers a caller
/// without a link.
#[tokio::test]
async fn decline_and_cancel_link_nothing() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    for mode in ["decline", "cancel"] {
        let events = python_client(
            &server,
            &alice,
            "alice",
            mode,
            json!([["list_issues", issues_of("alice")]]),
        )
        .await;
        assert_eq!(events_of(&events, "elicitation").len(), 1, "{events:?}");
        assert!(events_of(&events, "browser").is_empty(), "{events:?}");
        let result = &events_of(&events, "result")[0];
        assert_eq!(result["isError"], true, "{mode}: {events:?}");
        assert_eq!(result["text"], LINK_REQUIRED, "{mode}: {events:?}");
        assert!(!is_linked(&server, &alice, "github").await, "{mode}");
    }
    let stats = setup.provider.stats().await;
    assert_eq!(stats["authorizations"], 0, "{stats}");
    assert_eq!(stats["codes_exchanged"], 0, "{stats}");
    assert!(setup.api.seen().is_empty(), "{:?}", setup.api.seen());
}

/// The hostile fixture, granted the fake API as a host called as the caller: it cannot set
/// `Authorization` there itself, sees nothing of the token in what it reads, a host it may
/// reach that is not brokered gets no token (nor does one a brokered host redirects to), and
/// a caller without a link gets mcpbox's own 401 without the request leaving.
#[tokio::test]
async fn a_hostile_plugin_cannot_read_replace_or_resend_the_token() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let bob = setup.token("bob", &server).await;
    let plain = format!("{}/plain", setup.api.url);
    let other = format!("{}/plain", setup.other.url);

    // Alice links while the hostile plugin dumps what it sees of a brokered response.
    let dumped =
        link_through_client(&server, &alice, "alice", "http_dump", json!({"url": plain})).await;
    assert_eq!(dumped["isError"], false, "{dumped}");
    let dump: Value = serde_json::from_str(dumped["text"].as_str().unwrap()).unwrap();
    assert_eq!(dump["status"], 200, "{dump}");
    assert_eq!(dump["body"], "plain", "{dump}");
    let token = setup.provider.access_tokens().await[0].clone();
    let bearer = format!("Bearer {token}");
    assert_eq!(
        setup
            .api
            .seen_at("/plain")
            .last()
            .unwrap()
            .authorization
            .as_deref(),
        Some(bearer.as_str()),
        "the brokered request carried her token"
    );

    // Its own Authorization for the brokered host is refused, and never sent.
    for name in ["Authorization", "authorization"] {
        let response = call(
            &server,
            &alice,
            "http_dump",
            json!({"url": plain, "headers": [[name, "Bearer the-plugins-own"]]}),
        )
        .await;
        let (text, error) = result_text(&response);
        assert!(error && text.contains("denied"), "{response}");
    }
    assert!(
        !setup
            .api
            .seen()
            .iter()
            .any(|s| s.authorization.as_deref() == Some("Bearer the-plugins-own")),
        "{:?}",
        setup.api.seen()
    );

    // A host it may reach that is not brokered: no token, only what the plugin sends.
    let text = ok_text(&server, &alice, "http_dump", json!({"url": other})).await;
    assert!(text.contains("\"status\":200"), "{text}");
    ok_text(
        &server,
        &alice,
        "http_dump",
        json!({"url": other, "headers": [["Authorization", "Bearer the-plugins-own"]]}),
    )
    .await;
    let at_other: Vec<Option<String>> = setup
        .other
        .seen()
        .into_iter()
        .map(|s| s.authorization)
        .collect();
    assert_eq!(
        at_other,
        [None, Some("Bearer the-plugins-own".to_owned())],
        "the other host never sees her token"
    );

    // A redirect from the brokered host to the other: the next hop carries nothing.
    let redirect = format!(
        "{}/redirect?to={}",
        setup.api.url,
        url::form_urlencoded::byte_serialize(other.as_bytes()).collect::<String>()
    );
    let text = ok_text(
        &server,
        &alice,
        "http_dump",
        json!({"url": redirect, "follow": true}),
    )
    .await;
    let dump: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(dump["hops"].as_array().unwrap().len(), 2, "{dump}");
    assert_eq!(dump["body"], "plain", "{dump}");
    assert_eq!(
        setup
            .api
            .seen_at("/redirect")
            .last()
            .unwrap()
            .authorization
            .as_deref(),
        Some(bearer.as_str())
    );
    assert_eq!(setup.other.seen().last().unwrap().authorization, None);

    // Bob has no link and declines: the plugin sees mcpbox's 401, which never left mcpbox.
    let before = setup.api.seen().len();
    let events = python_client(
        &server,
        &bob,
        "bob",
        "decline",
        json!([["http_dump", {"url": plain}]]),
    )
    .await;
    let result = &events_of(&events, "result")[0];
    let dump: Value = serde_json::from_str(result["text"].as_str().unwrap()).unwrap();
    assert_eq!(dump["status"], 401, "{dump}");
    assert_eq!(dump["link_required"], "github", "{dump}");
    assert!(
        dump["headers"].as_array().unwrap().iter().any(|h| h[0]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case("mcpbox-credential")
            && h[1].as_str().unwrap().starts_with("link-required")),
        "{dump}"
    );
    assert!(
        dump["body"]
            .as_str()
            .unwrap()
            .contains("mcpbox_link_required"),
        "{dump}"
    );
    assert_eq!(
        setup.api.seen().len(),
        before,
        "bob's request was never sent"
    );

    // Nothing the plugin returned, nor the logs, holds a token.
    let issued = setup.provider.issued().await;
    assert_holds_none("a result", dumped.to_string().as_bytes(), &issued);
    assert_holds_none("a result", text.as_bytes(), &issued);
    assert_logs_clean(&setup, &[&server]).await;
}

/// Callbacks that do not belong to a flow mcpbox started in this browser link nothing and
/// never spend the code: a forged state, another caller's state (from another browser), a
/// callback replayed after it was used, and a link URL past its ticket's lifetime.
#[tokio::test]
async fn forged_replayed_expired_and_cross_caller_callbacks_link_nothing() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let bob = setup.token("bob", &server).await;
    let start_of = async |token: &str| {
        let response = call(&server, token, "list_issues", issues_of("x")).await;
        let (text, error) = result_text(&response);
        assert!(error, "{response}");
        link_url(&text)
    };

    let mut alices_browser = Browser::new("alice");
    let callback = alices_browser.authorize(&start_of(&alice).await).await;
    // A state mcpbox never issued, with the real code and alice's own cookie.
    let (status, _, _) = alices_browser
        .get(&with_param(&callback, "state", "forged-0123456789"))
        .await;
    assert_eq!(status, 400);
    // Alice's callback in bob's browser (his own flow's cookie).
    let mut bobs_browser = Browser::new("bob");
    let (status, _, _) = bobs_browser.get(&start_of(&bob).await).await;
    assert_eq!(status, 302);
    let (status, _, _) = bobs_browser.get(&callback).await;
    assert_eq!(status, 400);
    // A fresh flow of hers, its callback opened in a browser without her cookie.
    let callback = alices_browser.authorize(&start_of(&alice).await).await;
    let (status, _, _) = Browser::new("alice").get(&callback).await;
    assert_eq!(status, 400);
    assert_eq!(setup.provider.stats().await["codes_exchanged"], 0);
    assert!(!is_linked(&server, &alice, "github").await);
    assert!(!is_linked(&server, &bob, "github").await);

    // Replayed: alice links, unlinks, and the same callback URL comes again.
    let callback = alices_browser.authorize(&start_of(&alice).await).await;
    let (status, _, page) = alices_browser.get(&callback).await;
    assert_eq!(status, 200, "{page}");
    assert!(is_linked(&server, &alice, "github").await);
    assert_eq!(setup.provider.stats().await["codes_exchanged"], 1);
    unlink(&server, &alice, "github").await;
    let (status, _, _) = alices_browser.get(&callback).await;
    assert_eq!(status, 400);
    assert!(!is_linked(&server, &alice, "github").await);
    assert_eq!(setup.provider.stats().await["codes_exchanged"], 1);

    // Expired: a ticket of one second, opened after three.
    let short = setup.serve(&["--link-ticket-ttl-secs", "1"]).await;
    let alice_short = setup.token("alice", &short).await;
    let response = call(&short, &alice_short, "list_issues", issues_of("x")).await;
    let start = link_url(&result_text(&response).0);
    let authorizations = setup.provider.stats().await["authorizations"].clone();
    // The ticket's lifetime passing is what is tested.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, location, _) = Browser::new("alice").get(&start).await;
    assert_eq!(status, 400);
    assert_eq!(location, None);
    assert_eq!(
        setup.provider.stats().await["authorizations"],
        authorizations
    );
    assert!(!is_linked(&short, &alice_short, "github").await);
    assert_logs_clean(&setup, &[&server, &short]).await;
}

/// Tokens are refreshed before they expire (the next call carries the new one), and a
/// refresh the provider refuses unlinks: the next call asks to link again, and the audit log
/// says why, naming no token.
#[tokio::test]
async fn expiry_refresh_and_failed_refresh() {
    let setup = Setup::new("refresh-before-secs = 1").await;
    setup
        .provider
        .get(&format!("/test/expiry?secs={SHORT_LIFE_SECS}"))
        .await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let result =
        link_through_client(&server, &alice, "alice", "list_issues", issues_of("alice")).await;
    assert_eq!(result["isError"], false, "{result}");
    // Within a second of expiry: the next call refreshes first (the token's age is the test).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ok_text(&server, &alice, "list_issues", issues_of("alice")).await;
    let stats = setup.provider.stats().await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    let tokens = setup.provider.access_tokens().await;
    assert_eq!(tokens.len(), 2);
    assert_eq!(
        setup.api.seen_at("/repos/").last().unwrap().authorization,
        Some(format!("Bearer {}", tokens[1])),
        "the call carried the refreshed token"
    );
    assert!(
        audit_lines(&setup)
            .iter()
            .any(|l| l["method"] == "credentials/refresh"
                && l["principal"] == setup.principal("alice")),
        "{:?}",
        audit_lines(&setup)
    );

    // The user revokes mcpbox at the provider: the refresh is refused, the link removed.
    setup.provider.get("/test/refresh-fail?on=1").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let response = call(&server, &alice, "list_issues", issues_of("alice")).await;
    let (text, error) = result_text(&response);
    assert!(error, "{response}");
    link_url(&text);
    let stats = setup.provider.stats().await;
    assert_eq!(stats["failed_refreshes"], 1, "{stats}");
    assert!(!is_linked(&server, &alice, "github").await);
    let audit = audit_lines(&setup);
    assert!(
        audit
            .iter()
            .any(|l| l["method"] == "credentials/refresh_failed"
                && l["item"] == "github"
                && l["principal"] == setup.principal("alice")),
        "{audit:?}"
    );
    assert_eq!(
        setup.api.seen_at("/repos/").len(),
        2,
        "the last call never reached the API"
    );
    assert_logs_clean(&setup, &[&server]).await;
}

/// Two replicas on one Redis: a link made through one serves calls on the other (the browser
/// comes back to the public URL, on the first), eight concurrent calls past the refresh
/// point refresh once in all, and an unlink through one is seen by the other at once.
#[tokio::test]
async fn replicas_share_links_and_refresh_once() {
    let redis = external::Redis::start();
    let state = redis.url();
    let setup = Setup::new("refresh-before-secs = 1").await;
    setup
        .provider
        .get(&format!("/test/expiry?secs={SHORT_LIFE_SECS}"))
        .await;
    let port_one = free_port();
    let public = format!("http://127.0.0.1:{port_one}");
    let one = setup.serve_on(port_one, &["--state", &state]).await;
    let two = setup
        .serve(&["--state", &state, "--public-url", &public])
        .await;
    let alice_one = setup.token("alice", &one).await;
    let alice_two = setup.token("alice", &two).await;

    // Linked through two (the browser's callback lands on one), then used on one.
    let events = python_client(
        &two,
        &alice_two,
        "alice",
        "accept",
        json!([["list_issues", issues_of("alice")]]),
    )
    .await;
    let browser = &events_of(&events, "browser")[0];
    assert!(
        browser["url"].as_str().unwrap().starts_with(&public),
        "{events:?}"
    );
    assert_eq!(
        events_of(&events, "result")[0]["isError"],
        false,
        "{events:?}"
    );
    ok_text(&one, &alice_one, "list_issues", issues_of("alice")).await;

    // Past the refresh point, eight calls at once across both: one refresh.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let calls = (0..8).map(|n| {
        let (server, token) = if n % 2 == 0 {
            (&one, &alice_one)
        } else {
            (&two, &alice_two)
        };
        call(server, token, "list_issues", issues_of("alice"))
    });
    for response in futures::future::join_all(calls).await {
        assert!(!result_text(&response).1, "{response}");
    }
    let stats = setup.provider.stats().await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["failed_refreshes"], 0, "{stats}");
    let tokens = setup.provider.access_tokens().await;
    let last_eight: Vec<Option<String>> = setup
        .api
        .seen_at("/repos/")
        .into_iter()
        .rev()
        .take(8)
        .map(|s| s.authorization)
        .collect();
    assert!(
        last_eight
            .iter()
            .all(|a| a.as_deref() == Some(format!("Bearer {}", tokens[1]).as_str())),
        "{last_eight:?}"
    );

    // Unlinked through two: one's next call needs a link.
    unlink(&two, &alice_two, "github").await;
    let response = call(&one, &alice_one, "list_issues", issues_of("alice")).await;
    let (text, error) = result_text(&response);
    assert!(error, "{response}");
    link_url(&text);
    assert!(!is_linked(&one, &alice_one, "github").await);
    assert_logs_clean(&setup, &[&one, &two]).await;
}

/// The embedded store's files hold no access or refresh token, only sealed records.
#[tokio::test]
async fn store_bytes_hold_no_token_on_disk() {
    let setup = Setup::new("refresh-before-secs = 1").await;
    setup
        .provider
        .get(&format!("/test/expiry?secs={SHORT_LIFE_SECS}"))
        .await;
    let state = tempfile::tempdir().unwrap();
    let mut server = setup
        .serve(&["--state-dir", state.path().to_str().unwrap()])
        .await;
    link_and_refresh(&setup, &server).await;
    server.http.child.kill().await.unwrap();
    server.http.child.wait().await.unwrap();
    let mut bytes = Vec::new();
    let mut dirs = vec![state.path().to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                bytes.extend(std::fs::read(&path).unwrap());
            }
        }
    }
    assert!(
        bytes
            .windows(b"credentials".len())
            .any(|w| w == b"credentials"),
        "the store holds the credential records (else this test looked in the wrong place)"
    );
    assert_holds_none("the embedded store", &bytes, &setup.provider.issued().await);
}

/// Redis's values (every key, `DUMP`ed) hold no access or refresh token.
#[tokio::test]
async fn store_bytes_hold_no_token_on_redis() {
    let redis = external::Redis::start();
    let setup = Setup::new("refresh-before-secs = 1").await;
    setup
        .provider
        .get(&format!("/test/expiry?secs={SHORT_LIFE_SECS}"))
        .await;
    let server = setup.serve(&["--state", &redis.url()]).await;
    link_and_refresh(&setup, &server).await;
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut connection)
        .await
        .unwrap();
    let mut bytes = Vec::new();
    for key in &keys {
        bytes.extend_from_slice(key);
        let dumped: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut connection)
            .await
            .unwrap();
        bytes.extend(dumped.unwrap_or_default());
    }
    assert!(
        String::from_utf8_lossy(&bytes).contains("credentials"),
        "Redis holds the credential records (else this test looked in the wrong place)"
    );
    assert_holds_none("Redis", &bytes, &setup.provider.issued().await);
}

/// A client that cannot open URLs (elicitation without `url`) gets a clear error carrying
/// the URL; once the user has opened it, the call works.
#[tokio::test]
async fn client_without_url_elicitation_gets_the_url() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let events = python_client(
        &server,
        &alice,
        "alice",
        "no-url",
        json!([["list_issues", issues_of("alice")]]),
    )
    .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:?}");
    let result = &events_of(&events, "result")[0];
    assert_eq!(result["isError"], true, "{events:?}");
    let start = link_url(result["text"].as_str().unwrap());
    assert!(
        start.starts_with(&format!("{}/oauth/link/start?ticket=", server.origin)),
        "{start}"
    );
    let (status, page) = Browser::new("alice").open(&start).await;
    assert_eq!(status, 200, "{page}");
    ok_text(&server, &alice, "list_issues", issues_of("alice")).await;
    assert_eq!(
        setup.api.seen_at("/repos/")[0].sub.as_deref(),
        Some("alice")
    );
}

/// `--link-wait-secs 0` on 2025-11-25: a client declaring URL elicitation gets -32042 with
/// the URL at once (never an `elicitation/create`), and its retry after linking works.
#[tokio::test]
async fn link_wait_zero_is_32042() {
    let setup = Setup::new("").await;
    let server = setup.serve(&["--link-wait-secs", "0"]).await;
    let alice = setup.token("alice", &server).await;
    let events = python_client(
        &server,
        &alice,
        "alice",
        "accept",
        json!([["list_issues", issues_of("alice")]]),
    )
    .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:?}");
    let error = &events_of(&events, "error")[0];
    assert_eq!(error["code"], -32042, "{events:?}");
    let asked = &error["data"]["elicitations"][0];
    assert_eq!(asked["mode"], "url", "{error}");
    assert!(
        asked["elicitationId"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{error}"
    );
    let start = asked["url"].as_str().unwrap();
    assert!(start.contains("/oauth/link/start?ticket="), "{start}");
    let (status, page) = Browser::new("alice").open(start).await;
    assert_eq!(status, 200, "{page}");
    let events = python_client(
        &server,
        &alice,
        "alice",
        "decline",
        json!([["list_issues", issues_of("alice")]]),
    )
    .await;
    assert_eq!(
        events_of(&events, "result")[0]["isError"],
        false,
        "{events:?}"
    );
}

/// 2026-07-28: the link request is an input request keyed `mcpbox-link-github` in URL mode
/// (even with `--link-wait-secs 0`, never -32042); the retry after linking completes.
#[tokio::test]
async fn the_2026_leg_never_emits_32042() {
    let setup = Setup::new("").await;
    let server = setup.serve(&["--link-wait-secs", "0"]).await;
    let alice = setup.token("alice", &server).await;
    let capabilities = json!({"elicitation": {"form": {}, "url": {}}});
    let first = call_with(
        &server,
        &alice,
        "list_issues",
        issues_of("alice"),
        capabilities.clone(),
        json!({}),
    )
    .await;
    assert!(first["error"].is_null(), "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let request = &result["inputRequests"]["mcpbox-link-github"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["mode"], "url", "{first}");
    let start = request["params"]["url"].as_str().unwrap();
    let (status, page) = Browser::new("alice").open(start).await;
    assert_eq!(status, 200, "{page}");
    let retry = call_with(
        &server,
        &alice,
        "list_issues",
        issues_of("alice"),
        capabilities,
        json!({
            "requestState": result["requestState"],
            "inputResponses": {"mcpbox-link-github": {"action": "accept"}},
        }),
    )
    .await;
    assert_eq!(retry["result"]["resultType"], "complete", "{retry}");
    let (text, error) = result_text(&retry);
    assert!(
        !error && text.contains("Issue 1 of alice-org/alice-repo"),
        "{retry}"
    );
    assert!(!first.to_string().contains("-32042") && !retry.to_string().contains("-32042"));
}

/// `mcpbox credentials` on Redis while mcpbox serves: `ls` lists alice's link and no token,
/// `rm` removes it, and her next call needs a link again.
#[tokio::test]
async fn mcpbox_credentials_ls_rm() {
    let redis = external::Redis::start();
    let state = redis.url();
    let setup = Setup::new("").await;
    let server = setup.serve(&["--state", &state]).await;
    let alice = setup.token("alice", &server).await;
    let result =
        link_through_client(&server, &alice, "alice", "list_issues", issues_of("alice")).await;
    assert_eq!(result["isError"], false, "{result}");
    let key = setup.key_file();
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .arg("credentials")
            .args(args)
            // `--state` is global, as for `mcpbox state`; the key by its variable, which
            // holds wherever the flag is declared.
            .args(["--state", &state])
            .env("MCPBOX_CREDENTIALS_KEY_FILE", &key)
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
    let principal = setup.principal("alice");
    let (listing, ok) = cli(&["ls"]);
    assert!(ok, "{listing}");
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with(&format!("{principal}\tgithub\t"))),
        "{listing}"
    );
    assert_holds_none(
        "the listing",
        listing.as_bytes(),
        &setup.provider.issued().await,
    );
    let (removed, ok) = cli(&["rm", "--principal", &principal, "--provider", "github"]);
    assert!(ok && removed.contains('1'), "{removed}");
    let (listing, ok) = cli(&["ls"]);
    assert!(ok && !listing.contains(&principal), "{listing}");
    let response = call(&server, &alice, "list_issues", issues_of("alice")).await;
    let (text, error) = result_text(&response);
    assert!(error, "{response}");
    link_url(&text);
}

/// `mcpbox check` reports a plugin whose grant names a provider the configuration does not
/// define, and fails.
#[tokio::test]
async fn check_reports_unknown_provider() {
    let plugins = plugin_dir(&[("github", "github.wasm")]);
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        format!(
            "plugins = \"{}\"\n\n[plugin.github.http]\nallow = [\"api.github.com\"]\n[plugin.github.http.credentials]\n\"api.github.com\" = \"gitlab\"\n",
            plugins.path().display()
        ),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["check", "--config", config.to_str().unwrap()])
        .envs(crate::support::test_cache())
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("provider `gitlab`") && report.contains("github"),
        "{report}"
    );
}

/// The GitHub plugin's tools, against the fake API, as alice: each request carries her token
/// and the plugin's fixed headers, goes where GitHub's REST API has it, and each answer is
/// the reduced form the original returns.
#[tokio::test]
async fn github_tools_act_as_the_caller() {
    let setup = Setup::new("").await;
    let server = setup.serve(&[]).await;
    let alice = setup.token("alice", &server).await;
    let listed = {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let bearer = format!("Bearer {alice}");
        let headers = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("authorization", bearer.as_str()),
        ];
        let response = post(&reqwest::Client::new(), &server.http.url, &headers, body).await;
        rpc_body(&response.text().await.unwrap())
    };
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in [
        "list_issues",
        "issue_read",
        "issue_write",
        "add_issue_comment",
        "list_pull_requests",
        "pull_request_read",
        "mcpbox_linked_accounts",
        "mcpbox_unlink_account",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }

    let repo = json!({"owner": "octo-org", "repo": "hello"});
    let with = |more: Value| {
        let mut args = repo.clone();
        if let (Value::Object(args), Value::Object(more)) = (&mut args, more) {
            args.extend(more);
        }
        args
    };
    let first = link_through_client(
        &server,
        &alice,
        "alice",
        "list_issues",
        with(json!({"state": "OPEN", "labels": ["bug"], "perPage": 2})),
    )
    .await;
    assert_eq!(first["isError"], false, "{first}");
    let listing: Value = serde_json::from_str(first["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        listing["issues"].as_array().unwrap().len(),
        2,
        "pull requests left out: {listing}"
    );
    assert_eq!(listing["issues"][0]["labels"], json!(["bug"]), "{listing}");
    assert_eq!(listing["pageInfo"]["hasNextPage"], true, "{listing}");
    assert_eq!(listing["pageInfo"]["endCursor"], "2", "{listing}");

    let parse = |text: String| -> Value { serde_json::from_str(&text).unwrap() };
    let issue = parse(
        ok_text(
            &server,
            &alice,
            "issue_read",
            with(json!({"method": "get", "issue_number": 1})),
        )
        .await,
    );
    assert_eq!(issue["title"], "Issue 1 of octo-org/hello", "{issue}");
    assert_eq!(issue["user"]["login"], "octocat", "{issue}");
    let comments = parse(
        ok_text(
            &server,
            &alice,
            "issue_read",
            with(json!({"method": "get_comments", "issue_number": 1})),
        )
        .await,
    );
    assert_eq!(comments[0]["body"], "Me too.", "{comments}");
    let created = parse(
        ok_text(
            &server,
            &alice,
            "issue_write",
            with(json!({"method": "create", "title": "New", "body": "Broken."})),
        )
        .await,
    );
    assert_eq!(
        created["url"], "https://github.com/octo-org/hello/issues/42",
        "{created}"
    );
    let commented = parse(
        ok_text(
            &server,
            &alice,
            "add_issue_comment",
            with(json!({"issue_number": 1, "body": "Thanks"})),
        )
        .await,
    );
    assert!(
        commented["url"].as_str().unwrap().contains("issuecomment-"),
        "{commented}"
    );
    let pulls = parse(
        ok_text(
            &server,
            &alice,
            "list_pull_requests",
            with(json!({"state": "open"})),
        )
        .await,
    );
    assert_eq!(pulls[0]["head"]["ref"], "fix", "{pulls}");
    let pull = parse(
        ok_text(
            &server,
            &alice,
            "pull_request_read",
            with(json!({"method": "get", "pullNumber": 7})),
        )
        .await,
    );
    assert_eq!(pull["title"], "Pull 7 of octo-org/hello", "{pull}");
    let files = parse(
        ok_text(
            &server,
            &alice,
            "pull_request_read",
            with(json!({"method": "get_files", "pullNumber": 7})),
        )
        .await,
    );
    assert_eq!(files[0]["filename"], "src/lib.rs", "{files}");

    let seen = setup.api.seen();
    let requests: Vec<(String, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    let expected = [
        (
            "GET",
            "/repos/octo-org/hello/issues?state=open&labels=bug&per_page=2&page=1",
        ),
        ("GET", "/repos/octo-org/hello/issues/1"),
        ("GET", "/repos/octo-org/hello/issues/1/comments"),
        ("POST", "/repos/octo-org/hello/issues"),
        ("POST", "/repos/octo-org/hello/issues/1/comments"),
        ("GET", "/repos/octo-org/hello/pulls?state=open"),
        ("GET", "/repos/octo-org/hello/pulls/7"),
        ("GET", "/repos/octo-org/hello/pulls/7/files"),
    ]
    .map(|(m, p)| (m.to_owned(), p.to_owned()));
    assert_eq!(requests, expected);
    let token = &setup.provider.access_tokens().await[0];
    for request in &seen {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {token}").as_str()),
            "{request:?}"
        );
        assert_eq!(
            request.header("user-agent"),
            Some("mcpbox-github"),
            "{request:?}"
        );
        assert_eq!(
            request.header("accept"),
            Some("application/vnd.github+json"),
            "{request:?}"
        );
        assert_eq!(
            request.header("x-github-api-version"),
            Some("2022-11-28"),
            "{request:?}"
        );
    }
    let body: Value = serde_json::from_str(&seen[3].body).unwrap();
    assert_eq!(body, json!({"title": "New", "body": "Broken."}));
    assert_eq!(seen[3].header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(&seen[4].body).unwrap();
    assert_eq!(body, json!({"body": "Thanks"}));
    assert_logs_clean(&setup, &[&server]).await;
}

/// Over stdio (the local user) the provider sends the browser back to a loopback listener
/// (`--link-listen`): the user links once, and the call proceeds as them.
#[tokio::test]
async fn stdio_links_through_a_loopback_callback() {
    let setup = Setup::new("").await;
    let secrets = setup.files.path().join("secrets.toml");
    let config = setup.config();
    let key = setup.key_file();
    let command = mcpbox(
        setup.plugins.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--secrets",
            secrets.to_str().unwrap(),
            "--credentials-key-file",
            key.to_str().unwrap(),
            "--link-listen",
            "127.0.0.1:0",
        ],
    );
    let handler = LinkingClient {
        user: "me".to_owned(),
        asked: std::sync::Arc::default(),
    };
    let (client, stderr) = crate::support::connect_command(command, handler.clone()).await;
    let Value::Object(arguments) = issues_of("me") else {
        unreachable!()
    };
    for _ in 0..2 {
        let result = tokio::time::timeout(
            STEP,
            client.call_tool(
                rmcp::model::CallToolRequestParams::new("list_issues")
                    .with_arguments(arguments.clone()),
            ),
        )
        .await
        .expect("the call ends in time")
        .unwrap();
        let (text, error) = crate::support::tool_text(&result);
        assert!(
            !error && text.contains("Issue 1 of me-org/me-repo"),
            "{text}"
        );
    }
    let asked = handler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    let url = asked[0]["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/oauth/link/start?ticket="),
        "{url}"
    );
    let seen = setup.api.seen_at("/repos/");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|s| s.sub.as_deref() == Some("me")),
        "{seen:?}"
    );
    client.cancel().await.unwrap();
    assert_holds_none(
        "mcpbox's log",
        stderr.text().as_bytes(),
        &setup.provider.issued().await,
    );
}
