//! Brokered credentials as the engine sees them: the [`CredentialSource`] that holds each
//! caller's tokens (implemented outside the engine; the runtime holds one when providers are
//! configured, [`super::Runtime::set_credentials`]), the load-time check of a plugin's
//! `[http.credentials]` against it, the per-call view the HTTP gate attaches tokens from
//! ([`CallCredentials`]), and the answers the gate gives a plugin in place of sending
//! ([`synthetic`]).
//!
//! A token never leaves this path: it is a [`zeroize::Zeroizing`] string until it becomes the
//! value of one sensitive header of one outgoing request (`http.rs`). Nothing here logs,
//! formats or returns it; [`TokenLookup`]'s `Debug` shows `..` in its place.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::CallReach;
use super::egress::Sent;
use crate::policy::Policy;

/// What a [`CredentialSource`] has for one caller and provider.
pub enum TokenLookup {
    /// The caller's current access token (refreshed if it was near expiry).
    Ready(zeroize::Zeroizing<String>),
    /// The caller has no usable link to the provider (never linked, revoked, or it could not
    /// be refreshed): they must link their account.
    LinkNeeded,
    /// The provider cannot be reached to refresh the token just now; why (never a token).
    Unavailable(String),
}

impl std::fmt::Debug for TokenLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(_) => f.write_str("Ready(..)"),
            Self::LinkNeeded => f.write_str("LinkNeeded"),
            Self::Unavailable(why) => f.debug_tuple("Unavailable").field(why).finish(),
        }
    }
}

/// Where callers' tokens come from: the host's credential broker, behind this trait so that
/// the engine depends on nothing of it.
pub trait CredentialSource: Send + Sync + std::fmt::Debug + 'static {
    /// The header and scheme (e.g. `("authorization", Some("Bearer"))`) the provider's token
    /// goes in; `None`: no such provider.
    fn header(&self, provider: &str) -> Option<(http::HeaderName, Option<String>)>;
    /// The caller's current token for `provider`, refreshed if near expiry.
    fn access_token<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = TokenLookup> + Send + 'a>>;
    /// Whether `provider` is configured (checked at plugin load).
    fn has_provider(&self, provider: &str) -> bool;
}

/// Whether every provider `policy`'s `[http.credentials]` names is one `source` has; the
/// reason if not (a plugin naming a provider the configuration does not define does not load).
pub fn check_credential_grants(
    policy: &Policy,
    source: Option<&dyn CredentialSource>,
) -> Result<(), String> {
    let Some(grant) = policy.credentials.first() else {
        return Ok(());
    };
    let Some(source) = source else {
        return Err(format!(
            "its [http.credentials] calls {} as the caller through provider `{}`, but no \
             providers are configured (add [providers.{}] to the configuration file)",
            grant.host, grant.provider, grant.provider
        ));
    };
    match policy
        .credentials
        .iter()
        .find(|g| !source.has_provider(&g.provider))
    {
        Some(missing) => Err(format!(
            "its [http.credentials] names provider `{}` (for {}), which the configuration does \
             not define (add [providers.{}])",
            missing.provider, missing.host, missing.provider
        )),
        None => Ok(()),
    }
}

/// One call's way to its caller's tokens: the source, the caller's key (`None`: a call for
/// nobody, such as reading a plugin's lists at load, which never gets a token) and the call's
/// host, told when the caller must link an account.
#[derive(Clone)]
pub struct CallCredentials {
    pub(super) source: Arc<dyn CredentialSource>,
    pub(super) caller: Option<Arc<str>>,
    pub(super) reach: Arc<dyn CallReach>,
}

impl CallCredentials {
    /// The view of `source` for a call made by `caller` (a principal's key), whose host is
    /// `host`.
    pub fn new(
        source: Arc<dyn CredentialSource>,
        caller: Option<Arc<str>>,
        reach: Arc<dyn CallReach>,
    ) -> Self {
        Self {
            source,
            caller,
            reach,
        }
    }
}

/// The header of a synthetic answer, naming what happened and for which provider.
pub const CREDENTIAL_HEADER: &str = "mcpbox-credential";

/// What the gate answers a plugin in place of sending its request to a brokered host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synthetic {
    /// 401: the caller has not linked an account with the provider (or has no identity).
    LinkRequired,
    /// 503: the caller's token cannot be had just now (the provider cannot be reached to
    /// refresh it, or refused to exchange the caller's sign-in); the body's `message` says why.
    Unavailable,
}

impl Synthetic {
    fn status(self) -> http::StatusCode {
        match self {
            Self::LinkRequired => http::StatusCode::UNAUTHORIZED,
            Self::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Self::LinkRequired => "link-required",
            Self::Unavailable => "unavailable",
        }
    }

    fn error(self) -> &'static str {
        match self {
            Self::LinkRequired => "mcpbox_link_required",
            Self::Unavailable => "mcpbox_credential_unavailable",
        }
    }
}

/// A response made by the host, with nothing sent: `answer`'s status, the header
/// `mcpbox-credential: KIND; provider="NAME"` and a JSON body
/// `{"error":…,"provider":…,"message":…}`.
pub fn synthetic(answer: Synthetic, provider: &str, message: &str) -> Sent {
    let body = serde_json::json!({
        "error": answer.error(),
        "provider": provider,
        "message": message,
    })
    .to_string();
    let mut response = http::Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = answer.status();
    let headers = response.headers_mut();
    // A provider's name is `[a-z][a-z0-9_-]*` (checked in its grant), so always a valid value.
    if let Ok(value) =
        http::HeaderValue::from_str(&format!("{}; provider=\"{provider}\"", answer.kind()))
    {
        headers.insert(http::HeaderName::from_static(CREDENTIAL_HEADER), value);
    }
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    (response, Box::new(async { Ok(()) }))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use wasmtime_wasi_http::{WasiBody, WasiHttpHooks};

    use super::*;
    use crate::engine::http::{Brokered, HttpGate, as_the_caller};
    use crate::engine::{BoxFuture, HostRequest, ListKind, LogLevel};
    use crate::policy::{CredentialGrant, HttpGrant};

    const TOKEN: &str = "gho_s3cr3t-alice-token";

    /// A source with one provider, `github`, whose token for `alice` is [`TOKEN`] and which
    /// answers every other caller with `other`.
    #[derive(Debug)]
    struct Fake {
        header: (&'static str, Option<&'static str>),
        other: fn() -> TokenLookup,
    }

    impl Fake {
        fn bearer() -> Arc<Self> {
            Arc::new(Self {
                header: ("authorization", Some("Bearer")),
                other: || TokenLookup::LinkNeeded,
            })
        }
    }

    impl CredentialSource for Fake {
        fn header(&self, provider: &str) -> Option<(http::HeaderName, Option<String>)> {
            (provider == "github").then(|| {
                (
                    http::HeaderName::from_static(self.header.0),
                    self.header.1.map(str::to_owned),
                )
            })
        }
        fn access_token<'a>(
            &'a self,
            caller_key: &'a str,
            _: &'a str,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = TokenLookup> + Send + 'a>> {
            Box::pin(async move {
                if caller_key == "token:alice" {
                    TokenLookup::Ready(zeroize::Zeroizing::new(TOKEN.to_owned()))
                } else {
                    (self.other)()
                }
            })
        }
        fn has_provider(&self, provider: &str) -> bool {
            provider == "github"
        }
    }

    /// A call's host that records the providers it was told a link is needed for.
    #[derive(Default)]
    struct Needs(Mutex<Vec<String>>);

    impl CallReach for Needs {
        fn log(&self, _: LogLevel, _: String) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
        fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
        fn cancelled(&self) -> bool {
            false
        }
        fn request(&self, _: HostRequest, _: String) -> BoxFuture<'_, Result<String, String>> {
            Box::pin(async { Err("none".to_owned()) })
        }
        fn list_changed(&self, _: ListKind) {}
        fn resource_updated(&self, _: String) {}
        fn credential_needed(&self, provider: &str) {
            self.0.lock().unwrap().push(provider.to_owned());
        }
    }

    /// A loopback HTTP server that records the head of every request it gets and answers
    /// each with `response`.
    struct Upstream {
        port: u16,
        heads: Arc<Mutex<Vec<String>>>,
    }

    impl Upstream {
        async fn start(response: String) -> Self {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let heads = Arc::new(Mutex::new(Vec::new()));
            let recorded = Arc::clone(&heads);
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            break;
                        }
                        head.push(byte[0]);
                    }
                    recorded
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).to_ascii_lowercase());
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                }
            });
            Self { port, heads }
        }

        fn ok() -> String {
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-upstream: yes\r\nconnection: close\r\n\r\nok"
                .to_owned()
        }

        fn heads(&self) -> Vec<String> {
            self.heads.lock().unwrap().clone()
        }
    }

    fn request(uri: &str, headers: &[(&str, &str)]) -> http::Request<WasiBody> {
        let mut builder = http::Request::builder().method("GET").uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder
            .body(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap()
    }

    /// A gate granting `ports` on 127.0.0.1, the first called as the caller through `github`,
    /// for a call by `caller`; its refusal flag and its host.
    fn gate_for(
        ports: &[u16],
        source: Arc<dyn CredentialSource>,
        caller: Option<&str>,
    ) -> (HttpGate, Arc<AtomicBool>, Arc<Needs>) {
        let grants: Vec<HttpGrant> = ports
            .iter()
            .map(|port| HttpGrant {
                host: "127.0.0.1".to_owned(),
                port: Some(*port),
            })
            .collect();
        let brokered = vec![CredentialGrant {
            host: grants[0].clone(),
            provider: "github".to_owned(),
        }];
        let denied = Arc::new(AtomicBool::new(false));
        let needs = Arc::new(Needs::default());
        let reach: Arc<dyn CallReach> = Arc::clone(&needs) as Arc<dyn CallReach>;
        let credentials = CallCredentials::new(source, caller.map(Arc::from), reach);
        let gate = HttpGate::new("github".into(), grants.into(), false, Arc::clone(&denied))
            .with_credentials(brokered.into(), Some(credentials));
        (gate, denied, needs)
    }

    async fn send(
        gate: &mut HttpGate,
        request: http::Request<WasiBody>,
    ) -> Result<(http::Response<Vec<u8>>, String), wasmtime_wasi_http::Error> {
        let (response, _driver) =
            Box::into_pin(gate.send_request(request, None, Box::new(async { Ok(()) }))).await?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_default();
        let shown = format!("{parts:?} {}", String::from_utf8_lossy(&body));
        Ok((http::Response::from_parts(parts, body), shown))
    }

    #[tokio::test]
    async fn the_callers_token_goes_to_its_host_only_and_never_back_to_the_plugin() {
        let other = Upstream::start(Upstream::ok()).await;
        let brokered = Upstream::start(format!(
            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{}/landing\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            other.port
        ))
        .await;
        let (mut gate, denied, needs) = gate_for(
            &[brokered.port, other.port],
            Fake::bearer(),
            Some("token:alice"),
        );

        let uri = format!("http://127.0.0.1:{}/repos", brokered.port);
        let (response, shown) = send(&mut gate, request(&uri, &[("accept", "application/json")]))
            .await
            .unwrap();
        let heads = brokered.heads();
        assert_eq!(heads.len(), 1);
        assert!(
            heads[0].contains(&format!(
                "\r\nauthorization: bearer {}\r\n",
                TOKEN.to_ascii_lowercase()
            )),
            "{}",
            heads[0]
        );
        // The redirect is the plugin's to follow: the gate answered it, and sent nothing on.
        assert_eq!(response.status(), 302);
        assert!(other.heads().is_empty());
        assert!(!shown.contains(TOKEN), "{shown}");

        // Following it is a request of its own, to a host not called as the caller: no token.
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let (response, shown) = send(&mut gate, request(&location, &[])).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.body(), b"ok");
        let heads = other.heads();
        assert_eq!(heads.len(), 1);
        assert!(heads[0].starts_with("get /landing "), "{}", heads[0]);
        assert!(!heads[0].contains("authorization"), "{}", heads[0]);
        assert!(!shown.contains(TOKEN), "{shown}");
        assert!(!denied.load(Ordering::Relaxed));
        assert!(needs.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_request_the_plugin_authorized_itself_is_refused_and_not_sent() {
        let upstream = Upstream::start(Upstream::ok()).await;
        let uri = format!("http://127.0.0.1:{}/", upstream.port);
        for header in ["Authorization", "authorization"] {
            let (mut gate, denied, _) =
                gate_for(&[upstream.port], Fake::bearer(), Some("token:alice"));
            let refused = send(&mut gate, request(&uri, &[(header, "Bearer stolen")])).await;
            assert!(
                matches!(refused, Err(wasmtime_wasi_http::Error::HttpRequestDenied)),
                "{refused:?}"
            );
            assert!(denied.load(Ordering::Relaxed));
        }
        // The provider's own header, when it is not Authorization.
        let private = Arc::new(Fake {
            header: ("private-token", None),
            other: || TokenLookup::LinkNeeded,
        });
        let (mut gate, denied, _) =
            gate_for(&[upstream.port], private.clone(), Some("token:alice"));
        let refused = send(&mut gate, request(&uri, &[("private-token", "mine")])).await;
        assert!(matches!(
            refused,
            Err(wasmtime_wasi_http::Error::HttpRequestDenied)
        ));
        assert!(denied.load(Ordering::Relaxed));
        assert!(upstream.heads().is_empty(), "nothing was sent");

        // That provider's token goes bare in its header.
        let (mut gate, _, _) = gate_for(&[upstream.port], private, Some("token:alice"));
        send(&mut gate, request(&uri, &[])).await.unwrap();
        let heads = upstream.heads();
        assert!(
            heads[0].contains(&format!(
                "\r\nprivate-token: {}\r\n",
                TOKEN.to_ascii_lowercase()
            )),
            "{}",
            heads[0]
        );
        assert!(!heads[0].contains("authorization"), "{}", heads[0]);
    }

    #[tokio::test]
    async fn a_brokered_host_is_called_over_https_only_but_for_loopback() {
        let (_, _, needs) = gate_for(&[1], Fake::bearer(), None);
        let credentials = CallCredentials::new(
            Fake::bearer(),
            Some(Arc::from("token:alice")),
            needs as Arc<dyn CallReach>,
        );
        let mut plain = request("http://api.example.com/user", &[]);
        let Brokered::Denied(why) = as_the_caller("github", &mut plain, Some(&credentials)).await
        else {
            panic!("sent over plain HTTP");
        };
        assert_eq!(
            why,
            "api.example.com is called as the caller (provider `github`) only over HTTPS"
        );
        assert!(plain.headers().is_empty());
        for uri in [
            "https://api.example.com/user",
            "http://localhost:8080/",
            "http://127.0.0.2/",
            "http://[::1]:80/",
        ] {
            let mut request = request(uri, &[]);
            let attached = as_the_caller("github", &mut request, Some(&credentials)).await;
            assert!(matches!(attached, Brokered::Send), "{uri}");
            let value = &request.headers()["authorization"];
            assert!(value.is_sensitive());
            assert_eq!(format!("{value:?}"), "Sensitive");
            assert_eq!(
                format!("{:?}", request.headers()),
                "{\"authorization\": Sensitive}"
            );
        }
    }

    #[tokio::test]
    async fn without_a_token_nothing_is_sent_and_the_plugin_hears_why() {
        let upstream = Upstream::start(Upstream::ok()).await;
        let uri = format!("http://127.0.0.1:{}/user", upstream.port);

        // Not linked: 401, and the call's host is told.
        let (mut gate, denied, needs) =
            gate_for(&[upstream.port], Fake::bearer(), Some("token:bob"));
        let (response, _) = send(&mut gate, request(&uri, &[])).await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(
            response.headers()[CREDENTIAL_HEADER],
            "link-required; provider=\"github\""
        );
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(body["error"], "mcpbox_link_required");
        assert_eq!(body["provider"], "github");
        assert_eq!(*needs.0.lock().unwrap(), ["github"]);
        assert!(!denied.load(Ordering::Relaxed));

        // A call for nobody (lists at load): 401, and no one to ask.
        let (mut gate, _, needs) = gate_for(&[upstream.port], Fake::bearer(), None);
        let (response, _) = send(&mut gate, request(&uri, &[])).await.unwrap();
        assert_eq!(response.status(), 401);
        assert!(needs.0.lock().unwrap().is_empty());

        // The provider is down: 503.
        let down = Arc::new(Fake {
            header: ("authorization", Some("Bearer")),
            other: || TokenLookup::Unavailable("the token endpoint answered 502".to_owned()),
        });
        let (mut gate, _, needs) = gate_for(&[upstream.port], down, Some("token:bob"));
        let (response, _) = send(&mut gate, request(&uri, &[])).await.unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(
            response.headers()[CREDENTIAL_HEADER],
            "unavailable; provider=\"github\""
        );
        assert!(needs.0.lock().unwrap().is_empty());
        assert!(upstream.heads().is_empty(), "nothing was sent");

        // A gate not yet bound to a call (no credentials) sends nothing either.
        let (gate, _, _) = gate_for(&[upstream.port], Fake::bearer(), Some("token:alice"));
        let mut gate = gate.with_credentials(
            Arc::from([CredentialGrant {
                host: HttpGrant {
                    host: "127.0.0.1".to_owned(),
                    port: Some(upstream.port),
                },
                provider: "github".to_owned(),
            }]),
            None,
        );
        let (response, _) = send(&mut gate, request(&uri, &[])).await.unwrap();
        assert_eq!(response.status(), 503);
        assert!(upstream.heads().is_empty(), "nothing was sent");
    }

    /// Everything the host logs (at every level, spans included) while a brokered request is
    /// sent, refused, and fails to connect holds no token.
    #[tokio::test]
    async fn the_token_reaches_no_log_line_and_no_error() {
        let written = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&written);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || Writer(Arc::clone(&sink)))
            .finish();
        keep_every_callsite_interested();
        let _default = tracing::subscriber::set_default(subscriber);

        let upstream = Upstream::start(Upstream::ok()).await;
        let uri = format!("http://127.0.0.1:{}/user", upstream.port);
        let (mut gate, _, _) = gate_for(&[upstream.port, 1], Fake::bearer(), Some("token:alice"));
        send(&mut gate, request(&uri, &[])).await.unwrap();
        assert!(upstream.heads()[0].contains(&TOKEN.to_ascii_lowercase()));
        let refused = send(&mut gate, request(&uri, &[("authorization", "x")])).await;
        assert!(refused.is_err());
        // Port 1 on loopback: nothing listens; the error the plugin gets names no token.
        let (mut gate, _, _) = gate_for(&[1], Fake::bearer(), Some("token:alice"));
        let failed = send(&mut gate, request("http://127.0.0.1:1/", &[])).await;
        let error = format!("{:?}", failed.err());
        assert!(
            error.contains("Connect") || error.contains("Refused"),
            "{error}"
        );
        assert!(!error.contains(TOKEN), "{error}");

        let logged = String::from_utf8_lossy(&written.lock().unwrap()).into_owned();
        assert!(
            logged.contains("attached the caller's credential"),
            "{logged}"
        );
        assert!(logged.contains("denied HTTP request"), "{logged}");
        assert!(!logged.contains(TOKEN), "{logged}");
        assert!(!logged.contains("s3cr3t"), "{logged}");
    }

    /// Tracing caches each callsite's interest for the whole process, from the dispatcher of
    /// the thread that reaches it first: another test's thread, with no subscriber, would
    /// cache "never" for a callsite this test captures, and the capture would miss its line
    /// (seen once in a full unit run under load). A global dispatcher interested in every
    /// callsite keeps them open; each thread's own subscriber still decides what it records,
    /// and this one records nothing.
    fn keep_every_callsite_interested() {
        struct Keeper;
        impl tracing::Subscriber for Keeper {
            fn register_callsite(
                &self,
                _: &'static tracing::Metadata<'static>,
            ) -> tracing::subscriber::Interest {
                tracing::subscriber::Interest::always()
            }
            fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
                false
            }
            fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
                tracing::span::Id::from_u64(1)
            }
            fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
            fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
            fn event(&self, _: &tracing::Event<'_>) {}
            fn enter(&self, _: &tracing::span::Id) {}
            fn exit(&self, _: &tracing::span::Id) {}
        }
        static KEEPER: std::sync::Once = std::sync::Once::new();
        KEEPER.call_once(|| {
            let _ = tracing::dispatcher::set_global_default(tracing::Dispatch::new(Keeper));
        });
    }

    struct Writer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[derive(Debug)]
    struct Only(&'static str);

    impl CredentialSource for Only {
        fn header(&self, _: &str) -> Option<(http::HeaderName, Option<String>)> {
            None
        }
        fn access_token<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = TokenLookup> + Send + 'a>> {
            Box::pin(async { TokenLookup::LinkNeeded })
        }
        fn has_provider(&self, provider: &str) -> bool {
            provider == self.0
        }
    }

    fn policy(providers: &[&str]) -> Policy {
        Policy {
            credentials: providers
                .iter()
                .map(|p| CredentialGrant {
                    host: HttpGrant {
                        host: format!("{p}.example.com"),
                        port: None,
                    },
                    provider: (*p).to_owned(),
                })
                .collect(),
            ..Policy::default()
        }
    }

    #[test]
    fn a_grant_naming_a_provider_not_configured_is_refused() {
        assert_eq!(check_credential_grants(&policy(&[]), None), Ok(()));
        assert_eq!(
            check_credential_grants(&policy(&["github"]), Some(&Only("github"))),
            Ok(())
        );
        assert_eq!(
            check_credential_grants(&policy(&["github", "gitlab"]), Some(&Only("github"))),
            Err(
                "its [http.credentials] names provider `gitlab` (for gitlab.example.com (ports \
                 80/443)), which the configuration does not define (add [providers.gitlab])"
                    .to_owned()
            )
        );
        assert_eq!(
            check_credential_grants(&policy(&["github"]), None),
            Err(
                "its [http.credentials] calls github.example.com (ports 80/443) as the caller \
                 through provider `github`, but no providers are configured (add \
                 [providers.github] to the configuration file)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_ready_token_is_never_shown() {
        let ready = TokenLookup::Ready(zeroize::Zeroizing::new("s3cr3t-token".to_owned()));
        assert_eq!(format!("{ready:?}"), "Ready(..)");
    }

    #[tokio::test]
    async fn synthetic_answers_name_the_provider() {
        let (response, _) = synthetic(Synthetic::LinkRequired, "github", "link it");
        assert_eq!(response.status(), 401);
        assert_eq!(
            response.headers()[CREDENTIAL_HEADER],
            "link-required; provider=\"github\""
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({"error": "mcpbox_link_required", "provider": "github", "message": "link it"})
        );
        let (response, _) = synthetic(Synthetic::Unavailable, "github", "later");
        assert_eq!(response.status(), 503);
        assert_eq!(
            response.headers()[CREDENTIAL_HEADER],
            "unavailable; provider=\"github\""
        );
    }
}
