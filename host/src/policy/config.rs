//! Configuration and secrets for plugins (`wasi:config/store`): the keys a manifest names in
//! its `[config]` table ([`ConfigKey`], each from a literal, a variable of mcpbox's
//! environment or a named secret), and the operator's secrets file ([`Secrets`]), which may
//! hold a value per caller.
//!
//! A value read from the environment or the secrets file is a [`SecretValue`]: its `Debug`
//! and `Display` never show it, so it cannot reach a log line, an error, the status page or
//! `inspect` by accident. What those show is the key's [`ConfigSource`] (`env WEATHER_KEY`,
//! `secret weather-key`), never the value.
//!
//! The secrets file is TOML, readable by its owner alone (mode 0600 or stricter, owned by the
//! user mcpbox runs as; anything else is refused, as `ssh` refuses a readable key):
//!
//! ```toml
//! weather-key = "…"                          # the value every caller gets
//!
//! [principal."oauth:https://as.example sub:alice"]
//! github-token = "…"                         # alice's own: only her calls see it
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration or secret value: shown nowhere.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wrap `value`.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The value itself, for the plugin that was granted it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(hidden)")
    }
}

/// Where a configuration key's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// Written in the manifest (or `[plugin.NAME]` section) itself: not a secret.
    Literal(String),
    /// Copied from a variable of mcpbox's environment when the plugin loads (`None`: the
    /// variable is unset and the key optional).
    Env {
        /// The variable's name.
        var: String,
        /// Its value, if it was set.
        value: Option<SecretValue>,
    },
    /// Looked up in the secrets file at each call: the caller's own value if the file has
    /// one for them, else the value for everyone.
    Secret(String),
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(_) => f.write_str("literal"),
            Self::Env { var, .. } => write!(f, "env {var}"),
            Self::Secret(name) => write!(f, "secret {name}"),
        }
    }
}

/// One key a plugin may read through `wasi:config/store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    /// The key, as the plugin asks for it.
    pub name: String,
    /// Where its value comes from.
    pub source: ConfigSource,
    /// Whether the plugin works without it (a missing optional key is simply absent).
    pub optional: bool,
}

/// The operator's secrets: values for everyone, and values per caller (by principal key).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Where they were read from (`None`: no secrets file).
    file: Option<PathBuf>,
    shared: BTreeMap<String, SecretValue>,
    by_principal: BTreeMap<String, BTreeMap<String, SecretValue>>,
}

/// The secrets a running mcpbox uses, swapped whole when the file is read again (SIGHUP), so
/// a call sees either the old secrets or the new ones, never a mix.
#[derive(Debug, Default)]
pub struct SecretsCell(arc_swap::ArcSwap<Secrets>);

impl SecretsCell {
    /// Holding `secrets`.
    pub fn new(secrets: Secrets) -> Self {
        Self(arc_swap::ArcSwap::from_pointee(secrets))
    }

    /// The secrets now.
    pub fn current(&self) -> arc_swap::Guard<std::sync::Arc<Secrets>> {
        self.0.load()
    }

    /// Read the file again (its checks included) and use it from the next call on; on an
    /// error the secrets in use stay. `Ok(None)`: there is no secrets file.
    pub fn reload(&self) -> Result<Option<(usize, usize)>, SecretsError> {
        let Some(file) = self.current().file().map(Path::to_owned) else {
            return Ok(None);
        };
        let fresh = Secrets::load(&file)?;
        let counts = fresh.counts();
        self.0.store(std::sync::Arc::new(fresh));
        Ok(Some(counts))
    }
}

/// Why the secrets file was refused.
#[derive(Debug, thiserror::Error)]
#[error("secrets file {}: {message}", file.display())]
pub struct SecretsError {
    file: PathBuf,
    message: String,
}

impl Secrets {
    /// No secrets.
    pub fn none() -> Self {
        Self::default()
    }

    /// Read the secrets file at `file`: it must be a regular file owned by this user and
    /// readable by nobody else. Values are strings; a `[principal."KEY"]` table holds one
    /// caller's own.
    pub fn load(file: &Path) -> Result<Self, SecretsError> {
        let error = |message: String| SecretsError {
            file: file.to_owned(),
            message,
        };
        check_private(file).map_err(error)?;
        let text =
            std::fs::read_to_string(file).map_err(|e| error(format!("cannot read it: {e}")))?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            // A TOML error quotes the offending line, which may hold a secret: only the
            // position and the kind of error are kept.
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            error(format!(
                "not valid TOML{}",
                line.map(|l| format!(" (line {l})")).unwrap_or_default()
            ))
        })?;
        let mut secrets = Self {
            file: Some(file.to_owned()),
            ..Self::default()
        };
        for (name, value) in table {
            match value {
                toml::Value::String(value) => {
                    check_name(&name).map_err(error)?;
                    secrets.shared.insert(name, SecretValue(value));
                }
                toml::Value::Table(principals) if name == "principal" => {
                    for (principal, values) in principals {
                        let toml::Value::Table(values) = values else {
                            return Err(error(format!(
                                "principal.\"{principal}\" must be a table of secrets"
                            )));
                        };
                        let mut own = BTreeMap::new();
                        for (name, value) in values {
                            check_name(&name).map_err(error)?;
                            let toml::Value::String(value) = value else {
                                return Err(error(format!(
                                    "principal.\"{principal}\".{name} must be a string"
                                )));
                            };
                            own.insert(name, SecretValue(value));
                        }
                        secrets.by_principal.insert(principal, own);
                    }
                }
                _ => {
                    return Err(error(format!(
                        "`{name}` must be a string (a secret), or the table [principal.\"KEY\"]"
                    )));
                }
            }
        }
        Ok(secrets)
    }

    /// Where they were read from.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The secret `name` for the caller whose principal key is `principal`: their own if
    /// the file has one, else everyone's.
    pub fn get(&self, name: &str, principal: Option<&str>) -> Option<&SecretValue> {
        principal
            .and_then(|p| self.by_principal.get(p))
            .and_then(|own| own.get(name))
            .or_else(|| self.shared.get(name))
    }

    /// Whether the file has `name` for anyone at all.
    pub fn has(&self, name: &str) -> bool {
        self.shared.contains_key(name)
            || self.by_principal.values().any(|own| own.contains_key(name))
    }

    /// How many secrets the file holds (for everyone, and per caller), for the log.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.shared.len(),
            self.by_principal.values().map(BTreeMap::len).sum(),
        )
    }
}

/// The names of `keys` a plugin needs that cannot be had: an unset variable or a secret the
/// file has for nobody, each as `KEY (secret NAME)`. Optional keys are never missing.
pub fn missing(keys: &[ConfigKey], secrets: &Secrets) -> Vec<String> {
    keys.iter()
        .filter(|key| !key.optional)
        .filter(|key| match &key.source {
            ConfigSource::Literal(_) => false,
            ConfigSource::Env { value, .. } => value.is_none(),
            ConfigSource::Secret(name) => !secrets.has(name),
        })
        .map(|key| format!("{} ({})", key.name, key.source))
        .collect()
}

/// A configuration key or secret name: 1 to 128 of `[A-Za-z0-9_.-]`.
pub fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a valid name: 1 to 128 letters, digits, `_`, `-` and `.`",
            name.escape_debug()
        ))
    }
}

/// Refuse a secrets file (or another file of secrets, such as the credentials key) others
/// could read or write, or that is not this user's.
#[cfg(unix)]
pub fn check_private(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "its mode is {mode:04o}: others may read it; make it readable by its owner alone \
             (chmod 600)"
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "it belongs to user {}, not to the user mcpbox runs as ({me})",
            meta.uid()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
pub fn check_private(_: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str, mode: u32) -> tempfile::NamedTempFile {
        use std::os::unix::fs::PermissionsExt as _;
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), text).expect("write");
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
        file
    }

    #[test]
    fn a_callers_own_secret_comes_before_everyones() {
        let file = write(
            "api = \"shared-value\"\n[principal.\"token:alice\"]\napi = \"alices-value\"\n",
            0o600,
        );
        let secrets = Secrets::load(file.path()).expect("loads");
        let value = |p| secrets.get("api", p).map(SecretValue::expose);
        assert_eq!(value(Some("token:alice")), Some("alices-value"));
        assert_eq!(value(Some("token:bob")), Some("shared-value"));
        assert_eq!(value(None), Some("shared-value"));
        assert!(secrets.has("api") && !secrets.has("other"));
        assert!(!format!("{secrets:?}").contains("value"), "{secrets:?}");
    }

    #[test]
    fn a_readable_file_and_bad_shapes_are_refused_without_their_values() {
        let open = write("api = \"x\"\n", 0o644);
        let error = Secrets::load(open.path()).err().map(|e| e.to_string());
        assert!(
            error.as_deref().is_some_and(|e| e.contains("chmod 600")),
            "{error:?}"
        );
        let bad = write("api = \"top-secret\n", 0o600);
        let error = Secrets::load(bad.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("not valid TOML") && !error.contains("top-secret"),
            "{error}"
        );
        let number = write("api = 5\n", 0o600);
        assert!(Secrets::load(number.path()).is_err());
    }

    #[test]
    fn missing_names_keys_not_values() {
        let keys = vec![
            ConfigKey {
                name: "base".into(),
                source: ConfigSource::Literal("https://x".into()),
                optional: false,
            },
            ConfigKey {
                name: "key".into(),
                source: ConfigSource::Secret("weather-key".into()),
                optional: false,
            },
            ConfigKey {
                name: "extra".into(),
                source: ConfigSource::Secret("nothing".into()),
                optional: true,
            },
        ];
        assert_eq!(
            missing(&keys, &Secrets::none()),
            vec!["key (secret weather-key)".to_owned()]
        );
    }
}
