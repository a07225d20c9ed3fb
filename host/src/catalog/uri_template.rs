//! Matching a URI against an RFC 6570 URI template, to route `resources/read` to the plugin
//! whose template matches.
//!
//! Matching is the reverse of expansion and is not unique in general; the router only needs
//! a yes or no. Each expression matches a run of characters: simple `{x}` and the label and
//! path-parameter forms (`{.x}`, `{;x}`) stop at `/`, `?` and `#`; path segments (`{/x}`)
//! stop at `?` and `#`;
//! reserved `{+x}` and fragment `{#x}` match anything; query forms (`{?x}`, `{&x}`) match the
//! rest of the query. Expressions may match the empty string, as an undefined variable
//! expands to nothing.

/// A parsed URI template.
#[derive(Debug, Clone)]
pub struct UriTemplate {
    /// Literals and expressions, alternating (adjacent expressions are merged).
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Expression(Class),
}

/// Which characters an expression's expansion may contain (wider classes compare greater).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Anything but `/`, `?` and `#`.
    Segment,
    /// Anything but `?` and `#`.
    Path,
    /// Anything but `#`.
    Query,
    /// Anything.
    Any,
}

/// Longest URI the matcher considers; longer ones match nothing.
const MAX_URI_BYTES: usize = 4 << 10;

/// Most expressions in one template: a match costs one pass over the URI per part, so a
/// plugin's template bounds the work of every `resources/read` routed past it.
const MAX_EXPRESSIONS: usize = 32;
/// Longest template accepted.
const MAX_TEMPLATE_BYTES: usize = 1 << 10;

impl UriTemplate {
    /// Parse a template, or say why it is not one.
    pub fn parse(template: &str) -> Result<Self, String> {
        if template.len() > MAX_TEMPLATE_BYTES {
            return Err(format!(
                "the template is {} bytes long; the limit is {MAX_TEMPLATE_BYTES}",
                template.len()
            ));
        }
        if template.matches('{').count() > MAX_EXPRESSIONS {
            return Err(format!(
                "the template has more than {MAX_EXPRESSIONS} expressions"
            ));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find(['{', '}']) {
            if rest[open..].starts_with('}') {
                return Err("unmatched `}`".to_owned());
            }
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or("unclosed `{`")?;
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let expression = &rest[open + 1..close];
            let (class, names) = match expression.chars().next() {
                Some('+' | '#') => (Class::Any, &expression[1..]),
                Some('?' | '&') => (Class::Query, &expression[1..]),
                Some('/') => (Class::Path, &expression[1..]),
                Some('.' | ';') => (Class::Segment, &expression[1..]),
                _ => (Class::Segment, expression),
            };
            let valid_name = |n: &str| {
                let n = n.trim_end_matches('*');
                let n = n.split_once(':').map_or(n, |(n, _)| n);
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '%')
            };
            if !names.split(',').all(valid_name) {
                return Err(format!("`{{{expression}}}` is not a valid expression"));
            }
            // Adjacent expressions match the same runs as one with the wider class.
            match parts.last_mut() {
                Some(Part::Expression(previous)) => *previous = (*previous).max(class),
                _ => parts.push(Part::Expression(class)),
            }
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(Self { parts })
    }

    /// Whether `uri` is an expansion of this template. One pass over the URI per part, the
    /// set of positions the parts so far can reach carried from one part to the next, so a
    /// hostile template and a long URI cost parts × length, never more.
    pub fn matches(&self, uri: &str) -> bool {
        if uri.len() > MAX_URI_BYTES {
            return false;
        }
        let bytes = uri.as_bytes();
        let n = bytes.len();
        // reach[i]: the parts so far match exactly `uri[..i]`.
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for part in &self.parts {
            let mut next = vec![false; n + 1];
            match part {
                Part::Literal(literal) => {
                    let literal = literal.as_bytes();
                    for (i, _) in reach.iter().enumerate().filter(|(_, r)| **r) {
                        if bytes[i..].starts_with(literal) {
                            next[i + literal.len()] = true;
                        }
                    }
                }
                Part::Expression(class) => {
                    // An expression reached at `p` ends anywhere from `p` to the first byte
                    // its class stops at: sweep once, open from each reached start until a
                    // stop.
                    let mut open = false;
                    for i in 0..=n {
                        open |= reach[i];
                        next[i] = open;
                        if i < n && class.stops_at(bytes[i]) {
                            open = false;
                        }
                    }
                }
            }
            if !next.contains(&true) {
                return false;
            }
            reach = next;
        }
        reach[n]
    }
}

impl Class {
    /// Whether an expansion of this class cannot contain `byte`.
    fn stops_at(self, byte: u8) -> bool {
        match self {
            Self::Segment => matches!(byte, b'/' | b'?' | b'#'),
            Self::Path => matches!(byte, b'?' | b'#'),
            Self::Query => byte == b'#',
            Self::Any => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::UriTemplate;

    fn t(template: &str) -> UriTemplate {
        UriTemplate::parse(template).unwrap()
    }

    #[test]
    fn simple_expressions_match_one_segment() {
        assert!(t("quote://{id}").matches("quote://3"));
        assert!(t("test://template/{id}/data").matches("test://template/123/data"));
        assert!(!t("test://template/{id}/data").matches("test://template/1/2/data"));
        assert!(!t("quote://{id}").matches("quote://3/4"));
        assert!(!t("quote://{id}").matches("other://3"));
    }

    #[test]
    fn reserved_and_query_expressions() {
        assert!(t("file:///{+path}").matches("file:///a/b/c.txt"));
        assert!(t("search://q{?term,page}").matches("search://q?term=x&page=2"));
        assert!(t("users://{id}/posts{/post}").matches("users://7/posts/9"));
    }

    #[test]
    fn literal_templates_match_only_themselves() {
        assert!(t("a://b").matches("a://b"));
        assert!(!t("a://b").matches("a://bc"));
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert!(UriTemplate::parse("a://{id").is_err());
        assert!(UriTemplate::parse("a://id}").is_err());
        assert!(UriTemplate::parse("a://{}").is_err());
        assert!(UriTemplate::parse("a://{a b}").is_err());
        let many = format!("a://{}", "{x}.".repeat(33));
        assert!(
            UriTemplate::parse(&many)
                .unwrap_err()
                .contains("more than 32 expressions")
        );
        let long = format!("a://{}", "x".repeat(1100));
        assert!(
            UriTemplate::parse(&long)
                .unwrap_err()
                .contains("limit is 1024")
        );
    }

    #[test]
    fn pathological_templates_stay_fast() {
        let template = t("a://{x}a{y}a{z}a{w}b");
        assert!(!template.matches(&format!("a://{}", "a".repeat(4000))));
        assert!(template.matches("a://1a2a3a4b"));
    }

    #[test]
    fn many_expressions_against_the_longest_uri() {
        // The shape that made backtracking matchers quadratic or worse: every literal occurs
        // everywhere. Each part is one pass over the URI now.
        let template = format!("a://{}b", "{x}a".repeat(32));
        let template = t(&template);
        let long = format!("a://{}", "a".repeat(4000));
        assert!(!template.matches(&long));
        assert!(template.matches(&format!("{long}b")));
        // Runs stop where their class says, wherever the match could go otherwise.
        assert!(t("a://{x}/{y}").matches("a://1/2"));
        assert!(!t("a://{x}/{y}").matches("a://1/2/3"));
        assert!(t("a://{+x}/{y}").matches("a://1/2/3"));
        assert!(t("a://{x}{?q,r}").matches("a://1?q=2&r=3"));
        assert!(!t("a://{x}{?q}").matches("a://1?q=2#f"));
        assert!(t("a://é/{x}").matches("a://é/ü"));
    }

    #[test]
    fn huge_uris_do_not_match() {
        assert!(!t("a://{x}{y}{z}").matches(&format!("a://{}", "x".repeat(10_000))));
    }
}
