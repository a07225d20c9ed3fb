//! What a request in flight can do toward its client: log, report progress, learn that it was
//! cancelled, and send the client requests of its own (sampling, elicitation, roots).
//!
//! What the client declared lives in one of two places. For a 2025-11-25 session it is the
//! session-wide [`Peer`]: the capabilities and log level set once, the server's own requests
//! awaiting answers, and rate limits. For a 2026-07-28 request it is the request's own
//! envelope ([`V2026Client`]): its capabilities, its log level, and its [`InputRound`], which
//! turns questions to the client into `input_required`. [`RequestContext`] is one request's
//! half: where its messages go (the session's stream on stdio, the request's own stream on
//! HTTP), its progress token, its cancellation flag, the id a trusted balancer gave it
//! (`--call-id-header`; the catalog records tool calls under it), and its caller (a
//! `principal`, whose scopes the catalog checks).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use super::audit::AuditSlot;
use super::mrtr::InputRound;
use super::rate::{Admission, RateLimit};
use crate::principal::Principal;
use crate::protocol::jsonrpc::{encode_notification, encode_request};
use crate::protocol::mcp::LogLevel;
use crate::protocol::result::{LOG_MESSAGE, LoggingMessage, PROGRESS, Progress};
use crate::protocol::{ErrorObject, Reply, RequestId};

/// Where a session's (or a request's) outgoing messages go.
pub type Outbound = mpsc::Sender<Reply>;

/// Log messages one plugin may send one session per second, sustained.
const LOG_RATE_PER_SECOND: f64 = 50.0;
/// Log messages one plugin may send one session in a burst.
const LOG_BURST: f64 = 100.0;

/// Progress notifications one request may send per second, sustained (more are dropped; the
/// next report after a pause carries the latest value, since progress only grows).
const PROGRESS_PER_SECOND: f64 = 20.0;
/// Progress notifications one request may send in a burst.
const PROGRESS_BURST: f64 = 50.0;
/// The longest progress message sent; longer ones are cut.
const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut_to(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last progress sent for a request, and its rate.
struct ProgressPace {
    /// The last value sent (or meant to be: one cut by the rate limit counts too).
    last: Option<f64>,
    /// The plugin's own last report and its total, once it made one.
    reported: Option<(f64, Option<f64>)>,
    limit: RateLimit,
}

impl Default for ProgressPace {
    fn default() -> Self {
        Self {
            last: None,
            reported: None,
            limit: RateLimit::new(PROGRESS_PER_SECOND, PROGRESS_BURST),
        }
    }
}

impl ProgressPace {
    fn admit(&mut self) -> bool {
        match self.limit.admit() {
            Admission::Passed { .. } => true,
            Admission::FirstDropped => {
                tracing::debug!(
                    rate = PROGRESS_PER_SECOND,
                    "progress over the rate limit is dropped"
                );
                false
            }
            Admission::Dropped => false,
        }
    }
}

/// The requests a server may send a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerRequest {
    /// `sampling/createMessage`, if the client declared `sampling`.
    Sampling,
    /// `elicitation/create`, if the client declared `elicitation`.
    Elicitation,
    /// `roots/list`, if the client declared `roots`.
    Roots,
}

impl ServerRequest {
    /// The request whose method is `method`, if any.
    pub fn from_method(method: &str) -> Option<Self> {
        [Self::Sampling, Self::Elicitation, Self::Roots]
            .into_iter()
            .find(|kind| kind.method() == method)
    }

    /// The method of the request.
    pub fn method(self) -> &'static str {
        match self {
            Self::Sampling => "sampling/createMessage",
            Self::Elicitation => "elicitation/create",
            Self::Roots => "roots/list",
        }
    }

    /// The client capability it needs.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Sampling => "sampling",
            Self::Elicitation => "elicitation",
            Self::Roots => "roots",
        }
    }
}

type Pending = oneshot::Sender<Result<Box<RawValue>, ErrorObject>>;

/// The session-wide state requests of a 2025-11-25 session share.
pub struct Peer {
    capabilities: Mutex<Value>,
    /// The minimum level of log messages to send; 0 means none (until `logging/setLevel`).
    log_level: AtomicU8,
    next_id: AtomicU64,
    pending: Mutex<HashMap<RequestId, Pending>>,
    logs: LogLimiter,
    /// The client's last answer to `roots/list`, kept while it may be trusted: only for a
    /// client that declared `roots.listChanged`, until it sends
    /// `notifications/roots/list_changed`. Plugins that read the roots on every call (the
    /// filesystem server does) then cost the client one round trip, not one per call.
    roots: Mutex<Option<Box<RawValue>>>,
}

/// What one 2026-07-28 request declared in its envelope (its capabilities are its input
/// round's business).
pub struct V2026Client {
    log_level: Option<LogLevel>,
    logs: LogLimiter,
    inputs: Option<Arc<InputRound>>,
}

impl V2026Client {
    /// A request's view of its client: what its envelope declared, and its input round when
    /// it may ask the client for input.
    pub fn new(log_level: Option<LogLevel>, inputs: Option<Arc<InputRound>>) -> Self {
        Self {
            log_level,
            logs: LogLimiter::default(),
            inputs,
        }
    }
}

/// Who answers a request's questions to the client.
#[derive(Clone)]
pub enum Client {
    /// A 2025-11-25 session.
    V2025(Arc<Peer>),
    /// A 2026-07-28 request.
    V2026(Arc<V2026Client>),
}

impl Client {
    fn wants_log(&self, level: LogLevel) -> bool {
        match self {
            Self::V2025(peer) => peer.wants_log(level),
            Self::V2026(s) => s.log_level.is_some_and(|min| level >= min),
        }
    }

    fn logs(&self) -> &LogLimiter {
        match self {
            Self::V2025(peer) => &peer.logs,
            Self::V2026(s) => &s.logs,
        }
    }
}

/// Log rate limits per logger.
#[derive(Default)]
struct LogLimiter {
    buckets: Mutex<HashMap<String, RateLimit>>,
}

impl Default for Peer {
    fn default() -> Self {
        Self {
            capabilities: Mutex::new(Value::Null),
            log_level: AtomicU8::new(0),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            logs: LogLimiter::default(),
            roots: Mutex::new(None),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Peer {
    /// Forget the client's roots (it said they changed): the next `roots/list` asks again.
    pub fn forget_roots(&self) {
        *lock(&self.roots) = None;
    }

    /// Record the capabilities the client declared at `initialize`.
    pub fn set_capabilities(&self, capabilities: Value) {
        *lock(&self.capabilities) = capabilities;
    }

    /// Whether the client declared `name` (a top-level capability, or `name.sub`).
    pub fn has_capability(&self, path: &[&str]) -> bool {
        let capabilities = lock(&self.capabilities);
        let mut node = &*capabilities;
        for key in path {
            match node.get(key) {
                Some(next) if !next.is_null() => node = next,
                _ => return false,
            }
        }
        true
    }

    /// Set the minimum log level sent to the client.
    pub fn set_log_level(&self, level: LogLevel) {
        self.log_level.store(level.rank(), Ordering::Relaxed);
    }

    fn wants_log(&self, level: LogLevel) -> bool {
        let minimum = self.log_level.load(Ordering::Relaxed);
        minimum != 0 && level.rank() >= minimum
    }

    /// Whether the host's own messages at `level` go to the client: at the client's level once
    /// it set one, and errors and worse before that.
    pub fn wants_host_log(&self, level: LogLevel) -> bool {
        let minimum = self.log_level.load(Ordering::Relaxed);
        let minimum = if minimum == 0 {
            LogLevel::Error.rank()
        } else {
            minimum
        };
        level.rank() >= minimum
    }

    /// Whether the host's startup warnings (plugins skipped, names refused) go to the client
    /// when it connects: unless it set a level above warning. (Before a client sets a level
    /// the server chooses what to send; a plugin it will not find is worth telling.)
    pub fn wants_startup_warnings(&self) -> bool {
        let minimum = self.log_level.load(Ordering::Relaxed);
        minimum == 0 || LogLevel::Warning.rank() >= minimum
    }

    /// Route a response from the client to the request of ours it answers. Returns whether
    /// one was waiting.
    pub fn deliver(&self, id: &RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> bool {
        match lock(&self.pending).remove(id) {
            Some(waiting) => waiting.send(outcome).is_ok(),
            None => false,
        }
    }
}

impl LogLimiter {
    /// Take one token from `logger`'s bucket; `None` if over the rate, else how many messages
    /// were dropped since the last one that passed. The first drop of a run is logged.
    fn admit_log(&self, logger: &str) -> Option<u64> {
        let mut buckets = lock(&self.buckets);
        let bucket = buckets
            .entry(logger.to_owned())
            .or_insert_with(|| RateLimit::new(LOG_RATE_PER_SECOND, LOG_BURST));
        match bucket.admit() {
            Admission::Passed { dropped } => Some(dropped),
            Admission::FirstDropped => {
                tracing::warn!(
                    logger,
                    rate = LOG_RATE_PER_SECOND,
                    "log messages over the rate limit are not sent to the client until the plugin slows down"
                );
                None
            }
            Admission::Dropped => None,
        }
    }
}

/// Removes a pending request when its waiter goes away (answered, timed out or cancelled).
struct PendingGuard<'a> {
    peer: &'a Peer,
    id: RequestId,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.peer.pending).remove(&self.id);
    }
}

/// The cancellation state of one request.
#[derive(Default)]
pub struct Cancellation {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancellation {
    /// Mark cancelled and wake whoever waits for it.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Wait until cancelled.
    pub async fn cancelled(&self) {
        let notified = self.notify.notified();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

/// One request's view of its client.
#[derive(Clone)]
pub struct RequestContext {
    client: Client,
    outbound: Outbound,
    progress_token: Option<Box<RawValue>>,
    last_progress: Arc<Mutex<ProgressPace>>,
    finished: Arc<AtomicBool>,
    cancellation: Arc<Cancellation>,
    /// The id a trusted balancer gave the HTTP request (`--call-id-header`), if configured
    /// and sent: the catalog records a tool call under it so a retry never runs it twice.
    call_id: Option<Arc<str>>,
    /// Who sent the request.
    caller: Principal,
    /// What the request's audit record learns while it runs.
    audit: Arc<AuditSlot>,
    /// The request runs as a task (the tasks extension): where its latest progress message
    /// goes, for the task's `statusMessage`.
    task: Option<TaskProgress>,
    /// The client session it came in (none: a 2026-07-28 request over HTTP, which has none).
    session: Option<SessionId>,
}

/// A client session of this process (stdio's one, or an HTTP session made by `initialize`):
/// unique for the life of the process, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(u64);

impl SessionId {
    /// A fresh id.
    pub fn next() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The id as a number.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The latest progress message of a call run as a task.
pub type TaskProgress = Arc<Mutex<Option<String>>>;

impl RequestContext {
    pub(super) fn new(
        client: Client,
        outbound: Outbound,
        progress_token: Option<Box<RawValue>>,
        cancellation: Arc<Cancellation>,
        caller: Principal,
    ) -> Self {
        Self {
            client,
            outbound,
            progress_token,
            last_progress: Arc::new(Mutex::new(ProgressPace::default())),
            finished: Arc::new(AtomicBool::new(false)),
            cancellation,
            call_id: None,
            caller,
            audit: Arc::default(),
            task: None,
            session: None,
        }
    }

    /// The request's cancellation.
    pub(super) fn cancellation(&self) -> Arc<Cancellation> {
        Arc::clone(&self.cancellation)
    }

    /// This context, cancelled by `cancellation` instead of its request's (a task outlives
    /// its request).
    pub(super) fn with_cancellation(mut self, cancellation: Arc<Cancellation>) -> Self {
        self.cancellation = cancellation;
        self
    }

    /// This context, for a call run as a task.
    pub(super) fn for_task(mut self) -> Self {
        self.task = Some(Arc::default());
        self
    }

    /// Where a task's progress messages go (`None` unless it runs as a task).
    pub(super) fn task_status(&self) -> Option<TaskProgress> {
        self.task.clone()
    }

    /// Whether the request runs as a task: the plugin gets its task time limit, and a failure
    /// to produce a result is the task's failure (a protocol error), not an `isError` result.
    pub fn in_task(&self) -> bool {
        self.task.is_some()
    }

    /// This context, filling the audit slot `audit`.
    pub(super) fn with_audit(mut self, audit: Arc<AuditSlot>) -> Self {
        self.audit = audit;
        self
    }

    /// Where the backend notes, for the audit record, the plugin that served the request and
    /// the fuel it used.
    pub fn audit(&self) -> &AuditSlot {
        &self.audit
    }

    /// Who sent the request: the catalog checks the scopes of the plugin it reaches against
    /// this caller's.
    pub fn caller(&self) -> &Principal {
        &self.caller
    }

    /// The client session the request came in, if any.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// This context, for a request that came in `session`.
    pub(super) fn with_session(mut self, session: Option<SessionId>) -> Self {
        self.session = session;
        self
    }

    /// This context, for a request the balancer gave `call_id`.
    pub(super) fn with_call_id(mut self, call_id: Option<Arc<str>>) -> Self {
        self.call_id = call_id;
        self
    }

    /// The id the balancer gave this request, when `--call-id-header` is set and it sent one.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// Whether the plugin asked the client for input that a 2026-07-28 retry will answer (so
    /// its run ends with `input_required` and is run again by design).
    pub fn asked_client(&self) -> bool {
        match &self.client {
            Client::V2026(client) => client
                .inputs
                .as_ref()
                .is_some_and(|inputs| inputs.has_questions()),
            Client::V2025(_) => false,
        }
    }

    /// A context with no client behind it (used where nothing can reach a client, such as
    /// reading a plugin's lists at load, by the host itself): logs and progress go nowhere,
    /// requests fail.
    pub fn detached() -> Self {
        let (outbound, _) = mpsc::channel(1);
        Self::new(
            Client::V2025(Arc::new(Peer::default())),
            outbound,
            None,
            Arc::default(),
            Principal::local(),
        )
    }

    /// The request is answered: nothing more may be sent for it.
    pub(super) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }

    fn open(&self) -> bool {
        !self.finished.load(Ordering::Acquire)
    }

    /// Whether this is a 2026-07-28 request (its client declared itself in its envelope).
    pub fn is_v2026(&self) -> bool {
        matches!(self.client, Client::V2026(_))
    }

    /// The request reached the plugin whose component has this digest: a 2026-07-28 retry
    /// must reach the version that asked the questions it answers (-32602 otherwise, before
    /// the plugin runs). Other requests accept any.
    pub fn bind_plugin(&self, component_digest: &str) -> Result<(), ErrorObject> {
        match &self.client {
            Client::V2026(client) => client
                .inputs
                .as_ref()
                .map_or(Ok(()), |inputs| inputs.bind_plugin(component_digest)),
            Client::V2025(_) => Ok(()),
        }
    }

    /// Whether the client cancelled this request.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Resolves once the client cancelled this request (never, if it does not).
    pub async fn until_cancelled(&self) {
        self.cancellation.cancelled().await;
    }

    /// Whether the client can be asked to open a URL (URL-mode elicitation): it declared
    /// `elicitation.url`, at `initialize` (2025-11-25) or in this request (2026-07-28, for a
    /// request that may ask the client for input).
    pub fn can_open_urls(&self) -> bool {
        match &self.client {
            Client::V2025(peer) => peer.has_capability(&["elicitation", "url"]),
            Client::V2026(client) => client
                .inputs
                .as_ref()
                .is_some_and(|inputs| inputs.declares(&["elicitation", "url"])),
        }
    }

    /// Whether the client can be asked to fill in a form (form-mode elicitation): it declared
    /// `elicitation` (with `form`, or empty, which means form), at `initialize` (2025-11-25) or
    /// in this request (2026-07-28).
    pub fn can_fill_forms(&self) -> bool {
        let declared = |has: &dyn Fn(&[&str]) -> bool| {
            has(&["elicitation", "form"])
                || (has(&["elicitation"]) && !has(&["elicitation", "url"]))
        };
        match &self.client {
            Client::V2025(peer) => declared(&|path| peer.has_capability(path)),
            Client::V2026(client) => client
                .inputs
                .as_ref()
                .is_some_and(|inputs| declared(&|path| inputs.declares(path))),
        }
    }

    /// Send `notifications/message` from `logger`, if the client asked for this level, within
    /// the logger's rate limit.
    pub async fn log(&self, logger: &str, level: LogLevel, message: &str) {
        if !self.open() || !self.client.wants_log(level) {
            return;
        }
        let Some(dropped) = self.client.logs().admit_log(logger) else {
            return;
        };
        if dropped > 0 {
            tracing::info!(
                logger,
                dropped,
                "resumed sending log messages to the client"
            );
        }
        let params = LoggingMessage {
            level,
            logger,
            data: message,
        };
        self.notify(LOG_MESSAGE, &params).await;
    }

    /// Send `notifications/progress` for the plugin's own report, if the request carried a
    /// progress token and `progress` is greater than the plugin's last report.
    ///
    /// The value sent must increase too (MCP requires it), and a 0.3 tool's streamed items
    /// ([`Self::streamed`]) take values of their own between the plugin's reports. The rule:
    /// a report is sent with its own value and total, unless an item already took a value
    /// at or above it, when it gets the least value above the last one sent (`f64::next_up`);
    /// an item gets the next whole number while the plugin has reported nothing (a tool that
    /// only streams counts its items: 1, 2, 3), else the least value above the last one sent,
    /// with the plugin's last total (so a progress bar does not move for it). Both always
    /// reach the client; only a report that does not increase over the plugin's own last one
    /// is dropped, as the plugin broke the rule itself.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if !progress.is_finite() {
            return;
        }
        let value = {
            let mut pace = lock(&self.last_progress);
            if pace.reported.is_some_and(|(last, _)| progress <= last) {
                tracing::debug!(progress, "dropped progress that did not increase");
                return;
            }
            pace.reported = Some((progress, total));
            match pace.last {
                Some(last) if progress <= last => last.next_up(),
                _ => progress,
            }
        };
        self.send_progress(value, total, message).await;
    }

    /// Send `notifications/progress` for an item a 0.3 tool streamed (`message` describes
    /// it), by the rule of [`Self::progress`].
    pub async fn streamed(&self, message: &str) {
        let (value, total) = {
            let pace = lock(&self.last_progress);
            match (pace.reported, pace.last) {
                (None, last) => (last.map_or(1.0, |last| last.floor() + 1.0), None),
                (Some((_, total)), Some(last)) => (last.next_up(), total),
                (Some((reported, total)), None) => (reported.next_up(), total),
            }
        };
        self.send_progress(value, total, Some(message)).await;
    }

    /// Send `notifications/progress` with `progress`, which must be above the last value sent,
    /// within the rate limit.
    async fn send_progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        // A task's latest message is its status message, whoever polls it.
        if let (Some(status), Some(message)) = (&self.task, message) {
            *lock(status) = Some(cut_to(message, MAX_PROGRESS_MESSAGE_BYTES).to_owned());
        }
        let Some(token) = &self.progress_token else {
            return;
        };
        if !self.open() {
            return;
        }
        {
            let mut pace = lock(&self.last_progress);
            if pace.last.is_some_and(|last| progress <= last) {
                tracing::debug!(progress, "dropped progress that did not increase");
                return;
            }
            // Counted as sent even when the rate limit cuts it: the next value stays above.
            pace.last = Some(progress);
            if !pace.admit() {
                return;
            }
        }
        let message = message.map(|m| cut_to(m, MAX_PROGRESS_MESSAGE_BYTES));
        let params = Progress {
            progress_token: token,
            progress,
            total: total.filter(|t| t.is_finite()),
            message,
        };
        self.notify(PROGRESS, &params).await;
    }

    /// Send a notification on this request's stream.
    pub async fn notify(&self, method: &str, params: &impl serde::Serialize) {
        let Ok(params) = serde_json::value::to_raw_value(params) else {
            return;
        };
        let _ = self
            .outbound
            .send(encode_notification(method, Some(&params)))
            .await;
    }

    /// Send the client a request and wait for its answer. Fails with a message (never hangs
    /// past the caller's own deadline) if the client did not declare the capability, the
    /// request is already answered, or the client answers with an error.
    pub async fn request(
        &self,
        kind: ServerRequest,
        params: &RawValue,
    ) -> Result<Box<RawValue>, String> {
        let peer = match &self.client {
            Client::V2025(peer) => peer,
            Client::V2026(client) => {
                return match &client.inputs {
                    Some(inputs) => inputs.ask(kind, params),
                    None => Err(format!(
                        "{} is not available during this request (only tools/call, prompts/get and resources/read may ask the client for input)",
                        kind.method()
                    )),
                };
            }
        };
        let capability = kind.capability();
        if !peer.has_capability(&[capability]) {
            return Err(format!(
                "the client did not declare the `{capability}` capability, so {} is not available",
                kind.method()
            ));
        }
        if kind == ServerRequest::Elicitation {
            let url_mode = serde_json::from_str::<Value>(params.get())
                .ok()
                .and_then(|p| p.get("mode").cloned())
                == Some(json!("url"));
            if url_mode && !peer.has_capability(&["elicitation", "url"]) {
                return Err("the client does not support URL-mode elicitation".to_owned());
            }
        }
        if !self.open() {
            return Err("the request has already been answered".to_owned());
        }
        let id = RequestId::String(format!(
            "mcpbox-{}",
            peer.next_id.fetch_add(1, Ordering::Relaxed)
        ));
        let (sender, answer) = oneshot::channel();
        lock(&peer.pending).insert(id.clone(), sender);
        let _guard = PendingGuard {
            peer,
            id: id.clone(),
        };
        let params = without_input_key(params);
        let cacheable = kind == ServerRequest::Roots
            && params.get() == "{}"
            && peer.has_capability(&["roots", "listChanged"]);
        if cacheable && let Some(roots) = lock(&peer.roots).clone() {
            return Ok(roots);
        }
        let params = (kind != ServerRequest::Roots || params.get() != "{}").then_some(&*params);
        if self
            .outbound
            .send(encode_request(&id, kind.method(), params))
            .await
            .is_err()
        {
            return Err("the client is gone".to_owned());
        }
        tracing::debug!(%id, method = kind.method(), "sent a request to the client");
        match answer.await {
            Ok(Ok(result)) => {
                if cacheable {
                    *lock(&peer.roots) = Some(result.clone());
                }
                Ok(result)
            }
            Ok(Err(error)) => Err(format!(
                "the client answered {} with error {}: {}",
                kind.method(),
                error.code,
                error.message
            )),
            Err(_) => Err("the session ended before the client answered".to_owned()),
        }
    }
}

/// `params` without the input-request key a plugin may name (`_meta["mcpbox/inputKey"]`),
/// which only 2026-07-28 input requests use.
fn without_input_key(params: &RawValue) -> std::borrow::Cow<'_, RawValue> {
    use std::borrow::Cow;
    if !params.get().contains(super::mrtr::INPUT_KEY_META) {
        return Cow::Borrowed(params);
    }
    let Ok(mut map) = serde_json::from_str::<serde_json::Map<String, Value>>(params.get()) else {
        return Cow::Borrowed(params);
    };
    if let Some(meta) = map.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(super::mrtr::INPUT_KEY_META);
        if meta.is_empty() {
            map.remove("_meta");
        }
    }
    serde_json::value::to_raw_value(&map).map_or(Cow::Borrowed(params), Cow::Owned)
}

#[cfg(test)]
mod tests;
