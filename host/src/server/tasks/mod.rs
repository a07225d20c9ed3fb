//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`, 2026-07-28 only): a tool
//! call that may take long runs as a task the client polls, instead of holding its request.
//!
//! Which tools may run as tasks is the operator's to say (a manifest's `[tasks]`, read by the
//! backend as [`TaskUse`](super::TaskUse)); plugins need no change. A 2026-07-28 `tools/call` of such a tool,
//! from a request that declares the extension, starts the call detached (its own cancellation,
//! the plugin's task time limit) and waits a short grace ([`GRACE`]):
//!
//! - the plugin asked the client something: the round ends with an ordinary `input_required`
//!   (no task yet: the answers come back on a retry, which may then become a task);
//! - it finished: the ordinary result, or, for a tool that only runs as a task, a task created
//!   already finished;
//! - it still runs: the task is recorded (`working`) and the client gets a `CreateTaskResult`
//!   (`resultType: "task"`); the call goes on and its outcome is recorded when it ends.
//!
//! `tasks/get` shows the record, with the final result (`completed`; a tool error is a
//! completed task whose result has `isError`) or error (`failed`: the call produced no result)
//! inlined, or the questions a plugin asked (`input_required`). `tasks/update` takes answers;
//! when every question is answered, the call runs again with them (as an input round's retry,
//! verified by its signed state) under the same task. `tasks/cancel` stops it wherever it
//! runs. Without the extension declared, the three methods are -32021, and a tool that only
//! runs as a task is -32021 too; other tools run as plain calls.
//!
//! Guarantees: a task runs under the plugin's fuel and memory limits and its task time limit;
//! its call holds a place among its caller's running calls (the `calls` budget, as a plain
//! call does) from when it starts until it ends, however it ends; each caller runs at most
//! [`TaskSettings::max_per_caller`] tasks at once in a process; a record (result included) is
//! at most [`MAX_RECORD_BYTES`] and is kept [`TaskSettings::ttl`] after its last change; each
//! caller keeps at most its [`TaskSettings::share`] of the store (records and bytes, across
//! replicas in the shared store): a call that may run as a task but cannot be kept (its
//! caller's share or the store is full) goes on as a plain call, one that only runs as a task
//! is refused, saying which bound it met but not what room is left; a task is its caller's
//! alone (another caller's `tasks/*` finds no such task). Records live in a [`TaskStore`]: in
//! memory for one process, in the shared store (Redis) for replicas, so any replica answers
//! for any task. The replica running a task renews a lease on it every [`LEASE_RENEWAL`]; a
//! task whose lease ran out (its replica died) is reported `failed`, never left `working` for
//! ever. A `tasks/cancel` that reaches another replica is seen by the runner at its next
//! renewal.
//!
//! This file holds the settings and the per-process [`Tasks`]; `record` a task's record,
//! `run` the detached call and its supervisor, `methods` the session's `tools/call`-as-task
//! and `tasks/*` methods, `store` where records are kept.

mod methods;
mod record;
mod run;
mod store;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::task::JoinHandle;

use super::context::{
    Cancellation, Client, RequestContext, ServerRequest, TaskProgress, V2026Client,
};
use super::dispatch::dispatch;
use super::handler::Core;
use super::mrtr::{Binding, InputRound, MAX_INPUT_RESPONSE_BYTES, MAX_INPUT_RESPONSES, RoundEnd};
use super::{Backend, Budgeted, Held, MethodOutput, MethodResult, OVER_BUDGET, SessionSettings};
use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::error::INTERNAL_ERROR;
use crate::protocol::mcp::{CallToolParams, TaskParams, UpdateTaskParams, parse_params};
use crate::protocol::request::{ClientRequest, Method, RetryParams};
use crate::protocol::v2026;

pub(super) use methods::{call_as_task, cancel_task, get_task, update_task};
use record::*;
use run::*;
pub use store::{
    MAX_TASK_BYTES_IN_MEMORY, MAX_TASKS_IN_MEMORY, MemoryTasks, SaveError, Stored, TaskShare,
    TaskStore,
};

/// The extension's identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a call that may become a task is waited for before it becomes one.
pub const GRACE: Duration = Duration::from_millis(500);
/// How long a running task's lease lasts unless renewed.
pub const LEASE: Duration = Duration::from_secs(5);
/// How often the replica running a task renews its lease (and looks for a cancellation).
pub const LEASE_RENEWAL: Duration = Duration::from_secs(1);
/// The polling interval suggested to clients.
pub const POLL_INTERVAL_MS: u64 = 500;
/// The largest task record kept (its result included).
pub const MAX_RECORD_BYTES: usize = 8 << 20;
/// Tasks one caller may run at once in one process, by default.
pub const DEFAULT_MAX_TASKS_PER_CALLER: usize = 32;
/// How long a task is kept after its last change, by default.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// The task records one caller may keep, by default: an eighth of what one process keeps in
/// memory ([`MAX_TASKS_IN_MEMORY`]).
pub const DEFAULT_TASK_RECORDS_PER_CALLER: usize = MAX_TASKS_IN_MEMORY / 8;
/// The bytes of task records one caller may keep, by default: an eighth of what one process
/// keeps in memory ([`MAX_TASK_BYTES_IN_MEMORY`], so 32 MiB).
pub const DEFAULT_TASK_BYTES_PER_CALLER: usize = MAX_TASK_BYTES_IN_MEMORY / 8;

/// How tasks are kept and bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSettings {
    /// How long a task is kept after its last change (`ttlMs`).
    pub ttl: Duration,
    /// The most tasks one caller runs at once in one process.
    pub max_per_caller: usize,
    /// What one caller may keep of the task store.
    pub share: TaskShare,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_TASK_TTL,
            max_per_caller: DEFAULT_MAX_TASKS_PER_CALLER,
            share: TaskShare {
                records: DEFAULT_TASK_RECORDS_PER_CALLER,
                bytes: DEFAULT_TASK_BYTES_PER_CALLER,
            },
        }
    }
}

/// The tasks of a process: where they are kept, and those it runs now.
pub struct Tasks {
    store: Arc<dyn TaskStore>,
    settings: TaskSettings,
    /// The tasks this process runs now: their owner and cancellation.
    running: Mutex<HashMap<String, (String, Arc<Cancellation>)>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new(Arc::new(MemoryTasks::default()), TaskSettings::default())
    }
}

impl Tasks {
    /// Tasks kept in `store`.
    pub fn new(store: Arc<dyn TaskStore>, settings: TaskSettings) -> Self {
        Self {
            store,
            settings,
            running: Mutex::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> TaskSettings {
        self.settings
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Arc<Cancellation>)>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `owner` may start one more task here.
    fn has_room(&self, owner: &str) -> bool {
        let running = self.running();
        running.values().filter(|(o, _)| o == owner).count() < self.settings.max_per_caller
    }

    /// -32029: the caller runs its most tasks.
    fn over_bound(&self) -> ErrorObject {
        ErrorObject::new(
            OVER_BUDGET,
            format!(
                "too many tasks: this caller already runs {}, the most one caller may at once \
                 (--max-tasks-per-caller); wait for one to finish or cancel one",
                self.settings.max_per_caller
            ),
        )
    }

    /// Count a task of `owner` as running here; -32029 when the caller runs its most.
    fn start(&self, id: &str, owner: &str) -> Result<Arc<Cancellation>, ErrorObject> {
        let mut running = self.running();
        let mine = running.values().filter(|(o, _)| o == owner).count();
        if mine >= self.settings.max_per_caller {
            return Err(self.over_bound());
        }
        let cancellation = Arc::new(Cancellation::default());
        running.insert(id.to_owned(), (owner.to_owned(), Arc::clone(&cancellation)));
        Ok(cancellation)
    }

    fn stop(&self, id: &str) {
        self.running().remove(id);
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.settings.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// Keep `record`, within its owner's share.
    async fn save(&self, id: &str, record: &Record) -> Result<(), SaveError> {
        let bytes = serde_json::to_vec(record).map_err(|e| SaveError::Failed(e.to_string()))?;
        self.store
            .save(
                id,
                &record.owner,
                bytes,
                self.settings.ttl,
                self.settings.share,
            )
            .await
    }

    /// The task `id` as `owner` may see it: -32602 for a task that does not exist, has
    /// expired or is another caller's (all alike, so ids cannot be probed).
    async fn load(&self, id: &str, owner: &str) -> Result<(Record, bool), ErrorObject> {
        let unknown = || ErrorObject::invalid_params(format!("unknown task `{}`", cut(id)));
        let stored = self
            .store
            .load(id)
            .await
            .map_err(|e| ErrorObject::internal(format!("cannot read the task: {e}")))?
            .ok_or_else(unknown)?;
        let record: Record = serde_json::from_slice(&stored.record)
            .map_err(|e| ErrorObject::internal(format!("the task's record is damaged: {e}")))?;
        if record.owner != owner {
            return Err(unknown());
        }
        Ok((record, stored.cancelled))
    }
}

/// Whose tasks are whose: a digest of the caller's key.
fn owner_of(caller: &Principal) -> String {
    hex::encode(Sha256::digest(caller.key().as_bytes()))
}

/// Whether a request's declared capabilities (`_meta`'s, as sent) include the extension.
pub fn declares_tasks(capabilities: Option<&RawValue>) -> bool {
    #[derive(Deserialize)]
    struct Declared {
        #[serde(default)]
        extensions: Option<Map<String, Value>>,
    }
    capabilities
        .and_then(|raw| serde_json::from_str::<Declared>(raw.get()).ok())
        .and_then(|d| d.extensions)
        .is_some_and(|e| e.get(TASKS_EXTENSION).is_some_and(|v| !v.is_null()))
}

/// -32021: the request must declare the extension.
pub fn missing_extension() -> ErrorObject {
    let mut required = Map::new();
    required.insert("extensions".to_owned(), json!({ TASKS_EXTENSION: {} }));
    v2026::missing_capabilities(&required)
}

/// A `tools/call` about to run as a task: what its record keeps.
pub(super) struct TaskCall {
    /// The tool's served name.
    pub tool: String,
    /// The params as sent.
    pub params: Option<Box<RawValue>>,
    /// The declared capabilities, as sent.
    pub capabilities: Option<Box<RawValue>>,
    /// The tool runs only as a task.
    pub required: bool,
}

#[cfg(test)]
mod tests;
