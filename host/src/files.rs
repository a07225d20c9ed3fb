//! Reading the files of the plugin directory (components, manifests, detached signatures, the
//! lock file): whole, and only if they are regular files. Anyone who can write the directory
//! can put a FIFO under a plugin's name, and opening one for reading blocks until a writer
//! comes; these reads open without blocking and refuse what is not a regular file, so the
//! thread that loads plugins is never held.
//!
//! Uses: nothing.

use std::io::{Error, ErrorKind, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The bytes of `path`, if it is a regular file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
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
    Ok(bytes)
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
}
