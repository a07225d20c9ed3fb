//! The per-call store state: the plugin's WASI context (exactly its grants: directories,
//! environment variables, HTTP hosts; never sockets, arguments or stdin), a memory limiter
//! that records what it refused, capped output pipes, and the host functions the plugin
//! imports.

use std::io;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::mcpbox::plugin::{host, types};
use super::http::HttpGate;
use super::keyvalue::{KeyValueCtx, KeyValueView};
use super::{CallHost, HostRequest};
use crate::policy::{HttpGrant, Policy};

/// The longest log message a plugin may send; longer ones are cut (and say so).
pub const MAX_LOG_MESSAGE_BYTES: usize = 16 << 10;
/// How much log text one call may write to the host's log; beyond it, its messages still
/// reach clients (rate-limited) but not the host's log.
pub const MAX_LOG_BYTES_PER_CALL: usize = 1 << 20;

/// `text` as one line for the host's log: control characters (newlines included) escaped, so a
/// plugin can never start a line that reads as the host's own, and at most `max` bytes kept.
pub fn log_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for (i, c) in text.char_indices() {
        if out.len() >= max {
            out.push_str(&format!("… ({} more bytes)", text.len() - i));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `message` cut to at most `max` bytes on a character boundary, saying how much was cut.
pub fn cut_message(message: String, max: usize) -> String {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes cut by mcpbox)",
        &message[..end],
        message.len() - end
    )
}

/// Handles (files, directories, streams, HTTP fields and requests, …) one call may hold at
/// once. Each is host memory or a host file descriptor the plugin's own memory limit does not
/// count, so they are bounded per call: a call past it fails, naming the limit.
pub const MAX_HANDLES_PER_CALL: usize = 256;
/// The largest set of HTTP header fields a call may build (each `fields` resource).
pub const MAX_HTTP_FIELDS_BYTES: usize = 64 << 10;

/// Everything one call's `Store` holds.
pub struct HostState {
    pub(crate) plugin: Arc<str>,
    /// Log text this call wrote to the host's log so far.
    logged_bytes: usize,
    host: Arc<dyn CallHost>,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_gate: HttpGate,
    keyvalue: KeyValueCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: CappedPipe,
    pub(crate) stderr: CappedPipe,
}

impl HostState {
    /// A fresh state for one call into `plugin`, with exactly the capabilities its policy
    /// grants: its directories, its environment variables, HTTP to its hosts, and `keyvalue`
    /// (its state, as its grant allows). Never sockets, arguments, stdin or the host's own
    /// environment. Stdout and stderr are captured up to the output limit. `denied` is set
    /// when an HTTP request is refused (`keyvalue` holds the same flag for its refusals).
    pub fn new(
        plugin: Arc<str>,
        policy: &Policy,
        http_grants: &Arc<[HttpGrant]>,
        keyvalue: KeyValueCtx,
        host: Arc<dyn CallHost>,
        denied: Arc<AtomicBool>,
    ) -> Result<Self, String> {
        let limits = &policy.limits;
        let stdout = CappedPipe::new(limits.output_bytes);
        let stderr = CappedPipe::new(limits.output_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for env in &policy.env {
            wasi.env(&env.name, &env.value);
        }
        for dir in &policy.dirs {
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
            logged_bytes: 0,
            host,
            http_gate: HttpGate::new(Arc::clone(&plugin), Arc::clone(http_grants), denied),
            keyvalue,
            plugin,
            wasi: wasi.build(),
            http,
            table,
            limiter: MemoryLimiter::new(limits.memory_bytes),
            stdout,
            stderr,
        })
    }

    /// The plugin this call runs.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The call's `wasi:keyvalue` capability, for its host traits.
    pub(crate) fn keyvalue(&mut self) -> KeyValueView<'_> {
        KeyValueView {
            ctx: &mut self.keyvalue,
            table: &mut self.table,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
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
}

impl MemoryLimiter {
    fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            refused: None,
        }
    }

    /// The limit, in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
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

impl types::Host for HostState {}

impl host::Host for HostState {
    async fn log(&mut self, level: types::LogLevel, message: String) {
        use types::LogLevel as L;
        let message = cut_message(message, MAX_LOG_MESSAGE_BYTES);
        let plugin = &*self.plugin;
        if self.logged_bytes < MAX_LOG_BYTES_PER_CALL {
            self.logged_bytes += message.len();
            let line = log_line(&message, MAX_LOG_MESSAGE_BYTES);
            match level {
                L::Debug => tracing::debug!(target: "plugin", plugin, "{line}"),
                L::Info | L::Notice => tracing::info!(target: "plugin", plugin, "{line}"),
                L::Warning => tracing::warn!(target: "plugin", plugin, "{line}"),
                L::Error | L::Critical | L::Alert | L::Emergency => {
                    tracing::error!(target: "plugin", plugin, "{line}");
                }
            }
            if self.logged_bytes >= MAX_LOG_BYTES_PER_CALL {
                tracing::warn!(
                    plugin,
                    limit = MAX_LOG_BYTES_PER_CALL,
                    "the call logged over its limit; its further messages are not written to the host's log"
                );
            }
        }
        Arc::clone(&self.host).log(level, message).await;
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        Arc::clone(&self.host)
            .progress(progress, total, message)
            .await;
    }

    async fn cancelled(&mut self) -> bool {
        self.host.cancelled()
    }

    async fn sample(&mut self, request: String) -> Result<String, String> {
        Arc::clone(&self.host)
            .request(HostRequest::Sample, request)
            .await
    }

    async fn elicit(&mut self, request: String) -> Result<String, String> {
        Arc::clone(&self.host)
            .request(HostRequest::Elicit, request)
            .await
    }

    async fn list_roots(&mut self) -> Result<String, String> {
        Arc::clone(&self.host)
            .request(HostRequest::ListRoots, "{}".to_owned())
            .await
    }

    async fn notify_list_changed(&mut self, kind: types::ListKind) {
        self.host.list_changed(kind);
    }

    async fn notify_resource_updated(&mut self, uri: String) {
        self.host.resource_updated(uri);
    }
}
