//! Shared test support: building the example plugins (once per test run, with the same
//! script operators use), plugin directories, and starting the real `mcpbox` binary either
//! under the official rmcp client or as a raw line-by-line session; and what tests share to
//! wait on events rather than time (`eventually`, the log and client recorders, the
//! `slow_list` gate, calls held in flight together) and to build their inputs (`install`,
//! `with_custom_section`, `INITIALIZE`, the compiled-plugin cache's environment).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long any single step may take before the test fails (debug builds on a busy 2-core
/// machine are slow; nothing here should come close).
pub const STEP: Duration = Duration::from_secs(60);

/// The example plugins, built for wasm32-wasip2 (together with the test fixtures in
/// `tests/plugins/`, see [`test_plugins`]). Returns the directory holding them.
pub fn example_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/build.sh");
        let output = std::process::Command::new("bash")
            .arg(&script)
            .arg("--with-test-plugins")
            .output()
            .expect("run plugins/build.sh");
        assert!(
            output.status.success(),
            "plugins/build.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8(output.stdout).expect("utf-8 path").trim())
    })
}

/// Put `bytes` at `dir/file_name` the way a deploy should: written aside, then renamed into
/// place, so the host never sees half a file.
pub fn install(dir: &Path, file_name: &str, bytes: &[u8]) {
    let temporary = dir.join(format!(".{file_name}.tmp"));
    std::fs::write(&temporary, bytes).unwrap();
    std::fs::rename(&temporary, dir.join(file_name)).unwrap();
}

/// Wait (a [`STEP`] at most) until `check` holds: for an event the host reports (a metric, a
/// listing, a count), never for time to pass. Fails naming `what` never happened.
pub async fn eventually<F: Future<Output = bool>>(mut check: impl FnMut() -> F, what: &str) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A gate for `slow_list` in plugin directory `dir`: a directory granted to it as `/gate`,
/// where it says it is listing (`listing`) and waits for the test to write `open`.
pub fn slow_list_gate(dir: &Path) -> tempfile::TempDir {
    let gate = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.join("slow_list.toml"),
        format!(
            "[[dirs]]\nhost = {:?}\nguest = \"/gate\"\nmode = \"read-write\"\n",
            gate.path()
        ),
    )
    .unwrap();
    gate
}

/// Wait until `slow_list` says it is being listed.
pub async fn slow_list_listing(gate: &Path) {
    eventually(
        || async { gate.join("listing").exists() },
        "slow_list being listed",
    )
    .await;
}

/// The test fixture plugins (`tests/plugins/`), built for wasm32-wasip2.
pub fn test_plugins() -> PathBuf {
    example_plugins().with_file_name("test-plugins")
}

/// A temporary plugin directory holding copies of the named example, fixture or conformance plugins
/// (`"echo_tools"` → `echo_tools.wasm`), each under the file name given.
pub fn plugin_dir(plugins: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (plugin, file_name) in plugins {
        let file = format!("{plugin}.wasm");
        let source = [
            example_plugins().to_owned(),
            test_plugins(),
            example_plugins().with_file_name("conformance-plugins"),
        ]
        .into_iter()
        .map(|dir| dir.join(&file))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("no plugin {file} was built"));
        std::fs::copy(&source, dir.path().join(file_name))
            .unwrap_or_else(|e| panic!("copy {}: {e}", source.display()));
    }
    dir
}

/// A plugin directory with all three examples under their own names.
pub fn all_examples() -> tempfile::TempDir {
    plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("code_review", "code_review.wasm"),
        ("quotes", "quotes.wasm"),
    ])
}

/// A fresh, empty plugin-state directory under `target/test-state/` (never the user's own).
pub fn fresh_state_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/test-state")
        .join(format!("{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Write `dir/mcpbox.toml` naming static bearer tokens by digest — each `(name, token,
/// scopes)` a `[tokens.NAME]` table — followed by `rest` (more TOML): its path.
pub fn token_config(dir: &Path, tokens: &[(&str, &str, &[&str])], rest: &str) -> PathBuf {
    use sha2::{Digest as _, Sha256};
    let mut text = String::new();
    for (name, token, scopes) in tokens {
        text.push_str(&format!(
            "[tokens.{name}]\nsha256 = \"{:x}\"\n",
            Sha256::digest(token.as_bytes())
        ));
        if !scopes.is_empty() {
            let quoted: Vec<String> = scopes.iter().map(|s| format!("\"{s}\"")).collect();
            text.push_str(&format!("scopes = [{}]\n", quoted.join(", ")));
        }
        text.push('\n');
    }
    text.push_str(rest);
    let path = dir.join("mcpbox.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The size cap of the compiled-plugin cache the tests share (`target/test-cache/`), in MiB.
/// Above the default (1 GiB): the JavaScript plugins compile to about 43 MB each and every
/// rebuild of one is a new entry, so at the default the cache evicted the small plugins in
/// every run and a test then spent 40 s compiling one in a debug build.
pub const TEST_CACHE_MAX_MIB: &str = "8192";

/// The environment that points an `mcpbox` a test starts at the compiled-plugin cache the
/// tests share (`target/test-cache/`, up to [`TEST_CACHE_MAX_MIB`]), away from the user's own.
pub fn test_cache() -> [(&'static str, std::ffi::OsString); 2] {
    [
        (
            "MCPBOX_CACHE_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/test-cache")
                .into_os_string(),
        ),
        ("MCPBOX_CACHE_MAX_MIB", TEST_CACHE_MAX_MIB.into()),
    ]
}

/// A 2025-11-25 `initialize` request (id 1, no capabilities).
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;

/// `wasm` (a component) with a custom section `name` holding `payload` appended: another
/// build of the same plugin (new bytes, new digest, the same behaviour), or a section the
/// host reads (`mcpbox-skills`).
pub fn with_custom_section(mut wasm: Vec<u8>, name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb128(out: &mut Vec<u8>, mut value: usize) {
        loop {
            let byte = u8::try_from(value & 0x7f).unwrap();
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb128(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    wasm.push(0);
    leb128(&mut wasm, body.len());
    wasm.extend_from_slice(&body);
    wasm
}

/// The value of the first sample in a Prometheus exposition of `series` (a name, with its
/// labels where they matter, or the start of them), if there is one.
pub fn metric_value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        if !rest.starts_with([' ', '{']) {
            return None;
        }
        rest.rsplit(' ').next()?.parse().ok()
    })
}

/// `mcpbox serve --plugins <dir> <extra…>`, with piped stdio. Unless `extra` says where,
/// plugin state goes to a fresh directory of its own.
pub fn mcpbox(dir: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcpbox"));
    if !extra.iter().any(|arg| arg.starts_with("--state")) {
        command.env("MCPBOX_STATE_DIR", fresh_state_dir());
    }
    command
        .arg("serve")
        .arg("--plugins")
        .arg(dir)
        .args(extra)
        .env_remove("MCPBOX_LOG")
        .envs(test_cache())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Everything a child wrote to stderr so far, collected in the background.
#[derive(Clone, Default)]
pub struct Stderr(Arc<Mutex<String>>);

impl Stderr {
    pub fn collect(mut stream: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Self {
        let log = Self::default();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stream.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                sink.0
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        log
    }

    /// The text so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Wait until stderr contains `needle` `count` times.
    pub async fn wait_for_count(&self, needle: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + STEP;
        while self.text().matches(needle).count() < count {
            assert!(
                tokio::time::Instant::now() < deadline,
                "stderr never said {needle:?} {count} times:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until stderr contains `needle`.
    pub async fn wait_for(&self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let text = self.text();
            if text.contains(needle) {
                return text;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "stderr never said {needle:?}; it said:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The metrics URL of a server started with `--metrics-addr`, from its log.
    pub async fn metrics_url(&self) -> String {
        const SAID: &str = "serving Prometheus metrics";
        let log = self.wait_for(SAID).await;
        let line = log.lines().find(|l| l.contains(SAID)).unwrap_or_default();
        let address = line
            .split("bound=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line}"));
        format!("http://{address}/metrics")
    }
}

/// The official Rust MCP client connected to a fresh `mcpbox` over stdio.
pub struct Client {
    pub service: RunningService<RoleClient, ()>,
    pub stderr: Stderr,
}

impl std::ops::Deref for Client {
    type Target = RunningService<RoleClient, ()>;
    fn deref(&self) -> &Self::Target {
        &self.service
    }
}

/// Start `mcpbox` on `dir` and connect rmcp's client with the `initialize` handshake.
pub async fn connect(dir: &Path, extra: &[&str]) -> Client {
    connect_within(dir, extra, STEP).await
}

/// [`connect`], allowing `limit` for the handshake, which waits for the startup load: for
/// plugins whose first compile is long (a Python or JavaScript component carries its
/// interpreter, and several tests may compile one at once on a loaded machine).
pub async fn connect_within(dir: &Path, extra: &[&str], limit: Duration) -> Client {
    let (transport, stderr) = TokioChildProcess::builder(mcpbox(dir, extra))
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpbox");
    let stderr = Stderr::collect(stderr.expect("piped stderr"));
    let service = tokio::time::timeout(limit, ().serve(transport))
        .await
        .expect("initialize in time")
        .unwrap_or_else(|e| panic!("initialize failed: {e}\nstderr:\n{}", stderr.text()));
    Client { service, stderr }
}

/// `tools/call` params for `name` with `arguments` (a JSON object).
pub fn call(name: &'static str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    rmcp::model::CallToolRequestParams::new(name).with_arguments(arguments)
}

/// The JSON-RPC error code of a failed client call.
pub fn error_code(error: &rmcp::ServiceError) -> (i32, String) {
    match error {
        rmcp::ServiceError::McpError(data) => (data.code.0, data.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

/// Any serialisable client result as JSON, to assert on wire shapes.
pub fn json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("serialisable")
}

/// A raw stdio session: bytes in, one JSON value per stdout line out.
pub struct Raw {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    pub stderr: Stderr,
}

impl Raw {
    /// Start `mcpbox` on `dir`, without initializing.
    pub fn start(dir: &Path, extra: &[&str]) -> Self {
        Self::start_command(mcpbox(dir, extra))
    }

    /// Start `command` (an [`mcpbox`] command, changed), without initializing.
    pub fn start_command(mut command: Command) -> Self {
        let mut child = command.spawn().expect("start mcpbox");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stderr = Stderr::collect(child.stderr.take().expect("stderr"));
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    /// Start and complete the `initialize` handshake.
    pub async fn initialized(dir: &Path, extra: &[&str]) -> Self {
        Self::initialized_command(mcpbox(dir, extra)).await
    }

    /// Start `command` (an [`mcpbox`] command, changed) and complete the handshake.
    pub async fn initialized_command(command: Command) -> Self {
        let mut raw = Self::start_command(command);
        let reply = raw
            .request(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)
            .await;
        assert!(reply.get("result").is_some(), "initialize failed: {reply}");
        raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    /// Write one line (the newline is added).
    pub async fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
    }

    /// The next stdout line, which must be JSON.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(STEP, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("no reply in time; stderr:\n{}", self.stderr.text()))
            .expect("read stdout")
            .unwrap_or_else(|| panic!("stdout closed; stderr:\n{}", self.stderr.text()));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}"))
    }

    /// Send a line and read the next reply.
    pub async fn request(&mut self, line: &str) -> Value {
        self.send(line.as_bytes()).await;
        self.recv().await
    }

    /// Check the session still serves: a `ping` with a fresh id gets its `{}`.
    pub async fn assert_alive(&mut self, id: u64) {
        let reply = self
            .request(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
            .await;
        assert_eq!(
            reply,
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
        );
    }

    /// Close stdin; return the remaining stdout lines (each must be JSON) and the exit status.
    pub async fn finish(mut self) -> (Vec<Value>, std::process::ExitStatus) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Some(line) = tokio::time::timeout(STEP, self.stdout.next_line())
            .await
            .expect("stdout closes")
            .expect("read")
        {
            rest.push(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("non-JSON stdout line ({e}): {line:?}")),
            );
        }
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("exits in time")
            .expect("wait");
        (rest, status)
    }
}

/// A request's head (up to the blank line, at most 64 KiB), or `None` if the client left first.
async fn read_head(socket: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 64 << 10 {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    Some(request)
}

/// A one-route HTTP server on loopback that answers every request with `body` (JSON) and
/// counts the requests, keeping each one's request line. It lives as long as the test's
/// runtime.
pub struct HttpStub {
    pub port: u16,
    pub hits: Arc<std::sync::atomic::AtomicUsize>,
    /// The request lines (`GET /path?query HTTP/1.1`), in order.
    pub lines: Arc<Mutex<Vec<String>>>,
}

pub async fn http_stub(body: &'static str) -> HttpStub {
    use std::sync::atomic::Ordering;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("address").port();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&lines);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let Some(request) = read_head(&mut socket).await else {
                    return;
                };
                let line = String::from_utf8_lossy(&request);
                let line = line.lines().next().unwrap_or_default().to_owned();
                seen.lock().unwrap().push(line);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    HttpStub { port, hits, lines }
}

/// A loopback web server with fixed routes: each path answers with its status, headers and
/// body (any other path is a 404). Requests are counted by path. It lives as long as the
/// test's runtime.
pub struct Web {
    pub port: u16,
    pub hits: Arc<Mutex<Vec<String>>>,
}

/// One route of a [`Web`] server: path (with query), status, headers, body.
pub type Route = (String, u16, Vec<(String, String)>, Vec<u8>);

pub async fn web(routes: Vec<Route>) -> Web {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("address").port();
    let hits = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&hits);
    let routes = Arc::new(routes);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            let routes = Arc::clone(&routes);
            tokio::spawn(async move {
                let Some(request) = read_head(&mut socket).await else {
                    return;
                };
                let text = String::from_utf8_lossy(&request);
                let path = text.split(' ').nth(1).unwrap_or("/").to_owned();
                seen.lock().unwrap().push(path.clone());
                let (status, headers, body) = routes
                    .iter()
                    .find(|(p, ..)| *p == path)
                    .map(|(_, status, headers, body)| (*status, headers.clone(), body.clone()))
                    .unwrap_or((
                        404,
                        vec![("content-type".into(), "text/plain".into())],
                        b"not found".to_vec(),
                    ));
                let mut head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Web { port, hits }
}

/// The text of the first content block of a tool result, and whether it is an error.
pub fn tool_text(result: &rmcp::model::CallToolResult) -> (String, bool) {
    let value = json(result);
    let text = value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (text, value["isError"] == true)
}

/// A real rmcp client that declares `capabilities`, answers sampling, elicitation and roots
/// requests with canned answers, and records every request and notification it gets.
#[derive(Clone)]
pub struct RecordingClient {
    info: rmcp::model::ClientConfig,
    pub events: Arc<Mutex<Vec<(String, Value)>>>,
    /// What it answers `roots/list` with (a test may change it, then tell the server).
    pub roots: Arc<Mutex<Value>>,
    /// When set, a sampling request is answered only once every party to the barrier got
    /// one (a step at most): proof that that many calls are in flight together.
    sampling_gate: Option<Arc<tokio::sync::Barrier>>,
}

impl RecordingClient {
    pub fn new(capabilities: &Value) -> Self {
        let info = serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "mcpbox-e2e", "version": "1.0.0"},
        }))
        .expect("client info");
        Self {
            info,
            events: Arc::default(),
            roots: Arc::new(Mutex::new(
                serde_json::json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
            )),
            sampling_gate: None,
        }
    }

    /// The same client, answering sampling only once `gate`'s every party has a sampling
    /// request of its own (give the clients of calls that must overlap one barrier).
    pub fn sampling_together(mut self, gate: Arc<tokio::sync::Barrier>) -> Self {
        self.sampling_gate = Some(gate);
        self
    }

    /// The same client, answering `roots/list` with these roots.
    pub fn with_roots(self, roots: Value) -> Self {
        *self.roots.lock().unwrap() = roots;
        self
    }

    fn record(&self, kind: &str, value: Value) {
        self.events.lock().unwrap().push((kind.to_owned(), value));
    }

    /// The recorded events of one kind, in order.
    pub fn events(&self, kind: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Wait until `count` events of `kind` were recorded.
    pub async fn wait_for(&self, kind: &str, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let events = self.events(kind);
            if events.len() >= count {
                return events;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} {kind} events arrived",
                events.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl rmcp::ClientHandler for RecordingClient {
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        self.record("sampling", json(&params));
        if let Some(gate) = &self.sampling_gate
            && tokio::time::timeout(STEP, gate.wait()).await.is_err()
        {
            return Err(rmcp::ErrorData::internal_error(
                "the other calls' sampling requests never came: the calls were not in flight together",
                None,
            ));
        }
        Ok(serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": {"type": "text", "text": "a short summary"},
            "model": "e2e-model",
            "stopReason": "endTurn",
        }))
        .expect("sampling result"))
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.record("elicitation", json(&params));
        Ok(serde_json::from_value(
            serde_json::json!({"action": "accept", "content": {"confirm": true}}),
        )
        .expect("elicit result"))
    }

    async fn list_roots(
        &self,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        self.record("roots", Value::Null);
        let roots = self.roots.lock().unwrap().clone();
        Ok(serde_json::from_value(roots).expect("roots"))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.record("progress", json(&params));
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.record("log", json(&params));
    }

    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        self.record("tools/list_changed", Value::Null);
    }

    async fn on_prompt_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        self.record("prompts/list_changed", Value::Null);
    }

    async fn on_resource_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        self.record("resources/list_changed", Value::Null);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.record("resources/updated", json(&params));
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        self.info.clone()
    }
}

/// Start `mcpbox` on `dir` and connect `handler` as the client.
pub async fn connect_with(
    dir: &Path,
    extra: &[&str],
    handler: RecordingClient,
) -> RunningService<RoleClient, RecordingClient> {
    connect_logged(dir, extra, handler).await.0
}

/// [`connect_with`], also returning what the server logs.
pub async fn connect_logged(
    dir: &Path,
    extra: &[&str],
    handler: RecordingClient,
) -> (RunningService<RoleClient, RecordingClient>, Stderr) {
    connect_command(mcpbox(dir, extra), handler).await
}

/// Run `command` (an `mcpbox serve` over stdio) and connect `handler` as its client; also
/// returns what the server logs.
pub async fn connect_command<H: rmcp::ClientHandler>(
    command: Command,
    handler: H,
) -> (RunningService<RoleClient, H>, Stderr) {
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpbox");
    let stderr = Stderr::collect(stderr.expect("piped stderr"));
    let service = tokio::time::timeout(STEP, handler.serve(transport))
        .await
        .expect("initialize in time")
        .unwrap_or_else(|e| panic!("initialize failed: {e}\nstderr:\n{}", stderr.text()));
    (service, stderr)
}

/// The environment of a cargo build a test starts and nobody debugs: no debug info or
/// incremental caches, which only fill the disk (a clean CI run ran out of it).
pub const THROWAWAY_BUILD: [(&str, &str); 2] = [
    ("CARGO_PROFILE_DEV_DEBUG", "false"),
    ("CARGO_INCREMENTAL", "0"),
];

/// POST `body` to `url` as JSON (accepting JSON or SSE) with extra `headers`.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST")
}

/// The mirror headers of a 2026-07-28 `tools/call` of `tool`.
pub fn v2026_call_headers(tool: &str) -> [(&'static str, &str); 3] {
    [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ]
}

/// `mcpbox serve --http 127.0.0.1:0` on `dir`, with the address it bound.
pub struct HttpServer {
    pub child: Child,
    pub url: String,
    pub port: u16,
    pub stderr: Stderr,
}

impl HttpServer {
    pub async fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut args = vec!["--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = mcpbox(dir, &args).spawn().expect("start mcpbox");
        let stderr = Stderr::collect(child.stderr.take().expect("stderr"));
        let log = stderr.wait_for("serving MCP over HTTP").await;
        let line = log
            .lines()
            .find(|l| l.contains("serving MCP over HTTP"))
            .unwrap();
        let port: u16 = line
            .split("bound=127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line}"));
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            stderr,
        }
    }

    /// Connect rmcp's Streamable HTTP client as `handler`, with an optional bearer token.
    pub async fn connect(
        &self,
        handler: RecordingClient,
        token: Option<&str>,
    ) -> RunningService<RoleClient, RecordingClient> {
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        config.auth_header = token.map(str::to_owned);
        let transport = StreamableHttpClientTransport::from_config(config);
        tokio::time::timeout(STEP, handler.serve(transport))
            .await
            .expect("initialize in time")
            .unwrap_or_else(|e| {
                panic!(
                    "initialize over HTTP failed: {e}\nstderr:\n{}",
                    self.stderr.text()
                )
            })
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Reads server-sent events from a streaming HTTP response. A JSON response (a server may
/// answer a request with one JSON object where the client takes either) reads as one event
/// without an id.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
    body: Body,
}

/// What an [`SseReader`] reads.
#[derive(PartialEq)]
enum Body {
    Stream,
    Json,
    /// A JSON body, already read.
    Read,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        let json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        Self {
            response,
            buffer: String::new(),
            body: if json { Body::Json } else { Body::Stream },
        }
    }

    /// The next event with data (comments and keep-alives skipped), or `None` at the end.
    pub async fn next(&mut self) -> Option<SseEvent> {
        match self.body {
            Body::Json => {
                self.body = Body::Read;
                let mut data = String::new();
                while let Some(chunk) = tokio::time::timeout(STEP, self.response.chunk())
                    .await
                    .expect("the answer in time")
                    .ok()?
                {
                    data.push_str(&String::from_utf8_lossy(&chunk));
                }
                return Some(SseEvent {
                    data,
                    ..SseEvent::default()
                });
            }
            Body::Read => return None,
            Body::Stream => {}
        }
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent::default();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        event.id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event.event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        event.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if !event.data.is_empty() {
                    return Some(event);
                }
            }
            let chunk = tokio::time::timeout(STEP, self.response.chunk())
                .await
                .expect("an event in time")
                .ok()??;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// The next event's data as JSON.
    pub async fn next_json(&mut self) -> Option<(Option<String>, Value)> {
        let event = self.next().await?;
        Some((
            event.id,
            serde_json::from_str(&event.data).expect("JSON event data"),
        ))
    }
}

/// `mcpbox state ARGS… STORE…` (`STORE`: `--state-dir DIR` or `--state URL`): its stdout and
/// whether it succeeded.
pub fn state_cli(args: &[&str], store: &[&str]) -> (String, bool) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .arg("state")
        .args(args)
        .args(store)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        output.status.success(),
    )
}

/// The texts of a to-do list as the example's `list` tool returns it.
pub fn item_texts(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|item| item["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Send SIGHUP to `child`.
pub fn hangup(child: &Child) {
    let pid = child.id().expect("a running child");
    let signalled = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
}
