//! Reading the files of the plugin directory (components, manifests, detached signatures, the
//! lock file): whole, and only if they are regular files. Anyone who can write the directory
//! can put a FIFO under a plugin's name, and opening one for reading blocks until a writer
//! comes; these reads open without blocking and refuse what is not a regular file, so the
//! thread that loads plugins is never held.
//!
//! It also says which version of a file is there without reading it ([`Identity`]).
//!
//! Uses: nothing.

use std::io::{Error, ErrorKind, Read as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// One version of a file, as `stat` tells it: its device and inode, its size, and its
/// modification and change times to the nanosecond. Writing a file in place changes its
/// change time, which no program can set back (only moving the clock can), and replacing it
/// changes its inode; so a file whose identity is what it was holds what it held, unless it
/// was written again within the clock tick its times were taken in (see [`Identity::settled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The device holding the file.
    pub device: u64,
    /// Its inode.
    pub inode: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time: seconds and nanoseconds since the epoch.
    pub modified: (i64, i64),
    /// Its change time (of its content or its metadata).
    pub changed: (i64, i64),
}

impl Identity {
    /// The identity `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The identity of the file at `path` (following links).
    pub fn of_path(path: &Path) -> std::io::Result<Self> {
        std::fs::metadata(path).map(|meta| Self::of(&meta))
    }

    /// Whether both of its times are at least `margin` before `now`. The kernel takes a file's
    /// times from a clock that advances by ticks of a few milliseconds, so a file written twice
    /// within one tick, to the same size, keeps the times of the first write; an identity taken
    /// from a file that recent may stand for content it no longer holds (git's "racily clean"
    /// entries), and should not be remembered.
    pub fn settled(&self, now: std::time::SystemTime, margin: std::time::Duration) -> bool {
        let Ok(now) = now.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let Some(before) = now.checked_sub(margin) else {
            return false;
        };
        let limit = (
            i64::try_from(before.as_secs()).unwrap_or(i64::MAX),
            i64::from(before.subsec_nanos()),
        );
        self.modified <= limit && self.changed <= limit
    }
}

/// The bytes of `path`, if it is a regular file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    read_with_identity(path).map(|(bytes, _)| bytes)
}

/// The bytes of `path`, if it is a regular file, and the identity it had when it was opened.
pub fn read_with_identity(path: &Path) -> std::io::Result<(Vec<u8>, Identity)> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or socket is not read)",
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok((bytes, Identity::of(&meta)))
}

/// The text of `path`, if it is a regular file of UTF-8.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read(path)?)
        .map_err(|_| Error::new(ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_fifos_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(&file, "text").unwrap();
        assert_eq!(read_to_string(&file).unwrap(), "text");
        let fifo = dir.path().join("b.wasm");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let error = read(&fifo).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        assert_eq!(
            read(&dir.path().join("none")).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert!(read(dir.path()).is_err(), "a directory is not read");
    }

    #[test]
    fn an_identity_changes_with_the_content_even_when_size_and_time_are_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        std::fs::write(&path, b"first").unwrap();
        let (bytes, before) = read_with_identity(&path).unwrap();
        assert_eq!(bytes, b"first");
        assert_eq!(Identity::of_path(&path).unwrap(), before);
        // Rewritten in place, to the same size, its modification time set back.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"other").unwrap();
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        let modified = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(before.modified.0).unwrap(),
                u32::try_from(before.modified.1).unwrap(),
            );
        file.set_modified(modified).unwrap();
        let after = Identity::of_path(&path).unwrap();
        assert_eq!(
            (after.inode, after.size, after.modified),
            (before.inode, before.size, before.modified)
        );
        assert_ne!(after, before, "the change time tells them apart");
    }

    #[test]
    fn only_identities_older_than_the_margin_are_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        std::fs::write(&path, b"new").unwrap();
        let identity = Identity::of_path(&path).unwrap();
        let now = std::time::SystemTime::now();
        let second = std::time::Duration::from_secs(1);
        assert!(!identity.settled(now, second), "written just now");
        assert!(identity.settled(now + 2 * second, second));
        assert!(!identity.settled(std::time::UNIX_EPOCH, second));
    }
}
