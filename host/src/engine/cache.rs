//! The on-disk cache of compiled components: compiling a plugin takes tens to hundreds of
//! milliseconds, loading its compiled form a fraction of one.
//!
//! An entry is named by the SHA-256 of the component's bytes and a hash of everything that
//! shapes compiled code (the engine's compatibility hash and wasmtime's version), so a changed
//! plugin or a different engine configuration never finds a stale entry. Entries are written
//! to a temporary name and renamed into place, so a reader never sees half an entry, and are
//! never changed in place afterwards. Each entry is wasmtime's compiled artifact followed by a
//! CRC-32 of it and a magic string, checked before it is loaded (wasmtime then checks the
//! artifact's header against the engine): a damaged or foreign file is discarded and rebuilt,
//! never trusted blindly. A checksum, not a cryptographic hash: a digest stored in the entry
//! itself could not stop someone able to write the cache anyway, and the CRC costs a tenth as
//! much at start-up. The cache directory must be writable only by mcpbox's user (the default,
//! `~/.cache/mcpbox`, is). Every failure of the cache only costs a compilation.
//!
//! A hit is mapped, not read: the checksum is taken over a mapping of the entry, and wasmtime
//! maps the file itself (`Component::deserialize_file`), code and memory image alike, so loading
//! neither allocates nor copies the artifact, and instances map their initial memory from the
//! file's pages rather than from a copy made for each plugin. (An entry removed while mapped,
//! by the size limit or by hand, stays readable until its component is dropped.)
//!
//! The cache is bounded: after each write, the least recently used entries (by modification
//! time, which a hit refreshes when it is over an hour old) are removed until the cache holds
//! at most its size limit (`--cache-max-mib`, 1 GiB by default); the entry just written always
//! stays. Entries of other engine configurations or mcpbox versions are never hit again, so
//! they age out the same way. Temporary files an interrupted write left behind are removed
//! after an hour.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept, for one engine configuration.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
    max_bytes: u64,
}

/// The default size limit: 1 GiB.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;

/// The bytes an entry ends with, after the CRC-32 of the artifact before it.
const MAGIC: &[u8; 8] = b"mcpbox3\n";

/// A hit refreshes its entry's modification time (the eviction order) if it is older than this.
const RECENT_ENOUGH: std::time::Duration = std::time::Duration::from_secs(3600);

/// The checksum and the magic string, after the artifact.
const TRAILER: usize = 4 + MAGIC.len();

impl ComponentCache {
    /// A cache in `dir` (created if needed) for components compiled by `engine`, holding at
    /// most `max_bytes`.
    pub fn new(dir: PathBuf, engine: &Engine, max_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        Ok(Self {
            dir,
            engine_key,
            max_bytes,
        })
    }

    /// The default location: `$XDG_CACHE_HOME/mcpbox`, else `~/.cache/mcpbox`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
        Some(base.join("mcpbox"))
    }

    fn entry(&self, component: &[u8; 32]) -> PathBuf {
        let digest = hex::encode(component);
        // `m3`: the layout of the entry (artifact, checksum, magic), so that builds with
        // another layout sharing the directory never read, and discard, this one's entries.
        self.dir.join(format!(
            "{digest}-{}-{}-m3.cwasm",
            self.engine_key,
            env!("CARGO_PKG_VERSION")
        ))
    }

    /// The compiled form of the component whose SHA-256 is `component`, if the cache holds a
    /// sound one.
    pub fn load(&self, engine: &Engine, component: &[u8; 32]) -> Option<Component> {
        let path = self.entry(component);
        let file = std::fs::File::open(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !matches!(verified(&file, meta.len()), Ok(true)) {
            tracing::warn!(entry = %path.display(), "discarded a damaged compiled-component cache entry");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        match deserialize(engine, &path) {
            Ok(component) => {
                // A hit makes the entry the most recently used; to the hour is enough to choose
                // what to evict, and spares each start a write per plugin.
                let now = std::time::SystemTime::now();
                let touched = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok());
                if touched.is_none_or(|age| age > RECENT_ENOUGH) {
                    let _ = std::fs::File::options()
                        .append(true)
                        .open(&path)
                        .and_then(|file| file.set_modified(now));
                }
                Some(component)
            }
            Err(e) => {
                tracing::warn!(entry = %path.display(), "discarded an unusable compiled-component cache entry: {e:#}");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Keep `compiled`, the compiled form of the component whose SHA-256 is `component`.
    /// Failures are logged and otherwise ignored.
    pub fn store(&self, component: &[u8; 32], compiled: &Component) {
        let path = self.entry(component);
        let result = compiled
            .serialize()
            .map_err(|e| format!("{e:#}"))
            .and_then(|body| {
                let checksum = crc32fast::hash(&body).to_le_bytes();
                let mut bytes = body;
                bytes.extend_from_slice(&checksum);
                bytes.extend_from_slice(MAGIC);
                let temporary = path.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&temporary, &bytes)
                    .and_then(|()| std::fs::rename(&temporary, &path))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&temporary);
                        e.to_string()
                    })
            });
        match result {
            Ok(()) => prune(&self.dir, self.max_bytes, &path),
            Err(e) => {
                tracing::warn!(entry = %path.display(), "could not write a compiled-component cache entry: {e}");
            }
        }
    }
}

/// Remove the least recently used entries of `dir` until it holds at most `max_bytes` (never
/// `keep`), and temporary files older than an hour.
fn prune(dir: &Path, max_bytes: u64, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let mut cached = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        let modified = meta.modified().unwrap_or(now);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".cwasm") {
            cached.push((modified, meta.len(), path));
        } else if name.contains(".tmp")
            && now
                .duration_since(modified)
                .is_ok_and(|age| age > std::time::Duration::from_secs(3600))
        {
            let _ = std::fs::remove_file(&path);
        }
    }
    let mut total: u64 = cached.iter().map(|(_, len, _)| len).sum();
    if total <= max_bytes {
        return;
    }
    cached.sort();
    for (_, len, path) in cached {
        if total <= max_bytes {
            break;
        }
        if path == keep {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
            tracing::debug!(entry = %path.display(), "evicted a compiled-component cache entry (the cache is over its size limit)");
        }
    }
}

/// Whether an entry ends with the checksum of what precedes it and the magic string. The
/// entry is mapped for the check, its pages taken from the page cache in one call, not read
/// through a buffer: at start-up with fifty plugins, copying 31 MB of entries into a buffer was
/// the largest single cost (BENCHMARKS.md, start-up).
#[expect(
    unsafe_code,
    reason = "mapping a file is unsafe if it changes while mapped; see SAFETY"
)]
fn verified(entry: &std::fs::File, length: u64) -> std::io::Result<bool> {
    let Some(artifact) = length
        .checked_sub(TRAILER as u64)
        .and_then(|n| usize::try_from(n).ok())
    else {
        return Ok(false);
    };
    // SAFETY: cache entries are written under a temporary name and renamed into place, never
    // changed in place (see the module's doc); the mapping is private and read-only, and lives
    // only for this check.
    let mapped = unsafe { memmap2::MmapOptions::new().populate().map(entry)? };
    let Some((body, trailer)) = mapped
        .get(..artifact + TRAILER)
        .map(|b| b.split_at(artifact))
    else {
        return Ok(false);
    };
    Ok(trailer[..4] == crc32fast::hash(body).to_le_bytes() && trailer[4..] == MAGIC[..])
}

/// Load a compiled component.
#[expect(
    unsafe_code,
    reason = "loading compiled code is unsafe by nature; see SAFETY"
)]
fn deserialize(engine: &Engine, entry: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the entry is an artifact this program's own `Component::serialize` produced,
    // with its trailer (it sits in the cache under a name derived from the component and this
    // engine's configuration, and the checksum written with it matched), so it is a
    // well-formed compiled component; the trailer lies outside every section wasmtime reads,
    // and wasmtime itself refuses an artifact built for another configuration. Entries are
    // written under a temporary name and renamed into place, never modified in place, so the
    // mapping wasmtime keeps stays the file that was checked.
    unsafe { Component::deserialize_file(engine, entry) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entries_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let at = |secs| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        for (name, secs) in [
            ("a.cwasm", 100),
            ("b.cwasm", 300),
            ("c.cwasm", 200),
            ("d.cwasm", 50),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(at(secs)).unwrap();
        }
        std::fs::write(dir.path().join("x.cwasm.tmp1"), b"left over").unwrap();
        let old = std::fs::File::options()
            .append(true)
            .open(dir.path().join("x.cwasm.tmp1"))
            .unwrap();
        old.set_modified(at(1)).unwrap();
        // Keep `d` (just written, though its time says otherwise); 250 bytes allowed.
        prune(dir.path(), 250, &dir.path().join("d.cwasm"));
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["b.cwasm", "d.cwasm"]);
    }

    #[test]
    fn entries_must_match_their_checksum() {
        let artifact = b"compiled".to_vec();
        let mut entry = artifact.clone();
        entry.extend_from_slice(&crc32fast::hash(&artifact).to_le_bytes());
        entry.extend_from_slice(MAGIC);
        let dir = tempfile::tempdir().unwrap();
        let check = |bytes: &[u8]| {
            let path = dir.path().join("entry.cwasm");
            std::fs::write(&path, bytes).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            verified(&file, file.metadata().unwrap().len()).unwrap()
        };
        assert!(check(&entry));
        let mut damaged = entry.clone();
        damaged[0] ^= 1;
        assert!(!check(&damaged));
        let mut foreign = entry.clone();
        let last = foreign.len() - 1;
        foreign[last] ^= 1;
        assert!(!check(&foreign));
        assert!(!check(&entry[..entry.len() - 1]));
        assert!(!check(b"short"));
        assert!(!check(b""));
    }

    /// An entry written by `store` is loaded again, mapped, with its trailer after the
    /// artifact; one damaged on disk is discarded, not loaded.
    #[test]
    fn a_stored_component_loads_from_its_mapped_entry() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let cache = ComponentCache::new(dir.path().to_owned(), &engine, 1 << 30).unwrap();
        // The empty component, in the binary format (the text format is not linked).
        let component = Component::new(&engine, b"\0asm\x0d\x00\x01\x00").unwrap();
        let key = [7u8; 32];
        assert!(cache.load(&engine, &key).is_none());
        cache.store(&key, &component);
        let loaded = cache
            .load(&engine, &key)
            .expect("the entry just stored loads");
        assert_eq!(
            loaded.component_type().imports(&engine).count(),
            component.component_type().imports(&engine).count()
        );
        let path = cache.entry(&key);
        // A hit refreshes an entry's place in the eviction order once it is over an hour old.
        let modified = |path: &Path| std::fs::metadata(path).unwrap().modified().unwrap();
        let hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        let set = |at| {
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(at).unwrap();
        };
        set(hours_ago);
        assert!(cache.load(&engine, &key).is_some());
        let refreshed = modified(&path);
        assert!(
            refreshed > hours_ago + RECENT_ENOUGH,
            "an old entry is refreshed"
        );
        let minutes_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
        set(minutes_ago);
        assert!(cache.load(&engine, &key).is_some());
        assert_eq!(
            modified(&path),
            minutes_ago,
            "a recent one is left as it is"
        );
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.load(&engine, &key).is_none());
        assert!(!path.exists(), "a damaged entry is removed");
    }
}
