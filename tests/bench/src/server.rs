//! Starting a server under test (mcpbox or the native baseline, over stdio or HTTP), connecting
//! the client to it, and reading its CPU time and memory from `/proc`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::client::{Conn, HttpConn, StdioConn};

/// Which transport a server is driven over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// stdin and stdout.
    Stdio,
    /// Streamable HTTP on loopback.
    Http,
}

impl Transport {
    /// Lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "HTTP",
        }
    }
}

/// How to start one server: its program and arguments; `{addr}` in an argument is replaced by
/// the loopback address an HTTP server is to listen on.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set in its environment.
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// A launch of `program` with `args`.
    pub fn new(program: &Path, args: &[&str]) -> Self {
        Self {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
        }
    }

    /// The same launch, with `name` set to `value` in its environment.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A running server with a connected (not yet initialised) client.
pub struct Server {
    program: String,
    child: Child,
    pid: u32,
    /// `host:port` of its HTTP listener (HTTP only).
    pub addr: Option<String>,
    /// The client connection.
    pub conn: Conn,
    /// Notifications the server sent on stdout (stdio only).
    pub notifications: Option<mpsc::UnboundedReceiver<Value>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Start the server and connect to it (over HTTP, once it accepts connections).
    pub async fn start(launch: &Launch, transport: Transport) -> anyhow::Result<Self> {
        let addr = match transport {
            Transport::Stdio => None,
            Transport::Http => Some(free_loopback_addr()?),
        };
        let args: Vec<String> = launch
            .args
            .iter()
            .map(|a| match &addr {
                Some(addr) => a.replace("{addr}", addr),
                None => a.clone(),
            })
            .collect();
        let mut child = Command::new(&launch.program)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // What an operator's environment usually is, whatever the caller's shell sets.
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .spawn()
            .with_context(|| format!("starting {}", launch.program.display()))?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the server exited at once"))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(line);
                }
            });
        }
        let (conn, notifications) = match addr.clone() {
            None => {
                let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin pipe"))?;
                let stdout = child
                    .stdout
                    .take()
                    .ok_or_else(|| anyhow!("no stdout pipe"))?;
                let (conn, notifications) = StdioConn::new(stdin, stdout);
                (Conn::Stdio(conn), Some(notifications))
            }
            Some(addr) => {
                wait_for_listener(&addr, &mut child).await?;
                let conn = HttpConn::new(format!("http://{addr}/mcp"))?;
                (Conn::Http(conn), None)
            }
        };
        Ok(Self {
            program: launch.program.display().to_string(),
            child,
            pid,
            addr,
            conn,
            notifications,
            stderr,
        })
    }

    /// `initialize` and `notifications/initialized`; a failure carries the server's log.
    pub async fn initialize(&self) -> anyhow::Result<()> {
        match self.conn.initialize().await {
            Ok(_) => Ok(()),
            Err(error) => {
                // Give the log a moment to arrive if the server is exiting.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let log = self.stderr_lines().join("\n");
                Err(error.context(format!("initialising {}; its log:\n{log}", self.program)))
            }
        }
    }

    /// Another client connection to this HTTP server (a second caller), not yet initialised.
    pub fn connect(&self) -> anyhow::Result<Conn> {
        let addr = self
            .addr
            .as_ref()
            .ok_or_else(|| anyhow!("{} listens on no HTTP address", self.program))?;
        Ok(Conn::Http(HttpConn::new(format!("http://{addr}/mcp"))?))
    }

    /// The server's CPU time so far (user + system, all threads).
    pub fn cpu_time(&self) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .context("reading /proc/<pid>/stat")?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .ok_or_else(|| anyhow!("unexpected /proc/<pid>/stat: {stat}"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
        let ticks = |i: usize| -> anyhow::Result<u64> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| anyhow!("unexpected /proc/<pid>/stat: {stat}"))
        };
        let total = ticks(11)? + ticks(12)?;
        Ok(Duration::from_micros(total * 1_000_000 / clock_ticks()))
    }

    /// Resident memory now and at its peak, in bytes.
    pub fn memory(&self) -> anyhow::Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("reading /proc/<pid>/status")?;
        let field = |name: &str| -> anyhow::Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
                .ok_or_else(|| anyhow!("no {name} in /proc/<pid>/status"))
        };
        Ok(Memory {
            rss: field("VmRSS:")?,
            peak: field("VmHWM:")?,
        })
    }

    /// Lines the server wrote to stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stop the server (closing stdin first, so a stdio server ends by itself).
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        drop(self.conn);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// Resident set sizes, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// Now.
    pub rss: u64,
    /// The peak so far.
    pub peak: u64,
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// A loopback address nothing listens on (bound, read, released).
fn free_loopback_addr() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.to_string())
}

async fn wait_for_listener(addr: &str, child: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!("the server exited ({status}) before listening on {addr}");
        }
        if Instant::now() > deadline {
            bail!("the server did not listen on {addr} within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
