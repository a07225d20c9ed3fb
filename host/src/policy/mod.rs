//! Per-plugin policy: the limits each call runs under, the capabilities the operator granted,
//! and which of its items are served under what names ([`Naming`]), read from a manifest
//! beside the plugin (`weather.wasm` → `weather.toml`) or from the plugin's `[plugin.NAME]`
//! section of the configuration file, with the command line's grants within it
//! ([`CommandLineGrant`], `--grant`), and validated.
//!
//! Deny by default: a plugin without a manifest gets the
//! default limits and no capabilities at all. Every key is checked; an unknown key, a bad
//! value or a grant that cannot work (a missing directory, an unset host variable) is an
//! error naming the file, the line and the key, and what is wrong, never a silent default.
//!
//! Uses: nothing else in the crate.

mod command_line;
pub mod config;
mod locate;
mod manifest;
mod name;
mod sections;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use command_line::{CommandLineGrant, CommandLineGrants};
pub use config::{ConfigKey, ConfigSource, SecretValue, Secrets};
pub use locate::key_at;
pub use manifest::{
    PolicyError, check_sections, load_manifest, manifest_path, parse_manifest,
    parse_manifest_granting, parse_section, parse_section_granting,
};
pub use name::PluginName;
pub use sections::Sections;

/// The limits applied to every call into one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel budget per call: a deterministic measure of executed instructions
    /// (about 1.4 billion units per second of CPU on a current x86-64 core).
    pub fuel: u64,
    /// Wall-clock time one call may take, including time spent waiting in host functions.
    pub timeout: Duration,
    /// The most linear memory one instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// How much of a call's stdout and of its stderr is kept (and logged); the rest is
    /// dropped, never trapping the plugin.
    pub output_bytes: usize,
    /// The largest result (as JSON sent to the client) one call may produce.
    pub result_bytes: usize,
    /// Wall-clock time one call run as a task (the tasks extension) may take. In the
    /// command line's defaults it is the operator's maximum (`--task-timeout-ms`); a
    /// manifest's `[tasks] timeout-ms` may ask for up to that, and without one a task gets
    /// the plugin's `timeout`.
    pub task_timeout: Duration,
}

impl Limits {
    /// 5 × 10⁹ units of fuel: about 0.2 s of a tight loop (measured ~2.4 × 10¹⁰ units per
    /// CPU-second), a second or more of ordinary code.
    pub const DEFAULT_FUEL: u64 = 5_000_000_000;
    /// 30 seconds.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// 128 MiB.
    pub const DEFAULT_MEMORY_BYTES: usize = 128 << 20;
    /// 64 KiB for each of stdout and stderr.
    pub const DEFAULT_OUTPUT_BYTES: usize = 64 << 10;
    /// 4 MiB.
    pub const DEFAULT_RESULT_BYTES: usize = 4 << 20;
    /// One hour: the most a manifest may give its tasks unless the operator says otherwise.
    pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: Self::DEFAULT_FUEL,
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            output_bytes: Self::DEFAULT_OUTPUT_BYTES,
            result_bytes: Self::DEFAULT_RESULT_BYTES,
            task_timeout: Self::DEFAULT_TASK_TIMEOUT,
        }
    }
}

/// Everything one plugin may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// A display name from the manifest (the plugin's name is its file's stem).
    pub title: Option<String>,
    /// Its limits.
    pub limits: Limits,
    /// Directories it may open.
    pub dirs: Vec<DirGrant>,
    /// Environment variables it sees.
    pub env: Vec<EnvGrant>,
    /// Hosts it may send HTTP requests to.
    pub http: Vec<HttpGrant>,
    /// Whether it may also reach the public internet: any host whose every address is public
    /// (checked after DNS, on each request and so on each redirect hop).
    pub http_public: bool,
    /// Hosts of `http` it calls as the caller (`[http.credentials]`): mcpbox attaches the
    /// caller's token from the named provider to each request to them.
    pub credentials: Vec<CredentialGrant>,
    /// The key-value buckets it may open, and its quotas.
    pub keyvalue: Option<Arc<KvGrant>>,
    /// OAuth scopes a caller's token must carry to use it (over HTTP with OAuth).
    pub scopes: Vec<String>,
    /// Which of its tools, prompts and resources are served, and under what names.
    pub naming: Naming,
    /// The configuration keys it may read (`wasi:config/store`), and where each comes from.
    pub config: Vec<ConfigKey>,
    /// Whether it sees its callers' own keys (`oauth:ISSUER sub:SUBJECT`) as their ids
    /// instead of opaque ones (`reveal-caller = true`).
    pub reveal_caller: bool,
    /// The skills its component carries are not served (`skills = false`).
    pub hide_skills: bool,
    /// Which of its tools may run as tasks (`[tasks]`).
    pub tasks: TaskTools,
    /// Whether an instance may serve one caller's calls in turn (`instances`).
    pub instances: Instances,
}

/// How a plugin's calls get their instances (`instances = "per-call" | "per-caller"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Instances {
    /// A fresh instance for every call (the default): nothing a call leaves in the plugin's
    /// memory reaches another call.
    #[default]
    PerCall,
    /// An instance that served a call may serve the same caller's next one, with its memory
    /// as the last call left it; never another caller's (the operator's opt-in, for plugins
    /// that keep nothing between calls: it saves instantiating per call).
    PerCaller,
}

impl Instances {
    /// The manifest's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerCall => "per-call",
            Self::PerCaller => "per-caller",
        }
    }
}

/// Which of a plugin's tools may run as tasks (the tasks extension), by the plugin's own
/// names: `optional` ones run as tasks for clients that declare the extension (and as plain
/// calls for others), `required` ones only as tasks. Every other tool never runs as one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskTools {
    /// May run as tasks.
    pub optional: Vec<String>,
    /// Run only as tasks.
    pub required: Vec<String>,
}

/// Whether a tool may, must or must not run as a task (`execution.taskSupport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never (the default).
    #[default]
    Forbidden,
    /// As a task for clients that declare the extension, else as a plain call.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    /// The wire value of `execution.taskSupport`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

impl TaskTools {
    /// How the tool the plugin calls `own` may run.
    pub fn support(&self, own: &str) -> TaskSupport {
        if self.required.iter().any(|n| n == own) {
            TaskSupport::Required
        } else if self.optional.iter().any(|n| n == own) {
            TaskSupport::Optional
        } else {
            TaskSupport::Forbidden
        }
    }

    /// Whether no tool may run as a task.
    pub fn is_empty(&self) -> bool {
        self.optional.is_empty() && self.required.is_empty()
    }
}

/// Which of a plugin's items are served, and under what names: a prefix for its tool and
/// prompt names (resources keep their URIs), and an allow-list and a deny-list for each
/// kind, written with the plugin's own names. Hidden items are neither listed nor callable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Naming {
    /// Put before each tool and prompt name: with `todo_`, the plugin's `add` is served as
    /// `todo_add` (and a call to `todo_add` reaches the plugin as `add`).
    pub prefix: Option<String>,
    /// Which tools are served.
    pub tools: ItemFilter,
    /// Which prompts are served.
    pub prompts: ItemFilter,
    /// Which resources and resource templates are served (by URI or URI template).
    pub resources: ItemFilter,
}

impl Naming {
    /// The name a tool or prompt the plugin calls `own` is served as.
    pub fn served_name(&self, own: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}{own}"),
            None => own.to_owned(),
        }
    }

    /// Whether anything is renamed or hidden.
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// An allow-list and a deny-list of one kind of item: an item is served when the allow-list
/// is absent or names it, and the deny-list does not. Items may also require scopes of their
/// own, beyond the plugin's: a caller without them neither sees nor uses the item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemFilter {
    /// Only these, when present.
    pub allow: Option<Vec<String>>,
    /// Never these.
    pub deny: Vec<String>,
    /// The scopes each item requires (by the plugin's own name, or URI), beyond the plugin's.
    pub scopes: BTreeMap<String, Vec<String>>,
}

impl ItemFilter {
    /// The scopes the item the plugin calls `name` requires beyond the plugin's (none for most).
    pub fn scopes_of(&self, name: &str) -> &[String] {
        self.scopes.get(name).map_or(&[], Vec::as_slice)
    }

    /// Whether the item the plugin calls `name` is served.
    pub fn shows(&self, name: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name))
            && !self.deny.iter().any(|d| d == name)
    }

    /// Every name either list holds, with the list's key (`allow` or `deny`).
    pub fn listed(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.allow
            .iter()
            .flatten()
            .map(|n| ("allow", n.as_str()))
            .chain(self.deny.iter().map(|n| ("deny", n.as_str())))
    }
}

/// A one-line summary of what a [`Naming`] changes, for the log, `inspect` and the status
/// page.
pub struct NamingSummary<'a>(pub &'a Naming);

impl fmt::Display for NamingSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let naming = self.0;
        if naming.is_default() {
            return f.write_str("all items, under their own names");
        }
        let mut parts = Vec::new();
        if let Some(prefix) = &naming.prefix {
            parts.push(format!("tool and prompt names prefixed with `{prefix}`"));
        }
        for (kind, filter) in [
            ("tools", &naming.tools),
            ("prompts", &naming.prompts),
            ("resources", &naming.resources),
        ] {
            if let Some(allow) = &filter.allow {
                parts.push(format!("{kind} only [{}]", allow.join(", ")));
            }
            if !filter.deny.is_empty() {
                parts.push(format!("{kind} hidden [{}]", filter.deny.join(", ")));
            }
            for (item, scopes) in &filter.scopes {
                parts.push(format!("{kind} `{item}` only for [{}]", scopes.join(", ")));
            }
        }
        f.write_str(&parts.join("; "))
    }
}

impl Policy {
    /// No capabilities, these limits.
    pub fn deny_all(limits: Limits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Whether its calls run on a thread of their own, with file operations in line there
    /// (the plugin was granted a directory): see `engine::plugin`.
    pub fn runs_apart(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Whether it keeps each caller's state apart (it is granted caller buckets): then what
    /// it announces while serving one caller is taken to be about that caller's own state.
    pub fn keeps_callers_apart(&self) -> bool {
        self.keyvalue
            .as_ref()
            .is_some_and(|kv| !kv.caller_buckets.is_empty())
    }

    /// Whether anything at all was granted.
    pub fn grants_anything(&self) -> bool {
        !(self.dirs.is_empty()
            && self.env.is_empty()
            && self.http.is_empty()
            && !self.http_public
            && self.keyvalue.is_none()
            && self.config.is_empty())
    }
}

/// Durable key-value state (`wasi:keyvalue`): the buckets a plugin may open, and how much it
/// may store in all of them together. Its data is its own: keyed by its name, never shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvGrant {
    /// Bucket names it may open, shared by all its callers.
    pub buckets: Vec<String>,
    /// Bucket names it may open each caller's own of (`caller-buckets`): the same name
    /// reaches a different namespace for each caller.
    pub caller_buckets: Vec<String>,
    /// Total bytes of keys and values: its shared buckets and every caller's together.
    pub max_bytes: u64,
    /// Number of keys, likewise.
    pub max_keys: u64,
    /// The largest value, in bytes.
    pub max_value_bytes: u64,
    /// Bytes of one caller's own buckets.
    pub caller_max_bytes: u64,
    /// Keys in one caller's own buckets.
    pub caller_max_keys: u64,
    /// Kept in this process's memory instead of the state store (`in-memory = true`): gone
    /// when mcpbox stops, and not shared with other replicas.
    pub in_memory: bool,
    /// Its caller buckets are each client session's own (`caller-scope = "session"`), kept in
    /// memory and dropped when the session ends: as an original that keeps state per process
    /// keeps it per client. A request outside any session (a 2026-07-28 request over HTTP)
    /// gets its caller's.
    pub per_session: bool,
}

impl KvGrant {
    /// 16 MiB in all.
    pub const DEFAULT_MAX_BYTES: u64 = 16 << 20;
    /// 10,000 keys.
    pub const DEFAULT_MAX_KEYS: u64 = 10_000;
    /// 1 MiB per value.
    pub const DEFAULT_MAX_VALUE_BYTES: u64 = 1 << 20;
    /// 1 MiB per caller.
    pub const DEFAULT_CALLER_MAX_BYTES: u64 = 1 << 20;
    /// 1,000 keys per caller.
    pub const DEFAULT_CALLER_MAX_KEYS: u64 = 1000;
}

/// A host directory mapped into the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirGrant {
    /// The directory on the host (absolute).
    pub host: PathBuf,
    /// Where the plugin sees it (an absolute guest path such as `/data`).
    pub guest: String,
    /// Whether the plugin may write.
    pub writable: bool,
}

/// An environment variable the plugin sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvGrant {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// The host variable it was copied from, if not a literal.
    pub from_host: Option<String>,
}

/// A host (and port) the plugin may reach over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGrant {
    /// Lower-case host name or IP address literal (IPv6 without brackets).
    pub host: String,
    /// The port; `None` allows only the scheme's default (80 for http, 443 for https).
    pub port: Option<u16>,
}

impl HttpGrant {
    /// Whether this grant allows `host:port` (`host` already lower-case).
    pub fn allows(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.host == host && self.port.unwrap_or(default_port) == port
    }

    /// Whether the grant names an IP address (or `localhost`) explicitly, which allows that
    /// address even when it is loopback or private.
    pub fn is_address_literal(&self) -> bool {
        self.host == "localhost" || self.host.parse::<std::net::IpAddr>().is_ok()
    }
}

/// A host of the allow-list called as the caller (`[http.credentials]`): each request to it
/// carries the caller's token from `provider`, attached by mcpbox, never seen by the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialGrant {
    /// The host (and port), as granted in `[http] allow`.
    pub host: HttpGrant,
    /// The provider (`[providers.NAME]` of the configuration file): `[a-z][a-z0-9_-]{0,63}`.
    pub provider: String,
}

impl fmt::Display for HttpGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host} (ports 80/443)"),
        }
    }
}

/// A one-line summary of the grants, for the log.
pub struct GrantSummary<'a>(pub &'a Policy);

impl fmt::Display for GrantSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let policy = self.0;
        if !policy.grants_anything() {
            return f.write_str("nothing (no files, network or environment)");
        }
        let mut parts = Vec::new();
        for dir in &policy.dirs {
            let mode = if dir.writable {
                "read-write"
            } else {
                "read-only"
            };
            parts.push(format!(
                "dir {} as {} ({mode})",
                dir.host.display(),
                dir.guest
            ));
        }
        for env in &policy.env {
            parts.push(match &env.from_host {
                Some(source) => format!("env {} (from ${source})", env.name),
                None => format!("env {}", env.name),
            });
        }
        for http in &policy.http {
            match policy.credentials.iter().find(|g| g.host == *http) {
                Some(grant) => {
                    parts.push(format!("http {http} as the caller ({})", grant.provider))
                }
                None => parts.push(format!("http {http}")),
            }
        }
        if policy.http_public {
            parts.push(
                "http the public internet (any host whose every address is public)".to_owned(),
            );
        }
        if let Some(kv) = &policy.keyvalue {
            parts.push(format!(
                "keyvalue buckets [{}] (at most {} KiB, {} keys, {} KiB per value{})",
                kv.buckets.join(", "),
                kv.max_bytes >> 10,
                kv.max_keys,
                kv.max_value_bytes >> 10,
                if kv.in_memory {
                    "; kept in memory, gone when mcpbox stops"
                } else {
                    ""
                }
            ));
            if !kv.caller_buckets.is_empty() {
                parts.push(format!(
                    "keyvalue caller buckets [{}] (each {}'s own: at most {} KiB, {} keys)",
                    kv.caller_buckets.join(", "),
                    if kv.per_session {
                        "client session"
                    } else {
                        "caller"
                    },
                    kv.caller_max_bytes >> 10,
                    kv.caller_max_keys
                ));
            }
        }
        for key in &policy.config {
            parts.push(format!("config {} ({})", key.name, key.source));
        }
        if policy.reveal_caller {
            parts.push("callers' keys as their ids".to_owned());
        }
        f.write_str(&parts.join("; "))
    }
}

/// Where a relative path in a manifest points: against the manifest's own directory.
fn resolve(manifest: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        manifest.parent().unwrap_or(Path::new(".")).join(path)
    }
}
