//! The flags that say where plugins' key-value state lives.

use std::path::PathBuf;

use crate::kv::StateConfig;

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
