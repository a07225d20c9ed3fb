//! The session state machine and method dispatch: the lifecycle, which request gets which
//! error, and the life of each request in flight (its context, its cancellation).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::context::{Cancellation, Outbound, Peer, RequestContext};
use super::{Backend, ChangedList, ListKind, MethodResult, Offers};
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::jsonrpc::{encode_error, encode_result};
use crate::protocol::mcp::{
    CallToolParams, CancelledParams, CompleteParams, GetPromptParams, InitializeParams, ListParams,
    ReadResourceParams, RequestMeta, SetLevelParams, negotiate_version, parse_params,
};
use crate::protocol::{ErrorObject, Message, Notification, Reply, Request, RequestId};

/// How long a cancelled call may run on (to notice `cancelled()` and stop cleanly) before it
/// is interrupted and its instance dropped.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// What `initialize` settled.
#[derive(Debug)]
struct Negotiated {
    version: &'static str,
    /// What the server advertised to this client.
    offers: Offers,
}

/// One client's MCP session.
pub struct Session<B> {
    backend: Arc<B>,
    peer: Arc<Peer>,
    negotiated: OnceLock<Negotiated>,
    initialized: AtomicBool,
    in_flight: Mutex<HashMap<RequestId, Arc<Cancellation>>>,
    subscriptions: Mutex<HashSet<String>>,
}

impl<B: Backend> Session<B> {
    /// A new session, not yet initialized, serving `backend`.
    pub fn new(backend: Arc<B>) -> Self {
        Self {
            backend,
            peer: Arc::new(Peer::default()),
            negotiated: OnceLock::new(),
            initialized: AtomicBool::new(false),
            in_flight: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(HashSet::new()),
        }
    }

    pub(super) fn backend(&self) -> &B {
        &self.backend
    }

    pub(super) fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Whether `initialize` has been answered.
    pub fn is_initialized(&self) -> bool {
        self.negotiated.get().is_some()
    }

    /// Whether this session was told that `list` may change (so it expects notifications).
    pub(super) fn announces_changes_to(&self, list: ChangedList) -> bool {
        self.negotiated.get().is_some_and(|n| {
            n.offers.list_changed
                && match list {
                    ChangedList::Tools => n.offers.tools,
                    ChangedList::Prompts => n.offers.prompts,
                    ChangedList::Resources => n.offers.resources,
                }
        })
    }

    /// Whether the client subscribed to the resource at `uri`.
    pub(super) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions().contains(uri)
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The protocol version agreed at `initialize`, once it has been answered.
    pub fn protocol_version(&self) -> Option<&'static str> {
        self.negotiated.get().map(|n| n.version)
    }

    /// Whether `message` changes the session's state and so must be handled in arrival order
    /// (the transport runs it before reading the next message), rather than concurrently.
    pub fn is_lifecycle(message: &Message) -> bool {
        match message {
            Message::Request(request) => {
                matches!(
                    request.method.as_str(),
                    "initialize"
                        | "logging/setLevel"
                        | "resources/subscribe"
                        | "resources/unsubscribe"
                )
            }
            Message::Notification(_) | Message::Response(_) => true,
        }
    }

    /// Register a request as in flight, so that a `notifications/cancelled` read right after
    /// it finds it even before its handler starts. Transports call this in arrival order,
    /// before running requests concurrently; [`Session::handle`] does it for requests that
    /// were not tracked.
    pub fn track(&self, message: &Message) {
        if let Message::Request(request) = message
            && request.method != "initialize"
        {
            self.in_flight().entry(request.id.clone()).or_default();
        }
    }

    /// Handle one message: a request gets exactly one reply (none if the client cancels it);
    /// notifications and responses get none. Whatever the request sends the client while it
    /// runs (logs, progress, requests of ours) goes to `outbound`.
    pub async fn handle(&self, message: Message, outbound: &Outbound) -> Option<Reply> {
        match message {
            Message::Request(request) => self.run(request, outbound).await,
            Message::Notification(notification) => {
                self.notification(&notification);
                None
            }
            Message::Response(response) => {
                if !self.peer.deliver(&response.id, response.outcome) {
                    tracing::debug!(id = %response.id, "ignored a response to no request of ours in flight");
                }
                None
            }
        }
    }

    /// Run one request to its reply, unless the client cancels it first.
    async fn run(&self, request: Request, outbound: &Outbound) -> Option<Reply> {
        let started = std::time::Instant::now();
        // `initialize` must not be cancelled; everything else can be.
        let cancellable = request.method != "initialize";
        let cancellation = if cancellable {
            Arc::clone(self.in_flight().entry(request.id.clone()).or_default())
        } else {
            Arc::default()
        };
        let ctx = RequestContext::new(
            Arc::clone(&self.peer),
            outbound.clone(),
            progress_token(request.params.as_deref()),
            Arc::clone(&cancellation),
        );
        let work = self.dispatch(&request, &ctx);
        tokio::pin!(work);
        let outcome = tokio::select! {
            outcome = &mut work => Some(outcome),
            () = cancellation.cancelled() => {
                // Let the call notice `cancelled()` and finish, then drop it, instance and all.
                let _ = tokio::time::timeout(CANCEL_GRACE, &mut work).await;
                None
            }
        };
        ctx.finish();
        if cancellable {
            self.in_flight().remove(&request.id);
        }
        if cancellation.is_cancelled() {
            tracing::debug!(id = %request.id, method = request.method, "cancelled; no reply sent");
            return None;
        }
        let reply = match outcome? {
            Ok(result) => encode_result(&request.id, &result),
            Err(error) => {
                tracing::debug!(id = %request.id, method = request.method, code = error.code, "{}", error.message);
                encode_error(Some(&request.id), &error)
            }
        };
        // The time a request spends inside mcpbox, from parsed to encoded (the benchmark
        // harness reads it with `--log mcpbox::timing=debug`).
        tracing::debug!(
            target: "mcpbox::timing",
            id = %request.id,
            method = %request.method,
            elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "handled"
        );
        Some(reply)
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Arc<Cancellation>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn notification(&self, notification: &Notification) {
        match notification.method.as_str() {
            "notifications/initialized" => {
                if self.negotiated.get().is_none() {
                    tracing::warn!("client sent notifications/initialized before initialize");
                }
                self.initialized.store(true, Ordering::Release);
            }
            "notifications/cancelled" => {
                let Ok(p) = parse_params::<CancelledParams>(
                    &notification.method,
                    notification.params.as_deref(),
                ) else {
                    tracing::debug!("ignored a malformed notifications/cancelled");
                    return;
                };
                let id = match p.request_id {
                    Value::String(s) => RequestId::String(s),
                    Value::Number(n) => RequestId::Number(n),
                    _ => return,
                };
                match self.in_flight().get(&id) {
                    Some(cancellation) => {
                        tracing::debug!(%id, reason = p.reason.as_deref().unwrap_or(""), "client cancelled a request");
                        cancellation.cancel();
                    }
                    None => tracing::debug!(%id, "ignored cancellation of a request not in flight"),
                }
            }
            other => tracing::debug!(method = other, "notification not acted on"),
        }
    }

    async fn dispatch(&self, request: &Request, ctx: &RequestContext) -> MethodResult {
        let params = request.params.as_deref();
        let method = request.method.as_str();
        match method {
            "initialize" => return self.initialize(params),
            "ping" => return Ok(raw("{}")),
            "tools/list"
            | "tools/call"
            | "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "completion/complete"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe" => {}
            // Includes `server/discover`, the probe of 2026-07-28 clients: -32601 tells them
            // to fall back to `initialize`.
            _ => return Err(ErrorObject::method_not_found(method)),
        }
        if self.negotiated.get().is_none() {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                format!(
                    "`{method}` before `initialize`: the session must start with an `initialize` request"
                ),
            ));
        }
        let backend = &*self.backend;
        match method {
            "tools/list" => list(backend, ListKind::Tools, method, params),
            "prompts/list" => list(backend, ListKind::Prompts, method, params),
            "resources/list" => list(backend, ListKind::Resources, method, params),
            "resources/templates/list" => {
                list(backend, ListKind::ResourceTemplates, method, params)
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let p: ReadResourceParams = parse_params(method, params)?;
                if method == "resources/subscribe" {
                    self.subscriptions().insert(p.uri);
                } else {
                    self.subscriptions().remove(&p.uri);
                }
                Ok(raw("{}"))
            }
            "logging/setLevel" => {
                let p: SetLevelParams = parse_params(method, params)?;
                self.peer.set_log_level(p.level);
                Ok(raw("{}"))
            }
            "tools/call" => {
                let p: CallToolParams<'_> = parse_params(method, params)?;
                let empty = raw("{}");
                let arguments = match p.arguments {
                    None => &*empty,
                    Some(a) if a.get() == "null" => &*empty,
                    Some(a) if a.get().starts_with('{') => a,
                    Some(_) => {
                        return Err(ErrorObject::invalid_params(
                            "`arguments` must be a JSON object",
                        ));
                    }
                };
                backend.call_tool(&p.name, arguments, ctx.clone()).await
            }
            "prompts/get" => {
                let p: GetPromptParams = parse_params(method, params)?;
                let arguments = string_arguments(p.arguments.unwrap_or_default())?;
                backend.get_prompt(&p.name, arguments, ctx.clone()).await
            }
            "resources/read" => {
                let p: ReadResourceParams = parse_params(method, params)?;
                backend.read_resource(&p.uri, ctx.clone()).await
            }
            "completion/complete" => {
                let p: CompleteParams = parse_params(method, params)?;
                backend.complete(p, ctx.clone()).await
            }
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }

    fn initialize(&self, params: Option<&RawValue>) -> MethodResult {
        let p: InitializeParams = parse_params("initialize", params)?;
        let version = negotiate_version(&p.protocol_version);
        let offers = self.backend.offers();
        if self.negotiated.set(Negotiated { version, offers }).is_err() {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                "the session is already initialized",
            ));
        }
        let capabilities = p
            .capabilities
            .as_deref()
            .and_then(|c| serde_json::from_str(c.get()).ok());
        self.peer
            .set_capabilities(capabilities.unwrap_or(Value::Null));
        let client = p
            .client_info
            .as_ref()
            .map_or("unknown client", |c| c.name.as_str());
        tracing::info!(
            client,
            requested = p.protocol_version,
            version,
            "session initialized"
        );
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("logging".to_owned(), json!({}));
        let changes = if offers.list_changed {
            json!({"listChanged": true})
        } else {
            json!({})
        };
        for (offered, key) in [
            (offers.tools, "tools"),
            (offers.prompts, "prompts"),
            (offers.resources, "resources"),
        ] {
            if offered {
                capabilities.insert(key.to_owned(), changes.clone());
            }
        }
        if offers.resources && offers.list_changed {
            capabilities.insert(
                "resources".to_owned(),
                json!({"listChanged": true, "subscribe": true}),
            );
        }
        if offers.completions {
            capabilities.insert("completions".to_owned(), json!({}));
        }
        to_raw(&json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {
                "name": "mcpbox",
                "title": "mcpbox",
                "version": env!("CARGO_PKG_VERSION"),
            },
        }))
    }
}

/// The progress token in a request's `_meta`, if it is a string or an integer.
fn progress_token(params: Option<&RawValue>) -> Option<Box<RawValue>> {
    let meta: RequestMeta<'_> = serde_json::from_str(params?.get()).ok()?;
    let token = meta.meta?.progress_token?;
    match serde_json::from_str::<Value>(token.get()).ok()? {
        Value::String(_) => Some(token.to_owned()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(token.to_owned()),
        _ => None,
    }
}

fn list<B: Backend>(
    backend: &B,
    kind: ListKind,
    method: &str,
    params: Option<&RawValue>,
) -> MethodResult {
    let p: ListParams = parse_params(method, params)?;
    backend.list(kind, p.cursor.as_deref())
}

/// Prompt arguments are strings; anything else is -32602 naming the argument.
fn string_arguments(
    arguments: BTreeMap<String, Value>,
) -> Result<BTreeMap<String, String>, ErrorObject> {
    arguments
        .into_iter()
        .map(|(name, value)| match value {
            Value::String(s) => Ok((name, s)),
            other => Err(ErrorObject::invalid_params(format!(
                "prompt argument `{name}` must be a string, not {other}"
            ))),
        })
        .collect()
}

/// `json` as raw JSON text. Only called with literals that are valid JSON; `null` otherwise.
fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap_or_default()
}

fn to_raw(value: &Value) -> MethodResult {
    serde_json::value::to_raw_value(value)
        .map_err(|e| ErrorObject::internal(format!("could not encode result: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::{Decoded, decode};
    use crate::protocol::mcp::CompleteParams;

    /// A backend that offers nothing: enough to test the session's own rules.
    struct Nothing;

    impl Backend for Nothing {
        fn offers(&self) -> Offers {
            Offers {
                tools: true,
                ..Offers::default()
            }
        }
        fn events(&self) -> Option<tokio::sync::broadcast::Receiver<crate::server::ServerEvent>> {
            None
        }
        fn list(&self, _: ListKind, cursor: Option<&str>) -> MethodResult {
            match cursor {
                None => Ok(raw(r#"{"tools":[]}"#)),
                Some(_) => Err(ErrorObject::invalid_params("invalid cursor")),
            }
        }
        async fn call_tool(&self, name: &str, _: &RawValue, _: RequestContext) -> MethodResult {
            Err(ErrorObject::invalid_params(format!(
                "unknown tool `{name}`"
            )))
        }
        async fn get_prompt(
            &self,
            name: &str,
            _: BTreeMap<String, String>,
            _: RequestContext,
        ) -> MethodResult {
            Err(ErrorObject::invalid_params(format!(
                "unknown prompt `{name}`"
            )))
        }
        async fn read_resource(&self, uri: &str, _: RequestContext) -> MethodResult {
            Err(ErrorObject::new(
                -32002,
                format!("resource not found: {uri}"),
            ))
        }
        async fn complete(&self, _: CompleteParams, _: RequestContext) -> MethodResult {
            Ok(raw(r#"{"completion":{"values":[]}}"#))
        }
    }

    async fn send(session: &Session<Nothing>, line: &str) -> Option<Value> {
        let Decoded::Single(Ok(message)) = decode(line.as_bytes()) else {
            panic!("bad test input {line}")
        };
        let (outbound, _) = tokio::sync::mpsc::channel(8);
        let reply = session.handle(message, &outbound).await?;
        Some(serde_json::from_str(&reply.0).unwrap())
    }

    async fn initialized() -> Session<Nothing> {
        let session = Session::new(Arc::new(Nothing));
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        send(&session, init).await;
        session
    }

    #[tokio::test]
    async fn requests_before_initialize_are_refused_but_ping_works() {
        let session = Session::new(Arc::new(Nothing));
        let reply = send(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        )
        .await
        .unwrap();
        assert_eq!(reply["error"]["code"], -32600);
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("initialize")
        );
        let reply = send(&session, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
            .await
            .unwrap();
        assert_eq!(reply["result"], json!({}));
    }

    #[tokio::test]
    async fn initialize_negotiates_and_advertises_what_is_offered() {
        let session = Session::new(Arc::new(Nothing));
        let reply = send(&session, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"extensions":{"x":{}}}}}"#)
            .await
            .unwrap();
        assert_eq!(reply["result"]["protocolVersion"], "2024-11-05");
        assert_eq!(
            reply["result"]["capabilities"],
            json!({"tools": {}, "logging": {}})
        );
        assert_eq!(reply["result"]["serverInfo"]["name"], "mcpbox");
        assert_eq!(session.protocol_version(), Some("2024-11-05"));

        let again = send(&session, r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#)
            .await
            .unwrap();
        assert_eq!(again["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn initialize_without_a_version_is_invalid_params() {
        let session = Session::new(Arc::new(Nothing));
        let reply = send(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        )
        .await
        .unwrap();
        assert_eq!(reply["error"]["code"], -32602);
        assert!(session.protocol_version().is_none());
    }

    #[tokio::test]
    async fn unknown_methods_and_server_discover_are_method_not_found() {
        let session = Session::new(Arc::new(Nothing));
        let reply = send(
            &session,
            r#"{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}"#,
        )
        .await
        .unwrap();
        assert_eq!(reply["error"]["code"], -32601);
        assert_eq!(reply["id"], "d");
        let session = initialized().await;
        let reply = send(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/explode"}"#,
        )
        .await
        .unwrap();
        assert_eq!(reply["error"]["code"], -32601);
    }

    #[tokio::test]
    async fn notifications_are_never_answered() {
        let session = initialized().await;
        assert!(
            send(
                &session,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .await
            .is_none()
        );
        assert!(
            send(
                &session,
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#
            )
            .await
            .is_none()
        );
        assert!(
            send(&session, r#"{"jsonrpc":"2.0","method":"no/such/thing"}"#)
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn invalid_params_are_reported() {
        let session = initialized().await;
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"bogus"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/nope"}}}"#,
        ] {
            let reply = send(&session, line).await.unwrap();
            assert_eq!(reply["error"]["code"], -32602, "{line} → {reply}");
        }
    }

    #[tokio::test]
    async fn resource_not_found_keeps_its_code() {
        let session = initialized().await;
        let reply = send(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x://y"}}"#,
        )
        .await
        .unwrap();
        assert_eq!(reply["error"]["code"], -32002);
    }
}
