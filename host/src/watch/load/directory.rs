//! Listing the plugin directories: the `*.wasm` files of each (with a warning for a manifest
//! that has no component beside it), and which file keeps a name that several directories
//! hold (the first directory given wins; the others are [`shadowed`]).

use super::*;

/// The `*.wasm` files in `dir`, sorted by name, and the manifests (`*.toml`) with no `*.wasm`
/// of the same name beside them: each of those is warned about (a typo in a file name would
/// otherwise leave a plugin without the grants meant for it). One pass over the directory,
/// with blocking calls: it runs before anything serves, or on a blocking thread.
pub(super) fn list_directory(dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), DirectoryError> {
    let error = |source| DirectoryError {
        dir: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(error)? {
        let path = entry.map_err(error)?.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        match path.extension() {
            Some(e) if e == "wasm" && path.is_file() => files.push(path),
            Some(e) if e == "toml" => manifests.push(path),
            _ => {}
        }
    }
    files.sort();
    let mut orphans = Vec::new();
    for path in manifests {
        let plugin = path.with_extension("wasm");
        if plugin.exists() {
            continue;
        }
        tracing::warn!(
            manifest = %path.display(),
            "a manifest with no plugin: there is no {} beside it, so it grants nothing",
            plugin.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
        );
        orphans.push(format!(
            "manifest {} has no plugin {} beside it; it grants nothing",
            path.display(),
            plugin.display()
        ));
    }
    orphans.sort();
    Ok((files, orphans))
}

/// The plugins of every directory of `dirs`, in order: a plugin's name is claimed by the
/// first directory that holds `NAME.wasm`; a plugin of the same name in a later directory is
/// not loaded, and named as a problem with both files (as are manifests with no plugin).
pub(super) fn list_directories(
    dirs: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<String>), DirectoryError> {
    let mut claimed: std::collections::BTreeMap<String, PathBuf> = Default::default();
    let mut problems = Vec::new();
    for dir in dirs {
        let (files, orphans) = list_directory(dir)?;
        problems.extend(orphans);
        for file in files {
            let name = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match claimed.get(&name) {
                Some(first) => {
                    let problem = shadowed(&name, &file, first);
                    tracing::error!(file = %file.display(), "{problem}");
                    problems.push(problem);
                }
                None => {
                    claimed.insert(name, file);
                }
            }
        }
    }
    Ok((claimed.into_values().collect(), problems))
}

/// Why `file`, a plugin named `name`, is not loaded: `first`, in an earlier plugin directory,
/// has the name.
pub fn shadowed(name: &str, file: &Path, first: &Path) -> String {
    format!(
        "skipped plugin `{name}` ({}): the name is taken by {}, in an earlier plugin directory \
         (the first directory given wins); rename one of them",
        file.display(),
        first.display()
    )
}
