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

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept, for one engine configuration.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
}

/// The bytes an entry starts with, before the CRC-32 of its body.
const MAGIC: &[u8; 8] = b"mcpbox2\n";

impl ComponentCache {
    /// A cache in `dir` (created if needed) for components compiled by `engine`.
    pub fn new(dir: PathBuf, engine: &Engine) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        Ok(Self { dir, engine_key })
    }

    /// The default location: `$XDG_CACHE_HOME/mcpbox`, else `~/.cache/mcpbox`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
        Some(base.join("mcpbox"))
    }

    fn entry(&self, component: &[u8; 32]) -> PathBuf {
        let digest = hex(component);
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
            Ok(component) => Some(component),
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
        if let Err(e) = result {
            tracing::warn!(entry = %path.display(), "could not write a compiled-component cache entry: {e}");
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
