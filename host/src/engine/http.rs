//! Outgoing HTTP for plugins (`wasi:http`), gated by the plugin's grants.
//!
//! `wasi:http` does not go through the WASI socket policy, so every check lives here, in the
//! send hook. A request goes out when its host and port are granted (`[http] allow`) or, with
//! `[http] public = true`, when its host is on the public internet. A host granted by *name*
//! and a public host must not resolve to a loopback, private, link-local or otherwise
//! internal address (a guard against server-side request forgery), and the request then goes
//! to the very addresses that were checked ([`egress`](super::egress)), so a rebinding DNS
//! server cannot swap in another. An internal address is only reachable when the grant
//! names it literally (`127.0.0.1:8080`, `localhost:3000`). A plugin follows redirects itself,
//! each hop a request of its own through this gate. A refused request is `HttpRequestDenied`
//! to the plugin and a warning in the log.
//!
//! **Hosts called as the caller** (`[http.credentials]`): once a request to such a host has
//! passed the checks above, the gate attaches the caller's token from the host's provider
//! ([`super::credentials`]) as the provider's header, marked sensitive, and sends it. It is
//! refused (as ungranted requests are) when it is not HTTPS and the host is not a loopback
//! literal, or when the plugin set `Authorization` or the provider's header itself. When the
//! token cannot be had, nothing is sent and the plugin gets the host's own answer instead: 401
//! with `mcpbox-credential: link-required; provider="NAME"` when the caller must link an
//! account (the call's host is told, so the user can be asked), or when the call has no
//! caller; 503 with `mcpbox-credential: unavailable; …` when the provider cannot be reached
//! to refresh it. The token is attached per request, for that request's own host and port
//! only: a redirect the plugin follows elsewhere is another request, sent without it. What
//! the plugin reads back is the upstream's response; the token reaches no log line, span,
//! metric or error.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::credentials::{CallCredentials, Synthetic, TokenLookup, synthetic};
use super::egress::Sent;
use crate::policy::PluginName;
use crate::policy::{CredentialGrant, HttpGrant};

/// The send hook for one call into one plugin.
pub struct HttpGate {
    plugin: PluginName,
    grants: Arc<[HttpGrant]>,
    /// Whether the public internet is granted too.
    public: bool,
    denied: Arc<AtomicBool>,
    /// The span of the call (egress spans are its children in traces).
    call: tracing::Span,
    /// The granted hosts called as the caller, each with its provider.
    credential_grants: Arc<[CredentialGrant]>,
    /// The call's caller's tokens (`None`: no credential source, or not yet bound).
    credentials: Option<CallCredentials>,
}

impl HttpGate {
    /// A gate allowing exactly `grants`, and the public internet if `public`.
    /// `denied` is set when a request is refused.
    pub fn new(
        plugin: PluginName,
        grants: Arc<[HttpGrant]>,
        public: bool,
        denied: Arc<AtomicBool>,
    ) -> Self {
        Self {
            plugin,
            grants,
            public,
            denied,
            call: tracing::Span::current(),
            credential_grants: Arc::from([]),
            credentials: None,
        }
    }

    /// This gate, calling the hosts of `grants` as the caller, with the tokens of
    /// `credentials`.
    pub fn with_credentials(
        mut self,
        grants: Arc<[CredentialGrant]>,
        credentials: Option<CallCredentials>,
    ) -> Self {
        self.credential_grants = grants;
        self.credentials = credentials;
        self
    }

    /// Bind the gate to the call about to run (its span, its flag for refusals and its
    /// caller's credentials), when it was built ahead of the call.
    pub fn bind(&mut self, denied: Arc<AtomicBool>, credentials: Option<CallCredentials>) {
        self.denied = denied;
        self.credentials = credentials;
        self.call = tracing::Span::current();
    }

    /// Let go of the call's credentials once it has returned.
    pub fn detach(&mut self) {
        self.credentials = None;
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
        let public = self.public;
        let denied = Arc::clone(&self.denied);
        let brokered = provider_for(&self.credential_grants, request.uri())
            .map(|provider| (provider.to_owned(), self.credentials.clone()));
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
                let addresses = match check(&grants, public, request.uri()).await {
                    Ok(addresses) => addresses,
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
                };
                let mut request = request;
                if let Some((provider, credentials)) = brokered {
                    match as_the_caller(&provider, &mut request, credentials.as_ref()).await {
                        Brokered::Send => {}
                        Brokered::Answer(answer) => return Ok(answer),
                        Brokered::Denied(why) => {
                            denied.store(true, Ordering::Relaxed);
                            crate::metrics::metrics().denial(&plugin, crate::metrics::Grant::Http);
                            tracing::warn!(plugin = &*plugin, uri = %request.uri(), "denied HTTP request: {why}");
                            return Err(Error::HttpRequestDenied);
                        }
                    }
                }
                tracing::debug!(plugin = &*plugin, method = %request.method(), uri = %request.uri(), ?addresses, "HTTP request");
                super::egress::send(request, options, addresses).await
            },
            span,
        ))
    }
}

/// The provider of the credential grant for the host and port of `uri`, if that host is
/// called as the caller.
fn provider_for<'a>(grants: &'a [CredentialGrant], uri: &http::Uri) -> Option<&'a str> {
    if grants.is_empty() {
        return None;
    }
    let host = lower_host(uri)?;
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        Some("http") => 80,
        _ => return None,
    };
    let port = uri.port_u16().unwrap_or(default_port);
    grants
        .iter()
        .find(|g| g.host.allows(&host, port, default_port))
        .map(|g| g.provider.as_str())
}

/// The host of `uri`, lower-case, without an IPv6 literal's brackets.
fn lower_host(uri: &http::Uri) -> Option<String> {
    Some(
        uri.host()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

/// `localhost`, or a loopback address literal: the only hosts called as the caller without
/// TLS (for tests on one machine).
fn is_loopback_literal(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What becomes of a granted request to a host called as the caller.
pub(super) enum Brokered {
    /// Send it: the caller's token is attached.
    Send,
    /// Answer the plugin with this, sending nothing.
    Answer(Sent),
    /// Refuse it, for this reason.
    Denied(String),
}

/// Attach the caller's token from `provider` to `request`, or say why not.
pub(super) async fn as_the_caller(
    provider: &str,
    request: &mut http::Request<WasiBody>,
    credentials: Option<&CallCredentials>,
) -> Brokered {
    let host = lower_host(request.uri()).unwrap_or_default();
    if request.uri().scheme() != Some(&http::uri::Scheme::HTTPS) && !is_loopback_literal(&host) {
        return Brokered::Denied(format!(
            "{host} is called as the caller (provider `{provider}`) only over HTTPS"
        ));
    }
    let header = credentials.and_then(|c| c.source.header(provider));
    let headers = request.headers();
    let set = if headers.contains_key(http::header::AUTHORIZATION) {
        Some(http::header::AUTHORIZATION)
    } else {
        header
            .as_ref()
            .map(|(name, _)| name)
            .filter(|name| headers.contains_key(*name))
            .cloned()
    };
    if let Some(name) = set {
        return Brokered::Denied(format!(
            "the plugin set `{name}` for {host}, whose credential mcpbox holds and attaches \
             itself (provider `{provider}`)"
        ));
    }
    let (Some(credentials), Some((name, scheme))) = (credentials, header) else {
        return Brokered::Answer(synthetic(
            Synthetic::Unavailable,
            provider,
            &format!("provider `{provider}` is not configured in this mcpbox"),
        ));
    };
    let Some(caller) = credentials.caller.as_deref() else {
        return Brokered::Answer(synthetic(
            Synthetic::LinkRequired,
            provider,
            "this call is made for nobody (as when mcpbox reads a plugin's lists), so no \
             account can be used",
        ));
    };
    match credentials.source.access_token(caller, provider).await {
        TokenLookup::Ready(token) => {
            let value = match scheme.as_deref().filter(|s| !s.is_empty()) {
                Some(scheme) => zeroize::Zeroizing::new(format!("{scheme} {}", &*token)),
                None => token,
            };
            match http::HeaderValue::from_str(&value) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request.headers_mut().insert(name, value);
                    tracing::debug!(provider, "attached the caller's credential");
                    Brokered::Send
                }
                Err(_) => {
                    tracing::warn!(
                        provider,
                        "the provider's token cannot be sent in a header; nothing was sent"
                    );
                    Brokered::Answer(synthetic(
                        Synthetic::Unavailable,
                        provider,
                        "the provider's token for the caller cannot be sent",
                    ))
                }
            }
        }
        TokenLookup::LinkNeeded => {
            credentials.reach.credential_needed(provider);
            Brokered::Answer(synthetic(
                Synthetic::LinkRequired,
                provider,
                &format!(
                    "the caller has not linked an account with `{provider}` (or the link no \
                     longer works); mcpbox asks them to, and runs the call again once they have"
                ),
            ))
        }
        TokenLookup::Unavailable(why) => {
            tracing::info!(
                provider,
                "the caller's credential is unavailable; nothing was sent: {why}"
            );
            Brokered::Answer(synthetic(
                Synthetic::Unavailable,
                provider,
                &format!("the caller's credential for `{provider}` cannot be had just now: {why}"),
            ))
        }
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

/// Where a request to `uri` may connect, under `grants` and, if `public`, the public
/// internet; the reason if nowhere.
async fn check(
    grants: &[HttpGrant],
    public: bool,
    uri: &http::Uri,
) -> Result<Vec<SocketAddr>, Refusal> {
    let host = uri
        .host()
        .ok_or("the URI has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        Some("http") => 80,
        other => {
            return Err(Refusal::Denied(format!(
                "the scheme {} is not HTTP",
                other.unwrap_or("(none)")
            )));
        }
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let grant = grants.iter().find(|g| g.allows(&host, port, default_port));
    if grant.is_none() && !public {
        return Err(Refusal::Denied(format!("{host}:{port} is not granted")));
    }
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| Refusal::Unresolvable(format!("cannot resolve {host}: {e}")))?
        .collect();
    if addresses.is_empty() {
        return Err(Refusal::Unresolvable(format!("{host} has no address")));
    }
    // An address (or `localhost`) named by the grant is reachable whatever it is.
    if grant.is_some_and(HttpGrant::is_address_literal) {
        return Ok(addresses);
    }
    if let Some(internal) = addresses.iter().find(|a| is_internal(a.ip())) {
        let why = match grant {
            Some(_) => format!(
                "{host} resolves to the internal address {}; grant that address explicitly to allow it",
                internal.ip()
            ),
            None => format!(
                "{host} resolves to {}, which is not a public address (only the public internet is granted; grant an internal address explicitly in [http] allow)",
                internal.ip()
            ),
        };
        return Err(Refusal::Denied(why));
    }
    Ok(addresses)
}

/// The globally reachable assignments inside 2001::/23 (IANA's special-purpose registry):
/// 2001:1::1, 2001:1::2, 2001:3::/32, 2001:4:112::/48, 2001:20::/28 and 2001:30::/28.
fn ietf_public(s: [u16; 8]) -> bool {
    (s[1] == 1 && s[2..7] == [0; 5] && (s[7] == 1 || s[7] == 2))
        || s[1] == 3
        || (s[1] == 4 && s[2] == 0x112)
        || (0x20..0x40).contains(&s[1])
}

/// Not a public destination: loopback, private, link-local (cloud metadata), shared,
/// unspecified, broadcast, multicast, documentation, benchmarking, reserved and other
/// special-purpose ranges (IANA's registries); an IPv4-mapped or NAT64 (`64:ff9b::/96`)
/// address is judged by the IPv4 address it carries.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            // Anycast services inside 192.0.0.0/24 that are public.
            if [a, b, c] == [192, 0, 0] && (d == 9 || d == 10) {
                return false;
            }
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || [a, b, c] == [192, 0, 0]
                || [a, b, c] == [192, 88, 99]
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let s = v6.segments();
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [.., hi, lo] = s;
                let v4 = std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
                return is_internal(IpAddr::V4(v4));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                // 64:ff9b:1::/48 (local NAT64), 100::/64 (discard), 2001:db8::/32
                // (documentation), 2002::/16 (6to4), 2001::/23 (IETF protocol assignments).
                || s[..3] == [0x64, 0xff9b, 1]
                || s[..4] == [0x100, 0, 0, 0]
                || s[..2] == [0x2001, 0xdb8]
                || s[0] == 0x2002
                || (s[0] == 0x2001 && s[1] < 0x200 && !ietf_public(s))
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
            check(&g, false, &"http://127.0.0.1:8080/x".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, false, &"http://127.0.0.1:8081/x".parse().unwrap())
                .await
                .err()
                .is_some_and(|r| matches!(&r, Refusal::Denied(why) if why.contains("not granted")))
        );
        assert!(
            check(&g, false, &"http://10.0.0.1:8080/".parse().unwrap())
                .await
                .is_err()
        );
        assert!(
            check(&g, false, &"http://localhost/".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, false, &"https://localhost/".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, false, &"http://localhost:81/".parse().unwrap())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn names_resolving_to_internal_addresses_are_refused() {
        // Granted names (not the literal `localhost`) that resolve to an internal address
        // on this machine: its own host name (loopback or a private address almost
        // everywhere) and Debian's loopback aliases. Only the ones that resolve are checked,
        // and at least one must, or the test would pass without checking anything.
        let own = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let mut checked = Vec::new();
        for name in [own.trim(), "ip6-localhost", "localhost.localdomain"] {
            let internal = tokio::net::lookup_host((name, 80))
                .await
                .ok()
                .and_then(|mut addresses| addresses.find(|a| is_internal(a.ip())));
            let Some(internal) = internal else { continue };
            let g = grants(&[(name, None)]);
            let refusal = check(&g, false, &format!("http://{name}/").parse().unwrap()).await;
            let Err(Refusal::Denied(why)) = refusal else {
                panic!("{name} ({internal}) was not refused as internal");
            };
            assert!(
                why.contains(&format!(
                    "resolves to the internal address {}",
                    internal.ip()
                )),
                "{why}"
            );
            checked.push(name.to_owned());
        }
        assert!(
            !checked.is_empty(),
            "no name on this machine resolves to an internal address"
        );
    }

    #[tokio::test]
    async fn a_granted_name_that_does_not_resolve_is_not_called_ungranted() {
        let g = grants(&[("no-such-host.invalid", None)]);
        let refusal = check(&g, false, &"http://no-such-host.invalid/".parse().unwrap()).await;
        assert!(matches!(refusal, Err(Refusal::Unresolvable(_))));
    }

    #[tokio::test]
    async fn the_public_internet_is_public_addresses_only() {
        let none = grants(&[]);
        // A public address literal is allowed, and is where the request goes.
        let to = check(&none, true, &"http://8.8.8.8/x".parse().unwrap()).await;
        assert_eq!(to.ok(), Some(vec!["8.8.8.8:80".parse().unwrap()]));
        // Internal addresses, by literal or by name, are not the public internet.
        for uri in [
            "http://127.0.0.1:8080/",
            "https://10.1.2.3/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://localhost/",
        ] {
            let refusal = check(&none, true, &uri.parse().unwrap()).await;
            assert!(
                refusal
                    .as_ref()
                    .err()
                    .is_some_and(|r| r.text().contains("not a public address")),
                "{uri}: {:?}",
                refusal.map_err(|r| r.text().to_owned())
            );
        }
        // Only HTTP.
        assert!(
            check(&none, true, &"ftp://8.8.8.8/".parse().unwrap())
                .await
                .is_err()
        );
        // Without the public grant, nothing but the granted.
        assert!(
            check(&none, false, &"http://8.8.8.8/".parse().unwrap())
                .await
                .is_err()
        );
        // An internal address named in `allow` is reachable beside the public internet.
        let g = grants(&[("127.0.0.1", Some(8080))]);
        assert!(
            check(&g, true, &"http://127.0.0.1:8080/".parse().unwrap())
                .await
                .is_ok()
        );
        assert!(
            check(&g, true, &"http://127.0.0.1:8081/".parse().unwrap())
                .await
                .is_err()
        );
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
            "192.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2001:db8::1",
            "2002::1",
            "2001::1",
            "100::1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "192.0.0.9",
            "64:ff9b::808:808",
            "2001:4860:4860::8888",
            "2001:20::1",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
