//! Plugin files known by sight: the SHA-256 of each plugin component read in this run or an
//! earlier one, by its file's identity (`files::Identity`: device, inode, size, modification
//! and change times), kept in a file of the compiled-component cache's directory. A start or
//! reload that finds a component's identity here neither reads nor hashes it: the digest names
//! its compiled form in the cache, and the file is read only if that is gone (BENCHMARKS.md,
//! "Start-up with fifty plugins, their files known by sight"). Git's index spares `git status`
//! reading unchanged files the same way.
//!
//! What is remembered: a component that loaded, read whole, whose identity had settled (both
//! its times two seconds or more old, see `files::Identity::settled`) when it was opened, and
//! that carries no skills (those are read from its bytes at every load). A component that a
//! signature policy requires to be signed is always read, since a detached signature is of its
//! bytes. A file written in place, even to its old size and modification time, changes its
//! change time, which no program can set back, so its identity is no longer known.
//!
//! The file is trusted as the cache's compiled code beside it is: a forged line can make a
//! plugin file stand for another component whose compiled form is in the cache, which whoever
//! can write the cache can already do by writing the compiled form.
//!
//! One line per file: `DEVICE INODE SIZE MTIME CTIME DIGEST` (times as `SECONDS.NANOSECONDS`,
//! the digest as 64 hex digits). Lines that are not are ignored, and appending is the only
//! write, so replicas sharing the directory only add lines. The file holds at most
//! [`MAX_FILES`] lines: one found longer is started over (a replaced plugin leaves its old
//! line behind, so a long-lived cache fills slowly).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use crate::files::Identity;

/// The file, in the cache's directory.
const FILE_NAME: &str = "plugins-known";

/// How many lines the file holds before it is started over.
pub const MAX_FILES: usize = 10_000;

/// How long the file may be: [`MAX_FILES`] of the longest lines.
const MAX_BYTES: u64 = MAX_FILES as u64 * 200;

/// How old both times of a file must be for its identity to be remembered: more than the
/// coarsest clock a file system keeps times by (FAT's two seconds).
pub const SETTLED: Duration = Duration::from_secs(2);

/// Where this process keeps its known files, if [`keep_in`] was called.
static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The known files of this process, read when first asked for.
static KNOWN: OnceLock<KnownFiles> = OnceLock::new();

/// Remember plugin files in `dir` (the compiled-component cache's directory) for this process:
/// what is there is read when the first plugin is (on a thread reading plugins, not on the
/// start's own way), and what is read from now on is recorded. Without it, every plugin file
/// is read and hashed at every load.
pub fn keep_in(dir: &Path) {
    let _ = DIR.set(dir.to_owned());
}

/// This process's known files, if it keeps any.
pub fn current() -> Option<&'static KnownFiles> {
    let dir = DIR.get()?;
    Some(KNOWN.get_or_init(|| {
        let known = KnownFiles::open(dir);
        tracing::debug!(
            files = known.len(),
            file = %known.path.display(),
            "plugin files known by sight"
        );
        known
    }))
}

/// Components' digests by their files' identities, and the file they are kept in.
pub struct KnownFiles {
    path: PathBuf,
    known: Mutex<HashMap<Identity, [u8; 32]>>,
}

impl KnownFiles {
    /// The files known in `dir`: none if the file is missing or unreadable; none, and the file
    /// removed, if it holds more than [`MAX_FILES`] lines.
    pub fn open(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let mut known = HashMap::new();
        let mut text = String::new();
        let read = std::fs::File::open(&path).and_then(|file| {
            std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_BYTES + 1), &mut text)
        });
        match read {
            Ok(_) if text.len() as u64 > MAX_BYTES || text.lines().count() > MAX_FILES => {
                tracing::debug!(file = %path.display(), "plugin files known by sight: over {MAX_FILES} lines, started over");
                let _ = std::fs::remove_file(&path);
            }
            Ok(_) => known.extend(text.lines().filter_map(parse)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::debug!(file = %path.display(), "plugin files known by sight not read: {e}");
            }
        }
        Self {
            path,
            known: Mutex::new(known),
        }
    }

    /// How many files are known.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// The digest of the component in the file at `path`, if its identity is known.
    pub fn digest_of(&self, path: &Path) -> Option<[u8; 32]> {
        let identity = Identity::of_path(path).ok()?;
        self.lock().get(&identity).copied()
    }

    /// Remember that the file whose identity was `identity` when it was opened, at `opened`,
    /// held the component `digest`: one line appended to the file, unless its identity had not
    /// settled then (a failure to write only means it is read again next time).
    pub fn record(&self, identity: Identity, opened: SystemTime, digest: [u8; 32]) {
        if !identity.settled(opened, SETTLED) {
            return;
        }
        {
            let mut known = self.lock();
            if known.len() >= MAX_FILES || known.get(&identity) == Some(&digest) {
                return;
            }
            known.insert(identity, digest);
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line(&identity, &digest).as_bytes()));
        if let Err(e) = written {
            tracing::debug!(file = %self.path.display(), "plugin file not recorded as known: {e}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Identity, [u8; 32]>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The line that records `identity` as holding `digest`.
fn line(identity: &Identity, digest: &[u8; 32]) -> String {
    let Identity {
        device,
        inode,
        size,
        modified: (m, mn),
        changed: (c, cn),
    } = identity;
    format!(
        "{device} {inode} {size} {m}.{mn:09} {c}.{cn:09} {}\n",
        hex::encode(digest)
    )
}

/// A line's identity and digest, if it is one.
fn parse(line: &str) -> Option<(Identity, [u8; 32])> {
    let time = |field: &str| {
        let (seconds, nanoseconds) = field.split_once('.')?;
        Some((seconds.parse().ok()?, nanoseconds.parse().ok()?))
    };
    let mut fields = line.split(' ');
    let identity = Identity {
        device: fields.next()?.parse().ok()?,
        inode: fields.next()?.parse().ok()?,
        size: fields.next()?.parse().ok()?,
        modified: time(fields.next()?)?,
        changed: time(fields.next()?)?,
    };
    let mut digest = [0u8; 32];
    hex::decode_to_slice(fields.next()?, &mut digest).ok()?;
    fields.next().is_none().then_some((identity, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file written long enough ago to be remembered, and its identity.
    fn settled_file(dir: &Path, name: &str, bytes: &[u8]) -> (PathBuf, Identity) {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        (path.clone(), Identity::of_path(&path).unwrap())
    }

    fn later() -> SystemTime {
        SystemTime::now() + 2 * SETTLED
    }

    #[test]
    fn known_files_are_kept_across_opens_and_bad_lines_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (a, identity) = settled_file(dir.path(), "a.wasm", b"component");
        let known = KnownFiles::open(dir.path());
        assert_eq!(known.digest_of(&a), None);
        known.record(identity, later(), [7; 32]);
        known.record(identity, later(), [7; 32]);
        assert_eq!(known.digest_of(&a), Some([7; 32]));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE_NAME))
            .unwrap();
        file.write_all(b"not a line\n1 2 3 4.5 6.7 abcd\n\n")
            .unwrap();
        let again = KnownFiles::open(dir.path());
        assert_eq!(again.len(), 1);
        assert_eq!(again.digest_of(&a), Some([7; 32]));
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text.lines().count(), 4, "one line per new file: {text}");
        assert_eq!(
            parse(text.lines().next().unwrap()),
            Some((identity, [7; 32]))
        );
    }

    #[test]
    fn a_file_written_since_is_not_known() {
        let dir = tempfile::tempdir().unwrap();
        let (a, identity) = settled_file(dir.path(), "a.wasm", b"component");
        let known = KnownFiles::open(dir.path());
        known.record(identity, later(), [7; 32]);
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&a, b"componenT").unwrap();
        assert_eq!(known.digest_of(&a), None, "same size, new content");
        assert_eq!(KnownFiles::open(dir.path()).digest_of(&a), None);
        // Replaced by another file renamed into place.
        let (b, identity) = settled_file(dir.path(), "b.wasm", b"component");
        known.record(identity, later(), [8; 32]);
        let (c, _) = settled_file(dir.path(), "c.tmp", b"component");
        std::fs::rename(&c, &b).unwrap();
        assert_eq!(known.digest_of(&b), None);
    }

    #[test]
    fn a_file_too_recent_is_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let (a, identity) = settled_file(dir.path(), "a.wasm", b"component");
        let known = KnownFiles::open(dir.path());
        known.record(identity, SystemTime::now(), [7; 32]);
        assert_eq!(known.digest_of(&a), None);
        assert!(!dir.path().join(FILE_NAME).exists());
    }

    #[test]
    fn a_file_over_its_limit_is_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let (a, identity) = settled_file(dir.path(), "a.wasm", b"component");
        let mut text = line(&identity, &[7; 32]);
        text.push_str(&"\n".repeat(MAX_FILES));
        std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
        let known = KnownFiles::open(dir.path());
        assert_eq!(known.len(), 0);
        assert_eq!(known.digest_of(&a), None);
        assert!(!dir.path().join(FILE_NAME).exists());
        known.record(identity, later(), [7; 32]);
        assert_eq!(KnownFiles::open(dir.path()).digest_of(&a), Some([7; 32]));
    }
}
