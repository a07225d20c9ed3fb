//! Loading the plugin directory: every `*.wasm` file with its manifest (`*.toml`, optional),
//! compiled in parallel off the async executor, linked, and listed. A plugin that fails (its
//! manifest included) is reported with its file and reason and skipped; the others load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::LoadedPlugin;
use crate::engine::{LoadError, PluginCode, Runtime};
use crate::policy::{Limits, Policy, PolicyError, load_manifest, manifest_path};

/// Why the plugin directory itself could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the plugin directory {}: {source}", dir.display())]
pub struct DirectoryError {
    dir: PathBuf,
    #[source]
    source: std::io::Error,
}

/// Why one plugin file failed to load.
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("its file name is not valid UTF-8")]
    Name,
    #[error("{0}")]
    Load(#[from] LoadError),
    #[error("invalid manifest {0}")]
    Policy(#[from] PolicyError),
    #[error("loading it was interrupted: {0}")]
    Join(String),
}

/// The `*.wasm` files in `dir`, sorted by name (the order in which names are claimed).
async fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, DirectoryError> {
    let error = |source| DirectoryError {
        dir: dir.to_owned(),
        source,
    };
    let mut entries = tokio::fs::read_dir(dir).await.map_err(error)?;
    let mut files = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(error)? {
        let path = entry.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if !hidden && path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Load every plugin in `dir`, in parallel. Failures are logged and skipped.
pub async fn load_directory(
    runtime: &Runtime,
    dir: &Path,
    limits: Limits,
) -> Result<Vec<LoadedPlugin>, DirectoryError> {
    let files = plugin_files(dir).await?;
    if files.is_empty() {
        tracing::warn!(dir = %dir.display(), "no plugins (*.wasm files) in the plugin directory");
    }
    let tasks: Vec<_> = files
        .into_iter()
        .map(|file| {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                let result = load_file(&runtime, &file, limits).await;
                (file, result)
            })
        })
        .collect();
    let mut loaded = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok((_, Ok(plugin))) => loaded.push(plugin),
            Ok((file, Err(error))) => {
                tracing::error!(file = %file.display(), "skipped plugin: {error}");
            }
            Err(e) => tracing::error!("a plugin load task failed: {e}"),
        }
    }
    Ok(loaded)
}

/// Load one plugin file: read, compile (on a blocking thread), link, and read its lists.
async fn load_file(
    runtime: &Runtime,
    file: &Path,
    limits: Limits,
) -> Result<LoadedPlugin, FileError> {
    let name: Arc<str> = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or(FileError::Name)?
        .into();
    let manifest = manifest_path(file);
    let policy = match tokio::fs::try_exists(&manifest).await {
        Ok(true) => load_manifest(&manifest, limits)?,
        _ => Policy::deny_all(limits),
    };
    let wasm = tokio::fs::read(file).await.map_err(FileError::Read)?;
    let compiler = runtime.clone();
    let component = tokio::task::spawn_blocking(move || compiler.compile(&wasm))
        .await
        .map_err(|e| FileError::Join(e.to_string()))??;
    let code = PluginCode::prepare(runtime, name, &component, policy)?;
    let lists = code.read_lists().await.map_err(LoadError::List)?;
    Ok(LoadedPlugin {
        code,
        file: file.to_owned(),
        lists,
    })
}
