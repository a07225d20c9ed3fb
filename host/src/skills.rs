//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension): the Agent Skills a plugin
//! ships inside its component, read once at load, checked, and made ready to serve.
//!
//! A plugin carries its skills in custom sections named [`SECTION`] of its component (the Rust
//! SDK's `skills!` writes one; `mcpbox skills add` appends one to any component). Each holds a
//! JSON document, `{"version": 1, "files": [{"path": "review/SKILL.md", "text": "…"},
//! {"path": "review/logo.png", "base64": "…"}]}`; the files of every such section together
//! are the plugin's skill tree. Every directory of it holding a `SKILL.md` is a skill, served
//! under `skill://PLUGIN/PATH/…`: the plugin's name is the first segment, so no plugin can
//! serve another's skills. A skill that breaks the extension's rules (no front matter, a
//! name that is not its directory's, more than 512 files or 16 MiB) is refused with the
//! reason, and the plugin's other skills and items are served.
//!
//! What this module makes for each skill: its entry (`skills/list`, `skills/get`), each file
//! as a resource (listed and read like any other, with its digest), and every directory for
//! `resources/directory/read`. Serving them is the catalog's business.
//!
//! Uses: nothing else in the crate.

use std::collections::{BTreeMap, BTreeSet};
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

/// A directory of a plugin's skill tree.
#[derive(Debug)]
pub struct Directory {
    /// `skill://PLUGIN[/PATH]`, no trailing slash.
    pub uri: String,
    /// Its direct children's `Resource` objects (files and directories), sorted by URI, with
    /// the URI of the file each is (`None` for a directory).
    pub children: Vec<(Arc<RawValue>, Option<String>)>,
}

/// A plugin's skills, read from its component.
#[derive(Debug, Default)]
pub struct Skills {
    /// The skills it serves, in path order.
    pub skills: Vec<Skill>,
    /// Every directory of its served skills' tree (the plugin's root included).
    pub directories: Vec<Directory>,
    /// What was refused (a skill's path, or the section), and why.
    pub refused: Vec<(String, String)>,
}

impl Skills {
    /// Whether the component carried no skills' files at all (none served, none refused).
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty() && self.refused.is_empty()
    }

    /// The skills in the component `wasm` of plugin `plugin`: the files of every [`SECTION`]
    /// (of the component or of a module nested in it), grouped into skills and checked.
    pub fn from_component(plugin: &str, wasm: &[u8]) -> Self {
        let mut out = Self::default();
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for section in sections(wasm) {
            if let Err(why) = unpack(section, &mut files) {
                out.refused.push((format!("section `{SECTION}`"), why));
            }
        }
        if !files.is_empty() {
            out.build(plugin, &files);
        }
        for (what, why) in &out.refused {
            tracing::warn!(plugin, "refused skill {what}: {why}");
        }
        out
    }

    /// Group `files` into skills under `skill://plugin/`, keeping those that pass.
    fn build(&mut self, plugin: &str, files: &BTreeMap<String, Vec<u8>>) {
        let roots: BTreeSet<String> = files
            .keys()
            .filter_map(|path| match path.rsplit_once('/') {
                Some((dir, "SKILL.md")) => Some(dir.to_owned()),
                _ => None,
            })
            .collect();
        for path in files.keys() {
            let inside = roots
                .iter()
                .any(|root| path.starts_with(&format!("{root}/")));
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
        let base = format!("skill://{plugin}");
        for root in &roots {
            let prefix = format!("{root}/");
            let own: Vec<(&String, &Vec<u8>)> = files
                .iter()
                .filter(|(path, _)| path.starts_with(&prefix))
                .collect();
            match skill(&base, root, &own) {
                Ok(skill) => self.skills.push(skill),
                Err(why) => self.refused.push((format!("`{root}`"), why)),
            }
        }
        self.directories = directories(&base, &self.skills);
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

/// Add the files of one section's document to `files`.
fn unpack(section: &[u8], files: &mut BTreeMap<String, Vec<u8>>) -> Result<(), String> {
    let document: Document =
        serde_json::from_slice(section).map_err(|e| format!("not a skills document: {e}"))?;
    if document.version != FORMAT_VERSION {
        return Err(format!(
            "format version {} (this mcpbox reads version {FORMAT_VERSION})",
            document.version
        ));
    }
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
    Ok(())
}

/// Why `path` cannot be a file's path in a skill tree, if it cannot: it must be relative,
/// `/`-separated, and each segment made of letters, digits and `-._~` (so that every URI is
/// written as it is, with nothing to escape), not `.` or `..`.
fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() || path.len() > 1024 {
        return Some("must have 1 to 1024 bytes");
    }
    for segment in path.split('/') {
        if segment.is_empty() {
            return Some("has an empty segment (a leading, trailing or doubled `/`)");
        }
        if segment == "." || segment == ".." {
            return Some("has a `.` or `..` segment");
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        {
            return Some("may hold only ASCII letters, digits and `-._~` between its `/`s");
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
    let documents = yaml_rust2::YamlLoader::load_from_str(yaml)
        .map_err(|e| format!("its SKILL.md's front matter is not YAML: {e}"))?;
    match documents.into_iter().next().map(|doc| yaml_json(&doc, 0)) {
        Some(Ok(Value::Object(map))) => Ok(map),
        Some(Err(why)) => Err(format!("its SKILL.md's front matter: {why}")),
        _ => Err("its SKILL.md's front matter is not a mapping".to_owned()),
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

/// Every directory of the served skills' tree under `base`, with its direct children.
fn directories(base: &str, served: &[Skill]) -> Vec<Directory> {
    // Directory URI -> child URI -> (resource, file URI).
    type Children = BTreeMap<String, (Arc<RawValue>, Option<String>)>;
    let mut dirs: BTreeMap<String, Children> = BTreeMap::new();
    dirs.entry(base.to_owned()).or_default();
    let dir_resource = |uri: &str| -> Option<Arc<RawValue>> {
        let name = uri.rsplit('/').next().unwrap_or(uri);
        raw(&json!({ "uri": uri, "name": name, "mimeType": DIRECTORY_MIME })).ok()
    };
    for skill in served {
        for file in &skill.files {
            let Some(relative) = file.uri.strip_prefix(&format!("{base}/")) else {
                continue;
            };
            let segments: Vec<&str> = relative.split('/').collect();
            let mut parent = base.to_owned();
            for (i, segment) in segments.iter().enumerate() {
                let child = format!("{parent}/{segment}");
                let last = i + 1 == segments.len();
                let entry = dirs.entry(parent.clone()).or_default();
                if last {
                    entry.insert(
                        child.clone(),
                        (Arc::clone(&file.resource), Some(file.uri.clone())),
                    );
                } else {
                    if !entry.contains_key(&child)
                        && let Some(resource) = dir_resource(&child)
                    {
                        entry.insert(child.clone(), (resource, None));
                    }
                    dirs.entry(child.clone()).or_default();
                }
                parent = child;
            }
        }
    }
    dirs.into_iter()
        .map(|(uri, children)| Directory {
            uri,
            children: children.into_values().collect(),
        })
        .collect()
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
        let uris: Vec<&str> = skills.directories.iter().map(|d| d.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "skill://demo",
                "skill://demo/review",
                "skill://demo/review/references"
            ]
        );
        let root = &skills.directories[1];
        let children: Vec<Value> = root
            .children
            .iter()
            .map(|(r, _)| serde_json::from_str(r.get()).unwrap())
            .collect();
        assert_eq!(children[0]["uri"], "skill://demo/review/SKILL.md");
        assert_eq!(children[0]["description"], "Review a change");
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
        let mut files = BTreeMap::new();
        let packed = encode(&[
            ("a/SKILL.md".to_owned(), b"text".to_vec()),
            ("a/x.bin".to_owned(), vec![0xff, 0x00]),
        ]);
        unpack(&packed, &mut files).unwrap();
        assert_eq!(files["a/x.bin"], vec![0xff, 0x00]);
        assert!(
            unpack(&packed, &mut files)
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
            let why = unpack(doc.as_bytes(), &mut BTreeMap::new()).unwrap_err();
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
