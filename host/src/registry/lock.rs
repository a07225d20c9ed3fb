//! The lock file (`mcpbox.lock`, beside the plugins it describes): for each plugin `mcpbox
//! pull` installed, the reference it came from, the manifest digest that reference resolved to,
//! the component's digest, the manifest itself, and the signature checked when it was pulled.
//!
//! `pull --locked` refuses a tag whose digest is no longer the recorded one; the host refuses a
//! component whose digest is not the recorded one (a file swapped after it was pulled). The
//! file is written whole and atomically (a temporary file renamed into place).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name in a plugin directory.
pub const LOCK_FILE: &str = "mcpbox.lock";

/// The format version this host writes and reads.
const VERSION: u32 = 1;

/// Why the lock file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Reading or writing failed.
    #[error("lock file {}: {error}", file.display())]
    Io {
        /// The lock file.
        file: PathBuf,
        /// Why (said in the text, not chained).
        error: std::io::Error,
    },
    /// The file is not a lock file this host understands.
    #[error(
        "lock file {}: {message}; every plugin in its directory is refused until it is fixed (pull them again, or remove it)",
        file.display()
    )]
    Invalid {
        /// The lock file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A lock file's content.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// The format version.
    pub version: u32,
    /// By plugin name.
    #[serde(default, rename = "plugin")]
    pub plugins: BTreeMap<String, LockEntry>,
}

/// What was pulled for one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The reference given to `pull` (a tag or a digest).
    pub reference: String,
    /// The manifest's digest (`sha256:…`) the reference resolved to.
    pub digest: String,
    /// The component's digest: what `NAME.wasm` must hash to.
    pub component: String,
    /// The manifest (base64 of its exact bytes), binding `digest` to `component`.
    pub manifest: String,
    /// The signature checked when it was pulled, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<Signed>,
}

/// A signature checked at pull time, kept so it can be checked again offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signed {
    /// The name of the key that verified it, in the policy then.
    pub signer: String,
    /// That key's fingerprint (`sha256:` of its DER form).
    pub key: String,
    /// The cosign simple-signing payload (base64).
    pub payload: String,
    /// The signature of the payload (base64).
    pub signature: String,
}

const HEADER: &str = "# Written by `mcpbox pull`: what each plugin here was pulled from, and the digests mcpbox\n# checks before loading it. Commit it beside your configuration; do not edit it by hand.\n\n";

impl LockFile {
    /// Read the lock file at `file`; `None` if there is none.
    pub fn read(file: &Path) -> Result<Option<Self>, LockError> {
        let text = match crate::files::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(LockError::Io {
                    file: file.to_owned(),
                    error,
                });
            }
        };
        let lock: Self = toml::from_str(&text).map_err(|e| LockError::Invalid {
            file: file.to_owned(),
            message: e.message().trim().to_owned(),
        })?;
        if lock.version != VERSION {
            return Err(LockError::Invalid {
                file: file.to_owned(),
                message: format!(
                    "version {} is not one this mcpbox reads (it reads {VERSION})",
                    lock.version
                ),
            });
        }
        Ok(Some(lock))
    }

    /// An empty lock file.
    pub fn new() -> Self {
        Self {
            version: VERSION,
            plugins: BTreeMap::new(),
        }
    }

    /// Write it to `file` atomically: a temporary file beside it, synced, renamed into place.
    pub fn write(&self, file: &Path) -> Result<(), LockError> {
        let error = |error| LockError::Io {
            file: file.to_owned(),
            error,
        };
        let text = toml::to_string(self).map_err(|e| LockError::Invalid {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        write_atomically(file, format!("{HEADER}{text}").as_bytes()).map_err(error)
    }
}

/// Held while `pull` updates a plugin directory: one writer at a time, so concurrent pulls keep
/// each other's lock entries. An advisory lock on a hidden file beside the lock file (hidden
/// files are ignored by the watcher), released when dropped or when the process ends.
pub struct WriteGuard(#[expect(dead_code, reason = "held for its lock")] std::fs::File);

impl WriteGuard {
    /// Wait for and take the directory's write lock.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join(".mcpbox.lock.guard");
        let error = |error| LockError::Io {
            file: path.clone(),
            error,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(error)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| error(e.into()))?;
        Ok(Self(file))
    }
}

/// Write `bytes` to `file` atomically: a hidden temporary file in the same directory (so the
/// watcher ignores it), synced, then renamed over `file`.
pub fn write_atomically(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temporary = tempfile::Builder::new()
        .prefix(".mcpbox-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temporary.write_all(bytes)?;
    temporary.as_file().sync_all()?;
    temporary.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_does_not_know() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(LOCK_FILE);
        assert!(LockFile::read(&file).unwrap().is_none());
        let mut lock = LockFile::new();
        lock.plugins.insert(
            "weather".to_owned(),
            LockEntry {
                reference: "ghcr.io/acme/weather:1.2".to_owned(),
                digest: "sha256:aa".to_owned(),
                component: "sha256:bb".to_owned(),
                manifest: "e30=".to_owned(),
                signed: Some(Signed {
                    signer: "acme".to_owned(),
                    key: "sha256:cc".to_owned(),
                    payload: "e30=".to_owned(),
                    signature: "MEUC".to_owned(),
                }),
            },
        );
        lock.write(&file).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# Written by `mcpbox pull`"), "{text}");
        let read = LockFile::read(&file).unwrap().unwrap();
        assert_eq!(read.plugins, lock.plugins);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        for (bad, expected) in [
            ("version = 2\n", "version 2 is not one this mcpbox reads"),
            (
                "version = 1\n[plugin.x]\nreference = \"r\"\n",
                "missing field",
            ),
            ("version = 1\nextra = true\n", "unknown field"),
            ("not toml", "every plugin in its directory is refused"),
        ] {
            std::fs::write(&file, bad).unwrap();
            let error = LockFile::read(&file).unwrap_err().to_string();
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }
}
