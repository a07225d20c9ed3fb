//! A `SKILL.md`'s YAML front matter read into JSON, within the bounds of [`super`]: its size
//! ([`MAX_FRONTMATTER_BYTES`]), its values ([`MAX_FRONTMATTER_NODES`]), its depth
//! ([`MAX_FRONTMATTER_DEPTH`]), and no anchor or alias.

use super::*;

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
pub(super) fn shape_problem(yaml: &str) -> Result<(), String> {
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
pub(super) fn yaml_json(yaml: &yaml_rust2::Yaml, depth: usize) -> Result<Value, String> {
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
