//! Configuration and secrets from the operator, through the standard `wasi:config/store`.
//!
//! The plugin's manifest names the keys it reads, and where the operator's values come from:
//!
//! ```toml
//! [config]
//! api-base = "https://api.example.com"        # a literal
//! api-key = { secret = "example-key" }        # from mcpbox's secrets file
//! region = { env = "REGION", optional = true } # from mcpbox's environment
//! ```
//!
//! ```no_run
//! let base = mcpbox_sdk::config::get("api-base")?.unwrap_or_default();
//! let key = mcpbox_sdk::config::require("api-key")?;
//! # Ok::<(), mcpbox_sdk::config::ConfigError>(())
//! ```
//!
//! Only the keys the manifest names exist; a secret can be the caller's own (the operator's
//! secrets file may hold one per user). Values are the plugin's to use: never log them.

use std::fmt;

use crate::bindings::wasi::config::store;

/// Why a configuration value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The key has no value (not named in the manifest, or no value for it).
    Missing(String),
    /// The host could not read it.
    Store(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(key) => write!(
                f,
                "configuration key `{key}` has no value: the plugin's manifest must name it in \
                 its [config] table, and the operator give it a value"
            ),
            Self::Store(why) => write!(f, "cannot read the configuration: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn store_error(error: store::Error) -> ConfigError {
    match error {
        store::Error::Upstream(why) | store::Error::Io(why) => ConfigError::Store(why),
    }
}

/// The value of `key`, if it has one.
pub fn get(key: &str) -> Result<Option<String>, ConfigError> {
    store::get(key).map_err(store_error)
}

/// The value of `key`, which the plugin cannot do without.
pub fn require(key: &str) -> Result<String, ConfigError> {
    get(key)?.ok_or_else(|| ConfigError::Missing(key.to_owned()))
}

/// Every key the plugin may read that has a value, with its value.
pub fn all() -> Result<Vec<(String, String)>, ConfigError> {
    store::get_all().map_err(store_error)
}
