//! The gate in front of every MCP route, the metrics and the status page, applied as a layer
//! over the router of those routes ([`admit`]), so a handler placed there cannot be reached
//! without passing it. In this order: the headers that decide the call appear once, and the
//! `Mcp-Param-*` headers at most [`v2026::MAX_PARAM_HEADERS`] of them, each once, all UTF-8
//! like the other mirror headers (400 with -32020), `Host` and `Origin` name this server or
//! an allowed one (403, DNS rebinding), the static bearer token matches (401 with
//! `WWW-Authenticate`), and with OAuth the JWT is valid (401, or 503 when the issuer's keys
//! cannot be fetched; a valid one is handed to the credentials broker, when a provider
//! exchanges callers' sign-in tokens). A refused POST's body is read and thrown away (holding nothing), so the
//! client reads the refusal; an admitted one's is read by [`super::budget`], inside the gate,
//! charged to its caller. Who is calling travels to the handler as [`Admitted`] (an OAuth
//! token's subject, a static token's name, or the local user); the session checks that
//! caller's scopes against the plugin each request reaches, and the handler answers a refusal
//! with [`App::scope_refusal`] (403 `insufficient_scope`).
//!
//! It knows nothing of sessions or plugins.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::budget::discard_stream;
use super::reply::{Refused, plain, rpc_error, too_many};
use super::{App, SESSION_HEADER, Shared, VERSION_HEADER};
use crate::auth::AuthError;
use crate::principal::Principal;
use crate::protocol::v2026;
use crate::server::{Backend, Refusal};

/// What the gate learned of a request it let through: who is calling. Taken by the handlers
/// behind the gate; reached without passing it (a route placed outside the gated router by
/// mistake), it refuses (500) rather than serve.
#[derive(Debug, Clone)]
pub(super) struct Admitted {
    /// The caller: an OAuth token's subject, a static token's name, or (with neither
    /// configured) the local user.
    pub(super) caller: Principal,
}

impl<S: Send + Sync> FromRequestParts<S> for Admitted {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        parts.extensions.remove::<Self>().ok_or_else(|| {
            tracing::error!(
                path = parts.uri.path(),
                "a gated handler was reached without the gate"
            );
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the request bypassed the gate\n",
            )
        })
    }
}

/// The gate as a middleware (`route_layer` over the gated routes): a refused request gets
/// its refusal; a passed one reaches its handler with [`Admitted`] in its extensions.
pub(super) async fn admit<B: Backend>(
    State(app): Shared<B>,
    mut request: Request,
    next: Next,
) -> Response {
    match app.check(request.headers()).await {
        Ok(caller) => {
            // The body is not read yet: `budget` reads it, charging its bytes to this caller.
            request.extensions_mut().insert(Admitted { caller });
            next.run(request).await
        }
        Err(refused) => {
            // Read and thrown away, so that a client still sending reads the refusal.
            if request.method() == http::Method::POST {
                discard_stream(
                    request.into_body().into_data_stream(),
                    app.config.max_body_bytes,
                );
            }
            *refused
        }
    }
}

impl<B: Backend> App<B> {
    /// The gate every gated request passes: headers that decide the call appear once; Host,
    /// Origin, and the bearer token (a static one, or with OAuth a JWT). Returns the caller.
    async fn check(&self, headers: &HeaderMap) -> Result<Principal, Refused> {
        single_headers(headers)?;
        self.check_origin(headers)?;
        if let Some(caller) = self.check_token(headers)? {
            return Ok(caller);
        }
        let Some(verifier) = &self.config.oauth else {
            return Ok(Principal::local());
        };
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match verifier.verify_token(authorization).await {
            Ok(verified) => {
                // A provider may exchange it for a token of its own (RFC 8693).
                if let Some(broker) = &self.config.credentials {
                    broker.remember_subject(
                        verified.caller.key(),
                        verified.token,
                        verified.expires_at_ms,
                    );
                }
                Ok(verified.caller)
            }
            Err(error) => Err(Box::new(oauth_refusal(verifier, &error))),
        }
    }

    /// The answer to a request the session refused before it ran: 403 for lack of scopes,
    /// 429 over a budget.
    pub(super) fn refusal(&self, refusal: Refusal) -> Response {
        match refusal {
            Refusal::Forbidden(missing) => self.scope_refusal(missing),
            Refusal::OverBudget { reply, retry_after } => too_many(reply, retry_after),
        }
    }

    /// 403 `insufficient_scope` naming the `missing` scopes (with OAuth, pointing at the
    /// resource metadata, so a client can step up).
    pub(super) fn scope_refusal(&self, missing: Vec<String>) -> Response {
        match &self.config.oauth {
            Some(verifier) => oauth_refusal(verifier, &AuthError::InsufficientScope(missing)),
            None => {
                let mut response = plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: the token does not grant the scopes this needs",
                );
                let scopes: String = missing
                    .join(" ")
                    .chars()
                    .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' || *c == ' ')
                    .take(300)
                    .collect();
                if let Ok(value) = HeaderValue::from_str(&format!(
                    "Bearer realm=\"mcpbox\", error=\"insufficient_scope\", scope=\"{scopes}\""
                )) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                response
            }
        }
    }

    /// Host and Origin.
    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refused> {
        if let Some(host) = headers.get(header::HOST) {
            let host = host.to_str().unwrap_or("");
            if !self.allowed_authority(host) {
                tracing::warn!(host, "refused a request for another host (DNS rebinding?)");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: Host does not name this server",
                )));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let authority = origin
                .split_once("://")
                .map(|(_, rest)| rest.trim_end_matches('/'));
            // `null` (sandboxed pages, file URLs) never names this server.
            let allowed = authority.is_some_and(|a| self.allowed_authority(a))
                || self
                    .config
                    .allowed_origins
                    .iter()
                    .any(|o| o.eq_ignore_ascii_case(origin.trim_end_matches('/')));
            if !allowed {
                tracing::warn!(
                    origin,
                    "refused a request from another origin (allow it with --allowed-origin)"
                );
                let shown: String = origin
                    .chars()
                    .take(200)
                    .filter(|c| !c.is_control())
                    .collect();
                return Err(Box::new(
                    (
                        StatusCode::FORBIDDEN,
                        format!(
                            "forbidden: Origin {shown} is not allowed; to allow a browser client \
                             from it, start mcpbox with --allowed-origin {shown}"
                        ),
                    )
                        .into_response(),
                ));
            }
        }
        Ok(())
    }

    /// With static tokens configured: the one the request carries, and the caller it names
    /// (401 with `WWW-Authenticate` if none matches). Without: `None`.
    fn check_token(&self, headers: &HeaderMap) -> Result<Option<Principal>, Refused> {
        if self.config.tokens.is_empty() {
            return Ok(None);
        }
        let holder = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|token| self.config.tokens.holder(token));
        match holder {
            Some(caller) => Ok(Some(caller)),
            None => {
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized: a valid bearer token is required",
                );
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="mcpbox""#),
                );
                Err(Box::new(response))
            }
        }
    }

    /// Whether `authority` (`host[:port]`) names this server: the bound address (or, on
    /// loopback, `localhost`) with the bound port, or an `--allowed-host` with any port (a
    /// load balancer in front listens on its own port).
    pub(super) fn allowed_authority(&self, authority: &str) -> bool {
        let (host, port) = split_authority(authority);
        if self
            .config
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
        {
            return true;
        }
        if port.is_some_and(|p| p != self.bound.port()) {
            return false;
        }
        let bound_ip = self.bound.ip();
        let loopback_names = ["localhost", "127.0.0.1", "::1"];
        (bound_ip.is_loopback() && loopback_names.iter().any(|n| n.eq_ignore_ascii_case(host)))
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip == bound_ip)
    }
}

fn split_authority(authority: &str) -> (&str, Option<u16>) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, rest) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, rest.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, port.parse().ok().or(Some(0))),
        _ => (authority, None),
    }
}

/// Headers that must appear at most once: what they say decides which call runs, so two
/// values could let a proxy act on one while this server runs the other.
const SINGLE_HEADERS: [HeaderName; 5] = [
    HeaderName::from_static(VERSION_HEADER),
    HeaderName::from_static("mcp-method"),
    HeaderName::from_static("mcp-name"),
    HeaderName::from_static(SESSION_HEADER),
    header::AUTHORIZATION,
];

/// The headers a 2026-07-28 request mirrors its body into, besides `Mcp-Param-*`: compared
/// with the body as text, so a value that is not UTF-8 is refused, never read lossily (a
/// byte that is not UTF-8 would read as U+FFFD and match a body holding one).
const MIRROR_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static(VERSION_HEADER),
    HeaderName::from_static("mcp-method"),
    HeaderName::from_static("mcp-name"),
];

/// 400 (-32020) when a header of [`SINGLE_HEADERS`] appears more than once, when a request
/// carries more than [`v2026::MAX_PARAM_HEADERS`] `Mcp-Param-*` headers (every one is read,
/// so none can be pushed out of view) or repeats one, or when a mirror header's value is not
/// UTF-8.
fn single_headers(headers: &HeaderMap) -> Result<(), Refused> {
    let is_param = |name: &&HeaderName| name.as_str().starts_with(v2026::PARAM_HEADER_PREFIX);
    let count = headers.keys().filter(is_param).count();
    if count > v2026::MAX_PARAM_HEADERS {
        tracing::debug!(count, "refused a request with too many Mcp-Param headers");
        return Err(header_refusal(&format!(
            "the request carries {count} Mcp-Param-* headers; at most {} are read",
            v2026::MAX_PARAM_HEADERS
        )));
    }
    for name in SINGLE_HEADERS.iter().chain(headers.keys().filter(is_param)) {
        let count = headers.get_all(name).iter().count();
        if count > 1 {
            let name = name.as_str();
            tracing::debug!(header = name, count, "refused a request repeating a header");
            return Err(header_refusal(&format!(
                "the {name} header appears {count} times; send it once"
            )));
        }
    }
    for name in MIRROR_HEADERS.iter().chain(headers.keys().filter(is_param)) {
        if let Some(value) = headers.get(name)
            && std::str::from_utf8(value.as_bytes()).is_err()
        {
            let name = name.as_str();
            tracing::debug!(
                header = name,
                "refused a request with a header that is not UTF-8"
            );
            return Err(header_refusal(&format!(
                "the {name} header's value is not UTF-8 (send other text as =?base64?…?=)"
            )));
        }
    }
    Ok(())
}

/// 400 with -32020 and `message`.
fn header_refusal(message: &str) -> Refused {
    Box::new(rpc_error(
        StatusCode::BAD_REQUEST,
        v2026::HEADER_MISMATCH,
        message,
    ))
}

/// The answer to a request OAuth refuses: 401 (no token, or an invalid one) or 403 (missing
/// scopes) with `WWW-Authenticate` pointing at the resource metadata (RFC 6750, RFC 9728), or
/// 503 when the issuer's keys cannot be fetched.
fn oauth_refusal(verifier: &crate::auth::Verifier, error: &AuthError) -> Response {
    let metadata = metadata_url(&verifier.config().resource);
    let quoted = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                    c
                } else {
                    '\''
                }
            })
            .take(300)
            .collect()
    };
    let (status, challenge) = match error {
        AuthError::Missing => {
            let scopes = &verifier.config().scopes;
            let scope = if scopes.is_empty() {
                String::new()
            } else {
                format!(", scope=\"{}\"", quoted(&scopes.join(" ")))
            };
            (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\"{scope}"),
            )
        }
        AuthError::Invalid(why) => (
            StatusCode::UNAUTHORIZED,
            format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(why)
            ),
        ),
        AuthError::InsufficientScope(scopes) => (
            StatusCode::FORBIDDEN,
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(&scopes.join(" "))
            ),
        ),
        AuthError::Unavailable(why) => {
            tracing::warn!("refused a request: {why}");
            return (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response();
        }
    };
    let mut response = (status, format!("{error}\n")).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Where the Protected Resource Metadata of `resource` is (RFC 9728 §3.1: the well-known
/// path inserted between the origin and the resource's path).
fn metadata_url(resource: &str) -> String {
    let resource = resource.trim_end_matches('/');
    let split = resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j));
    match split {
        Some(at) => format!(
            "{}/.well-known/oauth-protected-resource{}",
            &resource[..at],
            &resource[at..]
        ),
        None => format!("{resource}/.well-known/oauth-protected-resource"),
    }
}
