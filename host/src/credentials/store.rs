//! Where credential records live: the plugin state store (`kv`, embedded or Redis, so every
//! replica sees a link made on one), in the namespace [`CREDENTIALS_SPACE`], which no plugin
//! and no `mcpbox state` argument can name. Every value holding anything secret is sealed
//! ([`Cipher`]) with its place in the associated data:
//!
//! | bucket | key | value |
//! |---|---|---|
//! | the caller's key | `link:PROVIDER` | sealed [`LinkRecord`] (empty: unlinked) |
//! | the caller's key | `lease:PROVIDER` | `{"owner":…,"until_ms":…}`: who refreshes now |
//! | the caller's key | `pending:PROVIDER` | sealed ticket id: the pending link request |
//! | `#tickets` | the ticket (`EXPIRY.RANDOM`) | sealed [`Ticket`] |
//! | `#flows` | `EXPIRY.SHA256(state)` | sealed [`Flow`] (`used` once consumed) |
//!
//! The store has no expiry of its own: ticket and flow keys begin with their expiry in
//! milliseconds, zero-padded, so byte order is expiry order, and [`CredentialStore::sweep`]
//! removes the first page's expired ones. Every read checks the expiry too. A caller's key
//! never begins with `#` (`oauth:…`, `token:…`, `local`), so the two kinds of bucket cannot
//! meet.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zeroize::{Zeroize as _, Zeroizing};

use super::CredentialError;
use super::cipher::{Cipher, Kind};
use crate::kv::{KvError, Quota, StateService, StateStore};

/// The namespace of credential records: no plugin can have this name (a plugin's name is a
/// file name, which cannot hold NUL), no command-line argument can carry it, and it holds no
/// `/`, so it is nobody's caller namespace either.
pub const CREDENTIALS_SPACE: &str = "\0credentials";

/// The bucket of link tickets.
const TICKETS: &str = "#tickets";
/// The bucket of authorization flows.
const FLOWS: &str = "#flows";
/// What a consumed flow's value becomes.
const USED: &[u8] = b"used";

/// The namespace's quota: generous (it is the host's own), but bounded.
const QUOTA: Quota = Quota {
    max_bytes: 1 << 30,
    max_keys: 1_000_000,
    max_value_bytes: 64 << 10,
    total: None,
};

/// One caller's link to one provider.
#[derive(Clone, Serialize, Deserialize)]
pub struct LinkRecord {
    /// The access token.
    pub access_token: String,
    /// The refresh token, if the provider gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The token's type as the provider named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// The scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// When the access token expires (ms since the epoch), if the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// When the account was linked.
    pub linked_at_ms: u64,
    /// When the token was last refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed_at_ms: Option<u64>,
    /// The plugin whose call asked for the link, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

impl Drop for LinkRecord {
    fn drop(&mut self) {
        self.access_token.zeroize();
        if let Some(refresh) = &mut self.refresh_token {
            refresh.zeroize();
        }
    }
}

impl std::fmt::Debug for LinkRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkRecord")
            .field("refreshable", &self.refresh_token.is_some())
            .field("scopes", &self.scopes)
            .field("expires_at_ms", &self.expires_at_ms)
            .field("linked_at_ms", &self.linked_at_ms)
            .finish_non_exhaustive()
    }
}

/// Where a link request stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TicketStatus {
    /// Waiting for the user.
    Pending,
    /// The account was linked.
    Linked,
    /// It failed, or the user declined at the provider (why, in words without values).
    Failed(String),
}

/// A link request: a caller should link a provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ticket {
    /// The caller's key.
    pub caller: String,
    /// The provider.
    pub provider: String,
    /// The plugin whose call asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The URL elicitation's id, the same for every round that shows this ticket.
    pub elicitation_id: String,
    /// Where it stands.
    pub status: TicketStatus,
}

/// An authorization flow in progress: made at `/oauth/link/start`, consumed at the callback.
#[derive(Clone, Serialize, Deserialize)]
pub struct Flow {
    /// The ticket it serves.
    pub ticket: String,
    /// The caller's key.
    pub caller: String,
    /// The provider.
    pub provider: String,
    /// The PKCE code verifier.
    pub verifier: String,
    /// SHA-256 (hex) of the browser cookie that started it.
    pub cookie_hash: String,
    /// The redirect URI the authorization request named.
    pub redirect_uri: String,
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.verifier.zeroize();
    }
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow")
            .field("caller", &self.caller)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

/// A refresh lease, held.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    owner: String,
    until_ms: u64,
}

/// The credential records, sealed, in the state store.
#[derive(Debug, Clone)]
pub struct CredentialStore {
    state: Arc<StateService>,
    cipher: Arc<Cipher>,
}

/// The expiry (ms) a ticket or flow key begins with.
pub fn expiry_of(key: &str) -> Option<u64> {
    let (expiry, _) = key.split_once('.')?;
    (expiry.len() == 13).then(|| expiry.parse().ok()).flatten()
}

/// `EXPIRY.REST`, the expiry zero-padded so byte order is expiry order.
pub fn expiring_key(expires_ms: u64, rest: &str) -> String {
    format!("{expires_ms:013}.{rest}")
}

fn link_key(provider: &str) -> String {
    format!("link:{provider}")
}

fn lease_key(provider: &str) -> String {
    format!("lease:{provider}")
}

fn pending_key(provider: &str) -> String {
    format!("pending:{provider}")
}

impl CredentialStore {
    /// Records in `state`, sealed with `cipher`.
    pub fn new(state: Arc<StateService>, cipher: Arc<Cipher>) -> Self {
        Self { state, cipher }
    }

    async fn backend(&self) -> Result<&Arc<dyn StateStore>, CredentialError> {
        Ok(self.state.backend().await?)
    }

    /// The caller's link to `provider`: its stored bytes and the record.
    pub async fn get_link(
        &self,
        caller: &str,
        provider: &str,
    ) -> Result<Option<(Vec<u8>, LinkRecord)>, CredentialError> {
        let raw = self
            .backend()
            .await?
            .get(CREDENTIALS_SPACE, caller, &link_key(provider))
            .await?;
        let Some(raw) = raw.filter(|raw| !raw.is_empty()) else {
            return Ok(None);
        };
        let plain = self.cipher.open(Kind::Link, &[caller, provider], &raw)?;
        let record = serde_json::from_slice(&plain)
            .map_err(|e| CredentialError::Corrupt(format!("a link record: {e}")))?;
        Ok(Some((raw, record)))
    }

    /// Store the caller's link to `provider`.
    pub async fn put_link(
        &self,
        caller: &str,
        provider: &str,
        record: &LinkRecord,
    ) -> Result<(), CredentialError> {
        let sealed = self.seal_json(Kind::Link, &[caller, provider], record)?;
        self.backend()
            .await?
            .set(
                CREDENTIALS_SPACE,
                caller,
                &link_key(provider),
                sealed,
                QUOTA,
            )
            .await?;
        Ok(())
    }

    /// Unlink, but only if the link is still the bytes `raw` (a refresh elsewhere may have
    /// replaced it): whether it was.
    pub async fn delete_link_if(
        &self,
        caller: &str,
        provider: &str,
        raw: &[u8],
    ) -> Result<bool, CredentialError> {
        Ok(self
            .backend()
            .await?
            .swap(
                CREDENTIALS_SPACE,
                caller,
                &link_key(provider),
                Some(raw.to_vec()),
                Vec::new(),
                QUOTA,
            )
            .await?)
    }

    /// Unlink (with its lease and pending request): whether there was a link.
    pub async fn delete_link(&self, caller: &str, provider: &str) -> Result<bool, CredentialError> {
        let backend = self.backend().await?;
        let key = link_key(provider);
        let existed = backend
            .get(CREDENTIALS_SPACE, caller, &key)
            .await?
            .is_some_and(|raw| !raw.is_empty());
        backend.delete(CREDENTIALS_SPACE, caller, &key).await?;
        backend
            .delete(CREDENTIALS_SPACE, caller, &lease_key(provider))
            .await?;
        backend
            .delete(CREDENTIALS_SPACE, caller, &pending_key(provider))
            .await?;
        Ok(existed)
    }

    /// The caller's links, by provider name.
    pub async fn links_of(
        &self,
        caller: &str,
    ) -> Result<Vec<(String, LinkRecord)>, CredentialError> {
        let mut out = Vec::new();
        for provider in providers_linked(self.backend().await?.as_ref(), caller).await? {
            if let Some((_, record)) = self.get_link(caller, &provider).await? {
                out.push((provider, record));
            }
        }
        Ok(out)
    }

    /// Try to take the refresh lease of the caller's link to `provider` for `ttl_ms`: `None`
    /// if someone else holds it.
    pub async fn take_lease(
        &self,
        caller: &str,
        provider: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Option<Lease>, CredentialError> {
        let backend = self.backend().await?;
        let key = lease_key(provider);
        let current = backend.get(CREDENTIALS_SPACE, caller, &key).await?;
        if let Some(held) = current
            .as_deref()
            .and_then(|raw| serde_json::from_slice::<Lease>(raw).ok())
            && held.until_ms > now_ms
        {
            return Ok(None);
        }
        let lease = Lease {
            owner: uuid::Uuid::new_v4().to_string(),
            until_ms: now_ms + ttl_ms,
        };
        let value = serde_json::to_vec(&lease)
            .map_err(|e| CredentialError::Corrupt(format!("a lease: {e}")))?;
        let taken = backend
            .swap(CREDENTIALS_SPACE, caller, &key, current, value, QUOTA)
            .await?;
        Ok(taken.then_some(lease))
    }

    /// Give a lease back (if it is still ours: a lease that ran out may be another's now).
    pub async fn release_lease(
        &self,
        caller: &str,
        provider: &str,
        lease: Lease,
    ) -> Result<(), CredentialError> {
        let ours = serde_json::to_vec(&lease)
            .map_err(|e| CredentialError::Corrupt(format!("a lease: {e}")))?;
        let expired = serde_json::to_vec(&Lease {
            owner: String::new(),
            until_ms: 0,
        })
        .map_err(|e| CredentialError::Corrupt(format!("a lease: {e}")))?;
        self.backend()
            .await?
            .swap(
                CREDENTIALS_SPACE,
                caller,
                &lease_key(provider),
                Some(ours),
                expired,
                QUOTA,
            )
            .await?;
        Ok(())
    }

    /// The ticket `id`, if it exists and has not expired at `now_ms`: its bytes and record.
    pub async fn get_ticket(
        &self,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(Vec<u8>, Ticket)>, CredentialError> {
        if expiry_of(id).is_none_or(|expiry| expiry <= now_ms) {
            return Ok(None);
        }
        let Some(raw) = self
            .backend()
            .await?
            .get(CREDENTIALS_SPACE, TICKETS, id)
            .await?
        else {
            return Ok(None);
        };
        let plain = self.cipher.open(Kind::Ticket, &[id], &raw)?;
        let ticket = serde_json::from_slice(&plain)
            .map_err(|e| CredentialError::Corrupt(format!("a ticket: {e}")))?;
        Ok(Some((raw, ticket)))
    }

    /// Store a new ticket `id`, and make it the caller's pending one for its provider.
    pub async fn put_ticket(&self, id: &str, ticket: &Ticket) -> Result<(), CredentialError> {
        let sealed = self.seal_json(Kind::Ticket, &[id], ticket)?;
        let backend = self.backend().await?;
        backend
            .set(CREDENTIALS_SPACE, TICKETS, id, sealed, QUOTA)
            .await?;
        let pointer = self.cipher.seal(
            Kind::Pending,
            &[&ticket.caller, &ticket.provider],
            id.as_bytes(),
        )?;
        backend
            .set(
                CREDENTIALS_SPACE,
                &ticket.caller,
                &pending_key(&ticket.provider),
                pointer,
                QUOTA,
            )
            .await?;
        Ok(())
    }

    /// Replace ticket `id` if it is still the bytes `raw`: whether it was.
    pub async fn swap_ticket(
        &self,
        id: &str,
        raw: Vec<u8>,
        ticket: &Ticket,
    ) -> Result<bool, CredentialError> {
        let sealed = self.seal_json(Kind::Ticket, &[id], ticket)?;
        Ok(self
            .backend()
            .await?
            .swap(CREDENTIALS_SPACE, TICKETS, id, Some(raw), sealed, QUOTA)
            .await?)
    }

    /// The caller's pending ticket id for `provider`, if any (it may have expired).
    pub async fn pending(
        &self,
        caller: &str,
        provider: &str,
    ) -> Result<Option<String>, CredentialError> {
        let Some(raw) = self
            .backend()
            .await?
            .get(CREDENTIALS_SPACE, caller, &pending_key(provider))
            .await?
        else {
            return Ok(None);
        };
        let plain = self.cipher.open(Kind::Pending, &[caller, provider], &raw)?;
        Ok(String::from_utf8(plain.to_vec()).ok())
    }

    /// Store a flow under `key` (`EXPIRY.SHA256(state)`).
    pub async fn put_flow(&self, key: &str, flow: &Flow) -> Result<(), CredentialError> {
        let sealed = self.seal_json(Kind::Flow, &[key], flow)?;
        self.backend()
            .await?
            .set(CREDENTIALS_SPACE, FLOWS, key, sealed, QUOTA)
            .await?;
        Ok(())
    }

    /// The flow under `key` if it exists, is unused and has not expired at `now_ms`: its bytes
    /// and record. [`CredentialError::Corrupt`] never comes from a forged key: such a key has
    /// no record.
    pub async fn get_flow(&self, key: &str, now_ms: u64) -> Result<FlowLookup, CredentialError> {
        if expiry_of(key).is_none_or(|expiry| expiry <= now_ms) {
            return Ok(FlowLookup::Expired);
        }
        let Some(raw) = self
            .backend()
            .await?
            .get(CREDENTIALS_SPACE, FLOWS, key)
            .await?
        else {
            return Ok(FlowLookup::Missing);
        };
        if raw == USED {
            return Ok(FlowLookup::Used);
        }
        let plain = self.cipher.open(Kind::Flow, &[key], &raw)?;
        let flow = serde_json::from_slice(&plain)
            .map_err(|e| CredentialError::Corrupt(format!("a flow: {e}")))?;
        Ok(FlowLookup::Found(raw, flow))
    }

    /// Consume the flow under `key`, read as `raw`: true for exactly one caller, on every
    /// backend (a swap to `used`).
    pub async fn consume_flow(&self, key: &str, raw: Vec<u8>) -> Result<bool, CredentialError> {
        Ok(self
            .backend()
            .await?
            .swap(
                CREDENTIALS_SPACE,
                FLOWS,
                key,
                Some(raw),
                USED.to_vec(),
                QUOTA,
            )
            .await?)
    }

    /// Remove the first page's tickets and flows that expired before `now_ms`; how many.
    pub async fn sweep(&self, now_ms: u64) -> Result<usize, CredentialError> {
        let backend = self.backend().await?;
        let mut removed = 0;
        for bucket in [TICKETS, FLOWS] {
            let page = backend.list_keys(CREDENTIALS_SPACE, bucket, None).await?;
            for key in page.keys {
                match expiry_of(&key) {
                    Some(expiry) if expiry > now_ms => break,
                    _ => {
                        backend.delete(CREDENTIALS_SPACE, bucket, &key).await?;
                        removed += 1;
                    }
                }
            }
        }
        Ok(removed)
    }

    fn seal_json<T: Serialize>(
        &self,
        kind: Kind,
        parts: &[&str],
        value: &T,
    ) -> Result<Vec<u8>, CredentialError> {
        let plain = Zeroizing::new(
            serde_json::to_vec(value)
                .map_err(|e| CredentialError::Corrupt(format!("a record: {e}")))?,
        );
        Ok(self.cipher.seal(kind, parts, &plain)?)
    }
}

/// What [`CredentialStore::get_flow`] found.
#[derive(Debug)]
pub enum FlowLookup {
    /// The flow, and its bytes.
    Found(Vec<u8>, Flow),
    /// No such flow (a forged state, or one swept away).
    Missing,
    /// Its expiry has passed.
    Expired,
    /// It was consumed already.
    Used,
}

/// The providers `caller` has a link record for (unlinked ones included until read).
async fn providers_linked(backend: &dyn StateStore, caller: &str) -> Result<Vec<String>, KvError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = backend
            .list_keys(CREDENTIALS_SPACE, caller, after.as_deref())
            .await?;
        out.extend(
            page.keys
                .iter()
                .filter_map(|k| k.strip_prefix("link:"))
                .map(str::to_owned),
        );
        match page.cursor {
            Some(cursor) => after = Some(cursor),
            None => return Ok(out),
        }
    }
}

/// Every link in the store, as (caller key, provider), for operators: no key needed, as the
/// names are not sealed (the values are).
pub async fn all_links(state: &StateService) -> Result<Vec<(String, String)>, KvError> {
    let backend = state.backend().await?;
    let mut out: Vec<(String, String)> = backend
        .entries(CREDENTIALS_SPACE)
        .await?
        .into_iter()
        .filter(|entry| !entry.bucket.starts_with('#') && entry.size > 0)
        .filter_map(|entry| {
            let provider = entry.key.strip_prefix("link:")?.to_owned();
            Some((entry.bucket, provider))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Remove the link of `caller` to `provider` without the key (the operator's `rm`), with its
/// lease and pending request: whether there was one.
pub async fn remove_link(
    state: &StateService,
    caller: &str,
    provider: &str,
) -> Result<bool, KvError> {
    let backend = state.backend().await?;
    let key = link_key(provider);
    let existed = backend
        .get(CREDENTIALS_SPACE, caller, &key)
        .await?
        .is_some_and(|raw| !raw.is_empty());
    for key in [key, lease_key(provider), pending_key(provider)] {
        backend.delete(CREDENTIALS_SPACE, caller, &key).await?;
    }
    Ok(existed)
}

#[cfg(test)]
mod tests;
