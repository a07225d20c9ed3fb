//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension): the Agent Skills a plugin
//! ships inside its component, read once at load, checked, and made ready to serve.
//!
//! A plugin carries its skills in custom sections named [`SECTION`] of its component (the Rust
//! SDK's `skills!` writes one; `mcpbox skills add` appends one to any component). Each holds a
//! JSON document, `{"version": 1, "files": [{"path": "review/SKILL.md", "text": "…"},
//! {"path": "review/logo.png", "base64": "…"}]}`; the files of every such section together
//! are the plugin's skill tree. Every directory of it holding a `SKILL.md` is a skill, served
//! under `skill://PLUGIN/PATH/…`: the plugin's name is the first segment, so no plugin can
//! serve another's skills (and the catalog lets no plugin list anything else under
//! `skill://`). A skill that breaks the extension's rules (no front matter, a name that is not
//! its directory's, more than 512 files or 16 MiB) is refused with the reason, and the
//! plugin's other skills and items are served. A section that is not a well-formed document
//! (a path with `..`, a file packed twice, …) is refused whole: nothing of it is served.
//!
//! **What skills cost the host.** A section is a plugin's input, and the host holds what it
//! makes of it for as long as the plugin is loaded, so that cost is bounded by the section's
//! size: a path has at most [`MAX_PATH_SEGMENTS`] segments and [`MAX_PATH_BYTES`] bytes; the
//! tree of directories is flat (a directory is where its children are in one list, its name
//! where it is in one string), so it costs its segments and a few bytes each, never a copy of
//! every prefix of every path; a `SKILL.md`'s front matter is at most
//! [`MAX_FRONTMATTER_BYTES`], [`MAX_FRONTMATTER_NODES`] values and [`MAX_FRONTMATTER_DEPTH`]
//! levels, and may use no YAML anchor or alias (an alias is a copy of its anchor's value, so
//! a few hundred bytes of them are gigabytes); what was refused is reported for the first
//! [`MAX_REFUSALS_REPORTED`] items. With a plugin name of up to 64 bytes,
//! [`Skills::held_bytes`] is at most [`HELD_BYTES_PER_SECTION_BYTE`] times the sections'
//! bytes (a unit test builds the worst trees the bounds allow: 25 times, for skills full of
//! empty files); the catalog adds each file's URI twice more (its index and its claim).
//!
//! What this module makes for each skill: its entry (`skills/list`, `skills/get`), each file
//! as a resource (listed and read like any other, with its digest), and the tree of its
//! directories for `resources/directory/read`. Serving them is the catalog's business.
//!
//! Uses: nothing else in the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The name of the custom sections that carry a plugin's skills.
pub const SECTION: &str = "mcpbox-skills";
/// The media type of a directory resource.
pub const DIRECTORY_MIME: &str = "inode/directory";
/// The version of the section's format this host reads.
pub const FORMAT_VERSION: u32 = 1;
/// The most files one skill may have (the extension's limit).
pub const MAX_FILES: usize = 512;
/// The most bytes one skill's files may hold together (the extension's limit).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// The most bytes a `SKILL.md`'s front matter may hold: far more than the Agent Skills fields
/// need, and a bound on what the YAML parser is given.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// The deepest nesting of the front matter's values.
pub const MAX_FRONTMATTER_DEPTH: usize = 32;
/// The most values (scalars, sequences and mappings) a front matter may hold: far more than
/// the Agent Skills fields need.
pub const MAX_FRONTMATTER_NODES: usize = 1024;
/// The most `/`-separated segments a file's path may have, its skill's directories included:
/// Agent Skills trees are shallow (`SKILL.md`, `scripts/`, `references/`, `assets/`).
pub const MAX_PATH_SEGMENTS: usize = 16;
/// The most bytes a file's path may have.
pub const MAX_PATH_BYTES: usize = 512;
/// The most refusals kept and logged for one plugin; the rest are counted in one more.
pub const MAX_REFUSALS_REPORTED: usize = 32;
/// What a plugin's skills may hold, at most, for each byte of its sections (with a plugin name
/// of up to 64 bytes): see [`Skills::held_bytes`].
pub const HELD_BYTES_PER_SECTION_BYTE: usize = 32;

/// One section's document.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    files: Vec<PackedFile>,
}

/// One file of a section.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PackedFile {
    path: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
}

/// The document of one section holding `files` (path relative to the skill tree, content):
/// what `mcpbox skills add` and the SDKs write.
pub fn encode(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, bytes)| match std::str::from_utf8(bytes) {
            Ok(text) => json!({ "path": path, "text": text }),
            Err(_) => json!({
                "path": path,
                "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
        })
        .collect();
    json!({ "version": FORMAT_VERSION, "files": files })
        .to_string()
        .into_bytes()
}

/// The files under `dir` (names starting with `.` left out), with their paths from `dir`.
pub fn read_tree(dir: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<(), String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            // Not followed, so no link can loop or reach outside the tree, and nothing but a
            // regular file is read (a FIFO would never end).
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if kind.is_dir() {
                walk(root, &path, out)?;
                continue;
            }
            if !kind.is_file() {
                return Err(format!(
                    "{} is not a regular file or directory (links are not followed)",
                    path.display()
                ));
            }
            let relative = path
                .strip_prefix(root)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let bytes =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            out.push((relative, bytes));
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

/// `wasm` (a component) with `files` as its skills: its top-level [`SECTION`]s replaced by one
/// holding `files` (none for no files). What `mcpbox skills` does for plugins in any language.
pub fn pack(wasm: &[u8], files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    const HEADER: usize = 8;
    if wasm.len() < HEADER || !wasm.starts_with(b"\0asm") {
        return Err("not a WebAssembly file".to_owned());
    }
    if !wasmparser::Parser::is_component(wasm) {
        return Err("a core module, not a component (build for wasm32-wasip2)".to_owned());
    }
    let mut out = wasm[..HEADER].to_vec();
    let mut reader = wasmparser::BinaryReader::new(&wasm[HEADER..], HEADER);
    while !reader.eof() {
        let start = reader.original_position();
        let id = reader.read_u8().map_err(|e| format!("malformed: {e}"))?;
        let size = reader
            .read_var_u32()
            .map_err(|e| format!("malformed: {e}"))?;
        let body_start = reader.original_position();
        let body_end = body_start
            .checked_add(size as usize)
            .filter(|&end| end <= wasm.len())
            .ok_or("malformed: a section runs past the end")?;
        let ours = id == 0
            && wasmparser::BinaryReader::new(&wasm[body_start..body_end], body_start)
                .read_string()
                .is_ok_and(|name| name == SECTION);
        if !ours {
            out.extend_from_slice(&wasm[start..body_end]);
        }
        reader
            .read_bytes(size as usize)
            .map_err(|e| format!("malformed: {e}"))?;
    }
    if files.is_empty() {
        return Ok(out);
    }
    let payload = encode(files);
    let mut body = Vec::with_capacity(payload.len() + SECTION.len() + 5);
    leb128(&mut body, SECTION.len());
    body.extend_from_slice(SECTION.as_bytes());
    body.extend_from_slice(&payload);
    out.push(0);
    leb128(&mut out, body.len());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Append `value` as unsigned LEB128.
#[allow(clippy::cast_possible_truncation, reason = "masked to seven bits")]
fn leb128(out: &mut Vec<u8>, mut value: usize) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One file of a skill, ready to serve.
#[derive(Debug)]
pub struct SkillFile {
    /// `skill://PLUGIN/SKILL-PATH/FILE-PATH`.
    pub uri: String,
    /// `sha256:` and the hex digest of its bytes.
    pub digest: String,
    /// Its `Resource` object, as `resources/list` and directory reads show it.
    pub resource: Arc<RawValue>,
    /// Its `ResourceContents` object, as `resources/read` returns it: the bytes as `text` when
    /// they are UTF-8, else as a Base64 `blob` (made once, at load).
    pub contents: Arc<RawValue>,
}

/// One skill, ready to serve.
#[derive(Debug)]
pub struct Skill {
    /// Its `SKILL.md`'s URI: how it is named.
    pub uri: String,
    /// Its files, `SKILL.md` first.
    pub files: Vec<Arc<SkillFile>>,
    /// Its entry, as `skills/list` and `skills/get` show it.
    pub entry: Arc<RawValue>,
}

/// A directory of a plugin's skill tree, as read: its direct children, sorted by name.
#[derive(Debug, Clone, Copy)]
pub struct Directory<'a> {
    children: &'a [Child],
    /// The names of the tree's directories, end to end.
    names: &'a str,
}

/// Where a directory's children are in [`Skills::children`]. The tree is flat: a directory
/// holds no path, no name and no allocation of its own, so it costs a few bytes more than its
/// name, whatever its depth.
#[derive(Debug, Clone, Copy)]
struct Node {
    start: u32,
    len: u32,
}

/// A child of a directory.
#[derive(Debug)]
enum Child {
    /// A file.
    File(Arc<SkillFile>),
    /// A subdirectory: where its name is in [`Skills::names`] (start and length), and its
    /// index in [`Skills::directories`].
    Directory { name: (u32, u32), index: u32 },
}

impl Child {
    fn name<'a>(&'a self, names: &'a str) -> &'a str {
        match self {
            Self::File(file) => file.uri.rsplit('/').next().unwrap_or_default(),
            Self::Directory {
                name: (start, len), ..
            } => {
                let start = *start as usize;
                names.get(start..start + *len as usize).unwrap_or_default()
            }
        }
    }
}

impl<'a> Directory<'a> {
    /// Its direct children as the directory at `uri` (this one's URI) lists them, sorted by
    /// URI: each one's `Resource` object, and the URI of the file it is (`None` for a
    /// directory, whose object is made now).
    pub fn children(self, uri: &'a str) -> impl Iterator<Item = (Arc<RawValue>, Option<&'a str>)> {
        self.children.iter().filter_map(move |child| match child {
            Child::File(file) => Some((Arc::clone(&file.resource), Some(file.uri.as_str()))),
            Child::Directory { .. } => {
                let name = child.name(self.names);
                raw(&json!({
                    "uri": format!("{uri}/{name}"),
                    "name": name,
                    "mimeType": DIRECTORY_MIME,
                }))
                .ok()
                .map(|resource| (resource, None))
            }
        })
    }
}

/// A plugin's skills, read from its component.
#[derive(Debug, Default)]
pub struct Skills {
    /// The skills it serves, in path order.
    pub skills: Vec<Skill>,
    /// `skill://PLUGIN`: its tree's root.
    base: String,
    /// The directories of its served skills' tree, its root first (none without skills).
    directories: Vec<Node>,
    /// Every directory's children, each directory's together.
    children: Vec<Child>,
    /// The names of its directories, end to end.
    names: String,
    /// What was refused (a skill's path, or the section), and why: the first
    /// [`MAX_REFUSALS_REPORTED`], then how many more.
    pub refused: Vec<(String, String)>,
}

impl Skills {
    /// Whether the component carried no skills' files at all (none served, none refused).
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty() && self.refused.is_empty()
    }

    /// `skill://PLUGIN`, the URI of its tree's root (empty when it has no skills).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The directory of its served skills' tree at `uri`, if there is one.
    pub fn directory(&self, uri: &str) -> Option<Directory<'_>> {
        let rest = uri.strip_prefix(self.base.as_str())?;
        let mut at = self.node_children(*self.directories.first()?)?;
        if !rest.is_empty() {
            for segment in rest.strip_prefix('/')?.split('/') {
                let i = at
                    .binary_search_by(|child| child.name(&self.names).cmp(segment))
                    .ok()?;
                match at.get(i)? {
                    Child::Directory { index, .. } => {
                        at = self.node_children(*self.directories.get(*index as usize)?)?;
                    }
                    Child::File(_) => return None,
                }
            }
        }
        Some(Directory {
            children: at,
            names: &self.names,
        })
    }

    fn node_children(&self, node: Node) -> Option<&[Child]> {
        let start = node.start as usize;
        self.children.get(start..start + node.len as usize)
    }

    /// The bytes it holds: its strings and serialised JSON, and the structures that hold
    /// them (a file shared by a skill and a directory counted once). At most
    /// [`HELD_BYTES_PER_SECTION_BYTE`] times its sections' bytes (see the module's doc).
    pub fn held_bytes(&self) -> usize {
        use std::mem::size_of;
        let skills: usize = self
            .skills
            .iter()
            .map(|skill| {
                size_of::<Skill>()
                    + skill.uri.len()
                    + skill.entry.get().len()
                    + skill
                        .files
                        .iter()
                        .map(|file| {
                            size_of::<Arc<SkillFile>>()
                                + size_of::<SkillFile>()
                                + file.uri.len()
                                + file.digest.len()
                                + file.resource.get().len()
                                + file.contents.get().len()
                        })
                        .sum::<usize>()
            })
            .sum();
        let tree = self.directories.len() * size_of::<Node>()
            + self.children.len() * size_of::<Child>()
            + self.names.len();
        let refused: usize = self
            .refused
            .iter()
            .map(|(what, why)| size_of::<(String, String)>() + what.len() + why.len())
            .sum();
        size_of::<Self>() + self.base.len() + skills + tree + refused
    }

    /// The skills in the component `wasm` of plugin `plugin`: the files of every [`SECTION`]
    /// (of the component or of a module nested in it), grouped into skills and checked. A
    /// section refused is refused whole: none of its files is taken.
    pub fn from_component(plugin: &str, wasm: &[u8]) -> Self {
        let mut out = Self::default();
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for section in sections(wasm) {
            let taken = |own: &BTreeMap<String, Vec<u8>>| match own
                .keys()
                .find(|path| files.contains_key(*path))
            {
                Some(path) => Err(format!("file `{path}` is packed in an earlier section too")),
                None => Ok(()),
            };
            match unpack(section).and_then(|own| taken(&own).map(|()| own)) {
                Ok(own) => files.extend(own),
                Err(why) => out.refused.push((format!("section `{SECTION}`"), why)),
            }
        }
        if !files.is_empty() {
            out.build(plugin, &files);
        }
        out.cap_refusals();
        for (what, why) in &out.refused {
            tracing::warn!(plugin, "refused skill {what}: {why}");
        }
        out
    }

    /// Keep the first [`MAX_REFUSALS_REPORTED`] refusals, and say how many more there were.
    fn cap_refusals(&mut self) {
        if self.refused.len() > MAX_REFUSALS_REPORTED {
            let more = self.refused.len() - MAX_REFUSALS_REPORTED;
            self.refused.truncate(MAX_REFUSALS_REPORTED);
            self.refused.push((
                format!("{more} more"),
                format!("only the first {MAX_REFUSALS_REPORTED} refusals are reported"),
            ));
        }
    }

    /// Group `files` into skills under `skill://plugin/`, keeping those that pass.
    fn build(&mut self, plugin: &str, files: &BTreeMap<String, Vec<u8>>) {
        let roots: BTreeSet<&str> = files
            .keys()
            .filter_map(|path| match path.rsplit_once('/') {
                Some((dir, "SKILL.md")) => Some(dir),
                _ => None,
            })
            .collect();
        for path in files.keys() {
            // Inside a skill when one of its directories is a skill's.
            let inside = path
                .match_indices('/')
                .any(|(end, _)| roots.contains(&path[..end]));
            if !inside {
                let why = if path == "SKILL.md" {
                    "a SKILL.md must be in its skill's directory (`NAME/SKILL.md`), not at the top"
                        .to_owned()
                } else {
                    "not inside a skill's directory (one holding a SKILL.md)".to_owned()
                };
                self.refused.push((format!("file `{path}`"), why));
            }
        }
        self.base = format!("skill://{plugin}");
        for root in &roots {
            let prefix = format!("{root}/");
            let own: Vec<(&String, &Vec<u8>)> = files
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .take_while(|(path, _)| path.starts_with(&prefix))
                .collect();
            match skill(&self.base, root, &own) {
                Ok(skill) => self.skills.push(skill),
                Err(why) => self.refused.push((format!("`{root}`"), why)),
            }
        }
        let tree = Tree::of(&self.base, &self.skills);
        (self.directories, self.children, self.names) = (tree.nodes, tree.children, tree.names);
    }
}

/// The payloads of every [`SECTION`] in `wasm`, nested modules and components included. Code
/// sections are stepped over whole (function bodies hold no custom sections): walking each
/// body was most of the scan's time, 70 µs a plugin at every load.
fn sections(wasm: &[u8]) -> Vec<&[u8]> {
    use wasmparser::{Chunk, Parser, Payload};
    let mut out = Vec::new();
    // The parser of each module or component being read, the innermost last.
    let mut parsers = vec![Parser::new(0)];
    let mut rest = wasm;
    while let Some(parser) = parsers.last_mut() {
        let (consumed, payload) = match parser.parse(rest, true) {
            Ok(Chunk::Parsed { consumed, payload }) => (consumed, payload),
            // The engine reports a malformed component; there are no skills to read in it.
            Ok(Chunk::NeedMoreData(_)) | Err(_) => break,
        };
        rest = rest.get(consumed..).unwrap_or_default();
        match payload {
            Payload::CustomSection(reader) if reader.name() == SECTION => {
                out.push(reader.data());
            }
            Payload::CodeSectionStart { size, .. } => {
                parser.skip_section();
                let Some(after) = usize::try_from(size).ok().and_then(|size| rest.get(size..))
                else {
                    break;
                };
                rest = after;
            }
            Payload::ModuleSection { parser: nested, .. }
            | Payload::ComponentSection { parser: nested, .. } => parsers.push(nested),
            Payload::End(_) => {
                parsers.pop();
            }
            _ => {}
        }
    }
    out
}

/// The files of one section's document, all or nothing.
fn unpack(section: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let document: Document =
        serde_json::from_slice(section).map_err(|e| format!("not a skills document: {e}"))?;
    if document.version != FORMAT_VERSION {
        return Err(format!(
            "format version {} (this mcpbox reads version {FORMAT_VERSION})",
            document.version
        ));
    }
    let mut files = BTreeMap::new();
    for file in document.files {
        if let Some(why) = path_problem(&file.path) {
            return Err(format!("file path `{}`: {why}", file.path));
        }
        let bytes = match (file.text, file.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map_err(|e| format!("file `{}`: its base64 does not decode: {e}", file.path))?,
            _ => {
                return Err(format!(
                    "file `{}` must have exactly one of `text` and `base64`",
                    file.path
                ));
            }
        };
        if files.insert(file.path.clone(), bytes).is_some() {
            return Err(format!("file `{}` is packed twice", file.path));
        }
    }
    Ok(files)
}

/// Why `path` cannot be a file's path in a skill tree, if it cannot: it must be relative,
/// `/`-separated, at most [`MAX_PATH_SEGMENTS`] segments and [`MAX_PATH_BYTES`] bytes, and
/// each segment made of letters, digits and `-._~` (so that every URI is written as it is,
/// with nothing to escape), not `.` or `..`.
fn path_problem(path: &str) -> Option<String> {
    // Counted first: a deep tree's paths are long too, and its depth is what costs.
    let segments = path.split('/').count();
    if segments > MAX_PATH_SEGMENTS {
        return Some(format!(
            "has {segments} segments; a path may have at most {MAX_PATH_SEGMENTS}"
        ));
    }
    if path.is_empty() || path.len() > MAX_PATH_BYTES {
        return Some(format!("must have 1 to {MAX_PATH_BYTES} bytes"));
    }
    for segment in path.split('/') {
        if segment.is_empty() {
            return Some("has an empty segment (a leading, trailing or doubled `/`)".to_owned());
        }
        if segment == "." || segment == ".." {
            return Some("has a `.` or `..` segment".to_owned());
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        {
            return Some(
                "may hold only ASCII letters, digits and `-._~` between its `/`s".to_owned(),
            );
        }
    }
    None
}

/// Whether `name` follows the Agent Skills naming rules: 1 to 64 lowercase letters, digits
/// and hyphens, no hyphen first, last or twice in a row.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The skill at `root` (its files `own`, paths from the tree's top), served under `base`.
fn skill(base: &str, root: &str, own: &[(&String, &Vec<u8>)]) -> Result<Skill, String> {
    let name = root.rsplit('/').next().unwrap_or(root);
    if !valid_name(name) {
        return Err(format!(
            "`{name}` is not a skill name: 1 to 64 lowercase letters, digits and hyphens, no hyphen first, last or twice in a row"
        ));
    }
    if own.len() > MAX_FILES {
        return Err(format!(
            "it has {} files; a skill may have at most {MAX_FILES}",
            own.len()
        ));
    }
    // `own` is in path order: the paths under `path/`, if any, begin where `path/` would be.
    for (path, _) in own {
        let below = format!("{path}/");
        let at = own.partition_point(|(other, _)| other.as_str() < below.as_str());
        if own
            .get(at)
            .is_some_and(|(other, _)| other.starts_with(&below))
        {
            return Err(format!("`{path}` is both a file and a directory"));
        }
    }
    let total: u64 = own.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    if total > MAX_SKILL_BYTES {
        return Err(format!(
            "its files hold {total} bytes; a skill may hold at most {MAX_SKILL_BYTES}"
        ));
    }
    let manifest_path = format!("{root}/SKILL.md");
    let manifest = own
        .iter()
        .find(|(path, _)| **path == manifest_path)
        .map(|(_, bytes)| bytes.as_slice())
        .ok_or("it has no SKILL.md")?;
    let text = std::str::from_utf8(manifest).map_err(|_| "its SKILL.md is not UTF-8")?;
    let frontmatter = frontmatter(text)?;
    let field = |key: &str| -> Result<String, String> {
        match frontmatter.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(format!(
                "its SKILL.md's front matter has no non-empty string `{key}`"
            )),
        }
    };
    let (own_name, description) = (field("name")?, field("description")?);
    if own_name != name {
        return Err(format!(
            "its SKILL.md names it `{own_name}`, but its directory is `{name}`: the two must be equal"
        ));
    }
    if let Some(Value::Object(metadata)) = frontmatter.get("metadata") {
        for key in metadata
            .keys()
            .filter(|k| k.starts_with("io.modelcontextprotocol/"))
        {
            tracing::warn!(
                skill = name,
                "metadata key `{key}` is reserved for MCP extensions, and none defines it"
            );
        }
    }
    let uri = format!("{base}/{manifest_path}");
    let mut files: Vec<Arc<SkillFile>> = Vec::with_capacity(own.len());
    let mut resources: Vec<Value> = Vec::with_capacity(own.len());
    // SKILL.md first, then the rest in path order (as `own` is).
    let (manifest_first, rest): (Vec<_>, Vec<_>) =
        own.iter().partition(|(path, _)| **path == manifest_path);
    for (path, bytes) in manifest_first.into_iter().chain(rest) {
        let file_uri = format!("{base}/{path}");
        let is_manifest = **path == manifest_path;
        let mime = if is_manifest {
            "text/markdown".to_owned()
        } else {
            mime_of(path, bytes)
        };
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let mut resource = json!({
            "uri": file_uri,
            "name": if is_manifest { name } else { file_name },
            "mimeType": mime,
            "size": bytes.len(),
        });
        if is_manifest {
            resource["description"] = json!(description);
        }
        let mut contents = json!({ "uri": file_uri, "mimeType": mime });
        match std::str::from_utf8(bytes) {
            Ok(text) => contents["text"] = json!(text),
            Err(_) => {
                contents["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
        resources.push(json!({ "uri": file_uri, "digest": digest, "size": bytes.len() }));
        files.push(Arc::new(SkillFile {
            uri: file_uri,
            digest,
            resource: raw(&resource)?,
            contents: raw(&contents)?,
        }));
    }

    let entry = json!({
        "uri": uri,
        "frontmatter": Value::Object(frontmatter),
        "resources": resources,
    });
    Ok(Skill {
        uri,
        files,
        entry: raw(&entry)?,
    })
}

/// `value` as JSON text.
fn raw(value: &Value) -> Result<Arc<RawValue>, String> {
    serde_json::value::to_raw_value(value)
        .map(Arc::from)
        .map_err(|e| format!("could not serialise it: {e}"))
}

/// The media type of the file at `path`: by its extension, else text or bytes.
fn mime_of(path: &str, bytes: &[u8]) -> String {
    if let Some(mime) = mime_guess::from_path(path).first_raw() {
        return mime.to_owned();
    }
    if std::str::from_utf8(bytes).is_ok() {
        "text/plain".to_owned()
    } else {
        "application/octet-stream".to_owned()
    }
}

/// The URI of the root of the skill tree `uri` is in (`skill://PLUGIN`, what
/// [`Skills::base`] is); `uri` itself when it is not a skill's.
pub fn tree_of(uri: &str) -> &str {
    const SCHEME: &str = "skill://";
    match uri.strip_prefix(SCHEME).and_then(|rest| rest.find('/')) {
        Some(end) => &uri[..SCHEME.len() + end],
        None => uri,
    }
}

/// The YAML front matter at the start of a `SKILL.md`, as a JSON object: between a first line
/// `---` and the next line `---`.
pub fn frontmatter(text: &str) -> Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let missing =
        "its SKILL.md does not begin with YAML front matter (a line `---`, the YAML, a line `---`)";
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or(missing)?;
    let mut yaml_end = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line
            .trim_end_matches(['\r', '\n'])
            .trim_end_matches([' ', '\t'])
            == "---"
        {
            yaml_end = Some(offset);
            break;
        }
        offset += line.len();
    }
    let yaml = &rest[..yaml_end.ok_or(missing)?];
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(format!(
            "its SKILL.md's front matter has {} bytes; at most {MAX_FRONTMATTER_BYTES} are read",
            yaml.len()
        ));
    }
    shape_problem(yaml).map_err(|why| format!("its SKILL.md's front matter {why}"))?;
    let documents = yaml_rust2::YamlLoader::load_from_str(yaml)
        .map_err(|e| format!("its SKILL.md's front matter is not YAML: {e}"))?;
    match documents.into_iter().next().map(|doc| yaml_json(&doc, 0)) {
        Some(Ok(Value::Object(map))) => Ok(map),
        Some(Err(why)) => Err(format!("its SKILL.md's front matter: {why}")),
        _ => Err("its SKILL.md's front matter is not a mapping".to_owned()),
    }
}

/// Why loading `yaml` would cost more than its size, read from the parser's events before
/// any value is built: a YAML anchor or alias (the loader copies an anchor's value for each
/// alias, so a few hundred bytes of them become gigabytes), more than
/// [`MAX_FRONTMATTER_NODES`] values, or collections nested more than
/// [`MAX_FRONTMATTER_DEPTH`] deep.
fn shape_problem(yaml: &str) -> Result<(), String> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(yaml);
    let (mut nodes, mut depth) = (0_usize, 0_usize);
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| format!("is not YAML: {e}"))?;
        let anchor = match event {
            Event::StreamEnd => return Ok(()),
            Event::Alias(_) => {
                return Err(format!(
                    "uses a YAML alias (`*`) on the SKILL.md's line {}; anchors and aliases are refused",
                    mark.line() + 1
                ));
            }
            Event::Scalar(_, _, anchor, _) => anchor,
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                depth += 1;
                anchor
            }
            Event::SequenceEnd | Event::MappingEnd => {
                depth = depth.saturating_sub(1);
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
        };
        if anchor != 0 {
            return Err(format!(
                "uses a YAML anchor (`&`) on the SKILL.md's line {}; anchors and aliases are refused",
                mark.line() + 1
            ));
        }
        nodes += 1;
        if nodes > MAX_FRONTMATTER_NODES {
            return Err(format!("has more than {MAX_FRONTMATTER_NODES} values"));
        }
        if depth > MAX_FRONTMATTER_DEPTH {
            return Err(format!(
                "nests collections deeper than {MAX_FRONTMATTER_DEPTH} levels"
            ));
        }
    }
}

/// A YAML value as JSON: mappings need string keys, nesting at most
/// [`MAX_FRONTMATTER_DEPTH`] deep (`depth` is this value's).
fn yaml_json(yaml: &yaml_rust2::Yaml, depth: usize) -> Result<Value, String> {
    use yaml_rust2::Yaml;
    if depth > MAX_FRONTMATTER_DEPTH {
        return Err(format!(
            "it nests deeper than {MAX_FRONTMATTER_DEPTH} levels"
        ));
    }
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => json!(i),
        Yaml::Real(text) => match text.parse::<f64>() {
            Ok(f) if f.is_finite() => json!(f),
            _ => return Err(format!("`{text}` is not a finite number")),
        },
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| yaml_json(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(hash) => {
            let mut map = Map::new();
            for (key, value) in hash {
                let key = match key {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err("a mapping key is not a string".to_owned()),
                };
                map.insert(key, yaml_json(value, depth + 1)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err("it uses a YAML alias or a value JSON cannot hold".to_owned());
        }
    })
}

/// The directories of a skill tree, made flat ([`Node`]s in [`Skills`]).
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    children: Vec<Child>,
    names: String,
}

impl Tree {
    /// The tree of the served skills' files under `base`, its root first. Their paths sorted
    /// segment by segment, each directory's files are a run of them: its children are laid
    /// down together, then each subdirectory's, in turn; no map and no allocation per
    /// directory (one per directory was most of what a deep tree cost at load).
    fn of(base: &str, served: &[Skill]) -> Self {
        let mut files: Vec<(&str, &Arc<SkillFile>)> = served
            .iter()
            .flat_map(|skill| &skill.files)
            .filter_map(|file| {
                let relative = file.uri.strip_prefix(base)?.strip_prefix('/')?;
                Some((relative, file))
            })
            .collect();
        files.sort_by(|(a, _), (b, _)| a.split('/').cmp(b.split('/')));
        let mut tree = Self::default();
        // A tree too big to index in 32 bits (never met: a section is under 4 GiB) is left
        // with what was laid down.
        let _ = tree.lay_down(&files);
        tree
    }

    /// Lay down the directory of the run `files` (at `depth` segments), then its subdirectories.
    fn lay_down(&mut self, files: &[(&str, &Arc<SkillFile>)]) -> Option<()> {
        fn segment(path: &str, depth: usize) -> Option<&str> {
            path.split('/').nth(depth)
        }
        let mut pending = std::collections::VecDeque::from([(0_usize, files, 0_usize)]);
        self.nodes.push(Node { start: 0, len: 0 });
        while let Some((index, run, depth)) = pending.pop_front() {
            let start = self.children.len();
            let mut rest = run;
            while let Some(&(first, file)) = rest.first() {
                let name = segment(first, depth)?;
                let end = rest
                    .iter()
                    .position(|(path, _)| segment(path, depth) != Some(name))
                    .unwrap_or(rest.len());
                let (same, after) = rest.split_at(end);
                rest = after;
                // Paths that end here sort first: a file, listed once (a file of two skills,
                // one inside the other, is in both), unless it is also a directory (`skill`
                // refuses a skill with one).
                let deeper = same
                    .iter()
                    .position(|(path, _)| segment(path, depth + 1).is_some())
                    .unwrap_or(same.len());
                if deeper == same.len() {
                    self.children.push(Child::File(Arc::clone(file)));
                    continue;
                }
                let sub = self.nodes.len();
                self.names.push_str(name);
                self.children.push(Child::Directory {
                    name: (small(self.names.len() - name.len())?, small(name.len())?),
                    index: small(sub)?,
                });
                self.nodes.push(Node { start: 0, len: 0 });
                pending.push_back((sub, &same[deeper..], depth + 1));
            }
            *self.nodes.get_mut(index)? = Node {
                start: small(start)?,
                len: small(self.children.len() - start)?,
            };
        }
        Some(())
    }
}

/// `n` as a 32-bit index, if it fits.
fn small(n: usize) -> Option<u32> {
    u32::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Skills {
        let mut out = Skills::default();
        out.build(
            "demo",
            &files
                .iter()
                .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
                .collect(),
        );
        out
    }

    /// Directories are found by name whatever their paths sort as (`a-c/…` sorts before
    /// `a/…`, `a` before `a-c`), and a file of two skills, one inside the other, is listed once.
    #[test]
    fn directories_are_found_whatever_their_paths_sort_as() {
        let manifest = |name: &str| format!("---\nname: {name}\ndescription: d\n---\n");
        let skills = tree(&[
            ("a/SKILL.md", &manifest("a")),
            ("a/x/y.md", "y"),
            ("a-c/SKILL.md", &manifest("a-c")),
            ("a-c/z/w.md", "w"),
            ("a/b/SKILL.md", &manifest("b")),
        ]);
        assert!(skills.refused.is_empty(), "{:?}", skills.refused);
        let names = |uri: &str| -> Vec<String> {
            skills
                .directory(uri)
                .unwrap_or_else(|| panic!("{uri}"))
                .children(uri)
                .map(|(r, _)| {
                    let r: Value = serde_json::from_str(r.get()).unwrap();
                    r["uri"].as_str().unwrap().to_owned()
                })
                .collect()
        };
        assert_eq!(
            names("skill://demo"),
            ["skill://demo/a", "skill://demo/a-c"]
        );
        assert_eq!(
            names("skill://demo/a"),
            [
                "skill://demo/a/SKILL.md",
                "skill://demo/a/b",
                "skill://demo/a/x"
            ]
        );
        assert_eq!(names("skill://demo/a/b"), ["skill://demo/a/b/SKILL.md"]);
        assert_eq!(names("skill://demo/a-c/z"), ["skill://demo/a-c/z/w.md"]);
        assert_eq!(names("skill://demo/a/x"), ["skill://demo/a/x/y.md"]);
    }

    const REVIEW: &str = "---\nname: review\ndescription: Review a change\nmetadata:\n  version: \"2\"\n---\n# Review\n";

    #[test]
    fn a_skill_gets_its_entry_files_and_directories() {
        let skills = tree(&[
            ("review/SKILL.md", REVIEW),
            ("review/references/CHECKLIST.md", "- tests\n"),
        ]);
        assert!(skills.refused.is_empty(), "{:?}", skills.refused);
        let skill = &skills.skills[0];
        assert_eq!(skill.uri, "skill://demo/review/SKILL.md");
        let entry: Value = serde_json::from_str(skill.entry.get()).unwrap();
        assert_eq!(entry["frontmatter"]["name"], "review");
        assert_eq!(entry["frontmatter"]["metadata"]["version"], "2");
        let resources = entry["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[0]["uri"], "skill://demo/review/SKILL.md");
        assert_eq!(resources[0]["size"], REVIEW.len());
        assert_eq!(
            resources[0]["digest"],
            format!("sha256:{}", hex::encode(Sha256::digest(REVIEW.as_bytes())))
        );
        for uri in [
            "skill://demo",
            "skill://demo/review",
            "skill://demo/review/references",
        ] {
            assert!(skills.directory(uri).is_some(), "{uri}");
        }
        for uri in [
            "skill://demo/",
            "skill://demo/review/",
            "skill://demo/review/SKILL.md",
            "skill://demo/other",
            "skill://demox",
            "skill://other/review",
        ] {
            assert!(skills.directory(uri).is_none(), "{uri}");
        }
        let top: Vec<Value> = skills
            .directory("skill://demo")
            .unwrap()
            .children("skill://demo")
            .map(|(r, file)| {
                assert_eq!(file, None);
                serde_json::from_str(r.get()).unwrap()
            })
            .collect();
        assert_eq!(
            top,
            [json!({"uri": "skill://demo/review", "name": "review", "mimeType": DIRECTORY_MIME})]
        );
        let uri = "skill://demo/review";
        let children: Vec<(Value, Option<&str>)> = skills
            .directory(uri)
            .unwrap()
            .children(uri)
            .map(|(r, file)| (serde_json::from_str(r.get()).unwrap(), file))
            .collect();
        assert_eq!(children[0].1, Some("skill://demo/review/SKILL.md"));
        let children: Vec<Value> = children.into_iter().map(|(r, _)| r).collect();
        assert_eq!(children[1]["mimeType"], DIRECTORY_MIME);
    }

    #[test]
    fn broken_skills_are_refused_with_the_reason_and_the_rest_served() {
        let skills = tree(&[
            ("good/SKILL.md", "---\nname: good\ndescription: Fine\n---\n"),
            (
                "bad/SKILL.md",
                "---\nname: other\ndescription: Wrong\n---\n",
            ),
            (
                "Caps/SKILL.md",
                "---\nname: Caps\ndescription: Upper\n---\n",
            ),
            ("plain/SKILL.md", "no front matter"),
            ("nodesc/SKILL.md", "---\nname: nodesc\n---\n"),
            ("stray.md", "outside"),
        ]);
        assert_eq!(skills.skills.len(), 1);
        let why = |what: &str| {
            skills
                .refused
                .iter()
                .find(|(w, _)| w.contains(what))
                .map(|(_, why)| why.clone())
                .unwrap_or_default()
        };
        assert!(why("bad").contains("must be equal"), "{:?}", skills.refused);
        assert!(why("Caps").contains("not a skill name"));
        assert!(why("plain").contains("front matter"));
        assert!(why("nodesc").contains("`description`"));
        assert!(why("stray.md").contains("not inside"));
    }

    /// Sections are found in nested modules too, after a code section stepped over whole, and
    /// at the top level; other custom sections are not taken.
    #[test]
    fn sections_are_found_past_code_and_inside_nested_modules() {
        fn section(id: u8, content: &[u8]) -> Vec<u8> {
            let mut out = vec![id, u8::try_from(content.len()).unwrap()];
            out.extend_from_slice(content);
            out
        }
        fn custom(name: &str, payload: &[u8]) -> Vec<u8> {
            let mut content = vec![u8::try_from(name.len()).unwrap()];
            content.extend_from_slice(name.as_bytes());
            content.extend_from_slice(payload);
            section(0, &content)
        }
        let mut module = b"\0asm\x01\0\0\0".to_vec();
        module.extend(section(1, &[1, 0x60, 0, 0])); // one type: () -> ()
        module.extend(section(3, &[1, 0])); // one function of it
        module.extend(section(10, &[1, 2, 0, 0x0b])); // its body: no locals, `end`
        module.extend(custom(SECTION, b"inner"));
        module.extend(custom("name", b"other"));
        let mut component = b"\0asm\x0d\0\x01\0".to_vec();
        component.extend(section(1, &module)); // a core module
        component.extend(custom(SECTION, b"outer"));
        assert_eq!(
            sections(&component),
            [b"inner".as_slice(), b"outer".as_slice()]
        );
        // Cut short inside the code section: what was read before it is all there is.
        assert!(sections(&component[..module.len() - 20]).is_empty());
    }

    #[test]
    fn sections_round_trip_and_bad_ones_are_refused() {
        let packed = encode(&[
            ("a/SKILL.md".to_owned(), b"text".to_vec()),
            ("a/x.bin".to_owned(), vec![0xff, 0x00]),
        ]);
        let files = unpack(&packed).unwrap();
        assert_eq!(files["a/x.bin"], vec![0xff, 0x00]);
        let twice = r#"{"version":1,"files":[{"path":"x","text":""},{"path":"x","text":""}]}"#;
        assert!(
            unpack(twice.as_bytes())
                .unwrap_err()
                .contains("packed twice")
        );
        for (doc, expected) in [
            (r#"{"version":2,"files":[]}"#, "format version"),
            (
                r#"{"version":1,"files":[{"path":"../x","text":""}]}"#,
                "`..`",
            ),
            (
                r#"{"version":1,"files":[{"path":"/x","text":""}]}"#,
                "empty",
            ),
            (
                r#"{"version":1,"files":[{"path":"a b","text":""}]}"#,
                "ASCII",
            ),
            (r#"{"version":1,"files":[{"path":"x"}]}"#, "exactly one"),
            ("not json", "not a skills document"),
        ] {
            let why = unpack(doc.as_bytes()).unwrap_err();
            assert!(why.contains(expected), "{doc}: {why}");
        }
    }

    #[test]
    fn front_matter_is_bounded_in_size_and_depth() {
        let deep = format!(
            "---\nname: deep\ndescription: d\nx: {}1{}\n---\n",
            "[".repeat(200),
            "]".repeat(200)
        );
        let big = format!(
            "---\nname: big\ndescription: {}\n---\n",
            "a".repeat(MAX_FRONTMATTER_BYTES)
        );
        let skills = tree(&[("deep/SKILL.md", &deep), ("big/SKILL.md", &big)]);
        assert!(skills.skills.is_empty());
        let reasons: Vec<&str> = skills.refused.iter().map(|(_, why)| why.as_str()).collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("deeper") || r.contains("recursion")),
            "{reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r.contains("at most 65536")),
            "{reasons:?}"
        );
    }

    /// Issue #55: a few hundred bytes of front matter, each level nine aliases of the one
    /// before, became megabytes of entry and hundreds of MiB of memory: the parser expanded
    /// every alias while loading, so the refusal of aliases never saw one.
    #[test]
    fn issue_55_an_alias_bomb_is_refused_before_anything_is_expanded() {
        let mut yaml =
            String::from("---\nname: bomb\ndescription: d\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n");
        for level in 1..=5 {
            let aliases = vec![format!("*l{}", level - 1); 9].join(", ");
            yaml.push_str(&format!("l{level}: &l{level} [{aliases}]\n"));
        }
        yaml.push_str("---\n");
        assert!(yaml.len() < 400, "{}", yaml.len());
        let why = frontmatter(&yaml).map(|m| m.len()).unwrap_err();
        assert_eq!(
            why,
            "its SKILL.md's front matter uses a YAML anchor (`&`) on the SKILL.md's line 4; anchors and aliases are refused"
        );
        // An anchor alone is refused too, and so is an alias of no anchor.
        let why = frontmatter("---\nname: a\ndescription: &d text\n---\n").unwrap_err();
        assert!(
            why.contains("uses a YAML anchor (`&`) on the SKILL.md's line 3"),
            "{why}"
        );
        let why = frontmatter("---\nname: a\ndescription: d\nx: *d\n---\n").unwrap_err();
        assert!(
            why.contains("alias") || why.contains("is not YAML"),
            "{why}"
        );
    }

    #[test]
    fn issue_55_front_matter_is_bounded_in_values() {
        let items = vec!["1"; MAX_FRONTMATTER_NODES].join(",");
        let yaml = format!("---\nname: a\ndescription: d\nx: [{items}]\n---\n");
        let why = frontmatter(&yaml).map(|m| m.len()).unwrap_err();
        assert_eq!(
            why,
            format!("its SKILL.md's front matter has more than {MAX_FRONTMATTER_NODES} values")
        );
        // The mapping, its six keys and scalars, and the sequence: at the limit.
        let items = vec!["1"; MAX_FRONTMATTER_NODES - 7].join(",");
        let yaml = format!("---\nname: a\ndescription: d\nx: [{items}]\n---\n");
        assert!(frontmatter(&yaml).is_ok());
    }

    /// A component holding one section with `payload`.
    fn component_with(payload: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        leb128(&mut body, SECTION.len());
        body.extend_from_slice(SECTION.as_bytes());
        body.extend_from_slice(payload);
        let mut out = b"\0asm\x0d\0\x01\0".to_vec();
        out.push(0);
        leb128(&mut out, body.len());
        out.extend_from_slice(&body);
        out
    }

    /// Issue #55: a section refused for one bad path served the files before it.
    #[test]
    fn issue_55_a_refused_section_serves_nothing() {
        let payload = encode(&[
            (
                "dots/SKILL.md".to_owned(),
                b"---\nname: dots\ndescription: d\n---\n".to_vec(),
            ),
            ("dots/../escape.md".to_owned(), b"x".to_vec()),
        ]);
        let skills = Skills::from_component("demo", &component_with(&payload));
        assert_eq!(skills.skills.len(), 0, "{:?}", skills.skills);
        assert_eq!(
            skills.refused,
            [(
                format!("section `{SECTION}`"),
                "file path `dots/../escape.md`: has a `.` or `..` segment".to_owned()
            )]
        );
        assert!(skills.directory("skill://demo/dots").is_none());
    }

    /// Issue #55: 128 files each some 505 directories deep (a 131 KiB section) held an entry,
    /// a URI and a resource for every directory prefix: +202 MiB.
    #[test]
    fn issue_55_the_deep_tree_is_refused_with_the_reason() {
        let mut files = vec![(
            "deep/SKILL.md".to_owned(),
            b"---\nname: deep\ndescription: d\n---\n".to_vec(),
        )];
        for i in 0..127 {
            files.push((format!("deep/b{i:03}/{}f", "a/".repeat(503)), Vec::new()));
        }
        let payload = encode(&files);
        assert!(payload.len() > 128 << 10, "{}", payload.len());
        let skills = Skills::from_component("demo", &component_with(&payload));
        assert!(skills.skills.is_empty());
        assert_eq!(skills.refused.len(), 1, "{:?}", skills.refused);
        assert!(
            skills.refused[0].1.ends_with(&format!(
                "has 506 segments; a path may have at most {MAX_PATH_SEGMENTS}"
            )),
            "{:?}",
            skills.refused
        );
    }

    /// Issue #55: what a plugin's skills hold is a small multiple of their sections' bytes,
    /// for the worst trees the bounds allow (each shape served whole, under a 64-byte name).
    #[test]
    fn issue_55_what_skills_hold_is_a_small_multiple_of_their_size() {
        let manifest = |name: &str| {
            (
                format!("{name}/SKILL.md"),
                format!("---\nname: {name}\ndescription: d\n---\n").into_bytes(),
            )
        };
        let short = |i: usize| format!("{i:x}");
        // Many skills, each only its SKILL.md.
        let skills: Vec<_> = (0..2000)
            .map(|i| manifest(&format!("s{}", short(i))))
            .collect();
        // Skills full of empty files with one-byte names.
        let mut empty = Vec::new();
        for s in 0..8 {
            let name = format!("s{s}");
            empty.push(manifest(&name));
            empty.extend((1..MAX_FILES).map(|i| (format!("{name}/{}", short(i)), Vec::new())));
        }
        // The deepest trees of one-byte segments, each file in directories of its own.
        let mut deep = Vec::new();
        for s in 0..4 {
            let name = format!("s{s}");
            deep.push(manifest(&name));
            let below = "a/".repeat(MAX_PATH_SEGMENTS - 3);
            deep.extend(
                (1..MAX_FILES).map(|i| (format!("{name}/{}/{below}f", short(i)), Vec::new())),
            );
        }
        // The longest paths.
        let mut long = vec![manifest("long")];
        let segment = "x".repeat(MAX_PATH_BYTES / MAX_PATH_SEGMENTS - 1);
        for i in 1..200 {
            let mut path = format!("long/{i:03}");
            while path.len() + segment.len() < MAX_PATH_BYTES
                && path.split('/').count() < MAX_PATH_SEGMENTS
            {
                path.push('/');
                path.push_str(&segment);
            }
            long.push((path, b"x".to_vec()));
        }
        // The fullest front matter.
        let values = vec!["x"; MAX_FRONTMATTER_NODES - 10].join(", ");
        let full = vec![(
            "full/SKILL.md".to_owned(),
            format!("---\nname: full\ndescription: d\nx: [{values}]\n---\n").into_bytes(),
        )];
        let plugin = "p".repeat(64);
        for (shape, files) in [
            ("skills", skills),
            ("empty", empty),
            ("deep", deep),
            ("long", long),
            ("full", full),
        ] {
            let section = encode(&files);
            let held = Skills::from_component(&plugin, &component_with(&section));
            assert!(held.refused.is_empty(), "{shape}: {:?}", held.refused);
            assert!(!held.skills.is_empty(), "{shape}");
            let (held, bytes) = (held.held_bytes(), section.len());
            assert!(
                held <= HELD_BYTES_PER_SECTION_BYTE * bytes,
                "{shape}: {held} bytes held for {bytes} ({}x)",
                held / bytes
            );
        }
    }

    #[test]
    fn limits_hold() {
        let mut files: Vec<(String, String)> = vec![(
            "big/SKILL.md".into(),
            "---\nname: big\ndescription: d\n---\n".into(),
        )];
        for i in 0..MAX_FILES {
            files.push((format!("big/f{i}"), String::new()));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let skills = tree(&refs);
        assert!(skills.skills.is_empty());
        assert!(skills.refused[0].1.contains("at most 512"));
    }

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for good in ["a", "pdf-processing", "x1", &"a".repeat(64)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
