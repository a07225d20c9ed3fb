//! The configuration file (`serve --config mcpbox.toml`, `check --config`): every option of
//! `serve` under its flag's long name (`fuel = 2_000_000_000` is `--fuel`), and `[plugin.NAME]`
//! sections holding what a manifest beside the plugin would (limits and grants), and a
//! `[signatures]` table saying which plugins must be signed by which keys (read by
//! `registry::trust`), and `[tokens.NAME]` tables naming the static bearer tokens HTTP accepts
//! (each by its SHA-256 digest, with the scopes it grants; see `principal`), and
//! `[providers.NAME]` tables naming the downstream OAuth providers whose accounts callers link
//! (read by `credentials`), and a `[manage]` table enabling managed installs (read by
//! `manage`).
//!
//! This module reads the file, checks every key against the command line's own definitions
//! (so the file and the flags cannot drift apart), and turns the file's options into arguments
//! for exactly those options no flag and no environment variable set: flag > environment >
//! file > default. Values are checked by the flags' own parsers, and every error names the
//! file, the line and the key. Relative paths in the file are relative to the file's directory.
//!
//! Plugin sections are validated as manifests are (`policy`), `[signatures]` as the registry's
//! trust policy; the CLI owns the flags themselves, and hot reload of the file is `watch`'s.
//!
//! Uses: `credentials`, `manage`, `policy`, `principal`, `registry`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::ArgAction;
use clap::parser::ValueSource;

use crate::credentials::Providers;
use crate::policy::{Limits, check_sections, key_at, parse_section};
use crate::principal::{BudgetConfig, Scopes, Tokens, parse_digest};
use crate::registry::trust::TrustPolicy;

/// Why a configuration file was refused: the file, the line and key, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A top-level key or the file itself.
    #[error("{}{}{}: {message}", file.display(), line.map(|l| format!(": line {l}")).unwrap_or_default(), key.as_deref().map(|k| format!(": `{k}`")).unwrap_or_default())]
    At {
        /// The file.
        file: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// The key.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A `[plugin.NAME]` section (its error names the file and the line or key).
    #[error("{0}")]
    Section(#[from] crate::policy::PolicyError),
}

/// One top-level option of the file.
#[derive(Debug, Clone, PartialEq)]
struct Setting {
    value: toml::Value,
    line: usize,
}

/// A configuration file, read and checked.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    options: BTreeMap<String, Setting>,
    sections: BTreeMap<String, String>,
    signatures: Option<TrustPolicy>,
    /// The `[signatures]` table as written, to tell when it changed.
    signatures_text: Option<String>,
    /// The `[tokens.NAME]` tables.
    tokens: Tokens,
    /// The `[tokens]` table as written, to tell when it changed.
    tokens_text: Option<String>,
    /// The `[budgets]` table.
    budgets: BudgetConfig,
    /// The `[providers.NAME]` tables.
    providers: Providers,
    /// The `[providers]` table as written, to tell when it changed.
    providers_text: Option<String>,
    /// The `[manage]` table.
    #[cfg(feature = "registry")]
    manage: Option<crate::manage::ManageSettings>,
    /// The command whose options it may set, to read it again by the same rules.
    serve: Arc<clap::Command>,
}

/// The `[tokens.NAME]` tables: each `sha256 = "<64 hex digits>"` (the token's digest; the
/// token itself is never written here) and optionally `scopes = [...]` (none if absent). An
/// error names the token it is about, if any.
fn parse_tokens(value: toml::Value) -> Result<Tokens, (Option<String>, String)> {
    let toml::Value::Table(table) = value else {
        return Err((
            None,
            "expected tables: [tokens.NAME] with `sha256` and `scopes`".to_owned(),
        ));
    };
    let mut tokens = Tokens::default();
    for (name, entry) in table {
        let fail = |message: String| (Some(name.clone()), message);
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(fail(
                "a token's name is letters, digits and `-_.@` (it names the caller in logs)"
                    .to_owned(),
            ));
        }
        let toml::Value::Table(entry) = entry else {
            return Err(fail(
                "expected a table: [tokens.NAME] with `sha256` and `scopes`".to_owned(),
            ));
        };
        let mut digest = None;
        let mut scopes = BTreeSet::new();
        for (key, value) in entry {
            match (key.as_str(), value) {
                ("sha256", toml::Value::String(hex)) => {
                    digest = Some(parse_digest(&hex).map_err(|m| fail(format!("`sha256`: {m}")))?);
                }
                ("scopes", toml::Value::Array(list)) => {
                    for scope in list {
                        let toml::Value::String(scope) = scope else {
                            return Err(fail("`scopes` is a list of strings".to_owned()));
                        };
                        scopes.insert(scope);
                    }
                }
                ("sha256" | "scopes", _) => {
                    return Err(fail(format!("`{key}` has the wrong type")));
                }
                (other, _) => {
                    return Err(fail(format!(
                        "unknown key `{other}`; a token has `sha256` (its digest) and `scopes`"
                    )));
                }
            }
        }
        let digest = digest.ok_or_else(|| {
            fail("missing `sha256`, the token's digest (`printf %s TOKEN | sha256sum`)".to_owned())
        })?;
        tokens
            .add(&name, digest, Scopes::Granted(scopes))
            .map_err(fail)?;
    }
    Ok(tokens)
}

/// An option of `serve` (with the global ones) a file may set: every flag but these.
fn settable(arg: &clap::Arg) -> Option<&str> {
    let long = arg.get_long()?;
    (!matches!(long, "help" | "version" | "config")).then_some(long)
}

/// Whether an option holds a path (relative paths in the file are relative to the file).
fn is_path(arg: &clap::Arg) -> bool {
    matches!(
        arg.get_value_hint(),
        clap::ValueHint::DirPath | clap::ValueHint::FilePath | clap::ValueHint::AnyPath
    )
}

impl ConfigFile {
    /// Read and check the file at `path` against `serve`, the subcommand it configures (built,
    /// so that it carries the global options too).
    pub fn load(path: &Path, serve: &clap::Command) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::At {
            file: path.to_owned(),
            line: None,
            key: None,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(path, &text, serve)
    }

    /// Check the text `text` of the file `path`.
    pub fn parse(path: &Path, text: &str, serve: &clap::Command) -> Result<Self, ConfigError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let error = |line: Option<usize>, key: Option<&str>, message: String| ConfigError::At {
            file: path.to_owned(),
            line,
            key: key.map(str::to_owned),
            message,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let key = e.span().and_then(|s| key_at(text, s.start));
            error(
                e.span().map(|s| line_of(s.start)),
                key.as_deref(),
                e.message().trim().to_owned(),
            )
        })?;
        // Where each top-level key is, for messages.
        let lines: BTreeMap<String, usize> = toml::de::DeTable::parse(text)
            .map(|spanned| {
                spanned
                    .get_ref()
                    .iter()
                    .map(|(key, _)| (key.get_ref().to_string(), line_of(key.span().start)))
                    .collect()
            })
            .unwrap_or_default();
        check_sections(path, text)?;
        let mut options = BTreeMap::new();
        let mut sections = BTreeMap::new();
        let mut signatures = None;
        let mut signatures_text = None;
        let mut tokens = Tokens::default();
        let mut tokens_text = None;
        let mut budgets = BudgetConfig::default();
        let mut providers = Providers::none();
        let mut providers_text = None;
        #[cfg(feature = "registry")]
        let mut manage = None;
        for (key, value) in table {
            let line = lines.get(&key).copied().unwrap_or(1);
            if key == "budgets" {
                budgets = BudgetConfig::from_toml(value)
                    .map_err(|message| error(Some(line), Some("budgets"), message))?;
                continue;
            }
            if key == "tokens" {
                tokens_text = Some(value.to_string());
                tokens = parse_tokens(value).map_err(|(name, message)| {
                    let key = name.map_or_else(|| "tokens".to_owned(), |n| format!("tokens.{n}"));
                    error(Some(line), Some(&key), message)
                })?;
                continue;
            }
            if key == "providers" {
                providers_text = Some(value.to_string());
                providers = Providers::from_toml(value).map_err(|(name, message)| {
                    let key =
                        name.map_or_else(|| "providers".to_owned(), |n| format!("providers.{n}"));
                    error(Some(line), Some(&key), message)
                })?;
                continue;
            }
            if key == "manage" {
                #[cfg(feature = "registry")]
                {
                    manage = Some(
                        crate::manage::ManageSettings::from_toml(path, value)
                            .map_err(|(key, message)| error(Some(line), Some(&key), message))?,
                    );
                    continue;
                }
                #[cfg(not(feature = "registry"))]
                return Err(error(
                    Some(line),
                    Some("manage"),
                    crate::registry::not_built("[manage]"),
                ));
            }
            if key == "signatures" {
                let toml::Value::Table(table) = value else {
                    return Err(error(
                        Some(line),
                        Some("signatures"),
                        "expected a table: [signatures] with `keys` and `require`".to_owned(),
                    ));
                };
                let policy = TrustPolicy::from_table(path, &table)
                    .map_err(|message| error(Some(line), Some("signatures"), message))?;
                signatures_text = Some(table.to_string());
                signatures = Some(policy);
                continue;
            }
            if key == "plugin" {
                let toml::Value::Table(plugins) = value else {
                    return Err(error(
                        Some(line),
                        Some("plugin"),
                        "expected tables: [plugin.NAME] for each plugin".to_owned(),
                    ));
                };
                for (name, section) in plugins {
                    let toml::Value::Table(section) = section else {
                        return Err(error(
                            Some(line),
                            Some(&format!("plugin.{name}")),
                            "expected a table: [plugin.NAME]".to_owned(),
                        ));
                    };
                    let section_text = toml::to_string(&section).map_err(|e| {
                        error(Some(line), Some(&format!("plugin.{name}")), e.to_string())
                    })?;
                    parse_section(path, &name, &section_text, Limits::default())
                        .map_err(|e| e.in_file(text))?;
                    sections.insert(name, section_text);
                }
                continue;
            }
            let Some(arg) = serve
                .get_arguments()
                .find(|a| settable(a) == Some(key.as_str()))
            else {
                let hint = if key == "config" {
                    "a configuration file cannot name another".to_owned()
                } else {
                    let mut known: Vec<&str> = serve.get_arguments().filter_map(settable).collect();
                    known.sort_unstable();
                    format!(
                        "unknown key; the keys are the long flags of `mcpbox serve` ({}), [plugin.NAME] sections, [signatures], [tokens.NAME], [providers.NAME], [budgets] and [manage]",
                        known.join(", ")
                    )
                };
                return Err(error(Some(line), Some(&key), hint));
            };
            let setting = Setting { value, line };
            // The shape now; the value itself is the flag parser's, when the arguments are
            // parsed (see `explain`).
            flag_values(arg, &setting.value)
                .map_err(|message| error(Some(line), Some(&key), message))?;
            options.insert(key, setting);
        }
        Ok(Self {
            path: path.to_owned(),
            options,
            sections,
            signatures,
            signatures_text,
            tokens,
            tokens_text,
            budgets,
            providers,
            providers_text,
            #[cfg(feature = "registry")]
            manage,
            serve: Arc::new(serve.clone()),
        })
    }

    /// Read the file again, by the rules it was first read with.
    pub fn reload(&self) -> Result<Self, ConfigError> {
        Self::load(&self.path, &self.serve)
    }

    /// A path option's value (`plugins = "..."`), relative to the file.
    pub fn path_option(&self, key: &str) -> Option<PathBuf> {
        match &self.options.get(key)?.value {
            toml::Value::String(value) => Some(PathBuf::from(self.relative_to_file(value))),
            _ => None,
        }
    }

    /// Managed installs (`[manage]`), if the file has the table.
    #[cfg(feature = "registry")]
    pub fn manage(&self) -> Option<&crate::manage::ManageSettings> {
        self.manage.as_ref()
    }

    /// Whether `other` configures managed installs differently (a restart applies it).
    #[cfg(feature = "registry")]
    pub fn manage_differs(&self, other: &Self) -> bool {
        self.manage != other.manage
    }

    /// The signature policy (`[signatures]`), if the file has one.
    pub fn signatures(&self) -> Option<&TrustPolicy> {
        self.signatures.as_ref()
    }

    /// The static bearer tokens (`[tokens.NAME]`), none if the file names none.
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// Each caller's budgets (`[budgets]`): the defaults if the file sets none.
    pub fn budgets(&self) -> &BudgetConfig {
        &self.budgets
    }

    /// Whether `other` sets different budgets (a restart applies them).
    pub fn budgets_differ(&self, other: &Self) -> bool {
        self.budgets != other.budgets
    }

    /// The downstream OAuth providers (`[providers.NAME]`), none if the file names none.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// Whether `other` configures different providers (a restart applies them).
    pub fn providers_differ(&self, other: &Self) -> bool {
        self.providers_text != other.providers_text
    }

    /// Whether `other` names different tokens (a restart applies them).
    pub fn tokens_differ(&self, other: &Self) -> bool {
        self.tokens_text != other.tokens_text
    }

    /// Whether `other` has a different signature policy (a restart applies it).
    pub fn signatures_differ(&self, other: &Self) -> bool {
        self.signatures_text != other.signatures_text
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `[plugin.NAME]` sections, as TOML text by plugin name.
    pub fn sections(&self) -> &BTreeMap<String, String> {
        &self.sections
    }

    /// The option keys the file sets.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.options.keys().map(String::as_str)
    }

    /// Arguments for `serve` (as `--key=value`) for each option of the file that no flag or
    /// environment variable set in `matches` (the parsed `serve` subcommand): those win.
    pub fn arguments(
        &self,
        matches: &clap::ArgMatches,
        serve: &clap::Command,
    ) -> Result<Vec<OsString>, ConfigError> {
        let set_outside = |arg: &clap::Arg| {
            matches!(
                matches.value_source(arg.get_id().as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        let mut out = Vec::new();
        for arg in serve.get_arguments() {
            let Some(key) = settable(arg) else { continue };
            let Some(setting) = self.options.get(key) else {
                continue;
            };
            if set_outside(arg)
                || serve
                    .get_arg_conflicts_with(arg)
                    .into_iter()
                    .any(set_outside)
            {
                tracing::debug!(
                    key,
                    "a flag or environment variable overrides the configuration file"
                );
                continue;
            }
            let values = flag_values(arg, &setting.value).map_err(|message| ConfigError::At {
                file: self.path.clone(),
                line: Some(setting.line),
                key: Some(key.to_owned()),
                message,
            })?;
            if matches!(arg.get_action(), ArgAction::SetTrue) {
                if values.iter().any(|v| v == "true") {
                    out.push(OsString::from(format!("--{key}")));
                }
                continue;
            }
            // A flag taking several values at once (`grant-dirs`): one flag, its values after it.
            if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
                out.push(OsString::from(format!("--{key}")));
                out.extend(values.into_iter().map(OsString::from));
                continue;
            }
            for value in values {
                let value = if is_path(arg) {
                    self.relative_to_file(&value)
                } else {
                    OsString::from(value)
                };
                let mut argument = OsString::from(format!("--{key}="));
                argument.push(value);
                out.push(argument);
            }
        }
        Ok(out)
    }

    /// `error`, from parsing the arguments with this file's, as the file's error (line and
    /// key) when the value it refuses came from the file; else unchanged.
    pub fn explain(&self, error: clap::Error) -> Result<clap::Error, ConfigError> {
        use clap::error::{ContextKind, ContextValue};
        let flag = match error.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(flag)) => flag.clone(),
            _ => return Ok(error),
        };
        let key = flag
            .trim_start_matches("--")
            .split([' ', '=', '<'])
            .next()
            .unwrap_or_default();
        match self.options.get(key) {
            Some(setting) => Err(ConfigError::At {
                file: self.path.clone(),
                line: Some(setting.line),
                key: Some(key.to_owned()),
                message: clap_message(&error),
            }),
            None => Ok(error),
        }
    }

    /// A path from the file: relative paths are relative to the file's directory.
    fn relative_to_file(&self, value: &str) -> OsString {
        let path = Path::new(value);
        if path.is_absolute() {
            return path.as_os_str().to_owned();
        }
        let base = self.path.parent().unwrap_or(Path::new("."));
        base.join(path).into_os_string()
    }

    /// The option keys whose values differ between `self` and `newer` (added, changed or
    /// removed).
    pub fn changed_options(&self, newer: &Self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .options
            .iter()
            .filter(|(k, s)| newer.options.get(*k).map(|n| &n.value) != Some(&s.value))
            .map(|(k, _)| k.clone())
            .chain(
                newer
                    .options
                    .keys()
                    .filter(|k| !self.options.contains_key(*k))
                    .cloned(),
            )
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// The flag values one option's TOML value stands for: a boolean for an on/off flag, an array
/// (or one value) for a repeatable one, a string or number otherwise.
fn flag_values(arg: &clap::Arg, value: &toml::Value) -> Result<Vec<String>, String> {
    let scalar = |value: &toml::Value| match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!(
            "expected a string or a number, found {}",
            other.type_str()
        )),
    };
    match arg.get_action() {
        ArgAction::SetTrue => match value {
            toml::Value::Boolean(b) => Ok(vec![b.to_string()]),
            other => Err(format!(
                "expected true or false, found {}",
                other.type_str()
            )),
        },
        ArgAction::Append => match value {
            toml::Value::Array(items) => items.iter().map(scalar).collect(),
            single => Ok(vec![scalar(single)?]),
        },
        // A flag taking several values at once (`grant-dirs`).
        _ if arg.get_num_args().is_some_and(|n| n.max_values() > 1) => match value {
            toml::Value::Array(items) => items.iter().map(scalar).collect(),
            single => Ok(vec![scalar(single)?]),
        },
        _ => match value {
            toml::Value::Array(_) => Err("expected one value, found an array".to_owned()),
            single => Ok(vec![scalar(single)?]),
        },
    }
}

/// A clap error in one line, without its `error:` prefix and usage hints.
fn clap_message(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or("invalid value");
    first.trim_start_matches("error: ").trim().to_owned()
}
