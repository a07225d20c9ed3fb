//! The manifest file: TOML beside the plugin, parsed strictly and validated into a [`Policy`].
//!
//! ```toml
//! title = "Weather"        # optional: a display name (the plugin's name is its file name)
//! scopes = ["weather"]     # optional: OAuth scopes a caller's token must carry (HTTP + OAuth)
//! prefix = "weather_"      # optional: its tools and prompts are served as weather_NAME
//! reveal-caller = false    # optional: true gives it callers' own keys as their ids
//! skills = true            # optional: false serves none of the skills its component carries
//! instances = "per-call"   # optional: "per-caller" lets an instance serve the same caller's
//!                          # next call, its memory kept (for plugins that keep nothing
//!                          # between calls; never shared between callers)
//!
//! [limits]                 # each key optional; the command line's values are the defaults
//! fuel = 2_000_000_000
//! timeout-ms = 5000
//! memory-mib = 64
//! output-kib = 64
//! result-kib = 1024
//!
//! [[dirs]]                 # repeatable
//! host = "data"            # relative to this file's directory, or absolute
//! guest = "/data"          # optional: by default the host directory's own absolute path
//! mode = "read-only"       # or "read-write"; default read-only
//!
//! [env]
//! UNITS = "metric"                      # a literal value
//! API_KEY = { from-host = "WEATHER_KEY" } # copied from mcpbox's environment at load
//!
//! [http]
//! allow = ["api.open-meteo.com", "127.0.0.1:8080"]
//! public = false           # true: also any host whose every address is public
//!
//! [http.credentials]       # hosts of `allow` called as the caller: mcpbox attaches the
//! "api.github.com" = "github" # caller's token from provider `github` (the configuration's
//!                          # [providers.github]); the plugin never sees it
//!
//! [tools]                  # optional, as are [prompts] and [resources] (by URI or template)
//! allow = ["forecast"]     # only these are served (the plugin's own names)
//! deny = ["debug"]         # never these
//! scopes = { reset = ["admin"] }  # scopes an item requires beyond the plugin's: a caller
//!                                 # without them neither lists nor calls it
//!
//! [keyvalue]               # durable state through wasi:keyvalue
//! buckets = ["default"]    # bucket names it may open, shared by every caller
//! caller-buckets = ["notes"] # bucket names each caller has their own of
//! quota-kib = 16384        # optional: all its keys and values together (default 16 MiB)
//! max-keys = 10000         # optional (default 10,000)
//! max-value-kib = 1024     # optional: one value (default 1 MiB)
//! caller-quota-kib = 1024  # optional: one caller's own buckets (default 1 MiB)
//! caller-max-keys = 1000   # optional (default 1,000)
//! in-memory = false        # optional: true keeps it in this process's memory instead of the
//!                          # state store (no disk, no fsync; gone when mcpbox stops, and
//!                          # not shared between replicas)
//!
//! [tasks]                  # the tasks extension: tools that may run as tasks (own names)
//! optional = ["report"]    # as a task for clients that declare the extension
//! required = ["export"]    # only as a task (-32021 for other clients)
//! timeout-ms = 600000      # optional: a task's time limit (default: limits.timeout), at
//!                          # most the operator's --task-timeout-ms
//!
//! [config]                 # keys it may read through wasi:config/store
//! api-base = "https://api.open-meteo.com"   # a literal
//! api-key = { secret = "weather-key" }      # from the secrets file (a caller's own first)
//! region = { env = "REGION", optional = true } # from mcpbox's environment at load
//! ```
//!
//! This file reads the whole document and owns its errors (with the line and the key of
//! each); the sections' rules live beside it: [`naming`] (`prefix`, `[tools]`, `[prompts]`,
//! `[resources]`), [`grants`] (`[[dirs]]`, `[env]`, `[http]`, `[keyvalue]`, `[config]`) and
//! [`limits`].
//! Like all of `policy`, it depends on nothing else in the crate.

mod grants;
mod limits;
mod naming;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use self::grants::{
    ConfigValue, DirTable, EnvValue, HttpTable, KeyValueTable, config, credentials, dirs, env,
    http, keyvalue,
};
use self::limits::{LimitsTable, TasksTable, limits, tasks};
use self::naming::{FilterTable, filter, prefix};
use super::locate::{key_at, line_of_key};
use super::{CommandLineGrant, Instances, Limits, Naming, Policy};

/// Why a manifest (or a `[plugin.NAME]` section) was refused: the file, the line and the key
/// in it, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}{}{}: {message}", file.display(), line.map(|l| format!(": line {l}")).unwrap_or_default(), key.as_deref().map(|k| format!(": {k}")).unwrap_or_default())]
pub struct PolicyError {
    file: PathBuf,
    /// The line, when known.
    line: Option<usize>,
    /// The key path, such as `dirs[0].host` (`plugin.NAME.dirs[0].host` in a section).
    key: Option<String>,
    message: String,
}

impl PolicyError {
    /// An error about a command-line grant (`flag`, as written): it stands where a file would.
    fn of_flag(flag: &str, message: impl Into<String>) -> Self {
        Self {
            file: PathBuf::from(flag),
            line: None,
            key: None,
            message: message.into(),
        }
    }

    fn at(file: &Path, key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line: None,
            key: Some(key.into()),
            message: message.into(),
        }
    }

    /// The same error about a `scopes` list found at `key` (an item's, not the plugin's).
    fn under(mut self, key: &str) -> Self {
        self.key = self
            .key
            .map(|k| format!("{key}{}", k.strip_prefix("scopes").unwrap_or(&k)));
        self
    }

    /// Fill in the line of the key, or the key of the line, from `text` (the file's text).
    fn locate(mut self, text: &str) -> Self {
        if self.line.is_none()
            && let Some(key) = &self.key
        {
            self.line = line_of_key(text, key);
        }
        self
    }
}

/// The manifest that belongs to a plugin file: the same name with `.toml`.
pub fn manifest_path(plugin: &Path) -> PathBuf {
    plugin.with_extension("toml")
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// A display name for people (logs, `mcpbox inspect`); the plugin's name stays its file
    /// name.
    title: Option<String>,
    #[serde(default)]
    limits: LimitsTable,
    #[serde(default)]
    dirs: Vec<DirTable>,
    #[serde(default)]
    env: BTreeMap<String, EnvValue>,
    #[serde(default)]
    http: HttpTable,
    keyvalue: Option<KeyValueTable>,
    #[serde(default)]
    scopes: Vec<String>,
    /// Put before each tool and prompt name.
    prefix: Option<String>,
    #[serde(default)]
    tools: FilterTable,
    #[serde(default)]
    prompts: FilterTable,
    #[serde(default)]
    resources: FilterTable,
    /// Keys it may read through `wasi:config/store`.
    #[serde(default)]
    config: BTreeMap<String, ConfigValue>,
    /// Give it callers' own keys as their ids.
    #[serde(default, rename = "reveal-caller")]
    reveal_caller: bool,
    /// Serve the skills its component carries (the default).
    #[serde(default)]
    skills: Option<bool>,
    /// Tools that may run as tasks.
    #[serde(default)]
    tasks: TasksTable,
    /// Whether an instance may serve one caller's calls in turn (checked in [`instances`]).
    instances: Option<toml::Value>,
}

/// The manifest's `instances`: `"per-call"` (the default) or `"per-caller"`.
fn instances(file: &Path, value: Option<&toml::Value>) -> Result<Instances, PolicyError> {
    match value.map(|v| v.as_str()) {
        None | Some(Some("per-call")) => Ok(Instances::PerCall),
        Some(Some("per-caller")) => Ok(Instances::PerCaller),
        Some(_) => Err(PolicyError::at(
            file,
            "instances",
            "instances is \"per-call\" (a fresh instance for every call, the default) or \"per-caller\" (an instance may serve the same caller's next call)",
        )),
    }
}

/// Read and validate the manifest at `file`. `defaults` are the limits of a plugin without
/// one (from the command line); the manifest overrides them key by key.
pub fn load_manifest(file: &Path, defaults: Limits) -> Result<Policy, PolicyError> {
    let text = std::fs::read_to_string(file).map_err(|e| PolicyError {
        file: file.to_owned(),
        line: None,
        key: None,
        message: format!("cannot read it: {e}"),
    })?;
    parse_manifest(file, &text, defaults)
}

/// Validate the manifest text `text`, read from `file` (which relative paths and messages
/// refer to).
pub fn parse_manifest(file: &Path, text: &str, defaults: Limits) -> Result<Policy, PolicyError> {
    parse_manifest_granting(file, text, defaults, &[])
}

/// [`parse_manifest`], with the command line's grants of the plugin (`cli`): its directories
/// within the manifest's, as `policy::command_line` says. A plugin without a manifest is
/// given an empty `text`.
pub fn parse_manifest_granting(
    file: &Path,
    text: &str,
    defaults: Limits,
    cli: &[CommandLineGrant],
) -> Result<Policy, PolicyError> {
    validate(file, text, defaults, cli).map_err(|e| e.locate(text))
}

fn validate(
    file: &Path,
    text: &str,
    defaults: Limits,
    cli: &[CommandLineGrant],
) -> Result<Policy, PolicyError> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| syntax_error(file, text, &e))?;
    if let Some(title) = &manifest.title
        && (title.is_empty() || title.len() > 128 || title.chars().any(char::is_control))
    {
        return Err(PolicyError::at(
            file,
            "title",
            "a title is 1 to 128 bytes without control characters",
        ));
    }
    let mut limits = limits(file, &manifest.limits, defaults)?;
    let tasks = tasks(file, manifest.tasks, &mut limits)?;
    let http_grants = http(file, &manifest.http.allow)?;
    Ok(Policy {
        title: manifest.title,
        limits,
        dirs: dirs(file, &manifest.dirs, cli)?,
        env: env(file, manifest.env)?,
        credentials: credentials(file, &http_grants, manifest.http.credentials)?,
        http: http_grants,
        http_public: manifest.http.public,
        keyvalue: manifest
            .keyvalue
            .map(|table| keyvalue(file, table).map(Arc::new))
            .transpose()?,
        scopes: scopes(file, manifest.scopes)?,
        naming: Naming {
            prefix: prefix(file, manifest.prefix)?,
            tools: filter(file, "tools", manifest.tools)?,
            prompts: filter(file, "prompts", manifest.prompts)?,
            resources: filter(file, "resources", manifest.resources)?,
        },
        config: config(file, manifest.config)?,
        reveal_caller: manifest.reveal_caller,
        hide_skills: manifest.skills == Some(false),
        tasks,
        instances: instances(file, manifest.instances.as_ref())?,
    })
}

/// OAuth scope tokens (RFC 6749 §3.3: printable ASCII but space, `"` and `\\`), once each.
pub(super) fn scopes(file: &Path, scopes: Vec<String>) -> Result<Vec<String>, PolicyError> {
    let mut seen = HashSet::new();
    for (i, scope) in scopes.iter().enumerate() {
        let valid = !scope.is_empty()
            && scope.len() <= 256
            && scope
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\');
        if !valid {
            return Err(PolicyError::at(
                file,
                format!("scopes[{i}]"),
                "a scope is 1 to 256 printable ASCII characters without spaces, quotes or backslashes",
            ));
        }
        if !seen.insert(scope.as_str()) {
            return Err(PolicyError::at(
                file,
                format!("scopes[{i}]"),
                format!("`{scope}` is listed twice"),
            ));
        }
    }
    Ok(scopes)
}

/// Check the shape of every `[plugin.NAME]` section of the configuration file `file` (text
/// `text`): unknown keys and wrong types are errors at their line in that file. (Values are
/// checked by [`parse_section`], section by section.)
pub fn check_sections(file: &Path, text: &str) -> Result<(), PolicyError> {
    #[derive(Deserialize)]
    struct Sections {
        #[serde(default)]
        plugin: BTreeMap<String, Manifest>,
    }
    toml::from_str::<Sections>(text)
        .map(|sections| drop(sections.plugin))
        .map_err(|e| syntax_error(file, text, &e))
}

/// Validate a plugin's `[plugin.NAME]` section of the configuration file `file`, as TOML text
/// (relative directories are relative to that file's directory): the same keys and rules as a
/// manifest beside the plugin.
pub fn parse_section(
    file: &Path,
    name: &str,
    text: &str,
    defaults: Limits,
) -> Result<Policy, PolicyError> {
    parse_section_granting(file, name, text, defaults, &[])
}

/// [`parse_section`], with the command line's grants of the plugin (`cli`).
pub fn parse_section_granting(
    file: &Path,
    name: &str,
    text: &str,
    defaults: Limits,
    cli: &[CommandLineGrant],
) -> Result<Policy, PolicyError> {
    validate(file, text, defaults, cli).map_err(|mut e| {
        if e.key.is_none() && e.file != file {
            // About a command-line grant: nothing of the section to name.
            return e;
        }
        // Lines of the section's own text are not the file's: [`PolicyError::in_file`] finds
        // the key in the file.
        e.line = None;
        e.key = Some(match e.key {
            Some(inner) => format!("plugin.{name}.{inner}"),
            None => format!("plugin.{name}"),
        });
        e
    })
}

impl PolicyError {
    /// This error of a `[plugin.NAME]` section, with the line of its key in `text`, the whole
    /// configuration file.
    pub fn in_file(self, text: &str) -> Self {
        self.locate(text)
    }
}

fn syntax_error(file: &Path, text: &str, e: &toml::de::Error) -> PolicyError {
    let start = e.span().map(|span| span.start.min(text.len()));
    PolicyError {
        file: file.to_owned(),
        line: start.map(|start| text[..start].matches('\n').count() + 1),
        key: start.and_then(|start| key_at(text, start)),
        message: e.message().trim().to_owned(),
    }
}

/// The number under `key` (such as `limits.memory-mib`), refused when it is 0 or over `max`;
/// `None` when the key is absent.
fn bounded(
    file: &Path,
    key: &str,
    value: Option<u64>,
    max: u64,
) -> Result<Option<u64>, PolicyError> {
    match value {
        Some(0) => Err(PolicyError::at(file, key, "must be greater than 0")),
        Some(v) if v > max => Err(PolicyError::at(
            file,
            key,
            format!("{v} is over the maximum of {max}"),
        )),
        other => Ok(other),
    }
}

#[cfg(test)]
mod test_support {
    use std::path::{Path, PathBuf};

    use super::load_manifest;
    use crate::policy::Limits;

    pub(super) fn write(dir: &Path, text: &str) -> PathBuf {
        let file = dir.join("plugin.toml");
        std::fs::write(&file, text).unwrap();
        file
    }

    pub(super) fn error(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        load_manifest(&write(dir.path(), text), Limits::default())
            .unwrap_err()
            .to_string()
    }
}

#[cfg(test)]
mod tests;
