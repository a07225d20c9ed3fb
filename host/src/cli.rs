//! The command line: arguments (each flag with an `MCPBOX_*` environment fallback), logging
//! set-up, and running a command (`serve`; `call`, `inspect`, `new`, `push`, `sign` and
//! `keygen` for plugin authors; `state`, `check` and `pull` for operators). The registry
//! commands' work is `registry`'s; this module parses their arguments and reads the
//! configuration's policy for `pull`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::author::{self, CallRequest};
use crate::catalog::{EventHub, PluginSet, load_directory};
use crate::config::{ConfigError, ConfigFile};
use crate::engine::{ComponentCache, Runtime, RuntimeConfig};
use crate::kv::{StateConfig, StateService};
use crate::policy::{Limits, Sections};
use crate::registry::trust::Trust;
use crate::server::{HostLimits, Mode, ModernSettings, Session, StateKey};
use crate::transport::http::{self, HttpConfig, Readiness};
use crate::transport::stdio::{self, StdioConfig};
use crate::watch::Reloader;

/// mcpbox: serve MCP tools, prompts and resources from sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "mcpbox", version, about)]
pub struct Cli {
    /// Log level or filter for the log on stderr: error, warn, info, debug, trace, or
    /// directives such as `info,plugin=debug`.
    #[arg(long, global = true, env = "MCPBOX_LOG", default_value = "info")]
    pub log: String,

    /// How log lines are written: `text` for people, `json` (one object per line, with the
    /// fields apart) for log shippers.
    #[arg(
        long,
        global = true,
        env = "MCPBOX_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The format of the log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin and stdout with the plugins in a directory.
    Serve(Box<ServeArgs>),
    /// Run one request against a plugin, with the sandbox and limits `serve` uses, and print
    /// the MCP result (exit status 1 when it is an error or `isError`).
    Call(CallArgs),
    /// Say what a plugin (or every plugin in a directory) offers and asks for: interfaces,
    /// tools with schemas, prompts, resources, names refused and why, grants and limits.
    Inspect(InspectArgs),
    /// Look at or clear the key-value state plugins keep (`wasi:keyvalue`).
    State(StateCommandArgs),
    /// Write a new plugin project (Rust, Python or JavaScript) that builds on its own, with
    /// a test.
    New(NewArgs),
    /// Check a configuration file (every key, value and plugin section) without serving;
    /// exit status 1 if it is invalid.
    Check(CheckArgs),
    /// Fetch a plugin from an OCI registry into a plugin directory: checked against its digest
    /// and the signature policy, recorded in the directory's lock file (`mcpbox.lock`).
    Pull(PullArgs),
    /// Publish a component to an OCI registry as a WebAssembly artifact (the layout `wkg`
    /// uses).
    Push(PushArgs),
    /// Sign a component in a registry (a cosign signature stored beside it) or a component
    /// file (a detached signature, `FILE.wasm.sig`).
    Sign(SignArgs),
    /// Make a key pair for signing (cosign's format): `PREFIX.key`, encrypted with
    /// `COSIGN_PASSWORD`, and `PREFIX.pub`.
    Keygen(KeygenArgs),
}

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

impl RegistryArgs {
    /// A registry client as these arguments say.
    fn client(&self) -> Result<crate::registry::Registry, crate::registry::RegistryError> {
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

/// Where plugins' key-value state lives (`serve`, `call` and `state` take the same flags).
#[derive(Debug, Clone, clap::Args)]
pub struct StateArgs {
    /// Keep plugins' key-value state in an embedded database in this directory
    /// [default: $XDG_DATA_HOME/mcpbox/state or ~/.local/share/mcpbox/state].
    #[arg(
        long,
        env = "MCPBOX_STATE_DIR",
        value_name = "DIR",
        value_hint = clap::ValueHint::DirPath,
        conflicts_with = "state",
        global = true
    )]
    pub state_dir: Option<PathBuf>,

    /// Keep plugins' key-value state in Redis instead (`redis://[user:password@]host:port/db`),
    /// shared by every mcpbox that names the same server.
    #[arg(
        long,
        env = "MCPBOX_STATE",
        value_name = "URL",
        hide_env_values = true,
        global = true
    )]
    pub state: Option<String>,
}

impl StateArgs {
    /// The backend these flags choose.
    pub fn config(&self) -> StateConfig {
        match (&self.state, &self.state_dir) {
            (Some(url), _) => StateConfig::Redis(url.clone()),
            (None, Some(dir)) => StateConfig::Disk(dir.clone()),
            (None, None) => StateConfig::default_place(),
        }
    }
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
    /// List a plugin's keys: bucket, key and value size, then its usage.
    Ls {
        /// The plugin's name.
        plugin: String,
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
    },
    /// Remove one key, or (without a key) all of a plugin's state.
    Rm {
        /// The plugin's name.
        plugin: String,
        /// The key (all of the plugin's keys in every bucket if absent).
        key: Option<String>,
        /// The bucket of the key.
        #[arg(long, default_value = "default")]
        bucket: String,
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
}

/// What a command leaves for `main` to print: output for stdout, and whether it failed.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Text for stdout (never written by `serve`, whose stdout is the protocol's).
    pub output: Option<String>,
    /// The command ran, but what it reports is a failure (exit status 1).
    pub failed: bool,
}

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

    /// The directory of plugins (`*.wasm` components) to serve (required here, in the
    /// environment, or in the configuration file).
    #[arg(long, env = "MCPBOX_PLUGINS", value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub plugins: Option<PathBuf>,

    /// Read options and plugin sections from this TOML file (reference:
    /// `host/deploy/mcpbox.toml`);
    /// flags and environment variables override it. Plugin sections are reloaded when it
    /// changes.
    #[arg(long, env = "MCPBOX_CONFIG", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,

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

    /// Where plugins' key-value state is kept.
    #[command(flatten)]
    pub state: StateArgs,
}

impl ServeArgs {
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
            ..ModernSettings::default()
        })
    }
}

/// Why the command line (with its configuration file) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The flags themselves (clap prints these, with usage).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// The configuration file.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
}

/// `serve` as a built command: with the global options, as a configuration file may set them.
pub fn serve_command() -> clap::Command {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    command.build();
    command
        .find_subcommand("serve")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("serve"))
}

impl Cli {
    /// Parse `args` (the process's arguments, program name first); for `serve --config`, read
    /// the file and fill in every option no flag or environment variable set (flag >
    /// environment > file > default).
    pub fn load(args: Vec<OsString>) -> Result<Self, ArgsError> {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = Cli::command().try_get_matches_from(&args)?;
        let cli = Cli::from_arg_matches(&matches)?;
        let Some(path) = (match &cli.command {
            Command::Serve(serve) => serve.config.as_ref(),
            _ => None,
        }) else {
            return Ok(cli);
        };
        let serve = serve_command();
        let file = ConfigFile::load(path, &serve)?;
        let Some(("serve", serve_matches)) = matches.subcommand() else {
            return Ok(cli);
        };
        let mut args = args;
        args.extend(file.arguments(serve_matches, &serve)?);
        let mut cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(e) => return Err(file.explain(e)?.into()),
        };
        if let Command::Serve(serve) = &mut cli.command {
            serve.loaded_config = Some(Arc::new(file));
        }
        Ok(cli)
    }

    /// Send logs to stderr at the chosen level, and for `serve --otlp-endpoint` traces to the
    /// collector (the exporter is returned, to be shut down at exit).
    pub fn init_logging(&self) -> anyhow::Result<Option<crate::telemetry::Telemetry>> {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let mut filter = EnvFilter::builder().parse(&self.log).with_context(|| {
            format!(
                "invalid log level or filter `{}` (from --log or MCPBOX_LOG)",
                self.log
            )
        })?;
        if !self.log.contains("sigstore") {
            // sigstore reports at info that keyless verification is off: mcpbox never uses it.
            if let Ok(quiet) = "sigstore=warn".parse() {
                filter = filter.add_directive(quiet);
            }
        }
        let endpoint = match &self.command {
            Command::Serve(serve) => serve.otlp_endpoint.as_deref(),
            _ => None,
        };
        let failed = |e: tracing_subscriber::util::TryInitError| {
            anyhow::anyhow!("cannot set up logging: {e}")
        };
        let Some(endpoint) = endpoint else {
            // No exporter: one global filter, so that every call site the filter turns off
            // (the spans for traces among them) is never visited at all.
            let builder = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false);
            match self.log_format {
                LogFormat::Text => builder.finish().try_init(),
                LogFormat::Json => builder.json().flatten_event(true).finish().try_init(),
            }
            .map_err(failed)?;
            return Ok(None);
        };
        // With the exporter, each layer has its own filter: the log keeps `--log`, the
        // exporter takes the spans of `mcpbox::otel`.
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false);
        let fmt: Box<dyn tracing_subscriber::Layer<_> + Send + Sync> = match self.log_format {
            LogFormat::Text => fmt.with_filter(filter).boxed(),
            LogFormat::Json => fmt.json().flatten_event(true).with_filter(filter).boxed(),
        };
        let (otel, telemetry) =
            crate::telemetry::layer(endpoint).map_err(|e| anyhow::anyhow!(e))?;
        tracing_subscriber::registry()
            .with(fmt)
            .with(otel)
            .try_init()
            .map_err(failed)?;
        tracing::info!(endpoint, "exporting traces over OTLP");
        Ok(Some(telemetry))
    }
}

/// Run a command to completion.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let args = match cli.command {
        Command::Serve(args) => *args,
        Command::Call(args) => {
            let outcome = runtime.block_on(call(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::New(args) => {
            let dir = args
                .dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(&args.name));
            let next =
                crate::scaffold::new_project(&args.name, args.lang, &dir, args.sdk.as_deref())?;
            return Ok(Outcome {
                output: Some(next),
                failed: false,
            });
        }
        Command::Check(args) => {
            let outcome = runtime.block_on(check(&args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::Pull(args) => {
            let outcome = runtime.block_on(pull(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::Push(args) => {
            let registry = args.registry.client()?;
            let outcome = runtime.block_on(crate::registry::push(
                &registry,
                &args.file,
                &args.reference,
            ));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return reported(outcome);
        }
        Command::Sign(args) => {
            let target = Path::new(&args.target);
            let outcome = if target.is_file() {
                crate::registry::sign_file(target, &args.key)
            } else if target.extension().is_some_and(|e| e == "wasm") {
                Err(crate::registry::RegistryError::Usage(format!(
                    "{} is not a file (to sign a component in a registry, give its reference)",
                    target.display()
                )))
            } else {
                let registry = args.registry.client()?;
                runtime.block_on(crate::registry::sign_reference(
                    &registry,
                    &args.target,
                    &args.key,
                ))
            };
            runtime.shutdown_timeout(Duration::from_millis(100));
            return reported(outcome);
        }
        Command::Keygen(args) => return reported(crate::registry::keygen(&args.prefix)),
        Command::State(args) => {
            let outcome = runtime.block_on(state_command(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::Inspect(args) => {
            let sections = match &args.config {
                Some(path) => {
                    let file = ConfigFile::load(path, &serve_command())?;
                    Sections::new(file.path().to_owned(), file.sections().clone())
                }
                None => Sections::default(),
            };
            let report = runtime.block_on(author::inspect(
                &args.plugin,
                Limits::default(),
                args.cache_dir,
                StateConfig::default_place(),
                Arc::new(sections),
            ));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return report.map(|report| Outcome {
                output: Some(report),
                failed: false,
            });
        }
    };
    // On a worker thread, not this one: the stdio loop then spawns each request onto the
    // thread it runs on, with no hand-off to wake another thread for.
    let result = runtime.block_on(async {
        tokio::spawn(serve(args))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the server task failed: {e}")))
    });
    // Do not wait for a blocked stdin reader thread on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result.map(|()| Outcome::default())
}

/// A registry command's report, for stdout.
fn reported(report: Result<String, crate::registry::RegistryError>) -> anyhow::Result<Outcome> {
    Ok(Outcome {
        output: Some(report?),
        failed: false,
    })
}

/// `mcpbox pull`: the policy is the configuration's `[signatures]` (with `--key`s added), the
/// directory `--to` or the configuration's `plugins`.
async fn pull(args: PullArgs) -> anyhow::Result<Outcome> {
    let config = match &args.config {
        Some(path) => Some(ConfigFile::load(path, &serve_command())?),
        None => None,
    };
    let mut policy = config.as_ref().and_then(|c| c.signatures().cloned());
    for key in &args.key {
        let key = crate::registry::trust::TrustedKey::read(&key.display().to_string(), key)?;
        policy
            .get_or_insert_with(|| crate::registry::trust::TrustPolicy {
                source: "--key".to_owned(),
                ..Default::default()
            })
            .add_required_key(key);
    }
    let dir = match (
        &args.to,
        config.as_ref().and_then(|c| c.path_option("plugins")),
    ) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) => dir,
        (None, None) => anyhow::bail!(
            "where to? give --to DIR, or --config FILE whose `plugins` is the plugin directory"
        ),
    };
    let registry = args.registry.client()?;
    let request = crate::registry::PullRequest {
        reference: args.reference,
        dir,
        name: args.name,
        locked: args.locked,
        policy,
    };
    reported(crate::registry::pull(&registry, request).await)
}

/// `mcpbox check --config FILE`: read and check the file as `serve` would, and say what it
/// sets.
async fn check(args: &CheckArgs) -> anyhow::Result<Outcome> {
    // Exactly what `serve --config FILE` would read (with the environment's overrides).
    let argv = vec![
        OsString::from("mcpbox"),
        OsString::from("serve"),
        OsString::from("--config"),
        args.config.clone().into_os_string(),
    ];
    let cli = match Cli::load(argv) {
        Ok(cli) => cli,
        Err(e) => {
            let message = match e {
                ArgsError::Clap(e) => e.to_string().lines().next().unwrap_or_default().to_owned(),
                other => other.to_string(),
            };
            return Ok(Outcome {
                output: Some(format!("invalid: {message}")),
                failed: true,
            });
        }
    };
    let Command::Serve(serve) = &cli.command else {
        anyhow::bail!("the configuration file was not read");
    };
    let Some(file) = serve.loaded_config.as_ref() else {
        anyhow::bail!("the configuration file was not read");
    };
    let keys: Vec<&str> = file.keys().collect();
    let sections: Vec<&str> = file.sections().keys().map(String::as_str).collect();
    let mut report = format!(
        "{} is valid: {} options{}{}, {} plugin sections{}",
        args.config.display(),
        keys.len(),
        if keys.is_empty() { "" } else { " (" },
        if keys.is_empty() {
            String::new()
        } else {
            format!("{})", keys.join(", "))
        },
        sections.len(),
        if sections.is_empty() {
            String::new()
        } else {
            format!(" ({})", sections.join(", "))
        },
    );
    if let Some(policy) = file.signatures() {
        let required: Vec<String> = policy
            .require
            .iter()
            .map(|(plugin, keys)| format!("{plugin} by {}", keys.join(" or ")))
            .collect();
        report.push_str(&format!(
            "\nsignatures: {} keys ({}); required: {}",
            policy.keys.len(),
            policy.keys.keys().cloned().collect::<Vec<_>>().join(", "),
            if required.is_empty() {
                "none".to_owned()
            } else {
                required.join(", ")
            }
        ));
    }
    if !keys.contains(&"plugins") {
        report.push_str(
            "\nnote: it sets no `plugins` directory; give --plugins or MCPBOX_PLUGINS when serving",
        );
    }
    if let Some(dir) = serve.plugins.as_deref().filter(|dir| dir.is_dir()) {
        report.push_str(&plugin_warnings(file, dir, serve).await?);
    }
    Ok(Outcome {
        output: Some(report),
        failed: false,
    })
}

/// What `check` warns about in the plugin directory `dir`, as `serve` would: `[plugin.NAME]`
/// sections naming no plugin there, and names in allow- and deny-lists (of sections and
/// manifests) that their plugin does not offer (the plugins are loaded to know).
async fn plugin_warnings(
    file: &ConfigFile,
    dir: &Path,
    serve: &ServeArgs,
) -> anyhow::Result<String> {
    let mut warnings = String::new();
    for name in file.sections().keys() {
        if !dir.join(format!("{name}.wasm")).exists() {
            warnings.push_str(&format!(
                "\nwarning: [plugin.{name}] names no plugin in {}: there is no {name}.wasm",
                dir.display()
            ));
        }
    }
    let sections = Arc::new(Sections::new(
        file.path().to_owned(),
        file.sections().clone(),
    ));
    let cache_dir = if serve.no_cache {
        None
    } else {
        serve.cache_dir.clone()
    };
    let unknown =
        author::unknown_listed_names(dir, sections, serve.limits.limits(), cache_dir).await?;
    for unknown in unknown {
        warnings.push_str(&format!("\nwarning: {unknown}"));
    }
    Ok(warnings)
}

async fn call(args: CallArgs) -> anyhow::Result<Outcome> {
    let request = match (args.tool, args.prompt, args.resource) {
        (_, Some(prompt), _) => CallRequest::Prompt(prompt),
        (_, _, Some(uri)) => CallRequest::Resource(uri),
        (Some(tool), _, _) => CallRequest::Tool(tool),
        (None, None, None) => anyhow::bail!("name a tool, or --prompt or --resource"),
    };
    let limits = args.limits.limits();
    let outcome = author::call(
        &args.plugin,
        request,
        &args.args,
        limits,
        args.cache_dir,
        args.state.config(),
    )
    .await?;
    Ok(Outcome {
        output: Some(outcome.json),
        failed: outcome.failed,
    })
}

/// `mcpbox state`: read or clear a plugin's key-value state.
async fn state_command(args: StateCommandArgs) -> anyhow::Result<Outcome> {
    let service = StateService::new(args.state.config())?;
    let backend = service.backend().await?;
    let output = match args.action {
        StateAction::Ls { plugin } => {
            let entries = backend.entries(&plugin).await?;
            let usage = backend.usage(&plugin).await?;
            let mut out = String::new();
            for entry in &entries {
                out.push_str(&format!(
                    "{}\t{}\t{} bytes\n",
                    entry.bucket,
                    crate::engine::log_line(&entry.key, 1024),
                    entry.size
                ));
            }
            out.push_str(&format!(
                "plugin `{plugin}`: {} keys, {} bytes in {}",
                usage.keys,
                usage.bytes,
                service.config()
            ));
            out
        }
        StateAction::Get {
            plugin,
            key,
            bucket,
        } => match backend.get(&plugin, &bucket, &key).await? {
            None => {
                return Ok(Outcome {
                    output: Some(format!(
                        "plugin `{plugin}` has no key `{key}` in bucket `{bucket}`"
                    )),
                    failed: true,
                });
            }
            Some(value) => match String::from_utf8(value) {
                Ok(text) => text,
                Err(binary) => {
                    use base64::Engine as _;
                    tracing::info!("the value is not UTF-8 text; printed as base64");
                    base64::engine::general_purpose::STANDARD.encode(binary.as_bytes())
                }
            },
        },
        StateAction::Rm {
            plugin,
            key: Some(key),
            bucket,
        } => {
            let existed = backend.exists(&plugin, &bucket, &key).await?;
            backend.delete(&plugin, &bucket, &key).await?;
            if existed {
                format!("removed `{key}` from bucket `{bucket}` of plugin `{plugin}`")
            } else {
                format!("plugin `{plugin}` had no key `{key}` in bucket `{bucket}`")
            }
        }
        StateAction::Rm {
            plugin, key: None, ..
        } => {
            let removed = backend.clear(&plugin).await?;
            format!("removed all state of plugin `{plugin}` ({removed} keys)")
        }
    };
    Ok(Outcome {
        output: Some(output),
        failed: false,
    })
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Installed first, so that a signal during start-up is handled too.
    let shutdown = shutdown_signal();
    raise_open_file_limit();
    let modern = Arc::new(args.modern()?);
    let call_ledger = call_ledger(&args)?;
    let memory_bytes = args.limits.memory_bytes();
    let limits = args.limits.limits();
    let cache_dir = if args.no_cache {
        None
    } else {
        args.cache_dir.clone().or_else(ComponentCache::default_dir)
    };
    let config = RuntimeConfig {
        cache_dir,
        cache_max_bytes: args.cache_max_mib.saturating_mul(1 << 20),
        max_instances: args.max_instances,
        max_memory_bytes: memory_bytes.max(RuntimeConfig::default().max_memory_bytes),
        state: args.state.config(),
    };
    let engine = Runtime::new(config)?;
    // The HTTP port is bound before plugins load: a taken port or a bad address fails at once,
    // and an orchestrator sees the port open (with `/readyz` 503) while plugins compile.
    let listener = match &args.http {
        Some(address) => Some(bind_tcp(address, "--http").await?),
        None => None,
    };
    if let Some(address) = &args.metrics_addr {
        let listener = bind_tcp(address, "--metrics-addr").await?;
        // Ends with the process: the runtime drops it on the way out.
        tokio::spawn(async move {
            if let Err(e) = http::serve_metrics(listener, std::future::pending()).await {
                tracing::error!("the metrics listener failed: {e}");
            }
        });
    }
    let Some(plugin_dir) = &args.plugins else {
        anyhow::bail!(
            "no plugin directory: give --plugins DIR, set MCPBOX_PLUGINS, or set `plugins` in the \
             configuration file"
        );
    };
    // Canonical, so that file events (absolute paths) match the loaded plugins' files.
    let dir = std::fs::canonicalize(plugin_dir)
        .with_context(|| format!("cannot read the plugin directory {}", plugin_dir.display()))?;
    let sections = Arc::new(match &args.loaded_config {
        Some(config) => {
            tracing::info!(
                config = %config.path().display(),
                options = config.keys().count(),
                plugin_sections = config.sections().len(),
                "read the configuration file"
            );
            for name in config.sections().keys() {
                if !dir.join(format!("{name}.wasm")).exists() {
                    tracing::warn!(
                        config = %config.path().display(),
                        "[plugin.{name}] names no plugin in {}: there is no {name}.wasm (yet)",
                        dir.display()
                    );
                }
            }
            Sections::new(config.path().to_owned(), config.sections().clone())
        }
        None => Sections::default(),
    });
    let trust = Trust::new(
        args.loaded_config
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
    if dir.join(crate::registry::lock::LOCK_FILE).exists() {
        tracing::info!(
            lock = %dir.join(crate::registry::lock::LOCK_FILE).display(),
            "checking components against the lock file before loading them"
        );
    }
    let watching = !args.no_watch;
    // The hub is how plugins and the plugin set reach sessions and the reloader.
    let (hub, relists) = EventHub::new();
    // Empty until the startup load fills it: the HTTP listener answers health checks (and
    // holds MCP off) meanwhile.
    let plugins = Arc::new(PluginSet::new(
        Vec::new(),
        args.page_size as usize,
        watching,
        hub,
    ));
    if let Some(ledger) = call_ledger {
        plugins.record_calls(ledger);
    }
    let state = Arc::clone(engine.state());
    if state.is_shared() {
        tokio::spawn(watch_state_store(Arc::clone(&state)));
    }
    let readiness = Arc::new(Readiness::starting());
    let startup = Startup {
        engine: &engine,
        dir: &dir,
        limits,
        sections: &sections,
        trust,
        plugins: &plugins,
        relists,
        readiness: &readiness,
        args: &args,
    };
    match listener {
        Some(listener) => {
            let server = serve_http(
                Arc::clone(&plugins),
                listener,
                &args,
                modern,
                Arc::clone(&readiness),
                state,
                shutdown,
            );
            tokio::pin!(server);
            let _running = tokio::select! {
                stopped = &mut server => return stopped,
                running = startup.run() => running?,
            };
            readiness.start();
            server.await
        }
        None => {
            let _running = startup.run().await?;
            readiness.start();
            let session = Arc::new(Session::new(plugins, Mode::Dual, modern));
            let (input, output): (Box<dyn tokio::io::AsyncBufRead + Unpin + Send>, _) =
                match stdio::stdio_streams() {
                    Some((input, output)) => (input, stdio::Output::Async(output)),
                    None => (
                        Box::new(stdio::stdin_reader().context("cannot start reading stdin")?),
                        stdio::Output::Blocking(Box::new(std::io::stdout())),
                    ),
                };
            let config = StdioConfig {
                max_message_bytes: args.max_message_bytes,
                ..StdioConfig::default()
            };
            tracing::info!("serving MCP on stdio");
            stdio::serve(session, input, output, config, shutdown)
                .await
                .context("stdio transport failed")?;
            tracing::info!("stdio session over; exiting");
            Ok(())
        }
    }
}

/// What the startup load needs: the plugins found in the directory are loaded into the (empty)
/// set, those still listing are added when done, and the directory and the configuration
/// file are watched.
struct Startup<'a> {
    engine: &'a Runtime,
    dir: &'a Path,
    limits: Limits,
    sections: &'a Arc<Sections>,
    trust: Trust,
    plugins: &'a Arc<PluginSet>,
    relists: crate::catalog::RelistRequests,
    readiness: &'a Arc<Readiness>,
    args: &'a ServeArgs,
}

/// What must live while mcpbox serves: the watchers of the plugin directory and the
/// configuration file.
struct Running {
    _watcher: Option<Arc<crate::watch::Watcher>>,
    _config_watcher: Option<crate::watch::ConfigWatcher>,
}

impl Startup<'_> {
    async fn run(self) -> anyhow::Result<Running> {
        let Self {
            engine,
            dir,
            limits,
            sections,
            trust,
            plugins,
            relists,
            readiness,
            args,
        } = self;
        let loaded = load_directory(engine, dir, limits, sections, &trust).await?;
        plugins.add_startup(loaded.plugins);
        for problem in loaded.problems {
            plugins.note_startup_problem(problem);
        }
        let catalog = plugins.catalog();
        for plugin in plugins.plugins() {
            plugin.log_loaded("loaded", catalog.names_of(&plugin.file));
        }
        plugins.record(format!(
            "started: {} plugins loaded, {} skipped, {} names refused",
            catalog.plugin_count(),
            loaded.skipped,
            catalog.refusals().len()
        ));
        tracing::info!(
            loaded = catalog.plugin_count(),
            skipped = loaded.skipped,
            refused_names = catalog.refusals().len(),
            "{} loaded, {} skipped, {} names refused",
            catalog.plugin_count(),
            loaded.skipped,
            catalog.refusals().len()
        );
        // Plugins that were still listing: served as soon as they are done.
        for late in loaded.late {
            let plugins = Arc::clone(plugins);
            let done = readiness.late_load();
            tokio::spawn(async move {
                match late.await {
                    Ok((file, Ok(plugin))) => {
                        let plugin = Arc::new(plugin);
                        let names = plugins.update(&file, Some(Arc::clone(&plugin)));
                        drop(done);
                        plugins.record(format!("loaded plugin `{}` (late)", plugin.code.name()));
                        plugin.log_loaded("loaded (late)", names);
                    }
                    Ok((file, Err(error))) => {
                        let message = format!(
                            "could not load plugin {}: {error}; it is not loaded",
                            file.display()
                        );
                        tracing::error!(file = %file.display(), "skipped plugin: {error}");
                        plugins.note_startup_problem(message.clone());
                        plugins.hub().announce(crate::server::ServerEvent::HostLog {
                            level: crate::protocol::mcp::LogLevel::Error,
                            message,
                        });
                    }
                    Err(e) => tracing::error!("a plugin load task failed: {e}"),
                }
            });
        }
        let debounce = Duration::from_millis(args.reload_debounce_ms);
        let watcher = if args.no_watch {
            drop(relists);
            None
        } else {
            Some(Arc::new(
                Reloader::new(
                    engine.clone(),
                    dir.to_owned(),
                    limits,
                    Arc::clone(sections),
                    trust,
                    Arc::clone(plugins),
                    relists,
                )
                .watch(debounce)?,
            ))
        };
        let config_watcher = match &args.loaded_config {
            Some(config) => Some(crate::watch::watch_config(
                Arc::clone(config),
                Arc::clone(sections),
                watcher.clone(),
                Arc::clone(plugins),
                debounce,
            )?),
            None => None,
        };
        tracing::info!(
            dir = %dir.display(),
            plugins = catalog.plugin_count(),
            fuel = limits.fuel,
            timeout_ms = args.limits.timeout_ms,
            memory_mib = args.limits.memory_mib,
            "plugins ready"
        );
        Ok(Running {
            _watcher: watcher,
            _config_watcher: config_watcher,
        })
    }
}

/// How often a shared state store (Redis) is checked, for the `mcpbox_state_store_up` gauge,
/// `/readyz`'s body and the status page.
const STATE_STORE_CHECK: Duration = Duration::from_secs(2);

/// Check the shared state store every [`STATE_STORE_CHECK`], for as long as mcpbox runs; a
/// change either way is logged once.
async fn watch_state_store(state: Arc<StateService>) {
    let metrics = crate::metrics::metrics();
    let mut was_up = true;
    loop {
        let up = match state.health().await {
            Ok(()) => true,
            Err(e) => {
                if was_up {
                    tracing::warn!(
                        "{e}; stateful calls fail until it answers, stateless ones keep serving"
                    );
                }
                false
            }
        };
        if up && !was_up {
            tracing::info!(store = %state.config(), "the state store answers again");
        }
        metrics.set_state_store_up(up);
        was_up = up;
        tokio::time::sleep(STATE_STORE_CHECK).await;
    }
}

/// Bind the address of `flag` (`--http`, `--metrics-addr`): `host:port` (a host name is
/// resolved; `localhost:8080` binds loopback), `[v6]:port`, or a bare port on 127.0.0.1.
async fn bind_tcp(address: &str, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let target = match address.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => address.to_owned(),
    };
    if !target.contains(':') {
        anyhow::bail!(
            "invalid {flag} address `{address}`: expected host:port (such as 127.0.0.1:8080 or \
             localhost:8080) or a port"
        );
    }
    let listener = tokio::net::TcpListener::bind(&target)
        .await
        .with_context(|| format!("cannot listen on {flag} {address}"))?;
    let bound = listener
        .local_addr()
        .with_context(|| format!("cannot read the address bound for {flag} {address}"))?;
    tracing::info!(%bound, "{flag} port bound");
    Ok(listener)
}

/// Serve over HTTP on `listener` (bound by [`bind_tcp`]).
async fn serve_http(
    plugins: Arc<PluginSet>,
    listener: tokio::net::TcpListener,
    args: &ServeArgs,
    modern: Arc<ModernSettings>,
    readiness: Arc<Readiness>,
    state: Arc<StateService>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let address = listener
        .local_addr()
        .context("cannot read the bound HTTP address")?;
    let oauth = match (&args.oauth_issuer, &args.oauth_resource) {
        (Some(issuer), Some(resource)) => {
            let verifier = crate::auth::Verifier::new(crate::auth::OAuthConfig {
                issuer: issuer.clone(),
                resource: resource.clone(),
                jwks_url: args.oauth_jwks_url.clone(),
                scopes: args.oauth_scope.clone(),
                plugin_scopes: Vec::new(),
            })
            .map_err(|e| anyhow::anyhow!(e))?;
            let verifier = Arc::new(verifier);
            tracing::info!(
                issuer,
                resource,
                scopes = %args.oauth_scope.join(" "),
                "HTTP requests need OAuth access tokens from the issuer"
            );
            verifier.prefetch().await;
            Some(verifier)
        }
        _ => None,
    };
    if !address.ip().is_loopback() && args.auth_token.is_none() && oauth.is_none() {
        tracing::warn!(%address, "serving HTTP beyond loopback without --auth-token: anyone who can reach it can call every tool");
    }
    let page_state = Arc::clone(&state);
    let config = HttpConfig {
        allowed_hosts: args.allowed_host.clone(),
        allowed_origins: args.allowed_origin.clone(),
        auth_token: args.auth_token.clone(),
        max_body_bytes: args.max_message_bytes,
        session_idle: Duration::from_secs(args.session_idle_secs),
        modern,
        readiness,
        state: Some(state),
        oauth,
        call_id_header: args
            .call_id_header
            .as_deref()
            .and_then(|name| axum::http::HeaderName::from_bytes(name.as_bytes()).ok()),
        status_page: (!args.no_status_page).then(|| {
            let started = std::time::SystemTime::now();
            let plugins = Arc::clone(&plugins);
            http::StatusPage(Arc::new(move || {
                crate::catalog::status::render(&plugins, started, &page_state)
            }))
        }),
    };
    http::serve(plugins, listener, config, shutdown, Duration::from_secs(10))
        .await
        .context("HTTP transport failed")?;
    tracing::info!("stopped");
    Ok(())
}

/// A `--call-id-header`: an HTTP header name.
fn parse_header_name(text: &str) -> Result<String, String> {
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

/// An `--allowed-origin`: `scheme://host[:port]`, nothing more (a browser's `Origin`).
fn parse_origin(text: &str) -> Result<String, String> {
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

/// Plugins' open files and sockets are host descriptors: use every descriptor the system
/// allows mcpbox (the soft limit up to the hard one), so that calls bounded to
/// `MAX_HANDLES_PER_CALL` each cannot together exhaust the process.
fn raise_open_file_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => tracing::debug!(open_files = ?limit.maximum, "raised the open-file limit"),
            Err(e) => tracing::debug!("could not raise the open-file limit: {e}"),
        }
    }
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are installed now, before the
/// future is first polled, so a signal that arrives early is not lost (nor fatal).
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        match signals {
            (Ok(mut terminate), Ok(mut interrupt)) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
            }
            _ => {
                tracing::warn!(
                    "cannot listen for SIGTERM and SIGINT; stop mcpbox by closing its input"
                );
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("received a shutdown signal");
    }
}
