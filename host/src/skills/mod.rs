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
//! This file holds the skills a plugin serves ([`Skills`]) and how they are built; `section`
//! writes and reads the custom section, `frontmatter` reads a `SKILL.md`'s front matter.
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

mod frontmatter;
mod section;

pub use frontmatter::frontmatter;
pub use section::{encode, pack, read_tree};
use section::{sections, unpack};

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
mod tests;
