//! The naming keys of a manifest: `prefix`, and the allow- and deny-lists of `[tools]`,
//! `[prompts]` and `[resources]`, validated into the parts of [`Naming`](crate::policy::Naming).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use super::PolicyError;
use crate::policy::ItemFilter;

/// The longest name prefix: tool and prompt names stay within the 64 characters clients take.
const MAX_PREFIX_CHARS: usize = 32;

/// A name prefix: what tool and prompt names may hold (`A-Z a-z 0-9 _ -`), 1 to 32 of them.
pub(super) fn prefix(file: &Path, prefix: Option<String>) -> Result<Option<String>, PolicyError> {
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

/// `[tools]`, `[prompts]`, `[resources]`: which of the plugin's items are served.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilterTable {
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    /// `scopes = { name = ["scope", …] }`: what an item requires beyond the plugin's scopes.
    #[serde(default)]
    scopes: BTreeMap<String, Vec<String>>,
}

/// An allow-list and a deny-list of `kind` (`tools`, …): names, each once, none in both.
pub(super) fn filter(
    file: &Path,
    kind: &str,
    table: FilterTable,
) -> Result<ItemFilter, PolicyError> {
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
    let mut scopes = BTreeMap::new();
    for (name, required) in table.scopes {
        let key = format!("{kind}.scopes.{name}");
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(PolicyError::at(
                file,
                key,
                "a name is not empty and has no control characters",
            ));
        }
        if required.is_empty() {
            return Err(PolicyError::at(
                file,
                key,
                "name at least one scope (or leave the item out)",
            ));
        }
        let required = super::scopes(file, required).map_err(|e| e.under(&key))?;
        scopes.insert(name, required);
    }
    Ok(ItemFilter {
        allow: table.allow,
        deny: table.deny,
        scopes,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{error, write};
    use crate::policy::Limits;
    use crate::policy::manifest::load_manifest;

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
    fn items_may_require_scopes_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[tools]\nscopes = { reset = [\"admin\", \"ops\"] }\n[resources]\nscopes = { \"todo://{id}\" = [\"read\"] }\n";
        let naming = load_manifest(&write(dir.path(), text), Limits::default())
            .unwrap()
            .naming;
        assert_eq!(naming.tools.scopes_of("reset"), ["admin", "ops"]);
        assert!(naming.tools.scopes_of("other").is_empty());
        assert_eq!(naming.resources.scopes_of("todo://{id}"), ["read"]);
        let e = error("[tools]\nscopes = { reset = [\"a b\"] }\n");
        assert!(e.contains("tools.scopes.reset[0]: a scope is"), "{e}");
        let e = error("[prompts]\nscopes = { p = [] }\n");
        assert!(
            e.contains("prompts.scopes.p: name at least one scope"),
            "{e}"
        );
    }
}
