//! The `[plugin.NAME]` sections of the configuration file ([`Sections`]), as TOML text by
//! plugin name, swapped in on reload, with the command line's grants that travel with them.

use super::*;

/// The `[plugin.NAME]` sections of the configuration file, as TOML text by plugin name,
/// shared by loading and hot reload (which swaps them in when the file changes). A plugin
/// with a section is governed by it, not by a manifest beside it. The command line's grants
/// (`--grant`, which do not change while mcpbox runs) travel with them.
#[derive(Debug, Default)]
pub struct Sections {
    current: arc_swap::ArcSwap<SectionMap>,
    grants: CommandLineGrants,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct SectionMap {
    file: PathBuf,
    texts: std::collections::BTreeMap<String, String>,
}

impl Sections {
    /// The sections of the configuration file `file`.
    pub fn new(file: PathBuf, texts: std::collections::BTreeMap<String, String>) -> Self {
        Self {
            current: arc_swap::ArcSwap::from_pointee(SectionMap { file, texts }),
            grants: CommandLineGrants::default(),
        }
    }

    /// These sections, with the command line's grants `grants`.
    #[must_use]
    pub fn with_grants(mut self, grants: CommandLineGrants) -> Self {
        self.grants = grants;
        self
    }

    /// The command line's grants.
    pub fn grants(&self) -> &CommandLineGrants {
        &self.grants
    }

    /// The configuration file and the section of plugin `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<(PathBuf, String)> {
        let current = self.current.load();
        current
            .texts
            .get(name)
            .map(|text| (current.file.clone(), text.clone()))
    }

    /// The names of the plugins with sections.
    pub fn names(&self) -> Vec<String> {
        self.current.load().texts.keys().cloned().collect()
    }

    /// Put `texts` in place of the current sections; returns the names whose section was
    /// added, changed or removed.
    pub fn replace(&self, texts: std::collections::BTreeMap<String, String>) -> Vec<String> {
        let old = self.current.load_full();
        let mut changed: Vec<String> = texts
            .iter()
            .filter(|(name, text)| old.texts.get(*name) != Some(text))
            .map(|(name, _)| name.clone())
            .chain(
                old.texts
                    .keys()
                    .filter(|name| !texts.contains_key(*name))
                    .cloned(),
            )
            .collect();
        changed.sort();
        self.current.store(Arc::new(SectionMap {
            file: old.file.clone(),
            texts,
        }));
        changed
    }
}
