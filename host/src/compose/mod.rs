//! The composition root: [`Host::start`] builds a running mcpbox from checked
//! [`ServeSettings`] — the wasm runtime, the listeners (bound before any plugin loads, so a
//! taken port fails at once and an orchestrator sees the port open while plugins compile), the
//! plugin set, the startup load, the watchers of the plugin directory and the configuration
//! file — and [`Host::serve`] serves it over stdio or HTTP until stdin ends or a signal
//! arrives, giving back once started the pages of the executable and of the plugins' compiled
//! code only starting up needed (`file_pages`). The CLI parses and checks arguments into settings
//! and calls this; nothing here knows of clap's argument types, and no room but `cli` uses it.
//! Beside this file: `listen` binds the listeners and serves HTTP, `broker` builds the
//! credentials broker and `brokered` adapts it, `shared` adapts the stores replicas share,
//! `settings` is what the CLI hands over.
//!
//! Uses: `audit`, `auth`, `catalog`, `config`, `credentials`, `engine`, `kv`, `manage`, `metrics`, `file_pages`, `policy`,
//! `principal`, `registry`, `server`, `transport`, `watch`.

mod broker;
mod brokered;
mod listen;
mod settings;
mod shared;

use std::sync::Arc;
use std::time::Duration;

pub use self::settings::{CredentialSettings, HttpSettings, ServeSettings, Transport};
use crate::catalog::{EventHub, PluginSet};
use crate::engine::{EngineStart, Runtime};
use crate::kv::StateService;
use crate::server::{Mode, Session};
use crate::transport::http::{self, HttpConfig, Readiness};
use crate::transport::stdio;
use crate::watch::{DirectoryWatch, Reloader};

use self::broker::start_credentials;
use self::listen::{bind_tcp, serve_http};
use self::shared::{SharedStore, SharedTasks};

/// Why mcpbox could not start or stopped serving with an error.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The wasm runtime could not be set up.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// An address flag is not an address.
    #[error(
        "invalid {flag} address `{address}`: expected host:port (such as 127.0.0.1:8080 or localhost:8080) or a port"
    )]
    Address {
        /// The flag (`--http`, `--metrics-addr`).
        flag: &'static str,
        /// What it was given.
        address: String,
    },
    /// An address could not be bound.
    #[error("cannot listen on {flag} {address}")]
    Bind {
        /// The flag (`--http`, `--metrics-addr`).
        flag: &'static str,
        /// What it was given.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// The shared store for budgets could not be set up.
    #[error("cannot keep budgets in the state store: {0}")]
    Budgets(#[source] crate::kv::KvError),
    /// The plugin directory could not be read.
    #[error(transparent)]
    Directory(#[from] crate::watch::DirectoryError),
    /// The plugin directory or the configuration file could not be watched.
    #[error(transparent)]
    Watch(#[from] crate::watch::WatchError),
    /// The OAuth settings are unusable.
    #[error("{0}")]
    OAuth(String),
    /// Managed installs cannot be set up.
    #[error("{0}")]
    Manage(String),
    /// Per-user credentials cannot be set up.
    #[error("per-user credentials: {0}")]
    Credentials(String),
    /// A transport failed while serving.
    #[error("{what}")]
    Transport {
        /// Which (`HTTP transport`, `stdio transport`, `reading stdin`).
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server task ended abnormally.
    #[error("the server task failed: {0}")]
    Task(String),
}

/// A started mcpbox: runtime built, listeners bound, plugins not loaded yet.
pub struct Host {
    settings: ServeSettings,
    engine: Runtime,
    listener: Option<tokio::net::TcpListener>,
    plugins: Arc<PluginSet>,
    relists: crate::catalog::RelistRequests,
    readiness: Arc<Readiness>,
    /// The plugin directory, being read since before the engine was made.
    prefetched: crate::watch::Prefetched,
    /// The credentials broker, when providers are configured.
    credentials: Option<Arc<crate::credentials::Broker>>,
}

/// Read the secrets file again at each SIGHUP (with `--secrets`): calls from then on see the
/// new values; a file that no longer passes its checks is refused and the old secrets stay.
fn reload_secrets_on_hangup(secrets: &Arc<crate::policy::config::SecretsCell>) {
    #[cfg(unix)]
    {
        if secrets.current().file().is_none() {
            return;
        }
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                tracing::warn!("cannot watch SIGHUP to read the secrets file again: {e}");
                return;
            }
        };
        let secrets = Arc::clone(secrets);
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match secrets.reload() {
                    Ok(Some((shared, per_caller))) => {
                        tracing::info!(shared, per_caller, "plugin secrets read again (SIGHUP)");
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("kept the secrets in use: {e}"),
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = secrets;
}

impl Host {
    /// Build the runtime (around the engine `engine` has been making), bind the listeners
    /// (`--http` before any plugin loads, and the separate metrics listener), and create the
    /// (empty) plugin set.
    pub async fn start(
        mut settings: ServeSettings,
        engine: EngineStart,
    ) -> Result<Self, HostError> {
        // The plugins are read, hashed and checked on blocking threads while the engine is
        // made on its own (those known by sight from an earlier run are not read).
        if let Some(dir) = &settings.runtime.cache_dir {
            crate::watch::keep_known_files_in(dir);
        }
        let prefetched =
            crate::watch::prefetch(&settings.plugin_dirs, &settings.sections, &settings.trust);
        let engine = Runtime::with_start(settings.runtime.clone(), engine).await?;
        if let Some(dir) = &settings.runtime.cache_dir {
            crate::catalog::keep_schema_proofs_in(dir);
        }
        reload_secrets_on_hangup(&settings.runtime.secrets);
        if let Some(path) = &settings.audit_log {
            let log = crate::audit::AuditLog::start(path.clone()).await?;
            tracing::info!(path = %path.display(), "writing the audit log");
            settings.session = Arc::new(crate::server::SessionSettings {
                audit: Some(log),
                ..(*settings.session).clone()
            });
        }
        if let crate::kv::StateConfig::Redis(url) = &settings.runtime.state {
            let store =
                crate::kv::budgets::RedisBudgets::connect(url).map_err(HostError::Budgets)?;
            tracing::info!(
                store = %settings.runtime.state,
                "each caller's request rate and sessions are kept in the shared state store, across replicas"
            );
            let config = settings.session.budgets.config().clone();
            let tasks = crate::kv::tasks::RedisTasks::connect(url).map_err(HostError::Budgets)?;
            tracing::info!(
                store = %settings.runtime.state,
                "tasks are kept in the shared state store: any replica answers for any task"
            );
            settings.session = Arc::new(crate::server::SessionSettings {
                budgets: crate::server::Budgets::shared(config, Some(Arc::new(SharedStore(store)))),
                tasks: Arc::new(crate::server::Tasks::new(
                    Arc::new(SharedTasks(tasks)),
                    settings.session.tasks.settings(),
                )),
                ..(*settings.session).clone()
            });
        }
        let listener = match &settings.transport {
            Transport::Http(http) => Some(bind_tcp(&http.address, "--http").await?),
            Transport::Stdio(_) => None,
        };
        if let Some(address) = &settings.metrics_addr {
            let listener = bind_tcp(address, "--metrics-addr").await?;
            // Ends with the process: the runtime drops it on the way out.
            tokio::spawn(async move {
                if let Err(e) = http::serve_metrics(listener, std::future::pending()).await {
                    tracing::error!("the metrics listener failed: {e}");
                }
            });
        }
        // The hub is how plugins and the plugin set reach sessions and the reloader.
        let (hub, relists) = EventHub::new();
        // Empty until the startup load fills it: the HTTP listener answers health checks (and
        // holds MCP off) meanwhile.
        let plugins = Arc::new(PluginSet::new(
            Vec::new(),
            settings.page_size,
            settings.watch,
            hub,
        ));
        if let Some(ledger) = &settings.call_ledger {
            plugins.record_calls(Arc::clone(ledger));
        }
        let state = engine.state();
        if state.is_shared() {
            tokio::spawn(watch_state_store(Arc::clone(state)));
        }
        let credentials = match settings.credentials.take() {
            Some(credentials) => Some(
                start_credentials(
                    credentials,
                    &settings,
                    listener.as_ref(),
                    Arc::clone(engine.state()),
                )
                .await?,
            ),
            None => None,
        };
        // Before any plugin loads: the engine's HTTP gate asks the broker for each caller's
        // token, and the plugin set links accounts and serves the host's own tools with it.
        if let Some(broker) = &credentials {
            let brokered = Arc::new(brokered::Brokered(Arc::clone(broker)));
            engine
                .set_credentials(Arc::clone(&brokered) as Arc<dyn crate::engine::CredentialSource>);
            plugins.use_linker(brokered, broker.link_wait());
        }
        #[cfg(feature = "registry")]
        if let Some(manage) = settings.manage.clone() {
            let installs = crate::manage::Installs::new(
                manage,
                settings.trust.policy().cloned(),
                Arc::clone(&plugins),
                Arc::clone(&settings.sections),
                settings.session.audit.clone(),
                crate::registry::DEFAULT_TIMEOUT,
            )
            .map_err(|e| HostError::Manage(e.to_string()))?;
            tracing::info!(?installs, "serving the plugin-management tools ([manage])");
            plugins.use_installer(Arc::new(installs));
        }
        Ok(Self {
            settings,
            engine,
            listener,
            plugins,
            relists,
            readiness: Arc::new(Readiness::starting()),
            prefetched,
            credentials,
        })
    }

    /// Load the plugins and serve until stdin ends (stdio) or `shutdown` resolves. Over HTTP
    /// the listener serves health checks at once and MCP once the startup load is done.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HostError> {
        let Self {
            settings,
            engine,
            listener,
            plugins,
            relists,
            readiness,
            prefetched,
            credentials,
        } = self;
        let startup = Startup {
            engine: &engine,
            settings: &settings,
            plugins: &plugins,
            relists,
            readiness: &readiness,
            prefetched,
        };
        match &settings.transport {
            Transport::Http(http) => {
                let Some(listener) = listener else {
                    return Err(HostError::Task(
                        "the HTTP listener was not bound".to_owned(),
                    ));
                };
                let server = serve_http(
                    Arc::clone(&plugins),
                    listener,
                    http,
                    Arc::clone(&settings.session),
                    Arc::clone(&readiness),
                    Arc::clone(engine.state()),
                    credentials,
                    shutdown,
                );
                tokio::pin!(server);
                let _running = tokio::select! {
                    stopped = &mut server => return stopped,
                    running = startup.run() => running?,
                };
                readiness.start();
                after_the_start(Arc::clone(&plugins));
                server.await
            }
            Transport::Stdio(config) => {
                // The link routes' own listener was started with the broker.
                drop(credentials);
                let _running = startup.run().await?;
                readiness.start();
                after_the_start(Arc::clone(&plugins));
                let session = Arc::new(Session::new(
                    plugins,
                    Mode::Dual,
                    Arc::clone(&settings.session),
                ));
                let (input, output): (Box<dyn tokio::io::AsyncBufRead + Unpin + Send>, _) =
                    match stdio::stdio_streams() {
                        Some((input, output)) => (input, stdio::Output::Async(output)),
                        None => (
                            Box::new(stdio::stdin_reader().map_err(|source| {
                                HostError::Transport {
                                    what: "cannot start reading stdin",
                                    source,
                                }
                            })?),
                            stdio::Output::Blocking(Box::new(stdio::BlockingStdout)),
                        ),
                    };
                tracing::info!("serving MCP on stdio");
                stdio::serve(session, input, output, *config, shutdown)
                    .await
                    .map_err(|source| HostError::Transport {
                        what: "stdio transport failed",
                        source,
                    })?;
                tracing::info!("stdio session over; exiting");
                Ok(())
            }
        }
    }
}

/// How long after mcpbox is ready it builds the JSON Schema meta-schema's validator. A client
/// that started mcpbox sends `initialize` and its first lists at once; on two cores the
/// validator's 3–4 ms of CPU, begun as soon as mcpbox was ready, took a core from the answers
/// and from the client itself: the first `tools/list` came about 1 ms later at the median
/// (BENCHMARKS.md, "The start's own work, after the client's opening"). A tool called before
/// then builds it itself if its schema needs compiling, as a first call always could.
const META_SCHEMA_AFTER: Duration = Duration::from_millis(100);

/// Once started: give back the start's pages ([`give_back_startup_pages`]), and
/// [`META_SCHEMA_AFTER`] later build the meta-schema's validator
/// ([`crate::catalog::warm_up_validation`]; the second giving back, a second later, takes
/// back the code that ran).
fn after_the_start(plugins: Arc<PluginSet>) {
    give_back_startup_pages(plugins);
    tokio::spawn(async {
        tokio::time::sleep(META_SCHEMA_AFTER).await;
        crate::catalog::warm_up_validation();
    });
}

/// How long after mcpbox is ready it gives back pages a second time: by then the start's last
/// work (plugins still listing, the watchers) and a first client's opening are usually done.
const GIVE_BACK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Once started, give back the pages of the executable and of the plugins' compiled code that
/// starting up touched ([`crate::pages`]), on a blocking thread (a few hundred microseconds
/// no request waits for); and once more [`GIVE_BACK_AGAIN_AFTER`] later, for what the start's
/// last work touched. Serving faults back what it runs.
fn give_back_startup_pages(plugins: Arc<PluginSet>) {
    tokio::spawn(async move {
        for wait in [Duration::ZERO, GIVE_BACK_AGAIN_AFTER] {
            tokio::time::sleep(wait).await;
            let plugins = Arc::clone(&plugins);
            let given = tokio::task::spawn_blocking(move || {
                let executable = crate::file_pages::give_back_executable();
                let loaded = plugins.plugins();
                let code = loaded
                    .iter()
                    .filter_map(|plugin| plugin.code.give_back_pages())
                    .fold(0, |resident, released| resident + released.resident);
                (executable, loaded.len(), code)
            })
            .await;
            if let Ok((executable, plugins, code)) = given {
                tracing::debug!(
                    executable_kib = executable.map_or(0, |released| released.resident >> 10),
                    plugins,
                    plugins_kib = code >> 10,
                    "gave back the pages only starting up needed"
                );
            }
        }
    });
}

/// What the startup load needs: the plugins found in the directory are loaded into the (empty)
/// set, those still listing are added when done, and the directory and the configuration
/// file are watched.
struct Startup<'a> {
    engine: &'a Runtime,
    settings: &'a ServeSettings,
    plugins: &'a Arc<PluginSet>,
    relists: crate::catalog::RelistRequests,
    readiness: &'a Arc<Readiness>,
    prefetched: crate::watch::Prefetched,
}

/// What must live while mcpbox serves: the watchers of the plugin directory and the
/// configuration file.
struct Running {
    _watcher: Option<Arc<crate::watch::Watcher>>,
    _config_watcher: Option<crate::watch::ConfigWatcher>,
}

impl Startup<'_> {
    async fn run(self) -> Result<Running, HostError> {
        let Self {
            engine,
            settings,
            plugins,
            relists,
            readiness,
            prefetched,
        } = self;
        let (dirs, limits, sections) = (&settings.plugin_dirs, settings.limits, &settings.sections);
        // The directory is watched from before the startup load (the watcher is made beside
        // it, on a blocking thread), which is the reloader's first pass; the same reloader
        // then puts the changes into effect, those made during the pass among them.
        let watch = settings.watch.then(|| {
            let (dirs, debounce) = (dirs.clone(), settings.reload_debounce);
            tokio::task::spawn_blocking(move || DirectoryWatch::start(&dirs, debounce))
        });
        let reloader = Reloader::new(
            engine.clone(),
            dirs.clone(),
            limits,
            Arc::clone(sections),
            settings.trust.clone(),
            Arc::clone(plugins),
            relists,
        )
        .with_startup_wait(settings.startup_wait);
        // Ready (HTTP `/readyz`) once every late plugin is in: each late load holds a guard,
        // dropped as its plugin is published (or fails).
        reloader
            .first_pass(prefetched, || readiness.late_load())
            .await?;
        let watcher = match watch {
            Some(watch) => {
                let watch = watch.await.map_err(|e| {
                    HostError::Task(format!("making the plugin directory's watcher: {e}"))
                })??;
                Some(Arc::new(reloader.watch(watch)))
            }
            None => None,
        };
        let config_watcher = match &settings.config {
            Some(config) => Some(crate::watch::watch_config(
                Arc::clone(config),
                Arc::clone(sections),
                watcher.clone(),
                Arc::clone(plugins),
                settings.reload_debounce,
            )?),
            None => None,
        };
        tracing::info!(
            dir = %dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
            plugins = plugins.catalog().plugin_count(),
            fuel = limits.fuel,
            timeout_ms = settings.timeout_ms,
            memory_mib = settings.memory_mib,
            "plugins ready"
        );
        Ok(Running {
            _watcher: watcher,
            _config_watcher: config_watcher,
        })
    }
}

/// How often a shared state store (Redis) is checked, for the `mcpbox_state_store_up` gauge,
/// `/readyz`'s body and the status page.
const STATE_STORE_CHECK: Duration = Duration::from_secs(2);

/// Check the shared state store every [`STATE_STORE_CHECK`], for as long as mcpbox runs; a
/// change either way is logged once.
async fn watch_state_store(state: Arc<StateService>) {
    let metrics = crate::metrics::metrics();
    let mut was_up = true;
    loop {
        let up = match state.health().await {
            Ok(()) => true,
            Err(e) => {
                if was_up {
                    tracing::warn!(
                        "{e}; stateful calls fail until it answers, stateless ones keep serving"
                    );
                }
                false
            }
        };
        if up && !was_up {
            tracing::info!(store = %state.config(), "the state store answers again");
        }
        metrics.set_state_store_up(up);
        was_up = up;
        tokio::time::sleep(STATE_STORE_CHECK).await;
    }
}

/// Plugins' open files and sockets are host descriptors: use every descriptor the system
/// allows mcpbox (the soft limit up to the hard one), so that calls bounded to
/// `MAX_HANDLES_PER_CALL` each cannot together exhaust the process.
pub fn raise_open_file_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => tracing::debug!(open_files = ?limit.maximum, "raised the open-file limit"),
            Err(e) => tracing::debug!("could not raise the open-file limit: {e}"),
        }
    }
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are installed now, before the
/// future is first polled, so a signal that arrives early is not lost (nor fatal).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        match signals {
            (Ok(mut terminate), Ok(mut interrupt)) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
            }
            _ => {
                tracing::warn!(
                    "cannot listen for SIGTERM and SIGINT; stop mcpbox by closing its input"
                );
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("received a shutdown signal");
    }
}
