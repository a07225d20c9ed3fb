//! The arguments of every command, as clap parses them (each flag with an `MCPBOX_*`
//! environment fallback), raw: `settings` checks `serve`'s as a whole and turns them into
//! the settings it runs with ([`ServeArgs::settings`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;

use crate::config::ConfigFile;
use crate::engine::RuntimeConfig;
use crate::policy::Limits;
use crate::transport::stdio::StdioConfig;

pub use super::state_args::StateArgs;

/// How to reach registries (`pull`, `push` and `sign` take the same flags). Credentials come
/// from `MCPBOX_REGISTRY_USERNAME` and `MCPBOX_REGISTRY_PASSWORD` (or a bearer token in
/// `MCPBOX_REGISTRY_TOKEN`), else from the Docker configuration (`docker login`), else none.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// A registry to reach over plain HTTP instead of HTTPS (`host` or `host:port`;
    /// repeatable, or comma-separated in the variable). Only for a registry on a network you
    /// trust: digests and signatures are still checked, but nothing else is private.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "MCPBOX_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure: Vec<String>,

    /// How long a registry may take to accept a connection, and then each read of its answer,
    /// in seconds; past it the command fails, naming the registry.
    #[arg(
        long = "registry-timeout",
        value_name = "SECONDS",
        env = "MCPBOX_REGISTRY_TIMEOUT",
        default_value_t = crate::registry::DEFAULT_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub timeout: u64,
}

#[cfg(feature = "registry")]
impl RegistryArgs {
    /// A registry client as these arguments say.
    pub(super) fn client(
        &self,
    ) -> Result<crate::registry::Registry, crate::registry::RegistryError> {
        crate::registry::Registry::new(&self.insecure, Duration::from_secs(self.timeout))
    }
}

/// Arguments of `mcpbox pull`.
#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// What to pull: `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:DIGEST`. Without
    /// it, `--locked` pulls every plugin the lock file holds, at its locked digest.
    #[arg(value_name = "REF")]
    pub reference: Option<String>,

    /// The plugin directory to write `NAME.wasm` and `mcpbox.lock` into [default: the
    /// configuration file's `plugins`].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub to: Option<PathBuf>,

    /// The plugin's name [default: the repository's last segment].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Refuse anything the lock file does not pin: the tag must still resolve to the digest it
    /// recorded.
    #[arg(long)]
    pub locked: bool,

    /// Require a signature by this public key (PEM; repeatable), besides what the
    /// configuration's `[signatures]` requires.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub key: Vec<PathBuf>,

    /// The configuration file whose `[signatures]` policy and `plugins` directory apply.
    #[arg(long, env = "MCPBOX_CONFIG", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,

    /// How to reach registries.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `mcpbox push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The component.
    #[arg(value_name = "FILE.wasm", value_hint = clap::ValueHint::FilePath)]
    pub file: PathBuf,

    /// Where to publish it: `REGISTRY/REPOSITORY:TAG`.
    #[arg(value_name = "REF")]
    pub reference: String,

    /// Attach this plugin manifest (the grants and limits the plugin asks for) to the artifact,
    /// as a layer of its own, so that its digest and signature cover it. `pull` shows it and
    /// applies nothing; a managed install asks the user with it, capped by the operator.
    #[arg(long, value_name = "FILE.toml", value_hint = clap::ValueHint::FilePath)]
    pub manifest: Option<PathBuf>,

    /// A description for people, as the artifact's `org.opencontainers.image.description`
    /// (what a managed install's search matches, with its name and tools).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,

    /// Do not list the component's tools into the artifact (`dev.mcpbox.tools`). By default
    /// `push` lists them as `mcpbox inspect` does (the component in the sandbox, with no
    /// grants), so that a search finds them without running anything.
    #[arg(long)]
    pub no_tools: bool,

    /// How to reach registries.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `mcpbox sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// A component file (signed into `FILE.wasm.sig`) or a registry reference (signed in the
    /// registry, beside the artifact).
    #[arg(value_name = "FILE.wasm|REF")]
    pub target: String,

    /// The private key (cosign's encrypted PEM, password in `COSIGN_PASSWORD`; or an
    /// unencrypted PKCS#8 PEM).
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub key: PathBuf,

    /// How to reach registries.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `mcpbox keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Where to write the keys: `PREFIX.key` and `PREFIX.pub`.
    #[arg(value_name = "PREFIX", default_value = "mcpbox")]
    pub prefix: PathBuf,
}

/// Arguments of `mcpbox check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

/// Arguments of `mcpbox new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The plugin's name (lower-case letters, digits, `_`, `-`): its component is
    /// `NAME.wasm` (with `-` as `_`), and that is its name in mcpbox.
    pub name: String,

    /// The language.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: crate::scaffold::Lang,

    /// The WASI version the component targets: 0.2 (synchronous calls), or 0.3 (Rust and
    /// Python: async tools that stream their output).
    #[arg(long, value_enum, default_value = "0.2")]
    pub wasi: crate::scaffold::Wasi,

    /// Where to write the project [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Rust: the mcpbox-sdk crate to depend on by path [default: the checkout mcpbox was built
    /// from, if it is still there; else the crates.io version].
    #[arg(long, value_name = "DIR")]
    pub sdk: Option<PathBuf>,
}

/// Arguments of `mcpbox state`.
#[derive(Debug, clap::Args)]
pub struct StateCommandArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: StateAction,

    /// Where the state is.
    #[command(flatten)]
    pub state: StateArgs,
}

/// `mcpbox state` actions. A plugin's state is keyed by its name (its file name without
/// `.wasm`); removing the plugin does not remove its state.
#[derive(Debug, Subcommand)]
pub enum StateAction {
    /// List a plugin's keys: bucket, key and value size, then its usage (and, without
    /// `--principal`, how many callers have buckets of their own).
    Ls {
        /// The plugin's name.
        plugin: String,
        /// One caller's own buckets instead, by principal key (`oauth:ISSUER sub:SUBJECT`,
        /// `token:NAME` or `local`, as the audit log names callers).
        #[arg(long, value_name = "KEY")]
        principal: Option<String>,
    },
    /// Print one value (text as it is; anything else as base64).
    Get {
        /// The plugin's name.
        plugin: String,
        /// The key.
        key: String,
        /// The bucket.
        #[arg(long, default_value = "default")]
        bucket: String,
        /// In one caller's own buckets, by principal key.
        #[arg(long, value_name = "KEY")]
        principal: Option<String>,
    },
    /// Remove one key, or (without a key) all of a plugin's state: every caller's own too,
    /// or with `--principal`, all that one caller's (a user leaving).
    Rm {
        /// The plugin's name.
        plugin: String,
        /// The key (all of the plugin's keys in every bucket if absent).
        key: Option<String>,
        /// The bucket of the key.
        #[arg(long, default_value = "default")]
        bucket: String,
        /// In one caller's own buckets, by principal key.
        #[arg(long, value_name = "KEY")]
        principal: Option<String>,
    },
}

/// Arguments of `mcpbox inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A plugin component (`name.wasm`, with `name.toml` beside it) or a plugin directory.
    pub plugin: PathBuf,

    /// Where compiled plugins are cached (as `serve --cache-dir`).
    #[arg(long, env = "MCPBOX_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// A configuration file whose `[plugin.NAME]` sections govern the plugins, as with
    /// `serve --config` (grants, limits, prefix, allow- and deny-lists).
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,

    /// The secrets file plugins' `[config]` keys name (as `serve --secrets`); values are
    /// never shown.
    #[arg(long, env = "MCPBOX_SECRETS", value_name = "PATH")]
    pub secrets: Option<PathBuf>,
    /// Grant a plugin a directory, as `serve --grant` does (repeatable).
    #[arg(
        long,
        env = "MCPBOX_GRANT",
        value_name = "PLUGIN:dir=PATH[:ro]",
        value_delimiter = '\n'
    )]
    pub grant: Vec<crate::policy::CommandLineGrant>,
}

/// Arguments of `mcpbox skills`.
#[derive(Debug, clap::Args)]
pub struct SkillsArgs {
    /// The plugin component to put the skills into (rewritten in place, or see `--output`).
    pub plugin: PathBuf,

    /// The directory of skills: each directory in it holding a `SKILL.md` is a skill. Leave it
    /// out to take the skills out of the component.
    pub dir: Option<PathBuf>,

    /// Write the component here instead of over `PLUGIN`.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--secrets PATH` read and checked, or none.
pub fn read_secrets(path: Option<&Path>) -> anyhow::Result<crate::policy::Secrets> {
    Ok(match path {
        Some(path) => crate::policy::Secrets::load(path)?,
        None => crate::policy::Secrets::none(),
    })
}

/// The limits of a call into a plugin, as flags (`serve` and `call` take the same).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LimitArgs {
    /// Fuel (a deterministic CPU budget) for each call into a plugin.
    #[arg(long, env = "MCPBOX_FUEL", default_value_t = Limits::DEFAULT_FUEL)]
    pub fuel: u64,

    /// Wall-clock limit for each call into a plugin, in milliseconds.
    #[arg(long, env = "MCPBOX_TIMEOUT_MS", default_value_t = Limits::DEFAULT_TIMEOUT.as_millis() as u64)]
    pub timeout_ms: u64,

    /// Memory limit for each plugin instance, in MiB.
    #[arg(long, env = "MCPBOX_MEMORY_MIB", default_value_t = (Limits::DEFAULT_MEMORY_BYTES >> 20) as u64)]
    pub memory_mib: u64,

    /// The longest wall-clock limit a manifest may give its tasks (`[tasks] timeout-ms`), in
    /// milliseconds.
    #[arg(long, env = "MCPBOX_TASK_TIMEOUT_MS", default_value_t = Limits::DEFAULT_TASK_TIMEOUT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub task_timeout_ms: u64,
}

impl LimitArgs {
    /// The memory limit in bytes.
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// The limits these flags set (the others at their defaults).
    pub fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel,
            timeout: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_bytes(),
            task_timeout: Duration::from_millis(self.task_timeout_ms),
            ..Limits::default()
        }
    }
}

/// Arguments of `mcpbox call`.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// A plugin component (`name.wasm`, governed by `name.toml` beside it) or a plugin
    /// directory.
    pub plugin: PathBuf,

    /// The tool to call.
    #[arg(required_unless_present_any = ["prompt", "resource"])]
    pub tool: Option<String>,

    /// Get this prompt instead of calling a tool.
    #[arg(long, conflicts_with_all = ["tool", "resource"])]
    pub prompt: Option<String>,

    /// Read the resource at this URI instead of calling a tool.
    #[arg(long, conflicts_with_all = ["tool", "prompt"])]
    pub resource: Option<String>,

    /// The arguments, as a JSON object (a prompt's are strings).
    #[arg(long, default_value = "{}")]
    pub args: String,

    /// The limits of the call, as `serve` takes them.
    #[command(flatten)]
    pub limits: LimitArgs,

    /// Where compiled plugins are cached (as `serve --cache-dir`).
    #[arg(long, env = "MCPBOX_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Where plugins' key-value state is (as `serve` takes it).
    #[command(flatten)]
    pub state: StateArgs,

    /// The secrets file the plugin's `[config]` keys name (as `serve --secrets`).
    #[arg(long, env = "MCPBOX_SECRETS", value_name = "PATH")]
    pub secrets: Option<PathBuf>,
}

/// What separates directories in a list of them, as in `PATH`.
const PATH_LIST_SEPARATOR: char = if cfg!(windows) { ';' } else { ':' };

/// Arguments of `mcpbox serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Serve MCP over HTTP on this address (`127.0.0.1:8080`, or a port for loopback)
    /// instead of stdio: Streamable HTTP at `/mcp`, 2024-11-05 SSE at `/sse`.
    #[arg(long, env = "MCPBOX_HTTP", value_name = "ADDR")]
    pub http: Option<String>,

    /// Also serve Prometheus metrics at `/metrics` on this address (`127.0.0.1:9464`, or a
    /// port for loopback), apart from MCP and without its token: for stdio mode, or to scrape
    /// on a separate network. Over HTTP, `/metrics` is on the MCP listener too.
    #[arg(long, env = "MCPBOX_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<String>,

    /// Export OpenTelemetry traces over OTLP/HTTP to this collector (`http://127.0.0.1:4318`):
    /// a span per request, parented on the client's `traceparent`, with the plugin call and
    /// its host calls beneath it. Off by default (and free when off).
    #[arg(long, env = "MCPBOX_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,

    /// Append one JSON line per `tools/call`, `prompts/get`, `resources/read` and
    /// `completion/complete`, and per refusal, to this file (created 0600; reopened on SIGHUP):
    /// who, which plugin and item, how it ended, how long, fuel. Never arguments or results.
    #[arg(long, env = "MCPBOX_AUDIT_LOG", value_name = "PATH")]
    pub audit_log: Option<PathBuf>,

    /// Plugins' secrets: a TOML file readable by its owner alone (mode 0600) whose values
    /// plugins' `[config]` keys name with `{ secret = "NAME" }`; a `[principal."KEY"]` table
    /// holds one caller's own. Read at start and again on SIGHUP.
    #[arg(long, env = "MCPBOX_SECRETS", value_name = "PATH", value_hint = clap::ValueHint::FilePath, value_parser = path_or_none())]
    pub secrets: Option<PathBuf>,

    /// HTTP: require `Authorization: Bearer <TOKEN>` on every request.
    #[arg(
        long,
        env = "MCPBOX_AUTH_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub auth_token: Option<String>,

    /// HTTP: accept OAuth 2.1 access tokens (JWTs) from this authorization server (its
    /// issuer identifier) instead of a static token; needs --oauth-resource.
    #[arg(
        long,
        env = "MCPBOX_OAUTH_ISSUER",
        value_name = "URL",
        requires = "oauth_resource",
        conflicts_with = "auth_token"
    )]
    pub oauth_issuer: Option<String>,

    /// HTTP with OAuth: this server's canonical URI (`https://mcp.example.com/mcp`), which
    /// tokens must name in their audience (RFC 8707).
    #[arg(
        long,
        env = "MCPBOX_OAUTH_RESOURCE",
        value_name = "URI",
        requires = "oauth_issuer"
    )]
    pub oauth_resource: Option<String>,

    /// HTTP with OAuth: where the issuer's keys (JWKS) are [default: `jwks_uri` from its
    /// metadata].
    #[arg(
        long,
        env = "MCPBOX_OAUTH_JWKS_URL",
        value_name = "URL",
        requires = "oauth_issuer"
    )]
    pub oauth_jwks_url: Option<String>,

    /// HTTP with OAuth: a scope every token must carry (repeatable; plugins may require more
    /// with `scopes` in their manifest).
    #[arg(
        long,
        env = "MCPBOX_OAUTH_SCOPES",
        value_delimiter = ',',
        value_name = "SCOPE",
        requires = "oauth_issuer"
    )]
    pub oauth_scope: Vec<String>,

    /// HTTP: another host name that `Host` and `Origin` may name, on any port (repeatable;
    /// behind a load balancer, the name clients use). The bound address, and on loopback
    /// `localhost`, are always allowed on the bound port.
    #[arg(
        long,
        env = "MCPBOX_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOST"
    )]
    pub allowed_host: Vec<String>,

    /// HTTP: the origin of a browser client to allow (`https://app.example.com`,
    /// `http://localhost:6274`; repeatable): its requests pass the `Origin` check and get
    /// CORS headers. The server's own origin is always allowed.
    #[arg(
        long,
        env = "MCPBOX_ALLOWED_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGIN",
        value_parser = parse_origin
    )]
    pub allowed_origin: Vec<String>,

    /// HTTP: do not serve the status page at `/` (the plugins, their grants, limits and calls,
    /// names refused, recent reloads; behind the same checks as `/mcp`).
    #[arg(long, env = "MCPBOX_NO_STATUS_PAGE")]
    pub no_status_page: bool,

    /// HTTP: the most 2025-11-25 and 2024-11-05 SSE sessions open at once; past it, `initialize`
    /// and `GET /sse` get 503 with `Retry-After`.
    #[arg(long, env = "MCPBOX_MAX_SESSIONS", default_value_t = crate::server::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,

    /// The most listen streams open at once (2026-07-28 `subscriptions/listen`, 2025-11-25
    /// GET streams); fewer when the open-descriptor limit leaves less after its reserve for
    /// calls. Past it: 503 with `Retry-After`, or a JSON-RPC error on stdio.
    #[arg(long, env = "MCPBOX_MAX_LISTEN_STREAMS", default_value_t = crate::server::DEFAULT_MAX_LISTEN_STREAMS)]
    pub max_listen_streams: usize,

    /// The most bytes of requests being read or served at once, in bytes (an HTTP request
    /// counts its declared length, or --max-message-bytes). Past it: 503 with `Retry-After`,
    /// or a JSON-RPC error on stdio.
    #[arg(long, env = "MCPBOX_MAX_REQUEST_BYTES_IN_FLIGHT", default_value_t = crate::server::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes_in_flight: usize,

    /// HTTP: end sessions idle this long, in seconds.
    #[arg(long, env = "MCPBOX_SESSION_IDLE_SECS", default_value_t = 1800)]
    pub session_idle_secs: u64,

    /// A directory of plugins (`*.wasm` components) to serve (required here, in the
    /// environment, or in the configuration file). Repeatable, each watched: a plugin's name is
    /// the first directory's that holds it (a plugin of the same name in a later one is
    /// skipped, with an error naming both files). The environment variable holds several
    /// separated as PATH is (`:`, or `;` on Windows).
    #[arg(
        long,
        env = "MCPBOX_PLUGINS",
        value_name = "DIR",
        value_hint = clap::ValueHint::DirPath,
        value_delimiter = PATH_LIST_SEPARATOR,
        value_parser = path_or_none()
    )]
    pub plugins: Vec<PathBuf>,

    /// Read options and plugin sections from this TOML file (reference:
    /// `host/deploy/mcpbox.toml`);
    /// flags and environment variables override it. Plugin sections are reloaded when it
    /// changes.
    #[arg(long, env = "MCPBOX_CONFIG", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,

    /// Grant a plugin a directory without editing its manifest: `PLUGIN:dir=PATH`
    /// (read-write), `PLUGIN:dir=PATH:ro` or `:rw` (repeatable; the environment variable holds
    /// several, one a line). Within the directories the plugin's manifest grants, if it names
    /// any that exist (only narrower: inside one, no wider a mode); those replace them.
    #[arg(
        long,
        env = "MCPBOX_GRANT",
        value_name = "PLUGIN:dir=PATH[:ro]",
        value_delimiter = '\n'
    )]
    pub grant: Vec<crate::policy::CommandLineGrant>,

    /// Grant one plugin several directories: `--grant-dirs PLUGIN DIR…` (once), each DIR as
    /// `--grant PLUGIN:dir=DIR` takes it (`:ro` allowed), none at all granting nothing. For a
    /// client that passes a list of folders as arguments of their own (an MCP bundle's
    /// `multiple` directory setting); the values end at the next flag.
    #[arg(long, num_args = 1.., value_names = ["PLUGIN", "DIR"], action = clap::ArgAction::Set)]
    pub grant_dirs: Vec<String>,

    /// The configuration file as read (set by [`Cli::load`]).
    #[arg(skip)]
    pub loaded_config: Option<Arc<ConfigFile>>,

    /// Items per page of `tools/list`, `prompts/list`, `resources/list` and
    /// `resources/templates/list`.
    #[arg(long, env = "MCPBOX_PAGE_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub page_size: u32,

    /// The largest message accepted (a line on stdin, a request body over HTTP), in bytes.
    #[arg(long, env = "MCPBOX_MAX_MESSAGE_BYTES", default_value_t = StdioConfig::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,

    /// The default limits of each call into a plugin (a manifest may override them).
    #[command(flatten)]
    pub limits: LimitArgs,

    /// Do not watch the plugin directory: serve the plugins loaded at startup, and advertise
    /// exactly what they offer.
    #[arg(long, env = "MCPBOX_NO_WATCH")]
    pub no_watch: bool,

    /// How long a changed plugin file must be quiet before it is reloaded, in milliseconds.
    #[arg(long, env = "MCPBOX_RELOAD_DEBOUNCE_MS", default_value_t = 200)]
    pub reload_debounce_ms: u64,

    /// How long startup waits for compiled plugins to list what they offer before serving, in
    /// milliseconds; a plugin still listing then is added when it is done (clients hear
    /// `list_changed`, HTTP `/readyz` says 503 until then).
    #[arg(long, env = "MCPBOX_STARTUP_WAIT_MS", default_value_t = 2000)]
    pub startup_wait_ms: u64,

    /// Where compiled plugins are cached [default: $XDG_CACHE_HOME/mcpbox or ~/.cache/mcpbox].
    #[arg(long, env = "MCPBOX_CACHE_DIR", value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cache_dir: Option<PathBuf>,

    /// The most the compiled-plugin cache may hold, in MiB; the least recently used entries are
    /// removed first.
    #[arg(long, env = "MCPBOX_CACHE_MAX_MIB", default_value_t = crate::engine::DEFAULT_CACHE_MAX_BYTES >> 20)]
    pub cache_max_mib: u64,

    /// Compile every plugin at load; keep no compiled plugins on disk.
    #[arg(long, env = "MCPBOX_NO_CACHE")]
    pub no_cache: bool,

    /// How many plugin instances may run at once; further calls wait for a slot.
    #[arg(long, env = "MCPBOX_MAX_INSTANCES", default_value_t = RuntimeConfig::default().max_instances)]
    pub max_instances: u32,

    /// Which plugins' calls find their instance prepared ahead of them (made after the
    /// previous call, off its answer's path; at most one per plugin and an eighth of
    /// `--max-instances`, dropped unused after a second).
    #[arg(long, env = "MCPBOX_SPARE_INSTANCES", value_enum, default_value_t = crate::engine::SpareInstances::Auto)]
    pub spare_instances: crate::engine::SpareInstances,

    /// The secret that signs `requestState` of 2026-07-28 input requests; replicas that share
    /// it accept each other's state [default: random, for this process only].
    #[arg(
        long,
        env = "MCPBOX_STATE_KEY",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub state_key: Option<String>,

    /// 2026-07-28: the most rounds of input requests (`input_required`) one request may make;
    /// past that, a plugin's questions to the client fail.
    #[arg(long, env = "MCPBOX_MAX_INPUT_ROUNDS", default_value_t = crate::server::DEFAULT_MAX_INPUT_ROUNDS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_input_rounds: u32,

    /// 2026-07-28, tasks extension: how long a task (its outcome included) is kept after its
    /// last change, in milliseconds (its `ttlMs`).
    #[arg(long, env = "MCPBOX_TASK_TTL_MS", default_value_t = crate::server::DEFAULT_TASK_TTL.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1000..))]
    pub task_ttl_ms: u64,

    /// 2026-07-28, tasks extension: the most tasks one caller may run at once on this
    /// process; more are refused (-32029) until one ends.
    #[arg(long, env = "MCPBOX_MAX_TASKS_PER_CALLER", default_value_t = crate::server::DEFAULT_MAX_TASKS_PER_CALLER as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tasks_per_caller: u32,

    /// 2026-07-28, tasks extension: the most task records one caller may keep, running or
    /// ended, until they expire (counted across replicas with `--state redis://…`); past it,
    /// a call of a tool that may run as a task runs as a plain call, and one of a tool that
    /// only runs as a task is refused (-32029). The default is an eighth of the 10,000 one
    /// process keeps in memory.
    #[arg(long, env = "MCPBOX_MAX_TASK_RECORDS_PER_CALLER", default_value_t = crate::server::DEFAULT_TASK_RECORDS_PER_CALLER as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_task_records_per_caller: u64,

    /// 2026-07-28, tasks extension: the most bytes of task records (arguments and outcomes)
    /// one caller may keep until they expire, like `--max-task-records-per-caller`; a caller
    /// keeping none may keep one record of any size a task keeps. The default is an eighth of
    /// the 256 MiB one process keeps in memory.
    #[arg(long, env = "MCPBOX_MAX_TASK_BYTES_PER_CALLER", default_value_t = crate::server::DEFAULT_TASK_BYTES_PER_CALLER as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_task_bytes_per_caller: u64,

    /// 2026-07-28: `ttlMs` on `server/discover` and list results, in milliseconds.
    #[arg(long, env = "MCPBOX_LIST_TTL_MS", default_value_t = 60_000)]
    pub list_ttl_ms: u64,

    /// 2026-07-28: `ttlMs` on `resources/read` results, in milliseconds (plugins compute a
    /// resource on every read, so 0 by default: do not reuse).
    #[arg(long, env = "MCPBOX_READ_TTL_MS", default_value_t = 0)]
    pub read_ttl_ms: u64,

    /// HTTP behind a balancer: the header in which the balancer names each request (HAProxy's
    /// `unique-id-header`, such as `X-Request-Id`). Calls of tools not annotated read-only or
    /// idempotent are then recorded under that id in the shared state store, so a request the
    /// balancer retries never runs its call twice. Only behind a balancer that sets the header
    /// and deletes any the client sent; needs `--http` and `--state redis://…`.
    #[arg(long, env = "MCPBOX_CALL_ID_HEADER", value_name = "HEADER", value_parser = parse_header_name)]
    pub call_id_header: Option<String>,

    /// Per-user credentials (the configuration file's `[providers.NAME]`): the operator's key
    /// that seals every linked account's tokens in the state store, a file readable by its
    /// owner alone (mode 0600) holding 32 bytes as base64 or 64 hex digits (`mcpbox credentials
    /// keygen` makes one). Without it, a `credentials-key` entry of the secrets file; with
    /// providers configured and neither, mcpbox refuses to start. A `credentials-key-previous`
    /// entry of the secrets file still opens records sealed before a rotation.
    #[arg(long, env = "MCPBOX_CREDENTIALS_KEY_FILE", value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub credentials_key_file: Option<PathBuf>,

    /// Per-user credentials: where browsers reach this mcpbox (`https://mcp.example.com`), for
    /// the link routes (`/oauth/link/start`, `/oauth/link/callback`, the redirect URI to
    /// register at each provider) [default: the origin of --oauth-resource; else the bound
    /// address, if loopback].
    #[arg(long, env = "MCPBOX_PUBLIC_URL", value_name = "URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,

    /// Per-user credentials over stdio: the loopback address where the link routes listen
    /// (the redirect URI is `http://ADDR/oauth/link/callback`; fix the port for a provider
    /// that needs it registered exactly).
    #[arg(
        long,
        env = "MCPBOX_LINK_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:0"
    )]
    pub link_listen: String,

    /// Per-user credentials: how long a tool call waits for its caller to link an account, in
    /// seconds; 0 never waits (a 2025-11-25 client then gets -32042 with the link at once).
    #[arg(long, env = "MCPBOX_LINK_WAIT_SECS", default_value_t = 120)]
    pub link_wait_secs: u64,

    /// Per-user credentials: how long a link request (its URL) stays valid, in seconds.
    #[arg(long, env = "MCPBOX_LINK_TICKET_TTL_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub link_ticket_ttl_secs: u64,

    /// Where plugins' key-value state is kept.
    #[command(flatten)]
    pub state: StateArgs,
}

/// A `--call-id-header`: an HTTP header name.
pub(super) fn parse_header_name(text: &str) -> Result<String, String> {
    axum::http::HeaderName::from_bytes(text.as_bytes())
        .map(|name| name.as_str().to_owned())
        .map_err(|_| format!("`{text}` is not an HTTP header name"))
}

/// A `--public-url`: `https://…` (or `http://` on a loopback host), with no query.
pub(super) fn parse_public_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => {
            return Err(format!(
                "`{text}` must be https:// (http:// only on a loopback host): browsers are sent \
                 there with a link cookie"
            ));
        }
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must have no query or fragment"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// An `--allowed-origin`: `scheme://host[:port]`, nothing more (a browser's `Origin`).
pub(super) fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim_end_matches('/').to_ascii_lowercase();
    let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
        matches!(scheme, "http" | "https")
            && !rest.is_empty()
            && !rest.contains(['/', '?', '#', ' '])
    });
    if valid {
        Ok(origin)
    } else {
        Err(format!(
            "`{text}` is not an origin: expected scheme://host[:port], such as https://app.example.com"
        ))
    }
}

/// A path that may be empty (then dropped as "none" by [`super::Cli::load`]): an MCP bundle's
/// unset setting arrives as `--plugins=`. clap's own path parser refuses an empty value.
fn path_or_none() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser as _;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}
