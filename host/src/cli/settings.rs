//! `serve`'s arguments checked as a whole ([`ServeArgs::settings`]): the raw flags of
//! `args` become [`ServeSettings`] (limits, grants, trust, tokens, budgets, credentials, the
//! HTTP and 2026-07-28 settings), and every bad combination is refused here, before anything
//! binds a port or loads a plugin.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::args::{ServeArgs, read_secrets};
use crate::compose::{HttpSettings, ServeSettings, Transport};
use crate::engine::{ComponentCache, EngineSizes, RuntimeConfig};
use crate::kv::StateConfig;
use crate::policy::Sections;
use crate::registry::trust::Trust;
use crate::server::{ProcessLimits, SessionSettings, StateKey};
use crate::transport::stdio::StdioConfig;

impl ServeArgs {
    /// What the engine is made for, from these arguments alone (so that it can be begun
    /// before the rest of [`ServeArgs::settings`] is worked out).
    pub fn engine_sizes(&self) -> EngineSizes {
        EngineSizes {
            max_instances: self.max_instances,
            max_memory_bytes: self
                .limits
                .memory_bytes()
                .max(RuntimeConfig::default().max_memory_bytes),
        }
    }

    /// Check these arguments as a whole and turn them into the settings `serve` runs with:
    /// every bad combination is refused here, before anything binds a port or loads a plugin.
    pub fn settings(&self) -> anyhow::Result<ServeSettings> {
        if self.plugins.is_empty() {
            anyhow::bail!(
                "no plugin directory: give --plugins DIR, set MCPBOX_PLUGINS, or set `plugins` in \
                 the configuration file"
            );
        }
        // Raised before the bounds are set: the listen-stream budget keeps a share of it.
        crate::compose::raise_open_file_limit();
        let session = Arc::new(self.session()?);
        let call_ledger = call_ledger(self)?;
        // Canonical, so that file events (absolute paths) match the loaded plugins' files.
        let mut plugin_dirs: Vec<PathBuf> = Vec::with_capacity(self.plugins.len());
        for dir in &self.plugins {
            let canonical = std::fs::canonicalize(dir)
                .with_context(|| format!("cannot read the plugin directory {}", dir.display()))?;
            if plugin_dirs.contains(&canonical) {
                anyhow::bail!(
                    "the plugin directory {} is given twice (--plugins, MCPBOX_PLUGINS or `plugins`)",
                    dir.display()
                );
            }
            plugin_dirs.push(canonical);
        }
        #[cfg(feature = "registry")]
        let manage = self.manage(&mut plugin_dirs)?;
        let cache_dir = if self.no_cache {
            None
        } else {
            self.cache_dir.clone().or_else(ComponentCache::default_dir)
        };
        let sizes = self.engine_sizes();
        let secrets = self.secrets()?;
        let credentials = self.credentials(&secrets)?;
        let runtime = RuntimeConfig {
            cache_dir,
            cache_max_bytes: self.cache_max_mib.saturating_mul(1 << 20),
            max_instances: sizes.max_instances,
            max_memory_bytes: sizes.max_memory_bytes,
            state: self.state.config(),
            secrets: Arc::new(crate::policy::config::SecretsCell::new(secrets)),
            spares: self.spare_instances,
        };
        let sections = Arc::new(
            self.sections(&plugin_dirs)
                .with_grants(self.grants(&plugin_dirs)?),
        );
        let trust = self.trust(&plugin_dirs);
        #[cfg(feature = "registry")]
        let trust = trust.managing(manage.as_ref().map(|m| m.directory.clone()));
        let transport = match &self.http {
            Some(address) => Transport::Http(Box::new(self.http_settings(address)?)),
            None => Transport::Stdio(StdioConfig {
                max_message_bytes: self.max_message_bytes,
                ..StdioConfig::default()
            }),
        };
        Ok(ServeSettings {
            plugin_dirs,
            runtime,
            limits: self.limits.limits(),
            timeout_ms: self.limits.timeout_ms,
            memory_mib: self.limits.memory_mib,
            session,
            call_ledger,
            page_size: self.page_size as usize,
            watch: !self.no_watch,
            reload_debounce: Duration::from_millis(self.reload_debounce_ms),
            startup_wait: Duration::from_millis(self.startup_wait_ms),
            config: self.loaded_config.clone(),
            sections,
            trust,
            metrics_addr: self.metrics_addr.clone(),
            audit_log: self.audit_log()?,
            transport,
            credentials,
            #[cfg(feature = "registry")]
            manage,
        })
    }

    /// Managed installs, when the configuration file enables them (`[manage]`): its directory
    /// made if missing and added, canonical, to `plugin_dirs` (last); refused over HTTP without
    /// a scope, with `--no-watch` (installs load live), and with a ceiling folder a managed
    /// plugin may write that holds a plugin directory or lies inside one.
    #[cfg(feature = "registry")]
    fn manage(
        &self,
        plugin_dirs: &mut Vec<PathBuf>,
    ) -> anyhow::Result<Option<crate::manage::ManageSettings>> {
        let Some(manage) = self.loaded_config.as_ref().and_then(|c| c.manage()) else {
            return Ok(None);
        };
        if !manage.enabled {
            return Ok(None);
        }
        let mut manage = manage.clone();
        if self.http.is_some() && manage.scope.is_none() {
            anyhow::bail!(
                "[manage] over HTTP needs a `scope`: only callers holding it may see and use the management tools"
            );
        }
        if self.no_watch {
            anyhow::bail!("[manage] installs plugins live: it cannot be used with --no-watch");
        }
        std::fs::create_dir_all(&manage.directory).with_context(|| {
            format!(
                "cannot make the [manage] directory {}",
                manage.directory.display()
            )
        })?;
        let canonical = std::fs::canonicalize(&manage.directory).with_context(|| {
            format!(
                "cannot read the [manage] directory {}",
                manage.directory.display()
            )
        })?;
        if plugin_dirs.contains(&canonical) {
            anyhow::bail!(
                "the [manage] directory {} is also a plugin directory: give it a directory of its own",
                manage.directory.display()
            );
        }
        plugin_dirs.push(canonical.clone());
        manage.directory = canonical;
        // The ceiling's folders as they really are: a folder granted is checked against them
        // once its own links are resolved (`manage` removes one a link leads elsewhere).
        for (path, _) in &mut manage.ceiling.dirs {
            if let Ok(real) = std::fs::canonicalize(&*path) {
                *path = real;
            }
        }
        // A managed plugin that could write a plugin directory could rewrite plugins and
        // their manifests (its own among them, loaded live).
        if let Some(why) = manage.ceiling.writes_into(plugin_dirs) {
            anyhow::bail!("[manage.ceiling] dirs: {why}");
        }
        // A limit the ceiling does not name is capped at the command line's: a managed
        // plugin never asks its way past the operator's defaults.
        let limits = self.limits.limits();
        let defaults = [
            ("fuel", limits.fuel),
            (
                "timeout-ms",
                u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
            ),
            (
                "memory-mib",
                u64::try_from(limits.memory_bytes >> 20).unwrap_or(u64::MAX),
            ),
            (
                "output-kib",
                u64::try_from(limits.output_bytes >> 10).unwrap_or(u64::MAX),
            ),
            (
                "result-kib",
                u64::try_from(limits.result_bytes >> 10).unwrap_or(u64::MAX),
            ),
        ];
        for (key, default) in defaults {
            manage
                .ceiling
                .limits
                .entry(key.to_owned())
                .or_insert(default);
        }
        Ok(Some(manage))
    }

    /// The providers of the configuration file (none without one).
    pub fn providers(&self) -> crate::credentials::Providers {
        self.loaded_config
            .as_ref()
            .map(|c| c.providers().clone())
            .unwrap_or_default()
    }

    /// The operator's credentials key (and the previous one, for rotation):
    /// `--credentials-key-file`, else the secrets file's `credentials-key`; `None` if neither.
    pub fn credentials_key(
        &self,
        secrets: &crate::policy::Secrets,
    ) -> anyhow::Result<Option<(crate::credentials::Key, Option<crate::credentials::Key>)>> {
        use crate::credentials::Key;
        let current =
            match &self.credentials_key_file {
                Some(path) => Some(Key::read(path)?),
                None => match secrets.get("credentials-key", None) {
                    Some(value) => Some(Key::parse(value.expose()).map_err(|e| {
                        anyhow::anyhow!("the secrets file's `credentials-key`: {e}")
                    })?),
                    None => None,
                },
            };
        let Some(current) = current else {
            return Ok(None);
        };
        let previous = match secrets.get("credentials-key-previous", None) {
            Some(value) => Some(Key::parse(value.expose()).map_err(|e| {
                anyhow::anyhow!("the secrets file's `credentials-key-previous`: {e}")
            })?),
            None => None,
        };
        Ok(Some((current, previous)))
    }

    /// Per-user credentials, when the configuration file names providers: refused without a
    /// key, or with a provider whose client secret the secrets file lacks.
    fn credentials(
        &self,
        secrets: &crate::policy::Secrets,
    ) -> anyhow::Result<Option<crate::compose::CredentialSettings>> {
        let providers = self.providers();
        if providers.is_empty() {
            return Ok(None);
        }
        let missing = providers.missing_secrets(|name| secrets.get(name, None).is_some());
        if !missing.is_empty() {
            anyhow::bail!("{} (--secrets)", missing.join("; "));
        }
        if let Some(problem) = providers.exchange_problem(self.has_oauth()) {
            anyhow::bail!("{problem}");
        }
        let key = match self.credentials_key(secrets)? {
            Some(key) => Some(key),
            // Exchanged tokens are held in memory only: nothing is sealed, so no key is needed.
            None if providers.iter().all(|p| p.exchange().is_some()) => Some((
                crate::credentials::Key::parse(&crate::credentials::Key::generate()?)?,
                None,
            )),
            None => None,
        };
        let Some((current, previous)) = key else {
            anyhow::bail!(
                "the configuration file names providers ([providers.NAME]) but no credentials key \
                 seals their tokens: give --credentials-key-file PATH (MCPBOX_CREDENTIALS_KEY_FILE; \
                 `mcpbox credentials keygen` makes a key), or a `credentials-key` entry in the \
                 secrets file"
            );
        };
        let cipher = crate::credentials::Cipher::new(&current, previous.as_ref())?;
        let public_url = match (&self.public_url, &self.oauth_resource) {
            (Some(url), _) => Some(url::Url::parse(url)?),
            (None, Some(resource)) if self.http.is_some() => {
                let resource = url::Url::parse(resource)
                    .map_err(|e| anyhow::anyhow!("--oauth-resource `{resource}`: {e}"))?;
                Some(url::Url::parse(&resource.origin().ascii_serialization())?)
            }
            _ => None,
        };
        Ok(Some(crate::compose::CredentialSettings {
            providers,
            cipher,
            public_url,
            link_listen: self.link_listen.clone(),
            link_wait: Duration::from_secs(self.link_wait_secs),
            ticket_ttl: Duration::from_secs(self.link_ticket_ttl_secs),
        }))
    }

    /// `--secrets`: read and checked (owner-only), or none. Logs how many it holds, never
    /// a value.
    pub fn secrets(&self) -> anyhow::Result<crate::policy::Secrets> {
        let Some(path) = &self.secrets else {
            return Ok(crate::policy::Secrets::none());
        };
        let secrets = read_secrets(Some(path))?;
        let (shared, own) = secrets.counts();
        tracing::info!(
            file = %path.display(),
            shared,
            per_caller = own,
            "plugin secrets read"
        );
        Ok(secrets)
    }

    /// `--audit-log`: a file, never standard output (in stdio mode it carries MCP only).
    fn audit_log(&self) -> anyhow::Result<Option<PathBuf>> {
        let Some(path) = &self.audit_log else {
            return Ok(None);
        };
        let stdout = ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"];
        if stdout.iter().any(|s| path.as_os_str() == *s) {
            anyhow::bail!(
                "--audit-log {} is standard output, which carries MCP in stdio mode: give the audit log a file of its own",
                path.display()
            );
        }
        Ok(Some(path.clone()))
    }

    /// The configuration file's `[plugin.NAME]` sections, warning of those that name no
    /// plugin in `dirs` (yet).
    fn sections(&self, dirs: &[PathBuf]) -> Sections {
        let Some(config) = &self.loaded_config else {
            return Sections::default();
        };
        tracing::info!(
            config = %config.path().display(),
            options = config.keys().count(),
            plugin_sections = config.sections().len(),
            "read the configuration file"
        );
        for name in config.sections().keys() {
            if !holds_plugin(dirs, name) {
                tracing::warn!(
                    config = %config.path().display(),
                    "[plugin.{name}] names no plugin in {}: there is no {name}.wasm (yet)",
                    shown(dirs)
                );
            }
        }
        Sections::new(config.path().to_owned(), config.sections().clone())
    }

    /// `--grant` and `--grant-dirs`, in that order.
    pub fn all_grants(&self) -> anyhow::Result<Vec<crate::policy::CommandLineGrant>> {
        let mut grants = self.grant.clone();
        if let Some((plugin, dirs)) = self.grant_dirs.split_first() {
            for dir in dirs {
                let grant = format!("{plugin}:dir={dir}")
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--grant-dirs {plugin} {dir}: {e}"))?;
                grants.push(grant);
            }
        }
        Ok(grants)
    }

    /// `--grant` and `--grant-dirs`, each logged (and warned about when it names no plugin in
    /// `dirs`).
    fn grants(&self, dirs: &[PathBuf]) -> anyhow::Result<crate::policy::CommandLineGrants> {
        let grants = self.all_grants()?;
        for grant in &grants {
            let mode = match grant.writable {
                Some(true) => "read-write",
                Some(false) => "read-only",
                None => "the manifest's mode, else read-write",
            };
            tracing::info!(
                plugin = %grant.plugin,
                dir = %grant.dir.display(),
                mode,
                "granted on the command line (within the manifest's directories, if it grants any)"
            );
            if !holds_plugin(dirs, &grant.plugin) {
                tracing::warn!(
                    "{} names no plugin in {}: there is no {}.wasm (yet)",
                    grant.flag(),
                    shown(dirs),
                    grant.plugin
                );
            }
        }
        Ok(crate::policy::CommandLineGrants::new(grants))
    }

    /// The signature policy of the configuration file, and the lock files of `dirs`,
    /// announced.
    fn trust(&self, dirs: &[PathBuf]) -> Trust {
        let trust = Trust::new(
            self.loaded_config
                .as_ref()
                .and_then(|c| c.signatures().cloned()),
        );
        if let Some(policy) = trust.policy() {
            for (plugin, keys) in &policy.require {
                tracing::info!(
                    config = %policy.source,
                    plugin = %plugin,
                    keys = %keys.join(", "),
                    "signature required (a plugin not signed by one of these keys is refused)"
                );
            }
        }
        for dir in dirs {
            let lock = dir.join(crate::registry::lock::LOCK_FILE);
            if lock.exists() {
                tracing::info!(
                    lock = %lock.display(),
                    "checking components against the lock file before loading them"
                );
            }
        }
        trust
    }

    /// The bearer tokens HTTP accepts: the configuration file's `[tokens.NAME]` and
    /// `--auth-token`. Refused beside OAuth (one way of knowing callers).
    fn tokens(&self) -> anyhow::Result<crate::principal::Tokens> {
        let mut tokens = self
            .loaded_config
            .as_ref()
            .map(|c| c.tokens().clone())
            .unwrap_or_default();
        if let Some(token) = &self.auth_token {
            if token.is_empty() {
                anyhow::bail!("--auth-token (MCPBOX_AUTH_TOKEN) must not be empty");
            }
            tokens
                .add_auth_token(token)
                .map_err(|e| anyhow::anyhow!("--auth-token: {e}"))?;
        }
        if !tokens.is_empty() && self.oauth_issuer.is_some() {
            anyhow::bail!(
                "the configuration file's [tokens] cannot be combined with --oauth-issuer: callers are known either by static tokens or by OAuth"
            );
        }
        if !tokens.is_empty() {
            tracing::info!(
                tokens = tokens.len(),
                "HTTP requests need a bearer token; each names its caller"
            );
        }
        Ok(tokens)
    }

    /// Each caller's budgets: the configuration file's `[budgets]`, else the defaults.
    fn budgets(&self) -> crate::principal::BudgetConfig {
        let config = self
            .loaded_config
            .as_ref()
            .map(|c| c.budgets().clone())
            .unwrap_or_default();
        let budget = config.default_budget();
        tracing::debug!(
            calls = budget.calls,
            sessions = budget.sessions,
            listen_streams = budget.listen_streams,
            request_bytes = budget.request_bytes,
            rate = budget.rate,
            burst = budget.burst,
            "each named caller's budget (the local user and --auth-token have none unless named)"
        );
        config
    }

    /// Whether mcpbox serves HTTP with its own OAuth (callers sign in with access tokens).
    pub fn has_oauth(&self) -> bool {
        self.http.is_some() && self.oauth_issuer.is_some() && self.oauth_resource.is_some()
    }

    /// The HTTP listener's settings.
    fn http_settings(&self, address: &str) -> anyhow::Result<HttpSettings> {
        let oauth = match (&self.oauth_issuer, &self.oauth_resource) {
            (Some(issuer), Some(resource)) => Some(crate::auth::OAuthConfig {
                issuer: issuer.clone(),
                resource: resource.clone(),
                jwks_url: self.oauth_jwks_url.clone(),
                scopes: self.oauth_scope.clone(),
                plugin_scopes: Vec::new(),
            }),
            _ => None,
        };
        Ok(HttpSettings {
            address: address.to_owned(),
            allowed_hosts: self.allowed_host.clone(),
            allowed_origins: self.allowed_origin.clone(),
            tokens: Arc::new(self.tokens()?),
            oauth,
            max_body_bytes: self.max_message_bytes,
            session_idle: Duration::from_secs(self.session_idle_secs),
            call_id_header: self
                .call_id_header
                .as_deref()
                .and_then(|name| axum::http::HeaderName::from_bytes(name.as_bytes()).ok()),
            status_page: !self.no_status_page,
        })
    }

    /// The settings of 2026-07-28 requests.
    fn session(&self) -> anyhow::Result<SessionSettings> {
        let state_key = match self.state_key.as_deref() {
            Some("") => anyhow::bail!("--state-key (MCPBOX_STATE_KEY) must not be empty"),
            Some(secret) => {
                if secret.len() < 16 {
                    tracing::warn!(
                        "--state-key is shorter than 16 bytes: a longer random secret is harder to guess"
                    );
                }
                StateKey::from_secret(secret)
            }
            None => StateKey::random(),
        };
        Ok(SessionSettings {
            state_key,
            list_ttl_ms: self.list_ttl_ms,
            read_ttl_ms: self.read_ttl_ms,
            max_input_rounds: self.max_input_rounds,
            limits: Arc::new(ProcessLimits::new(
                self.max_sessions,
                crate::transport::http::listen_stream_budget(
                    self.max_listen_streams,
                    crate::transport::http::raise_descriptor_limit(),
                ),
                self.max_request_bytes_in_flight,
            )),
            budgets: crate::server::Budgets::new(self.budgets()),
            tasks: Arc::new(crate::server::Tasks::new(
                Arc::new(crate::server::MemoryTasks::default()),
                crate::server::TaskSettings {
                    ttl: Duration::from_millis(self.task_ttl_ms),
                    max_per_caller: self.max_tasks_per_caller as usize,
                    share: crate::server::TaskShare {
                        records: usize::try_from(self.max_task_records_per_caller)
                            .unwrap_or(usize::MAX),
                        bytes: usize::try_from(self.max_task_bytes_per_caller)
                            .unwrap_or(usize::MAX),
                    },
                },
            )),
            ..SessionSettings::default()
        })
    }
}

/// Whether one of `dirs` holds the plugin `name` (`name.wasm`).
pub(super) fn holds_plugin(dirs: &[PathBuf], name: &str) -> bool {
    dirs.iter()
        .any(|dir| dir.join(format!("{name}.wasm")).exists())
}

/// `dirs`, for messages: `a, b`.
pub(super) fn shown(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|dir| dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The call ledger `--call-id-header` needs: in the shared Redis, the only store every
/// replica behind the balancer sees (a per-process record could not see a retry that lands on
/// another replica, which is the case it exists for).
fn call_ledger(args: &ServeArgs) -> anyhow::Result<Option<Arc<crate::kv::calls::CallLedger>>> {
    let Some(header) = &args.call_id_header else {
        return Ok(None);
    };
    if args.http.is_none() {
        anyhow::bail!(
            "--call-id-header {header} (MCPBOX_CALL_ID_HEADER) needs --http: it names a header a balancer sets on HTTP requests"
        );
    }
    match args.state.config() {
        StateConfig::Redis(url) => {
            let ledger = crate::kv::calls::CallLedger::connect(&url)
                .map_err(|e| anyhow::anyhow!("--call-id-header {header}: {e}"))?;
            tracing::info!(
                header = %header,
                "tool calls carrying {header} are recorded in Redis and run at most once across retries"
            );
            Ok(Some(Arc::new(ledger)))
        }
        other => anyhow::bail!(
            "--call-id-header {header} (MCPBOX_CALL_ID_HEADER) needs a shared state store: \
             give --state redis://… (the store is {other}); replicas record calls there so a \
             retry on another replica does not run a call again"
        ),
    }
}
