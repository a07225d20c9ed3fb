//! Loading the plugin directory: every `*.wasm` file with its manifest (`*.toml`, optional),
//! read, hashed and checked against the directory's lock file and the signature policy
//! (`registry::trust`) on blocking threads before anything else (at start-up, while the engine
//! is made: [`prefetch`]), compiled in parallel off the async executor, linked, and listed. A
//! component whose file is known by sight (`known_files`) is neither read nor hashed unless its
//! compiled form has left the cache. A plugin in the managed directory (`[manage]`) whose
//! manifest grants a folder that no longer resolves to itself (a symbolic link put in place
//! of the folder the user approved) is refused. A plugin that fails (its manifest included)
//! is reported with its file and reason and skipped; the others load.
//! Listing the directories themselves is `directory`'s job.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod directory;

use self::directory::list_directories;
pub use self::directory::shadowed;
use super::known_files::KnownFiles;
use crate::catalog::LoadedPlugin;
use crate::engine::{LoadError, PluginCode, Runtime};
use crate::files::Identity;
use crate::policy::PluginName;
use crate::registry::trust::{Provenance, Trust, TrustError};
use sha2::{Digest as _, Sha256};

use crate::policy::{
    CommandLineGrant, Limits, Policy, PolicyError, Sections, manifest_path,
    parse_manifest_granting, parse_section_granting,
};

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
pub enum FileError {
    /// The component could not be read.
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    /// The manifest exists but could not be read.
    #[error("cannot read its manifest {}: {source}", file.display())]
    ReadManifest {
        /// The manifest.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file name is not UTF-8.
    #[error("its file name is not valid UTF-8")]
    Name,
    /// Compiling, linking or listing failed.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// The manifest is invalid.
    #[error("invalid grants or limits: {0}")]
    Policy(#[from] PolicyError),
    /// The loading task failed.
    #[error("loading it was interrupted: {0}")]
    Join(String),
    /// Its lock entry or signature refused it.
    #[error("refused: {0}")]
    Trust(#[from] TrustError),
    /// A plugin installed with a user's consent has a folder that no longer leads where the
    /// user approved (a symbolic link put in its place since).
    #[error(
        "the folder {} the user approved now leads elsewhere through a symbolic link ({}): remove the plugin and install it again",
        folder.display(),
        real.display()
    )]
    Relinked {
        /// The folder as approved.
        folder: PathBuf,
        /// Where it leads now.
        real: PathBuf,
    },
    /// Known by sight, its compiled form had left the cache, and the file read then held
    /// another component: it changed while it was loaded.
    #[error("it changed while it was being loaded (a watched directory loads it again)")]
    Changed,
}

/// A plugin file being read (by [`read_source`]) on a blocking thread.
type Reading = tokio::task::JoinHandle<Result<PluginSource, FileError>>;

/// How many pieces of one kind of blocking work of loading plugins run at once: one per CPU,
/// for reading, hashing and checking their files, and as many again for loading (or
/// compiling) their code, so that a plugin read can go on to load while others are read.
/// Handed to Tokio's blocking pool all at once, fifty plugins started thirty-odd threads on
/// two cores, and the start spent its time making threads and switching between them
/// (BENCHMARKS.md, start-up).
struct LoadingShare(std::sync::OnceLock<tokio::sync::Semaphore>);

/// The share of reading plugins' files.
static READING: LoadingShare = LoadingShare(std::sync::OnceLock::new());
/// The share of loading or compiling plugins' code.
static COMPILING: LoadingShare = LoadingShare(std::sync::OnceLock::new());

impl LoadingShare {
    fn semaphore(&self) -> &tokio::sync::Semaphore {
        // Read once for both shares: each reading opens and reads the process's cgroup files
        // (30–45 µs here).
        static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        self.0.get_or_init(|| {
            let cpus = *CPUS.get_or_init(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            });
            tokio::sync::Semaphore::new(cpus)
        })
    }

    /// Run `work` on a blocking thread when this share has room.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, FileError> {
        // The semaphore is never closed; without a permit the work would still run, unbounded.
        let _turn = self.semaphore().acquire().await.ok();
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| FileError::Join(e.to_string()))
    }

    /// Start `work` on a blocking thread: at once while this share has room, else as a task
    /// waiting for its turn. At once matters: a task spawned from a worker sits in that
    /// worker's own next-task slot, which no other worker takes from, until the worker is
    /// free (at start-up, after it has made the engine; BENCHMARKS.md, "A start's reading,
    /// begun at once").
    #[expect(
        clippy::result_large_err,
        reason = "at most one error a file read, moved once to the loader"
    )]
    fn start<T: Send + 'static>(
        &'static self,
        work: impl FnOnce() -> Result<T, FileError> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<T, FileError>> {
        if let Ok(turn) = self.semaphore().try_acquire() {
            return tokio::task::spawn_blocking(move || {
                let _turn = turn;
                work()
            });
        }
        tokio::spawn(async move { self.run(work).await? })
    }
}

/// Start reading `file` on a blocking thread.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a file read, moved once to the loader"
)]
fn start_reading(file: &Path, sections: &Arc<Sections>, trust: &Trust) -> Reading {
    let (file, sections, trust) = (file.to_owned(), Arc::clone(sections), trust.clone());
    READING.start(move || read_source_now(&file, &sections, &trust))
}

/// The files of a directory being read, and its manifests with no plugin.
struct Listing {
    files: Vec<(PathBuf, Reading)>,
    orphans: Vec<String>,
}

/// The plugin directory being read: its files listed, and each one's component and policy
/// read, hashed and checked on blocking threads of their own, from the moment [`prefetch`]
/// is called. Start-up calls it before it makes the engine, so that reading the plugins and
/// making the engine overlap (BENCHMARKS.md, start-up).
pub struct Prefetched {
    dirs: Vec<PathBuf>,
    listed: Result<Listing, DirectoryError>,
}

/// Start reading every plugin in `dirs` (see [`Prefetched`]; a name is the first
/// directory's that has it). Must be called within the Tokio runtime.
pub fn prefetch(dirs: &[PathBuf], sections: &Arc<Sections>, trust: &Trust) -> Prefetched {
    // Sized here, before the engine is made on a thread pinned to one CPU for the while.
    READING.semaphore();
    COMPILING.semaphore();
    let listed = list_directories(dirs).map(|(files, orphans)| Listing {
        files: files
            .into_iter()
            .map(|file| {
                let reading = start_reading(&file, sections, trust);
                (file, reading)
            })
            .collect(),
        orphans,
    });
    Prefetched {
        dirs: dirs.to_vec(),
        listed,
    }
}

/// What loading the directory gave: the plugins that loaded, and how many files were skipped.
pub struct LoadedDirectory {
    /// The plugins that loaded.
    pub plugins: Vec<LoadedPlugin>,
    /// How many `*.wasm` files failed to load (each logged with its reason).
    pub skipped: usize,
    /// What went wrong, one message each: files skipped and why, manifests without a plugin.
    pub problems: Vec<String>,
    /// Plugins still listing when startup went on.
    pub late: Vec<LateLoad>,
}

/// How long startup waits (by default: `--startup-wait-ms`) for compiled plugins to list what
/// they offer. A plugin still listing
/// then is added when it is done (clients hear `list_changed`); its listing runs under its own
/// call limits, so it cannot take longer than its timeout.
pub const STARTUP_LISTING_WAIT: Duration = Duration::from_secs(2);

/// A plugin still loading when startup went on: its file, and the load to finish.
pub type LateLoad = tokio::task::JoinHandle<(PathBuf, Result<LoadedPlugin, FileError>)>;

/// Load every plugin in `dir`, in parallel. Every plugin is compiled before this returns; those
/// whose listing takes longer than [`STARTUP_LISTING_WAIT`] are returned as `late`. Failures
/// are logged and skipped; the loaded plugins are logged once they are served.
pub async fn load_directory(
    runtime: &Runtime,
    dir: &Path,
    limits: Limits,
    sections: &Arc<Sections>,
    trust: &Trust,
) -> Result<LoadedDirectory, DirectoryError> {
    load_prefetched(
        runtime,
        prefetch(&[dir.to_owned()], sections, trust),
        limits,
        STARTUP_LISTING_WAIT,
    )
    .await
}

/// [`load_directory`], for a directory whose reading [`prefetch`] started.
pub async fn load_prefetched(
    runtime: &Runtime,
    prefetched: Prefetched,
    limits: Limits,
    listing_wait: Duration,
) -> Result<LoadedDirectory, DirectoryError> {
    let Prefetched { dirs, listed } = prefetched;
    let Listing {
        files,
        orphans: mut problems,
    } = listed?;
    if files.is_empty() {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        tracing::warn!(dir = %dirs.join(", "), "no plugins (*.wasm files) in the plugin directory");
    }
    // Plugins of a name an earlier directory took: skipped (each is among the problems).
    let mut skipped = problems
        .iter()
        .filter(|p| p.starts_with("skipped plugin"))
        .count();
    let mut compiled = Vec::with_capacity(files.len());
    let mut tasks: Vec<LateLoad> = files
        .into_iter()
        .map(|(file, reading)| {
            let runtime = runtime.clone();
            let (done_compiling, compiled_signal) = tokio::sync::oneshot::channel::<()>();
            compiled.push(compiled_signal);
            tokio::spawn(async move {
                let read = match reading.await {
                    Ok(read) => read,
                    Err(e) => Err(FileError::Join(e.to_string())),
                };
                let result = match read {
                    Ok(source) => match compile_source(&runtime, source, limits).await {
                        Ok(code) => {
                            let _ = done_compiling.send(());
                            list_plugin(code).await
                        }
                        Err(error) => Err(error),
                    },
                    Err(error) => Err(error),
                };
                (file, result)
            })
        })
        .collect();
    // Every component compiled (or failed), however long that takes; then a bounded wait for
    // listings.
    for signal in compiled {
        let _ = signal.await;
    }
    let deadline = tokio::time::Instant::now() + listing_wait;
    let mut loaded = Vec::with_capacity(tasks.len());
    let mut late = Vec::new();
    for mut task in tasks.drain(..) {
        let joined = match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                late.push(task);
                continue;
            }
        };
        match joined {
            Ok((_, Ok(plugin))) => loaded.push(plugin),
            Ok((file, Err(error))) => {
                skipped += 1;
                tracing::error!(file = %file.display(), "skipped plugin: {error}");
                let name = file.file_stem().unwrap_or_default().to_string_lossy();
                problems.push(format!(
                    "skipped plugin `{name}` ({}): {error}; it is not loaded",
                    file.display()
                ));
            }
            Err(e) => {
                skipped += 1;
                tracing::error!("a plugin load task failed: {e}");
                problems.push(format!("a plugin load task failed: {e}"));
            }
        }
    }
    if !late.is_empty() {
        tracing::warn!(
            plugins = late.len(),
            wait_ms = listing_wait.as_millis(),
            "some plugins are still listing what they offer; serving the others now and adding them when they are done"
        );
    }
    Ok(LoadedDirectory {
        plugins: loaded,
        skipped,
        problems,
        late,
    })
}

/// Where a plugin's policy comes from.
enum PolicyText {
    /// The manifest beside it: its path and text.
    Manifest(PathBuf, String),
    /// Its `[plugin.NAME]` section of the configuration file: the file, the name, the text.
    Section(PathBuf, String, String),
}

/// A plugin's files, read once: the component and its policy text (a manifest or a
/// configuration section, if any), and their digest.
pub struct PluginSource {
    /// The `.wasm` file.
    pub file: PathBuf,
    /// The component, unless its file was known by sight.
    wasm: Option<Vec<u8>>,
    /// The file's identity when it was opened, and when that was: recorded as known once
    /// the component loads.
    seen: Option<(Identity, std::time::SystemTime)>,
    policy: Option<PolicyText>,
    /// The command line's grants of the plugin (`--grant`), usually none.
    grants: Vec<CommandLineGrant>,
    /// SHA-256 of the component alone: the key of its compiled form in the cache.
    component_digest: [u8; 32],
    /// SHA-256 of the component's digest and the policy text: equal digests mean nothing
    /// changed.
    pub digest: [u8; 32],
    /// Where it was pulled from and who signed it.
    provenance: Provenance,
}

/// Read a plugin's component and policy: its section of the configuration file if `sections`
/// has one (a manifest beside it is then ignored, with a warning), else its manifest. The
/// component is checked by `trust` first: against the lock file beside it, if there is one, and
/// for the signature the policy requires. The reading, hashing and checking run on a blocking
/// thread.
pub async fn read_source(
    file: &Path,
    sections: &Arc<Sections>,
    trust: &Trust,
) -> Result<PluginSource, FileError> {
    start_reading(file, sections, trust)
        .await
        .map_err(|e| FileError::Join(e.to_string()))?
}

/// [`read_source`], on the calling thread: it blocks on the files and hashes the component.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a file read, moved once to the loader"
)]
fn read_source_now(
    file: &Path,
    sections: &Sections,
    trust: &Trust,
) -> Result<PluginSource, FileError> {
    read_source_with(file, sections, trust, super::known_files::current())
}

/// [`read_source_now`], with `known` the files known by sight, if any are kept.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a file read, moved once to the loader"
)]
fn read_source_with(
    file: &Path,
    sections: &Sections,
    trust: &Trust,
    known: Option<&KnownFiles>,
) -> Result<PluginSource, FileError> {
    let name = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or(FileError::Name)?;
    let known = known.filter(|_| !trust.needs_bytes(name));
    let (wasm, component_digest, seen) = match known.and_then(|known| known.digest_of(file)) {
        Some(digest) => {
            tracing::debug!(file = %file.display(), "known by sight, not read");
            (None, digest, None)
        }
        None => {
            let opened = std::time::SystemTime::now();
            let (wasm, identity) =
                crate::files::read_with_identity(file).map_err(FileError::Read)?;
            let digest: [u8; 32] = Sha256::digest(&wasm).into();
            let seen = known.map(|_| (identity, opened));
            (Some(wasm), digest, seen)
        }
    };
    let provenance = trust.check(file, name, wasm.as_deref(), &component_digest)?;
    if let Some(signer) = &provenance.signer {
        tracing::info!(plugin = name, signer, "signature verified");
    }
    let manifest_file = manifest_path(file);
    let section = file.file_stem().and_then(|s| s.to_str()).and_then(|name| {
        sections
            .get(name)
            .map(|(config, text)| (name, config, text))
    });
    let policy = match section {
        Some((name, config, text)) => {
            if manifest_file.try_exists().unwrap_or(false) {
                tracing::warn!(
                    manifest = %manifest_file.display(),
                    config = %config.display(),
                    "ignored the manifest beside plugin `{name}`: its [plugin.{name}] section of the configuration file governs it"
                );
            }
            Some(PolicyText::Section(config, name.to_owned(), text))
        }
        None => match crate::files::read_to_string(&manifest_file) {
            Ok(text) => Some(PolicyText::Manifest(manifest_file, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(FileError::ReadManifest {
                    file: manifest_file,
                    source,
                });
            }
        },
    };
    if trust.is_managed(file)
        && let Some(PolicyText::Manifest(_, text)) = &policy
    {
        relinked(text)?;
    }
    let mut hasher = Sha256::new();
    hasher.update(component_digest);
    match &policy {
        Some(PolicyText::Manifest(path, text)) | Some(PolicyText::Section(path, _, text)) => {
            hasher.update(path.as_os_str().as_encoded_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
        }
        None => {}
    }
    let grants = sections.grants().of(name).to_vec();
    for grant in &grants {
        hasher.update([1]);
        hasher.update(grant.to_string().as_bytes());
    }
    Ok(PluginSource {
        file: file.to_owned(),
        wasm,
        seen,
        policy,
        grants,
        component_digest,
        digest: hasher.finalize().into(),
        provenance,
    })
}

/// `Ok` unless a folder the managed manifest `text` grants (`[[dirs]] host`, written as the
/// folder's own path when the user approved it) now resolves elsewhere: the policy resolves
/// links, so a folder replaced by a link since would grant where the link leads.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a file read, moved once to the loader"
)]
fn relinked(text: &str) -> Result<(), FileError> {
    let Ok(table) = text.parse::<toml::Table>() else {
        // Left to the policy, which names the line.
        return Ok(());
    };
    let folders = table
        .get("dirs")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|dir| dir.get("host").and_then(toml::Value::as_str));
    for folder in folders.map(Path::new) {
        if let Ok(real) = std::fs::canonicalize(folder)
            && real != folder
        {
            return Err(FileError::Relinked {
                folder: folder.to_owned(),
                real,
            });
        }
    }
    Ok(())
}

/// Compile (on a blocking thread), link, and list a plugin from its files. `limits` are the
/// defaults its manifest may override.
pub async fn load_source(
    runtime: &Runtime,
    source: PluginSource,
    limits: Limits,
) -> Result<LoadedPlugin, FileError> {
    list_plugin(compile_source(runtime, source, limits).await?).await
}

/// A plugin compiled and linked, not yet listed.
pub struct Compiled {
    code: PluginCode,
    file: PathBuf,
    digest: [u8; 32],
    provenance: Provenance,
    skills: std::sync::Arc<crate::skills::Skills>,
}

/// Read a compiled plugin's lists (in a fresh instance, under its call limits).
async fn list_plugin(compiled: Compiled) -> Result<LoadedPlugin, FileError> {
    let Compiled {
        code,
        file,
        digest,
        provenance,
        skills,
    } = compiled;
    let lists = code.read_lists().await.map_err(LoadError::List)?;
    let mut plugin = LoadedPlugin::new(code, file, lists, digest);
    plugin.provenance = provenance;
    plugin.skills = skills;
    Ok(plugin)
}

/// The policy a plugin's files give it: its section of the configuration file, its manifest,
/// or none (no capabilities, `limits`).
pub fn policy_of(source: &PluginSource, limits: Limits) -> Result<Policy, PolicyError> {
    let grants = &source.grants;
    Ok(match &source.policy {
        Some(PolicyText::Manifest(path, text)) => {
            parse_manifest_granting(path, text, limits, grants)?
        }
        Some(PolicyText::Section(config, name, text)) => {
            parse_section_granting(config, name, text, limits, grants).map_err(|e| {
                match std::fs::read_to_string(config) {
                    Ok(file_text) => e.in_file(&file_text),
                    Err(_) => e,
                }
            })?
        }
        // No manifest: the command line's grants alone, as an empty manifest with them.
        None if !grants.is_empty() => {
            parse_manifest_granting(&manifest_path(&source.file), "", limits, grants)?
        }
        None => Policy::deny_all(limits),
    })
}

/// The compiled component of `plugin`, from `file`, whose SHA-256 is `digest`, and its
/// skills: from the cache, or compiled from its bytes `wasm` (read now if it was known by
/// sight and its compiled form is gone). A file read that loads with no skills is recorded as
/// known (`seen`). Blocks: call it from a blocking thread.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a plugin load, moved once to the loader"
)]
fn compile_component(
    compiler: &Runtime,
    plugin: &str,
    file: &Path,
    wasm: Option<Vec<u8>>,
    digest: [u8; 32],
    seen: Option<(Identity, std::time::SystemTime)>,
) -> Result<(wasmtime::component::Component, Arc<crate::skills::Skills>), FileError> {
    let (wasm, component) = match wasm {
        Some(wasm) => {
            let component = compiler.compile(&wasm, &digest)?;
            (wasm, component)
        }
        None => match compiler.cached(&digest) {
            Some(component) => return Ok((component, Arc::default())),
            // Known by sight, but its compiled form is gone: read it after all.
            None => {
                let wasm = crate::files::read(file).map_err(FileError::Read)?;
                if <[u8; 32]>::from(Sha256::digest(&wasm)) != digest {
                    return Err(FileError::Changed);
                }
                let component = compiler.compile_new(&wasm, &digest)?;
                (wasm, component)
            }
        },
    };
    // Read once the engine has accepted the component, so a malformed file is its error.
    let skills = crate::skills::Skills::from_component(plugin, &wasm);
    if let Some((identity, opened)) = seen
        && let Some(known) = super::known_files::current()
        && skills.is_empty()
    {
        known.record(identity, opened, digest);
    }
    Ok((component, Arc::new(skills)))
}

/// Compile (on a blocking thread) and link a plugin from its files.
#[expect(
    clippy::result_large_err,
    reason = "at most one error a plugin load, moved once to the loader"
)]
async fn compile_source(
    runtime: &Runtime,
    source: PluginSource,
    limits: Limits,
) -> Result<Compiled, FileError> {
    let policy = policy_of(&source, limits)?;
    let file = source.file;
    let name: PluginName = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or(FileError::Name)?
        .into();
    let compiler = runtime.clone();
    let (wasm, component_digest, seen) = (source.wasm, source.component_digest, source.seen);
    let plugin = name.to_string();
    let read_from = file.clone();
    let (component, skills) = COMPILING
        .run(move || {
            compile_component(&compiler, &plugin, &read_from, wasm, component_digest, seen)
        })
        .await??;
    let code = PluginCode::prepare(runtime, name, &component, &component_digest, policy)?;
    Ok(Compiled {
        code,
        file,
        digest: source.digest,
        provenance: source.provenance,
        skills,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plugin's reading starts on a blocking thread at once, without the calling task
    /// yielding: start-up reads the plugins while this same task makes the engine. Spawned
    /// as a task instead, the reading would wait for this thread to be free (here, forever:
    /// the runtime has this one thread and the test never yields to it).
    #[test]
    fn a_plugin_is_read_while_the_task_that_asked_is_busy() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("busy.wasm");
        std::fs::write(&file, b"not a component").expect("write the plugin");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _inside = runtime.enter();
        let reading = start_reading(&file, &Arc::new(Sections::default()), &Trust::default());
        let began = std::time::Instant::now();
        while !reading.is_finished() && began.elapsed() < Duration::from_secs(30) {
            // Busy elsewhere: sleeping, never yielding to the runtime.
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            reading.is_finished(),
            "the plugin was not read while the task that asked for it was busy"
        );
        let source = runtime
            .block_on(reading)
            .expect("the reading ran to its end")
            .expect("the file was read");
        assert_eq!(source.wasm.as_deref(), Some(&b"not a component"[..]));
    }

    /// Several directories: a name is the first one's; a later plugin of the same name is
    /// skipped, named with the file that has the name.
    #[test]
    fn the_first_directory_claims_a_name() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for (dir, name) in [(&first, "a"), (&first, "b"), (&second, "b"), (&second, "c")] {
            std::fs::write(dir.path().join(format!("{name}.wasm")), b"x").unwrap();
        }
        let dirs = [first.path().to_owned(), second.path().to_owned()];
        let (files, problems) = list_directories(&dirs).unwrap();
        assert_eq!(
            files,
            [
                first.path().join("a.wasm"),
                first.path().join("b.wasm"),
                second.path().join("c.wasm")
            ]
        );
        assert_eq!(
            problems,
            [shadowed(
                "b",
                &second.path().join("b.wasm"),
                &first.path().join("b.wasm")
            )]
        );
        let (files, _) = list_directories(&[dirs[1].clone(), dirs[0].clone()]).unwrap();
        assert!(files.contains(&second.path().join("b.wasm")), "{files:?}");
    }

    /// A file known by sight, with the digest its line gives.
    fn known_file(cache: &Path, plugins: &Path) -> (PathBuf, KnownFiles) {
        let file = plugins.join("known.wasm");
        std::fs::write(&file, b"not a component").expect("write the plugin");
        let known = KnownFiles::open(cache);
        let identity = Identity::of_path(&file).expect("stat the plugin");
        let later = std::time::SystemTime::now() + 2 * super::super::known_files::SETTLED;
        // Not the digest of its bytes: what the file is known to hold is taken as it is.
        known.record(identity, later, [7; 32]);
        (file, known)
    }

    #[test]
    fn a_file_known_by_sight_is_neither_read_nor_hashed() {
        let (cache, plugins) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (file, known) = known_file(cache.path(), plugins.path());
        let sections = Sections::default();
        let source = read_source_with(&file, &sections, &Trust::default(), Some(&known))
            .expect("the file is known");
        assert_eq!((source.wasm, source.component_digest), (None, [7; 32]));
        assert!(source.seen.is_none(), "nothing new to record");
        let source =
            read_source_with(&file, &sections, &Trust::default(), None).expect("the file is read");
        assert!(source.wasm.is_some() && source.component_digest != [7; 32]);
        assert!(source.seen.is_none(), "no known files are kept");
    }

    #[test]
    fn a_known_file_whose_compiled_form_is_gone_is_read_and_must_match() {
        let (cache, plugins) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (file, known) = known_file(cache.path(), plugins.path());
        let source = read_source_with(&file, &Sections::default(), &Trust::default(), Some(&known))
            .expect("the file is known");
        let engine = Runtime::new(crate::engine::RuntimeConfig {
            cache_dir: Some(cache.path().to_owned()),
            state: crate::kv::StateConfig::Unset,
            ..crate::engine::RuntimeConfig::default()
        })
        .expect("an engine");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let error = runtime
            .block_on(compile_source(&engine, source, Limits::default()))
            .err()
            .expect("its bytes are not the component it was known as");
        assert!(matches!(error, FileError::Changed), "{error}");
    }
}
