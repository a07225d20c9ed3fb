//! Which backend plugin state uses ([`StateConfig`]: `--state`), and the [`StateService`]
//! that opens it on first use, checks its health and remembers why the last check failed.

use super::*;

/// Which backend to use.
#[derive(Clone, PartialEq, Eq)]
pub enum StateConfig {
    /// The embedded database in this directory.
    Disk(PathBuf),
    /// A Redis server (`redis://…` or `rediss://…`).
    Redis(String),
    /// No place was given and none could be found (no `HOME`): state is unavailable.
    Unset,
}

impl StateConfig {
    /// Where state goes when the command line does not say: the default directory.
    pub fn default_place() -> Self {
        Self::default_dir().map_or(Self::Unset, Self::Disk)
    }

    /// `$XDG_DATA_HOME/mcpbox/state`, or `~/.local/share/mcpbox/state`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|home| PathBuf::from(home).join(".local").join("share"))
            })?;
        Some(base.join("mcpbox").join("state"))
    }
}

impl fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disk(dir) => write!(f, "{}", dir.join(disk::FILE_NAME).display()),
            // Never the password.
            Self::Redis(url) => write!(f, "Redis at {}", redis::describe_url(url)),
            Self::Unset => f.write_str("nowhere (no --state-dir, and no HOME to put it in)"),
        }
    }
}

/// The configured backend, opened on first use: a host whose plugins keep no state creates no
/// database file and needs no Redis. A failed open is not remembered; the next use retries.
pub struct StateService {
    config: StateConfig,
    backend: tokio::sync::OnceCell<Arc<dyn StateStore>>,
    /// The store of plugins whose state lives in this process's memory (`in-memory = true`),
    /// made on first use.
    memory: std::sync::OnceLock<Arc<dyn StateStore>>,
    /// The store's key of callers' ids, once asked.
    host_key: tokio::sync::OnceCell<[u8; 32]>,
    /// Why the last [`StateService::health`] check failed (`None`: it passed, or none ran).
    last_problem: std::sync::Mutex<Option<String>>,
}

impl fmt::Debug for StateService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateService")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl StateService {
    /// A service for `config`; a Redis URL is checked now, nothing is opened.
    pub fn new(config: StateConfig) -> Result<Self, KvError> {
        if let StateConfig::Redis(url) = &config {
            redis::check_url(url)?;
        }
        Ok(Self {
            config,
            backend: tokio::sync::OnceCell::new(),
            memory: std::sync::OnceLock::new(),
            host_key: tokio::sync::OnceCell::new(),
            last_problem: std::sync::Mutex::new(None),
        })
    }

    /// Where the state is kept, for logs and errors.
    pub fn config(&self) -> &StateConfig {
        &self.config
    }

    /// Whether the store can serve: a Redis store must answer `PING`; the embedded store is a
    /// local file, opened on first use, so it is always ready.
    /// The outcome is remembered for [`StateService::last_problem`].
    pub async fn health(&self) -> Result<(), KvError> {
        let outcome = match &self.config {
            StateConfig::Redis(_) => match self.backend().await {
                Ok(backend) => backend.ping().await,
                Err(e) => Err(e),
            },
            StateConfig::Disk(_) | StateConfig::Unset => Ok(()),
        };
        *self
            .last_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            outcome.as_ref().err().map(ToString::to_string);
        outcome
    }

    /// Whether the store is a server shared over the network (Redis), so its health is worth
    /// watching: the embedded store is always ready.
    pub fn is_shared(&self) -> bool {
        matches!(self.config, StateConfig::Redis(_))
    }

    /// Why the last [`StateService::health`] check failed, or `None` if it passed (or none
    /// ran yet): what the status page and `/readyz` show without waiting for the store.
    pub fn last_problem(&self) -> Option<String> {
        self.last_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The store's key of callers' ids ([`StateStore::host_key`]), asked once and kept.
    pub async fn host_key(&self) -> Result<[u8; 32], KvError> {
        self.host_key
            .get_or_try_init(|| async { self.backend().await?.host_key().await })
            .await
            .copied()
    }

    /// Where a plugin's state is kept: the backend, or with `in_memory` this process's
    /// in-memory store (which no other process sees and which is gone when it stops).
    pub async fn store(&self, in_memory: bool) -> Result<&Arc<dyn StateStore>, KvError> {
        if !in_memory {
            return self.backend().await;
        }
        Ok(self.memory.get_or_init(|| Arc::new(MemoryStore::new())))
    }

    /// The backend, opening it if this is the first use.
    pub async fn backend(&self) -> Result<&Arc<dyn StateStore>, KvError> {
        self.backend
            .get_or_try_init(|| async {
                let backend: Arc<dyn StateStore> = match &self.config {
                    StateConfig::Disk(dir) => Arc::new(DiskStore::open(dir.clone()).await?),
                    StateConfig::Redis(url) => Arc::new(RedisStore::connect(url)?),
                    StateConfig::Unset => {
                        return Err(KvError::Unavailable(
                            "no state directory: pass --state-dir (or set HOME)".to_owned(),
                        ));
                    }
                };
                tracing::info!(store = %self.config, "plugin state store opened");
                Ok(backend)
            })
            .await
    }
}
