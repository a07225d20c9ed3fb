//! The one MCP client the harness drives every server with: JSON-RPC over a child's stdio
//! (line-delimited, many requests in flight on one pipe, answers matched by id) or over
//! Streamable HTTP (one POST per request on a keep-alive pool, the answer read from a JSON body
//! or from an SSE stream, with a bearer token when told). It is deliberately thin, so that what
//! it measures is the server. An HTTP answer other than 2xx is an [`HttpStatus`] error, which a
//! caller can look into (the budgets part counts 429 refusals).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, anyhow, bail};
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

/// The protocol revision the harness asks for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The stateless revision, for the 2026-07-28 measurements.
pub const V2026_VERSION: &str = "2026-07-28";

/// The `_meta` every 2026-07-28 request carries.
fn v2026_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// `params` with the 2026-07-28 envelope added.
fn with_envelope(mut params: Value) -> Value {
    if let Some(map) = params.as_object_mut() {
        map.insert("_meta".to_owned(), v2026_meta());
    }
    params
}

/// A connection to one MCP server, over either transport. Cheap to clone.
#[derive(Clone)]
pub enum Conn {
    /// The server's stdin and stdout.
    Stdio(Arc<StdioConn>),
    /// The server's `/mcp` endpoint.
    Http(Arc<HttpConn>),
}

impl Conn {
    /// Send a request and wait for its result; a JSON-RPC error becomes an `Err`.
    pub async fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let params = if self.is_v2026() {
            with_envelope(params)
        } else {
            params
        };
        let reply = match self {
            Self::Stdio(conn) => conn.request(method, params).await?,
            Self::Http(conn) => conn.request(method, params).await?,
        };
        if let Some(error) = reply.get("error") {
            bail!("{method} failed: {error}");
        }
        reply
            .get("result")
            .cloned()
            .ok_or_else(|| anyhow!("{method}: a reply with neither result nor error: {reply}"))
    }

    /// Send a notification.
    pub async fn notify(&self, method: &str, params: Value) -> anyhow::Result<()> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        match self {
            Self::Stdio(conn) => conn.send(&message).await,
            Self::Http(conn) => conn.post(&message, None).await.map(drop),
        }
    }

    /// Speak 2026-07-28 from now on: every request carries its envelope (and, over HTTP, the
    /// mirror headers), and there is no session.
    pub fn set_v2026(&self) {
        match self {
            Self::Stdio(conn) => conn.v2026.store(true, Ordering::Relaxed),
            Self::Http(conn) => conn.v2026.store(true, Ordering::Relaxed),
        }
    }

    /// Send `Authorization: Bearer <token>` with every request from now on (HTTP only).
    pub fn set_bearer(&self, token: &str) -> anyhow::Result<()> {
        match self {
            Self::Stdio(_) => bail!("a bearer token is sent over HTTP only"),
            Self::Http(conn) => conn.set_bearer(token),
        }
    }

    fn is_v2026(&self) -> bool {
        match self {
            Self::Stdio(conn) => conn.v2026.load(Ordering::Relaxed),
            Self::Http(conn) => conn.v2026.load(Ordering::Relaxed),
        }
    }

    /// `initialize`, then `notifications/initialized` (2026-07-28: `server/discover`).
    pub async fn initialize(&self) -> anyhow::Result<Value> {
        if self.is_v2026() {
            return self.request("server/discover", json!({})).await;
        }
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "mcpbench", "version": "0.1.0"}
                }),
            )
            .await?;
        self.notify("notifications/initialized", json!({})).await?;
        Ok(result)
    }

    /// Call a tool and return the text of its first content block; a tool error is an `Err`.
    pub async fn call_text(&self, name: &str, arguments: Value) -> anyhow::Result<String> {
        let result = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("tool {name} failed: {result}");
        }
        result
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("tool {name}: no text content in {result}"))
    }

    /// Every tool, following `nextCursor` to the end; returns the tools and the page count.
    pub async fn list_all_tools(&self) -> anyhow::Result<(Vec<Value>, usize)> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request("tools/list", params).await?;
            pages += 1;
            if let Some(items) = page.get("tools").and_then(Value::as_array) {
                tools.extend(items.iter().cloned());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok((tools, pages)),
            }
        }
    }
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<Value>>>;

/// JSON-RPC over a child process's stdin and stdout.
pub struct StdioConn {
    v2026: std::sync::atomic::AtomicBool,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
}

impl StdioConn {
    /// Start reading the child's stdout; notifications from the server go to the returned
    /// receiver.
    pub fn new(
        stdin: ChildStdin,
        stdout: ChildStdout,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Value>) {
        let pending: Arc<Pending> = Arc::default();
        let (notify_tx, notify_rx) = mpsc::unbounded_channel();
        let reader_pending = Arc::clone(&pending);
        tokio::spawn(async move {
            let mut lines = BufReader::with_capacity(1 << 16, stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let id = message.get("id").and_then(Value::as_u64);
                let is_reply = message.get("result").is_some() || message.get("error").is_some();
                match id {
                    Some(id) if is_reply => {
                        let waiter = reader_pending
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&id);
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(message);
                        }
                    }
                    _ => {
                        let _ = notify_tx.send(message);
                    }
                }
            }
            // The server is gone: fail everything still waiting.
            reader_pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        });
        let conn = Arc::new(Self {
            v2026: std::sync::atomic::AtomicBool::new(false),
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
        });
        (conn, notify_rx)
    }

    async fn send(&self, message: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(&line)
            .await
            .context("writing to the server")?;
        stdin.flush().await.context("writing to the server")
    }

    async fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        rx.await
            .map_err(|_| anyhow!("the server closed stdout before answering {method}"))
    }
}

/// An HTTP answer whose status is not a success: what the server said, for a caller to look
/// into (`anyhow::Error::downcast_ref`).
#[derive(Debug)]
pub struct HttpStatus {
    /// The status.
    pub status: StatusCode,
    /// Its `Retry-After` header, if it sent one.
    pub retry_after: Option<String>,
    /// The body, as text.
    pub body: String,
}

impl fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for HttpStatus {}

/// Streamable HTTP: one POST per message to the `/mcp` endpoint.
pub struct HttpConn {
    v2026: std::sync::atomic::AtomicBool,
    client: reqwest::Client,
    url: String,
    session: Mutex<Option<String>>,
    /// The `Authorization` header every request carries, if any.
    authorization: Mutex<Option<HeaderValue>>,
    next_id: AtomicU64,
}

impl HttpConn {
    /// A connection to `url` (the `/mcp` endpoint); nothing is sent yet.
    pub fn new(url: String) -> anyhow::Result<Arc<Self>> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()
            .context("building the HTTP client")?;
        Ok(Arc::new(Self {
            v2026: std::sync::atomic::AtomicBool::new(false),
            client,
            url,
            session: Mutex::new(None),
            authorization: Mutex::new(None),
            next_id: AtomicU64::new(1),
        }))
    }

    /// Send `Authorization: Bearer <token>` with every request from now on.
    fn set_bearer(&self, token: &str) -> anyhow::Result<()> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("a bearer token must be visible ASCII")?;
        value.set_sensitive(true);
        *self
            .authorization
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(value);
        Ok(())
    }

    async fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(&message, Some(id))
            .await?
            .ok_or_else(|| anyhow!("{method}: the server sent no answer"))
    }

    /// POST one message; for a request, read its answer from the JSON body or the SSE stream.
    async fn post(&self, message: &Value, id: Option<u64>) -> anyhow::Result<Option<Value>> {
        let session = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(serde_json::to_vec(message)?);
        let authorization = self
            .authorization
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        if self.v2026.load(Ordering::Relaxed) {
            let method = message.get("method").and_then(Value::as_str).unwrap_or("");
            request = request
                .header("mcp-protocol-version", V2026_VERSION)
                .header("mcp-method", method);
            let params = message.get("params");
            let name = params
                .and_then(|p| p.get("name").or_else(|| p.get("uri")))
                .and_then(Value::as_str);
            if let Some(name) = name {
                request = request.header("mcp-name", name);
            }
        } else if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        let mut response = request.send().await.context("POST to the server")?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = response.text().await.unwrap_or_default();
            return Err(HttpStatus {
                status,
                retry_after,
                body,
            }
            .into());
        }
        if let Some(session) = response.headers().get("mcp-session-id") {
            let session = session.to_str().context("the session id is not text")?;
            *self.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.to_owned());
        }
        let Some(id) = id else {
            return Ok(None);
        };
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let body = response.bytes().await.context("reading the answer")?;
            return Ok(Some(
                serde_json::from_slice(&body).context("the answer is not JSON")?,
            ));
        }
        // An SSE stream: read events until the one answering `id`.
        let mut buffer = Vec::new();
        while let Some(chunk) = response.chunk().await.context("reading the event stream")? {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end).collect();
                if let Some(reply) = answer_in_event(&event, id)? {
                    return Ok(Some(reply));
                }
            }
        }
        bail!("the event stream ended before the answer to request {id}")
    }
}

/// Where the first complete SSE event in `buffer` ends (after its blank line).
fn find_event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The JSON-RPC answer to `id` carried by one SSE event, if that is what it carries.
fn answer_in_event(event: &[u8], id: u64) -> anyhow::Result<Option<Value>> {
    let text = std::str::from_utf8(event).context("an SSE event is not UTF-8")?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() || data.iter().all(|d| d.is_empty()) {
        return Ok(None);
    }
    let message: Value =
        serde_json::from_str(&data.join("\n")).context("an SSE event's data is not JSON")?;
    let answers = message.get("id").and_then(Value::as_u64) == Some(id)
        && (message.get("result").is_some() || message.get("error").is_some());
    Ok(answers.then_some(message))
}
