//! MCP sessions for both revisions: the one loop every transport shares (`session`: arrival
//! order, requests in flight, cancellation), one handler per revision behind one trait
//! (`handler`; `v2025`, the handshake era, and `v2026`, where every request stands alone, with
//! its `listen` and `tasks`), dispatch of the methods both share to the [`Backend`]
//! (`dispatch`), and the rules for which request gets which error (`answer`). Every request
//! carries its caller (a `principal`): a request that would reach a plugin whose scopes the
//! caller lacks is refused before it runs.
//! Each call, read, prompt and completion (and each such request refused) leaves one audit
//! record with the [`AuditSink`] the host gives it.
//!
//! It defines the interface it dispatches to ([`Backend`]), so it knows nothing of plugins,
//! wasmtime or files; and it knows nothing of byte framing, so the
//! same session serves stdio and HTTP.
//!
//! Uses: `metrics`, `principal`, `protocol`, `telemetry`.

mod answer;
mod audit;
mod bounds;
mod budget;
mod context;
mod dispatch;
mod events;
mod handler;
mod listen;
mod mrtr;
mod rate;
mod session;
mod tasks;
mod v2025;
mod v2026;

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use tokio::sync::broadcast;

use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::mcp::{CompleteParams, LogLevel};
use crate::protocol::result::{
    Empty, Extensions, ListCapability, ResourcesCapability, ServerCapabilities, SkillsSettings,
};

pub use crate::protocol::result::ChangedList;
pub use answer::{Answer, INSUFFICIENT_SCOPE, Status, insufficient_scope};
pub use audit::{AuditOutcome, AuditRecord, AuditSink, AuditSlot};
pub use bounds::{
    AT_LIMIT, AtLimit, Capacity, DEFAULT_MAX_LISTEN_STREAMS, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_SESSIONS, ProcessLimits, RETRY_AFTER_SECS, Share,
};
pub use budget::{
    BoxFuture, Budget, BudgetConfig, BudgetPatch, BudgetUse, Budgeted, Budgets, Held, OVER_BUDGET,
    OverBudget, SharedBudgets, SharedSession,
};
pub use context::{Cancellation, Outbound, RequestContext, ServerRequest, SessionId};
pub use events::forward_events;
pub use mrtr::{INPUT_KEY_META, StateKey};
pub use rate::{Admission, RateLimit, WarnEvery};
pub use session::{Mode, Pending, Refusal, Session};
pub use tasks::{
    DEFAULT_MAX_TASKS_PER_CALLER, DEFAULT_TASK_BYTES_PER_CALLER, DEFAULT_TASK_RECORDS_PER_CALLER,
    DEFAULT_TASK_TTL, MemoryTasks, SaveError, Stored, TASKS_EXTENSION, TaskSettings, TaskShare,
    TaskStore, Tasks,
};

/// The most rounds of input requests one request may make, by default.
pub const DEFAULT_MAX_INPUT_ROUNDS: u32 = 8;

/// What every session of a process shares: the 2026-07-28 input rounds (`requestState`) and
/// caching hints, and for both revisions the global bounds, the audit log, budgets and tasks.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// Signs `requestState`.
    pub state_key: StateKey,
    /// How long a `requestState` stays valid.
    pub state_lifetime: std::time::Duration,
    /// The most rounds of input requests one request may make (each `input_required` is one).
    pub max_input_rounds: u32,
    /// The global bounds every session and transport of the process shares.
    pub limits: std::sync::Arc<ProcessLimits>,
    /// `ttlMs` of `server/discover` and list results.
    pub list_ttl_ms: u64,
    /// `ttlMs` of `resources/read` results.
    pub read_ttl_ms: u64,
    /// Where each audited request's record goes (`--audit-log`), if anywhere.
    pub audit: Option<std::sync::Arc<dyn AuditSink>>,
    /// Each caller's budgets (`[budgets]`), shared by every session and transport.
    pub budgets: std::sync::Arc<Budgets>,
    /// The tasks (the tasks extension): where they are kept, and those this process runs.
    pub tasks: std::sync::Arc<Tasks>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            state_key: StateKey::random(),
            state_lifetime: std::time::Duration::from_secs(10 * 60),
            max_input_rounds: DEFAULT_MAX_INPUT_ROUNDS,
            limits: std::sync::Arc::default(),
            list_ttl_ms: 60_000,
            read_ttl_ms: 0,
            audit: None,
            budgets: Budgets::new(BudgetConfig::default()),
            tasks: std::sync::Arc::default(),
        }
    }
}

/// The revision a message belongs to: each has its own handler (`v2025`, `v2026`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// 2025-11-25 and older.
    V2025,
    /// 2026-07-28.
    V2026,
}

/// Which kinds of things the backend offers; the session advertises the matching
/// capabilities at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    /// Tools (`tools/list`, `tools/call`).
    pub tools: bool,
    /// Prompts (`prompts/list`, `prompts/get`).
    pub prompts: bool,
    /// Resources (`resources/list`, `resources/read`, `resources/templates/list`).
    pub resources: bool,
    /// Argument completion (`completion/complete`).
    pub completions: bool,
    /// Skills (the `io.modelcontextprotocol/skills` extension: `skills/list`, `skills/get`,
    /// `resources/directory/read`); their files are resources, so `resources` is set too.
    pub skills: bool,
    /// Some tool may run as a task (the `io.modelcontextprotocol/tasks` extension, declared to
    /// 2026-07-28 clients only: `tasks/get`, `tasks/update`, `tasks/cancel`).
    pub tasks: bool,
    /// The lists can change while the session runs: advertise `listChanged` (and every list
    /// kind, since plugins offering it may arrive later) and resource subscriptions.
    pub list_changed: bool,
}

impl Offers {
    /// The capabilities that say what is offered.
    pub fn capabilities(self) -> ServerCapabilities {
        let list = ListCapability {
            list_changed: self.list_changed,
        };
        ServerCapabilities {
            logging: Some(Empty {}),
            completions: self.completions.then_some(Empty {}),
            prompts: self.prompts.then_some(list),
            resources: self.resources.then_some(ResourcesCapability {
                list_changed: self.list_changed,
                subscribe: self.list_changed,
            }),
            tools: self.tools.then_some(list),
            extensions: self.skills.then_some(Extensions {
                skills: Some(SkillsSettings {
                    directory_read: true,
                }),
                tasks: None,
            }),
        }
    }

    /// The capabilities declared to 2026-07-28 clients: the same, and the tasks extension
    /// when some tool may run as a task.
    pub fn v2026_capabilities(self) -> ServerCapabilities {
        let mut capabilities = self.capabilities();
        if self.tasks {
            capabilities.extensions.get_or_insert_default().tasks = Some(Empty {});
        }
        capabilities
    }
}

/// Something every session may need to tell its client, published by the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A list changed.
    ListChanged(ChangedList),
    /// The resource at `uri` changed: sent to the subscriptions to it of the sessions whose
    /// caller is in `audience`.
    ResourceUpdated {
        /// The resource.
        uri: String,
        /// Whose sessions may hear of it.
        audience: Audience,
    },
    /// The host itself has something to say (a plugin failed to reload).
    HostLog {
        /// How serious.
        level: LogLevel,
        /// What happened.
        message: String,
    },
}

/// Whose sessions may hear of a resource update.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Audience {
    /// Every session subscribed to the resource: the update is about what every caller reads
    /// (a plugin without callers' own state, or an update raised for no caller).
    Everyone,
    /// Only the sessions of the caller with this key ([`Principal::key`]), all of them: the
    /// update was raised while serving that caller by a plugin that keeps each caller's state
    /// apart, so it is about what that caller alone reads, and another caller hearing of it
    /// would learn when the first was active. A key, not a principal, so that the audience can
    /// travel to another process and be matched there the same way.
    Caller(std::sync::Arc<str>),
}

impl Audience {
    /// Only `caller`'s sessions.
    pub fn caller(caller: &Principal) -> Self {
        Self::Caller(caller.key().into())
    }

    /// Whether a session whose caller is `caller` may hear of the update.
    pub fn includes(&self, caller: &Principal) -> bool {
        match self {
            Self::Everyone => true,
            Self::Caller(key) => &**key == caller.key(),
        }
    }
}

/// Whether a tool runs as a task (its `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskUse {
    /// Never: always a plain call.
    Never,
    /// As a task for a request that declares the tasks extension, else a plain call.
    Optional,
    /// Only as a task: a request without the extension is refused (-32021).
    Required,
}

/// A request resolved in one version of what the backend serves ([`Backend::resolve`]): what
/// the session checks before the request runs, read off that version. `()` resolves nothing
/// (no plugin, no scopes, no headers, never a task).
pub trait Target: Send + Sync + 'static {
    /// The scopes the request needs beyond the server's own: those of the plugin that would
    /// serve it and of the item (none for a request no plugin serves). The session refuses a
    /// caller without them before the request runs; the backend checks them again, on the
    /// same version, where it runs it ([`RequestContext::caller`]).
    fn required_scopes(&self) -> &[String] {
        &[]
    }

    /// The name of the plugin that would serve the request, if any (for the audit record of a
    /// request refused before it ran).
    fn plugin(&self) -> Option<&str> {
        None
    }

    /// For a `tools/call`, the arguments of the tool that clients mirror into `Mcp-Param-*`
    /// headers (`x-mcp-header` in its input schema); none for an unknown tool.
    fn tool_headers(&self) -> &[crate::protocol::v2026::HeaderParam] {
        &[]
    }

    /// For a `tools/call`, whether the tool may or must run as a task (never, for an unknown
    /// tool).
    fn task_use(&self) -> TaskUse {
        TaskUse::Never
    }
}

impl Target for () {}

/// The paginated lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    ResourceTemplates,
    /// `skills/list`.
    Skills,
}

/// What a method handler produces: its output, or the JSON-RPC error to send.
pub type MethodResult = Result<MethodOutput, ErrorObject>;

/// A method's result: the complete MCP `result` object as JSON text, with what the session
/// needs to know of it, said by whoever built it so that nobody reads the text again.
#[derive(Debug, Clone)]
pub struct MethodOutput {
    /// The `result` object, as it is sent.
    pub body: Box<RawValue>,
    /// It reports a failure to the model: a `tools/call` result with `isError: true`. (Such a
    /// call failed, so a 2026-07-28 input round it ends may owe the client an error.)
    pub is_error: bool,
}

impl MethodOutput {
    /// A `tools/call` result with `isError: true`.
    pub fn tool_error(body: Box<RawValue>) -> Self {
        Self {
            body,
            is_error: true,
        }
    }
}

impl From<Box<RawValue>> for MethodOutput {
    /// A result that reports no failure.
    fn from(body: Box<RawValue>) -> Self {
        Self {
            body,
            is_error: false,
        }
    }
}

/// What the session dispatches to: the merged catalog of everything the plugins offer.
///
/// Each method returns the complete MCP `result` object as JSON text ([`MethodOutput`]), so the
/// backend may keep pre-serialised pages and pass plugin JSON (schemas, structured content)
/// through untouched.
pub trait Backend: Send + Sync + 'static {
    /// What the backend offers.
    fn offers(&self) -> Offers;

    /// Events for sessions to forward to their clients, if the backend publishes any.
    fn events(&self) -> Option<broadcast::Receiver<ServerEvent>>;

    /// What went wrong at startup, one message each, for clients that ask for logs.
    fn startup_problems(&self) -> Vec<String> {
        Vec::new()
    }

    /// A client session ended: what the backend keeps for it alone may go.
    fn session_ended(&self, session: SessionId) {
        let _ = session;
    }

    /// What a request resolves to (see [`Target`]).
    type Target: Target;

    /// Resolve `request` once, in the version of what the backend serves at this moment, and
    /// pin that version: the session makes its checks on the target (the caller's scopes, a
    /// tool's mirrored headers and task use, the plugin named in an audit record) and hands it
    /// back to run the request ([`Backend::call_tool`]), so that a reload in between cannot
    /// have the checks made on one version and the call run on the next.
    fn resolve(&self, request: &crate::protocol::request::ClientRequest) -> Self::Target;

    /// Every scope some plugin requires (for the OAuth metadata's `scopes_supported`).
    fn plugin_scopes(&self) -> Vec<String> {
        Vec::new()
    }

    /// One page of a list as `caller` sees it (without what its scopes do not reach): `cursor`
    /// is the previous page's `nextCursor`. An unknown cursor is -32602.
    fn list(&self, kind: ListKind, cursor: Option<&str>, caller: &Principal) -> MethodResult;

    /// Whether lists differ by caller (some item requires a scope): 2026-07-28 list results
    /// are then `cacheScope: private`.
    fn lists_vary_by_caller(&self) -> bool {
        false
    }

    /// `tools/call`, on the version `target` pinned (the request's, from [`Backend::resolve`]).
    /// `arguments` is a JSON object. `ctx` reaches the client while it runs.
    fn call_tool(
        &self,
        target: Self::Target,
        name: &str,
        arguments: &RawValue,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `prompts/get`.
    fn get_prompt(
        &self,
        target: Self::Target,
        name: &str,
        arguments: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `resources/read`.
    fn read_resource(
        &self,
        target: Self::Target,
        uri: &str,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`, as `caller` may see
    /// it; -32602 for a URI that names no skill served.
    fn get_skill(&self, target: Self::Target, uri: &str, ctx: &RequestContext) -> MethodResult {
        let _ = (target, ctx);
        Err(ErrorObject::invalid_params(format!(
            "no skill is served at `{uri}`"
        )))
    }

    /// `resources/directory/read`: one page of the direct children of the directory at `uri`;
    /// -32602 for a URI that names no directory served.
    fn read_directory(
        &self,
        target: Self::Target,
        uri: &str,
        cursor: Option<&str>,
        ctx: &RequestContext,
    ) -> MethodResult {
        let _ = (target, cursor, ctx);
        Err(ErrorObject::invalid_params(format!(
            "no directory is served at `{uri}`"
        )))
    }

    /// `completion/complete`.
    fn complete(
        &self,
        target: Self::Target,
        params: CompleteParams,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;
}
