//! The grants of a manifest: `[[dirs]]`, `[env]`, `[http]` (with `[http.credentials]`),
//! `[keyvalue]` and `[config]`, validated into [`DirGrant`], [`EnvGrant`], [`HttpGrant`],
//! [`CredentialGrant`], [`KvGrant`] and the `[config]` table's `ConfigKey`s. A grant that cannot work (a missing directory, an
//! unset host variable) is refused here, at load.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use super::{PolicyError, bounded};
use crate::policy::config::check_name;
use crate::policy::{
    CommandLineGrant, ConfigKey, ConfigSource, CredentialGrant, DirGrant, EnvGrant, HttpGrant,
    KvGrant, SecretValue, resolve,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct KeyValueTable {
    #[serde(default)]
    buckets: Vec<String>,
    #[serde(default)]
    caller_buckets: Vec<String>,
    quota_kib: Option<u64>,
    max_keys: Option<u64>,
    max_value_kib: Option<u64>,
    caller_quota_kib: Option<u64>,
    caller_max_keys: Option<u64>,
    #[serde(default)]
    in_memory: bool,
    /// Whose `caller-buckets` are: `"caller"` (the default) or `"session"`.
    caller_scope: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DirTable {
    host: PathBuf,
    /// Where the plugin sees it; by default at the same absolute path as on the host.
    guest: Option<String>,
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
pub(super) struct HttpTable {
    #[serde(default)]
    pub(super) allow: Vec<String>,
    /// The public internet: any host whose every resolved address is public.
    #[serde(default)]
    pub(super) public: bool,
    /// Hosts of `allow` called as the caller: `"host[:port]" = "provider"`.
    #[serde(default)]
    pub(super) credentials: BTreeMap<String, String>,
}

/// An `[env]` value: a string, or `{ from-host = "NAME" }`.
#[derive(Debug)]
pub(super) enum EnvValue {
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

/// A value in the `[config]` table: a literal, or `{ env = "VAR" }` / `{ secret = "NAME" }`,
/// either with `optional = true`.
#[derive(Debug)]
pub(super) struct ConfigValue {
    source: ConfigFrom,
    optional: bool,
}

#[derive(Debug)]
enum ConfigFrom {
    Literal(String),
    Env(String),
    Secret(String),
}

const CONFIG_EXPECTED: &str =
    r#"a string, { env = "VARIABLE" } or { secret = "NAME" } (either with optional = true)"#;

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ConfigVisitor;
        impl<'de> Visitor<'de> for ConfigVisitor {
            type Value = ConfigValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(CONFIG_EXPECTED)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<ConfigValue, E> {
                Ok(ConfigValue {
                    source: ConfigFrom::Literal(value.to_owned()),
                    optional: false,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConfigValue, A::Error> {
                let (mut source, mut optional) = (None, false);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "env" | "secret" if source.is_none() => {
                            let name = map.next_value::<String>()?;
                            source = Some(if key == "env" {
                                ConfigFrom::Env(name)
                            } else {
                                ConfigFrom::Secret(name)
                            });
                        }
                        "optional" => optional = map.next_value::<bool>()?,
                        _ => {
                            return Err(de::Error::custom(format!(
                                "unexpected key `{key}`: expected {CONFIG_EXPECTED}"
                            )));
                        }
                    }
                }
                let source = source.ok_or_else(|| {
                    de::Error::custom(format!("no source: expected {CONFIG_EXPECTED}"))
                })?;
                Ok(ConfigValue { source, optional })
            }
        }
        deserializer.deserialize_any(ConfigVisitor)
    }
}

/// The most keys a `[config]` table may name.
const MAX_CONFIG_KEYS: usize = 256;

/// The `[config]` table: each key checked, variables read from mcpbox's environment now.
pub(super) fn config(
    file: &Path,
    table: BTreeMap<String, ConfigValue>,
) -> Result<Vec<ConfigKey>, PolicyError> {
    if table.len() > MAX_CONFIG_KEYS {
        return Err(PolicyError::at(
            file,
            "config",
            format!("at most {MAX_CONFIG_KEYS} keys"),
        ));
    }
    table
        .into_iter()
        .map(|(name, value)| {
            let key = format!("config.{name}");
            check_name(&name).map_err(|why| PolicyError::at(file, &key, why))?;
            let source = match value.source {
                ConfigFrom::Literal(text) => ConfigSource::Literal(text),
                ConfigFrom::Secret(secret) => {
                    check_name(&secret).map_err(|why| PolicyError::at(file, &key, why))?;
                    ConfigSource::Secret(secret)
                }
                ConfigFrom::Env(var) => {
                    let value = std::env::var(&var).ok().map(SecretValue::new);
                    ConfigSource::Env { var, value }
                }
            };
            if let ConfigSource::Env { var, value: None } = &source
                && !value.optional
            {
                return Err(PolicyError::at(
                    file,
                    key,
                    format!(
                        "`env = \"{var}\"`, but ${var} is not set in mcpbox's environment \
                         (set it, or mark the key optional = true)"
                    ),
                ));
            }
            Ok(ConfigKey {
                name,
                source,
                optional: value.optional,
            })
        })
        .collect()
}

/// The longest bucket name a manifest may grant.
const MAX_BUCKET_NAME_BYTES: usize = 128;

pub(super) fn keyvalue(file: &Path, table: KeyValueTable) -> Result<KvGrant, PolicyError> {
    let mut seen = HashSet::new();
    let named = (table
        .buckets
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("keyvalue.buckets[{i}]"), b)))
    .chain(
        table
            .caller_buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("keyvalue.caller-buckets[{i}]"), b)),
    );
    for (key, bucket) in named {
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
    if table.buckets.is_empty() && table.caller_buckets.is_empty() {
        return Err(PolicyError::at(
            file,
            "keyvalue.buckets",
            "grant at least one bucket, such as buckets = [\"default\"] (shared by every \
             caller) or caller-buckets = [\"notes\"] (each caller's own)",
        ));
    }
    let sized = |key: &str, value: Option<u64>, unit: u64, max: u64, default: u64| {
        bounded(file, &format!("keyvalue.{key}"), value, max)
            .map(|v| v.map_or(default, |v| v * unit))
    };
    let per_session = match table.caller_scope.as_deref() {
        None | Some("caller") => false,
        Some("session") => true,
        Some(_) => {
            return Err(PolicyError::at(
                file,
                "keyvalue.caller-scope",
                "caller-scope is \"caller\" (each caller's own buckets, the default) or \
                 \"session\" (each client session's own, kept in memory and dropped when the \
                 session ends)",
            ));
        }
    };
    if per_session && table.caller_buckets.is_empty() {
        return Err(PolicyError::at(
            file,
            "keyvalue.caller-scope",
            "caller-scope applies to caller-buckets, and none are granted",
        ));
    }
    Ok(KvGrant {
        in_memory: table.in_memory,
        per_session,
        buckets: table.buckets,
        caller_buckets: table.caller_buckets,
        caller_max_bytes: sized(
            "caller-quota-kib",
            table.caller_quota_kib,
            1 << 10,
            1 << 30,
            KvGrant::DEFAULT_CALLER_MAX_BYTES,
        )?,
        caller_max_keys: sized(
            "caller-max-keys",
            table.caller_max_keys,
            1,
            1 << 32,
            KvGrant::DEFAULT_CALLER_MAX_KEYS,
        )?,
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

/// The `[[dirs]]` tables, with the command line's grants of the plugin (`cli`, usually none):
/// see `policy::command_line` for how the two combine.
pub(super) fn dirs(
    file: &Path,
    tables: &[DirTable],
    cli: &[CommandLineGrant],
) -> Result<Vec<DirGrant>, PolicyError> {
    if cli.is_empty() {
        let grants = tables
            .iter()
            .enumerate()
            .map(|(i, table)| dir(file, i, table))
            .collect::<Result<Vec<_>, _>>()?;
        return unique_guests(grants).map_err(|(i, guest)| {
            let field = if tables[i].guest.is_some() {
                "guest"
            } else {
                "host"
            };
            PolicyError::at(
                file,
                format!("dirs[{i}].{field}"),
                format!("`{guest}` is mapped twice"),
            )
        });
    }
    // The manifest's directories that exist bound the command line's; those that do not
    // (a template's) are placeholders the command line's stand in for.
    let mut bounds = Vec::new();
    for (i, table) in tables.iter().enumerate() {
        if resolve(file, &table.host).exists() {
            bounds.push(dir(file, i, table)?);
        } else {
            tracing::info!(
                manifest = %file.display(),
                dir = %table.host.display(),
                "the manifest's directory does not exist here: the command line's grants stand in for it"
            );
        }
    }
    let grants = cli
        .iter()
        .map(|grant| cli_dir(grant, &bounds))
        .collect::<Result<Vec<_>, _>>()?;
    unique_guests(grants).map_err(|(i, guest)| {
        PolicyError::of_flag(&cli[i].flag(), format!("`{guest}` is mapped twice"))
    })
}

/// `grants`, unless two are seen at the same guest path: then the index of the second and
/// the path.
fn unique_guests(grants: Vec<DirGrant>) -> Result<Vec<DirGrant>, (usize, String)> {
    let mut guests = HashSet::new();
    for (i, grant) in grants.iter().enumerate() {
        if !guests.insert(grant.guest.as_str()) {
            return Err((i, grant.guest.clone()));
        }
    }
    Ok(grants)
}

/// One `[[dirs]]` table (the `i`th), checked.
fn dir(file: &Path, i: usize, table: &DirTable) -> Result<DirGrant, PolicyError> {
    let key = |field: &str| format!("dirs[{i}].{field}");
    let host = resolve(file, &table.host);
    let host = host.canonicalize().map_err(|e| {
        PolicyError::at(
            file,
            key("host"),
            format!(
                "cannot use directory {}: {e} (a template's directory? grant one with --grant PLUGIN:dir=PATH)",
                host.display()
            ),
        )
    })?;
    if !host.is_dir() {
        return Err(PolicyError::at(
            file,
            key("host"),
            format!("{} is not a directory", host.display()),
        ));
    }
    // Without `guest`, the plugin sees the directory where the host has it (its real path),
    // so the paths it shows are the host's.
    let (guest, field) = match &table.guest {
        Some(guest) => (guest.clone(), "guest"),
        None => (
            guest_path(&host).map_err(|why| PolicyError::at(file, key("host"), why))?,
            "host",
        ),
    };
    check_guest(&guest).map_err(|why| PolicyError::at(file, key(field), why))?;
    Ok(DirGrant {
        host,
        guest,
        writable: matches!(table.mode, DirMode::ReadWrite),
    })
}

/// A directory's own path as its guest path, if it is UTF-8.
fn guest_path(host: &Path) -> Result<String, String> {
    host.to_str().map(str::to_owned).ok_or_else(|| {
        format!(
            "{} is not valid UTF-8: name a `guest` path for it",
            host.display()
        )
    })
}

/// A guest path: absolute, below `/`, without `.` or `..`.
fn check_guest(guest: &str) -> Result<(), String> {
    let path = Path::new(guest);
    let normal = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !normal || guest == "/" {
        return Err(format!(
            "`{guest}` must be an absolute path below `/` without `.` or `..`, such as `/data`"
        ));
    }
    Ok(())
}

/// A command-line directory, within `bounds` (the manifest's directories that exist) if there
/// are any: inside one, its mode no wider; standing alone if there are none.
fn cli_dir(grant: &CommandLineGrant, bounds: &[DirGrant]) -> Result<DirGrant, PolicyError> {
    let fail = |why: String| PolicyError::of_flag(&grant.flag(), why);
    let host = grant
        .dir
        .canonicalize()
        .map_err(|e| fail(format!("cannot use directory {}: {e}", grant.dir.display())))?;
    if !host.is_dir() {
        return Err(fail(format!("{} is not a directory", host.display())));
    }
    if bounds.is_empty() {
        let guest = guest_path(&host).map_err(fail)?;
        check_guest(&guest).map_err(fail)?;
        return Ok(DirGrant {
            host,
            guest,
            writable: grant.writable.unwrap_or(true),
        });
    }
    let Some((bound, rest)) = bounds.iter().find_map(|bound| {
        host.strip_prefix(&bound.host)
            .ok()
            .map(|rest| (bound, rest))
    }) else {
        let granted: Vec<String> = bounds
            .iter()
            .map(|b| b.host.display().to_string())
            .collect();
        return Err(fail(format!(
            "{} is outside the directories the plugin's manifest grants ({}): the command line \
             may only narrow them",
            host.display(),
            granted.join(", ")
        )));
    };
    if grant.writable == Some(true) && !bound.writable {
        return Err(fail(format!(
            "read-write is wider than the manifest allows: it grants {} read-only",
            bound.host.display()
        )));
    }
    let guest = match rest.to_str() {
        Some("") => bound.guest.clone(),
        Some(rest) => format!("{}/{rest}", bound.guest.trim_end_matches('/')),
        None => return Err(fail(format!("{} is not valid UTF-8", host.display()))),
    };
    Ok(DirGrant {
        host,
        guest,
        writable: grant.writable.unwrap_or(bound.writable),
    })
}

pub(super) fn env(
    file: &Path,
    table: BTreeMap<String, EnvValue>,
) -> Result<Vec<EnvGrant>, PolicyError> {
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

pub(super) fn http(file: &Path, allow: &[String]) -> Result<Vec<HttpGrant>, PolicyError> {
    allow
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            parse_http_grant(entry)
                .map_err(|why| PolicyError::at(file, format!("http.allow[{i}]"), why))
        })
        .collect()
}

/// The `[http.credentials]` table: each key a host of `allow` (the same `host[:port]`), each
/// value the provider (configured by the operator) whose token for the caller mcpbox attaches
/// to requests to that host. Whether the provider exists is checked where providers are known
/// (the engine, at load).
pub(super) fn credentials(
    file: &Path,
    allow: &[HttpGrant],
    table: BTreeMap<String, String>,
) -> Result<Vec<CredentialGrant>, PolicyError> {
    let mut grants: Vec<CredentialGrant> = Vec::with_capacity(table.len());
    for (entry, provider) in table {
        let key = format!("http.credentials.\"{entry}\"");
        let host = parse_http_grant(&entry).map_err(|why| PolicyError::at(file, &key, why))?;
        if !allow.contains(&host) {
            return Err(PolicyError::at(
                file,
                key,
                format!(
                    "`{entry}` is not in `http.allow`: grant it in `http.allow` first (a host \
                     reached only through `public = true` is never called as the caller)"
                ),
            ));
        }
        if grants.iter().any(|g| g.host == host) {
            return Err(PolicyError::at(
                file,
                key,
                format!("`{entry}` is named twice"),
            ));
        }
        check_provider_name(&provider).map_err(|why| PolicyError::at(file, &key, why))?;
        grants.push(CredentialGrant { host, provider });
    }
    Ok(grants)
}

/// A provider's name: `[a-z][a-z0-9_-]{0,63}`, as the configuration file's `[providers.NAME]`.
fn check_provider_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name.len() <= 64;
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a provider name: a lower-case letter, then up to 63 lower-case \
             letters, digits, `_` or `-`"
        ))
    }
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
mod tests;
