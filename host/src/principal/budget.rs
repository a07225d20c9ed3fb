//! What each caller may hold, as configured: the budgets of the configuration file's
//! `[budgets]` table ([`BudgetConfig`]) and which one a [`Principal`] has
//! ([`BudgetConfig::budget_of`]). Keeping the use within them is the server's
//! (`server::budget`).
//!
//! Every caller that names a person or a client (an OAuth subject or client, a `[tokens.NAME]`
//! token) has the defaults ([`Budget::DEFAULT`], or `[budgets]`' own values), raised or lowered
//! for the holders of a scope (`[budgets.scope.NAME]`, the most generous value of the scopes a
//! caller holds) and for one caller by key (`[budgets.principal."KEY"]`). The local user and
//! the shared `--auth-token` name nobody in particular: they have no budget unless
//! `[budgets.principal."local"]` or `[budgets.principal."token:auth-token"]` gives them one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AUTH_TOKEN_NAME, Kind, Principal, Scopes};

/// One caller's budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// Plugin calls running at once (plain calls, and the calls of running tasks).
    pub calls: usize,
    /// Open HTTP sessions.
    pub sessions: usize,
    /// Open listen streams.
    pub listen_streams: usize,
    /// Bytes of requests being read or served.
    pub request_bytes: usize,
    /// Requests a second, on average.
    pub rate: f64,
    /// Requests at once above the rate (the bucket's size).
    pub burst: f64,
}

impl Budget {
    /// The defaults: enough for an agent or an IDE working hard (several sessions, calls in
    /// parallel, bursts of list requests), a small share of the host's global bounds (4,096
    /// sessions, 1,024 listen streams, 64 MiB of requests in flight).
    pub const DEFAULT: Self = Self {
        calls: 16,
        sessions: 64,
        listen_streams: 32,
        request_bytes: 16 << 20,
        rate: 50.0,
        burst: 100.0,
    };
}

/// Values that replace some of a budget's (a `[budgets]` table, or one of its scope or
/// principal tables).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetPatch {
    /// Plugin calls running at once.
    pub calls: Option<usize>,
    /// Open HTTP sessions.
    pub sessions: Option<usize>,
    /// Open listen streams.
    pub listen_streams: Option<usize>,
    /// Bytes of requests being read or served.
    pub request_bytes: Option<usize>,
    /// Requests a second.
    pub rate: Option<f64>,
    /// Requests at once above the rate.
    pub burst: Option<f64>,
}

impl BudgetPatch {
    /// `base` with this patch's values in place of its own.
    fn over(&self, base: Budget) -> Budget {
        Budget {
            calls: self.calls.unwrap_or(base.calls),
            sessions: self.sessions.unwrap_or(base.sessions),
            listen_streams: self.listen_streams.unwrap_or(base.listen_streams),
            request_bytes: self.request_bytes.unwrap_or(base.request_bytes),
            rate: self.rate.unwrap_or(base.rate),
            burst: self.burst.unwrap_or(base.burst),
        }
    }

    /// Each value the larger of this patch's and `other`'s (where both set it).
    fn most_generous(self, other: &Self) -> Self {
        fn larger<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b > a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Self {
            calls: larger(self.calls, other.calls),
            sessions: larger(self.sessions, other.sessions),
            listen_streams: larger(self.listen_streams, other.listen_streams),
            request_bytes: larger(self.request_bytes, other.request_bytes),
            rate: larger(self.rate, other.rate),
            burst: larger(self.burst, other.burst),
        }
    }

    /// A clear message if a value cannot be a budget.
    fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("calls", self.calls),
            ("sessions", self.sessions),
            ("listen_streams", self.listen_streams),
            ("request_bytes", self.request_bytes),
        ] {
            if value == Some(0) {
                return Err(format!(
                    "`{name} = 0` would refuse everything: give at least 1 (or leave it out for the default)"
                ));
            }
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(format!(
                "`rate = {rate}` must be a number of requests a second above 0"
            ));
        }
        if let Some(burst) = self.burst
            && !(burst.is_finite() && burst >= 1.0)
        {
            return Err(format!("`burst = {burst}` must be at least 1"));
        }
        Ok(())
    }
}

/// The `[budgets]` table of the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Plugin calls running at once, per caller.
    calls: Option<usize>,
    /// Open HTTP sessions, per caller.
    sessions: Option<usize>,
    /// Open listen streams, per caller.
    listen_streams: Option<usize>,
    /// Bytes of requests being read or served, per caller.
    request_bytes: Option<usize>,
    /// Requests a second, per caller.
    rate: Option<f64>,
    /// Requests at once above the rate, per caller.
    burst: Option<f64>,
    /// Export callers as a label of the refusal metric and list them on the status page
    /// (their number is the number of users: off by default).
    #[serde(default)]
    label_principals: bool,
    /// `[budgets.scope.NAME]`: the budget of the holders of scope NAME.
    #[serde(default)]
    scope: BTreeMap<String, BudgetPatch>,
    /// `[budgets.principal."KEY"]`: the budget of one caller, by key (`token:NAME`,
    /// `oauth:ISSUER sub:SUBJECT`, `local`).
    #[serde(default)]
    principal: BTreeMap<String, BudgetPatch>,
}

impl BudgetConfig {
    /// Read a `[budgets]` table, refusing values that cannot be budgets.
    pub fn from_toml(value: toml::Value) -> Result<Self, String> {
        let config: Self = value.try_into().map_err(|e: toml::de::Error| {
            format!(
                "{}; the keys are calls, sessions, listen_streams, request_bytes, rate, burst, \
                 label_principals, [budgets.scope.NAME] and [budgets.principal.\"KEY\"]",
                e.message().trim()
            )
        })?;
        config
            .defaults()
            .check()
            .map_err(|e| format!("[budgets]: {e}"))?;
        for (name, patch) in &config.scope {
            patch
                .check()
                .map_err(|e| format!("[budgets.scope.{name}]: {e}"))?;
        }
        for (key, patch) in &config.principal {
            patch
                .check()
                .map_err(|e| format!("[budgets.principal.\"{key}\"]: {e}"))?;
        }
        Ok(config)
    }

    fn defaults(&self) -> BudgetPatch {
        BudgetPatch {
            calls: self.calls,
            sessions: self.sessions,
            listen_streams: self.listen_streams,
            request_bytes: self.request_bytes,
            rate: self.rate,
            burst: self.burst,
        }
    }

    /// The budget of every caller with a budget, before scopes and principals.
    pub fn default_budget(&self) -> Budget {
        self.defaults().over(Budget::DEFAULT)
    }

    /// `caller`'s budget, or `None` if it has none of its own (the local user and the shared
    /// `--auth-token`, unless named).
    pub fn budget_of(&self, caller: &Principal) -> Option<Budget> {
        let named = self.principal.get(caller.key());
        let shared = match caller.kind() {
            Kind::Local => true,
            Kind::Token { name } => name == AUTH_TOKEN_NAME,
            Kind::OAuth { .. } => false,
        };
        if shared && named.is_none() {
            return None;
        }
        let mut budget = self.default_budget();
        if let Scopes::Granted(held) = caller.scopes() {
            let by_scope = self
                .scope
                .iter()
                .filter(|(scope, _)| held.contains(*scope))
                .fold(None::<BudgetPatch>, |acc, (_, patch)| {
                    Some(acc.map_or(*patch, |acc| acc.most_generous(patch)))
                });
            if let Some(patch) = by_scope {
                budget = patch.over(budget);
            }
        }
        Some(named.map_or(budget, |patch| patch.over(budget)))
    }

    /// Whether callers may appear in metrics labels and on the status page.
    pub fn label_principals(&self) -> bool {
        self.label_principals
    }
}

/// What the tests of budgets share (here and in `server::budget`).
#[cfg(test)]
pub(crate) mod test_support {
    use super::{BudgetConfig, Principal, Scopes};

    /// A `[budgets]` table from its text.
    pub(crate) fn config(text: &str) -> BudgetConfig {
        BudgetConfig::from_toml(toml::from_str::<toml::Value>(text).unwrap()).unwrap()
    }

    /// The holder of static token `name`, granted `scopes`.
    pub(crate) fn token(name: &str, scopes: &[&str]) -> Principal {
        Principal::token(
            name,
            Scopes::Granted(scopes.iter().map(|s| (*s).to_owned()).collect()),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::test_support::{config, token};
    use super::*;

    #[test]
    fn scopes_and_principals_raise_the_defaults() {
        let config = config(
            "calls = 2\nrate = 5.0\n[scope.bulk]\ncalls = 40\n[scope.more]\ncalls = 30\nrate = 9.0\n\
             [principal.\"token:ci\"]\ncalls = 100\n",
        );
        assert_eq!(config.budget_of(&token("a", &[])).unwrap().calls, 2);
        let both = config.budget_of(&token("a", &["bulk", "more"])).unwrap();
        assert_eq!((both.calls, both.rate), (40, 9.0));
        let ci = config.budget_of(&token("ci", &["bulk"])).unwrap();
        assert_eq!((ci.calls, ci.rate), (100, 5.0));
        let oauth = Principal::oauth(
            "https://issuer",
            Some("alice".into()),
            None,
            BTreeSet::new(),
        );
        assert_eq!(config.budget_of(&oauth).unwrap().sessions, 64);
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let bad = |text: &str| {
            BudgetConfig::from_toml(toml::from_str::<toml::Value>(text).unwrap()).unwrap_err()
        };
        assert!(bad("calls = 0").contains("calls = 0"));
        assert!(bad("rate = -1.0").contains("rate"));
        assert!(bad("[scope.x]\nburst = 0.5").contains("[budgets.scope.x]"));
        assert!(bad("call = 3").contains("unknown field"));
    }
}
