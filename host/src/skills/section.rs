//! The custom section that carries a plugin's skills ([`SECTION`]): writing one (`encode`,
//! `pack`, `read_tree` for `mcpbox skills add`), and finding and reading them in a component
//! (`sections`, `unpack`), refusing a path that could not be served.

use super::*;

/// One section's document.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Document {
    pub(super) version: u32,
    pub(super) files: Vec<PackedFile>,
}

/// One file of a section.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PackedFile {
    pub(super) path: String,
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) base64: Option<String>,
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
pub(super) fn leb128(out: &mut Vec<u8>, mut value: usize) {
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

/// The payloads of every [`SECTION`] in `wasm`, nested modules and components included. Code
/// sections are stepped over whole (function bodies hold no custom sections): walking each
/// body was most of the scan's time, 70 µs a plugin at every load.
pub(super) fn sections(wasm: &[u8]) -> Vec<&[u8]> {
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
pub(super) fn unpack(section: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
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
pub(super) fn path_problem(path: &str) -> Option<String> {
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
