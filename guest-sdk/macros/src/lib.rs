//! The procedural macros of `mcpbox-sdk`: [`skills!`], which packs a directory of Agent Skills
//! into the plugin's component (a custom section named `mcpbox-skills`, the format the host
//! reads: `{"version": 1, "files": [{"path", "text" | "base64"}]}`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro::{Literal, TokenStream, TokenTree};

/// Pack the skills under a directory (relative to the crate's `Cargo.toml`) into the plugin:
/// every directory in it holding a `SKILL.md` is a skill, served by mcpbox as
/// `skill://PLUGIN/PATH/SKILL.md` with its other files beside it. Files and directories whose
/// names start with `.` are left out. Written once, anywhere at item level:
///
/// ```ignore
/// mcpbox_sdk::skills!("skills");
/// ```
#[proc_macro]
pub fn skills(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(tokens) => tokens,
        Err(message) => format!("::core::compile_error!({});", Literal::string(&message))
            .parse()
            .unwrap_or_default(),
    }
}

fn expand(input: TokenStream) -> Result<TokenStream, String> {
    let mut tokens = input.into_iter();
    let (Some(TokenTree::Literal(literal)), None) = (tokens.next(), tokens.next()) else {
        return Err("skills! takes one string: the skills' directory, from Cargo.toml's".into());
    };
    let text = literal.to_string();
    let dir = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| !t.contains('\\'))
        .ok_or("skills! takes one plain string literal (no escapes)")?;
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .map_err(|_| "CARGO_MANIFEST_DIR is not set: build with cargo")?;
    let root = Path::new(&manifest).join(dir);
    let mut files = Vec::new();
    walk(&root, &root, &mut files)?;
    if files.is_empty() {
        return Err(format!("skills!: no files under {}", root.display()));
    }
    files.sort();
    // Written by hand: a proc macro's dependencies are compiled apart from the plugin's, so
    // serde_json here would be built twice in every workspace build.
    let mut payload = String::from(r#"{"version":1,"files":["#);
    for (i, (relative, absolute)) in files.iter().enumerate() {
        let bytes = std::fs::read(absolute)
            .map_err(|e| format!("skills!: cannot read {}: {e}", absolute.display()))?;
        if i > 0 {
            payload.push(',');
        }
        payload.push_str(r#"{"path":"#);
        json_string(&mut payload, relative);
        match String::from_utf8(bytes) {
            Ok(text) => {
                payload.push_str(r#","text":"#);
                json_string(&mut payload, &text);
            }
            Err(e) => {
                payload.push_str(r#","base64":""#);
                base64(&mut payload, e.as_bytes());
                payload.push('"');
            }
        }
        payload.push('}');
    }
    payload.push_str("]}");
    // Each file is named to the compiler, so editing a skill rebuilds the plugin.
    let mut out = String::from("const _: () = {\n");
    for (_, absolute) in &files {
        let path = absolute
            .to_str()
            .ok_or_else(|| format!("skills!: {} is not UTF-8", absolute.display()))?;
        out.push_str(&format!(
            "const _: &[u8] = ::core::include_bytes!({});\n",
            Literal::string(path)
        ));
    }
    out.push_str(&format!(
        "#[allow(unsafe_code, reason = \"a custom section is how a component carries data for its host\")]\n\
         #[unsafe(link_section = \"mcpbox-skills\")]\n\
         #[used]\n\
         static SKILLS: [u8; {}] = *{};\n}};",
        payload.len(),
        Literal::byte_string(payload.as_bytes())
    ));
    out.parse()
        .map_err(|e| format!("skills!: could not build the section: {e}"))
}

/// `text` as a JSON string.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `bytes` in standard Base64, padded.
fn base64(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// Every file under `dir` (names starting with `.` left out), with its path from `root`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("skills!: cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("skills!: cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Not followed, so no link can loop or reach outside the tree; only regular files.
        let kind = entry
            .file_type()
            .map_err(|e| format!("skills!: cannot read {}: {e}", path.display()))?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if !kind.is_file() {
            return Err(format!(
                "skills!: {} is not a regular file or directory (links are not followed)",
                path.display()
            ));
        } else {
            let relative = path
                .strip_prefix(root)
                .map_err(|e| format!("skills!: {}: {e}", path.display()))?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((relative, path));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{base64, json_string};

    #[test]
    fn base64_is_standard_and_padded() {
        for (bytes, expected) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"hello", "aGVsbG8="),
            (&[0xff, 0x00, 0xfe][..], "/wD+"),
        ] {
            let mut out = String::new();
            base64(&mut out, bytes);
            assert_eq!(out, expected);
        }
    }

    #[test]
    fn strings_are_escaped_as_json() {
        let mut out = String::new();
        json_string(&mut out, "a\"b\\c\nd\te\u{1}é");
        assert_eq!(out, "\"a\\\"b\\\\c\\nd\\te\\u0001é\"");
    }
}
