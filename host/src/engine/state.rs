//! The per-call store state: the plugin's WASI context (exactly its grants: directories,
//! environment variables, HTTP hosts; never sockets, arguments or stdin), a memory limiter
//! that records what it refused, capped output pipes, and the contexts of the host's own
//! capabilities (`wasi:keyvalue`, `wasi:config`, the caller, the plugin world's `host`
//! interface), each lent to its host traits through one accessor. The accessors count what
//! they lend, so that an instance prepared ahead of its call can be shown to have asked the
//! host for nothing before the call's own context was bound into it ([`StoreData::bind`]).
//!
//! None of the capability modules (`caller`, `config`, `http`, `keyvalue`, `host_interface`)
//! names this type: each is lent through its own view.

use std::io;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::CallReach;
use super::caller::CallerCtx;
use super::config::ConfigCtx;
use super::credentials::CallCredentials;
use super::host_interface::HostInterfaceCtx;
use super::http::HttpGate;
use super::keyvalue::{KeyValueCtx, KeyValueView};
use crate::policy::PluginName;
use crate::policy::{CredentialGrant, HttpGrant, Policy};

/// Handles (files, directories, streams, HTTP fields and requests, …) one call may hold at
/// once. Each is host memory or a host file descriptor the plugin's own memory limit does not
/// count, so they are bounded per call: a call past it fails, naming the limit.
pub const MAX_HANDLES_PER_CALL: usize = 256;
/// The largest set of HTTP header fields a call may build (each `fields` resource).
pub const MAX_HTTP_FIELDS_BYTES: usize = 64 << 10;

/// Everything one call's `Store` holds.
pub struct StoreData {
    pub(crate) plugin: PluginName,
    /// What belongs to the call rather than to the plugin.
    bound: Bound,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_gate: HttpGate,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: CappedPipe,
    pub(crate) stderr: CappedPipe,
    /// How many times a capability was lent to a host function (saturating).
    lent: u32,
}

/// What belongs to one call rather than to the plugin: who it is for and where its `host`
/// imports, state and configuration come from. An instance prepared ahead of its call is
/// built with a neutral one (no caller, [`super::Detached`]) and gets the call's own at
/// [`StoreData::bind`].
pub struct CallContext {
    /// Its state access.
    pub keyvalue: KeyValueCtx,
    /// Its `caller` import.
    pub caller: CallerCtx,
    /// Its `wasi:config` values.
    pub config: ConfigCtx,
    /// Where its `host` imports go.
    pub reach: Arc<dyn CallReach>,
    /// Set when it is refused a grant.
    pub denied: Arc<AtomicBool>,
    /// Its caller's tokens for the hosts the plugin calls as the caller (`None`: the plugin
    /// has no `[http.credentials]`, or no credential source is configured).
    pub credentials: Option<CallCredentials>,
}

/// The capabilities a [`CallContext`] fills in, as the store's state holds them; the
/// context's refusal flag and credentials go to the HTTP gate.
struct Bound {
    host_interface: HostInterfaceCtx,
    keyvalue: KeyValueCtx,
    caller: CallerCtx,
    config: ConfigCtx,
}

impl Bound {
    fn of(
        plugin: &PluginName,
        call: CallContext,
    ) -> (Self, Arc<AtomicBool>, Option<CallCredentials>) {
        let bound = Self {
            host_interface: HostInterfaceCtx::new(plugin.clone(), call.reach),
            keyvalue: call.keyvalue,
            caller: call.caller,
            config: call.config,
        };
        (bound, call.denied, call.credentials)
    }
}

impl StoreData {
    /// A fresh state for one call into `plugin`, with exactly the capabilities its policy
    /// grants: its directories, its environment variables, HTTP to its hosts, and `keyvalue`
    /// (its state, as its grant allows). Never sockets, arguments, stdin or the host's own
    /// environment. Stdout and stderr are captured up to the output limit. `denied` is set
    /// when an HTTP request is refused (`keyvalue` holds the same flag for its refusals). The
    /// plugin's `host` imports are forwarded to `host`. Requests to the hosts of
    /// `credential_grants` carry the caller's token from the call's credentials.
    pub fn new(
        plugin: PluginName,
        policy: &Policy,
        http_grants: &Arc<[HttpGrant]>,
        credential_grants: &Arc<[CredentialGrant]>,
        call: CallContext,
    ) -> Result<Self, String> {
        let (bound, denied, credentials) = Bound::of(&plugin, call);
        let limits = &policy.limits;
        let stdout = CappedPipe::new(limits.output_bytes);
        let stderr = CappedPipe::new(limits.output_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        // A plugin granted a directory runs each call on a thread of its own, off the
        // runtime's workers (`PluginCode::run`), so its file operations run in line there
        // rather than each handed to tokio's blocking pool (tens of µs a hand-off, five for
        // a read). Never on a runtime worker: opening a FIFO in a granted directory (or
        // reading one no one writes) blocks the thread where the call's time limit cannot
        // reach it (`e2e::filesystem::a_fifo_in_a_granted_directory_times_out_the_call_alone`).
        wasi.allow_blocking_current_thread(policy.runs_apart());
        for env in &policy.env {
            wasi.env(&env.name, &env.value);
        }
        for dir in &policy.dirs {
            // The grant is of the folder that was there at load (its real path): a link put in
            // its place since, by a plugin granted the folder above it or by anyone else, must
            // not take the grant elsewhere. Checked as the call opens it; an open directory
            // handle (a spare's, a kept instance's) stays on the folder it opened.
            if let Ok(real) = std::fs::canonicalize(&dir.host)
                && real != dir.host
            {
                return Err(format!(
                    "granted directory {} is now a link to {}: the grant is of the folder that was there when the plugin loaded",
                    dir.host.display(),
                    real.display()
                ));
            }
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| {
                    format!(
                        "cannot open granted directory {}: {e:#}",
                        dir.host.display()
                    )
                })?;
        }
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES_PER_CALL);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_HTTP_FIELDS_BYTES);
        Ok(Self {
            bound,
            http_gate: HttpGate::new(
                plugin.clone(),
                Arc::clone(http_grants),
                policy.http_public,
                denied,
            )
            .with_credentials(Arc::clone(credential_grants), credentials),
            plugin,
            wasi: wasi.build(),
            http,
            table,
            limiter: MemoryLimiter::new(limits.memory_bytes),
            stdout,
            stderr,
            lent: 0,
        })
    }

    /// Give a state built ahead of its call (with a neutral [`CallContext`]) the call's own
    /// context: what the guest asks of the host from now on is answered for this call.
    pub fn bind(&mut self, call: CallContext) {
        let (bound, denied, credentials) = Bound::of(&self.plugin, call);
        self.bound = bound;
        self.http_gate.bind(denied, credentials);
    }

    /// How many handles (files, streams, HTTP fields, …) the guest holds.
    pub fn handles(&mut self) -> usize {
        self.table.iter_mut().count()
    }

    /// How many times a capability was lent to a host function since the state was made:
    /// zero means the guest has asked the host for nothing (not even the time).
    pub fn lent(&self) -> u32 {
        self.lent
    }

    fn lend(&mut self) {
        self.lent = self.lent.saturating_add(1);
    }

    /// The plugin this call runs.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Where the call's `host` imports go.
    pub(crate) fn reach(&self) -> &Arc<dyn CallReach> {
        self.bound.host_interface.reach()
    }

    /// Let go of the call's reach once the call has returned (see [`HostInterfaceCtx::detach`]),
    /// and of its caller's credentials: a kept instance holds neither until its next call.
    pub(crate) fn detach_reach(&mut self) {
        self.bound.host_interface.detach();
        self.http_gate.detach();
    }

    /// The call's `host` imports, for their host traits.
    pub(crate) fn host_interface(&mut self) -> &mut HostInterfaceCtx {
        self.lend();
        &mut self.bound.host_interface
    }

    /// The call's `caller` import, for its host trait.
    pub(crate) fn caller(&mut self) -> &mut CallerCtx {
        self.lend();
        &mut self.bound.caller
    }

    /// The call's `wasi:config/store` values, for its host traits.
    pub(crate) fn config(&mut self) -> wasmtime_wasi_config::WasiConfig<'_> {
        self.lend();
        self.bound.config.view()
    }

    /// The call's `wasi:keyvalue` capability, for its host traits.
    pub(crate) fn keyvalue(&mut self) -> KeyValueView<'_> {
        self.lend();
        KeyValueView {
            ctx: &mut self.bound.keyvalue,
            table: &mut self.table,
        }
    }
}

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.lend();
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for StoreData {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.lend();
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_gate,
        }
    }
}

/// A `ResourceLimiter` that enforces the memory limit and remembers a refusal, so that an
/// allocation failure can be told apart from any other abort.
pub struct MemoryLimiter {
    max_bytes: usize,
    /// The size the plugin asked to grow to, when that was refused.
    pub(crate) refused: Option<usize>,
    /// The largest size a memory of the instance was given (made or grown to), in bytes.
    largest: usize,
}

impl MemoryLimiter {
    fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            refused: None,
            largest: 0,
        }
    }

    /// The limit, in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The largest size a memory of the instance was given, in bytes.
    pub fn largest(&self) -> usize {
        self.largest
    }
}

/// Tables hold function references; no sane plugin needs more than this many.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.refused = Some(self.refused.map_or(desired, |r| r.max(desired)));
            return Ok(false);
        }
        self.largest = self.largest.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A plugin's stdout or stderr: keeps the first `cap` bytes, counts and drops the rest. Unlike
/// `MemoryOutputPipe`, a full pipe never traps the guest.
#[derive(Clone)]
pub struct CappedPipe {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    cap: usize,
    dropped: usize,
}

impl CappedPipe {
    fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Captured {
                cap,
                ..Captured::default()
            })),
        }
    }

    /// A copy of what was kept so far, and how many bytes were dropped.
    pub fn peek(&self) -> (Vec<u8>, usize) {
        let captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (captured.bytes.clone(), captured.dropped)
    }

    /// What was kept, and how many bytes were dropped; the pipe is then empty.
    pub fn take(&self) -> (Vec<u8>, usize) {
        let mut captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (
            std::mem::take(&mut captured.bytes),
            std::mem::take(&mut captured.dropped),
        )
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = captured
            .cap
            .saturating_sub(captured.bytes.len())
            .min(data.len());
        captured.bytes.extend_from_slice(&data[..keep]);
        captured.dropped += data.len() - keep;
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}
