//! The WebAssembly runtime: one wasmtime `Engine` for the process, plugin compilation and
//! linking, and per-call execution under limits.
//!
//! It knows nothing of JSON-RPC or sessions: its outputs are the WIT types of the plugin
//! contract, and its failures are [`CallError`]s.
//!
//! Why it is shaped this way (measured on wasmtime 48; the figures are in BENCHMARKS.md):
//! - **One engine with the pooling allocator**: instantiating a component from a pool slot
//!   takes tens of microseconds, so every call can get a **fresh `Store`** from a shared
//!   `InstancePre`. That isolates calls and clients from each other, and it is required
//!   anyway: any trap (fuel, deadline, panic) poisons the whole store for good.
//! - **The engine is begun early** ([`EngineStart`]), on a thread of its own as soon as
//!   `serve`'s arguments are parsed: making the pool is the longest step of a start.
//! - **Compile once per plugin version**, off the async executor (it takes 50–400 ms).
//! - **Fuel** bounds CPU deterministically; an **epoch deadline callback** yields to tokio on
//!   every tick (so a spinning plugin cannot starve other calls) and interrupts past the
//!   wall-clock deadline; an outer timeout also covers time spent inside host functions,
//!   where neither fuel nor epochs advance.
//! - Instances are admitted through a semaphore sized to the pool, so a burst of calls waits
//!   for a slot instead of failing.
//!
//! WASI 0.3 components (`mcpbox:plugin@0.3.0`) share the engine, the linker and the limits;
//! their bindings and host interface are `p3`, their calls `plugin::p3`.
//!
//! Plugins built against the multi-user world also get who is calling (`caller`, from the
//! call's `principal`) and their configuration and secrets (`config`, `wasi:config/store`).
//!
//! Uses: `kv`, `metrics`, `file_pages`, `policy`, `principal`, `telemetry`, `tls`.

mod bindings;
mod cache;
mod caller;
mod config;
pub mod credentials;
mod egress;
mod host_interface;
mod http;
mod keyvalue;
mod meter;
mod p3;
mod plugin;
mod state;

use std::pin::Pin;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::kv::{StateConfig, StateService};
use crate::policy::Secrets;
use crate::policy::config::SecretsCell;
use crate::principal::Principal;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use self::host_interface::HostInterfaceCtx;

pub use bindings::mcpbox::plugin::types::{
    CompletionRef, CompletionResult, Content, Error as GuestError, ListKind, LogLevel, Media,
    Prompt, PromptArgument, PromptMessage, ResourceContents, ResourceInfo, ResourceTemplate, Role,
    Tool, ToolAnnotations, ToolResult,
};
pub use cache::{ComponentCache, DEFAULT_CACHE_MAX_BYTES};
pub use credentials::{CredentialSource, TokenLookup, check_credential_grants};
pub use host_interface::{cut_message, log_line};
pub use plugin::{CallError, Exports, PluginCode, PluginLists};
pub use state::StoreData;

/// A boxed future, for the object-safe [`CallReach`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The client requests a plugin can make through the `host` interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRequest {
    /// `sample`: the client's model completes a message.
    Sample,
    /// `elicit`: the client's user answers a question.
    Elicit,
    /// `list-roots`: the client's roots.
    ListRoots,
}

/// What a call in progress can reach beyond the sandbox: the client it serves, and the host's
/// catalog. The engine knows nothing of sessions or JSON-RPC; the layer that makes a call
/// supplies this, and the plugin's `host` imports are forwarded to it.
pub trait CallReach: Send + Sync + 'static {
    /// A log message from the plugin (already written to mcpbox's own log).
    fn log(&self, level: LogLevel, message: String) -> BoxFuture<'_, ()>;
    /// A progress report.
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> BoxFuture<'_, ()>;
    /// An item a 0.3 tool streamed, described by `message`: told to the client as progress,
    /// by the rule the layer that made the call keeps (the plugin's own reports and its items
    /// share one increasing progress value).
    fn streamed(&self, message: String) -> BoxFuture<'_, ()> {
        let _ = message;
        Box::pin(async {})
    }
    /// Whether the call was cancelled.
    fn cancelled(&self) -> bool;
    /// A request to the client, with its params as JSON text; the answer as JSON text.
    fn request(
        &self,
        request: HostRequest,
        params: String,
    ) -> BoxFuture<'_, Result<String, String>>;
    /// The plugin says one of its lists changed.
    fn list_changed(&self, kind: ListKind);
    /// The plugin says the resource at `uri` changed.
    fn resource_updated(&self, uri: String);
    /// The call used this much fuel (told once per call, however it ended).
    fn used_fuel(&self, fuel: u64) {
        let _ = fuel;
    }
    /// Who the call is for (`None`: nobody, as when the host reads a plugin's lists).
    fn caller(&self) -> Option<Principal> {
        None
    }
    /// Whether the call runs as a task (it gets the plugin's task time limit).
    fn in_task(&self) -> bool {
        false
    }
    /// The client session the call came in, as a number unique in this process (`None`:
    /// outside any session): where session-scoped caller buckets are.
    fn session(&self) -> Option<u64> {
        None
    }
    /// The caller must link an account with `provider` before the call can act as them: a
    /// request of the call to a host brokered by `provider` was answered 401 by the host
    /// instead of being sent (the layer that made the call may ask the user to link, and run
    /// the call again).
    fn credential_needed(&self, provider: &str) {
        let _ = provider;
    }
}

/// The [`CallReach`] of a call no client waits on (reading a plugin's lists at load): logs go
/// to mcpbox's log only, and requests to the client fail.
pub struct Detached;

impl CallReach for Detached {
    fn log(&self, _: LogLevel, _: String) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn cancelled(&self) -> bool {
        false
    }
    fn request(&self, _: HostRequest, _: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async { Err("no client is connected to this call".to_owned()) })
    }
    fn list_changed(&self, _: ListKind) {}
    fn resource_updated(&self, _: String) {}
}

/// How often the epoch advances: the granularity of deadlines and of yielding.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Process-wide runtime settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are cached (`None`: compile every time).
    pub cache_dir: Option<std::path::PathBuf>,
    /// The most the cache may hold, in bytes; least recently used entries go first.
    pub cache_max_bytes: u64,
    /// How many plugin instances may exist at once (calls in flight across all plugins and
    /// clients). Further calls wait for a free slot.
    pub max_instances: u32,
    /// The most linear memory any instance may use; per-plugin limits are capped by it.
    pub max_memory_bytes: usize,
    /// Where plugins' `wasi:keyvalue` state is kept (opened on first use).
    pub state: StateConfig,
    /// The operator's secrets, for plugins' `[config]` keys that name them (read again on
    /// SIGHUP).
    pub secrets: Arc<SecretsCell>,
    /// Which plugins' calls get instances prepared ahead of them.
    pub spares: SpareInstances,
}

/// Which plugins' calls get an instance prepared ahead of them (a spare, made after each
/// call off its answer's path; see `engine::plugin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SpareInstances {
    /// Plugins slow to instantiate (250 µs or more on average, as a Python component is).
    #[default]
    Auto,
    /// Every plugin: the least latency where cores are free, for some CPU more a call.
    Always,
    /// None: every call instantiates its own.
    Never,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            cache_max_bytes: cache::DEFAULT_CACHE_MAX_BYTES,
            max_instances: 256,
            max_memory_bytes: 1 << 30,
            state: StateConfig::default_place(),
            secrets: Arc::new(SecretsCell::new(Secrets::none())),
            spares: SpareInstances::Auto,
        }
    }
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
#[error("could not set up the WebAssembly engine: {0:#}")]
pub struct EngineError(#[source] wasmtime::Error);

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not start with the WebAssembly magic number.
    #[error("not a WebAssembly file")]
    NotWasm,
    /// A core module rather than a component.
    #[error("a core WebAssembly module, not a component (build it for the wasm32-wasip2 target)")]
    CoreModule,
    /// Compilation failed.
    #[error("could not compile: {0:#}")]
    Compile(#[source] wasmtime::Error),
    /// Configuration keys it needs have no value: an unset variable, or a secret the
    /// secrets file holds for nobody (each named by key and source, never a value).
    #[error(
        "its [config] keys {} have no value: add them to the secrets file (--secrets), set the \
         variables, or mark the keys optional = true",
        .0.join(", ")
    )]
    MissingConfig(Vec<String>),
    /// Its imports could not be satisfied.
    #[error("could not link: {0:#}")]
    Link(#[source] wasmtime::Error),
    /// It exports none of the plugin interfaces.
    #[error(
        "exports none of the mcpbox:plugin@0.1.0 interfaces (tools, prompts, resources, completion), \
         nor those of mcpbox:plugin@0.3.0; \
         it exports: {0}"
    )]
    WrongWorld(String),
    /// Reading its lists failed.
    #[error("failed while listing what it offers: {0}")]
    List(#[source] CallError),
    /// Its `[http.credentials]` names a provider the configuration does not define.
    #[error("{0}")]
    Credentials(String),
}

/// The shared runtime: engine, linker and the instance admission semaphore.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<StoreData>>,
    slots: Arc<Semaphore>,
    /// How many slots may hold spare instances (prepared for a plugin's next call): an
    /// eighth of them (none under `--spare-instances never`), so that spares never keep
    /// calls waiting while most slots are free.
    spares: Arc<Semaphore>,
    config: Arc<RuntimeConfig>,
    cache: Option<ComponentCache>,
    state: Arc<StateService>,
    /// Where callers' tokens for brokered hosts come from, once set ([`Runtime::set_credentials`]).
    credentials: Arc<std::sync::OnceLock<Arc<dyn CredentialSource>>>,
}

/// What the engine is made for: the pool's slots and the largest memory. The rest of
/// [`RuntimeConfig`] does not reach the engine, so an engine can be made from these alone
/// while the rest of the settings are still being worked out ([`EngineStart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSizes {
    /// [`RuntimeConfig::max_instances`].
    pub max_instances: u32,
    /// [`RuntimeConfig::max_memory_bytes`].
    pub max_memory_bytes: usize,
}

impl EngineSizes {
    /// The sizes `config` asks for.
    pub fn of(config: &RuntimeConfig) -> Self {
        Self {
            max_instances: config.max_instances,
            max_memory_bytes: config.max_memory_bytes,
        }
    }
}

/// The engine and its linker, being made on a thread of their own ([`EngineStart::begin`]).
///
/// Making the engine is the longest single step of a start: its pooling allocator maps every
/// slot and `mprotect`s a guard page below each of its fiber stacks (256 by default), about a
/// millisecond. It needs only [`EngineSizes`], so `serve` begins it as soon as the arguments
/// are parsed, and the async runtime, the settings and the plugins' reading proceed beside it
/// ([`Runtime::with_start`] takes it over).
pub struct EngineStart {
    sizes: EngineSizes,
    made: tokio::sync::oneshot::Receiver<Result<(Engine, Linker<StoreData>), EngineError>>,
}

impl EngineStart {
    /// Begin making the engine for `sizes` on a thread of its own. If the thread cannot be
    /// started, the engine is made when it is taken over instead.
    pub fn begin(sizes: EngineSizes) -> Self {
        let (tell, made) = tokio::sync::oneshot::channel();
        let started = thread::Builder::new()
            .name("mcpbox-engine".into())
            .spawn(move || {
                // The receiver may have gone (the start failed on its own meanwhile).
                let _ = tell.send(make_engine(sizes));
            });
        if let Err(e) = started {
            tracing::debug!("making the engine where it is needed: no thread for it ({e})");
        }
        Self { sizes, made }
    }

    /// The engine and linker once made, if they were begun for `sizes`; `None` if they were
    /// begun for other sizes or their thread could not run (a failure to make them is theirs).
    async fn take(
        self,
        sizes: EngineSizes,
    ) -> Option<Result<(Engine, Linker<StoreData>), EngineError>> {
        if self.sizes != sizes {
            tracing::debug!(
                begun = ?self.sizes,
                needed = ?sizes,
                "the engine begun early was for other sizes; making another"
            );
            return None;
        }
        self.made.await.ok()
    }
}

/// Make the engine (pooling allocator, fuel, epochs) and link WASI and the host interfaces.
fn make_engine(sizes: EngineSizes) -> Result<(Engine, Linker<StoreData>), EngineError> {
    let instances = sizes.max_instances.max(1);
    let mut pool = PoolingAllocationConfig::new();
    // One Rust wasip2 component instance uses about 3 core instances and 1 memory.
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(4))
        .total_memories(instances.saturating_mul(2))
        .total_tables(instances.saturating_mul(4))
        .total_stacks(instances)
        .max_memory_size(sizes.max_memory_bytes);
    // Resetting a slot after a call: with Linux's PAGEMAP_SCAN (6.7+) only the pages the
    // call dirtied are found and zeroed in place, up to 1 MiB per memory, so the next call
    // takes no page faults and no `madvise` (whose TLB shootdowns interrupt every core).
    // Elsewhere the first 1 MiB is zeroed and the rest `madvise`d.
    pool.linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        .pagemap_scan(wasmtime::Enabled::Auto)
        // Decommit each slot as soon as it is released: a call that dirtied a lot of memory
        // (a memory bomb stopped at its limit) must not leave it resident until a batch
        // fills. Ordinary calls dirty nothing beyond what stays resident, so this costs
        // them nothing.
        .decommit_batch_size(1);
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        // WASI 0.3 plugins: the component model's async ABI, `stream` and `future`
        // (`engine::p3`).
        .wasm_component_model_async(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // For profiling guest code with `perf` (BENCHMARKS.md): name each compiled function
    // in /tmp/perf-PID.map. Off unless asked for; it writes a file per process.
    if std::env::var_os("MCPBOX_PERF_MAP").is_some_and(|v| v == "1") {
        wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let engine = engine_with_one_shard(&wasm).map_err(EngineError)?;

    let mut linker = Linker::new(&engine);
    // Every WASI 0.2 interface is linked (so ordinary `std` plugins load); what a plugin
    // may actually do is decided per call by its policy, in the store's contexts.
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(EngineError)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(EngineError)?;
    bindings::Plugin::add_to_linker::<StoreData, HasSelf<HostInterfaceCtx>>(
        &mut linker,
        StoreData::host_interface,
    )
    .map_err(EngineError)?;
    p3::add_to_linker(&mut linker).map_err(EngineError)?;
    keyvalue::add_to_linker(&mut linker, StoreData::keyvalue).map_err(EngineError)?;
    caller::add_to_linker(&mut linker, StoreData::caller).map_err(EngineError)?;
    config::add_to_linker(&mut linker, StoreData::config).map_err(EngineError)?;
    Ok((engine, linker))
}

impl Runtime {
    /// Create the engine (pooling allocator, fuel, epochs), link WASI and the host
    /// interface, and start the epoch ticker thread.
    pub fn new(config: RuntimeConfig) -> Result<Self, EngineError> {
        let (engine, linker) = make_engine(EngineSizes::of(&config))?;
        Self::around(config, engine, linker)
    }

    /// [`Runtime::new`] with the engine `start` has been making (made here after all if it
    /// was begun for other sizes than `config`'s, or its thread could not run).
    pub async fn with_start(
        config: RuntimeConfig,
        start: EngineStart,
    ) -> Result<Self, EngineError> {
        let sizes = EngineSizes::of(&config);
        let (engine, linker) = match start.take(sizes).await {
            Some(made) => made?,
            None => make_engine(sizes)?,
        };
        Self::around(config, engine, linker)
    }

    /// The runtime around a made engine and linker: the state service, the epoch ticker
    /// thread, the compiled-component cache, the slots.
    fn around(
        config: RuntimeConfig,
        engine: Engine,
        linker: Linker<StoreData>,
    ) -> Result<Self, EngineError> {
        let instances = config.max_instances.max(1);
        let state = StateService::new(config.state.clone())
            .map_err(|e| EngineError(wasmtime::Error::msg(e.to_string())))?;

        let ticker = engine.weak();
        thread::Builder::new()
            .name("mcpbox-epoch".into())
            .spawn(move || {
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| {
                EngineError(wasmtime::Error::msg(format!(
                    "could not start the epoch ticker: {e}"
                )))
            })?;

        let cache = config.cache_dir.clone().and_then(|dir| match ComponentCache::new(dir.clone(), &engine, config.cache_max_bytes) {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "compiled components will not be cached: {e}");
                None
            }
        });
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            slots: {
                crate::metrics::metrics().set_instance_slots(instances);
                Arc::new(Semaphore::new(instances as usize))
            },
            spares: Arc::new(Semaphore::new(if config.spares == SpareInstances::Never {
                0
            } else {
                instances as usize / 8
            })),
            config: Arc::new(config),
            cache,
            state: Arc::new(state),
            credentials: Arc::default(),
        })
    }

    /// Broker callers' credentials through `source`: plugins whose `[http.credentials]` name
    /// its providers load, and their requests to those hosts carry the caller's token. Set
    /// once, before plugins load (a second call is ignored, with a warning). Without it, a
    /// plugin with credential grants does not load.
    pub fn set_credentials(&self, source: Arc<dyn CredentialSource>) {
        if self.credentials.set(source).is_err() {
            tracing::warn!("the credential source was set twice; the first is kept");
        }
    }

    /// Where callers' tokens come from, if providers are configured.
    pub fn credentials(&self) -> Option<&Arc<dyn CredentialSource>> {
        self.credentials.get()
    }

    /// Plugins' key-value state.
    pub fn state(&self) -> &Arc<StateService> {
        &self.state
    }

    /// The settings this runtime was built with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The compiled form of the component whose SHA-256 is `digest`, if the cache holds it.
    /// Blocks on the file: call it from a blocking thread.
    pub fn cached(&self, digest: &[u8; 32]) -> Option<Component> {
        let cache = self.cache.as_ref()?;
        let hit = cache.load(&self.engine, digest);
        crate::metrics::metrics().cache_lookup(hit.is_some());
        if hit.is_some() {
            tracing::debug!("loaded a compiled component from the cache");
        }
        hit
    }

    /// Compile a component, or load its compiled form from the cache (`digest` is the
    /// component's SHA-256, its key there). Compiling blocks for tens to hundreds of
    /// milliseconds: call it from a blocking thread.
    pub fn compile(&self, wasm: &[u8], digest: &[u8; 32]) -> Result<Component, LoadError> {
        match self.cached(digest) {
            Some(component) => Ok(component),
            None => self.compile_new(wasm, digest),
        }
    }

    /// Compile a component the cache does not hold (`digest` is its SHA-256), and keep its
    /// compiled form there. Blocks like [`Runtime::compile`].
    pub fn compile_new(&self, wasm: &[u8], digest: &[u8; 32]) -> Result<Component, LoadError> {
        const MAGIC: &[u8] = b"\0asm";
        if !wasm.starts_with(MAGIC) {
            return Err(LoadError::NotWasm);
        }
        // Bytes 4..8: version 1 for a core module; a component has layer 1 in bytes 6..8.
        if wasm.get(4..8) == Some(&[1, 0, 0, 0]) {
            return Err(LoadError::CoreModule);
        }
        let component = Component::new(&self.engine, wasm).map_err(LoadError::Compile)?;
        if let Some(cache) = &self.cache {
            cache.store(digest, &component);
        }
        Ok(component)
    }
}

/// Make the engine with its pooling allocator's slots in one shard.
///
/// Wasmtime 48 splits each pool (memories, tables, stacks, instances) into one shard per CPU
/// the thread making the engine may run on (`available_parallelism`, at most 16), and a thread
/// takes slots from its own shard first, so calls at once on N threads touch up to N times as
/// many slots as calls in flight. Every slot a call has used keeps about 40 KiB resident (the
/// plugin's memory image, its dirtied pages, table and stack pages) to make the next call
/// cheap: on 2 CPUs, 64 calls at once touched 90–125 slots instead of 64, 1.5–2.5 MiB more at
/// the peak (BENCHMARKS.md, "The peak under load"). One shard costs a lock shared by all
/// threads, held for a slot's bookkeeping (well under a microsecond, twice a call per pool).
///
/// The shard count follows the making thread's CPU affinity, so on Linux that thread is
/// pinned to the CPU it runs on for the call and given back its CPUs right after (making the
/// engine starts no thread that would keep the pin). Where affinity cannot be read or set,
/// the engine is made as wasmtime chooses.
fn engine_with_one_shard(config: &Config) -> wasmtime::Result<Engine> {
    #[cfg(target_os = "linux")]
    let _pinned = one_cpu::Pinned::to_this_cpu();
    Engine::new(config)
}

#[cfg(target_os = "linux")]
mod one_cpu;

#[cfg(all(test, target_os = "linux"))]
mod tests;
