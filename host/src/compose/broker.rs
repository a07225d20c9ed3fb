//! Building the credentials broker at start: its public URL (or a loopback listener of its
//! own over stdio, for the link routes), and its events written to the audit log.

use super::*;

/// Build the credentials broker: its public URL is `--public-url` (or the origin of
/// `--oauth-resource`), else the bound HTTP address if it is loopback; over stdio, the link
/// routes get a loopback listener of their own (`--link-listen`), bound and served here, whose
/// address is the redirect's unless `--public-url` says otherwise.
pub(super) async fn start_credentials(
    credentials: CredentialSettings,
    settings: &ServeSettings,
    http: Option<&tokio::net::TcpListener>,
    state: Arc<StateService>,
) -> Result<Arc<crate::credentials::Broker>, HostError> {
    let CredentialSettings {
        providers,
        cipher,
        public_url,
        link_listen,
        link_wait,
        ticket_ttl,
    } = credentials;
    let (public_url, stdio_listener) = match (http, public_url) {
        (Some(_), Some(url)) => (url, None),
        (Some(listener), None) => {
            let bound = listener
                .local_addr()
                .map_err(|source| HostError::Transport {
                    what: "cannot read the bound HTTP address",
                    source,
                })?;
            if !bound.ip().is_loopback() {
                return Err(HostError::Credentials(format!(
                    "give --public-url, where browsers reach this mcpbox (its /oauth/link/ \
                     routes): the bound address {bound} is not loopback"
                )));
            }
            (loopback_url(bound)?, None)
        }
        (None, public_url) => {
            let listener = bind_tcp(&link_listen, "--link-listen").await?;
            let bound = listener
                .local_addr()
                .map_err(|source| HostError::Transport {
                    what: "cannot read the bound --link-listen address",
                    source,
                })?;
            let url = match public_url {
                Some(url) => url,
                None => loopback_url(bound)?,
            };
            (url, Some(listener))
        }
    };
    let events: Arc<dyn crate::credentials::CredentialEvents> = match &settings.session.audit {
        Some(sink) => Arc::new(AuditedCredentials(Arc::clone(sink))),
        None => Arc::new(crate::credentials::LogOnly),
    };
    let names: Vec<String> = providers
        .iter()
        .map(|p| match p.exchange() {
            Some(_) => format!("{} (token exchange)", p.name),
            None => p.name.to_string(),
        })
        .collect();
    let broker = crate::credentials::Broker::new(
        providers,
        cipher,
        state,
        Arc::clone(&settings.runtime.secrets),
        crate::credentials::BrokerSettings {
            public_url,
            ticket_ttl,
            link_wait,
        },
        events,
    )
    .map_err(HostError::Credentials)?;
    let broker = Arc::new(broker);
    tracing::info!(
        providers = %names.join(", "),
        redirect_uri = %broker.redirect_uri(),
        "per-user credentials: callers link their accounts (tokens sealed in the state store) \
         or have their sign-in exchanged (tokens held in memory)"
    );
    if let Some(listener) = stdio_listener {
        let serving = Arc::clone(&broker);
        tokio::spawn(async move {
            if let Err(e) = http::serve_link_routes(listener, serving).await {
                tracing::error!("the --link-listen listener failed: {e}");
            }
        });
    }
    Ok(broker)
}

/// `http://ADDRESS/` for a bound loopback address.
pub(super) fn loopback_url(bound: std::net::SocketAddr) -> Result<url::Url, HostError> {
    url::Url::parse(&format!("http://{bound}/"))
        .map_err(|e| HostError::Credentials(format!("the bound address {bound}: {e}")))
}

/// Credential events as audit records: `credentials/link`, `credentials/link_failed`,
/// `credentials/refresh`, `credentials/refresh_failed`, `credentials/unlink`; the caller as
/// the principal, the provider as the item; never a value.
#[derive(Debug)]
pub(super) struct AuditedCredentials(pub(super) Arc<dyn crate::server::AuditSink>);

impl crate::credentials::CredentialEvents for AuditedCredentials {
    fn record(&self, event: crate::credentials::EventRecord) {
        self.0.record(crate::server::AuditRecord {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            principal: event.caller,
            client: None,
            method: event.event.method().to_owned(),
            plugin: event.plugin,
            item: Some(event.provider),
            outcome: if event.event.is_ok() { "ok" } else { "error" },
            code: None,
            duration_ms: 0.0,
            fuel: None,
            request_id: serde_json::Value::Null,
            trace_id: None,
            cut: std::collections::BTreeMap::new(),
        });
    }
}
