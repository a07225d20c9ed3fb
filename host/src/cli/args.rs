//! The arguments of every command, as clap parses them (each flag with an `MCPBOX_*`
//! environment fallback), and the one step that checks `serve`'s arguments as a whole and
//! turns them into [`ServeSettings`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Subcommand;

use crate::config::ConfigFile;
use crate::engine::{ComponentCache, EngineSizes, RuntimeConfig};
use crate::host::{HttpSettings, ServeSettings, Transport};
use crate::kv::StateConfig;
use crate::policy::{Limits, Sections};
use crate::registry::trust::Trust;
use crate::server::{HostLimits, ModernSettings, StateKey};
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
    /// instead of stdio: Streamable HTTP at `/mcp`, legacy SSE at `/sse`.
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

    /// HTTP: the most 2025-11-25 and legacy SSE sessions open at once; past it, `initialize`
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
        crate::host::raise_open_file_limit();
        let modern = Arc::new(self.modern()?);
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
            modern,
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
        })
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
    ) -> anyhow::Result<Option<crate::host::CredentialSettings>> {
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
        Ok(Some(crate::host::CredentialSettings {
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
    fn modern(&self) -> anyhow::Result<ModernSettings> {
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
        Ok(ModernSettings {
            state_key,
            list_ttl_ms: self.list_ttl_ms,
            read_ttl_ms: self.read_ttl_ms,
            max_input_rounds: self.max_input_rounds,
            limits: Arc::new(HostLimits::new(
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
            ..ModernSettings::default()
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

/// A `--call-id-header`: an HTTP header name.
pub(super) fn parse_header_name(text: &str) -> Result<String, String> {
    axum::http::HeaderName::from_bytes(text.as_bytes())
        .map(|name| name.as_str().to_owned())
        .map_err(|_| format!("`{text}` is not an HTTP header name"))
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
    let origin = text.trim_end_matches('/');
    let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
        matches!(scheme, "http" | "https")
            && !rest.is_empty()
            && !rest.contains(['/', '?', '#', ' '])
    });
    if valid {
        Ok(origin.to_ascii_lowercase())
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
