//! Where a key is in TOML text, and which key a place in it belongs to, so that every error
//! in a manifest or a configuration file names both the line and the key (`dirs[0].host`,
//! `plugin.todo.limits.fuel`). Read from the spans `toml` keeps while parsing.

use toml::de::{DeTable, DeValue};

/// One step of a key path: a table key or an array index.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `a.b[0].c` as steps; `None` if it is not such a path.
fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            out.push(Step::Index(inner[..end].parse().ok()?));
            rest = &inner[end + 1..];
        }
    }
    Some(out)
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line (1-based) where the key `path` (`limits.fuel`, `dirs[0].host`) is written in
/// `text`, or the nearest enclosing key's line when it is not written itself.
pub fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let document = DeTable::parse(text).ok()?;
    let steps = steps(path)?;
    let mut table = document.get_ref();
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    let mut found = None;
    for step in steps {
        let value = match (step, array) {
            (Step::Index(i), Some(items)) => {
                let Some(item) = items.get(i) else { break };
                found = Some(item.span().start);
                item
            }
            (Step::Key(key), None) => {
                let Some((name, value)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == key)
                else {
                    break;
                };
                found = Some(name.span().start);
                value
            }
            _ => break,
        };
        match value.get_ref() {
            DeValue::Table(inner) => {
                table = inner;
                array = None;
            }
            DeValue::Array(items) => array = Some(items),
            _ => array = None,
        }
    }
    found.map(|offset| line_at(text, offset))
}

/// The dotted path of the deepest key whose name or (non-table) value covers byte `offset`
/// of `text`; in text that is not valid TOML, the key written on that line, if any. (A table
/// made by a `[header]` spans only its header, so the whole tree is searched.)
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let Ok(document) = DeTable::parse(text) else {
        return key_on_line(text, offset);
    };
    let mut best: Option<String> = None;
    search_table(document.get_ref(), offset, "", &mut best);
    best
}

fn better(best: &mut Option<String>, path: String) {
    if best.as_ref().is_none_or(|b| path.len() > b.len()) {
        *best = Some(path);
    }
}

fn search_table(table: &DeTable<'_>, offset: usize, prefix: &str, best: &mut Option<String>) {
    for (name, value) in table.iter() {
        let path = if prefix.is_empty() {
            name.get_ref().to_string()
        } else {
            format!("{prefix}.{}", name.get_ref())
        };
        if name.span().contains(&offset) {
            better(best, path.clone());
        }
        search_value(value, offset, &path, best);
    }
}

fn search_value(
    value: &toml::Spanned<DeValue<'_>>,
    offset: usize,
    path: &str,
    best: &mut Option<String>,
) {
    match value.get_ref() {
        DeValue::Table(table) => search_table(table, offset, path, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                search_value(item, offset, &format!("{path}[{i}]"), best);
            }
        }
        _ => {
            if value.span().contains(&offset) {
                better(best, path.to_owned());
            }
        }
    }
}

/// The key written before `=` on the line holding byte `offset` (for text that does not
/// parse, where no spans are to be had).
fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    plain.then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "title = \"x\"\n\n[limits]\nfuel = 0\n\n[[dirs]]\nhost = \"a\"\nguest = \"/a\"\n\n[[dirs]]\nhost = \"b\"\n";

    #[test]
    fn a_key_path_is_found_at_its_line() {
        assert_eq!(line_of_key(TEXT, "title"), Some(1));
        assert_eq!(line_of_key(TEXT, "limits.fuel"), Some(4));
        assert_eq!(line_of_key(TEXT, "dirs[1].host"), Some(11));
        assert_eq!(line_of_key(TEXT, "dirs[0].guest"), Some(8));
        assert_eq!(line_of_key(TEXT, "nothing"), None);
    }

    #[test]
    fn a_place_is_named_by_its_key() {
        let offset = TEXT.find("fuel").unwrap();
        assert_eq!(key_at(TEXT, offset).as_deref(), Some("limits.fuel"));
        let offset = TEXT.find("\"b\"").unwrap();
        assert_eq!(key_at(TEXT, offset).as_deref(), Some("dirs[1].host"));
        assert_eq!(key_at("a = 1\nfuel = \n", 12).as_deref(), Some("fuel"));
    }
}
