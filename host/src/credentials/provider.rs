//! The downstream OAuth providers the operator configured (`[providers.NAME]` tables of the
//! configuration file): their names, endpoints (given, or discovered from an issuer's metadata
//! lazily and kept), client, scopes, the header their tokens travel in, and how a caller gets a
//! token there ([`Grant`]: linking their account, or exchanging their sign-in token to mcpbox,
//! RFC 8693). Parsing refuses an
//! unknown key, an endpoint that is not `https://` (a loopback host is the one, documented,
//! exception: for tests), a header that cannot carry a credential, and a client secret
//! written in the file (it is named from the secrets file instead).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use url::Url;

/// A provider's name: `[a-z][a-z0-9_-]{0,63}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderName(String);

impl ProviderName {
    /// Check `name`.
    pub fn parse(name: &str) -> Result<Self, String> {
        let mut chars = name.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
            && name.len() <= 64;
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(format!(
                "`{}` is not a provider name: a lowercase letter, then up to 63 lowercase \
                 letters, digits, `_` and `-`",
                name.escape_debug()
            ))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `client_id` and `client_secret` in the form body (`client_secret_post`; the default).
    Post,
    /// HTTP Basic with the client id and secret (`client_secret_basic`).
    Basic,
}

/// A provider's endpoints, known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explicit {
    /// Where the user authorizes (`None`: a token-exchange provider, which has no use for it).
    pub authorization: Option<Url>,
    /// Where codes and refresh tokens are exchanged.
    pub token: Url,
    /// Where tokens are revoked (RFC 7009), if the provider has such an endpoint.
    pub revocation: Option<Url>,
}

/// Where a provider's endpoints come from.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per configured provider, made once at start"
)]
pub enum Endpoints {
    /// Written in the configuration.
    Explicit(Explicit),
    /// Discovered from the issuer's metadata (RFC 8414, then OpenID Connect discovery) on
    /// first use, and kept; a failed discovery is not kept (the next use tries again).
    Issuer {
        /// The issuer identifier.
        issuer: Url,
        /// A revocation endpoint the configuration gives, over the metadata's.
        revocation: Option<Url>,
        /// The endpoints, once discovered.
        discovered: tokio::sync::OnceCell<Explicit>,
    },
}

/// The token type RFC 8693 names an OAuth access token by.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// How a caller comes to hold a token at a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The caller links their account once, in their browser (authorization code with PKCE);
    /// mcpbox keeps the tokens and refreshes them.
    AuthorizationCode,
    /// The provider exchanges the caller's own access token to mcpbox (from mcpbox's OAuth) for
    /// one of its own (RFC 8693), at each need; nothing is linked or kept beyond the token's
    /// life.
    TokenExchange(Exchange),
}

/// An RFC 8693 token exchange's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The `audience` asked for (the service the token is for, as the provider names it).
    pub audience: Option<String>,
    /// The `resource` asked for (RFC 8707: the service's URI).
    pub resource: Option<Url>,
    /// The `requested_token_type`; `None`: the provider's default (an access token).
    pub requested_token_type: Option<String>,
}

/// One downstream provider.
#[derive(Debug)]
pub struct Provider {
    /// Its name.
    pub name: ProviderName,
    /// Its name for people (pages and messages); the name if not set.
    pub display_name: String,
    /// How a caller gets a token there.
    pub grant: Grant,
    /// Its endpoints.
    pub endpoints: Endpoints,
    /// mcpbox's client id at the provider.
    pub client_id: String,
    /// The secrets-file entry holding the client secret (`None`: a public client, PKCE only).
    pub client_secret: Option<String>,
    /// How the client authenticates.
    pub client_auth: ClientAuth,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// Extra query parameters of the authorization request.
    pub authorize_params: BTreeMap<String, String>,
    /// The request header the token travels in.
    pub header: HeaderName,
    /// The scheme before the token in that header (`None`: the bare token).
    pub scheme: Option<String>,
    /// How long before its expiry a token is refreshed.
    pub refresh_before: Duration,
}

/// The configured providers, by name.
#[derive(Debug, Clone, Default)]
pub struct Providers(BTreeMap<ProviderName, Arc<Provider>>);

/// Headers a provider's token may not travel in: hop-by-hop headers and those that frame the
/// request.
const FORBIDDEN_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
];

/// Authorization-request parameters mcpbox sets itself.
const RESERVED_PARAMS: &[&str] = &[
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
];

const KEYS: &str = "display-name, grant, authorization-endpoint, token-endpoint, issuer, \
                    revocation-endpoint, client-id, client-secret, client-auth, scopes, \
                    authorize-params, audience, resource, requested-token-type, header, scheme, \
                    refresh-before-secs";

/// The keys only a provider of one grant has, and which grant that is.
const LINK_ONLY: &[&str] = &[
    "authorization-endpoint",
    "authorize-params",
    "revocation-endpoint",
];
const EXCHANGE_ONLY: &[&str] = &["audience", "resource", "requested-token-type"];

impl Providers {
    /// No providers.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parse the configuration file's `providers` table (`[providers.NAME]` tables). An error
    /// names the provider it is about, if any.
    pub fn from_toml(value: toml::Value) -> Result<Self, (Option<String>, String)> {
        let toml::Value::Table(table) = value else {
            return Err((
                None,
                "expected tables: [providers.NAME] for each provider".to_owned(),
            ));
        };
        let mut providers = BTreeMap::new();
        for (name, entry) in table {
            let provider = parse_provider(&name, entry).map_err(|m| (Some(name.clone()), m))?;
            providers.insert(provider.name.clone(), Arc::new(provider));
        }
        Ok(Self(providers))
    }

    /// Whether any provider exchanges callers' sign-in tokens (so the HTTP edge must hand
    /// them to the broker).
    pub fn any_exchange(&self) -> bool {
        self.iter().any(|p| p.exchange().is_some())
    }

    /// Why the providers cannot serve when mcpbox has no OAuth of its own over HTTP
    /// (`has_oauth` false): a token-exchange provider exchanges the token each caller signed in
    /// to mcpbox with, so without one it could never act.
    pub fn exchange_problem(&self, has_oauth: bool) -> Option<String> {
        let provider = self.iter().find(|p| p.exchange().is_some())?;
        (!has_oauth).then(|| {
            format!(
                "provider `{}` has grant = \"token-exchange\": it exchanges the OAuth access \
                 token each caller signed in to mcpbox with (RFC 8693), so mcpbox must serve \
                 HTTP with its own OAuth (--http with --oauth-issuer and --oauth-resource)",
                provider.name
            )
        })
    }

    /// Whether none is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many are configured.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The provider `name`, if configured.
    pub fn get(&self, name: &str) -> Option<&Arc<Provider>> {
        self.0
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, p)| p)
    }

    /// Every provider, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Provider>> {
        self.0.values()
    }

    /// The secrets-file entries the providers name that `has` says are absent, each as
    /// `provider NAME: secret SECRET`.
    pub fn missing_secrets(&self, has: impl Fn(&str) -> bool) -> Vec<String> {
        self.iter()
            .filter_map(|p| {
                let secret = p.client_secret.as_deref()?;
                (!has(secret)).then(|| {
                    format!(
                        "provider `{}`: its client secret `{secret}` is not in the secrets file",
                        p.name
                    )
                })
            })
            .collect()
    }
}

impl Provider {
    /// The exchange's parameters, if the provider exchanges tokens.
    pub fn exchange(&self) -> Option<&Exchange> {
        match &self.grant {
            Grant::TokenExchange(exchange) => Some(exchange),
            Grant::AuthorizationCode => None,
        }
    }

    /// The header value's prefix for a token: `Bearer ` (with its space), or nothing.
    pub fn scheme_prefix(&self) -> String {
        self.scheme
            .as_deref()
            .map_or_else(String::new, |s| format!("{s} "))
    }
}

/// One `[providers.NAME]` table.
fn parse_provider(name: &str, entry: toml::Value) -> Result<Provider, String> {
    let name = ProviderName::parse(name)?;
    let toml::Value::Table(entry) = entry else {
        return Err("expected a table: [providers.NAME]".to_owned());
    };
    let string = |key: &str, value: &toml::Value| match value {
        toml::Value::String(s) => Ok(s.clone()),
        other => Err(format!(
            "`{key}` must be a string, not {}",
            other.type_str()
        )),
    };
    let mut display_name = None;
    let (mut authorization, mut token, mut issuer, mut revocation) = (None, None, None, None);
    let mut client_id = None;
    let mut client_secret = None;
    let mut client_auth = ClientAuth::Post;
    let mut scopes = Vec::new();
    let mut authorize_params = BTreeMap::new();
    let mut header = http::header::AUTHORIZATION;
    let mut scheme = Some("Bearer".to_owned());
    let mut refresh_before = Duration::from_secs(60);
    let mut exchanging = false;
    let mut exchange = Exchange {
        audience: None,
        resource: None,
        requested_token_type: None,
    };
    for (key, value) in &entry {
        match key.as_str() {
            "display-name" => display_name = Some(string(key, value)?),
            "grant" => {
                exchanging = match string(key, value)?.as_str() {
                    "authorization-code" => false,
                    "token-exchange" => true,
                    other => {
                        return Err(format!(
                            "`grant` is \"authorization-code\" (users link their accounts) or \
                             \"token-exchange\" (RFC 8693: their sign-in token to mcpbox is \
                             exchanged), not \"{other}\""
                        ));
                    }
                };
            }
            "audience" => {
                let audience = string(key, value)?;
                if audience.is_empty() {
                    return Err("`audience` must not be empty".to_owned());
                }
                exchange.audience = Some(audience);
            }
            "resource" => {
                let text = string(key, value)?;
                let url = Url::parse(&text)
                    .map_err(|e| format!("`resource`: `{text}` is not a URI: {e}"))?;
                if url.fragment().is_some() {
                    return Err(format!(
                        "`resource`: `{text}` has a fragment (RFC 8707 refuses one)"
                    ));
                }
                exchange.resource = Some(url);
            }
            "requested-token-type" => {
                let text = string(key, value)?;
                if !text.starts_with("urn:") {
                    return Err(format!(
                        "`requested-token-type`: `{text}` is not a token type URI (such as \
                         {ACCESS_TOKEN_TYPE})"
                    ));
                }
                exchange.requested_token_type = Some(text);
            }
            "authorization-endpoint" => authorization = Some(endpoint(key, &string(key, value)?)?),
            "token-endpoint" => token = Some(endpoint(key, &string(key, value)?)?),
            "issuer" => issuer = Some(endpoint(key, &string(key, value)?)?),
            "revocation-endpoint" => revocation = Some(endpoint(key, &string(key, value)?)?),
            "client-id" => {
                let id = string(key, value)?;
                if id.is_empty() {
                    return Err("`client-id` must not be empty".to_owned());
                }
                client_id = Some(id);
            }
            "client-secret" => client_secret = Some(secret_name(value)?),
            "client-auth" => {
                client_auth = match string(key, value)?.as_str() {
                    "post" => ClientAuth::Post,
                    "basic" => ClientAuth::Basic,
                    other => {
                        return Err(format!(
                            "`client-auth` is \"post\" or \"basic\", not \"{other}\""
                        ));
                    }
                };
            }
            "scopes" => {
                let toml::Value::Array(list) = value else {
                    return Err("`scopes` is a list of strings".to_owned());
                };
                for scope in list {
                    let toml::Value::String(scope) = scope else {
                        return Err("`scopes` is a list of strings".to_owned());
                    };
                    if scope.is_empty() || scope.contains(' ') {
                        return Err(format!("`scopes`: `{scope}` is not a scope"));
                    }
                    scopes.push(scope.clone());
                }
            }
            "authorize-params" => {
                let toml::Value::Table(params) = value else {
                    return Err("`authorize-params` is a table of strings".to_owned());
                };
                for (param, value) in params {
                    if RESERVED_PARAMS.contains(&param.as_str()) {
                        return Err(format!("`authorize-params`: mcpbox sets `{param}` itself"));
                    }
                    authorize_params.insert(param.clone(), string(param, value)?);
                }
            }
            "header" => {
                let text = string(key, value)?;
                let parsed = HeaderName::from_bytes(text.as_bytes())
                    .map_err(|_| format!("`header`: `{text}` is not an HTTP header name"))?;
                if FORBIDDEN_HEADERS.contains(&parsed.as_str()) {
                    return Err(format!(
                        "`header`: a credential cannot travel in `{text}` (it frames the \
                         request or is hop-by-hop)"
                    ));
                }
                header = parsed;
            }
            "scheme" => {
                let text = string(key, value)?;
                if text.contains(|c: char| c.is_whitespace() || c.is_control()) {
                    return Err(format!("`scheme`: `{text}` is not one word"));
                }
                scheme = (!text.is_empty()).then_some(text);
            }
            "refresh-before-secs" => {
                let toml::Value::Integer(secs) = value else {
                    return Err("`refresh-before-secs` is a number of seconds".to_owned());
                };
                let secs = u64::try_from(*secs)
                    .map_err(|_| "`refresh-before-secs` must not be negative".to_owned())?;
                refresh_before = Duration::from_secs(secs);
            }
            other => {
                return Err(format!("unknown key `{other}`; a provider has {KEYS}"));
            }
        }
    }
    let wrong: &[&str] = if exchanging { LINK_ONLY } else { EXCHANGE_ONLY };
    if let Some(key) = wrong.iter().find(|k| entry.contains_key(**k)) {
        return Err(if exchanging {
            format!(
                "`{key}` is for a provider users link their accounts at; this one has \
                 grant = \"token-exchange\""
            )
        } else {
            format!("`{key}` is for a provider with grant = \"token-exchange\"")
        });
    }
    let endpoints = match (authorization, token, issuer) {
        (Some(authorization), Some(token), None) => Endpoints::Explicit(Explicit {
            authorization: Some(authorization),
            token,
            revocation,
        }),
        (None, Some(token), None) if exchanging => Endpoints::Explicit(Explicit {
            authorization: None,
            token,
            revocation: None,
        }),
        (None, None, Some(issuer)) => Endpoints::Issuer {
            issuer,
            revocation,
            discovered: tokio::sync::OnceCell::new(),
        },
        (_, _, Some(_)) => {
            return Err(
                "give `issuer` or both `authorization-endpoint` and `token-endpoint`, not both"
                    .to_owned(),
            );
        }
        _ if exchanging => {
            return Err(
                "give `token-endpoint`, or `issuer` (its metadata names it): the exchange is \
                 asked for there"
                    .to_owned(),
            );
        }
        _ => {
            return Err(
                "give both `authorization-endpoint` and `token-endpoint`, or `issuer` (its \
                 metadata names them)"
                    .to_owned(),
            );
        }
    };
    let client_id = client_id.ok_or("missing `client-id`")?;
    Ok(Provider {
        display_name: display_name.unwrap_or_else(|| name.to_string()),
        name,
        grant: if exchanging {
            Grant::TokenExchange(exchange)
        } else {
            Grant::AuthorizationCode
        },
        endpoints,
        client_id,
        client_secret,
        client_auth,
        scopes,
        authorize_params,
        header,
        scheme,
        refresh_before,
    })
}

/// `client-secret = { secret = "NAME" }`: the name of a secrets-file entry; a literal is
/// refused, so no secret sits in the configuration file.
fn secret_name(value: &toml::Value) -> Result<String, String> {
    let refused = "`client-secret` names an entry of the secrets file: \
                   client-secret = { secret = \"NAME\" } (a secret written here is refused)";
    let toml::Value::Table(table) = value else {
        return Err(refused.to_owned());
    };
    match (table.get("secret"), table.len()) {
        (Some(toml::Value::String(name)), 1) => {
            crate::policy::config::check_name(name).map_err(|m| format!("`client-secret`: {m}"))?;
            Ok(name.clone())
        }
        _ => Err(refused.to_owned()),
    }
}

/// An endpoint: `https://`, or `http://` on a loopback host (`localhost`, 127.0.0.0/8, `::1`).
pub(super) fn endpoint(key: &str, text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("`{key}`: `{text}` is not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        _ => {
            return Err(format!(
                "`{key}`: `{text}` must be https:// (http:// only on a loopback host)"
            ));
        }
    }
    if url.host().is_none() {
        return Err(format!("`{key}`: `{text}` has no host"));
    }
    Ok(url)
}

/// Whether `url`'s host is loopback.
pub(super) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The metadata URLs of `issuer`, in the order tried: RFC 8414's (the well-known path
/// inserted before the issuer's path), then OpenID Connect's (appended to it).
pub(super) fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut urls = Vec::new();
    let mut rfc8414 = issuer.clone();
    rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    urls.push(rfc8414);
    let mut oidc = issuer.clone();
    oidc.set_path(&format!("{path}/.well-known/openid-configuration"));
    urls.push(oidc);
    for url in &mut urls {
        url.set_query(None);
        url.set_fragment(None);
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Providers, (Option<String>, String)> {
        let table: toml::Table = toml::from_str(text).expect("toml");
        Providers::from_toml(table.get("providers").cloned().expect("providers"))
    }

    fn error(text: &str) -> String {
        parse(text).err().map(|(_, m)| m).unwrap_or_default()
    }

    const GITHUB: &str = r#"
[providers.github]
display-name = "GitHub"
authorization-endpoint = "https://github.com/login/oauth/authorize"
token-endpoint = "https://github.com/login/oauth/access_token"
client-id = "Iv1.0123"
client-secret = { secret = "github-client-secret" }
scopes = ["repo"]
authorize-params = { allow_signup = "false" }
"#;

    #[test]
    fn a_provider_parses_with_its_defaults() {
        let providers = parse(GITHUB).expect("parses");
        let github = providers.get("github").expect("github");
        assert_eq!(github.display_name, "GitHub");
        assert_eq!(
            github.client_secret.as_deref(),
            Some("github-client-secret")
        );
        assert_eq!(github.client_auth, ClientAuth::Post);
        assert_eq!(github.header, http::header::AUTHORIZATION);
        assert_eq!(github.scheme_prefix(), "Bearer ");
        assert_eq!(github.refresh_before, Duration::from_secs(60));
        assert_eq!(github.scopes, vec!["repo".to_owned()]);
        assert!(matches!(github.endpoints, Endpoints::Explicit(_)));
        assert_eq!(
            providers.missing_secrets(|_| false),
            vec![
                "provider `github`: its client secret `github-client-secret` is not in the secrets file"
                    .to_owned()
            ]
        );
        assert!(providers.missing_secrets(|_| true).is_empty());
    }

    #[test]
    fn bad_providers_are_refused_with_the_reason() {
        assert!(
            error("[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\nlifetime = 3\n")
                .starts_with("unknown key `lifetime`")
        );
        assert!(
            error("[providers.x]\nissuer = \"http://idp.example\"\nclient-id = \"c\"\n")
                .contains("must be https://")
        );
        assert!(
            error("[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\nclient-secret = \"s3cret\"\n")
                .contains("a secret written here is refused")
        );
        assert!(error(
            "[providers.x]\nissuer = \"https://a\"\ntoken-endpoint = \"https://a/t\"\nclient-id = \"c\"\n"
        )
        .contains("not both"));
        assert!(
            error("[providers.x]\ntoken-endpoint = \"https://a/t\"\nclient-id = \"c\"\n")
                .contains("give both")
        );
        assert!(
            error("[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\nheader = \"Host\"\n")
                .contains("cannot travel in `Host`")
        );
        assert!(error(
            "[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\nauthorize-params = { state = \"x\" }\n"
        )
        .contains("sets `state` itself"));
        assert!(error("[providers.x]\nissuer = \"https://a\"\n").contains("missing `client-id`"));
        let (name, message) =
            parse("[providers.GitHub]\nissuer = \"https://a\"\nclient-id = \"c\"\n")
                .err()
                .unwrap_or_default();
        assert_eq!(name.as_deref(), Some("GitHub"));
        assert!(message.contains("not a provider name"), "{message}");
    }

    #[test]
    fn a_token_exchange_provider_needs_only_its_token_endpoint() {
        let providers = parse(
            "[providers.jira]\ngrant = \"token-exchange\"\n\
             token-endpoint = \"https://idp.example/oauth/token\"\nclient-id = \"mcpbox\"\n\
             client-secret = { secret = \"idp\" }\naudience = \"jira\"\n\
             resource = \"https://jira.example/\"\nscopes = [\"read:jira-work\"]\n",
        )
        .expect("parses");
        let jira = providers.get("jira").expect("jira");
        assert_eq!(
            jira.exchange(),
            Some(&Exchange {
                audience: Some("jira".to_owned()),
                resource: Some(Url::parse("https://jira.example/").expect("url")),
                requested_token_type: None,
            })
        );
        assert!(matches!(
            &jira.endpoints,
            Endpoints::Explicit(Explicit {
                authorization: None,
                ..
            })
        ));
        assert!(providers.any_exchange());
        assert!(providers.exchange_problem(true).is_none());
        assert!(
            providers
                .exchange_problem(false)
                .is_some_and(|m| m.contains("provider `jira` has grant = \"token-exchange\""))
        );
        assert!(!parse(GITHUB).expect("parses").any_exchange());
    }

    #[test]
    fn a_grant_refuses_the_other_grants_keys() {
        let exchange = "[providers.x]\ngrant = \"token-exchange\"\nclient-id = \"c\"\n";
        assert!(
            error(&format!(
                "{exchange}token-endpoint = \"https://a/t\"\nauthorization-endpoint = \"https://a/a\"\n"
            ))
            .contains("`authorization-endpoint` is for a provider users link their accounts at")
        );
        assert!(error(exchange).contains("give `token-endpoint`, or `issuer`"));
        assert!(
            error("[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\naudience = \"y\"\n")
                .contains("`audience` is for a provider with grant = \"token-exchange\"")
        );
        assert!(
            error(
                "[providers.x]\nissuer = \"https://a\"\nclient-id = \"c\"\ngrant = \"password\"\n"
            )
            .contains("not \"password\"")
        );
        assert!(
            error(&format!(
                "{exchange}issuer = \"https://a\"\nrequested-token-type = \"jwt\"\n"
            ))
            .contains("not a token type URI")
        );
        assert!(
            error(&format!(
                "{exchange}issuer = \"https://a\"\nresource = \"https://r/#f\"\n"
            ))
            .contains("has a fragment")
        );
    }

    #[test]
    fn loopback_endpoints_may_be_plain_http_and_a_bare_token_has_no_scheme() {
        let providers = parse(
            "[providers.gitlab]\nissuer = \"http://127.0.0.1:8080/realm\"\nclient-id = \"c\"\n\
             header = \"PRIVATE-TOKEN\"\nscheme = \"\"\nclient-auth = \"basic\"\n",
        )
        .expect("parses");
        let gitlab = providers.get("gitlab").expect("gitlab");
        assert_eq!(gitlab.scheme_prefix(), "");
        assert_eq!(gitlab.header.as_str(), "private-token");
        assert_eq!(gitlab.client_auth, ClientAuth::Basic);
        assert!(endpoint("issuer", "http://localhost:1/x").is_ok());
        assert!(endpoint("issuer", "http://[::1]:1/x").is_ok());
        assert!(endpoint("issuer", "http://10.0.0.1/x").is_err());
    }

    #[test]
    fn the_reference_configurations_providers_parse() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/mcpbox.toml"))
                .expect("host/deploy/mcpbox.toml");
        let start = text
            .find("# [providers.github]")
            .expect("a [providers] example");
        let block: Vec<&str> = text[start..]
            .lines()
            .map(|l| {
                l.strip_prefix("# ")
                    .or_else(|| l.strip_prefix('#'))
                    .unwrap_or(l)
            })
            .collect();
        let providers = parse(&block.join("\n")).expect("the example parses");
        assert_eq!(providers.len(), 2);
        let gitlab = providers.get("gitlab").expect("gitlab");
        assert!(matches!(gitlab.endpoints, Endpoints::Issuer { .. }));
        assert_eq!(gitlab.client_auth, ClientAuth::Basic);
    }

    #[test]
    fn metadata_is_looked_for_as_rfc_8414_then_oidc_say() {
        let urls = |issuer: &str| -> Vec<String> {
            metadata_urls(&Url::parse(issuer).expect("url"))
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert_eq!(
            urls("https://idp.example/realms/a"),
            vec![
                "https://idp.example/.well-known/oauth-authorization-server/realms/a",
                "https://idp.example/realms/a/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            urls("https://idp.example/"),
            vec![
                "https://idp.example/.well-known/oauth-authorization-server",
                "https://idp.example/.well-known/openid-configuration"
            ]
        );
    }
}
