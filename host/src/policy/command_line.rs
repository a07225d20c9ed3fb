//! Grants given on the command line (`--grant PLUGIN:dir=PATH[:ro|:rw]`, repeatable) or in the
//! environment (`MCPBOX_GRANT`, entries one a line), so that a bundle or a client's
//! configuration can grant a plugin the folder a person picked without editing TOML.
//!
//! The rule when a plugin's manifest (or `[plugin.NAME]` section) grants directories too:
//! the manifest bounds the command line, never the other way round. Each directory the
//! manifest names that exists on this machine is a bound: a command-line directory must lie
//! inside one of them (its guest path is then the bound's guest path and the rest), and may
//! narrow its mode (read-write to read-only) but never widen it. A manifest directory that does
//! not exist here (a template's `/home/me/notes`) is a placeholder the command line's grants
//! stand in for. The command line's directories then replace the manifest's: the plugin sees
//! only what the command line names. A plugin whose manifest grants no directory (or that has
//! no manifest) gets the command line's directories as they are (read-write unless `:ro`,
//! as the original filesystem server takes its directories).
//!
//! Parsed here (plain text to [`CommandLineGrant`]); checked against the disk where a
//! manifest's directories are, at load (`manifest::grants`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// One `--grant PLUGIN:dir=PATH[:ro|:rw]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLineGrant {
    /// The plugin's name, as served (its file name without `.wasm`).
    pub plugin: String,
    /// The directory, as given (made absolute and checked at load).
    pub dir: PathBuf,
    /// `Some(true)` for `:rw`, `Some(false)` for `:ro`, `None` when neither was given: then
    /// the mode of the manifest's directory it lies in, or read-write standing alone.
    pub writable: Option<bool>,
}

impl CommandLineGrant {
    /// The flag as it was written, for messages: `--grant filesystem:dir=/home/me/notes:ro`.
    pub fn flag(&self) -> String {
        format!("--grant {self}")
    }
}

impl fmt::Display for CommandLineGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.writable {
            Some(true) => ":rw",
            Some(false) => ":ro",
            None => "",
        };
        write!(f, "{}:dir={}{mode}", self.plugin, self.dir.display())
    }
}

/// The grant kinds the command line offers, for messages.
const KINDS: &str = "dir=PATH, dir=PATH:ro or dir=PATH:rw";

impl std::str::FromStr for CommandLineGrant {
    type Err = String;

    /// `PLUGIN:dir=PATH`, `PLUGIN:dir=PATH:ro` or `PLUGIN:dir=PATH:rw`.
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let expected = || format!("expected PLUGIN:{KINDS}, found `{text}`");
        let (plugin, grant) = text.split_once(':').ok_or_else(expected)?;
        let valid_name = !plugin.is_empty()
            && plugin
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(format!(
                "`{plugin}` is not a plugin name (the plugin's file name without .wasm): {}",
                expected()
            ));
        }
        let (kind, value) = grant.split_once('=').ok_or_else(expected)?;
        if kind != "dir" {
            return Err(format!(
                "`{kind}` is not a grant the command line gives: it grants {KINDS} (grant \
                 anything else in the plugin's manifest)"
            ));
        }
        let (path, writable) = if let Some(path) = value.strip_suffix(":ro") {
            (path, Some(false))
        } else if let Some(path) = value.strip_suffix(":rw") {
            (path, Some(true))
        } else {
            (value, None)
        };
        if path.is_empty() {
            return Err(format!("no directory: {}", expected()));
        }
        Ok(Self {
            plugin: plugin.to_owned(),
            dir: PathBuf::from(path),
            writable,
        })
    }
}

/// Every command-line grant, by plugin name, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLineGrants {
    by_plugin: BTreeMap<String, Vec<CommandLineGrant>>,
}

impl CommandLineGrants {
    /// The grants `grants`, kept in their order within each plugin.
    pub fn new(grants: impl IntoIterator<Item = CommandLineGrant>) -> Self {
        let mut by_plugin: BTreeMap<String, Vec<CommandLineGrant>> = BTreeMap::new();
        for grant in grants {
            by_plugin
                .entry(grant.plugin.clone())
                .or_default()
                .push(grant);
        }
        Self { by_plugin }
    }

    /// The grants of plugin `name` (none for most).
    pub fn of(&self, name: &str) -> &[CommandLineGrant] {
        self.by_plugin.get(name).map_or(&[], Vec::as_slice)
    }

    /// The plugins named, with their grants.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[CommandLineGrant])> {
        self.by_plugin
            .iter()
            .map(|(name, grants)| (name.as_str(), grants.as_slice()))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_plugin.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_names_a_plugin_a_directory_and_perhaps_a_mode() {
        let grant: CommandLineGrant = "filesystem:dir=/home/me/notes:ro".parse().unwrap();
        assert_eq!(
            grant,
            CommandLineGrant {
                plugin: "filesystem".to_owned(),
                dir: PathBuf::from("/home/me/notes"),
                writable: Some(false),
            }
        );
        assert_eq!(
            grant.flag(),
            "--grant filesystem:dir=/home/me/notes:ro".to_owned()
        );
        let grant: CommandLineGrant = "fs:dir=/a:b:rw".parse().unwrap();
        assert_eq!(
            (grant.dir, grant.writable),
            (PathBuf::from("/a:b"), Some(true))
        );
        let grant: CommandLineGrant = "fs:dir=relative/dir".parse().unwrap();
        assert_eq!(grant.writable, None);
        for (text, expected) in [
            ("filesystem", "expected PLUGIN:dir=PATH"),
            ("filesystem:/home", "expected PLUGIN:dir=PATH"),
            ("filesystem:dir=", "no directory"),
            ("filesystem:dir=:ro", "no directory"),
            (":dir=/x", "is not a plugin name"),
            ("a/b:dir=/x", "is not a plugin name"),
            ("filesystem:host=example.com", "`host` is not a grant"),
        ] {
            let error = text.parse::<CommandLineGrant>().unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn grants_are_kept_by_plugin_in_order() {
        let grants = CommandLineGrants::new(
            ["b:dir=/2", "a:dir=/1", "b:dir=/3:ro"]
                .iter()
                .map(|t| t.parse().unwrap()),
        );
        assert_eq!(grants.of("a").len(), 1);
        let b: Vec<String> = grants.of("b").iter().map(ToString::to_string).collect();
        assert_eq!(b, ["b:dir=/2", "b:dir=/3:ro"]);
        assert!(grants.of("c").is_empty());
        assert_eq!(
            grants.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
