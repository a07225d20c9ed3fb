//! Schemas proven usable: the digests of tool schemas that compiled (and so passed their
//! meta-schema) in this run or an earlier one, kept in a file of the compiled-component
//! cache's directory, so that a start with unchanged plugins compiles no validator and builds
//! no meta-schema before it serves (BENCHMARKS.md, "Against wasmtime's own floor").
//!
//! A schema proven here is compiled when its tool is first called instead of when its plugin
//! loads. The file is trusted as the cache's compiled code beside it is (more so: a proof
//! cannot make anything run); what a forged or stale proof can do is postpone the refusal of a
//! bad schema from the load to the call, which then fails with the schema's own error. A tool's
//! arguments are never passed on unchecked.
//!
//! One line per proof: 64 hex digits, SHA-256 over [`DIALECT`] and the schema's text. Lines
//! that are not are ignored; the file is read up to [`MAX_FILE_BYTES`] and holds at most
//! [`MAX_PROOFS`] proofs (past that, new schemas are compiled at load, as without a cache).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use sha2::{Digest, Sha256};

/// What a proof was made with: the validator's crate and its rules. A new version of the
/// validator reads none of the old proofs (its digests differ), so each schema is proven again.
const DIALECT: &str = "mcpbox schema proof 1; jsonschema 0.60\n";

/// The file, in the cache's directory.
const FILE_NAME: &str = "schemas-proven";

/// How much of the file is read.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// How many proofs are kept.
pub const MAX_PROOFS: usize = 60_000;

/// The proofs of this process, if [`keep_in`] was called.
static PROOFS: OnceLock<Proofs> = OnceLock::new();

/// Keep proofs in `dir` (the compiled-component cache's directory) for this process: read the
/// ones there, and record new ones. Without it, every schema is compiled when its plugin loads.
pub fn keep_in(dir: &Path) {
    let proofs = Proofs::open(dir);
    tracing::debug!(
        proofs = proofs.len(),
        file = %proofs.path.display(),
        "schemas proven usable before"
    );
    let _ = PROOFS.set(proofs);
}

/// This process's proofs, if it keeps any.
pub fn current() -> Option<&'static Proofs> {
    PROOFS.get()
}

/// The digest a schema's proof is recorded under.
pub fn digest(schema: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(DIALECT.as_bytes());
    hasher.update(schema.as_bytes());
    hasher.finalize().into()
}

/// A set of proofs and the file it is kept in.
pub struct Proofs {
    path: PathBuf,
    known: Mutex<HashSet<[u8; 32]>>,
}

impl Proofs {
    /// The proofs kept in `dir`: none if the file is missing or unreadable.
    pub fn open(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let mut known = HashSet::new();
        if let Ok(file) = std::fs::File::open(&path) {
            let mut text = String::new();
            let read = std::io::Read::read_to_string(
                &mut std::io::Read::take(file, MAX_FILE_BYTES),
                &mut text,
            );
            if let Err(e) = read {
                tracing::debug!(file = %path.display(), "schema proofs not read: {e}");
            }
            for line in text.lines() {
                let mut digest = [0u8; 32];
                if known.len() < MAX_PROOFS && hex::decode_to_slice(line, &mut digest).is_ok() {
                    known.insert(digest);
                }
            }
        }
        Self {
            path,
            known: Mutex::new(known),
        }
    }

    /// How many proofs are known.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the schema with this digest was proven usable.
    pub fn holds(&self, digest: &[u8; 32]) -> bool {
        self.lock().contains(digest)
    }

    /// Record that the schema with this digest compiled: one line appended to the file (a
    /// failure to write only means it is compiled again next time).
    pub fn record(&self, digest: [u8; 32]) {
        {
            let mut known = self.lock();
            if known.len() >= MAX_PROOFS || !known.insert(digest) {
                return;
            }
        }
        let line = format!("{}\n", hex::encode(digest));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            tracing::debug!(file = %self.path.display(), "schema proof not recorded: {e}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_are_kept_across_opens_and_bad_lines_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::open(dir.path());
        assert_eq!(proofs.len(), 0);
        let a = digest(r#"{"type":"object"}"#);
        proofs.record(a);
        proofs.record(a);
        assert!(proofs.holds(&a));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE_NAME))
            .unwrap();
        file.write_all(b"not a digest\nabcd\n").unwrap();
        let again = Proofs::open(dir.path());
        assert_eq!(again.len(), 1);
        assert!(again.holds(&a));
        assert!(!again.holds(&digest(r#"{"type":"string"}"#)));
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text.lines().count(), 3, "one line per new proof: {text}");
    }

    #[test]
    fn the_dialect_names_the_validator_in_the_lock_file() {
        // A new validator must not read the old one's proofs: bump DIALECT with it.
        let lock = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"),
        )
        .unwrap();
        let version = lock
            .split("[[package]]")
            .find(|p| p.contains("\nname = \"jsonschema\"\n"))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap();
        let minor = version.rsplit_once('.').unwrap().0;
        assert!(
            DIALECT.contains(&format!("jsonschema {minor}\n")),
            "jsonschema is {version}; DIALECT says {DIALECT:?}"
        );
    }

    #[test]
    fn a_proof_names_the_exact_text_and_dialect() {
        assert_ne!(
            digest(r#"{"type":"object"}"#),
            digest(r#"{"type": "object"}"#)
        );
        let mut plain = Sha256::new();
        plain.update(br#"{"type":"object"}"#);
        let plain: [u8; 32] = plain.finalize().into();
        assert_ne!(digest(r#"{"type":"object"}"#), plain);
    }
}
