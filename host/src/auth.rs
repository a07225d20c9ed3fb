//! OAuth 2.1 for the HTTP transport, as a resource server (MCP authorization): the Protected
//! Resource Metadata of RFC 9728, and access tokens validated as JWTs against the
//! authorization server's published keys (JWKS).
//!
//! A token must be signed with an asymmetric algorithm by a key in the issuer's JWKS (fetched
//! from its metadata or `--oauth-jwks-url`, cached, and fetched again when a token names a key
//! it does not hold, at most once a second: later unknown keys wait for the next fetch), name
//! the configured issuer, name this server's canonical URI in its audience (RFC 8707), and be
//! within its `exp` and `nbf` (60 s of clock leeway). Its scopes (`scope`, space-separated, or
//! `scp`) must include the server's required scopes. The token is only read here: it is never
//! handed to plugins, logged, or sent on.
//!
//! A valid token names its caller (a `principal`): the issuer and subject, the client it was
//! issued to, and its scopes. The transport asks [`Verifier::verify`] and maps the
//! [`AuthError`] to 401 or 403 with `WWW-Authenticate`.
//!
//! Uses: `principal`, `tls`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::principal::Principal;

/// The least time between two fetches of the JWKS (unknown key ids wait for the next one).
const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long a fetch from the authorization server may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 60;

/// How OAuth is set up.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier (`iss`).
    pub issuer: String,
    /// This server's canonical URI (`https://mcp.example.com/mcp`): the audience tokens must
    /// name, and the `resource` of its metadata.
    pub resource: String,
    /// Where the issuer's keys are [default: `jwks_uri` from its metadata].
    pub jwks_url: Option<String>,
    /// Scopes every request's token must carry.
    pub scopes: Vec<String>,
    /// Scopes plugins require (advertised in the metadata besides `scopes`).
    pub plugin_scopes: Vec<String>,
}

/// Why a request was not let in.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No bearer token.
    #[error("a bearer token is required")]
    Missing,
    /// The token is not valid (malformed, badly signed, expired, for another audience or
    /// issuer, signed by an unknown key).
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The token is valid but lacks scopes.
    #[error("insufficient scope: this needs {}", .0.join(" "))]
    InsufficientScope(Vec<String>),
    /// The authorization server's keys could not be fetched.
    #[error("cannot check the token: {0}")]
    Unavailable(String),
}

#[derive(Debug, Deserialize)]
struct Claims {
    /// When the token expires (seconds since the epoch; required, so always there).
    #[serde(default)]
    exp: u64,
    sub: Option<String>,
    scope: Option<String>,
    scp: Option<Vec<String>>,
    /// The client the token was issued to (RFC 9068), or its authorized party (OIDC).
    client_id: Option<String>,
    azp: Option<String>,
    /// A name to show (OIDC), else the user's handle: given to plugins that ask who calls.
    name: Option<String>,
    preferred_username: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ServerMetadata {
    issuer: Option<String>,
    jwks_uri: String,
}

/// A token [`Verifier::verify_token`] accepted.
pub struct Verified<'a> {
    /// Who presented it.
    pub caller: Principal,
    /// The token itself (for the credentials broker only; never logged).
    pub token: &'a str,
    /// When it expires, in milliseconds since the epoch.
    pub expires_at_ms: u64,
}

impl std::fmt::Debug for Verified<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified")
            .field("caller", &self.caller.key())
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// Checks access tokens; cheap to share.
pub struct Verifier {
    config: OAuthConfig,
    http: reqwest::Client,
    keys: Mutex<Keys>,
    /// One fetch of the JWKS at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.config.issuer)
            .field("resource", &self.config.resource)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Keys {
    set: Option<Arc<JwkSet>>,
    jwks_url: Option<String>,
    fetched: Option<Instant>,
}

impl Verifier {
    /// A verifier for `config`; fails if a URL in it is unusable.
    pub fn new(config: OAuthConfig) -> Result<Self, String> {
        for (what, url) in [
            ("--oauth-issuer", Some(&config.issuer)),
            ("--oauth-resource", Some(&config.resource)),
            ("--oauth-jwks-url", config.jwks_url.as_ref()),
        ] {
            if let Some(url) = url {
                check_url(what, url)?;
            }
        }
        let tls =
            crate::tls::client_config().ok_or("cannot set up TLS: no safe protocol version")?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        let keys = Keys {
            jwks_url: config.jwks_url.clone(),
            ..Keys::default()
        };
        Ok(Self {
            config,
            http,
            keys: Mutex::new(keys),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The Protected Resource Metadata document (RFC 9728).
    pub fn metadata(&self) -> serde_json::Value {
        let scopes: BTreeSet<&String> = self
            .config
            .scopes
            .iter()
            .chain(&self.config.plugin_scopes)
            .collect();
        serde_json::json!({
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcpbox",
        })
    }

    /// Fetch the keys now (at startup: a problem is logged early, and the first request does
    /// not wait).
    pub async fn prefetch(&self) {
        match self.refresh(None).await {
            Ok(()) => {
                tracing::info!(issuer = %self.config.issuer, "fetched the authorization server's keys")
            }
            Err(e) => {
                tracing::warn!(issuer = %self.config.issuer, "cannot fetch the authorization server's keys yet: {e}")
            }
        }
    }

    /// Check the `Authorization` header's bearer token; the caller it names, with the scopes
    /// it grants.
    pub async fn verify(&self, authorization: Option<&str>) -> Result<Principal, AuthError> {
        self.verify_token(authorization)
            .await
            .map(|verified| verified.caller)
    }

    /// [`Self::verify`], also giving the token and when it expires (for the credentials broker,
    /// which may exchange it at a downstream provider: RFC 8693).
    pub async fn verify_token<'a>(
        &self,
        authorization: Option<&'a str>,
    ) -> Result<Verified<'a>, AuthError> {
        let token = authorization
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Missing)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError::Invalid(format!("not a JWT: {e}")))?;
        if matches!(header.alg.family(), jsonwebtoken::AlgorithmFamily::Hmac) {
            return Err(AuthError::Invalid(format!(
                "{:?} (a shared secret) is not accepted: tokens must be signed with the issuer's public keys",
                header.alg
            )));
        }
        let kid = header.kid.clone();
        let key = match self.key(kid.as_deref(), header.alg) {
            Some(key) => key,
            None => {
                // A key we do not hold: the issuer may have rotated its keys.
                self.refresh(kid.as_deref()).await?;
                self.key(kid.as_deref(), header.alg).ok_or_else(|| {
                    AuthError::Invalid(match &kid {
                        Some(kid) => {
                            format!("signed by key `{kid}`, which the issuer does not publish")
                        }
                        None => "no key of the issuer fits it".to_owned(),
                    })
                })?
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| AuthError::Invalid(describe(&e, &self.config)))?;
        let mut scopes: BTreeSet<String> = data
            .claims
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        scopes.extend(data.claims.scp.unwrap_or_default());
        let caller = Principal::oauth(
            &self.config.issuer,
            data.claims.sub,
            data.claims.client_id.or(data.claims.azp),
            scopes,
        )
        .named(data.claims.name.or(data.claims.preferred_username));
        let missing = caller.missing(&self.config.scopes);
        if !missing.is_empty() {
            return Err(AuthError::InsufficientScope(
                missing.into_iter().map(str::to_owned).collect(),
            ));
        }
        Ok(Verified {
            caller,
            token,
            expires_at_ms: data.claims.exp.saturating_mul(1000),
        })
    }

    /// The cached key for `kid` usable with `alg`.
    fn key(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let set = self
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set
            .clone()?;
        let fits = |jwk: &&jsonwebtoken::jwk::Jwk| {
            jwk.common
                .key_algorithm
                .is_none_or(|a| format!("{a:?}") == format!("{alg:?}"))
        };
        let jwk = match kid {
            Some(kid) => set.find(kid).filter(fits)?,
            // No `kid`: only an issuer with a single key is unambiguous.
            None if set.keys.len() == 1 => set.keys.first().filter(fits)?,
            None => return None,
        };
        DecodingKey::from_jwk(jwk).ok()
    }

    /// Fetch the JWKS again (for `kid`, unless a fetch since the last one brought it, or one
    /// was too recent).
    async fn refresh(&self, kid: Option<&str>) -> Result<(), AuthError> {
        let _one = self.fetching.lock().await;
        let held = |keys: &Keys| {
            kid.is_some_and(|kid| keys.set.as_ref().is_some_and(|s| s.find(kid).is_some()))
        };
        let (url, wait) = {
            let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            if held(&keys) {
                return Ok(());
            }
            (
                keys.jwks_url.clone(),
                keys.fetched
                    .map(|at| REFRESH_INTERVAL.saturating_sub(at.elapsed())),
            )
        };
        // At most one fetch a second, however many unknown key ids arrive: a later one waits
        // its turn (behind the lock above) rather than being refused, so a key rotated in just
        // after a fetch is still found.
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            tokio::time::sleep(wait).await;
            if held(&self.keys.lock().unwrap_or_else(PoisonError::into_inner)) {
                return Ok(());
            }
        }
        let url = match url {
            Some(url) => url,
            None => self.discover_jwks_url().await?,
        };
        let set: JwkSet = self
            .get_json(&url)
            .await
            .map_err(|e| AuthError::Unavailable(format!("cannot fetch the keys at {url}: {e}")))?;
        tracing::debug!(%url, keys = set.keys.len(), "fetched the authorization server's keys");
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.set = Some(Arc::new(set));
        keys.jwks_url = Some(url);
        keys.fetched = Some(Instant::now());
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its authorization server metadata (RFC 8414) or, failing
    /// that, its OpenID configuration.
    async fn discover_jwks_url(&self) -> Result<String, AuthError> {
        let issuer = self.config.issuer.trim_end_matches('/');
        let (origin, path) = match issuer
            .find("://")
            .and_then(|i| issuer[i + 3..].find('/').map(|j| i + 3 + j))
        {
            Some(split) => (&issuer[..split], &issuer[split..]),
            None => (issuer, ""),
        };
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut problems = Vec::new();
        for url in candidates {
            match self.get_json::<ServerMetadata>(&url).await {
                Ok(metadata) => {
                    if let Some(named) = &metadata.issuer
                        && named.trim_end_matches('/') != issuer
                    {
                        return Err(AuthError::Unavailable(format!(
                            "the metadata at {url} names issuer {named}, not {issuer}"
                        )));
                    }
                    check_url("the issuer's jwks_uri", &metadata.jwks_uri)
                        .map_err(AuthError::Unavailable)?;
                    return Ok(metadata.jwks_uri);
                }
                Err(e) => problems.push(format!("{url}: {e}")),
            }
        }
        Err(AuthError::Unavailable(format!(
            "cannot find the issuer's keys ({})",
            problems.join("; ")
        )))
    }
}

impl Verifier {
    /// GET `url` and read its body (at most 1 MiB) as JSON.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        const LIMIT: usize = 1 << 20;
        let mut response = self
            .http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("{e:#}"))?;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{e:#}"))? {
            if body.len() + chunk.len() > LIMIT {
                return Err(format!("the body is larger than {} KiB", LIMIT >> 10));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("not the expected JSON: {e}"))
    }
}

/// A URL the server may use: HTTPS, or plain HTTP on loopback (a local test server).
fn check_url(what: &str, url: &str) -> Result<(), String> {
    let parsed: url::Url = url
        .parse()
        .map_err(|e| format!("{what} `{url}` is not a URL: {e}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "{what} `{url}` must be https (plain http is accepted only on loopback)"
        )),
    }
}

/// A token's failure in words, without echoing the token.
fn describe(error: &jsonwebtoken::errors::Error, config: &OAuthConfig) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "it has expired".to_owned(),
        ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => format!("its audience is not {}", config.resource),
        ErrorKind::InvalidIssuer => format!("its issuer is not {}", config.issuer),
        ErrorKind::InvalidSignature => "its signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "its algorithm does not match the key".to_owned(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_urls_are_accepted() {
        assert!(check_url("x", "https://auth.example.com").is_ok());
        assert!(check_url("x", "http://127.0.0.1:8080").is_ok());
        assert!(check_url("x", "http://localhost/").is_ok());
        assert!(check_url("x", "http://[::1]:9/").is_ok());
        assert!(check_url("x", "http://auth.example.com").is_err());
        assert!(check_url("x", "ftp://127.0.0.1").is_err());
        assert!(check_url("x", "not a url").is_err());
    }

    #[tokio::test]
    async fn a_missing_or_malformed_or_hmac_token_is_refused_without_fetching() {
        let verifier = Verifier::new(OAuthConfig {
            issuer: "http://127.0.0.1:9".to_owned(),
            resource: "http://127.0.0.1:8080/mcp".to_owned(),
            jwks_url: None,
            scopes: Vec::new(),
            plugin_scopes: Vec::new(),
        })
        .unwrap();
        assert!(matches!(
            verifier.verify(None).await,
            Err(AuthError::Missing)
        ));
        assert!(matches!(
            verifier.verify(Some("Basic abc")).await,
            Err(AuthError::Missing)
        ));
        assert!(matches!(
            verifier.verify(Some("Bearer not-a-jwt")).await,
            Err(AuthError::Invalid(_))
        ));
        let hmac = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::HS256),
            &serde_json::json!({"iss": "http://127.0.0.1:9", "aud": "http://127.0.0.1:8080/mcp", "exp": 4_000_000_000u64}),
            &jsonwebtoken::EncodingKey::from_secret(b"guessable"),
        )
        .unwrap();
        match verifier.verify(Some(&format!("Bearer {hmac}"))).await {
            Err(AuthError::Invalid(why)) => assert!(why.contains("shared secret"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
