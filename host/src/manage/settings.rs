//! The configuration file's `[manage]` table, parsed strictly: whether the management tools
//! are served, the scope a caller needs over HTTP, the sources, the managed directory, the
//! grant ceiling and the pre-approval policy. Unknown keys are errors, and so is a ceiling
//! folder a managed plugin may write that holds the managed directory or lies inside it.
//!
//! ```toml
//! [manage]
//! enabled = true
//! scope = "mcpbox:manage"            # required over HTTP: only callers holding it see the tools
//! directory = "managed"              # relative to the configuration file; created if missing
//! sources = ["registry.example/mcp/weather", "registry.example/mcp/*"]
//! insecure-registries = ["127.0.0.1:5000"] # plain HTTP to these (digests and signatures still checked)
//! pre-approve = "none"               # or "signed": clients that cannot fill in forms may install
//!                                    # artifacts the signature policy requires and verifies
//!
//! [manage.ceiling]                   # the most a managed plugin is ever granted
//! dirs = [{ path = "/srv/mcpbox/data", mode = "read-write" }] # folders (and folders inside)
//! hosts = ["api.example.com", "*.example.org"]                # HTTP hosts (`*.` any subdomain)
//! public-http = false                # `[http] public = true`
//! env = ["TZ"]                       # variables it may be given (literal values only)
//! config = ["api-base"]              # wasi:config keys (literal values only)
//! state = true                       # wasi:keyvalue buckets (the default quotas)
//! instances = "per-call"             # or "per-caller": a plugin may ask to keep an instance
//!                                    # for the same caller's next call
//! [manage.ceiling.limits]            # each capped; absent: capped at the command line's
//!                                    # (timeout-ms also caps a task's `[tasks] timeout-ms`)
//! fuel = 2_000_000_000
//! timeout-ms = 10000
//! memory-mib = 64
//! output-kib = 64
//! result-kib = 1024
//! ```
//!
//! Uses nothing else in the crate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A folder's access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read only.
    ReadOnly,
    /// Read and write.
    ReadWrite,
}

impl Mode {
    /// As a manifest writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::ReadWrite => "read-write",
        }
    }

    /// From a manifest's text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read-only" => Some(Self::ReadOnly),
            "read-write" => Some(Self::ReadWrite),
            _ => None,
        }
    }
}

/// Who may install without being asked, for clients that cannot fill in forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreApprove {
    /// Nobody: such a client is refused.
    #[default]
    None,
    /// Artifacts the signature policy requires to be signed, and whose signature verifies,
    /// installed with the grants the ceiling leaves (narrowed by the arguments). A removal
    /// is still asked.
    Signed,
}

/// The most a managed plugin may be granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ceiling {
    /// Folders (absolute) and the most access to each (and every folder inside).
    pub dirs: Vec<(PathBuf, Mode)>,
    /// HTTP hosts (`host` or `host:port`; `*.domain` for any subdomain).
    pub hosts: Vec<String>,
    /// Whether `[http] public = true` may be granted.
    pub public_http: bool,
    /// Environment variables it may be given (literal values).
    pub env: Vec<String>,
    /// `wasi:config` keys it may read (literal values).
    pub config: Vec<String>,
    /// Whether it may have `wasi:keyvalue` buckets.
    pub state: bool,
    /// Whether it may keep an instance for the same caller's next call (`instances =
    /// "per-caller"`); by default each call gets a fresh one.
    pub per_caller_instances: bool,
    /// The most of each limit (`fuel`, `timeout-ms`, `memory-mib`, `output-kib`,
    /// `result-kib`); `serve` fills in those the file does not name with the command line's.
    pub limits: BTreeMap<String, u64>,
}

impl Ceiling {
    /// Why the ceiling cannot be used with the plugin directories `dirs`: a folder of it a
    /// managed plugin may be granted to write holds one of them or lies inside one, so such a
    /// plugin could rewrite plugins and their manifests (its own among them, loaded live).
    pub fn writes_into(&self, dirs: &[PathBuf]) -> Option<String> {
        self.dirs
            .iter()
            .filter(|(_, mode)| *mode == Mode::ReadWrite)
            .find_map(|(folder, _)| {
                let dir = dirs
                    .iter()
                    .find(|d| d.starts_with(folder) || folder.starts_with(d))?;
                let how = if dir.starts_with(folder) {
                    "holds"
                } else {
                    "lies inside"
                };
                Some(format!(
                    "the folder {}, which a managed plugin may be granted to write, {how} the plugin directory {}: such a plugin could rewrite plugins and their manifests there; allow a folder apart from it",
                    folder.display(),
                    dir.display()
                ))
            })
    }
}

/// The limits a ceiling may cap.
pub const LIMIT_KEYS: [&str; 5] = [
    "fuel",
    "timeout-ms",
    "memory-mib",
    "output-kib",
    "result-kib",
];

/// `[manage]`, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManageSettings {
    /// Whether the management tools are served.
    pub enabled: bool,
    /// The scope a caller needs (over HTTP).
    pub scope: Option<String>,
    /// Where managed plugins are installed (absolute).
    pub directory: PathBuf,
    /// The repositories plugins may come from (`REGISTRY/REPOSITORY`, or `REGISTRY/PATH/*`
    /// for any repository under a path, which a search lists from the registry's catalog).
    pub sources: Vec<String>,
    /// Registries spoken to in plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Installs without a question, for clients that cannot fill in forms.
    pub pre_approve: PreApprove,
    /// The most a managed plugin is granted.
    pub ceiling: Ceiling,
}

impl ManageSettings {
    /// Parse the `[manage]` table of the configuration file at `file` (relative paths are
    /// relative to its directory). The error names the key.
    pub fn from_toml(file: &Path, value: toml::Value) -> Result<Self, (String, String)> {
        let toml::Value::Table(table) = value else {
            return Err(("manage".to_owned(), "expected a table: [manage]".to_owned()));
        };
        let base = file.parent().unwrap_or(Path::new("."));
        let mut settings = Self::default();
        let mut directory = None;
        for (key, value) in table {
            let at = |message: String| (format!("manage.{key}"), message);
            match key.as_str() {
                "enabled" => {
                    settings.enabled = value
                        .as_bool()
                        .ok_or_else(|| at("expected true or false".to_owned()))?;
                }
                "scope" => settings.scope = Some(string(&value).map_err(at)?),
                "directory" => directory = Some(base.join(string(&value).map_err(at)?)),
                "sources" => {
                    settings.sources = strings(&value).map_err(at)?;
                    for source in &settings.sources {
                        let last = source.rsplit('/').next().unwrap_or_default();
                        if !source.contains('/') || source.contains('@') || last.contains(':') {
                            return Err(at(format!(
                                "`{source}` is not a repository: REGISTRY/REPOSITORY (no tag or digest), or REGISTRY/PATH/* for any repository under a path"
                            )));
                        }
                    }
                }
                "insecure-registries" => {
                    settings.insecure_registries = strings(&value).map_err(at)?
                }
                "pre-approve" => {
                    settings.pre_approve = match string(&value).map_err(at)?.as_str() {
                        "none" => PreApprove::None,
                        "signed" => PreApprove::Signed,
                        other => {
                            return Err(at(format!(
                                "`{other}`: expected \"none\" (clients that cannot fill in forms are refused) or \"signed\""
                            )));
                        }
                    };
                }
                "ceiling" => settings.ceiling = ceiling(base, value)?,
                _ => {
                    return Err(at(
                        "unknown key; [manage] has enabled, scope, directory, sources, insecure-registries, pre-approve and [manage.ceiling]".to_owned(),
                    ));
                }
            }
        }
        if settings.enabled {
            settings.directory = directory.ok_or_else(|| {
                (
                    "manage.directory".to_owned(),
                    "[manage] needs a directory for the plugins it installs".to_owned(),
                )
            })?;
            if settings.sources.is_empty() {
                return Err((
                    "manage.sources".to_owned(),
                    "[manage] needs at least one source (REGISTRY/REPOSITORY)".to_owned(),
                ));
            }
            // As written here; `serve` checks again once links are resolved, against every
            // plugin directory.
            if let Some(why) = settings
                .ceiling
                .writes_into(std::slice::from_ref(&settings.directory))
            {
                return Err(("manage.ceiling.dirs".to_owned(), why));
            }
        } else if let Some(directory) = directory {
            settings.directory = directory;
        }
        Ok(settings)
    }

    /// Whether `reference` (`REGISTRY/REPOSITORY:TAG` or `@DIGEST`) is in one of the sources.
    pub fn allows(&self, reference: &str) -> bool {
        let repository = repository_of(reference);
        self.sources
            .iter()
            .any(|source| match source.strip_suffix("/*") {
                Some(prefix) => repository
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
                None => repository == source,
            })
    }
}

/// The repository of a reference: without its tag or digest.
pub fn repository_of(reference: &str) -> &str {
    let without_digest = reference.split_once('@').map_or(reference, |(r, _)| r);
    match without_digest.rsplit_once(':') {
        // A colon after the last slash is a tag's (one before it is a port's).
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => without_digest,
    }
}

fn string(value: &toml::Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "expected a string".to_owned())
}

fn strings(value: &toml::Value) -> Result<Vec<String>, String> {
    value
        .as_array()
        .ok_or_else(|| "expected a list of strings".to_owned())?
        .iter()
        .map(string)
        .collect()
}

fn ceiling(base: &Path, value: toml::Value) -> Result<Ceiling, (String, String)> {
    let toml::Value::Table(table) = value else {
        return Err((
            "manage.ceiling".to_owned(),
            "expected a table: [manage.ceiling]".to_owned(),
        ));
    };
    let mut ceiling = Ceiling::default();
    for (key, value) in table {
        let at = |message: String| (format!("manage.ceiling.{key}"), message);
        match key.as_str() {
            "dirs" => {
                for dir in value
                    .as_array()
                    .ok_or_else(|| at("expected a list of { path, mode }".to_owned()))?
                {
                    let path = dir
                        .get("path")
                        .and_then(toml::Value::as_str)
                        .ok_or_else(|| at("each folder needs a `path`".to_owned()))?;
                    let mode = match dir.get("mode") {
                        None => Mode::ReadOnly,
                        Some(mode) => mode.as_str().and_then(Mode::parse).ok_or_else(|| {
                            at("`mode` is \"read-only\" or \"read-write\"".to_owned())
                        })?,
                    };
                    if let Some(table) = dir.as_table()
                        && let Some(unknown) = table.keys().find(|k| *k != "path" && *k != "mode")
                    {
                        return Err(at(format!(
                            "unknown key `{unknown}` (a folder has path and mode)"
                        )));
                    }
                    let path = base.join(path);
                    if path
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir))
                    {
                        return Err(at(format!("{} holds `..`", path.display())));
                    }
                    ceiling.dirs.push((path, mode));
                }
            }
            "hosts" => ceiling.hosts = strings(&value).map_err(at)?,
            "public-http" => {
                ceiling.public_http = value
                    .as_bool()
                    .ok_or_else(|| at("expected true or false".to_owned()))?;
            }
            "env" => ceiling.env = strings(&value).map_err(at)?,
            "config" => ceiling.config = strings(&value).map_err(at)?,
            "state" => {
                ceiling.state = value
                    .as_bool()
                    .ok_or_else(|| at("expected true or false".to_owned()))?;
            }
            "instances" => {
                ceiling.per_caller_instances = match string(&value).map_err(at)?.as_str() {
                    "per-call" => false,
                    "per-caller" => true,
                    other => {
                        return Err(at(format!(
                            "`{other}`: expected \"per-call\" (the default) or \"per-caller\""
                        )));
                    }
                };
            }
            "limits" => {
                let toml::Value::Table(limits) = value else {
                    return Err(at("expected a table".to_owned()));
                };
                for (limit, value) in limits {
                    if !LIMIT_KEYS.contains(&limit.as_str()) {
                        return Err(at(format!(
                            "unknown limit `{limit}` (the limits are {})",
                            LIMIT_KEYS.join(", ")
                        )));
                    }
                    let value = value
                        .as_integer()
                        .and_then(|v| u64::try_from(v).ok())
                        .filter(|v| *v > 0)
                        .ok_or_else(|| at(format!("`{limit}`: expected a positive integer")))?;
                    ceiling.limits.insert(limit, value);
                }
            }
            _ => {
                return Err(at(
                    "unknown key; [manage.ceiling] has dirs, hosts, public-http, env, config, state, instances and [manage.ceiling.limits]".to_owned(),
                ));
            }
        }
    }
    Ok(ceiling)
}
