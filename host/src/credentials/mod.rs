//! Per-user credentials brokered by the host: each caller links their own account at a
//! downstream OAuth provider (GitHub, GitLab, an enterprise identity provider), mcpbox keeps
//! the tokens sealed in the state store, and attaches the caller's token to a plugin's request
//! to the one service it is for; the plugin never sees it.
//!
//! The [`Broker`] is the room's face: the engine asks it for a caller's token at send time
//! ([`Broker::access_token`], refreshed near expiry, one refresh at a time across replicas),
//! the catalog asks it to start a link and to wait for it ([`Broker::begin_link`],
//! [`Broker::wait_linked`]), the transport serves the browser's side of linking through it
//! ([`Broker::start`], [`Broker::complete`]: `/oauth/link/start` and `/oauth/link/callback`),
//! and users and operators list and remove links ([`Broker::links_of`], [`Broker::unlink`]).
//! Its parts, each in a file: the configured providers (`provider`), the operator's key and
//! the cipher (`cipher`), the sealed records in the state store (`store`), the provider's
//! endpoints as a client (`token`), the link flow (`link`), the lookup with its refresh
//! (`refresh`), RFC 8693 token exchange for providers behind mcpbox's own identity provider
//! (`exchange`), and the events for the audit log (`events`).
//!
//! A token never reaches a log line, an error, an event or a page: it is held in
//! [`AccessToken`] (whose `Debug` hides it) and in sealed records; every error here carries
//! reasons and names, never values.
//!
//! Uses: `kv`, `policy`, `tls`.

pub mod cipher;
pub mod events;
mod exchange;
mod link;
pub mod provider;
mod refresh;
pub mod store;
pub mod token;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest as _, Sha256};
use url::Url;
use zeroize::Zeroizing;

pub use self::cipher::{Cipher, CipherError, Key};
pub use self::events::{CredentialEvent, CredentialEvents, EventRecord, LogOnly, UnlinkedBy};
pub use self::provider::{ClientAuth, Exchange, Grant, Provider, ProviderName, Providers};
pub use self::store::{CREDENTIALS_SPACE, CredentialStore, LinkRecord};
use self::store::{Flow, FlowLookup, Ticket, TicketStatus, expiring_key, expiry_of};
use self::token::{TokenClient, TokenError, base64url, random_bytes};
use crate::kv::{KvError, StateService};
use crate::policy::config::SecretsCell;

/// The cookie that binds an authorization flow to the browser that started it.
pub const LINK_COOKIE: &str = "mcpbox_link";
/// The path of the route that starts a link (`?ticket=`).
pub const START_PATH: &str = "/oauth/link/start";
/// The path of the route the provider redirects back to.
pub const CALLBACK_PATH: &str = "/oauth/link/callback";
/// The longest an authorization flow (the time between start and callback) may take.
const FLOW_TTL: Duration = Duration::from_secs(600);
/// The most flows one link request may start on this replica: each visit of its start URL
/// keeps a flow in the state store until it expires, and the route is public, so whoever
/// holds the URL could otherwise fill the store with them.
pub const MAX_STARTS_PER_TICKET: u32 = 16;
/// The most link requests whose starts this replica counts at once (more are refused until
/// some expire).
const MAX_COUNTED_TICKETS: usize = 65_536;
/// How often [`Broker::wait_linked`] reads the ticket (a callback on another replica is seen
/// this late at most).
const WAIT_POLL: Duration = Duration::from_millis(250);

/// Why a credential operation failed. Holds no token.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// No such provider is configured.
    #[error("no provider `{0}` is configured ([providers.{0}] in the configuration file)")]
    UnknownProvider(String),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] KvError),
    /// A record does not open (another key, altered, or moved).
    #[error(transparent)]
    Sealed(#[from] CipherError),
    /// A record opened but is not what it should be.
    #[error("a credential record is corrupt: {0}")]
    Corrupt(String),
    /// The provider refused or could not be reached.
    #[error("provider `{provider}`: {error}")]
    Provider {
        /// Which.
        provider: String,
        /// Why.
        error: TokenError,
    },
    /// The provider exchanges sign-in tokens (RFC 8693): there is nothing to link.
    #[error(
        "provider `{0}` exchanges the caller's sign-in token to mcpbox (token exchange): \
         there is no account to link"
    )]
    NotLinkable(String),
    /// The provider's client secret is not in the secrets file (any more).
    #[error("provider `{provider}`: its client secret `{secret}` is not in the secrets file")]
    MissingSecret {
        /// Which provider.
        provider: String,
        /// The secret's name.
        secret: String,
    },
}

/// A caller's access token: its `Debug` never shows it, and it is wiped when dropped.
pub struct AccessToken(Zeroizing<String>);

impl AccessToken {
    /// The token, to put in a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The token itself.
    pub fn into_secret(self) -> Zeroizing<String> {
        self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// What [`Broker::access_token`] found.
#[derive(Debug)]
pub enum TokenLookup {
    /// The caller's token, fresh.
    Ready(AccessToken),
    /// The caller has not linked the provider (or the link can no longer be refreshed).
    LinkNeeded,
    /// The token cannot be had now (the provider or the store is unreachable): why, without
    /// values.
    Unavailable(String),
}

/// What to show the user so they link an account: a URL of mcpbox's own, and the elicitation
/// id, both the same while the request is pending (so every round of a 2026-07-28 request
/// asks the same question).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkPrompt {
    /// The provider.
    pub provider: String,
    /// The URL elicitation's id.
    pub elicitation_id: String,
    /// `PUBLIC_URL/oauth/link/start?ticket=…`.
    pub url: String,
    /// What to tell the user.
    pub message: String,
}

/// How waiting for a link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Linked.
    Linked,
    /// Still pending at the deadline.
    Pending,
    /// The request failed, was declined at the provider, or expired (why).
    Failed(String),
}

/// One of a caller's links, for them (or the operator) to see: never a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSummary {
    /// The provider.
    pub provider: String,
    /// Its name for people.
    pub display_name: String,
    /// When it was linked (ms since the epoch).
    pub linked_at_ms: u64,
    /// When the access token expires, if the provider said.
    pub expires_at_ms: Option<u64>,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// Whether it can be refreshed.
    pub refreshable: bool,
}

/// Where `/oauth/link/start` sends the browser, and the cookie it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRedirect {
    /// The provider's authorization URL (with `state` and the PKCE challenge).
    pub location: String,
    /// The `Set-Cookie` value binding the flow to this browser.
    pub set_cookie: String,
}

/// The query of `/oauth/link/callback`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct CallbackQuery {
    /// The authorization code.
    #[serde(default)]
    pub code: Option<String>,
    /// The state mcpbox sent.
    #[serde(default)]
    pub state: Option<String>,
    /// The provider's error (`access_denied` when the user declined).
    #[serde(default)]
    pub error: Option<String>,
}

/// A finished link, for the page the callback shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    /// The provider's name for people.
    pub display_name: String,
    /// The caller's key: the mcpbox account the provider's account is now linked to.
    pub caller: String,
}

/// Why `/oauth/link/start` or `/oauth/link/callback` linked nothing. Its text is for the page
/// the browser shows: no value, no caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    /// Not a link mcpbox made (no such ticket or state, or a malformed one).
    #[error("This link is not valid. Start again from your MCP client.")]
    Invalid,
    /// The ticket or flow expired.
    #[error("This link has expired. Start again from your MCP client.")]
    Expired,
    /// The flow was used already, or the request is no longer pending.
    #[error("This link was used already. Start again from your MCP client.")]
    Used,
    /// The link request's start URL was opened more than [`MAX_STARTS_PER_TICKET`] times.
    #[error("This link was opened too many times. Start again from your MCP client.")]
    TooManyStarts,
    /// The callback came to a browser other than the one that started the flow.
    #[error(
        "This sign-in was started in another browser. Open the link from your MCP client in this browser."
    )]
    OtherBrowser,
    /// The user declined at the provider.
    #[error("You declined at the provider; nothing was linked.")]
    Declined,
    /// The provider refused the code, or could not be reached.
    #[error("The provider did not complete the sign-in; nothing was linked. Try again later.")]
    Provider(String),
    /// mcpbox's own store failed.
    #[error("mcpbox could not complete the sign-in; nothing was linked. Try again later.")]
    Internal(String),
}

impl CallbackError {
    /// Why, for the log and the audit event (no values).
    pub fn reason(&self) -> String {
        match self {
            Self::Invalid => "an unknown or malformed ticket or state".to_owned(),
            Self::Expired => "expired".to_owned(),
            Self::Used => "used already".to_owned(),
            Self::TooManyStarts => {
                format!("its start URL was opened more than {MAX_STARTS_PER_TICKET} times")
            }
            Self::OtherBrowser => "the callback came to another browser".to_owned(),
            Self::Declined => "declined at the provider".to_owned(),
            Self::Provider(why) | Self::Internal(why) => why.clone(),
        }
    }
}

impl From<CredentialError> for CallbackError {
    fn from(error: CredentialError) -> Self {
        match error {
            CredentialError::Sealed(_) => Self::Invalid,
            CredentialError::UnknownProvider(_) => Self::Invalid,
            CredentialError::Provider { .. } | CredentialError::MissingSecret { .. } => {
                Self::Provider(error.to_string())
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

/// How the broker is set up.
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    /// Where browsers reach this mcpbox (the link routes are under it).
    pub public_url: Url,
    /// How long a link request lives (`--link-ticket-ttl-secs`).
    pub ticket_ttl: Duration,
    /// How long a call waits for the user to link (`--link-wait-secs`; zero: never).
    pub link_wait: Duration,
}

/// One lock per (caller key, provider) with a lookup in flight in this process.
type Flights = Mutex<HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>>;

/// The credentials broker: see the module's documentation.
pub struct Broker {
    providers: Providers,
    store: CredentialStore,
    tokens: TokenClient,
    secrets: Arc<SecretsCell>,
    settings: BrokerSettings,
    events: Arc<dyn CredentialEvents>,
    /// One token lookup at a time per (caller, provider) in this process.
    flights: Flights,
    /// Waiters for a ticket on this replica, woken at once by its callback.
    waiters: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// The flows each link request started on this replica, and when it expires.
    starts: Mutex<HashMap<String, (u32, u64)>>,
    /// Whether any provider exchanges tokens (RFC 8693).
    exchanging: bool,
    /// Callers' sign-in tokens and the tokens exchanged for them.
    exchanges: exchange::Exchanges,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("providers", &self.providers.len())
            .field("public_url", &self.settings.public_url.as_str())
            .finish_non_exhaustive()
    }
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Broker {
    /// A broker for `providers`, sealing with `cipher` into `state`, reading client secrets
    /// from `secrets` at each use (so a SIGHUP's new secrets apply), reporting to `events`.
    pub fn new(
        providers: Providers,
        cipher: Cipher,
        state: Arc<StateService>,
        secrets: Arc<SecretsCell>,
        settings: BrokerSettings,
        events: Arc<dyn CredentialEvents>,
    ) -> Result<Self, String> {
        Ok(Self {
            exchanging: providers.any_exchange(),
            exchanges: exchange::Exchanges::default(),
            providers,
            store: CredentialStore::new(state, Arc::new(cipher)),
            tokens: TokenClient::new()?,
            secrets,
            settings,
            events,
            flights: Mutex::new(HashMap::new()),
            starts: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
        })
    }

    /// The configured providers.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// Whether `provider` is configured.
    pub fn has_provider(&self, provider: &str) -> bool {
        self.providers.get(provider).is_some()
    }

    /// The header `provider`'s token goes in and its scheme (`("authorization",
    /// Some("Bearer"))`); `None`: no such provider.
    pub fn header(&self, provider: &str) -> Option<(http::HeaderName, Option<String>)> {
        let provider = self.providers.get(provider)?;
        Some((provider.header.clone(), provider.scheme.clone()))
    }

    /// `provider`'s name for people.
    pub fn display_name(&self, provider: &str) -> Option<String> {
        Some(self.providers.get(provider)?.display_name.clone())
    }

    /// How long a call waits for the user to link (`--link-wait-secs`).
    pub fn link_wait(&self) -> Duration {
        self.settings.link_wait
    }

    /// The redirect URI providers send the browser back to.
    pub fn redirect_uri(&self) -> String {
        format!(
            "{}{CALLBACK_PATH}",
            self.settings.public_url.as_str().trim_end_matches('/')
        )
    }

    /// The store of records (for tests and tools that read it directly).
    pub fn store(&self) -> &CredentialStore {
        &self.store
    }

    fn provider(&self, name: &str) -> Result<&Arc<Provider>, CredentialError> {
        self.providers
            .get(name)
            .ok_or_else(|| CredentialError::UnknownProvider(name.to_owned()))
    }

    /// The client secret of `provider`, read now from the secrets file.
    fn client_secret(
        &self,
        provider: &Provider,
    ) -> Result<Option<Zeroizing<String>>, CredentialError> {
        let Some(name) = &provider.client_secret else {
            return Ok(None);
        };
        let secrets = self.secrets.current();
        let value = secrets
            .get(name, None)
            .ok_or_else(|| CredentialError::MissingSecret {
                provider: provider.name.to_string(),
                secret: name.clone(),
            })?;
        Ok(Some(Zeroizing::new(value.expose().to_owned())))
    }

    fn emit(&self, event: CredentialEvent, caller: &str, provider: &str, plugin: Option<&str>) {
        events::emit(
            self.events.as_ref(),
            EventRecord {
                event,
                caller: caller.to_owned(),
                provider: provider.to_owned(),
                plugin: plugin.map(str::to_owned),
            },
        );
    }

    /// Remove expired tickets and flows (the first page of each), quietly.
    async fn sweep(&self, now: u64) {
        if let Err(e) = self.store.sweep(now).await {
            tracing::debug!("could not sweep expired link requests: {e}");
        }
    }

    /// The caller's links (records that no longer open are left out, and logged).
    pub async fn links_of(&self, caller_key: &str) -> Result<Vec<LinkSummary>, CredentialError> {
        let mut out = Vec::new();
        for (provider, record) in self.store.links_of(caller_key).await? {
            out.push(LinkSummary {
                display_name: self
                    .display_name(&provider)
                    .unwrap_or_else(|| provider.clone()),
                provider,
                linked_at_ms: record.linked_at_ms,
                expires_at_ms: record.expires_at_ms,
                scopes: record.scopes.clone(),
                refreshable: record.refresh_token.is_some(),
            });
        }
        Ok(out)
    }

    /// Remove the caller's link to `provider`, everywhere at once (nothing is cached), and
    /// revoke its token at the provider if it has a revocation endpoint (best effort): whether
    /// there was a link.
    pub async fn unlink(
        &self,
        caller_key: &str,
        provider: &str,
        by: UnlinkedBy,
    ) -> Result<bool, CredentialError> {
        self.exchanges.forget(caller_key, provider);
        let record = match self.store.get_link(caller_key, provider).await {
            Ok(found) => found.map(|(_, record)| record),
            Err(CredentialError::Sealed(e)) => {
                tracing::warn!(
                    caller = caller_key,
                    provider,
                    "removing a link that does not open: {e}"
                );
                None
            }
            Err(e) => return Err(e),
        };
        let existed = self.store.delete_link(caller_key, provider).await?;
        if !existed {
            return Ok(false);
        }
        self.emit(CredentialEvent::Unlinked(by), caller_key, provider, None);
        if let (Some(record), Some(configured)) = (record, self.providers.get(provider)) {
            let (token, hint) = match &record.refresh_token {
                Some(refresh) => (refresh.as_str(), "refresh_token"),
                None => (record.access_token.as_str(), "access_token"),
            };
            let secret = self.client_secret(configured).ok().flatten();
            match self
                .tokens
                .revoke(
                    configured,
                    secret.as_deref().map(String::as_str),
                    token,
                    hint,
                )
                .await
            {
                Ok(true) => {
                    tracing::info!(caller = caller_key, provider, "revoked at the provider")
                }
                Ok(false) => {}
                Err(e) => tracing::info!(
                    caller = caller_key,
                    provider,
                    "unlinked, but the provider did not revoke the token: {e}"
                ),
            }
        }
        Ok(true)
    }
}

/// The link record for tokens issued at `now` (`previous`: the record they refresh).
fn record_of(
    tokens: &token::TokenSet,
    previous: Option<&LinkRecord>,
    now: u64,
    plugin: Option<String>,
) -> LinkRecord {
    let scopes = match &tokens.scope {
        Some(scope) => scope
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        None => previous.map(|p| p.scopes.clone()).unwrap_or_default(),
    };
    LinkRecord {
        access_token: tokens.access_token.to_string(),
        refresh_token: tokens
            .refresh_token
            .as_ref()
            .map(|t| t.to_string())
            .or_else(|| previous.and_then(|p| p.refresh_token.clone())),
        token_type: tokens.token_type.clone(),
        scopes,
        expires_at_ms: tokens
            .expires_in
            .map(|secs| now + secs.saturating_mul(1000)),
        linked_at_ms: previous.map_or(now, |p| p.linked_at_ms),
        refreshed_at_ms: previous.map(|_| now),
        plugin: plugin.or_else(|| previous.and_then(|p| p.plugin.clone())),
    }
}

/// The value of the link cookie in a `Cookie` header.
pub fn link_cookie(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == LINK_COOKIE)
        .map(|(_, value)| value)
}

#[cfg(test)]
pub(crate) mod tests;
