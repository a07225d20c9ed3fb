//! The on-disk cache of compiled components: compiling a plugin takes tens to hundreds of
//! milliseconds, loading its compiled form a fraction of one.
//!
//! An entry is named by the SHA-256 of the component's bytes and a hash of everything that
//! shapes compiled code (the engine's compatibility hash and wasmtime's version), so a changed
//! plugin or a different engine configuration never finds a stale entry. Entries are written
//! to a temporary name and renamed into place, so a reader never sees half an entry. Each
//! entry carries a CRC-32 of its own contents, checked before it is loaded (wasmtime then
//! checks the header against the engine): a damaged or foreign file is discarded and rebuilt,
//! never trusted blindly. A checksum, not a cryptographic hash: a digest stored in the entry
//! itself could not stop someone able to write the cache anyway, and the CRC costs a tenth as
//! much at start-up. The cache directory must be writable only by mcpbox's user (the default,
//! `~/.cache/mcpbox`, is). Every failure of the cache only costs a compilation.
//!
//! The cache is bounded: after each write, the least recently used entries (by modification
//! time, which a hit refreshes) are removed until the cache holds at most its size limit
//! (`--cache-max-mib`, 1 GiB by default); the entry just written always stays. Entries of
//! other engine configurations or mcpbox versions are never hit again, so they age out the
//! same way. Temporary files an interrupted write left behind are removed after an hour.

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

/// The bytes an entry starts with, before the CRC-32 of its body.
const MAGIC: &[u8; 8] = b"mcpbox2\n";

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
        self.dir.join(format!(
            "{digest}-{}-{}.cwasm",
            self.engine_key,
            env!("CARGO_PKG_VERSION")
        ))
    }

    /// The compiled form of the component whose SHA-256 is `component`, if the cache holds a
    /// sound one.
    pub fn load(&self, engine: &Engine, component: &[u8; 32]) -> Option<Component> {
        let path = self.entry(component);
        let bytes = std::fs::read(&path).ok()?;
        let body = match verified_body(&bytes) {
            Some(body) => body,
            None => {
                tracing::warn!(entry = %path.display(), "discarded a damaged compiled-component cache entry");
                let _ = std::fs::remove_file(&path);
                return None;
            }
        };
        match deserialize(engine, body) {
            Ok(component) => {
                // A hit makes the entry the most recently used.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(std::time::SystemTime::now()));
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
                let mut bytes = Vec::with_capacity(MAGIC.len() + 4 + body.len());
                bytes.extend_from_slice(MAGIC);
                bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
                bytes.extend_from_slice(&body);
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

/// The body of an entry whose checksum matches it.
fn verified_body(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (checksum, body) = rest.split_at_checked(4)?;
    (crc32fast::hash(body).to_le_bytes().as_slice() == checksum).then_some(body)
}

/// Load a compiled component.
#[expect(
    unsafe_code,
    reason = "loading compiled code is unsafe by nature; see SAFETY"
)]
fn deserialize(engine: &Engine, body: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `body` is an artifact this program's own `Component::serialize` produced (it
    // sits in the cache under a name derived from the component and this engine's
    // configuration, and the checksum written with it matched), so it is a well-formed
    // compiled component; wasmtime itself refuses one built for another configuration.
    unsafe { Component::deserialize(engine, body) }
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
        let body = b"compiled".to_vec();
        let mut entry = MAGIC.to_vec();
        entry.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        entry.extend_from_slice(&body);
        assert_eq!(verified_body(&entry), Some(body.as_slice()));
        let last = entry.len() - 1;
        entry[last] ^= 1;
        assert_eq!(verified_body(&entry), None);
        assert_eq!(verified_body(b"short"), None);
    }
}
