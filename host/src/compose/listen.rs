//! Binding the listeners (`--http`, `--metrics-addr`, `--link-listen`: an address, a host
//! name or a bare port) and serving MCP over HTTP on one, with the parts each room gives it.

use super::*;

/// Bind the address of `flag` (`--http`, `--metrics-addr`): `host:port` (a host name is
/// resolved; `localhost:8080` binds loopback), `[v6]:port`, or a bare port on 127.0.0.1.
pub(super) async fn bind_tcp(
    address: &str,
    flag: &'static str,
) -> Result<tokio::net::TcpListener, HostError> {
    let target = match address.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => address.to_owned(),
    };
    if !target.contains(':') {
        return Err(HostError::Address {
            flag,
            address: address.to_owned(),
        });
    }
    let failed = |source| HostError::Bind {
        flag,
        address: address.to_owned(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(&target)
        .await
        .map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    tracing::info!(%bound, "{flag} port bound");
    Ok(listener)
}

/// Serve over HTTP on `listener` (bound by [`bind_tcp`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of the HTTP server, each from its own room; called once"
)]
pub(super) async fn serve_http(
    plugins: Arc<PluginSet>,
    listener: tokio::net::TcpListener,
    settings: &HttpSettings,
    session: Arc<crate::server::SessionSettings>,
    readiness: Arc<Readiness>,
    state: Arc<StateService>,
    credentials: Option<Arc<crate::credentials::Broker>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HostError> {
    let address = listener
        .local_addr()
        .map_err(|source| HostError::Transport {
            what: "cannot read the bound HTTP address",
            source,
        })?;
    let oauth = match &settings.oauth {
        Some(config) => {
            let verifier = crate::auth::Verifier::new(config.clone()).map_err(HostError::OAuth)?;
            let verifier = Arc::new(verifier);
            tracing::info!(
                issuer = config.issuer,
                resource = config.resource,
                scopes = %config.scopes.join(" "),
                "HTTP requests need OAuth access tokens from the issuer"
            );
            verifier.prefetch().await;
            Some(verifier)
        }
        None => None,
    };
    if !address.ip().is_loopback() && settings.tokens.is_empty() && oauth.is_none() {
        tracing::warn!(%address, "serving HTTP beyond loopback without --auth-token: anyone who can reach it can call every tool");
    }
    let page_state = Arc::clone(&state);
    let page_budgets = Arc::clone(&session.budgets);
    let config = HttpConfig {
        allowed_hosts: settings.allowed_hosts.clone(),
        allowed_origins: settings.allowed_origins.clone(),
        tokens: Arc::clone(&settings.tokens),
        max_body_bytes: settings.max_body_bytes,
        session_idle: settings.session_idle,
        session,
        readiness,
        state: Some(state),
        oauth,
        call_id_header: settings.call_id_header.clone(),
        credentials,
        status_page: settings.status_page.then(|| {
            let started = std::time::SystemTime::now();
            let plugins = Arc::clone(&plugins);
            http::StatusPage(Arc::new(move || {
                crate::catalog::status::render(
                    &plugins,
                    started,
                    &page_state,
                    &page_budgets.usage(),
                )
            }))
        }),
    };
    http::serve(plugins, listener, config, shutdown, Duration::from_secs(10))
        .await
        .map_err(|source| HostError::Transport {
            what: "HTTP transport failed",
            source,
        })?;
    tracing::info!("stopped");
    Ok(())
}
