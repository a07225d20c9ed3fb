//! robots.txt as the original reads it (Protego's rules): the group whose `User-agent` is found
//! in the fetcher's user agent at a token boundary, the longest such name winning and `*`
//! applying when none does; in the group, the rule with the longest pattern that matches the
//! URL's path and query decides, `Allow` winning a tie; patterns may hold `*` (any run of
//! characters) and end with `$` (the end of the URL). `/robots.txt` itself may always be
//! fetched.

/// One `Allow` or `Disallow` line.
struct Rule {
    allow: bool,
    pattern: String,
}

/// The lines under one or more `User-agent` lines.
struct Group {
    agents: Vec<String>,
    rules: Vec<Rule>,
}

/// A parsed robots.txt.
pub struct Robots {
    groups: Vec<Group>,
}

impl Robots {
    /// Parse `text` (comments already removed or not: `#` starts one anywhere on a line).
    pub fn parse(text: &str) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((field, value)) = line.split_once(':') else {
                continue;
            };
            let field = field.trim().to_ascii_lowercase();
            let value = value.trim();
            match field.as_str() {
                "user-agent" => {
                    if !in_agents || groups.is_empty() {
                        groups.push(Group {
                            agents: Vec::new(),
                            rules: Vec::new(),
                        });
                    }
                    in_agents = true;
                    if let Some(group) = groups.last_mut() {
                        group.agents.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if value.is_empty() {
                        continue;
                    }
                    if let Some(group) = groups.last_mut() {
                        group.rules.push(Rule {
                            allow: field == "allow",
                            pattern: value.to_owned(),
                        });
                    }
                }
                _ => in_agents = false,
            }
        }
        Self { groups }
    }

    /// How well `agent` (a group's name) applies to `user_agent`: its length at a token
    /// boundary, 1 for `*`, 0 for not at all.
    fn score(agent: &str, user_agent: &str) -> usize {
        if agent == "*" {
            return 1;
        }
        if agent.is_empty() {
            return 0;
        }
        let mut from = 0;
        while let Some(i) = user_agent[from..].find(agent) {
            let at = from + i;
            let before = user_agent[..at].chars().next_back();
            if before.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_')) {
                return agent.len();
            }
            from = at + agent.len().max(1);
            if from > user_agent.len() {
                break;
            }
        }
        0
    }

    /// Whether `user_agent` may fetch `url`.
    pub fn can_fetch(&self, url: &url::Url, user_agent: &str) -> bool {
        if url.path() == "/robots.txt" {
            return true;
        }
        let user_agent = user_agent.trim().to_lowercase();
        let best = self
            .groups
            .iter()
            .map(|g| {
                let score = g
                    .agents
                    .iter()
                    .map(|a| Self::score(a, &user_agent))
                    .max()
                    .unwrap_or(0);
                (score, g)
            })
            .filter(|(score, _)| *score > 0)
            .fold(None::<(usize, &Group)>, |best, (score, g)| match best {
                Some((s, _)) if s >= score => best,
                _ => Some((score, g)),
            });
        let Some((_, group)) = best else {
            return true;
        };
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let mut decision: Option<(usize, bool)> = None;
        for rule in &group.rules {
            if !matches(&rule.pattern, &target) {
                continue;
            }
            let priority = rule.pattern.len();
            decision = match decision {
                Some((p, allow)) if p > priority || (p == priority && allow) => Some((p, allow)),
                _ => Some((priority, rule.allow)),
            };
        }
        decision.is_none_or(|(_, allow)| allow)
    }
}

/// Whether `pattern` (with `*` and a final `$`) matches the start of `target`.
fn matches(pattern: &str, target: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let Some(first) = parts.first() else {
        return true;
    };
    if !target.starts_with(first) {
        return false;
    }
    let mut at = first.len();
    for (i, part) in parts.iter().enumerate().skip(1) {
        let last = i == parts.len() - 1;
        if last && anchored {
            return target.len() >= at + part.len() && target.ends_with(part);
        }
        match target[at..].find(part) {
            Some(found) => at += found + part.len(),
            None => return false,
        }
    }
    !anchored || at == target.len()
}
