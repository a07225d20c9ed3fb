//! The original's glob matching (`minimatch(path, pattern, { dot: true })`), read with
//! globset's rules, which agree with minimatch's for what patterns use: `*` and `?` within
//! one path component, `**` across components (`**/x` also matching `x` at the top),
//! `[…]` classes, `{a,b}` alternatives and `\` escapes. Also as minimatch: a leading `!`
//! negates, a leading `#` is a comment matching nothing. Where minimatch has more (extglobs
//! such as `+(a|b)`, numeric ranges `{1..3}`), the pattern is matched as globset reads it;
//! a pattern globset cannot read matches only the path spelled the same.

use globset::{GlobBuilder, GlobMatcher};

/// A compiled pattern.
pub struct Pattern {
    matcher: Option<GlobMatcher>,
    literal: String,
    negated: bool,
    comment: bool,
}

impl Pattern {
    /// Compile `pattern`.
    pub fn new(pattern: &str) -> Self {
        let comment = pattern.starts_with('#');
        let mut body = pattern;
        let mut negated = false;
        while let Some(rest) = body.strip_prefix('!') {
            if rest.starts_with('(') {
                break;
            }
            negated = !negated;
            body = rest;
        }
        let matcher = GlobBuilder::new(body)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .ok()
            .map(|glob| glob.compile_matcher());
        Self {
            matcher,
            literal: body.to_owned(),
            negated,
            comment,
        }
    }

    /// Whether `path` (relative, `/`-separated) matches.
    pub fn matches(&self, path: &str) -> bool {
        if self.comment {
            return false;
        }
        let hit = match &self.matcher {
            Some(matcher) => matcher.is_match(path),
            None => path == self.literal,
        };
        hit != self.negated
    }
}
