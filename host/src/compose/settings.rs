//! What `serve` runs with, once the command line and the configuration file have been read and
//! checked: real types, every bad combination already refused (the CLI builds these before
//! anything binds a port or loads a plugin).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::ConfigFile;
use crate::engine::RuntimeConfig;
use crate::kv::calls::CallLedger;
use crate::policy::{Limits, Sections};
use crate::registry::trust::Trust;
use crate::server::SessionSettings;
use crate::transport::stdio::StdioConfig;

/// Everything `serve` needs, checked.
pub struct ServeSettings {
    /// The plugin directories, canonical (file events carry absolute paths), in order: a
    /// plugin's name is the first one's that holds it.
    pub plugin_dirs: Vec<PathBuf>,
    /// The wasm runtime: cache, instance pool, memory, state store.
    pub runtime: RuntimeConfig,
    /// The limits of one call into a plugin.
    pub limits: Limits,
    /// The call time limit and memory as given, for the log line that says what is in force.
    pub timeout_ms: u64,
    /// See [`ServeSettings::timeout_ms`].
    pub memory_mib: u64,
    /// What every session shares: 2026-07-28 input rounds and caching hints, the process's
    /// global bounds, the audit log, budgets and tasks.
    pub session: Arc<SessionSettings>,
    /// Where tool calls carrying a balancer's request id are recorded (`--call-id-header`).
    pub call_ledger: Option<Arc<CallLedger>>,
    /// The most items in one page of a list.
    pub page_size: usize,
    /// Whether the plugin directory is watched (plugins added, replaced, removed live).
    pub watch: bool,
    /// How long file events settle before a reload.
    pub reload_debounce: Duration,
    /// How long startup waits for plugins to list before serving (`--startup-wait-ms`).
    pub startup_wait: Duration,
    /// The configuration file, when one was given (watched for changes).
    pub config: Option<Arc<ConfigFile>>,
    /// Its `[plugin.NAME]` sections (empty without a file).
    pub sections: Arc<Sections>,
    /// Which plugins must be signed, by whom.
    pub trust: Trust,
    /// Where to serve Prometheus metrics apart from MCP (`--metrics-addr`).
    pub metrics_addr: Option<String>,
    /// Where the audit log goes (`--audit-log`), if anywhere.
    pub audit_log: Option<PathBuf>,
    /// How clients reach the host.
    pub transport: Transport,
    /// Per-user credentials, when the configuration file names providers.
    pub credentials: Option<CredentialSettings>,
    /// Managed installs (`[manage]`, enabled): the managed directory is the last of
    /// `plugin_dirs`.
    #[cfg(feature = "registry")]
    pub manage: Option<crate::manage::ManageSettings>,
}

/// Per-user credentials: the providers, the operator's key, and where browsers reach mcpbox.
pub struct CredentialSettings {
    /// The downstream OAuth providers (`[providers.NAME]`), at least one.
    pub providers: crate::credentials::Providers,
    /// The cipher under the operator's key (`--credentials-key-file`).
    pub cipher: crate::credentials::Cipher,
    /// Where browsers reach this mcpbox (`--public-url`, else the origin of
    /// `--oauth-resource`): `None` leaves it to the bound address, which must be loopback.
    pub public_url: Option<url::Url>,
    /// stdio: where the loopback listener of the link routes binds (`--link-listen`).
    pub link_listen: String,
    /// How long a call waits for the user to link (`--link-wait-secs`).
    pub link_wait: Duration,
    /// How long a link request lives (`--link-ticket-ttl-secs`).
    pub ticket_ttl: Duration,
}

/// How clients reach the host.
pub enum Transport {
    /// One client on stdin and stdout.
    Stdio(StdioConfig),
    /// Streamable HTTP (and the 2024-11-05 SSE transport) on an address.
    Http(Box<HttpSettings>),
}

/// The HTTP listener's settings.
pub struct HttpSettings {
    /// `host:port`, `[v6]:port` or a bare port (loopback), as given to `--http`.
    pub address: String,
    /// `Host` values accepted beyond loopback names.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (with CORS).
    pub allowed_origins: Vec<String>,
    /// The static bearer tokens accepted (`--auth-token`, `[tokens.NAME]`); if any, every
    /// request must carry one.
    pub tokens: Arc<crate::principal::Tokens>,
    /// OAuth 2.1 access tokens from this issuer, for this resource.
    pub oauth: Option<crate::auth::OAuthConfig>,
    /// The largest request body.
    pub max_body_bytes: usize,
    /// How long an idle 2025-11-25 session lives.
    pub session_idle: Duration,
    /// The header a trusted balancer sets to name one call across its retries.
    pub call_id_header: Option<axum::http::HeaderName>,
    /// Whether `/` serves the status page.
    pub status_page: bool,
}
