//! What a managed install grants: the author's plugin manifest (what the plugin asks for) read
//! key by key into [`Grant`]s, capped by the operator's [`Ceiling`] (what it removes is said;
//! a task's time limit and instances kept per caller are capped too),
//! narrowed by the caller's arguments (which can only leave grants out), and written back as
//! the manifest the host loads. The [`Offer`] is what the user is shown; its
//! [`Offer::consent_id`] binds an accept to exactly that artifact digest and that grant set.
//!
//! Everything here is a pure function of its inputs: no file, no network. Uses nothing else in
//! the crate.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use sha2::{Digest as _, Sha256};

use super::settings::{Ceiling, Mode};

/// One thing a plugin is granted beyond computing on its arguments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Grant {
    /// A folder of the host's, seen at `guest` (default: its own path).
    Folder {
        /// The host's folder (absolute).
        path: String,
        /// Where the plugin sees it.
        guest: Option<String>,
        /// Read only, or read and write.
        mode: Mode,
    },
    /// HTTP requests to a host (`host` or `host:port`).
    Host {
        /// The host.
        host: String,
    },
    /// HTTP requests to any host whose every address is public.
    PublicHttp,
    /// An environment variable, with its value.
    Env {
        /// Its name.
        name: String,
        /// Its value (literal).
        value: String,
    },
    /// A `wasi:config` key, with its value.
    Config {
        /// The key.
        key: String,
        /// Its value (literal).
        value: String,
    },
    /// A `wasi:keyvalue` bucket (durable state), shared by every caller or one per caller.
    Bucket {
        /// Its name.
        name: String,
        /// Each caller has their own.
        per_caller: bool,
    },
}

impl Grant {
    /// Its id: what the caller's arguments name it by.
    pub fn id(&self) -> String {
        match self {
            Self::Folder { path, mode, .. } => format!("folder:{path}:{}", mode.as_str()),
            Self::Host { host } => format!("host:{host}"),
            Self::PublicHttp => "public-http".to_owned(),
            Self::Env { name, .. } => format!("env:{name}"),
            Self::Config { key, .. } => format!("config:{key}"),
            Self::Bucket {
                name,
                per_caller: false,
            } => format!("bucket:{name}"),
            Self::Bucket {
                name,
                per_caller: true,
            } => format!("caller-bucket:{name}"),
        }
    }

    /// For people.
    pub fn describe(&self) -> String {
        match self {
            Self::Folder { path, guest, mode } => {
                let access = match mode {
                    Mode::ReadOnly => "read",
                    Mode::ReadWrite => "read and write",
                };
                match guest {
                    Some(guest) if guest != path => {
                        format!("{access} the folder {path} (seen as {guest})")
                    }
                    _ => format!("{access} the folder {path}"),
                }
            }
            Self::Host { host } => format!("send HTTP requests to {host}"),
            Self::PublicHttp => "send HTTP requests to any public host".to_owned(),
            Self::Env { name, value } => format!("the environment variable {name}={value}"),
            Self::Config { key, value } => format!("the setting {key} = {value}"),
            Self::Bucket {
                name,
                per_caller: false,
            } => format!("keep state in the bucket `{name}`, shared by every caller"),
            Self::Bucket {
                name,
                per_caller: true,
            } => format!("keep state in the bucket `{name}`, each caller their own"),
        }
    }
}

/// What the author's manifest asks for, once capped by the ceiling.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capped {
    /// The grants left.
    pub grants: Vec<Grant>,
    /// The limits (each at most the ceiling's).
    pub limits: BTreeMap<String, u64>,
    /// The manifest's keys that grant nothing (title, prefix, scopes, naming, tasks,
    /// instances, skills), kept as written but for a task time limit over the ceiling's
    /// `timeout-ms` (lowered) and `instances = "per-caller"` the ceiling does not allow
    /// (dropped).
    pub kept: toml::Table,
    /// What the ceiling (or mcpbox) removed, for people.
    pub removed: Vec<String>,
}

/// Why an author's manifest cannot be offered at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its plugin manifest {0}")]
pub struct ManifestRefused(String);

/// The manifest keys that grant nothing, kept as the author wrote them (`tasks` and
/// `instances` within the ceiling).
const KEPT: [&str; 9] = [
    "title",
    "prefix",
    "scopes",
    "tools",
    "prompts",
    "resources",
    "skills",
    "instances",
    "tasks",
];

/// Read the author's manifest `text` (empty: none) and cap it by `ceiling`.
pub fn cap(text: &str, ceiling: &Ceiling) -> Result<Capped, ManifestRefused> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| ManifestRefused(format!("is not TOML: {}", e.message())))?;
    let mut capped = Capped::default();
    for (key, value) in table {
        match key.as_str() {
            "tasks" => {
                let value = tasks(value, ceiling, &mut capped);
                capped.kept.insert(key, value);
            }
            "instances"
                if value.as_str() == Some("per-caller") && !ceiling.per_caller_instances =>
            {
                capped.removed.push("an instance kept for the same caller's next call (instances = \"per-caller\"): the operator allows a fresh instance per call only".to_owned());
            }
            k if KEPT.contains(&k) => {
                capped.kept.insert(key, value);
            }
            "limits" => limits(&value, ceiling, &mut capped)?,
            "dirs" => folders(&value, ceiling, &mut capped)?,
            "env" => literals(&value, "env", &ceiling.env, &mut capped)?,
            "config" => literals(&value, "config", &ceiling.config, &mut capped)?,
            "http" => http(&value, ceiling, &mut capped)?,
            "keyvalue" => keyvalue(&value, ceiling, &mut capped)?,
            "reveal-caller" => {
                if value.as_bool() == Some(true) {
                    capped
                        .removed
                        .push("callers' own keys as their ids (reveal-caller): never granted to a managed plugin".to_owned());
                }
            }
            other => {
                return Err(ManifestRefused(format!(
                    "has `{other}`, which a managed install does not know"
                )));
            }
        }
    }
    for (limit, most) in &ceiling.limits {
        capped.limits.entry(limit.clone()).or_insert(*most);
    }
    capped.grants.sort();
    capped.grants.dedup();
    Ok(capped)
}

/// `[tasks]` as written, but for a `timeout-ms` over the ceiling's `timeout-ms` (a task runs
/// at most as long as the operator lets a call run), lowered and said. What is not a table
/// or an integer is kept for the host's own parsing to refuse.
fn tasks(mut value: toml::Value, ceiling: &Ceiling, capped: &mut Capped) -> toml::Value {
    let Some(most) = ceiling.limits.get("timeout-ms") else {
        return value;
    };
    if let Some(timeout) = value.get_mut("timeout-ms")
        && let Some(asked) = timeout.as_integer().and_then(|v| u64::try_from(v).ok())
        && asked > *most
    {
        capped.removed.push(format!(
            "tasks.timeout-ms {asked} (lowered to the operator's timeout-ms {most})"
        ));
        *timeout = toml::Value::Integer(i64::try_from(*most).unwrap_or(i64::MAX));
    }
    value
}

fn limits(
    value: &toml::Value,
    ceiling: &Ceiling,
    capped: &mut Capped,
) -> Result<(), ManifestRefused> {
    let table = value
        .as_table()
        .ok_or_else(|| ManifestRefused("has a [limits] that is not a table".to_owned()))?;
    for (limit, value) in table {
        if !super::settings::LIMIT_KEYS.contains(&limit.as_str()) {
            return Err(ManifestRefused(format!("has an unknown limit `{limit}`")));
        }
        let asked = value
            .as_integer()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| {
                ManifestRefused(format!(
                    "has a limit `{limit}` that is not a positive integer"
                ))
            })?;
        let granted = match ceiling.limits.get(limit) {
            Some(most) if asked > *most => {
                capped.removed.push(format!(
                    "{limit} {asked} (lowered to the operator's {most})"
                ));
                *most
            }
            _ => asked,
        };
        capped.limits.insert(limit.clone(), granted);
    }
    Ok(())
}

/// Whether `path` is absolute with no `.` or `..`.
fn plain_absolute(path: &str) -> bool {
    let path = Path::new(path);
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

fn folders(
    value: &toml::Value,
    ceiling: &Ceiling,
    capped: &mut Capped,
) -> Result<(), ManifestRefused> {
    let list = value
        .as_array()
        .ok_or_else(|| ManifestRefused("has [[dirs]] that are not a list of tables".to_owned()))?;
    for dir in list {
        let host = dir
            .get("host")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| ManifestRefused("has a [[dirs]] entry without `host`".to_owned()))?;
        let guest = dir
            .get("guest")
            .and_then(toml::Value::as_str)
            .map(str::to_owned);
        let mode = match dir.get("mode") {
            None => Mode::ReadOnly,
            Some(mode) => mode.as_str().and_then(Mode::parse).ok_or_else(|| {
                ManifestRefused(format!(
                    "gives the folder {host} a mode that is neither read-only nor read-write"
                ))
            })?,
        };
        if let Some(table) = dir.as_table()
            && let Some(unknown) = table
                .keys()
                .find(|k| !["host", "guest", "mode"].contains(&k.as_str()))
        {
            return Err(ManifestRefused(format!(
                "has a [[dirs]] key `{unknown}` a managed install does not know"
            )));
        }
        if !plain_absolute(host) || guest.as_deref().is_some_and(|g| !plain_absolute(g)) {
            capped.removed.push(format!(
                "the folder {host}: a managed plugin's folders are absolute paths without `.` or `..`"
            ));
            continue;
        }
        let allowed = ceiling
            .dirs
            .iter()
            .filter(|(root, _)| Path::new(host).starts_with(root))
            .map(|(_, mode)| *mode)
            .max();
        match allowed {
            None => capped.removed.push(format!(
                "the folder {host}: not inside a folder the operator allows"
            )),
            Some(most) => {
                let granted = mode.min(most);
                if granted < mode {
                    capped.removed.push(format!(
                        "write access to the folder {host} (the operator allows reading it only)"
                    ));
                }
                capped.grants.push(Grant::Folder {
                    path: host.to_owned(),
                    guest,
                    mode: granted,
                });
            }
        }
    }
    Ok(())
}

fn literals(
    value: &toml::Value,
    section: &str,
    allowed: &[String],
    capped: &mut Capped,
) -> Result<(), ManifestRefused> {
    let table = value
        .as_table()
        .ok_or_else(|| ManifestRefused(format!("has a [{section}] that is not a table")))?;
    for (name, value) in table {
        let Some(literal) = value.as_str() else {
            capped.removed.push(format!(
                "{section} `{name}` taken from mcpbox's environment or secrets: never granted to a managed plugin"
            ));
            continue;
        };
        if !allowed.contains(name) {
            capped
                .removed
                .push(format!("{section} `{name}`: not one the operator allows"));
            continue;
        }
        capped.grants.push(match section {
            "env" => Grant::Env {
                name: name.clone(),
                value: literal.to_owned(),
            },
            _ => Grant::Config {
                key: name.clone(),
                value: literal.to_owned(),
            },
        });
    }
    Ok(())
}

/// Whether `host` is allowed by one of `allowed` (exact, or `*.domain` for a subdomain).
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.to_ascii_lowercase();
    allowed.iter().any(|pattern| {
        let pattern = pattern.to_ascii_lowercase();
        match pattern.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
            None => host == pattern,
        }
    })
}

fn http(
    value: &toml::Value,
    ceiling: &Ceiling,
    capped: &mut Capped,
) -> Result<(), ManifestRefused> {
    let table = value
        .as_table()
        .ok_or_else(|| ManifestRefused("has an [http] that is not a table".to_owned()))?;
    for (key, value) in table {
        match key.as_str() {
            "allow" => {
                let hosts = value.as_array().ok_or_else(|| {
                    ManifestRefused("has an [http] allow that is not a list".to_owned())
                })?;
                for host in hosts {
                    let host = host.as_str().ok_or_else(|| {
                        ManifestRefused("has an [http] allow entry that is not a string".to_owned())
                    })?;
                    if host_allowed(host, &ceiling.hosts) {
                        capped.grants.push(Grant::Host {
                            host: host.to_owned(),
                        });
                    } else {
                        capped.removed.push(format!(
                            "HTTP requests to {host}: not a host the operator allows"
                        ));
                    }
                }
            }
            "public" => {
                if value.as_bool() == Some(true) {
                    if ceiling.public_http {
                        capped.grants.push(Grant::PublicHttp);
                    } else {
                        capped.removed.push(
                            "HTTP requests to any public host: the operator does not allow it"
                                .to_owned(),
                        );
                    }
                }
            }
            "credentials" => capped.removed.push(
                "callers' linked accounts ([http.credentials]): never granted to a managed plugin"
                    .to_owned(),
            ),
            other => {
                return Err(ManifestRefused(format!(
                    "has an [http] key `{other}` a managed install does not know"
                )));
            }
        }
    }
    Ok(())
}

fn keyvalue(
    value: &toml::Value,
    ceiling: &Ceiling,
    capped: &mut Capped,
) -> Result<(), ManifestRefused> {
    let table = value
        .as_table()
        .ok_or_else(|| ManifestRefused("has a [keyvalue] that is not a table".to_owned()))?;
    for (key, value) in table {
        let per_caller = match key.as_str() {
            "buckets" => false,
            "caller-buckets" => true,
            other => {
                capped.removed.push(format!(
                    "the state setting `{other}` (the defaults apply to a managed plugin)"
                ));
                continue;
            }
        };
        let names = value
            .as_array()
            .ok_or_else(|| ManifestRefused(format!("has a [keyvalue] {key} that is not a list")))?;
        for name in names {
            let name = name.as_str().ok_or_else(|| {
                ManifestRefused(format!("has a [keyvalue] {key} entry that is not a string"))
            })?;
            if ceiling.state {
                capped.grants.push(Grant::Bucket {
                    name: name.to_owned(),
                    per_caller,
                });
            } else {
                capped.removed.push(format!(
                    "state in the bucket `{name}`: the operator allows no state"
                ));
            }
        }
    }
    Ok(())
}

/// What the user is asked to approve.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The plugin's name.
    pub name: String,
    /// The reference as given.
    pub reference: String,
    /// The artifact's manifest digest.
    pub digest: String,
    /// Who signed it (key name and fingerprint), if the policy required a signature.
    pub signer: Option<(String, String)>,
    /// What it would be granted, capped and narrowed.
    pub capped: Capped,
    /// Grants the caller's arguments named that are not on offer (ignored).
    pub ignored: Vec<String>,
    /// Grants the caller's arguments left out.
    pub left_out: Vec<String>,
    /// The digest of the plugin of that name installed now, which this one would replace.
    pub replaces: Option<String>,
}

impl Offer {
    /// Narrow the grants to those whose ids `keep` lists (`None`: keep all). Ids not on
    /// offer are ignored (and said): arguments never add a grant.
    pub fn narrow(mut self, keep: Option<&[String]>) -> Self {
        let Some(keep) = keep else {
            return self;
        };
        let offered: Vec<String> = self.capped.grants.iter().map(Grant::id).collect();
        self.ignored = keep
            .iter()
            .filter(|id| !offered.contains(id))
            .cloned()
            .collect();
        let (kept, left): (Vec<Grant>, Vec<Grant>) = std::mem::take(&mut self.capped.grants)
            .into_iter()
            .partition(|g| keep.contains(&g.id()));
        self.capped.grants = kept;
        self.left_out = left.iter().map(Grant::describe).collect();
        self
    }

    /// Keep only `approved` of the offered grants (the user's choice); anything else is
    /// dropped, never added.
    pub fn approve(&self, approved: &[Grant]) -> Capped {
        let mut capped = self.capped.clone();
        capped.grants.retain(|g| approved.contains(g));
        capped
    }

    /// The id an accept is bound to: the artifact (reference, digest), the plugin's name, and
    /// every grant, limit and kept key offered. Anything different is another question.
    pub fn consent_id(&self) -> String {
        let grants: Vec<String> = self.capped.grants.iter().map(Grant::id).collect();
        let values: Vec<String> = self
            .capped
            .grants
            .iter()
            .map(|g| serde_json::to_string(g).unwrap_or_default())
            .collect();
        let bound = serde_json::json!({
            "name": self.name,
            "reference": self.reference,
            "digest": self.digest,
            "signer": self.signer,
            "replaces": self.replaces,
            "grants": grants,
            "values": values,
            "limits": self.capped.limits,
            "kept": self.capped.kept.to_string(),
        });
        hex::encode(Sha256::digest(bound.to_string().as_bytes()))
    }
}

/// The manifest the host loads for `capped`: exactly its grants, limits and kept keys.
pub fn manifest_text(capped: &Capped) -> String {
    let mut table = capped.kept.clone();
    if !capped.limits.is_empty() {
        let limits: toml::Table = capped
            .limits
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    toml::Value::Integer(i64::try_from(*v).unwrap_or(i64::MAX)),
                )
            })
            .collect();
        table.insert("limits".to_owned(), toml::Value::Table(limits));
    }
    let mut dirs = Vec::new();
    let mut env = toml::Table::new();
    let mut config = toml::Table::new();
    let mut allow = Vec::new();
    let mut public = false;
    let (mut buckets, mut caller_buckets) = (Vec::new(), Vec::new());
    for grant in &capped.grants {
        match grant {
            Grant::Folder { path, guest, mode } => {
                let mut dir = toml::Table::new();
                dir.insert("host".to_owned(), path.clone().into());
                if let Some(guest) = guest {
                    dir.insert("guest".to_owned(), guest.clone().into());
                }
                dir.insert("mode".to_owned(), mode.as_str().into());
                dirs.push(toml::Value::Table(dir));
            }
            Grant::Host { host } => allow.push(toml::Value::from(host.clone())),
            Grant::PublicHttp => public = true,
            Grant::Env { name, value } => {
                env.insert(name.clone(), value.clone().into());
            }
            Grant::Config { key, value } => {
                config.insert(key.clone(), value.clone().into());
            }
            Grant::Bucket { name, per_caller } => {
                let list = if *per_caller {
                    &mut caller_buckets
                } else {
                    &mut buckets
                };
                list.push(toml::Value::from(name.clone()));
            }
        }
    }
    if !dirs.is_empty() {
        table.insert("dirs".to_owned(), toml::Value::Array(dirs));
    }
    if !env.is_empty() {
        table.insert("env".to_owned(), toml::Value::Table(env));
    }
    if !config.is_empty() {
        table.insert("config".to_owned(), toml::Value::Table(config));
    }
    if !allow.is_empty() || public {
        let mut http = toml::Table::new();
        if !allow.is_empty() {
            http.insert("allow".to_owned(), toml::Value::Array(allow));
        }
        if public {
            http.insert("public".to_owned(), true.into());
        }
        table.insert("http".to_owned(), toml::Value::Table(http));
    }
    if !buckets.is_empty() || !caller_buckets.is_empty() {
        let mut kv = toml::Table::new();
        if !buckets.is_empty() {
            kv.insert("buckets".to_owned(), toml::Value::Array(buckets));
        }
        if !caller_buckets.is_empty() {
            kv.insert(
                "caller-buckets".to_owned(),
                toml::Value::Array(caller_buckets),
            );
        }
        table.insert("keyvalue".to_owned(), toml::Value::Table(kv));
    }
    format!(
        "# Installed by mcpbox with the user's consent: exactly the grants they approved.\n{}",
        toml::to_string(&table).unwrap_or_default()
    )
}
