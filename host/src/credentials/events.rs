//! What happens to links, for the audit log: linked, a link that failed, refreshed, a refresh
//! that failed, unlinked. The broker logs an info line for each (the event, the caller's key
//! and the provider: never a value) and hands it to a [`CredentialEvents`] sink, which the
//! host connects to its audit log; this room never names the server's audit types.

/// Who unlinked an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlinkedBy {
    /// The user, through the host's MCP tool.
    User,
    /// The operator (`mcpbox credentials rm`).
    Operator,
    /// mcpbox itself: the provider refused the refresh token.
    Host,
}

impl UnlinkedBy {
    /// Its name in logs and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Operator => "operator",
            Self::Host => "host",
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialEvent {
    /// An account was linked.
    Linked,
    /// A link attempt failed (why, in words without values).
    LinkFailed(String),
    /// A token was refreshed.
    Refreshed,
    /// A refresh failed (why).
    RefreshFailed(String),
    /// A link was removed.
    Unlinked(UnlinkedBy),
    /// A caller's sign-in token was exchanged for a provider's token (RFC 8693).
    Exchanged,
    /// An exchange failed (why).
    ExchangeFailed(String),
}

impl CredentialEvent {
    /// The audit method: `credentials/link`, `credentials/link_failed`, …
    pub fn method(&self) -> &'static str {
        match self {
            Self::Linked => "credentials/link",
            Self::LinkFailed(_) => "credentials/link_failed",
            Self::Refreshed => "credentials/refresh",
            Self::RefreshFailed(_) => "credentials/refresh_failed",
            Self::Unlinked(_) => "credentials/unlink",
            Self::Exchanged => "credentials/exchange",
            Self::ExchangeFailed(_) => "credentials/exchange_failed",
        }
    }

    /// Whether it is a success (`ok`) or not (`error`).
    pub fn is_ok(&self) -> bool {
        !matches!(
            self,
            Self::LinkFailed(_) | Self::RefreshFailed(_) | Self::ExchangeFailed(_)
        )
    }

    /// Why, for a failure (or who, for an unlink).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::LinkFailed(why) | Self::RefreshFailed(why) | Self::ExchangeFailed(why) => {
                Some(why)
            }
            Self::Unlinked(by) => Some(by.as_str()),
            Self::Linked | Self::Refreshed | Self::Exchanged => None,
        }
    }
}

/// One event: what, whose, which provider, for which plugin (if known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// What happened.
    pub event: CredentialEvent,
    /// The caller's key.
    pub caller: String,
    /// The provider.
    pub provider: String,
    /// The plugin whose call it was for, if known.
    pub plugin: Option<String>,
}

/// Where events go (the host's audit log). Recording must not block.
pub trait CredentialEvents: Send + Sync + std::fmt::Debug + 'static {
    /// Record one event.
    fn record(&self, event: EventRecord);
}

/// No sink: events are logged only.
#[derive(Debug, Default)]
pub struct LogOnly;

impl CredentialEvents for LogOnly {
    fn record(&self, _: EventRecord) {}
}

/// Log `record` (an info line, never a value) and hand it to `sink`.
pub(super) fn emit(sink: &dyn CredentialEvents, record: EventRecord) {
    tracing::info!(
        event = record.event.method(),
        caller = %record.caller,
        provider = %record.provider,
        plugin = record.plugin.as_deref().unwrap_or(""),
        reason = record.event.reason().unwrap_or(""),
        "credentials"
    );
    sink.record(record);
}
