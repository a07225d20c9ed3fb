//! Who is calling: the [`Principal`] every request carries, made once where the caller is
//! known — the HTTP gate (an OAuth token's issuer and subject, or the name of a static bearer
//! token) or the stdio transport (the local user) — and passed with the request through the
//! session to the catalog and the engine.
//!
//! A principal has a stable key ([`Principal::key`]): sessions and `requestState` are bound to
//! it, and another principal presenting them is treated as a stranger. It has the scopes it was
//! granted: an OAuth token's, a static token's configured ones, or every scope (the local
//! user and `--auth-token`). A token's value is never part of a principal, so it cannot reach
//! a log, a plugin or a metric through one.
//!
//! Static bearer tokens are known by name ([`Tokens`]): the configuration file's `[tokens.NAME]`
//! tables hold each token's SHA-256 digest (never the token) and the scopes it grants, and a
//! presented token is recognised by its digest.
//!
//! What each caller may hold (its budgets, `[budgets]`) is configured here too, in `budget`.
//!
//! Uses: nothing else in the crate.

mod budget;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

#[cfg(test)]
pub(crate) use budget::test_support;
pub use budget::{Budget, BudgetConfig, BudgetPatch};

/// The longest display name kept from a token's claims, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// The caller of a request. Cheap to clone.
#[derive(Clone)]
pub struct Principal(Arc<Inner>);

struct Inner {
    key: String,
    kind: Kind,
    scopes: Scopes,
    /// A name to show (an OAuth token's `name` or `preferred_username`, a token's name).
    name: Option<String>,
}

/// How a principal was recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The user who started mcpbox: stdio, or HTTP without authentication.
    Local,
    /// A static bearer token (`--auth-token`, or one of the configuration file's tokens),
    /// by its configured name.
    Token {
        /// The token's name (never its value).
        name: String,
    },
    /// A verified OAuth access token.
    OAuth {
        /// Its issuer (`iss`).
        issuer: String,
        /// Its subject (`sub`), if it has one.
        subject: Option<String>,
        /// The client it was issued to (`client_id`, else `azp`), if it says.
        client: Option<String>,
    },
}

/// The scopes a principal holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scopes {
    /// Every scope: nothing is refused for lack of one.
    All,
    /// These.
    Granted(BTreeSet<String>),
}

impl Principal {
    /// The local user (one, shared: cheap to ask for on every stdio line).
    pub fn local() -> Self {
        static LOCAL: std::sync::LazyLock<Principal> = std::sync::LazyLock::new(|| {
            Principal::new("local".to_owned(), Kind::Local, Scopes::All)
        });
        LOCAL.clone()
    }

    /// The holder of the static token named `name`, with its configured `scopes`.
    pub fn token(name: &str, scopes: Scopes) -> Self {
        Self::new(
            format!("token:{name}"),
            Kind::Token {
                name: name.to_owned(),
            },
            scopes,
        )
    }

    /// The holder of a verified OAuth token: `issuer` and `subject` name it (a token without a
    /// subject, such as a client-credentials grant, is named by its client).
    pub fn oauth(
        issuer: &str,
        subject: Option<String>,
        client: Option<String>,
        scopes: BTreeSet<String>,
    ) -> Self {
        // The issuer is a URL, which has no spaces: what follows its first space says whether
        // a subject or a client names the caller, so neither can pose as the other.
        let key = match (&subject, &client) {
            (Some(subject), _) => format!("oauth:{issuer} sub:{subject}"),
            (None, Some(client)) => format!("oauth:{issuer} client:{client}"),
            (None, None) => format!("oauth:{issuer} anonymous"),
        };
        Self::new(
            key,
            Kind::OAuth {
                issuer: issuer.to_owned(),
                subject,
                client,
            },
            Scopes::Granted(scopes),
        )
    }

    fn new(key: String, kind: Kind, scopes: Scopes) -> Self {
        let name = match &kind {
            Kind::Token { name } => Some(name.clone()),
            Kind::Local | Kind::OAuth { .. } => None,
        };
        Self(Arc::new(Inner {
            key,
            kind,
            scopes,
            name,
        }))
    }

    /// The same principal with `name` to show (cut to [`MAX_NAME_BYTES`], control characters
    /// dropped: it comes from a token's claims and reaches plugins). `None` leaves it as it is.
    pub fn named(self, name: Option<String>) -> Self {
        let Some(name) = name else {
            return self;
        };
        let mut clean: String = name.chars().filter(|c| !c.is_control()).collect();
        if clean.len() > MAX_NAME_BYTES {
            let mut end = MAX_NAME_BYTES;
            while !clean.is_char_boundary(end) {
                end -= 1;
            }
            clean.truncate(end);
        }
        if clean.is_empty() {
            return self;
        }
        let inner = &*self.0;
        Self(Arc::new(Inner {
            key: inner.key.clone(),
            kind: inner.kind.clone(),
            scopes: inner.scopes.clone(),
            name: Some(clean),
        }))
    }

    /// A name to show, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// Its stable key: equal for the same caller across requests, sessions and replicas.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// How it was recognised.
    pub fn kind(&self) -> &Kind {
        &self.0.kind
    }

    /// The scopes it holds.
    pub fn scopes(&self) -> &Scopes {
        &self.0.scopes
    }

    /// Its id in `plugin`, as the plugin sees it: a keyed hash of its key and the plugin's
    /// name under `key` (the state store's own secret), 32 hex digits. Stable for the same
    /// caller wherever the same store is used; different in each plugin, so plugins cannot
    /// match their users up; and without the key nobody can tell whose it is.
    pub fn id_in(&self, plugin: &str, key: &[u8; 32]) -> String {
        caller_id(plugin, self.key(), key)
    }

    /// Whether `other` is the same caller.
    pub fn is(&self, other: &Principal) -> bool {
        self.0.key == other.0.key
    }

    /// The scopes of `required` it lacks (none, for a principal holding every scope).
    pub fn missing<'a>(&self, required: &'a [String]) -> Vec<&'a str> {
        match &self.0.scopes {
            Scopes::All => Vec::new(),
            Scopes::Granted(held) => required
                .iter()
                .filter(|s| !held.contains(*s))
                .map(String::as_str)
                .collect(),
        }
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.key)
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.key)
    }
}

/// The id in `plugin` of the principal whose key is `principal` ([`Principal::id_in`]; the
/// operator's `mcpbox state --principal` names a caller by its key).
pub fn caller_id(plugin: &str, principal: &str, key: &[u8; 32]) -> String {
    use hmac::Mac as _;
    let mut mac = <hmac::Hmac<Sha256> as hmac::Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    // Lengths first, so no plugin name and key can pose as another pair.
    for part in [plugin, principal] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    let digest = mac.finalize().into_bytes();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The static bearer tokens a server accepts, each by its SHA-256 digest, with the principal
/// it stands for.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_digest: HashMap<[u8; 32], Principal>,
}

/// The name `--auth-token`'s holder goes by.
pub const AUTH_TOKEN_NAME: &str = "auth-token";

impl Tokens {
    /// Accept the token whose SHA-256 digest is `digest` as the principal `name`, holding
    /// `scopes`. Refused: a name or a digest already taken.
    pub fn add(&mut self, name: &str, digest: [u8; 32], scopes: Scopes) -> Result<(), String> {
        if self.by_digest.values().any(|p| match p.kind() {
            Kind::Token { name: taken } => taken == name,
            _ => false,
        }) {
            return Err(format!("a token named `{name}` is already configured"));
        }
        if let Some(other) = self.by_digest.get(&digest) {
            return Err(format!(
                "token `{name}` has the same digest as {other}: two names for one token"
            ));
        }
        self.by_digest
            .insert(digest, Principal::token(name, scopes));
        Ok(())
    }

    /// Accept `--auth-token`: its holder holds every scope.
    pub fn add_auth_token(&mut self, token: &str) -> Result<(), String> {
        self.add(AUTH_TOKEN_NAME, digest(token), Scopes::All)
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// The principal a presented bearer token stands for, if it is one of these. Compared by
    /// digest, so the time taken says nothing of how much of a token matched.
    pub fn holder(&self, bearer: &str) -> Option<Principal> {
        self.by_digest.get(&digest(bearer)).cloned()
    }
}

/// The SHA-256 digest of a token.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A digest written as 64 hexadecimal digits (as `sha256sum` prints it).
pub fn parse_digest(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    let invalid = || {
        format!(
            "expected the token's SHA-256 digest as 64 hexadecimal digits (`printf %s TOKEN | sha256sum`), not {} characters",
            hex.len()
        )
    };
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(invalid());
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn callers_ids_are_stable_keyed_and_differ_per_plugin() {
        let alice = Principal::oauth("https://as", Some("alice".into()), None, scopes(&[]));
        let again = Principal::oauth("https://as", Some("alice".into()), None, scopes(&["x"]));
        let bob = Principal::oauth("https://as", Some("bob".into()), None, scopes(&[]));
        let key = [7u8; 32];
        let id = alice.id_in("todo", &key);
        assert_eq!(id.len(), 32);
        assert_eq!(
            id,
            again.id_in("todo", &key),
            "scopes do not change who it is"
        );
        assert_ne!(id, bob.id_in("todo", &key));
        assert_ne!(id, alice.id_in("notes", &key), "another plugin, another id");
        assert_ne!(
            id,
            alice.id_in("todo", &[8u8; 32]),
            "another store, another id"
        );
        assert_eq!(id, caller_id("todo", "oauth:https://as sub:alice", &key));
        // Lengths are hashed too: no plugin name and key can pose as another pair.
        assert_ne!(caller_id("ab", "c", &key), caller_id("a", "bc", &key));
    }

    #[test]
    fn display_names_are_cleaned_and_bounded() {
        let named = Principal::local().named(Some("Ada\n\u{1b}[31m Lovelace".into()));
        assert_eq!(named.name(), Some("Ada[31m Lovelace"));
        let long = Principal::local().named(Some("é".repeat(300)));
        assert!(long.name().is_some_and(|n| n.len() <= MAX_NAME_BYTES));
        assert_eq!(Principal::local().named(Some("\n".into())).name(), None);
        assert_eq!(Principal::token("ci", Scopes::All).name(), Some("ci"));
    }

    #[test]
    fn the_same_issuer_and_subject_are_one_principal_and_others_are_not() {
        let alice = Principal::oauth("https://as", Some("alice".into()), None, scopes(&["mcp"]));
        let again = Principal::oauth(
            "https://as",
            Some("alice".into()),
            Some("app".into()),
            scopes(&[]),
        );
        let bob = Principal::oauth("https://as", Some("bob".into()), None, scopes(&["mcp"]));
        let elsewhere = Principal::oauth("https://other", Some("alice".into()), None, scopes(&[]));
        assert!(alice.is(&again));
        assert!(!alice.is(&bob));
        assert!(!alice.is(&elsewhere));
        assert!(!alice.is(&Principal::local()));
        assert!(!Principal::token("alice", Scopes::All).is(&alice));
        // A subject cannot pose as a client, nor one issuer's subject as another's.
        let client = Principal::oauth("https://as", None, Some("alice".into()), scopes(&[]));
        assert!(!client.is(&alice));
        let posing = Principal::oauth("https://as", Some("client:alice".into()), None, scopes(&[]));
        assert!(!posing.is(&client));
    }

    #[test]
    fn scopes_are_checked_unless_all_are_held() {
        let required = vec!["mcp".to_owned(), "admin".to_owned()];
        let user = Principal::oauth("https://as", Some("u".into()), None, scopes(&["mcp"]));
        assert_eq!(user.missing(&required), vec!["admin"]);
        assert!(Principal::local().missing(&required).is_empty());
        let ci = Principal::token("ci", Scopes::Granted(scopes(&["admin", "mcp"])));
        assert!(ci.missing(&required).is_empty());
    }

    #[test]
    fn tokens_are_known_by_digest_and_name_their_holder() {
        let mut tokens = Tokens::default();
        let alice = parse_digest(&format!("{:x}", Sha256::digest(b"alice-secret"))).unwrap();
        tokens
            .add("alice", alice, Scopes::Granted(scopes(&["mcp"])))
            .unwrap();
        tokens.add_auth_token("the-old-one").unwrap();
        let holder = tokens.holder("alice-secret").unwrap();
        assert_eq!(holder.key(), "token:alice");
        assert_eq!(holder.missing(&["admin".to_owned()]), vec!["admin"]);
        assert!(tokens.holder("alice-secre").is_none());
        assert_eq!(tokens.holder("the-old-one").unwrap().scopes(), &Scopes::All);
        assert!(
            tokens.add("alice", [0; 32], Scopes::All).is_err(),
            "one name, one token"
        );
        assert!(
            tokens.add("bob", alice, Scopes::All).is_err(),
            "one token, one name"
        );
        assert!(parse_digest("abc").is_err());
        assert!(parse_digest(&"zz".repeat(32)).is_err());
        assert!(
            format!("{holder:?}").contains("alice") && !format!("{holder:?}").contains("secret")
        );
    }
}
