//! State kept per client session (`caller-scope = "session"`): each session's own store in
//! this process's memory, made on its first use and dropped when the session ends, so state
//! of sessions gone never accumulates. Sessions are this process's (stdio's one, or HTTP
//! sessions made by `initialize`), named by a number the server never reuses.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use super::{MemoryStore, StateStore};

/// The stores of the sessions that used one, by session number.
static STORES: LazyLock<Mutex<HashMap<u64, Arc<MemoryStore>>>> = LazyLock::new(Mutex::default);

fn stores() -> std::sync::MutexGuard<'static, HashMap<u64, Arc<MemoryStore>>> {
    STORES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The store of session `session`, made on first use.
pub fn session_store(session: u64) -> Arc<dyn StateStore> {
    let mut stores = stores();
    let store = stores
        .entry(session)
        .or_insert_with(|| Arc::new(MemoryStore::new()));
    Arc::clone(store) as Arc<dyn StateStore>
}

/// Session `session` ended: its store, if it had one, is dropped.
pub fn end_session(session: u64) {
    if stores().remove(&session).is_some() {
        tracing::debug!(session, "dropped the session's own state");
    }
}

/// How many sessions have a store now.
pub fn sessions_with_state() -> usize {
    stores().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sessions_state_is_its_own_and_goes_with_it() {
        let quota = crate::kv::Quota::default();
        let (a, b) = (u64::MAX - 1, u64::MAX - 2);
        session_store(a)
            .set("p/c", "t", "k", b"a".to_vec(), quota)
            .await
            .unwrap();
        assert_eq!(
            session_store(a).get("p/c", "t", "k").await.unwrap(),
            Some(b"a".to_vec())
        );
        assert_eq!(session_store(b).get("p/c", "t", "k").await.unwrap(), None);
        end_session(a);
        end_session(b);
        assert!(!stores().contains_key(&a) && !stores().contains_key(&b));
        assert_eq!(session_store(a).get("p/c", "t", "k").await.unwrap(), None);
        end_session(a);
    }
}
