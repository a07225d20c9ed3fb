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
//! context into it ([`StoreData::bind`]) and is charged the fuel instantiation used. Each
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
//! A WASI 0.3 plugin's instance is kept only if every task it spawned ended within 20 ms of its
//! answer (`p3`): work left running would run on the next call's time and fuel.
//!
//! A plugin granted a directory runs each call (and makes each spare) on a thread of tokio's
//! blocking pool, its file operations in line there, instead of on the runtime's workers with
//! each file operation handed to that pool ([`PluginCode::run`]); the outer timeout and
//! cancellation stay on the worker that awaits it.
//!
//! This file holds the plugin ([`PluginCode`]), its exports and its calls' entry points;
//! `start` makes a call's store and instance and runs it, `reuse` holds the spares and kept
//! instances, `call` one call's store and the classification of its failures, `p3` the calls
//! of a WASI 0.3 plugin (`mcpbox:plugin@0.3.0`) through the same store and instance.
//!
//! [`SPARE_MIN_INSTANTIATE`]: reuse::SPARE_MIN_INSTANTIATE
//! [`SPARE_MAX_AGE`]: reuse::SPARE_MAX_AGE
//! [`KEEP_MAX_MEMORY_SHARE`]: reuse::KEEP_MAX_MEMORY_SHARE
//! [`KEEP_MAX_HANDLES`]: reuse::KEEP_MAX_HANDLES
//! [`KEEP_MAX_LIFE`]: reuse::KEEP_MAX_LIFE

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::{Component, Instance, InstancePre};
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::exports::mcpbox::plugin::tools;
use super::caller::{CallerCtx, CallerIdentity};
use super::config::ConfigCtx;
use super::credentials::CallCredentials;
use super::host_interface::{MAX_LOG_MESSAGE_BYTES, log_line};
use super::keyvalue::KeyValueCtx;
use super::meter::CallMeter;
use super::state::{CallContext, StoreData};
use super::{
    CallReach, CompletionRef, CompletionResult, Detached, GuestError, LoadError, Prompt,
    PromptMessage, ResourceContents, ResourceInfo, ResourceTemplate, Runtime, SpareInstances, Tool,
    ToolResult,
};
use crate::metrics::{CallKind, CallOutcome, GaugeGuard, metrics};
use crate::policy::{CredentialGrant, HttpGrant, Instances, Limits, PluginName, Policy};
use crate::principal::Principal;

mod call;
mod exports;
mod p3;
mod reuse;
mod start;

use call::{ActiveCall, classify, log_output};
pub use exports::Exports;
use reuse::{Shelf, Spare, SpareSlot};

/// Extra time the outer timeout allows beyond the plugin's deadline, so that a guest running
/// wasm is stopped by the epoch deadline (a clean trap) and only a guest stuck in a host
/// function meets the outer one.
const OUTER_TIMEOUT_GRACE: Duration = Duration::from_millis(500);

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
    pre: InstancePre<StoreData>,
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
    /// A 0.3 tool streamed more than its result may hold (everything streamed stays in the
    /// result): the call ends at the bound, before the host holds any more of it.
    #[error("streamed more than {what}")]
    Streamed {
        /// The bound it passed, in words.
        what: String,
    },
    /// It does not export the interface the request needs.
    #[error("does not export the `{0}` interface")]
    NotExported(&'static str),
    /// Instantiation or a host-side failure.
    #[error("could not be run: {0}")]
    Host(String),
    /// The client cancelled it, and the host stopped it (a 0.3 call, whose stream and result
    /// the host stops reading; a 0.2 call is dropped instead, and counted as cancelled then).
    #[error("was cancelled by the client")]
    Cancelled,
}

impl CallError {
    /// The outcome label of a call that failed this way.
    pub fn outcome(&self) -> CallOutcome {
        match self {
            Self::OutOfFuel { .. } => CallOutcome::OutOfFuel,
            Self::Timeout { .. } => CallOutcome::Timeout,
            Self::MemoryLimit { .. } => CallOutcome::OutOfMemory,
            Self::Panic { .. } | Self::StackOverflow | Self::Trap(_) | Self::Streamed { .. } => {
                CallOutcome::Trap
            }
            Self::HandleLimit { .. }
            | Self::HostCallData { .. }
            | Self::NotExported(_)
            | Self::Host(_) => CallOutcome::HostError,
            Self::Cancelled => CallOutcome::Cancelled,
        }
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
        let exports = Exports::of(&pre);
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
        if let Some(v3) = self.v3() {
            return self.read_lists_v3(v3.clone()).await;
        }
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
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<ToolResult, GuestError>, CallError> {
        if let Some(v3) = self.v3() {
            let indices = v3.tools.clone().ok_or(CallError::NotExported("tools"))?;
            return self.call_tool_v3(indices, name, arguments, reach).await;
        }
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
            timeout: if reach.in_task() {
                self.limits.task_timeout
            } else {
                self.limits.timeout
            },
            ..self.limits
        };
        // The contract types `json` as an alias of `string`, which bindgen passes as `&String`.
        let (name, arguments) = (name.to_owned(), arguments.to_owned());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(reach, denied, limits).await?;
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
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<Vec<PromptMessage>, GuestError>, CallError> {
        if let Some(v3) = self.v3() {
            let indices = v3
                .prompts
                .clone()
                .ok_or(CallError::NotExported("prompts"))?;
            return self.get_prompt_v3(indices, name, arguments, reach).await;
        }
        let indices = self
            .exports
            .prompts
            .clone()
            .ok_or(CallError::NotExported("prompts"))?;
        let meter = CallMeter::start(&self.name, CallKind::Prompt, name);
        let denied = Arc::clone(&meter.denied);
        let (name, arguments) = (name.to_owned(), arguments.to_vec());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(reach, denied, code.limits).await?;
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
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<Vec<ResourceContents>, GuestError>, CallError> {
        if let Some(v3) = self.v3() {
            let indices = v3
                .resources
                .clone()
                .ok_or(CallError::NotExported("resources"))?;
            return self.read_resource_v3(indices, uri, reach).await;
        }
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
            let mut call = code.instantiate(reach, denied, code.limits).await?;
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
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<CompletionResult, GuestError>, CallError> {
        if let Some(v3) = self.v3() {
            let indices = v3
                .completion
                .clone()
                .ok_or(CallError::NotExported("completion"))?;
            return self
                .complete_v3(indices, reference, argument, value, context, reach)
                .await;
        }
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
            let mut call = code.instantiate(reach, denied, code.limits).await?;
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
}

/// Data one host call may take from a plugin (strings, lists): wasmtime's "hostcall fuel",
/// which bounds what the host allocates on a plugin's behalf.
pub const HOSTCALL_DATA_BYTES: usize = 64 << 20;

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
mod tests;
