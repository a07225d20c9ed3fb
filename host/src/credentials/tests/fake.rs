//! The fake provider on loopback the broker's tests run against (an axum token endpoint that
//! records what it saw and behaves as a test says), the event recorder, and the broker set
//! up against them ([`setup`], also used by the HTTP transport's tests).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::IntoResponse;

use super::*;

/// What the fake provider saw and how it behaves.
#[derive(Debug, Default)]
pub(super) struct Fake {
    /// code → (PKCE challenge, redirect URI)
    pub(super) codes: HashMap<String, (String, String)>,
    pub(super) issued: u32,
    pub(super) refreshes: u32,
    pub(super) revoked: Vec<String>,
    /// Answer refreshes with 400 invalid_grant.
    pub(super) refresh_invalid: bool,
    /// Answer token requests with 503.
    pub(super) down: bool,
    /// `expires_in` of issued tokens.
    pub(super) expires_in: u64,
    /// How long a refresh takes.
    pub(super) refresh_delay_ms: u64,
    /// Client secrets seen.
    pub(super) secrets: Vec<String>,
}

pub(super) type Shared = Arc<Mutex<Fake>>;

pub(super) fn form(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

pub(super) async fn token_endpoint(
    State(fake): State<Shared>,
    body: String,
) -> axum::response::Response {
    let params = form(&body);
    let delay = {
        let fake = fake.lock().expect("fake");
        if fake.down {
            return (http::StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
        }
        fake.refresh_delay_ms
    };
    let json = |status: http::StatusCode, value: serde_json::Value| {
        (
            status,
            [(http::header::CONTENT_TYPE, "application/json")],
            value.to_string(),
        )
            .into_response()
    };
    match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let mut fake = fake.lock().expect("fake");
            let code = params.get("code").cloned().unwrap_or_default();
            let Some((challenge, redirect)) = fake.codes.remove(&code) else {
                return json(
                    http::StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "invalid_grant"}),
                );
            };
            let verifier = params.get("code_verifier").cloned().unwrap_or_default();
            if token::challenge_of(&verifier) != challenge
                || params.get("redirect_uri") != Some(&redirect)
            {
                return json(
                    http::StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "invalid_grant"}),
                );
            }
            if let Some(secret) = params.get("client_secret") {
                fake.secrets.push(secret.clone());
            }
            fake.issued += 1;
            let n = fake.issued;
            json(
                http::StatusCode::OK,
                serde_json::json!({
                    "access_token": format!("at-{n}"),
                    "refresh_token": format!("rt-{n}"),
                    "token_type": "bearer",
                    "expires_in": fake.expires_in,
                    "scope": "repo read:org",
                }),
            )
        }
        Some("refresh_token") => {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let mut fake = fake.lock().expect("fake");
            if fake.refresh_invalid {
                return json(
                    http::StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "invalid_grant"}),
                );
            }
            fake.refreshes += 1;
            fake.issued += 1;
            let n = fake.issued;
            json(
                http::StatusCode::OK,
                serde_json::json!({
                    "access_token": format!("at-{n}"),
                    "token_type": "bearer",
                    "expires_in": 3600,
                }),
            )
        }
        _ => json(
            http::StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "unsupported_grant_type"}),
        ),
    }
}

pub(super) async fn revoke_endpoint(State(fake): State<Shared>, body: String) -> http::StatusCode {
    let params = form(&body);
    fake.lock()
        .expect("fake")
        .revoked
        .push(params.get("token").cloned().unwrap_or_default());
    http::StatusCode::OK
}

/// The fake provider, on a loopback port: its base URL.
pub(super) async fn fake_provider(fake: Shared) -> String {
    let router = axum::Router::new()
        .route("/token", axum::routing::post(token_endpoint))
        .route("/revoke", axum::routing::post(revoke_endpoint))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{address}")
}

/// Events, recorded.
#[derive(Debug, Default)]
pub(crate) struct Recorder(pub(super) Mutex<Vec<EventRecord>>);

impl CredentialEvents for Recorder {
    fn record(&self, event: EventRecord) {
        self.0.lock().expect("events").push(event);
    }
}

impl Recorder {
    pub(super) fn methods(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .expect("events")
            .iter()
            .map(|e| e.event.method())
            .collect()
    }
}

pub(crate) struct Setup {
    pub(super) fake: Shared,
    pub(super) state: Arc<StateService>,
    pub(super) base: String,
    pub(super) key: Key,
    pub(super) secrets: Arc<SecretsCell>,
    pub(super) _dir: tempfile::TempDir,
}

pub(crate) async fn setup() -> Setup {
    use std::os::unix::fs::PermissionsExt as _;
    let fake: Shared = Arc::new(Mutex::new(Fake {
        expires_in: 3600,
        ..Fake::default()
    }));
    let base = fake_provider(Arc::clone(&fake)).await;
    let dir = tempfile::tempdir().expect("dir");
    let state = Arc::new(
        StateService::new(crate::kv::StateConfig::Disk(dir.path().join("state"))).expect("state"),
    );
    let secrets_file = dir.path().join("secrets.toml");
    std::fs::write(&secrets_file, "fake-secret = \"client-s3cret\"\n").expect("write");
    std::fs::set_permissions(&secrets_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let secrets = Arc::new(SecretsCell::new(
        crate::policy::Secrets::load(&secrets_file).expect("secrets"),
    ));
    Setup {
        fake,
        state,
        base,
        key: Key::parse(&Key::generate().expect("key")).expect("key"),
        secrets,
        _dir: dir,
    }
}

impl Setup {
    pub(crate) fn broker(&self, events: Arc<Recorder>) -> Broker {
        let text = format!(
            "[providers.fake]\ndisplay-name = \"Fake\"\n\
             authorization-endpoint = \"{base}/authorize\"\ntoken-endpoint = \"{base}/token\"\n\
             revocation-endpoint = \"{base}/revoke\"\nclient-id = \"mcpbox-test\"\n\
             client-secret = {{ secret = \"fake-secret\" }}\nscopes = [\"repo\"]\n\
             authorize-params = {{ prompt = \"consent\" }}\n",
            base = self.base
        );
        let table: toml::Table = toml::from_str(&text).expect("toml");
        let providers = Providers::from_toml(table.get("providers").cloned().expect("providers"))
            .expect("providers");
        Broker::new(
            providers,
            Cipher::new(&self.key, None).expect("cipher"),
            Arc::clone(&self.state),
            Arc::clone(&self.secrets),
            BrokerSettings {
                public_url: Url::parse("http://127.0.0.1:9/").expect("url"),
                ticket_ttl: Duration::from_secs(600),
                link_wait: Duration::from_secs(5),
            },
            events,
        )
        .expect("broker")
    }

    /// The user at the provider: consent to the authorization URL, giving a code.
    /// How many tokens the fake provider issued.
    pub(crate) fn fake_issued(&self) -> u32 {
        self.fake.lock().expect("fake").issued
    }

    pub(crate) fn authorize(&self, location: &str, code: &str) -> CallbackQuery {
        let url = Url::parse(location).expect("location");
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(url.path(), "/authorize");
        assert_eq!(query["response_type"], "code");
        assert_eq!(query["client_id"], "mcpbox-test");
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["scope"], "repo");
        assert_eq!(query["prompt"], "consent");
        self.fake.lock().expect("fake").codes.insert(
            code.to_owned(),
            (
                query["code_challenge"].clone(),
                query["redirect_uri"].clone(),
            ),
        );
        CallbackQuery {
            code: Some(code.to_owned()),
            state: Some(query["state"].clone()),
            error: None,
        }
    }
}

pub(super) fn cookie_of(redirect: &StartRedirect) -> String {
    let value = redirect
        .set_cookie
        .strip_prefix("mcpbox_link=")
        .and_then(|rest| rest.split(';').next())
        .expect("cookie");
    value.to_owned()
}

pub(super) fn ticket(prompt: &LinkPrompt) -> String {
    ticket_of(&prompt.url).expect("ticket")
}

pub(super) fn token_of(lookup: TokenLookup) -> String {
    match lookup {
        TokenLookup::Ready(token) => token.expose().to_owned(),
        other => panic!("not ready: {other:?}"),
    }
}

/// Link `caller` through the whole flow; the code is `code`.
pub(super) async fn link(setup: &Setup, broker: &Broker, caller: &str, code: &str) {
    let prompt = broker
        .begin_link(caller, "fake", Some("github"))
        .await
        .expect("begin");
    let redirect = broker.start(&ticket(&prompt)).await.expect("start");
    let query = setup.authorize(&redirect.location, code);
    let linked = broker
        .complete(query, Some(&cookie_of(&redirect)))
        .await
        .expect("linked");
    assert_eq!(linked.caller, caller);
}
