//! The token lookup at send time, with refresh: one lookup at a time per (caller, provider) in
//! a process, and across replicas one refresh at a time, under a lease in the store. A fresh
//! token is returned as is; one within `refresh-before-secs` of its expiry is refreshed by
//! whoever takes the lease, while the others wait (boundedly) for the new record. The provider
//! refusing the refresh token (`invalid_grant`) removes the link: the caller must link again.
//! The provider being unreachable keeps a token that is still valid, and otherwise says the
//! token is unavailable.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use zeroize::Zeroizing;

use super::store::LinkRecord;
use super::token::TokenError;
use super::{AccessToken, Broker, CredentialError, CredentialEvent, Provider, TokenLookup, now_ms};

/// How long a refresh lease lasts: longer than a token request may take (10 s).
const LEASE_MS: u64 = 30_000;
/// How often a lookup waiting for another's refresh reads the record.
const WAIT_POLL: Duration = Duration::from_millis(100);
/// How long a lookup waits for another's refresh.
const WAIT_FOR_OTHER: Duration = Duration::from_secs(5);

/// Whether `record`'s token is good for `provider.refresh_before` more at `now`.
fn fresh(record: &LinkRecord, provider: &Provider, now: u64) -> bool {
    let margin = u64::try_from(provider.refresh_before.as_millis()).unwrap_or(u64::MAX);
    record
        .expires_at_ms
        .is_none_or(|expires| expires > now.saturating_add(margin))
}

/// Whether `record`'s token has not expired at `now`.
fn valid(record: &LinkRecord, now: u64) -> bool {
    record.expires_at_ms.is_none_or(|expires| expires > now)
}

fn ready(record: &LinkRecord) -> TokenLookup {
    TokenLookup::Ready(AccessToken(Zeroizing::new(record.access_token.clone())))
}

impl Broker {
    /// The caller's token for `provider`, refreshed if it is near its expiry.
    pub async fn access_token(&self, caller_key: &str, provider: &str) -> TokenLookup {
        let Some(configured) = self.providers.get(provider).cloned() else {
            return TokenLookup::Unavailable(format!("no provider `{provider}` is configured"));
        };
        let flight = Arc::clone(
            self.flights
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((caller_key.to_owned(), provider.to_owned()))
                .or_default(),
        );
        let outcome = {
            let _one = flight.lock().await;
            self.lookup(caller_key, &configured).await
        };
        {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            if Arc::strong_count(&flight) == 2 {
                flights.remove(&(caller_key.to_owned(), provider.to_owned()));
            }
        }
        match outcome {
            Ok(lookup) => lookup,
            Err(e) => {
                tracing::info!(caller = caller_key, provider, "no token: {e}");
                TokenLookup::Unavailable(e.to_string())
            }
        }
    }

    async fn lookup(
        &self,
        caller: &str,
        provider: &Provider,
    ) -> Result<TokenLookup, CredentialError> {
        if let Some(exchange) = provider.exchange() {
            return self.exchanged_token(caller, provider, exchange).await;
        }
        let name = provider.name.as_str();
        let found = match self.store.get_link(caller, name).await {
            Err(CredentialError::Sealed(e)) => {
                tracing::warn!(
                    caller,
                    provider = name,
                    "the caller's link does not open, so they must link again: {e}"
                );
                None
            }
            other => other?,
        };
        let Some((raw, record)) = found else {
            return Ok(TokenLookup::LinkNeeded);
        };
        let now = now_ms();
        if fresh(&record, provider, now) {
            return Ok(ready(&record));
        }
        if record.refresh_token.is_none() {
            return Ok(if valid(&record, now) {
                ready(&record)
            } else {
                TokenLookup::LinkNeeded
            });
        }
        let Some(lease) = self.store.take_lease(caller, name, now, LEASE_MS).await? else {
            return self.wait_for_other(caller, provider, &raw, &record).await;
        };
        // Read again under the lease: another replica may have refreshed since.
        let outcome = match self.store.get_link(caller, name).await {
            Ok(None) => Ok(TokenLookup::LinkNeeded),
            Ok(Some((_, current))) if fresh(&current, provider, now_ms()) => Ok(ready(&current)),
            Ok(Some((raw, current))) => self.refresh(caller, provider, &raw, &current).await,
            Err(e) => Err(e),
        };
        if let Err(e) = self.store.release_lease(caller, name, lease).await {
            tracing::debug!(
                caller,
                provider = name,
                "could not release a refresh lease: {e}"
            );
        }
        outcome
    }

    /// Another process holds the lease: wait for its new record, boundedly.
    async fn wait_for_other(
        &self,
        caller: &str,
        provider: &Provider,
        raw: &[u8],
        record: &LinkRecord,
    ) -> Result<TokenLookup, CredentialError> {
        let name = provider.name.as_str();
        let deadline = tokio::time::Instant::now() + WAIT_FOR_OTHER;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(WAIT_POLL).await;
            match self.store.get_link(caller, name).await? {
                None => return Ok(TokenLookup::LinkNeeded),
                Some((now_raw, current)) if now_raw != raw && valid(&current, now_ms()) => {
                    return Ok(ready(&current));
                }
                Some(_) => {}
            }
        }
        Ok(if valid(record, now_ms()) {
            ready(record)
        } else {
            TokenLookup::Unavailable(format!(
                "provider `{name}`: another mcpbox is refreshing the token and has not finished"
            ))
        })
    }

    /// Refresh `record` (read as `raw`), holding the lease.
    async fn refresh(
        &self,
        caller: &str,
        provider: &Provider,
        raw: &[u8],
        record: &LinkRecord,
    ) -> Result<TokenLookup, CredentialError> {
        let name = provider.name.as_str();
        let Some(refresh_token) = record.refresh_token.as_deref() else {
            return Ok(TokenLookup::LinkNeeded);
        };
        let secret = self.client_secret(provider)?;
        let answer = self
            .tokens
            .refresh(
                provider,
                secret.as_deref().map(String::as_str),
                refresh_token,
            )
            .await;
        let now = now_ms();
        match answer {
            Ok(tokens) => {
                let fresh = super::record_of(&tokens, Some(record), now, None);
                self.store.put_link(caller, name, &fresh).await?;
                self.emit(
                    CredentialEvent::Refreshed,
                    caller,
                    name,
                    record.plugin.as_deref(),
                );
                Ok(ready(&fresh))
            }
            Err(TokenError::InvalidGrant) => {
                self.store.delete_link_if(caller, name, raw).await?;
                self.emit(
                    CredentialEvent::RefreshFailed(
                        "the provider refused the refresh token (invalid_grant); the link was removed"
                            .to_owned(),
                    ),
                    caller,
                    name,
                    record.plugin.as_deref(),
                );
                Ok(TokenLookup::LinkNeeded)
            }
            Err(error) => {
                let why = format!("provider `{name}`: {error}");
                self.emit(
                    CredentialEvent::RefreshFailed(why.clone()),
                    caller,
                    name,
                    record.plugin.as_deref(),
                );
                Ok(if valid(record, now) {
                    ready(record)
                } else {
                    TokenLookup::Unavailable(why)
                })
            }
        }
    }
}
