//! One compiled, linked plugin, and running calls into it under its limits: each call in a
//! fresh instance, which for a plugin slow to instantiate is prepared ahead of the call (a
//! spare).
//!
//! A plugin whose instantiation takes at least [`SPARE_MIN_INSTANTIATE`] on average (a
//! Python component's does) gets spares: after each call, the next call's instance is
//! made off the answer's path, with no caller bound, and a call that finds one being made
//! waits for it. A spare is used only if instantiating it asked nothing of the host (no
//! host function was lent a capability, no memory growth was refused), so that it is
//! exactly what instantiating at the call would have made; the call then binds its own
//! context into it ([`HostState::bind`]) and is charged the fuel instantiation used. Each
//! spare serves one call, at most [`SPARE_MAX_AGE`] after it was made (a granted directory
//! is opened when it is made); a plugin whose instantiation does touch the host gets none.
//!
//! A plugin whose manifest says `instances = "per-caller"` (the operator's opt-in) also keeps
//! the instance a call returned from, for the same caller's next call: that call binds its
//! own context into it as into a spare, with its memory as the last call left it. A kept
//! instance serves only the caller it was kept for (by [`Principal::key`]), never one with no
//! caller, and is kept only while it is healthy and small: the call returned, no memory
//! growth was refused, its memory is at most a [`KEEP_MAX_MEMORY_SHARE`]th of its limit (so
//! its next call has the rest to grow into) and it holds at most [`KEEP_MAX_HANDLES`]
//! handles; it waits at most [`SPARE_MAX_AGE`] for that call and serves calls for at most
//! [`KEEP_MAX_LIFE`] after it was made. Kept instances share the spares' eighth of the pool.
//!
//! A plugin granted a directory runs each call (and makes each spare) on a thread of tokio's
//! blocking pool, its file operations in line there, instead of on the runtime's workers with
//! each file operation handed to that pool ([`PluginCode::run`]); the outer timeout and
//! cancellation stay on the worker that awaits it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::{Component, Instance, InstancePre};
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::exports::mcpbox::plugin::{completion, prompts, resources, tools};
use super::caller::{CallerCtx, CallerIdentity};
use super::config::ConfigCtx;
use super::credentials::CallCredentials;
use super::keyvalue::KeyValueCtx;
use super::meter::CallMeter;
use super::plugin_host::{MAX_LOG_MESSAGE_BYTES, log_line};
use super::state::{CallContext, HostState};
use super::{
    CallHost, CompletionRef, CompletionResult, Detached, GuestError, LoadError, Prompt,
    PromptMessage, ResourceContents, ResourceInfo, ResourceTemplate, Runtime, SpareInstances, Tool,
    ToolResult,
};
use crate::metrics::{CallKind, CallOutcome, GaugeGuard, metrics};
use crate::policy::{CredentialGrant, HttpGrant, Instances, Limits, PluginName, Policy};
use crate::principal::Principal;

/// Extra time the outer timeout allows beyond the plugin's deadline, so that a guest running
/// wasm is stopped by the epoch deadline (a clean trap) and only a guest stuck in a host
/// function meets the outer one.
const OUTER_TIMEOUT_GRACE: Duration = Duration::from_millis(500);

/// Which plugin interfaces a component exports.
#[derive(Clone)]
pub struct Exports {
    tools: Option<tools::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
    resources: Option<resources::GuestIndices>,
    completion: Option<completion::GuestIndices>,
}

impl Exports {
    /// Whether the plugin exports `tools`.
    pub fn tools(&self) -> bool {
        self.tools.is_some()
    }

    /// Whether the plugin exports `prompts`.
    pub fn prompts(&self) -> bool {
        self.prompts.is_some()
    }

    /// Whether the plugin exports `resources`.
    pub fn resources(&self) -> bool {
        self.resources.is_some()
    }

    /// Whether the plugin exports `completion`.
    pub fn completion(&self) -> bool {
        self.completion.is_some()
    }
}

/// Everything a plugin offers, read once at load.
#[derive(Default)]
pub struct PluginLists {
    /// Its tools.
    pub tools: Vec<Tool>,
    /// Its prompts.
    pub prompts: Vec<Prompt>,
    /// Its fixed resources.
    pub resources: Vec<ResourceInfo>,
    /// Its resource templates.
    pub templates: Vec<ResourceTemplate>,
}

/// A compiled and linked plugin, ready to instantiate once per call. Cheap to clone.
#[derive(Clone)]
pub struct PluginCode {
    name: PluginName,
    runtime: Runtime,
    pre: InstancePre<HostState>,
    exports: Exports,
    policy: Arc<Policy>,
    http_grants: Arc<[HttpGrant]>,
    /// The hosts it calls as the caller (`[http.credentials]`).
    credential_grants: Arc<[CredentialGrant]>,
    limits: Limits,
    /// SHA-256 of the component, in hex: which version of the plugin this is.
    component_digest: Arc<str>,
    /// The instance prepared for its next call, if any.
    spare: Arc<SpareSlot>,
    /// Instances kept for their callers' next calls (`instances = "per-caller"`).
    kept: Arc<Shelf>,
    /// Its calls' share of the instance pool while they run apart ([`APART_SHARE`]): a
    /// thread blocked in a file operation keeps its permit.
    apart: Arc<tokio::sync::Semaphore>,
}

/// A plugin that [runs apart](Policy::runs_apart) may run at most this share of the instance
/// pool's slots at once (a divisor: a quarter), so that calls blocked in file operations (a
/// FIFO no one writes), each holding its thread and its instance until the operation
/// returns, cannot take the slots every other plugin needs.
pub const APART_SHARE: u32 = 4;

/// A kept instance serves calls for at most this long after it was made (a granted
/// directory stays the one opened then).
pub const KEEP_MAX_LIFE: Duration = Duration::from_secs(10);

/// A kept instance's memory may be at most this share of its limit (a divisor: a quarter),
/// so that its next call has at least three quarters of the limit to grow into.
pub const KEEP_MAX_MEMORY_SHARE: usize = 4;

/// A kept instance may hold at most this many handles (a quarter of a call's limit), so that
/// a plugin that leaks handles gets a fresh instance long before it meets the limit.
pub const KEEP_MAX_HANDLES: usize = super::state::MAX_HANDLES_PER_CALL / 4;

/// The instances a plugin keeps for their callers' next calls.
#[derive(Default)]
struct Shelf {
    kept: Mutex<Vec<Kept>>,
    /// A task drops kept instances once they are too old.
    sweeping: AtomicBool,
}

/// An instance kept after a call, for its caller's next call.
struct Kept {
    call: ActiveCall,
    /// The caller it serves ([`Principal::key`]).
    caller: Arc<str>,
    since: Instant,
    _share: OwnedSemaphorePermit,
}

impl Shelf {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Kept {
    fn fresh(&self) -> bool {
        may_serve(self.call.made.elapsed(), self.since.elapsed())
    }
}

/// Whether a kept instance made `age` ago, and waiting for `idle`, may serve its caller's next
/// call: at most [`KEEP_MAX_LIFE`] after it was made, and [`SPARE_MAX_AGE`] after it was kept.
fn may_serve(age: Duration, idle: Duration) -> bool {
    idle < SPARE_MAX_AGE && age < KEEP_MAX_LIFE
}

/// What a call that returned left in its instance, as far as keeping it goes.
#[derive(Clone, Copy, Debug)]
struct Leftovers {
    /// The instance's memory growth was refused (a memory bomb stopped at its limit).
    growth_refused: bool,
    /// The instance's largest linear memory, in bytes.
    memory_bytes: usize,
    /// The handles it holds (open files, streams, HTTP fields).
    handles: usize,
    /// How long ago it was made.
    age: Duration,
}

/// Whether an instance whose call returned leaving `left` may be kept for its caller's next
/// call, under a memory limit of `memory_limit_bytes`: not after refused growth, nor over
/// [a quarter](KEEP_MAX_MEMORY_SHARE) of its limit or [64 handles](KEEP_MAX_HANDLES), nor once
/// too old to serve. (A call that failed is never kept: [`ActiveCall::end`] drops it first.)
fn may_keep(left: Leftovers, memory_limit_bytes: usize) -> bool {
    !left.growth_refused
        && left.memory_bytes <= memory_limit_bytes / KEEP_MAX_MEMORY_SHARE
        && left.handles <= KEEP_MAX_HANDLES
        && may_serve(left.age, Duration::ZERO)
}

/// How long a spare instance waits for a call before it is dropped: long enough for a
/// client's next call in a burst, short enough that nothing it opened (a granted directory)
/// is old when used, and that an idle plugin holds no instance.
pub const SPARE_MAX_AGE: Duration = Duration::from_secs(1);

/// A plugin's spare instance, and what its preparation is doing.
#[derive(Default)]
struct SpareSlot {
    ready: Mutex<Option<Spare>>,
    /// A spare is being made.
    preparing: AtomicBool,
    /// A task drops the spare once it is too old.
    sweeping: AtomicBool,
    /// Instantiating the plugin touches the host: it gets no spares.
    off: AtomicBool,
    /// How long instantiating the plugin takes, in ns (a moving average over calls and
    /// spares): spares are made only when it is worth a hand-off.
    instantiate_ns: AtomicU64,
    /// Told when a spare being made is ready (or failed).
    made: tokio::sync::Notify,
    /// The plugin was instantiated once (the cold instantiation, not counted, is done).
    warm: AtomicBool,
}

/// Instantiating a plugin must take at least this long (on average) for its calls to get
/// spares: below it, handing the work to another task costs about what it saves. Measured on
/// 2 cores shared with the client (BENCHMARKS.md, "Spare instances"): the Rust plugins
/// instantiate in 30–50 µs and the JavaScript example in about 100, and spares moved their
/// p50 0.94–1.09× for 5–16% more CPU a call; the Python example instantiates in 1.1 ms, and
/// spares took its p50 0.74–0.95× in three sets of rounds, for less CPU.
pub const SPARE_MIN_INSTANTIATE: Duration = Duration::from_micros(250);

impl SpareSlot {
    /// Record how long one instantiation of `plugin` took (logged at trace, target
    /// `mcpbox::calls`).
    fn took(&self, plugin: &PluginName, elapsed: Duration) {
        let sample = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // The first is cold (the compiled code's pages are touched for the first time: 0.7–6
        // ms where later ones take 30–50 µs), and does not count.
        if !self.warm.swap(true, Ordering::Relaxed) {
            return;
        }
        // A moving average over about eight instantiations; the first warm one counts whole.
        let before = self
            .instantiate_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |average| {
                Some(if average == 0 {
                    sample
                } else {
                    average - average / 8 + sample / 8
                })
            })
            .unwrap_or(0);
        tracing::trace!(
            target: "mcpbox::calls",
            %plugin,
            instantiate_us = sample / 1000,
            average_before_us = before / 1000,
            "instantiated"
        );
    }

    /// Whether instantiating takes long enough to be worth doing ahead.
    fn worth_it(&self) -> bool {
        let average = Duration::from_nanos(self.instantiate_ns.load(Ordering::Relaxed));
        average >= SPARE_MIN_INSTANTIATE
    }
}

/// An instance made ahead of its call, with no caller bound.
struct Spare {
    store: Store<HostState>,
    instance: Instance,
    /// Fuel instantiation used (its start functions), charged to the call.
    fuel_spent: u64,
    made: Instant,
    _slot: OwnedSemaphorePermit,
    _spare: OwnedSemaphorePermit,
}

/// Why a call into a plugin failed. The plugin's own errors (its `error` results) are not
/// here: these are the failures of running it at all.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// It used up its fuel budget.
    #[error("ran out of fuel after {budget} units")]
    OutOfFuel {
        /// The budget.
        budget: u64,
    },
    /// It ran past its wall-clock deadline.
    #[error("timed out after {}", human_duration(*after))]
    Timeout {
        /// The deadline.
        after: Duration,
    },
    /// It tried to grow its memory past the limit.
    #[error("exceeded its {} memory limit (asked for {})", human_bytes(*limit), human_bytes(*requested))]
    MemoryLimit {
        /// The limit in bytes.
        limit: usize,
        /// The size it asked for.
        requested: usize,
    },
    /// It panicked (or aborted); the message comes from its stderr.
    #[error("panicked: {message}")]
    Panic {
        /// The panic message.
        message: String,
    },
    /// It recursed too deep.
    #[error("overflowed its stack (recursion too deep)")]
    StackOverflow,
    /// Any other trap.
    #[error("crashed: {0}")]
    Trap(String),
    /// It held more handles (files, streams, HTTP fields, …) at once than a call may.
    #[error(
        "held more than {limit} handles (open files, streams, HTTP fields) at once, the limit of a call"
    )]
    HandleLimit {
        /// The limit.
        limit: usize,
    },
    /// It passed more data to one host call than a call may.
    #[error("passed more data to a host call than allowed ({})", human_bytes(*limit))]
    HostCallData {
        /// The limit, in bytes.
        limit: usize,
    },
    /// It does not export the interface the request needs.
    #[error("does not export the `{0}` interface")]
    NotExported(&'static str),
    /// Instantiation or a host-side failure.
    #[error("could not be run: {0}")]
    Host(String),
}

impl CallError {
    /// The outcome label of a call that failed this way.
    pub fn outcome(&self) -> CallOutcome {
        match self {
            Self::OutOfFuel { .. } => CallOutcome::OutOfFuel,
            Self::Timeout { .. } => CallOutcome::Timeout,
            Self::MemoryLimit { .. } => CallOutcome::OutOfMemory,
            Self::Panic { .. } | Self::StackOverflow | Self::Trap(_) => CallOutcome::Trap,
            Self::HandleLimit { .. }
            | Self::HostCallData { .. }
            | Self::NotExported(_)
            | Self::Host(_) => CallOutcome::HostError,
        }
    }
}

/// A store and instance for one call, holding its pool slot until dropped.
struct ActiveCall {
    store: Store<HostState>,
    instance: Instance,
    limits: Limits,
    started: Instant,
    /// When the instance was made (a kept one serves several calls).
    made: Instant,
    /// The caller it may be kept for ([`Principal::key`]), if the plugin's instances may
    /// serve one caller's calls in turn.
    keep_for: Option<Arc<str>>,
    /// The fuel the call used, once counted.
    fuel_used: Option<u64>,
    /// The pool slot.
    _slot: OwnedSemaphorePermit,
    /// Counted in the metrics while a call runs in it.
    in_use: Option<GaugeGuard>,
    /// The `tools` export, once looked up and type-checked in this instance (a kept instance
    /// does it once, not at every call).
    tools: Option<tools::Guest>,
}

impl Drop for ActiveCall {
    /// Count the fuel the call used, however it ended.
    fn drop(&mut self) {
        self.count_fuel();
    }
}

impl PluginCode {
    /// Link a compiled component and find which plugin interfaces it exports. Its calls will
    /// run under `policy`.
    pub fn prepare(
        runtime: &Runtime,
        name: PluginName,
        component: &Component,
        component_digest: &[u8; 32],
        policy: Policy,
    ) -> Result<Self, LoadError> {
        let missing =
            crate::policy::config::missing(&policy.config, &runtime.config.secrets.current());
        if !missing.is_empty() {
            return Err(LoadError::MissingConfig(missing));
        }
        super::credentials::check_credential_grants(
            &policy,
            runtime.credentials().map(|source| &**source),
        )
        .map_err(LoadError::Credentials)?;
        let pre = runtime
            .linker
            .instantiate_pre(component)
            .map_err(LoadError::Link)?;
        let exports = Exports {
            tools: tools::GuestIndices::new(&pre).ok(),
            prompts: prompts::GuestIndices::new(&pre).ok(),
            resources: resources::GuestIndices::new(&pre).ok(),
            completion: completion::GuestIndices::new(&pre).ok(),
        };
        if !(exports.tools() || exports.prompts() || exports.resources() || exports.completion()) {
            let engine = &runtime.engine;
            let names: Vec<String> = component
                .component_type()
                .exports(engine)
                .map(|(n, _)| n.to_owned())
                .collect();
            let names = if names.is_empty() {
                "nothing".to_owned()
            } else {
                names.join(", ")
            };
            return Err(LoadError::WrongWorld(names));
        }
        let limits = Limits {
            memory_bytes: policy
                .limits
                .memory_bytes
                .min(runtime.config.max_memory_bytes),
            ..policy.limits
        };
        let policy = Policy { limits, ..policy };
        Ok(Self {
            name,
            runtime: runtime.clone(),
            pre,
            exports,
            http_grants: policy.http.clone().into(),
            credential_grants: policy.credentials.clone().into(),
            policy: Arc::new(policy),
            limits,
            component_digest: component_digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into(),
            spare: Arc::default(),
            kept: Arc::default(),
            apart: Arc::new(tokio::sync::Semaphore::new(
                (runtime.config.max_instances / APART_SHARE).max(1) as usize,
            )),
        })
    }

    /// The component's imports and exports, by name (what the plugin asks for and offers).
    pub fn interfaces(&self) -> (Vec<String>, Vec<String>) {
        let engine = &self.runtime.engine;
        let ty = self.pre.component().component_type();
        let imports = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
        let exports = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
        (imports, exports)
    }

    /// The plugin's name.
    pub fn name(&self) -> &PluginName {
        &self.name
    }

    /// SHA-256 of its component, in hex: the same for the same build on every replica.
    pub fn component_digest(&self) -> &str {
        &self.component_digest
    }

    /// Which interfaces it exports.
    pub fn exports(&self) -> &Exports {
        &self.exports
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Its policy: limits and grants.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Give back the pages of its compiled code that loading it touched ([`crate::pages`]):
    /// an idle plugin then holds little of it resident, and its calls fault back in what they
    /// run. Pages the process wrote (a component compiled in memory, when the cache is off)
    /// are kept.
    #[expect(
        unsafe_code,
        reason = "giving back pages needs the promise that nothing writes them"
    )]
    pub fn give_back_pages(&self) -> Option<crate::file_pages::Released> {
        let image = self.pre.component().image_range();
        // SAFETY: the compiled image of the component this plugin holds, so it stays mapped
        // during the call; wasmtime makes it read-only once published (before any
        // instantiation) and never writes it after.
        unsafe { crate::file_pages::give_back_file_pages(image) }
    }

    /// Read every list the plugin offers, in one instance. This also type-checks each
    /// exported interface against the contract.
    pub async fn read_lists(&self) -> Result<PluginLists, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::List, "");
        let denied = Arc::clone(&meter.denied);
        let work = async move |code: &PluginCode| {
            let mut call = code
                .instantiate(Arc::new(Detached), denied, code.limits)
                .await?;
            let exports = &code.exports;
            let mut lists = PluginLists::default();
            if let Some(indices) = &exports.tools {
                let guest = call.load(|s, i| indices.load(s, i))?;
                let out = guest.call_list_tools(&mut call.store).await;
                lists.tools = call.check(out)?;
            }
            if let Some(indices) = &exports.prompts {
                let guest = call.load(|s, i| indices.load(s, i))?;
                let out = guest.call_list_prompts(&mut call.store).await;
                lists.prompts = call.check(out)?;
            }
            if let Some(indices) = &exports.resources {
                let guest = call.load(|s, i| indices.load(s, i))?;
                let out = guest.call_list_resources(&mut call.store).await;
                lists.resources = call.check(out)?;
                let out = guest.call_list_templates(&mut call.store).await;
                lists.templates = call.check(out)?;
            }
            if let Some(indices) = &exports.completion {
                call.load(|s, i| indices.load(s, i))?;
            }
            Ok(lists)
        };
        self.guarded(self.limits.timeout, meter, |_| false, self.run(work))
            .await
    }

    /// Call a tool. `arguments` is a JSON object as text.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: &str,
        host: Arc<dyn CallHost>,
    ) -> Result<Result<ToolResult, GuestError>, CallError> {
        let indices = self
            .exports
            .tools
            .clone()
            .ok_or(CallError::NotExported("tools"))?;
        let meter = CallMeter::start(&self.name, CallKind::Tool, name);
        let denied = Arc::clone(&meter.denied);
        let is_error = |r: &Result<ToolResult, GuestError>| r.as_ref().map_or(true, |r| r.is_error);
        // A call run as a task has the task's time limit.
        let limits = Limits {
            timeout: if host.in_task() {
                self.limits.task_timeout
            } else {
                self.limits.timeout
            },
            ..self.limits
        };
        // The contract types `json` as an alias of `string`, which bindgen passes as `&String`.
        let (name, arguments) = (name.to_owned(), arguments.to_owned());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(host, denied, limits).await?;
            let guest = match call.tools.take() {
                Some(guest) => guest,
                None => call.load(|s, i| indices.load(s, i))?,
            };
            let out = guest
                .call_call_tool(&mut call.store, &name, &arguments)
                .await;
            call.tools = Some(guest);
            let result = call.finish("tool", &name, out);
            call.end(&result, code);
            result
        };
        self.guarded(limits.timeout, meter, is_error, self.run(work))
            .await
    }

    /// Count a call of the tool `name` refused before it ran: its arguments do not fit the
    /// tool's input schema (which the catalog checks).
    pub fn refuse_tool_call(&self, name: &str) {
        CallMeter::start(&self.name, CallKind::Tool, name).refused(CallOutcome::InvalidArguments);
    }

    /// Render a prompt.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &[(String, String)],
        host: Arc<dyn CallHost>,
    ) -> Result<Result<Vec<PromptMessage>, GuestError>, CallError> {
        let indices = self
            .exports
            .prompts
            .clone()
            .ok_or(CallError::NotExported("prompts"))?;
        let meter = CallMeter::start(&self.name, CallKind::Prompt, name);
        let denied = Arc::clone(&meter.denied);
        let (name, arguments) = (name.to_owned(), arguments.to_vec());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(host, denied, code.limits).await?;
            let guest = call.load(|s, i| indices.load(s, i))?;
            let out = guest
                .call_get_prompt(&mut call.store, &name, &arguments)
                .await;
            let result = call.finish("prompt", &name, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }

    /// Read a resource.
    pub async fn read_resource(
        &self,
        uri: &str,
        host: Arc<dyn CallHost>,
    ) -> Result<Result<Vec<ResourceContents>, GuestError>, CallError> {
        let indices = self
            .exports
            .resources
            .clone()
            .ok_or(CallError::NotExported("resources"))?;
        // Not the URI: templates make it unbounded.
        let meter = CallMeter::start(&self.name, CallKind::Resource, "");
        let denied = Arc::clone(&meter.denied);
        let uri = uri.to_owned();
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(host, denied, code.limits).await?;
            let guest = call.load(|s, i| indices.load(s, i))?;
            let out = guest.call_read_resource(&mut call.store, &uri).await;
            let result = call.finish("resource", &uri, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }

    /// Complete an argument.
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &[(String, String)],
        host: Arc<dyn CallHost>,
    ) -> Result<Result<CompletionResult, GuestError>, CallError> {
        let indices = self
            .exports
            .completion
            .clone()
            .ok_or(CallError::NotExported("completion"))?;
        let meter = CallMeter::start(&self.name, CallKind::Completion, "");
        let denied = Arc::clone(&meter.denied);
        let (reference, argument, value, context) = (
            reference.clone(),
            argument.to_owned(),
            value.to_owned(),
            context.to_vec(),
        );
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(host, denied, code.limits).await?;
            let guest = call.load(|s, i| indices.load(s, i))?;
            let out = guest
                .call_complete(&mut call.store, &reference, &argument, &value, &context)
                .await;
            let result = call.finish("completion", &argument, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }

    /// Run `work` with this plugin: here, or, if the plugin [runs apart](Policy::runs_apart),
    /// on a thread of tokio's blocking pool, where its file operations run in line (one
    /// hand-off a call instead of one for each operation). The runtime's workers never run
    /// such a plugin, so a file operation that blocks (opening a FIFO no one writes) holds
    /// only its own thread, and the outer timeout ([`Self::guarded`], which stays here)
    /// still answers the call. Dropping the returned future drops `work` on its thread at
    /// the next poll there (a cancelled or timed-out call stops as it would here); a thread
    /// blocked in a file operation drops it when the operation returns, and holds a permit
    /// of the plugin's [share](APART_SHARE) of the pool until then.
    async fn run<T: Send + 'static>(
        &self,
        work: impl AsyncFnOnce(&PluginCode) -> Result<T, CallError> + Send + 'static,
    ) -> Result<T, CallError> {
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) if self.policy.runs_apart() => runtime,
            _ => return work(self).await,
        };
        let share = Arc::clone(&self.apart)
            .acquire_owned()
            .await
            .map_err(|_| CallError::Host("the runtime is shutting down".to_owned()))?;
        let code = self.clone();
        // Dropped with this future, which tells the thread to drop `work`.
        let (_running, stopped) = tokio::sync::oneshot::channel::<std::convert::Infallible>();
        let joined = tokio::task::spawn_blocking(move || {
            let _share = share;
            runtime.block_on(async move {
                tokio::select! {
                    biased;
                    _ = stopped => None,
                    out = work(&code) => Some(out),
                }
            })
        });
        match joined.await {
            Ok(Some(out)) => out,
            Ok(None) => Err(CallError::Host("the call was stopped".to_owned())),
            Err(e) => Err(CallError::Host(format!("the call's thread failed: {e}"))),
        }
    }

    /// Run `work` under the outer timeout, which catches a guest stuck in a host function,
    /// and count its outcome with `meter` (`is_error`: whether a result is the plugin's own
    /// error).
    async fn guarded<T>(
        &self,
        timeout: Duration,
        meter: CallMeter,
        is_error: impl FnOnce(&T) -> bool,
        work: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "plugin.call",
            otel.name = %format_args!("{} {}", meter.kind.as_str(), meter.plugin),
            mcpbox.plugin = %meter.plugin,
            mcpbox.call.kind = meter.kind.as_str(),
            mcpbox.call.name = %meter.name,
        );
        let work = tracing::Instrument::instrument(work, span);
        let result = match tokio::time::timeout(timeout + OUTER_TIMEOUT_GRACE, work).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Timeout { after: timeout }),
        };
        meter.ran(&result, is_error);
        result
    }

    /// The call's own context: who it is for, and where its `host` imports, state and
    /// configuration come from. `denied` is set if the call is refused a grant.
    fn call_context(&self, host: Arc<dyn CallHost>, denied: Arc<AtomicBool>) -> CallContext {
        let principal = host.caller();
        let credentials = match self.runtime.credentials() {
            Some(source) if !self.credential_grants.is_empty() => Some(CallCredentials::new(
                Arc::clone(source),
                principal.as_ref().map(|p| Arc::<str>::from(p.key())),
                Arc::clone(&host),
            )),
            _ => None,
        };
        let config = ConfigCtx::new(
            &self.policy.config,
            &self.runtime.config.secrets.current(),
            principal.as_ref().map(Principal::key),
        );
        let identity = principal.map(|principal| {
            CallerIdentity::new(
                principal,
                self.name.clone(),
                Arc::clone(&self.runtime.state),
            )
        });
        let caller = CallerCtx::new(identity.clone(), self.policy.reveal_caller);
        let keyvalue = KeyValueCtx::new(
            self.name.clone(),
            Arc::clone(&self.runtime.state),
            self.policy.keyvalue.clone(),
            identity,
            Arc::clone(&denied),
        )
        .in_session(host.session());
        CallContext {
            keyvalue,
            caller,
            config,
            host,
            denied,
            credentials,
        }
    }

    /// Set a store's fuel and wall-clock deadline for `limits`, less `fuel_spent` already.
    fn arm(
        store: &mut Store<HostState>,
        limits: &Limits,
        fuel_spent: u64,
    ) -> Result<(), CallError> {
        store.set_hostcall_fuel(HOSTCALL_DATA_BYTES);
        store
            .set_fuel(limits.fuel.saturating_sub(fuel_spent))
            .map_err(|e| CallError::Host(format!("{e:#}")))?;
        let deadline = Instant::now() + limits.timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        Ok(())
    }

    /// A fresh store for one call into the plugin, with its limits, not yet instantiated.
    fn new_store(&self, call: CallContext, limits: &Limits) -> Result<Store<HostState>, CallError> {
        let state = HostState::new(
            self.name.clone(),
            &self.policy,
            &self.http_grants,
            &self.credential_grants,
            call,
        )
        .map_err(CallError::Host)?;
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|state| &mut state.limiter);
        Self::arm(&mut store, limits, 0)?;
        Ok(store)
    }

    /// Take the plugin's spare instance for a call, or else a pool slot and instantiate the
    /// plugin in a fresh store with its limits. `denied` is set if the call is refused a
    /// grant.
    async fn instantiate(
        &self,
        host: Arc<dyn CallHost>,
        denied: Arc<AtomicBool>,
        limits: Limits,
    ) -> Result<ActiveCall, CallError> {
        let keep_for = match self.policy.instances {
            Instances::PerCaller => host.caller().map(|p| Arc::<str>::from(p.key())),
            Instances::PerCall => None,
        };
        if let Some(caller) = &keep_for
            && let Some(mut call) = self.take_kept(caller)
        {
            call.store.data_mut().bind(self.call_context(host, denied));
            Self::arm(&mut call.store, &limits, 0)?;
            call.limits = limits;
            call.started = Instant::now();
            call.fuel_used = None;
            call.in_use = Some(metrics().in_use());
            return Ok(call);
        }
        if let Some(spare) = self.next_spare().await {
            let Spare {
                mut store,
                instance,
                fuel_spent,
                made,
                _slot: slot,
                ..
            } = spare;
            store.data_mut().bind(self.call_context(host, denied));
            Self::arm(&mut store, &limits, fuel_spent)?;
            return Ok(ActiveCall::new(
                store,
                instance,
                limits,
                made,
                keep_for,
                slot,
                metrics().in_use(),
            ));
        }
        let waiting = metrics().waiting();
        let slot = Arc::clone(&self.runtime.slots)
            .acquire_owned()
            .await
            .map_err(|_| CallError::Host("the runtime is shutting down".to_owned()))?;
        drop(waiting);
        let in_use = metrics().in_use();
        let began = Instant::now();
        let mut store = self.new_store(self.call_context(host, denied), &limits)?;
        match self.pre.instantiate_async(&mut store).await {
            Ok(instance) => {
                self.spare.took(&self.name, began.elapsed());
                Ok(ActiveCall::new(
                    store, instance, limits, began, keep_for, slot, in_use,
                ))
            }
            Err(e) => {
                let error = classify(&mut store, &e, &limits);
                log_output(&mut store);
                Err(error)
            }
        }
    }

    /// The spare instance, if one is ready, or being made (it will be ready before an
    /// instance this call would begin now), and not too old.
    async fn next_spare(&self) -> Option<Spare> {
        let slot = &self.spare;
        if slot.preparing.load(Ordering::Acquire) {
            let made = slot.made.notified();
            tokio::pin!(made);
            made.as_mut().enable();
            // Made (and told) before the waiter was registered: nothing to wait for.
            if slot.preparing.load(Ordering::Acquire) {
                made.await;
            }
        }
        self.take_spare()
    }

    /// The spare instance, if one is ready and not too old.
    fn take_spare(&self) -> Option<Spare> {
        let spare = self
            .spare
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        if spare.made.elapsed() < SPARE_MAX_AGE {
            metrics().spare_instance("used");
            Some(spare)
        } else {
            metrics().spare_instance("expired");
            drop_off_path(spare);
            None
        }
    }

    /// Claim the making of the plugin's next spare instance: false if one is ready or being
    /// made, or the plugin gets none. Whoever claims it calls [`Self::fill_spare`].
    fn claim_spare(&self) -> bool {
        let slot = &self.spare;
        let wanted = match self.runtime.config.spares {
            SpareInstances::Auto => slot.worth_it(),
            SpareInstances::Always => true,
            SpareInstances::Never => false,
        };
        if !wanted
            || slot.off.load(Ordering::Relaxed)
            || slot.preparing.swap(true, Ordering::AcqRel)
        {
            return false;
        }
        let ready = slot
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if ready {
            slot.preparing.store(false, Ordering::Release);
        }
        !ready
    }

    /// Make the spare instance [claimed](Self::claim_spare), and then drop it (and any later
    /// one) once it is too old, until none is left.
    async fn fill_spare(self) {
        // Made where the plugin's calls run (its start functions may open files).
        let spare = self
            .run(async |code: &PluginCode| Ok(code.make_spare().await))
            .await
            .ok()
            .flatten();
        let slot = &self.spare;
        let made = spare.is_some();
        if let Some(spare) = spare {
            *slot.ready.lock().unwrap_or_else(PoisonError::into_inner) = Some(spare);
        }
        slot.preparing.store(false, Ordering::Release);
        slot.made.notify_waiters();
        if made && !slot.sweeping.swap(true, Ordering::AcqRel) {
            self.sweep_spares().await;
        }
    }

    /// Make a spare instance: a pool slot (only if one is free and the pool's share for
    /// spares is not used up), a store with no caller bound, the plugin instantiated in it.
    /// `None` if any of that fails, or if instantiating asked anything of the host (the
    /// plugin then gets no more spares).
    async fn make_spare(&self) -> Option<Spare> {
        let spare_permit = Arc::clone(&self.runtime.spares).try_acquire_owned().ok()?;
        let slot = Arc::clone(&self.runtime.slots).try_acquire_owned().ok()?;
        let neutral = self.call_context(Arc::new(super::Detached), Arc::default());
        let began = Instant::now();
        let mut store = self.new_store(neutral, &self.limits).ok()?;
        let made = self.pre.instantiate_async(&mut store).await;
        self.spare.took(&self.name, began.elapsed());
        let state = store.data();
        let touched = state.lent() > 0 || state.limiter.refused.is_some();
        let instance = match made {
            Ok(instance) if !touched => instance,
            outcome => {
                self.spare.off.store(true, Ordering::Relaxed);
                tracing::debug!(
                    plugin = %self.name,
                    failed = outcome.is_err(),
                    "instantiating this plugin asks the host for something; its calls get no spare instance"
                );
                return None;
            }
        };
        let fuel_spent = self
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        Some(Spare {
            store,
            instance,
            fuel_spent,
            made: Instant::now(),
            _slot: slot,
            _spare: spare_permit,
        })
    }

    /// Drop the spare once it is [too old](SPARE_MAX_AGE) to be used, until none is left.
    async fn sweep_spares(&self) {
        let slot = &self.spare;
        loop {
            tokio::time::sleep(SPARE_MAX_AGE).await;
            let stale = {
                let mut ready = slot.ready.lock().unwrap_or_else(PoisonError::into_inner);
                match ready.as_ref() {
                    Some(spare) if spare.made.elapsed() < SPARE_MAX_AGE => continue,
                    Some(_) => {
                        metrics().spare_instance("expired");
                        ready.take()
                    }
                    None => {
                        // Under the lock: a spare stored after this starts its own sweeper.
                        slot.sweeping.store(false, Ordering::Release);
                        return;
                    }
                }
            };
            drop(stale);
        }
    }
}

impl PluginCode {
    /// The instance kept for `caller`'s next call, if one is, and it is not too old (the
    /// last one kept first: its pages are the warmest).
    fn take_kept(&self, caller: &str) -> Option<ActiveCall> {
        let kept = {
            let mut shelf = self.kept.lock();
            let at = shelf.iter().rposition(|k| &*k.caller == caller)?;
            shelf.remove(at)
        };
        if kept.fresh() {
            metrics().kept_instance("used");
            Some(kept.call)
        } else {
            metrics().kept_instance("expired");
            drop_off_path(kept);
            None
        }
    }

    /// Keep the instance of `call`, which returned, for its caller's next call, if the
    /// plugin's instances may serve one caller's calls in turn and this one is healthy and
    /// small enough; else give the call back (`Some`).
    fn keep(&self, mut call: ActiveCall) -> Option<ActiveCall> {
        let Some(caller) = call.keep_for.clone() else {
            return Some(call);
        };
        let state = call.store.data_mut();
        let left = Leftovers {
            growth_refused: state.limiter.refused.is_some(),
            memory_bytes: state.limiter.largest(),
            handles: state.handles(),
            age: call.made.elapsed(),
        };
        if !may_keep(left, self.limits.memory_bytes) {
            return Some(call);
        }
        let Ok(share) = Arc::clone(&self.runtime.spares).try_acquire_owned() else {
            return Some(call);
        };
        call.in_use = None;
        self.kept.lock().push(Kept {
            call,
            caller,
            since: Instant::now(),
            _share: share,
        });
        metrics().kept_instance("kept");
        if !self.kept.sweeping.swap(true, Ordering::AcqRel) {
            let code = self.clone();
            drop(tokio::spawn(async move { code.sweep_kept().await }));
        }
        None
    }

    /// Drop kept instances once they are too old, until none is left.
    async fn sweep_kept(&self) {
        loop {
            tokio::time::sleep(SPARE_MAX_AGE).await;
            let stale: Vec<Kept> = {
                let mut shelf = self.kept.lock();
                if shelf.is_empty() {
                    // Under the lock: an instance kept after this starts its own sweeper.
                    self.kept.sweeping.store(false, Ordering::Release);
                    return;
                }
                let (fresh, stale) = std::mem::take(&mut *shelf)
                    .into_iter()
                    .partition(Kept::fresh);
                *shelf = fresh;
                stale
            };
            for _ in &stale {
                metrics().kept_instance("expired");
            }
            drop(stale);
        }
    }
}

/// Drop a spare in a task of its own (its slot is reset there), or here without a runtime.
fn drop_off_path<T: Send + 'static>(spare: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move { drop(spare) })),
        Err(_) => drop(spare),
    }
}

impl ActiveCall {
    /// A call in `instance`, made at `made`, starting now.
    fn new(
        store: Store<HostState>,
        instance: Instance,
        limits: Limits,
        made: Instant,
        keep_for: Option<Arc<str>>,
        slot: OwnedSemaphorePermit,
        in_use: GaugeGuard,
    ) -> Self {
        Self {
            store,
            instance,
            limits,
            started: Instant::now(),
            made,
            keep_for,
            fuel_used: None,
            _slot: slot,
            in_use: Some(in_use),
            tools: None,
        }
    }

    /// Look up an exported interface in the instance, type-checking it against the contract.
    fn load<G>(
        &mut self,
        load: impl FnOnce(&mut Store<HostState>, &Instance) -> wasmtime::Result<G>,
    ) -> Result<G, CallError> {
        load(&mut self.store, &self.instance).map_err(|e| {
            CallError::Host(format!(
                "its exports do not match the mcpbox:plugin@0.1.0 contract: {e:#}"
            ))
        })
    }

    /// Log what the call printed, and turn a failure into a [`CallError`].
    /// [`Self::check`], and the call's outcome logged at debug (target `mcpbox::calls`): the
    /// plugin, what was called, how long it ran and the fuel it used.
    fn finish<T>(
        &mut self,
        kind: &'static str,
        name: &str,
        outcome: wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let result = self.check(outcome);
        let fuel = self.count_fuel();
        if tracing::enabled!(target: "mcpbox::calls", tracing::Level::DEBUG) {
            let outcome = match &result {
                Ok(_) => "returned".to_owned(),
                Err(e) => e.to_string(),
            };
            tracing::debug!(
                target: "mcpbox::calls",
                plugin = self.store.data().plugin(),
                kind,
                name = %log_line(name, 256),
                elapsed_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
                fuel,
                outcome,
                "plugin call"
            );
        }
        result
    }

    /// Count the fuel the call used (once: in the metrics and the caller's budget), before
    /// its answer goes out.
    fn count_fuel(&mut self) -> u64 {
        if let Some(used) = self.fuel_used {
            return used;
        }
        let left = self.store.get_fuel().unwrap_or(0);
        let used = self.limits.fuel.saturating_sub(left);
        metrics().fuel(&self.store.data().plugin, used);
        self.store.data().call_host().used_fuel(used);
        self.fuel_used = Some(used);
        used
    }

    /// End the call whose outcome is `result`. A call that failed (trapped, ran out of fuel
    /// or memory) is dropped here, so that what it held (a memory bomb's pages) is gone
    /// before its answer goes. One that returned is retired off the answer's path: its host
    /// is let go here; then, in one task of its own (which the runtime runs after the task
    /// the answer wakes: the writer takes the worker's next slot), the store is dropped
    /// (freeing the instance and resetting its pool slot, zeroing the pages the call
    /// dirtied) and `code`'s next spare instance is made, if it wants one. Without a
    /// runtime, the store is dropped here.
    fn end<T>(mut self, result: &Result<T, CallError>, code: &PluginCode) {
        if result.is_err() {
            return;
        }
        // Nothing of the request may outlive its answer (the session checks that nothing
        // holds its input round once the call returned).
        self.store.data_mut().detach_host();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Kept for the caller's next call (then no spare is made: that call takes this).
        let Some(this) = code.keep(self) else {
            return;
        };
        let next = code.claim_spare().then(|| code.clone());
        drop(runtime.spawn(async move {
            drop(this);
            if let Some(code) = next {
                code.fill_spare().await;
            }
        }));
    }

    fn check<T>(&mut self, outcome: wasmtime::Result<T>) -> Result<T, CallError> {
        let result = outcome.map_err(|e| classify(&mut self.store, &e, &self.limits));
        log_output(&mut self.store);
        result
    }
}

/// Decide why a call failed, from the error and what the store recorded.
fn classify(store: &mut Store<HostState>, error: &wasmtime::Error, limits: &Limits) -> CallError {
    let state = store.data();
    if let Some(requested) = state.limiter.refused {
        return CallError::MemoryLimit {
            limit: state.limiter.max_bytes(),
            requested,
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => CallError::OutOfFuel {
            budget: limits.fuel,
        },
        Some(Trap::Interrupt) => CallError::Timeout {
            after: limits.timeout,
        },
        Some(Trap::StackOverflow) => CallError::StackOverflow,
        trap => {
            let (stderr, _) = state.stderr.peek();
            if let Some(message) = panic_message(&String::from_utf8_lossy(&stderr)) {
                return CallError::Panic { message };
            }
            match trap {
                // Rust keeps its stack in linear memory below the data; running off its end
                // is an out-of-bounds access, and deep recursion is its usual cause.
                Some(Trap::MemoryOutOfBounds) => CallError::Trap(
                    "out of bounds memory access (often a stack overflow from too-deep recursion)"
                        .to_owned(),
                ),
                Some(trap) => CallError::Trap(
                    trap.to_string()
                        .trim_start_matches("wasm trap: ")
                        .to_owned(),
                ),
                None => host_failure(error),
            }
        }
    }
}

/// A failure outside the guest's code: one of wasmtime's own caps, named, or else the error in
/// one line (no wasm backtrace).
fn host_failure(error: &wasmtime::Error) -> CallError {
    let causes: Vec<String> = error
        .chain()
        .map(|cause| cause.to_string().lines().next().unwrap_or("").to_owned())
        .filter(|line| {
            !line.is_empty() && !line.starts_with("error while executing at wasm backtrace")
        })
        .collect();
    let said = |needle: &str| causes.iter().any(|c| c.contains(needle));
    if said("resource table has no free keys") {
        return CallError::HandleLimit {
            limit: super::state::MAX_HANDLES_PER_CALL,
        };
    }
    if said("fuel allocated for hostcalls has been exhausted") {
        return CallError::HostCallData {
            limit: HOSTCALL_DATA_BYTES,
        };
    }
    let mut message = causes.join(": ");
    if message.len() > 1024 {
        let mut end = 1024;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    CallError::Host(message)
}

/// Data one host call may take from a plugin (strings, lists): wasmtime's "hostcall fuel",
/// which bounds what the host allocates on a plugin's behalf.
pub const HOSTCALL_DATA_BYTES: usize = 64 << 20;

/// The message of a Rust panic, from what the guest wrote to stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let report = &stderr[start..];
    let body = report.split_once(":\n").map_or(report, |(_, body)| body);
    let body = body.split("\nnote: ").next().unwrap_or(body).trim();
    Some(if body.is_empty() {
        "(no message)".to_owned()
    } else {
        body.to_owned()
    })
}

/// Send what the plugin wrote to stdout and stderr to the host's log, tagged with its name.
fn log_output(store: &mut Store<HostState>) {
    let state = store.data();
    let plugin = state.plugin();
    for (stream, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (bytes, dropped) = pipe.take();
        for line in String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            let line = log_line(line, MAX_LOG_MESSAGE_BYTES);
            tracing::info!(target: "plugin", plugin, stream, "{line}");
        }
        if dropped > 0 {
            tracing::warn!(target: "plugin", plugin, stream, dropped, "output over the limit was dropped");
        }
    }
}

/// `1.5 s`, `250 ms`.
pub(crate) fn human_duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        let secs = d.as_secs_f64();
        if secs.fract() == 0.0 {
            format!("{secs:.0} s")
        } else {
            format!("{secs:.1} s")
        }
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// `64 MiB`, `12 KiB`, `100 bytes`.
pub(crate) fn human_bytes(n: usize) -> String {
    const MIB: usize = 1 << 20;
    const KIB: usize = 1 << 10;
    if (n >= MIB && n.is_multiple_of(MIB)) || n >= 10 * MIB {
        format!("{} MiB", n.div_ceil(MIB))
    } else if n >= KIB {
        format!("{} KiB", n.div_ceil(KIB))
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_extracted_from_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nboom: it broke\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom: it broke"));
        assert_eq!(panic_message("memory allocation failed"), None);
    }

    const MIB: usize = 1 << 20;

    fn healthy() -> Leftovers {
        Leftovers {
            growth_refused: false,
            memory_bytes: 2 * MIB,
            handles: 3,
            age: Duration::from_millis(5),
        }
    }

    #[test]
    fn a_healthy_instance_is_kept_and_serves_its_callers_next_call() {
        assert!(may_keep(healthy(), 64 * MIB));
        assert!(may_serve(
            Duration::from_secs(2),
            Duration::from_millis(900)
        ));
    }

    #[test]
    fn a_kept_instance_serves_at_most_ten_seconds_after_it_was_made() {
        // Literal times, not the constant: what OPERATING.md promises.
        let (just_under, ten) = (Duration::from_millis(9_999), Duration::from_secs(10));
        assert!(may_serve(just_under, Duration::ZERO));
        assert!(!may_serve(ten, Duration::ZERO), "served at ten seconds");
        assert!(!may_serve(Duration::from_secs(3600), Duration::ZERO));
        assert!(may_keep(
            Leftovers {
                age: just_under,
                ..healthy()
            },
            64 * MIB
        ));
        assert!(!may_keep(
            Leftovers {
                age: ten,
                ..healthy()
            },
            64 * MIB
        ));
    }

    #[test]
    fn a_kept_instance_waits_at_most_a_second_for_its_caller() {
        assert!(may_serve(Duration::ZERO, Duration::from_millis(999)));
        assert!(!may_serve(Duration::ZERO, Duration::from_secs(1)));
    }

    #[test]
    fn an_instance_left_unhealthy_is_not_kept() {
        let limit = 64 * MIB;
        let refused = Leftovers {
            growth_refused: true,
            ..healthy()
        };
        assert!(!may_keep(refused, limit), "memory growth was refused");
        let at_quarter = Leftovers {
            memory_bytes: limit / 4,
            ..healthy()
        };
        assert!(may_keep(at_quarter, limit));
        let over_quarter = Leftovers {
            memory_bytes: limit / 4 + 1,
            ..healthy()
        };
        assert!(
            !may_keep(over_quarter, limit),
            "over a quarter of its memory limit"
        );
        let at_handles = Leftovers {
            handles: 64,
            ..healthy()
        };
        assert!(may_keep(at_handles, limit));
        let over_handles = Leftovers {
            handles: 65,
            ..healthy()
        };
        assert!(!may_keep(over_handles, limit), "over 64 handles");
    }

    #[test]
    fn sizes_and_durations_read_well() {
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(80 << 20), "80 MiB");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_duration(Duration::from_secs(2)), "2 s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
    }
}
