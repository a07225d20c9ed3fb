//! The manifest file: TOML beside the plugin, parsed strictly and validated into a [`Policy`].
//!
//! ```toml
//! title = "Weather"        # optional: a display name (the plugin's name is its file name)
//! scopes = ["weather"]     # optional: OAuth scopes a caller's token must carry (HTTP + OAuth)
//! prefix = "weather_"      # optional: its tools and prompts are served as weather_NAME
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
//! guest = "/data"
//! mode = "read-only"       # or "read-write"; default read-only
//!
//! [env]
//! UNITS = "metric"                      # a literal value
//! API_KEY = { from-host = "WEATHER_KEY" } # copied from mcpbox's environment at load
//!
//! [http]
//! allow = ["api.open-meteo.com", "127.0.0.1:8080"]
//!
//! [tools]                  # optional, as are [prompts] and [resources] (by URI or template)
//! allow = ["forecast"]     # only these are served (the plugin's own names)
//! deny = ["debug"]         # never these
//!
//! [keyvalue]               # durable state through wasi:keyvalue
//! buckets = ["default"]    # the bucket names it may open
//! quota-kib = 16384        # optional: all its keys and values together (default 16 MiB)
//! max-keys = 10000         # optional (default 10,000)
//! max-value-kib = 1024     # optional: one value (default 1 MiB)
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use super::locate::{key_at, line_of_key};
use super::{DirGrant, EnvGrant, HttpGrant, ItemFilter, KvGrant, Limits, Naming, Policy, resolve};

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
    fn at(file: &Path, key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line: None,
            key: Some(key.into()),
            message: message.into(),
        }
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
}

/// `[tools]`, `[prompts]`, `[resources]`: which of the plugin's items are served.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterTable {
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct KeyValueTable {
    buckets: Vec<String>,
    quota_kib: Option<u64>,
    max_keys: Option<u64>,
    max_value_kib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LimitsTable {
    fuel: Option<u64>,
    timeout_ms: Option<u64>,
    memory_mib: Option<u64>,
    output_kib: Option<u64>,
    result_kib: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirTable {
    host: PathBuf,
    guest: String,
    #[serde(default)]
    mode: DirMode,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum DirMode {
    #[default]
    ReadOnly,
    ReadWrite,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpTable {
    #[serde(default)]
    allow: Vec<String>,
}

/// An `[env]` value: a string, or `{ from-host = "NAME" }`.
#[derive(Debug)]
enum EnvValue {
    Literal(String),
    FromHost(String),
}

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvVisitor;
        impl<'de> Visitor<'de> for EnvVisitor {
            type Value = EnvValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a string, or { from-host = "NAME" }"#)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(value.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnvValue, A::Error> {
                let mut source = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "from-host" || source.is_some() {
                        return Err(de::Error::custom(format!(
                            r#"unexpected key `{key}`: expected a string, or {{ from-host = "NAME" }}"#
                        )));
                    }
                    source = Some(map.next_value::<String>()?);
                }
                source
                    .map(EnvValue::FromHost)
                    .ok_or_else(|| de::Error::missing_field("from-host"))
            }
        }
        deserializer.deserialize_any(EnvVisitor)
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
    validate(file, text, defaults).map_err(|e| e.locate(text))
}

fn validate(file: &Path, text: &str, defaults: Limits) -> Result<Policy, PolicyError> {
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
    Ok(Policy {
        title: manifest.title,
        limits: limits(file, &manifest.limits, defaults)?,
        dirs: dirs(file, &manifest.dirs)?,
        env: env(file, manifest.env)?,
        http: http(file, &manifest.http.allow)?,
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
    })
}

/// The longest name prefix: tool and prompt names stay within the 64 characters clients take.
const MAX_PREFIX_CHARS: usize = 32;

/// A name prefix: what tool and prompt names may hold (`A-Z a-z 0-9 _ -`), 1 to 32 of them.
fn prefix(file: &Path, prefix: Option<String>) -> Result<Option<String>, PolicyError> {
    if let Some(prefix) = &prefix {
        let valid = !prefix.is_empty()
            && prefix.len() <= MAX_PREFIX_CHARS
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(PolicyError::at(
                file,
                "prefix",
                format!(
                    "a prefix is 1 to {MAX_PREFIX_CHARS} of A-Z, a-z, 0-9, `_` and `-` (such as \"todo_\")"
                ),
            ));
        }
    }
    Ok(prefix)
}

/// An allow-list and a deny-list of `kind` (`tools`, …): names, each once, none in both.
fn filter(file: &Path, kind: &str, table: FilterTable) -> Result<ItemFilter, PolicyError> {
    let mut seen = HashSet::new();
    let lists = table
        .allow
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| ("allow", i, n))
        .chain(table.deny.iter().enumerate().map(|(i, n)| ("deny", i, n)));
    for (list, i, name) in lists {
        let key = format!("{kind}.{list}[{i}]");
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(PolicyError::at(
                file,
                key,
                "a name is not empty and has no control characters",
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(PolicyError::at(
                file,
                key,
                format!("`{name}` is listed twice (in `allow` and `deny` together)"),
            ));
        }
    }
    Ok(ItemFilter {
        allow: table.allow,
        deny: table.deny,
    })
}

/// OAuth scope tokens (RFC 6749 §3.3: printable ASCII but space, `"` and `\\`), once each.
fn scopes(file: &Path, scopes: Vec<String>) -> Result<Vec<String>, PolicyError> {
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
    validate(file, text, defaults).map_err(|mut e| {
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

/// The longest bucket name a manifest may grant.
const MAX_BUCKET_NAME_BYTES: usize = 128;

fn keyvalue(file: &Path, table: KeyValueTable) -> Result<KvGrant, PolicyError> {
    let mut seen = HashSet::new();
    for (i, bucket) in table.buckets.iter().enumerate() {
        let key = format!("keyvalue.buckets[{i}]");
        if bucket.is_empty() || bucket.len() > MAX_BUCKET_NAME_BYTES {
            return Err(PolicyError::at(
                file,
                key,
                format!("a bucket name is 1 to {MAX_BUCKET_NAME_BYTES} bytes"),
            ));
        }
        if bucket.chars().any(char::is_control) {
            return Err(PolicyError::at(
                file,
                key,
                "a bucket name has no control characters",
            ));
        }
        if !seen.insert(bucket.as_str()) {
            return Err(PolicyError::at(
                file,
                key,
                format!("`{bucket}` is granted twice"),
            ));
        }
    }
    if table.buckets.is_empty() {
        return Err(PolicyError::at(
            file,
            "keyvalue.buckets",
            "grant at least one bucket, such as buckets = [\"default\"]",
        ));
    }
    let sized = |key: &str, value: Option<u64>, unit: u64, max: u64, default: u64| match value {
        None => Ok(default),
        Some(0) => Err(PolicyError::at(
            file,
            format!("keyvalue.{key}"),
            "must be greater than 0",
        )),
        Some(v) if v > max => Err(PolicyError::at(
            file,
            format!("keyvalue.{key}"),
            format!("{v} is over the maximum of {max}"),
        )),
        Some(v) => Ok(v * unit),
    };
    Ok(KvGrant {
        buckets: table.buckets,
        // Up to 1 TiB in all (a Redis server or disk bounds it long before), 64 MiB a value
        // (one value passes through host memory whole).
        max_bytes: sized(
            "quota-kib",
            table.quota_kib,
            1 << 10,
            1 << 30,
            KvGrant::DEFAULT_MAX_BYTES,
        )?,
        max_keys: sized(
            "max-keys",
            table.max_keys,
            1,
            1 << 32,
            KvGrant::DEFAULT_MAX_KEYS,
        )?,
        max_value_bytes: sized(
            "max-value-kib",
            table.max_value_kib,
            1 << 10,
            64 << 10,
            KvGrant::DEFAULT_MAX_VALUE_BYTES,
        )?,
    })
}

fn limits(file: &Path, table: &LimitsTable, defaults: Limits) -> Result<Limits, PolicyError> {
    let positive = |key: &str, value: Option<u64>| -> Result<Option<u64>, PolicyError> {
        match value {
            Some(0) => Err(PolicyError::at(
                file,
                format!("limits.{key}"),
                "must be greater than 0",
            )),
            other => Ok(other),
        }
    };
    let bytes = |key: &str,
                 value: Option<u64>,
                 unit: u64,
                 max: u64,
                 default: usize|
     -> Result<usize, PolicyError> {
        match positive(key, value)? {
            None => Ok(default),
            Some(v) if v > max => Err(PolicyError::at(
                file,
                format!("limits.{key}"),
                format!("{v} is over the maximum of {max}"),
            )),
            Some(v) => usize::try_from(v * unit)
                .map_err(|_| PolicyError::at(file, format!("limits.{key}"), "too large")),
        }
    };
    Ok(Limits {
        fuel: positive("fuel", table.fuel)?.unwrap_or(defaults.fuel),
        timeout: positive("timeout-ms", table.timeout_ms)?
            .map_or(defaults.timeout, Duration::from_millis),
        memory_bytes: bytes(
            "memory-mib",
            table.memory_mib,
            1 << 20,
            4096,
            defaults.memory_bytes,
        )?,
        output_bytes: bytes(
            "output-kib",
            table.output_kib,
            1 << 10,
            64 << 10,
            defaults.output_bytes,
        )?,
        result_bytes: bytes(
            "result-kib",
            table.result_kib,
            1 << 10,
            1 << 20,
            defaults.result_bytes,
        )?,
    })
}

fn dirs(file: &Path, tables: &[DirTable]) -> Result<Vec<DirGrant>, PolicyError> {
    let mut guests = HashSet::new();
    tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let key = |field: &str| format!("dirs[{i}].{field}");
            let host = resolve(file, &table.host);
            let host = host.canonicalize().map_err(|e| {
                PolicyError::at(file, key("host"), format!("cannot use directory {}: {e}", host.display()))
            })?;
            if !host.is_dir() {
                return Err(PolicyError::at(file, key("host"), format!("{} is not a directory", host.display())));
            }
            let guest = Path::new(&table.guest);
            let normal = guest.is_absolute() && guest.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            if !normal || table.guest == "/" {
                return Err(PolicyError::at(
                    file,
                    key("guest"),
                    format!("`{}` must be an absolute path below `/` without `.` or `..`, such as `/data`", table.guest),
                ));
            }
            if !guests.insert(table.guest.clone()) {
                return Err(PolicyError::at(file, key("guest"), format!("`{}` is mapped twice", table.guest)));
            }
            Ok(DirGrant { host, guest: table.guest.clone(), writable: matches!(table.mode, DirMode::ReadWrite) })
        })
        .collect()
}

fn env(file: &Path, table: BTreeMap<String, EnvValue>) -> Result<Vec<EnvGrant>, PolicyError> {
    table
        .into_iter()
        .map(|(name, value)| {
            let key = format!("env.{name}");
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(PolicyError::at(file, key, "not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"));
            }
            Ok(match value {
                EnvValue::Literal(value) => EnvGrant { name, value, from_host: None },
                EnvValue::FromHost(source) => {
                    let value = std::env::var(&source).map_err(|_| {
                        PolicyError::at(file, key, format!("`from-host = \"{source}\"`, but ${source} is not set in mcpbox's environment"))
                    })?;
                    EnvGrant { name, value, from_host: Some(source) }
                }
            })
        })
        .collect()
}

fn http(file: &Path, allow: &[String]) -> Result<Vec<HttpGrant>, PolicyError> {
    allow
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            parse_http_grant(entry)
                .map_err(|why| PolicyError::at(file, format!("http.allow[{i}]"), why))
        })
        .collect()
}

/// `host`, `host:port`, `1.2.3.4:80` or `[::1]:8080`.
fn parse_http_grant(entry: &str) -> Result<HttpGrant, String> {
    let expected = || format!("expected `host` or `host:port`, found `{entry}`");
    if entry.contains("://") || entry.contains('/') || entry.is_empty() {
        return Err(expected());
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (host, rest) = rest.split_once(']').ok_or_else(expected)?;
        (host, rest.strip_prefix(':'))
    } else if entry.matches(':').count() == 1 {
        let (host, port) = entry.split_once(':').ok_or_else(expected)?;
        (host, Some(port))
    } else {
        (entry, None)
    };
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("`{p}` is not a port number"))
        })
        .transpose()?;
    let host = host.to_ascii_lowercase();
    let valid = !host.is_empty()
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            }));
    if !valid {
        return Err(expected());
    }
    Ok(HttpGrant { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let file = dir.join("plugin.toml");
        std::fs::write(&file, text).unwrap();
        file
    }

    fn error(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        load_manifest(&write(dir.path(), text), Limits::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_full_manifest_parses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let text = r#"
            title = "Weather, by Example Corp"

            [limits]
            fuel = 1000
            timeout-ms = 2000
            memory-mib = 64

            [[dirs]]
            host = "data"
            guest = "/data"
            mode = "read-write"

            [env]
            UNITS = "metric"
            HOME_DIR = { from-host = "CARGO_MANIFEST_DIR" }

            [http]
            allow = ["API.example.com", "127.0.0.1:8080", "[::1]:9000"]
        "#;
        let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
        assert_eq!(policy.title.as_deref(), Some("Weather, by Example Corp"));
        assert_eq!(policy.limits.fuel, 1000);
        assert_eq!(policy.limits.timeout, Duration::from_secs(2));
        assert_eq!(policy.limits.memory_bytes, 64 << 20);
        assert_eq!(policy.limits.output_bytes, Limits::DEFAULT_OUTPUT_BYTES);
        assert_eq!(policy.dirs[0].guest, "/data");
        assert!(policy.dirs[0].writable);
        assert!(policy.dirs[0].host.is_absolute());
        assert_eq!(policy.env[0].name, "HOME_DIR");
        assert_eq!(
            policy.env[0].from_host.as_deref(),
            Some("CARGO_MANIFEST_DIR")
        );
        assert_eq!(policy.env[1].value, "metric");
        assert_eq!(
            policy.http[0],
            HttpGrant {
                host: "api.example.com".into(),
                port: None
            }
        );
        assert_eq!(
            policy.http[1],
            HttpGrant {
                host: "127.0.0.1".into(),
                port: Some(8080)
            }
        );
        assert_eq!(
            policy.http[2],
            HttpGrant {
                host: "::1".into(),
                port: Some(9000)
            }
        );
    }

    #[test]
    fn unknown_keys_name_the_line() {
        let e = error("[limits]\nfule = 5\n");
        assert!(
            e.contains("plugin.toml: line 2") && e.contains("unknown field `fule`"),
            "{e}"
        );
        let e = error("[network]\nallow = true\n");
        assert!(
            e.contains("line 1") && e.contains("unknown field `network`"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        assert!(error("[limits]\nfuel = 0\n").contains("limits.fuel: must be greater than 0"));
        assert!(error("[limits]\nmemory-mib = 100000\n").contains("limits.memory-mib"));
        let e = error("[[dirs]]\nhost = \"nope\"\nguest = \"/x\"\n");
        assert!(e.contains("dirs[0].host: cannot use directory"), "{e}");
        let e = error("[[dirs]]\nhost = \".\"\nguest = \"../x\"\n");
        assert!(e.contains("dirs[0].guest"), "{e}");
        let e = error("[env]\nX = { from-host = \"MCPBOX_TEST_SURELY_UNSET\" }\n");
        assert!(e.contains("env.X") && e.contains("not set"), "{e}");
        let e = error("[env]\n\"1X\" = \"v\"\n");
        assert!(e.contains("env.1X"), "{e}");
        let e = error("[http]\nallow = [\"https://x.com\"]\n");
        assert!(
            e.contains("http.allow[0]: expected `host` or `host:port`"),
            "{e}"
        );
        let e = error("[http]\nallow = [\"x.com:99999\"]\n");
        assert!(e.contains("is not a port number"), "{e}");
        let e = error("[env]\nX = 5\n");
        assert!(e.contains("line 2") && e.contains("from-host"), "{e}");
    }

    #[test]
    fn naming_parses_prefix_and_lists() {
        let text = "prefix = \"todo_\"\n[tools]\nallow = [\"add\", \"list\"]\ndeny = [\"list\"]\n[resources]\ndeny = [\"todo://items\"]\n";
        let e = error(text);
        assert!(
            e.contains("line 4: tools.deny[0]: `list` is listed twice"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let text = "prefix = \"todo_\"\n[tools]\nallow = [\"add\", \"list\"]\n[resources]\ndeny = [\"todo://items\"]\n";
        let naming = load_manifest(&write(dir.path(), text), Limits::default())
            .unwrap()
            .naming;
        assert_eq!(naming.prefix.as_deref(), Some("todo_"));
        assert_eq!(naming.served_name("add"), "todo_add");
        assert!(naming.tools.shows("add") && !naming.tools.shows("remove"));
        assert!(naming.prompts.shows("anything"));
        assert!(!naming.resources.shows("todo://items"));
        assert_eq!(
            crate::policy::NamingSummary(&naming).to_string(),
            "tool and prompt names prefixed with `todo_`; tools only [add, list]; resources hidden [todo://items]"
        );
        assert!(error("prefix = \"a b\"\n").contains("line 1: prefix: a prefix is"));
        assert!(error("prefix = \"\"\n").contains("prefix: a prefix is"));
        let e = error("[prompts]\nonly = [\"x\"]\n");
        assert!(
            e.contains("line 2: prompts.only: unknown field `only`"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        let e = error("title = \"x\"\n\n[limits]\nfuel = 0\n");
        assert!(
            e.contains("plugin.toml: line 4: limits.fuel: must be"),
            "{e}"
        );
        let e = error("[limits]\nfuel = \"many\"\n");
        assert!(e.contains("line 2: limits.fuel: invalid type"), "{e}");
        // A section of the configuration file: its key and its line in the file.
        let config = "fuel = 5\n\n[plugin.todo]\ntitle = \"T\"\n\n[plugin.todo.limits]\nfuel = 0\n";
        let section = "title = \"T\"\n[limits]\nfuel = 0\n";
        let e = parse_section(Path::new("mcpbox.toml"), "todo", section, Limits::default())
            .unwrap_err()
            .in_file(config)
            .to_string();
        assert_eq!(
            e,
            "mcpbox.toml: line 7: plugin.todo.limits.fuel: must be greater than 0"
        );
        let e = check_sections(Path::new("mcpbox.toml"), "[plugin.todo.tools]\nallow = 5\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcpbox.toml: line 2: plugin.todo.tools.allow: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn keyvalue_grants_buckets_and_quotas() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[keyvalue]\nbuckets = [\"default\", \"cache\"]\nmax-keys = 5\n";
        let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
        let grant = policy.keyvalue.unwrap();
        assert_eq!(grant.buckets, ["default", "cache"]);
        assert_eq!(grant.max_keys, 5);
        assert_eq!(grant.max_bytes, KvGrant::DEFAULT_MAX_BYTES);
        let e = error("[keyvalue]\nbuckets = []\n");
        assert!(
            e.contains("keyvalue.buckets") && e.contains("at least one"),
            "{e}"
        );
        let e = error("[keyvalue]\nbuckets = [\"a\", \"a\"]\n");
        assert!(
            e.contains("keyvalue.buckets[1]") && e.contains("twice"),
            "{e}"
        );
        let e = error("[keyvalue]\nbuckets = [\"\"]\n");
        assert!(e.contains("keyvalue.buckets[0]"), "{e}");
        let e = error("[keyvalue]\nbuckets = [\"a\"]\nquota-kib = 0\n");
        assert!(
            e.contains("keyvalue.quota-kib: must be greater than 0"),
            "{e}"
        );
        let e = error("[keyvalue]\nbuckets = [\"a\"]\nmax-value-kb = 1\n");
        assert!(e.contains("unknown field `max-value-kb`"), "{e}");
        assert!(error("[keyvalue]\nquota-kib = 1\n").contains("missing field `buckets`"));
        assert!(error("title = \"\"\n").contains("title: a title is 1 to 128 bytes"));
    }

    #[test]
    fn grants_match_host_and_port() {
        let grant = parse_http_grant("api.example.com").unwrap();
        assert!(grant.allows("api.example.com", 443, 443));
        assert!(!grant.allows("api.example.com", 8443, 443));
        assert!(!grant.allows("evil.com", 443, 443));
        assert!(!grant.is_address_literal());
        assert!(
            parse_http_grant("127.0.0.1:80")
                .unwrap()
                .is_address_literal()
        );
    }
}
