//! The stores replicas share, as the server sees them: the task records and the budgets
//! kept in Redis (`kv::tasks`, `kv::budgets`) behind the server's [`TaskStore`] and
//! [`SharedBudgets`] traits.
//!
//! [`TaskStore`]: crate::server::TaskStore
//! [`SharedBudgets`]: crate::server::SharedBudgets

use super::*;

/// The task records replicas share, kept in Redis (`kv::tasks`) for the server's tasks.
pub(super) struct SharedTasks(pub(super) crate::kv::tasks::RedisTasks);

impl crate::server::TaskStore for SharedTasks {
    fn save<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        record: Vec<u8>,
        ttl: Duration,
        share: crate::server::TaskShare,
    ) -> crate::server::BoxFuture<'a, Result<(), crate::server::SaveError>> {
        Box::pin(async move {
            match self
                .0
                .save(id, owner, record, ttl, share.records, share.bytes)
                .await
            {
                Ok(true) => Ok(()),
                Ok(false) => Err(crate::server::SaveError::Share(share)),
                Err(e) => Err(crate::server::SaveError::Failed(e.to_string())),
            }
        })
    }

    fn load<'a>(
        &'a self,
        id: &'a str,
    ) -> crate::server::BoxFuture<'a, Result<Option<crate::server::Stored>, String>> {
        Box::pin(async move {
            let found = self.0.load(id).await.map_err(|e| e.to_string())?;
            Ok(found.map(|(record, cancelled)| crate::server::Stored { record, cancelled }))
        })
    }

    fn answer<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        answers: Vec<(String, Vec<u8>)>,
        ttl: Duration,
    ) -> crate::server::BoxFuture<'a, Result<std::collections::BTreeMap<String, Vec<u8>>, String>>
    {
        Box::pin(async move {
            self.0
                .answer(id, round, answers, ttl)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn cancel<'a>(
        &'a self,
        id: &'a str,
        ttl: Duration,
    ) -> crate::server::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.0.cancel(id, ttl).await.map_err(|e| e.to_string()) })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        round: u32,
        ttl: Duration,
    ) -> crate::server::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0
                .claim(id, round, ttl)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The budgets replicas share, kept in Redis (`kv::budgets`) for the server's budgets.
pub(super) struct SharedStore(pub(super) crate::kv::budgets::RedisBudgets);

impl crate::server::SharedBudgets for SharedStore {
    fn take_token<'a>(
        &'a self,
        caller: &'a str,
        rate: f64,
        burst: f64,
    ) -> crate::server::BoxFuture<'a, Result<Option<f64>, String>> {
        Box::pin(async move {
            self.0
                .take_token(caller, rate, burst)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn open_session<'a>(
        &'a self,
        caller: &'a str,
        id: &'a str,
        max: usize,
        lifetime: Duration,
    ) -> crate::server::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0
                .open_session(caller, id, max, lifetime)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn close_session<'a>(
        &'a self,
        caller: &'a str,
        id: &'a str,
    ) -> crate::server::BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.0.close_session(caller, id).await {
                tracing::debug!("could not uncount a closed session in the shared store: {e}");
            }
        })
    }
}
