//! Matching a URI against a simple RFC 6570 template, to extract its variables.
//!
//! Supported expressions: `{var}` (matches one or more characters other than `/`, `?` and
//! `#`) and `{+var}` / `{#var}` (match one or more of any character). Other operators are
//! treated as literal text and so never match; templates that need them can read the URI
//! themselves with a `serde_json::Value` argument.

/// One piece of a parsed template.
enum Part<'t> {
    Literal(&'t str),
    Variable { name: &'t str, reserved: bool },
}

fn parse(template: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let expr = &rest[open + 1..close];
        let (name, reserved) = match expr.strip_prefix(['+', '#']) {
            Some(name) => (name, true),
            None => (expr, false),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            parts.push(Part::Literal(&rest[open..=close]));
        } else {
            parts.push(Part::Variable { name, reserved });
        }
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    parts
}

/// The variables of `template` in `uri`, or `None` if the URI does not match.
pub(crate) fn match_uri(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let parts = parse(template);
    let mut vars = Vec::new();
    matches(&parts, uri, &mut vars).then_some(vars)
}

fn matches(parts: &[Part<'_>], uri: &str, vars: &mut Vec<(String, String)>) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(literal), rest)) => uri
            .strip_prefix(literal)
            .is_some_and(|tail| matches(rest, tail, vars)),
        Some((Part::Variable { name, reserved }, rest)) => {
            let ends = uri
                .char_indices()
                .map(|(i, _)| i)
                .skip(1)
                .chain([uri.len()]);
            for end in ends.filter(|&end| end > 0) {
                let value = &uri[..end];
                if !reserved && value.contains(['/', '?', '#']) {
                    return false;
                }
                if matches(rest, &uri[end..], vars) {
                    vars.push(((*name).to_owned(), value.to_owned()));
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::match_uri;

    #[test]
    fn extracts_simple_variables() {
        let vars = match_uri("quote://{id}", "quote://3");
        assert_eq!(vars, Some(vec![("id".to_owned(), "3".to_owned())]));
        let vars = match_uri("test://template/{id}/data", "test://template/123/data");
        assert_eq!(vars, Some(vec![("id".to_owned(), "123".to_owned())]));
    }

    #[test]
    fn rejects_what_does_not_match() {
        assert_eq!(match_uri("quote://{id}", "quote://"), None);
        assert_eq!(match_uri("quote://{id}", "quote://a/b"), None);
        assert_eq!(match_uri("quote://{id}", "other://1"), None);
    }

    #[test]
    fn reserved_expansion_spans_slashes() {
        let vars = match_uri("file:///{+path}", "file:///a/b.txt");
        assert_eq!(vars, Some(vec![("path".to_owned(), "a/b.txt".to_owned())]));
    }
}
