//! What names and URIs the catalog accepts.

/// The longest tool or prompt name accepted: the limit of the strictest widely used clients.
pub const MAX_NAME_CHARS: usize = 64;

/// Why a name was refused, or `None` if it is fine. Tool and prompt names must match
/// `[A-Za-z0-9_-]{1,64}`, what every major client accepts (the spec also allows `.`, which
/// some clients reject).
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".to_owned());
    }
    if name.len() > MAX_NAME_CHARS {
        return Some(format!(
            "the name is {} characters long; the limit is {MAX_NAME_CHARS}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Some(format!(
            "the name contains {bad:?}; only A-Z, a-z, 0-9, `_` and `-` are allowed"
        ));
    }
    None
}

/// Why a resource URI was refused, or `None`: it must start with an RFC 3986 scheme.
pub fn uri_problem(uri: &str) -> Option<String> {
    let Some((scheme, _)) = uri.split_once(':') else {
        return Some("the URI has no scheme (such as `file:` or `quote:`)".to_owned());
    };
    let mut chars = scheme.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Some(format!("`{scheme}` is not a valid URI scheme"));
    }
    if uri.chars().any(char::is_whitespace) {
        return Some("the URI contains whitespace".to_owned());
    }
    None
}

/// The URI schemes the host serves itself, each with what it serves there: no plugin may list
/// a resource or a template in one, and no read of a URI in one reaches a plugin.
pub const RESERVED_SCHEMES: &[(&str, &str)] = &[("skill", "the skills plugins carry")];

/// Why no plugin may serve `uri` (a resource's URI or a URI template), or `None`: its scheme
/// is one the host serves itself ([`RESERVED_SCHEMES`], compared ignoring case, as schemes
/// are). A template's scheme is literal: [`uri_problem`] refuses one with an expression.
pub fn reserved_problem(uri: &str) -> Option<String> {
    let (scheme, _) = uri.split_once(':')?;
    RESERVED_SCHEMES
        .iter()
        .find(|(reserved, _)| scheme.eq_ignore_ascii_case(reserved))
        .map(|(reserved, what)| {
            format!(
                "`{reserved}://` is the host's own namespace ({what}); no plugin may serve a URI in it"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_clients_accept() {
        for name in ["echo", "get_weather", "a-b_C9", &"x".repeat(64)] {
            assert_eq!(name_problem(name), None, "{name}");
        }
    }

    #[test]
    fn refuses_the_rest_with_a_reason() {
        assert!(name_problem("").is_some());
        assert!(name_problem(&"x".repeat(65)).unwrap().contains("64"));
        assert!(name_problem("a.b").unwrap().contains("'.'"));
        assert!(name_problem("a/b").is_some());
        assert!(name_problem("héllo").is_some());
        assert!(name_problem("a b").is_some());
    }

    #[test]
    fn uris_need_a_scheme() {
        assert_eq!(uri_problem("quote://1"), None);
        assert_eq!(uri_problem("file:///a/b"), None);
        assert!(uri_problem("no-scheme").is_some());
        assert!(uri_problem("1x://a").is_some());
        assert!(uri_problem("a://b c").is_some());
    }

    #[test]
    fn the_hosts_own_schemes_are_reserved_whatever_their_case() {
        for uri in [
            "skill://victim/demo/SKILL.md",
            "SKILL://victim/demo/SKILL.md",
            "Skill:x",
            "skill://{+path}",
        ] {
            assert_eq!(
                reserved_problem(uri).as_deref(),
                Some(
                    "`skill://` is the host's own namespace (the skills plugins carry); no plugin may serve a URI in it"
                ),
                "{uri}"
            );
        }
        for uri in [
            "skills://x",
            "file:///skill://x",
            "quote://skill",
            "no-scheme",
        ] {
            assert_eq!(reserved_problem(uri), None, "{uri}");
        }
    }
}
