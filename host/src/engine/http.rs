//! Outgoing HTTP for plugins (`wasi:http`), gated by the plugin's grants.
//!
//! `wasi:http` does not go through the WASI socket policy, so every check lives here, in the
//! send hook: the request's host and port must be granted, and a host granted by *name* must
//! not resolve to a loopback, private, link-local or otherwise internal address (a guard
//! against server-side request forgery and DNS rebinding). An address is only reachable when
//! the grant names it literally (`127.0.0.1:8080`, `localhost:3000`). A refused request is
//! `HttpRequestDenied` to the plugin and a warning in the log.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::policy::HttpGrant;
use crate::policy::PluginName;

/// The send hook for one call into one plugin.
pub struct HttpGate {
    plugin: PluginName,
    grants: Arc<[HttpGrant]>,
    denied: Arc<AtomicBool>,
    /// The span of the call (egress spans are its children in traces).
    call: tracing::Span,
}

impl HttpGate {
    /// A gate allowing exactly `grants`.
    /// `denied` is set when a request is refused.
    pub fn new(plugin: PluginName, grants: Arc<[HttpGrant]>, denied: Arc<AtomicBool>) -> Self {
        Self {
            plugin,
            grants,
            denied,
            call: tracing::Span::current(),
        }
    }
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> ResponseFuture {
        let plugin = self.plugin.clone();
        let grants = Arc::clone(&self.grants);
        let denied = Arc::clone(&self.denied);
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            parent: &self.call,
            "plugin.http",
            otel.name = %format_args!("{} {}", request.method(), request.uri().host().unwrap_or("")),
            http.request.method = %request.method(),
            server.address = request.uri().host().unwrap_or(""),
            mcpbox.plugin = &*self.plugin,
        );
        Box::new(tracing::Instrument::instrument(
            async move {
                match check(&grants, request.uri()).await {
                    Ok(()) => {}
                    Err(Refusal::Denied(why)) => {
                        denied.store(true, Ordering::Relaxed);
                        crate::metrics::metrics().denial(&plugin, crate::metrics::Grant::Http);
                        tracing::warn!(plugin = &*plugin, uri = %request.uri(), "denied HTTP request: {why}");
                        return Err(Error::HttpRequestDenied);
                    }
                    // Granted, but its name does not resolve: the plugin hears "could not
                    // resolve", not "not granted".
                    Err(Refusal::Unresolvable(why)) => {
                        tracing::info!(plugin = &*plugin, uri = %request.uri(), "HTTP request failed: {why}");
                        return Err(Error::DnsError {
                            rcode: Some(why),
                            info_code: None,
                        });
                    }
                }
                tracing::debug!(plugin = &*plugin, method = %request.method(), uri = %request.uri(), "HTTP request");
                let (response, io) =
                    wasmtime_wasi_http::default_send_request(request, options).await?;
                Ok((
                    response.map(BodyExt::boxed_unsync),
                    Box::new(io) as Box<dyn Future<Output = _> + Send>,
                ))
            },
            span,
        ))
    }
}

/// Why a request does not go out.
enum Refusal {
    /// Not granted (or granted by name but resolving to an internal address).
    Denied(String),
    /// Granted, but its host name does not resolve.
    Unresolvable(String),
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Self::Denied(why.to_owned())
    }
}

impl Refusal {
    #[cfg(test)]
    fn text(&self) -> &str {
        match self {
            Self::Denied(why) | Self::Unresolvable(why) => why,
        }
    }
}

/// Whether a request to `uri` is allowed by `grants`; the reason if not.
async fn check(grants: &[HttpGrant], uri: &http::Uri) -> Result<(), Refusal> {
    let host = uri
        .host()
        .ok_or("the URI has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let default_port = if uri.scheme() == Some(&http::uri::Scheme::HTTPS) {
        443
    } else {
        80
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let grant = grants
        .iter()
        .find(|g| g.allows(&host, port, default_port))
        .ok_or_else(|| Refusal::Denied(format!("{host}:{port} is not granted")))?;
    if grant.is_address_literal() {
        return Ok(());
    }
    let addresses = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| Refusal::Unresolvable(format!("cannot resolve {host}: {e}")))?;
    for address in addresses {
        if is_internal(address.ip()) {
            return Err(Refusal::Denied(format!(
                "{host} resolves to the internal address {}; grant that address explicitly to allow it",
                address.ip()
            )));
        }
    }
    Ok(())
}

/// Loopback, private, link-local, unspecified, multicast, shared or documentation ranges.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(list: &[(&str, Option<u16>)]) -> Vec<HttpGrant> {
        list.iter()
            .map(|(h, p)| HttpGrant {
                host: (*h).to_owned(),
                port: *p,
            })
            .collect()
    }

    #[tokio::test]
    async fn only_granted_hosts_and_ports_pass() {
        let g = grants(&[("127.0.0.1", Some(8080)), ("localhost", None)]);
        assert!(
            check(&g, &"http://127.0.0.1:8080/x".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, &"http://127.0.0.1:8081/x".parse().unwrap())
                .await
                .err()
                .is_some_and(|r| matches!(&r, Refusal::Denied(why) if why.contains("not granted")))
        );
        assert!(
            check(&g, &"http://10.0.0.1:8080/".parse().unwrap())
                .await
                .is_err()
        );
        assert!(
            check(&g, &"http://localhost/".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, &"https://localhost/".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, &"http://localhost:81/".parse().unwrap())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn names_resolving_to_internal_addresses_are_refused() {
        // `localhost.` resolves to loopback but is not the literal `localhost` grant.
        let g = grants(&[("ip6-localhost", None), ("localhost.localdomain", None)]);
        for uri in ["http://ip6-localhost/", "http://localhost.localdomain/"] {
            if let Err(refusal) = check(&g, &uri.parse().unwrap()).await {
                let why = refusal.text();
                assert!(
                    why.contains("internal address") || why.contains("cannot resolve"),
                    "{why}"
                );
            } else {
                panic!("{uri} was allowed");
            }
        }
    }

    #[tokio::test]
    async fn a_granted_name_that_does_not_resolve_is_not_called_ungranted() {
        let g = grants(&[("no-such-host.invalid", None)]);
        let refusal = check(&g, &"http://no-such-host.invalid/".parse().unwrap()).await;
        assert!(matches!(refusal, Err(Refusal::Unresolvable(_))));
    }

    #[test]
    fn internal_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
