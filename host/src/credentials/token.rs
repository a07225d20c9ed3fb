//! The provider's endpoints as a client: issuer discovery (RFC 8414, then OpenID Connect),
//! PKCE (S256), the authorization-code exchange, refresh, and revocation (RFC 7009), with the
//! client authenticating by `client_secret_post` or `client_secret_basic`. One HTTP client,
//! over the host's TLS configuration, following no redirects, with a 10 s timeout and bodies
//! read to at most 64 KiB. Errors name the endpoint and the OAuth error code, never a token
//! (nor the provider's free-text description, which may echo one).

use std::time::Duration;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use url::Url;
use zeroize::Zeroizing;

use super::provider::{
    ACCESS_TOKEN_TYPE, ClientAuth, Endpoints, Exchange, Explicit, Provider, endpoint, metadata_urls,
};

/// How long one request to a provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from a provider.
const MAX_BODY_BYTES: usize = 64 << 10;

/// Why a request to a provider failed. Holds no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The grant (code or refresh token) is no longer valid: the user must link again.
    #[error("the provider refused the grant (invalid_grant)")]
    InvalidGrant,
    /// The provider answered with another OAuth error or status.
    #[error("the provider refused: {0}")]
    Refused(String),
    /// The provider could not be reached or did not answer in time (or answered 5xx).
    #[error("the provider is unavailable: {0}")]
    Unavailable(String),
    /// The answer was not what OAuth says it is.
    #[error("the provider's answer is malformed: {0}")]
    Malformed(String),
}

/// Tokens a provider issued.
pub struct TokenSet {
    /// The access token.
    pub access_token: Zeroizing<String>,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Zeroizing<String>>,
    /// The token type.
    pub token_type: Option<String>,
    /// Seconds until the access token expires, if said.
    pub expires_in: Option<u64>,
    /// The scopes granted, if said (space-separated, or GitHub's commas).
    pub scope: Option<String>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("refreshable", &self.refresh_token.is_some())
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// A PKCE verifier (43 characters of base64url) and its S256 challenge.
pub fn pkce() -> Result<(Zeroizing<String>, String), TokenError> {
    let bytes = random_bytes::<32>()?;
    let verifier = Zeroizing::new(base64url(&bytes));
    let challenge = challenge_of(&verifier);
    Ok((verifier, challenge))
}

/// The S256 challenge of `verifier`.
pub fn challenge_of(verifier: &str) -> String {
    base64url(&Sha256::digest(verifier.as_bytes()))
}

/// `N` random bytes from the system.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], TokenError> {
    let mut bytes = [0u8; N];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| TokenError::Unavailable("the system's random source failed".to_owned()))?;
    Ok(bytes)
}

/// Base64url without padding.
pub fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The HTTP client of providers' endpoints.
#[derive(Debug, Clone)]
pub struct TokenClient {
    http: reqwest::Client,
}

/// An issuer's metadata, as far as it is used.
#[derive(serde::Deserialize)]
struct Metadata {
    issuer: String,
    #[serde(default)]
    authorization_endpoint: Option<String>,
    token_endpoint: String,
    #[serde(default)]
    revocation_endpoint: Option<String>,
}

/// A token endpoint's answer, success or error.
#[derive(serde::Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

impl Drop for TokenAnswer {
    fn drop(&mut self) {
        use zeroize::Zeroize as _;
        if let Some(t) = &mut self.access_token {
            t.zeroize();
        }
        if let Some(t) = &mut self.refresh_token {
            t.zeroize();
        }
    }
}

impl TokenClient {
    /// A client over the host's TLS configuration.
    pub fn new() -> Result<Self, String> {
        let tls =
            crate::tls::client_config().ok_or("cannot set up TLS: no safe protocol version")?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(Self { http })
    }

    /// `provider`'s endpoints: as configured, or discovered from its issuer on first use and
    /// kept (a failure is not kept: the next use tries again).
    pub async fn endpoints<'p>(&self, provider: &'p Provider) -> Result<&'p Explicit, TokenError> {
        match &provider.endpoints {
            Endpoints::Explicit(explicit) => Ok(explicit),
            Endpoints::Issuer {
                issuer,
                revocation,
                discovered,
            } => {
                discovered
                    .get_or_try_init(|| async {
                        let mut found = self.discover(issuer).await?;
                        if revocation.is_some() {
                            found.revocation.clone_from(revocation);
                        }
                        tracing::info!(
                            provider = %provider.name,
                            issuer = %issuer,
                            "discovered the provider's endpoints"
                        );
                        Ok(found)
                    })
                    .await
            }
        }
    }

    /// Read `issuer`'s metadata: RFC 8414's well-known URL, then OpenID Connect's.
    async fn discover(&self, issuer: &Url) -> Result<Explicit, TokenError> {
        let mut problems = Vec::new();
        for url in metadata_urls(issuer) {
            let answer = match self.http.get(url.clone()).send().await {
                Ok(answer) => answer,
                Err(e) => {
                    problems.push(format!("{url}: {e}"));
                    continue;
                }
            };
            if !answer.status().is_success() {
                problems.push(format!("{url}: status {}", answer.status().as_u16()));
                continue;
            }
            let body = match read_bounded(answer).await {
                Ok(body) => body,
                Err(e) => {
                    problems.push(format!("{url}: {e}"));
                    continue;
                }
            };
            let metadata: Metadata = match serde_json::from_slice(&body) {
                Ok(metadata) => metadata,
                Err(e) => {
                    problems.push(format!("{url}: not metadata: {e}"));
                    continue;
                }
            };
            if metadata.issuer.trim_end_matches('/') != issuer.as_str().trim_end_matches('/') {
                problems.push(format!(
                    "{url}: names issuer `{}`, not `{issuer}`",
                    metadata.issuer
                ));
                continue;
            }
            let check = |key: &str, text: &str| {
                endpoint(key, text).map_err(|m| TokenError::Malformed(format!("{url}: {m}")))
            };
            return Ok(Explicit {
                authorization: match &metadata.authorization_endpoint {
                    Some(text) => Some(check("authorization_endpoint", text)?),
                    None => None,
                },
                token: check("token_endpoint", &metadata.token_endpoint)?,
                revocation: match &metadata.revocation_endpoint {
                    Some(text) => Some(check("revocation_endpoint", text)?),
                    None => None,
                },
            });
        }
        Err(TokenError::Unavailable(format!(
            "cannot read the issuer's metadata ({})",
            problems.join("; ")
        )))
    }

    /// Exchange an authorization code (with its PKCE verifier) for tokens.
    pub async fn exchange_code(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<TokenSet, TokenError> {
        let token = self.endpoints(provider).await?.token.clone();
        self.token_request(
            provider,
            secret,
            &token,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect_uri),
                ("code_verifier", verifier),
            ],
        )
        .await
    }

    /// Refresh: new tokens for a refresh token.
    pub async fn refresh(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        refresh_token: &str,
    ) -> Result<TokenSet, TokenError> {
        let token = self.endpoints(provider).await?.token.clone();
        self.token_request(
            provider,
            secret,
            &token,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
            ],
        )
        .await
    }

    /// Exchange `subject_token` (an access token to mcpbox) for one of `provider`'s (RFC 8693).
    pub async fn exchange(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        subject_token: &str,
        exchange: &Exchange,
    ) -> Result<TokenSet, TokenError> {
        let token = self.endpoints(provider).await?.token.clone();
        let scope = provider.scopes.join(" ");
        let mut params = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(kind) = &exchange.requested_token_type {
            params.push(("requested_token_type", kind));
        }
        if let Some(audience) = &exchange.audience {
            params.push(("audience", audience));
        }
        if let Some(resource) = &exchange.resource {
            params.push(("resource", resource.as_str()));
        }
        if !scope.is_empty() {
            params.push(("scope", &scope));
        }
        self.token_request(provider, secret, &token, &params).await
    }

    /// Revoke `token` (RFC 7009) if the provider has a revocation endpoint: `Ok(false)` if it
    /// has none.
    pub async fn revoke(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        token: &str,
        hint: &str,
    ) -> Result<bool, TokenError> {
        let Some(url) = self.endpoints(provider).await?.revocation.clone() else {
            return Ok(false);
        };
        let answer = self
            .form(
                provider,
                secret,
                &url,
                &[("token", token), ("token_type_hint", hint)],
            )
            .send()
            .await
            .map_err(|e| TokenError::Unavailable(format!("{url}: {}", e.without_url())))?;
        let status = answer.status();
        if status.is_success() {
            Ok(true)
        } else if status.is_server_error() {
            Err(TokenError::Unavailable(format!(
                "{url}: status {}",
                status.as_u16()
            )))
        } else {
            Err(TokenError::Refused(format!(
                "{url}: status {}",
                status.as_u16()
            )))
        }
    }

    /// A form POST to `url`, the client authenticated as `provider` says.
    fn form(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        url: &Url,
        params: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in params {
            form.append_pair(name, value);
        }
        let mut request = self
            .http
            .post(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        match (provider.client_auth, secret) {
            (ClientAuth::Basic, Some(secret)) => {
                // RFC 6749 §2.3.1: each form-encoded, then joined.
                let encode = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let pair = Zeroizing::new(format!(
                    "{}:{}",
                    encode(&provider.client_id),
                    encode(secret)
                ));
                let mut value = http::HeaderValue::from_str(&format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair.as_bytes())
                ))
                .unwrap_or_else(|_| http::HeaderValue::from_static(""));
                value.set_sensitive(true);
                request = request.header(http::header::AUTHORIZATION, value);
            }
            (ClientAuth::Post, Some(secret)) => {
                form.append_pair("client_id", &provider.client_id);
                form.append_pair("client_secret", secret);
            }
            (_, None) => {
                form.append_pair("client_id", &provider.client_id);
            }
        }
        request.body(form.finish())
    }

    async fn token_request(
        &self,
        provider: &Provider,
        secret: Option<&str>,
        url: &Url,
        params: &[(&str, &str)],
    ) -> Result<TokenSet, TokenError> {
        let answer = self
            .form(provider, secret, url, params)
            .send()
            .await
            .map_err(|e| TokenError::Unavailable(format!("{url}: {}", e.without_url())))?;
        let status = answer.status();
        let is_form = answer
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if status.is_server_error() {
            return Err(TokenError::Unavailable(format!(
                "{url}: status {}",
                status.as_u16()
            )));
        }
        let body = Zeroizing::new(
            read_bounded(answer)
                .await
                .map_err(|e| TokenError::Unavailable(format!("{url}: {e}")))?,
        );
        let parsed: TokenAnswer = if is_form {
            form_answer(&body)
        } else {
            serde_json::from_slice(&body).map_err(|_| {
                TokenError::Malformed(format!(
                    "{url}: status {}, not a JSON token answer",
                    status.as_u16()
                ))
            })?
        };
        if let Some(error) = &parsed.error {
            let code: String = error
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect();
            return Err(if code == "invalid_grant" {
                TokenError::InvalidGrant
            } else {
                TokenError::Refused(format!("{url}: {code} (status {})", status.as_u16()))
            });
        }
        if !status.is_success() {
            return Err(TokenError::Refused(format!(
                "{url}: status {}",
                status.as_u16()
            )));
        }
        let Some(access_token) = parsed.access_token.clone().filter(|t| !t.is_empty()) else {
            return Err(TokenError::Malformed(format!("{url}: no access_token")));
        };
        let expires_in = match &parsed.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        Ok(TokenSet {
            access_token: Zeroizing::new(access_token),
            refresh_token: parsed
                .refresh_token
                .clone()
                .filter(|t| !t.is_empty())
                .map(Zeroizing::new),
            token_type: parsed.token_type.clone(),
            expires_in,
            scope: parsed.scope.clone(),
        })
    }
}

/// A form-encoded token answer (GitHub's, without `Accept: application/json`).
fn form_answer(body: &[u8]) -> TokenAnswer {
    let mut answer = TokenAnswer {
        access_token: None,
        refresh_token: None,
        token_type: None,
        expires_in: None,
        scope: None,
        error: None,
    };
    for (name, value) in url::form_urlencoded::parse(body) {
        let value = value.into_owned();
        match name.as_ref() {
            "access_token" => answer.access_token = Some(value),
            "refresh_token" => answer.refresh_token = Some(value),
            "token_type" => answer.token_type = Some(value),
            "expires_in" => answer.expires_in = Some(serde_json::Value::String(value)),
            "scope" => answer.scope = Some(value),
            "error" => answer.error = Some(value),
            _ => {}
        }
    }
    answer
}

/// Read an answer's body, at most [`MAX_BODY_BYTES`].
async fn read_bounded(mut answer: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| format!("{}", e.without_url()))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            zeroize::Zeroize::zeroize(&mut body);
            return Err(format!(
                "the answer is larger than {} KiB",
                MAX_BODY_BYTES >> 10
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_is_s256_of_a_43_character_verifier() {
        let (verifier, challenge) = pkce().expect("pkce");
        assert_eq!(verifier.len(), 43);
        assert_eq!(challenge, challenge_of(&verifier));
        // base64url(SHA-256(verifier)) without padding, computed apart (Python's hashlib).
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mJ92K27uhbUJU1p1r7W1gFWFj-cjXk"),
            "fjDbB_2nR1DHVHAjhKIfqYWzdo3Xhw2IQFWyBU3ibik"
        );
        let (other, _) = pkce().expect("pkce");
        assert_ne!(*verifier, *other);
    }

    #[test]
    fn a_form_answer_reads_like_json() {
        let answer = form_answer(b"access_token=gho_x&scope=repo&token_type=bearer");
        assert_eq!(answer.access_token.as_deref(), Some("gho_x"));
        assert_eq!(answer.scope.as_deref(), Some("repo"));
        let error = form_answer(b"error=bad_verification_code&error_description=x");
        assert_eq!(error.error.as_deref(), Some("bad_verification_code"));
    }
}
