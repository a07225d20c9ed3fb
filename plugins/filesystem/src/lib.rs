//! The reference server `@modelcontextprotocol/server-filesystem`, as an mcpbox plugin: its
//! fourteen tools (names, titles, descriptions, input and output schemas and annotations
//! verbatim, in `src/tools.json`, taken from its `tools/list`), with the same results, error
//! texts and effects on the files.
//!
//! The original may touch what its user may; this plugin sees only the directories granted
//! to it (`[[dirs]]`, read-only or read-write each), at the same absolute paths as on the
//! host, so the paths clients send and see are the real ones. It honours the client's roots
//! as the original does, inside the grants only ([`allowed`]). Paths are checked as the
//! original checks them, and the sandbox checks again underneath: a symlink out of the
//! grants leads nowhere.
//!
//! Where the sandbox cannot show what the original shows, the plugin says what it can
//! (README): times are in UTC, `created` is the last status change (WASI has no birth
//! time), and `permissions` is what the grant lets the plugin do (`644`/`755` read-write,
//! `444`/`555` read-only), WASI having no mode bits. For the same reason a file rewritten
//! through a temporary file (as the original does, for atomicity) takes the host's default
//! mode.

mod allowed;
mod diff;
mod format;
mod glob;
mod node;

use std::fs;
use std::io::{Read, Seek, SeekFrom};

use base64::Engine as _;
use mcpbox_sdk::serde_json::{self, json};
use mcpbox_sdk::{Content, Deserialize, JsonSchema, Plugin, ToolResult, Tools, host};

use crate::allowed::{Allowed, names};
use crate::node::FsError;

/// The original's tools, verbatim: name, title, description, schemas, annotations.
const TOOLS: &str = include_str!("tools.json");

#[derive(Deserialize, JsonSchema)]
struct ReadText {
    path: String,
    tail: Option<f64>,
    head: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
struct OnePath {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct Paths {
    paths: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
struct Write {
    path: String,
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct Edit {
    #[serde(rename = "oldText")]
    old_text: String,
    #[serde(rename = "newText")]
    new_text: String,
}

#[derive(Deserialize, JsonSchema)]
struct EditFile {
    path: String,
    edits: Vec<Edit>,
    #[serde(default, rename = "dryRun")]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
struct ListWithSizes {
    path: String,
    #[serde(default, rename = "sortBy")]
    sort_by: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct Tree {
    path: String,
    #[serde(default, rename = "excludePatterns")]
    exclude_patterns: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
struct Move {
    source: String,
    destination: String,
}

#[derive(Deserialize, JsonSchema)]
struct Search {
    path: String,
    pattern: String,
    #[serde(default, rename = "excludePatterns")]
    exclude_patterns: Vec<String>,
}

/// No arguments (any are ignored, as the original's schema allows them).
#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// What a call may touch: the grants, narrowed to the client's roots if it has some. `Err`
/// when the client is being asked for them (a 2026-07-28 round): the call must do nothing
/// yet, and runs again with the answer.
fn allowed() -> Result<Allowed, String> {
    match host::list_roots() {
        Ok(roots) => Ok(Allowed::new(Some(&roots))),
        // The host's word for a question this round will put to the client.
        Err(why) if why.starts_with("input required") => Err(why),
        Err(_) => Ok(Allowed::new(None)),
    }
}

/// A text answer, also as the structured `{content}` the output schema promises.
fn text(text: String) -> ToolResult {
    let structured = json!({ "content": text }).to_string();
    ToolResult::text(text).with_structured(structured)
}

/// The original's answer: the text, or the failure's message alone.
fn respond(outcome: Result<String, String>) -> ToolResult {
    outcome.map_or_else(ToolResult::error, text)
}

/// JavaScript's truthiness of an optional number.
fn given(n: Option<f64>) -> Option<f64> {
    n.filter(|n| *n != 0.0 && !n.is_nan())
}

fn read_text_file(args: &ReadText) -> Result<String, String> {
    let allowed = allowed()?;
    let path = allowed.validate(&args.path)?;
    let (head, tail) = (given(args.head), given(args.tail));
    if head.is_some() && tail.is_some() {
        return Err("Cannot specify both head and tail parameters simultaneously".to_owned());
    }
    if let Some(tail) = tail {
        tail_file(&path, tail).map_err(|e| e.to_string())
    } else if let Some(head) = head {
        head_file(&path, head).map_err(|e| e.to_string())
    } else {
        read_file(&path).map_err(|e| e.to_string())
    }
}

/// `fs.readFile(path, "utf-8")`: invalid UTF-8 read as U+FFFD.
fn read_file(path: &str) -> Result<String, FsError> {
    let bytes = read_bytes(path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A whole file. Each file-system operation is a host call, so as few as can be: open, one
/// stat (a directory is refused; the size sizes the buffer), the reads.
fn read_bytes(path: &str) -> Result<Vec<u8>, FsError> {
    let (mut file, size) = open_sized(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.read_to_end(&mut bytes)
        .map_err(|e| FsError::io(&e, "read", path))?;
    Ok(bytes)
}

/// `path` opened for reading, with its size; a directory is Node's `EISDIR` on read.
fn open_sized(path: &str) -> Result<(fs::File, u64), FsError> {
    let file = fs::File::open(path).map_err(|e| FsError::io(&e, "open", path))?;
    let meta = file.metadata().map_err(|e| FsError::io(&e, "stat", path))?;
    if meta.is_dir() {
        return Err(FsError::read_directory());
    }
    Ok((file, meta.len()))
}

fn open(path: &str) -> Result<fs::File, FsError> {
    open_sized(path).map(|(file, _)| file)
}

/// The original's `headFile`: the first `n` lines (a final line without a newline counts).
fn head_file(path: &str, n: f64) -> Result<String, FsError> {
    let mut file = open(path)?;
    let mut lines: Vec<String> = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    #[allow(clippy::cast_precision_loss, reason = "a count of lines")]
    let enough = |lines: &Vec<String>| lines.len() as f64 >= n;
    while !enough(&lines) {
        let read = file
            .read(&mut chunk)
            .map_err(|e| FsError::io(&e, "read", path))?;
        if read == 0 {
            break;
        }
        pending.extend_from_slice(&chunk[..read]);
        if let Some(last) = pending.iter().rposition(|b| *b == b'\n') {
            let complete = String::from_utf8_lossy(&pending[..last]).into_owned();
            pending.drain(..=last);
            for line in complete.split('\n') {
                lines.push(line.to_owned());
                if enough(&lines) {
                    break;
                }
            }
        }
    }
    if !pending.is_empty() && !enough(&lines) {
        lines.push(String::from_utf8_lossy(&pending).into_owned());
    }
    Ok(lines.join("\n"))
}

/// The original's `tailFile`: 1 KiB blocks read from the end until `n` newlines are in hand,
/// then the last `n` lines of them (CRLF read as LF).
fn tail_file(path: &str, n: f64) -> Result<String, FsError> {
    const CHUNK: u64 = 1024;
    let size = fs::metadata(path)
        .map_err(|e| FsError::io(&e, "stat", path))?
        .len();
    if size == 0 {
        return Ok(String::new());
    }
    let (mut file, _) = open_sized(path)?;
    let mut data: Vec<u8> = Vec::new();
    let mut position = size;
    let mut newlines = 0u64;
    #[allow(clippy::cast_precision_loss, reason = "a count of lines")]
    while position > 0 && (newlines as f64) < n {
        let len = CHUNK.min(position);
        position -= len;
        file.seek(SeekFrom::Start(position))
            .map_err(|e| FsError::io(&e, "read", path))?;
        let mut block = vec![0u8; usize::try_from(len).unwrap_or(0)];
        file.read_exact(&mut block)
            .map_err(|e| FsError::io(&e, "read", path))?;
        newlines += block.iter().filter(|b| **b == b'\n').count() as u64;
        block.extend_from_slice(&data);
        data = block;
    }
    let text = String::from_utf8_lossy(&data).replace("\r\n", "\n");
    let parts: Vec<&str> = text.split('\n').collect();
    // `slice(-n)`: -n truncated toward zero.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "JavaScript's ToIntegerOrInfinity of a line count"
    )]
    let keep = n.trunc().clamp(-1e15, 1e15) as i64;
    let from = match keep {
        0 => 0,
        k if k > 0 => parts
            .len()
            .saturating_sub(usize::try_from(k).unwrap_or(usize::MAX)),
        k => usize::try_from(-k).unwrap_or(usize::MAX).min(parts.len()),
    };
    Ok(parts[from..].join("\n"))
}

fn read_media_file(OnePath { path }: OnePath) -> ToolResult {
    let outcome = (|| -> Result<ToolResult, String> {
        let allowed = allowed()?;
        let path = allowed.validate(&path)?;
        let mime = match node::extname(&path).to_lowercase().as_str() {
            ".png" => "image/png",
            ".jpg" | ".jpeg" => "image/jpeg",
            ".gif" => "image/gif",
            ".webp" => "image/webp",
            ".bmp" => "image/bmp",
            ".svg" => "image/svg+xml",
            ".mp3" => "audio/mpeg",
            ".wav" => "audio/wav",
            ".ogg" => "audio/ogg",
            ".flac" => "audio/flac",
            _ => "application/octet-stream",
        };
        let bytes = read_bytes(&path).map_err(|e| e.to_string())?;
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let (content, item) = if mime.starts_with("image/") {
            (
                Content::image(bytes, mime),
                json!({"type": "image", "data": data, "mimeType": mime}),
            )
        } else if mime.starts_with("audio/") {
            (
                Content::audio(bytes, mime),
                json!({"type": "audio", "data": data, "mimeType": mime}),
            )
        } else {
            let uri = format::file_url(&path);
            let item = json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": data}});
            (Content::embedded_blob(uri, Some(mime), bytes), item)
        };
        Ok(
            ToolResult::new(vec![content])
                .with_structured(json!({ "content": [item] }).to_string()),
        )
    })();
    outcome.unwrap_or_else(ToolResult::error)
}

fn read_multiple_files(Paths { paths }: Paths) -> Result<String, String> {
    let allowed = allowed()?;
    let results: Vec<String> = paths
        .iter()
        .map(|requested| {
            match allowed
                .validate(requested)
                .and_then(|path| read_file(&path).map_err(|e| e.to_string()))
            {
                Ok(content) => format!("{requested}:\n{content}\n"),
                Err(why) => format!("{requested}: Error - {why}"),
            }
        })
        .collect();
    Ok(results.join("\n---\n"))
}

/// A random name beside `path` for a file written whole and then renamed into place.
fn temporary(path: &str) -> String {
    #[cfg(target_arch = "wasm32")]
    let bytes = wasip2::random::random::get_random_bytes(16);
    #[cfg(not(target_arch = "wasm32"))]
    let bytes = [0u8; 16];
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{path}.{hex}.tmp")
}

/// Replace `path` by `content` at once: written beside it, then renamed over it (a
/// rename replaces a symlink rather than writing through it).
fn replace(path: &str, content: &str) -> Result<(), FsError> {
    let temp = temporary(path);
    fs::write(&temp, content).map_err(|e| FsError::io(&e, "open", &temp))?;
    if let Err(e) = fs::rename(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(FsError::rename(&e, &temp, path));
    }
    Ok(())
}

fn write_file(Write { path, content }: Write) -> Result<String, String> {
    let allowed = allowed()?;
    let real = allowed.validate(&path)?;
    // Created only if nothing is there, so nothing already there is written through.
    let created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&real);
    match created {
        Ok(mut file) => {
            use std::io::Write as _;
            file.write_all(content.as_bytes())
                .map_err(|e| FsError::io(&e, "write", &real).to_string())?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::metadata(&real).map_err(|e| FsError::io(&e, "stat", &real).to_string())?;
            replace(&real, &content).map_err(|e| e.to_string())?;
        }
        Err(e) => return Err(FsError::io(&e, "open", &real).to_string()),
    }
    Ok(format!("Successfully wrote to {path}"))
}

/// The original's `applyFileEdits`: each edit replaces its text's first occurrence, or else
/// the first run of lines equal to it but for surrounding whitespace (keeping the file's
/// indentation); the answer is the diff, in a fence longer than any run of backticks in it.
fn edit_file(args: &EditFile) -> Result<String, String> {
    let allowed = allowed()?;
    let path = allowed.validate(&args.path)?;
    let content = read_file(&path)
        .map_err(|e| e.to_string())?
        .replace("\r\n", "\n");
    let mut modified = content.clone();
    for edit in &args.edits {
        let old = edit.old_text.replace("\r\n", "\n");
        let new = edit.new_text.replace("\r\n", "\n");
        if modified.contains(&old) {
            modified = modified.replacen(&old, &new, 1);
            continue;
        }
        if !fuzzy_replace(&mut modified, &old, &new) {
            return Err(format!(
                "Could not find exact match for edit:\n{}",
                edit.old_text
            ));
        }
    }
    let diff = diff::unified(&path, &content, &modified);
    let mut fence = 3;
    while diff.contains(&"`".repeat(fence)) {
        fence += 1;
    }
    let fence = "`".repeat(fence);
    if !args.dry_run {
        fs::metadata(&path).map_err(|e| FsError::io(&e, "stat", &path).to_string())?;
        replace(&path, &modified).map_err(|e| e.to_string())?;
    }
    Ok(format!("{fence}diff\n{diff}{fence}\n\n"))
}

/// The leading whitespace of `line` (JavaScript's `/^\s*/`).
fn indent(line: &str) -> &str {
    let end = line
        .char_indices()
        .find(|(_, c)| !node::js_space(*c))
        .map_or(line.len(), |(i, _)| i);
    &line[..end]
}

/// Replace the first run of lines equal to `old`'s but for surrounding whitespace.
fn fuzzy_replace(content: &mut String, old: &str, new: &str) -> bool {
    let old_lines: Vec<&str> = old.split('\n').collect();
    let mut lines: Vec<String> = content.split('\n').map(str::to_owned).collect();
    if old_lines.len() > lines.len() {
        return false;
    }
    for i in 0..=lines.len() - old_lines.len() {
        let same = old_lines
            .iter()
            .zip(&lines[i..i + old_lines.len()])
            .all(|(o, l)| node::js_trim(o) == node::js_trim(l));
        if !same {
            continue;
        }
        let first_indent = indent(&lines[i]).to_owned();
        let replacement: Vec<String> = new
            .split('\n')
            .enumerate()
            .map(|(j, line)| {
                if j == 0 {
                    return format!("{first_indent}{}", line.trim_start_matches(node::js_space));
                }
                let old_indent = old_lines.get(j).map_or("", |l| indent(l));
                let new_indent = indent(line);
                if !old_indent.is_empty() && !new_indent.is_empty() {
                    let relative = new_indent.encode_utf16().count() as i64
                        - old_indent.encode_utf16().count() as i64;
                    format!(
                        "{first_indent}{}{}",
                        " ".repeat(usize::try_from(relative.max(0)).unwrap_or(0)),
                        line.trim_start_matches(node::js_space)
                    )
                } else {
                    line.to_owned()
                }
            })
            .collect();
        lines.splice(i..i + old_lines.len(), replacement);
        *content = lines.join("\n");
        return true;
    }
    false
}

fn create_directory(OnePath { path }: OnePath) -> Result<String, String> {
    let allowed = allowed()?;
    let real = allowed.validate(&path)?;
    fs::create_dir_all(&real).map_err(|e| FsError::io(&e, "mkdir", &real).to_string())?;
    Ok(format!("Successfully created directory {path}"))
}

/// A directory's entries, in `readdir`'s order, each with whether it is a directory (a
/// symlink is not, as Node's `Dirent` says).
fn entries(dir: &str) -> Result<Vec<(String, bool)>, FsError> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(FsError::new("ENOTDIR", "scandir", dir));
    }
    let names = names(dir).map_err(|e| FsError::io(&e, "scandir", dir))?;
    Ok(names
        .into_iter()
        .map(|name| {
            let is_dir = fs::symlink_metadata(node::join(dir, &name)).is_ok_and(|m| m.is_dir());
            (name, is_dir)
        })
        .collect())
}

fn list_directory(OnePath { path }: OnePath) -> Result<String, String> {
    let allowed = allowed()?;
    let real = allowed.validate(&path)?;
    let listed: Vec<String> = entries(&real)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(name, dir)| format!("{} {name}", if dir { "[DIR]" } else { "[FILE]" }))
        .collect();
    Ok(listed.join("\n"))
}

fn list_directory_with_sizes(args: &ListWithSizes) -> Result<String, String> {
    let allowed = allowed()?;
    let real = allowed.validate(&args.path)?;
    let detailed: Vec<(String, bool, u64)> = entries(&real)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(name, dir)| {
            let size = fs::metadata(node::join(&real, &name)).map_or(0, |m| m.len());
            (name, dir, size)
        })
        .collect();
    let mut sorted = detailed.clone();
    if args.sort_by.as_deref() == Some("size") {
        sorted.sort_by_key(|e| std::cmp::Reverse(e.2));
    } else {
        sorted.sort_by(|a, b| format::locale_compare(&a.0, &b.0));
    }
    let mut lines: Vec<String> = sorted
        .iter()
        .map(|(name, dir, size)| {
            format!(
                "{} {} {}",
                if *dir { "[DIR]" } else { "[FILE]" },
                format::pad_end(name, 30),
                if *dir {
                    String::new()
                } else {
                    format::pad_start(&format::size(*size), 10)
                }
            )
        })
        .collect();
    let files = detailed.iter().filter(|e| !e.1).count();
    let dirs = detailed.len() - files;
    let total: u64 = detailed.iter().filter(|e| !e.1).map(|e| e.2).sum();
    lines.push(String::new());
    lines.push(format!("Total: {files} files, {dirs} directories"));
    lines.push(format!("Combined size: {}", format::size(total)));
    Ok(lines.join("\n"))
}

/// A node of `directory_tree`'s answer.
#[derive(mcpbox_sdk::Serialize)]
struct Node {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<Vec<Node>>,
}

fn directory_tree(args: &Tree) -> Result<String, String> {
    let allowed = allowed()?;
    let root = args.path.clone();
    let patterns: Vec<(glob::Pattern, Option<[glob::Pattern; 2]>)> = args
        .exclude_patterns
        .iter()
        .map(|p| {
            let plain = (!p.contains('*')).then(|| {
                [
                    glob::Pattern::new(&format!("**/{p}")),
                    glob::Pattern::new(&format!("**/{p}/**")),
                ]
            });
            (glob::Pattern::new(p), plain)
        })
        .collect();
    fn build(
        current: &str,
        allowed: &Allowed,
        root: &str,
        patterns: &[(glob::Pattern, Option<[glob::Pattern; 2]>)],
    ) -> Result<Vec<Node>, String> {
        // Paths relative to the root as given, both read from the same place (Node resolves
        // both against its working directory; the plugin has none, `/` stands in).
        let base = |p: &str| node::resolve("/", p);
        let real = allowed.validate(current)?;
        let mut nodes = Vec::new();
        for (name, dir) in entries(&real).map_err(|e| e.to_string())? {
            let joined = node::join(&base(current), &name);
            let relative = node::relative(&base(root), &joined);
            let excluded = patterns.iter().any(|(pattern, plain)| {
                pattern.matches(&relative)
                    || plain
                        .as_ref()
                        .is_some_and(|[a, b]| a.matches(&relative) || b.matches(&relative))
            });
            if excluded {
                continue;
            }
            let children = if dir {
                let sub = if node::is_absolute(current) {
                    node::join(current, &name)
                } else {
                    format!("{}/{name}", current.trim_end_matches('/'))
                };
                Some(build(&sub, allowed, root, patterns)?)
            } else {
                None
            };
            nodes.push(Node {
                name,
                kind: if dir { "directory" } else { "file" },
                children,
            });
        }
        Ok(nodes)
    }
    let tree = build(&root, &allowed, &root, &patterns)?;
    serde_json::to_string_pretty(&tree).map_err(|e| e.to_string())
}

fn move_file(args: &Move) -> Result<String, String> {
    let allowed = allowed()?;
    let source = allowed.validate(&args.source)?;
    let destination = allowed.validate(&args.destination)?;
    match fs::symlink_metadata(&destination) {
        Ok(_) => return Err(format!("Destination already exists: {destination}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FsError::io(&e, "lstat", &destination).to_string()),
    }
    fs::rename(&source, &destination)
        .map_err(|e| FsError::rename(&e, &source, &destination).to_string())?;
    Ok(format!(
        "Successfully moved {} to {}",
        args.source, args.destination
    ))
}

fn search_files(args: &Search) -> Result<String, String> {
    let allowed = allowed()?;
    let root = allowed.validate(&args.path)?;
    let pattern = glob::Pattern::new(&args.pattern);
    let excludes: Vec<glob::Pattern> = args
        .exclude_patterns
        .iter()
        .map(|p| glob::Pattern::new(p))
        .collect();
    let mut results = Vec::new();
    // Depth first, in readdir order, as the original's recursion visits.
    fn visit(
        current: &str,
        root: &str,
        allowed: &Allowed,
        pattern: &glob::Pattern,
        excludes: &[glob::Pattern],
        results: &mut Vec<String>,
    ) -> Result<(), FsError> {
        for (name, dir) in entries(current)? {
            let full = node::join(current, &name);
            if allowed.validate(&full).is_err() {
                continue;
            }
            let relative = node::relative(root, &full);
            if excludes.iter().any(|e| e.matches(&relative)) {
                continue;
            }
            if pattern.matches(&relative) {
                results.push(full.clone());
            }
            if dir {
                // A subdirectory that cannot be read is skipped, as the original skips it.
                let _ = visit(&full, root, allowed, pattern, excludes, results);
            }
        }
        Ok(())
    }
    visit(&root, &root, &allowed, &pattern, &excludes, &mut results).map_err(|e| e.to_string())?;
    Ok(if results.is_empty() {
        "No matches found".to_owned()
    } else {
        results.join("\n")
    })
}

fn get_file_info(OnePath { path }: OnePath) -> Result<String, String> {
    let allowed = allowed()?;
    let real = allowed.validate(&path)?;
    let meta = fs::metadata(&real).map_err(|e| FsError::io(&e, "stat", &real).to_string())?;
    let modified = meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
    let accessed = meta.accessed().unwrap_or(modified);
    let created = meta.created().unwrap_or(modified);
    let writable = allowed.grant_of(&real).is_some_and(allowed::writable);
    let permissions = match (meta.is_dir(), writable) {
        (true, true) => "755",
        (true, false) => "555",
        (false, true) => "644",
        (false, false) => "444",
    };
    Ok([
        format!("size: {}", meta.len()),
        format!("created: {}", format::date(created)),
        format!("modified: {}", format::date(modified)),
        format!("accessed: {}", format::date(accessed)),
        format!("isDirectory: {}", meta.is_dir()),
        format!("isFile: {}", meta.is_file()),
        format!("permissions: {permissions}"),
    ]
    .join("\n"))
}

fn list_allowed_directories() -> Result<String, String> {
    let allowed = allowed()?;
    Ok(format!("Allowed directories:\n{}", allowed.dirs.join("\n")))
}

struct Filesystem;

impl Plugin for Filesystem {
    fn tools(tools: &mut Tools) {
        tools
            .add_listed(TOOLS, "read_file", |a: ReadText| {
                respond(read_text_file(&a))
            })
            .add_listed(TOOLS, "read_text_file", |a: ReadText| {
                respond(read_text_file(&a))
            })
            .add_listed(TOOLS, "read_media_file", read_media_file)
            .add_listed(TOOLS, "read_multiple_files", |a: Paths| {
                respond(read_multiple_files(a))
            })
            .add_listed(TOOLS, "write_file", |a: Write| respond(write_file(a)))
            .add_listed(TOOLS, "edit_file", |a: EditFile| respond(edit_file(&a)))
            .add_listed(TOOLS, "create_directory", |a: OnePath| {
                respond(create_directory(a))
            })
            .add_listed(TOOLS, "list_directory", |a: OnePath| {
                respond(list_directory(a))
            })
            .add_listed(TOOLS, "list_directory_with_sizes", |a: ListWithSizes| {
                respond(list_directory_with_sizes(&a))
            })
            .add_listed(TOOLS, "directory_tree", |a: Tree| {
                respond(directory_tree(&a))
            })
            .add_listed(TOOLS, "move_file", |a: Move| respond(move_file(&a)))
            .add_listed(TOOLS, "search_files", |a: Search| respond(search_files(&a)))
            .add_listed(TOOLS, "get_file_info", |a: OnePath| {
                respond(get_file_info(a))
            })
            .add_listed(TOOLS, "list_allowed_directories", |_: Nothing| {
                respond(list_allowed_directories())
            });
    }
}

mcpbox_sdk::export!(Filesystem);
