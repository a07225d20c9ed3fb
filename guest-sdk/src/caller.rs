//! Who is calling: the principal the host recognised for the current request.
//!
//! ```no_run
//! if let Some(caller) = mcpbox_sdk::caller() {
//!     let greeting = format!("hello, {}", caller.name.as_deref().unwrap_or("stranger"));
//!     let can_admin = caller.has_scope("admin");
//!     # let _ = (greeting, can_admin);
//! }
//! ```
//!
//! `id` is opaque and stable: the same caller gets the same id in every call, session and
//! restart, and on every replica sharing one state store; another plugin sees another id for
//! them. Keep per-user data under it, or simpler, in a caller bucket (`[keyvalue]
//! caller-buckets` in the manifest), which the host keeps apart per caller for you. A
//! caller's tokens never reach a plugin.

pub use crate::bindings::mcpbox::multi_user::caller::{CallerKind, Principal as Caller};

/// The caller of the current request; `None` while the host reads the plugin's lists.
pub fn caller() -> Option<Caller> {
    crate::bindings::mcpbox::multi_user::caller::current()
}

impl Caller {
    /// Whether the caller holds `scope` (always, for the local user and `--auth-token`).
    pub fn has_scope(&self, scope: &str) -> bool {
        self.all_scopes || self.scopes.iter().any(|held| held == scope)
    }
}
