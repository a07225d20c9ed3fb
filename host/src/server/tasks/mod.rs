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
    Cancellation, Client, RequestContext, ServerRequest, Stateless, TaskProgress,
};
use super::dispatch::dispatch;
use super::mrtr::{Binding, InputRound, MAX_INPUT_RESPONSE_BYTES, MAX_INPUT_RESPONSES, RoundEnd};
use super::session::Session;
use super::{Backend, Budgeted, Held, MethodOutput, MethodResult, ModernSettings, OVER_BUDGET};
use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::error::INTERNAL_ERROR;
use crate::protocol::mcp::{CallToolParams, TaskParams, UpdateTaskParams, parse_params};
use crate::protocol::request::{ClientRequest, Method, RetryParams};
use crate::protocol::v2026;

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

/// A task id, cut for messages (it is client input).
fn cut(id: &str) -> String {
    id.chars().take(80).collect()
}

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The call runs.
    Working,
    /// The plugin asked the client something; `tasks/update` answers.
    InputRequired,
    /// The call produced a result (perhaps a tool error, `isError`).
    Completed,
    /// The call produced no result.
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl TaskStatus {
    fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What is kept of a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    /// A digest of the caller's key: only they see it.
    owner: String,
    /// The tool's served name.
    tool: String,
    /// The `tools/call` params as sent (what a resumed run is bound to).
    params: String,
    /// The request's declared client capabilities, as sent.
    #[serde(default)]
    capabilities: Option<String>,
    status: TaskStatus,
    /// Milliseconds since the epoch.
    created: u64,
    updated: u64,
    /// While `working`: until when the running replica vouches for it.
    #[serde(default)]
    lease: u64,
    /// Input rounds the task has asked in.
    #[serde(default)]
    round: u32,
    #[serde(default)]
    input_requests: Option<Map<String, Value>>,
    #[serde(default)]
    request_state: Option<String>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorObject>,
    /// The latest progress message of a working task (its `statusMessage`).
    #[serde(default)]
    message: Option<String>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn lease_until() -> u64 {
    now_ms().saturating_add(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX))
}

fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(i64::try_from(ms).unwrap_or(i64::MAX))
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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

/// How a run of the call ended, in a task's terms.
enum Conclusion {
    /// A result (complete, as this revision sends it).
    Result(MethodOutput),
    /// No result.
    Failed(ErrorObject),
    /// The plugin asked the client.
    Input {
        requests: Map<String, Value>,
        state: String,
    },
}

/// The outcome of a run and its input round, concluded.
fn conclude(
    round: &InputRound,
    binding: &Binding,
    outcome: MethodResult,
    settings: &ModernSettings,
) -> Conclusion {
    let failed = outcome.as_ref().map_or(true, |output| output.is_error);
    match round.end(
        || Ok(binding.clone()),
        failed,
        &settings.state_key,
        settings.state_lifetime,
    ) {
        RoundEnd::Complete => match outcome {
            Ok(output) => Conclusion::Result(MethodOutput {
                body: v2026::complete(&output.body, None),
                is_error: output.is_error,
            }),
            Err(error) => Conclusion::Failed(v2026::map_error(error)),
        },
        RoundEnd::InputRequired(mut result) => {
            let requests = match result.get_mut("inputRequests").map(Value::take) {
                Some(Value::Object(requests)) => requests,
                _ => Map::new(),
            };
            let state = result
                .get("requestState")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Conclusion::Input { requests, state }
        }
        RoundEnd::MissingCapabilities(missing) => {
            Conclusion::Failed(v2026::missing_capabilities(&missing))
        }
        RoundEnd::InvalidAnswer(problem) => {
            Conclusion::Failed(ErrorObject::invalid_params(problem))
        }
        RoundEnd::Refused(error) => Conclusion::Failed(error),
    }
}

impl Record {
    /// Record how a run ended.
    fn conclude(&mut self, conclusion: Conclusion) {
        self.updated = now_ms();
        self.lease = 0;
        match conclusion {
            Conclusion::Result(output) => {
                self.status = TaskStatus::Completed;
                self.result = Some(output.body);
            }
            Conclusion::Failed(error) => {
                self.status = TaskStatus::Failed;
                self.error = Some(error);
            }
            Conclusion::Input { requests, state } => {
                self.status = TaskStatus::InputRequired;
                self.round = self.round.saturating_add(1);
                self.input_requests = Some(requests);
                self.request_state = Some(state);
            }
        }
        let size = serde_json::to_vec(&*self).map_or(usize::MAX, |b| b.len());
        if size > MAX_RECORD_BYTES {
            self.status = TaskStatus::Failed;
            self.result = None;
            self.input_requests = None;
            self.error = Some(ErrorObject::internal(format!(
                "the task's outcome is {size} bytes, over the {MAX_RECORD_BYTES} bytes a task keeps"
            )));
        }
    }

    /// The status a client sees: a cancellation wins over a status that was not final, and a
    /// task whose runner stopped renewing its lease failed.
    fn seen(&self, cancelled: bool) -> TaskStatus {
        if cancelled && !self.status.is_terminal() {
            TaskStatus::Cancelled
        } else if self.status == TaskStatus::Working && self.lease < now_ms() {
            TaskStatus::Failed
        } else {
            self.status
        }
    }

    /// The fields every view of the task has.
    fn envelope(
        &self,
        id: &str,
        status: TaskStatus,
        ttl_ms: u64,
        result_type: &str,
    ) -> Map<String, Value> {
        let mut view = Map::new();
        view.insert("resultType".to_owned(), json!(result_type));
        view.insert("taskId".to_owned(), json!(id));
        view.insert("status".to_owned(), json!(status));
        view.insert("createdAt".to_owned(), json!(iso(self.created)));
        view.insert("lastUpdatedAt".to_owned(), json!(iso(self.updated)));
        view.insert("ttlMs".to_owned(), json!(ttl_ms));
        view.insert("pollIntervalMs".to_owned(), json!(POLL_INTERVAL_MS));
        view
    }
}

/// A call that may become a task, until someone takes charge of it: should the request that
/// started it go away first (its client disconnected during the grace), the call is stopped
/// and its caller's slot freed, instead of running on with nobody to record it.
struct Unclaimed {
    tasks: Arc<Tasks>,
    id: String,
    run: Option<tokio::task::AbortHandle>,
}

impl Unclaimed {
    /// Someone has taken charge (the call ended within the grace, or a supervisor follows it).
    fn claimed(&mut self) {
        self.run = None;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            run.abort();
            self.tasks.stop(&self.id);
        }
    }
}

/// What a task run needs to go on after its request was answered.
struct Run {
    id: String,
    record: Record,
    launched: Launched,
}

/// A call started in its own task, and what its outcome is concluded with.
struct Launched {
    handle: JoinHandle<MethodResult>,
    round: Arc<InputRound>,
    binding: Binding,
    cancellation: Arc<Cancellation>,
    /// The call's latest progress message.
    status: Option<TaskProgress>,
}

impl Launched {
    /// Start `body` (a `tools/call`) under `ctx`, a task's context cancelled by
    /// `cancellation`, in input round `round`, holding `place` (its caller's place among its
    /// running calls) until the call ends.
    fn start<B: Backend>(
        backend: Arc<B>,
        body: ClientRequest,
        ctx: RequestContext,
        round: Arc<InputRound>,
        binding: Binding,
        cancellation: Arc<Cancellation>,
        place: Option<Held>,
    ) -> Self {
        let status = ctx.task_status();
        Self {
            handle: spawn_call(backend, body, ctx, place),
            round,
            binding,
            cancellation,
            status,
        }
    }
}

/// Start `body` (a `tools/call`) in its own task under `ctx`. `place` is given back when the
/// call ends, or when the task is aborted (dropped with it): once, however the call ends.
fn spawn_call<B: Backend>(
    backend: Arc<B>,
    body: ClientRequest,
    ctx: RequestContext,
    place: Option<Held>,
) -> JoinHandle<MethodResult> {
    tokio::spawn(async move {
        let _place = place;
        let outcome = dispatch(&*backend, body, ctx.clone()).await;
        ctx.finish();
        outcome
    })
}

/// Follow a task's run to its end: renew its lease, stop it when cancelled (here or on
/// another replica), and record its outcome.
async fn supervise(tasks: Arc<Tasks>, settings: Arc<ModernSettings>, run: Run) {
    let Run {
        id,
        mut record,
        launched:
            Launched {
                mut handle,
                round,
                binding,
                cancellation,
                status,
            },
    } = run;
    let _running = crate::metrics::metrics().task_running();
    let mut renewal = tokio::time::interval(LEASE_RENEWAL);
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renewal.tick().await;
    let joined = loop {
        tokio::select! {
            joined = &mut handle => break Some(joined),
            () = cancellation.cancelled() => break None,
            _ = renewal.tick() => {
                if let Ok(Some(stored)) = tasks.store.load(&id).await
                    && stored.cancelled
                {
                    break None;
                }
                record.lease = lease_until();
                if let Some(status) = &status {
                    let latest = status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    if latest.is_some() && latest != record.message {
                        record.message = latest;
                        record.updated = now_ms();
                    }
                }
                if let Err(e) = tasks.save(&id, &record).await {
                    tracing::warn!(task = %id, "could not renew the task's lease: {e}");
                }
            }
        }
    };
    match joined {
        None => {
            handle.abort();
            record.status = TaskStatus::Cancelled;
            record.updated = now_ms();
            record.lease = 0;
            tracing::debug!(task = %id, "task cancelled");
        }
        Some(joined) => {
            let outcome = joined
                .unwrap_or_else(|e| Err(ErrorObject::internal(format!("the call stopped: {e}"))));
            record.conclude(conclude(&round, &binding, outcome, &settings));
            tracing::debug!(task = %id, status = ?record.status, "task run ended");
        }
    }
    crate::metrics::metrics().task_ended(match record.status {
        TaskStatus::Completed => "completed",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Failed | TaskStatus::Working => "failed",
    });
    if let Err(e) = tasks.save(&id, &record).await {
        // The outcome cannot be kept (the store refused it): keep, if anything, that it was
        // lost, rather than a task that reads `working` until its lease lapses.
        tracing::warn!(task = %id, "could not record the task's outcome: {e}");
        if record.status != TaskStatus::Cancelled {
            record.status = TaskStatus::Failed;
            record.result = None;
            record.input_requests = None;
            record.error = Some(ErrorObject::internal(format!(
                "the task's outcome could not be kept: {e}"
            )));
            if let Err(e) = tasks.save(&id, &record).await {
                tracing::warn!(task = %id, "could not record that the outcome was lost: {e}");
            }
        }
    }
    tasks.stop(&id);
}

/// The acknowledgement of `tasks/update` and `tasks/cancel`.
fn ack() -> MethodResult {
    Ok(MethodOutput::from(
        RawValue::from_string(r#"{"resultType":"complete"}"#.to_owned())
            .map_err(|e| ErrorObject::internal(e.to_string()))?,
    ))
}

fn output(value: &Value) -> MethodResult {
    serde_json::value::to_raw_value(value)
        .map(MethodOutput::from)
        .map_err(|e| ErrorObject::internal(e.to_string()))
}

/// How a call that did not become a task is answered, as a plain call's: a question is an
/// ordinary input round, and a call that produced no result fails as a plain call does (a
/// tool error the model can read).
fn plainly(conclusion: Conclusion) -> MethodResult {
    match conclusion {
        Conclusion::Input { requests, state } => output(&v2026::input_required(&requests, &state)),
        Conclusion::Result(result) => Ok(result),
        Conclusion::Failed(error) if error.code == INTERNAL_ERROR => {
            let mut result = output(&json!({
                "resultType": "complete",
                "content": [{ "type": "text", "text": error.message }],
                "isError": true,
            }))?;
            result.is_error = true;
            Ok(result)
        }
        Conclusion::Failed(error) => Err(error),
    }
}

/// The refusal of a task that cannot be kept: -32029 when its caller keeps its share already,
/// else -32603. Neither says how much room the store has left.
fn cannot_keep(error: &SaveError) -> ErrorObject {
    let message = format!("cannot keep the task: {error}");
    match error {
        SaveError::Share(_) => ErrorObject::new(OVER_BUDGET, message),
        SaveError::Full | SaveError::Failed(_) => ErrorObject::internal(message),
    }
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

impl<B: Backend> Session<B> {
    /// Run a `tools/call` that may become a task: see the module's documentation. `ctx` is
    /// the request's (its stream, progress token and audit), `round` its input round, `place`
    /// the request's place among its caller's running calls, which the call holds until it
    /// ends, task or not.
    pub(super) async fn call_as_task(
        &self,
        call: TaskCall,
        body: ClientRequest,
        round: Arc<InputRound>,
        binding: Binding,
        ctx: RequestContext,
        place: Option<Held>,
    ) -> MethodResult {
        let tasks = Arc::clone(&self.settings.tasks);
        let owner = owner_of(ctx.caller());
        let id = uuid::Uuid::new_v4().to_string();
        let cancellation = tasks.start(&id, &owner)?;
        // Until the call becomes a task, the client may still cancel its request.
        let request = ctx.cancellation();
        let ctx = ctx.with_cancellation(Arc::clone(&cancellation)).for_task();
        let mut launched = Launched::start(
            Arc::clone(self.backend()),
            body,
            ctx.clone(),
            round,
            binding,
            cancellation,
            place,
        );
        let mut unclaimed = Unclaimed {
            tasks: Arc::clone(&tasks),
            id: id.clone(),
            run: Some(launched.handle.abort_handle()),
        };
        let now = now_ms();
        let mut record = Record {
            owner,
            tool: call.tool,
            params: call
                .params
                .as_deref()
                .map_or_else(|| "{}".to_owned(), |p| p.get().to_owned()),
            capabilities: call.capabilities.map(|c| c.get().to_owned()),
            status: TaskStatus::Working,
            created: now,
            updated: now,
            lease: lease_until(),
            round: 0,
            input_requests: None,
            request_state: None,
            result: None,
            error: None,
            message: None,
        };
        let graced = tokio::select! {
            graced = tokio::time::timeout(GRACE, &mut launched.handle) => graced,
            () = request.cancelled() => {
                // Dropping `unclaimed` stops the call and frees the slot.
                return Err(ErrorObject::internal(
                    "the request was cancelled before its call became a task",
                ));
            }
        };
        let joined = match graced {
            Ok(joined) => Some(joined),
            // Still running: it becomes a task if it can be kept.
            Err(_) => match tasks.save(&id, &record).await {
                Ok(()) => None,
                // A call that may run as a task goes on as a plain call instead.
                Err(e) if !call.required => {
                    tracing::debug!(task = %id, tool = %record.tool, "cannot keep the task ({e}); the call goes on as a plain one");
                    Some(tokio::select! {
                        joined = &mut launched.handle => joined,
                        () = request.cancelled() => {
                            // Dropping `unclaimed` stops the call and frees the slot.
                            return Err(ErrorObject::internal("the request was cancelled before its call ended"));
                        }
                    })
                }
                // Dropping `unclaimed` stops the call and frees the slot.
                Err(e) => return Err(cannot_keep(&e)),
            },
        };
        if let Some(joined) = joined {
            unclaimed.claimed();
            tasks.stop(&id);
            drop(ctx);
            let outcome = joined
                .unwrap_or_else(|e| Err(ErrorObject::internal(format!("the call stopped: {e}"))));
            match conclude(&launched.round, &launched.binding, outcome, &self.settings) {
                asked @ Conclusion::Input { .. } => return plainly(asked),
                ended if !call.required => return plainly(ended),
                finished => record.conclude(finished),
            }
            // A tool that only runs as a task: a task created already finished.
            if let Err(e) = tasks.save(&id, &record).await {
                return Err(cannot_keep(&e));
            }
        } else {
            // It goes on after the answer: nothing more reaches this request's stream.
            ctx.finish();
            drop(ctx);
        }
        tracing::debug!(task = %id, tool = %record.tool, status = ?record.status, "task created");
        let created = record.envelope(&id, record.status, tasks.ttl_ms(), "task");
        if record.status == TaskStatus::Working {
            unclaimed.claimed();
            let settings = Arc::clone(&self.settings);
            tokio::spawn(supervise(
                tasks,
                settings,
                Run {
                    id,
                    record,
                    launched,
                },
            ));
        }
        output(&Value::Object(created))
    }

    /// `tasks/get`.
    pub(super) async fn get_task(&self, params: TaskParams, caller: &Principal) -> MethodResult {
        let tasks = &self.settings.tasks;
        let id = params.task_id;
        let (record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
        let status = record.seen(cancelled);
        let mut view = record.envelope(&id, status, tasks.ttl_ms(), "complete");
        match status {
            TaskStatus::Completed => {
                if let Some(result) = &record.result {
                    view.insert(
                        "result".to_owned(),
                        serde_json::from_str(result.get()).unwrap_or(Value::Null),
                    );
                }
            }
            TaskStatus::Failed => {
                let error = record.error.clone().unwrap_or_else(|| {
                    ErrorObject::internal(
                        "the replica running this task stopped before it finished",
                    )
                });
                view.insert("error".to_owned(), json!(error));
                view.insert("statusMessage".to_owned(), json!(error.message));
            }
            TaskStatus::InputRequired => {
                let answered = tasks
                    .store
                    .answer(&id, record.round, Vec::new(), tasks.settings.ttl)
                    .await
                    .map_err(|e| ErrorObject::internal(format!("cannot read the task: {e}")))?;
                let open: Map<String, Value> = record
                    .input_requests
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(key, _)| !answered.contains_key(key))
                    .collect();
                view.insert("inputRequests".to_owned(), Value::Object(open));
            }
            TaskStatus::Cancelled => {
                view.insert("statusMessage".to_owned(), json!("cancelled by the client"));
            }
            TaskStatus::Working => {
                if let Some(message) = &record.message {
                    view.insert("statusMessage".to_owned(), json!(message));
                }
            }
        }
        output(&Value::Object(view))
    }

    /// `tasks/cancel`: acknowledged for a task in any state (cancelling a finished one changes
    /// nothing).
    pub(super) async fn cancel_task(&self, params: TaskParams, caller: &Principal) -> MethodResult {
        let tasks = &self.settings.tasks;
        let id = params.task_id;
        let (mut record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
        if cancelled || record.seen(false).is_terminal() {
            return ack();
        }
        tasks
            .store
            .cancel(&id, tasks.settings.ttl)
            .await
            .map_err(|e| ErrorObject::internal(format!("cannot cancel the task: {e}")))?;
        let here = tasks.running().get(&id).map(|(_, c)| Arc::clone(c));
        if let Some(cancellation) = here {
            cancellation.cancel();
        } else if record.status == TaskStatus::InputRequired {
            // Nothing runs: it waits for answers.
            record.status = TaskStatus::Cancelled;
            record.updated = now_ms();
            record.input_requests = None;
            if let Err(e) = tasks.save(&id, &record).await {
                tracing::warn!(task = %id, "could not record the cancellation: {e}");
            }
        }
        ack()
    }

    /// `tasks/update`: answers to a task's questions. Answers to questions it did not ask are
    /// ignored; when the last open question is answered, the call runs again with them all.
    pub(super) async fn update_task(
        &self,
        params: UpdateTaskParams,
        caller: &Principal,
    ) -> MethodResult {
        let tasks = Arc::clone(&self.settings.tasks);
        let id = params.task_id;
        if params.input_responses.len() > MAX_INPUT_RESPONSES {
            return Err(ErrorObject::invalid_params(format!(
                "`inputResponses` has {} entries; at most {MAX_INPUT_RESPONSES} are taken",
                params.input_responses.len()
            )));
        }
        let (record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
        if cancelled || record.status != TaskStatus::InputRequired {
            return ack();
        }
        let asked = record.input_requests.clone().unwrap_or_default();
        let mut bytes = 0usize;
        let mut given = Vec::new();
        for (key, answer) in params.input_responses {
            let Some(question) = asked.get(&key) else {
                continue;
            };
            // An answer that cannot answer its question is refused now, and the task keeps
            // waiting for a good one.
            if let Some(kind) = question["method"]
                .as_str()
                .and_then(ServerRequest::from_method)
                && let Err(why) = kind.check_answer(&answer)
            {
                return Err(ErrorObject::invalid_params(format!(
                    "`inputResponses.{key}` {why}"
                )));
            }
            let encoded = serde_json::to_vec(&answer)
                .map_err(|e| ErrorObject::invalid_params(format!("`inputResponses.{key}`: {e}")))?;
            bytes = bytes.saturating_add(encoded.len());
            given.push((key, encoded));
        }
        if bytes > MAX_INPUT_RESPONSE_BYTES {
            return Err(ErrorObject::invalid_params(format!(
                "`inputResponses` is {bytes} bytes; at most {MAX_INPUT_RESPONSE_BYTES} are taken"
            )));
        }
        // The last answer restarts the call: refused while the caller runs its most tasks or
        // calls, before anything is recorded, so the client can send the answers again later.
        if !tasks.has_room(&record.owner) {
            return Err(tasks.over_bound());
        }
        let place = self
            .settings
            .budgets
            .take(caller, Budgeted::Calls, 1)
            .map_err(|over| over.error())?;
        let store_error = |e: String| ErrorObject::internal(format!("cannot update the task: {e}"));
        let answered = tasks
            .store
            .answer(&id, record.round, given, tasks.settings.ttl)
            .await
            .map_err(store_error)?;
        if asked.keys().any(|key| !answered.contains_key(key)) {
            return ack();
        }
        if !tasks
            .store
            .claim(&id, record.round, tasks.settings.ttl)
            .await
            .map_err(store_error)?
        {
            return ack();
        }
        self.resume(tasks, id, record, answered, place, caller)
            .await;
        ack()
    }

    /// Run a task's call again with the answers to its questions, holding `place` among its
    /// caller's running calls.
    async fn resume(
        &self,
        tasks: Arc<Tasks>,
        id: String,
        mut record: Record,
        answered: BTreeMap<String, Vec<u8>>,
        place: Option<Held>,
        caller: &Principal,
    ) {
        let started = self.restart(&tasks, &id, &record, answered, place, caller);
        let launched = match started {
            Ok(started) => started,
            Err(error) => {
                record.conclude(Conclusion::Failed(error));
                if let Err(e) = tasks.save(&id, &record).await {
                    tracing::warn!(task = %id, "could not record the task's failure: {e}");
                }
                return;
            }
        };
        record.status = TaskStatus::Working;
        record.updated = now_ms();
        record.lease = lease_until();
        record.input_requests = None;
        record.message = None;
        if let Err(e) = tasks.save(&id, &record).await {
            tracing::warn!(task = %id, "could not record that the task runs again: {e}");
        }
        let settings = Arc::clone(&self.settings);
        tokio::spawn(supervise(
            tasks,
            settings,
            Run {
                id,
                record,
                launched,
            },
        ));
    }

    /// Start the call of `record` again, as the retry of its last input round.
    fn restart(
        &self,
        tasks: &Tasks,
        id: &str,
        record: &Record,
        answered: BTreeMap<String, Vec<u8>>,
        place: Option<Held>,
        caller: &Principal,
    ) -> Result<Launched, ErrorObject> {
        let params = RawValue::from_string(record.params.clone())
            .map_err(|e| ErrorObject::internal(format!("the task's call is damaged: {e}")))?;
        let call: CallToolParams = parse_params("tools/call", Some(&params))?;
        let binding = Binding::new(
            &Method::CallTool,
            Some(&Value::String(record.tool.clone())),
            Some(&params),
            caller,
        )?;
        let responses: Map<String, Value> = answered
            .into_iter()
            .filter_map(|(k, v)| serde_json::from_slice(&v).ok().map(|v| (k, v)))
            .collect();
        let raw = |value: &Value| serde_json::value::to_raw_value(value).ok();
        let retry = RetryParams {
            input_responses: raw(&Value::Object(responses)),
            request_state: record
                .request_state
                .as_ref()
                .and_then(|s| raw(&Value::String(s.clone()))),
        };
        let capabilities = record
            .capabilities
            .clone()
            .and_then(|c| RawValue::from_string(c).ok());
        let round = Arc::new(InputRound::begin(
            &retry,
            || Ok(binding.clone()),
            capabilities,
            &self.settings.state_key,
            self.settings.max_input_rounds,
        )?);
        let cancellation = tasks.start(id, &record.owner)?;
        // No client waits on this run: its messages go nowhere.
        let (outbound, _) = tokio::sync::mpsc::channel(1);
        let ctx = RequestContext::new(
            Client::Stateless(Arc::new(Stateless::new(None, Some(Arc::clone(&round))))),
            outbound,
            None,
            Arc::clone(&cancellation),
            caller.clone(),
        )
        .for_task();
        ctx.finish();
        Ok(Launched::start(
            Arc::clone(self.backend()),
            ClientRequest::CallTool(call),
            ctx,
            round,
            binding,
            cancellation,
            place,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_is_declared_per_request() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        assert!(declares_tasks(Some(&raw(
            r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        ))));
        assert!(!declares_tasks(Some(&raw(r#"{"extensions":{}}"#))));
        assert!(!declares_tasks(Some(&raw(r#"{"elicitation":{}}"#))));
        assert!(!declares_tasks(Some(&raw(
            r#"{"extensions":{"io.modelcontextprotocol/tasks":null}}"#
        ))));
        assert!(!declares_tasks(None));
        let error = missing_extension();
        assert_eq!(error.code, -32021);
        assert_eq!(
            error.data.unwrap()["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
            json!({})
        );
    }

    #[test]
    fn a_cancellation_wins_over_an_unfinished_status_and_a_lapsed_lease_fails() {
        let mut record = Record {
            owner: "o".into(),
            tool: "t".into(),
            params: "{}".into(),
            capabilities: None,
            status: TaskStatus::Working,
            created: 0,
            updated: 0,
            lease: lease_until(),
            round: 0,
            input_requests: None,
            request_state: None,
            result: None,
            error: None,
            message: None,
        };
        assert_eq!(record.seen(false), TaskStatus::Working);
        assert_eq!(record.seen(true), TaskStatus::Cancelled);
        record.lease = now_ms() - 1;
        assert_eq!(record.seen(false), TaskStatus::Failed);
        record.status = TaskStatus::Completed;
        assert_eq!(record.seen(true), TaskStatus::Completed);
        let view = record.envelope("id", TaskStatus::Completed, 5, "task");
        assert_eq!(view["createdAt"], "1970-01-01T00:00:00.000Z");
        assert!(!view.contains_key("requestState"));
    }
}
