//! RFC 8693 token exchange, for providers behind the same identity provider as mcpbox's own
//! OAuth (`grant = "token-exchange"`): the caller's access token to mcpbox (the subject token)
//! is exchanged at the provider's token endpoint for a token of the provider's, at the first
//! brokered request that needs one and again when that one nears its expiry. Nothing is linked
//! and nothing reaches the state store: the exchanged token is held in this process's memory,
//! bound to the subject token it came from, and dropped when it expires, when the caller signs
//! in with another token, or when the process ends (another replica exchanges on its own).
//!
//! The HTTP edge hands each verified OAuth token to [`Broker::remember_subject`] (only when a
//! provider exchanges); a caller without one (stdio's local user, a static bearer token) gets a
//! clear "unavailable" answer naming why. Both tables are bounded in entries, and their tokens
//! are wiped when dropped.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use super::provider::{Exchange, Provider};
use super::token::TokenError;
use super::{AccessToken, Broker, CredentialError, CredentialEvent, TokenLookup, millis, now_ms};

/// The most callers whose subject tokens, and the most exchanged tokens, a process holds.
pub const MAX_HELD: usize = 65_536;

/// A caller's current sign-in token to mcpbox.
struct Subject {
    token: Zeroizing<String>,
    digest: [u8; 32],
    expires_at_ms: u64,
}

/// A token the provider issued for a subject token.
struct Held {
    subject: [u8; 32],
    token: Zeroizing<String>,
    expires_at_ms: Option<u64>,
}

/// The subject tokens by caller key, and the exchanged tokens by (caller key, provider).
#[derive(Default)]
pub(super) struct Exchanges {
    subjects: Mutex<HashMap<String, Subject>>,
    held: Mutex<HashMap<(String, String), Held>>,
}

/// Make room in `map` for one more: drop what expired at `now`, then, if it is still full,
/// the entry that expires first.
fn make_room<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    now: u64,
    expiry: impl Fn(&V) -> u64,
) {
    if map.len() < MAX_HELD {
        return;
    }
    map.retain(|_, v| expiry(v) > now);
    if map.len() >= MAX_HELD
        && let Some(first) = map
            .iter()
            .min_by_key(|(_, v)| expiry(v))
            .map(|(k, _)| k.clone())
    {
        map.remove(&first);
    }
}

impl Exchanges {
    fn subject(&self, caller: &str, now: u64) -> Option<(Zeroizing<String>, [u8; 32])> {
        let subjects = self.subjects.lock().unwrap_or_else(PoisonError::into_inner);
        subjects
            .get(caller)
            .filter(|s| s.expires_at_ms > now)
            .map(|s| (s.token.clone(), s.digest))
    }

    /// The exchanged token for `caller` at `provider`, if it came from `subject` and is good for
    /// `margin` more milliseconds at `now` (`margin` 0: merely unexpired).
    fn held(
        &self,
        caller: &str,
        provider: &str,
        subject: &[u8; 32],
        now: u64,
        margin: u64,
    ) -> Option<Zeroizing<String>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&(caller.to_owned(), provider.to_owned()))
            .filter(|h| &h.subject == subject)
            .filter(|h| {
                h.expires_at_ms
                    .is_none_or(|e| e > now.saturating_add(margin))
            })
            .map(|h| h.token.clone())
    }

    fn hold(&self, caller: &str, provider: &str, held: Held, now: u64) {
        let mut map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (caller.to_owned(), provider.to_owned());
        if !map.contains_key(&key) {
            make_room(&mut map, now, |h| h.expires_at_ms.unwrap_or(u64::MAX));
        }
        map.insert(key, held);
    }

    /// Forget `caller`'s exchanged token at `provider`; whether there was one.
    pub(super) fn forget(&self, caller: &str, provider: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(caller.to_owned(), provider.to_owned()))
            .is_some()
    }
}

impl Broker {
    /// Keep `token`, the OAuth access token `caller_key` just presented to mcpbox (verified,
    /// expiring at `expires_at_ms`), as the subject token of their exchanges. Does nothing if no
    /// provider exchanges tokens.
    pub fn remember_subject(&self, caller_key: &str, token: &str, expires_at_ms: u64) {
        if !self.exchanging {
            return;
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = now_ms();
        let mut subjects = self
            .exchanges
            .subjects
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(current) = subjects.get(caller_key)
            && current.digest == digest
        {
            return;
        }
        if !subjects.contains_key(caller_key) {
            make_room(&mut subjects, now, |s| s.expires_at_ms);
        }
        subjects.insert(
            caller_key.to_owned(),
            Subject {
                token: Zeroizing::new(token.to_owned()),
                digest,
                expires_at_ms,
            },
        );
    }

    /// The caller's token at `provider` (which exchanges), exchanged now if the one held is
    /// near its expiry or came from another subject token.
    pub(super) async fn exchanged_token(
        &self,
        caller: &str,
        provider: &Provider,
        exchange: &Exchange,
    ) -> Result<TokenLookup, CredentialError> {
        let name = provider.name.as_str();
        let now = now_ms();
        let Some((subject, digest)) = self.exchanges.subject(caller, now) else {
            return Ok(TokenLookup::Unavailable(format!(
                "provider `{name}` acts with the caller's own sign-in to mcpbox (RFC 8693 token \
                 exchange), and this caller has no current OAuth access token to mcpbox: sign in \
                 to mcpbox over HTTP with OAuth"
            )));
        };
        let margin = millis(provider.refresh_before);
        if let Some(token) = self.exchanges.held(caller, name, &digest, now, margin) {
            return Ok(TokenLookup::Ready(AccessToken(token)));
        }
        let secret = self.client_secret(provider)?;
        let answer = self
            .tokens
            .exchange(
                provider,
                secret.as_deref().map(String::as_str),
                &subject,
                exchange,
            )
            .await
            .and_then(|tokens| {
                if tokens
                    .token_type
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case("N_A"))
                {
                    Err(TokenError::Malformed(
                        "the issued token is not an access token (token_type N_A)".to_owned(),
                    ))
                } else {
                    Ok(tokens)
                }
            });
        let now = now_ms();
        match answer {
            Ok(tokens) => {
                let expires_at_ms = tokens
                    .expires_in
                    .map(|secs| now.saturating_add(secs.saturating_mul(1000)));
                let token = tokens.access_token.clone();
                self.exchanges.hold(
                    caller,
                    name,
                    Held {
                        subject: digest,
                        token: tokens.access_token,
                        expires_at_ms,
                    },
                    now,
                );
                self.emit(CredentialEvent::Exchanged, caller, name, None);
                Ok(TokenLookup::Ready(AccessToken(token)))
            }
            Err(error) => {
                let why = match error {
                    TokenError::InvalidGrant => format!(
                        "provider `{name}` refused to exchange the caller's sign-in token \
                         (invalid_grant): sign in to mcpbox again, or ask the operator whether \
                         this account may use it"
                    ),
                    other => format!("provider `{name}`: {other}"),
                };
                self.emit(
                    CredentialEvent::ExchangeFailed(why.clone()),
                    caller,
                    name,
                    None,
                );
                // A token from this subject that has not expired still serves.
                Ok(match self.exchanges.held(caller, name, &digest, now, 0) {
                    Some(token) => TokenLookup::Ready(AccessToken(token)),
                    None => TokenLookup::Unavailable(why),
                })
            }
        }
    }
}
