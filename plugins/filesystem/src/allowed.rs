//! Which paths a call may touch, decided as the original decides (its `validatePath`), within
//! what the sandbox allows.
//!
//! The allowed directories are the directories granted to the plugin (the component's
//! preopens, at the same absolute paths as on the host), or, when the client gives roots,
//! the part of the roots inside those grants. Roots narrow the grant and never widen it: a
//! root outside every grant is not visible here and is skipped, as the original skips a
//! root it cannot resolve; a root above a grant stands for the granted directories below it.
//!
//! Paths are resolved here, symlink by symlink (`realpath`), and a call works on the real
//! path, so a symlink leading out of the allowed directories is refused with the original's
//! words. The sandbox refuses it again underneath: no path this plugin opens can reach a
//! file outside its grants.

use std::fs;

use mcpbox_sdk::serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::node::{self, FsError};

/// The directories granted (absolute, the same inside the sandbox as on the host), in the
/// order the operator listed them.
pub fn grants() -> Vec<String> {
    #[cfg(target_arch = "wasm32")]
    {
        wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .filter(|(_, path)| node::is_absolute(path))
            .map(|(_, path)| node::normalize_path(&path))
            .collect()
    }
    #[cfg(not(target_arch = "wasm32"))]
    Vec::new()
}

/// Whether the grant at `path` lets the plugin change what is in it (asked only when needed:
/// each question is a host call).
pub fn writable(path: &str) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        use wasip2::filesystem::types::DescriptorFlags;
        wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .find(|(_, p)| node::normalize_path(p) == path)
            .is_some_and(|(descriptor, _)| {
                descriptor
                    .get_flags()
                    .is_ok_and(|flags| flags.contains(DescriptorFlags::MUTATE_DIRECTORY))
            })
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = path;
        false
    }
}

/// What one call may touch.
pub struct Allowed {
    /// The allowed directories, as `list_allowed_directories` shows them.
    pub dirs: Vec<String>,
    /// The granted directories (for what the sandbox lets the plugin do in them).
    pub grants: Vec<String>,
    /// The home directory `~` stands for, if the operator passed `HOME`.
    home: Option<String>,
}

/// Why a path is refused or could not be resolved: the original's words.
pub type Refusal = String;

impl Allowed {
    /// The grants, narrowed to the client's roots when it gave some (`roots` is the client's
    /// `roots/list` result, or `None` when it has none to give).
    pub fn new(roots: Option<&Value>) -> Self {
        let grants = grants();
        let granted = grants.clone();
        let home = std::env::var("HOME").ok().filter(|h| node::is_absolute(h));
        let mut allowed = Self {
            dirs: granted.clone(),
            grants,
            home,
        };
        if let Some(roots) = roots.and_then(|r| r.get("roots")).and_then(Value::as_array) {
            let mut dirs: Vec<String> = Vec::new();
            for root in roots {
                let Some(uri) = root.get("uri").and_then(Value::as_str) else {
                    continue;
                };
                for dir in allowed.root_dirs(uri, &granted) {
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
            if !dirs.is_empty() {
                allowed.dirs = dirs;
            }
        }
        allowed
    }

    /// The directories a root stands for: itself, if it is a directory inside a grant, or the
    /// grants below it.
    fn root_dirs(&self, uri: &str, granted: &[String]) -> Vec<String> {
        let raw = match uri.strip_prefix("file://") {
            Some(rest) => match file_url_path(rest) {
                Some(path) => path,
                None => return Vec::new(),
            },
            None => uri.to_owned(),
        };
        let Some(expanded) = self.expand_home(&raw) else {
            return Vec::new();
        };
        if !node::is_absolute(&expanded) {
            return Vec::new();
        }
        let absolute = node::resolve_absolute(&expanded);
        if node::within(&absolute, granted) {
            return match realpath(&absolute, granted) {
                Ok(Resolved::Inside(real)) if fs::metadata(&real).is_ok_and(|m| m.is_dir()) => {
                    vec![node::normalize_path(&real)]
                }
                _ => Vec::new(),
            };
        }
        granted
            .iter()
            .filter(|g| node::within(g, std::slice::from_ref(&absolute)))
            .cloned()
            .collect()
    }

    /// `~` and `~/…` as the home directory; `None` if there is none to stand for.
    fn expand_home(&self, path: &str) -> Option<String> {
        if path == "~" || path.starts_with("~/") {
            let home = self.home.as_deref()?;
            return Some(node::join(home, &path[1..]));
        }
        Some(path.to_owned())
    }

    /// The grant `path` lies in, if any.
    pub fn grant_of(&self, path: &str) -> Option<&str> {
        self.grants
            .iter()
            .filter(|g| node::within(path, std::slice::from_ref(g)))
            .max_by_key(|g| g.len())
            .map(String::as_str)
    }

    fn outside(&self, absolute: &str) -> Refusal {
        format!(
            "Access denied - path outside allowed directories: {absolute} not in {}",
            self.dirs.join(", ")
        )
    }

    fn symlink_out(&self, real: &str) -> Refusal {
        format!(
            "Access denied - symlink target outside allowed directories: {real} not in {}",
            self.dirs.join(", ")
        )
    }

    /// The original's `validatePath`: the real path a call on `requested` works on.
    pub fn validate(&self, requested: &str) -> Result<String, Refusal> {
        let expanded = match self.expand_home(requested) {
            Some(path) => path,
            None => return Err(self.outside(requested)),
        };
        let bytes = expanded.as_bytes();
        if bytes.len() >= 2
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && (bytes.len() == 2 || bytes[2] == b'/' || bytes[2] == b'\\')
        {
            return Err(format!(
                "Access denied - Windows-style path received on a POSIX host: {requested}"
            ));
        }
        let absolute = if node::is_absolute(&expanded) {
            node::resolve_absolute(&expanded)
        } else {
            self.resolve_relative(&expanded)
        };
        if !node::within(&node::normalize_path(&absolute), &self.dirs) {
            return Err(self.outside(&absolute));
        }
        match realpath(&absolute, &self.grants) {
            Ok(Resolved::Inside(real)) => {
                if node::within(&node::normalize_path(&real), &self.dirs) {
                    Ok(real)
                } else {
                    Err(self.symlink_out(&real))
                }
            }
            Ok(Resolved::Outside(target)) => Err(self.symlink_out(&target)),
            Err(e) if e.code() == "ENOENT" => match self.unicode_equivalent(&absolute) {
                Ok(path) => Ok(path),
                Err(Failure::Fs(e)) if e.code() == "ENOENT" => Err(format!(
                    "Parent directory does not exist: {}",
                    node::dirname(&absolute)
                )),
                Err(Failure::Fs(e)) => Err(e.to_string()),
                Err(Failure::Refused(why)) => Err(why),
            },
            Err(e) => Err(e.to_string()),
        }
    }

    /// A relative path, against the first allowed directory it stays inside.
    fn resolve_relative(&self, relative: &str) -> String {
        for dir in &self.dirs {
            let candidate = node::resolve(dir, relative);
            if node::within(&node::normalize_path(&candidate), &self.dirs) {
                return candidate;
            }
        }
        node::resolve(self.dirs.first().map_or("/", String::as_str), relative)
    }

    /// The original's `resolveUnicodeEquivalentPath`, for a path that does not exist (yet):
    /// each existing component found as spelled or, failing that, as its one NFC-equivalent
    /// spelling, symlinks resolved on the way; the missing rest appended.
    fn unicode_equivalent(&self, absolute: &str) -> Result<String, Failure> {
        let granted = &self.grants;
        let Some(base) = self
            .dirs
            .iter()
            .filter(|d| node::within(&node::normalize_path(absolute), std::slice::from_ref(d)))
            .max_by_key(|d| d.len())
        else {
            return Ok(absolute.to_owned());
        };
        let mut current = match realpath(base, granted).map_err(Failure::Fs)? {
            Resolved::Inside(real) => real,
            Resolved::Outside(target) => return Err(Failure::Refused(self.symlink_out(&target))),
        };
        let relative = node::relative(base, absolute);
        let parts: Vec<&str> = relative.split('/').filter(|p| !p.is_empty()).collect();
        for (index, part) in parts.iter().enumerate() {
            let entries =
                names(&current).map_err(|e| Failure::Fs(FsError::io(&e, "scandir", &current)))?;
            let matches: Vec<&String> = match entries.iter().find(|e| e == part) {
                Some(exact) => vec![exact],
                None => {
                    let wanted: String = part.nfc().collect();
                    entries
                        .iter()
                        .filter(|e| e.nfc().collect::<String>() == wanted)
                        .collect()
                }
            };
            if matches.len() > 1 {
                return Err(Failure::Refused(format!(
                    "Ambiguous Unicode path component: {part}"
                )));
            }
            let Some(found) = matches.first() else {
                let mut path = current;
                for rest in &parts[index..] {
                    path = node::join(&path, rest);
                }
                return Ok(path);
            };
            current = match realpath(&node::join(&current, found), granted).map_err(Failure::Fs)? {
                Resolved::Inside(real) => real,
                Resolved::Outside(target) => {
                    return Err(Failure::Refused(self.symlink_out(&target)));
                }
            };
            if !node::within(&node::normalize_path(&current), &self.dirs) {
                return Err(Failure::Refused(self.symlink_out(&current)));
            }
        }
        Ok(current)
    }
}

enum Failure {
    Fs(FsError),
    Refused(Refusal),
}

/// The names in directory `dir`, in the order Node's `readdir` gives them (byte order).
pub fn names(dir: &str) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// Where a path leads.
pub enum Resolved {
    /// To this real path, inside the grants (every component a real directory or file).
    Inside(String),
    /// Out of the grants, through a symlink to this path (resolved no further: the sandbox
    /// shows nothing outside its grants), or through this symlink, whose target the sandbox
    /// does not show (an absolute one, or one climbing out).
    Outside(String),
}

/// `realpath(path)`: every symlink followed (at most 40, as Linux allows), within the grants.
pub fn realpath(path: &str, granted: &[String]) -> Result<Resolved, FsError> {
    let original = path;
    let mut pending = node::resolve_absolute(path);
    let mut links = 0;
    'restart: loop {
        let Some(root) = granted
            .iter()
            .filter(|g| node::within(&pending, std::slice::from_ref(g)))
            .max_by_key(|g| g.len())
        else {
            return Ok(Resolved::Outside(pending));
        };
        let rest = node::relative(root, &pending);
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        let mut current = root.clone();
        for (index, part) in parts.iter().enumerate() {
            let next = node::join(&current, part);
            let meta = match fs::symlink_metadata(&next) {
                Ok(meta) => meta,
                // The sandbox refuses to look through a symlink leading out of the grant.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Ok(Resolved::Outside(next));
                }
                Err(e) => return Err(FsError::io(&e, "realpath", original)),
            };
            if meta.file_type().is_symlink() {
                links += 1;
                if links > 40 {
                    return Err(FsError::new("ELOOP", "realpath", original));
                }
                let target = match fs::read_link(&next) {
                    Ok(target) => target,
                    // An absolute target, or one climbing out of the grant: WASI does not
                    // show it (so the refusal names the link, not where it leads).
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                        return Ok(Resolved::Outside(next));
                    }
                    Err(e) => return Err(FsError::io(&e, "realpath", original)),
                };
                let target = target.to_string_lossy();
                let mut joined = node::resolve(&current, &target);
                for rest in &parts[index + 1..] {
                    joined = format!("{joined}/{rest}");
                }
                pending = node::resolve_absolute(&joined);
                continue 'restart;
            }
            if index + 1 < parts.len() && !meta.is_dir() {
                return Err(FsError::new("ENOTDIR", "realpath", original));
            }
            current = next;
        }
        return Ok(Resolved::Inside(current));
    }
}

/// The path of a `file://` URL's rest (`/a%20b` → `/a b`), as `fileURLToPath` reads it.
fn file_url_path(rest: &str) -> Option<String> {
    // An empty or `localhost` host only.
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            let byte = u8::from_str_radix(hex, 16).ok()?;
            // `fileURLToPath` refuses an encoded `/`.
            if byte == b'/' {
                return None;
            }
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
