//! RFC 8693 token exchange (`grant = "token-exchange"`), end to end: mcpbox's own identity
//! provider ([`super::super::oauth::AuthorizationServer`], npm's `oauth2-mock-server` with a
//! token-exchange route that verifies the subject token with `jose`) exchanges each caller's
//! sign-in token to mcpbox for a token of the GitHub API's audience, which mcpbox attaches to
//! the GitHub plugin's requests; nothing is linked or sealed, so no key is needed.

use std::path::Path;

use serde_json::Value;

use crate::support::STEP;

use super::harness::{
    Mcpbox, Setup, assert_each_user_sent_their_own, assert_holds_none, audit_lines, call,
    issues_of, ok_text, private_file, result_text,
};

const EXCHANGE_CLIENT: &str = "mcpbox-exchange";
const EXCHANGE_SECRET: &str = "exchange-SECRET-91c2";
const AUDIENCE: &str = "https://api.github.example/";

/// `setup` with its configuration rewritten: provider `github` exchanges sign-in tokens at
/// mcpbox's own identity provider, with `extra` keys.
fn exchange_config(setup: &Setup, extra: &str) {
    let api = &setup.api;
    std::fs::write(
        setup.config(),
        format!(
            r#"[providers.github]
display-name = "GitHub"
grant = "token-exchange"
token-endpoint = "{idp}/exchange"
client-id = "{EXCHANGE_CLIENT}"
client-secret = {{ secret = "exchange-secret" }}
audience = "{AUDIENCE}"
scopes = ["repo"]
{extra}

[plugin.github]
instances = "per-caller"
[plugin.github.http]
allow = ["127.0.0.1:{port}"]
[plugin.github.http.credentials]
"127.0.0.1:{port}" = "github"
[plugin.github.config]
api-url = "{url}"
"#,
            idp = setup.identity.url,
            port = api.port,
            url = api.url,
        ),
    )
    .unwrap();
    private_file(
        &setup.files.path().join("secrets.toml"),
        &format!("exchange-secret = \"{EXCHANGE_SECRET}\"\n"),
    );
}

async fn exchange_stats(setup: &Setup) -> Value {
    reqwest::get(format!("{}/test/exchange-stats", setup.identity.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// mcpbox with the exchange configuration.
async fn serve(setup: &Setup) -> Mcpbox {
    let server = setup.serve(&[]).await;
    server.http.stderr.wait_for("github (token exchange)").await;
    server
}

/// Alice and bob, signed in to mcpbox, each act on the API as themselves: every request carries
/// a token the identity provider issued for that user and the API's audience, never their
/// sign-in token itself; one exchange per user serves their next calls, and a new sign-in token
/// is exchanged anew. A user the provider refuses gets a clear error naming why, and nothing is
/// sent; the audit log records each exchange and each refusal, and no log holds a token.
#[tokio::test]
async fn token_exchange_acts_as_each_signed_in_caller() {
    let setup = Setup::new("").await;
    exchange_config(&setup, "");
    let server = serve(&setup).await;
    let alice = setup.token("alice", &server).await;
    let bob = setup.token("bob", &server).await;

    for _ in 0..3 {
        for (user, token) in [("alice", &alice), ("bob", &bob)] {
            let text = ok_text(&server, token, "list_issues", issues_of(user)).await;
            assert!(
                text.contains(&format!("Issue 1 of {user}-org/{user}-repo")),
                "{text}"
            );
        }
    }
    let stats = exchange_stats(&setup).await;
    assert_eq!(stats["exchanged"], 2, "one exchange per user: {stats}");
    assert_eq!(strings(&stats["subjects"]), ["alice", "bob"], "{stats}");
    assert_eq!(
        strings(&stats["audiences"]),
        [AUDIENCE, AUDIENCE],
        "{stats}"
    );
    assert_eq!(strings(&stats["scopes"]), ["repo", "repo"], "{stats}");
    let issued = strings(&stats["tokens"]);
    let seen = setup.api.seen_at("/repos/");
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_each_user_sent_their_own(&seen, &issued);

    // Alice signs in again: her new token is exchanged, and the calls carry the new result.
    let renewed = setup
        .identity
        .token(&format!(
            "scope=mcp&sub=alice&aud={}&expires_in=7200",
            server.resource
        ))
        .await;
    assert_ne!(renewed, alice);
    ok_text(&server, &renewed, "list_issues", issues_of("alice")).await;
    let stats = exchange_stats(&setup).await;
    assert_eq!(stats["exchanged"], 3, "{stats}");
    let newest = strings(&stats["tokens"])[2].clone();
    let last = setup.api.seen_at("/repos/").pop().unwrap();
    assert_eq!(
        last.authorization.as_deref(),
        Some(format!("Bearer {newest}").as_str())
    );

    // Carol may not use the API: the provider refuses her exchange.
    reqwest::get(format!(
        "{}/test/exchange-deny?sub=carol",
        setup.identity.url
    ))
    .await
    .unwrap();
    let carol = setup.token("carol", &server).await;
    let before = setup.api.seen().len();
    let answer = call(&server, &carol, "list_issues", issues_of("carol")).await;
    let (text, is_error) = result_text(&answer);
    assert!(is_error, "{answer}");
    assert!(
        text.contains("refused to exchange the caller's sign-in token (invalid_grant)"),
        "{text}"
    );
    assert_eq!(setup.api.seen().len(), before, "nothing reached the API");

    // The audit writer appends in the background: wait (boundedly) for carol's record.
    let deadline = tokio::time::Instant::now() + STEP;
    let mut audit = audit_lines(&setup);
    while !audit
        .iter()
        .any(|r| r["method"] == "credentials/exchange_failed")
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        audit = audit_lines(&setup);
    }
    let of = |method: &str| -> Vec<String> {
        audit
            .iter()
            .filter(|r| r["method"] == method)
            .map(|r| r["principal"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        of("credentials/exchange"),
        [
            setup.principal("alice"),
            setup.principal("bob"),
            setup.principal("alice")
        ],
        "{audit:?}"
    );
    assert_eq!(
        of("credentials/exchange_failed"),
        [setup.principal("carol")],
        "{audit:?}"
    );
    let mut tokens = issued;
    tokens.extend([alice, bob, renewed, carol, newest]);
    assert_holds_none(
        "mcpbox's log",
        server.http.stderr.text().as_bytes(),
        &tokens,
    );
    assert_holds_none(
        "the audit log",
        &std::fs::read(setup.audit_log()).unwrap(),
        &tokens,
    );
}

/// A token the provider issues for less than `refresh-before-secs` is exchanged again at each
/// call (it would expire mid-call otherwise); and a configuration whose mcpbox has no OAuth of
/// its own (so no caller has a sign-in token to exchange) is refused by `check`, saying why.
#[tokio::test]
async fn short_lived_exchanges_renew_and_exchange_needs_mcpbox_oauth() {
    let setup = Setup::new("").await;
    exchange_config(&setup, "refresh-before-secs = 120");
    reqwest::get(format!(
        "{}/test/exchange-expiry?secs=60",
        setup.identity.url
    ))
    .await
    .unwrap();
    let server = serve(&setup).await;
    let alice = setup.token("alice", &server).await;
    for round in 1..=3 {
        ok_text(&server, &alice, "list_issues", issues_of("alice")).await;
        assert_eq!(exchange_stats(&setup).await["exchanged"], round);
    }
    let seen = setup.api.seen_at("/repos/");
    let sent: Vec<_> = seen.iter().map(|s| s.authorization.clone()).collect();
    let issued = strings(&exchange_stats(&setup).await["tokens"]);
    assert_eq!(
        sent,
        issued
            .iter()
            .map(|t| Some(format!("Bearer {t}")))
            .collect::<Vec<_>>()
    );
    drop(server);

    // Without --http and --oauth-issuer no caller signs in: check refuses, saying why.
    let check = setup.files.path().join("check.toml");
    std::fs::write(
        &check,
        format!(
            "plugins = \"{}\"\nsecrets = \"{}\"\n{}",
            setup.plugins.path().display(),
            setup.files.path().join("secrets.toml").display(),
            std::fs::read_to_string(setup.config()).unwrap()
        ),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["check", "--config", check.to_str().unwrap()])
        .env(
            "MCPBOX_CACHE_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache"),
        )
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains(
            "provider `github` has grant = \"token-exchange\": it exchanges the OAuth access \
             token each caller signed in to mcpbox with"
        ),
        "{report}"
    );
    // Exchanged tokens are never sealed: no credentials key is asked for.
    assert!(!report.contains("credentials key"), "{report}");
}
