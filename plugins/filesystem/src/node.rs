//! What the original, a Node program, shows its clients and this plugin must show the same:
//! POSIX path arithmetic as Node's `path` does it (`resolve`, `relative`, `join`, `dirname`,
//! `extname`), and file-system errors worded as Node words them (`ENOENT: no such file or
//! directory, open '/x'`).

use std::fmt;
use std::io;

/// A failed file-system call, as Node reports it: code, description, system call, path(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    code: &'static str,
    syscall: &'static str,
    path: Option<String>,
    dest: Option<String>,
}

impl FsError {
    /// `syscall` on `path` failed with `code` (an errno name such as `ENOENT`).
    pub fn new(code: &'static str, syscall: &'static str, path: &str) -> Self {
        Self {
            code,
            syscall,
            path: Some(path.to_owned()),
            dest: None,
        }
    }

    /// `error`, from `syscall` on `path`.
    pub fn io(error: &io::Error, syscall: &'static str, path: &str) -> Self {
        Self::new(code_of(error), syscall, path)
    }

    /// `error`, from renaming `from` to `to`.
    pub fn rename(error: &io::Error, from: &str, to: &str) -> Self {
        Self {
            code: code_of(error),
            syscall: "rename",
            path: Some(from.to_owned()),
            dest: Some(to.to_owned()),
        }
    }

    /// Reading a directory as a file: Node names no path.
    pub fn read_directory() -> Self {
        Self {
            code: "EISDIR",
            syscall: "read",
            path: None,
            dest: None,
        }
    }

    /// The errno name.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}, {}",
            self.code,
            describe(self.code),
            self.syscall
        )?;
        if let Some(path) = &self.path {
            write!(f, " '{path}'")?;
        }
        if let Some(dest) = &self.dest {
            write!(f, " -> '{dest}'")?;
        }
        Ok(())
    }
}

/// libuv's words for an errno name.
fn describe(code: &str) -> &'static str {
    match code {
        "ENOENT" => "no such file or directory",
        "EEXIST" => "file already exists",
        "ENOTDIR" => "not a directory",
        "EISDIR" => "illegal operation on a directory",
        "EACCES" => "permission denied",
        "EPERM" => "operation not permitted",
        "ENOTEMPTY" => "directory not empty",
        "ELOOP" => "too many symbolic links encountered",
        "EXDEV" => "cross-device link not permitted",
        "EROFS" => "read-only file system",
        "ENOSPC" => "no space left on device",
        "EDQUOT" => "disk quota exceeded",
        "EFBIG" => "file too large",
        "EINVAL" => "invalid argument",
        "ENAMETOOLONG" => "name too long",
        "EBUSY" => "resource busy or locked",
        "EBADF" => "bad file descriptor",
        "EMFILE" => "too many open files",
        "ENOMEM" => "not enough memory",
        "ETXTBSY" => "text file is busy",
        _ => "i/o error",
    }
}

/// The errno name of an I/O error: WASI's error numbers inside the sandbox, else its kind.
fn code_of(error: &io::Error) -> &'static str {
    #[cfg(target_os = "wasi")]
    if let Some(code) = error.raw_os_error() {
        // WASI's errno values (wasi-libc's numbering).
        let name = match code {
            2 => "EACCES",
            8 => "EBADF",
            10 => "EBUSY",
            19 => "EDQUOT",
            20 => "EEXIST",
            22 => "EFBIG",
            28 => "EINVAL",
            31 => "EISDIR",
            32 => "ELOOP",
            33 => "EMFILE",
            37 => "ENAMETOOLONG",
            44 => "ENOENT",
            48 => "ENOMEM",
            51 => "ENOSPC",
            54 => "ENOTDIR",
            55 => "ENOTEMPTY",
            63 => "EPERM",
            69 => "EROFS",
            74 => "ETXTBSY",
            75 => "EXDEV",
            // Not capable: the sandbox refused (a path leading out of the grant).
            76 => "EACCES",
            _ => "EIO",
        };
        return name;
    }
    match error.kind() {
        io::ErrorKind::NotFound => "ENOENT",
        io::ErrorKind::AlreadyExists => "EEXIST",
        io::ErrorKind::NotADirectory => "ENOTDIR",
        io::ErrorKind::IsADirectory => "EISDIR",
        io::ErrorKind::PermissionDenied => "EACCES",
        io::ErrorKind::DirectoryNotEmpty => "ENOTEMPTY",
        io::ErrorKind::ReadOnlyFilesystem => "EROFS",
        io::ErrorKind::StorageFull => "ENOSPC",
        io::ErrorKind::InvalidInput => "EINVAL",
        io::ErrorKind::CrossesDevices => "EXDEV",
        _ => "EIO",
    }
}

/// Whether `path` is absolute.
pub fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
}

/// `path.normalize` for an absolute path, or a relative one taken from `/`: `.` and `..`
/// resolved, repeated and trailing slashes dropped.
fn normalize_absolute(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `path.resolve(base, path)` (the plugin has no working directory: `base` is absolute).
pub fn resolve(base: &str, path: &str) -> String {
    if is_absolute(path) {
        normalize_absolute(path)
    } else {
        normalize_absolute(&format!("{base}/{path}"))
    }
}

/// `path.resolve(path)` for an absolute path.
pub fn resolve_absolute(path: &str) -> String {
    normalize_absolute(path)
}

/// `path.join(base, name)` for an absolute `base`.
pub fn join(base: &str, name: &str) -> String {
    normalize_absolute(&format!("{base}/{name}"))
}

/// `path.dirname` of an absolute, normalized path.
pub fn dirname(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".to_owned(),
        Some(i) => path[..i].to_owned(),
    }
}

/// `path.extname`: the last `.` of the last component and what follows, unless the component
/// starts with its only dot.
pub fn extname(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    match base.rfind('.') {
        Some(0) | None => "",
        Some(i) => &base[i..],
    }
}

/// `path.relative(from, to)` for absolute paths.
pub fn relative(from: &str, to: &str) -> String {
    let from = normalize_absolute(from);
    let to = normalize_absolute(to);
    let from: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|p| !p.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

/// The original's `normalizePath` for an absolute POSIX path: surrounding whitespace and one
/// quote at either end dropped, repeated slashes and a trailing slash removed.
pub fn normalize_path(path: &str) -> String {
    let trimmed = js_trim(path);
    let trimmed = trimmed.strip_prefix(['"', '\'']).unwrap_or(trimmed);
    let trimmed = trimmed.strip_suffix(['"', '\'']).unwrap_or(trimmed);
    if !trimmed.starts_with('/') {
        return normalize_absolute(trimmed)
            .trim_start_matches('/')
            .to_owned();
    }
    let mut out = String::with_capacity(trimmed.len());
    for c in trimmed.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    if out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    out
}

/// Whether `c` is whitespace to JavaScript's `trim` and `\s`.
pub fn js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// JavaScript's `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(js_space)
}

/// The original's `isPathWithinAllowedDirectories`: `path` is one of `dirs` or below one.
pub fn within(path: &str, dirs: &[String]) -> bool {
    if path.is_empty() || dirs.is_empty() || path.contains('\0') {
        return false;
    }
    let path = normalize_absolute(path);
    dirs.iter().any(|dir| {
        if dir.is_empty() || dir.contains('\0') {
            return false;
        }
        let dir = normalize_absolute(dir);
        path == dir || dir == "/" || path.starts_with(&format!("{dir}/"))
    })
}
